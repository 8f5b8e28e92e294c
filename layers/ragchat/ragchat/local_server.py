"""``ragchat serve``: a local API Gateway.

Each HTTP request becomes an API Gateway REST (v1 proxy) event and goes through the very resolver
the Lambda functions use (``ragchat.api.app.create_app``); the response dict is written back as HTTP.
The pieces: ``ragchat.serving.events`` (event translation, resolver pool, token check),
``ragchat.serving.asgi`` (limits, JSON errors, SSE streaming) and ``ragchat.serving.server`` (uvicorn).

Auth: with ``RAGCHAT_API_TOKEN`` set, every request but ``/health``, a ``GET`` of one of the HTML page
shells (``/ui``, ``/write``, ``/documents/ui``) or of their static scripts (``/static/…``: no user
data; the page asks for the token itself) and CORS preflights needs ``Authorization: Bearer <token>``
(else 401). The principal injected into the event (``requestContext.authorizer.claims.sub``) is
``RAGCHAT_LOCAL_USER`` (default ``local``).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ragchat.serving.asgi import Limits
from ragchat.serving.events import (
    OPEN_PAGES,
    STAGE,
    Gateway,
    LocalContext,
    Refusal,
    ResolverPool,
    bearer_refusal,
    build_event,
    response_body,
    response_headers,
)
from ragchat.serving.server import HttpServer

if TYPE_CHECKING:
    from ragchat.bootstrap import Container

__all__ = [
    "OPEN_PAGES",
    "STAGE",
    "Gateway",
    "Limits",
    "LocalContext",
    "LocalServer",
    "Refusal",
    "ResolverPool",
    "bearer_refusal",
    "build_event",
    "response_body",
    "response_headers",
]


class LocalServer:
    """The local API: ``start()`` serves in a background thread, ``stop()`` shuts down cleanly."""

    def __init__(
        self, container: Container, *, host: str = "127.0.0.1", port: int = 8000, limits: Limits | None = None
    ) -> None:
        from ragchat.api.app import create_app

        self.container = container
        settings = container.settings
        self.pool = ResolverPool(lambda: create_app(container)).prime()
        gateway = Gateway(
            self.pool,
            body_limit=settings.body_limit_bytes,
            api_token=settings.api_token,
            principal=settings.local_principal,
        )
        self.httpd = HttpServer(gateway, (host, port), limits or Limits.of(settings))
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
