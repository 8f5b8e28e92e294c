"""The cloud stack of :mod:`tests.contract.cloud_api` serves the API end to end: a note is stored in
DynamoDB, its body in S3, its vectors in OpenSearch, and a question finds it; each user sees their
own; a search over a user's workspaces reaches their shared workspace's notes and no other."""

from __future__ import annotations

import requests
from ragchat.domain.models import SearchFilter
from ragchat.domain.workspaces import Role, Workspace

from tests.contract.cloud_api import cloud_api
from tests.events import json_body

CATS = "Cats sleep for sixteen hours a day and purr when they are content."


def test_a_note_goes_through_the_cloud_adapters_and_answers_a_question() -> None:
    with cloud_api() as api:
        posted = api.call("POST", "/notes", body={"text": CATS, "title": "Cats"})
        assert posted["statusCode"] == 202, posted
        doc_id = json_body(posted)["documentId"]

        doc = json_body(api.call("GET", f"/documents/{doc_id}", query={"include": "body"}))
        # on S3 the text comes as ``bodyUrl``, a presigned GET of the stored body (read inside moto)
        assert doc["status"] == "READY" and "body" not in doc
        assert requests.get(doc["bodyUrl"], timeout=30).text == CATS
        answer = json_body(api.call("GET", "/", query={"text": "How many hours a day do cats sleep?"}))
        assert [s["documentId"] for s in answer["sources"]] == [doc_id]
        assert api.call("GET", f"/documents/{doc_id}", principal="bob")["statusCode"] == 404
        assert json_body(api.call("GET", "/documents", principal="bob"))["items"] == []


def test_a_search_over_a_users_workspaces_reaches_the_shared_one_only() -> None:
    with cloud_api() as api:
        workspaces = api.container.workspace_store
        assert workspaces is not None
        workspaces.create_workspace(Workspace("ws_team", "Team"), "alice")
        workspaces.put_member("ws_team", "bob", Role.VIEWER)
        team = api.container.ingestion.accept("ws_team", text=CATS, title="Team cats").document
        api.container.ingestion.accept("ws_other", text=CATS, title="Other cats")

        bobs = tuple(["bob", *(m.workspace_id for m in workspaces.memberships("bob"))])
        vector = api.container.embedder.embed_query("How many hours a day do cats sleep?")
        hits = api.container.index.search(vector, SearchFilter(owner="bob", owners=bobs), 10)

        assert bobs == ("bob", "ws_team")
        assert {(h.document_id, h.owner) for h in hits} == {(team.id, "ws_team")}
