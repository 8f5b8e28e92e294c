"""The app factory: one Powertools resolver, one router per area.

Lambda functions build it once per process (``create_app(Container(), areas={...})``) and call
``app.resolve(event, context)``; ``ragchat serve`` calls the very same resolver with events it builds
from HTTP requests.

Areas: ``notes`` (notes, documents, direct uploads, ask, workspaces), ``chat`` (``ragchat.api.chat.router``,
when installed), ``ops`` (health, openapi, swagger), ``ui`` (HTML pages).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, CORSConfig
from aws_lambda_powertools.event_handler.api_gateway import Router

from ragchat.api.auth import principal
from ragchat.api.body import body_problem, body_size, register_body_errors, strict_json
from ragchat.api.errors import error_event_response, register_error_handlers
from ragchat.api.limits import LIMITS_CHECKED, refuse_before_body
from ragchat.api.security_headers import swagger_headers
from ragchat.domain.errors import RateLimited
from ragchat.domain.file_errors import body_too_large

if TYPE_CHECKING:
    from ragchat.bootstrap import Container

logger = logging.getLogger("ragchat.api")

Deserializer = Callable[[str], Any]

ALL_AREAS = frozenset({"notes", "chat", "ops", "ui"})

CORS = CORSConfig(
    allow_origin="*",
    allow_headers=["Authorization", "Content-Type", "X-Filename", "Idempotency-Key"],
    expose_headers=["x-model-used", "x-source-count", "Retry-After"],
    max_age=600,
)


class RagchatResolver(APIGatewayRestResolver):
    """``APIGatewayRestResolver`` that refuses, before anything parses the body, a request already over
    its rate limit (429, ``before_body``) and an oversized body (413)."""

    def __init__(
        self, *, body_limit: int, json_body_deserializer: Callable[[str], Any], **kwargs: Any
    ) -> None:
        super().__init__(json_body_deserializer=json_body_deserializer, **kwargs)
        self.body_limit = body_limit
        self.body_deserializer = json_body_deserializer  # public: the local server builds events with it
        self.before_body: Callable[[Mapping[str, Any]], None] | None = None

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        if self.before_body is not None and not event.get(LIMITS_CHECKED):
            try:
                self.before_body(event)
            except RateLimited as exc:
                return error_event_response(
                    exc.status, exc.message, headers={"Retry-After": str(exc.retry_after)},
                    retryAfter=exc.retry_after,
                )  # fmt: skip
        size = body_size(event)
        if size > self.body_limit:
            return error_event_response(413, body_too_large(size, self.body_limit, event.get("path") or ""))
        problem = body_problem(event)
        if problem is not None:
            return error_event_response(400, problem)
        return super().resolve(event, context)


def _area_router(area: str, container: Container) -> Router | None:
    if area == "notes":
        from ragchat.api import notes

        return notes.router(container)
    if area == "ops":
        from ragchat.api import ops

        return ops.router(container, full_app=lambda: create_app(container))
    module_name = {"chat": "ragchat.api.chat", "ui": "ragchat.api.pages"}.get(area)
    if module_name is None:
        raise ValueError(f"unknown API area {area!r}; expected one of {sorted(ALL_AREAS)}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        logger.debug("API area %s not installed (%s missing)", area, module_name)
        return None
    factory: Callable[[Container], Router] = module.router
    return factory(container)


def create_app(container: Container, *, areas: set[str] | frozenset[str] | None = None) -> RagchatResolver:
    """Build the resolver for ``areas`` (default: all). Cheap: no service is touched until a request."""
    wanted = ALL_AREAS if areas is None else frozenset(areas)
    app = RagchatResolver(
        body_limit=container.settings.body_limit_bytes,
        cors=CORS,
        enable_validation=True,
        json_body_deserializer=strict_json,
    )
    app.before_body = lambda event: refuse_before_body(container, event)
    register_error_handlers(app)
    register_body_errors(app)
    for area in ("ops", "notes", "chat", "ui"):
        if area not in wanted:
            continue
        r = _area_router(area, container)
        if r is not None:
            app.include_router(r)
        if area == "notes":  # direct uploads (POST /uploads) and workspaces belong to the documents area
            from ragchat.api import uploads, workspaces

            app.include_router(uploads.router(container))
            app.include_router(workspaces.router(container))
    if "ops" in wanted:
        from aws_lambda_powertools.event_handler.openapi.models import Server

        from ragchat import __version__
        from ragchat.api.ops import OPENAPI_DESCRIPTION, OPENAPI_TITLE

        def _require_principal(app: APIGatewayRestResolver, next_middleware: Callable[..., Any]) -> Any:
            principal(app.current_event)
            return next_middleware(app)

        app.enable_swagger(
            path="/swagger",
            title=OPENAPI_TITLE,
            version=__version__,
            description=OPENAPI_DESCRIPTION,
            servers=None,
            middlewares=[_require_principal, swagger_headers],
        )
        _ = Server  # servers default to the stage base path (relative), like /openapi.json
    return app
