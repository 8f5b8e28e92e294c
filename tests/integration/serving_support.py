"""Servers over in-memory fakes on 127.0.0.1 (``ragchat serve``'s and the chat_stream function's), a
chat model that streams only as fast as the test lets it, and a raw HTTP client."""

from __future__ import annotations

import http.client
import json
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ragchat.lambda_web import create_server
from ragchat.local_server import LocalServer
from ragchat.ports import ModelRequest
from ragchat.serving.asgi import Limits

from tests.fakes import FakeChatModel
from tests.unit.api_support import Api, make_api
from tests.unit.test_chat_api import _index

OWNER = "local"  # ragchat serve's default principal; the adapter's request context names the same
SKY = "The sky appears blue because of Rayleigh scattering of sunlight."
WAIT = 20.0  # seconds a blocked step may wait before the test fails (never reached when it passes)


class GatedModel(FakeChatModel):
    """Streams ``words``, one delta each time the test calls ``release()``."""

    def __init__(self, words: list[str]) -> None:
        super().__init__("".join(words))
        self.words = words
        self.gate: queue.Queue[None] = queue.Queue()
        self.produced = 0
        self.closed = threading.Event()

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self.gate.put(None)

    def stream(self, request: ModelRequest) -> Iterator[str]:
        self.requests.append(request)
        try:
            for word in self.words:
                self.gate.get(timeout=WAIT)
                self.produced += 1
                yield word
        finally:
            self.closed.set()


@dataclass
class Served:
    kind: str  # "serve" | "adapter"
    port: int
    api: Api
    stop: Any = field(repr=False)

    def headers(self, request_id: str = "apigw-1") -> dict[str, str]:
        if self.kind == "serve":
            return {}
        context = {"requestId": request_id, "authorizer": {"claims": {"sub": OWNER}}}
        return {"x-amzn-request-context": json.dumps(context)}

    def connection(self, timeout: float = WAIT) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def call(
        self, method: str, path: str, body: Any = None, **headers: str
    ) -> tuple[int, dict[str, str], bytes]:
        conn = self.connection()
        try:
            data = json.dumps(body).encode() if body is not None else None
            hdrs = {"Content-Type": "application/json", **self.headers(), **headers}
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()


@contextmanager
def serving(
    kind: str, *, model: Any = None, limits: Limits | None = None, env: dict[str, str] | None = None
) -> Iterator[Served]:
    """``ragchat serve``'s server (``kind="serve"``) or the chat_stream function's (``"adapter"``);
    without ``limits``, the ``SERVE_*`` settings of ``env`` choose them."""
    overrides = {"chat_model": model} if model is not None else {}
    api = make_api(env, **overrides)
    _index(api, "n-sky", SKY, owner=OWNER)
    if kind == "serve":
        local = LocalServer(api.container, port=0, limits=limits)
        local.start()
        try:
            yield Served(kind, int(local.httpd.server_address[1]), api, local.stop)
        finally:
            local.stop()
        return
    server = create_server(api.container, port=0, limits=limits)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Served(kind, int(server.server_address[1]), api, server.shutdown)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def read_event(resp: http.client.HTTPResponse) -> tuple[str, dict[str, Any]] | None:
    """The next SSE event of a streamed response (``None`` at the end), read as it arrives."""
    name, data = "", ""
    while True:
        line = resp.readline()
        if not line:
            return None
        text = line.decode("utf-8").rstrip("\n")
        if text.startswith("event: "):
            name = text[7:]
        elif text.startswith("data: "):
            data = text[6:]
        elif text == "" and name:
            return name, json.loads(data)
