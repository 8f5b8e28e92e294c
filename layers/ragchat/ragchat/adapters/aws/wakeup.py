"""Absorbing wake-ups of a sleeping vector store (OpenSearch Serverless NextGen at 0 OCU).

A NextGen collection group scaled to zero answers its first request after idle slowly (10–30 s)
or with 503/429 while capacity comes up. :class:`WakePolicy` retries such failures with capped
exponential backoff **inside a deadline**: no attempt starts after ``budget_s``, each attempt's
timeout is the time left (capped at ``attempt_timeout_s``) and each pause is clipped to it, so a
call costs at most ``budget_s`` plus one second (the last attempt's timeout never goes below 1 s).
When the deadline passes, :class:`VectorIndexWaking` is raised: a ``TransientError`` (HTTP 503
for the API) whose class name is the error name the ingestion state machine retries on.

The clock and the sleep are injected, so tests drive wake-ups without waiting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ragchat.domain.errors import TransientError

logger = logging.getLogger("ragchat.adapters.wakeup")
T = TypeVar("T")

WAKE_STATUSES = frozenset({429, 502, 503, 504})


class VectorIndexWaking(TransientError):
    """The vector store did not answer within the deadline (asleep, throttled or unreachable)."""


def is_wake_error(exc: BaseException) -> bool:
    """503/429/502/504 answers, timeouts and refused connections from opensearch-py."""
    try:
        from opensearchpy.exceptions import ConnectionError as OSConnectionError
        from opensearchpy.exceptions import TransportError
    except ImportError:  # pragma: no cover - opensearch-py is in the layer
        return False
    if isinstance(exc, OSConnectionError):  # includes ConnectionTimeout
        return True
    return isinstance(exc, TransportError) and exc.status_code in WAKE_STATUSES


@dataclass
class WakePolicy:
    budget_s: float = 12.0
    attempt_timeout_s: float = 10.0
    first_delay_s: float = 0.5
    max_delay_s: float = 4.0
    clock: Callable[[], float] = field(default=time.monotonic)
    sleep: Callable[[float], None] = field(default=time.sleep)

    def run(self, what: str, fn: Callable[[float], T]) -> T:
        """Call ``fn(attempt_timeout)`` until it succeeds, retrying wake errors until the deadline."""
        deadline = self.clock() + self.budget_s
        delay = self.first_delay_s
        attempt = 0
        while True:
            attempt += 1
            left = deadline - self.clock()
            try:
                return fn(max(min(self.attempt_timeout_s, left), 1.0))
            except Exception as exc:
                if not is_wake_error(exc):
                    raise
                left = deadline - self.clock()
                if left <= 0:
                    raise VectorIndexWaking(
                        f"The vector store did not answer {what} within {self.budget_s:g} s "
                        f"({attempt} attempt(s)): {exc}"
                    ) from exc
                logger.warning(
                    "vector.wake_retry",
                    extra={"operation": what, "attempt": attempt, "error": str(exc)[:200]},
                )
                self.sleep(min(delay, left))
                delay = min(delay * 2, self.max_delay_s)
