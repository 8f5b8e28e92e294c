"""The ingestion pipeline's steps (docs/ingestion.md): split, embed + index each batch, finalize, fail.

The steps are plain methods taking and returning JSON-able values: in the cloud the Step Functions
state machine calls each in its own Lambda invocation (camelCase keys in and out); locally
:mod:`ragchat.services.ingest_runner` runs them in-process (several documents fairly, their embedder
calls coalesced). The order and the failure policy are :mod:`ragchat.services.ingest_pipeline`'s.

States: ``PENDING`` (accepted, body stored) → ``PROCESSING`` (split started) → ``READY`` (every
chunk embedded and indexed, vectors switched on) or ``FAILED`` (error recorded, nothing of the
document left in the notes or the index). Vectors are written disabled and only switched on by
:meth:`IngestSteps.finalize`, so a half-indexed document is never retrievable.

Versions (issue 8): every upload is a content version (``Document.version``, written by the submit).
A run is for one version; every step that writes (``split``'s cleanup, ``store_batch``, ``finalize``,
``fail``) checks the document's version first and, if a newer one was submitted meanwhile, does
nothing visible (logs ``ingest.superseded``) and returns normally, so the run ends cleanly. Batch
files live under a per-version prefix, so runs never touch each other's. Note ids are per (document,
chunk index): a write of the old version that passed its check just before the re-upload is
overwritten by the new version's batch of the same index, or removed by its ``finalize`` (chunks at
or beyond its count).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from ragchat.domain.clock import Clock, system_clock, utc_iso
from ragchat.domain.errors import NotFound, ValidationError
from ragchat.domain.file_errors import interrupted
from ragchat.domain.ids import note_id, version_tags
from ragchat.domain.intake import human_error
from ragchat.domain.models import Chunk, Document, DocumentStatus, Note, VectorRecord
from ragchat.domain.parsing import InProcessParser, Parsed, ParseJob, ParsingInterrupted, parse_document
from ragchat.services.blob_keys import EXTRACTED_TYPES, keep_extracted_text, text_key, work_prefix
from ragchat.services.ingest_finalize import SUPERSEDED, FinalizeSteps
from ragchat.services.metrics import INGESTION_FAILED, NO_METRICS
from ragchat.services.split_batches import write_batches

if TYPE_CHECKING:
    from ragchat.config import Settings
    from ragchat.ports import BlobStore, DocumentParser, DocumentStore, Embedder, Metrics, VectorIndex
    from ragchat.services.evidence import IngestEvidence, InlineEvidence
    from ragchat.services.ingest_attempts import IngestAttempts

logger = Logger(service="ragchat", child=True)

# Chunks per batch file (one Step Functions ``embed_index`` invocation each).
BATCH_SIZE = 64
# Without splitting a page (or the whole text) is one chunk, but never more than this many characters:
# embedding models truncate long inputs, and a single multi-megabyte note would be useless as context.
MAX_UNSPLIT_CHARS = 8000


def embedding_texts(chunks: Sequence[dict[str, Any]]) -> list[str]:
    """What a batch's chunks are embedded as: header + text (plain text for batches written before
    headers existed, or with ``CHUNK_HEADERS`` off)."""
    from ragchat.domain.context import embedding_text

    return [embedding_text(str(c.get("header") or ""), str(c["text"])) for c in chunks]


def note_ids_of(documents: DocumentStore, owner: str, document_id: str) -> list[str]:
    """The ids of every note the store holds for a document (every version's), a page at a time."""
    ids: list[str] = []
    cursor: str | None = None
    while True:
        page = documents.list_notes(owner, document_id=document_id, limit=1000, cursor=cursor)
        ids += [note.id for note in page.items]
        cursor = page.cursor
        if cursor is None:
            return ids


# A run's start (a resumed or repeated one too: its progress starts again) and its split's end.
_STARTED = {
    "status": DocumentStatus.PROCESSING, "error": None, "chunks_total": None, "chunks_done": 0,
    "switching": None,  # a switch or cleanup of the previous version's: the new run's finalize decides
}  # fmt: skip
_INDEXING = {"chunks_done": 0}


class IngestSteps(FinalizeSteps):
    """The pipeline's steps. Each takes and returns JSON-able values so a Lambda can run one step."""

    def __init__(
        self,
        documents: DocumentStore,
        blobs: BlobStore,
        embedder: Embedder,
        index: VectorIndex,
        settings: Settings,
        clock: Clock = system_clock,
        *,
        batch_size: int = BATCH_SIZE,
        metrics: Metrics = NO_METRICS,
        evidence: IngestEvidence | InlineEvidence | None = None,
        parser: DocumentParser | None = None,
        attempts: IngestAttempts | None = None,
    ) -> None:
        """``evidence``: evidence vectors pooled from the chunks' own model pass (local,
        ``EVIDENCE_VECTORS=pooled``), stored with each batch. ``parser``: reads each document
        (default: in this process). ``attempts``: counts each run's starts so a document that keeps
        interrupting them is FAILED instead of resumed again (local)."""
        self.attempts = attempts
        self.parser: DocumentParser = parser if parser is not None else InProcessParser()
        self.evidence = evidence
        self.documents = documents
        self.blobs = blobs
        self.embedder = embedder
        self.index = index
        self.settings = settings
        self.clock = clock
        self.batch_size = max(1, int(batch_size))  # chunks per embed_index batch
        self.metrics = metrics

    # ---------------------------------------------------------------- helpers
    def _document(self, owner: str, document_id: str) -> Document:
        doc = self.documents.get_document(owner, document_id)
        if doc is None:
            raise NotFound(f"Document {document_id} not found (deleted while ingesting?)")
        return doc

    def _current(self, owner: str, document_id: str, version: str | None, step: str) -> Document | None:
        """The document, or ``None`` when a newer version was submitted since this run began (a
        re-upload mid-ingestion): the step must then do nothing visible. Logs ``ingest.superseded``."""
        doc = self._document(owner, document_id)
        if version is None or doc.version is None or doc.version == version:
            return doc
        logger.info(
            "ingest.superseded",
            extra={"documentId": document_id, "step": step, "version": version, "current": doc.version},
        )
        return None

    def _note_ids_of(self, owner: str, document_id: str) -> list[str]:
        return note_ids_of(self.documents, owner, document_id)

    def _remove_notes(
        self, owner: str, document_id: str, ids: list[str], reason: str, *, settled: bool = False
    ) -> None:
        if not ids:
            return
        self.index.delete(sorted(ids), settled=settled)  # vectors first: none is left without its note
        for nid in ids:
            self.documents.delete_note(owner, nid)
        logger.info(f"ingest.{reason}", extra={"documentId": document_id, "notes": len(ids)})

    def _remove_indexed(self, owner: str, document_id: str, version: str | None = None) -> None:
        ids = self.documents.delete_notes_of_document(owner, document_id)
        if ids:
            self.index.delete(ids)
        self.index.delete_document(owner, document_id, tags=version_tags(ids, version))

    def parse_job(self, doc: Document) -> ParseJob:
        """How ``doc`` is read: its type, title, chunk size (or one chunk per page, capped at
        ``MAX_UNSPLIT_CHARS``, without splitting), headers, extraction CPU budget and ceilings."""
        s = self.settings
        split = s.enable_text_splitting and doc.split
        size, overlap = (s.chunk_size, s.chunk_overlap) if split else (MAX_UNSPLIT_CHARS, 0)
        ceilings = (
            s.max_extracted_chars,
            s.max_text_expansion,
            s.max_chunks_per_document,
        )
        return ParseJob(doc.content_type, doc.title, size, overlap, s.chunk_headers, s.parse_cpu_s, *ceilings)

    def chunks_of(self, doc: Document, body: bytes) -> list[Chunk]:
        """The chunks ``body`` is cut into as ``doc`` (read in this process: the benchmarks)."""
        return parse_document(body, self.parse_job(doc)).chunks

    def _parse(self, doc: Document) -> Parsed:
        """Read the document's body (released once handed over) with the parser: in-process, or in
        a child process under hard limits (``ragchat serve``)."""

        def body() -> bytes:
            try:
                return self.blobs.get(doc.body_key)
            except KeyError:
                raise NotFound("The document's body is missing from storage") from None

        return self.parser.parse(body, self.parse_job(doc))

    def _keep_text(self, doc: Document, pages: list[tuple[str, dict[str, Any]]]) -> None:
        """Keep a PDF's or HTML page's extracted text (``GET /documents/{id}?include=body`` reads it
        there: no extraction on a request). Text types are their own text."""
        if doc.content_type in EXTRACTED_TYPES:
            keep_extracted_text(self.blobs, doc.owner, doc.id, pages)

    # ---------------------------------------------------------------- steps
    def split(self, owner: str, document_id: str, version: str | None = None) -> dict[str, Any]:
        """``version``: the content version this run is for (the state machine's input); ``None``
        takes the document's current one (the local pipeline). Every later step gets it back."""
        started = time.perf_counter()
        doc = self._current(owner, document_id, version, "split")
        if doc is None:
            return self._empty_plan(owner, document_id, version)
        version = version if version is not None else doc.version
        if self.attempts is not None and not self.attempts.begin(owner, document_id, version):
            raise ValidationError(interrupted(self.attempts.limit))  # quarantined: FAILED, not resumed
        self.documents.update_document(owner, document_id, _STARTED)  # progress starts again
        try:
            parsed = self._parse(doc)
        except ParsingInterrupted:  # a graceful stop: this start does not count
            if self.attempts is not None:
                self.attempts.take_back(owner, document_id, version)
            raise
        chunks, headers = parsed.chunks, parsed.headers
        if self._current(owner, document_id, version, "split") is None:  # re-uploaded while extracting
            return self._empty_plan(owner, document_id, version)
        self._keep_text(doc, parsed.pages)

        # Write-then-swap: a replacement's notes are written beside the previous version's (their ids
        # differ by version), disabled; ``finalize`` switches them on and then removes the others.
        prefix = work_prefix(document_id, version)
        self.blobs.delete_prefix(prefix)
        since = utc_iso(self.clock())  # progress: how many chunks, indexed from now on
        self.documents.update_document(
            owner, document_id, {**_INDEXING, "chunks_total": len(chunks), "indexing_since": since}
        )
        batches = self._write_batches(owner, document_id, version, chunks, headers)
        manifest_key = f"{prefix}manifest.json"
        self.blobs.put(manifest_key, json.dumps(batches).encode("utf-8"), content_type="application/json")
        logger.info(
            "ingest.split",
            extra={
                "documentId": document_id,
                "chunkCount": len(chunks),
                "batchCount": len(batches),
                "ms": round((time.perf_counter() - started) * 1000, 1),
            },
        )
        return {
            "owner": owner,
            "documentId": document_id,
            "version": version,
            "chunkCount": len(chunks),
            "batchCount": len(batches),
            "batches": batches,
            "manifestKey": manifest_key,
        }

    def _empty_plan(self, owner: str, document_id: str, version: str | None) -> dict[str, Any]:
        """What a superseded split returns: nothing to embed; ``finalize`` then does nothing either."""
        prefix = work_prefix(document_id, version)
        return {
            "owner": owner,
            "documentId": document_id,
            "version": version,
            "chunkCount": 0,
            "batchCount": 0,
            "batches": [],
            "manifestKey": f"{prefix}manifest.json",
            "superseded": True,
        }

    def _write_batches(
        self,
        owner: str,
        document_id: str,
        version: str | None,
        chunks: list[Chunk],
        headers: list[str],
    ) -> list[dict[str, Any]]:
        # deleted while its batches are written: stop (the runner then removes what is here)
        return write_batches(
            self.blobs, owner, document_id, version, chunks, headers, self.batch_size,
            still_there=lambda: self._document(owner, document_id),
        )  # fmt: skip

    def embed_index(
        self, owner: str, document_id: str, key: str, version: str | None = None
    ) -> dict[str, Any]:
        started = time.perf_counter()
        doc, chunks = self.read_batch(owner, document_id, key, version)
        if not chunks:
            return {"indexed": 0}
        texts = embedding_texts(chunks)
        t0 = time.perf_counter()
        vectors = self.embed(texts, chunks, [doc.title] * len(chunks))
        embed_ms = (time.perf_counter() - t0) * 1000
        indexed = self.store_batch(owner, document_id, doc, chunks, vectors, version=version)
        logger.info(
            "ingest.embed_index",
            extra={
                "documentId": document_id,
                "key": key,
                "indexed": indexed,
                "embedMs": round(embed_ms, 1),
                "indexMs": round((time.perf_counter() - t0) * 1000 - embed_ms, 1),
                "ms": round((time.perf_counter() - started) * 1000, 1),
            },
        )
        return {"indexed": indexed}

    def read_batch(
        self, owner: str, document_id: str, key: str, version: str | None = None
    ) -> tuple[Document, list[dict[str, Any]]]:
        if not key.startswith(work_prefix(document_id, version)):
            raise ValidationError("batch key does not belong to this document")
        doc = self._document(owner, document_id)
        try:
            batch = json.loads(self.blobs.get(key))
        except KeyError:
            raise NotFound(f"Batch {key} is missing") from None
        chunks: list[dict[str, Any]] = batch["chunks"]
        return doc, chunks

    def embed(
        self,
        texts: list[str],
        chunks: Sequence[dict[str, Any]] | None = None,
        titles: Sequence[str] | None = None,
        call_chunks: int | None = None,
    ) -> list[list[float]]:
        """The vectors of ``texts`` (the chunks as embedded); with the ``chunks``, ``titles`` (and
        ``call_chunks``: its documents' chunks in all) the same pass gives their evidence vectors."""
        vectors: list[list[float]] | None = None
        if self.evidence is not None and chunks is not None and titles is not None:
            try:
                vectors = self.evidence.embed(texts, [str(c["text"]) for c in chunks], titles, call_chunks)
            except Exception as exc:  # a refinement: the chunks are embedded, the warmer does the rest
                logger.warning("evidence.pool_failed", extra={"error": f"{type(exc).__name__}: {exc}"})
        if vectors is None:
            vectors = self.embedder.embed_documents(texts)
        if len(vectors) != len(texts):
            raise RuntimeError(f"Embedder returned {len(vectors)} vectors for {len(texts)} texts")
        return vectors

    def store_batch(
        self,
        owner: str,
        document_id: str,
        doc: Document,
        chunks: list[dict[str, Any]],
        vectors: list[list[float]],
        *,
        version: str | None = None,
    ) -> int:
        """Write one batch's notes and (disabled) vectors; returns how many (0 when ``version`` was
        superseded meanwhile: nothing is written)."""
        if version is not None and self._current(owner, document_id, version, "embed_index") is None:
            return 0
        notes = [
            Note(
                id=note_id(document_id, int(c["index"]), version if version is not None else doc.version),
                document_id=document_id,
                chunk_index=int(c["index"]),
                text=str(c["text"]),
                owner=owner,
                collection=doc.collection,
                metadata=dict(c.get("metadata") or {}),
            )
            for c in chunks
        ]
        self.documents.put_notes(notes)
        self.index.upsert(
            [
                VectorRecord(
                    id=n.id,
                    vector=list(v),
                    text=n.text,
                    owner=owner,
                    document_id=document_id,
                    chunk_index=n.chunk_index,
                    collection=doc.collection,
                    enabled=False,  # switched on by finalize: nothing half-indexed is retrievable
                )
                for n, v in zip(notes, vectors, strict=True)
            ]
        )
        # progress: one atomic count per batch (batches finish in parallel in the cloud)
        self.documents.add_chunks_done(owner, document_id, version, len(notes))
        if self.evidence is not None:
            try:
                self.evidence.put([n.id for n in notes], embedding_texts(chunks))
            except Exception as exc:  # a refinement: the background warmer embeds them instead
                logger.warning("evidence.store_failed", extra={"error": f"{type(exc).__name__}: {exc}"})
        return len(notes)

    def abandon(self, owner: str, document_id: str) -> None:
        """Clean up after a document deleted while it was being ingested: its notes, vectors and
        batch files go (the deletion may have raced with a batch being stored)."""
        self._remove_indexed(owner, document_id)
        self.blobs.delete_prefix(work_prefix(document_id))
        self.blobs.delete(text_key(owner, document_id))  # a PDF's or HTML page's text, kept at the split
        logger.info("ingest.cancelled", extra={"documentId": document_id})

    def fail(self, owner: str, document_id: str, error: str, version: str | None = None) -> dict[str, Any]:
        """The document is ``FAILED`` with ``error``; what this run wrote goes. A failed replacement
        leaves the previous version searchable (``chunkCount`` then counts its chunks). Unbounded (the
        local pipeline, the reconciler): :meth:`fail_step` is the state machine's bounded step."""
        result = self._failing(owner, document_id, error, version, "", None)
        return {"status": result["status"], "error": result["error"]}

    def fail_step(
        self, owner: str, document_id: str, error: str, version: str | None = None, cursor: str = ""
    ) -> dict[str, Any]:
        """One bounded step of :meth:`fail` (``MarkFailed``, looped by the state machine until
        ``finished``): this run's notes and vectors are removed ``FINALIZE_STEP_CHUNKS`` notes looked
        at per call, then the record says FAILED. ``{"status", "error", "finished", "cursor"}``."""
        budget = max(1, int(self.settings.finalize_step_chunks))
        return self._failing(owner, document_id, error, version, cursor, budget)

    def _failing(
        self, owner: str, document_id: str, error: str, version: str | None, cursor: str, budget: int | None
    ) -> dict[str, Any]:
        message = human_error(error)
        try:
            doc = self._current(owner, document_id, version, "fail")
            superseded = doc is None
        except NotFound:  # deleted: still clean up below
            doc, superseded = None, False
        if superseded:
            self.blobs.delete_prefix(work_prefix(document_id, version))  # only this run's own batches
            return {"status": SUPERSEDED, "error": message, "finished": True, "cursor": ""}
        run_version = version if version is not None else (doc.version if doc is not None else None)
        remaining = 0
        if doc is None or run_version is None:  # deleted, or no version to tell the runs apart: all goes
            self._remove_indexed(owner, document_id, version)
        else:  # this version's notes, a page at a time; the previous version's (if any) stay
            kept, _, at = (cursor.removeprefix("remove:") or "0:").partition(":")
            remaining = int(kept or 0)
            tag = note_id("", 0, run_version)[len("-00000") :]  # the id suffix of this version's notes
            while True:
                page = self.documents.list_notes(
                    owner, document_id=document_id, limit=budget or 1000, cursor=at or None
                )
                mine = [n.id for n in page.items if n.id.endswith(tag)]
                remaining += len(page.items) - len(mine)
                self._remove_notes(owner, document_id, mine, "failed_version_removed")
                at = page.cursor or ""
                if at and budget is not None:
                    return {"status": DocumentStatus.PROCESSING.value, "error": message, "finished": False,
                            "cursor": f"remove:{remaining}:{at}"}  # fmt: skip
                if not at:
                    break
            if remaining == 0:  # nothing else of the document: also vectors a crash left without a note
                self.index.delete_document(owner, document_id, tags=version_tags((), run_version))
        self.documents.update_document(
            owner, document_id,
            {"status": DocumentStatus.FAILED, "error": message, "chunk_count": remaining, "switching": None},
        )  # fmt: skip
        self.blobs.delete_prefix(work_prefix(document_id, version))
        if self.attempts is not None:
            self.attempts.end(owner, document_id, run_version)
        logger.warning(
            "ingest.failed", extra={"documentId": document_id, "error": message, "previousKept": remaining}
        )
        self.metrics.add(INGESTION_FAILED)
        return {"status": DocumentStatus.FAILED.value, "error": message, "finished": True, "cursor": ""}
