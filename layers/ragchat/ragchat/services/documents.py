"""Managing documents and notes: list, read, enable/disable, rename, re-tag, delete.

Every call is confined to one owner; someone else's document is simply not found (404, never 403).
Deleting a document removes its vectors first (so nothing is retrievable a moment longer), then its
notes, body, pipeline work files and the record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from ragchat.domain.clock import Clock, system_clock
from ragchat.domain.content_types import IMAGE_TYPES
from ragchat.domain.errors import Conflict, NotFound, ValidationError
from ragchat.domain.ids import version_tags
from ragchat.domain.labels import validate_collection, validate_title
from ragchat.domain.models import Document, DocumentStatus, Note, Page
from ragchat.services.blob_keys import EXTRACTED_TYPES, keep_extracted_text, text_key
from ragchat.services.ingestion import validate_metadata, work_prefix

if TYPE_CHECKING:
    from ragchat.domain.page_images import PageImage
    from ragchat.ports import BlobStore, DocumentStore, PageRenderer, VectorIndex
    from ragchat.services.ingest_attempts import IngestAttempts
    from ragchat.services.storage_ceiling import WorkspaceBytes

logger = Logger(service="ragchat", child=True)

MAX_PAGE = 200
DELETE_PAGE = 1000  # notes whose vectors and records one step of a delete removes
BODY_LINK_SECONDS = 900  # how long a body link reads the text (the viewer follows it at once)
BODY_CONTENT_TYPE = "text/plain; charset=utf-8"
_UPDATABLE = ("enabled", "title", "metadata")
_IN_FLIGHT = (DocumentStatus.PENDING, DocumentStatus.PROCESSING)


@dataclass(frozen=True, slots=True)
class DocumentBody:
    """A document's text: ``text`` itself, or ``url``, a link that reads it for ``expires_in`` s."""

    text: str | None = None
    url: str | None = None
    expires_in: int | None = None


def _clean_changes(wanted: dict[str, Any]) -> dict[str, Any]:
    """A PATCH's changes, checked: ``enabled`` a boolean, ``title`` and ``metadata`` valid."""
    unknown = sorted(set(wanted) - set(_UPDATABLE))
    if unknown:
        raise ValidationError(f"Cannot update: {', '.join(unknown)} (only enabled, title, metadata)")
    if not wanted:
        raise ValidationError("Nothing to update: give at least one of enabled, title, metadata")
    clean: dict[str, Any] = {}
    if "enabled" in wanted:
        if not isinstance(wanted["enabled"], bool):
            raise ValidationError("enabled must be true or false")
        clean["enabled"] = wanted["enabled"]
    if "title" in wanted:
        clean["title"] = validate_title(wanted["title"])
    if "metadata" in wanted:
        if wanted["metadata"] is None:
            raise ValidationError("metadata must be a JSON object")
        clean["metadata"] = validate_metadata(wanted["metadata"])
    return clean


def _limit(limit: int) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValidationError("limit must be a positive integer")
    return min(limit, MAX_PAGE)


class DocumentService:
    def __init__(
        self,
        documents: DocumentStore,
        index: VectorIndex,
        blobs: BlobStore,
        pages: PageRenderer | None = None,
        *,
        held: WorkspaceBytes | None = None,
        attempts: IngestAttempts | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self.clock = clock
        self.documents = documents
        self.index = index
        self.blobs = blobs
        self.pages = pages
        self.held = held  # the workspaces' byte ledger: a deleted document's size goes back
        self.attempts = attempts  # runs started per version: a deleted document's count goes

    # ------------------------------------------------------------------ documents
    def list_documents(
        self, owner: str, *, collection: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Document]:
        return self.documents.list_documents(
            owner, collection=validate_collection(collection), limit=_limit(limit), cursor=cursor or None
        )

    def get(self, owner: str, document_id: str) -> Document:
        doc = self.documents.get_document(owner, document_id)
        if doc is None:
            raise NotFound("Document not found")
        return doc

    def get_body(self, owner: str, document_id: str) -> str:
        """The document's full text (a PDF's extracted text, pages separated by blank lines). Nothing
        is parsed here: a PDF's or HTML page's text is the one the split step kept (``text_key``);
        until it has run, 409."""
        doc = self.get(owner, document_id)
        return self._read_text(doc, self._text_key(doc)).decode("utf-8-sig", errors="replace")

    def body(self, owner: str, document_id: str) -> DocumentBody:
        """The text as ``GET /documents/{id}?include=body`` gives it: a link that reads it where the
        store gives links (S3: a presigned GET, so a body of any size passes Lambda's 6 MB response
        limit), else the text itself (``ragchat serve``). Same 404/409 as :meth:`get_body`."""
        doc = self.get(owner, document_id)
        key = self._text_key(doc)
        try:
            url = self.blobs.link(key, content_type=BODY_CONTENT_TYPE, expires_in=BODY_LINK_SECONDS)
        except KeyError:
            self._read_text(doc, key)  # 404, 409, or an older document's text extracted and kept now
            url = self.blobs.link(key, content_type=BODY_CONTENT_TYPE, expires_in=BODY_LINK_SECONDS)
        if url is not None:
            return DocumentBody(url=url, expires_in=BODY_LINK_SECONDS)
        text = self._read_text(doc, key).decode("utf-8-sig", errors="replace")
        return DocumentBody(text=text)

    @staticmethod
    def _text_key(doc: Document) -> str:
        return text_key(doc.owner, doc.id) if doc.content_type in EXTRACTED_TYPES else doc.body_key

    def _read_text(self, doc: Document, key: str) -> bytes:
        try:
            return self.blobs.get(key)
        except KeyError:
            if doc.content_type not in EXTRACTED_TYPES:
                raise NotFound("Document body not found") from None
            if doc.status in _IN_FLIGHT:
                raise Conflict(
                    f"The document's text is not extracted yet ({doc.status}): read it again once it is READY"
                ) from None
            return self._backfill_text(doc)

    def page_image(self, owner: str, document_id: str, page: int, find: Sequence[str] = ()) -> PageImage:
        """Page ``page`` (1-based) of a READY PDF as an image, rendered from the stored original, with
        boxes over the passages ``find`` (the viewer's cited sentences) where they stand on it."""
        from ragchat.domain.page_images import MAX_PNG_BYTES, PAGE_WIDTH

        if page < 1:
            raise ValidationError("page must be a positive integer (the first page is 1)")
        doc = self.get(owner, document_id)
        if doc.content_type in IMAGE_TYPES:
            return self._picture(doc, page)
        if doc.content_type != "application/pdf":
            raise ValidationError("This document is not a PDF: it has no pages to show (read its text)")
        if doc.status != DocumentStatus.READY:
            raise Conflict(f"The PDF is not ready ({doc.status}): its pages are shown once it is READY")
        if self.pages is None:
            raise NotFound("Page images are not available here")
        try:
            pdf = self.blobs.get(doc.body_key)
        except KeyError:
            raise NotFound("Document body not found") from None
        for width in (PAGE_WIDTH, PAGE_WIDTH // 2):
            shown = self.pages.render(pdf, page, width, find)
            if len(shown.png) <= MAX_PNG_BYTES:
                return shown
        return self.pages.render(pdf, page, PAGE_WIDTH // 4, find)  # at most 225 x 900 pixels: ~0.6 MB

    def _picture(self, doc: Document, page: int) -> PageImage:
        """A picture's own bytes as its one page (the viewer shows it above the text OCR read):
        PNG, JPEG and WebP, which browsers show, up to ``MAX_PNG_BYTES``; a TIFF, or a larger
        picture, is a 400 saying its text is what can be read."""
        from ragchat.domain.content_types import TIFF
        from ragchat.domain.images import image_info
        from ragchat.domain.page_images import MAX_PNG_BYTES, PageImage

        if doc.status != DocumentStatus.READY:
            raise Conflict(f"The picture is not ready ({doc.status}): it is shown once it is READY")
        if doc.content_type == TIFF:
            raise ValidationError(
                "A TIFF picture cannot be shown in a browser: its text, read by OCR, is below"
            )
        try:
            data = self.blobs.get(doc.body_key)
        except KeyError:
            raise NotFound("Document body not found") from None
        info = image_info(data)
        if page != 1:
            raise NotFound(f"Page {page} not found: the document has 1 page(s)")
        if len(data) > MAX_PNG_BYTES:
            raise ValidationError("The picture is too large to show here: its text, read by OCR, is below")
        width, height = info.frames[0]
        return PageImage(page=1, pages=1, width=width, height=height, png=data, mime=info.content_type)

    def _backfill_text(self, doc: Document) -> bytes:
        """A document ingested before its extracted text was kept: extract it this once (the same
        bounded extraction as ingestion) and keep it, so no later read parses anything. A FAILED
        document has no text to read (404)."""
        from ragchat.domain.extraction import extract

        if doc.status != DocumentStatus.READY:
            raise NotFound("The document has no extracted text: its ingestion failed; upload it again")
        try:
            body = self.blobs.get(doc.body_key)
        except KeyError:
            raise NotFound("Document body not found") from None
        data = keep_extracted_text(
            self.blobs, doc.owner, doc.id, extract(body, content_type=doc.content_type)
        )
        logger.info("documents.text_kept", extra={"documentId": doc.id, "bytes": len(data)})
        return data

    def update(
        self,
        owner: str,
        document_id: str,
        changes: dict[str, Any] | None = None,
        *,
        enabled: bool | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Document:
        """Apply ``enabled``/``title``/``metadata`` (as keyword arguments or a ``changes`` dict), to
        the end (:meth:`update_within` with no time bound)."""
        wanted: dict[str, Any] = dict(changes or {})
        for name, value in (("enabled", enabled), ("title", title), ("metadata", metadata)):
            if value is not None:
                wanted[name] = value
        return self.update_within(owner, document_id, wanted, None)[0]

    def update_within(
        self, owner: str, document_id: str, changes: dict[str, Any], seconds: float | None
    ) -> tuple[Document, int, bool]:
        """Apply ``changes``; enabling or disabling reaches the index at once, ``DELETE_PAGE`` chunks a
        step, unless the document is still being ingested (then the pipeline applies the record's
        flag when it finishes). With ``seconds`` the switch stops between two steps once they have
        passed (after one step at least), the record saying how far it got (``switching``), so an
        API request answers inside API Gateway's 29 s; the same change again carries on. Returns
        ``(document, chunks switched so far, finished)``."""
        clean = _clean_changes(changes)
        doc = self.get(owner, document_id)
        want = clean.pop("enabled", None)
        if want is None or doc.status in _IN_FLIGHT:
            if want is not None:
                clean.update(enabled=want, switching=None)
            return self._updated(owner, document_id, clean), 0, True
        if clean:  # a title or metadata changes at once
            doc = self._updated(owner, document_id, clean)
        return self._switch(doc, want, seconds)

    def _switch(self, doc: Document, want: bool, seconds: float | None) -> tuple[Document, int, bool]:
        """Switch the document's vectors to ``want``, a chunk range at a time. The record says
        ``enabled`` whenever any chunk may be on (disabling: the index first, the record last;
        enabling: the record first), and ``switching`` while a switch over several steps is under
        way, so a document is never shown disabled while its chunks are retrieved, nor enabled and
        half switched without saying so."""
        owner, step = doc.owner, max(1, DELETE_PAGE)
        deadline = None if seconds is None else self.clock() + seconds
        side = "on" if want else "off"
        phase, _, at = (doc.switching or "").partition(":")
        start = int(at) if phase == side and at.isdigit() else 0  # reversed midway: from 0 again
        count = max(0, doc.chunk_count)
        steps_left = count - start > step
        mark: dict[str, Any] = {"switching": f"{side}:{start}"} if steps_left else {}
        if want:  # the record first: enabled (and how far the switch is)
            mark["enabled"] = True
        if mark and (want or doc.switching != mark["switching"]):
            doc = self._updated(owner, doc.id, mark)
        first = self.documents.list_notes(owner, document_id=doc.id, limit=step).items
        tags = version_tags([n.id for n in first], doc.version)  # the version its notes are
        try:
            while True:
                stop = min(count, start + step)
                self.index.set_enabled(owner, doc.id, want, tags=tags, chunks=(start, stop))
                start = stop
                if start >= count:
                    break
                if deadline is not None and self.clock() >= deadline:
                    doc = self._updated(owner, doc.id, {"switching": f"{side}:{start}"})
                    logger.info("documents.switch_paused", extra={"documentId": doc.id, "chunks": start})
                    return doc, start, False
        except Exception:
            if want and not steps_left:  # one step: the record back (never shown enabled while
                self.documents.update_document(owner, doc.id, {"enabled": False})  # search leaves it out)
            raise
        doc = self._updated(owner, doc.id, {"enabled": want, "switching": None})
        logger.info("documents.updated", extra={"documentId": doc.id, "fields": ["enabled"]})
        return doc, count, True

    def _updated(self, owner: str, document_id: str, changes: dict[str, Any]) -> Document:
        updated = self.documents.update_document(owner, document_id, changes)
        if updated is None:
            raise NotFound("Document not found")
        if changes:
            logger.info("documents.updated", extra={"documentId": document_id, "fields": sorted(changes)})
        return updated

    def delete(self, owner: str, document_id: str) -> None:
        self.delete_within(owner, document_id, None)

    def delete_within(self, owner: str, document_id: str, seconds: float | None) -> tuple[int, bool]:
        """Delete the document: its chunks a page (``DELETE_PAGE`` notes) at a time, each page's
        vectors before its notes (nothing stays retrievable without its note), then the vectors a
        crash may have left without a note, the body, work files and the record. With ``seconds``
        it stops between two pages once they have passed (after one page at least: every call makes
        progress), so an API request answers inside API Gateway's 29 s whatever the document's size;
        calling again carries on. Returns ``(notes deleted, finished)``."""
        doc = self.get(owner, document_id)
        deadline = None if seconds is None else self.clock() + seconds
        removed = 0
        tags = set(version_tags((), doc.version))
        page_size = DELETE_PAGE
        while True:
            page = self.documents.list_notes(owner, document_id=document_id, limit=page_size).items
            if not page:
                break
            ids = [n.id for n in page]
            tags.update(version_tags(ids, doc.version))
            self.index.delete(ids)
            self.documents.delete_notes_of_document(owner, document_id, limit=len(ids))
            removed += len(ids)
            if len(ids) < page_size:  # that was the last page
                break
            if deadline is not None and self.clock() >= deadline:
                logger.info("documents.delete_paused", extra={"documentId": document_id, "notes": removed})
                return removed, False
        self.index.delete_document(owner, document_id, tags=sorted(tags))
        if doc.body_key:
            self.blobs.delete(doc.body_key)
        self.blobs.delete(text_key(owner, document_id))  # a PDF's or HTML page's kept text (any version)
        self.blobs.delete_prefix(work_prefix(document_id))
        deleted = self.documents.delete_document(owner, document_id)
        if deleted and self.held is not None:  # once, by whichever delete removed the record
            self.held.release(owner, doc.size or 0)
        if self.attempts is not None:  # deleted mid-run: its count would otherwise stay behind
            self.attempts.end(owner, document_id, doc.version)
        logger.info("documents.deleted", extra={"documentId": document_id, "notes": removed})
        return removed, True

    # ------------------------------------------------------------------ notes
    def list_notes(
        self, owner: str, *, document_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Note]:
        return self.documents.list_notes(
            owner, document_id=document_id or None, limit=_limit(limit), cursor=cursor or None
        )

    def delete_note(self, owner: str, note_id: str) -> Note:
        note = self.documents.delete_note(owner, note_id)
        if note is None:
            raise NotFound("Note not found")
        self.index.delete([note.id])
        if note.document_id:
            doc = self.documents.get_document(owner, note.document_id)
            if doc is not None:
                self.documents.update_document(owner, doc.id, {"chunk_count": max(0, doc.chunk_count - 1)})
        return note
