"""Structured log events shared by the services (docs/deploy.md field names)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

logger = Logger(service="ragchat", child=True)


def log_error(conversation_id: str | None, error_type: str, message: str, **more: Any) -> None:
    """``chat.error {conversationId, errorType, message}``. The standard library reserves ``message``
    as an extra key, so the error text is the record's own ``message`` and the event name goes in
    ``event`` (query the logs with ``event = "chat.error"``)."""
    logger.warning(
        message,
        extra={"event": "chat.error", "conversationId": conversation_id, "errorType": error_type, **more},
    )


def message_of(exc: BaseException) -> str:
    """An exception's text for a log line: its ``message`` attribute, its ``str``, or its type."""
    return str(getattr(exc, "message", None) or exc or type(exc).__name__)
