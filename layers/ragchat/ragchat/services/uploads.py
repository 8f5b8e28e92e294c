"""Direct uploads (issue 11): grant a presigned POST, and ingest an uploaded object where it lies.

Flow: ``POST /uploads`` → :meth:`UploadService.presign` (a form ``url`` + ``fields`` and the
``documentId`` the upload becomes) → the client POSTs the file with the fields (to S3, or locally to
``/uploads/local/<token>`` → :meth:`UploadService.receive_local`) → the S3 trigger (or the local
route itself) → :meth:`UploadService.ingest_stored` → the document ``PENDING`` → ``READY``.

Status: nothing is recorded at presign time, so ``GET /documents/{id}`` answers 404 until the file
has landed and been accepted (an abandoned upload leaves no document behind), then ``PENDING`` …
``READY``/``FAILED``. Clients poll and treat 404 as "not arrived yet" until the grant expires.

The body is never copied: the document's ``body_key`` is the upload key, so deleting the document
deletes the uploaded object, and a second POST to the same key replaces the document.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.clock import Clock, system_clock, utc_iso
from ragchat.domain.errors import Forbidden, PayloadTooLarge, RagchatError, ValidationError
from ragchat.domain.ids import new_id
from ragchat.domain.models import Document
from ragchat.domain.uploads import (
    PresignedUpload,
    decode_metadata_value,
    document_id_for_key,
    owner_of_key,
    upload_key,
    upload_metadata,
    validate_upload_request,
)

if TYPE_CHECKING:
    from ragchat.ports import BlobStore
    from ragchat.services.ingestion import IngestionService

logger = Logger(service="ragchat", child=True)


@dataclass(frozen=True, slots=True)
class UploadTicket:
    """What ``POST /uploads`` answers: where to POST the file, and what it becomes."""

    document_id: str
    key: str
    post: PresignedUpload
    content_type: str
    max_bytes: int
    expires_at: str


class UploadService:
    def __init__(
        self,
        blobs: BlobStore,
        ingestion: IngestionService,
        *,
        max_bytes: int,
        expires_in: int,
        clock: Clock = system_clock,
    ) -> None:
        self.blobs = blobs
        self.ingestion = ingestion
        self.max_bytes = max_bytes
        self.expires_in = expires_in
        self.clock = clock

    def presign(
        self,
        owner: str,
        *,
        filename: object,
        content_type: object = None,
        title: object = None,
        collection: object = None,
    ) -> UploadTicket:
        """Validate (the same title/collection/file-type rules as every other way in) and sign."""
        req = validate_upload_request(filename, content_type, title, collection)
        key = upload_key(owner, new_id(), req.filename)
        post = self.blobs.presign_post(
            key,
            content_type=req.content_type,
            min_bytes=1,
            max_bytes=self.max_bytes,
            expires_in=self.expires_in,
            metadata=upload_metadata(req.title, req.collection),
        )
        logger.info("upload.presigned", extra={"key": key, "contentType": req.content_type})
        return UploadTicket(
            document_id=document_id_for_key(key),
            key=key,
            post=post,
            content_type=req.content_type,
            max_bytes=self.max_bytes,
            expires_at=utc_iso(self.clock() + self.expires_in),
        )

    def ingest_stored(self, key: str, *, data: bytes, metadata: dict[str, str], source: str) -> Document:
        """Accept an object already stored under ``uploads/<owner>/…`` as a document, in place. The
        owner comes from the key only; the id is stable per key (same key → same document)."""
        title = decode_metadata_value(metadata.get("title") or "").strip()
        return self.ingestion.submit_file(
            owner_of_key(key),
            data=data,
            filename=key.rsplit("/", 1)[-1],
            content_type=None,
            title=title or None,
            collection=metadata.get("collection") or None,
            source=source,
            document_id=document_id_for_key(key),
            stored_key=key,
        )

    def receive_local(self, token: str, fields: dict[str, str], data: bytes) -> Document:
        """The local stand-in for S3's form POST: check the grant (signature, expiry, key, type,
        size), store the file, then ingest it as the S3 trigger would. A file the ingestion refuses
        is removed again (S3 keeps it; here the client sees the 400 at once)."""
        grant = self.blobs.upload_grant(token)
        if fields.get("key") != grant.key:
            raise Forbidden("The form's key does not match the upload URL")
        declared = fields.get("Content-Type") or fields.get("content-type")
        if declared is not None and declared != grant.content_type:
            raise Forbidden(f"Content-Type must be {grant.content_type} for this upload")
        if len(data) > grant.max_bytes:
            raise PayloadTooLarge(f"Upload is too large (limit {grant.max_bytes} bytes)")
        if len(data) < grant.min_bytes:
            raise ValidationError("Empty upload: the file part has no content")
        self.blobs.put(grant.key, data, content_type=grant.content_type)
        try:
            return self.ingest_stored(grant.key, data=data, metadata=grant.metadata, source="api")
        except RagchatError as exc:
            if exc.status < 500:
                self.blobs.delete(grant.key)
            raise
