"""HTTP Lambda entry points, built once per handler and lazily (nothing happens at import time).

``functions/*/app.py`` are one-liners over these: ``lambda_handler = http_handler({"notes", "ops"})``.
Each handler owns its container (made from the environment on first use); tests give it theirs:
``http_handler({"notes"}, container=lambda: my_container)`` or ``handler.with_container(...)``.
The non-HTTP entry points (S3 events, ingestion steps) live in ``ragchat.entrypoints``.
Every invocation goes through ``ragchat.observability.lambda_entry``: JSON log lines correlated by the
API Gateway request id, EMF metrics flushed once, traced on AWS.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ragchat.bootstrap import Container, ContainerFactory, LazyContainer
from ragchat.config import Part
from ragchat.observability import API_GATEWAY_REQUEST_ID, lambda_entry, root_logger, start_invocation

if TYPE_CHECKING:
    from ragchat.api.app import RagchatResolver

Handler = Callable[[dict[str, Any], Any], Any]

# The Powertools logger "ragchat", made when a Lambda entry point is imported (never by ``ragchat serve``).
logger = root_logger()


def needs_of(areas: Iterable[str]) -> tuple[Part, ...]:
    """Settings-dependent parts the areas use: ``notes`` starts ingestion (the launcher)."""
    return ("launcher",) if "notes" in areas else ()


class HttpHandler:
    """An API Gateway REST (proxy) handler serving ``areas``; builds its resolver on first use."""

    def __init__(self, areas: Iterable[str], container: ContainerFactory = Container) -> None:
        self.areas = frozenset(areas)
        self.container = LazyContainer(container, needs_of(self.areas))
        self._app: RagchatResolver | None = None
        self._lock = threading.Lock()
        self._entry = lambda_entry(
            self._resolve, name="http_handler", correlation_id_path=API_GATEWAY_REQUEST_ID
        )

    def warm(self) -> RagchatResolver:
        """The resolver (built once: container, settings check, routers)."""
        app = self._app
        if app is None:
            with self._lock:
                if self._app is None:
                    from ragchat.api.app import create_app

                    self._app = create_app(self.container.get(), areas=self.areas)
                app = self._app
        return app

    def with_container(self, container: ContainerFactory) -> HttpHandler:
        """The same handler (same areas) over another container."""
        return HttpHandler(self.areas, container)

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        response: dict[str, Any] = self._entry(event, context)
        return response

    def _resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        return self.warm().resolve(event, context)


def http_handler(areas: set[str], container: ContainerFactory = Container) -> HttpHandler:
    """An API Gateway REST (proxy) handler serving ``areas`` over the container ``container()``
    makes (default: the real one, from the environment)."""
    return HttpHandler(areas, container)


def warm_before_snapshot(handler: HttpHandler, services: tuple[str, ...] = ()) -> bool:
    """With Lambda SnapStart, do the slow imports and build the resolver *before* the snapshot, so a
    restored sandbox starts warm. No client is created and no connection opened (credentials and
    connections must not be frozen into the snapshot): only modules, settings and botocore's service
    models. Outside a SnapStart runtime (``snapshot_restore_py`` absent) this does nothing. Returns
    whether the warm-up was registered."""
    try:
        from snapshot_restore_py import register_before_snapshot
    except ImportError:
        return False

    def warm() -> None:
        handler.warm()
        import botocore.session

        session = botocore.session.get_session()
        for name in services:
            session.get_service_model(name)

    register_before_snapshot(warm)
    return True


def correlate(event: dict[str, Any], context: Any) -> None:
    """Fresh log keys for one request, correlation id = the API Gateway request id (docs/deploy.md); works
    with or without a Lambda context (the chat_stream web server calls it per request)."""
    start_invocation(event, context, API_GATEWAY_REQUEST_ID)
