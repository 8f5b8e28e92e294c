"""What ``sam delete`` keeps, reached again (issue 44, item 4): a stack of the defaults (S3 Vectors)
ingests a user's documents and answers a conversation; ``sam delete`` removes everything the
template does not keep; a second stack, deployed with the kept user pool, tables, documents bucket
and vector bucket as its ``Existing*`` parameters (docs/deploy.md, "Reaching the kept data again"),
serves the same user (the same Cognito sub) their documents, bodies and conversations, answers from
the kept vectors without re-ingesting, and ingests new documents into the same data (a note, and a
presigned upload into the kept bucket through the new upload trigger).

Both stacks run as ``tests/integration/deployed_stack.py`` deploys them (every function under its own
role in the translated template, resolved for that stack's id and parameters) in one moto account.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from tests.aws_contracts.policy import Request
from tests.aws_contracts.roles import STACK_ID
from tests.integration import scenario
from tests.integration.deployed_stack import DeployedStack, Deployment, deployed_stack, stack_names
from tests.integration.moto_stack import COUNTERS, REGION, STEPS_FUNCTION, USER_POOL, load_event
from tests.integration.scenario import REEF, SUB, api, body, ingested

SECOND_STACK = (
    "arn:aws:cloudformation:{region}:123456789012:stack/ragchat-dev/9f8e7d6c-dddd-eeee-ffff-000033334444"
)
TOWER = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris. It is 330 metres tall and was "
    "completed in 1889."
)


def _kept(stack: DeployedStack) -> dict[str, str]:
    """The first stack's outputs a user passes to the next one (each output equals the functions'
    environment: test_template_stacks.py)."""
    env = stack.resources["NotesApiFunction"]["Properties"]["Environment"]["Variables"]
    return {
        "ExistingUserPoolId": env["COGNITO_USER_POOL_ID"],
        "ExistingDocumentsTableName": env["DOCUMENTS_TABLE"],
        "ExistingConversationsTableName": env["CONVERSATIONS_TABLE"],
        "ExistingDocumentsBucketName": env["DOCUMENTS_BUCKET"],
        "ExistingVectorBucketName": env["S3VECTORS_BUCKET"],
    }


def _sam_delete(stack: DeployedStack) -> None:
    """What CloudFormation removes on ``sam delete`` of the first stack (``STACK_ID``): every resource
    but those the template keeps (the user pool, the two data tables, the documents bucket, the vector
    bucket and its index)."""
    import boto3

    session = boto3.session.Session(region_name=REGION)
    session.client("stepfunctions").delete_state_machine(stateMachineArn=stack.state_machine_arn)
    session.client("lambda").delete_function(FunctionName=STEPS_FUNCTION)
    session.client("iam").delete_role(RoleName="ragchat-test-role")
    session.client("dynamodb").delete_table(TableName=COUNTERS)
    session.client("ssm").delete_parameter(Name=stack_names(STACK_ID.format(region=REGION))["answerability"])


def test_after_sam_delete_a_stack_with_the_kept_data_serves_the_same_user_all_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto import mock_aws

    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        # ---- the first stack: a note, an uploaded page, a conversation
        with deployed_stack(Deployment("first", {}), tmp_path / "one", monkeypatch, in_account=True) as one:
            notes = one.handler("notes_api")
            reef = ingested(one, notes(api("POST", "/notes", {"text": REEF, "title": "Reef"}), None))
            tower = ingested(one, notes(api("POST", "/notes", {"text": TOWER, "title": "Tower"}), None))
            chat = one.handler("chat_api")
            conversation = body(chat(api("POST", "/chat/conversations", {"title": "Trip"}), None))["id"]
            with one.streaming() as stream:
                status, _, raw = stream.send(
                    "POST", f"/chat/conversations/{conversation}/messages", SUB,
                    {"content": "When was the Eiffel Tower completed?", "messageId": "m-1"},
                )  # fmt: skip
            assert status == 200 and "1889" in raw.decode(), raw[:500]
            kept = _kept(one)
            vectors, first_machine = one.vectors, one.state_machine_arn
            assert vectors is not None and len(vectors.vectors) >= 2

        _sam_delete(one)

        # ---- the second stack, on the kept data
        second = Deployment("re-attached", kept)
        with deployed_stack(
            second,
            tmp_path / "two",
            monkeypatch,
            stack_id=SECOND_STACK,
            in_account=True,
            kept_vectors=vectors,
        ) as two:
            assert two.state_machine_arn != first_machine  # a new stack, not the old one
            assert two.user_pool == USER_POOL  # the kept pool: the same users, the same subs
            notes = two.handler("notes_api")
            listed = body(notes(api("GET", "/documents"), None))["items"]
            assert {d["id"]: d["status"] for d in listed} == {reef: "READY", tower: "READY"}
            whole = body(notes(api("GET", f"/documents/{tower}", include="body"), None))
            assert "330 metres" in _read(whole)  # the body, from the kept bucket
            chat = two.handler("chat_api")
            conversations = body(chat(api("GET", "/chat/conversations"), None))["items"]
            assert [c["id"] for c in conversations] == [conversation]
            messages = body(chat(api("GET", f"/chat/conversations/{conversation}"), None))["messages"]
            assert any(m["role"] == "assistant" and "1889" in m["content"] for m in messages), messages
            # search: the kept vectors answer, no re-ingestion
            asked = body(notes(api("GET", "/", text="How tall is the Eiffel Tower?"), None))
            assert "330" in asked["answer"], asked
            assert tower in {s.get("documentId") for s in asked["sources"]}, asked["sources"]
            # and the new stack ingests into the same data
            canal = "The Canal du Midi links the Garonne to the Mediterranean Sea."
            added = ingested(two, notes(api("POST", "/notes", {"text": canal, "title": "Canal"}), None))
            assert len(body(notes(api("GET", "/documents"), None))["items"]) == 3
            asked = body(notes(api("GET", "/", text="What does the Canal du Midi link?"), None))
            assert added in {s.get("documentId") for s in asked["sources"]}, asked
            # a direct upload into the kept bucket, ingested by the new stack's upload trigger
            ticket = body(notes(api("POST", "/uploads", {"filename": "locks.md", "title": "Locks"}), None))
            # S3 authorizes the presigned POST as the role that signed it: the new notes function's
            bucket = kept["ExistingDocumentsBucketName"]
            assert two.iam is not None
            two.iam.check(
                two.functions["notes_api"],
                Request("s3:PutObject", f"arn:aws:s3:::{bucket}/{ticket['key']}", {}),
            )
            posted = requests.post(
                ticket["url"], data=ticket["fields"], timeout=30,
                files={"file": ("locks.md", b"# Locks\n\nThe lock keepers open the gates at dawn.\n")},
            )  # fmt: skip
            assert posted.status_code in (200, 201, 204), posted.text
            trigger = load_event("s3_upload_put.json")
            trigger["Records"][0]["s3"]["bucket"]["name"] = bucket
            trigger["Records"][0]["s3"]["object"]["key"] = ticket["key"]
            assert len(two.handler("s3_ingest")(trigger, None)["accepted"]) == 1
            scenario.settle(two)
            got = body(notes(api("GET", f"/documents/{ticket['documentId']}"), None))
            assert got["status"] == "READY", got


def _read(document: dict[str, Any]) -> str:
    return str(document.get("body") or requests.get(document["bodyUrl"], timeout=30).text)
