"""HTTP Lambda entry points, built once per handler and lazily (nothing happens at import time).

``functions/*/app.py`` are one-liners over these: ``lambda_handler = http_handler({"notes", "ops"})``.
Each handler owns its container (made from the environment on first use); tests give it theirs:
``http_handler({"notes"}, container=lambda: my_container)`` or ``handler.with_container(...)``.
The non-HTTP entry points (S3 events, ingestion steps) live in ``ragchat.entrypoints``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from ragchat.config import Part
from ragchat.container import Container, ContainerFactory, LazyContainer

if TYPE_CHECKING:
    from ragchat.api.app import RagchatResolver

Handler = Callable[[dict[str, Any], Any], Any]

logger = Logger(service="ragchat")


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
        correlate(event, context)
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
    """Correlation id = the API Gateway request id (SPEC §12); works with or without a Lambda context."""
    logger.clear_state()
    request_id = (event.get("requestContext") or {}).get("requestId")
    logger.set_correlation_id(request_id)
    if context is not None:
        logger.append_keys(function_request_id=getattr(context, "aws_request_id", None))
