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

Browser rules (``ragchat.serving.site``): only known ``Host`` names, no wildcard CORS, no cross-site
state changes. Binding an address other than loopback without a token is refused
(:class:`InsecureBind`) unless the caller says ``insecure_no_auth``. Client addresses are the
socket's peers unless ``RAGCHAT_TRUSTED_PROXIES`` names the proxy in front.
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
from ragchat.serving.sessions import BrowserSessions, SessionKey
from ragchat.serving.site import SitePolicy, is_loopback, is_wildcard
from ragchat.serving.users import users_of

if TYPE_CHECKING:
    from ragchat.bootstrap import Container
    from ragchat.serving.local_token import TokenFile

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


class InsecureBind(ValueError):
    """A non-loopback address without ``RAGCHAT_API_TOKEN`` (and without ``insecure_no_auth``)."""


class LocalServer:
    """The local API: ``start()`` serves in a background thread, ``stop()`` shuts down cleanly."""

    def __init__(
        self,
        container: Container,
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        limits: Limits | None = None,
        insecure_no_auth: bool = False,
        token_file: TokenFile | None = None,
    ) -> None:
        from ragchat.api.app import create_app
        from ragchat.api.limits import refuse_before_body

        self.container = container
        settings = container.settings
        users = users_of(settings)
        if users is not None:  # members of a shared workspace are users of the file
            container.user_directory = users
        if not settings.api_token and not users and not insecure_no_auth and not is_loopback(host):
            raise InsecureBind(
                f"refusing to serve {host} without a token: anyone who can reach this address could read "
                "and delete your documents. Set RAGCHAT_API_TOKEN, bind 127.0.0.1, or pass "
                "--insecure-no-auth if this network is yours alone"
            )
        self.pool = ResolverPool(lambda: create_app(container)).prime()
        gateway = Gateway(
            self.pool,
            body_limit=settings.body_limit_bytes,
            api_token=settings.api_token,
            principal=settings.local_principal,
            users=users,
        )
        self.httpd = HttpServer(
            gateway, (host, port), limits or Limits.of(settings), trusted_proxies=settings.trusted_proxy_list
        )
        if settings.api_token or users:  # the pages stay signed in (``ragchat.serving.sessions``)
            gateway.token_file = token_file
            gateway.sessions = BrowserSessions(SessionKey(settings.data_dir).current, gateway.token_hash)
        gateway.grant_check = container.uploads.check_grant  # before the body is read
        gateway.before_body = lambda event: refuse_before_body(container, event)  # likewise
        gateway.site = SitePolicy.for_bind(
            str(self.httpd.server_address[0]), settings.allowed_host_list, settings.cors_origin_list
        )
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        """The address actually bound, as ``host:port`` (``0.0.0.0:8000``, ``[::1]:8000``)."""
        host, port = str(self.httpd.server_address[0]), int(self.httpd.server_address[1])
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @property
    def everywhere(self) -> bool:
        """Bound to every interface (``0.0.0.0`` / ``::``)."""
        return is_wildcard(str(self.httpd.server_address[0]))

    @property
    def url(self) -> str:
        """A URL a client on this machine can use (loopback when bound to every interface)."""
        host, port = str(self.httpd.server_address[0]), int(self.httpd.server_address[1])
        if is_wildcard(host):
            host = "::1" if ":" in host else "127.0.0.1"
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

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
