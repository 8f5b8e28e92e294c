"""Issue 44: enabling or disabling a big document in bounded requests. ``PATCH /documents/{id}``
``{"enabled": ...}`` switches ``DELETE_PAGE`` chunks a step for at most ``DELETE_SECONDS`` a request
(API Gateway answers within 29 s; S3 Vectors rewrites 500 vectors' metadata a put), answers 202
``{id, enabled, chunksSwitched, finished: false, message}`` while chunks are left, and the document
says ``switching`` meanwhile (never shown disabled while a chunk is retrieved); the repeated PATCH
carries on and the last answers 200 with the document. Through the API's handler, an injected clock."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ragchat.domain.models import SearchFilter

from tests.unit.api_support import Api, make_api

PAGE = 20  # DELETE_PAGE here (1,000 deployed)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Api:
    from ragchat.services import documents

    monkeypatch.setattr(documents, "DELETE_PAGE", PAGE)
    return make_api({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"})


def _big(api: Api) -> tuple[str, str, int]:
    words = " ".join(f"w{i:05d}" for i in range(4 * PAGE * 12))  # a bit more than 3 pages of chunks
    res = api.call("POST", "/notes", body={"text": words, "title": "Big"})
    doc_id = json.loads(res["body"])["documentId"]
    doc = api.documents.get_document(api.documents.docs[doc_id].owner, doc_id)
    assert doc is not None and doc.status == "READY" and doc.chunk_count > 3 * PAGE
    return doc.owner, doc_id, doc.chunk_count


def _slow(api: Api) -> list[int]:
    """Each chunk range the index switches "takes" 25 s: one range per 20 s request. Returns the
    chunks switched per request (append 0 before each)."""
    per_request: list[int] = []
    set_enabled = api.index.set_enabled

    def slow(owner: str, document_id: str, enabled: bool, **kw: Any) -> None:
        start, stop = kw.get("chunks") or (0, api.documents.docs[document_id].chunk_count)
        per_request[-1] += stop - start
        api.clock.advance(25.0)
        set_enabled(owner, document_id, enabled, **kw)

    api.index.set_enabled = slow  # type: ignore[method-assign]
    return per_request


def _patch_to_end(
    api: Api, doc_id: str, enabled: bool, per_request: list[int], owner: str, counts: list[int] | None = None
) -> list[int]:
    """PATCH until it answers 200; returns the statuses (``counts``: the enabled vectors after each 202)."""
    statuses = []
    while True:
        per_request.append(0)
        res = api.call("PATCH", f"/documents/{doc_id}", body={"enabled": enabled})
        statuses.append(res["statusCode"])
        body = json.loads(res["body"])
        if res["statusCode"] == 200:
            assert body["enabled"] is enabled and "switching" not in body
            return statuses
        assert res["statusCode"] == 202, body
        assert body["finished"] is False and body["enabled"] is enabled and body["id"] == doc_id
        assert body["chunksSwitched"] > 0 and "repeat the PATCH" in body["message"]
        shown = json.loads(api.call("GET", f"/documents/{doc_id}")["body"])
        # half switched: shown enabled (some chunks may be on) and saying how far the switch is
        assert shown["enabled"] is True
        assert shown["switching"] == {"enabled": enabled, "chunksSwitched": body["chunksSwitched"]}
        if counts is not None:
            counts.append(api.index.count(owner))
        assert len(statuses) < 20


def test_a_big_document_is_disabled_then_enabled_in_bounded_requests(api: Api) -> None:
    owner, doc_id, total = _big(api)
    assert api.index.count(owner) == total
    per_request = _slow(api)

    counts: list[int] = []
    statuses = _patch_to_end(api, doc_id, False, per_request, owner, counts)
    assert statuses[-1] == 200 and len(statuses) >= -(-total // PAGE)  # one range per request
    assert counts == [total - PAGE * (n + 1) for n in range(len(counts))]  # a range off per request
    assert max(per_request) <= PAGE and sum(per_request) == total
    assert api.index.count(owner) == 0  # finished: nothing of it is retrieved
    assert api.index.search([1.0] + [0.0] * 63, SearchFilter(owner=owner), 10) == []
    assert api.documents.docs[doc_id].enabled is False

    per_request.clear()
    counts.clear()
    statuses = _patch_to_end(api, doc_id, True, per_request, owner, counts)
    assert statuses[-1] == 200 and len(statuses) > 1
    assert counts == [PAGE * (n + 1) for n in range(len(counts))]
    assert max(per_request) <= PAGE and sum(per_request) == total
    assert api.index.count(owner) == total
    doc = api.documents.docs[doc_id]
    assert doc.enabled is True and doc.switching is None


def test_a_switch_reversed_midway_starts_again_and_ends_in_the_last_state_asked(api: Api) -> None:
    owner, doc_id, total = _big(api)
    per_request = _slow(api)
    per_request.append(0)
    first = api.call("PATCH", f"/documents/{doc_id}", body={"enabled": False})
    assert first["statusCode"] == 202 and 0 < api.index.count(owner) < total
    per_request.clear()
    _patch_to_end(api, doc_id, True, per_request, owner)
    assert sum(per_request) == total and api.index.count(owner) == total  # the switched-off range too
    per_request.clear()
    _patch_to_end(api, doc_id, False, per_request, owner)
    assert api.index.count(owner) == 0 and api.documents.docs[doc_id].enabled is False


def test_a_title_with_a_switch_is_kept_and_a_small_document_answers_at_once(api: Api) -> None:
    _, doc_id, _ = _big(api)
    per_request = _slow(api)
    per_request.append(0)
    res = api.call("PATCH", f"/documents/{doc_id}", body={"enabled": False, "title": "Renamed"})
    assert res["statusCode"] == 202
    assert api.documents.docs[doc_id].title == "Renamed"  # not lost to the 202

    small = api.call("POST", "/notes", body={"text": "a short note about lighthouses", "title": "Small"})
    small_id = json.loads(small["body"])["documentId"]
    res = api.call("PATCH", f"/documents/{small_id}", body={"enabled": False})
    assert res["statusCode"] == 200 and json.loads(res["body"])["enabled"] is False
