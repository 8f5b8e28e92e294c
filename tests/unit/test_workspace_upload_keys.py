"""Upload keys name the workspace and the uploader (issue 32), and the local receiver checks the
uploader at the moment the file arrives, as the S3 trigger does (tests/integration/
test_workspace_uploads_s3.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ragchat.adapters.local.files import FileBlobStore
from ragchat.domain.errors import Forbidden, ValidationError
from ragchat.domain.ids import named_document_id, stable_document_id
from ragchat.domain.uploads import UploadTarget, document_id_for_key, owner_of_key, upload_key, upload_target
from ragchat.domain.workspaces import Role, Workspace

from tests.unit.api_support import Api, make_api
from tests.unit.test_direct_uploads import body, post_file

ULID = "01J8ZC8W7Y3N0Q5R6S7T8V9WXY"


def test_a_personal_upload_keeps_the_layout_keys_had_before_workspaces() -> None:
    key = upload_key("alice", ULID, "Plan.md")

    assert key == f"uploads/alice/{ULID}/Plan.md"
    assert upload_key("alice", ULID, "Plan.md", workspace="alice") == key
    assert upload_target(key) == UploadTarget("alice", "alice") and not upload_target(key).shared
    assert document_id_for_key(key, "work") == named_document_id("alice", "work", "Plan.md")


def test_a_shared_upload_names_the_workspace_then_the_uploader() -> None:
    key = upload_key("bob", ULID, "Plan.md", workspace="ws_team")

    assert key == f"uploads/ws_team/bob/{ULID}/Plan.md"
    assert upload_target(key) == UploadTarget("ws_team", "bob") and upload_target(key).shared
    assert owner_of_key(key) == "ws_team"
    # the workspace's file: the same name uploaded by another member is the same document
    assert document_id_for_key(key, None) == named_document_id("ws_team", None, "Plan.md")
    assert document_id_for_key(
        upload_key("carol", ULID, "Plan.md", workspace="ws_team")
    ) == document_id_for_key(key)


def test_keys_dropped_in_the_bucket_are_read_the_same_way() -> None:
    assert upload_target("uploads/alice/notes.md") == UploadTarget("alice", "alice")
    assert upload_target("uploads/alice/sub/dir/notes.md") == UploadTarget("alice", "alice")
    assert upload_target("uploads/ws_team/bob/notes.md") == UploadTarget("ws_team", "bob")
    assert document_id_for_key("uploads/ws_team/bob/notes.md") == stable_document_id(
        "uploads/ws_team/bob/notes.md"
    )


@pytest.mark.parametrize(
    "key",
    ["uploads/notes.md", "uploads//x/notes.md", "uploads/ws_team/notes.md", "uploads/ws_team//notes.md",
     "uploads/ws_team/ws_other/notes.md", "other/alice/notes.md"],
)  # fmt: skip
def test_a_key_without_its_owner_or_uploader_is_refused(key: str) -> None:
    with pytest.raises(ValidationError):
        upload_target(key)


def test_only_a_shared_workspace_or_your_own_can_be_named() -> None:
    with pytest.raises(ValidationError):
        upload_key("alice", ULID, "x.md", workspace="bob")  # someone else's personal workspace
    with pytest.raises(ValidationError):
        upload_key("alice", ULID, "x.md", workspace="ws_a/b")
    with pytest.raises(Forbidden):
        upload_key("ws_fake", ULID, "x.md")  # a user id never looks like a workspace


# ------------------------------------------------------------------------------ the local receiver
@pytest.fixture
def team_api(tmp_path: Path) -> Iterator[Api]:
    yield from _team_api(tmp_path, {})


@pytest.fixture
def limited_team_api(tmp_path: Path) -> Iterator[Api]:
    """One document a day per user."""
    yield from _team_api(tmp_path, {"ENABLE_RATE_LIMITING": "true", "INGEST_DOCUMENTS_PER_DAY": "1"})


def _team_api(tmp_path: Path, env: dict[str, str]) -> Iterator[Api]:
    """The local API with uploads into ws_team (alice owns it, bob edits), over the DynamoDB
    workspace store on moto (any WorkspaceStore does: the contract suite holds them alike)."""
    import boto3
    from moto import mock_aws
    from ragchat.adapters.aws.dynamodb import DynamoWorkspaceStore
    from ragchat.adapters.aws.tables import create_tables

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(client, documents="docs", conversations="convs", counters="counters")
        workspaces = DynamoWorkspaceStore("docs", client)
        workspaces.create_workspace(Workspace("ws_team", "Team"), "alice")
        workspaces.put_member("ws_team", "bob", Role.EDITOR)
        blobs = FileBlobStore(tmp_path / "blobs")
        api = make_api(env, blobs=blobs, workspace_store=workspaces)
        blobs.clock = api.clock
        yield api


def _ticket(api: Api, uploader: str, filename: str = "memo.md") -> dict[str, Any]:
    ticket = api.container.uploads.presign(uploader, filename=filename, workspace="ws_team")
    url = "http://localhost:8000" + ticket.post.url  # what POST /uploads answers behind that Host
    return {"url": url, "fields": ticket.post.fields, "documentId": ticket.document_id}


def test_a_local_upload_into_a_shared_workspace_is_the_workspaces(team_api: Api) -> None:
    ticket = _ticket(team_api, "bob")

    response = post_file(team_api, ticket, b"# Memo\n\nShared.\n")

    assert response["statusCode"] == 201, response
    doc = team_api.container.documents.get_document("ws_team", ticket["documentId"])
    assert doc is not None and doc.owner == "ws_team"


def test_a_local_grant_outlived_by_its_membership_is_403_and_stays_unused(team_api: Api) -> None:
    ticket = _ticket(team_api, "bob")
    team_api.container.workspace_store.remove_member("ws_team", "bob")

    refused = post_file(team_api, ticket, b"# Memo\n\nAfter leaving.\n")

    assert refused["statusCode"] == 403
    assert "not a member of workspace ws_team" in body(refused)["error"]
    assert team_api.container.documents.get_document("ws_team", ticket["documentId"]) is None

    team_api.container.workspace_store.put_member("ws_team", "bob", Role.EDITOR)
    assert post_file(team_api, ticket, b"# Memo\n\nBack again.\n")["statusCode"] == 201


def test_daily_ceilings_count_the_uploader_not_the_shared_workspace(limited_team_api: Api) -> None:
    api = limited_team_api
    assert post_file(api, _ticket(api, "bob", "one.md"), b"# One\n\nFirst.\n")["statusCode"] == 201

    over = post_file(api, _ticket(api, "bob", "two.md"), b"# Two\n\nSecond.\n")
    others = post_file(api, _ticket(api, "alice", "three.md"), b"# Three\n\nThird.\n")

    assert over["statusCode"] == 429  # bob's one document today
    assert others["statusCode"] == 201  # alice's own allowance: the workspace is not charged
