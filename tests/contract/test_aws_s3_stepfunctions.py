"""S3 blob store and Step Functions launcher on moto."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from ragchat.adapters.aws.s3 import S3BlobStore
from ragchat.adapters.aws.stepfunctions import StepFunctionsLauncher, execution_name

DEFINITION = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}})


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="docs")
        yield client


def test_blob_round_trip_missing_key_and_idempotent_delete(s3):
    blobs = S3BlobStore("docs", s3)
    blobs.put("bodies/a.txt", b"hello", content_type="text/plain")
    assert blobs.get("bodies/a.txt") == b"hello"
    assert s3.head_object(Bucket="docs", Key="bodies/a.txt")["ContentType"] == "text/plain"
    with pytest.raises(KeyError):
        blobs.get("bodies/missing.txt")
    blobs.delete("bodies/a.txt")
    blobs.delete("bodies/a.txt")
    with pytest.raises(KeyError):
        blobs.get("bodies/a.txt")


def test_delete_prefix_pages_through_more_than_a_thousand_objects(s3):
    blobs = S3BlobStore("docs", s3)
    for i in range(1205):
        s3.put_object(Bucket="docs", Key=f"bodies/D1/{i:05d}", Body=b"x")
    blobs.put("bodies/D2/keep", b"y")
    assert blobs.delete_prefix("bodies/D1/") == 1205
    assert s3.list_objects_v2(Bucket="docs", Prefix="bodies/D1/").get("KeyCount") == 0
    assert blobs.get("bodies/D2/keep") == b"y"
    assert blobs.delete_prefix("bodies/nothing/") == 0


@pytest.fixture
def sfn() -> Iterator[tuple[Any, str]]:
    with mock_aws():
        client = boto3.client("stepfunctions", region_name="us-east-1")
        arn = client.create_state_machine(
            name="ingest", definition=DEFINITION, roleArn="arn:aws:iam::123456789012:role/sfn"
        )["stateMachineArn"]
        yield client, arn


def _executions(client: Any, arn: str) -> list[dict[str, Any]]:
    return client.list_executions(stateMachineArn=arn)["executions"]


def test_start_names_the_execution_by_document_and_passes_owner_and_id(sfn):
    client, arn = sfn
    StepFunctionsLauncher(arn, client).start("alice", "01JABCDEF")
    (execution,) = _executions(client, arn)
    assert execution["name"] == "01JABCDEF-1"
    described = client.describe_execution(executionArn=execution["executionArn"])
    assert json.loads(described["input"]) == {"owner": "alice", "documentId": "01JABCDEF", "version": None}


def test_starting_again_while_running_starts_nothing_and_reingest_after_close_does(sfn):
    client, arn = sfn
    launcher = StepFunctionsLauncher(arn, client)
    launcher.start("alice", "DOC")
    launcher.start("alice", "DOC")  # still running: not an error, not a second run
    assert [e["name"] for e in _executions(client, arn)] == ["DOC-1"]

    for n in range(1, 6):  # each run closes, then the document is re-ingested
        client.stop_execution(executionArn=_executions(client, arn)[0]["executionArn"])
        launcher.start("alice", "DOC")
        assert sorted(e["name"] for e in _executions(client, arn)) == sorted(
            f"DOC-{i}" for i in range(1, n + 2)
        )
    launcher.start("alice", "OTHER")
    assert "OTHER-1" in {e["name"] for e in _executions(client, arn)}


def test_a_newer_version_supersedes_the_running_one_and_the_same_version_does_not(sfn):
    client, arn = sfn
    launcher = StepFunctionsLauncher(arn, client)
    launcher.start("alice", "DOC", version="v1")
    launcher.start("alice", "DOC", version="v1")  # a retry of the same upload: nothing new
    assert [e["name"] for e in _executions(client, arn)] == ["DOC-1"]
    launcher.start("alice", "DOC", version="v2")  # a re-upload mid-run: stop the stale run, start anew
    by_name = {e["name"]: e for e in _executions(client, arn)}
    assert set(by_name) == {"DOC-1", "DOC-2"}
    assert by_name["DOC-1"]["status"] == "ABORTED" and by_name["DOC-2"]["status"] == "RUNNING"
    described = client.describe_execution(executionArn=by_name["DOC-2"]["executionArn"])
    assert json.loads(described["input"]) == {"owner": "alice", "documentId": "DOC", "version": "v2"}


def test_execution_names_are_valid_and_bounded():
    assert execution_name("01JABCDEF", 3) == "01JABCDEF-3"
    odd = execution_name("a b/c:d" + "x" * 200, 12)
    assert len(odd) <= 80 and odd.endswith("-12")
    assert all(ch.isalnum() or ch in "_-" for ch in odd)
    assert execution_name("a b", 1) != execution_name("a_b", 1)  # altered ids cannot collide


def test_get_with_metadata_reads_the_upload_metadata_lower_cased(s3):
    s3.put_object(Bucket="docs", Key="uploads/alice/a.md", Body=b"# A", Metadata={"Title": "A note"})
    data, metadata = S3BlobStore("docs", s3).get_with_metadata("uploads/alice/a.md")
    assert (data, metadata) == (b"# A", {"title": "A note"})
