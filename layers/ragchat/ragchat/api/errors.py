"""The one place where errors become HTTP responses (docs/api.md).

Every error body is JSON ``{"error": "<message>"}``:

- ``RagchatError`` subclasses → their ``.status`` (400, 401, 403, 404, 409, 413, 429, 502, 503);
  429 also carries ``retryAfter`` in the body and a ``Retry-After`` header.
- Request validation (Powertools ``RequestValidationError``, including a body that is not valid JSON)
  → 400 with a message naming the field.
- No route for the path → 404 ``{"error": "Not found"}``; a path that exists with another method → 405.
- Anything else → 500 ``{"error": "Internal error"}``; the stack is logged, never returned.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from ragchat.domain.errors import RagchatError, RateLimited

logger = logging.getLogger("ragchat.api")

INTERNAL_ERROR = "Internal error"


def error_response(
    status: int, message: str, *, headers: dict[str, str] | None = None, **extra: Any
) -> Response[Any]:
    body: dict[str, Any] = {"error": message, **extra}
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body),
        headers=headers or {},
    )


def error_event_response(
    status: int, message: str, *, headers: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    """An API Gateway proxy response for errors raised before routing (e.g. the body-size check)."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": content_types.APPLICATION_JSON, **(headers or {})},
        "multiValueHeaders": {},
        "body": json.dumps({"error": message, **extra}),
        "isBase64Encoded": False,
    }


def describe_validation_errors(errors: Sequence[Any]) -> str:
    """Powertools/pydantic error list → ``"title: String should have at most 1000 characters"``. The
    location names the field (``body`` prefix dropped, query/path kept); a message of our own
    validators names its field itself and is given as it is (``"The text is empty: …"``, never
    ``"Invalid request: text: text must not be empty"``: the page, the CLI and the API say the same
    words, issue 45)."""
    parts: list[str] = []
    for err in errors:
        if not isinstance(err, dict):
            continue
        if err.get("type") == "json_invalid":
            return "Invalid JSON body"
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path", "header")]
        where = ".".join(loc) if loc else "body"
        msg = str(err.get("msg") or err.get("type") or "invalid value")
        if msg.startswith("Value error, "):  # our own validator's sentence: it names the field
            parts.append(msg.removeprefix("Value error, "))
        else:
            parts.append(f"{where}: {msg}")
    return "; ".join(parts) if parts else "Malformed request"


def register_error_handlers(app: APIGatewayRestResolver) -> None:
    """Attach the docs/api.md error contract to ``app``."""

    @app.exception_handler(RagchatError)  # type: ignore[untyped-decorator]
    def _ragchat_error(exc: RagchatError) -> Response[Any]:
        if isinstance(exc, RateLimited):
            return error_response(
                exc.status,
                exc.message,
                headers={"Retry-After": str(exc.retry_after)},
                retryAfter=exc.retry_after,
            )
        if exc.status >= 500:
            logger.error("dependency error: %s", exc.message, exc_info=exc)
        return error_response(exc.status, exc.message)

    @app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]
    def _validation_error(exc: RequestValidationError) -> Response[Any]:
        return error_response(400, describe_validation_errors(exc.errors()))

    @app.not_found
    def _not_found(_exc: NotFoundError) -> Response[Any]:
        event = app.current_event
        method = event.http_method.upper()
        path = event.path
        allowed = sorted(
            {
                route.method
                for route in [*app._static_routes, *app._dynamic_routes]
                if route.method != method and route.rule.match(path)
            }
        )
        if allowed and method != "OPTIONS":
            return error_response(405, "Method not allowed", headers={"Allow": ", ".join(allowed)})
        return error_response(404, "Not found")

    @app.exception_handler(Exception)  # type: ignore[untyped-decorator]
    def _unexpected(exc: Exception) -> Response[Any]:
        logger.exception("unhandled error", exc_info=exc)
        return error_response(500, INTERNAL_ERROR)
