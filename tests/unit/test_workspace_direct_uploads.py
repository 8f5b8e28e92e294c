"""Direct uploads into a shared workspace through the Lambda handler (issue 43 item 6): ``POST /uploads``
with ``workspace`` grants its editors and owners an upload (it answered 403 to everyone: the
workspace id was passed as the uploader), refuses viewers (403) and non-members (404), and a grant's
holder removed or made a viewer before the file lands gets nothing ingested (403 with the reason)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ragchat.adapters.local.files import FileBlobStore

from tests.unit.api_support import Api, make_api
from tests.unit.test_direct_uploads import body, post_file, presign

TEXT = b"# Handbook\n\nThe office opens at nine and the kitchen is cleaned on Mondays.\n"


@pytest.fixture
def team(tmp_path: Path) -> tuple[Api, str]:
    """ws Handbook: alice owns it, bob edits, carol views; dave is no member."""
    blobs = FileBlobStore(tmp_path / "blobs")
    api = make_api(blobs=blobs)
    blobs.clock = api.clock
    ws = body(api.call("POST", "/workspaces", body={"name": "Handbook"}, principal="alice"))["id"]
    for member, role in (("bob", "editor"), ("carol", "viewer")):
        put = api.call("PUT", f"/workspaces/{ws}/members/{member}", body={"role": role}, principal="alice")
        assert put["statusCode"] == 200, put
    return api, ws


@pytest.mark.parametrize("uploader", ["alice", "bob"])
def test_owners_and_editors_upload_into_the_workspace(team: tuple[Api, str], uploader: str) -> None:
    api, ws = team
    granted = presign(api, {"filename": "hours.md", "workspace": ws}, principal=uploader)
    assert granted["statusCode"] == 201, granted
    ticket = body(granted)
    assert ticket["key"].startswith(f"uploads/{ws}/{uploader}/")

    landed = post_file(api, ticket, TEXT)
    assert landed["statusCode"] == 201, landed

    for member in ("alice", "bob", "carol"):  # every member reads it in the workspace
        got = api.call("GET", f"/documents/{ticket['documentId']}", principal=member)
        assert got["statusCode"] == 200, (member, got)
        assert (body(got)["status"], body(got)["workspace"]["id"]) == ("READY", ws)
    mine = body(api.call("GET", "/documents", principal=uploader, query={"workspace": uploader}))
    assert mine["items"] == []  # not the uploader's personal document


def test_viewers_and_strangers_get_no_grant(team: tuple[Api, str]) -> None:
    api, ws = team
    viewer = presign(api, {"filename": "a.md", "workspace": ws}, principal="carol")
    assert viewer["statusCode"] == 403 and "viewer" in body(viewer)["error"]
    stranger = presign(api, {"filename": "a.md", "workspace": ws}, principal="dave")
    assert stranger["statusCode"] == 404


@pytest.mark.parametrize("change", ["removed", "demoted"])
def test_a_grant_held_by_a_removed_or_demoted_member_ingests_nothing(
    team: tuple[Api, str], change: str
) -> None:
    api, ws = team
    ticket = body(presign(api, {"filename": "late.md", "workspace": ws}, principal="bob"))
    if change == "removed":
        gone = api.call("DELETE", f"/workspaces/{ws}/members/bob", principal="alice")
    else:
        gone = api.call("PUT", f"/workspaces/{ws}/members/bob", body={"role": "viewer"}, principal="alice")
    assert gone["statusCode"] in (200, 204), gone

    landed = post_file(api, ticket, TEXT)

    assert landed["statusCode"] == 403, landed
    reason = "not a member of" if change == "removed" else "a viewer of"
    assert reason in body(landed)["error"]
    assert api.call("GET", f"/documents/{ticket['documentId']}", principal="alice")["statusCode"] == 404
    assert body(api.call("GET", "/documents", principal="alice", query={"workspace": ws}))["items"] == []

    # GET /uploads/{uploadId} (issue 45) tells bob why, as POST /documents tells him now (a removed
    # member: 404 "Workspace not found", still readable by him for his own upload; a viewer: 403)
    path = f"/uploads/{ticket['uploadId']}"
    said = api.call("GET", path, principal="bob", query={"workspace": ws})
    assert said["statusCode"] == 200, said
    headers = {"X-Filename": "late.md", "Content-Type": "text/markdown"}
    direct = api.call(
        "POST", "/documents", raw_body=TEXT, headers=headers, principal="bob", query={"workspace": ws}
    )
    assert body(said)["refused"] == {"status": direct["statusCode"], "message": body(direct)["error"]}
    assert direct["statusCode"] == (404 if change == "removed" else 403)
    for other in ("alice", "carol", "dave"):  # nobody else reads it
        assert api.call("GET", path, principal=other, query={"workspace": ws})["statusCode"] == 404
    elsewhere = api.call("GET", path, principal="bob", query={"workspace": "ws_nowhere"})
    assert elsewhere["statusCode"] == 404


def test_what_a_shared_workspace_upload_became_is_told_to_its_uploader_only(team: tuple[Api, str]) -> None:
    """GET /uploads/{uploadId} (issue 45): bob's copy of alice's file lands (the receiver, as the S3
    trigger would) and is said to him as the document it already was; alice, carol (members) and dave
    (no member) read nothing of bob's upload."""
    api, ws = team
    first = body(presign(api, {"filename": "hours.md", "workspace": ws, "title": "Hours"}, principal="alice"))
    assert post_file(api, first, TEXT)["statusCode"] == 201
    ticket = body(presign(api, {"filename": "hours again.md", "workspace": ws}, principal="bob"))
    path = f"/uploads/{ticket['uploadId']}"
    before = api.call("GET", path, principal="bob", query={"workspace": ws})
    assert before["statusCode"] == 404, before  # not landed yet
    assert post_file(api, ticket, TEXT)["statusCode"] == 200  # the receiver's own duplicate reply

    said = api.call("GET", path, principal="bob", query={"workspace": ws})
    assert said["statusCode"] == 200, said
    got = body(said)
    assert (got["documentId"], got["title"], got["duplicate"], got["otherDocument"]) == (
        first["documentId"],
        "Hours",
        True,
        True,
    )
    assert got["message"].startswith("Already there: “Hours”")
    for other in ("alice", "carol"):
        assert api.call("GET", path, principal=other, query={"workspace": ws})["statusCode"] == 404
    assert api.call("GET", path, principal="dave", query={"workspace": ws})["statusCode"] == 404
    assert api.call("GET", path, principal="bob")["statusCode"] == 404  # his personal workspace: not there
