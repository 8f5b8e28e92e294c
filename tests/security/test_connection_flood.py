"""Attack: an unauthenticated connection flood (issue 30, finding 5). No cap on connections and the
descriptor soft limit left as inherited: 1,100 idle sockets at ``ulimit -n 1024`` starved a client
holding the token (5 answers, 4 timeouts in 37 s) and wrote 327 MB of ``accept()`` errors in 65 s.

Replayed on 127.0.0.1 against a real ``ragchat serve`` subprocess started with a low descriptor limit
(soft 256, hard 1024): more idle sockets than the hard limit, then more while the client asks. The
flood is bounded (a fixed number of sockets, every wait with a timeout) and ends with the test.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ragchat.serving import connections
from ragchat.serving.connections import ConnectionGate, ThrottledLog, raise_fd_limit

from tests.e2e.conftest import free_port, stop

TOKEN = "flood-test-token"
SOFT, HARD = 256, 1024  # the server's descriptor limits when it starts
FLOOD = 1100  # idle sockets opened at once: more than the hard limit
WAVE = 150  # more opened before each of the client's requests
ASKS = 8


def _launch(data: Path, port: int) -> subprocess.Popen[Any]:
    env = {
        **{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"},
        "RAGCHAT_DATA_DIR": str(data),
        "RAGCHAT_API_TOKEN": TOKEN,
        "RAGCHAT_CHAT_MODEL": "extractive",
        "SERVE_MAX_CONCURRENCY": "8",
    }

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT, HARD))

    cli = Path(sys.executable).with_name("ragchat")
    with (data / "server.log").open("wb") as out:
        return subprocess.Popen(
            [str(cli), "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=data, preexec_fn=low_limit,
        )  # fmt: skip


def _get(url: str, token: str | None = TOKEN, timeout: float = 10.0) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as r:
            r.read()
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _idle_sockets(port: int, n: int) -> list[socket.socket]:
    """``n`` connections that never send a byte (connect started, not awaited)."""
    out = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            s.connect(("127.0.0.1", port))
        out.append(s)
    return out


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[Any], Path]]:
    if not Path("/proc/self/limits").exists():
        pytest.skip("reads the server's descriptor limits from /proc (Linux)")
    limits = raise_fd_limit()  # this process holds the flood's sockets
    if limits is None or 0 <= limits[0] < FLOOD + ASKS * WAVE + 256:
        pytest.skip(f"the test process cannot hold {FLOOD + ASKS * WAVE} sockets (limits {limits})")
    port = free_port()
    proc = _launch(tmp_path, port)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            if proc.poll() is not None:
                raise AssertionError((tmp_path / "server.log").read_text())
            with contextlib.suppress(OSError):
                if _get(url + "/health", None, timeout=2) == 200:
                    break
            assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.1)
        yield url, proc, tmp_path / "server.log"
    finally:
        stop(proc)


def test_an_idle_connection_flood_starves_no_client_and_fills_no_disk(
    server: tuple[str, subprocess.Popen[Any], Path],
) -> None:
    url, proc, log = server
    port = int(url.rsplit(":", 1)[1])
    # the soft limit was raised to the hard one at start
    limits = Path(f"/proc/{proc.pid}/limits").read_text()
    open_files = next(line for line in limits.splitlines() if line.startswith("Max open files"))
    assert open_files.split()[3:5] == [str(HARD), str(HARD)], open_files
    flood = _idle_sockets(port, FLOOD)
    try:
        answers = []
        for _ in range(ASKS):
            flood += _idle_sockets(port, WAVE)
            answers.append(_get(url + "/documents?limit=1"))
        assert answers == [200] * ASKS
        assert proc.poll() is None
        # without the token, still nothing
        assert _get(url + "/documents?limit=1", None) == 401
    finally:
        for s in flood:
            s.close()
    text = log.read_text(errors="replace")
    assert log.stat().st_size < 64 * 1024, text[-4000:]
    assert "connection limit" in text  # said, once in a while
    assert "Too many open files" not in text and "Traceback" not in text


# ---------------------------------------------------------------- the gate and the throttled log
class FakeConnection:
    def __init__(self, idle: bool = True) -> None:
        self.idle, self.dropped = idle, False

    def is_idle(self) -> bool:
        return self.idle

    def drop(self) -> None:
        self.dropped = True


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_over_a_cap_the_oldest_idle_connection_makes_room_else_the_new_one_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    gate = ConnectionGate(4, 3, ThrottledLog(logging.getLogger("test.gate"), clock=FakeClock()))
    busy, idle_old, idle_new = FakeConnection(idle=False), FakeConnection(), FakeConnection()
    assert all(gate.admit(c, "10.0.0.1") and gate.promote(c) for c in (busy, idle_old, idle_new))
    newcomer = FakeConnection(idle=False)
    assert gate.admit(newcomer, "10.0.0.1")  # nothing known of it yet: only the overall cap (4) counts
    assert gate.promote(newcomer)  # its request: per-address cap (3), the oldest idle one goes
    assert idle_old.dropped and not busy.dropped and not idle_new.dropped
    assert gate.count("10.0.0.1") == 3
    idle_new.idle = False  # now every connection of that address is busy
    late = FakeConnection(idle=False)
    assert gate.admit(late, "10.0.0.2")  # room overall
    assert not gate.promote(late) or gate.count("10.0.0.2") == 1
    gate.release(late)
    crowd = FakeConnection(idle=False)
    assert gate.admit(crowd, "10.0.0.1") and not gate.promote(crowd) and gate.refused == 1
    gate.release(crowd)
    other = FakeConnection()
    assert gate.admit(other, "10.0.0.2") and len(gate) == 4  # another address: room overall
    assert gate.admit(FakeConnection(), "10.0.0.3")  # overall cap (4): the only idle one goes
    assert other.dropped
    gate.release(newcomer)
    gate.release(newcomer)  # twice: no harm
    assert len(gate) == 3


def test_connections_without_an_authenticated_request_never_take_an_authenticated_place() -> None:
    """Issue 43: busy connections without the token (a request whose body drips in, one being
    refused) filled the per-address cap and the token holder got 503."""
    import logging

    gate = ConnectionGate(6, 2, ThrottledLog(logging.getLogger("test.gate"), clock=FakeClock()))
    flood = [FakeConnection(idle=False) for _ in range(5)]
    assert all(gate.admit(c, "127.0.0.1") for c in flood)  # never promoted: no token
    mine = FakeConnection(idle=False)
    assert gate.admit(mine, "127.0.0.1") and gate.promote(mine)
    second = FakeConnection(idle=False)
    assert gate.admit(second, "127.0.0.1")  # overall cap (6): the oldest unauthenticated one goes
    assert flood[0].dropped and not mine.dropped
    assert gate.promote(second) and gate.count("127.0.0.1") == 2
    third = FakeConnection(idle=False)
    assert gate.admit(third, "127.0.0.1") and flood[1].dropped
    assert not gate.promote(third)  # the token holder's own two busy connections: its cap
    assert not mine.dropped and not second.dropped


def test_a_flood_of_refusals_logs_one_line_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    clock = FakeClock()
    log = ThrottledLog(logging.getLogger("test.throttle"), every=10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.throttle"):
        sent = [log.warning("accept", "cannot accept connections (%s)", "EMFILE") for _ in range(50_000)]
        clock.now = 10.0
        log.warning("accept", "cannot accept connections (%s)", "EMFILE")
        log.warning("refuse", "connection limit")  # another kind has its own interval
    assert sent.count(True) == 1
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "cannot accept connections (EMFILE)",
        "cannot accept connections (EMFILE) (49999 more since the last such line)",
        "connection limit",
    ]
    assert json.dumps(lines)  # plain strings


def test_the_cap_leaves_the_servers_own_descriptors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connections, "fd_limits", lambda: (1024, 1024))
    # 1024 - (64 + 4 x 128 workers + 3 batches in flight x 64 accepted per wake-up) = 256
    assert connections.connection_cap(1024, 128, 64) == 256
    assert connections.connection_cap(100, 128, 64) == 100  # the setting, when lower
    monkeypatch.setattr(connections, "fd_limits", lambda: (256, 256))
    assert connections.connection_cap(1024, 128, 64) == connections.MIN_CONNECTIONS
    monkeypatch.setattr(connections, "fd_limits", lambda: (-1, -1))  # unlimited
    assert connections.connection_cap(1024, 128, 64) == 1024


# ---------------------------------------------------------------- over real sockets, in-process
HEALTH = b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
SLOW_POST = (
    b"POST /notes HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n{"
)


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def test_idle_connections_make_room_and_busy_ones_get_a_503_not_a_reset() -> None:
    from ragchat.serving.asgi import Limits

    from tests.integration.serving_support import WAIT, serving

    limits = Limits(max_connections=4, max_connections_per_ip=2, body_timeout=WAIT, header_timeout=WAIT)
    with serving("serve", limits=limits) as served:
        idle = [socket.create_connection(("127.0.0.1", served.port), timeout=WAIT) for _ in range(4)]
        with socket.create_connection(("127.0.0.1", served.port), timeout=WAIT) as client:
            client.sendall(HEALTH)
            assert _answer(client)[0] == 200  # an idle connection made room (overall cap)
        assert idle[0].recv(1) == b""  # the oldest idle one, closed by the server
        busy = [socket.create_connection(("127.0.0.1", served.port), timeout=WAIT) for _ in range(2)]
        try:
            for sock in busy:  # still sending their bodies: requests in progress
                sock.sendall(SLOW_POST)
            assert idle[1].recv(1) == b""  # pushed out by them
            with socket.create_connection(("127.0.0.1", served.port), timeout=WAIT) as client:
                client.sendall(HEALTH)
                status, headers, body = _answer(client)  # a reset would raise here
            assert (status, headers.get("retry-after")) == (503, "1")
            assert "too many open connections" in json.loads(body)["error"]
        finally:
            for sock in busy + idle:
                sock.close()
