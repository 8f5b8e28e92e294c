"""Issue 30 item 1 in the cloud: the split step runs in its own Lambda invocation (its own process:
no other request shares its GIL), bounded by the function's timeout (300 s) and memory (3008 MB);
a timeout or out-of-memory error is caught by the state machine (``States.ALL`` → MarkFailed). Within
that, the reader's CPU budget (``PARSE_CPU_SECONDS``, the limit the local child process enforces)
is checked after extraction, after the split and after the chunk headers, so a document that reads
too slowly FAILS with the same sentence as locally, and the next document is ingested normally.

Replayed through the real state machine on moto calling the real step handler, with the budget
lowered so that an ordinary 2 MB text overruns it.
"""

from __future__ import annotations

import pytest
from ragchat.domain.models import DocumentStatus

from tests.integration.moto_stack import Stack

OWNER = "alice"
SLOW = "\n\n".join(
    f"# Part {i}\n\n" + "A line about lighthouses and their keepers. " * 20 for i in range(2_200)
)


def test_a_document_over_the_cpu_budget_fails_in_the_split_lambda_and_the_next_is_ready(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = stack.container.ingest_steps
    monkeypatch.setattr(steps, "settings", steps.settings.model_copy(update={"parse_cpu_s": 0.02}))
    bomb = stack.container.ingestion.submit(OWNER, text=SLOW, title="slow")
    (first,) = stack.wait_for_all(1, timeout_s=120)
    failed = stack.container.documents.get_document(OWNER, bomb.id)
    assert failed is not None and failed.status == DocumentStatus.FAILED, first
    assert failed.error is not None
    assert failed.error.startswith("The file took too long to read: the limit is 0.02 s of CPU (")
    assert stack.container.index.count(OWNER) == 0

    monkeypatch.setattr(steps, "settings", steps.settings.model_copy(update={"parse_cpu_s": 60.0}))
    note = stack.container.ingestion.submit(OWNER, text="Lighthouses guide ships at night.", title="next")
    stack.wait_for_all(2, timeout_s=120)
    ready = stack.container.documents.get_document(OWNER, note.id)
    assert ready is not None and ready.status == DocumentStatus.READY
