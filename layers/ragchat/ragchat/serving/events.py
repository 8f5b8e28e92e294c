"""API Gateway event translation: one HTTP request → the REST (v1 proxy) event and Lambda context the
handlers get in the cloud, and the proxy response dict → status, headers and body. No HTTP server here
(``ragchat.serving.asgi`` serves it); ``ragchat serve`` and the ``chat_stream`` function share it.

Streaming hook (SSE, for the chat area): a route streams by returning a Powertools ``Response`` whose
``body`` is an *iterator* of ``str``/``bytes`` chunks; ``resolve()`` hands that iterator back and the
server writes and flushes each chunk when produced, then closes it (also when the client hangs up:
``GeneratorExit`` at the generator's current ``yield``). Capture what the generator needs before its
first ``yield``; never read ``app.current_event`` inside it. ``LocalContext.streams_response`` tells
routes the response is streamed (a real Lambda context has no such attribute).

Concurrency: Powertools keeps the current event and context on a *class* attribute
(``BaseRouter.current_event``), shared by every resolver in the process, so concurrent requests (one
thread each) would see each other's event. Each request therefore takes a resolver from a pool (one per
concurrent request; building one is about a millisecond) and the pool pins the event and context on
that resolver *instance* before resolving; the routers of a resolver read them from there.
"""

from __future__ import annotations

import base64
import hmac
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

from ragchat.api.limits import LIMITS_CHECKED, limited_route
from ragchat.api.negotiation import wants_html
from ragchat.serving.sessions import SESSION_PATH
from ragchat.serving.site import SitePolicy

if TYPE_CHECKING:
    from ragchat.serving.local_token import TokenFile
    from ragchat.serving.sessions import BrowserSessions
    from ragchat.serving.users import LocalUsers

STAGE = "$default"
TEXT_TYPES = ("text/", "application/json", "application/x-www-form-urlencoded", "application/xml")

Refusal = tuple[int, dict[str, Any], dict[str, str]]  # status, JSON body, extra headers
# Served without the bearer token: the page shells and their scripts hold no user data
# (``ragchat.api.pages``).
OPEN_PAGES = frozenset({"/ui", "/write", "/documents/ui", "/favicon.ico"})
OPEN_PREFIXES = ("/static/",)
# a conversation's address (``/ui/c/<id>``): the chat page's shell again, the id never rendered into it
CONVERSATION_PAGE = re.compile(r"/ui/c/[A-Za-z0-9_-]{1,128}")
UPLOAD_RECEIVER = "/uploads/local/"  # a presigned upload: its token is the grant


class Headers(Protocol):
    """Request headers, looked up case-insensitively (``email.message.Message`` is one)."""

    def get(self, name: str, default: Any = None) -> Any: ...

    def items(self) -> Any: ...


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
        from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent  # loaded with the app

        context = context if context is not None else LocalContext(event["requestContext"]["requestId"])
        with self._lock:
            app = self._free.pop() if self._free else None
        if app is None:
            app = self._factory()
        try:
            # Instance attributes win over Powertools' process-wide class attributes (module docstring).
            # the public REST event class, with the resolver's body parser (``RagchatResolver``'s strict one)
            app.current_event = APIGatewayProxyEvent(event, getattr(app, "body_deserializer", None))
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
    path = event_path(raw_path)
    single, multi = _single_and_multi(headers)
    qs_single, qs_multi = _single_and_multi(parse_qsl(split.query, keep_blank_values=True))
    content_type = next((v for k, v in single.items() if k.lower() == "content-type"), "")
    body_text, is_b64 = _body_text(body, content_type)
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


def event_path(raw_target: str) -> str:
    """The event's ``path`` for a request target (``/a%2Fb?x=1`` → ``/a/b``): percent-decoded, as the
    resolver routes it. Every check made before the body is read looks at this path, never the raw one:
    ``/chat/%63onversations`` is routed like ``/chat/conversations`` and must be limited like it."""
    return unquote(urlsplit(raw_target).path) or "/"


def _single_and_multi(pairs: Iterable[tuple[str, str]]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """API Gateway's two views of repeated names: the last value, and every value."""
    single: dict[str, str] = {}
    multi: dict[str, list[str]] = {}
    for name, value in pairs:
        single[name] = value
        multi.setdefault(name, []).append(value)
    return single, multi


def _body_text(body: bytes, content_type: str) -> tuple[str | None, bool]:
    """The event's ``body`` and ``isBase64Encoded``: text as is, anything else (or not UTF-8) base64."""
    if not body:
        return None, False
    if _is_text(content_type):
        try:
            return body.decode("utf-8"), False
        except UnicodeDecodeError:
            pass
    return base64.b64encode(body).decode("ascii"), True


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


def open_route(method: str, path: str) -> bool:
    """Served without the token: ``/health``, CORS preflights and the page shells (no user data)."""
    if path == "/health" or method == "OPTIONS":
        return True
    return method in ("GET", "HEAD") and bool(
        path in OPEN_PAGES or path.startswith(OPEN_PREFIXES) or CONVERSATION_PAGE.fullmatch(path)
    )


def bearer_refusal(
    api_token: str | None, method: str, path: str, authorization: str, users: LocalUsers | None = None
) -> Refusal | None:
    """``ragchat serve``'s token check (module docstring); ``path`` is the raw request path. With
    ``users`` (``RAGCHAT_USERS_FILE``), a user's token passes too."""
    if (not api_token and not users) or open_route(method, path):
        return None
    if method == "POST" and path.startswith(UPLOAD_RECEIVER):  # a presigned upload: its token is the grant
        return None
    if users and users.who(authorization) is not None:
        return None
    scheme, _, token = authorization.partition(" ")
    # bytes: compare_digest refuses non-ASCII str, and a typed token may hold anything
    if (
        not api_token
        or scheme.lower() != "bearer"
        or not hmac.compare_digest(
            token.strip().encode("utf-8", "surrogateescape"), api_token.encode("utf-8", "surrogateescape")
        )
    ):
        return 401, {"error": "Unauthorized"}, {"WWW-Authenticate": "Bearer"}
    return None


class Gateway:
    """The three steps from an HTTP request to a proxy response (``ragchat.lambda_web`` overrides the
    first two for the Lambda Web Adapter)."""

    def __init__(
        self,
        pool: ResolverPool,
        *,
        body_limit: int,
        api_token: str | None,
        principal: str,
        site: SitePolicy | None = None,
        users: LocalUsers | None = None,
    ):
        self.pool = pool
        self.body_limit = body_limit
        self.api_token = api_token
        self.principal = principal
        self.users = users  # several users (``ragchat.serving.users``): the token says who calls
        self.site = site  # the browser rules of ``ragchat serve`` (``ragchat.serving.site``)
        # the token file a running server follows (``ragchat token rotate``), else ``api_token`` as is
        self.token_file: TokenFile | None = None
        # the pages' session cookies (``ragchat.serving.sessions``): a signed-in browser sends no token
        self.sessions: BrowserSessions | None = None
        # Checks an upload grant (token, declared body size) before the body is read; raises a
        # ``RagchatError`` (403 forged/expired, 409 used, 413 too large) to refuse.
        self.grant_check: Callable[[str, int | None], object] | None = None
        # Looks at the rate limits of a new conversation or a chat turn before the body is read
        # (``ragchat.api.limits.refuse_before_body``); raises ``RateLimited`` to refuse.
        self.before_body: Callable[[dict[str, Any]], object] | None = None

    def refusal(self, method: str, path: str, headers: Headers) -> Refusal | None:
        """Checked before the body is read: ``None`` to go on, else (status, JSON body, headers)."""
        if self.site is not None:
            refused = self.site.refusal(method, path, headers)
            if refused is not None:
                return refused
        if self.grant_check is not None and method == "POST" and path.startswith(UPLOAD_RECEIVER):
            refused = self._grant_refusal(path[len(UPLOAD_RECEIVER) :], headers)
            if refused is not None:
                return refused
        authorization = headers.get("Authorization", "") or ""
        if self.sessions is not None and path.rstrip("/") == SESSION_PATH:
            return self.sessions.answer(method, headers, self.bearer_user(authorization))
        if self.session_user(headers) is not None:
            return None
        refused = bearer_refusal(self.current_token(), method, path, authorization, self.users)
        if (
            refused is not None
            and method in ("GET", "HEAD")
            and path == "/"
            and wants_html(headers.get("Accept"))
        ):
            # A browser opening the root without the token is sent to the app, which signs it in.
            return 302, {"location": "/ui"}, {"Location": "/ui"}
        return refused

    def is_open(self, method: str, path: str) -> bool:
        """Whether the request is served without credentials on a server that has some (``open_route``):
        the server reads no body for it (``GatewayApp``), which would hold a place for nobody."""
        return bool(self.current_token() or self.users) and open_route(method, path)

    def current_token(self) -> str | None:
        """The token checked now (the token file's latest, when the server follows one)."""
        return self.token_file.current() if self.token_file is not None else self.api_token

    def bearer_user(self, authorization: str) -> str | None:
        """Who a bearer token is: a user of the users file, or the server's own token's user."""
        if self.users:
            user = self.users.who(authorization)
            if user is not None:
                return user
        if bearer_refusal(self.current_token(), "GET", "/", authorization) is None and self.current_token():
            return self.principal
        return None

    def token_hash(self, user: str) -> str | None:
        """The SHA-256 of ``user``'s current token (what a session cookie is bound to)."""
        from ragchat.serving.users import token_hash

        digest = self.users.hash_of(user) if self.users else None
        token = self.current_token()
        if digest is None and token and user == self.principal:
            digest = token_hash(token)
        return digest

    def session_user(self, headers: Headers) -> str | None:
        """The user of a request signed in by its session cookie (and only without a token: an
        ``Authorization`` header is checked as such)."""
        if self.sessions is None or headers.get("Authorization"):
            return None
        return self.sessions.user(headers)

    def _grant_refusal(self, token: str, headers: Headers) -> Refusal | None:
        from ragchat.domain.errors import RagchatError

        assert self.grant_check is not None
        try:
            declared = int(headers.get("Content-Length") or 0)
        except ValueError:
            declared = None
        try:
            self.grant_check(unquote(token), declared)
        except RagchatError as exc:
            return exc.status, {"error": exc.message}, {}
        return None

    def limit_refusal(self, method: str, raw_path: str, headers: Headers, client_ip: str) -> Refusal | None:
        """A 429 for a request already over its rate limit, decided from its headers alone (the event
        is built without the body); ``None`` to go on and read the body."""
        from ragchat.domain.errors import RateLimited

        if self.before_body is None or limited_route(method, event_path(raw_path)) is None:
            return None  # (most requests: no event is built for them here)
        event, _ = self.event_for(method, raw_path, headers, b"", client_ip)
        try:
            self.before_body(event)
        except RateLimited as exc:
            body = {"error": exc.message, "retryAfter": exc.retry_after}
            return exc.status, body, {"Retry-After": str(exc.retry_after)}
        return None

    def mark_checked(self, event: dict[str, Any]) -> None:
        """Tell the resolver the limits of ``event`` were looked at before its body (no second look)."""
        if self.before_body is not None:
            event[LIMITS_CHECKED] = True

    def response_headers(self, request: Headers, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The headers to send: the resolver's, with CORS decided by the site policy (if any)."""
        return headers if self.site is None else self.site.cors_headers(request, headers)

    def event_for(
        self, method: str, raw_path: str, headers: Headers, body: bytes, client_ip: str
    ) -> tuple[dict[str, Any], Any]:
        """The API Gateway event and the Lambda context for one request."""
        principal = self.session_user(headers) or self.principal
        if self.users and headers.get("Authorization"):
            principal = self.users.who(headers.get("Authorization", "") or "") or self.principal
        event = build_event(method, raw_path, headers.items(), body, source_ip=client_ip, principal=principal)
        return event, LocalContext(event["requestContext"]["requestId"])

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        return self.pool.resolve(event, context)
