"""Every Lambda handler, called with the sample events in ``events/`` (what ``sam local invoke``
would send), on moto: DynamoDB, S3 and the real state machine."""

from __future__ import annotations

import copy
import json
from typing import Any

from ragchat.domain.ids import stable_document_id
from ragchat.domain.models import DocumentStatus

from tests.integration.moto_stack import BUCKET, Stack, load_event

SUB = load_event("notes_post.json")["requestContext"]["authorizer"]["claims"]["sub"]


def body(response: dict[str, Any]) -> Any:
    return json.loads(response["body"])


def as_user(event: dict[str, Any], sub: str | None) -> dict[str, Any]:
    event = copy.deepcopy(event)
    if sub is None:
        event["requestContext"].pop("authorizer", None)
    else:
        event["requestContext"]["authorizer"]["claims"]["sub"] = sub
    return event


def add_sample_note(stack: Stack) -> str:
    response = stack.handler("notes_api")(load_event("notes_post.json"), None)
    assert response["statusCode"] == 202, response
    created = body(response)
    assert created["status"] == "PENDING"
    (execution,) = stack.wait_for_all(1)
    assert execution["status"] == "SUCCEEDED", execution
    document_id: str = created["documentId"]
    return document_id


def test_post_note_is_ingested_by_the_state_machine_and_listed(stack: Stack) -> None:
    document_id = add_sample_note(stack)

    response = stack.handler("notes_api")(load_event("documents_list.json"), None)
    assert response["statusCode"] == 200
    (doc,) = body(response)["items"]
    assert doc["id"] == document_id
    assert doc["status"] == "READY"
    assert doc["title"] == "Eiffel Tower facts"
    assert doc["collection"] == "travel"
    # another caller sees nothing of it
    other = stack.handler("notes_api")(as_user(load_event("documents_list.json"), "mallory"), None)
    assert other["statusCode"] == 200
    assert body(other)["items"] == []


def test_ask_answers_from_the_ingested_note_with_citations(stack: Stack) -> None:
    document_id = add_sample_note(stack)

    response = stack.handler("notes_api")(load_event("ask_get.json"), None)
    assert response["statusCode"] == 200, response
    answer = body(response)
    assert answer["guardUsed"] is False
    assert "330" in answer["answer"]
    assert answer["sources"] and all(s["id"].startswith(document_id) for s in answer["sources"])


def test_a_conversation_is_created_and_answers_a_message(stack: Stack) -> None:
    document_id = add_sample_note(stack)
    chat = stack.handler("chat_api")

    created = chat(load_event("conversation_create.json"), None)
    assert created["statusCode"] == 201, created
    conversation_id = body(created)["id"]

    event = load_event("message_post.json")
    event["pathParameters"]["id"] = conversation_id
    event["path"] = f"/chat/conversations/{conversation_id}/messages"
    reply = chat(event, None)
    assert reply["statusCode"] == 200, reply
    message = body(reply)
    assert message["role"] == "assistant"
    assert "330" in message["content"]
    assert message["sources"] and message["sources"][0]["id"].startswith(document_id)
    headers = {k.lower(): v for k, v in (reply.get("headers") or {}).items()}
    headers.update({k.lower(): v[-1] for k, v in (reply.get("multiValueHeaders") or {}).items()})
    assert headers["x-source-count"] == str(len(message["sources"]))
    assert headers["x-model-used"]

    # the same client messageId again returns the first answer and stores nothing new
    again = chat(event, None)
    assert body(again)["id"] == message["id"]
    history = stack.container.conversations.list_messages(SUB, conversation_id).items
    assert [m.role for m in history] == ["user", "assistant"]


def test_health_is_open_and_everything_else_needs_a_principal(stack: Stack) -> None:
    health = stack.handler("web_ui")(as_user(load_event("health_get.json"), None), None)
    assert health["statusCode"] == 200

    for area, name in (
        ("notes_api", "documents_list.json"),
        ("notes_api", "notes_post.json"),
        ("chat_api", "conversation_create.json"),
    ):
        response = stack.handler(area)(as_user(load_event(name), None), None)
        assert response["statusCode"] == 401, (name, response)
        assert "error" in body(response)
    assert stack.executions() == []


def test_a_machine_client_adds_a_note_with_its_api_key_and_only_that_key_sees_it(stack: Stack) -> None:
    event = load_event("machine_notes_post.json")
    key_id = event["requestContext"]["identity"]["apiKeyId"]
    created = stack.handler("notes_api")(event, None)
    assert created["statusCode"] == 202, created
    (execution,) = stack.wait_for_all(1)
    assert execution["status"] == "SUCCEEDED", execution

    doc = stack.container.documents.get_document(f"apikey:{key_id}", body(created)["documentId"])
    assert doc is not None and doc.title == "Nightly export"
    # the Cognito user of the sample events sees none of it
    listed = stack.handler("notes_api")(load_event("documents_list.json"), None)
    assert body(listed)["items"] == []


def s3_event(key: str) -> dict[str, Any]:
    event = load_event("s3_upload_put.json")
    record = event["Records"][0]["s3"]
    record["bucket"]["name"] = BUCKET
    record["bucket"]["arn"] = f"arn:aws:s3:::{BUCKET}"
    record["object"]["key"] = key
    return event


def test_an_s3_upload_is_ingested_and_a_reupload_replaces_it(stack: Stack) -> None:
    key = load_event("s3_upload_put.json")["Records"][0]["s3"]["object"]["key"]
    assert key.startswith(f"uploads/{SUB}/")
    handler = stack.handler("s3_ingest")

    stack.s3.put_object(
        Bucket=BUCKET,
        Key=key,
        Body=b"# Eiffel Tower\n\nThe tower is 330 metres tall.\n",
        Metadata={"title": "The Eiffel Tower", "collection": "travel"},
    )
    result = handler(s3_event(key), None)
    (accepted,) = result["accepted"]
    assert accepted["documentId"] == stable_document_id(key)
    (first,) = stack.wait_for_all(1)
    assert first["status"] == "SUCCEEDED", first

    doc = stack.container.documents.get_document(SUB, stable_document_id(key))
    assert doc is not None
    assert (doc.status, doc.title, doc.collection) == (DocumentStatus.READY, "The Eiffel Tower", "travel")
    assert doc.source == f"s3://{BUCKET}/{key}"

    stack.s3.put_object(
        Bucket=BUCKET,
        Key=key,
        Body=b"# Eiffel Tower\n\nRepainted every seven years with 60 tonnes of paint.\n",
        Metadata={"title": "The Eiffel Tower (v2)", "collection": "travel"},
    )
    again = handler(s3_event(key), None)
    assert again["accepted"][0]["documentId"] == doc.id
    executions = stack.wait_for_all(2)
    assert [e["status"] for e in executions] == ["SUCCEEDED", "SUCCEEDED"]

    (only,) = stack.container.documents.list_documents(SUB).items
    assert only.id == doc.id and only.title == "The Eiffel Tower (v2)" and only.status == DocumentStatus.READY
    texts = " ".join(n.text for n in stack.container.documents.list_notes(SUB, document_id=doc.id).items)
    assert "Repainted" in texts and "330" not in texts


def test_an_upload_without_an_owner_is_rejected_not_dropped_silently(stack: Stack) -> None:
    stack.s3.put_object(Bucket=BUCKET, Key="uploads/orphan.txt", Body=b"no owner here")
    result = stack.handler("s3_ingest")(s3_event("uploads/orphan.txt"), None)
    assert result["accepted"] == []
    assert result["rejected"][0]["key"] == "uploads/orphan.txt"
    assert "owner" in result["rejected"][0]["error"]
    assert stack.executions() == []


def test_a_word_document_dropped_in_s3_is_read_by_the_cloud_pipeline(stack: Stack) -> None:
    """Issue 45 items 2 and 5: a .docx goes through the S3 trigger and the state machine's split
    Lambda like any upload; its headings and table are kept, and its progress counts every chunk."""
    from tests.office_files import sample_docx

    key = f"uploads/{SUB}/office-hours.docx"
    stack.s3.put_object(Bucket=BUCKET, Key=key, Body=sample_docx())
    (accepted,) = stack.handler("s3_ingest")(s3_event(key), None)["accepted"]
    (execution,) = stack.wait_for_all(1)
    assert execution["status"] == "SUCCEEDED", execution
    doc = stack.container.documents.get_document(SUB, accepted["documentId"])
    assert doc is not None and doc.status == DocumentStatus.READY, doc
    assert doc.chunks_total == doc.chunk_count and doc.chunks_done == doc.chunk_count  # counted in DynamoDB
    texts = " ".join(n.text for n in stack.container.documents.list_notes(SUB, document_id=doc.id).items)
    assert "# Office hours" in texts and "| Saturday | closed |" in texts
