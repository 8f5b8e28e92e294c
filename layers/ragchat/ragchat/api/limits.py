"""The rate-limit call of a costly route (docs/security.md): one line in the handler, before any work::

    rate_limit(container, "notes", r.current_event)

Counts the request per owner and per source IP, or raises ``RateLimited`` (→ 429 ``{error,
retryAfter}`` + ``Retry-After``) without counting it. A no-op unless ``ENABLE_RATE_LIMITING``.
Chat messages are limited inside the chat service (per conversation and per IP, plus the flood rule).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragchat.api.auth import principal

if TYPE_CHECKING:
    from ragchat.bootstrap import Container
    from ragchat.config import RateLimitedRoute


def source_ip(event: Any) -> str | None:
    """The caller's address from API Gateway's request context (REST ``identity.sourceIp``, HTTP API
    ``http.sourceIp``); ``ragchat serve`` and the Lambda Web Adapter fill in the same field."""
    raw = getattr(event, "raw_event", event) or {}
    ctx = raw.get("requestContext") or {}
    ip = (ctx.get("identity") or {}).get("sourceIp") or (ctx.get("http") or {}).get("sourceIp")
    return str(ip) if ip else None


def rate_limit(container: Container, route: RateLimitedRoute, event: Any) -> None:
    """Count this request on ``route`` for its principal and address, or raise ``RateLimited``."""
    owner = None if route == "receiver" else principal(event)  # an upload URL's holder has none
    container.limiter.check(route, owner, source_ip(event))
