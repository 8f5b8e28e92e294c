"""What a chat Lambda is made of (docs/api.md, §7–§12), built here only: :func:`build_chat` wires
the turn's collaborators from ports (tests call it with fakes); :class:`ChatRoot` adds the lazily
built ``retriever``, ``chat`` (conversations, turns, stops, history) and ``ask`` (one-shot)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING

from ragchat.bootstrap.calibration import CalibrationRoot
from ragchat.bootstrap.workspaces import Scope, WorkspaceRoot
from ragchat.domain.claude import token_factor
from ragchat.domain.clock import Clock, system_clock
from ragchat.services.answering import Answerer, AskService
from ragchat.services.chat.conversations import Conversations
from ragchat.services.chat.history import ExtractiveSummarizer, HistoryKeeper, ModelSummarizer
from ragchat.services.chat.limits import ChatLimits
from ragchat.services.chat.metrics import TurnMetrics
from ragchat.services.chat.personas import Personas
from ragchat.services.chat.pump import StreamPacing
from ragchat.services.chat.replay import Replays
from ragchat.services.chat.stops import StopFlags, TurnLeases
from ragchat.services.chat.turns import TurnParts, Turns
from ragchat.services.limits import RequestLimiter
from ragchat.services.metrics import NO_METRICS
from ragchat.services.model_calls import CircuitBreaker, ModelCaller

if TYPE_CHECKING:
    from ragchat.config import Settings
    from ragchat.ports import ChatModel, ConversationStore, Counters, DocumentStore, Metrics, Summarizer
    from ragchat.services.retrieval import Retriever


@dataclasses.dataclass(frozen=True, slots=True)
class Chat:
    """The chat area's collaborators the routes use (no facade: each route calls the one it needs)."""

    conversations: Conversations  # CRUD, transcripts
    turns: Turns  # send / edit / stream
    stops: StopFlags  # stopping an answer in flight
    history: HistoryKeeper  # the history window and its summary


def build_chat(
    *,
    conversations: ConversationStore,
    counters: Counters,
    retriever: Retriever,
    model: ChatModel,
    documents: DocumentStore,
    settings: Settings,
    clock: Clock = system_clock,
    sleep: Callable[[float], None] = time.sleep,
    personas: Mapping[str, str] | None = None,
    summarizer: Summarizer | None = None,
    pacing: StreamPacing | None = None,
    metrics: Metrics = NO_METRICS,
    scope: Scope | None = None,  # the workspaces a conversation's turn searches
) -> Chat:
    """``personas``: the registry loaded at start-up (default: the built-in ones). ``summarizer``
    writes history summaries (default: the chat model; :class:`ExtractiveSummarizer` for a model
    that is no LLM). ``pacing``: keep-alive and stop-check timing of streams."""
    breaker = CircuitBreaker(counters, clock, metrics=metrics)
    budget = settings.model_turn_budget_s
    caller = ModelCaller(model, sleep=sleep, breaker=breaker, budget_s=budget, clock=clock, metrics=metrics)
    book = Personas(personas)
    chats = Conversations(conversations, documents, book.check)
    stops = StopFlags(counters, clock)
    history = HistoryKeeper(
        conversations,
        summarizer or ModelSummarizer(caller),
        max_history=settings.max_chat_history,
        summarize=settings.enable_chat_summarization,
        token_factor=token_factor(getattr(model, "model_id", None)),
    )
    parts = TurnParts(
        conversations=chats,
        store=conversations,
        documents=documents,
        retriever=retriever,
        caller=caller,
        breaker=breaker,
        answerer=Answerer(caller, settings),
        history=history,
        limiter=_chat_limiter(counters, clock, settings),
        replays=Replays(conversations, clock, sleep, takeover_s=settings.idempotency_takeover_s),
        persona=book.paragraph,
        metrics=TurnMetrics(metrics),
        stops=stops,
        leases=TurnLeases(counters, clock),
        pacing=pacing or StreamPacing(),
        scope=scope,
    )
    return Chat(conversations=chats, turns=Turns(parts, settings), stops=stops, history=history)


def _chat_limiter(counters: Counters, clock: Clock, settings: Settings) -> ChatLimits | None:
    """The chat's limits over the one limiter, when rate limiting is on."""
    return ChatLimits(RequestLimiter.of(settings, counters, clock)) if settings.enable_rate_limiting else None


class ChatRoot(CalibrationRoot, WorkspaceRoot):
    @cached_property
    def retriever(self) -> Retriever:
        from ragchat.services.retrieval import Retriever
        from ragchat.services.titles import DocumentTitles

        return Retriever(
            self.embedder,
            self.index,
            self.settings,
            metrics=self.metrics,
            titles=DocumentTitles(self.documents),
            passage_vectors=self.passage_vectors,
            answer_titles=self.model_reads() or self.extractive_by_meaning(),  # shown / read
            policy=self.guard_policy(),
            calibration=self.stored_calibration,
            reader=self.reader, reader_threshold=self.reader_threshold(),
        )  # fmt: skip

    @cached_property
    def chat(self) -> Chat:
        from ragchat.adapters.local.extractive import ExtractiveChatModel

        # No LLM behind the extractive answerer: its history summaries are extractive too.
        extractive = isinstance(self.chat_model, ExtractiveChatModel)
        return build_chat(
            conversations=self.conversations,
            counters=self.counters,
            retriever=self.retriever,
            model=self.chat_model,
            documents=self.documents,
            settings=self.settings,
            clock=self.clock,
            personas=self.personas,
            summarizer=ExtractiveSummarizer() if extractive else None,
            metrics=self.metrics,
            scope=self.conversation_scope,
        )

    @cached_property
    def ask(self) -> AskService:
        """One-shot questions: the chat turn's retrieval and answer path, no history, no breaker."""
        s = self.settings
        caller = ModelCaller(self.chat_model, budget_s=s.model_turn_budget_s, metrics=self.metrics)
        answerer = Answerer(caller, s)
        return AskService(self.retriever, answerer, s, metrics=self.metrics, documents=self.documents)
