"""Big documents in the cloud (issue 8): the same 1,000-page PDF as the local test
(``test_big_documents.py``: 1,000 pages, 40 lines each, ~3.2 MB, ~3,900 chunks) uploaded to S3 and
run through the real ``statemachine/ingest.asl.json`` on moto, calling the real step handler, with a
fast fake embedder (the model is not the subject).

What it proves: the document ends READY with every chunk indexed and searchable; every batch went
through ``embed_index`` once; more than 40 batches take the Distributed Map branch (the batch list
read from the S3 manifest by the ItemReader); and no state's input or output comes near the Step
Functions payload limit (256 KB), measured two ways: what the step function received and returned
(the dispatcher is instrumented) and every state's input/output in the execution history.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from ragchat.domain.models import DocumentStatus, SearchFilter

from tests.integration.moto_stack import Stack
from tests.pdfs import book_pdf

pytestmark = pytest.mark.slow

OWNER = "alice"
PAGES = 1000
PAYLOAD_LIMIT = 256 * 1024  # bytes: the Step Functions limit on a state's input, output and result
INLINE_MAX_BATCHES = 40  # the HowManyBatches choice: more than this go through the Distributed Map


def _instrument(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Wrap the fixture's in-process Lambda dispatcher: record each call's step, payload sizes in
    and out (bytes of UTF-8 JSON, as Step Functions counts them) and duration."""
    from moto.awslambda.models import LambdaFunction

    dispatch = LambdaFunction._invoke_lambda  # the fixture's in-process handler call
    calls: list[dict[str, Any]] = []

    def measured(self: Any, event: Any = None) -> tuple[str, bool, str]:
        received = event if isinstance(event, str) else json.dumps(event or {})
        started = time.perf_counter()
        result, failed, logs = dispatch(self, event)
        calls.append(
            {
                "step": json.loads(received).get("step"),
                "in": len(received.encode("utf-8")),
                "out": len(result.encode("utf-8")),
                "failed": failed,
                "seconds": time.perf_counter() - started,
            }
        )
        return result, failed, logs

    monkeypatch.setattr(LambdaFunction, "_invoke_lambda", measured)
    return calls


def _history_payloads(stack: Stack, execution_arn: str) -> tuple[list[str], list[int]]:
    """The states entered (by name) and event types seen, and the byte size of every state
    input/output in the history."""
    entered: list[str] = []
    sizes: list[int] = []
    kwargs: dict[str, Any] = {"executionArn": execution_arn, "maxResults": 1000}
    while True:
        page = stack.sfn.get_execution_history(**kwargs)
        for event in page["events"]:
            entered.append(event["type"])
            entered.append(event.get("stateEnteredEventDetails", {}).get("name", ""))
            for details in event.values():
                if isinstance(details, dict):
                    for name in ("input", "output"):
                        if isinstance(details.get(name), str):
                            sizes.append(len(details[name].encode("utf-8")))
        if not page.get("nextToken"):
            return entered, sizes
        kwargs["nextToken"] = page["nextToken"]


def test_a_1000_page_pdf_runs_through_the_state_machine_within_the_payload_limits(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _instrument(stack, monkeypatch)
    pdf = book_pdf(PAGES)
    assert len(pdf) > 3_000_000

    doc = stack.container.ingestion.submit(OWNER, body=pdf, filename="annual-report.pdf")
    (execution,) = stack.wait_for_all(1, timeout_s=300)
    assert execution["status"] == "SUCCEEDED", execution
    output = json.loads(execution["output"])
    split = output["split"]
    chunk_count = split["chunkCount"]

    # READY with the right chunk count: every page's chunks stored, indexed and searchable
    stored = stack.container.documents.get_document(OWNER, doc.id)
    assert stored is not None and stored.status == DocumentStatus.READY, stored
    assert output["result"] == {"status": "READY", "chunkCount": chunk_count, "finished": True, "cursor": ""}
    assert stored.chunk_count == chunk_count > 3 * PAGES
    assert stack.container.index.count(OWNER) == chunk_count
    notes = stack.container.documents.list_notes(OWNER, document_id=doc.id, limit=10_000).items
    assert [n.chunk_index for n in notes] == list(range(chunk_count))
    assert {n.metadata["page"] for n in notes} == set(range(1, PAGES + 1))
    everything = stack.container.index.search(
        stack.embedder.embed_query(notes[-1].text), SearchFilter(owner=OWNER), chunk_count
    )
    assert {h.id for h in everything} == {n.id for n in notes}  # every chunk switched on, searchable

    # every batch embedded and indexed once, through the Distributed Map (ItemReader on the manifest)
    assert split["batchCount"] > INLINE_MAX_BATCHES
    embeds = [c for c in calls if c["step"] == "embed_index"]
    assert len(embeds) == split["batchCount"] and not any(c["failed"] for c in calls)
    # the batch list is not in the split result (only the manifest's key): each batch once, this run's
    keys = [i["key"] for i in stack.invocations if i["step"] == "embed_index"]
    assert "batches" not in split and len(set(keys)) == len(keys) == split["batchCount"]
    assert all(k.startswith(split["manifestKey"].rsplit("/", 1)[0] + "/") for k in keys)
    entered, sizes = _history_payloads(stack, execution["executionArn"])
    assert "MapRunStarted" in entered, sorted(set(entered))  # the Distributed Map ran ...
    assert "EmbedIndexDistributed" in entered and "EmbedIndexInline" not in entered  # ... alone
    assert calls[0]["step"] == "split" and calls[-1]["step"] == "finalize"
    # finalize in bounded steps (FINALIZE_STEP_CHUNKS, 1,000): switching 3,901 chunks on, then
    # looking at as many notes for the swap, takes 8 invocations, none of them the whole document
    assert sum(1 for c in calls if c["step"] == "finalize") == -(-2 * chunk_count // 1000)

    # no payload near the 256 KB limit: what the steps received and returned, and every state's
    # input/output recorded in the history
    largest_step = max(max(c["in"], c["out"]) for c in calls)
    largest_state = max(sizes)
    assert largest_step < PAYLOAD_LIMIT and largest_state < PAYLOAD_LIMIT
    split_seconds = next(c["seconds"] for c in calls if c["step"] == "split")
    print(  # the figures for docs/benchmarks.md (pytest -s); no timed assertion
        f"\n{PAGES} pages, {len(pdf):,} bytes, {chunk_count:,} chunks, {split['batchCount']} batches;"
        f" largest step payload {largest_step:,} B, largest state input/output {largest_state:,} B;"
        f" split step {split_seconds:.1f} s"
    )

    # the batch files are cleaned up once the document is READY
    listed = stack.s3.list_objects_v2(Bucket=stack.container.settings.documents_bucket, Prefix="work/")
    assert listed.get("KeyCount", 0) == 0


# ~1,300 batches overflowed 256 KB when the split result listed every batch (~220 B a batch). 400
# batches go through the real ASL here, where a listed split result would be ~88 KB, 20 times the
# 4 KB bound below; the 2,500-batch count itself (a ~160,000-chunk document at 64 chunks a batch)
# runs through the same steps in tests/unit/test_split_result.py. On moto each batch is a real
# Map iteration (~40 ms of one core), so 2,500 here took 100 s of the suite for no further check.
BIG_BATCHES = 400


def test_400_batches_run_through_the_real_asl_with_every_state_payload_far_under_the_limit(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The split result carries the manifest key and the counts, not the batch list (issue 18):
    400 batches of one chunk each go through the Distributed Map and the document ends READY, and
    no payload grows with the batch count."""
    from ragchat.services.ingestion import IngestionService, IngestSteps

    from tests.fakes import FakeDocumentStore, FakeVectorIndex

    calls = _instrument(stack, monkeypatch)
    c = stack.container
    c.settings = c.settings.model_copy(update={"chunk_size": 100, "chunk_overlap": 0})
    # The subject is the state machine and its payloads: the documents and vectors live in memory
    # (2,500 batches through moto's DynamoDB and the embedded index would take minutes); S3, Step
    # Functions and the step handler are the stack's own.
    c.documents = FakeDocumentStore()
    c.index = FakeVectorIndex(dimension=c.embedder.dimension)
    c.ingest_steps = IngestSteps(c.documents, c.blobs, c.embedder, c.index, c.settings, batch_size=1)
    ingestion = IngestionService(c.documents, c.blobs, c.launcher, c.settings)
    words = [f"w{i:06d}" for i in range(BIG_BATCHES * 12 + 600)]  # ~12 words per 100-character chunk
    doc = ingestion.submit(OWNER, text=" ".join(words), title="Huge")

    (execution,) = stack.wait_for_all(1, timeout_s=900, poll_s=0.5)  # polls less: it competes for the GIL
    assert execution["status"] == "SUCCEEDED", execution
    split = json.loads(execution["output"])["split"]
    assert split["batchCount"] >= BIG_BATCHES and "batches" not in split
    stored = c.documents.get_document(OWNER, doc.id)
    assert stored is not None and stored.status == DocumentStatus.READY
    assert stored.chunk_count == split["chunkCount"] == split["batchCount"]
    assert c.index.count(OWNER) == stored.chunk_count
    assert sum(1 for x in calls if x["step"] == "embed_index") == split["batchCount"]

    entered, sizes = _history_payloads(stack, execution["executionArn"])
    assert "EmbedIndexDistributed" in entered and "EmbedIndexInline" not in entered
    largest = max([*sizes, *(max(x["in"], x["out"]) for x in calls)])
    assert largest < 4_096  # far under Step Functions' 256 KB (was 552,777 B on the fakes)
