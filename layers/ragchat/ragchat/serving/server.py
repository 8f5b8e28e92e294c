"""The HTTP server: uvicorn (HTTP/1.1 over h11, no extras) running ``GatewayApp``.

Chosen over ``http.server`` for its listen backlog, keep-alive handling, asyncio connections (a slow
client costs no thread) and maintenance; over hypercorn/granian for its size (uvicorn + h11 + click
≈ 2 MB, ~15 ms to import) and plain-Python install. Added here: a header read timeout (uvicorn has
none: a client that never finishes its headers would keep the connection forever), protocol errors
answered as JSON instead of uvicorn's text/plain, and the connection limits of
``ragchat.serving.connections`` (caps overall and per address, the oldest idle connection closed to
make room, throttled logs of refusals and ``accept()`` errors). ``Limits.backlog`` is the kernel's
listen queue; asyncio accepts ``Limits.accept_batch`` connections per wake-up (it used the backlog for
both: 2048 failed ``accept()`` calls, each logged, per wake-up once descriptors ran out).

``HttpServer`` mimics the bits of ``socketserver`` callers use: ``server_address``, ``serve_forever()``,
``shutdown()``, ``server_close()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
from collections.abc import Sequence
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ragchat.serving.asgi import GatewayApp, Limits
from ragchat.serving.connections import ConnectionGate, ThrottledLog, connection_cap
from ragchat.serving.events import Gateway

logger = logging.getLogger("ragchat.serve")


def raw_json_response(status: int, reason: str, message: str, *, retry_after: int | None = None) -> bytes:
    """A complete ``Connection: close`` JSON response, for errors before h11 has a request to answer."""
    body = json.dumps({"error": message}).encode("utf-8")
    retry = f"retry-after: {retry_after}\r\n" if retry_after is not None else ""
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n{retry}"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def _unread_bytes(transport: asyncio.BaseTransport) -> int:
    """Bytes the kernel holds for this connection that the server has not read yet (0 if unknown):
    a client whose request is already on its way is not idle, even before the loop reads it."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        import array
        import fcntl
        import termios

        buf = array.array("i", [0])
        fcntl.ioctl(sock.fileno(), termios.FIONREAD, buf)
        return int(buf[0])
    except (ImportError, OSError, ValueError):
        return 0


BUSY_MESSAGE = "Server busy: too many open connections; retry in 1 s"
LINGERING = 64  # refused connections waiting (up to 1 s) for their request, to answer 503, not reset


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol plus a header read timeout, JSON protocol errors and the connection
    gate (a connection over the caps is answered 503 and closed; its request is never parsed)."""

    header_timeout = 10.0  # set per server by ``protocol_for``
    max_header_bytes = 64 * 1024
    gate: ConnectionGate | None = None
    _refused = False  # answered 503 by the gate: what the client sends is dropped

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        if self.gate is not None and not self.gate.admit(self, (self.client or ("-",))[0]):
            self._refuse(transport)
            return
        # Headers and body are separate writes: without TCP_NODELAY, Nagle + delayed ACK add ~40 ms to
        # every keep-alive response (asyncio sets it only on sockets created with IPPROTO_TCP).
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._arm_header_timer()

    def _refuse(self, transport: asyncio.Transport) -> None:
        """Answer 503 and close once the client's request (if any comes within a second) is read and
        dropped: closing with unread data would reset the connection, and the client would see a reset
        instead of the 503. A connection that has sent nothing yet waits so only while fewer than
        ``LINGERING`` do; past that it is closed at once."""
        transport.write(raw_json_response(503, "Service Unavailable", BUSY_MESSAGE, retry_after=1))
        gate = self.gate
        if gate is None or (gate.lingering >= LINGERING and _unread_bytes(transport) == 0):
            transport.close()
            return
        gate.lingering += 1
        self._refused = True  # ``data_received`` drops what was sent, then closes
        self.loop.call_later(1.0, transport.close)  # at the latest

    def is_idle(self) -> bool:
        """No request in progress and nothing waiting to be read: closing it loses no one's answer
        (a keep-alive connection between requests, or one that has sent part of its headers at most)."""
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return False
        if self.cycle is not None and not self.cycle.response_complete:
            return False
        return _unread_bytes(self.transport) == 0

    def drop(self) -> None:
        """Closed by the gate to make room (the oldest idle connection)."""
        self._disarm_header_timer()
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            self.transport.close()
            return
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm_header_timer()  # part of a request line / headers so far
        else:
            self._disarm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        if self.gate is not None:
            self.gate.release(self)
            if self._refused:
                self.gate.lingering -= 1
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        self._disarm_header_timer()  # idle now: uvicorn's keep-alive timeout takes over
        super().on_response_complete()

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being answered (pipelined data waits for it)
        pending, _closed = self.conn.trailing_data
        if pending:
            message = f"Request timeout: headers not received within {self.header_timeout:g} s"
            self.transport.write(raw_json_response(408, "Request Timeout", message))
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        pending, _closed = self.conn.trailing_data
        first_line, crlf, _rest = pending.partition(b"\r\n")
        if len(pending) >= self.max_header_bytes and not crlf:
            status, reason, message = 414, "URI Too Long", "URI too long"
        elif len(pending) >= self.max_header_bytes:
            status, reason, message = 431, "Request Header Fields Too Large", "Request headers too large"
        else:
            status, reason, message = 400, "Bad Request", "Bad request: malformed HTTP request"
        _ = first_line
        self.transport.write(raw_json_response(status, reason, message))
        self.transport.close()


def protocol_for(limits: Limits, gate: ConnectionGate | None = None) -> type[GuardedH11Protocol]:
    """A protocol class carrying these limits and the server's gate (uvicorn builds one instance per
    connection)."""
    return type(
        "RagchatH11Protocol",
        (GuardedH11Protocol,),
        {"header_timeout": limits.header_timeout, "max_header_bytes": limits.max_header_bytes, "gate": gate},
    )


class ListeningSocket(socket.socket):
    """A socket whose listen queue stays what ``bind`` chose: asyncio calls ``listen(n)`` again with
    the number of connections it accepts per wake-up (``Limits.accept_batch``), a different knob."""

    queue = 128

    def listen(self, backlog: int | None = None) -> None:
        super().listen(self.queue)


def bind(host: str, port: int, backlog: int) -> socket.socket:
    """A listening socket (port 0 picks a free one); ``OSError`` if the address is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = ListeningSocket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.queue = backlog
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class HttpServer:
    """uvicorn serving ``gateway`` on a socket bound at construction (so the port is known at once)."""

    def __init__(
        self,
        gateway: Gateway,
        address: tuple[str, int],
        limits: Limits | None = None,
        *,
        trusted_proxies: Sequence[str] = (),
    ) -> None:
        """``trusted_proxies``: the peers whose ``X-Forwarded-For``/``-Proto`` uvicorn believes (addresses
        or CIDR ranges). None by default: the client address is the socket's peer, whatever a client
        claims in a header (uvicorn's own default would trust any local process)."""
        self.limits = limits = limits or Limits()
        self.app = GatewayApp(gateway, limits)
        self.socket = bind(address[0], address[1], limits.backlog)
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        self.throttled = ThrottledLog(logger)
        cap = connection_cap(limits.max_connections, limits.max_concurrency, limits.accept_batch)
        self.gate = ConnectionGate(cap, min(cap, limits.max_connections_per_ip), self.throttled)
        logger.info("at most %d connections (%d per address)", self.gate.max_total, self.gate.max_per_ip)
        config = uvicorn.Config(
            self.app,
            http=protocol_for(limits, self.gate),
            lifespan="off",
            log_config=None,
            access_log=False,
            backlog=limits.accept_batch,  # asyncio: accepts per wake-up (the listen queue: ``bind``)
            timeout_graceful_shutdown=max(1, round(self.limits.graceful_shutdown)),
            h11_max_incomplete_event_size=self.limits.max_header_bytes,
            server_header=False,
            date_header=True,
            proxy_headers=bool(trusted_proxies),
            forwarded_allow_ips=list(trusted_proxies) or None,
        )
        config.timeout_keep_alive = self.limits.keep_alive  # type: ignore[assignment]  # float is fine
        self.uvicorn = uvicorn.Server(config)
        self._started = False
        self._done = threading.Event()

    def serve_forever(self) -> None:
        """Serve until ``shutdown()`` (or SIGINT/SIGTERM when run on the main thread)."""
        self._started = True
        try:
            asyncio.run(self._serve(), loop_factory=self.uvicorn.config.get_loop_factory())
        finally:
            self._done.set()

    async def _serve(self) -> None:
        asyncio.get_running_loop().set_exception_handler(self._loop_error)
        await self.uvicorn.serve(sockets=[self.socket])

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """``accept()`` out of descriptors (or memory): asyncio retries each second and logged every
        failure with its traceback; one line per 10 s here. Anything else as asyncio logs it."""
        if context.get("message") == "socket.accept() out of system resource":
            error = context.get("exception")
            self.throttled.warning("accept", "cannot accept connections (%s); retrying", error)
            return
        loop.default_exception_handler(context)

    def shutdown(self) -> None:
        """Ask the server to stop and wait (up to the graceful timeout + 5 s) until it has."""
        self.uvicorn.should_exit = True
        if self._started:
            self._done.wait(self.limits.graceful_shutdown + 5)

    def server_close(self) -> None:
        with contextlib.suppress(OSError):
            self.socket.close()
        self.app.close()

    def __repr__(self) -> str:
        return f"HttpServer({self.server_address!r})"
