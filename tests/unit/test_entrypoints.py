"""The non-HTTP entry points (``ragchat.entrypoints``): S3 upload events and the ingestion steps."""

from __future__ import annotations

from typing import Any

import pytest
from ragchat.bootstrap import Container
from ragchat.config import ConfigError, load_settings
from ragchat.domain.ids import stable_document_id
from ragchat.entrypoints.ingest_steps import ingest_step_handler
from ragchat.entrypoints.s3_ingest import ingest_s3_event, s3_ingest_handler
from ragchat.services.ingest_pipeline import step_error

from tests.events import json_body
from tests.fakes import FakeBlobStore
from tests.unit.api_support import make_api


def test_ingest_step_error_from_step_functions_catch() -> None:
    cause = '{"errorMessage": "No text could be extracted", "errorType": "ValidationError"}'
    assert step_error({"Error": "ValidationError", "Cause": cause}) == cause
    assert step_error({"Error": "States.Timeout"}) == "States.Timeout"
    assert step_error(None) == "Ingestion failed"


def s3_event(*keys: str, bucket: str = "docs") -> dict[str, Any]:
    return {
        "Records": [
            {"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": bucket}, "object": {"key": k}}}
            for k in keys
        ]
    }


def upload(blobs: Any, key: str, data: bytes, **metadata: str) -> None:
    assert isinstance(blobs, FakeBlobStore)
    blobs.put(key, data)
    blobs.metadata[key] = metadata


def test_s3_upload_is_ingested_with_stable_id_and_metadata() -> None:
    api = make_api()
    upload(api.container.blobs, "uploads/alice/cat facts.md", b"# Cats\n\nCats purr.", title="Cat facts")
    upload(api.container.blobs, "uploads/orphan.txt", b"no owner here")
    event = s3_event("uploads/alice/cat+facts.md", "uploads/orphan.txt")
    first = ingest_s3_event(api.container, event)
    assert [r["key"] for r in first["rejected"]] == ["uploads/orphan.txt"]
    (accepted,) = first["accepted"]
    assert accepted["documentId"] == stable_document_id("uploads/alice/cat facts.md")
    doc = json_body(api.call("GET", f"/documents/{accepted['documentId']}", principal="alice"))
    assert doc["title"] == "Cat facts" and doc["status"] == "READY"
    assert doc["source"] == "s3://docs/uploads/alice/cat facts.md"
    again = ingest_s3_event(api.container, event)
    assert again["accepted"][0]["documentId"] == accepted["documentId"]
    assert len(json_body(api.call("GET", "/documents", principal="alice"))["items"]) == 1


def test_the_owner_comes_only_from_the_key_never_from_object_metadata() -> None:
    api = make_api()
    # alice may write uploads/alice/…; metadata claiming "mallory" must not file it under mallory
    upload(api.container.blobs, "uploads/alice/plan.txt", b"The plan is secret.", owner="mallory")
    upload(api.container.blobs, "uploads/plan.txt", b"No owner segment.", owner="alice")
    result = ingest_s3_event(api.container, s3_event("uploads/alice/plan.txt", "uploads/plan.txt"))
    assert [r["key"] for r in result["accepted"]] == ["uploads/alice/plan.txt"]
    assert [r["key"] for r in result["rejected"]] == ["uploads/plan.txt"]
    assert len(json_body(api.call("GET", "/documents", principal="alice"))["items"]) == 1
    assert json_body(api.call("GET", "/documents", principal="mallory"))["items"] == []


def test_an_upload_is_ingested_where_it_lies_and_deleted_with_its_document() -> None:
    api = make_api()
    blobs = api.container.blobs
    key = "uploads/alice/01J/notes.md"
    upload(blobs, key, b"# Notes\n\nA direct upload.", title="=?UTF-8?B?w4l0w6k=?=", collection="summer")
    (accepted,) = ingest_s3_event(api.container, s3_event(key))["accepted"]
    doc = json_body(api.call("GET", f"/documents/{accepted['documentId']}", principal="alice"))
    assert (doc["title"], doc["collection"], doc["status"]) == ("Été", "summer", "READY")
    assert isinstance(blobs, FakeBlobStore) and blobs.keys() == [key]  # no copy under documents/
    assert api.call("DELETE", f"/documents/{doc['id']}", principal="alice")["statusCode"] == 204
    assert blobs.keys() == []


def test_an_object_over_the_upload_limit_is_rejected_without_reading_it() -> None:
    api = make_api({"MAX_UPLOAD_BYTES": "100"})
    event = s3_event("uploads/alice/big.txt")
    event["Records"][0]["s3"]["object"]["size"] = 101
    result = ingest_s3_event(api.container, event)  # the object is not even in the store
    assert result["accepted"] == [] and "MAX_UPLOAD_BYTES" in result["rejected"][0]["error"]


def test_an_event_from_another_bucket_is_rejected() -> None:
    api = make_api()
    settings = api.container.settings.model_copy(update={"documents_bucket": "docs"})
    container = Container(settings, **_parts(api.container))
    upload(container.blobs, "uploads/alice/a.txt", b"hello")
    result = ingest_s3_event(container, s3_event("uploads/alice/a.txt", bucket="someone-elses"))
    assert result["accepted"] == []
    assert "DOCUMENTS_BUCKET" in result["rejected"][0]["error"]


def _parts(container: Container) -> dict[str, Any]:
    names = ("documents", "conversations", "counters", "blobs", "embedder", "index", "launcher")
    return {name: getattr(container, name) for name in names}


def test_the_handlers_use_the_container_they_are_given() -> None:
    api = make_api()
    upload(api.container.blobs, "uploads/alice/a.txt", b"Hello from S3.")
    handler = s3_ingest_handler(lambda: api.container)
    assert handler(s3_event("uploads/alice/a.txt"), None)["accepted"]
    steps = ingest_step_handler(lambda: api.container)
    with pytest.raises(ValueError, match="unknown ingestion step"):
        steps({"step": "bake", "owner": "alice", "documentId": "d"}, None)


def test_the_s3_handler_needs_the_state_machine_on_aws() -> None:
    env = {
        "RAGCHAT_BACKEND": "aws",
        "DOCUMENTS_TABLE": "d",
        "CONVERSATIONS_TABLE": "c",
        "COUNTERS_TABLE": "n",
        "DOCUMENTS_BUCKET": "b",
        "RAGCHAT_VECTOR_INDEX": "sqlite",
    }
    handler = s3_ingest_handler(lambda: Container(load_settings(env)))
    with pytest.raises(ConfigError, match="STATE_MACHINE_ARN"):
        handler(s3_event("uploads/alice/a.txt"), None)
