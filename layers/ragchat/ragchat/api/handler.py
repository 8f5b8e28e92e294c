"""Lambda entry points, built once per process and lazily (nothing happens at import time).

``functions/*/app.py`` are one-liners over these: ``handler = http_handler({"notes", "ops"})``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger

Handler = Callable[[dict[str, Any], Any], Any]

logger = Logger(service="ragchat")

_lock = threading.Lock()
_container: Any = None


def container() -> Any:
    """The process-wide container (settings validated on first use; a bad variable fails loudly)."""
    global _container
    if _container is None:
        with _lock:
            if _container is None:
                from ragchat.container import Container

                _container = Container()
    return _container


def set_container(value: Any | None) -> None:
    """Install the process-wide container (integration tests inject moto-backed adapters and a fake
    embedder); ``None`` resets it so the next call builds one from the environment. Handlers made
    after this call (``http_handler`` builds its resolver on first use) see the new container."""
    global _container
    with _lock:
        _container = value


def http_handler(areas: set[str]) -> Handler:
    """An API Gateway REST (proxy) handler serving ``areas``."""
    app: Any = None

    def build() -> Any:
        nonlocal app
        if app is None:
            from ragchat.api.app import create_app

            app = create_app(container(), areas=areas)
        return app

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        correlate(event, context)
        result: dict[str, Any] = build().resolve(event, context)
        return result

    handler.warm = build  # type: ignore[attr-defined]
    return handler


def warm_before_snapshot(handler: Handler, services: tuple[str, ...] = ()) -> bool:
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
        handler.warm()  # type: ignore[attr-defined]
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


def ingest_step_handler() -> Handler:
    """Step Functions task: ``{"step": "split"|"embed_index"|"finalize"|"fail", "owner", "documentId",
    ...}`` → the step's JSON result. Errors propagate so the state machine's Retry/Catch apply (the
    error type name is the Step Functions error name, e.g. ``TransientError``)."""

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        logger.clear_state()
        step = event.get("step")
        owner = str(event.get("owner") or "")
        document_id = str(event.get("documentId") or "")
        logger.append_keys(documentId=document_id, step=step)
        steps = container().ingest_steps
        if step == "split":
            result: dict[str, Any] = steps.split(owner, document_id)
        elif step == "embed_index":
            result = steps.embed_index(owner, document_id, str(event["key"]))
        elif step == "finalize":
            result = steps.finalize(owner, document_id, int(event.get("chunkCount") or 0))
        elif step == "fail":
            result = steps.fail(owner, document_id, step_error(event.get("error")))
        else:
            raise ValueError(f"unknown ingestion step {step!r}")
        return result

    return handler


def step_error(error: Any) -> str:
    """A Step Functions Catch result (``{"Error": ..., "Cause": ...}``) → the text ``fail`` records."""
    if isinstance(error, dict):
        cause = error.get("Cause")
        name = error.get("Error")
        if isinstance(cause, str) and cause.strip():
            return cause
        return str(name or "Ingestion failed")
    return str(error or "Ingestion failed")


def s3_ingest_handler() -> Handler:
    """S3 ``ObjectCreated`` events under ``uploads/`` → ingestion (see ``ragchat.api.s3_events``)."""

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        from ragchat.api.s3_events import ingest_s3_event

        logger.clear_state()
        return ingest_s3_event(container(), event)

    return handler
