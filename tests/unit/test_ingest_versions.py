"""Issue 8: a re-upload while a run is in flight. Each upload is a content version; every step of
an older version's run stands down, whatever order the steps of the two runs land in."""

from __future__ import annotations

from typing import Any

from ragchat.config import load_settings
from ragchat.domain.ids import note_id
from ragchat.domain.models import DocumentStatus, Note, SearchFilter, VectorRecord
from ragchat.services.blob_keys import work_prefix
from ragchat.services.ingest_pipeline import EMBED_INDEX, run_step
from ragchat.services.ingest_runner import record_failure
from ragchat.services.ingestion import IngestionService, IngestSteps

from tests.fakes import (
    FakeBlobStore,
    FakeClock,
    FakeDocumentStore,
    FakeEmbedder,
    FakeLauncher,
    FakeVectorIndex,
    run_to_end,
)

OWNER = "alice"
DOC = "doc-1"
OLD = "\n\n".join(
    f"Old paragraph {i} is about the Eiffel Tower in Paris, the iron lattice tower built for a fair."
    for i in range(3)
)
NEW = "The new text is about Mount Everest in the Himalayas."


class World:
    """The service and the steps on fakes; the launcher only records (the test runs the steps)."""

    def __init__(self) -> None:
        self.settings = load_settings({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"})
        self.clock = FakeClock()
        self.docs = FakeDocumentStore(clock=self.clock)
        self.blobs = FakeBlobStore()
        self.embedder = FakeEmbedder()
        self.index = FakeVectorIndex(dimension=self.embedder.dimension)
        self.steps = IngestSteps(
            self.docs, self.blobs, self.embedder, self.index, self.settings, batch_size=1
        )
        self.launcher = FakeLauncher()
        self.service = IngestionService(self.docs, self.blobs, self.launcher, self.settings, clock=self.clock)

    def upload(self, text: str) -> str:
        doc = self.service.submit(OWNER, text=text, document_id=DOC)
        assert doc.version is not None and self.launcher.versions[-1] == doc.version
        return doc.version

    def run(self, version: str) -> dict[str, Any]:
        plan = self.steps.split(OWNER, DOC, version)
        for item in plan["batches"]:
            self.steps.embed_index(OWNER, DOC, item["key"], version)
        self.steps.finalize(OWNER, DOC, plan["chunkCount"], version)
        return plan

    def note_texts(self) -> list[str]:
        return [n.text for n in self.docs.list_notes(OWNER, document_id=DOC, limit=100).items]

    def searchable(self, text: str) -> list[str]:
        hits = self.index.search(self.embedder.vector_for(text), SearchFilter(owner=OWNER), 100)
        return [h.text for h in hits]


def test_each_upload_records_a_new_version_and_starts_with_it() -> None:
    w = World()
    v1, v2 = w.upload(OLD), w.upload(NEW)
    assert v1 != v2
    stored = w.docs.get_document(OWNER, DOC)
    assert stored is not None and stored.version == v2
    assert w.launcher.versions == [v1, v2]


def test_batches_of_two_versions_live_apart() -> None:
    w = World()
    v1 = w.upload(OLD)
    plan1 = w.steps.split(OWNER, DOC, v1)
    assert plan1["version"] == v1 and all(b["key"].startswith(work_prefix(DOC, v1)) for b in plan1["batches"])
    assert work_prefix(DOC, v1) != work_prefix(DOC, "other") and work_prefix(DOC, v1).startswith(
        work_prefix(DOC)
    )


def test_the_old_runs_steps_after_the_new_split_change_nothing() -> None:
    w = World()
    v1 = w.upload(OLD)
    plan1 = w.steps.split(OWNER, DOC, v1)
    assert plan1["chunkCount"] >= 3
    v2 = w.upload(NEW)
    plan2 = w.steps.split(OWNER, DOC, v2)
    # the old run's batches, finalize and failure land now: nothing visible happens
    for item in plan1["batches"]:
        assert w.steps.embed_index(OWNER, DOC, item["key"], v1) == {"indexed": 0}
    assert w.steps.finalize(OWNER, DOC, plan1["chunkCount"], v1)["status"] == "SUPERSEDED"
    assert w.steps.fail(OWNER, DOC, "boom", v1)["status"] == "SUPERSEDED"
    doc = w.docs.get_document(OWNER, DOC)
    assert doc is not None and doc.status == DocumentStatus.PROCESSING and doc.error is None
    assert w.note_texts() == []
    # the new run's batches survived the old run's cleanup, and it ends READY with the new text
    assert w.blobs.get(plan2["batches"][0]["key"])
    for item in plan2["batches"]:
        w.steps.embed_index(OWNER, DOC, item["key"], v2)
    assert w.steps.finalize(OWNER, DOC, plan2["chunkCount"], v2)["status"] == "READY"
    assert w.note_texts() == [NEW]
    assert w.searchable("Eiffel Tower") == [NEW]


def test_a_split_of_a_superseded_version_plans_nothing_and_keeps_the_new_runs_notes() -> None:
    w = World()
    v1 = w.upload(OLD)
    v2 = w.upload(NEW)
    w.run(v2)
    plan = w.steps.split(OWNER, DOC, v1)
    assert plan["batches"] == [] and plan["chunkCount"] == 0 and plan["superseded"] is True
    assert w.steps.finalize(OWNER, DOC, 0, v1)["status"] == "SUPERSEDED"
    doc = w.docs.get_document(OWNER, DOC)
    assert doc is not None and doc.status == DocumentStatus.READY and doc.chunk_count == 1
    assert w.note_texts() == [NEW] and w.searchable("Everest") == [NEW]


def test_the_old_runs_failure_after_the_new_finalize_leaves_it_ready() -> None:
    w = World()
    v1 = w.upload(OLD)
    v2 = w.upload(NEW)
    w.run(v2)
    record_failure(w.steps, OWNER, DOC, EMBED_INDEX, RuntimeError("late"), v1)
    doc = w.docs.get_document(OWNER, DOC)
    assert doc is not None and doc.status == DocumentStatus.READY and doc.error is None
    assert w.note_texts() == [NEW]


def test_finalize_removes_chunks_beyond_its_count() -> None:
    """An old store_batch that passed its check just before the re-upload may still land after the
    new split: chunk indexes the new version also has are overwritten by it, the rest go here."""
    w = World()
    v2 = w.upload(NEW)
    plan = w.steps.split(OWNER, DOC, v2)
    for item in plan["batches"]:
        w.steps.embed_index(OWNER, DOC, item["key"], v2)
    stale = [
        Note(id=note_id(DOC, i), document_id=DOC, chunk_index=i, text=f"stale {i}", owner=OWNER)
        for i in (1, 2)
    ]
    w.docs.put_notes(stale)
    w.index.upsert(
        [
            VectorRecord(
                id=n.id,
                vector=w.embedder.vector_for(n.text),
                text=n.text,
                owner=OWNER,
                document_id=DOC,
                chunk_index=n.chunk_index,
                enabled=False,
            )
            for n in stale
        ]
    )
    w.steps.finalize(OWNER, DOC, plan["chunkCount"], v2)
    assert w.note_texts() == [NEW]
    assert w.index.count(OWNER) == 1 and w.searchable("stale 1") == [NEW]


def test_without_a_version_the_steps_take_the_documents_own() -> None:
    """The local pipeline (and an execution started before versions) passes none: the split takes
    the document's current version, and the later steps stand down once it changes."""
    w = World()
    v1 = w.upload(OLD)
    plan = w.steps.split(OWNER, DOC)
    assert plan["version"] == v1
    w.upload(NEW)
    assert w.steps.finalize(OWNER, DOC, plan["chunkCount"], plan["version"])["status"] == "SUPERSEDED"


class RecordingSteps:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        def step(*args: Any) -> dict[str, Any]:
            self.calls.append((name, *args))
            return {}

        return step


def test_the_step_handler_passes_the_executions_version_to_every_step() -> None:
    steps = RecordingSteps()
    base = {"owner": OWNER, "documentId": DOC, "version": "v9"}
    run_step(steps, {**base, "step": "split"})  # type: ignore[arg-type]
    run_step(steps, {**base, "step": "embed_index", "key": "k"})  # type: ignore[arg-type]
    run_step(steps, {**base, "step": "finalize", "chunkCount": 3})  # type: ignore[arg-type]
    run_step(steps, {**base, "step": "finalize", "chunkCount": 3, "cursor": "swap:"})  # type: ignore[arg-type]
    run_step(steps, {**base, "step": "fail", "error": {"Cause": "x"}})  # type: ignore[arg-type]
    run_step(steps, {"step": "split", "owner": OWNER, "documentId": DOC, "version": None})  # type: ignore[arg-type]
    assert steps.calls == [
        ("split", OWNER, DOC, "v9"),
        ("embed_index", OWNER, DOC, "k", "v9"),
        ("finalize_step", OWNER, DOC, 3, "v9", ""),  # one bounded step, from the start
        ("finalize_step", OWNER, DOC, 3, "v9", "swap:"),  # the next, from the state machine's cursor
        ("fail_step", OWNER, DOC, "x", "v9", ""),
        ("split", OWNER, DOC, None),
    ]


def test_the_local_runner_drops_a_reuploaded_documents_job_at_its_next_batch() -> None:
    from ragchat.services.ingest_runner import SlicedRunner

    w = World()
    w.upload(OLD)
    runner = SlicedRunner(coalesce_texts=1)
    runner.add([(OWNER, DOC)])
    runner.round(w.steps)  # split + the first of three batches
    assert w.embedder.document_calls == 1
    w.upload(NEW)
    assert runner.round(w.steps) == [(OWNER, DOC)]  # the next batch finds a newer version: job over
    assert not runner.active() and w.embedder.document_calls == 2  # the third batch is never embedded
    doc = w.docs.get_document(OWNER, DOC)
    assert doc is not None and doc.status == DocumentStatus.PENDING and doc.error is None
    run_to_end(w.steps, [(OWNER, DOC)])  # the run the launcher queued for the new content
    assert w.note_texts() == [NEW] and w.searchable("Eiffel") == [NEW]
