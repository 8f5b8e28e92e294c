"""End to end over HTTP against ``ragchat serve`` with the real embedder and SQLite."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import Server

pytestmark = pytest.mark.e2e

GUARD = (
    "I don't have sufficiently relevant documents to answer confidently. "
    "Please add more context or documents."
)

DOCS = {
    "sourdough": (
        "Baking sourdough bread",
        "Sourdough bread rises because of a starter: a culture of wild yeast and lactic acid bacteria. "
        "Feed the starter with equal weights of flour and water the day before baking. "
        "Bake the loaf in a preheated Dutch oven at 250 degrees Celsius for twenty minutes with the lid on, "
        "then twenty more minutes with the lid off until the crust is deep brown.",
    ),
    "rockets": (
        "How rockets reach orbit",
        "A rocket reaches orbit by accelerating sideways to about 7.8 kilometres per second. "
        "Multi-stage rockets drop empty fuel tanks so the remaining stages carry less dead weight. "
        "The Falcon 9 first stage burns RP-1 kerosene with liquid oxygen and can land back on a drone ship.",
    ),
    "tomatoes": (
        "Growing tomatoes",
        "Tomato plants need at least six hours of direct sunlight each day. "
        "Water them deeply at the base twice a week and stake or cage the stems as they grow. "
        "Pinch off the suckers between the main stem and branches to get larger fruit.",
    ),
}


@pytest.fixture(scope="module")
def corpus(server: Server) -> dict[str, str]:
    ids = {}
    for key, (title, text) in DOCS.items():
        res = server.request("POST", "/notes", body={"title": title, "text": text})
        assert res.status == 202, res.body
        assert res.json()["status"] == "PENDING"
        ids[key] = res.json()["documentId"]
    for key, doc_id in ids.items():
        doc = server.wait_document(doc_id)
        assert doc["status"] == "READY", (key, doc)
        assert doc["chunkCount"] >= 1
    return ids


def ask(server: Server, text: str) -> dict:
    import urllib.parse

    res = server.request("GET", "/?" + urllib.parse.urlencode({"text": text}))
    assert res.status == 200, res.body
    body = res.json()
    assert res.headers["x-source-count"] == str(len(body["sources"]))
    assert res.headers["x-model-used"]
    return body


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("How long should I bake sourdough in the Dutch oven?", "sourdough"),
        ("What speed does a rocket need to reach orbit?", "rockets"),
        ("How much sunlight do tomato plants need?", "tomatoes"),
    ],
)
def test_answers_cite_the_right_document(
    server: Server, corpus: dict[str, str], question: str, expected: str
):
    body = ask(server, question)
    assert body["guardUsed"] is False
    assert body["sources"], body
    assert body["sources"][0]["id"].startswith(corpus[expected])
    assert f"[source: {body['sources'][0]['id']}]" in body["answer"]
    others = {v for k, v in corpus.items() if k != expected}
    assert not any(s["id"].startswith(tuple(others)) for s in body["sources"][:1])


def test_unrelated_question_gets_the_guard_reply(server: Server, corpus: dict[str, str]):
    body = ask(server, "Who won the football world cup final in 1998?")
    assert body == {"answer": GUARD, "sources": [], "guardUsed": True}


def test_corrupt_pdf_is_refused_and_nothing_of_it_is_stored(server: Server, corpus: dict[str, str]):
    before = server.request("GET", "/documents").json()["items"]
    res = server.request(
        "POST",
        "/documents?filename=broken.pdf",
        data=b"%PDF-1.7\n this is not a real pdf about quasar astronomy \x00\xff",
        headers={"Content-Type": "application/pdf"},
    )
    assert res.status == 400, res.body  # checked before the 202 (issue 8)
    assert b"Could not read PDF" in res.body
    assert server.request("GET", "/documents").json()["items"] == before


def test_disabling_a_document_removes_it_from_answers(server: Server, corpus: dict[str, str]):
    question = "How much sunlight do tomato plants need?"
    doc_id = corpus["tomatoes"]
    res = server.request("PATCH", f"/documents/{doc_id}", body={"enabled": False})
    assert res.status == 200 and res.json()["enabled"] is False
    try:
        body = ask(server, question)
        assert not any(s["id"].startswith(doc_id) for s in body["sources"])
    finally:
        server.request("PATCH", f"/documents/{doc_id}", body={"enabled": True})
    body = ask(server, question)
    assert body["sources"][0]["id"].startswith(doc_id)


def test_token_is_enforced(server: Server):
    assert server.request("GET", "/documents", token=False).status == 401
    wrong = server.request("GET", "/documents", token="not-the-token")
    assert wrong.status == 401 and wrong.json() == {"error": "Unauthorized"}
    assert server.request("GET", "/documents").status == 200
    health = server.request("GET", "/health", token=False)
    assert health.status == 200 and health.json()["status"] == "ok"
    for page in ("/ui", "/write", "/documents/ui"):  # the page shells: no user data, they sign in
        shell = server.request("GET", page, token=False)
        assert shell.status == 200 and shell.headers["content-type"].startswith("text/html"), page
        assert b'"auth":"token"' in shell.body, page
    for path in ("/openapi.json", "/swagger", "/chat/conversations"):
        assert server.request("GET", path, token=False).status == 401, path


def test_a_refused_request_body_is_not_read_as_the_next_request(server: Server):
    conn = http.client.HTTPConnection(urlsplit(server.url).netloc, timeout=30)
    try:
        body = b'{"text": "GET /health HTTP/1.1"}'
        conn.request("POST", "/notes", body=body, headers={"Content-Type": "application/json"})
        refused = conn.getresponse()
        assert (refused.status, json.loads(refused.read())) == (401, {"error": "Unauthorized"})
        # http.client reconnects when the server closed the connection; never a 501 from the leftover body
        conn.request("GET", "/documents?limit=1", headers={"Authorization": f"Bearer {server.token}"})
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def test_errors_over_http(server: Server):
    assert server.request("POST", "/notes", body={"text": "  "}).status == 400
    bad = server.request("POST", "/notes", data=b"{not json", headers={"Content-Type": "application/json"})
    assert bad.status == 400 and bad.json() == {"error": "Invalid JSON body"}
    big = server.request("POST", "/notes", body={"text": "x" * (2 * 1024 * 1024)})
    assert big.status == 413
    assert server.request("GET", "/documents/NOPE").status == 404
    assert server.request("GET", "/nowhere").json() == {"error": "Not found"}


def test_openapi_and_swagger_are_served(server: Server):
    doc = server.request("GET", "/openapi.json").json()
    assert doc["info"]["title"] == "ragchat"
    assert {"/notes", "/documents", "/documents/{document_id}", "/", "/health"} <= set(doc["paths"])
    swagger = server.request("GET", "/swagger")
    assert swagger.status == 200 and b"swagger" in swagger.body.lower()


def test_cli_ask_talks_to_the_api(server: Server, corpus: dict[str, str]):
    import subprocess
    import sys
    from pathlib import Path

    cli = Path(sys.executable).with_name("ragchat")
    out = subprocess.run(
        [str(cli), "ask", "What speed does a rocket need to reach orbit?", "--api", server.url, "--json"],
        env={"RAGCHAT_TOKEN": server.token or "", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    import json

    body = json.loads(out.stdout)
    assert body["sources"][0]["id"].startswith(corpus["rockets"])
    denied = subprocess.run(
        [str(cli), "ask", "anything", "--api", server.url],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert denied.returncode == 1 and "Unauthorized" in denied.stderr
