"""Poison documents are quarantined (issue 30): how many times a document's ingestion has started.

``ragchat serve`` resumes at start every document a previous run left ``PENDING``/``PROCESSING``.
A document that brought the server down (killed by the system, by its user, or crashed) would come
back at every start. So each start of a run (its split) is counted, durably (the ``Counters`` port:
SQLite locally), per content version; a run that ends READY or FAILED clears the count, and a run
stopped by a graceful shutdown takes its count back. A version whose run has started ``limit``
times without ending is not started again: it is FAILED with the reason (``file_errors.interrupted``).
A re-upload is a new version and starts from zero.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragchat.domain.clock import Clock, system_clock

if TYPE_CHECKING:
    from ragchat.ports import Counters

# Long enough for any server to be restarted; a deleted document's count simply expires.
ATTEMPTS_TTL_S = 30 * 24 * 3600


class IngestAttempts:
    """Counts the runs started per (owner, document, version) in ``counters``."""

    def __init__(self, counters: Counters, limit: int, clock: Clock = system_clock) -> None:
        self.counters = counters
        self.limit = max(1, int(limit))
        self.clock = clock

    @staticmethod
    def _key(owner: str, document_id: str, version: str | None) -> str:
        return f"ingest-attempts:{owner}:{document_id}:{version or '-'}"

    def begin(self, owner: str, document_id: str, version: str | None) -> bool:
        """Count one more start; ``False`` when the version already started ``limit`` times without
        ending (the run must not go on: the document is FAILED instead)."""
        key = self._key(owner, document_id, version)
        started = self.counters.increment(key, ttl_seconds=ATTEMPTS_TTL_S, now=self.clock())
        return started <= self.limit

    def take_back(self, owner: str, document_id: str, version: str | None) -> None:
        """A run stopped by a graceful shutdown does not count (the document did nothing wrong)."""
        key = self._key(owner, document_id, version)
        self.counters.increment(key, amount=-1, ttl_seconds=ATTEMPTS_TTL_S, now=self.clock())

    def end(self, owner: str, document_id: str, version: str | None) -> None:
        """The run ended (READY or FAILED): nothing to count any more."""
        self.counters.reset(self._key(owner, document_id, version))
