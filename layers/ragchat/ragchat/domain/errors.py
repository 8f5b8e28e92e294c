"""Domain errors. The API layer maps each to an HTTP status in one place (``ragchat.api.errors``)."""

from __future__ import annotations


class RagchatError(Exception):
    """Base class; ``status`` is the HTTP status the API answers with."""

    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ValidationError(RagchatError):
    status = 400


class ExtractionError(ValidationError):
    """The file has a supported type but no text could be read from it (or reading it passed a
    limit): a 400 at intake, ``FAILED`` in the pipeline."""


class Unauthenticated(RagchatError):
    status = 401


class Forbidden(RagchatError):
    status = 403


class NotFound(RagchatError):
    status = 404


class Conflict(RagchatError):
    status = 409


class PayloadTooLarge(RagchatError):
    status = 413


class RateLimited(RagchatError):
    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TransientError(RagchatError):
    """A dependency failed in a way worth retrying (throttling, timeout, 5xx)."""

    status = 503


class ModelError(RagchatError):
    """The chat model failed after its retries."""

    status = 502
