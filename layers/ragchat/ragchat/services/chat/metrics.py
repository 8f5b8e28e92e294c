"""Per-turn observability (docs/deploy.md): phase timings, the rolling p50/p95 turn latency and the turn's
metrics (``Turns``, ``PhaseLatencyMs``; ``ragchat.services.metrics``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from aws_lambda_powertools import Logger

from ragchat.domain.limits import LatencyWindow
from ragchat.services.metrics import NO_METRICS, PHASES, record_turn

if TYPE_CHECKING:
    from ragchat.ports import Metrics

logger = Logger(service="ragchat", child=True)

T = TypeVar("T")


def timed(timings: dict[str, float], phase: str, fn: Callable[[], T]) -> T:
    """Run ``fn``, adding its duration (ms) to ``timings[phase]``."""
    t0 = time.perf_counter()
    try:
        return fn()
    finally:
        timings[phase] = timings.get(phase, 0.0) + (time.perf_counter() - t0) * 1000


class TurnMetrics:
    """Logs ``chat.metrics`` per phase of every turn and ``chat.latency`` every tenth turn; records
    the turn in ``metrics``."""

    def __init__(self, metrics: Metrics = NO_METRICS) -> None:
        self.latencies = LatencyWindow(50, 10)
        self.metrics = metrics

    def log_turn(self, conversation_id: str, timings: dict[str, float], started: float) -> None:
        record_turn(self.metrics, timings)
        for phase in PHASES:
            if phase in timings:
                logger.info(
                    "chat.metrics",
                    extra={"conversationId": conversation_id, "phase": phase, "ms": round(timings[phase], 3)},
                )
        stats = self.latencies.add((time.perf_counter() - started) * 1000)
        if stats is not None:
            logger.info(
                "chat.latency",
                extra={
                    "conversationId": conversation_id,
                    "p50": round(stats[0], 3),
                    "p95": round(stats[1], 3),
                    "window": len(self.latencies),
                },
            )
