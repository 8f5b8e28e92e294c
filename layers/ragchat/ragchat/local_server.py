"""``ragchat serve``: a local API Gateway.

Each HTTP request becomes an API Gateway REST (v1 proxy) event and goes through the very resolver
the Lambda functions use (``ragchat.api.app.create_app``); the response dict is written back as HTTP.

Auth: with ``RAGCHAT_API_TOKEN`` set, every request but ``/health``, a ``GET`` of one of the HTML page
shells (``/ui``, ``/write``, ``/documents/ui``: no user data; the page asks for the token itself) and
CORS preflights needs ``Authorization: Bearer <token>`` (else 401). The principal injected into the event
(``requestContext.authorizer.claims.sub``) is ``RAGCHAT_LOCAL_USER`` (default ``local``).

Streaming hook (SSE, for the chat area)
---------------------------------------
A route streams by returning a Powertools ``Response`` whose ``body`` is an *iterator* of ``str`` or
``bytes`` chunks (e.g. ``Response(200, "text/event-stream", body=generator())``). Powertools passes a
non-str body through untouched, so ``resolve()`` returns a dict whose ``"body"`` is that iterator. This
server then writes the status and headers at once (no Content-Length, ``Cache-Control: no-cache``,
connection closed at the end) and writes + flushes each chunk as it is produced.

- Client disconnects: the server stops iterating and calls ``body.close()``, which raises
  ``GeneratorExit`` inside the generator at its current ``yield``: use ``try/finally`` (or catch
  ``GeneratorExit``) to stop generation and store the partial answer marked ``interrupted``.
- The generator runs *after* ``resolve()`` has returned and the resolver has gone back to its pool:
  capture the principal, ids and services you need before the first ``yield``; never read
  ``app.current_event`` inside the generator.
- Errors raised before the first chunk should be raised by the route itself (normal JSON error
  mapping); errors inside the generator should be yielded as an SSE ``error`` event (SPEC §10), since
  the 200 status is already sent.
- In Lambda a buffered proxy integration cannot stream; the cloud streams through the separate
  ``chat_stream`` function behind the Lambda Web Adapter, which runs this server's machinery
  (``ragchat.lambda_web``). Routes learn that the response is streamed from the context object:
  ``LocalContext.streams_response`` is true (a real Lambda context has no such attribute).

Concurrency: Powertools keeps the current event and context on a *class* attribute
(``BaseRouter.current_event``), shared by every resolver in the process, so concurrent requests would
see each other's event. Each request therefore takes a resolver from a small pool (one per concurrent
request; building one is about a millisecond) and the pool pins the event and context on that
resolver *instance* before resolving; the routers of a resolver read them from there.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

logger = logging.getLogger("ragchat.serve")

STAGE = "$default"
DRAIN_LIMIT = 64 * 1024 * 1024  # bytes of an oversized body read and dropped after the 413
TEXT_TYPES = ("text/", "application/json", "application/x-www-form-urlencoded", "application/xml")

Refusal = tuple[int, dict[str, Any], dict[str, str]]  # status, JSON body, extra headers
# Served without the bearer token: the page shells hold no user data (``ragchat.api.pages``).
OPEN_PAGES = frozenset({"/ui", "/write", "/documents/ui"})


class ResolverPool:
    """Hands out resolvers one request at a time; builds another when all are busy."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._free: list[Any] = []
        self._lock = threading.Lock()

    def prime(self) -> ResolverPool:
        """Build one resolver now, so route errors surface at start rather than on the first request."""
        self._free.append(self._factory())
        return self

    def resolve(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        context = context if context is not None else LocalContext(event["requestContext"]["requestId"])
        with self._lock:
            app = self._free.pop() if self._free else None
        if app is None:
            app = self._factory()
        try:
            # Instance attributes win over Powertools' process-wide class attributes (module docstring).
            app.current_event = app._to_proxy_event(event)
            app.lambda_context = context
            result: dict[str, Any] = app.resolve(event, context)
            return result
        finally:
            with self._lock:
                self._free.append(app)


class LocalContext:
    """The bits of a Lambda context the Powertools utilities read."""

    streams_response = True  # the server writes an iterator body as it is produced (module docstring)
    function_name = "ragchat-local"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:local:000000000000:function:ragchat-local"
    memory_limit_in_mb = 1024
    log_group_name = "/aws/lambda/ragchat-local"
    log_stream_name = "local"

    def __init__(self, request_id: str) -> None:
        self.aws_request_id = request_id

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def build_event(
    method: str,
    raw_path: str,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    *,
    source_ip: str = "127.0.0.1",
    principal: str | None = None,
    request_id: str | None = None,
    now: float | None = None,
    request_context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An API Gateway REST (v1 proxy) event for one HTTP request. ``request_context`` (API Gateway's
    own, as the Lambda Web Adapter forwards it) replaces the local values key by key."""
    split = urlsplit(raw_path)
    path = unquote(split.path) or "/"
    single: dict[str, str] = {}
    multi: dict[str, list[str]] = {}
    for name, value in headers:
        single[name] = value
        multi.setdefault(name, []).append(value)
    qs_single: dict[str, str] = {}
    qs_multi: dict[str, list[str]] = {}
    for key, value in parse_qsl(split.query, keep_blank_values=True):
        qs_single[key] = value
        qs_multi.setdefault(key, []).append(value)
    content_type = next((v for k, v in single.items() if k.lower() == "content-type"), "")
    body_text: str | None
    is_b64 = False
    if not body:
        body_text = None
    elif _is_text(content_type):
        try:
            body_text = body.decode("utf-8")
        except UnicodeDecodeError:
            body_text, is_b64 = base64.b64encode(body).decode("ascii"), True
    else:
        body_text, is_b64 = base64.b64encode(body).decode("ascii"), True
    request_id = request_id or str(uuid.uuid4())
    epoch_ms = int((now if now is not None else time.time()) * 1000)
    authorizer: dict[str, Any] = {}
    if principal:
        authorizer = {"claims": {"sub": principal}, "principalId": principal}
    context: dict[str, Any] = {
        "resourcePath": "/{proxy+}",
        "httpMethod": method.upper(),
        "path": path,
        "stage": STAGE,
        "requestId": request_id,
        "requestTimeEpoch": epoch_ms,
        "protocol": "HTTP/1.1",
        "accountId": "000000000000",
        "apiId": "local",
        "identity": {"sourceIp": source_ip, "userAgent": single.get("User-Agent")},
        "authorizer": authorizer,
        **(request_context or {}),
    }
    return {
        "resource": context["resourcePath"],
        "path": path,
        "httpMethod": method.upper(),
        "headers": single,
        "multiValueHeaders": multi,
        "queryStringParameters": qs_single or None,
        "multiValueQueryStringParameters": qs_multi or None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": context,
        "body": body_text,
        "isBase64Encoded": is_b64,
    }


def _is_text(content_type: str) -> bool:
    ctype = content_type.lower()
    if not ctype:
        return True
    return ctype.startswith(TEXT_TYPES) or "+json" in ctype or "charset=" in ctype


def response_headers(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Flatten ``headers`` and ``multiValueHeaders`` of a proxy response (multi wins for a name)."""
    out: list[tuple[str, str]] = []
    multi = result.get("multiValueHeaders") or {}
    seen = {name.lower() for name in multi}
    for name, value in (result.get("headers") or {}).items():
        if name.lower() not in seen:
            out.append((name, str(value)))
    for name, values in multi.items():
        for value in values:
            out.append((name, str(value)))
    return out


def response_body(result: Mapping[str, Any]) -> bytes | Iterator[Any]:
    body = result.get("body")
    if body is None:
        return b""
    if isinstance(body, str):
        return base64.b64decode(body) if result.get("isBase64Encoded") else body.encode("utf-8")
    if isinstance(body, bytes):
        return body
    chunks: Iterator[Any] = iter(body)  # streaming route (see module docstring)
    return chunks


class _Handler(BaseHTTPRequestHandler):
    server: RagchatHTTPServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without TCP_NODELAY, Nagle + delayed ACK add ~40 ms
    # to every keep-alive response.
    disable_nagle_algorithm = True
    server_version = "ragchat"
    sys_version = ""

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug(format, *args)

    def _handle(self) -> None:
        started = time.perf_counter()
        status = 500
        size = 0
        try:
            status, size = self._dispatch()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            ms = (time.perf_counter() - started) * 1000
            logger.info(
                '%s "%s %s" %d %d %.1fms', self.client_address[0], self.command, self.path, status, size, ms
            )

    def _dispatch(self) -> tuple[int, int]:
        srv = self.server
        refused = srv.refusal(self.command, urlsplit(self.path).path, self.headers)
        if refused is not None:
            # The body was not read: it must not be taken for the next request on this connection.
            self.close_connection = True
            answer = self._send_json(*refused)
            self._discard(min(self._content_length(), DRAIN_LIMIT))
            return answer
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._send_json(411, {"error": "Length required: send a Content-Length header"})
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return self._send_json(400, {"error": "Invalid Content-Length"})
        if length > srv.body_limit:
            # Answer before reading the body; then discard a bounded amount of it so a client that is
            # still sending sees the 413 instead of a connection reset.
            self.close_connection = True
            answer = self._send_json(
                413, {"error": f"Payload too large: {length} bytes (limit {srv.body_limit} bytes)"}
            )
            self._discard(min(length, DRAIN_LIMIT))
            return answer
        body = self.rfile.read(length) if length > 0 else b""
        event, context = srv.event_for(self.command, self.path, self.headers, body, self.client_address[0])
        t0 = time.perf_counter()
        result = srv.resolve(event, context)
        app_ms = (time.perf_counter() - t0) * 1000
        status = int(result.get("statusCode", 200))
        headers = [*response_headers(result), ("Server-Timing", f"app;dur={app_ms:.1f}")]
        payload = response_body(result)
        if isinstance(payload, bytes):
            return self._send(status, headers, payload, request_id=event["requestContext"]["requestId"])
        return self._stream(status, headers, payload, request_id=event["requestContext"]["requestId"])

    def _content_length(self) -> int:
        try:
            return max(int(self.headers.get("Content-Length") or 0), 0)
        except ValueError:
            return 0

    def _discard(self, remaining: int) -> None:
        try:
            self.connection.settimeout(5)
            while remaining > 0:
                chunk = self.rfile.read(min(remaining, 1 << 16))
                if not chunk:
                    break
                remaining -= len(chunk)
        except OSError:
            pass

    def _send_json(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> tuple[int, int]:
        data = json.dumps(body).encode("utf-8")
        all_headers = [("Content-Type", "application/json"), *(headers or {}).items()]
        return self._send(status, all_headers, data)

    def _send(
        self, status: int, headers: list[tuple[str, str]], data: bytes, *, request_id: str | None = None
    ) -> tuple[int, int]:
        self.send_response(status, _reason(status))
        for name, value in headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        if request_id:
            self.send_header("x-request-id", request_id)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and status not in (204, 304):
            self.wfile.write(data)
        return status, len(data)

    def _stream(
        self, status: int, headers: list[tuple[str, str]], chunks: Iterator[Any], *, request_id: str
    ) -> tuple[int, int]:
        self.close_connection = True
        self.send_response(status, _reason(status))
        for name, value in headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("x-request-id", request_id)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Accel-Buffering", "no")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()
        size = 0
        try:
            for chunk in chunks:
                data = chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
                if not data:
                    continue
                self.wfile.write(data)
                self.wfile.flush()
                size += len(data)
        except (BrokenPipeError, ConnectionResetError):
            logger.info("client disconnected during a stream (%s)", request_id)
        finally:
            close = getattr(chunks, "close", None)
            if callable(close):
                close()
        return status, size


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def bearer_refusal(api_token: str | None, method: str, path: str, authorization: str) -> Refusal | None:
    """``ragchat serve``'s token check (module docstring); ``path`` is the raw request path."""
    if not api_token or path == "/health" or method == "OPTIONS" or (method == "GET" and path in OPEN_PAGES):
        return None
    scheme, _, token = authorization.partition(" ")
    # bytes: compare_digest refuses non-ASCII str, and a typed token may hold anything
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        token.strip().encode("utf-8", "surrogateescape"), api_token.encode("utf-8", "surrogateescape")
    ):
        return 401, {"error": "Unauthorized"}, {"WWW-Authenticate": "Bearer"}
    return None


class RagchatHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        pool: ResolverPool,
        *,
        body_limit: int,
        api_token: str | None,
        principal: str,
    ) -> None:
        super().__init__(address, _Handler)
        self.pool = pool
        self.body_limit = body_limit
        self.api_token = api_token
        self.principal = principal

    # The three steps a subclass may change (``ragchat.lambda_web`` does, for the Lambda Web Adapter).
    def refusal(self, method: str, path: str, headers: Message) -> Refusal | None:
        """Checked before the body is read: ``None`` to go on, else (status, JSON body, headers)."""
        return bearer_refusal(self.api_token, method, path, headers.get("Authorization", ""))

    def event_for(
        self, method: str, raw_path: str, headers: Message, body: bytes, client_ip: str
    ) -> tuple[dict[str, Any], Any]:
        """The API Gateway event and the Lambda context for one request."""
        event = build_event(
            method, raw_path, headers.items(), body, source_ip=client_ip, principal=self.principal
        )
        return event, LocalContext(event["requestContext"]["requestId"])

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        return self.pool.resolve(event, context)


class LocalServer:
    """The local API: ``start()`` serves in a background thread, ``stop()`` shuts down cleanly."""

    def __init__(self, container: Any, *, host: str = "127.0.0.1", port: int = 8000) -> None:
        from ragchat.api.app import create_app

        self.container = container
        settings = container.settings
        self.pool = ResolverPool(lambda: create_app(container)).prime()
        self.httpd = RagchatHTTPServer(
            (host, port),
            self.pool,
            body_limit=settings.body_limit_bytes,
            api_token=settings.api_token,
            principal=settings.local_principal,
        )
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = str(self.httpd.server_address[0]), int(self.httpd.server_address[1])
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{shown}:{port}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="ragchat-http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        # Let the inline ingestion worker finish or stop if it knows how.
        launcher = self.container.__dict__.get("launcher")
        for name in ("close", "shutdown", "stop"):
            fn = getattr(launcher, name, None)
            if callable(fn):
                fn()
                break
