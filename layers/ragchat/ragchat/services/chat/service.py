"""``ChatService``: the chat area's one entry point (SPEC §4, §7–§12), wiring its collaborators.

- :mod:`.conversations` — conversation CRUD, transcripts, the rewind an edit needs;
- :mod:`.turns` — send / edit / stream orchestration;
- :mod:`.history` — the history window and its summary; :mod:`.limits` — rate limits;
- :mod:`.replay` — idempotency by ``messageId``; :mod:`.streaming` — SPEC §10 events;
- :mod:`.tools` — note tools for tool-use mode;
- :class:`ragchat.services.model_calls.ModelCaller` — retries and the circuit breaker (shared with
  one-shot questions).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from ragchat.domain.clock import Clock, system_clock
from ragchat.domain.errors import ValidationError
from ragchat.domain.models import Conversation, Feedback, Message, Page
from ragchat.domain.personas import BUILTIN_PERSONAS, DEFAULT_PERSONA, resolve_persona
from ragchat.services.answering import Answerer
from ragchat.services.chat.conversations import Conversations
from ragchat.services.chat.history import HistoryKeeper, ModelSummarizer
from ragchat.services.chat.limits import RateLimiter
from ragchat.services.chat.metrics import TurnMetrics
from ragchat.services.chat.pump import StreamPacing
from ragchat.services.chat.replay import Replays
from ragchat.services.chat.state import TurnResult
from ragchat.services.chat.stops import StopFlags
from ragchat.services.chat.streaming import Event
from ragchat.services.chat.turns import TurnParts, Turns
from ragchat.services.logs import log_error
from ragchat.services.metrics import NO_METRICS
from ragchat.services.model_calls import CircuitBreaker, ModelCaller

if TYPE_CHECKING:
    from ragchat.config import Settings
    from ragchat.ports import ChatModel, ConversationStore, Counters, DocumentStore, Metrics, Summarizer
    from ragchat.services.retrieval import Retriever


def _chat_limiter(counters: Counters, clock: Clock, settings: Settings) -> RateLimiter | None:
    """The per-conversation / per-IP chat limiter, when rate limiting is on."""
    if not settings.enable_rate_limiting:
        return None
    requests, window_s = settings.rate_limit("chat")
    return RateLimiter(
        counters, clock, requests=requests, window_s=window_s, ip_requests=settings.rate_limit_ip_requests
    )


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
        personas: Mapping[str, str] | None = None,
        summarizer: Summarizer | None = None,
        pacing: StreamPacing | None = None,
        metrics: Metrics = NO_METRICS,
    ) -> None:
        """``personas``: the registry loaded at start-up (``ragchat.container.load_personas``;
        default: the built-in ones). ``summarizer`` writes history summaries (default: the chat
        model, see :class:`ModelSummarizer`; pass :class:`ExtractiveSummarizer` for a model that is
        no LLM). ``pacing``: keep-alive and stop-check timing of streams (tests inject its clock).
        ``metrics`` receives the turn metrics (``ragchat.services.metrics``)."""
        self.settings = settings
        self.personas: dict[str, str] = dict(BUILTIN_PERSONAS if personas is None else personas)
        breaker = CircuitBreaker(counters, clock, metrics=metrics)
        caller = ModelCaller(
            model,
            sleep=sleep,
            breaker=breaker,
            budget_s=settings.model_turn_budget_s,
            clock=clock,
            metrics=metrics,
        )
        self.conversations = Conversations(conversations, documents, self._check_persona)
        self.stops = StopFlags(counters, clock)
        limiter = _chat_limiter(counters, clock, settings)
        parts = TurnParts(
            conversations=self.conversations,
            store=conversations,
            documents=documents,
            retriever=retriever,
            caller=caller,
            breaker=breaker,
            answerer=Answerer(caller, settings),
            history=HistoryKeeper(
                conversations,
                summarizer or ModelSummarizer(caller),
                max_history=settings.max_chat_history,
                summarize=settings.enable_chat_summarization,
            ),
            limiter=limiter,
            replays=Replays(conversations, clock, sleep, takeover_s=settings.idempotency_takeover_s),
            persona=self._persona_paragraph,
            metrics=TurnMetrics(metrics),
            stops=self.stops,
            pacing=pacing or StreamPacing(),
        )
        self.turns = Turns(parts, settings)

    # ------------------------------------------------------------------ personas
    def _check_persona(self, name: str) -> str:
        return resolve_persona(self.personas, name)

    def _persona_paragraph(self, conv: Conversation) -> str:
        try:
            return resolve_persona(self.personas, conv.persona)
        except ValidationError:
            log_error(conv.id, "UnknownPersona", f"persona {conv.persona!r} no longer configured")
            return self.personas.get(DEFAULT_PERSONA, "")

    # ------------------------------------------------------------------ conversations
    def create_conversation(
        self,
        owner: str,
        *,
        title: str | None = None,
        collection: str | None = None,
        document_id: str | None = None,
        persona: str | None = None,
    ) -> Conversation:
        return self.conversations.create(
            owner, title=title, collection=collection, document_id=document_id, persona=persona
        )

    def list_conversations(
        self, owner: str, *, limit: int = 50, cursor: str | None = None
    ) -> Page[Conversation]:
        return self.conversations.list_conversations(owner, limit=limit, cursor=cursor)

    def get_conversation(self, owner: str, conv_id: str) -> Conversation:
        return self.conversations.get(owner, conv_id)

    def messages(
        self, owner: str, conv_id: str, *, limit: int = 1000, cursor: str | None = None
    ) -> Page[Message]:
        return self.conversations.messages(owner, conv_id, limit=limit, cursor=cursor)

    def rename_conversation(self, owner: str, conv_id: str, title: object) -> Conversation:
        return self.conversations.rename(owner, conv_id, title)

    def delete_conversation(self, owner: str, conv_id: str) -> None:
        self.conversations.delete(owner, conv_id)

    def rate(self, owner: str, conv_id: str, message_id: str, feedback: Feedback | None) -> Message:
        """Thumbs up / down on an answer, stored with the message (``None`` clears it)."""
        return self.conversations.rate(owner, conv_id, message_id, feedback)

    def transcript(self, owner: str, conv_id: str) -> tuple[Conversation, list[Message]]:
        """A conversation and all its messages, ascending (for an export)."""
        return self.conversations.transcript(owner, conv_id)

    # ------------------------------------------------------------------ turns
    def send(
        self,
        owner: str,
        conv_id: str,
        content: object,
        *,
        message_id: str | None = None,
        ip: str | None = None,
    ) -> TurnResult:
        return self.turns.send(owner, conv_id, content, message_id=message_id, ip=ip)

    def edit(
        self, owner: str, conv_id: str, message_id: str, content: object, *, ip: str | None = None
    ) -> TurnResult:
        return self.turns.edit(owner, conv_id, message_id, content, ip=ip)

    def stream(
        self,
        owner: str,
        conv_id: str,
        content: object,
        *,
        message_id: str | None = None,
        ip: str | None = None,
    ) -> tuple[str, Iterator[Event]]:
        """(model, events): SPEC §10 ``answer_start``, ``answer_delta``…, ``sources``, ``answer_end``;
        or ``refusal`` / ``error``. Errors before the first event raise here."""
        return self.turns.stream(owner, conv_id, content, message_id=message_id, ip=ip)

    def stop(self, owner: str, conv_id: str) -> bool:
        """Stop the conversation's streaming answer in flight, from any request or instance sharing
        the store; returns whether one was in flight. A JSON turn (one model request) cannot be
        stopped. Raises ``NotFound`` for a conversation that is not the caller's."""
        self.conversations.get(owner, conv_id)
        return self.stops.stop(conv_id)
