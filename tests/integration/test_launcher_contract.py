"""The launcher contract, one suite for both twins: the Step Functions launcher running the real
``statemachine/ingest.asl.json`` on moto, and the local in-process pipeline.

A re-upload (same document id, new content) while that document's ingestion runs must end with
the newest content READY. The ordering is forced with a gate in the steps, not with sleeps: the
first run's first ``embed_index`` uploads v2 from inside the step (so v1 is certainly mid-run), and
a later run's ``split`` waits for that step to return (a step already in flight finishes first).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ragchat.domain.models import DocumentStatus, SearchFilter
from ragchat.services.ingestion import IngestSteps

from tests.aws_contracts.iam import acting_as

OWNER = "alice"
DOC = "doc-reupload"
V1 = "Version one is about the Eiffel Tower in Paris, completed in 1889 for the fair."
V2 = "Version two is about Mount Everest, the highest mountain above sea level, in the Himalayas."


class GatedSteps(IngestSteps):
    """``IngestSteps`` whose first batch read calls ``during_first_embed`` (the re-upload) and whose
    later ``split`` waits until that batch has been stored. Both twins read a batch first: the state
    machine's ``embed_index`` step, and the local worker's coalesced rounds (``read_batch`` →
    ``embed`` → ``store_batch``, without ``embed_index``)."""

    during_first_embed: Callable[[], None] = staticmethod(lambda: None)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fired = False
        self._first_embed_done = threading.Event()

    def read_batch(
        self, owner: str, document_id: str, key: str, version: str | None = None
    ) -> tuple[Any, list[dict[str, Any]]]:
        if not self._fired:
            self._fired = True
            self.during_first_embed()
        return super().read_batch(owner, document_id, key, version)

    def embed_index(
        self, owner: str, document_id: str, key: str, version: str | None = None
    ) -> dict[str, Any]:
        try:
            return super().embed_index(owner, document_id, key, version)
        finally:
            self._first_embed_done.set()

    def store_batch(self, *args: Any, **kwargs: Any) -> int:
        try:
            return super().store_batch(*args, **kwargs)
        finally:
            self._first_embed_done.set()

    def split(self, owner: str, document_id: str, version: str | None = None) -> dict[str, Any]:
        if self._fired:
            assert self._first_embed_done.wait(60), "the first run's step never returned"
        return super().split(owner, document_id, version)


@dataclass
class LauncherRig:
    container: Any
    wait_idle: Callable[[], None]
    closed_runs: Callable[[], list[str]]  # Step Functions: every execution's status, oldest first
    steps_run: Callable[[], list[str]]  # Step Functions: the steps the state machine invoked


@pytest.fixture(params=["stepfunctions", "local"])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LauncherRig]:
    if request.param == "stepfunctions":
        stack = request.getfixturevalue("stack")
        c = stack.container
        c.ingest_steps = GatedSteps(c.documents, c.blobs, c.embedder, c.index, c.settings)

        def wait_sfn() -> None:
            for e in stack.executions():
                stack.wait_for(e["executionArn"])

        def runs() -> list[str]:
            described = [
                stack.sfn.describe_execution(executionArn=e["executionArn"]) for e in stack.executions()
            ]
            return [d["status"] for d in sorted(described, key=lambda d: d["name"])]

        yield LauncherRig(c, wait_sfn, runs, lambda: [i["step"] for i in stack.invocations])
        return
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    from tests.fakes import FakeEmbedder

    settings = load_settings(
        {
            "RAGCHAT_DATA_DIR": str(tmp_path / "data"),
            "RAGCHAT_CHAT_MODEL": "extractive",
            "MIN_SIMILARITY": "0.2",
        }
    )
    container = Container(settings, embedder=FakeEmbedder(dimension=64))
    c = container
    c.ingest_steps = GatedSteps(c.documents, c.blobs, c.embedder, c.index, c.settings)
    try:
        yield LauncherRig(container, lambda: container.launcher.wait_idle(60), lambda: [], lambda: [])
    finally:
        container.close()


def reupload(c: Any, text: str) -> None:
    """The user's re-upload, made by the notes API while a step runs: on AWS it is the notes function's
    role that writes the new body and starts the run, not the step function's (the IAM harness checks)."""
    with acting_as("NotesApiFunction"):
        c.ingestion.submit(OWNER, text=text, title="v2", document_id=DOC)


def test_a_reupload_while_ingesting_ends_with_the_newest_content_ready(rig: LauncherRig) -> None:
    c = rig.container
    steps: GatedSteps = c.ingest_steps
    steps.during_first_embed = lambda: reupload(c, V2)
    c.ingestion.submit(OWNER, text=V1, title="v1", document_id=DOC)
    # moto's executions and the local worker run in their own threads: wait for every run to close
    rig.wait_idle()
    rig.wait_idle()  # the superseding run may have been started while the first wait ran

    doc = c.documents.get_document(OWNER, DOC)
    assert doc is not None and doc.status == DocumentStatus.READY, rig.closed_runs()
    assert doc.title == "v2"
    notes = c.documents.list_notes(OWNER, document_id=DOC, limit=100).items
    assert [n.text for n in notes] == [V2]
    assert c.index.count(OWNER) == 1
    runs = rig.closed_runs()
    if runs:  # Step Functions: the stale run was stopped mid-run and went no further (moto reports a
        # run stopped inside a Map as FAILED, AWS as ABORTED; neither runs the Catch's "fail" step)
        assert len(runs) == 2 and runs[0] != "SUCCEEDED" and runs[1] == "SUCCEEDED", runs
        assert rig.steps_run() == ["split", "embed_index", "split", "embed_index", "finalize"]
    hits = c.index.search(c.embedder.embed_query("Everest Himalayas"), SearchFilter(owner=OWNER), 1)
    assert hits and hits[0].text == V2


class StaleSteps(IngestSteps):
    """The UNSAFE order (issue 8): a step of the first run that was already running when the
    re-upload came finishes its side effects late. The first run's first ``store_batch`` uploads v2
    and is held back (nothing written yet); it completes (with the first run's ``finalize`` and
    ``fail`` after it) only once v2's ``split`` — or v2's ``finalize`` — has returned: exactly what a
    Lambda invocation outliving its stopped execution does. Same on both twins (the local one never
    runs a document twice at once, so there the late steps are run from v2's own steps)."""

    reupload: Callable[[], None] = staticmethod(lambda: None)

    def __init__(self, *args: Any, late_after: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.late_after = late_after  # "split" | "finalize": which step of v2 the late writes follow
        self.held: tuple[tuple[Any, ...], str | None] | None = None
        self.late_results: list[Any] = []

    def store_batch(self, *args: Any, version: str | None = None, **kwargs: Any) -> int:
        if self.held is None:
            self.held = (args, version)
            self.reupload()
            return len(args[3])  # "in flight": its writes land later
        return super().store_batch(*args, version=version, **kwargs)

    def split(self, owner: str, document_id: str, version: str | None = None) -> dict[str, Any]:
        plan = super().split(owner, document_id, version)
        if self.late_after == "split":
            self._late()
        return plan

    def finalize_step(  # the state machine's step; the local pipeline's finalize runs it unbounded
        self,
        owner: str,
        document_id: str,
        chunk_count: int,
        version: str | None = None,
        cursor: str = "",
        **kwargs: Any,
    ) -> dict[str, Any]:
        result = super().finalize_step(owner, document_id, chunk_count, version, cursor, **kwargs)
        if self.late_after == "finalize" and result["status"] == "READY":
            self._late()
        return result

    def _late(self) -> None:
        if self.held is None or self.late_results:
            return
        args, version = self.held
        owner, document_id = args[0], args[1]
        self.late_results = [
            super().store_batch(*args, version=version),
            super().finalize(owner, document_id, 1, version),
            super().fail(owner, document_id, "the stale run's error", version),
        ]


@pytest.mark.parametrize("late_after", ["split", "finalize"])
def test_a_stale_runs_late_writes_never_show(rig: LauncherRig, late_after: str) -> None:
    c = rig.container
    steps = StaleSteps(c.documents, c.blobs, c.embedder, c.index, c.settings, late_after=late_after)
    c.ingest_steps = steps
    steps.reupload = lambda: reupload(c, V2)
    c.ingestion.submit(OWNER, text=V1, title="v1", document_id=DOC)
    rig.wait_idle()
    rig.wait_idle()

    # the late writes ran, after v2's split / finalize, and did nothing
    assert steps.late_results == [
        0,
        {"status": "SUPERSEDED", "chunkCount": 0},
        {"status": "SUPERSEDED", "error": "the stale run's error"},
    ]
    doc = c.documents.get_document(OWNER, DOC)
    assert doc is not None and doc.status == DocumentStatus.READY and doc.error is None, rig.closed_runs()
    assert doc.title == "v2" and doc.chunk_count == 1
    notes = c.documents.list_notes(OWNER, document_id=DOC, limit=100).items
    assert [n.text for n in notes] == [V2]
    assert c.index.count(OWNER) == 1
    hits = c.index.search(c.embedder.embed_query("Eiffel Tower Paris"), SearchFilter(owner=OWNER), 5)
    assert [h.text for h in hits] == [V2]
    runs = rig.closed_runs()
    if runs:  # Step Functions: the first run was stopped; the second succeeded
        assert len(runs) == 2 and runs[0] != "SUCCEEDED" and runs[1] == "SUCCEEDED", runs
