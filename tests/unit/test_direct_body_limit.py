"""The direct-body limit on AWS is what a Lambda invocation carries (issue 29): a file sent straight
to ``POST /documents`` travels base64-encoded inside the event, and Lambda refuses a synchronous
request over 6 MiB before the app runs. The app's limit there is the largest body that always
arrives, and a 413 points to ``POST /uploads``."""

from __future__ import annotations

import json

from ragchat.config import LAMBDA_DIRECT_BODY_BYTES, LAMBDA_SYNC_PAYLOAD_BYTES, load_settings

from tests.events import api_event
from tests.unit.api_support import make_api
from tests.unit.test_api_notes import json_body

AWS_ENV = {
    "RAGCHAT_BACKEND": "aws",
    "DOCUMENTS_TABLE": "d",
    "CONVERSATIONS_TABLE": "c",
    "COUNTERS_TABLE": "n",
    "DOCUMENTS_BUCKET": "b",
    "OPENSEARCH_ENDPOINT": "https://collection.example",
}
# A Cognito ID token is ~1 KB and API Gateway copies each header into multiValueHeaders as well.
TOKEN = "eyJ" + "x" * 1400


def invoke_payload(raw: bytes) -> int:
    """The bytes of the event Lambda receives for ``raw`` posted as a file, as API Gateway sends it."""
    headers = {
        "Authorization": TOKEN,
        "Content-Type": "application/pdf",
        "X-Filename": "handbook.pdf",
        "User-Agent": "Mozilla/5.0 " + "x" * 200,
        "Accept": "*/*",
        "Host": "abc.execute-api.us-east-1.amazonaws.com",
        "X-Forwarded-For": "203.0.113.7",
        "X-Amzn-Trace-Id": "Root=1-" + "0" * 32,
    }
    event = api_event("POST", "/documents", raw_body=raw, headers=headers)
    claims = {"sub": "0" * 36, "email": "you@example.com", "token_use": "id", "aud": "x" * 26}
    event["requestContext"]["authorizer"] = {"claims": {**claims, "iss": "https://cognito-idp" + "x" * 60}}
    return len(json.dumps(event).encode())


def test_on_aws_the_largest_accepted_body_fits_a_lambda_invocation_and_the_old_one_did_not() -> None:
    aws = load_settings(AWS_ENV)
    assert aws.body_limit_bytes == LAMBDA_DIRECT_BODY_BYTES == 4_669_440
    assert invoke_payload(b"%" * aws.body_limit_bytes) <= LAMBDA_SYNC_PAYLOAD_BYTES
    # MAX_BODY_BYTES alone (25 MiB / 1.2) would have accepted bodies Lambda never delivers
    assert invoke_payload(b"%" * int(aws.max_body_bytes / 1.2)) > LAMBDA_SYNC_PAYLOAD_BYTES
    assert load_settings({}).body_limit_bytes == int(25 * 1024 * 1024 / 1.2)  # ragchat serve: unchanged


def test_a_body_over_the_limit_is_413_pointing_to_presigned_uploads() -> None:
    api = make_api({"MAX_BODY_BYTES": "12000"})
    res = api.call("POST", "/documents", raw_body=b"%" * 10_001, headers={"Content-Type": "application/pdf"})
    assert res["statusCode"] == 413
    assert "POST /uploads" in json_body(res)["error"]
    assert api.launcher.started == []
