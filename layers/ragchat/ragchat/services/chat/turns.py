"""A chat turn (docs/retrieval.md, §11): send, edit and stream, orchestrating the collaborators.

In order: validate and sanitize → rate limit (flag) → persist the user message (idempotent by
``messageId``) → history window (latest summary + messages after its cursor, newest
``MAX_CHAT_HISTORY + 5`` read in one query, then reversed) → summarize if triggered (flag) → retrieve
(adaptive topK, guard, scope filter) → system prompt rebuilt with persona and injection
reinforcement → model (retries; circuit breaker per conversation) → citation validation → persist the
assistant message with its sources → respond.

Store round trips on a steady-state turn: get conversation, read recent messages, add user message,
add assistant message (4), plus one batched read of the cited notes and their documents (title,
page) when the answer cites something (5; why: :mod:`ragchat.services.sources`). The history is
read before the user message is written (one read serves both the flood check and the window); the
window is that history plus the stored user message, so the current message reaches the model
exactly once.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.errors import Conflict, NotFound, ValidationError
from ragchat.domain.followups import needs_condensing
from ragchat.domain.ids import new_id
from ragchat.domain.messages import FALLBACK_MODEL, make_title, sanitize_message
from ragchat.domain.models import Conversation, Message, SearchFilter, SourceRef
from ragchat.domain.prompts import detect_injection
from ragchat.services.answering import EXTRACTIVE_MODEL, documents_indexing, refuses
from ragchat.services.chat.metrics import TurnMetrics, timed
from ragchat.services.chat.pump import StreamPacing
from ragchat.services.chat.replay import replay_from
from ragchat.services.chat.state import Accepted, Replayed, Turn, TurnResult, split_window
from ragchat.services.chat.stops import BUSY, StopFlags, TurnLeases
from ragchat.services.chat.streaming import Event, TurnStream, answer_events, error_event, replay_events
from ragchat.services.chat.tools import ScopedNoteTools
from ragchat.services.logs import log_error, message_of
from ragchat.services.questions import condense, retrieve_question
from ragchat.services.sources import locate_sources

if TYPE_CHECKING:
    from ragchat.config import Settings
    from ragchat.ports import ConversationStore, DocumentStore
    from ragchat.services.answering import Answer, Answerer
    from ragchat.services.chat.conversations import Conversations
    from ragchat.services.chat.history import HistoryKeeper
    from ragchat.services.chat.limits import ChatLimits
    from ragchat.services.chat.replay import Replays
    from ragchat.services.model_calls import CircuitBreaker, ModelCaller
    from ragchat.services.retrieval import Retriever

logger = Logger(service="ragchat", child=True)

_CLIENT_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


@dataclasses.dataclass(slots=True)
class TurnParts:
    """The collaborators of a turn."""

    conversations: Conversations
    store: ConversationStore
    documents: DocumentStore
    retriever: Retriever
    caller: ModelCaller
    breaker: CircuitBreaker
    answerer: Answerer
    history: HistoryKeeper
    limiter: ChatLimits | None  # None: rate limiting off
    replays: Replays
    persona: Callable[[Conversation], str]  # the role paragraph of a conversation's persona
    metrics: TurnMetrics
    stops: StopFlags
    leases: TurnLeases
    pacing: StreamPacing
    # the workspaces a conversation's questions search (id → name), resolved on each turn (its
    # pinned workspace, or every one its user belongs to); None: the user's own notes only
    scope: Callable[[Conversation], dict[str, str]] | None = None


class Turns:
    def __init__(self, parts: TurnParts, settings: Settings) -> None:
        self.p = parts
        self.settings = settings

    @property
    def tools_mode(self) -> bool:
        return self.settings.chat_mode == "tools" and self.p.caller.calls_tools

    # ------------------------------------------------------------------ entry points
    def send(
        self,
        owner: str,
        conv_id: str,
        content: object,
        *,
        message_id: str | None = None,
        ip: str | None = None,
    ) -> TurnResult:
        try:
            acc = self.accept(owner, conv_id, content, message_id=message_id, ip=ip)
        except Replayed as replay:
            return replay.result
        try:
            return self.answer(self.ready(acc))
        finally:
            self._release(acc)

    def edit(
        self, owner: str, conv_id: str, message_id: str, content: object, *, ip: str | None = None
    ) -> TurnResult:
        """``PUT …/messages/{messageId}``: replace a user message (by id or client message id), delete
        every later message, answer the new version."""
        text = sanitize_message(content, max_chars=self.settings.max_message_chars)
        target = self.p.conversations.rewind_to(owner, conv_id, message_id)
        return self.send(owner, conv_id, text, message_id=target.client_message_id, ip=ip)

    def stop(self, owner: str, conv_id: str) -> bool:
        """Stop the conversation's streaming answer in flight, from any request or instance sharing
        the store; returns whether one was in flight. A JSON turn (one model request) cannot be
        stopped. Raises ``NotFound`` for a conversation that is not the caller's."""
        self.p.conversations.get(owner, conv_id)
        return self.p.stops.stop(conv_id)

    def stream(
        self,
        owner: str,
        conv_id: str,
        content: object,
        *,
        message_id: str | None = None,
        ip: str | None = None,
    ) -> tuple[str, Iterator[Event]]:
        """Accept the turn (errors raise here, before any event) and return (model, events); the
        events start with ``answer_start`` at once, before retrieval and the model call."""
        try:
            acc = self.accept(owner, conv_id, content, message_id=message_id, ip=ip)
        except Replayed as replay:
            return replay.result.model, replay_events(replay.result)
        try:
            breaker = self.p.breaker.scope(acc.conv.id, acc.history)
            open_ = not self.tools_mode and self.p.caller.is_open(breaker)
        except BaseException:
            self._release(acc)
            raise
        started_ms = self.p.stops.begin(acc.conv.id)
        model = FALLBACK_MODEL if open_ else self.p.caller.model_id
        return model, self._stream_events(acc, open_, started_ms)

    def _stream_events(self, acc: Accepted, breaker_open: bool, started_ms: int) -> Iterator[Event]:
        assistant_id = new_id()
        conv_id = acc.conv.id
        try:
            yield "answer_start", {"conversationId": conv_id, "messageId": assistant_id}
            try:
                turn = self.ready(acc)
            except Exception as exc:
                logger.exception("chat.stream_failed", extra={"conversationId": conv_id})
                log_error(conv_id, type(exc).__name__, "the turn failed before the model was asked")
                yield error_event(exc)
                return
            if self.tools_mode or turn.refused or turn.retrieval.parts:
                # Tool rounds and multi-part questions are not streamed: answer, then send the
                # validated text in one delta.
                yield from answer_events(self.answer(turn, assistant_id=assistant_id))
                return
            if breaker_open:
                self._log_circuit_open(turn)
            stream = TurnStream(
                turn,
                assistant_id,
                caller=self.p.caller,
                answerer=self.p.answerer,
                store=lambda t, a, aid, cut: self._store(t, a, assistant_id=aid, interrupted=cut),
                validate=self.settings.enable_citation_validation,
                pacing=self.p.pacing,
                stop_requested=lambda: self.p.stops.stop_requested(conv_id, started_ms),
            )
            yield from stream.events(breaker_open)
        finally:
            self.p.stops.end(conv_id)
            self._release(acc)

    # ------------------------------------------------------------------ preparation
    def accept(
        self, owner: str, conv_id: str, content: object, *, message_id: str | None, ip: str | None
    ) -> Accepted:
        """Validate, take the conversation's turn lease (``services/chat/leases.py``), rate limit and
        store the user message (errors raise here, the lease released). Raises :class:`Replayed`
        when an earlier request with the same ``messageId`` already answered."""
        started = time.perf_counter()
        text = sanitize_message(content, max_chars=self.settings.max_message_chars)
        if message_id is not None and (not isinstance(message_id, str) or not _CLIENT_ID.match(message_id)):
            raise ValidationError("messageId: use 1-128 letters, digits or . _ : -")
        timings: dict[str, float] = {"db_read": 0.0, "db_write": 0.0}
        conv = timed(timings, "db_read", lambda: self.p.store.get_conversation(owner, conv_id))
        if conv is None:
            raise NotFound("Conversation not found")
        # who may read what is resolved now, before anything is stored (a removed member's next turn)
        workspaces = self.p.scope(conv) if self.p.scope is not None else None
        if message_id and self.p.limiter is not None:
            # A retry of an answered message is a replay, not a new request: do not count it.
            replay = self.p.replays.answered(conv, message_id, text)
            if replay is not None:
                raise Replayed(replay)
        leased = self.p.leases.take(conv.id)
        if not leased and not self.p.replays.pending(conv, message_id):
            raise Conflict(BUSY)
        try:
            limit = self.settings.max_chat_history + 5
            newest = timed(timings, "db_read", lambda: self.p.store.recent_messages(owner, conv_id, limit))
            history = list(reversed(newest))
            if self.p.limiter is not None:
                self.p.limiter.check(owner, conv.id, ip, history)
            user = self._store_user(conv, text, message_id, timings)
            # The model budget starts now: a retry that waited for (or took over from) an earlier
            # attempt with the same messageId still gets all of it.
            deadline = self.p.caller.deadline()
            history = [m for m in history if m.id != user.id]
            conv = self._title(conv, text, timings)
        except BaseException:
            if leased:
                self.p.leases.release(conv.id)
            raise
        return Accepted(
            conv=conv, text=text, user=user, client_id=message_id, history=history,
            started=started, deadline=deadline, timings=timings, workspaces=workspaces, leased=leased,
        )  # fmt: skip

    def _release(self, acc: Accepted) -> None:
        if acc.leased:
            self.p.leases.release(acc.conv.id)

    def ready(self, acc: Accepted) -> Turn:
        """The history window (summarized if due) and retrieval."""
        conv, timings = acc.conv, acc.timings
        window, conv = self.p.history.window(conv, [*acc.history, acc.user], timings, deadline=acc.deadline)
        workspaces = acc.workspaces
        flt = SearchFilter(
            owner=conv.owner,
            collection=conv.collection,
            document_id=conv.document_id,
            owners=tuple(workspaces or ()),
        )
        previous = [m.content for m in acc.history if m.role == "user"]
        condensed = None
        if previous and self.p.caller.model_id != EXTRACTIVE_MODEL and needs_condensing(acc.text):
            condensed = condense(self.p.caller, acc.history, acc.text, deadline=acc.deadline)
        retrieval = retrieve_question(
            self.p.retriever, acc.text, flt, previous=previous, condensed=condensed, conversation_id=conv.id
        )
        timings.update(retrieval.timings)
        return Turn(
            conv=conv,
            text=acc.text,
            user=acc.user,
            client_id=acc.client_id,
            window=window,
            history=acc.history,
            retrieval=retrieval,
            reinforce=detect_injection(acc.text),
            persona=self.p.persona(conv),
            started=acc.started,
            breaker=self.p.breaker.scope(conv.id, acc.history),
            deadline=acc.deadline,
            refused=refuses(retrieval, tools=self.tools_mode),
            timings=timings,
            workspaces=workspaces,
        )

    def _store_user(
        self, conv: Conversation, text: str, message_id: str | None, timings: dict[str, float]
    ) -> Message:
        user = Message(
            id=new_id(), conversation_id=conv.id, owner=conv.owner, role="user", content=text,
            client_message_id=message_id,
        )  # fmt: skip
        try:
            user = timed(timings, "db_write", lambda: self.p.store.add_message(user))
        except Conflict:
            assert message_id is not None
            # Answered meanwhile → Replayed; else the first attempt died: answer in its place.
            user = self.p.replays.await_first_attempt(conv, message_id, text)
        logger.info(
            "chat.event",
            extra={
                "conversationId": conv.id,
                "type": "message_received",
                "messageId": user.id,
                "clientMessageId": message_id,
            },
        )
        return user

    def _title(self, conv: Conversation, text: str, timings: dict[str, float]) -> Conversation:
        if conv.title:
            return conv
        title = make_title(text)
        timed(
            timings,
            "db_write",
            lambda: self.p.store.update_conversation(conv.owner, conv.id, {"title": title}),
        )
        return dataclasses.replace(conv, title=title)

    # ------------------------------------------------------------------ answering
    def answer(self, turn: Turn, *, assistant_id: str | None = None) -> TurnResult:
        answerer = self.p.answerer
        retrieval = turn.retrieval
        if turn.refused:
            indexing = documents_indexing(self.p.documents, turn.conv.owner, turn.conv.collection)
            refusal = answerer.guard_answer(retrieval, indexing=indexing)
            return self._store(turn, refusal, assistant_id=assistant_id)
        if self.p.caller.is_open(turn.breaker):
            self._log_circuit_open(turn)
            return self._store(turn, self._fallback(turn), assistant_id=assistant_id)
        scope = tuple(turn.workspaces or ())
        tools = (
            ScopedNoteTools(self.p.retriever, self.p.documents, turn.conv, scope) if self.tools_mode else None
        )
        history, question = split_window(turn)
        try:
            answer = answerer.answer(
                question,
                retrieval,
                history=history,
                persona=turn.persona,
                reinforce=turn.reinforce,
                conversation_id=turn.conv.id,
                timings=turn.timings,
                scope=turn.breaker,
                tools=tools,
                deadline=turn.deadline,
            )
        except Exception:
            # the breaker counted it
            return self._store(turn, self._fallback(turn), assistant_id=assistant_id)
        return self._store(turn, answer, assistant_id=assistant_id)

    def _fallback(self, turn: Turn) -> Answer:
        return self.p.answerer.fallback(turn.retrieval, conversation_id=turn.conv.id, timings=turn.timings)

    @staticmethod
    def _log_circuit_open(turn: Turn) -> None:
        log_error(turn.conv.id, "CircuitOpen", "circuit breaker open")

    def _store_summary(self, turn: Turn) -> None:
        """The summary written for this turn's window goes after its answer (question, answer,
        summary); a failure to store it costs nothing but a later summary."""
        if turn.summary_stored or turn.window.pending is None:
            return
        turn.summary_stored = True
        try:
            turn.conv = self.p.history.store_pending(turn.conv, turn.window, turn.timings)
        except Exception as exc:
            log_error(turn.conv.id, type(exc).__name__, f"summary not stored: {message_of(exc)}")

    def _located(self, turn: Turn, answer: Answer) -> list[SourceRef]:
        """The answer's sources with title and page: the turn's one extra round trip when it cites
        something (why a read and not the vector metadata: :mod:`ragchat.services.sources`)."""
        if not answer.sources:
            return []
        conv = turn.conv
        return timed(
            turn.timings,
            "db_read",
            lambda: locate_sources(
                self.p.documents,
                conv.owner,
                answer.sources,
                conversation_id=conv.id,
                workspaces=turn.workspaces,
            ),
        )

    def _store(
        self, turn: Turn, answer: Answer, *, assistant_id: str | None = None, interrupted: bool = False
    ) -> TurnResult:
        msg = Message(
            id=assistant_id or new_id(),
            conversation_id=turn.conv.id,
            owner=turn.conv.owner,
            role="assistant",
            content=answer.text,
            sources=self._located(turn, answer),
            model=answer.model,
            client_message_id=turn.client_id,
            interrupted=interrupted,
            query=turn.retrieval.query or turn.text,
        )
        try:
            stored = timed(turn.timings, "db_write", lambda: self.p.store.add_message(msg))
        except Conflict:
            # Another attempt with the same messageId answered first: its answer stands.
            found = self.p.store.find_by_client_message_id(
                turn.conv.owner, turn.conv.id, turn.client_id or ""
            )
            replay = replay_from(found, turn.text)
            if replay is None:
                raise
            return replay
        self._store_summary(turn)
        self.p.metrics.log_turn(turn.conv.id, turn.timings, turn.started)
        return TurnResult(
            message=stored,
            model=answer.model,
            guard_used=answer.guard_used,
            user_message_id=turn.user.id,
            suggestions=list(answer.suggestions),
        )
