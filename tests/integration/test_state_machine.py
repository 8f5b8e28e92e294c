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
    count = output["split"]["chunkCount"]  # a small document: finalize finishes in one step
    assert output["result"] == {"status": "READY", "chunkCount": count, "finished": True, "cursor": ""}
    assert [i["step"] for i in stack.invocations].count("finalize") == 1

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


def test_an_execution_of_a_superseded_version_ends_cleanly_and_changes_nothing(stack: Stack) -> None:
    """A run started for an older content version (its re-upload came since) stands down at every
    step: the execution succeeds with status SUPERSEDED and the document keeps the newer content."""
    doc = stack.container.ingestion.submit(OWNER, text="\n\n".join(PARAGRAPHS), title="Facts")
    (first,) = stack.wait_for_all(1)
    assert first["status"] == "SUCCEEDED"
    before = stack.container.documents.get_document(OWNER, doc.id)
    assert before is not None and before.status == DocumentStatus.READY and before.version
    notes_before = stack.container.documents.list_notes(OWNER, document_id=doc.id, limit=100).items

    stale = json.dumps({"owner": OWNER, "documentId": doc.id, "version": "01OLDERVERSION"})
    started = stack.sfn.start_execution(
        stateMachineArn=stack.state_machine_arn, name="stale-run", input=stale
    )
    execution = stack.wait_for(started["executionArn"])
    assert execution["status"] == "SUCCEEDED", execution
    output = json.loads(execution["output"])
    assert output["split"]["batchCount"] == 0 and output["result"]["status"] == "SUPERSEDED"

    after = stack.container.documents.get_document(OWNER, doc.id)
    assert after is not None and after.status == DocumentStatus.READY
    assert after.version == before.version and after.chunk_count == before.chunk_count
    assert stack.container.documents.list_notes(OWNER, document_id=doc.id, limit=100).items == notes_before
    assert stack.container.index.count(OWNER) == before.chunk_count


def test_every_step_of_the_definition_gets_the_version_in_jsonpath() -> None:
    from pathlib import Path

    definition = json.loads((Path(__file__).parents[2] / "statemachine" / "ingest.asl.json").read_text())
    text = json.dumps(definition).replace(definition["Comment"], "")
    assert '"QueryLanguage"' not in text and '"Assign"' not in text and "{%" not in text  # JSONPath only

    def tasks(states: dict[str, object]) -> list[dict[str, object]]:
        found: list[dict[str, object]] = []
        for state in states.values():
            assert isinstance(state, dict)
            if state["Type"] == "Task":
                found.append(state)
            processor = state.get("ItemProcessor")
            if isinstance(processor, dict):
                found += tasks(processor["States"])
        return found

    steps = tasks(definition["States"])
    assert len(steps) == 6  # split, embed (inline, distributed), finalize, fail and its next steps
    for state in steps:
        payload = state["Parameters"]["Payload"]  # type: ignore[index]
        assert payload.get("version.$") in ("$.version", "$.split.version"), payload


def test_a_superseded_run_that_fails_ends_cleanly_and_leaves_the_newer_content(stack: Stack) -> None:
    doc = stack.container.ingestion.submit(OWNER, text="\n\n".join(PARAGRAPHS), title="Facts")
    (first,) = stack.wait_for_all(1)
    assert first["status"] == "SUCCEEDED"
    c = stack.container

    class BrokenSplit(IngestSteps):
        def split(self, owner: str, document_id: str, version: str | None = None) -> dict[str, object]:
            raise RuntimeError("the stale run's split broke")

    c.ingest_steps = BrokenSplit(c.documents, c.blobs, c.embedder, c.index, c.settings)
    stale = json.dumps({"owner": OWNER, "documentId": doc.id, "version": "01OLDERVERSION"})
    started = stack.sfn.start_execution(
        stateMachineArn=stack.state_machine_arn, name="stale-fail", input=stale
    )
    execution = stack.wait_for(started["executionArn"])
    assert execution["status"] == "SUCCEEDED", execution
    assert json.loads(execution["output"])["result"]["status"] == "SUPERSEDED"
    after = c.documents.get_document(OWNER, doc.id)
    assert after is not None and after.status == DocumentStatus.READY and after.error is None
    assert c.index.count(OWNER) == after.chunk_count > 0
