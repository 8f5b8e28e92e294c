"""``ChatModel`` on Amazon Bedrock through the Converse API (Claude on Bedrock by default).

The system prompt goes in ``system``; turns alternate user/assistant starting with the user (same
merge rules as the Anthropic adapter). Retries (SPEC §7): 2, on throttling, timeouts, 5xx and
connection errors, sleeping 200 ms then 400 ms through an injected ``sleep``. Build the client with
botocore retries off (``Config(retries={"total_max_attempts": 1})``) so this policy is the only one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from ragchat.adapters.aws.anthropic_model import alternate
from ragchat.domain.chat import RETRY_DELAYS, Sleep, call_with_retries
from ragchat.domain.errors import ModelError
from ragchat.domain.models import Completion, ModelRequest

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


def is_retryable(exc: BaseException) -> bool:
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
        err = exc.response.get("Error", {})
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        return err.get("Code") in RETRYABLE_CODES or status == 429 or status >= 500
    return False


class BedrockConverseChatModel:
    def __init__(
        self,
        client: Any,
        model_id: str,
        *,
        sleep: Sleep = time.sleep,
        retry_delays: Sequence[float] = RETRY_DELAYS,
    ) -> None:
        self.model_id = model_id
        self._client = client
        self._sleep = sleep
        self._delays = tuple(retry_delays)

    def _request(self, request: ModelRequest) -> dict[str, Any]:
        return {
            "modelId": self.model_id,
            "system": [{"text": request.system}],
            "messages": [
                {"role": m["role"], "content": [{"text": m["content"]}]} for m in alternate(request.messages)
            ],
            "inferenceConfig": {"maxTokens": request.max_tokens},
        }

    def _call(self, op: str, kwargs: dict[str, Any]) -> Any:
        try:
            return call_with_retries(
                lambda: getattr(self._client, op)(**kwargs),
                retryable=is_retryable,
                sleep=self._sleep,
                delays=self._delays,
            )
        except Exception as exc:
            raise ModelError(f"Bedrock {op} failed: {_describe(exc)}") from exc

    def complete(self, request: ModelRequest) -> Completion:
        response = self._call("converse", self._request(request))
        content = response.get("output", {}).get("message", {}).get("content", [])
        text = "".join(block.get("text", "") for block in content)
        usage = response.get("usage") or {}
        return Completion(
            text=text,
            model=self.model_id,
            input_tokens=usage.get("inputTokens"),
            output_tokens=usage.get("outputTokens"),
        )

    def stream(self, request: ModelRequest) -> Iterator[str]:
        response = self._call("converse_stream", self._request(request))
        try:
            for event in response.get("stream", []):
                delta = event.get("contentBlockDelta", {}).get("delta", {})
                if "text" in delta:
                    yield delta["text"]
                for key in ("internalServerException", "modelStreamErrorException", "throttlingException"):
                    if key in event:
                        raise ModelError(f"Bedrock stream failed: {key}")
        except GeneratorExit:
            stream = response.get("stream")
            if stream is not None and hasattr(stream, "close"):
                stream.close()
            raise


def _describe(exc: BaseException) -> str:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "ClientError")
    return type(exc).__name__
