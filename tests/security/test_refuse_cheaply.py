"""Attack (issue 43, finding 2): a local account without the token locks the token holder out.

300 sockets sent a POST with a 10 MB Content-Length and then one byte a second: each refused
request's body was drained for up to 30 s before its 401, the connections counted as busy, the
per-address cap filled and 15 of 15 of the token holder's requests got 503. Replayed here over
real sockets on 127.0.0.1 against the real server, scaled down (a per-address cap of 12, a flood of
36 dripping sockets, a body timeout of 20 s as the drain's bound): the flood is bounded and ends
with the test, and nothing waits on a clock (every read waits on the socket, with a timeout).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from collections.abc import Iterator

import pytest
from ragchat.serving.asgi import Limits

from tests.integration.serving_support import WAIT, Served, serving

TOKEN = "cheap-refusal-token"
CAP = 12  # connections per address
FLOOD = 36  # dripping sockets: three times the cap
ASKS = 15
LIMITS = Limits(max_connections_per_ip=CAP, body_timeout=20.0, header_timeout=20.0, max_concurrency=32)
DRIP = (
    b"POST /notes HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    b"Content-Length: 10000000\r\n\r\n{"
)


@pytest.fixture
def served() -> Iterator[Served]:
    with serving("serve", limits=LIMITS, env={"RAGCHAT_API_TOKEN": TOKEN}) as s:
        yield s


class Flood:
    """``n`` sockets that each send a refused request's headers and then a byte per ``tick`` of
    body, reconnecting when the server closes them, until ``stop()``."""

    def __init__(self, port: int, n: int, tick: float = 0.05) -> None:
        self.port, self.n, self.tick = port, n, tick
        self.stopped = threading.Event()
        self.answers: list[int] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._drip, daemon=True) for _ in range(n)]

    def __enter__(self) -> Flood:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        for t in self.threads:
            t.join(WAIT)

    def _drip(self) -> None:
        while not self.stopped.is_set():
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), WAIT) as s:
                s.sendall(DRIP)
                s.settimeout(self.tick)
                answer = b""
                while not self.stopped.is_set():
                    try:
                        chunk = s.recv(4096)
                    except TimeoutError:
                        s.sendall(b" ")  # one more byte of the body
                        continue
                    if not chunk:
                        break
                    answer += chunk
                if answer.startswith(b"HTTP/1.1 "):
                    with self.lock:
                        self.answers.append(int(answer.split()[1]))

    def answered(self, n: int) -> bool:
        """Wait (on the flood's own sockets) until ``n`` refusals came back."""
        for _ in range(int(WAIT / 0.05)):
            with self.lock:
                if len(self.answers) >= n:
                    return True
            self.stopped.wait(0.05)
        return False


def _ask(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request("GET", "/documents?limit=1", headers={"Authorization": f"Bearer {TOKEN}"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_a_dripping_body_flood_without_the_token_leaves_the_token_holder_served(served: Served) -> None:
    with Flood(served.port, FLOOD) as flood:
        assert flood.answered(FLOOD)  # every flood socket got in and was answered at least once
        answers = [_ask(served.port) for _ in range(ASKS)]
        with flood.lock:
            refused = set(flood.answers)
    assert answers == [200] * ASKS
    assert refused == {401}  # answered at once, not after the body (which never ends)


def test_a_refused_body_is_answered_before_it_is_sent(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), WAIT) as s:
        s.sendall(DRIP)  # headers and one byte of a 10 MB body: the answer comes now
        s.settimeout(WAIT)
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 401") and b"connection: close" in head.lower()
    assert json.loads(body) == {"error": "Unauthorized"}


def test_a_client_sending_the_whole_refused_body_still_reads_the_answer(served: Served) -> None:
    """At most a few KB of the body are read: a client that keeps sending gets a reset on its send,
    and the answer, sent before, is still there to read."""
    request = DRIP.replace(b"10000000", b"4000000") + b"x" * 3_999_999
    with socket.create_connection(("127.0.0.1", served.port), WAIT) as s:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(request)
        s.settimeout(WAIT)
        raw = s.recv(65536)
    assert raw.startswith(b"HTTP/1.1 401")


def test_an_open_page_takes_no_body(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), WAIT) as s:
        s.sendall(b"GET /ui HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10000000\r\n\r\nx")
        s.settimeout(WAIT)
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    assert raw.startswith(b"HTTP/1.1 413")
    said = json.loads(raw.partition(b"\r\n\r\n")[2])
    assert said == {"error": "Request body too large: GET /ui takes none"}
    status, _, _ = served.call("GET", "/ui")
    assert status == 200  # without a body, as ever
