"""``ragchat.lambda_web`` over a real socket, fed what the Lambda Web Adapter sends (in-memory fakes)."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from ragchat.lambda_web import create_server
from ragchat.serving.server import HttpServer as AdapterHTTPServer

from tests.unit.api_support import Api, make_api
from tests.unit.test_chat_api import _index


@pytest.fixture
def served() -> Iterator[tuple[AdapterHTTPServer, Api]]:
    api = make_api()
    _index(
        api, "n-sky", "The sky appears blue because of Rayleigh scattering of sunlight.", owner="alice-sub"
    )
    server = create_server(api.container, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def gateway_context(sub: str, request_id: str = "apigw-1") -> str:
    return json.dumps(
        {
            "resourcePath": "/chat/conversations/{id}/messages",
            "stage": "Prod",
            "requestId": request_id,
            "identity": {"sourceIp": "198.51.100.7"},
            "authorizer": {"claims": {"sub": sub}},
        }
    )


def send(
    server: AdapterHTTPServer, method: str, path: str, body: Any = None, **headers: str
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        hdrs = {"Content-Type": "application/json", **{k.replace("_", "-"): v for k, v in headers.items()}}
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_binds_loopback_only(served: tuple[AdapterHTTPServer, Api]) -> None:
    server, _ = served
    assert server.server_address[0] == "127.0.0.1"
    status, _, body = send(server, "GET", "/health")
    assert status == 200 and json.loads(body)["status"] == "ok"


def test_streamed_turn_for_the_context_owner(served: tuple[AdapterHTTPServer, Api]) -> None:
    server, _ = served
    alice = gateway_context("alice-sub")
    status, _, body = send(server, "POST", "/chat/conversations", {}, x_amzn_request_context=alice)
    assert status == 201, body
    conv = json.loads(body)["id"]

    status, headers, raw = send(
        server,
        "POST",
        f"/chat/conversations/{conv}/messages",
        {"content": "Why is the sky blue?"},
        Accept="text/event-stream",
        x_amzn_request_context=gateway_context("alice-sub", "apigw-2"),
        x_amzn_lambda_context=json.dumps({"request_id": "lambda-2"}),
    )
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    assert "content-length" not in headers  # written as produced, not buffered
    assert headers["x-request-id"] == "apigw-2"
    frames = [f for f in raw.decode().split("\n\n") if f.strip()]
    events = [(f.split("\n")[0].removeprefix("event: "), json.loads(f.split("\n")[1][6:])) for f in frames]
    names = [n for n, _ in events]
    assert names[0] == "answer_start" and names[-2:] == ["sources", "answer_end"], names
    assert "answer_delta" in names
    assert events[0][1]["conversationId"] == conv
    text = "".join(d["text"] for n, d in events if n == "answer_delta")

    status, _, body = send(server, "GET", f"/chat/conversations/{conv}", x_amzn_request_context=alice)
    stored = json.loads(body)["messages"]
    assert status == 200 and [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[-1]["content"] == text and stored[-1]["id"] == events[-1][1]["messageId"]

    bob = gateway_context("bob-sub")
    status, _, _ = send(server, "GET", f"/chat/conversations/{conv}", x_amzn_request_context=bob)
    assert status == 404

    # Same request without Accept: the JSON answer.
    status, headers, body = send(
        server,
        "POST",
        f"/chat/conversations/{conv}/messages",
        {"content": "Why is the sky blue?"},
        x_amzn_request_context=alice,
    )
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert json.loads(body)["role"] == "assistant" and json.loads(body)["sources"]


def test_bearer_token_without_context_is_401(served: tuple[AdapterHTTPServer, Api]) -> None:
    server, api = served
    status, _, body = send(server, "POST", "/chat/conversations", {}, Authorization="Bearer whatever-token")
    assert (status, json.loads(body)) == (401, {"error": "Unauthorized"})
    status, _, _ = send(server, "POST", "/chat/conversations", {}, x_amzn_request_context="{not json")
    assert status == 401
    assert api.container.chat.conversations.list_conversations("local", limit=10).items == []
