"""Ingestion use cases: accept a document (``IngestionService``) and the pipeline steps that split,
embed, index and finalize it (``IngestSteps``).

The steps are plain methods taking and returning JSON-able values: in the cloud the Step Functions
state machine calls each in its own Lambda invocation (camelCase keys in and out); locally the inline
pipeline calls :meth:`IngestSteps.run`, which runs them in order in-process.

States: ``PENDING`` (accepted, body stored) → ``PROCESSING`` (split started) → ``READY`` (every
chunk embedded and indexed, vectors switched on) or ``FAILED`` (error recorded, nothing of the
document left in the notes or the index). Vectors are written disabled and only switched on by
:meth:`IngestSteps.finalize`, so a half-indexed document is never retrievable.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from ragchat.domain.clock import Clock, parse_iso, system_clock
from ragchat.domain.errors import NotFound, PayloadTooLarge, RagchatError, ValidationError
from ragchat.domain.extraction import PRIMARY_EXTENSIONS
from ragchat.domain.ids import new_id, note_id
from ragchat.domain.labels import (  # the one title/collection rule (documents and conversations)
    MAX_TITLE_CHARS,
    optional_title,
    validate_collection,
)
from ragchat.domain.models import Chunk, Document, DocumentStatus, Note, VectorRecord
from ragchat.services.metrics import INGESTION_FAILED, INGESTION_SECONDS, NO_METRICS

if TYPE_CHECKING:
    from ragchat.config import Settings
    from ragchat.ports import BlobStore, DocumentStore, Embedder, IngestionLauncher, Metrics, VectorIndex

logger = Logger(service="ragchat", child=True)

DEFAULT_TITLE_CHARS = 200
MAX_METADATA_BYTES = 16 * 1024
BATCH_SIZE = 64
# Texts per embedder call when the local pipeline coalesces queued documents (``run_many``).
COALESCE_TEXTS = 256
# Without splitting a page (or the whole text) is one chunk, but never more than this many characters:
# embedding models truncate long inputs, and a single multi-megabyte note would be useless as context.
MAX_UNSPLIT_CHARS = 8000
MAX_ERROR_CHARS = 500

_DOCUMENT_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9_.@+-]{1,128}$")

_EXTENSIONS = PRIMARY_EXTENSIONS


# --------------------------------------------------------------------------------------- helpers
def resolve_content_type(content_type: str | None, filename: str | None, body: bytes) -> str:
    """The document's content type (declared, else from the file name; unsupported → 400). A body
    posted with neither that starts with ``%PDF-`` is a PDF."""
    from ragchat.domain.extraction import PDF, detect_content_type

    ctype = detect_content_type(filename, content_type)
    if not filename and not (content_type or "").strip() and body.lstrip()[:5] == b"%PDF-":
        return PDF
    return ctype


def blob_segment(owner: str) -> str:
    """A key segment for an owner: as-is when it is plainly safe, otherwise a stable hash."""
    if _SAFE_SEGMENT.match(owner) and owner not in (".", ".."):
        return owner
    import hashlib

    return "h-" + hashlib.sha256(owner.encode("utf-8")).hexdigest()[:32]


def body_key(owner: str, document_id: str, content_type: str) -> str:
    return f"documents/{blob_segment(owner)}/{document_id}/body{_EXTENSIONS.get(content_type, '.bin')}"


def work_prefix(document_id: str) -> str:
    return f"work/{document_id}/"


def _default_title(filename: str | None, text: str | None) -> str:
    if filename:
        name = filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
        if name:
            return name[:MAX_TITLE_CHARS]
    if text:
        for line in text.splitlines():
            line = " ".join(line.split()).lstrip("#").strip()
            if line:
                if len(line) <= DEFAULT_TITLE_CHARS:
                    return line
                cut = line[:DEFAULT_TITLE_CHARS]
                space = cut.rfind(" ")
                return (cut[:space] if space > DEFAULT_TITLE_CHARS // 2 else cut).rstrip() + "…"
    return "Untitled document"


def validate_metadata(metadata: Any) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise ValidationError("metadata must be a JSON object")
    try:
        encoded = json.dumps(metadata, ensure_ascii=False)
    except (TypeError, ValueError):
        raise ValidationError("metadata must be a JSON object") from None
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise ValidationError(f"metadata is too large (at most {MAX_METADATA_BYTES} bytes as JSON)")
    return dict(metadata)


def human_error(error: str) -> str:
    """A short, readable failure message. Step Functions hands over a Lambda error's ``Cause`` as a
    JSON string (``{"errorMessage": ..., "errorType": ...}``): keep only the message."""
    text = (error or "").strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            text = str(data.get("errorMessage") or data.get("Cause") or data.get("Error") or text)
    text = " ".join(text.split()) or "Ingestion failed"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def _message(exc: BaseException) -> str:
    if isinstance(exc, RagchatError):
        return exc.message
    text = str(exc).strip()
    return text or type(exc).__name__


# --------------------------------------------------------------------------------------- service
class IngestionService:
    """Accepts documents: validates, stores the body, records the document ``PENDING`` and starts the
    pipeline. Returns at once; the pipeline moves the document on."""

    def __init__(
        self,
        documents: DocumentStore,
        blobs: BlobStore,
        launcher: IngestionLauncher,
        settings: Settings,
        clock: Clock = system_clock,
    ) -> None:
        self.documents = documents
        self.blobs = blobs
        self.launcher = launcher
        self.settings = settings
        self.clock = clock

    def submit(
        self,
        owner: str,
        *,
        body: bytes | str | None = None,
        text: str | None = None,
        title: str | None = None,
        content_type: str | None = None,
        filename: str | None = None,
        metadata: dict[str, Any] | None = None,
        collection: str | None = None,
        split: bool | None = None,
        source: str = "api",
        document_id: str | None = None,
    ) -> Document:
        """Accept a document (``body``; ``text`` is an alias for a text body). Returns the document as
        stored (``PENDING``) once the pipeline is started."""
        if not owner:
            raise ValidationError("owner is required")
        if body is None:
            body = text
        if body is None:
            raise ValidationError("text is required and must not be blank")
        if not isinstance(body, (bytes, bytearray, str)):
            raise ValidationError("text must be a string")
        raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        if len(raw) * 1.2 > self.settings.max_body_bytes:
            limit_mib = self.settings.body_limit_bytes / (1024 * 1024)
            raise PayloadTooLarge(f"Document is too large (limit {limit_mib:.1f} MiB)")
        ctype = resolve_content_type(content_type, filename, raw)

        body_text: str | None = None
        if ctype == "application/pdf":
            if not raw.strip():
                raise ValidationError("Document body is empty")
        else:
            try:
                utf16 = raw.startswith((b"\xff\xfe", b"\xfe\xff"))
                body_text = raw.decode("utf-16" if utf16 else "utf-8-sig")
            except UnicodeDecodeError:
                raise ValidationError("Text must be UTF-8 encoded") from None
            if not body_text.strip():
                raise ValidationError("text is required and must not be blank")

        optional_title(title)
        final_title = (title or "").strip() or _default_title(filename, body_text)
        meta = validate_metadata(metadata)
        coll = validate_collection(collection)
        if split is not None and not isinstance(split, bool):
            raise ValidationError("split must be a boolean")

        if document_id is not None:
            if not _DOCUMENT_ID.match(document_id):
                raise ValidationError("document id must be 1-64 characters of letters, digits, '_' or '-'")
            doc_id = document_id
        else:
            doc_id = new_id()

        enabled = True
        previous = self.documents.get_document(owner, doc_id) if document_id is not None else None
        key = body_key(owner, doc_id, ctype)
        if previous is not None:
            enabled = previous.enabled
            if previous.body_key and previous.body_key != key:
                self.blobs.delete(previous.body_key)

        self.blobs.put(key, raw, content_type=ctype)
        doc = self.documents.create_document(
            Document(
                id=doc_id,
                owner=owner,
                title=final_title,
                content_type=ctype,
                source=source,
                body_key=key,
                metadata=meta,
                collection=coll,
                status=DocumentStatus.PENDING,
                enabled=enabled,
                split=True if split is None else split,
            )
        )
        logger.info(
            "ingest.accepted",
            extra={
                "documentId": doc.id,
                "contentType": ctype,
                "bytes": len(raw),
                "replaced": previous is not None,
            },
        )
        try:
            self.launcher.start(owner, doc.id, version=new_id())  # each upload is a new version
        except Exception as exc:
            # The document is kept (nothing is lost) and says why it did not proceed.
            logger.exception("ingest.start_failed", extra={"documentId": doc.id})
            self.documents.update_document(
                owner,
                doc.id,
                {"status": DocumentStatus.FAILED, "error": human_error(f"Could not start ingestion: {exc}")},
            )
            raise
        return doc

    def submit_file(
        self,
        owner: str,
        *,
        data: bytes,
        filename: str | None = None,
        content_type: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        collection: str | None = None,
        split: bool | None = None,
        source: str = "api",
        document_id: str | None = None,
    ) -> Document:
        """An uploaded file (``.txt .md .html .pdf``): the type comes from ``content_type`` or the
        file name; the title defaults to the file name."""
        return self.submit(
            owner,
            body=data,
            filename=filename,
            content_type=content_type,
            title=title,
            metadata=metadata,
            collection=collection,
            split=split,
            source=source,
            document_id=document_id,
        )


# ----------------------------------------------------------------------------------------- steps
class IngestSteps:
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
    ) -> None:
        self.documents = documents
        self.blobs = blobs
        self.embedder = embedder
        self.index = index
        self.settings = settings
        self.clock = clock
        self.batch_size = batch_size  # chunks per embed_index batch
        self.metrics = metrics

    # ---------------------------------------------------------------- helpers
    def _document(self, owner: str, document_id: str) -> Document:
        doc = self.documents.get_document(owner, document_id)
        if doc is None:
            raise NotFound(f"Document {document_id} not found (deleted while ingesting?)")
        return doc

    def _remove_indexed(self, owner: str, document_id: str) -> None:
        ids = self.documents.delete_notes_of_document(owner, document_id)
        if ids:
            self.index.delete(ids)
        self.index.delete_document(owner, document_id)

    def chunks_of(self, doc: Document, body: bytes) -> list[Chunk]:
        """Extract the text (per content type) and cut it into chunks."""
        from ragchat.domain.extraction import extract
        from ragchat.domain.splitting import split_pages

        pages = extract(body, content_type=doc.content_type)
        if self.settings.enable_text_splitting and doc.split:
            size, overlap = self.settings.chunk_size, self.settings.chunk_overlap
        else:
            # No splitting: one chunk per page (or the whole text), capped at MAX_UNSPLIT_CHARS.
            size, overlap = MAX_UNSPLIT_CHARS, 0
        return split_pages(pages, content_type=doc.content_type, chunk_size=size, overlap=overlap)

    # ---------------------------------------------------------------- steps
    def split(self, owner: str, document_id: str) -> dict[str, Any]:
        started = time.perf_counter()
        doc = self._document(owner, document_id)
        self.documents.update_document(
            owner, document_id, {"status": DocumentStatus.PROCESSING, "error": None}
        )
        try:
            body = self.blobs.get(doc.body_key)
        except KeyError:
            raise NotFound("The document's body is missing from storage") from None
        chunks = [c for c in self.chunks_of(doc, body) if c.text.strip()]
        if not chunks:
            raise ValidationError("No text could be extracted from the document")

        # A re-run or a replacement: the previous notes and vectors go before the new ones arrive.
        self._remove_indexed(owner, document_id)
        prefix = work_prefix(document_id)
        self.blobs.delete_prefix(prefix)

        batches: list[dict[str, Any]] = []
        for n, start in enumerate(range(0, len(chunks), self.batch_size)):
            key = f"{prefix}batch-{n:05d}.json"
            payload = {
                "owner": owner,
                "documentId": document_id,
                "chunks": [
                    {"index": i, "text": c.text, "metadata": c.metadata}
                    for i, c in enumerate(chunks[start : start + self.batch_size], start=start)
                ],
            }
            self.blobs.put(
                key, json.dumps(payload, ensure_ascii=False).encode("utf-8"), content_type="application/json"
            )
            batches.append({"owner": owner, "documentId": document_id, "key": key})
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
            "chunkCount": len(chunks),
            "batchCount": len(batches),
            "batches": batches,
            "manifestKey": manifest_key,
        }

    def embed_index(self, owner: str, document_id: str, key: str) -> dict[str, Any]:
        started = time.perf_counter()
        doc, chunks = self._read_batch(owner, document_id, key)
        if not chunks:
            return {"indexed": 0}
        texts = [str(c["text"]) for c in chunks]
        t0 = time.perf_counter()
        vectors = self._embed(texts)
        embed_ms = (time.perf_counter() - t0) * 1000
        indexed = self._store_batch(owner, document_id, doc, chunks, vectors)
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

    def _read_batch(self, owner: str, document_id: str, key: str) -> tuple[Document, list[dict[str, Any]]]:
        if not key.startswith(work_prefix(document_id)):
            raise ValidationError("batch key does not belong to this document")
        doc = self._document(owner, document_id)
        try:
            batch = json.loads(self.blobs.get(key))
        except KeyError:
            raise NotFound(f"Batch {key} is missing") from None
        chunks: list[dict[str, Any]] = batch["chunks"]
        return doc, chunks

    def _embed(self, texts: list[str]) -> list[list[float]]:
        vectors = self.embedder.embed_documents(texts)
        if len(vectors) != len(texts):
            raise RuntimeError(f"Embedder returned {len(vectors)} vectors for {len(texts)} texts")
        return vectors

    def _store_batch(
        self,
        owner: str,
        document_id: str,
        doc: Document,
        chunks: list[dict[str, Any]],
        vectors: list[list[float]],
    ) -> int:
        """Write one batch's notes and (disabled) vectors; returns how many."""
        notes = [
            Note(
                id=note_id(document_id, int(c["index"])),
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
        return len(notes)

    def finalize(self, owner: str, document_id: str, chunk_count: int) -> dict[str, Any]:
        doc = self._document(owner, document_id)
        if doc.enabled:
            self.index.set_enabled(owner, document_id, True)
        updated = self.documents.update_document(
            owner,
            document_id,
            {"status": DocumentStatus.READY, "chunk_count": int(chunk_count), "error": None},
        )
        if updated is None:  # deleted at the last moment: leave nothing behind
            self._remove_indexed(owner, document_id)
            raise NotFound(f"Document {document_id} not found (deleted while ingesting?)")
        if not updated.enabled and doc.enabled:  # disabled while we were switching on
            self.index.set_enabled(owner, document_id, False)
        self.blobs.delete_prefix(work_prefix(document_id))
        now = self.clock()
        extra: dict[str, Any] = {"documentId": document_id, "chunkCount": int(chunk_count)}
        try:
            extra["totalMs"] = round((now - parse_iso(doc.created_at)) * 1000, 1)
            self.metrics.add(INGESTION_SECONDS, extra["totalMs"] / 1000, unit="Seconds")
            extra["processingMs"] = round((now - parse_iso(doc.updated_at)) * 1000, 1)
        except (ValueError, TypeError):
            pass
        logger.info("ingest.ready", extra=extra)
        return {"status": DocumentStatus.READY.value, "chunkCount": int(chunk_count)}

    def fail(self, owner: str, document_id: str, error: str) -> dict[str, Any]:
        message = human_error(error)
        self.documents.update_document(
            owner,
            document_id,
            {"status": DocumentStatus.FAILED, "error": message, "chunk_count": 0},
        )
        self._remove_indexed(owner, document_id)
        self.blobs.delete_prefix(work_prefix(document_id))
        logger.warning("ingest.failed", extra={"documentId": document_id, "error": message})
        self.metrics.add(INGESTION_FAILED)
        return {"status": DocumentStatus.FAILED.value, "error": message}

    # ---------------------------------------------------------------- in-process
    def run(self, owner: str, document_id: str) -> Document | None:
        """Every step in order, in-process (the local pipeline). Any failure → ``fail``. Returns the
        final document (``None`` if it was deleted meanwhile)."""
        timings: dict[str, float] = {}
        phase = "split"
        try:
            t0 = time.perf_counter()
            plan = self.split(owner, document_id)
            timings["split"] = (time.perf_counter() - t0) * 1000
            phase = "embed_index"
            t1 = time.perf_counter()
            for item in plan["batches"]:
                self.embed_index(owner, document_id, item["key"])
            timings["embed_index"] = (time.perf_counter() - t1) * 1000
            phase = "finalize"
            t2 = time.perf_counter()
            self.finalize(owner, document_id, plan["chunkCount"])
            timings["finalize"] = (time.perf_counter() - t2) * 1000
        except Exception as exc:
            self._record_failure(owner, document_id, phase, exc)
        else:
            logger.info(
                "ingest.durations",
                extra={"documentId": document_id, **{f"{k}Ms": round(v, 1) for k, v in timings.items()}},
            )
        return self.documents.get_document(owner, document_id)

    def _record_failure(self, owner: str, document_id: str, phase: str, exc: Exception) -> None:
        if isinstance(exc, RagchatError) and exc.status < 500:  # bad input (e.g. an unreadable PDF)
            logger.warning(
                "ingest.error", extra={"documentId": document_id, "phase": phase, "error": exc.message}
            )
        else:
            logger.exception("ingest.error", extra={"documentId": document_id, "phase": phase})
        prefix = {"split": "", "embed_index": "Embedding/indexing failed: ", "finalize": ""}[phase]
        try:
            self.fail(owner, document_id, prefix + _message(exc))
        except Exception:  # pragma: no cover - storage down: nothing more we can do here
            logger.exception("ingest.fail_error", extra={"documentId": document_id})

    def run_many(self, keys: Sequence[tuple[str, str]]) -> None:
        """Run several documents (``(owner, document_id)``, in order) with their embedder calls
        coalesced: the local pipeline's worker hands over what is queued. Each document is split,
        then the chunks of consecutive batches — across documents — are embedded together in calls
        of about ``COALESCE_TEXTS`` texts (the embedder sorts by length and pads per sub-batch: a
        short document no longer makes its own small, padded call), then stored per batch; each
        document is finalized as soon as its last batch is stored. The outcome per document is the
        same as :meth:`run`'s: one that fails is ``FAILED`` on its own; if a shared embedder call
        fails, each document in it is embedded again on its own, so only the document whose text
        fails is marked ``FAILED``."""
        if len(keys) <= 1:
            for owner, document_id in keys:
                self.run(owner, document_id)
            return
        started = time.perf_counter()
        plans: dict[tuple[str, str], dict[str, Any]] = {}
        for owner, document_id in keys:
            try:
                plans[(owner, document_id)] = self.split(owner, document_id)
            except Exception as exc:
                self._record_failure(owner, document_id, "split", exc)
        remaining = {key: len(plan["batches"]) for key, plan in plans.items()}
        failed: set[tuple[str, str]] = set()

        def done_with(key: tuple[str, str]) -> None:
            remaining[key] -= 1
            if remaining[key] == 0 and key not in failed:
                try:
                    self.finalize(key[0], key[1], plans[key]["chunkCount"])
                except Exception as exc:
                    failed.add(key)
                    self._record_failure(key[0], key[1], "finalize", exc)

        group: list[tuple[tuple[str, str], Document, list[dict[str, Any]]]] = []

        def flush() -> None:
            texts = [str(c["text"]) for _, _, chunks in group for c in chunks]
            try:
                vectors: list[list[float]] | None = self._embed(texts) if texts else []
            except Exception:
                logger.warning(
                    "ingest.coalesced_embed_failed", extra={"documents": len({k for k, _, _ in group})}
                )
                vectors = None
            offset = 0
            for key, doc, chunks in group:
                mine_start, offset = offset, offset + len(chunks)
                if key in failed:
                    continue
                try:
                    if vectors is None:  # embed this batch on its own: the error belongs to one document
                        mine = self._embed([str(c["text"]) for c in chunks]) if chunks else []
                    else:
                        mine = vectors[mine_start:offset]
                    if chunks:
                        self._store_batch(key[0], key[1], doc, chunks, mine)
                except Exception as exc:
                    failed.add(key)
                    self._record_failure(key[0], key[1], "embed_index", exc)
                    continue
                done_with(key)
            group.clear()

        pending = 0
        for key, plan in plans.items():
            for item in plan["batches"]:
                if key in failed:
                    break
                try:
                    doc, chunks = self._read_batch(key[0], key[1], item["key"])
                except Exception as exc:
                    failed.add(key)
                    self._record_failure(key[0], key[1], "embed_index", exc)
                    break
                group.append((key, doc, chunks))
                pending += len(chunks)
                if pending >= COALESCE_TEXTS:
                    flush()
                    pending = 0
        flush()
        logger.info(
            "ingest.coalesced",
            extra={
                "documents": len(keys),
                "failed": len(failed) + len(keys) - len(plans),
                "ms": round((time.perf_counter() - started) * 1000, 1),
            },
        )
