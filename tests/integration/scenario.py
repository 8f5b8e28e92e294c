"""What a team's users do on a deployed stack, end to end, through the real handlers: the recorded
run the IAM mutation test evaluates (``tests/integration/test_iam_mutations.py``).

Each step asserts what the user sees (status, body, the document READY or FAILED, the answer and
its source); the stack's IAM harness checks every AWS call behind it against the role of the
function or state machine that makes it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import requests

from tests.aws_contracts.policy import Request
from tests.integration.deployed_stack import DeployedStack
from tests.integration.moto_stack import BUCKET, load_event

SUB = load_event("notes_post.json")["requestContext"]["authorizer"]["claims"]["sub"]
TOWER = (  # an HTML page: its extracted text is kept (extracted/) and read by ?include=body
    "<html><head><title>The Eiffel Tower</title></head><body><h1>The Eiffel Tower</h1>"
    "<p>The Eiffel Tower is a wrought-iron lattice tower in Paris. "
    "It is 330 metres tall and was completed in 1889 for the World's Fair.</p></body></html>"
)
REEF = "The Great Barrier Reef is the largest coral reef system, off the coast of Queensland in Australia."


def api(method: str, path: str, payload: Any = None, **query: str) -> dict[str, Any]:
    event = copy.deepcopy(load_event("notes_post.json"))
    resource = path
    event.update(
        resource=resource,
        path=path,
        httpMethod=method,
        body=json.dumps(payload) if payload is not None else None,
        queryStringParameters=query or None,
        multiValueQueryStringParameters={k: [v] for k, v in query.items()} or None,
        pathParameters=None,
    )
    event["requestContext"].update(resourcePath=resource, httpMethod=method, path=f"/dev{path}")
    return event


def body(response: dict[str, Any]) -> Any:
    return json.loads(response["body"]) if response.get("body") else None


def ingested(stack: DeployedStack, response: dict[str, Any], status: str = "READY") -> str:
    assert response["statusCode"] == 202, response
    document_id = str(body(response)["documentId"])
    settle(stack)
    got = body(stack.handler("notes_api")(api("GET", f"/documents/{document_id}"), None))
    assert got["status"] == status, got
    return document_id


def settle(stack: DeployedStack) -> None:
    """Wait until every execution started so far has closed."""
    for execution in stack.executions():
        stack.wait_for(execution["executionArn"], timeout_s=300, poll_s=0.25)


def long_text() -> str:
    """Just over 40 chunks of ``CHUNK_SIZE=200`` (the steps function's in ``deployed_stack``)."""
    return "\n\n".join(
        f"Paragraph {i} about lighthouses, tides and harbour {i % 7} keepers." for i in range(140)
    )


FASTNET = [("Fastnet lighthouse", 0.05), ("The Fastnet lighthouse opens to visitors at ten.", 0.12)]


def picture(stack: DeployedStack) -> str:
    """A PNG uploaded raw: read by Amazon Textract in the split step (moto answers ``FASTNET``'s
    lines); READY, its text read by OCR."""
    import base64

    from moto.textract.models import TextractBackend

    from tests.images import png_header, textract_detected

    upload = api("POST", "/documents", filename="fastnet.png", title="Fastnet")
    upload["body"] = base64.b64encode(png_header(1700, 2200)).decode()
    upload["isBase64Encoded"] = True
    upload["headers"] = {**upload["headers"], "Content-Type": "image/png"}
    TextractBackend.BLOCKS = textract_detected(FASTNET)["Blocks"]
    try:
        document = ingested(stack, stack.handler("notes_api")(upload, None))
    finally:
        TextractBackend.BLOCKS = []
    got = body(stack.handler("notes_api")(api("GET", f"/documents/{document}"), None))
    assert got["textFrom"] == "ocr", got
    return document


def run(stack: DeployedStack, *, distributed: bool = True) -> dict[str, Any]:
    """Every route family once; returns what the steps saw (for the tests' own assertions).
    ``distributed``: also a note long enough for the Distributed Map."""
    notes = stack.handler("notes_api")
    seen: dict[str, Any] = {}
    steps = stack.containers["IngestStepsFunction"].ingest_steps
    steps.batch_size = 1  # one chunk a batch: a long note takes the Distributed Map (> 40 batches)

    # first, a file dropped under uploads/ without a grant (aws s3 cp), ingested where it lies: the
    # upload trigger is the first to meet the user's storage ledger and counts what they hold
    # (a Query of the documents table's owner index)
    dropped = f"uploads/{SUB}/lock-keepers.md"
    lock = b"# Lock keepers\n\nThe lock keepers of the canal open the gates at dawn.\n"
    stack.s3.put_object(Bucket=BUCKET, Key=dropped, Body=lock, ContentType="text/markdown")
    trigger = load_event("s3_upload_put.json")
    trigger["Records"][0]["s3"]["bucket"]["name"] = BUCKET
    trigger["Records"][0]["s3"]["object"]["key"] = dropped
    landed = stack.handler("s3_ingest")(trigger, None)
    assert len(landed["accepted"]) == 1, landed
    settle(stack)
    kept = body(notes(api("GET", f"/documents/{landed['accepted'][0]['documentId']}"), None))
    assert kept["status"] == "READY", kept

    # a note, an uploaded file (raw body), a long note (Distributed Map)
    seen["note"] = ingested(stack, notes(api("POST", "/notes", {"text": REEF, "title": "Reef"}), None))
    upload = api("POST", "/documents", filename="tower.html", title="Tower")
    upload["body"] = TOWER
    upload["headers"] = {**upload["headers"], "Content-Type": "text/html"}
    seen["tower"] = ingested(stack, notes(upload, None))
    seen["picture"] = picture(stack)
    if distributed:  # the state machine's role is the same in every deployment: once is enough
        seen["long"] = ingested(
            stack, notes(api("POST", "/notes", {"text": long_text(), "title": "Harbours"}), None)
        )
    # a note whose embedding is refused: the run fails, the document is FAILED
    stack.bedrock.refuse = "UNEMBEDDABLE"
    failing = {"text": REEF.replace("coral reef", "coral reef UNEMBEDDABLE"), "title": "Broken"}
    seen["failed"] = ingested(stack, notes(api("POST", "/notes", failing), None), status="FAILED")
    stack.bedrock.refuse = None

    # a direct upload: presigned POST, the browser's upload to S3, the S3 trigger
    ticket = notes(api("POST", "/uploads", {"filename": "canal.md", "title": "Canal"}), None)
    assert ticket["statusCode"] == 201, ticket
    form = body(ticket)
    text = b"# Canal du Midi\n\nThe Canal du Midi links the Garonne to the Mediterranean Sea.\n"
    # S3 authorizes a presigned POST as the role that signed it (the notes function's)
    signed = Request("s3:PutObject", f"arn:aws:s3:::{BUCKET}/{form['key']}", {})
    assert stack.iam is not None
    stack.iam.check(stack.functions["notes_api"], signed)
    posted = requests.post(form["url"], data=form["fields"], files={"file": ("canal.md", text)}, timeout=30)
    assert posted.status_code in (200, 201, 204), posted.text
    trigger = load_event("s3_upload_put.json")
    trigger["Records"][0]["s3"]["bucket"]["name"] = BUCKET
    trigger["Records"][0]["s3"]["object"]["key"] = form["key"]
    stack.handler("s3_ingest")(trigger, None)
    settle(stack)
    canal = body(notes(api("GET", f"/documents/{form['documentId']}"), None))
    assert canal["status"] == "READY", canal
    seen["canal"] = form["documentId"]
    # S3 delivers the same event twice: the object is gone (claimed, moved), the replay is refused
    replay = stack.handler("s3_ingest")(trigger, None)
    assert replay["accepted"] == [] and replay["rejected"], replay
    # a one-shot question
    asked = notes(api("GET", "/", text="How tall is the Eiffel Tower?"), None)
    assert asked["statusCode"] == 200, asked
    seen["ask"] = body(asked)
    assert "330" in seen["ask"]["answer"], seen["ask"]

    # a conversation: created by the chat function, a turn streamed by chat_stream, edited (answered
    # again) by the chat function
    chat = stack.handler("chat_api")
    created = chat(api("POST", "/chat/conversations", {"title": "Trip"}), None)
    assert created["statusCode"] == 201, created
    conversation = body(created)["id"]
    with stack.streaming() as stream:
        status, headers, raw = stream.send(
            "POST",
            f"/chat/conversations/{conversation}/messages",
            SUB,
            {"content": "When was the Eiffel Tower completed?", "messageId": "m-1"},
            accept="text/event-stream",
        )
    assert status == 200 and headers["content-type"].startswith("text/event-stream"), raw[:500]
    seen["streamed"] = raw.decode()
    assert "1889" in seen["streamed"], seen["streamed"][:2000]
    stored = body(chat(api("GET", f"/chat/conversations/{conversation}"), None))
    user_message = next(m for m in stored["messages"] if m["role"] == "user")
    edited = chat(
        api(
            "PUT",
            f"/chat/conversations/{conversation}/messages/{user_message['id']}",
            {"content": "How tall is the Eiffel Tower?"},
        ),
        None,
    )
    assert edited["statusCode"] == 200, edited
    seen["edited"] = body(edited)
    # the conversation list (the conversations table's owner index)
    listed = body(chat(api("GET", "/chat/conversations"), None))["items"]
    assert [c["id"] for c in listed] == [conversation], listed
    # questions the notes can't answer: each chat function's refusal looks at the newest documents
    # for ones still being indexed (the documents table's owner index)
    off_topic = "What is the airspeed velocity of an unladen swallow?"
    stored = body(chat(api("GET", f"/chat/conversations/{conversation}"), None))
    asked_last = [m for m in stored["messages"] if m["role"] == "user"][-1]  # the edit's new message
    refused = chat(
        api("PUT", f"/chat/conversations/{conversation}/messages/{asked_last['id']}", {"content": off_topic}),
        None,
    )
    assert refused["statusCode"] == 200 and body(refused)["guardUsed"] is True, refused
    with stack.streaming() as stream:
        status, _, raw = stream.send(
            "POST", f"/chat/conversations/{conversation}/messages", SUB,
            {"content": off_topic, "messageId": "m-2"},
        )  # fmt: skip
    assert status == 200 and json.loads(raw)["guardUsed"] is True, raw[:2000]

    health = stack.handler("web_ui")(load_event("health_get.json"), None)
    assert health["statusCode"] == 200, health

    # a document read whole, disabled, deleted; a note deleted
    whole = notes(api("GET", f"/documents/{seen['tower']}", include="body"), None)
    assert whole["statusCode"] == 200 and "bodyUrl" in body(whole), whole
    # on S3 the text comes as ``bodyUrl``, a presigned GET of the stored body (read inside moto)
    assert "330 metres" in requests.get(body(whole)["bodyUrl"], timeout=30).text
    patched = notes(api("PATCH", f"/documents/{seen['canal']}", {"enabled": False}), None)
    assert patched["statusCode"] == 200 and body(patched)["enabled"] is False, patched
    listed = body(notes(api("GET", "/notes", documentId=seen["note"]), None))["items"]
    assert notes(api("DELETE", f"/notes/{listed[0]['id']}"), None)["statusCode"] == 204
    # a run that stopped midway leaves its work files (work/<id>/): deleting the document removes them
    leftover = f"work/{seen['tower']}/stopped-run/batch-00000.json"
    stack.s3.put_object(Bucket=BUCKET, Key=leftover, Body=b"[]")
    assert notes(api("DELETE", f"/documents/{seen['tower']}"), None)["statusCode"] == 204
    assert "Contents" not in stack.s3.list_objects_v2(Bucket=BUCKET, Prefix=f"work/{seen['tower']}/")
    assert notes(api("DELETE", f"/documents/{seen['failed']}"), None)["statusCode"] == 204
    assert notes(api("GET", f"/documents/{seen['tower']}"), None)["statusCode"] == 404

    # a shared workspace: a member added by e-mail (looked up in the user pool), a note in it, deleted
    stack.pool.add("bob", sub="5c1d9a2e-bob0-4b0b-9b0b-000000000b0b", email="bob@example.com")
    made = notes(api("POST", "/workspaces", {"name": "Team"}), None)
    assert made["statusCode"] == 201, made
    workspace = body(made)["id"]
    member = notes(api("PUT", f"/workspaces/{workspace}/members/bob@example.com", {"role": "editor"}), None)
    assert member["statusCode"] == 200, member
    shared = notes(
        api("POST", "/notes", {"text": "The team meets on Thursdays.", "workspace": workspace}), None
    )
    seen["shared"] = ingested(stack, shared)
    members = body(notes(api("GET", f"/workspaces/{workspace}/members"), None))["items"]
    assert len(members) == 2, members
    assert notes(api("DELETE", f"/workspaces/{workspace}"), None)["statusCode"] in (202, 204)
    return seen
