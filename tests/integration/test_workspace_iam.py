"""The workspace calls (issue 32) against the deployed roles (the IAM harness, tests/aws_contracts):
each function that will make them is allowed every call it makes, and the chat functions, which
only read memberships, cannot change them (least privilege).

- NotesApiFunction (the /workspaces routes, POST /uploads): every ``WorkspaceStore`` call, and
  ``cognito-idp:ListUsers`` on the user pool to resolve a member's e-mail or sub;
- ChatApiFunction, ChatStreamFunction (questions search every workspace of the caller): the reads;
- S3IngestFunction (the uploader must be an editor when the file lands): ``membership``
  (exercised through the real trigger in test_workspace_uploads_s3.py).
"""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from ragchat.adapters.aws.cognito import CognitoUserDirectory
from ragchat.adapters.aws.dynamodb import DynamoWorkspaceStore
from ragchat.domain.workspaces import Membership, Role, Workspace

from tests.aws_contracts.iam import acting_as
from tests.integration.moto_stack import REGION, TABLES, USER_POOL, Stack


@pytest.fixture
def harness(stack: Stack) -> Stack:
    if stack.iam is None:
        pytest.skip("no .venv-sam (run `make validate` once)")
    return stack


def _store() -> DynamoWorkspaceStore:
    """A fresh client (built inside the stack, so the harness checks its calls)."""
    return DynamoWorkspaceStore(TABLES["documents"], boto3.client("dynamodb", region_name=REGION))


def _actions(stack: Stack, principal: str) -> set[str]:
    assert stack.iam is not None
    return {r.action for who, r in stack.iam.checked if who == principal}


def test_the_notes_function_may_make_every_workspace_call(harness: Stack) -> None:
    store = _store()
    with acting_as("NotesApiFunction"):
        store.create_workspace(Workspace("ws_team", "Team"), "alice")
        store.put_member("ws_team", "bob", Role.EDITOR, keep_owner=True)
        store.rename_workspace("ws_team", "Handbook")
        assert store.membership("ws_team", "bob") == Membership("ws_team", "bob", Role.EDITOR, "Handbook")
        assert len(store.members("ws_team")) == 2 and len(store.memberships("bob")) == 1
        assert store.remove_member("ws_team", "bob", keep_owner=True) is True
        assert store.delete_workspace("ws_team") is True

    assert harness.iam is not None and harness.iam.denials == []
    assert {
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
    } <= _actions(harness, "NotesApiFunction")


def test_the_notes_function_may_look_members_up_in_the_user_pool(harness: Stack) -> None:
    client = boto3.client("cognito-idp", region_name=REGION)
    with Stubber(client) as stub, acting_as("NotesApiFunction"):
        stub.add_response("list_users", {"Users": []})
        assert CognitoUserDirectory(USER_POOL, client).resolve("bob@example.com") is None

    assert harness.iam is not None and harness.iam.denials == []
    ((principal, request),) = [(p, r) for p, r in harness.iam.checked if r.action.startswith("cognito-idp:")]
    assert (principal, request.action) == ("NotesApiFunction", "cognito-idp:ListUsers")
    assert request.resource == f"arn:aws:cognito-idp:{REGION}:123456789012:userpool/{USER_POOL}"


@pytest.mark.parametrize("function", ["ChatApiFunction", "ChatStreamFunction"])
def test_the_chat_functions_read_memberships_and_cannot_change_them(harness: Stack, function: str) -> None:
    store = _store()
    store.create_workspace(Workspace("ws_team", "Team"), "alice")  # set up by the test: unchecked

    with acting_as(function):
        assert [m.workspace_id for m in store.memberships("alice")] == ["ws_team"]
        assert store.membership("ws_team", "alice") is not None
        with pytest.raises(ClientError, match="AccessDenied"):
            store.put_member("ws_team", "mallory", Role.OWNER)

    assert harness.iam is not None
    # the transaction's first item is refused (the workspace's version Update), so nothing is written
    assert [str(d).split(" on ")[0] for d in harness.iam.denials] == [f"{function}: dynamodb:UpdateItem"]
    harness.iam.denials.clear()  # the denial is what this test wants
    assert store.membership("ws_team", "mallory") is None


def test_the_chat_functions_cannot_list_the_user_pool(harness: Stack) -> None:
    client = boto3.client("cognito-idp", region_name=REGION)
    with Stubber(client) as stub, acting_as("ChatApiFunction"):
        stub.add_response("list_users", {"Users": []})
        with pytest.raises(ClientError, match="AccessDenied"):
            CognitoUserDirectory(USER_POOL, client).resolve("bob@example.com")
    assert harness.iam is not None
    harness.iam.denials.clear()
