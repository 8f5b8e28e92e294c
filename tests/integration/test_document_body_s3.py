"""A big document opens in the viewer on AWS (issue 44, item 4a). A Lambda behind API Gateway
answers at most 6 MB: ``GET /documents/{id}?include=body`` sent the whole text inline, so any
non-PDF over ~6 MB could not be opened. On S3 the answer carries ``bodyUrl``, a presigned GET of the
text, instead: the response stays small whatever the document's size, and the link reads the text
(as the page does, cross-origin, without the user's token). The notes function runs as its role and
its response is held to Lambda's limit (``tests/aws_contracts/limits.py``)."""

from __future__ import annotations

import json

import requests
from ragchat.domain.models import DocumentStatus
from ragchat.services.ingestion import IngestionService

from tests.events import api_event
from tests.fakes import FakeLauncher
from tests.integration.moto_stack import Stack

OWNER = "alice"
SEVEN_MB = 7 * 1024 * 1024


def test_a_7_mb_text_document_opens_through_a_link_and_the_response_stays_small(stack: Stack) -> None:
    line = 'Ünïcödé line of a long report, with quotes " and a tab\t.\n'
    text = line * (SEVEN_MB // len(line.encode()) + 1)
    assert len(text.encode()) > SEVEN_MB
    c = stack.container
    # stored as an upload is, left PENDING (the subject is the read, not 7 MB through the pipeline)
    doc = IngestionService(c.documents, c.blobs, FakeLauncher(), c.settings).submit(
        OWNER, body=text.encode(), filename="report.txt"
    )
    assert c.documents.get_document(OWNER, doc.id).status == DocumentStatus.PENDING

    get = stack.handler("notes_api")  # Lambda's 6 MB response limit is checked on the way out
    response = get(api_event("GET", f"/documents/{doc.id}", query={"include": "body"}, principal=OWNER), None)

    assert response["statusCode"] == 200, response
    assert len(response["body"].encode()) < 10_000
    answer = json.loads(response["body"])
    assert "body" not in answer and answer["bodyExpiresIn"] == 900
    fetched = requests.get(answer["bodyUrl"], timeout=30)  # no Authorization: the link is the grant
    assert fetched.status_code == 200
    assert fetched.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert fetched.content.decode("utf-8") == text


def test_someone_else_gets_no_link_to_the_body(stack: Stack) -> None:
    c = stack.container
    doc = IngestionService(c.documents, c.blobs, FakeLauncher(), c.settings).submit(
        OWNER, body=b"private notes", filename="notes.txt"
    )
    get = stack.handler("notes_api")
    response = get(
        api_event("GET", f"/documents/{doc.id}", query={"include": "body"}, principal="mallory"), None
    )
    assert response["statusCode"] == 404
    assert "bodyUrl" not in response["body"] and "X-Amz-Signature" not in response["body"]
