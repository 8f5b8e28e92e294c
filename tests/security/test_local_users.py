"""Several users of one ``ragchat serve`` (issue 32): RAGCHAT_USERS_FILE maps names to token hashes;
each token signs its user in (their name is the principal), a team of three shares a workspace end
to end over HTTP on loopback, and a token nobody holds is refused."""

from __future__ import annotations

import hashlib
import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ragchat.local_server import LocalServer
from ragchat.serving.users import add_user, load_users, remove_user

from tests.unit.api_support import make_api


def test_add_user_prints_a_token_once_and_stores_only_its_hash(tmp_path: Path):
    path = tmp_path / "users.json"
    token = add_user(path, "ana")
    stored = json.loads(path.read_text())
    assert stored == {"ana": hashlib.sha256(token.encode()).hexdigest()}
    assert token not in path.read_text()
    assert path.stat().st_mode & 0o077 == 0
    again = add_user(path, "ana")  # a new token replaces the old one
    assert again != token and load_users(path)["ana"] == hashlib.sha256(again.encode()).hexdigest()
    assert remove_user(path, "ana") and load_users(path) == {}


def test_a_toml_users_file_is_read(tmp_path: Path):
    path = tmp_path / "users.toml"
    add_user(path, "ben")
    assert set(load_users(path)) == {"ben"}
    path.write_text('ben = "not a hash"\n')
    with pytest.raises(ValueError, match="ben"):
        load_users(path)


@pytest.mark.parametrize("name", ["ws_team", "", "a/b", "x" * 65])
def test_a_bad_user_name_is_refused(tmp_path: Path, name: str):
    from ragchat.domain.errors import ValidationError

    with pytest.raises(ValidationError):
        add_user(tmp_path / "users.json", name)


@pytest.fixture
def team(tmp_path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    path = tmp_path / "users.json"
    tokens = {name: add_user(path, name) for name in ("ana", "ben", "cy")}
    api = make_api({"RAGCHAT_USERS_FILE": str(path)})
    server = LocalServer(api.container, port=0)
    server.start()
    try:
        yield int(server.httpd.server_address[1]), tokens
    finally:
        server.stop()


def _call(port: int, token: str | None, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, json.loads(raw) if raw else None
    finally:
        conn.close()


def test_a_team_of_three_shares_a_workspace_through_the_local_server(team):
    port, tokens = team
    ana, ben, cy = tokens["ana"], tokens["ben"], tokens["cy"]
    status, ws = _call(port, ana, "POST", "/workspaces", {"name": "Handbook"})
    assert status == 201 and ws["role"] == "owner"
    assert _call(port, ana, "PUT", f"/workspaces/{ws['id']}/members/ben", {"role": "editor"})[0] == 200
    assert _call(port, ana, "PUT", f"/workspaces/{ws['id']}/members/cy", {"role": "viewer"})[0] == 200
    note = {"text": "The office closes at six on Fridays.", "title": "Hours", "workspace": ws["id"]}
    status, added = _call(port, ben, "POST", "/notes", note)
    assert status == 202
    status, answer = _call(port, cy, "GET", "/?text=When%20does%20the%20office%20close%20on%20Fridays%3F")
    assert status == 200 and answer["guardUsed"] is False
    assert answer["sources"][0]["workspace"] == {"id": ws["id"], "name": "Handbook"}
    members = _call(port, cy, "GET", f"/workspaces/{ws['id']}/members")[1]["items"]
    assert [(m["userId"], m["role"]) for m in members] == [
        ("ana", "owner"),
        ("ben", "editor"),
        ("cy", "viewer"),
    ]
    # each token is its own user: cy's personal documents are not ana's
    assert _call(port, cy, "POST", "/notes", {"text": "Cy's own note about ferns."})[0] == 202
    assert _call(port, ana, "GET", "/documents")[1]["items"] == []
    assert _call(port, cy, "GET", f"/documents/{added['documentId']}")[0] == 200


def test_an_unknown_token_is_refused(team):
    port, _ = team
    assert _call(port, "not-a-users-token", "GET", "/workspaces")[0] == 401
    assert _call(port, None, "GET", "/workspaces")[0] == 401


def test_a_member_must_be_a_user_of_the_file(team):
    """A misspelt name was added silently, keeping access for whoever is later given that name."""
    port, tokens = team
    ana = tokens["ana"]
    ws = _call(port, ana, "POST", "/workspaces", {"name": "Handbook"})[1]
    status, body = _call(port, ana, "PUT", f"/workspaces/{ws['id']}/members/bem", {"role": "viewer"})
    assert status == 404 and "No user 'bem'" in body["error"]
    assert _call(port, ana, "PUT", f"/workspaces/{ws['id']}/members/ben", {"role": "viewer"})[0] == 200
    members = _call(port, ana, "GET", f"/workspaces/{ws['id']}/members")[1]["items"]
    assert [m["userId"] for m in members] == ["ana", "ben"]


def _post_form(port: int, ticket: dict[str, Any], data: bytes) -> tuple[int, Any]:
    """The presigned form POST of ``ticket``'s file (no bearer token: the URL is the grant)."""
    from tests.unit.test_direct_uploads import multipart

    path = ticket["url"].split(f"127.0.0.1:{port}", 1)[1]
    ctype, raw = multipart(ticket["fields"], "hours.md", data)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", path, body=raw, headers={"Content-Type": ctype})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def test_editors_upload_directly_into_a_shared_workspace_over_http(team):
    """Issue 43: ``POST /uploads`` into a shared workspace answered 403 even to its owner; a grant
    held by a member made a viewer before the file lands ingests nothing."""
    port, tokens = team
    ana, ben, cy = tokens["ana"], tokens["ben"], tokens["cy"]
    ws = _call(port, ana, "POST", "/workspaces", {"name": "Handbook"})[1]["id"]
    assert _call(port, ana, "PUT", f"/workspaces/{ws}/members/ben", {"role": "editor"})[0] == 200
    assert _call(port, ana, "PUT", f"/workspaces/{ws}/members/cy", {"role": "viewer"})[0] == 200
    for name, uploader in (("ana.md", ana), ("ben.md", ben)):
        status, ticket = _call(port, uploader, "POST", "/uploads", {"filename": name, "workspace": ws})
        assert status == 201, ticket
        # each editor's own bytes: the same bytes twice in a workspace are one document (200, duplicate)
        text = f"# Hours\n\nThe office closes at six on Fridays, says {name}.\n".encode()
        assert _post_form(port, ticket, text)[0] == 201
        status, doc = _call(port, cy, "GET", f"/documents/{ticket['documentId']}")
        assert status == 200 and doc["workspace"]["id"] == ws

    status, refused = _call(port, cy, "POST", "/uploads", {"filename": "x.md", "workspace": ws})
    assert status == 403 and "viewer" in refused["error"]

    ticket = _call(port, ben, "POST", "/uploads", {"filename": "late.md", "workspace": ws})[1]
    assert _call(port, ana, "PUT", f"/workspaces/{ws}/members/ben", {"role": "viewer"})[0] == 200
    status, refused = _post_form(port, ticket, b"# Late\n\nWritten after ben became a viewer.\n")
    assert status == 403 and "a viewer of workspace" in refused["error"]
    assert _call(port, ana, "GET", f"/documents/{ticket['documentId']}")[0] == 404
