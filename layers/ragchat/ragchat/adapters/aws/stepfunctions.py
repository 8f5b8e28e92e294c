"""Step Functions launcher: starts the ingestion state machine for a document.

Execution names: ``<document id>-<attempt>`` (attempt 1, 2, …). Step Functions keeps a (standard
workflow) execution name unique for 90 days, which gives us the launcher contract:

- a start while the latest attempt is still RUNNING *for the same content version* (a Lambda retry,
  a retried request: the input carries the ``version`` the ingestion service gave that upload)
  returns without starting anything; two starters racing for the same free name both send the same
  name and input, and ``StartExecution`` is idempotent for that while the run is open;
- a start for a *newer* version while an older one runs (a re-upload mid-ingestion) stops the
  running attempt and starts the next one, which reads the newest body: the newest content ends
  READY, never the stale one (the local pipeline gets there by re-queueing; one contract suite,
  ``tests/integration/test_launcher_contract.py``, holds both launchers to it). A Lambda step of
  the stopped run that is still in flight finishes on its own, but every step checks the version
  the document records and stands down when it is not its own (``IngestSteps``), and batch files
  live under a per-version prefix, so the stale run can neither overwrite nor clean up the new one;
- a *re-ingest* of the same document after its run closed (an S3 re-upload of the same key, an
  edit) finds attempt ``n`` closed and starts ``n + 1``, so it is never refused. The first free
  attempt is found with ``DescribeExecution`` by galloping then bisecting: O(log n) look-ups.

A digest of ``updated_at`` would also be distinct per version, but the launcher only receives the
document id, and an attempt counter keeps the names readable in the console. Names keep to
``[A-Za-z0-9_-]`` and ≤ 80 characters; an id that had to be altered gets a short hash so two ids
cannot collide.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Any

from botocore.exceptions import ClientError

logger = logging.getLogger(__name__)

MAX_NAME = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def execution_base_name(document_id: str) -> str:
    safe = _UNSAFE.sub("_", document_id)
    if safe != document_id or len(safe) > 60:
        digest = hashlib.sha256(document_id.encode()).hexdigest()[:10]
        safe = f"{safe[:60]}-{digest}"
    return safe


def execution_name(document_id: str, attempt: int) -> str:
    name = f"{execution_base_name(document_id)}-{attempt}"
    assert len(name) <= MAX_NAME
    return name


class StepFunctionsLauncher:
    """``IngestionLauncher`` that calls ``StartExecution`` with input ``{"owner", "documentId",
    "version"}``."""

    def __init__(self, state_machine_arn: str, client: Any) -> None:
        self.state_machine_arn = state_machine_arn
        self._client = client
        # arn:aws:states:<region>:<account>:stateMachine:<name> → …:execution:<name>:<execution name>
        self._execution_prefix = state_machine_arn.replace(":stateMachine:", ":execution:", 1) + ":"

    def _describe(self, document_id: str, attempt: int) -> dict[str, Any] | None:
        try:
            resp: dict[str, Any] = self._client.describe_execution(
                executionArn=self._execution_prefix + execution_name(document_id, attempt)
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ExecutionDoesNotExist":
                return None
            raise
        return resp

    def _status(self, document_id: str, attempt: int) -> str | None:
        desc = self._describe(document_id, attempt)
        return None if desc is None else str(desc.get("status"))

    def _first_free_attempt(self, document_id: str) -> int:
        """Attempts are used in order 1, 2, 3…: gallop then bisect, O(log n) lookups."""
        used, free = 0, 1
        while self._status(document_id, free) is not None:
            used, free = free, free * 2
        while free - used > 1:
            mid = (used + free) // 2
            if self._status(document_id, mid) is None:
                free = mid
            else:
                used = mid
        return free

    def start(self, owner: str, document_id: str, *, version: str | None = None) -> None:
        # ``version`` is always present (null when unknown): the state machine passes ``$.version`` on.
        fields = {"owner": owner, "documentId": document_id, "version": version}
        payload = json.dumps(fields, separators=(",", ":"))
        for _ in range(5):
            attempt = self._first_free_attempt(document_id)
            if attempt > 1 and not self._supersede(document_id, attempt - 1, version):
                return  # that ingestion of this very version is under way: neither an error nor a new run
            try:
                self._client.start_execution(
                    stateMachineArn=self.state_machine_arn,
                    name=execution_name(document_id, attempt),
                    input=payload,
                )
                return
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                    raise
            # A concurrent start took that name first (and closed it already): look again.
        raise RuntimeError(f"document {document_id}: could not start an ingestion run")

    def _supersede(self, document_id: str, attempt: int, version: str | None) -> bool:
        """Whether to start a run after ``attempt``: yes when it is closed; when it is RUNNING, only
        for another content version, and then it is stopped first (its result would be stale)."""
        desc = self._describe(document_id, attempt)
        if desc is None or desc.get("status") != "RUNNING":
            return True
        running = json.loads(desc.get("input") or "{}").get("version")
        if running == version:
            return False
        try:
            self._client.stop_execution(
                executionArn=desc["executionArn"], error="Superseded", cause="a newer version was uploaded"
            )
        except ClientError as exc:  # closed meanwhile: fine, the next attempt is started all the same
            logger.info("stepfunctions.stop_failed: %s", exc)
        return True
