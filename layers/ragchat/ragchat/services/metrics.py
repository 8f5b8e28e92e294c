"""The metrics the services emit through the ``Metrics`` port (docs/deploy.md), by name.

CloudWatch alarms and the dashboard in ``template.yaml`` use these names (namespace ``ragchat``,
dimension ``service``; ``PhaseLatencyMs`` also ``phase``):

- ``Turns`` (Count): answered chat turns and one-shot questions, whatever answered them.
- ``GuardRefusals`` (Count): questions refused by the retrieval guard (``chat.guard``).
- ``ModelFailures`` (Count): model calls that failed after their retries (``chat.error``).
- ``BreakerOpens`` (Count): a conversation's circuit breaker opening (the failure that reaches the
  threshold).
- ``PhaseLatencyMs`` (Milliseconds, dimension ``phase``): the ``chat.metrics`` phases of a turn.
- ``IngestionSeconds`` (Seconds): a document from submission to ``READY`` (``ingest.ready``).
- ``IngestionFailed`` (Count): documents that ended ``FAILED`` (``ingest.failed``).
- ``IngestionReconciled`` (Count): documents an ingestion execution left unfinished (it failed,
  timed out or was aborted before its own failure step ran) and the reconciler marked ``FAILED``
  (``ingest.reconciled``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragchat.ports import Metrics

TURNS = "Turns"
GUARD_REFUSALS = "GuardRefusals"
MODEL_FAILURES = "ModelFailures"
BREAKER_OPENS = "BreakerOpens"
PHASE_LATENCY_MS = "PhaseLatencyMs"
INGESTION_SECONDS = "IngestionSeconds"
INGESTION_FAILED = "IngestionFailed"
INGESTION_RECONCILED = "IngestionReconciled"

PHASES = ("embedding_generation", "vector_search", "ai_completion", "db_read", "db_write")


class NoMetrics:
    """The ``Metrics`` port that records nothing (local runs; services built without metrics)."""

    def add(
        self,
        name: str,
        value: float = 1.0,
        *,
        unit: str = "Count",
        dimensions: Mapping[str, str] | None = None,
    ) -> None:
        return None


NO_METRICS = NoMetrics()


def record_turn(metrics: Metrics, timings: Mapping[str, float]) -> None:
    """One answered turn: ``Turns`` + 1 and the latency of each docs/deploy.md phase it went through."""
    metrics.add(TURNS)
    for phase in PHASES:
        if phase in timings:
            metrics.add(PHASE_LATENCY_MS, timings[phase], unit="Milliseconds", dimensions={"phase": phase})
