"""kill -9 of a shared ``ragchat serve`` (issue 43 item 1): several users of a users file and a shared
workspace have documents in flight when the server is killed; after the restart every one of them is
READY (only the local user's were resumed before: ana's, ben's and the team's stayed PENDING or
PROCESSING for good, and sending one again answered ``duplicate: true``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ragchat.serving.users import add_user

from tests.e2e.conftest import Server, run_server
from tests.e2e.test_crash_recovery import (
    CHUNK_OVERLAP,
    CHUNK_SIZE,
    database,
    expected_chunks,
    kill9,
    poll,
    prose,
    vectors_of,
)

pytestmark = pytest.mark.e2e


def status(srv: Server, token: str, doc_id: str) -> str:
    return str(srv.request("GET", f"/documents/{doc_id}", token=token).json()["status"])


def test_kill9_with_several_users_documents_in_flight_resumes_them_all(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    ana, ben = add_user(users, "ana"), add_user(users, "ben")
    env = {"CHUNK_SIZE": str(CHUNK_SIZE), "CHUNK_OVERLAP": str(CHUNK_OVERLAP)}
    env["RAGCHAT_USERS_FILE"] = str(users)
    docs: list[tuple[str, str, str]] = []  # (token, document id, text)

    def post(srv: Server, token: str, title: str, text: str, workspace: str | None = None) -> str:
        body = {"title": title, "text": text, **({"workspace": workspace} if workspace else {})}
        reply = srv.request("POST", "/notes", body=body, token=token)
        assert reply.status == 202, reply.body
        docs.append((token, reply.json()["documentId"], text))
        return str(reply.json()["documentId"])

    with run_server(tmp_path, env=env) as srv:
        team = srv.request("POST", "/workspaces", body={"name": "Team"}, token=ana).json()["id"]
        put = srv.request("PUT", f"/workspaces/{team}/members/ben", body={"role": "editor"}, token=ana)
        assert put.status == 200, put.body
        # ~16 KB, 300 chunks: 5 embedding batches (with 30 paragraphs, 2 or 3: a busy machine could see it
        # PROCESSING with no vector, then READY, and never half indexed)
        big = post(srv, ana, "Glaciers", prose("glaciers", 60))  # ana's personal workspace

        def big_half_indexed() -> bool:
            if status(srv, ana, big) != "PROCESSING":
                return False
            with database(tmp_path) as conn:
                return vectors_of(conn, big)[0] > 0

        poll("the big document half indexed", big_half_indexed, timeout=120)
        # posted the moment before the kill (each some seconds of work: none can finish first)
        post(srv, ben, "Volcanoes", prose("volcanoes", 6))  # ben's personal workspace
        post(srv, ben, "Lighthouses", prose("lighthouses", 6), team)  # the shared one, by an editor
        post(srv, ana, "Beekeeping", prose("beekeeping", 6), team)
        post(srv, ana, "Orchards", prose("orchards", 6))  # ana's personal workspace again
        kill9(srv)
    with database(tmp_path) as conn:  # what the restart finds: everyone's work unfinished
        left = conn.execute("SELECT owner, status FROM documents WHERE status != 'READY'").fetchall()
    assert {owner for owner, _ in left} >= {"ana", "ben", team}, left

    with run_server(tmp_path, env=env) as srv:
        for token, doc_id, text in docs:
            poll(f"{doc_id} READY", lambda t=token, d=doc_id: status(srv, t, d) == "READY", timeout=300)
            doc = srv.request("GET", f"/documents/{doc_id}", token=token).json()
            assert doc["chunkCount"] == expected_chunks(text)
        # the team's documents are the team's: each member reads them, answered from them
        answer = srv.request("GET", "/?text=Where+do+the+lighthouses+observations+come+from%3F", token=ana)
        assert answer.status == 200 and answer.json()["sources"], answer.body
