"""The ingestion state machine's task: one step (split / embed_index / finalize / fail) per call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragchat.bootstrap import Container, ContainerFactory, LazyContainer
from ragchat.observability import lambda_entry, root_logger

if TYPE_CHECKING:
    from ragchat.services.ingestion import IngestSteps

# JSON log lines on stdout, correlated by the Lambda request id, with the step and document id.
logger = root_logger()


class IngestStepHandler:
    """Step Functions task: ``{"step": "split"|"embed_index"|"finalize"|"fail", "owner", "documentId",
    "version", ...}`` → the step's JSON result. Errors propagate so the state machine's Retry/Catch apply (the
    error type name is the Step Functions error name, e.g. ``TransientError``)."""

    def __init__(self, container: ContainerFactory = Container) -> None:
        self.container = LazyContainer(container)
        self._entry = lambda_entry(self._step, name="ingest_step_handler")

    def with_container(self, container: ContainerFactory) -> IngestStepHandler:
        return IngestStepHandler(container)

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._entry(event, context)
        return result

    def _step(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        step = event.get("step")
        owner = str(event.get("owner") or "")
        document_id = str(event.get("documentId") or "")
        logger.append_keys(documentId=document_id, step=step)
        return run_step(self.container.get().ingest_steps, event, owner, document_id)


def run_step(steps: IngestSteps, event: dict[str, Any], owner: str, document_id: str) -> dict[str, Any]:
    step = event.get("step")
    # The content version this execution ingests (``None`` from an execution started before versions).
    version = str(event["version"]) if event.get("version") else None
    if step == "split":
        return steps.split(owner, document_id, version)
    if step == "embed_index":
        return steps.embed_index(owner, document_id, str(event["key"]), version)
    if step == "finalize":
        return steps.finalize(owner, document_id, int(event.get("chunkCount") or 0), version)
    if step == "fail":
        return steps.fail(owner, document_id, step_error(event.get("error")), version)
    raise ValueError(f"unknown ingestion step {step!r}")


def ingest_step_handler(container: ContainerFactory = Container) -> IngestStepHandler:
    return IngestStepHandler(container)


def step_error(error: Any) -> str:
    """A Step Functions Catch result (``{"Error": ..., "Cause": ...}``) → the text ``fail`` records."""
    if isinstance(error, dict):
        cause = error.get("Cause")
        name = error.get("Error")
        if isinstance(cause, str) and cause.strip():
            return cause
        return str(name or "Ingestion failed")
    return str(error or "Ingestion failed")
