"""Cross-member attacks on shared workspaces (issue 32): zero leaks, through the real resolver.

Three users and two shared workspaces: alice owns *Handbook* (bob editor, carol viewer); bob owns
*Secret* (neither alice nor carol is in it). Every document, note, search, conversation and
workspace route is tried with ids that belong elsewhere, guessed ids, tampered cursors and
collection names: a non-member always gets 404 (never 403) and never a byte of another workspace;
a viewer's writes get 403; a removed member loses access on the very next request; conversations
stay private to their creator even in a shared workspace.

The suite runs once per *stack* in :data:`STACKS`: a context-manager factory that takes a scratch
folder and yields a :class:`tests.unit.api_support.Api` (the resolver over a container) wired with
one family of adapters — ``fake`` (the in-memory fakes), ``sqlite`` (the local SQLite stores,
workspace store and vector index) and ``dynamodb-opensearch`` (the cloud adapters on moto and the
OpenSearch fake cluster) — and tears it down after the test. To run the suite over another stack,
add one factory, e.g.::

    @contextmanager
    def _dynamodb_stack(tmp_path):
        with mock_aws():
            ...  # create the tables, the clients, FakeCluster().client()
            yield make_api(documents=DynamoDocumentStore(...), conversations=DynamoConversationStore(...),
                           workspace_store=DynamoWorkspaceStore(...), index=OpenSearchVectorIndex(..., 64))

    STACKS["dynamodb-opensearch"] = _dynamodb_stack

(the embedder stays ``FakeEmbedder(64)``: the index must have ``dimension=64``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.events import json_body
from tests.unit.api_support import Api, make_api

HANDBOOK_TEXT = "The office closes at six on Fridays and the kitchen is cleaned on Mondays."
SECRET_TEXT = "The launch code for the tangerine rocket is kept in the blue safe."
CAROL_TEXT = "Carol waters the ferns in the lobby every Tuesday morning."


@contextmanager
def _fake_stack(tmp_path: Path) -> Iterator[Api]:
    yield make_api()


@contextmanager
def _sqlite_stack(tmp_path: Path) -> Iterator[Api]:
    from ragchat.adapters.local.sqlite_store import (
        SqliteConversationStore,
        SqliteDatabase,
        SqliteDocumentStore,
        SqliteWorkspaceStore,
    )
    from ragchat.adapters.local.vector_index import LocalVectorIndex

    db = SqliteDatabase(tmp_path / "ragchat.db")
    try:
        yield make_api(
            documents=SqliteDocumentStore(db),
            conversations=SqliteConversationStore(db),
            workspace_store=SqliteWorkspaceStore(db),
            index=LocalVectorIndex(db, dimension=64),
        )
    finally:
        db.close()


@contextmanager
def _dynamodb_opensearch_stack(tmp_path: Path) -> Iterator[Api]:
    """The cloud adapters: DynamoDB documents, conversations, counters and workspaces on moto, S3
    bodies, the OpenSearch adapter over the fake cluster (its terms filter on owner)."""
    from tests.contract.cloud_api import cloud_api

    with cloud_api() as api:
        yield api


STACKS: dict[str, Callable[[Path], AbstractContextManager[Api]]] = {
    "fake": _fake_stack,
    "sqlite": _sqlite_stack,
    "dynamodb-opensearch": _dynamodb_opensearch_stack,
}


class Team:
    """The scenario, built through the API."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.handbook = self.ok("POST", "/workspaces", "alice", body={"name": "Handbook"})["id"]
        self.ok("PUT", f"/workspaces/{self.handbook}/members/bob", "alice", body={"role": "editor"})
        self.ok("PUT", f"/workspaces/{self.handbook}/members/carol", "alice", body={"role": "viewer"})
        self.secret = self.ok("POST", "/workspaces", "bob", body={"name": "Secret"})["id"]
        self.handbook_doc = self.note("alice", HANDBOOK_TEXT, self.handbook, "Office hours")
        self.secret_doc = self.note("bob", SECRET_TEXT, self.secret, "Launch", collection="launch")
        self.carol_doc = self.note("carol", CAROL_TEXT, None, "Ferns")
        notes = self.ok("GET", "/notes", "bob", query={"documentId": self.secret_doc})["items"]
        self.secret_note = notes[0]["id"]

    def call(self, method: str, path: str, user: str | None, **kw: Any) -> dict[str, Any]:
        return self.api.call(method, path, principal=user, **kw)

    def status(self, method: str, path: str, user: str | None, **kw: Any) -> int:
        return int(self.call(method, path, user, **kw)["statusCode"])

    def ok(self, method: str, path: str, user: str, **kw: Any) -> Any:
        res = self.call(method, path, user, **kw)
        assert res["statusCode"] < 300, (method, path, user, res.get("body"))
        return json_body(res) if res.get("body") else None

    def note(self, user: str, text: str, ws: str | None, title: str, **fields: Any) -> str:
        body = {"text": text, "title": title, **fields}
        if ws:
            body["workspace"] = ws
        return str(self.ok("POST", "/notes", user, body=body)["documentId"])

    def ask(self, user: str, text: str, **query: str) -> dict[str, Any]:
        return dict(self.ok("GET", "/", user, query={"text": text, **query}))


@pytest.fixture(params=sorted(STACKS))
def team(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Team]:
    with STACKS[request.param](tmp_path) as api:
        yield Team(api)


def _leaks(res: dict[str, Any], *secrets: str) -> list[str]:
    body = str(res.get("body") or "")
    return [s for s in secrets if s in body]


def test_members_share_and_see_where_answers_come_from(team: Team):
    body = team.ask("carol", "When does the office close on Fridays?")
    assert body["guardUsed"] is False
    assert {s["documentId"] for s in body["sources"]} == {team.handbook_doc}
    assert body["sources"][0]["workspace"] == {"id": team.handbook, "name": "Handbook"}
    doc = team.ok("GET", f"/documents/{team.handbook_doc}", "carol")
    assert doc["workspace"] == {"id": team.handbook, "name": "Handbook"}
    listed = team.ok("GET", "/documents", "bob", query={"workspace": team.handbook})["items"]
    assert [d["id"] for d in listed] == [team.handbook_doc]
    mine = team.ok("GET", "/documents", "carol")["items"]  # no workspace: the personal one
    assert [(d["id"], d["workspace"]["name"]) for d in mine] == [(team.carol_doc, "Personal")]
    roles = {w["name"]: w["role"] for w in team.ok("GET", "/workspaces", "carol")["items"]}
    assert roles == {"Personal": "owner", "Handbook": "viewer"}


def test_a_non_member_gets_404_on_every_route(team: Team):
    s, doc, note = team.secret, team.secret_doc, team.secret_note
    attempts: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", f"/documents/{doc}", {}),
        ("GET", f"/documents/{doc}", {"query": {"include": "body"}}),
        ("PATCH", f"/documents/{doc}", {"body": {"title": "mine"}}),
        ("PATCH", f"/documents/{doc}", {"body": {"enabled": False}}),
        ("DELETE", f"/documents/{doc}", {}),
        ("GET", "/notes", {"query": {"documentId": doc}}),
        ("GET", "/notes.json", {"query": {"documentId": doc}}),
        ("GET", "/notes", {"query": {"workspace": s}}),
        ("DELETE", f"/notes/{note}", {}),
        ("GET", "/documents", {"query": {"workspace": s}}),
        ("GET", "/documents", {"query": {"workspace": s, "collection": "launch"}}),
        ("POST", "/notes", {"body": {"text": "planted", "workspace": s}}),
        ("POST", "/documents", {"query": {"workspace": s, "filename": "x.txt"}, "raw_body": "planted"}),
        ("POST", "/uploads", {"body": {"filename": "x.txt", "workspace": s}}),
        ("GET", "/", {"query": {"text": "launch code", "workspace": s}}),
        ("POST", "/chat/conversations", {"body": {"workspace": s}}),
        ("POST", "/chat/conversations", {"body": {"documentId": doc}}),
        ("GET", "/notes", {"query": {"workspace": s, "cursor": "eyJ4IjoxfQ"}}),
        ("PATCH", f"/workspaces/{s}", {"body": {"name": "mine"}}),
        ("DELETE", f"/workspaces/{s}", {}),
        ("GET", f"/workspaces/{s}/members", {}),
        ("PUT", f"/workspaces/{s}/members/alice", {"body": {"role": "owner"}}),
        ("DELETE", f"/workspaces/{s}/members/bob", {}),
    ]
    for user in ("alice", "carol"):
        for method, path, kw in attempts:
            res = team.call(method, path, user, **kw)
            assert res["statusCode"] == 404, (user, method, path, res.get("body"))
            assert not _leaks(res, "tangerine", "Launch", "Secret"), (method, path)
    # nothing was changed or planted
    assert team.ok("GET", f"/documents/{doc}", "bob")["title"] == "Launch"
    assert len(team.ok("GET", "/documents", "bob", query={"workspace": s})["items"]) == 1
    assert [m["userId"] for m in team.ok("GET", f"/workspaces/{s}/members", "bob")["items"]] == ["bob"]


def test_guessed_and_tampered_ids_are_404(team: Team):
    for ws in ("ws_" + "0" * 26, team.secret + "x", team.secret.upper(), "bob", "ws_", "../" + team.secret):
        for path in (f"/workspaces/{ws}/members", "/documents"):
            query = {"workspace": ws} if path == "/documents" else None
            assert team.status("GET", path, "alice", query=query) == 404, (ws, path)
        assert team.status("POST", "/notes", "alice", body={"text": "x", "workspace": ws}) == 404
    # another user's personal workspace is their user id: not a workspace for anyone else
    assert team.status("GET", "/documents", "alice", query={"workspace": "carol"}) == 404
    assert team.status("GET", f"/documents/{team.carol_doc}", "alice") == 404
    assert team.status("GET", f"/documents/{team.carol_doc}", "bob") == 404


def test_search_never_returns_another_workspaces_notes(team: Team):
    for user in ("alice", "carol"):
        for query in ({}, {"collection": "launch"}, {"workspace": team.handbook}):
            body = team.ask(user, "What is the launch code for the tangerine rocket?", **query)
            assert all(s["documentId"] != team.secret_doc for s in body["sources"]), (user, query)
            assert "tangerine" not in body["answer"] and "blue safe" not in body["answer"]
    assert team.ask("bob", "What is the launch code for the tangerine rocket?")["sources"]
    listed = team.ok("GET", "/documents", "alice", query={"collection": "launch"})["items"]
    assert listed == []


def test_a_cursor_cannot_reach_another_workspace(team: Team):
    for i in range(3):
        team.note("bob", f"Secret memo number {i} about tangerines.", team.secret, f"memo {i}")
    page = team.ok("GET", "/documents", "bob", query={"workspace": team.secret, "limit": "2"})
    cursor = page["cursor"]
    assert cursor
    res = team.call("GET", "/documents", "carol", query={"cursor": cursor, "limit": "50"})
    assert res["statusCode"] in (200, 400)
    assert not _leaks(res, "tangerine", "memo", team.secret)
    res = team.call("GET", "/documents", "carol", query={"workspace": team.secret, "cursor": cursor})
    assert res["statusCode"] == 404


def test_a_viewer_reads_but_may_not_write(team: Team):
    h, doc = team.handbook, team.handbook_doc
    assert team.status("POST", "/notes", "carol", body={"text": "mine", "workspace": h}) == 403
    assert team.status("POST", "/uploads", "carol", body={"filename": "a.txt", "workspace": h}) == 403
    assert team.status("PATCH", f"/documents/{doc}", "carol", body={"enabled": False}) == 403
    assert team.status("DELETE", f"/documents/{doc}", "carol") == 403
    assert team.status("PATCH", f"/workspaces/{h}", "carol", body={"name": "x"}) == 403
    assert team.status("PUT", f"/workspaces/{h}/members/carol", "carol", body={"role": "owner"}) == 403
    assert team.status("DELETE", f"/workspaces/{h}", "bob") == 403  # an editor is no owner
    assert team.ok("GET", f"/documents/{doc}", "carol")["title"] == "Office hours"
    # an editor changes documents
    assert team.ok("PATCH", f"/documents/{doc}", "bob", body={"title": "Hours"})["title"] == "Hours"


def test_a_removed_member_loses_access_on_the_next_request(team: Team):
    h, doc = team.handbook, team.handbook_doc
    assert team.ask("carol", "When does the office close on Fridays?")["sources"]
    team.ok("DELETE", f"/workspaces/{h}/members/carol", "alice")
    assert team.status("GET", f"/documents/{doc}", "carol") == 404
    assert team.status("GET", "/documents", "carol", query={"workspace": h}) == 404
    assert team.status("GET", f"/workspaces/{h}/members", "carol") == 404
    body = team.ask("carol", "When does the office close on Fridays?")
    assert all(s["documentId"] != doc for s in body["sources"])
    assert [w["name"] for w in team.ok("GET", "/workspaces", "carol")["items"]] == ["Personal"]


def test_the_last_owner_cannot_leave_or_be_demoted(team: Team):
    h = team.handbook
    res = team.call("DELETE", f"/workspaces/{h}/members/alice", "alice")
    assert res["statusCode"] == 409 and "last owner" in json_body(res)["error"]
    res = team.call("PUT", f"/workspaces/{h}/members/alice", "alice", body={"role": "viewer"})
    assert res["statusCode"] == 409
    team.ok("DELETE", f"/workspaces/{h}/members/bob", "bob")  # a member may leave
    assert team.status("GET", f"/documents/{team.handbook_doc}", "bob") == 404


def test_conversations_stay_private_in_a_shared_workspace(team: Team):
    conv = team.ok("POST", "/chat/conversations", "bob", body={"workspace": team.handbook})
    assert conv["workspace"] == team.handbook
    answer = team.ok(
        "POST", f"/chat/conversations/{conv['id']}/messages", "bob",
        body={"content": "When does the office close on Fridays?"},
    )  # fmt: skip
    assert {s["documentId"] for s in answer["sources"]} == {team.handbook_doc}
    for user in ("alice", "carol"):
        # the link opened by another member: said as it is (issue 45), and nothing of it is shown
        opened = team.call("GET", f"/chat/conversations/{conv['id']}", user)
        assert (opened["statusCode"], json_body(opened)) == (403, {"error": OTHER_MEMBERS})
        assert team.status("GET", f"/chat/conversations/{conv['id']}/export", user) == 404
        posted = team.call("POST", f"/chat/conversations/{conv['id']}/messages", user, body={"content": "hi"})
        assert posted["statusCode"] == 404
        assert team.ok("GET", "/chat/conversations", user)["items"] == []
    # a conversation pinned to a workspace its user left answers 404 on the next turn
    team.ok("DELETE", f"/workspaces/{team.handbook}/members/bob", "alice")
    res = team.call(
        "POST", f"/chat/conversations/{conv['id']}/messages", "bob", body={"content": "And Mondays?"}
    )
    assert res["statusCode"] == 404
    assert len(team.ok("GET", f"/chat/conversations/{conv['id']}", "bob")["messages"]) == 2


OTHER_MEMBERS = (
    "That conversation belongs to another member of “Handbook”: conversations are private to the "
    "person who started them."
)
NOT_FOUND = {"error": "Conversation not found"}


def test_a_conversation_link_tells_a_member_whose_it_is_and_anyone_else_nothing(team: Team):
    pinned = team.ok("POST", "/chat/conversations", "bob", body={"workspace": team.handbook})["id"]
    unpinned = team.ok("POST", "/chat/conversations", "bob", body={})["id"]  # every workspace of bob's
    secret = team.ok("POST", "/chat/conversations", "bob", body={"workspace": team.secret})["id"]
    personal = team.ok("POST", "/chat/conversations", "carol", body={"workspace": "carol"})["id"]

    def opened(conv_id: str, user: str) -> tuple[int, Any]:
        res = team.call("GET", f"/chat/conversations/{conv_id}", user)
        return int(res["statusCode"]), json_body(res)

    for conv_id in (pinned, unpinned):  # carol and bob share Handbook
        assert opened(conv_id, "carol") == (403, {"error": OTHER_MEMBERS})
        assert opened(conv_id, "alice") == (403, {"error": OTHER_MEMBERS})
        assert opened(conv_id, "mallory") == (404, NOT_FOUND)  # in no workspace of bob's
    assert opened(secret, "alice") == (404, NOT_FOUND)  # Secret is bob's alone
    assert opened(personal, "bob") == (404, NOT_FOUND)  # a personal workspace has no other member
    assert opened("01NOPE0000000000000000000", "alice") == (404, NOT_FOUND)
    assert opened(pinned, "bob")[0] == 200
    team.ok("DELETE", f"/workspaces/{team.handbook}/members/carol", "alice")
    assert opened(pinned, "carol") == (404, NOT_FOUND)  # no longer a member: nothing


def test_an_unpinned_conversation_searches_every_workspace_of_its_user(team: Team):
    conv = team.ok("POST", "/chat/conversations", "carol", body={})
    path = f"/chat/conversations/{conv['id']}/messages"
    answer = team.ok("POST", path, "carol", body={"content": "When does the office close on Fridays?"})
    assert {s["workspace"]["name"] for s in answer["sources"]} == {"Handbook"}
    answer = team.ok("POST", path, "carol", body={"content": "What is the launch code for the rocket?"})
    assert all(s["documentId"] != team.secret_doc for s in answer["sources"])


def test_deleting_a_workspace_removes_its_documents_for_everyone(team: Team):
    conv = team.ok("POST", "/chat/conversations", "bob", body={})
    team.ok(
        "POST",
        f"/chat/conversations/{conv['id']}/messages",
        "bob",
        body={"content": "Office hours on Fridays?"},
    )
    assert team.status("DELETE", f"/workspaces/{team.handbook}", "alice") == 204
    assert team.status("GET", f"/documents/{team.handbook_doc}", "alice") == 404
    assert team.status("GET", f"/documents/{team.handbook_doc}", "bob") == 404
    assert all(
        s["documentId"] != team.handbook_doc
        for s in team.ask("bob", "When does the office close?")["sources"]
    )
    assert len(team.ok("GET", f"/chat/conversations/{conv['id']}", "bob")["messages"]) == 2


def test_creating_workspaces_is_rate_limited_per_user():
    api = make_api(
        {"ENABLE_RATE_LIMITING": "true", "RATE_LIMIT_NOTES_REQUESTS": "2", "RATE_LIMIT_IP_REQUESTS": "50"}
    )
    made = [api.call("POST", "/workspaces", body={"name": f"w{i}"})["statusCode"] for i in range(3)]
    assert made == [201, 201, 429]
    assert api.call("POST", "/workspaces", body={"name": "other"}, principal="bob")["statusCode"] == 201
