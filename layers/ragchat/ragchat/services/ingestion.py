"""Accepting documents (``IngestionService``): validate, store the body, record the document
``PENDING`` and start the pipeline; the 202 is answered at once and the pipeline moves it on.

The pipeline's steps live in :mod:`ragchat.services.ingest_steps`, the local in-process runner in
:mod:`ragchat.services.ingest_runner`, the input rules in :mod:`ragchat.domain.intake`; their names
are re-exported here for callers that import them from this module.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from ragchat.domain.clock import Clock, system_clock
from ragchat.domain.content_types import IMAGE_TYPES
from ragchat.domain.errors import PayloadTooLarge, ValidationError
from ragchat.domain.extraction import PDF, PRIMARY_EXTENSIONS
from ragchat.domain.file_errors import EMPTY_FILE, too_large
from ragchat.domain.ids import new_id
from ragchat.domain.intake import (
    MAX_METADATA_BYTES,
    default_title,
    human_error,
    validate_document_id,
    validate_metadata,
    validate_split,
)
from ragchat.domain.labels import (  # the one title/collection rule (documents and conversations)
    MAX_TITLE_CHARS,
    optional_title,
    validate_collection,
    validate_title,
)
from ragchat.domain.models import Document, DocumentStatus
from ragchat.services.blob_keys import blob_segment, text_key, work_prefix
from ragchat.services.ingest_runner import COALESCE_TEXTS
from ragchat.services.ingest_steps import BATCH_SIZE, MAX_UNSPLIT_CHARS, IngestSteps

if TYPE_CHECKING:
    from collections.abc import Callable

    from ragchat.config import Settings
    from ragchat.ports import BlobStore, DocumentStore, IngestionLauncher, TextRecognizer
    from ragchat.services.limits import RequestLimiter
    from ragchat.services.storage_ceiling import WorkspaceBytes

__all__ = [
    "BATCH_SIZE",
    "COALESCE_TEXTS",
    "INLINE_PDF_CHECK_BYTES",
    "MAX_METADATA_BYTES",
    "MAX_TITLE_CHARS",
    "MAX_UNSPLIT_CHARS",
    "Accepted",
    "IngestSteps",
    "IngestionService",
    "blob_segment",
    "body_key",
    "human_error",
    "resolve_content_type",
    "text_key",
    "validate_collection",
    "validate_metadata",
    "validate_title",
    "work_prefix",
]

logger = Logger(service="ragchat", child=True)

# A PDF up to this size is opened before the 202, up to its first page with text (a corrupt,
# encrypted or textless one is refused with a 400 naming the problem, nothing stored); a bigger
# one, or damage past that page, is found by the pipeline (the document is then FAILED).
INLINE_PDF_CHECK_BYTES = 5 * 1024 * 1024


_EXTENSIONS = PRIMARY_EXTENSIONS
_UNFINISHED = (DocumentStatus.PENDING, DocumentStatus.PROCESSING)


def resolve_content_type(content_type: str | None, filename: str | None, body: bytes) -> str:
    """The document's content type (declared, else from the file name; unsupported → 400). A body
    that starts with ``%PDF-`` is a PDF, whatever it was declared or named as."""
    from ragchat.domain.extraction import PDF, detect_content_type, is_pdf

    ctype = detect_content_type(filename, content_type)
    return PDF if is_pdf(body) else ctype


def body_key(owner: str, document_id: str, content_type: str) -> str:
    return f"documents/{blob_segment(owner)}/{document_id}/body{_EXTENSIONS.get(content_type, '.bin')}"


def _raw_body(body: bytes | str | None, max_body_bytes: int, limit_bytes: int) -> bytes:
    if body is None:
        raise ValidationError("text is required and must not be blank")
    if not isinstance(body, (bytes, bytearray, str)):
        raise ValidationError("text must be a string")
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    if len(raw) * 1.2 > max_body_bytes:
        raise PayloadTooLarge(too_large(len(raw), limit_bytes))
    return raw


def _checked_text(raw: bytes, content_type: str, pdf_check: Callable[[bytes], object] | None) -> str | None:
    """The body as text (``None`` for a PDF, an Office or e-book file, RTF). A PDF small enough is
    opened now, by ``pdf_check`` (default: ``check_pdf`` in this process), an Office file's zip
    directory read: unreadable → 400."""
    from ragchat.domain.content_types import IMAGE_TYPES, OFFICE_TYPES, RTF

    if content_type in IMAGE_TYPES:  # checked by ``IngestionService._check_picture``
        return None
    if content_type in OFFICE_TYPES:
        from ragchat.domain.office import check_office

        if not raw.strip():
            raise ValidationError(EMPTY_FILE)
        check_office(raw, content_type)  # not a zip, a zip bomb by its directory, another kind: 400
        return None
    if content_type == RTF:
        from ragchat.domain.rtf import is_rtf

        if not is_rtf(raw):
            raise ValidationError("This is not an RTF document: it does not start with {\\rtf.")
        return None
    if content_type == "application/pdf":
        if not raw.strip():
            raise ValidationError(EMPTY_FILE)
        if len(raw) <= INLINE_PDF_CHECK_BYTES:
            if pdf_check is None:
                from ragchat.domain.extraction import check_pdf

                pdf_check = check_pdf
            pdf_check(raw)  # ExtractionError (400) names the problem
        return None
    try:
        utf16 = raw.startswith((b"\xff\xfe", b"\xfe\xff"))
        text = raw.decode("utf-16" if utf16 else "utf-8-sig")
    except UnicodeDecodeError:
        raise ValidationError("Text must be UTF-8 encoded") from None
    if not text.strip():
        raise ValidationError("text is required and must not be blank")
    from ragchat.domain.intake import check_text_characters

    return check_text_characters(text)


@dataclass(frozen=True, slots=True)
class Accepted:
    """What a submit did: ``document`` as stored; ``duplicate``: the same bytes were already that
    document (same name or source, same collection, same options), so it was left as it is and
    nothing was started; ``new_version``: the document already existed with other bytes, and this
    upload is its new version (it replaces the old one once indexed); ``elsewhere``: a duplicate of
    another document of the workspace (the same bytes brought by another door or under another
    name: one document per content)."""

    document: Document
    duplicate: bool = False
    new_version: bool = False
    elsewhere: bool = False


def _same_upload(
    previous: Document, doc: Document, *, title: str | None, metadata: bool, split: bool
) -> bool:
    """``doc`` brings nothing new to ``previous``: the same bytes and type in the same collection, and
    no title, metadata or split option it was given differs. A FAILED document is never a duplicate:
    posting it again is how it is retried."""
    return (
        previous.content_hash is not None
        and previous.content_hash == doc.content_hash
        and previous.content_type == doc.content_type
        and previous.collection == doc.collection
        and previous.status != DocumentStatus.FAILED
        and (title is None or title == previous.title)
        and (not metadata or doc.metadata == previous.metadata)
        and (not split or doc.split == previous.split)
    )


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
        *,
        limiter: RequestLimiter | None = None,
        pdf_check: Callable[[bytes], object] | None = None,
        held: WorkspaceBytes | None = None,
        ocr: TextRecognizer | None = None,
    ) -> None:
        """``pdf_check``: opens a small PDF before the 202 (raises ``ExtractionError`` for one that
        cannot be read); by default ``extraction.check_pdf`` in this process (a Lambda: bounded by
        its timeout); ``ragchat serve`` gives one in a child process under a CPU and wall budget.
        ``ocr``: the engine that will read pictures, asked whether it can before one is accepted
        (``None``: pictures are refused, ``OCR=off``)."""
        self.documents = documents
        self.held = held  # each workspace's byte ledger (``MAX_WORKSPACE_BYTES``), reserved atomically
        self.blobs = blobs
        self.launcher = launcher
        self.settings = settings
        self.clock = clock
        self.limiter = limiter  # the per-owner daily ceilings (``RequestLimiter.charge_ingestion``)
        self.pdf_check = pdf_check
        self.ocr = ocr

    def submit(self, owner: str, **fields: Any) -> Document:
        """:meth:`accept`, returning the document (the existing one for a duplicate)."""
        return self.accept(owner, **fields).document

    def accept(
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
        stored_key: str | None = None,
        direct_upload: bool = False,
        user: str | None = None,
    ) -> Accepted:
        """Accept a document (``body``, or its alias ``text``) into workspace ``owner`` for ``user`` (default
        ``owner``: their daily ceilings), stored ``PENDING`` once started; all is checked before anything is
        stored. ``direct_upload``: came by upload; ``stored_key`` (implies it): its body already lies there.
        ``document_id`` (from a name or source): its duplicate is returned untouched."""
        if not owner:
            raise ValidationError("owner is required")
        max_body, limit = self.settings.max_body_bytes, self.settings.body_limit_bytes
        if stored_key is not None or direct_upload:  # a direct upload: its own limit, no safety factor
            max_body, limit = int(self.settings.max_upload_bytes * 1.2), self.settings.max_upload_bytes
        raw = _raw_body(body if body is not None else text, max_body, limit)
        ctype = resolve_content_type(content_type, filename, raw)
        if ctype == PDF and len(raw) > self.settings.max_pdf_bytes:
            too_big = f"{self.settings.max_pdf_bytes} bytes (MAX_PDF_BYTES); this one has {len(raw)}"
            raise PayloadTooLarge(f"a PDF may be at most {too_big}: split it into smaller files")
        body_text = self._checked_body(raw, ctype)
        given_title = optional_title(title)
        doc = Document(
            id=validate_document_id(document_id) if document_id is not None else new_id(),
            owner=owner,
            title=given_title or default_title(filename, body_text),
            content_type=ctype,
            source=source,
            body_key="",
            metadata=validate_metadata(metadata),
            collection=validate_collection(collection),
            status=DocumentStatus.PENDING,
            split=validate_split(split),
            version=new_id(),  # each upload is a new content version: steps of older runs stand down
            content_hash=hashlib.sha256(raw).hexdigest(),
            size=len(raw),
        )
        previous = self.documents.get_document(owner, doc.id) if document_id is not None else None
        given = {"metadata": metadata is not None, "split": split is not None}
        if (already := self._already(doc, previous, title=given_title, **given)) is not None:
            return replace(self._duplicate(already, stored_key), elsewhere=already is not previous)
        growth = len(raw) - ((previous.size or 0) if previous is not None else 0)
        self._admit(doc, growth, len(raw), user or owner)
        replacing = document_id is not None
        stored = self._store_reserved(doc, raw, growth, replacing=replacing, stored_key=stored_key)
        self._launch(stored)
        return Accepted(stored, new_version=previous is not None)

    def _checked_body(self, raw: bytes, ctype: str) -> str | None:
        """:func:`_checked_text`; a picture or a PDF with no text layer (a scan) is accepted where
        OCR can read it, else refused saying why OCR cannot."""
        from ragchat.domain.extraction import NO_PDF_TEXT, ExtractionError
        from ragchat.domain.images import NO_OCR, scanned_unread

        if ctype in IMAGE_TYPES:
            self._check_picture(raw)
        try:
            return _checked_text(raw, ctype, self.pdf_check)
        except ExtractionError as exc:
            if exc.message != NO_PDF_TEXT:
                raise
            reason = NO_OCR if self.ocr is None else self.ocr.missing()
            if reason:
                raise ExtractionError(scanned_unread(reason)) from None
            return None

    def _check_picture(self, raw: bytes) -> None:
        """A picture is accepted only where OCR can read it, within ``MAX_IMAGE_BYTES``, and when its
        header shows it is no image bomb (``MAX_IMAGE_PIXELS``): else a 400 (413) naming the reason."""
        from ragchat.domain.images import MAX_IMAGE_BYTES, NO_OCR, check_image

        if not raw.strip():
            raise ValidationError(EMPTY_FILE)
        if len(raw) > MAX_IMAGE_BYTES:
            raise PayloadTooLarge(f"{too_large(len(raw), MAX_IMAGE_BYTES)[:-1]} for a picture.")
        reason = NO_OCR if self.ocr is None else self.ocr.missing()
        if reason:
            raise ValidationError(reason)
        info = check_image(raw)
        reason = self.ocr.refuses(info, len(raw)) if self.ocr is not None else None
        if reason:
            raise ValidationError(reason)

    def _store_reserved(
        self, doc: Document, raw: bytes, growth: int, *, replacing: bool, stored_key: str | None
    ) -> Document:
        """:meth:`_store` once ``growth`` bytes are reserved: given back when nothing is stored; a
        smaller new version gives the difference back once it is stored."""
        try:
            stored = self._store(doc, raw, replacing=replacing, stored_key=stored_key)
        except BaseException:
            self._release(doc.owner, growth)
            raise
        if growth < 0:
            self._release(doc.owner, -growth)
        return stored

    def _admit(self, doc: Document, growth: int, size: int, user: str) -> None:
        """Valid and about to be stored: ``growth`` bytes (its size, or for a new version the
        difference) reserved in its workspace's ledger (``MAX_WORKSPACE_BYTES``: 413 when over,
        nothing stored or counted), then ``size`` counted against ``user``'s daily ceilings (429;
        the reservation is given back)."""
        if self.held is not None:
            self.held.reserve(doc.owner, growth)
        if self.limiter is not None:
            try:
                self.limiter.charge_ingestion(user, size)
            except BaseException:
                self._release(doc.owner, growth)
                raise

    def _release(self, workspace: str, size: int) -> None:
        if self.held is not None and size > 0:
            self.held.release(workspace, size)

    def _already(
        self, doc: Document, previous: Document | None, *, title: str | None, metadata: bool, split: bool
    ) -> Document | None:
        """The document ``doc`` already is: the one its name or source names (``previous``) when it
        brings nothing new to it, else another document of the workspace with exactly these bytes,
        whichever door brought them (the page, ``ragchat ingest``, ``--api``, a note, a direct
        upload): one document per content. A FAILED one does not count (sending it again retries it)."""
        if previous is not None and _same_upload(previous, doc, title=title, metadata=metadata, split=split):
            return previous
        if doc.content_hash is None:
            return None
        same = self.documents.find_by_content(doc.owner, doc.content_hash)
        if same is None or same.id == doc.id or same.status == DocumentStatus.FAILED:
            return None
        return same

    def _duplicate(self, existing: Document, stored_key: str | None) -> Accepted:
        """The same bytes again: keep the document as it is (its body, notes, status), drop the
        second copy a direct upload left in the blob store. A copy still PENDING/PROCESSING whose
        run is not under way (a crash or a worker error left it behind) is started again: sending
        the same file is how a stuck document is retried, as a FAILED one is (its runs still count
        towards ``INGEST_MAX_ATTEMPTS``)."""
        if stored_key is not None and stored_key != existing.body_key:
            self.blobs.delete(stored_key)
        restarted = existing.status in _UNFINISHED and not self._in_flight(existing)
        if restarted:
            self._launch(existing)
        extra = {"documentId": existing.id, "status": str(existing.status), "restarted": restarted}
        logger.info("ingest.duplicate", extra=extra)
        return Accepted(existing, duplicate=True)

    def _in_flight(self, doc: Document) -> bool:
        """Whether the launcher has ``doc``'s run in hand. A launcher that cannot tell (Step
        Functions) is simply started again: its ``start`` does nothing while that version runs."""
        in_flight = getattr(self.launcher, "in_flight", None)
        return bool(in_flight(doc.owner, doc.id)) if in_flight is not None else False

    def _store(self, doc: Document, raw: bytes, *, replacing: bool, stored_key: str | None) -> Document:
        """Put the body (unless it already lies at ``stored_key``) and record the document (a
        replacement keeps ``enabled`` and drops the old body if its key changes)."""
        key = stored_key or body_key(doc.owner, doc.id, doc.content_type)
        previous = self.documents.get_document(doc.owner, doc.id) if replacing else None
        enabled = True
        if previous is not None:
            enabled = previous.enabled
            if previous.body_key and previous.body_key != key:
                self.blobs.delete(previous.body_key)
        if stored_key is None:
            self.blobs.put(key, raw, content_type=doc.content_type)
        stored = self.documents.create_document(replace(doc, body_key=key, enabled=enabled))
        logger.info(
            "ingest.accepted",
            extra={
                "documentId": stored.id,
                "contentType": stored.content_type,
                "bytes": len(raw),
                "replaced": previous is not None,
            },
        )
        return stored

    def _launch(self, doc: Document) -> None:
        try:
            self.launcher.start(doc.owner, doc.id, version=doc.version)
        except Exception as exc:
            # The document is kept (nothing is lost) and says why it did not proceed.
            logger.exception("ingest.start_failed", extra={"documentId": doc.id})
            self.documents.update_document(
                doc.owner,
                doc.id,
                {"status": DocumentStatus.FAILED, "error": human_error(f"Could not start ingestion: {exc}")},
            )
            raise

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
        stored_key: str | None = None,
    ) -> Document:
        """An uploaded file (``.txt .md .html .pdf .docx .pptx .xlsx .odt .epub .rtf``): the type
        comes from ``content_type`` or the file name; the title defaults to the file name."""
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
            stored_key=stored_key,
        )
