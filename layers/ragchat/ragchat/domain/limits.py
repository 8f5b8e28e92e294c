"""Limits on a chat turn, as arithmetic (docs/retrieval.md, §11): the sliding-window rate limit, the flood
check, the circuit breaker, model-call retries and the rolling latency window. No I/O: the services
keep the counters and ask this module what they mean."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ragchat.domain.messages import FALLBACK_MODEL
from ragchat.domain.models import Message

BREAKER_THRESHOLD = 5
BREAKER_WINDOW_S = 120
FLOOD_MESSAGES = 5
FLOOD_MIN_AVG_GAP_S = 2.0


@dataclass(slots=True, frozen=True)
class WindowPosition:
    bucket: int
    elapsed: float  # seconds since the current bucket began


def window_position(now: float, window_s: int) -> WindowPosition:
    bucket = math.floor(now / window_s)
    return WindowPosition(bucket, now - bucket * window_s)


def sliding_count(previous: int, current: int, elapsed: float, window_s: int) -> float:
    """Two-bucket sliding window counter: the previous bucket weighted by how much of it still
    overlaps the window, plus the current bucket."""
    overlap = max(0.0, 1.0 - elapsed / window_s)
    return previous * overlap + current


@dataclass(slots=True, frozen=True)
class Rule:
    """At most ``requests`` per ``window_s`` seconds (a two-bucket sliding window)."""

    requests: int
    window_s: int


def admit_ceiling(previous: int, elapsed: float, window_s: int, limit: int) -> int:
    """The most the current bucket may hold, this request included, for the sliding count to stay
    within ``limit``: a request is admitted iff the current bucket plus it is at most this."""
    overlap = max(0.0, 1.0 - elapsed / window_s)
    return math.floor(limit - previous * overlap + 1e-9)


def sliding_retry_after(previous: int, current: int, elapsed: float, window_s: int, limit: int) -> int:
    """Seconds until one more request fits under ``limit`` (at least 1)."""
    room = limit - 1  # the estimate must drop to this for one more request to be allowed
    if current <= room:
        if previous <= 0:
            return 1
        # previous * (1 - e/W) + current <= room  ⇔  e >= W * (1 - (room - current)/previous)
        needed = window_s * (1.0 - (room - current) / previous)
        wait = needed - elapsed
    else:
        # The current bucket alone is over: wait for the next bucket, where it becomes "previous".
        needed_next = window_s * max(0.0, 1.0 - room / current) if current else 0.0
        wait = (window_s - elapsed) + needed_next
    return max(1, math.ceil(wait))


def flood_retry_after(
    user_times: Sequence[float],
    now: float,
    *,
    count: int = FLOOD_MESSAGES,
    min_avg_gap: float = FLOOD_MIN_AVG_GAP_S,
) -> int | None:
    """Flood check (docs/security.md): ``user_times`` are the earlier user messages' times (any order); with
    the incoming message at ``now`` the last ``count`` must be on average at least ``min_avg_gap``
    seconds apart. Returns the seconds to wait, or ``None`` when the message may go through."""
    times = sorted(user_times)[-(count - 1) :] if count > 1 else []
    if len(times) < count - 1:
        return None
    span = now - times[0]
    gaps = count - 1
    if span / gaps >= min_avg_gap:
        return None
    return max(1, math.ceil(min_avg_gap * gaps - span))


# --------------------------------------------------------------------------- circuit breaker
def breaker_open(consecutive_failures: int, *, threshold: int = BREAKER_THRESHOLD) -> bool:
    """Open after ``threshold`` consecutive failures inside the breaker window (the counter that holds
    them expires ``BREAKER_WINDOW_S`` after the first failure; a success resets it)."""
    return consecutive_failures >= threshold


def fallback_needs_breaker_read(history: Sequence[Message]) -> bool:
    """Whether the breaker counter must be read before calling the model: only when the latest
    assistant reply was itself a fallback (a success resets the counter, so after a model answer
    the count is known to be 0 without a read)."""
    for m in reversed(history):
        if m.role == "assistant":
            return m.model == FALLBACK_MODEL
    return False


class LatencyWindow:
    """The last ``size`` turn latencies; every ``every``-th sample returns (p50, p95)."""

    def __init__(self, size: int = 50, every: int = 10) -> None:
        self._samples: deque[float] = deque(maxlen=size)
        self._every = every
        self._seen = 0

    def __len__(self) -> int:
        return len(self._samples)

    def add(self, ms: float) -> tuple[float, float] | None:
        self._samples.append(ms)
        self._seen += 1
        if self._seen % self._every:
            return None
        return percentile(self._samples, 50), percentile(self._samples, 95)


def percentile(values: Iterable[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


# --------------------------------------------------------------------------- model-call retries
Sleep = Callable[[float], None]
RETRY_DELAYS: tuple[float, ...] = (0.2, 0.4)
R = TypeVar("R")


@dataclass(slots=True, frozen=True)
class Budget:
    """The time a model call may still take: ``deadline`` on ``clock`` (``None``: unbounded)."""

    deadline: float | None
    clock: Callable[[], float]

    @classmethod
    def start(cls, seconds: float | None, clock: Callable[[], float]) -> Budget:
        return cls(None if seconds is None else clock() + seconds, clock)

    def left(self) -> float | None:
        return None if self.deadline is None else self.deadline - self.clock()

    def cap(self, seconds: float) -> float:
        """``seconds``, or less when less time is left."""
        left = self.left()
        return seconds if left is None else max(0.0, min(seconds, left))

    def allows(self, delay: float) -> bool:
        """Whether something is still left after waiting ``delay`` seconds."""
        left = self.left()
        return left is None or left > delay


def call_with_retries(
    call: Callable[[], R],
    *,
    retryable: Callable[[BaseException], bool],
    sleep: Sleep,
    delays: Sequence[float] = RETRY_DELAYS,
    budget: Budget | None = None,
) -> R:
    """Run ``call``; on an exception ``retryable`` accepts, sleep ``delays[i]`` and try again (so
    ``len(delays)`` retries: the spec's 2 retries with 200 ms then 400 ms) — but only while ``budget``
    leaves time after the wait. Anything else, or the last failure, propagates."""
    for attempt in range(len(delays) + 1):
        try:
            return call()
        except Exception as exc:
            if attempt >= len(delays) or not retryable(exc):
                raise
            if budget is not None and not budget.allows(delays[attempt]):
                raise
            sleep(delays[attempt])
    raise AssertionError("unreachable")  # pragma: no cover
