"""The ingestion state machine's task: one step (split / embed_index / finalize / fail) per call, through
:func:`ragchat.services.ingest_pipeline.run_step`."""

from __future__ import annotations

from typing import Any

from ragchat.bootstrap import Container, ContainerFactory, LazyContainer
from ragchat.observability import lambda_entry, root_logger
from ragchat.services.ingest_pipeline import run_step
from ragchat.services.ingest_reconciler import is_status_change, reconcile

# JSON log lines on stdout, correlated by the Lambda request id, with the step and document id.
logger = root_logger()


class IngestStepHandler:
    """Step Functions task: ``{"step": "split"|"embed_index"|"finalize"|"fail", "owner", "documentId",
    "version", ...}`` → the step's JSON result; or an EventBridge execution status change → the
    reconciler (:mod:`ragchat.services.ingest_reconciler`). Errors propagate so the state machine's
    Retry/Catch apply (the error type name is the Step Functions error name, e.g. ``TransientError``)."""

    def __init__(self, container: ContainerFactory = Container) -> None:
        self.container = LazyContainer(container)
        self._entry = lambda_entry(self._step, name="ingest_step_handler")

    def with_container(self, container: ContainerFactory) -> IngestStepHandler:
        return IngestStepHandler(container)

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._entry(event, context)
        return result

    def _step(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        if is_status_change(event):  # EventBridge: an execution ended FAILED, TIMED_OUT or ABORTED
            logger.append_keys(step="reconcile")
            return reconcile(self.container.get().ingest_steps, event)
        logger.append_keys(documentId=str(event.get("documentId") or ""), step=event.get("step"))
        return run_step(self.container.get().ingest_steps, event)


def ingest_step_handler(container: ContainerFactory = Container) -> IngestStepHandler:
    return IngestStepHandler(container)
