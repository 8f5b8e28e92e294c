"""The reconciler: an ingestion execution that ended without finishing its document (docs/ingestion.md).

The state machine marks its document ``FAILED`` itself (``MarkFailed``) on every failure it catches.
What it cannot catch: an execution that times out, is aborted (a console stop, a quota), or fails
in ``MarkFailed`` itself (Lambda throttling past its retries on a new account's 10 concurrent
executions). Its document would stay ``PROCESSING`` for good. EventBridge sends every such end
(``Step Functions Execution Status Change``, status ``FAILED``, ``TIMED_OUT`` or ``ABORTED``, this
state machine only) to the ingest steps function, which hands it here.

Idempotent and careful: the document is marked ``FAILED`` with the execution's reason, through the
pipeline's own ``fail`` step (what the run wrote goes, a previous version stays searchable), only
when it is still ``PENDING`` or ``PROCESSING`` *for the execution's content version*. A document
already ``READY`` or ``FAILED``, one re-uploaded since (the launcher aborts the older run: a newer
version is under way), or one deleted, is left alone. A second delivery of the event finds the
document ``FAILED`` and does nothing.

Bounded: the run's notes and vectors go through the state machine's bounded step (``fail_step``,
``FINALIZE_STEP_CHUNKS`` notes a step), step after step for at most ``RECONCILE_SECONDS`` (the function
has 300 s). A bigger document is marked ``FAILED`` with the reason at once (never left ``PROCESSING``),
its record saying the cleanup is under way (``switching``: ``cleanup:<version>``), and the call raises
``TransientError``: Lambda retries an asynchronous (EventBridge) invocation that fails twice, and the
retry carries on (the removed notes are gone; the listing starts over). What the retries leave goes
with the document's ``DELETE`` or its next version's swap.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from ragchat.domain.errors import TransientError
from ragchat.domain.intake import human_error
from ragchat.domain.models import DocumentStatus
from ragchat.services.metrics import INGESTION_RECONCILED

if TYPE_CHECKING:
    from ragchat.services.ingest_steps import IngestSteps

logger = Logger(service="ragchat", child=True)

DETAIL_TYPE = "Step Functions Execution Status Change"
ENDED = {"FAILED": "failed", "TIMED_OUT": "timed out", "ABORTED": "was stopped"}
# how long one reconciling call removes a failed run's chunks (the ingest steps function has 300 s;
# a step is FINALIZE_STEP_CHUNKS notes, a few seconds): then it raises, and Lambda's retry carries on
RECONCILE_SECONDS = 200.0


def is_status_change(event: Any) -> bool:
    """Whether a Lambda event is an EventBridge execution status change (not a state machine step)."""
    return (
        isinstance(event, dict)
        and event.get("source") == "aws.states"
        and event.get("detail-type") == DETAIL_TYPE
    )


def execution_reason(status: str, error: str | None, cause: str | None) -> str:
    """What the document's error says: how the run ended, and why when the event tells."""
    why = (cause or "").strip() or (error or "").strip()
    ended = f"Ingestion {ENDED.get(status, status.lower())}"
    return f"{ended}: {why}" if why else f"{ended} before it finished; upload the document again."


def reconcile(
    steps: IngestSteps, event: dict[str, Any], seconds: float = RECONCILE_SECONDS
) -> dict[str, Any]:
    """Mark the execution's document ``FAILED`` when the run left it unfinished. The run's input
    (owner, document id, version) is in the event's ``detail.input``: EventBridge includes an input
    up to 248 KB, and ingestion's is a few hundred bytes."""
    detail = event.get("detail") or {}
    status = str(detail.get("status") or "")
    if status not in ENDED:
        return {"status": "IGNORED"}
    try:
        run = json.loads(detail["input"]) if isinstance(detail.get("input"), str) else {}
    except ValueError:
        run = {}
    owner, document_id = str(run.get("owner") or ""), str(run.get("documentId") or "")
    version = str(run["version"]) if run.get("version") else None
    if not owner or not document_id:  # a Distributed Map child or a hand-started run: not a document's
        return {"status": "IGNORED"}
    doc = steps.documents.get_document(owner, document_id)
    unfinished = (DocumentStatus.PENDING, DocumentStatus.PROCESSING)
    cleaning = f"cleanup:{version or ''}"  # a previous call's cleanup, to carry on
    resuming = doc is not None and doc.status == DocumentStatus.FAILED and doc.switching == cleaning
    if (
        doc is None
        or (doc.status not in unfinished and not resuming)
        or (version is not None and doc.version not in (None, version))
    ):
        logger.info(
            "ingest.reconcile_skipped",
            extra={"documentId": document_id, "execution": detail.get("name"), "status": status,
                   "document": None if doc is None else str(doc.status)},
        )  # fmt: skip
        return {"status": "UNCHANGED"}
    reason = execution_reason(status, detail.get("error"), detail.get("cause"))
    deadline = steps.clock() + seconds
    result, cursor = steps.fail_step(owner, document_id, reason, version), ""
    while not result.get("finished"):
        cursor = str(result.get("cursor") or "")
        if steps.clock() >= deadline:  # at least one step done: the retry carries on from there
            failed = {"status": DocumentStatus.FAILED, "error": human_error(reason), "switching": cleaning}
            steps.documents.update_document(owner, document_id, failed)
            if not resuming:
                steps.metrics.add(INGESTION_RECONCILED)
            logger.info("ingest.reconcile_paused", extra={"documentId": document_id, "cursor": cursor})
            raise TransientError(
                f"Document {document_id}: the failed run's chunks are still being removed (retried)"
            )
        result = steps.fail_step(owner, document_id, reason, version, cursor)
    if not resuming:
        steps.metrics.add(INGESTION_RECONCILED)
    logger.warning(
        "ingest.reconciled",
        extra={"documentId": document_id, "execution": detail.get("name"), "status": status, "error": reason},
    )
    return {"status": result["status"], "error": result["error"]}
