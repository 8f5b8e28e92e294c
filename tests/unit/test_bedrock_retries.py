"""Which Bedrock errors are retried, for the chat model (Converse) and the embedders (InvokeModel):
botocore ``Stubber`` errors with the service's codes and HTTP statuses, an injected sleep, clock and
jitter. Retryable: throttling, service unavailable, model not ready, internal error, model timeout,
any 5xx. Not: validation, access denied, resource not found — and access denied says what to fix."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from ragchat.adapters.aws.bedrock import Backoff, CohereEmbedder, TitanEmbedder
from ragchat.adapters.aws.bedrock_chat import BedrockConverseChatModel
from ragchat.domain.errors import ModelError, TransientError, ValidationError
from ragchat.domain.models import ChatTurn, ModelRequest

from tests.fakes import FakeClock

PROFILE = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
RETRYABLE = [
    ("ThrottlingException", 429),
    ("ServiceUnavailableException", 503),
    ("ModelNotReadyException", 429),
    ("InternalServerException", 500),
    ("ModelTimeoutException", 408),
    ("SomethingNewException", 502),  # any 5xx
]
FINAL = [("ValidationException", 400), ("AccessDeniedException", 403), ("ResourceNotFoundException", 404)]
CONVERSE_OK = {
    "output": {"message": {"role": "assistant", "content": [{"text": "Answer [source: n1]"}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 5, "outputTokens": 3, "totalTokens": 8},
    "metrics": {"latencyMs": 10},
}


def _client() -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )


def _request(timeout_s: float | None = None) -> ModelRequest:
    return ModelRequest(
        system="SYSTEM", messages=[ChatTurn("user", "q")], sources=[], question="q", max_tokens=50,
        timeout_s=timeout_s,
    )  # fmt: skip


def _titan_body() -> dict[str, Any]:
    import io
    import json

    from botocore.response import StreamingBody

    raw = json.dumps({"embedding": [1.0] + [0.0] * 255, "inputTextTokenCount": 1}).encode()
    return {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}


# ----------------------------------------------------------------------------- chat model
@pytest.mark.parametrize(("code", "status"), RETRYABLE)
def test_the_chat_model_retries_transient_bedrock_errors(code: str, status: int) -> None:
    client = _client()
    stub = Stubber(client)
    stub.add_client_error("converse", code, http_status_code=status)
    stub.add_response("converse", CONVERSE_OK)
    sleeps: list[float] = []
    with stub:
        out = BedrockConverseChatModel(client, PROFILE, sleep=sleeps.append, jitter=lambda: 0.5).complete(
            _request()
        )
    assert out.text == "Answer [source: n1]"
    assert sleeps == [pytest.approx(0.15)]  # 200 ms with equal jitter: between 100 and 200 ms


@pytest.mark.parametrize(("code", "status"), FINAL)
def test_the_chat_model_does_not_retry_client_errors(code: str, status: int) -> None:
    client = _client()
    stub = Stubber(client)
    stub.add_client_error("converse", code, http_status_code=status)
    sleeps: list[float] = []
    with stub, pytest.raises(ModelError, match=code):
        BedrockConverseChatModel(client, PROFILE, sleep=sleeps.append).complete(_request())
    stub.assert_no_pending_responses()
    assert sleeps == []


def test_access_denied_on_the_chat_model_says_what_to_fix_in_the_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = _client()
    stub = Stubber(client)
    stub.add_client_error(
        "converse",
        "AccessDeniedException",
        "You don't have access to the model with the specified model ID.",
        http_status_code=403,
    )
    with stub, caplog.at_level("ERROR"), pytest.raises(ModelError) as raised:
        BedrockConverseChatModel(client, PROFILE, sleep=lambda s: None).complete(_request())
    (record,) = [r for r in caplog.records if r.msg == "bedrock.access_denied"]
    assert record.levelname == "ERROR" and record.__dict__["modelId"] == PROFILE
    assert "grant model access in the Bedrock console" in record.__dict__["error"]
    assert "inference profile" in record.__dict__["error"] and PROFILE in str(raised.value)


def test_chat_retry_waits_are_jittered_between_half_and_all_of_200_then_400_ms() -> None:
    for jitter, expected in ((0.0, [0.1, 0.2]), (0.999, [0.1999, 0.3998])):
        client = _client()
        stub = Stubber(client)
        for _ in range(3):
            stub.add_client_error("converse", "ThrottlingException", http_status_code=429)
        sleeps: list[float] = []
        with stub, pytest.raises(ModelError, match="ThrottlingException"):
            BedrockConverseChatModel(
                client, PROFILE, sleep=sleeps.append, jitter=lambda j=jitter: j
            ).complete(_request())
        assert sleeps == pytest.approx(expected)


def test_chat_retries_stop_at_the_deadline() -> None:
    from botocore.exceptions import ClientError

    clock = FakeClock()

    class SlowlyFailing:
        calls = 0

        def converse(self, **_: Any) -> Any:
            SlowlyFailing.calls += 1
            clock.advance(1.0)  # each attempt fails after its 1 s first-token wait
            raise ClientError(
                {
                    "Error": {"Code": "ServiceUnavailableException"},
                    "ResponseMetadata": {"HTTPStatusCode": 503},
                },
                "Converse",
            )

    model = BedrockConverseChatModel(
        SlowlyFailing(),
        PROFILE,
        sleep=clock.advance,
        clock=clock,
        first_token_timeout=1.0,
        jitter=lambda: 1.0,
    )
    started = clock()
    with pytest.raises(ModelError, match="ServiceUnavailableException"):
        model.complete(_request(timeout_s=2.5))
    # 1 s, a 0.2 s wait, 1.3 s left: enough for another 1 s attempt; then 0.3 s left, less than
    # the 0.4 s wait: no third attempt, and the call ended within its 2.5 s
    assert SlowlyFailing.calls == 2
    assert clock() - started == pytest.approx(2.2)


# ----------------------------------------------------------------------------- embedders
def _titan(
    client: Any, sleeps: list[float], clock: FakeClock | None = None, budget_s: float = 20.0
) -> TitanEmbedder:
    backoff = Backoff(
        attempts=6, base=0.25, cap=8.0, budget_s=budget_s, sleep=sleeps.append, jitter=lambda: 1.0,
        clock=clock or FakeClock(),
    )  # fmt: skip
    return TitanEmbedder(client, dimension=256, concurrency=1, backoff=backoff)


@pytest.mark.parametrize(("code", "status"), RETRYABLE)
def test_the_embedders_retry_transient_bedrock_errors(code: str, status: int) -> None:
    client = _client()
    stub = Stubber(client)
    stub.add_client_error("invoke_model", code, http_status_code=status)
    stub.add_client_error("invoke_model", code, http_status_code=status)
    stub.add_response("invoke_model", _titan_body())
    sleeps: list[float] = []
    with stub:
        vector = _titan(client, sleeps).embed_query("hello")
    assert vector[0] == pytest.approx(1.0)
    assert sleeps == [0.25, 0.5]


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        ("ValidationException", 400, ValidationError),
        ("AccessDeniedException", 403, ModelError),
        ("ResourceNotFoundException", 404, ModelError),
    ],
)
def test_the_embedders_do_not_retry_client_errors(code: str, status: int, error: type[Exception]) -> None:
    client = _client()
    stub = Stubber(client)
    stub.add_client_error("invoke_model", code, http_status_code=status)
    sleeps: list[float] = []
    with stub, pytest.raises(error):
        CohereEmbedder(client, concurrency=1, backoff=Backoff(sleep=sleeps.append)).embed_documents(["x"])
    assert sleeps == []


def test_access_denied_on_an_embedding_model_says_so_in_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    client = _client()
    stub = Stubber(client)
    stub.add_client_error("invoke_model", "AccessDeniedException", http_status_code=403)
    with stub, caplog.at_level("ERROR"), pytest.raises(ModelError, match="Bedrock denied access to model"):
        _titan(client, []).embed_documents(["x"])
    (record,) = [r for r in caplog.records if r.msg == "bedrock.access_denied"]
    assert record.__dict__["modelId"] == "amazon.titan-embed-text-v2:0"


def test_embedding_retries_stop_within_the_budget_with_a_transient_error() -> None:
    clock = FakeClock()
    client = _client()
    stub = Stubber(client)
    for _ in range(6):
        stub.add_client_error("invoke_model", "ThrottlingException", http_status_code=429)
    sleeps: list[float] = []
    embedder = _titan(client, sleeps, clock=clock, budget_s=2.0)
    embedder.backoff.sleep = lambda s: (sleeps.append(s), clock.advance(s))  # type: ignore[assignment,func-returns-value]
    with stub, pytest.raises(TransientError, match="ThrottlingException"):
        embedder.embed_query("x")
    assert sleeps == [0.25, 0.5, 1.0]  # 1.75 s; the next wait (2 s) would pass the 2 s budget
