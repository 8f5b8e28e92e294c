"""A duplicate S3 event for an upload already claimed and removed (issue 29): with ``s3:ListBucket``
(template: S3IngestFunction) S3 answers the GetObject 404 ``NoSuchKey`` and the event is rejected
cleanly; without it S3 answers 403 ``AccessDenied``, which is an error the invocation raises, so
Lambda retries the event and sends it to the dead-letter queue (and the alarm fires)."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from ragchat.adapters.aws.s3 import S3BlobStore
from ragchat.entrypoints.s3_ingest import ingest_s3_event

from tests.unit.api_support import make_api
from tests.unit.test_entrypoints import s3_event

KEY = "uploads/alice/0123456789abcdef/plan.md"


def blobs_answering(code: str, status: int) -> tuple[S3BlobStore, Stubber]:
    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    stubber.add_client_error("get_object", service_error_code=code, http_status_code=status,
                             expected_params={"Bucket": "docs", "Key": KEY})  # fmt: skip
    stubber.activate()
    return S3BlobStore("docs", client), stubber


def test_an_absent_upload_read_as_404_is_rejected_without_an_error() -> None:
    blobs, stubber = blobs_answering("NoSuchKey", 404)
    api = make_api(blobs=blobs)
    result = ingest_s3_event(api.container, s3_event(KEY))
    assert result["accepted"] == []
    assert result["rejected"] == [{"key": KEY, "error": f"{KEY}: the object no longer exists"}]
    assert api.launcher.started == []
    stubber.assert_no_pending_responses()


def test_without_list_permission_the_same_event_fails_and_would_be_retried_into_the_dlq() -> None:
    blobs, _ = blobs_answering("AccessDenied", 403)
    api = make_api(blobs=blobs)
    with pytest.raises(ClientError):
        ingest_s3_event(api.container, s3_event(KEY))
