"""What a request wants back: a browser opening the app, or an API client asking for JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def wants_html(accept: str | None) -> bool:
    """True when ``Accept`` ranks ``text/html`` above JSON (a browser's page load), never for the
    ``*/*`` of curl or an HTTP library: API clients keep their JSON answers."""
    best_html = best_json = 0.0
    for part in (accept or "").split(","):
        media, *params = (p.strip() for p in part.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        media = media.lower()
        if media in ("text/html", "application/xhtml+xml"):
            best_html = max(best_html, quality)
        elif media == "application/json":
            best_json = max(best_json, quality)
    return best_html > 0 and best_html >= best_json


def app_location(raw_event: Mapping[str, Any]) -> str:
    """Where the chat page is, seen from this request: ``/ui`` under the same stage or base path
    (``/Prod/ui`` on an execute-api URL, ``/ui`` locally)."""
    ctx = raw_event.get("requestContext") or {}
    path = str(ctx.get("path") or raw_event.get("path") or "/").split("?", 1)[0]
    return path.rstrip("/") + "/ui"
