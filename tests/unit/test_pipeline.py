"""The local inline pipeline (background worker) and the extractive chat model."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from ragchat.adapters.local.extractive import ExtractiveChatModel
from ragchat.adapters.local.pipeline import InlineIngestionLauncher
from ragchat.domain.models import ChatTurn, Hit, ModelRequest
from ragchat.services.ingest_runner import SlicedRunner

from tests.fakes import OneBatchSteps

WAIT = 10.0  # upper bound for waiting on the worker; never reached when things work


class RecordingSteps(OneBatchSteps):
    """Stands in for ``IngestSteps``: records runs (a run is a split, one batch, a finalize); a run of
    ``block`` waits in its split until released; one of ``fail`` fails its split."""

    def __init__(self, block: str | None = None, fail: str | None = None) -> None:
        self.runs: list[str] = []
        self.block = block
        self.fail_on = fail
        self.started = threading.Event()
        self.release = threading.Event()
        self.concurrent = 0
        self.max_concurrent = 0
        self._lock = threading.Lock()

    def split(self, owner: str, document_id: str) -> Any:
        with self._lock:
            self.concurrent += 1
            self.max_concurrent = max(self.max_concurrent, self.concurrent)
        try:
            self.runs.append(document_id)
            if document_id == self.block and self.runs.count(document_id) == 1:
                self.started.set()
                assert self.release.wait(WAIT)
            if document_id == self.fail_on:
                raise RuntimeError("boom")
            return super().split(owner, document_id)
        finally:
            with self._lock:
                self.concurrent -= 1


@pytest.fixture
def launcher_and_steps() -> Any:
    steps = RecordingSteps(block="A")
    launcher = InlineIngestionLauncher(lambda: steps, runner=SlicedRunner())  # type: ignore[arg-type, return-value]
    yield launcher, steps
    steps.release.set()
    launcher.close()


def test_start_returns_at_once_and_the_worker_runs_the_document(launcher_and_steps: Any) -> None:
    launcher, steps = launcher_and_steps
    launcher.start("u", "A")
    assert steps.started.wait(WAIT)
    assert launcher.busy()
    assert launcher.wait_idle(0.01) is False  # still running: the wait gives up, bounded
    steps.release.set()
    assert launcher.wait_idle(WAIT)
    assert steps.runs == ["A"]


def test_a_queued_document_is_not_run_twice(launcher_and_steps: Any) -> None:
    launcher, steps = launcher_and_steps
    launcher.start("u", "A")
    assert steps.started.wait(WAIT)
    launcher.start("u", "B")
    launcher.start("u", "B")
    launcher.start("u", "B")
    steps.release.set()
    assert launcher.wait_idle(WAIT)
    assert steps.runs == ["A", "B"]


def test_restart_while_running_runs_once_more_afterwards_never_concurrently(
    launcher_and_steps: Any,
) -> None:
    launcher, steps = launcher_and_steps
    launcher.start("u", "A")
    assert steps.started.wait(WAIT)
    launcher.start("u", "A")  # e.g. the document was replaced while being ingested
    launcher.start("u", "A")
    steps.release.set()
    assert launcher.wait_idle(WAIT)
    assert steps.runs == ["A", "A"]
    assert steps.max_concurrent == 1


def test_a_failing_run_does_not_stop_the_worker() -> None:
    steps = RecordingSteps(fail="A")
    launcher = InlineIngestionLauncher(lambda: steps, runner=SlicedRunner())  # type: ignore[arg-type, return-value]
    try:
        launcher.start("u", "A")
        launcher.start("u", "B")
        assert launcher.wait_idle(WAIT)
        assert steps.runs == ["A", "B"]
        assert launcher.completed == 2
    finally:
        launcher.close()


def test_resume_queues_documents_left_over_by_a_crash() -> None:
    steps = RecordingSteps()
    launcher = InlineIngestionLauncher(lambda: steps, runner=SlicedRunner())  # type: ignore[arg-type, return-value]
    try:
        launcher.resume([("u", "A"), ("v", "B")])
        assert launcher.wait_idle(WAIT)
        assert steps.runs == ["A", "B"]
    finally:
        launcher.close()


def test_closed_launcher_refuses_new_work() -> None:
    launcher = InlineIngestionLauncher(lambda: RecordingSteps(), runner=SlicedRunner())  # type: ignore[arg-type, return-value]
    launcher.close()
    with pytest.raises(RuntimeError):
        launcher.start("u", "A")


# ------------------------------------------------------------------------------ extractive model
def _request() -> ModelRequest:
    hits = [
        Hit(id="n1", score=0.8, text="Photosynthesis converts light energy into chemical energy."),
        Hit(id="n2", score=0.7, text="The mitochondria is the powerhouse of the cell."),
    ]
    question = "What does photosynthesis convert?"
    return ModelRequest(
        system="(system)", messages=[ChatTurn("user", question)], sources=hits, question=question
    )


def test_extractive_model_answers_from_the_sources_with_citations() -> None:
    model = ExtractiveChatModel()
    completion = model.complete(_request())
    assert model.model_id == "extractive" and completion.model == "extractive"
    assert "Photosynthesis converts light energy into chemical energy." in completion.text
    assert "[source: n1]" in completion.text
    assert completion.text.rstrip().endswith("Sources: n1") or "Sources: n1" in completion.text


def test_extractive_stream_concatenates_to_the_complete_answer() -> None:
    model = ExtractiveChatModel()
    deltas = list(model.stream(_request()))
    assert len(deltas) > 1
    assert "".join(deltas) == model.complete(_request()).text
