"""The ASGI application in front of the resolver: each HTTP request becomes an API Gateway event
(``ragchat.serving.events``), is resolved on a worker thread, and the proxy response is written back.

What it adds to the resolver: bounded concurrency (503 + ``Retry-After`` when ``max_concurrency``
requests are in flight), a body read timeout (408), the body limit before reading (413), the token check
before reading, every error as JSON ``{"error": ...}``, and streaming: an iterator body is written
and flushed chunk by chunk as the route produces it, and closed when the client hangs up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.message import Message
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from ragchat.domain.file_errors import body_too_large
from ragchat.serving.connections import BUSY_MESSAGE, CONNECTION_KEY
from ragchat.serving.events import Gateway, response_body, response_headers

if TYPE_CHECKING:
    from ragchat.config import Settings

logger = logging.getLogger("ragchat.serve")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

DONE = object()  # what ``next`` returns at the end of a streamed body
OPEN_BODY_BYTES = 1024  # the largest body a route served without the token reads (its pages take none)
HOP_BY_HOP = frozenset({"content-length", "connection", "transfer-encoding"})


@dataclass(frozen=True)
class Limits:
    """The serving limits (docs/architecture.md, "Reliability"); tests pass small values."""

    backlog: int = 2048  # listen queue (the kernel caps it at net.core.somaxconn)
    accept_batch: int = 64  # connections accepted per wake-up of the listening socket (asyncio's loop)
    max_connections: int = 1024  # open connections at once (also capped by the descriptor limit)
    max_connections_per_ip: int = 256  # open connections from one client address
    max_concurrency: int = 128  # requests in flight (streams included); more answer 503
    retry_after: int = 1  # seconds, in the 503's Retry-After
    header_timeout: float = 10.0  # a request's headers must arrive within this (else 408, closed)
    body_timeout: float = 30.0  # the whole declared body must arrive within this (else 408, closed)
    keep_alive: float = 5.0  # an idle keep-alive connection is closed after this
    # a request answered before its body was read (refused from its headers): its connection closes
    # after this long, or this many more bytes of it dropped unread (a client still sending then reads
    # the answer, not a reset); meanwhile it counts against no one's cap (``ConnectionGate``)
    linger_s: float = 1.0
    linger_bytes: int = 32 * 1024 * 1024
    max_url_bytes: int = 16 * 1024  # path + query (longer: 414)
    max_header_bytes: int = 64 * 1024  # all header lines (larger: 431)
    sse_keep_alive: float = 15.0  # an SSE comment after this long without an event
    graceful_shutdown: float = 5.0  # seconds in-flight requests get on shutdown

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        """The limits the ``SERVE_*`` settings choose (the rest at their defaults)."""
        return cls(
            backlog=settings.serve_backlog,
            max_connections=settings.serve_max_connections,
            max_connections_per_ip=settings.serve_max_connections_per_ip,
            max_concurrency=settings.serve_max_concurrency,
            header_timeout=settings.serve_header_timeout_s,
            body_timeout=settings.serve_body_timeout_s,
            keep_alive=settings.serve_keepalive_s,
        )


class ClientGone(Exception):
    """The client hung up before its request was read."""


class Exchange:
    """One request/response: what was sent (for the access log) and JSON answers."""

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope, self.receive, self._send = scope, receive, send
        self.status = 500
        self.size = 0
        self.started = False

    async def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.status, self.started = status, True
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1", "replace")) for k, v in headers]
        await self._send({"type": "http.response.start", "status": status, "headers": raw})

    async def body(self, data: bytes, *, more: bool = False) -> None:
        self.size += len(data)
        await self._send({"type": "http.response.body", "body": data, "more_body": more})

    async def json(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None, *, close: bool = False
    ) -> None:
        data = json.dumps(body).encode("utf-8")
        extra = [("Connection", "close")] if close else []
        all_headers = [("Content-Type", "application/json"), *(headers or {}).items(), *extra]
        await self.start(status, [*all_headers, ("Content-Length", str(len(data)))])
        await self.body(data)


class GatewayApp:
    """ASGI 3 application over a ``Gateway`` (see the module docstring)."""

    def __init__(self, gateway: Gateway, limits: Limits) -> None:
        self.gateway = gateway
        self.limits = limits
        self.in_flight = 0
        self.executor = ThreadPoolExecutor(max_workers=limits.max_concurrency, thread_name_prefix="ragchat")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        scope = origin_form(scope)
        exchange = Exchange(scope, receive, send)
        try:
            await self._admit(exchange)
        finally:
            ms = (time.perf_counter() - started) * 1000
            client = (scope.get("client") or ("-",))[0]
            logger.info(
                '%s "%s %s" %d %d %.1fms', client, scope["method"], _logged(scope), exchange.status,
                exchange.size, ms,
            )  # fmt: skip

    async def _admit(self, exchange: Exchange) -> None:
        try:
            await self._serve(exchange)
        except (ClientGone, OSError):
            logger.info("client disconnected (%s)", _logged(exchange.scope))
        except Exception:
            logger.exception("unhandled error serving %s", _logged(exchange.scope))
            if not exchange.started:
                await exchange.json(500, {"error": "Internal server error"}, close=True)

    async def _serve(self, exchange: Exchange) -> None:
        scope = exchange.scope
        method, target = scope["method"], _target(scope)
        too_big = _oversized(scope, target, self.limits)
        if too_big is not None:
            await exchange.json(*too_big, close=True)
            return
        headers = _headers(scope)
        refused = self.gateway.refusal(method, scope["path"], headers)
        length = _declared_length(headers)
        path = scope["path"]
        if refused is None and (length or 0) > OPEN_BODY_BYTES and self.gateway.is_open(method, path):
            # served without the token: a body there could only hold a place at no cost to its sender
            refused = 413, {"error": f"Request body too large: {method} {path} takes none"}, {}
        if refused is not None:
            # Answered from the headers: the body is not read (the server's lingering close drops a
            # few KB of it at most, so the client reads the answer) and the connection is closed.
            await exchange.json(*refused, close=True)
            return
        client_ip = (scope.get("client") or ("127.0.0.1",))[0]
        refused = self.gateway.limit_refusal(method, target, headers, client_ip)
        if refused is not None:  # over a rate limit: the body is neither read nor parsed
            await exchange.json(*refused, close=True)
            return
        problem = _framing_problem(headers, length, self.gateway.body_limit, scope["path"])
        if problem is not None:
            await exchange.json(*problem, close=True)
            return
        connection = scope.get(CONNECTION_KEY)
        if connection is not None and not self.gateway.is_open(method, path) and not connection.promote():
            # its address's authenticated connections are all busy (connections without the token
            # are not counted: ``ConnectionGate``)
            retry = str(self.limits.retry_after)
            await exchange.json(503, {"error": BUSY_MESSAGE}, {"Retry-After": retry}, close=True)
            return
        try:
            body = await asyncio.wait_for(_read_body(exchange.receive), self.limits.body_timeout)
        except TimeoutError:
            message = f"Request timeout: body not received within {self.limits.body_timeout:g} s"
            await exchange.json(408, {"error": message}, close=True)
            return
        # Reading costs no thread; resolving and streaming do: only they take a slot.
        if self.in_flight >= self.limits.max_concurrency:
            retry = str(self.limits.retry_after)
            message = f"Server busy: {self.in_flight} requests in flight; retry in {retry} s"
            await exchange.json(503, {"error": message}, {"Retry-After": retry}, close=True)
            return
        self.in_flight += 1
        try:
            event = self.gateway.event_for(method, target, headers, body, client_ip)
            self.gateway.mark_checked(event[0])
            await self._respond(exchange, event, headers)
        finally:
            self.in_flight -= 1

    async def _respond(
        self, exchange: Exchange, event_and_context: tuple[dict[str, Any], Any], request: Message
    ) -> None:
        """Resolve on a worker thread and write the proxy response (a streamed body chunk by chunk)."""
        event, context = event_and_context
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        result = await loop.run_in_executor(self.executor, self.gateway.resolve, event, context)
        app_ms = (time.perf_counter() - t0) * 1000
        out = [*response_headers(result), ("Server-Timing", f"app;dur={app_ms:.1f}")]
        out = [(k, v) for k, v in self.gateway.response_headers(request, out) if k.lower() not in HOP_BY_HOP]
        out.append(("x-request-id", event["requestContext"]["requestId"]))
        status = int(result.get("statusCode", 200))
        payload = response_body(result)
        if isinstance(payload, bytes):
            length = str(len(payload))  # a HEAD answer tells the length of what GET would send
            if exchange.scope["method"] == "HEAD" or status in (204, 304):
                payload = b""
            await exchange.start(status, [*out, ("Content-Length", length)])
            await exchange.body(payload)
            return
        await self._stream(exchange, status, out, payload)

    async def _stream(
        self, exchange: Exchange, status: int, headers: list[tuple[str, str]], chunks: Iterator[Any]
    ) -> None:
        """Write each chunk when the route yields it; a hang-up closes the iterator (GeneratorExit at its
        current ``yield``: the service stores the partial answer ``interrupted``)."""
        loop = asyncio.get_running_loop()
        gone = asyncio.Event()
        watcher = asyncio.ensure_future(_watch_disconnect(exchange.receive, gone))
        extra = [("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no"), ("Connection", "close")]
        sse = any(k.lower() == "content-type" and "text/event-stream" in v.lower() for k, v in headers)
        try:
            await exchange.start(status, [*headers, *extra])
            while not gone.is_set():
                chunk = await self._next_chunk(exchange, chunks, keep_alive=sse)
                if chunk is DONE or gone.is_set():
                    break
                data = chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
                if data:
                    await exchange.body(data, more=True)
            if not gone.is_set():
                await exchange.body(b"")
        finally:
            watcher.cancel()
            close = getattr(chunks, "close", None)
            if callable(close):
                if gone.is_set():
                    logger.info("client disconnected during a stream (%s)", _logged(exchange.scope))
                await loop.run_in_executor(self.executor, close)

    async def _next_chunk(self, exchange: Exchange, chunks: Iterator[Any], *, keep_alive: bool) -> Any:
        """The iterator's next chunk (``DONE`` at its end), produced on a worker thread. An event stream
        gets an SSE comment each ``sse_keep_alive`` seconds without a chunk, so API Gateway and proxies
        don't take a slow answer for an idle connection."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.executor, next, chunks, DONE)
        if not keep_alive:
            return await future
        while True:
            try:
                return await asyncio.wait_for(asyncio.shield(future), self.limits.sse_keep_alive)
            except TimeoutError:
                await exchange.body(b": keep-alive\n\n", more=True)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


async def _read_body(receive: Receive, *, keep: bool = True) -> bytes:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        if keep:
            parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


async def _watch_disconnect(receive: Receive, gone: asyncio.Event) -> None:
    with contextlib.suppress(Exception):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
                return


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def origin_form(scope: Scope) -> Scope:
    """The request as if its target were in origin form (``/health?x=1``). HTTP/1.1 servers must
    accept the absolute form too (``GET http://127.0.0.1:8000/health``, RFC 9112 §3.2.2): its path
    and query are taken from the URL and its authority replaces ``Host`` (RFC 9112 §3.2.2 again), so
    every check made on the path (the open routes, the upload receiver, the rate limits) and on the
    host sees what it would for the usual form."""
    path = scope.get("path") or ""
    if not path[:8].lower().startswith(("http://", "https://")):
        return scope
    raw = (scope.get("raw_path") or path.encode("utf-8")).decode("latin-1")
    url = urlsplit(raw)
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"host"]
    if url.netloc:
        headers.append((b"host", url.netloc.encode("latin-1")))
    origin = url.path or "/"
    return {
        **scope,
        "path": unquote(origin),
        "raw_path": origin.encode("latin-1"),
        "query_string": url.query.encode("latin-1") or scope.get("query_string", b""),
        "headers": headers,
    }


def _headers(scope: Scope) -> Message:
    headers = Message()
    for name, value in scope["headers"]:
        headers[name.decode("latin-1")] = value.decode("latin-1")
    return headers


def _logged(scope: Scope) -> str:
    """The request target as logs may show it (no query values, no upload tokens)."""
    from ragchat.observability import redact_target

    return redact_target(_target(scope))


def _target(scope: Scope) -> str:
    raw = scope.get("raw_path") or scope["path"].encode("utf-8")
    query = scope.get("query_string") or b""
    target = raw.decode("latin-1")
    return f"{target}?{query.decode('latin-1')}" if query else target


def _oversized(scope: Scope, target: str, limits: Limits) -> tuple[int, dict[str, Any]] | None:
    if len(target) > limits.max_url_bytes:
        return 414, {"error": f"URI too long: {len(target)} bytes (limit {limits.max_url_bytes} bytes)"}
    size = sum(len(k) + len(v) + 4 for k, v in scope["headers"])
    if size > limits.max_header_bytes:
        return 431, {
            "error": f"Request headers too large: {size} bytes (limit {limits.max_header_bytes} bytes)"
        }
    return None


def _declared_length(headers: Message) -> int | None:
    try:
        return int(headers.get("Content-Length") or 0)
    except ValueError:
        return None


def _framing_problem(
    headers: Message, length: int | None, limit: int, path: str
) -> tuple[int, dict[str, Any]] | None:
    if (headers.get("Transfer-Encoding") or "").lower() == "chunked":
        return 411, {"error": "Length required: send a Content-Length header"}
    if length is None or length < 0:
        return 400, {"error": "Invalid Content-Length"}
    if length > limit:
        return 413, {"error": body_too_large(length, limit, path)}
    return None
