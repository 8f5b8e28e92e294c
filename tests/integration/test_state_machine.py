"""The real ``statemachine/ingest.asl.json``, executed by moto, calling the real step handler."""

from __future__ import annotations

import json

from ragchat.domain.errors import ModelError
from ragchat.domain.models import DocumentStatus, SearchFilter
from ragchat.services.ingestion import IngestSteps

from tests.integration.moto_stack import Stack

OWNER = "alice"

PARAGRAPHS = [
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, completed in 1889.",
    "Mount Everest is the highest mountain above sea level, in the Himalayas.",
    "The Great Barrier Reef is the largest coral reef system, off the coast of Queensland.",
]


def test_a_document_runs_through_the_state_machine_to_ready(stack: Stack) -> None:
    text = "\n\n".join(p + " " + " ".join(f"detail{i}" for i in range(120)) for p in PARAGRAPHS)
    doc = stack.container.ingestion.submit(OWNER, text=text, title="Facts")

    (execution,) = stack.wait_for_all(1)
    assert execution["status"] == "SUCCEEDED", execution
    output = json.loads(execution["output"])
    assert output["result"] == {"status": "READY", "chunkCount": output["split"]["chunkCount"]}

    stored = stack.container.documents.get_document(OWNER, doc.id)
    assert stored is not None
    assert stored.status == DocumentStatus.READY
    assert stored.chunk_count == output["split"]["chunkCount"] >= 3
    notes = stack.container.documents.list_notes(OWNER, document_id=doc.id, limit=100).items
    assert [n.chunk_index for n in notes] == list(range(stored.chunk_count))
    # vectors are indexed, enabled and searchable by the owner only
    index = stack.container.index
    assert index.count(OWNER) == stored.chunk_count
    hits = index.search(stack.embedder.embed_query("Mount Everest Himalayas"), SearchFilter(owner=OWNER), 1)
    assert "Everest" in hits[0].text
    assert index.count("mallory") == 0
    # the steps ran as the state machine says: split, one embed per batch, finalize
    steps = [i["step"] for i in stack.invocations]
    assert steps[0] == "split" and steps[-1] == "finalize"
    assert steps.count("embed_index") == output["split"]["batchCount"]
    # the batch files are cleaned up once the document is READY
    listed = stack.s3.list_objects_v2(Bucket=stack.container.settings.documents_bucket, Prefix="work/")
    assert listed.get("KeyCount", 0) == 0


def test_a_failing_embed_ends_failed_with_the_error_and_nothing_indexed(stack: Stack) -> None:
    stack.embedder.fail_with = ModelError("Bedrock embedding failed: model not available")
    doc = stack.container.ingestion.submit(OWNER, text="\n\n".join(PARAGRAPHS), title="Doomed")

    (execution,) = stack.wait_for_all(1)
    assert execution["status"] == "FAILED"
    assert execution.get("error") == "IngestFailed"

    stored = stack.container.documents.get_document(OWNER, doc.id)
    assert stored is not None
    assert stored.status == DocumentStatus.FAILED
    assert stored.error and "model not available" in stored.error
    assert stored.chunk_count == 0
    assert stack.container.documents.list_notes(OWNER, document_id=doc.id).items == []
    assert stack.container.index.count(OWNER) == 0
    assert [i["step"] for i in stack.invocations][-1] == "fail"


def test_a_large_document_fans_out_through_the_distributed_map(stack: Stack) -> None:
    # More than 40 batches takes the Distributed Map branch, which reads the batch list from the
    # manifest in S3 (ItemReader) instead of the state's input. One chunk per batch keeps the run
    # small (41 notes instead of 41 x 64): the steps are built with batch_size=1.
    c = stack.container
    c.settings = c.settings.model_copy(update={"chunk_size": 100, "chunk_overlap": 0})
    c.ingest_steps = IngestSteps(c.documents, c.blobs, c.embedder, c.index, c.settings, batch_size=1)
    words = [f"w{i:05d}" for i in range(45 * 15)]  # ~15 six-character words per 100-character chunk
    doc = stack.container.ingestion.submit(OWNER, text=" ".join(words), title="Big")

    (execution,) = stack.wait_for_all(1)
    assert execution["status"] == "SUCCEEDED", execution
    output = json.loads(execution["output"])
    assert output["split"]["batchCount"] > 40
    stored = stack.container.documents.get_document(OWNER, doc.id)
    assert stored is not None and stored.status == DocumentStatus.READY
    assert stack.container.index.count(OWNER) == stored.chunk_count == output["split"]["chunkCount"]
    assert [i["step"] for i in stack.invocations].count("embed_index") == output["split"]["batchCount"]
    notes = stack.container.documents.list_notes(OWNER, document_id=doc.id, limit=100).items
    assert " ".join(n.text for n in notes).split() == words
