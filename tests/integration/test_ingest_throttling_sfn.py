"""A new account runs 10 Lambda executions at once: the ingestion fan-out and the page's polling
throttle the state machine's own tasks (issue 44, item 4b). The real ``statemachine/ingest.asl.json``
on moto: Lambda answers ``TooManyRequestsException`` (HTTP 429, as the Invoke API does when the
concurrency is spent) to the first calls of ``MarkFailed``; the state machine retries them with
backoff and the document still ends FAILED with its own error, not PROCESSING for good. The
retrier's pauses are recorded instead of slept (an injected clock, not wall time)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ragchat.domain.errors import ModelError
from ragchat.domain.models import DocumentStatus

from tests.integration.moto_stack import Stack

OWNER = "alice"


def _throttle(monkeypatch: pytest.MonkeyPatch, step: str, times: int) -> list[str]:
    """The first ``times`` invocations of ``step`` are refused as Lambda refuses them when the
    account's concurrency is spent; returns the steps each refused call was for."""
    from moto.awslambda.models import LambdaFunction
    from moto.core.exceptions import JsonRESTError

    class TooManyRequests(JsonRESTError):
        code = 429

        def __init__(self) -> None:
            super().__init__("TooManyRequestsException", "Rate Exceeded.")

    dispatch = LambdaFunction._invoke_lambda  # the stack's in-process handler call
    refused: list[str] = []

    def throttled(self: Any, event: Any = None) -> tuple[str, bool, str]:
        payload = json.loads(event) if isinstance(event, str) else (event or {})
        if payload.get("step") == step and len(refused) < times:
            refused.append(step)
            raise TooManyRequests()
        return dispatch(self, event)

    monkeypatch.setattr(LambdaFunction, "_invoke_lambda", throttled)
    return refused


def _record_retry_pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """moto's retrier sleeps each Retry interval in real time: record the pauses instead."""
    from types import SimpleNamespace

    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

    pauses: list[float] = []
    monkeypatch.setattr(retrier_decl, "time", SimpleNamespace(sleep=pauses.append))
    return pauses


def test_a_throttled_mark_failed_is_retried_with_backoff_until_the_document_is_failed(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = _throttle(monkeypatch, "fail", times=7)
    pauses = _record_retry_pauses(monkeypatch)
    stack.embedder.fail_with = ModelError("Bedrock embedding failed: model not available")
    doc = stack.container.ingestion.submit(OWNER, text="The Eiffel Tower is in Paris.", title="Doomed")

    (execution,) = stack.wait_for_all(1)

    assert len(refused) == 7  # seven throttled calls of MarkFailed, the eighth ran
    stored = stack.container.documents.get_document(OWNER, doc.id)
    assert stored is not None and stored.status == DocumentStatus.FAILED
    assert stored.error and "model not available" in stored.error
    assert execution["status"] == "FAILED" and execution.get("error") == "IngestFailed"
    # backed off: each pause bounded by 2 s doubling to at most 60 s (full jitter draws below it)
    assert len(pauses) >= 7
    throttle_pauses = pauses[-7:]
    assert all(0 <= p <= min(2 * 2**n, 60) for n, p in enumerate(throttle_pauses))


def test_a_mark_failed_that_never_runs_ends_the_execution_failed_for_the_reconciler(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Throttled past every retry, MarkFailed's Catch ends the execution FAILED (IngestFailed): the
    status change event the reconciler acts on (tests/unit/test_ingest_reconciler.py)."""
    refused = _throttle(monkeypatch, "fail", times=100)
    _record_retry_pauses(monkeypatch)
    stack.embedder.fail_with = ModelError("Bedrock embedding failed: model not available")
    doc = stack.container.ingestion.submit(OWNER, text="The Eiffel Tower is in Paris.", title="Doomed")

    (execution,) = stack.wait_for_all(1)

    assert execution["status"] == "FAILED" and execution.get("error") == "IngestFailed"
    assert len(refused) == 11  # the first call and its 10 retries
    stored = stack.container.documents.get_document(OWNER, doc.id)
    assert stored is not None and stored.status == DocumentStatus.PROCESSING  # the reconciler's to end
