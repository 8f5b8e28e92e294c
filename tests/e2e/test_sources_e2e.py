"""Sources that say where, end to end over ``ragchat serve`` (real embedder, SQLite): a PDF's answer
names its document's title and the page the sentence is on, in one-shot answers, chat, SSE and the
Markdown export; a renamed document shows its new title in the next answer."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from tests.e2e.conftest import Server
from tests.unit.test_extraction import make_pdf

pytestmark = pytest.mark.e2e

PAGES = [
    "The lighthouse keeper lights the lamp every evening at sunset.",
    "The Fresnel lens of the lighthouse focuses the lamp into a beam visible for twenty nautical miles.",
]
QUESTION = "How far away can the beam of the lighthouse Fresnel lens be seen?"


@pytest.fixture(scope="module")
def pdf_doc(server: Server) -> str:
    query = urllib.parse.urlencode({"filename": "lighthouse.pdf", "title": "Lighthouse manual"})
    res = server.request(
        "POST", f"/documents?{query}", data=make_pdf(PAGES), headers={"Content-Type": "application/pdf"}
    )
    assert res.status == 202, res.body
    doc_id: str = res.json()["documentId"]
    assert server.wait_document(doc_id)["status"] == "READY"
    return doc_id


def test_pdf_answers_carry_title_and_page_everywhere(server: Server, pdf_doc: str) -> None:
    res = server.request("GET", "/?" + urllib.parse.urlencode({"text": QUESTION}))
    assert res.status == 200, res.body
    [first, *_] = res.json()["sources"]
    assert (first["documentId"], first["title"], first["page"]) == (pdf_doc, "Lighthouse manual", 2)
    assert "Fresnel" in first["text"] and len(first["text"]) <= 160

    conv = server.request("POST", "/chat/conversations", body={}).json()["id"]
    turn = server.request("POST", f"/chat/conversations/{conv}/messages", body={"content": QUESTION})
    assert turn.status == 200, turn.body
    assert turn.json()["sources"][0] | {"text": ""} == {
        "id": first["id"], "documentId": pdf_doc, "title": "Lighthouse manual", "page": 2,
        "workspace": {"id": "local", "name": "Personal"}, "text": "",
    }  # fmt: skip
    assert first["workspace"] == {"id": "local", "name": "Personal"}
    stored = server.request("GET", f"/chat/conversations/{conv}").json()["messages"][-1]
    assert stored["sources"] == turn.json()["sources"]
    md = server.request("GET", f"/chat/conversations/{conv}/export?format=markdown").body.decode()
    assert "Lighthouse manual, p. 2 — “The Fresnel lens" in md  # a footnote with title and page
    assert "[source:" not in md

    sse = server.request(
        "POST",
        f"/chat/conversations/{conv}/messages",
        body={"content": QUESTION},
        headers={"Accept": "text/event-stream"},
    ).body.decode()
    block = next(b for b in sse.split("\n\n") if b.startswith("event: sources"))
    data = json.loads(block.split("data: ", 1)[1])
    assert (data["sources"][0]["title"], data["sources"][0]["page"]) == ("Lighthouse manual", 2)


def test_a_renamed_pdf_shows_its_new_title(server: Server, pdf_doc: str) -> None:
    res = server.request("PATCH", f"/documents/{pdf_doc}", body={"title": "Lamp and lens guide"})
    assert res.status == 200, res.body
    body = server.request("GET", "/?" + urllib.parse.urlencode({"text": QUESTION})).json()
    assert (body["sources"][0]["title"], body["sources"][0]["page"]) == ("Lamp and lens guide", 2)
