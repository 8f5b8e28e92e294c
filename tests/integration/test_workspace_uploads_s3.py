"""Uploads into a shared workspace on moto (issue 32): the grant's key names the workspace and the
uploader (``uploads/<workspace>/<uploader>/<upload id>/<file>``), the file is POSTed to S3 with the
presigned fields, and the real S3 trigger (acting as its function's role in the template) ingests
it only if the uploader is an editor or owner of the workspace at that moment. A grant issued before
the uploader was removed, or made a viewer, ingests nothing: the trigger rejects it with the reason
(reported, not raised: no retry, no DLQ) and removes the staged file."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from ragchat.domain.errors import Forbidden, NotFound
from ragchat.domain.ids import named_document_id
from ragchat.domain.uploads import upload_id_of_key
from ragchat.domain.workspaces import Role, Workspace

from tests.integration.moto_stack import BUCKET, TABLES, Stack
from tests.integration.test_direct_uploads_s3 import api_event, bucket_keys, s3_event

ALICE, BOB, CAROL, MALLORY = "alice-sub", "bob-sub", "carol-sub", "mallory-sub"


@pytest.fixture
def team(stack: Stack) -> Stack:
    """ws_team: alice owns it, bob edits, carol views; mallory is no member."""
    workspaces = stack.container.workspace_store
    assert workspaces is not None
    workspaces.create_workspace(Workspace("ws_team", "Team"), ALICE)
    workspaces.put_member("ws_team", BOB, Role.EDITOR)
    workspaces.put_member("ws_team", CAROL, Role.VIEWER)
    return stack


def _upload(stack: Stack, uploader: str, filename: str, text: bytes) -> Any:
    """A grant for ``uploader`` into ws_team, and the file POSTed to S3 with it (not ingested yet)."""
    ticket = stack.container.uploads.presign(uploader, filename=filename, workspace="ws_team")
    posted = requests.post(
        ticket.post.url, data=ticket.post.fields, files={"file": (filename, text)}, timeout=30
    )
    assert posted.status_code in (200, 201, 204), posted.text
    return ticket


def test_an_editors_upload_lands_in_the_workspace_for_every_member(team: Stack) -> None:
    ticket = _upload(team, BOB, "handbook.md", b"# Handbook\n\nThe office opens at nine.\n")

    assert ticket.key.startswith(f"uploads/ws_team/{BOB}/")
    assert ticket.document_id == named_document_id("ws_team", None, "handbook.md")
    result = team.handler("s3_ingest")(s3_event(ticket.key), None)

    accepted = {"key": ticket.key, "documentId": ticket.document_id, "status": "PENDING"}
    assert result == {"accepted": [accepted], "rejected": []}
    (execution,) = team.wait_for_all(1)
    assert execution["status"] == "SUCCEEDED", execution
    doc = team.container.documents.get_document("ws_team", ticket.document_id)
    assert doc is not None and doc.status == "READY" and doc.owner == "ws_team"
    assert team.container.documents.get_document(BOB, ticket.document_id) is None  # not bob's own
    assert bucket_keys(team) == [f"documents/ws_team/{ticket.document_id}/body.md"]


def test_a_grant_issued_before_the_uploader_was_removed_ingests_nothing(team: Stack) -> None:
    ticket = _upload(team, BOB, "secret.md", b"# Secret\n\nWritten after bob left.\n")
    team.container.workspace_store.remove_member("ws_team", BOB)

    result = team.handler("s3_ingest")(s3_event(ticket.key), None)

    assert result["accepted"] == []
    if team.iam is not None:  # the trigger read the membership as its own role, and was allowed to
        checked = {(who, r.action, r.resource.rsplit("/", 1)[-1]) for who, r in team.iam.checked}
        assert ("S3IngestFunction", "dynamodb:BatchGetItem", TABLES["documents"]) in checked
        assert team.iam.denials == []
    ((rejected),) = result["rejected"]
    assert rejected["key"] == ticket.key
    assert "not a member of workspace ws_team" in rejected["error"]
    assert team.executions() == []
    assert team.container.documents.get_document("ws_team", ticket.document_id) is None
    assert bucket_keys(team) == []  # the staged file is removed: nothing will ever ingest it

    # issue 45: bob's page asks what his upload became and hears why, as POST /documents tells him
    # now (404 "Workspace not found": he is no member), not "waiting…" until the grant expires
    said = team.handler("notes_api")(_get_upload(BOB, ticket.key), None)
    assert said["statusCode"] == 200, said
    assert json.loads(said["body"])["refused"] == {"status": 404, "message": "Workspace not found"}
    for other in (ALICE, CAROL, MALLORY):  # nobody else reads it
        assert team.handler("notes_api")(_get_upload(other, ticket.key), None)["statusCode"] == 404


def test_a_grant_issued_before_the_uploader_became_a_viewer_ingests_nothing(team: Stack) -> None:
    ticket = _upload(team, BOB, "draft.md", b"# Draft\n\nA draft.\n")
    team.container.workspace_store.put_member("ws_team", BOB, Role.VIEWER)

    result = team.handler("s3_ingest")(s3_event(ticket.key), None)

    assert result["accepted"] == [] and "a viewer of workspace ws_team" in result["rejected"][0]["error"]
    assert team.executions() == [] and bucket_keys(team) == []
    said = json.loads(team.handler("notes_api")(_get_upload(BOB, ticket.key), None)["body"])
    message = "Your role in this workspace (viewer) cannot change documents in it"  # POST /documents'
    assert said["refused"] == {"status": 403, "message": message}


def _get_upload(user: str, key: str) -> dict[str, Any]:
    """``GET /uploads/{uploadId}?workspace=ws_team`` as ``user`` (the upload id is the key's)."""
    upload_id = upload_id_of_key(key)
    event = api_event("GET", f"/uploads/{upload_id}")
    event["queryStringParameters"] = {"workspace": "ws_team"}
    event["multiValueQueryStringParameters"] = {"workspace": ["ws_team"]}
    event["requestContext"]["authorizer"]["claims"]["sub"] = user
    return event


def test_only_editors_and_owners_get_a_grant(team: Stack) -> None:
    with pytest.raises(NotFound):  # a non-member does not learn the workspace exists
        team.container.uploads.presign(MALLORY, filename="x.md", workspace="ws_team")
    with pytest.raises(NotFound):
        team.container.uploads.presign(MALLORY, filename="x.md", workspace="ws_nowhere")
    with pytest.raises(Forbidden):
        team.container.uploads.presign(CAROL, filename="x.md", workspace="ws_team")

    owner = team.container.uploads.presign(ALICE, filename="x.md", workspace="ws_team")
    personal = team.container.uploads.presign(MALLORY, filename="x.md")

    assert owner.key.startswith(f"uploads/ws_team/{ALICE}/")
    assert personal.key.startswith(f"uploads/{MALLORY}/") and personal.key.count("/") == 3  # as before


def test_an_object_dropped_under_a_workspace_in_a_strangers_name_is_rejected_where_it_lies(
    team: Stack,
) -> None:
    key = f"uploads/ws_team/{MALLORY}/notes.md"
    team.s3.put_object(Bucket=BUCKET, Key=key, Body=b"# Notes\n\nInjected.\n")

    result = team.handler("s3_ingest")(s3_event(key), None)

    assert result["accepted"] == [] and "not a member of workspace ws_team" in result["rejected"][0]["error"]
    assert team.executions() == []
    assert bucket_keys(team) == [key]  # not a grant's staging file: left where it was dropped


def test_old_layout_keys_are_still_their_owners_personal_uploads(team: Stack) -> None:
    key = f"uploads/{MALLORY}/notes.md"
    team.s3.put_object(Bucket=BUCKET, Key=key, Body=b"# Notes\n\nMine.\n")

    result = team.handler("s3_ingest")(s3_event(key), None)

    ((accepted),) = result["accepted"]
    (execution,) = team.wait_for_all(1)
    assert execution["status"] == "SUCCEEDED", execution
    assert team.container.documents.get_document(MALLORY, accepted["documentId"]) is not None


def test_a_replay_refused_after_the_uploader_became_a_viewer_leaves_what_the_upload_became(
    team: Stack,
) -> None:
    """A refusal before the grant is claimed never replaces what the upload already became: bob's
    file is taken in, bob is made a viewer, his form is POSTed again (S3 stores the replay) and the
    trigger refuses it; GET /uploads/{uploadId} still names his document, not the refusal."""
    text = b"# Rota\n\nThe night watch changes at two.\n"
    ticket = _upload(team, BOB, "rota.md", text)
    assert team.handler("s3_ingest")(s3_event(ticket.key), None)["accepted"]
    team.container.workspace_store.put_member("ws_team", BOB, Role.VIEWER)
    replayed = requests.post(
        ticket.post.url, data=ticket.post.fields, files={"file": ("rota.md", text)}, timeout=30
    )
    assert replayed.status_code in (200, 201, 204), replayed.text

    result = team.handler("s3_ingest")(s3_event(ticket.key), None)

    assert result["accepted"] == [] and "a viewer of workspace ws_team" in result["rejected"][0]["error"]
    said = json.loads(team.handler("notes_api")(_get_upload(BOB, ticket.key), None)["body"])
    assert "refused" not in said and said["documentId"] == ticket.document_id
