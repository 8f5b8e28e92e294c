"""Direct uploads on moto (issue 11): ``POST /uploads`` through the notes function → the file POSTed
to S3 with the presigned fields → the S3 trigger → the real state machine → the document READY, its
body the uploaded object (no second copy), deleted with the document."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import requests

from tests.integration.moto_stack import BUCKET, Stack, load_event

SUB = load_event("notes_post.json")["requestContext"]["authorizer"]["claims"]["sub"]
MiB = 1024 * 1024


def api_event(method: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    event = copy.deepcopy(load_event("notes_post.json"))
    event.update(resource=path, path=path, httpMethod=method, body=json.dumps(payload) if payload else None)
    event["requestContext"].update(resourcePath=path, httpMethod=method, path=f"/dev{path}")
    return event


def s3_event(key: str) -> dict[str, Any]:
    event = load_event("s3_upload_put.json")
    record = event["Records"][0]["s3"]
    record["bucket"]["name"] = BUCKET
    record["object"]["key"] = key
    return event


def test_a_presigned_upload_is_ingested_where_it_lies(stack: Stack) -> None:
    notes = stack.handler("notes_api")
    request = {"filename": "eiffel-tower.md", "title": "Tour Eiffel é", "collection": "travel"}
    response = notes(api_event("POST", "/uploads", request), None)
    assert response["statusCode"] == 201, response
    ticket = json.loads(response["body"])
    key = ticket["key"]
    assert key.startswith(f"uploads/{SUB}/")
    # SigV4 for the bucket's regional URL (no redirect a browser's cross-origin POST would not follow)
    assert ticket["url"] == f"https://{BUCKET}.s3.us-east-1.amazonaws.com/"
    assert ticket["fields"]["x-amz-algorithm"] == "AWS4-HMAC-SHA256"

    policy = json.loads(base64.b64decode(ticket["fields"]["policy"]))
    conditions = policy["conditions"]
    assert ["content-length-range", 1, 500 * MiB] in conditions
    assert {"Content-Type": "text/markdown"} in conditions and {"key": key} in conditions
    assert {"x-amz-meta-collection": "travel"} in conditions
    assert {"x-amz-meta-title": ticket["fields"]["x-amz-meta-title"]} in conditions
    assert policy["expiration"].startswith("20")

    text = b"# Eiffel Tower\n\nThe tower is 330 metres tall.\n"
    posted = requests.post(
        ticket["url"], data=ticket["fields"], files={"file": ("eiffel-tower.md", text)}, timeout=30
    )
    assert posted.status_code in (200, 201, 204), posted.text

    # Before the trigger has run the document does not exist yet: the client keeps polling.
    before = notes(api_event("GET", f"/documents/{ticket['documentId']}"), None)
    assert before["statusCode"] == 404

    result = stack.handler("s3_ingest")(s3_event(key), None)
    assert result["accepted"][0]["documentId"] == ticket["documentId"]
    (execution,) = stack.wait_for_all(1)
    assert execution["status"] == "SUCCEEDED", execution

    doc = json.loads(notes(api_event("GET", f"/documents/{ticket['documentId']}"), None)["body"])
    assert (doc["status"], doc["title"], doc["collection"]) == ("READY", "Tour Eiffel é", "travel")
    assert doc["chunkCount"] >= 1
    keys = [o["Key"] for o in stack.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    assert keys == [key]  # stored once: no copy under documents/

    deleted = notes(api_event("DELETE", f"/documents/{ticket['documentId']}"), None)
    assert deleted["statusCode"] == 204
    assert stack.s3.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0


def test_a_bad_upload_request_is_400_and_signs_nothing(stack: Stack) -> None:
    response = stack.handler("notes_api")(api_event("POST", "/uploads", {"filename": "setup.exe"}), None)
    assert response["statusCode"] == 400
    assert "Unsupported" in json.loads(response["body"])["error"]
