"""The ingestion pipeline is defined once (``ragchat.services.ingest_pipeline``): the state machine
runs its stages in the same order, per batch where it says so, and sends every stage's failure to
the same failure step; the local runner records failures with the stage's message."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ragchat.services.ingest_pipeline import EMBED_INDEX, ON_FAILURE, SPLIT, STAGES, failure_message

from tests.fakes import run_to_end

ASL = Path(__file__).resolve().parents[2] / "statemachine" / "ingest.asl.json"


def _step(state: dict[str, Any]) -> str | None:
    payload = (state.get("Parameters") or {}).get("Payload") or {}
    step = payload.get("step")
    return str(step) if step else None


def _walk(states: dict[str, Any], start: str) -> list[tuple[str, bool, dict[str, Any]]]:
    """The task steps met from ``start`` in execution order (a Choice's branches that lead to the
    same next state count once): (step, inside a Map, the Task state)."""
    seen: list[tuple[str, bool, dict[str, Any]]] = []
    name: str | None = start
    visited: set[str] = set()
    while name is not None and name not in visited:
        visited.add(name)
        state = states[name]
        if state["Type"] == "Task" and _step(state):
            seen.append((str(_step(state)), False, state))
        elif state["Type"] == "Map":
            inner = state["ItemProcessor"]
            seen += [(s, True, t) for s, _, t in _walk(inner["States"], inner["StartAt"])]
        elif state["Type"] == "Choice":
            branches = [c["Next"] for c in state["Choices"]] + [state["Default"]]
            # every branch does the same work (inline or distributed Map): follow the first
            name = branches[0]
            continue
        name = state.get("Next")
    return seen


def test_the_state_machine_runs_the_stages_of_the_definition_in_order() -> None:
    asl = json.loads(ASL.read_text(encoding="utf-8"))
    states = asl["States"]
    walked = _walk(states, asl["StartAt"])
    assert [(step, per_batch) for step, per_batch, _ in walked] == [(s.step, s.per_batch) for s in STAGES]
    # every path of the Choice runs the same stages (inline and distributed Map alike)
    choice = next(s for s in states.values() if s["Type"] == "Choice" and "Default" in s and "Choices" in s)
    for branch in [c["Next"] for c in choice["Choices"]] + [choice["Default"]]:
        assert [step for step, _, _ in _walk(states, branch)] == [s.step for s in STAGES[1:]]


def test_every_stage_of_the_state_machine_fails_into_the_failure_step() -> None:
    asl = json.loads(ASL.read_text(encoding="utf-8"))
    states = asl["States"]
    failure_states = {name for name, s in states.items() if _step(s) == ON_FAILURE}
    assert failure_states == {"MarkFailed", "MarkFailedMore"}  # the step, then its bounded steps
    catching = [s for s in states.values() if s["Type"] in ("Task", "Map") and _step(s) != ON_FAILURE]
    assert catching
    for state in catching:  # every stage's failure enters the failure step at its first step
        catches = state.get("Catch") or []
        assert any("States.ALL" in c["ErrorEquals"] and c["Next"] == "MarkFailed" for c in catches)
    # MarkFailedMore is only reached from MarkFailed's loop (FailDone), with the returned cursor
    entering = {c["Next"] for s in states.values() for c in s.get("Choices", []) + s.get("Catch", [])}
    assert "MarkFailedMore" in entering and states["MarkFailedMore"]["Next"] == states["MarkFailed"]["Next"]
    assert states["MarkFailedMore"]["Parameters"]["Payload"]["cursor.$"] == "$.result.cursor"


class Steps:
    """Steps whose embedding fails: the runner must record the embed stage's failure message."""

    documents = None

    def __init__(self) -> None:
        self.failed: list[str] = []

    def split(self, owner: str, document_id: str) -> dict[str, Any]:
        return {"version": "v1", "chunkCount": 1, "batches": [{"key": "work/d/v1/b0"}]}

    def read_batch(self, *args: Any) -> Any:
        return SimpleNamespace(title="d"), [{"index": 0, "text": "x"}]

    def embed(self, texts: list[str], *chunks_and_titles: Any) -> list[list[float]]:
        raise RuntimeError("embedding service unavailable")

    def fail(self, owner: str, document_id: str, error: str, version: str | None) -> dict[str, Any]:
        self.failed.append(error)
        return {}


def test_the_local_runner_records_a_failure_as_the_definition_says() -> None:
    steps = Steps()
    run_to_end(steps, [("alice", "d")])  # type: ignore[arg-type]
    exc = RuntimeError("embedding service unavailable")
    assert steps.failed == [failure_message(EMBED_INDEX, exc)]
    assert steps.failed[0].startswith(EMBED_INDEX.failure) and SPLIT.failure == ""
