"""Ingestion's last step, finalize, in bounded steps (docs/ingestion.md): this version's vectors are
switched on, the document becomes READY, then the previous version's notes and vectors are swapped
out and the batch files removed, ``FINALIZE_STEP_CHUNKS`` chunks (1,000) per step. In the cloud each
step is one Lambda invocation and the state machine loops (``Finalize`` → ``FinalizeDone``) until
``finished``, so no invocation grows with the document (a 50,000-chunk document is ~50 steps of
switching and as many of swapping, each a few seconds, where one call would need more than the
function's 300 s); locally :meth:`FinalizeSteps.finalize` runs the steps one after another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from ragchat.domain.clock import parse_iso
from ragchat.domain.errors import NotFound, ValidationError
from ragchat.domain.ids import note_id, version_tags
from ragchat.domain.models import Document, DocumentStatus
from ragchat.services.blob_keys import work_prefix
from ragchat.services.metrics import INGESTION_SECONDS

if TYPE_CHECKING:
    from ragchat.config import Settings
    from ragchat.domain.clock import Clock
    from ragchat.ports import BlobStore, DocumentStore, Metrics, VectorIndex
    from ragchat.services.ingest_attempts import IngestAttempts

logger = Logger(service="ragchat", child=True)

SUPERSEDED = "SUPERSEDED"


class FinalizeSteps:
    """finalize, for :class:`~ragchat.services.ingest_steps.IngestSteps` (which provides the rest)."""

    if TYPE_CHECKING:
        documents: DocumentStore
        blobs: BlobStore
        index: VectorIndex
        settings: Settings
        clock: Clock
        metrics: Metrics
        attempts: IngestAttempts | None

        def _current(
            self, owner: str, document_id: str, version: str | None, step: str
        ) -> Document | None: ...
        def _remove_indexed(self, owner: str, document_id: str, version: str | None = None) -> None: ...
        def _remove_notes(
            self, owner: str, document_id: str, ids: list[str], reason: str, *, settled: bool = False
        ) -> None: ...

    def finalize(
        self, owner: str, document_id: str, chunk_count: int, version: str | None = None
    ) -> dict[str, Any]:
        """:meth:`finalize_step` with no bound (the local pipeline, which has no time limit per call):
        the whole document is switched on in one index call, as one transaction in the embedded
        index, so a server killed midway leaves nothing of an unfinished document retrievable.
        ``{"status", "chunkCount"}``."""
        result = self.finalize_step(owner, document_id, chunk_count, version, bounded=False)
        return {"status": result["status"], "chunkCount": result["chunkCount"]}

    def finalize_step(
        self,
        owner: str,
        document_id: str,
        chunk_count: int,
        version: str | None = None,
        cursor: str = "",
        *,
        bounded: bool = True,
    ) -> dict[str, Any]:
        """One bounded step of making the document READY: the phases below, as far as
        ``FINALIZE_STEP_CHUNKS`` chunks of work take it (a small document: all of them, in one call).
        The state machine calls it again with the returned ``cursor`` until ``finished``, so no call
        grows with the document (a 50,000-chunk document could not be switched on in one Lambda
        call's 300 s). Each step is idempotent: a retried one redoes the same bounded work.
        ``{"status", "chunkCount", "finished", "cursor"}``; the cursor (opaque to the caller):

        * ``switch:<i>:<on|off>``: this version's vectors from chunk ``i`` are switched to the
          record's ``enabled`` (written disabled, nothing half-indexed was retrievable). Should the
          record change meanwhile (a PATCH leaves an unfinished document to the pipeline), the switch
          starts again from chunk 0 in the new state; a document disabled from the start has none;
        * ``ready:<on|off>``: the record becomes READY with its chunk count; if it was enabled or
          disabled at that very moment, ``fix:<i>`` applies the record's state the same way;
        * ``swap:<notes cursor>``: write-then-swap, the swap: the document's other notes (the
          previous version's, a stale run's, ids at or beyond the chunk count) go, vectors first, a
          page at a time; the last page done, the batch files go and the document is READY.

        ``bounded=False`` (:meth:`finalize`): every phase to the end, in one call."""
        budget = max(1, int(self.settings.finalize_step_chunks)) if bounded else None
        return self._steps(owner, document_id, int(chunk_count), version, cursor, budget)

    def _steps(
        self, owner: str, document_id: str, count: int, version: str | None, cursor: str, budget: int | None
    ) -> dict[str, Any]:
        """Phases from ``cursor`` until ``budget`` chunks of work are done (``None``: to the end)."""
        left = budget if budget is not None else 2 * count + 1  # more than the whole document's work
        while True:
            result, used = self._phase(owner, document_id, count, version, cursor, max(1, left))
            left = left - used if budget is not None else left
            if result["finished"] or left <= 0:
                return result
            cursor = str(result["cursor"])

    def _phase(
        self, owner: str, document_id: str, count: int, version: str | None, cursor: str, budget: int
    ) -> tuple[dict[str, Any], int]:
        """One phase of :meth:`finalize_step` within ``budget`` chunks: (its result, chunks used)."""
        doc = self._current(owner, document_id, version, "finalize")
        if doc is None:
            self.blobs.delete_prefix(work_prefix(document_id, version))  # only this run's own batches
            return {"status": SUPERSEDED, "chunkCount": 0, "finished": True, "cursor": ""}, 0
        version = version if version is not None else doc.version
        wanted = "on" if doc.enabled else "off"
        phase, _, rest = (cursor or ("switch:0:on" if doc.enabled else "ready:off")).partition(":")
        if phase in ("switch", "fix"):
            at, _, applied = rest.partition(":")
            start = int(at or 0) if phase == "fix" or applied == wanted else 0  # changed: from 0 again
            stop = min(count, start + budget)
            if start < stop:
                tags = version_tags((), version)  # this version's: its note ids are <doc>-NNNNNv<tag>
                on = bool(doc.enabled)
                self.index.set_enabled(
                    owner, document_id, on, chunk_count=count, tags=tags, chunks=(start, stop)
                )
            done = "swap:" if phase == "fix" else f"ready:{wanted}"
            following = f"{phase}:{stop}:{wanted}" if stop < count else done
            return self._finalizing(count, following), stop - start
        if phase == "ready":
            changes = {"status": DocumentStatus.READY, "chunk_count": count, "error": None}
            updated = self.documents.update_document(owner, document_id, changes)
            if updated is None:  # deleted at the last moment: leave nothing behind
                self._remove_indexed(owner, document_id, version)
                raise NotFound(f"Document {document_id} not found (deleted while ingesting?)")
            same = ("on" if updated.enabled else "off") == rest
            return self._finalizing(count, "swap:" if same or count == 0 else "fix:0"), 0
        if phase != "swap":
            raise ValidationError(f"unknown finalize cursor {cursor!r}")
        page = self.documents.list_notes(owner, document_id=document_id, limit=budget, cursor=rest or None)
        mine = {note_id(document_id, n.chunk_index, version) for n in page.items if n.chunk_index < count}
        others = [n.id for n in page.items if n.id not in mine]
        # settled: on a near-real-time index, the step ends once the previous version is gone
        self._remove_notes(owner, document_id, others, "swapped", settled=True)
        if page.cursor is not None:
            return self._finalizing(count, f"swap:{page.cursor}"), max(1, len(page.items))
        return self._ready(doc, count, version), len(page.items)

    @staticmethod
    def _finalizing(chunk_count: int, cursor: str) -> dict[str, Any]:
        return {
            "status": DocumentStatus.PROCESSING.value,
            "chunkCount": chunk_count,
            "finished": False,
            "cursor": cursor,
        }

    def _ready(self, doc: Document, chunk_count: int, version: str | None) -> dict[str, Any]:
        """finalize's last step: the run's bookkeeping and batch files go, its times are logged."""
        if self.attempts is not None:
            self.attempts.end(doc.owner, doc.id, version)
        self.blobs.delete_prefix(work_prefix(doc.id, version))
        now = self.clock()
        extra: dict[str, Any] = {"documentId": doc.id, "chunkCount": chunk_count}
        try:
            extra["totalMs"] = round((now - parse_iso(doc.created_at)) * 1000, 1)
            self.metrics.add(INGESTION_SECONDS, extra["totalMs"] / 1000, unit="Seconds")
            if doc.indexing_since:  # from the split's end to READY: embedding, indexing, finalize
                extra["indexingMs"] = round((now - parse_iso(doc.indexing_since)) * 1000, 1)
        except (ValueError, TypeError):
            pass
        logger.info("ingest.ready", extra=extra)
        return {
            "status": DocumentStatus.READY.value,
            "chunkCount": chunk_count,
            "finished": True,
            "cursor": "",
        }
