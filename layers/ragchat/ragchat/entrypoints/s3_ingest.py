"""S3 ``ObjectCreated`` under ``uploads/`` → the ingestion pipeline (docs/ingestion.md).

- Owner: ONLY the key's first segments (``uploads/<owner>/<file>``: the owner's personal workspace;
  ``uploads/<workspace>/<uploader>/<file>``: a shared workspace, ``ws_…``); object metadata cannot
  claim another owner. A key without an owner (or, in a shared workspace, an uploader) is rejected.
- A shared workspace's upload is ingested only if its uploader is an editor or owner of the
  workspace at that moment (one consistent read of the ``WorkspaceStore``; a grant issued before the
  uploader was removed or made a viewer ingests nothing): otherwise it is rejected with the reason
  (logged as ``s3_ingest.rejected``, reported, not retried, so no DLQ) and a granted file removed.
- The object is read through the ``BlobStore`` port (the documents bucket); an event for any other
  bucket is rejected.
- Document id: stable per object key (``stable_document_id``), so re-uploading the same key
  replaces the document instead of adding another.
- A granted upload (``x-amz-meta-grant``, signed into the presigned POST) is ingested once: its key
  is a one-time staging key; the first object claims the grant, is stored at the document's own
  place (``documents/…``) and the staged object removed. A replayed POST is refused (logged as
  ``s3_ingest.rejected``) and its object removed; the document's bytes are untouched
  (``UploadService.ingest_stored``).
- What a granted upload became is recorded for its uploader (``GET /uploads/{uploadId}``): the new
  document, or the one its bytes already were (a copy is removed and its grant's document never
  comes, so this is how the page learns it was "Already there").
- An upload refused here (too large, a type that cannot be read, the uploader no longer an editor,
  a byte ceiling) is recorded for its uploader too, with the status and message ``POST /documents``
  gives for that file (``GET /uploads/{uploadId}``: ``refused``), so the page says why at once. An
  object of another bucket, or a key without an owner, is no grant of ours: only logged.
- An object dropped without a grant is ingested where it lies: the document's body is that object,
  so deleting the document deletes it.
- Object metadata may carry ``title`` (plain or RFC 2047, as ``POST /uploads`` signs it) and
  ``collection``.
- Permanent problems (unsupported type, too large, no owner, uploader not an editor) are logged as
  ``s3_ingest.rejected`` and reported; anything else (throttling, storage errors) is raised so
  Lambda retries the event.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote_plus

from ragchat.bootstrap import Container, ContainerFactory, LazyContainer
from ragchat.domain.errors import PayloadTooLarge, RagchatError, TransientError, ValidationError
from ragchat.domain.file_errors import too_large
from ragchat.domain.uploads import UPLOADS_PREFIX, owner_of_key, upload_target
from ragchat.observability import S3_REQUEST_ID, lambda_entry, root_logger

root_logger()  # JSON log lines on stdout, correlated by the S3 request id (ragchat.observability)
logger = logging.getLogger("ragchat.s3_ingest")

owner_for = owner_of_key
__all__ = ["UPLOADS_PREFIX", "ingest_s3_event", "owner_for", "s3_ingest_handler"]


def ingest_s3_event(container: Container, event: dict[str, Any]) -> dict[str, Any]:
    accepted: list[dict[str, str]] = []
    rejected: list[dict[str, str]] = []
    for record in event.get("Records") or []:
        info = record.get("s3") or {}
        bucket = str((info.get("bucket") or {}).get("name", ""))
        key = unquote_plus((info.get("object") or {}).get("key", ""))
        size = int((info.get("object") or {}).get("size") or 0)
        if not key.startswith(UPLOADS_PREFIX) or key.endswith("/"):
            continue
        try:
            document_id, status = _ingest(container, bucket, key, size)
        except RagchatError as exc:
            if isinstance(exc, TransientError) or exc.status >= 500:
                raise
            logger.error("s3_ingest.rejected", extra={"key": key, "reason": exc.message})
            rejected.append({"key": key, "error": exc.message})
            continue
        logger.info("s3_ingest.accepted", extra={"key": key, "documentId": document_id})
        accepted.append({"key": key, "documentId": document_id, "status": status})
    return {"accepted": accepted, "rejected": rejected}


def _ingest(container: Container, bucket: str, key: str, size: int) -> tuple[str, str]:
    settings = container.settings
    if settings.documents_bucket and bucket != settings.documents_bucket:
        raise ValidationError(f"{key}: bucket {bucket!r} is not the documents bucket (DOCUMENTS_BUCKET)")
    upload_target(key)  # no owner (or no uploader in a shared workspace): rejected before reading
    if size > settings.max_upload_bytes:  # too large: rejected before reading it into memory (kept)
        container.uploads.refused(key, PayloadTooLarge(too_large(size, settings.max_upload_bytes)))
        raise PayloadTooLarge(f"{key}: {size} bytes is over MAX_UPLOAD_BYTES ({settings.max_upload_bytes})")
    try:
        data, metadata = container.blobs.get_with_metadata(key)
    except KeyError:
        raise ValidationError(f"{key}: the object no longer exists") from None
    doc = container.uploads.ingest_stored(key, data=data, metadata=metadata, source=f"s3://{bucket}/{key}")
    return doc.id, str(doc.status)


class S3IngestHandler:
    """S3 ``ObjectCreated`` events under ``uploads/`` → ingestion, over a lazily made container."""

    def __init__(self, container: ContainerFactory = Container) -> None:
        self.container = LazyContainer(container, ("launcher",))
        self._entry = lambda_entry(self._ingest, name="s3_ingest_handler", correlation_id_path=S3_REQUEST_ID)

    def with_container(self, container: ContainerFactory) -> S3IngestHandler:
        return S3IngestHandler(container)

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._entry(event, context)
        return result

    def _ingest(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        return ingest_s3_event(self.container.get(), event)


def s3_ingest_handler(container: ContainerFactory = Container) -> S3IngestHandler:
    return S3IngestHandler(container)
