"""The ``chat_stream`` function's web server, behind the AWS Lambda Web Adapter (docs/chat.md, cloud SSE).

``python -m ragchat.lambda_web`` (started by ``functions/chat_stream/run.sh``) serves the chat area and
``/health`` on ``127.0.0.1:$AWS_LWA_PORT`` (default 8080) with ``ragchat serve``'s machinery
(``ragchat.serving``): the same resolver pool, event building, limits and SSE streaming.
The Lambda Web Adapter polls ``/health`` until it answers 200, then turns every API Gateway event into
a plain HTTP request to this server and streams the response back (``AWS_LWA_INVOKE_MODE=
response_stream``).

Differences from ``ragchat serve``:

- No bearer token and no fixed local principal. API Gateway's request context arrives as JSON in the
  ``x-amzn-request-context`` header (the adapter always sets it, replacing any client value) and
  becomes the event's ``requestContext``: the Cognito claims / ``principalId`` of the authorizer, the
  caller's ``identity`` (``sourceIp``, ``apiKeyId``), ``requestId``, ``stage``, ``resourcePath``. The
  app sees what it sees in a buffered Lambda. A missing or unparseable header answers 401 on every
  path but ``/health``; there is never a default user.
- ``x-amzn-lambda-context`` (request id, deadline, function ARN) becomes the Lambda context object.
- Neither context header is passed on as an ordinary header of the event.
- Logs go to stdout as JSON lines (the Powertools logger "ragchat", which Lambda captures),
  correlated by the API Gateway request id like the buffered handlers.

Only 127.0.0.1 is bound: nothing but the adapter in the same sandbox can reach the server, which is
what makes trusting the context header sound.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

from ragchat.serving.asgi import Limits
from ragchat.serving.events import Gateway, Headers, LocalContext, Refusal, ResolverPool, build_event
from ragchat.serving.server import HttpServer

if TYPE_CHECKING:
    from ragchat.bootstrap import Container

logger = logging.getLogger("ragchat.lambda_web")

REQUEST_CONTEXT_HEADER = "x-amzn-request-context"
LAMBDA_CONTEXT_HEADER = "x-amzn-lambda-context"
CONTEXT_HEADERS = frozenset({REQUEST_CONTEXT_HEADER, LAMBDA_CONTEXT_HEADER})
AREAS = frozenset({"chat", "ops"})  # the streamed chat route, and /health for the readiness check
UNAUTHORIZED: Refusal = (401, {"error": "Unauthorized"}, {})


def request_context(headers: Headers) -> dict[str, Any] | None:
    """API Gateway's request context from the adapter's header; ``None`` if missing or malformed."""
    raw = headers.get(REQUEST_CONTEXT_HEADER)
    if not raw:
        return None
    try:
        ctx = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(ctx, dict):
        return None
    for key in ("identity", "authorizer"):
        if ctx.get(key) is not None and not isinstance(ctx[key], dict):
            return None
    if ctx.get("requestId") is not None and not isinstance(ctx["requestId"], str):
        return None
    return ctx


class InvocationContext(LocalContext):
    """The Lambda context of the invocation, from the adapter's ``x-amzn-lambda-context`` header."""

    def __init__(self, request_id: str, lambda_context: dict[str, Any]) -> None:
        super().__init__(str(lambda_context.get("request_id") or request_id))
        env = lambda_context.get("env_config")
        env = env if isinstance(env, dict) else {}
        arn = lambda_context.get("invoked_function_arn")
        self.invoked_function_arn = str(arn or self.invoked_function_arn)
        self.function_name = str(env.get("function_name") or self.function_name)
        self.function_version = str(env.get("version") or self.function_version)
        self.memory_limit_in_mb = int(env.get("memory") or self.memory_limit_in_mb)
        self.log_group_name = str(env.get("log_group") or self.log_group_name)
        self.log_stream_name = str(env.get("log_stream") or self.log_stream_name)
        deadline = lambda_context.get("deadline")
        self._deadline_ms = int(deadline) if isinstance(deadline, int | float) else None

    def get_remaining_time_in_millis(self) -> int:
        if self._deadline_ms is None:
            return super().get_remaining_time_in_millis()
        return max(0, self._deadline_ms - int(time.time() * 1000))


def lambda_context(headers: Headers) -> dict[str, Any]:
    try:
        value = json.loads(headers.get(LAMBDA_CONTEXT_HEADER) or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def refusal(path: str, headers: Headers) -> Refusal | None:
    """401 unless the adapter's request context is there and well-formed (``/health`` needs none)."""
    if path == "/health" or request_context(headers) is not None:
        return None
    return UNAUTHORIZED


def event_for(
    method: str, raw_path: str, headers: Headers, body: bytes, client_ip: str
) -> tuple[dict[str, Any], InvocationContext]:
    """The API Gateway event (its ``requestContext`` from the adapter's header, the context headers
    dropped) and the Lambda context of one request forwarded by the adapter."""
    ctx = request_context(headers) or {}  # only /health gets here without one (see ``refusal``)
    forwarded = [(k, v) for k, v in headers.items() if k.lower() not in CONTEXT_HEADERS]
    event = build_event(
        method,
        raw_path,
        forwarded,
        body,
        source_ip=client_ip,
        request_id=ctx.get("requestId"),
        request_context=ctx,
    )
    return event, InvocationContext(event["requestContext"]["requestId"], lambda_context(headers))


class AdapterGateway(Gateway):
    """``Gateway`` whose caller comes from the Lambda Web Adapter's context headers."""

    def __init__(self, pool: ResolverPool, *, body_limit: int) -> None:
        super().__init__(pool, body_limit=body_limit, api_token=None, principal="")

    def refusal(self, method: str, path: str, headers: Headers) -> Refusal | None:
        refused = refusal(path, headers)
        if refused is not None:
            from ragchat.api.handler import correlate

            correlate({}, None)  # the access log line of a refused request has no correlation id
        return refused

    def event_for(
        self, method: str, raw_path: str, headers: Headers, body: bytes, client_ip: str
    ) -> tuple[dict[str, Any], Any]:
        return event_for(method, raw_path, headers, body, client_ip)

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        from ragchat.api.handler import correlate

        correlate(event, context)
        return super().resolve(event, context)


def create_server(
    container: Container, *, port: int, host: str = "127.0.0.1", limits: Limits | None = None
) -> HttpServer:
    """The server over ``container`` (port 0 picks a free one); call ``serve_forever()`` on it. Its
    limits: ``limits``, else the ``SERVE_*`` settings."""
    from ragchat.api.app import create_app
    from ragchat.api.limits import refuse_before_body

    pool = ResolverPool(lambda: create_app(container, areas=AREAS)).prime()
    gateway = AdapterGateway(pool, body_limit=container.settings.body_limit_bytes)
    gateway.before_body = lambda event: refuse_before_body(container, event)  # before reading the body
    return HttpServer(gateway, (host, port), limits or Limits.of(container.settings))


def warm(container: Container) -> None:
    """Build the chat service (adapters, clients, embedder, chat model) before the adapter's readiness
    check passes: Lambda runs this in the init phase instead of the first request. A failure is logged
    and serving goes on; requests then fail with the error, as in a buffered Lambda."""
    try:
        container.chat  # noqa: B018
        container.embedder  # noqa: B018
    except Exception:
        logger.exception("warm-up failed; requests that need the failing part will fail")


def _after_graceful_shutdown(signum: int, frame: object) -> None:
    """SIGTERM once uvicorn has shut down gracefully: nothing left to do, main() returns."""


def main() -> None:
    """Entry point of ``python -m ragchat.lambda_web`` (the Lambda Web Adapter's startup command)."""
    # Importing the handler module creates the Powertools logger "ragchat": JSON lines on stdout with the
    # correlation id, as in the buffered functions; the ragchat.* loggers here propagate to it.
    import ragchat.api.handler  # noqa: F401  (the Powertools logger)
    from ragchat.bootstrap import Container
    from ragchat.serving.connections import raise_fd_limit

    raise_fd_limit()
    box = Container()
    server = create_server(box, port=box.settings.lwa_port)
    warm(box)
    # uvicorn, on the main thread, stops gracefully on SIGTERM / SIGINT, then raises the signal again
    # under the handler that was installed before it started: a no-op one here, so a SIGTERM from the
    # Lambda runtime ends the process with status 0 after the graceful shutdown, not -15.
    signal.signal(signal.SIGTERM, _after_graceful_shutdown)
    logger.info("ragchat chat_stream listening on http://127.0.0.1:%d", server.server_address[1])
    sys.stdout.flush()
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
