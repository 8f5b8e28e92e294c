"""Area "ops": ``/health`` (no auth), ``/openapi.json`` and ``/swagger``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from ragchat import __version__
from ragchat.api.auth import principal

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver

    from ragchat.bootstrap import Container

logger = logging.getLogger(__name__)

OPENAPI_TITLE = "ragchat"
OPENAPI_DESCRIPTION = (
    "Retrieval-augmented notes and chat. Every API route but /health needs a principal "
    "(Cognito JWT or API key in the cloud; a bearer token with `ragchat serve` when one is configured)."
)


def router(container: Container, *, full_app: Callable[[], APIGatewayRestResolver]) -> APIGatewayRouter:
    """``full_app`` builds the resolver of every area (the OpenAPI document covers the whole API,
    whatever areas this function serves)."""
    r = APIGatewayRouter()  # type: ignore[no-untyped-call]

    @r.get("/health", summary="Liveness, and which model answers chat turns", tags=["ops"])
    def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "version": __version__,
            "backend": container.settings.backend,
            "model": answering_model(container),
        }

    @r.get("/openapi.json", summary="This OpenAPI document", tags=["ops"], include_in_schema=False)
    def openapi() -> Response[str]:
        principal(r.current_event)
        return Response(
            status_code=200,
            content_type=content_types.APPLICATION_JSON,
            body=openapi_json(full_app(), base_path=_base_path(r.current_event)),
        )

    return r


def answering_model(container: Container) -> str:
    """Who answers chat turns: ``bedrock:<model id>``, ``anthropic:<model>`` or ``extractive``
    (``auto`` resolved); ``unknown`` when the Anthropic secret can't be read (liveness still answers;
    the error is logged)."""
    try:
        choice = container.chat_choice()
    except Exception:  # the secret store is down or denies access: report it, stay alive
        logger.exception("health: could not tell which model answers")
        return "unknown"
    if choice == "bedrock":
        return f"bedrock:{container.settings.bedrock_chat_model_id}"
    if choice == "anthropic":
        return f"anthropic:{container.settings.anthropic_model}"
    return "extractive"


def _base_path(event: Any) -> str:
    """API Gateway serves a stage under ``/<stage>``; locally the stage is ``$default`` (no prefix)."""
    stage = (event.raw_event.get("requestContext") or {}).get("stage")
    return "/" if not stage or stage == "$default" else f"/{stage}"


def openapi_json(full: APIGatewayRestResolver, *, base_path: str = "/") -> str:
    """The OpenAPI document of ``full``, the resolver of every area (chat included when installed).
    Building routers touches no service, so this is cheap."""
    from aws_lambda_powertools.event_handler.openapi.models import Server

    return full.get_openapi_json_schema(
        title=OPENAPI_TITLE,
        version=__version__,
        description=OPENAPI_DESCRIPTION,
        servers=[Server(url=base_path)],
    )
