"""What a failed Bedrock call means: retry it, or stop and say why (chat model and embedders alike).

Retryable: throttling (``ThrottlingException``, ``TooManyRequestsException``, HTTP 429), the service
or model not being ready (``ServiceUnavailableException``, ``ModelNotReadyException``), server-side
failures (``InternalServerException``, ``ModelTimeoutException``, any HTTP 5xx) and network errors
(connect/read timeouts, refused or dropped connections). Not retryable: every 4xx that a retry cannot
fix — ``ValidationException``, ``AccessDeniedException``, ``ResourceNotFoundException`` and the rest.

An ``AccessDeniedException`` on a model is what a first deploy usually hits (model access not
granted in the Bedrock console, or an IAM policy without the inference profile or the foundation
model in a destination Region): :func:`describe` turns it into a sentence that says so, and
:func:`log_failure` logs it at ERROR level as ``bedrock.access_denied``.

botocore is imported inside the functions (no SDK import at module import time).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence

logger = logging.getLogger("ragchat.adapters.bedrock")

RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelTimeoutException",
        "ModelNotReadyException",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)
ACCESS_DENIED = "AccessDeniedException"
NOT_FOUND = "ResourceNotFoundException"


def error_code(exc: BaseException) -> str | None:
    """The service's error code of a botocore ``ClientError`` (``None`` for anything else)."""
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "") or None
    return None


def http_status(exc: BaseException) -> int:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    return 0


def is_retryable(exc: BaseException) -> bool:
    """Whether another attempt may succeed (see the module docstring)."""
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    if isinstance(
        exc, EndpointConnectionError | ConnectTimeoutError | ReadTimeoutError | ConnectionClosedError
    ):
        return True
    if isinstance(exc, ClientError):
        status = http_status(exc)
        return error_code(exc) in RETRYABLE_CODES or status == 429 or status >= 500
    return False


def describe(exc: BaseException, model_id: str) -> str:
    """One line for logs and error messages; an access or not-found error says what to fix."""
    code = error_code(exc)
    if code == ACCESS_DENIED:
        return (
            f"Bedrock denied access to model {model_id} ({ACCESS_DENIED}): grant model access in the "
            "Bedrock console for this account, and allow bedrock:InvokeModel* on the inference profile "
            "and on the foundation model in every Region the profile routes to"
        )
    if code == NOT_FOUND:
        return (
            f"Bedrock model {model_id} was not found in this Region ({NOT_FOUND}): check the model or "
            "inference profile id (Claude 4.x needs a profile id such as us.anthropic.…)"
        )
    if code is not None:
        message = ""
        from botocore.exceptions import ClientError

        if isinstance(exc, ClientError):
            message = str(exc.response.get("Error", {}).get("Message") or "")
        return f"{code}: {message}" if message else code
    return type(exc).__name__


def log_failure(exc: BaseException, model_id: str, what: str) -> None:
    """Log a final (not retried, or retries spent) failure; access denied gets its own event."""
    code = error_code(exc)
    event = "bedrock.access_denied" if code == ACCESS_DENIED else "bedrock.call_failed"
    logger.error(
        event,
        extra={
            "operation": what,
            "modelId": model_id,
            "errorCode": code or type(exc).__name__,
            "error": describe(exc, model_id),
        },
    )


def jittered(delays: Sequence[float], jitter: Callable[[], float] = random.random) -> list[float]:
    """ "Equal jitter": each delay ``d`` becomes ``d/2 + d/2 * jitter()`` (``jitter`` in [0, 1)), so
    concurrent callers that failed together do not retry together."""
    return [d * (0.5 + 0.5 * jitter()) for d in delays]
