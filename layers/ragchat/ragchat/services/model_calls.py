"""Every model call (docs/retrieval.md): retries on transient errors, a deadline, the circuit breaker.

One :class:`ModelCaller` serves one-shot questions and chat turns alike. A call is retried twice
(200 ms, then 400 ms) on a ``TransientError`` while its deadline allows; each attempt is told the time
left (``ModelRequest.timeout_s``) and the adapters bound their connect / first-token waits and their
own retries by it. With a :class:`BreakerScope` the final failure — a timeout included — counts for
that conversation's breaker, and a success closes it again. So a model that never answers costs a
turn at most the turn budget (``MODEL_TURN_BUDGET_SECONDS``, 15 s), then the fallback reply.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ragchat.domain.clock import Clock, system_clock
from ragchat.domain.errors import TransientError
from ragchat.domain.limits import BREAKER_WINDOW_S, RETRY_DELAYS, breaker_open, fallback_needs_breaker_read
from ragchat.domain.models import Completion, Message, ModelRequest
from ragchat.ports import ChatModel, Counters, Metrics, NoteTools, ToolCallingChatModel
from ragchat.services.logs import log_error, message_of
from ragchat.services.metrics import BREAKER_OPENS, MODEL_FAILURES, NO_METRICS

DEFAULT_BUDGET_S = 15.0


class ModelTimeout(TransientError):
    """The model did not answer within the call's deadline."""


@dataclass(slots=True, frozen=True)
class BreakerScope:
    """The breaker of one conversation, as seen at the start of a turn."""

    conversation_id: str
    read_needed: bool  # the latest answer was a fallback: the failure count may be non-zero

    @property
    def key(self) -> str:
        return f"breaker:conv:{self.conversation_id}"


class CircuitBreaker:
    """Per-conversation breaker: open after 5 consecutive failures within 120 s (docs/retrieval.md). The count
    lives in ``Counters``; it is read only when the latest answer was a fallback (a success resets it,
    so after a model answer it is known to be 0)."""

    def __init__(
        self, counters: Counters, clock: Clock = system_clock, *, metrics: Metrics = NO_METRICS
    ) -> None:
        self.counters = counters
        self.clock = clock
        self.metrics = metrics

    @staticmethod
    def scope(conversation_id: str, history: Sequence[Message]) -> BreakerScope:
        return BreakerScope(conversation_id, fallback_needs_breaker_read(history))

    def is_open(self, scope: BreakerScope) -> bool:
        if not scope.read_needed:
            return False
        return breaker_open(self.counters.get(scope.key, now=self.clock()))

    def failure(self, scope: BreakerScope, exc: BaseException) -> None:
        count = self.counters.increment(scope.key, ttl_seconds=BREAKER_WINDOW_S, now=self.clock())
        log_error(scope.conversation_id, type(exc).__name__, message_of(exc), consecutiveFailures=count)
        if breaker_open(count) and not breaker_open(count - 1):
            self.metrics.add(BREAKER_OPENS)

    def success(self, scope: BreakerScope) -> None:
        if scope.read_needed:
            self.counters.reset(scope.key)


class ModelCaller:
    """The chat model behind docs/retrieval.md's retry policy and (optionally) the circuit breaker."""

    def __init__(
        self,
        model: ChatModel,
        *,
        sleep: Callable[[float], None] = time.sleep,
        breaker: CircuitBreaker | None = None,
        delays: Sequence[float] = RETRY_DELAYS,
        budget_s: float = DEFAULT_BUDGET_S,
        clock: Clock = time.monotonic,
        metrics: Metrics = NO_METRICS,
    ) -> None:
        self.model = model
        self.metrics = metrics
        self.sleep = sleep
        self.breaker = breaker
        self.delays = tuple(delays)
        self.budget_s = budget_s
        self.clock = clock
        self._tool_model = model if isinstance(model, ToolCallingChatModel) else None

    @property
    def model_id(self) -> str:
        return self.model.model_id

    @property
    def calls_tools(self) -> bool:
        """Whether the model can answer through note tools (``CHAT_MODE=tools``)."""
        return self._tool_model is not None

    def deadline(self) -> float:
        """The deadline (on ``clock``) of a turn starting now."""
        return self.clock() + self.budget_s

    def is_open(self, scope: BreakerScope | None) -> bool:
        return bool(scope and self.breaker and self.breaker.is_open(scope))

    def complete(
        self,
        request: ModelRequest,
        *,
        scope: BreakerScope | None = None,
        tools: NoteTools | None = None,
        deadline: float | None = None,
    ) -> Completion:
        """One answer, retried on transient errors while ``deadline`` (default: the turn budget from
        now) allows; the final failure propagates, after counting for ``scope``'s breaker."""
        deadline = self.deadline() if deadline is None else deadline
        try:
            completion = self._attempts(request, tools, deadline)
        except Exception as exc:
            self.failed(scope, exc)
            raise
        self.succeeded(scope)
        return completion

    def _attempts(self, request: ModelRequest, tools: NoteTools | None, deadline: float) -> Completion:
        tool_model = self._tool_model if tools is not None else None
        for attempt in range(len(self.delays) + 1):
            timed_request = dataclasses.replace(request, timeout_s=self.time_left(deadline))
            try:
                if tool_model is not None and tools is not None:
                    return tool_model.complete_with_tools(timed_request, tools)
                return self.model.complete(timed_request)
            except TransientError:
                delay = self.delays[attempt] if attempt < len(self.delays) else None
                if delay is None or self.clock() + delay >= deadline:
                    raise
                self.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def time_left(self, deadline: float) -> float:
        left = deadline - self.clock()
        if left <= 0:
            raise ModelTimeout(f"The model did not answer within {self.budget_s:g} s")
        return left

    def stream(self, request: ModelRequest, *, deadline: float | None = None) -> Iterator[str]:
        """Text deltas of one answer (not retried: deltas may already have been sent). Past
        ``deadline`` the stream stops with :class:`ModelTimeout` (raised while iterating, like any
        model failure)."""
        deadline = self.deadline() if deadline is None else deadline
        deltas = self.model.stream(dataclasses.replace(request, timeout_s=self.time_left(deadline)))
        try:
            for delta in deltas:
                yield delta
                self.time_left(deadline)  # raises ModelTimeout once the budget is spent
        finally:
            close = getattr(deltas, "close", None)
            if callable(close):
                close()

    def failed(self, scope: BreakerScope | None, exc: BaseException) -> None:
        self.metrics.add(MODEL_FAILURES)
        if scope is not None and self.breaker is not None:
            self.breaker.failure(scope, exc)

    def succeeded(self, scope: BreakerScope | None) -> None:
        if scope is not None and self.breaker is not None:
            self.breaker.success(scope)
