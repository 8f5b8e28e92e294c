"""DELETE /documents/{id} of a big document answers within API Gateway's 29 s (issue 44, item 4c):
it deletes a page of chunks at a time (each page's vectors, then its notes) and, once 20 s have
passed, answers 202 with the chunks deleted so far; the client repeats the DELETE until 204. The
clock is injected: each index call here "takes" 25 s, so every request does one page of work."""

from __future__ import annotations

import math
from typing import Any

import pytest
from ragchat.domain.models import SearchFilter
from ragchat.services import documents

from tests.events import json_body
from tests.unit.api_support import make_api

OWNER = "alice"
PAGE = 50  # DELETE_PAGE (1,000 notes) made small, so a few hundred chunks take several requests
CHUNKS = 5 * PAGE + 10


def test_a_big_document_is_deleted_in_bounded_requests_and_none_of_it_is_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(documents, "DELETE_PAGE", PAGE)
    api = make_api({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"})
    words = " ".join(f"w{i:06d}" for i in range(CHUNKS * 12))  # ~12 eight-character words a chunk
    created = json_body(api.call("POST", "/notes", body={"text": words, "title": "Huge"}, principal=OWNER))
    doc_id = created["documentId"]
    total = len(api.documents.list_notes(OWNER, document_id=doc_id, limit=10_000).items)
    assert total > 5 * PAGE and api.index.count(OWNER) == total

    deleted_per_request: list[int] = []
    index_delete = api.index.delete

    def slow_delete(ids: Any, **kw: Any) -> None:
        deleted_per_request[-1] += len(ids)
        api.clock.advance(25.0)  # a page of vectors "takes" 25 s
        index_delete(ids, **kw)

    api.index.delete = slow_delete  # type: ignore[method-assign]
    statuses = []
    while True:
        deleted_per_request.append(0)
        res = api.call("DELETE", f"/documents/{doc_id}", principal=OWNER)
        statuses.append(res["statusCode"])
        if res["statusCode"] != 202:
            break
        progress = json_body(res)
        assert progress["finished"] is False and progress["chunksDeleted"] == deleted_per_request[-1]
        assert api.call("GET", f"/documents/{doc_id}", principal=OWNER)["statusCode"] == 200  # carries on
    assert statuses == [202] * (math.ceil(total / PAGE) - 1) + [204]
    assert max(deleted_per_request) <= PAGE  # bounded work per request
    assert sum(deleted_per_request) == total
    assert api.call("GET", f"/documents/{doc_id}", principal=OWNER)["statusCode"] == 404
    assert api.documents.list_notes(OWNER, document_id=doc_id).items == []
    assert api.index.count(OWNER) == 0
    assert api.index.search([1.0] + [0.0] * 63, SearchFilter(owner=OWNER), 10) == []


def test_a_small_document_is_deleted_in_one_request() -> None:
    api = make_api()
    created = json_body(api.call("POST", "/notes", body={"text": "A short note."}, principal=OWNER))
    assert api.call("DELETE", f"/documents/{created['documentId']}", principal=OWNER)["statusCode"] == 204
