"""The ingestion pipeline, defined once: its stages in order and what a failure of each means.

``split`` (once) → ``embed_index`` (once per batch of chunks) → ``finalize`` (in bounded steps,
``FINALIZE_STEP_CHUNKS`` chunks each, until ``finished``); a failure of
any stage runs ``fail`` with the stage's message (the document is ``FAILED``, nothing of it left
searchable), except that a document deleted meanwhile is cleaned up quietly. The Step Functions
state machine (``statemachine/ingest.asl.json``, checked against :data:`STAGES` by
``tests/unit/test_ingest_pipeline.py``) and the local runner
(:mod:`ragchat.services.ingest_runner`) both follow this definition, and :func:`run_step` is the
one dispatcher from a step's JSON input to :class:`~ragchat.services.ingest_steps.IngestSteps`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragchat.domain.intake import error_message

if TYPE_CHECKING:
    from ragchat.services.ingest_steps import IngestSteps


# Up to this many batches the state machine fans out over the batch list in the split result (its
# inline Map); above, a Distributed Map reads the list from the manifest in S3 (HowManyBatches).
INLINE_MAX_BATCHES = 40


def state_machine_result(plan: dict[str, Any]) -> dict[str, Any]:
    """The split result as the state machine receives it: the batch list only when the inline Map
    iterates it (at most ``INLINE_MAX_BATCHES`` batches); above, the manifest key and the counts
    alone, so the payload stays a few hundred bytes however many batches a document has (Step
    Functions fails a state whose input or output passes 256 KB)."""
    if int(plan.get("batchCount") or 0) <= INLINE_MAX_BATCHES:
        return plan
    return {k: v for k, v in plan.items() if k != "batches"}


@dataclass(frozen=True, slots=True)
class Stage:
    step: str  # the IngestSteps method, and the ``step`` of the state machine's task payload
    per_batch: bool  # run once per batch file (the state machine's Map) rather than once
    failure: str  # what a failure of this stage is recorded as, before the error's own message


SPLIT = Stage("split", per_batch=False, failure="")
EMBED_INDEX = Stage("embed_index", per_batch=True, failure="Embedding/indexing failed: ")
FINALIZE = Stage("finalize", per_batch=False, failure="")
STAGES = (SPLIT, EMBED_INDEX, FINALIZE)
ON_FAILURE = "fail"  # the step every stage's failure goes to


def failure_message(stage: Stage, exc: BaseException) -> str:
    """What ``fail`` records for ``exc`` raised by ``stage``."""
    return stage.failure + error_message(exc)


def run_step(steps: IngestSteps, event: dict[str, Any]) -> dict[str, Any]:
    """One step from its JSON input (the state machine's payload): ``{"step", "owner", "documentId",
    "version", ...}`` → the step's JSON result."""
    step = event.get("step")
    owner = str(event.get("owner") or "")
    document_id = str(event.get("documentId") or "")
    # The content version this execution ingests (``None`` from an execution started before versions).
    version = str(event["version"]) if event.get("version") else None
    if step == SPLIT.step:
        return state_machine_result(steps.split(owner, document_id, version))
    if step == EMBED_INDEX.step:
        return steps.embed_index(owner, document_id, str(event["key"]), version)
    if step == FINALIZE.step:  # one bounded step; the state machine loops on ``finished``
        cursor = str(event.get("cursor") or "")
        return steps.finalize_step(owner, document_id, int(event.get("chunkCount") or 0), version, cursor)
    if step == ON_FAILURE:  # one bounded step too; the state machine loops on ``finished``
        cursor = str(event.get("cursor") or "")
        return steps.fail_step(owner, document_id, step_error(event.get("error")), version, cursor)
    raise ValueError(f"unknown ingestion step {step!r}")


def step_error(error: Any) -> str:
    """A Step Functions Catch result (``{"Error": ..., "Cause": ...}``) → the text ``fail`` records."""
    if isinstance(error, dict):
        cause = error.get("Cause")
        name = error.get("Error")
        if isinstance(cause, str) and cause.strip():
            return cause
        return str(name or "Ingestion failed")
    return str(error or "Ingestion failed")
