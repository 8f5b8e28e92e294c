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
from ragchat.serving.connections import (
    BUSY_MESSAGE,
    CONNECTION_KEY,
    ConnectionGate,
    ThrottledLog,
    connection_cap,
)
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


class _ClosingTransport:
    """The connection's transport as uvicorn sees it: ``close()`` asks the protocol, which closes at
    once or lingers (``GuardedH11Protocol._close``); everything else is the transport's own."""

    def __init__(self, transport: asyncio.Transport, protocol: GuardedH11Protocol) -> None:
        self._transport, self._protocol = transport, protocol

    def close(self) -> None:
        self._protocol._close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


LINGERING = 64  # refused connections waiting (up to 1 s) for their request, to answer 503, not reset


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol plus a header read timeout, JSON protocol errors, the connection
    gate (a connection over the caps is answered 503 and closed; its request is never parsed) and a
    short lingering close for answers sent before the request's body was read (``_close``)."""

    header_timeout = 10.0  # set per server by ``protocol_for``
    max_header_bytes = 64 * 1024
    linger_bytes = 32 * 1024 * 1024
    linger_s = 1.0
    gate: ConnectionGate | None = None
    _refused = False  # answered 503 by the gate: what the client sends is dropped
    _lingering = False  # answered before its body was read: closing (``_close``)
    _lost = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._raw = transport
        self.transport = _ClosingTransport(transport, self)  # type: ignore[assignment]
        self._header_timer: asyncio.TimerHandle | None = None
        self._linger_timer: asyncio.TimerHandle | None = None
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

    def _close(self) -> None:
        """Close the connection. One whose request body is still coming (a request refused from its
        headers: token, site, size or rate limit; a body too slow) is not closed outright, which would
        reset it before the client read the answer, nor drained, which let a client dripping a 10 MB
        body hold its place for the body timeout (issue 43): its answer is sent, its write side shut,
        and what still comes is dropped as it arrives for at most ``linger_s`` (up to ``linger_bytes``),
        so a client still sending reads the answer instead of a reset; meanwhile it counts as idle,
        the first connection any new one pushes out."""
        raw = self._raw
        if self._lost or self._lingering or raw.is_closing():
            raw.close()
            return
        if self.conn.their_state is not h11.SEND_BODY and _unread_bytes(raw) == 0:
            raw.close()
            return
        self._lingering = True
        self._linger_left = self.linger_bytes
        self._disarm_header_timer()
        try:
            raw.write_eof()  # the answer, then FIN: the client reads it even if it keeps sending
        except (OSError, RuntimeError, NotImplementedError):
            raw.close()
            return
        self.flow.resume_reading()
        self._linger_timer = self.loop.call_later(self.linger_s, raw.close)

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None:  # the request's task has not run yet: its scope names this connection
            scope: dict[str, Any] = self.cycle.scope  # type: ignore[assignment]
            scope.setdefault(CONNECTION_KEY, self)

    def promote(self) -> bool:
        """The request on this connection is authenticated: it counts against its address's cap now
        (``ConnectionGate.promote``); ``False``: that cap is full of busy ones (answer 503)."""
        return self.gate is None or self.gate.promote(self)

    def is_spent(self) -> bool:
        """Answered and closing (lingering): the first connection to close to make room."""
        return self._lingering

    def is_idle(self) -> bool:
        """No request in progress and nothing waiting to be read: closing it loses no one's answer
        (a keep-alive connection between requests, or one that has sent part of its headers at most,
        or one answered already and lingering)."""
        if self._lingering:
            return True
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return False
        if self.cycle is not None and not self.cycle.response_complete:
            return False
        return _unread_bytes(self.transport) == 0

    def drop(self) -> None:
        """Closed by the gate to make room (the oldest idle connection)."""
        self._disarm_header_timer()
        self._raw.close()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            self.transport.close()
            return
        if self._lingering:  # the rest of a refused body: dropped, up to ``linger_bytes``
            self._linger_left -= len(data)
            if self._linger_left <= 0:
                self._raw.close()
            return
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm_header_timer()  # part of a request line / headers so far
        else:
            self._disarm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._disarm_header_timer()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
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
        {
            "header_timeout": limits.header_timeout,
            "max_header_bytes": limits.max_header_bytes,
            "linger_bytes": limits.linger_bytes,
            "linger_s": limits.linger_s,
            "gate": gate,
        },
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
