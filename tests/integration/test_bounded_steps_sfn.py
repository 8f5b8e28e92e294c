"""Issue 44, item 4 (big documents): finalize runs in bounded steps of the state machine, and a
workspace DELETE deletes in bounded steps, on the real ``statemachine/ingest.asl.json`` and the real
handlers on moto (DynamoDB, S3, Step Functions), the step handler called in-process for each Lambda
task (``tests/integration/conftest.py``).

The per-step limits are lowered (``FINALIZE_STEP_CHUNKS`` to 7, ``DELETE_PAGE`` to 10) so that a
document of ~50 chunks needs several steps; every Lambda invocation is measured: how many vectors
it switched on or off and how many it deleted. A document replaced by a new version is swapped in
bounded steps too (the previous version's notes and vectors go a page at a time).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ragchat.domain.models import DocumentStatus, SearchFilter

from tests.events import api_event, json_body
from tests.integration.moto_stack import Stack

OWNER = "alice"
STEP = 7  # FINALIZE_STEP_CHUNKS here (1,000 deployed)
PAGE = 10  # DELETE_PAGE here (1,000 deployed)


def _text(tag: str, parts: int = 50) -> str:
    """~``parts`` chunks of distinct text (chunk size 200, no overlap)."""
    return "\n\n".join(f"{tag} part {i}: " + f"lighthouse{i} keeper{i} {tag}{i} " * 8 for i in range(parts))


def _measure(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Per Lambda invocation of the step function: its step, cursor, and how many vectors it
    switched (``set_enabled``: the chunk range's size, ``None`` for a whole document) and deleted."""
    from moto.awslambda.models import LambdaFunction

    calls: list[dict[str, Any]] = []
    dispatch = LambdaFunction._invoke_lambda  # the fixture's in-process handler call
    index = stack.container.ingest_steps.index

    def measured(self: Any, event: Any = None) -> tuple[str, bool, str]:
        payload = json.loads(event) if isinstance(event, str) else (event or {})
        calls.append(
            {"step": payload.get("step"), "cursor": payload.get("cursor"), "switched": [], "deleted": 0}
        )
        return dispatch(self, event)

    set_enabled, delete = index.set_enabled, index.delete

    def counted_set_enabled(owner: str, document_id: str, enabled: bool, **kw: Any) -> None:
        chunks = kw.get("chunks")
        calls[-1]["switched"].append(None if chunks is None else chunks[1] - chunks[0])
        set_enabled(owner, document_id, enabled, **kw)

    def counted_delete(ids: Any, **kw: Any) -> None:
        calls[-1]["deleted"] += len(ids)
        delete(ids, **kw)

    monkeypatch.setattr(LambdaFunction, "_invoke_lambda", measured)
    monkeypatch.setattr(index, "set_enabled", counted_set_enabled)
    monkeypatch.setattr(index, "delete", counted_delete)
    return calls


def _small_steps(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    c = stack.container
    small = {"finalize_step_chunks": STEP, "chunk_size": 200, "chunk_overlap": 0}
    monkeypatch.setattr(c.ingest_steps, "settings", c.ingest_steps.settings.model_copy(update=small))
    monkeypatch.setattr(c, "settings", c.settings.model_copy(update=small))


def _searchable(stack: Stack, owner: str, text: str) -> bool:
    """Whether a search for ``text`` (its own vector: the fake embedder is deterministic) finds it."""
    vector = stack.embedder.embed_query(text)
    hits = stack.container.index.search(vector, SearchFilter(owner=owner), 3)
    return any(h.text == text for h in hits)


def test_a_document_bigger_than_one_step_is_finalized_in_bounded_steps_and_ends_ready(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_steps(stack, monkeypatch)
    calls = _measure(stack, monkeypatch)
    doc = stack.container.ingestion.submit(OWNER, text=_text("first"), title="Big")
    (execution,) = stack.wait_for_all(1, timeout_s=120)
    assert execution["status"] == "SUCCEEDED", execution

    stored = stack.container.documents.get_document(OWNER, doc.id)
    assert stored is not None and stored.status == DocumentStatus.READY
    count = stored.chunk_count
    assert count > 5 * STEP  # the document needs several steps
    assert stack.container.index.count(OWNER) == count  # every chunk switched on
    notes = stack.container.documents.list_notes(OWNER, document_id=doc.id, limit=1000).items
    assert len(notes) == count and all(_searchable(stack, OWNER, n.text) for n in notes)

    finalizing = [c for c in calls if c["step"] == "finalize"]
    # switching on every chunk, then looking at every note for the swap: STEP chunks of work a call
    assert len(finalizing) >= -(-2 * count // STEP)
    for call in finalizing:  # each invocation switched at most one step's chunks, never a document
        assert None not in call["switched"] and sum(call["switched"]) + call["deleted"] <= STEP, call
    assert sum(n for c in finalizing for n in c["switched"]) == count
    assert json.loads(execution["output"])["result"] == {
        "status": "READY",
        "chunkCount": count,
        "finished": True,
        "cursor": "",
    }


def test_a_replaced_big_document_swaps_out_its_previous_version_in_bounded_steps(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_steps(stack, monkeypatch)
    first = stack.container.ingestion.submit(OWNER, text=_text("first"), title="Big")
    stack.wait_for_all(1, timeout_s=120)
    old_notes = stack.container.documents.list_notes(OWNER, document_id=first.id, limit=1000).items
    calls = _measure(stack, monkeypatch)
    again = stack.container.ingestion.submit(
        OWNER, text=_text("second", 45), title="Big", document_id=first.id
    )
    assert again.id == first.id  # a new version of the same document
    executions = stack.wait_for_all(2, timeout_s=120)
    assert all(e["status"] == "SUCCEEDED" for e in executions), executions

    stored = stack.container.documents.get_document(OWNER, first.id)
    assert stored is not None and stored.status == DocumentStatus.READY
    notes = stack.container.documents.list_notes(OWNER, document_id=first.id, limit=1000).items
    assert len(notes) == stored.chunk_count == stack.container.index.count(OWNER)
    assert all("second" in n.text for n in notes) and all(_searchable(stack, OWNER, n.text) for n in notes)
    assert not any(_searchable(stack, OWNER, n.text) for n in old_notes[:5])  # the old version is gone

    finalizing = [c for c in calls if c["step"] == "finalize"]
    swapped = sum(c["deleted"] for c in finalizing)
    assert swapped == len(old_notes) > 3 * STEP  # the previous version went, over several steps
    assert all(None not in c["switched"] and sum(c["switched"]) + c["deleted"] <= STEP for c in finalizing)


def test_a_big_document_that_fails_late_is_cleaned_up_in_bounded_steps(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch fails after others were indexed: MarkFailed removes what the run wrote a step of
    ``FINALIZE_STEP_CHUNKS`` notes at a time (MarkFailedMore carries on), then the record is FAILED."""
    _small_steps(stack, monkeypatch)
    embedder = stack.container.ingest_steps.embedder
    embed = embedder.embed_documents

    def failing(texts: list[str]) -> list[list[float]]:
        if any("first part 99:" in t for t in texts):  # the last batch
            raise ValueError("the model refused this batch")
        return embed(texts)

    monkeypatch.setattr(embedder, "embed_documents", failing)
    calls = _measure(stack, monkeypatch)
    doc = stack.container.ingestion.submit(OWNER, text=_text("first", 100), title="Big")
    (execution,) = stack.wait_for_all(1, timeout_s=120)
    assert execution["status"] == "FAILED", execution

    stored = stack.container.documents.get_document(OWNER, doc.id)
    assert stored is not None and stored.status == DocumentStatus.FAILED
    assert stored.error is not None and "the model refused this batch" in stored.error
    assert stack.container.documents.list_notes(OWNER, document_id=doc.id).items == []
    failing_steps = [c for c in calls if c["step"] == "fail"]
    removed = sum(c["deleted"] for c in failing_steps)
    assert removed >= 64 and len(failing_steps) >= removed // STEP  # at least one indexed batch
    assert all(c["deleted"] <= STEP for c in failing_steps)
    assert stack.container.index.count(OWNER) == 0


def test_a_workspace_of_several_big_documents_is_deleted_in_bounded_requests(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragchat.api import workspaces as routes
    from ragchat.services import documents

    _small_steps(stack, monkeypatch)
    api = stack.handler("notes_api")
    created = api(api_event("POST", "/workspaces", body={"name": "Big"}, principal=OWNER), None)
    ws = json_body(created)["id"]
    for n in range(3):
        body = {"text": _text(f"doc{n}", 25), "title": f"Doc {n}", "workspace": ws}
        assert api(api_event("POST", "/notes", body=body, principal=OWNER), None)["statusCode"] == 202
    stack.wait_for_all(3, timeout_s=120)
    total = stack.container.index.count(ws)
    assert total > 3 * 2 * PAGE

    calls = _measure(stack, monkeypatch)
    monkeypatch.setattr(documents, "DELETE_PAGE", PAGE)
    monkeypatch.setattr(routes, "DELETE_SECONDS", 0.0)  # no time at all: one page of chunks per request
    statuses, deleted = [], []
    while True:
        calls.append({"step": "DELETE", "switched": [], "deleted": 0})
        res = api(api_event("DELETE", f"/workspaces/{ws}", principal=OWNER), None)
        statuses.append(res["statusCode"])
        deleted.append(calls[-1]["deleted"])
        if res["statusCode"] != 202:
            break
        progress = json_body(res)
        assert progress["finished"] is False and progress["chunksDeleted"] <= PAGE
        assert progress["chunksDeleted"] or progress["documentsDeleted"]  # every request makes progress
    assert statuses[-1] == 204 and len(statuses) >= -(-total // PAGE)
    assert max(deleted) <= PAGE and sum(deleted) == total  # each request: one page of vectors at most
    assert stack.container.index.count(ws) == 0
    assert stack.container.documents.list_documents(ws).items == []
    members = api(api_event("GET", f"/workspaces/{ws}/members", principal=OWNER), None)
    assert members["statusCode"] == 404


def test_a_big_document_is_disabled_and_enabled_in_bounded_requests(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PATCH ``enabled`` of a big READY document through the API function (issue 44): a chunk range
    (``DELETE_PAGE``) per request when its time is up, 202 ``finished: false`` until the last, which
    answers 200; nothing of it is searchable once the disable has finished, all of it after the enable."""
    from ragchat.api import notes as routes
    from ragchat.services import documents

    _small_steps(stack, monkeypatch)
    api = stack.handler("notes_api")
    body = {"text": _text("switched", 25), "title": "Big"}
    res = api(api_event("POST", "/notes", body=body, principal=OWNER), None)
    doc_id = json_body(res)["documentId"]
    stack.wait_for_all(1, timeout_s=120)
    stored = stack.container.documents.get_document(OWNER, doc_id)
    assert stored is not None and stored.status == DocumentStatus.READY and stored.chunk_count > 2 * PAGE
    total = stored.chunk_count
    first = stack.container.documents.list_notes(OWNER, document_id=doc_id, limit=1).items[0].text
    assert _searchable(stack, OWNER, first)

    calls = _measure(stack, monkeypatch)
    monkeypatch.setattr(documents, "DELETE_PAGE", PAGE)
    monkeypatch.setattr(routes, "DELETE_SECONDS", 0.0)  # no time at all: one range per request
    for enabled in (False, True):
        statuses = []
        while True:
            calls.append({"step": "PATCH", "switched": [], "deleted": 0})
            res = api(
                api_event("PATCH", f"/documents/{doc_id}", body={"enabled": enabled}, principal=OWNER), None
            )
            statuses.append(res["statusCode"])
            if res["statusCode"] != 202:
                break
            progress = json_body(res)
            assert progress["finished"] is False and progress["chunksSwitched"] > 0
            shown = json_body(api(api_event("GET", f"/documents/{doc_id}", principal=OWNER), None))
            assert shown["enabled"] is True and shown["switching"]["enabled"] is enabled
        assert statuses[-1] == 200 and json_body(res)["enabled"] is enabled
        requests = [c for c in calls if c["step"] == "PATCH"]
        assert len(statuses) == -(-total // PAGE) == len(requests)
        assert all(c["switched"] == [min(PAGE, total - PAGE * n)] for n, c in enumerate(requests))
        assert _searchable(stack, OWNER, first) is enabled
        calls.clear()
    stored = stack.container.documents.get_document(OWNER, doc_id)
    assert stored is not None and stored.enabled and stored.switching is None
