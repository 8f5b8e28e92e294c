"""S3 ``ObjectCreated`` under ``uploads/`` → the ingestion pipeline (SPEC §5).

- Owner: the object's ``owner`` metadata (``x-amz-meta-owner``), else the first path segment
  (``uploads/<owner>/<file>``). An upload with neither is rejected (logged, reported in the result).
- Document id: stable per object key (``stable_document_id``), so re-uploading the same key
  replaces the document instead of adding another.
- Object metadata may carry ``title`` and ``collection``.
- Permanent problems (unsupported type, too large, no owner) are logged as ``s3_ingest.rejected``
  and reported; anything else (throttling, storage errors) is raised so Lambda retries the event.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote_plus

from ragchat.domain.errors import RagchatError, TransientError, ValidationError
from ragchat.domain.ids import stable_document_id

logger = logging.getLogger("ragchat.s3_ingest")

UPLOADS_PREFIX = "uploads/"


def owner_for(key: str, metadata: dict[str, str]) -> str:
    owner = (metadata.get("owner") or "").strip()
    if owner:
        return owner
    parts = key.split("/")
    if len(parts) >= 3 and parts[0] == "uploads" and parts[1].strip():
        return parts[1].strip()
    raise ValidationError(
        f"{key}: no owner (upload under uploads/<owner>/<file> or set the 'owner' object metadata)"
    )


def ingest_s3_event(container: Any, event: dict[str, Any], *, s3: Any = None) -> dict[str, Any]:
    if s3 is None:
        import boto3

        s3 = boto3.client("s3", region_name=container.settings.aws_region)
    accepted: list[dict[str, str]] = []
    rejected: list[dict[str, str]] = []
    for record in event.get("Records") or []:
        info = record.get("s3") or {}
        bucket = (info.get("bucket") or {}).get("name", "")
        key = unquote_plus((info.get("object") or {}).get("key", ""))
        if not key.startswith(UPLOADS_PREFIX) or key.endswith("/"):
            continue
        try:
            obj = s3.get_object(Bucket=bucket, Key=key)
            metadata = {k.lower(): v for k, v in (obj.get("Metadata") or {}).items()}
            data = obj["Body"].read()
            owner = owner_for(key, metadata)
            doc = container.ingestion.submit_file(
                owner,
                data=data,
                filename=key.rsplit("/", 1)[-1],
                content_type=None,
                title=metadata.get("title") or None,
                collection=metadata.get("collection") or None,
                source=f"s3://{bucket}/{key}",
                document_id=stable_document_id(key),
            )
        except RagchatError as exc:
            if isinstance(exc, TransientError) or exc.status >= 500:
                raise
            logger.error("s3_ingest.rejected key=%s reason=%s", key, exc.message)
            rejected.append({"key": key, "error": exc.message})
            continue
        logger.info("s3_ingest.accepted key=%s documentId=%s", key, doc.id)
        accepted.append({"key": key, "documentId": doc.id, "status": str(doc.status)})
    return {"accepted": accepted, "rejected": rejected}
