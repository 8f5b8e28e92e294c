"""Multi-turn chat (SPEC §4, §7, §8, §9, §10, §11, §12).

A turn, in order: validate and sanitize → rate limit (flag) → persist the user message (idempotent by
``messageId``) → history window (latest summary + messages after its cursor, newest
``MAX_CHAT_HISTORY + 5`` read in one query, then reversed) → summarize if triggered (flag) → retrieve
(adaptive topK, guard, scope filter) → system prompt rebuilt with persona and injection
reinforcement → model (retries; circuit breaker per conversation) → citation validation → persist the
assistant message with its sources → respond.

Store round trips on a steady-state turn: get conversation, read recent messages, add user message,
add assistant message (4). The history is read before the user message is written (one read serves
both the flood check and the window); the window is that history plus the stored user message, so the
current message reaches the model exactly once.

Idempotency rides on ``ConversationStore.add_message`` raising ``Conflict`` for a duplicate
``client_message_id`` (same role): a second request with the same ``messageId`` finds the first
request's messages and returns its answer, waiting (bounded) while the first is still answering.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from ragchat.domain.chat import (
    BREAKER_WINDOW_S,
    BUILTIN_PERSONAS,
    DEFAULT_PERSONA,
    FALLBACK_MODEL,
    GUARD_MODEL,
    REFUSAL_SUGGESTIONS,
    CitationStreamFilter,
    HistoryWindow,
    LatencyWindow,
    after_cursor,
    breaker_open,
    call_with_retries,
    cap_window,
    extractive_summary,
    fallback_needs_breaker_read,
    flood_retry_after,
    make_title,
    model_turns,
    parse_personas,
    plan_summary,
    resolve_persona,
    sanitize_message,
    sliding_count,
    sliding_retry_after,
    strip_citation_tags,
    transcript,
    window_position,
)
from ragchat.domain.citations import strip_citations
from ragchat.domain.clock import Clock, parse_iso, system_clock
from ragchat.domain.errors import Conflict, NotFound, RateLimited, TransientError, ValidationError
from ragchat.domain.ids import new_id
from ragchat.domain.models import (
    ChatTurn,
    Completion,
    Conversation,
    Hit,
    Message,
    ModelRequest,
    Page,
    SearchFilter,
    SourceRef,
)
from ragchat.domain.prompts import SUMMARY_PROMPT, detect_injection, fallback_reply
from ragchat.services.answering import Answer, Answerer
from ragchat.services.logs import log_error

if TYPE_CHECKING:
    from ragchat.config import Settings
    from ragchat.ports import ChatModel, ConversationStore, Counters, DocumentStore
    from ragchat.services.retrieval import Retrieval, Retriever

logger = Logger(service="ragchat", child=True)

_CLIENT_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
IDEMPOTENCY_TAKEOVER_S = 60.0  # a first attempt silent this long is presumed dead: answer in its place
IDEMPOTENCY_POLLS = 400
IDEMPOTENCY_POLL_S = 0.05


@dataclass(slots=True)
class TurnResult:
    """The assistant message of a turn (as stored) and how it came about."""

    message: Message
    model: str
    guard_used: bool
    replayed: bool = False
    user_message_id: str | None = None


@dataclass(slots=True)
class _Turn:
    """Everything prepared before the model is asked."""

    conv: Conversation
    text: str
    user: Message
    client_id: str | None
    window: HistoryWindow
    history: list[Message]
    retrieval: Retrieval
    reinforce: bool
    persona: str
    started: float
    timings: dict[str, float] = field(default_factory=dict)


class ChatService:
    def __init__(
        self,
        *,
        conversations: ConversationStore,
        counters: Counters,
        retriever: Retriever,
        model: ChatModel,
        documents: DocumentStore,
        settings: Settings,
        clock: Clock = system_clock,
        sleep: Callable[[float], None] = time.sleep,
        personas: dict[str, str] | None = None,
    ) -> None:
        self.conversations = conversations
        self.counters = counters
        self.retriever = retriever
        self.model = model
        self.documents = documents
        self.settings = settings
        self.clock = clock
        self.sleep = sleep
        self.answerer = Answerer(model, settings)
        self._personas = personas
        self.latencies = LatencyWindow(50, 10)

    # ================================================================== personas
    @property
    def personas(self) -> dict[str, str]:
        if self._personas is None:
            self._personas = load_personas(self.settings)
        return self._personas

    # ================================================================== conversations
    def create_conversation(
        self,
        owner: str,
        *,
        title: str | None = None,
        collection: str | None = None,
        document_id: str | None = None,
        persona: str | None = None,
    ) -> Conversation:
        if persona is not None:
            resolve_persona(self.personas, persona)  # unknown → 400
        if document_id:
            doc = self.documents.get_document(owner, document_id)
            if doc is None:
                raise NotFound("Document not found")
            collection = collection or None
        clean_title = " ".join(title.split()) if title else ""
        conv = Conversation(
            id=new_id(),
            owner=owner,
            title=clean_title,
            collection=collection or None,
            document_id=document_id or None,
            persona=persona or None,
        )
        return self.conversations.create_conversation(conv)

    def list_conversations(
        self, owner: str, *, limit: int = 50, cursor: str | None = None
    ) -> Page[Conversation]:
        return self.conversations.list_conversations(owner, limit=limit, cursor=cursor)

    def get_conversation(self, owner: str, conv_id: str) -> Conversation:
        conv = self.conversations.get_conversation(owner, conv_id)
        if conv is None:
            raise NotFound("Conversation not found")
        return conv

    def messages(
        self, owner: str, conv_id: str, *, limit: int = 1000, cursor: str | None = None
    ) -> Page[Message]:
        return self.conversations.list_messages(owner, conv_id, limit=limit, cursor=cursor)

    def delete_conversation(self, owner: str, conv_id: str) -> None:
        if not self.conversations.delete_conversation(owner, conv_id):
            raise NotFound("Conversation not found")

    def all_messages(self, owner: str, conv_id: str) -> list[Message]:
        out: list[Message] = []
        cursor: str | None = None
        while True:
            page = self.conversations.list_messages(owner, conv_id, limit=1000, cursor=cursor)
            out.extend(page.items)
            if not page.cursor:
                return out
            cursor = page.cursor

    # ================================================================== a turn (JSON)
    def send(
        self,
        owner: str,
        conv_id: str,
        content: object,
        *,
        message_id: str | None = None,
        ip: str | None = None,
    ) -> TurnResult:
        prepared = self._prepare(owner, conv_id, content, message_id=message_id, ip=ip)
        if isinstance(prepared, TurnResult):
            return prepared
        return self._answer(prepared)

    def edit(
        self, owner: str, conv_id: str, message_id: str, content: object, *, ip: str | None = None
    ) -> TurnResult:
        """``PUT …/messages/{messageId}``: replace a user message (by id or client message id), delete
        every later message, answer the new version."""
        text = sanitize_message(content, max_chars=self.settings.max_message_chars)
        conv = self.get_conversation(owner, conv_id)
        target = self.conversations.get_message(owner, conv_id, message_id)
        if target is None:
            target = next(
                (
                    m
                    for m in self.conversations.find_by_client_message_id(owner, conv_id, message_id)
                    if m.role == "user"
                ),
                None,
            )
        if target is None:
            raise NotFound("Message not found")
        if target.role != "user":
            raise ValidationError("Only user messages can be edited")
        ordered = self.all_messages(owner, conv_id)
        index = next(i for i, m in enumerate(ordered) if m.id == target.id)
        removed_ids = {m.id for m in ordered[index:]}
        # Editing the first message empties the conversation; it keeps its id, createdAt, scope and
        # persona, and a title made from the old first message is made again from the new one.
        self.conversations.delete_messages_after(owner, conv_id, ordered[index - 1].id if index else None)
        changes: dict[str, Any] = {}
        if conv.last_summary_id in removed_ids:
            changes.update(summary_cursor=None, last_summary_id=None)
        if index == 0 and conv.title == make_title(target.content):
            changes["title"] = ""
        if changes:
            conv = self.conversations.update_conversation(owner, conv_id, changes) or conv
        logger.info(
            "chat.event",
            extra={
                "conversationId": conv_id,
                "type": "message_edited",
                "messageId": target.id,
                "deletedCount": len(removed_ids),
            },
        )
        return self.send(owner, conv_id, text, message_id=target.client_message_id, ip=ip)

    # ================================================================== a turn (SSE)
    def stream(
        self,
        owner: str,
        conv_id: str,
        content: object,
        *,
        message_id: str | None = None,
        ip: str | None = None,
    ) -> tuple[str, Iterator[tuple[str, dict[str, Any]]]]:
        """Prepare the turn (errors raise here, before any event) and return (model, events): SPEC §10
        ``answer_start``, ``answer_delta``…, ``sources``, ``answer_end``; or ``refusal`` / ``error``."""
        prepared = self._prepare(owner, conv_id, content, message_id=message_id, ip=ip)
        if isinstance(prepared, TurnResult):
            return prepared.model, self._replay_events(prepared)
        turn = prepared
        if turn.retrieval.guard and not self._tools_mode():
            result = self._store_answer(turn, self.answerer.guard_answer(turn.retrieval))
            return result.model, self._refusal_events(result)
        if self._tools_mode():
            # Tool rounds are not streamed: answer, then send the validated text in one delta.
            result = self._answer(turn)
            return result.model, self._replay_events(result)
        open_ = self._breaker_is_open(turn)
        model = FALLBACK_MODEL if open_ else self.model.model_id
        return model, self._stream_events(turn, open_)

    def _stream_events(self, turn: _Turn, breaker_is_open: bool) -> Iterator[tuple[str, dict[str, Any]]]:
        conv_id = turn.conv.id
        assistant_id = new_id()
        hits = turn.retrieval.hits
        yield "answer_start", {"conversationId": conv_id, "messageId": assistant_id}
        if breaker_is_open:
            self._log_circuit_open(turn)
            answer = self._fallback(turn)
            yield "answer_delta", {"text": answer.text}
            result = self._store_answer(turn, answer, assistant_id=assistant_id)
            yield "sources", {"sources": [_source_json(s) for s in result.message.sources or []]}
            yield "answer_end", {"messageId": result.message.id, "content": result.message.content}
            return
        request = self._model_request(turn)
        filt = CitationStreamFilter(h.id for h in hits) if self.settings.enable_citation_validation else None
        raw: list[str] = []
        sent: list[str] = []
        deltas = self.model.stream(request)
        t0 = time.perf_counter()
        try:
            for delta in deltas:
                raw.append(delta)
                out = filt.feed(delta) if filt else delta
                if out:
                    sent.append(out)
                    yield "answer_delta", {"text": out}
        except GeneratorExit:
            # The client went away: stop generating, keep what was produced, marked interrupted.
            _close(deltas)
            turn.timings["ai_completion"] = (time.perf_counter() - t0) * 1000
            self._store_answer(
                turn, self._partial_answer(turn, "".join(raw)), assistant_id=assistant_id, interrupted=True
            )
            logger.info(
                "chat.event",
                extra={"conversationId": conv_id, "type": "stream_interrupted", "messageId": assistant_id},
            )
            raise
        except Exception as exc:
            _close(deltas)
            turn.timings["ai_completion"] = (time.perf_counter() - t0) * 1000
            self._record_failure(turn, exc)
            if not sent:
                answer = self._fallback(turn)
                yield "answer_delta", {"text": answer.text}
                result = self._store_answer(turn, answer, assistant_id=assistant_id)
                yield "sources", {"sources": [_source_json(s) for s in result.message.sources or []]}
                yield "answer_end", {"messageId": result.message.id, "content": result.message.content}
                return
            partial = self._partial_answer(turn, "".join(raw))
            self._store_answer(turn, partial, assistant_id=assistant_id, interrupted=True)
            yield (
                "error",
                {
                    "code": "model_error",
                    "message": "The model failed while answering; the partial answer was kept.",
                },
            )
            return
        turn.timings["ai_completion"] = (time.perf_counter() - t0) * 1000
        self._record_success(turn)
        answer = self.answerer.finish(
            "".join(raw),
            turn.retrieval,
            model=self.model.model_id,
            conversation_id=conv_id,
            timings=turn.timings,
        )
        streamed = "".join(sent)
        if answer.text.startswith(streamed) and len(answer.text) > len(streamed):
            yield "answer_delta", {"text": answer.text[len(streamed) :]}
        result = self._store_answer(turn, answer, assistant_id=assistant_id)
        yield "sources", {"sources": [_source_json(s) for s in result.message.sources or []]}
        yield "answer_end", {"messageId": result.message.id, "content": result.message.content}

    def _partial_answer(self, turn: _Turn, raw: str) -> Answer:
        ans = self.answerer.finish(
            raw, turn.retrieval, model=self.model.model_id, conversation_id=turn.conv.id
        )
        return ans

    def _replay_events(self, result: TurnResult) -> Iterator[tuple[str, dict[str, Any]]]:
        msg = result.message
        if result.guard_used:
            yield from self._refusal_events(result)
            return
        yield "answer_start", {"conversationId": msg.conversation_id, "messageId": msg.id}
        yield "answer_delta", {"text": msg.content}
        yield "sources", {"sources": [_source_json(s) for s in msg.sources or []]}
        yield "answer_end", {"messageId": msg.id, "content": msg.content}

    @staticmethod
    def _refusal_events(result: TurnResult) -> Iterator[tuple[str, dict[str, Any]]]:
        yield (
            "refusal",
            {
                "message": result.message.content,
                "suggestions": list(REFUSAL_SUGGESTIONS),
                "messageId": result.message.id,
            },
        )

    # ================================================================== preparation
    def _prepare(
        self, owner: str, conv_id: str, content: object, *, message_id: str | None, ip: str | None
    ) -> _Turn | TurnResult:
        started = time.perf_counter()
        text = sanitize_message(content, max_chars=self.settings.max_message_chars)
        if message_id is not None and (not isinstance(message_id, str) or not _CLIENT_ID.match(message_id)):
            raise ValidationError("messageId: use 1-128 letters, digits or . _ : -")
        timings: dict[str, float] = {"db_read": 0.0, "db_write": 0.0}
        conv = self._timed(timings, "db_read", lambda: self.conversations.get_conversation(owner, conv_id))
        if conv is None:
            raise NotFound("Conversation not found")

        if message_id and self.settings.enable_rate_limiting:
            # A retry of an answered message is a replay, not a new request: do not count it.
            replay = self._replay_if_answered(owner, conv, message_id, text)
            if replay is not None:
                return replay

        limit = self.settings.max_chat_history + 5
        newest = self._timed(
            timings, "db_read", lambda: self.conversations.recent_messages(owner, conv_id, limit)
        )
        history = list(reversed(newest))
        if self.settings.enable_rate_limiting:
            self._rate_limit(conv.id, ip, history)

        user = Message(
            id=new_id(),
            conversation_id=conv.id,
            owner=owner,
            role="user",
            content=text,
            client_message_id=message_id,
        )
        try:
            user = self._timed(timings, "db_write", lambda: self.conversations.add_message(user))
        except Conflict:
            assert message_id is not None
            replay_or_user = self._await_first_attempt(owner, conv, message_id, text)
            if isinstance(replay_or_user, TurnResult):
                return replay_or_user
            user = replay_or_user  # the first attempt died before answering: answer in its place
        history = [m for m in history if m.id != user.id]
        logger.info(
            "chat.event",
            extra={
                "conversationId": conv.id,
                "type": "message_received",
                "messageId": user.id,
                "clientMessageId": message_id,
            },
        )
        if not conv.title:
            title = make_title(text)
            self._timed(
                timings,
                "db_write",
                lambda: self.conversations.update_conversation(owner, conv.id, {"title": title}),
            )
            conv = dataclasses.replace(conv, title=title)

        window = self._window(conv, [*history, user], timings)
        if self.settings.enable_chat_summarization:
            window, conv = self._maybe_summarize(conv, window, timings)
        else:
            window = HistoryWindow(
                window.summary, cap_window(window.messages, self.settings.max_chat_history)
            )

        flt = SearchFilter(owner=owner, collection=conv.collection, document_id=conv.document_id)
        retrieval = self.retriever.retrieve(text, flt, conversation_id=conv.id)
        timings.update(retrieval.timings)
        persona = self._persona_paragraph(conv)
        return _Turn(
            conv=conv,
            text=text,
            user=user,
            client_id=message_id,
            window=window,
            history=history,
            retrieval=retrieval,
            reinforce=detect_injection(text),
            persona=persona,
            started=started,
            timings=timings,
        )

    def _persona_paragraph(self, conv: Conversation) -> str:
        try:
            return resolve_persona(self.personas, conv.persona)
        except ValidationError:
            log_error(conv.id, "UnknownPersona", f"persona {conv.persona!r} no longer configured")
            return self.personas.get(DEFAULT_PERSONA, "")

    def _window(
        self, conv: Conversation, ascending: list[Message], timings: dict[str, float]
    ) -> HistoryWindow:
        summary, after = after_cursor(ascending, summary_id=conv.last_summary_id, cursor=conv.summary_cursor)
        if summary is None and conv.last_summary_id:
            summary = self._timed(
                timings,
                "db_read",
                lambda: self.conversations.get_message(conv.owner, conv.id, conv.last_summary_id or ""),
            )
        return HistoryWindow(summary, after)

    def _maybe_summarize(
        self, conv: Conversation, window: HistoryWindow, timings: dict[str, float]
    ) -> tuple[HistoryWindow, Conversation]:
        plan = plan_summary(window, self.settings.max_chat_history)
        if plan is None:
            return HistoryWindow(
                window.summary, cap_window(window.messages, self.settings.max_chat_history)
            ), conv
        previous = window.summary.content if window.summary else None
        text = self._summarize(conv, plan.to_summarize, previous)
        msg = Message(
            id=new_id(), conversation_id=conv.id, owner=conv.owner, role="system-summary", content=text
        )
        stored = self._timed(timings, "db_write", lambda: self.conversations.add_message(msg))
        cursor = plan.to_summarize[-1].id
        changes = {"summary_cursor": cursor, "last_summary_id": stored.id}
        self._timed(
            timings, "db_write", lambda: self.conversations.update_conversation(conv.owner, conv.id, changes)
        )
        logger.info(
            "chat.summary",
            extra={
                "conversationId": conv.id,
                "replacedCount": len(plan.to_summarize),
                "summaryId": stored.id,
                "reason": plan.reason,
            },
        )
        conv = dataclasses.replace(conv, summary_cursor=cursor, last_summary_id=stored.id)
        return HistoryWindow(stored, plan.keep), conv

    def _summarize(self, conv: Conversation, messages: Sequence[Message], previous: str | None) -> str:
        if uses_llm(self.model):
            request = ModelRequest(
                system=SUMMARY_PROMPT,
                messages=[ChatTurn("user", transcript(messages, previous=previous))],
                sources=[],
                question=SUMMARY_PROMPT,
                max_tokens=400,
            )
            try:
                text = strip_citations(self._complete(request).text)
                if text.strip():
                    return strip_citation_tags(text)
            except Exception as exc:
                log_error(conv.id, type(exc).__name__, f"summary: {_message_of(exc)}")
        return extractive_summary(messages, previous=previous)

    # ================================================================== rate limits
    def _rate_limit(self, conv_id: str, ip: str | None, history: Sequence[Message]) -> None:
        now = self.clock()
        window_s = self.settings.rate_limit_window_s
        limit = self.settings.rate_limit_requests
        pos = window_position(now, window_s)
        dims = [("conv", conv_id)] + ([("ip", ip)] if ip else [])
        prev_keys = [f"{kind}:{value}:{pos.bucket - 1}" for kind, value in dims]
        previous = self.counters.get_many(prev_keys, now=now)
        for (kind, value), prev_key in zip(dims, prev_keys, strict=True):
            current = self.counters.increment(
                f"{kind}:{value}:{pos.bucket}", ttl_seconds=2 * window_s, now=now
            )
            prev = previous.get(prev_key, 0)
            if sliding_count(prev, current, pos.elapsed, window_s) > limit:
                retry = sliding_retry_after(prev, current, pos.elapsed, window_s, limit)
                self._limited(conv_id, ip, kind, retry)
        user_times = [parse_iso(m.created_at) for m in history if m.role == "user" and m.created_at]
        flood = flood_retry_after(user_times, now)
        if flood is not None:
            self._limited(conv_id, ip, "flood", flood)

    def _limited(self, conv_id: str, ip: str | None, dimension: str, retry: int) -> None:
        logger.info(
            "chat.rate_limit",
            extra={
                "conversationId": conv_id,
                "ip": ip,
                "type": "limit",
                "dimension": dimension,
                "retryAfter": retry,
            },
        )
        what = "Too many messages in a short time" if dimension == "flood" else "Rate limit exceeded"
        raise RateLimited(f"{what}; retry in {retry} s", retry)

    # ================================================================== idempotency
    def _replay_if_answered(
        self, owner: str, conv: Conversation, message_id: str, text: str
    ) -> TurnResult | None:
        found = self.conversations.find_by_client_message_id(owner, conv.id, message_id)
        return self._replay_from(found, text)

    def _replay_from(self, found: Sequence[Message], text: str) -> TurnResult | None:
        user = next((m for m in found if m.role == "user"), None)
        if user is not None and user.content != text:
            raise Conflict("messageId was already used for a different message")
        assistant = next((m for m in found if m.role == "assistant"), None)
        if assistant is None:
            return None
        model = assistant.model or ""
        return TurnResult(
            message=assistant,
            model=model,
            guard_used=model == GUARD_MODEL,
            replayed=True,
            user_message_id=user.id if user else None,
        )

    def _await_first_attempt(
        self, owner: str, conv: Conversation, message_id: str, text: str
    ) -> TurnResult | Message:
        """Another request stored this ``messageId`` first: return its answer once it exists (polling,
        bounded); if it stays unanswered for ``IDEMPOTENCY_TAKEOVER_S``, return its user message so
        this request answers it (the assistant write is itself idempotent)."""
        user: Message | None = None
        for _ in range(IDEMPOTENCY_POLLS):
            found = self.conversations.find_by_client_message_id(owner, conv.id, message_id)
            replay = self._replay_from(found, text)
            if replay is not None:
                return replay
            user = next((m for m in found if m.role == "user"), None)
            if user is None:
                raise Conflict("messageId is being reused; retry")
            if self.clock() - parse_iso(user.created_at) >= IDEMPOTENCY_TAKEOVER_S:
                return user
            self.sleep(IDEMPOTENCY_POLL_S)
        assert user is not None
        return user

    # ================================================================== answering
    def _tools_mode(self) -> bool:
        return self.settings.chat_mode == "tools" and hasattr(self.model, "complete_with_tools")

    def _model_request(self, turn: _Turn) -> ModelRequest:
        turns = model_turns(turn.window)
        history, last = turns[:-1], turns[-1]
        if turn.reinforce:
            logger.info("chat.injection", extra={"conversationId": turn.conv.id})
        return self.answerer.request(
            last.content, turn.retrieval, history=history, persona=turn.persona, reinforce=turn.reinforce
        )

    def _complete(self, request: ModelRequest) -> Completion:
        return call_with_retries(
            lambda: self.model.complete(request),
            retryable=lambda exc: isinstance(exc, TransientError),
            sleep=self.sleep,
        )

    def _breaker_key(self, conv_id: str) -> str:
        return f"breaker:conv:{conv_id}"

    def _breaker_is_open(self, turn: _Turn) -> bool:
        if not fallback_needs_breaker_read(turn.history):
            return False
        failures = self.counters.get(self._breaker_key(turn.conv.id), now=self.clock())
        turn.timings["breaker_failures"] = failures
        return breaker_open(failures)

    def _record_failure(self, turn: _Turn, exc: BaseException) -> None:
        count = self.counters.increment(
            self._breaker_key(turn.conv.id), ttl_seconds=BREAKER_WINDOW_S, now=self.clock()
        )
        log_error(turn.conv.id, type(exc).__name__, _message_of(exc), consecutiveFailures=count)

    def _record_success(self, turn: _Turn) -> None:
        if fallback_needs_breaker_read(turn.history):
            self.counters.reset(self._breaker_key(turn.conv.id))

    def _log_circuit_open(self, turn: _Turn) -> None:
        log_error(turn.conv.id, "CircuitOpen", "circuit breaker open")

    def _fallback(self, turn: _Turn) -> Answer:
        return self.answerer.finish(
            fallback_reply(turn.retrieval.hits),
            turn.retrieval,
            model=FALLBACK_MODEL,
            conversation_id=turn.conv.id,
            timings=turn.timings,
        )

    def _answer(self, turn: _Turn) -> TurnResult:
        retrieval = turn.retrieval
        tools = self._tools_mode()
        if retrieval.guard and not (tools and retrieval.reason != "empty_knowledge_base"):
            return self._store_answer(turn, self.answerer.guard_answer(retrieval))
        if self._breaker_is_open(turn):
            self._log_circuit_open(turn)
            return self._store_answer(turn, self._fallback(turn))
        request = self._model_request(turn)
        t0 = time.perf_counter()
        try:
            if tools:
                note_tools = ScopedNoteTools(self, turn.conv)
                completion = call_with_retries(
                    lambda: self.model.complete_with_tools(request, note_tools),  # type: ignore[attr-defined]
                    retryable=lambda exc: isinstance(exc, TransientError),
                    sleep=self.sleep,
                )
            else:
                completion = self._complete(request)
        except Exception as exc:
            turn.timings["ai_completion"] = (time.perf_counter() - t0) * 1000
            self._record_failure(turn, exc)
            return self._store_answer(turn, self._fallback(turn))
        turn.timings["ai_completion"] = (time.perf_counter() - t0) * 1000
        self._record_success(turn)
        answer = self.answerer.finish(
            completion.text,
            retrieval,
            model=completion.model or self.model.model_id,
            tool_hits=completion.tool_hits,
            conversation_id=turn.conv.id,
            timings=turn.timings,
        )
        return self._store_answer(turn, answer)

    def _store_answer(
        self, turn: _Turn, answer: Answer, *, assistant_id: str | None = None, interrupted: bool = False
    ) -> TurnResult:
        msg = Message(
            id=assistant_id or new_id(),
            conversation_id=turn.conv.id,
            owner=turn.conv.owner,
            role="assistant",
            content=answer.text,
            sources=list(answer.sources),
            model=answer.model,
            client_message_id=turn.client_id,
            interrupted=interrupted,
        )
        try:
            stored = self._timed(turn.timings, "db_write", lambda: self.conversations.add_message(msg))
        except Conflict:
            # Another attempt with the same messageId answered first: its answer stands.
            found = self.conversations.find_by_client_message_id(
                turn.conv.owner, turn.conv.id, turn.client_id or ""
            )
            replay = self._replay_from(found, turn.text)
            if replay is None:
                raise
            return replay
        self._log_turn(turn)
        return TurnResult(
            message=stored, model=answer.model, guard_used=answer.guard_used, user_message_id=turn.user.id
        )

    # ================================================================== observability
    def _timed(self, timings: dict[str, float], phase: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            timings[phase] = timings.get(phase, 0.0) + (time.perf_counter() - t0) * 1000

    def _log_turn(self, turn: _Turn) -> None:
        for phase in ("embedding_generation", "vector_search", "ai_completion", "db_read", "db_write"):
            if phase in turn.timings:
                logger.info(
                    "chat.metrics",
                    extra={
                        "conversationId": turn.conv.id,
                        "phase": phase,
                        "ms": round(turn.timings[phase], 3),
                    },
                )
        total = (time.perf_counter() - turn.started) * 1000
        stats = self.latencies.add(total)
        if stats is not None:
            logger.info(
                "chat.latency",
                extra={
                    "conversationId": turn.conv.id,
                    "p50": round(stats[0], 3),
                    "p95": round(stats[1], 3),
                    "window": len(self.latencies._samples),
                },
            )

    # ================================================================== export
    def export(self, owner: str, conv_id: str, fmt: str) -> tuple[str, str]:
        """(content type, body) of a conversation in ``markdown`` or ``json``."""
        conv = self.get_conversation(owner, conv_id)
        messages = self.all_messages(owner, conv_id)
        if fmt == "json":
            body = {**conversation_json(conv), "messages": [message_json(m) for m in messages]}
            return "application/json", json.dumps(body, ensure_ascii=False, indent=2)
        if fmt not in ("markdown", "md"):
            raise ValidationError("format: use markdown or json")
        return "text/markdown; charset=utf-8", export_markdown(conv, messages)


class ScopedNoteTools:
    """``search_notes`` / ``get_note`` for tool-use mode, confined to the caller and the scope."""

    def __init__(self, service: ChatService, conv: Conversation) -> None:
        self._service = service
        self._flt = SearchFilter(owner=conv.owner, collection=conv.collection, document_id=conv.document_id)

    def search_notes(self, query: str, limit: int) -> list[Hit]:
        retriever = self._service.retriever
        vector = retriever.embedder.embed_query(" ".join(query.split()))
        return retriever.index.search(vector, self._flt, limit)

    def get_note(self, note_id: str) -> Hit | None:
        notes = self._service.documents.get_notes(self._flt.owner, [note_id])
        if not notes:
            return None
        n = notes[0]
        if self._flt.document_id and n.document_id != self._flt.document_id:
            return None
        if self._flt.collection and n.collection != self._flt.collection:
            return None
        return Hit(
            id=n.id,
            score=1.0,
            text=n.text,
            document_id=n.document_id,
            chunk_index=n.chunk_index,
            collection=n.collection,
        )


# ====================================================================== helpers
def uses_llm(model: Any) -> bool:
    """Whether the chat model is an LLM (the extractive answerer is not: it cannot summarize)."""
    return not str(getattr(model, "model_id", "")).startswith("extractive")


def load_personas(settings: Settings) -> dict[str, str]:
    path = settings.personas_file
    if path is None:
        return dict(BUILTIN_PERSONAS)
    from ragchat.config import ConfigError

    try:
        raw = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(raw)
        else:
            data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("expected a table/object of personas")
        return parse_personas(data)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"RAGCHAT_PERSONAS_FILE: cannot load personas from {path}: {exc}") from None


def _close(iterator: Any) -> None:
    close = getattr(iterator, "close", None)
    if callable(close):
        close()


def _message_of(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc or type(exc).__name__)


def _source_json(src: SourceRef) -> dict[str, Any]:
    return {"id": src.id, "text": src.text}


def conversation_json(conv: Conversation) -> dict[str, Any]:
    return {
        "id": conv.id,
        "title": conv.title,
        "collection": conv.collection,
        "documentId": conv.document_id,
        "persona": conv.persona,
        "messageCount": conv.message_count,
        "summaryCursor": conv.summary_cursor,
        "lastSummaryId": conv.last_summary_id,
        "createdAt": conv.created_at,
        "updatedAt": conv.updated_at,
    }


def message_json(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": msg.id,
        "role": msg.role,
        "content": msg.content,
        "sources": None if msg.sources is None else [_source_json(s) for s in msg.sources],
        "model": msg.model,
        "createdAt": msg.created_at,
    }
    if msg.client_message_id:
        out["messageId"] = msg.client_message_id
    if msg.interrupted:
        out["interrupted"] = True
    return out


def export_markdown(conv: Conversation, messages: Sequence[Message]) -> str:
    lines = [f"# {conv.title or 'Conversation'}", ""]
    meta = [f"- Conversation: `{conv.id}`", f"- Created: {conv.created_at}"]
    if conv.collection:
        meta.append(f"- Collection: {conv.collection}")
    if conv.document_id:
        meta.append(f"- Document: `{conv.document_id}`")
    if conv.persona:
        meta.append(f"- Persona: {conv.persona}")
    lines += [*meta, ""]
    names = {"user": "User", "assistant": "Assistant", "system-summary": "Summary"}
    for m in messages:
        head = f"## {names.get(m.role, m.role)} — {m.created_at}"
        if m.role == "assistant" and m.model:
            head += f" ({m.model})"
        if m.interrupted:
            head += " [interrupted]"
        lines += [head, "", m.content, ""]
        if m.sources:
            lines.append("Sources:")
            lines += [f"- `{s.id}`: {s.text}" for s in m.sources]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
