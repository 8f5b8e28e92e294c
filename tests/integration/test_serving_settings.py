"""The server limits set from the environment (``SERVE_*``, issue 8) reach both servers: ``ragchat
serve``'s and the chat_stream function's. Timeouts are set small; the test waits on the socket for the
server to act, never on a clock."""

from __future__ import annotations

import json

import pytest

from tests.integration.serving_support import GatedModel, read_event, serving
from tests.integration.test_serving_limits import connect, parse, read_all

FAST = {
    "SERVE_HEADER_TIMEOUT_SECONDS": "0.3",
    "SERVE_BODY_TIMEOUT_SECONDS": "0.3",
    "SERVE_KEEPALIVE_SECONDS": "0.3",
}


@pytest.mark.parametrize("kind", ["serve", "adapter"])
def test_the_read_timeouts_come_from_the_settings(kind: str) -> None:
    with serving(kind, env=FAST) as served:
        extra = "".join(f"{k}: {v}\r\n" for k, v in served.headers().items())
        head = (
            "POST /chat/conversations/c1/messages HTTP/1.1\r\nHost: localhost\r\n"
            f"{extra}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        )
        with connect(served) as sock:
            sock.sendall(head.encode() + b"{")
            status, headers, body = parse(read_all(sock))  # returns once the server closes
        assert status == 408 and headers["connection"] == "close"
        assert "body not received" in json.loads(body)["error"]
        with connect(served) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            status, _, body = parse(read_all(sock))
        assert status == 408 and "headers not received" in json.loads(body)["error"]
        with connect(served) as sock:  # an idle keep-alive connection is closed by the server
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
            status, _, _ = parse(read_all(sock))
        assert status == 200


def test_the_concurrency_bound_comes_from_the_settings() -> None:
    model = GatedModel(["one ", "two "])
    with serving("serve", model=model, env={"SERVE_MAX_CONCURRENCY": "1"}) as served:
        conv = json.loads(served.call("POST", "/chat/conversations", {})[2])["id"]
        conn = served.connection()
        conn.request(
            "POST",
            f"/chat/conversations/{conv}/messages",
            body=json.dumps({"content": "Why is the sky blue?"}).encode(),
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        )
        resp = conn.getresponse()
        assert read_event(resp) is not None  # answer_start: the one slot is taken by this stream
        status, headers, body = served.call("GET", "/health")
        assert status == 503 and headers["retry-after"] == "1" and "busy" in json.loads(body)["error"]
        model.release(2)
        while read_event(resp) is not None:
            pass
        conn.close()
        # the slot is freed once the stream's request has ended (a few loop turns after its last byte)
        statuses = [served.call("GET", "/health")[0]]
        while statuses[-1] != 200 and len(statuses) < 200:
            statuses.append(served.call("GET", "/health")[0])
        assert statuses[-1] == 200 and set(statuses) <= {200, 503}
