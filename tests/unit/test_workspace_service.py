"""Workspaces (issue 32): roles, the last owner, 404 for non-members and 403 for members whose role
is too low, deleting a workspace with its documents, access re-read on every call."""

from __future__ import annotations

import json

import pytest
from ragchat.domain.errors import Conflict, Forbidden, NotFound, ValidationError
from ragchat.domain.models import Document, Note, VectorRecord
from ragchat.domain.workspaces import Role
from ragchat.services.documents import DocumentService
from ragchat.services.workspaces import WorkspaceService

from tests.fakes import FakeBlobStore, FakeDocumentStore, FakeVectorIndex, FakeWorkspaceStore


@pytest.fixture
def env():
    docs, index, blobs = FakeDocumentStore(), FakeVectorIndex(dimension=4), FakeBlobStore()
    service = WorkspaceService(FakeWorkspaceStore(), docs, DocumentService(docs, index, blobs), blobs)
    return service, docs, index, blobs


def _doc(docs, index, blobs, owner: str, doc_id: str) -> None:
    key = f"documents/{owner}/{doc_id}/body.txt"
    blobs.put(key, b"hello")
    docs.create_document(Document(id=doc_id, owner=owner, title=doc_id, content_type="text/plain",
                                  source="api", body_key=key))  # fmt: skip
    docs.put_notes([Note(id=f"{doc_id}-00000", document_id=doc_id, chunk_index=0, text="t", owner=owner)])
    index.upsert([VectorRecord(f"{doc_id}-00000", [1, 0, 0, 0], "t", owner, doc_id, 0)])


def test_everyone_has_a_personal_workspace(env):
    service, *_ = env
    (personal,) = service.accessible("alice")
    assert (personal.id, personal.name, personal.role, personal.personal) == (
        "alice",
        "Personal",
        Role.OWNER,
        True,
    )
    assert service.readable("alice") == ("alice",)
    with pytest.raises(NotFound):
        service.require("bob", "alice")  # someone else's personal workspace does not exist for bob


def test_roles_decide_what_a_member_may_do(env):
    service, *_ = env
    team = service.create("alice", "  Team  handbook ")
    assert (team.name, team.role) == ("Team  handbook", Role.OWNER) and team.id.startswith("ws_")
    service.put_member("alice", team.id, "bob", "viewer")
    assert service.readable("bob") == ("bob", team.id)
    assert service.require("bob", team.id).role is Role.VIEWER
    with pytest.raises(Forbidden):
        service.require("bob", team.id, Role.EDITOR)
    with pytest.raises(Forbidden):
        service.rename("bob", team.id, "Mine now")
    with pytest.raises(NotFound):  # carol is no member: the workspace does not exist for her
        service.require("carol", team.id)
    with pytest.raises(NotFound):
        service.members("carol", team.id)
    with pytest.raises(NotFound):
        service.put_member("carol", team.id, "carol", "owner")
    with pytest.raises(NotFound):
        service.require("carol", "ws_guessed")


def test_removed_member_loses_access_at_once(env):
    service, *_ = env
    team = service.create("alice", "Team")
    service.put_member("alice", team.id, "bob", "editor")
    assert service.require("bob", team.id, Role.EDITOR).role is Role.EDITOR
    service.remove_member("alice", team.id, "bob")
    with pytest.raises(NotFound):
        service.require("bob", team.id)
    assert service.readable("bob") == ("bob",)


def test_the_last_owner_cannot_leave_or_be_demoted(env):
    service, *_ = env
    team = service.create("alice", "Team")
    service.put_member("alice", team.id, "bob", "editor")
    with pytest.raises(Conflict, match="last owner"):
        service.put_member("alice", team.id, "alice", "editor")
    with pytest.raises(Conflict, match="last owner"):
        service.remove_member("alice", team.id, "alice")
    service.put_member("alice", team.id, "bob", "owner")
    service.remove_member("alice", team.id, "alice")  # now alice may leave
    assert [(m.user_id, m.role) for m in service.members("bob", team.id)] == [("bob", Role.OWNER)]


def test_a_member_may_leave_but_not_remove_others(env):
    service, *_ = env
    team = service.create("alice", "Team")
    service.put_member("alice", team.id, "bob", "viewer")
    service.put_member("alice", team.id, "carol", "editor")
    with pytest.raises(Forbidden):
        service.remove_member("bob", team.id, "carol")
    service.remove_member("bob", team.id, "bob")
    assert service.readable("bob") == ("bob",)


def test_bad_input_is_a_clear_400(env):
    service, *_ = env
    team = service.create("alice", "Team")
    for bad in ("", "   ", "x" * 101, 7):
        with pytest.raises(ValidationError):
            service.create("alice", bad)
    with pytest.raises(ValidationError, match="role"):
        service.put_member("alice", team.id, "bob", "admin")
    with pytest.raises(ValidationError, match="ws_"):
        service.put_member("alice", team.id, "ws_other", "viewer")
    with pytest.raises(ValidationError, match="personal"):
        service.put_member("alice", "alice", "bob", "viewer")
    with pytest.raises(ValidationError, match="personal"):
        service.delete("alice", "alice")


def test_finding_a_document_looks_only_in_the_callers_workspaces(env):
    service, docs, index, blobs = env
    team = service.create("alice", "Team")
    _doc(docs, index, blobs, team.id, "d-team")
    _doc(docs, index, blobs, "alice", "d-alice")
    service.put_member("alice", team.id, "bob", "viewer")
    access, doc = service.find_document("bob", "d-team")
    assert (access.id, doc.id) == (team.id, "d-team")
    with pytest.raises(Forbidden):
        service.find_document("bob", "d-team", Role.EDITOR)
    with pytest.raises(NotFound):
        service.find_document("bob", "d-alice")  # alice's personal document
    with pytest.raises(NotFound):
        service.find_document("carol", "d-team")
    with pytest.raises(NotFound):
        service.find_note("carol", "d-team-00000")
    assert service.find_note("bob", "d-team-00000")[1].document_id == "d-team"


def test_deleting_a_workspace_removes_its_documents_vectors_and_blobs(env):
    service, docs, index, blobs = env
    team = service.create("alice", "Team")
    service.put_member("alice", team.id, "bob", "editor")
    for i in range(3):
        _doc(docs, index, blobs, team.id, f"d{i}")
    _doc(docs, index, blobs, "alice", "mine")
    with pytest.raises(Forbidden):
        service.delete("bob", team.id)
    assert service.delete("alice", team.id) == 3
    assert docs.list_documents(team.id).items == []
    assert index.count(team.id) == 0 and docs.get_notes(team.id, ["d0-00000"]) == []
    assert not [k for k in blobs.objects if team.id in k]
    assert docs.get_document("alice", "mine") is not None and index.count("alice") == 1
    with pytest.raises(NotFound):
        service.require("bob", team.id)


def test_a_workspace_too_large_for_one_request_is_deleted_over_several(env):
    """``delete_within`` stops between two documents once its time is up (an API request must answer
    inside API Gateway's 29 s): the workspace and the documents not reached stay whole, the next
    call carries on, and the last one removes the workspace."""
    _, docs, index, blobs = env
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0  # each look at the clock: one second later
        return now[0]

    service = WorkspaceService(
        FakeWorkspaceStore(), docs, DocumentService(docs, index, blobs), blobs, clock=clock
    )
    team = service.create("alice", "Team")
    for i in range(5):
        _doc(docs, index, blobs, team.id, f"d{i}")

    assert service.delete_within("alice", team.id, 2.5) == (3, 3, False)
    left = docs.list_documents(team.id).items
    assert len(left) == 2 and index.count(team.id) == 2
    assert all(docs.get_notes(team.id, [f"{d.id}-00000"]) for d in left)  # each one whole
    assert service.require("alice", team.id).id == team.id  # the workspace is still there

    assert service.delete_within("alice", team.id, 2.5) == (2, 2, True)
    assert docs.list_documents(team.id).items == [] and index.count(team.id) == 0
    with pytest.raises(NotFound):
        service.require("alice", team.id)
    # however short the time, every call deletes one document at least
    other = service.create("alice", "Other")
    _doc(docs, index, blobs, other.id, "x0")
    _doc(docs, index, blobs, other.id, "x1")
    assert service.delete_within("alice", other.id, 0.0) == (1, 1, False)
    assert service.delete_within("alice", other.id, 0.0) == (1, 1, True)


def test_the_api_answers_202_until_a_large_workspace_is_gone(monkeypatch):
    from ragchat.api import workspaces as routes

    from tests.unit.api_support import make_api

    api = make_api()
    ws = json.loads(api.call("POST", "/workspaces", body={"name": "Big"})["body"])["id"]
    for i in range(3):
        assert api.call("POST", "/notes", body={"text": f"note {i}", "workspace": ws})["statusCode"] == 202
    monkeypatch.setattr(routes, "DELETE_SECONDS", 0.0)  # no time at all: one document per request
    first = api.call("DELETE", f"/workspaces/{ws}")
    assert first["statusCode"] == 202
    assert json.loads(first["body"]) == {
        "id": ws,
        "documentsDeleted": 1,
        "chunksDeleted": 1,
        "finished": False,
        "message": "Deleted 1 document(s) and 1 chunk(s) so far: repeat the DELETE to delete the rest",
    }
    statuses = [api.call("DELETE", f"/workspaces/{ws}")["statusCode"] for _ in range(3)]
    assert statuses == [202, 204, 404]
    assert api.call("GET", f"/workspaces/{ws}/members")["statusCode"] == 404


def test_a_workspace_storage_ceiling_refuses_what_does_not_fit_and_counts_per_user():
    from tests.unit.api_support import make_api

    limits = {"ENABLE_RATE_LIMITING": "true", "RATE_LIMIT_REQUESTS": "100", "INGEST_DOCUMENTS_PER_DAY": "3"}
    api = make_api({"MAX_WORKSPACE_BYTES": "100", **limits})
    ws = json.loads(api.call("POST", "/workspaces", body={"name": "Small"})["body"])["id"]
    api.call("PUT", f"/workspaces/{ws}/members/bob", body={"role": "editor"})

    def add(user: str, text: str, **extra: str) -> int:
        return int(
            api.call("POST", "/notes", principal=user, body={"text": text, "workspace": ws, **extra})[
                "statusCode"
            ]
        )

    assert add("alice", "a" * 60, source="s1") == 202
    res = api.call("POST", "/notes", principal="bob", body={"text": "b" * 50, "workspace": ws})
    assert res["statusCode"] == 413 and "MAX_WORKSPACE_BYTES" in json.loads(res["body"])["error"]
    assert add("bob", "b" * 40) == 202  # fits exactly: 100
    assert add("alice", "c" * 30, source="s1") == 202  # a new version replaces the old one's bytes
    # the daily ceilings stay per user: bob's count is his own, alice's hers
    assert add("bob", "x", source="b2") == 202 and add("bob", "y", source="b3") == 202
    assert add("bob", "z", source="b4") == 429
    assert add("alice", "w", source="a2") == 202


def test_a_member_can_be_given_by_e_mail_where_a_resolver_is_wired():
    docs, index, blobs = FakeDocumentStore(), FakeVectorIndex(dimension=4), FakeBlobStore()
    known = {"bob@example.com": "sub-bob"}
    service = WorkspaceService(
        FakeWorkspaceStore(), docs, DocumentService(docs, index, blobs), blobs, resolve_member=known.get
    )
    team = service.create("alice", "Team")
    assert service.put_member("alice", team.id, "bob@example.com", "editor").user_id == "sub-bob"
    assert service.require("sub-bob", team.id, Role.EDITOR).id == team.id
    with pytest.raises(NotFound, match="e-mail"):
        service.put_member("alice", team.id, "nobody@example.com", "viewer")
    service.remove_member("alice", team.id, "bob@example.com")
    with pytest.raises(NotFound):
        service.require("sub-bob", team.id)


def test_a_member_added_by_id_must_be_a_user_the_directory_knows():
    docs, index, blobs = FakeDocumentStore(), FakeVectorIndex(dimension=4), FakeBlobStore()
    users = {"sub-bob": "sub-bob"}  # the directory (Cognito's ListUsers on AWS) knows bob only
    service = WorkspaceService(
        FakeWorkspaceStore(), docs, DocumentService(docs, index, blobs), blobs, resolve_member=users.get
    )
    team = service.create("alice", "Team")
    with pytest.raises(NotFound, match="No user 'sub-bbo'"):
        service.put_member("alice", team.id, "sub-bbo", "viewer")
    assert [m.user_id for m in service.members("alice", team.id)] == ["alice"]
    service.put_member("alice", team.id, "sub-bob", "viewer")
    del users["sub-bob"]  # bob's account is deleted: he can still be removed by id
    service.remove_member("alice", team.id, "sub-bob")
    assert [m.user_id for m in service.members("alice", team.id)] == ["alice"]


def test_a_member_added_by_e_mail_is_the_user_the_directory_names() -> None:
    """Cloud: members are added by Cognito sub or e-mail; the e-mail is resolved through the user
    directory (``Backends.user_directory``: Cognito's ListUsers on AWS) to the user's id."""
    from tests.events import json_body
    from tests.unit.api_support import make_api

    class Directory:
        def resolve(self, identifier: str) -> str | None:
            return {"bob@example.com": "sub-bob"}.get(
                identifier, identifier if "@" not in identifier else None
            )

    api = make_api(user_directory=Directory())
    ws = json_body(api.call("POST", "/workspaces", body={"name": "Team"}))["id"]
    res = api.call("PUT", f"/workspaces/{ws}/members/bob@example.com", body={"role": "viewer"})
    assert res["statusCode"] == 200 and json_body(res)["userId"] == "sub-bob"
    missing = api.call("PUT", f"/workspaces/{ws}/members/nobody@example.com", body={"role": "viewer"})
    assert missing["statusCode"] == 404
    listed = api.call("GET", "/workspaces", principal="sub-bob")
    assert [w["id"] for w in json_body(listed)["items"] if w["id"] == ws] == [ws]


def test_a_workspace_is_named_wherever_its_id_is_taken(env):
    """Issue 45: the CLI and the API wanted ``ws_…`` ids; a name of the caller's own workspaces works
    too (any case and spacing), and says nothing about anyone else's."""
    service, *_ = env
    team = service.create("alice", "Lighthouse team")
    service.put_member("alice", team.id, "bob", "viewer")
    assert service.require("alice", "lighthouse  TEAM").id == team.id
    assert service.require("alice", "personal").id == "alice"
    assert service.require("bob", "Lighthouse team").role is Role.VIEWER
    with pytest.raises(Forbidden):  # the role still decides
        service.require("bob", "Lighthouse team", Role.EDITOR)
    with pytest.raises(NotFound):  # not carol's: as for an id
        service.require("carol", "Lighthouse team")
    assert service.rename("alice", "Lighthouse team", "Keepers").name == "Keepers"
    assert [m.user_id for m in service.members("alice", "keepers")] == ["alice", "bob"]
    twin = service.create("alice", "Keepers")
    with pytest.raises(ValidationError) as twice:
        service.require("alice", "Keepers")
    assert team.id in twice.value.message and twin.id in twice.value.message


def test_a_workspace_of_big_documents_is_deleted_a_page_of_chunks_per_step(monkeypatch):
    """Issue 44: a workspace DELETE no longer deletes each document in one go. Each request deletes
    whole pages of chunks (``DELETE_PAGE``; each page's vectors, then its notes) and answers 202 once
    its time is up, even in the middle of a document; the next request carries on; nothing of a
    document is retrievable once its vectors are gone, and the last request answers 204."""
    from ragchat.domain.models import SearchFilter
    from ragchat.services import documents

    from tests.unit.api_support import make_api

    page = 20
    monkeypatch.setattr(documents, "DELETE_PAGE", page)
    api = make_api({"CHUNK_SIZE": "100", "CHUNK_OVERLAP": "0"})
    ws = json.loads(api.call("POST", "/workspaces", body={"name": "Big"})["body"])["id"]
    for n in range(3):
        words = " ".join(f"d{n}w{i:05d}" for i in range(3 * page * 12))  # ~3 pages of chunks each
        res = api.call("POST", "/notes", body={"text": words, "title": f"Doc {n}", "workspace": ws})
        assert res["statusCode"] == 202
    total = api.index.count(ws)
    assert total > 3 * 2 * page

    per_request: list[int] = []
    index_delete = api.index.delete

    def slow_delete(ids, **kw):
        per_request[-1] += len(ids)
        api.clock.advance(25.0)  # a page of vectors "takes" 25 s: one page per 20 s request
        index_delete(ids, **kw)

    api.index.delete = slow_delete
    statuses, bodies = [], []
    while True:
        per_request.append(0)
        res = api.call("DELETE", f"/workspaces/{ws}")
        statuses.append(res["statusCode"])
        if res["statusCode"] != 202:
            break
        bodies.append(json.loads(res["body"]))
        assert api.call("GET", f"/workspaces/{ws}/members")["statusCode"] == 200  # still there
    assert statuses[-1] == 204 and len(statuses) > 3  # more requests than documents: bounded steps
    assert max(per_request) <= page  # no request deleted more than one page of vectors
    assert all(b["finished"] is False and b["chunksDeleted"] <= page for b in bodies)
    assert sum(b["chunksDeleted"] for b in bodies) + per_request[-1] == total
    assert sum(b["documentsDeleted"] for b in bodies) in (2, 3)  # the last may end with the 204
    assert api.index.count(ws) == 0
    assert api.index.search([1.0] + [0.0] * 63, SearchFilter(owner=ws), 10) == []
    assert api.call("GET", f"/workspaces/{ws}/members")["statusCode"] == 404
