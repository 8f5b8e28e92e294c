"""The reconciler (issue 44, item 4b): an ingestion execution that ends FAILED, TIMED_OUT or ABORTED
without its document marked (MarkFailed throttled past its retries, a timeout, a console stop) is
delivered by EventBridge, in the real event's shape (``events/ingest_execution_timed_out.json``), to
the ingest steps function, which marks the document FAILED with the reason: never a READY one, never
a newer version's, and a second delivery changes nothing."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ragchat.config import load_settings
from ragchat.domain.models import DocumentStatus
from ragchat.entrypoints.ingest_steps import ingest_step_handler
from ragchat.services.ingestion import IngestionService, IngestSteps

from tests.fakes import FakeBlobStore, FakeDocumentStore, FakeEmbedder, FakeLauncher, FakeVectorIndex
from tests.fakes.metrics import RecordingMetrics

EVENT = Path(__file__).resolve().parents[2] / "events" / "ingest_execution_timed_out.json"
OWNER = "alice"


class World:
    def __init__(self) -> None:
        settings = load_settings({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"})
        self.documents = FakeDocumentStore()
        self.index = FakeVectorIndex(dimension=16)
        self.metrics = RecordingMetrics()
        self.steps = IngestSteps(
            self.documents, FakeBlobStore(), FakeEmbedder(dimension=16), self.index, settings,
            batch_size=2, metrics=self.metrics,
        )  # fmt: skip
        self.launcher = FakeLauncher(run=None)
        self.ingestion = IngestionService(self.documents, self.steps.blobs, self.launcher, settings)
        container = SimpleNamespace(ingest_steps=self.steps, settings=settings)
        self.handler = ingest_step_handler(lambda: container)  # type: ignore[arg-type,return-value]

    def half_ingested(self) -> tuple[str, str]:
        """A document whose run split it and indexed one batch, then stopped (PROCESSING)."""
        text = " ".join(f"word{i:04d}" for i in range(200))
        doc = self.ingestion.submit(OWNER, text=text, title="Stuck")
        version = self.launcher.versions[-1]
        assert version is not None
        plan = self.steps.split(OWNER, doc.id, version)
        self.steps.embed_index(OWNER, doc.id, plan["batches"][0]["key"], version)
        return doc.id, version

    def event(self, document_id: str, version: str, **detail: Any) -> dict[str, Any]:
        event: dict[str, Any] = copy.deepcopy(json.loads(EVENT.read_text()))
        run = {"owner": OWNER, "documentId": document_id, "version": version}
        event["detail"]["input"] = json.dumps(run, separators=(",", ":"))
        event["detail"].update(detail)
        return event


@pytest.fixture
def world() -> World:
    return World()


def test_a_timed_out_execution_leaves_its_document_failed_with_the_reason(world: World) -> None:
    doc_id, version = world.half_ingested()
    assert world.documents.get_document(OWNER, doc_id).status == DocumentStatus.PROCESSING
    assert world.index.count(OWNER) == 0 and world.documents.list_notes(OWNER, document_id=doc_id).items

    world.handler(world.event(doc_id, version), None)

    doc = world.documents.get_document(OWNER, doc_id)
    assert doc.status == DocumentStatus.FAILED
    assert doc.error == "Ingestion timed out: States.Timeout"
    assert world.documents.list_notes(OWNER, document_id=doc_id).items == []  # what the run wrote went
    assert world.metrics.total("IngestionReconciled") == 1


@pytest.mark.parametrize(
    ("status", "error", "cause", "expected"),
    [
        ("FAILED", "Lambda.TooManyRequestsException", "Rate Exceeded.", "Ingestion failed: Rate Exceeded."),
        ("ABORTED", None, None, "Ingestion was stopped before it finished; upload the document again."),
    ],
)
def test_a_failed_or_aborted_execution_is_reconciled_with_its_cause(
    world: World, status: str, error: str | None, cause: str | None, expected: str
) -> None:
    doc_id, version = world.half_ingested()
    world.handler(world.event(doc_id, version, status=status, error=error, cause=cause), None)
    doc = world.documents.get_document(OWNER, doc_id)
    assert (doc.status, doc.error) == (DocumentStatus.FAILED, expected)


def test_a_ready_document_is_never_overwritten_and_a_second_delivery_changes_nothing(world: World) -> None:
    doc_id, version = world.half_ingested()
    world.documents.update_document(OWNER, doc_id, {"status": DocumentStatus.READY, "chunk_count": 2})
    world.handler(world.event(doc_id, version, status="ABORTED"), None)
    assert world.documents.get_document(OWNER, doc_id).status == DocumentStatus.READY

    other_id, other_version = world.half_ingested()
    event = world.event(other_id, other_version)
    world.handler(event, None)
    first = world.documents.get_document(OWNER, other_id)
    world.handler(event, None)  # EventBridge delivers at least once
    again = world.documents.get_document(OWNER, other_id)
    assert (again.status, again.error, again.updated_at) == (first.status, first.error, first.updated_at)
    assert world.metrics.total("IngestionReconciled") == 1


def test_a_run_superseded_by_a_re_upload_leaves_the_newer_version_alone(world: World) -> None:
    doc_id, old_version = world.half_ingested()
    world.ingestion.submit(OWNER, text="replacement text " * 30, title="Stuck", document_id=doc_id)
    assert world.launcher.versions[-1] != old_version
    world.handler(world.event(doc_id, old_version, status="ABORTED", error="Superseded"), None)
    doc = world.documents.get_document(OWNER, doc_id)
    assert doc.status == DocumentStatus.PENDING and doc.error is None


class Ticking:
    """A clock that moves ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 1_000.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_big_failed_run_is_removed_in_bounded_calls_each_retry_carrying_on(world: World) -> None:
    """Removal goes FINALIZE_STEP_CHUNKS notes a step for at most RECONCILE_SECONDS a call: a run with
    more left is FAILED with the reason at once (never left PROCESSING), the call raises (Lambda
    retries the asynchronous invocation), the retries carry on and leave nothing of the run, and a
    later delivery changes nothing."""
    from ragchat.domain.errors import TransientError
    from ragchat.services.ingest_reconciler import RECONCILE_SECONDS

    doc_id, version = world.half_ingested()
    plan = world.steps.split(OWNER, doc_id, version)  # the same plan again: more of its batches indexed
    for batch in plan["batches"][1:4]:
        world.steps.embed_index(OWNER, doc_id, batch["key"], version)
    plan_notes = len(world.documents.list_notes(OWNER, document_id=doc_id, limit=1000).items)
    world.steps.settings = world.steps.settings.model_copy(update={"finalize_step_chunks": 1})
    world.steps.clock = Ticking(RECONCILE_SECONDS / 2)  # two steps a call
    assert plan_notes >= 6
    calls = 0
    while True:
        calls += 1
        before = len(world.documents.list_notes(OWNER, document_id=doc_id, limit=1000).items)
        try:
            world.handler(world.event(doc_id, version), None)
            break
        except TransientError:
            after = len(world.documents.list_notes(OWNER, document_id=doc_id, limit=1000).items)
            assert 0 < before - after <= 2  # progress, and no more than the call's two steps
            paused = world.documents.get_document(OWNER, doc_id)
            assert paused.status == DocumentStatus.FAILED
            assert paused.error == "Ingestion timed out: States.Timeout"
        assert calls < 50
    assert calls > 1
    doc = world.documents.get_document(OWNER, doc_id)
    assert doc.status == DocumentStatus.FAILED and doc.error == "Ingestion timed out: States.Timeout"
    assert world.documents.list_notes(OWNER, document_id=doc_id).items == []
    assert world.metrics.total("IngestionReconciled") == 1  # one document, however many calls
    world.handler(world.event(doc_id, version), None)  # delivered again: nothing to carry on
    again = world.documents.get_document(OWNER, doc_id)
    assert again.updated_at == doc.updated_at and world.metrics.total("IngestionReconciled") == 1
