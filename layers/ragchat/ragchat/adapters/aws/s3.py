"""S3 blob store: document bodies and uploads live in the documents bucket."""

from __future__ import annotations

from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError

from ragchat.domain.errors import NotFound
from ragchat.domain.uploads import PresignedUpload, UploadGrant

_MISSING = {"NoSuchKey", "404", "NotFound"}
_DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys
# Presigned POSTs signed with SigV4 (botocore would default presigning to SigV2) for the bucket's
# regional virtual-host URL (the global one redirects a young bucket outside us-east-1, and a browser's
# cross-origin form POST does not survive the redirect).
# max_pool_connections: the split step writes SPLIT_WRITERS batch files at once (services/ingest_steps.py).
S3_CLIENT_CONFIG = Config(
    signature_version="s3v4",
    s3={"addressing_style": "virtual", "us_east_1_regional_endpoint": "regional"},
    max_pool_connections=16,
)


class S3BlobStore:
    """``BlobStore`` on one bucket (low-level client, as ``ragchat.bootstrap`` builds it)."""

    def __init__(self, bucket: str, client: Any) -> None:
        self.bucket = bucket
        self._client = client

    def put(self, key: str, data: bytes, *, content_type: str = "application/octet-stream") -> None:
        self._client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)

    def get(self, key: str) -> bytes:
        return self.get_with_metadata(key)[0]

    def get_with_metadata(self, key: str) -> tuple[bytes, dict[str, str]]:
        try:
            resp = self._client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in _MISSING:
                raise KeyError(key) from exc
            raise
        body: bytes = resp["Body"].read()
        metadata = {str(k).lower(): str(v) for k, v in (resp.get("Metadata") or {}).items()}
        return body, metadata

    def delete(self, key: str) -> None:
        self._client.delete_object(Bucket=self.bucket, Key=key)  # absent keys are not an error in S3

    def delete_prefix(self, prefix: str) -> int:
        """Delete every object under ``prefix`` (paginated listing, batched deletes); returns how many.
        Raises if S3 reports any key it could not delete."""
        deleted = 0
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
            for start in range(0, len(keys), _DELETE_BATCH):
                batch = keys[start : start + _DELETE_BATCH]
                resp = self._client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                )
                errors = resp.get("Errors", [])
                if errors:
                    failed = ", ".join(f"{e.get('Key')} ({e.get('Code')})" for e in errors[:5])
                    raise RuntimeError(f"S3 could not delete {len(errors)} object(s): {failed}")
                deleted += len(batch)
        return deleted

    def presign_post(
        self,
        key: str,
        *,
        content_type: str,
        min_bytes: int,
        max_bytes: int,
        expires_in: int,
        metadata: dict[str, str],
    ) -> PresignedUpload:
        """``generate_presigned_post``: signed with the caller's credentials (which need
        ``s3:PutObject`` on the key); S3 enforces the key, size range, type and metadata."""
        fields = {"Content-Type": content_type}
        fields.update({f"x-amz-meta-{name}": value for name, value in metadata.items()})
        conditions: list[Any] = [["content-length-range", min_bytes, max_bytes]]
        conditions += [{name: value} for name, value in fields.items()]
        resp = self._client.generate_presigned_post(
            Bucket=self.bucket, Key=key, Fields=fields, Conditions=conditions, ExpiresIn=expires_in
        )
        return PresignedUpload(url=str(resp["url"]), fields={k: str(v) for k, v in resp["fields"].items()})

    def link(self, key: str, *, content_type: str, expires_in: int) -> str:
        """A presigned GET (``HeadObject`` first: an absent key is ``KeyError``, not a dead link),
        signed with the caller's credentials (which need ``s3:GetObject`` on the key), answered with
        ``content_type`` and shown inline. The browser reads it cross-origin: the bucket's CORS allows
        GET, and the pages' ``connect-src`` names the bucket's origin."""
        try:
            self._client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in _MISSING:
                raise KeyError(key) from exc
            raise
        params = {
            "Bucket": self.bucket,
            "Key": key,
            "ResponseContentType": content_type,
            "ResponseContentDisposition": "inline",
        }
        return str(self._client.generate_presigned_url("get_object", Params=params, ExpiresIn=expires_in))

    def upload_grant(self, token: str) -> UploadGrant:
        raise NotFound("Not found: uploads go straight to S3")
