"""Chat end to end over HTTP against ``ragchat serve`` (real embedder, SQLite, extractive answerer),
including SSE streamed by the local server."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from tests.e2e.conftest import Server

pytestmark = pytest.mark.e2e

COLLECTION = "chat-e2e"
NOTES = {
    "coffee": "Espresso is brewed by forcing hot water at about nine bars of pressure through finely ground "
    "coffee for twenty-five to thirty seconds. A good shot has a layer of crema on top.",
    "bees": "Honey bees communicate the direction of flowers with the waggle dance. The angle of the dance "
    "relative to vertical shows the direction of the food relative to the sun.",
}


@pytest.fixture(scope="module")
def chat_notes(server: Server) -> dict[str, str]:
    ids = {}
    for key, text in NOTES.items():
        res = server.request("POST", "/notes", body={"title": key, "text": text, "collection": COLLECTION})
        assert res.status == 202, res.body
        ids[key] = res.json()["documentId"]
    for doc_id in ids.values():
        assert server.wait_document(doc_id)["status"] == "READY"
    return ids


def _conversation(server: Server, **body: Any) -> str:
    res = server.request("POST", "/chat/conversations", body={"collection": COLLECTION, **body})
    assert res.status == 201, res.body
    return str(res.json()["id"])


def test_multi_turn_conversation(server: Server, chat_notes: dict[str, str]) -> None:
    conv = _conversation(server)
    res = server.request(
        "POST", f"/chat/conversations/{conv}/messages", body={"content": "How is espresso brewed?"}
    )
    assert res.status == 200, res.body
    body = res.json()
    assert body["role"] == "assistant" and "[source: " in body["content"]
    assert body["sources"] and all(s["id"].startswith(chat_notes["coffee"]) for s in body["sources"])
    assert res.headers["x-model-used"] == "extractive"
    assert res.headers["x-source-count"] == str(len(body["sources"]))

    res = server.request(
        "POST",
        f"/chat/conversations/{conv}/messages",
        body={"content": "How do bees show where flowers are?"},
    )
    assert res.status == 200
    assert any(s["id"].startswith(chat_notes["bees"]) for s in res.json()["sources"])

    got = server.request("GET", f"/chat/conversations/{conv}").json()
    assert [m["role"] for m in got["messages"]] == ["user", "assistant", "user", "assistant"]
    assert got["title"] == "How is espresso brewed?"
    listed = server.request("GET", "/chat/conversations").json()
    assert conv in [c["id"] for c in listed["items"]]

    md = server.request("GET", f"/chat/conversations/{conv}/export?format=markdown")
    assert md.status == 200 and md.body.decode().startswith("# How is espresso brewed?")


def test_errors_and_idempotency(server: Server, chat_notes: dict[str, str]) -> None:
    conv = _conversation(server)
    assert server.request("POST", "/chat/conversations/none/messages", body={"content": "x"}).status == 404
    assert server.request("POST", f"/chat/conversations/{conv}/messages", body={"content": " "}).status == 400
    too_long = {"content": "x" * 4001}
    assert server.request("POST", f"/chat/conversations/{conv}/messages", body=too_long).status == 413
    send = {"content": "How long does an espresso shot take?", "messageId": "e2e-1"}
    a = server.request("POST", f"/chat/conversations/{conv}/messages", body=send).json()
    b = server.request("POST", f"/chat/conversations/{conv}/messages", body=send).json()
    assert a["id"] == b["id"]
    assert len(server.request("GET", f"/chat/conversations/{conv}").json()["messages"]) == 2


def test_sse_stream(server: Server, chat_notes: dict[str, str]) -> None:
    conv = _conversation(server)
    req = urllib.request.Request(
        f"{server.url}/chat/conversations/{conv}/messages",
        data=json.dumps({"content": "What does the honey bees' waggle dance tell about flowers?"}).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Authorization": f"Bearer {server.token}",
        },
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        raw = resp.read().decode()
    frames = [f for f in raw.split("\n\n") if f.strip()]
    events = [
        (f.split("\n")[0].removeprefix("event: "), json.loads(f.split("\n")[1].removeprefix("data: ")))
        for f in frames
    ]
    names = [n for n, _ in events]
    assert names[0] == "answer_start" and names[-2:] == ["sources", "answer_end"]
    assert names.count("answer_delta") >= 2
    text = "".join(d["text"] for n, d in events if n == "answer_delta")
    stored = server.request("GET", f"/chat/conversations/{conv}").json()["messages"][-1]
    assert stored["content"] == text == events[-1][1]["content"]
    assert stored["id"] == events[-1][1]["messageId"]
