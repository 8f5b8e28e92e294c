"""The server's limits over real sockets on 127.0.0.1 (docs/architecture.md, "Reliability"): a burst
of connections, slow and idle clients, saturation, and protocol errors — every answer JSON, none a
reset. Timeouts are set small here; the test waits on the socket for the server to act, never on a clock."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator

import pytest
from ragchat.serving.asgi import Limits

from tests.integration.serving_support import WAIT, GatedModel, Served, read_event, serving

FAST = Limits(header_timeout=0.3, body_timeout=0.3, keep_alive=0.3, max_concurrency=200)

NOTES_POST = b"POST /notes HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"


@pytest.fixture
def served() -> Iterator[Served]:
    with serving("serve", limits=FAST) as s:
        yield s


def connect(served: Served) -> socket.socket:
    return socket.create_connection(("127.0.0.1", served.port), timeout=WAIT)


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def exchange(served: Served, request: bytes) -> tuple[int, dict[str, str], bytes]:
    with connect(served) as sock:
        sock.sendall(request)
        return parse(read_all(sock))


def test_a_burst_of_100_simultaneous_connections_is_all_answered(served: Served) -> None:
    n = 100
    barrier = threading.Barrier(n)
    outcomes: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        try:
            barrier.wait(WAIT)
            status, _, _ = exchange(
                served, b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
            )
            outcome = str(status)
        except ConnectionResetError:
            outcome = "reset"
        except OSError as exc:
            outcome = type(exc).__name__
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=client) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 2)
    assert outcomes.count("200") == n, {o: outcomes.count(o) for o in set(outcomes)}


def test_a_body_that_stops_short_is_dropped_with_408(served: Served) -> None:
    request = NOTES_POST + b"Content-Length: 100\r\n\r\n"
    with connect(served) as sock:
        sock.sendall(request + b'{"text": "12')  # 12 of the 100 declared bytes, then nothing
        status, headers, body = parse(read_all(sock))  # returns once the server closes
    assert status == 408 and headers["connection"] == "close"
    assert "body not received" in json.loads(body)["error"]
    assert served.call("GET", "/notes")[2] and json.loads(served.call("GET", "/notes")[2])["items"] == []


def test_headers_that_never_end_are_dropped_with_408(served: Served) -> None:
    with connect(served) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        status, _, body = parse(read_all(sock))
    assert status == 408 and "headers not received" in json.loads(body)["error"]


def test_an_idle_keep_alive_connection_is_closed(served: Served) -> None:
    with connect(served) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        first = read_all_or_first(sock)
        assert first.startswith(b"HTTP/1.1 200") and first.endswith(b"}")
        assert read_all(sock) == b""  # nothing more, then closed by the server


def test_connections_that_send_nothing_cost_no_thread(served: Served) -> None:
    before = threading.active_count()
    socks = [connect(served) for _ in range(50)]
    try:
        for s in socks:
            s.sendall(NOTES_POST + b"Content-Length: 100\r\n\r\n{")
        assert served.call("GET", "/health")[0] == 200  # still answering
        assert threading.active_count() < before + 10
    finally:
        for s in socks:
            s.close()


def test_saturation_answers_503_with_retry_after() -> None:
    model = GatedModel(["one ", "two "])
    with serving("serve", model=model, limits=Limits(max_concurrency=1, retry_after=2)) as served:
        status, _, body = served.call("POST", "/chat/conversations", {})
        conv = json.loads(body)["id"]
        conn = served.connection()
        payload = json.dumps({"content": "Why is the sky blue?"}).encode()
        conn.request(
            "POST",
            f"/chat/conversations/{conv}/messages",
            body=payload,
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        )
        resp = conn.getresponse()
        assert read_event(resp) is not None  # answer_start: the one slot is taken by this stream
        status, headers, body = served.call("GET", "/health")
        assert status == 503 and headers["retry-after"] == "2"
        assert "busy" in json.loads(body)["error"]
        model.release(2)
        while read_event(resp) is not None:
            pass
        conn.close()
        # the slot is freed once the stream's request has ended (a few loop turns after its last byte)
        statuses = [served.call("GET", "/health")[0] for _ in range(3)]
        while statuses[-1] != 200 and len(statuses) < 200:
            statuses.append(served.call("GET", "/health")[0])
        assert statuses[-1] == 200 and set(statuses) <= {200, 503}


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n", 414),
        (b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"b" * 70_000 + b"\r\n\r\n", 431),
        (b"NOT HTTP AT ALL\r\n\r\n", 400),
        (b"BREW /health HTTP/1.1\r\nHost: localhost\r\n\r\n", 405),
        (b"POST /notes HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411),
    ],
)
def test_protocol_errors_are_json(served: Served, request_bytes: bytes, status: int) -> None:
    with connect(served) as sock:
        sock.sendall(request_bytes)
        got, headers, body = parse(read_all_or_first(sock))
    assert got == status
    assert headers["content-type"] == "application/json"
    assert isinstance(json.loads(body)["error"], str)


def read_all_or_first(sock: socket.socket) -> bytes:
    """One response: up to its Content-Length (the connection may stay open)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    _, headers, body = parse(data)
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
        data += chunk
    return data


FILE_POST = b"POST /documents?filename=big.txt HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\n"


@pytest.mark.parametrize(
    ("head", "said"),
    [
        (NOTES_POST, "The request body is too large"),  # a note: no file to send elsewhere
        (FILE_POST, "Send a larger file with POST /uploads."),
    ],
)
def test_an_oversized_body_is_refused_with_413_not_a_reset(head: bytes, said: str) -> None:
    """Answered from the headers, before the body is read (issue 43: a refused body is not drained):
    a client that sends it all anyway has its send cut short, and the 413 is there to read."""
    with serving("serve") as served:
        limit = served.api.container.settings.body_limit_bytes
        body = b"x" * (limit + 1)
        request = head.decode() + f"Content-Length: {len(body)}\r\n\r\n"
        with connect(served) as sock:
            sock.sendall(request.encode())
            status, _, answer = parse(read_all_or_first(sock))  # nothing of the body sent yet
        assert status == 413 and said in json.loads(answer)["error"]
        with connect(served) as sock:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(request.encode() + body)
            status, _, answer = parse(read_all_or_first(sock))
    assert status == 413 and said in json.loads(answer)["error"]


def test_clients_still_sending_take_no_slot() -> None:
    with serving("serve", limits=Limits(max_concurrency=1)) as served, connect(served) as slow:
        slow.sendall(NOTES_POST + b"Content-Length: 100\r\n\r\n{")
        assert served.call("GET", "/health")[0] == 200  # the one slot is for requests being answered


def test_head_tells_the_length_without_a_body(served: Served) -> None:
    with connect(served) as sock:  # the resolver has no HEAD routes: its 405 answer, minus the body
        sock.sendall(b"HEAD /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        status, headers, body = parse(read_all(sock))
    assert status == 405 and int(headers["content-length"]) > 0 and body == b""
