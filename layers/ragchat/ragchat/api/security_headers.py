"""Security headers of the Swagger UI page (``GET /swagger``; docs/security.md).

Powertools renders Swagger UI as one HTML page with its script, style sheet and the OpenAPI document
inline. The page gets a Content-Security-Policy that allows exactly those inline scripts (by their
SHA-256 hash, computed on the page as sent) and nothing else: no other script, no frames, no plugins,
requests only to this origin.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable
from typing import Any

_OPEN = re.compile("<script>", re.IGNORECASE)
_CLOSE = re.compile("</script>", re.IGNORECASE)


def inline_scripts(html: str) -> list[str]:
    """The text of each ``<script>…</script>`` of ``html``, in order (what ``<script>(.*?)</script>``
    found, but a ``<script>`` without an end stops the scan instead of being retried from each later
    one: linear)."""
    bodies: list[str] = []
    at = 0
    while (opening := _OPEN.search(html, at)) is not None:
        closing = _CLOSE.search(html, opening.end())
        if closing is None:
            break
        bodies.append(html[opening.end() : closing.start()])
        at = closing.end()
    return bodies


def script_hashes(html: str) -> list[str]:
    """``'sha256-…'`` of each inline ``<script>`` of ``html``, in order."""
    return [
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode("ascii") + "'"
        for body in inline_scripts(html)
    ]


def swagger_policy(html: str) -> str:
    scripts = " ".join(script_hashes(html)) or "'none'"
    return (
        f"default-src 'none'; script-src {scripts}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; font-src 'self' data:; frame-ancestors 'none'; "
        "base-uri 'none'; form-action 'none'; object-src 'none'"
    )


def swagger_headers(app: Any, next_middleware: Callable[..., Any]) -> Any:
    """Powertools middleware of the Swagger route: the CSP above plus ``nosniff`` and no referrer."""
    response = next_middleware(app)
    body = getattr(response, "body", None)
    if isinstance(body, str) and "<html" in body[:2000].lower():
        response.headers["Content-Security-Policy"] = swagger_policy(body)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response
