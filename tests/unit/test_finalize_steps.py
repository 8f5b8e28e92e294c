"""Finalize in bounded steps (issue 44): a document enabled or disabled while its finalize steps
run ends in the state its record says, and nothing of it is retrievable while the record says
disabled. Driven step by step, as the state machine does (``finalize_step`` with the returned
cursor), with ``FINALIZE_STEP_CHUNKS`` lowered so a ~40-chunk document takes several steps."""

from __future__ import annotations

from typing import Any

import pytest
from ragchat.domain.models import DocumentStatus, SearchFilter

from tests.events import json_body
from tests.unit.api_support import Api, make_api

OWNER = "alice"
STEP = 6


def _split_and_index(api: Api) -> tuple[str, dict[str, Any]]:
    text = "\n\n".join(
        f"Harbour {n} keeps lighthouse {n} lit all night long, every night." for n in range(40)
    )
    doc_id = json_body(api.call("POST", "/notes", body={"text": text, "title": "Harbours"}, principal=OWNER))[
        "documentId"
    ]
    steps = api.container.ingest_steps
    plan = steps.split(OWNER, doc_id)
    for batch in plan["batches"]:
        steps.embed_index(OWNER, doc_id, batch["key"], plan["version"])
    assert plan["chunkCount"] > 3 * STEP
    return doc_id, plan


def _enabled_vectors(api: Api) -> int:
    return api.index.count(OWNER)


def _steps_until(api: Api, doc_id: str, plan: dict[str, Any], cursor: str, stop: Any) -> tuple[str, bool]:
    """Run finalize steps from ``cursor`` until ``stop(result)`` or finished."""
    steps = api.container.ingest_steps
    while True:
        result = steps.finalize_step(OWNER, doc_id, plan["chunkCount"], plan["version"], cursor)
        assert result["chunkCount"] == plan["chunkCount"]
        cursor = result["cursor"]
        if result["finished"] or stop(result):
            return cursor, bool(result["finished"])


@pytest.fixture
def api() -> Api:
    api = make_api({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"}, run_pipeline=False)
    settings = api.container.ingest_steps.settings
    api.container.ingest_steps.settings = settings.model_copy(update={"finalize_step_chunks": STEP})
    return api


def test_each_step_switches_at_most_one_steps_chunks_and_the_last_makes_it_ready(api: Api) -> None:
    doc_id, plan = _split_and_index(api)
    seen: list[int] = []
    cursor = ""
    while True:
        before = _enabled_vectors(api)
        result = api.container.ingest_steps.finalize_step(
            OWNER, doc_id, plan["chunkCount"], plan["version"], cursor
        )
        seen.append(_enabled_vectors(api) - before)
        doc = api.documents.get_document(OWNER, doc_id)
        assert doc is not None
        if not result["finished"]:  # not READY before the switch is complete
            assert doc.status != DocumentStatus.READY or _enabled_vectors(api) == plan["chunkCount"]
            cursor = result["cursor"]
            continue
        break
    assert max(seen) <= STEP and sum(seen) == plan["chunkCount"]
    assert doc.status == DocumentStatus.READY and _enabled_vectors(api) == plan["chunkCount"]


def test_a_document_disabled_midway_ends_ready_with_nothing_retrievable(api: Api) -> None:
    doc_id, plan = _split_and_index(api)
    cursor, _ = _steps_until(api, doc_id, plan, "", lambda r: r["cursor"].startswith("switch:") and True)
    assert 0 < _enabled_vectors(api) < plan["chunkCount"]  # partly switched on
    res = api.call("PATCH", f"/documents/{doc_id}", body={"enabled": False}, principal=OWNER)
    assert res["statusCode"] == 200  # left to the pipeline: the document is still being ingested
    _, finished = _steps_until(api, doc_id, plan, cursor, lambda r: False)
    assert finished
    doc = api.documents.get_document(OWNER, doc_id)
    assert doc is not None and doc.status == DocumentStatus.READY and doc.enabled is False
    assert _enabled_vectors(api) == 0  # the chunks switched on before the PATCH are off again
    assert api.index.search([1.0] + [0.0] * 63, SearchFilter(owner=OWNER), 50) == []

    # enabled again: every chunk comes back (the PATCH of a READY document reaches the index)
    assert (
        api.call("PATCH", f"/documents/{doc_id}", body={"enabled": True}, principal=OWNER)["statusCode"]
        == 200
    )
    assert _enabled_vectors(api) == plan["chunkCount"]


def test_a_document_disabled_then_enabled_midway_ends_with_every_chunk_on(api: Api) -> None:
    doc_id, plan = _split_and_index(api)
    cursor, _ = _steps_until(api, doc_id, plan, "", lambda r: True)  # one step
    api.call("PATCH", f"/documents/{doc_id}", body={"enabled": False}, principal=OWNER)
    cursor, _ = _steps_until(api, doc_id, plan, cursor, lambda r: True)  # a step while disabled
    api.call("PATCH", f"/documents/{doc_id}", body={"enabled": True}, principal=OWNER)
    _, finished = _steps_until(api, doc_id, plan, cursor, lambda r: False)
    assert finished
    doc = api.documents.get_document(OWNER, doc_id)
    assert doc is not None and doc.status == DocumentStatus.READY and doc.enabled is True
    assert _enabled_vectors(api) == plan["chunkCount"]  # none skipped while it was disabled


def test_a_retried_step_redoes_the_same_work_and_changes_nothing(api: Api) -> None:
    doc_id, plan = _split_and_index(api)
    steps = api.container.ingest_steps
    first = steps.finalize_step(OWNER, doc_id, plan["chunkCount"], plan["version"], "")
    again = steps.finalize_step(OWNER, doc_id, plan["chunkCount"], plan["version"], "")  # a retry
    assert first == again and _enabled_vectors(api) == STEP
    _, finished = _steps_until(api, doc_id, plan, first["cursor"], lambda r: False)
    assert finished and _enabled_vectors(api) == plan["chunkCount"]
    notes = api.documents.list_notes(OWNER, document_id=doc_id, limit=1000).items
    assert len(notes) == plan["chunkCount"]


def test_an_unknown_cursor_is_refused() -> None:
    from ragchat.domain.errors import ValidationError

    api = make_api({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"}, run_pipeline=False)
    doc_id, plan = _split_and_index(api)
    with pytest.raises(ValidationError, match="unknown finalize cursor"):
        api.container.ingest_steps.finalize_step(OWNER, doc_id, plan["chunkCount"], plan["version"], "nope:1")


def test_a_document_disabled_just_before_it_becomes_ready_is_switched_off_after(api: Api) -> None:
    """The record changes between the last switch step and the READY step: READY is written, then
    the vectors follow the record (``fix`` steps)."""
    doc_id, plan = _split_and_index(api)
    steps = api.container.ingest_steps
    steps.settings = steps.settings.model_copy(update={"finalize_step_chunks": plan["chunkCount"]})
    first = steps.finalize_step(OWNER, doc_id, plan["chunkCount"], plan["version"], "")
    assert first["cursor"] == "ready:on" and _enabled_vectors(api) == plan["chunkCount"]  # budget spent
    api.call("PATCH", f"/documents/{doc_id}", body={"enabled": False}, principal=OWNER)
    assert _enabled_vectors(api) == plan["chunkCount"]  # left to the pipeline: still PROCESSING
    _, finished = _steps_until(api, doc_id, plan, first["cursor"], lambda r: False)
    doc = api.documents.get_document(OWNER, doc_id)
    assert finished and doc is not None and doc.status == DocumentStatus.READY and doc.enabled is False
    assert _enabled_vectors(api) == 0
