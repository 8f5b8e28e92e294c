"""The rate-limit call of a costly route (docs/security.md): one line in the handler, before any work::

    rate_limit(container, "notes", r.current_event)

Counts the request per owner and per source IP, or raises ``RateLimited`` (→ 429 ``{error,
retryAfter}`` + ``Retry-After``) without counting it. A no-op unless ``ENABLE_RATE_LIMITING``.
Chat messages are counted inside the chat service (per owner, conversation and IP, plus the flood
rule).

Before any of that, and before a body is read or parsed, :func:`refuse_before_body` looks (without
counting) whether a new conversation or a chat turn could be admitted at all: an owner or address
already over its limit is refused with the same 429 without the server reading their body, opening the
conversation or retrieving anything. ``ragchat serve`` and the streaming function call it before
reading the body; the buffered Lambda handlers before the resolver parses it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ragchat.api.auth import principal
from ragchat.domain.errors import Unauthenticated

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


# Set on an event whose limits were looked at before its body was read (``ragchat serve``, the
# streaming function): the resolver does not look again.
LIMITS_CHECKED = "ragchat.limitsChecked"

# The routes whose limits are looked at before the body: POST /chat/conversations (a new conversation),
# POST …/messages and PUT …/messages/{messageId} (a turn). ``path`` may carry a stage or base path.
# Matched as the resolver matches its routes (``APIGatewayRestResolver``: ``^<rule>/*$`` on the event's
# percent-decoded path), so every path the router sends to these routes is looked at: any number of
# trailing slashes (``/chat/conversations//``), escapes (``/chat/%63onversations``, decoded by
# ``ragchat.serving.events.event_path`` as for the event).
_NEW_CONVERSATION = re.compile(r"/chat/conversations/*$")
_TURN = re.compile(r"/chat/conversations/([^/]+)/messages(?:/[^/]+)?/*$")


def limited_route(method: str, path: str) -> tuple[RateLimitedRoute, str | None] | None:
    """(route, conversation id) of a request whose limit is looked at before its body, else ``None``.
    ``path``: the event's path (percent-decoded), as the resolver routes it."""
    if method == "POST" and _NEW_CONVERSATION.search(path):
        return "conversations", None
    turn = _TURN.search(path) if method in ("POST", "PUT") else None
    if turn is not None:
        return "chat", turn.group(1)
    return None


def refuse_before_body(container: Container, event: Mapping[str, Any]) -> None:
    """Raise ``RateLimited`` when the request's route (:func:`limited_route`) is already over a limit
    for its principal, address or conversation; counts nothing (the route or the turn counts it)."""
    target = limited_route(str(event.get("httpMethod") or ""), str(event.get("path") or ""))
    if target is None or not container.limiter.enabled:
        return
    try:
        owner = principal(event)
    except Unauthenticated:
        return  # the route answers 401
    route, conversation = target
    container.limiter.peek(route, owner, source_ip(event), scope=conversation)
