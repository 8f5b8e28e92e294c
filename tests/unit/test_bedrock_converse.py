"""Claude on Bedrock through Converse / ConverseStream with an inference-profile id, on the wire:
botocore serializes the real request and parses the real response — a JSON body for Converse, an
``application/vnd.amazon.eventstream`` body for ConverseStream, encoded here frame by frame (prelude,
headers, payload, CRCs) — so what is asserted is what Bedrock would receive and send."""

from __future__ import annotations

import binascii
import json
import struct
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from ragchat.adapters.aws.bedrock_chat import BedrockConverseChatModel
from ragchat.domain.errors import ModelError
from ragchat.domain.models import ChatTurn, ModelRequest

PROFILE = "us.anthropic.claude-haiku-4-5-20251001-v1:0"


def _request() -> ModelRequest:
    return ModelRequest(
        system="You are a helpful AI assistant. Use ONLY the provided source documents to answer.",
        messages=[
            ChatTurn("user", "What is the Eiffel Tower?"),
            ChatTurn("assistant", "A tower in Paris [source: n1]"),
            ChatTurn("user", "When was it completed?"),
        ],
        sources=[],
        question="When was it completed?",
        max_tokens=256,
    )


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value


def frame(event_type: str, payload: dict[str, Any], *, message_type: str = "event") -> bytes:
    """One AWS event-stream message, as Bedrock sends each ConverseStream event."""
    kind = ":exception-type" if message_type == "exception" else ":event-type"
    headers = (
        _header(kind, event_type)
        + _header(":content-type", "application/json")
        + _header(":message-type", message_type)
    )
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + body
    return message + struct.pack(">I", binascii.crc32(message) & 0xFFFFFFFF)


class Raw:
    """The urllib3 response botocore reads an event stream from."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.closed = False

    def stream(self, amt: int = 1024, decode_content: bool = True) -> Iterator[bytes]:
        for start in range(0, len(self.data), 7):  # small pieces: frames arrive split
            yield self.data[start : start + 7]

    def read(self, amt: int | None = None) -> bytes:
        return self.data

    def close(self) -> None:
        self.closed = True


class Wire:
    """Replaces the HTTP send of a real bedrock-runtime client; records each request."""

    def __init__(self) -> None:
        self.client = boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"total_max_attempts": 1}),
        )
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.responses: list[tuple[int, dict[str, str], bytes]] = []
        self.raws: list[Raw] = []
        self.client.meta.events.register("before-send.bedrock-runtime.*", self._send)

    def _send(self, request: Any, **_: Any) -> AWSResponse:
        self.requests.append((request.url, json.loads(request.body)))
        status, headers, body = self.responses.pop(0)
        raw = Raw(body)
        self.raws.append(raw)
        return AWSResponse(request.url, status, headers, raw)

    def json(self, payload: dict[str, Any], status: int = 200) -> None:
        self.responses.append((status, {"content-type": "application/json"}, json.dumps(payload).encode()))

    def events(self, *frames: bytes) -> None:
        self.responses.append((200, {"content-type": "application/vnd.amazon.eventstream"}, b"".join(frames)))


def _model(wire: Wire) -> BedrockConverseChatModel:
    return BedrockConverseChatModel(wire.client, PROFILE, sleep=lambda s: None, jitter=lambda: 1.0)


EXPECTED_BODY = {
    "system": [{"text": "You are a helpful AI assistant. Use ONLY the provided source documents to answer."}],
    "messages": [
        {"role": "user", "content": [{"text": "What is the Eiffel Tower?"}]},
        {"role": "assistant", "content": [{"text": "A tower in Paris [source: n1]"}]},
        {"role": "user", "content": [{"text": "When was it completed?"}]},
    ],
    "inferenceConfig": {"maxTokens": 256},
}


def test_converse_with_an_inference_profile_id_sends_the_system_prompt_apart() -> None:
    wire = Wire()
    wire.json(
        {
            "output": {"message": {"role": "assistant", "content": [{"text": "In 1889 [source: n1]"}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 120, "outputTokens": 9, "totalTokens": 129},
            "metrics": {"latencyMs": 412},
        }
    )
    out = _model(wire).complete(_request())
    ((url, body),) = wire.requests
    # the profile id goes in the path (URL-encoded), the system prompt in "system", not in a message
    assert (
        url
        == "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-haiku-4-5-20251001-v1%3A0/converse"
    )
    assert body == EXPECTED_BODY
    assert out.text == "In 1889 [source: n1]" and out.model == PROFILE
    assert (out.input_tokens, out.output_tokens) == (120, 9)


def test_converse_stream_yields_the_text_deltas_of_the_event_stream() -> None:
    wire = Wire()
    wire.events(
        frame("messageStart", {"role": "assistant"}),
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "In 18"}}),
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "89 [source: n1]"}}),
        frame("contentBlockStop", {"contentBlockIndex": 0}),
        frame("messageStop", {"stopReason": "end_turn"}),
        frame(
            "metadata",
            {"usage": {"inputTokens": 5, "outputTokens": 4, "totalTokens": 9}, "metrics": {"latencyMs": 300}},
        ),
    )
    deltas = list(_model(wire).stream(_request()))
    ((url, body),) = wire.requests
    assert url.endswith("/model/us.anthropic.claude-haiku-4-5-20251001-v1%3A0/converse-stream")
    assert body == EXPECTED_BODY
    assert deltas == ["In 18", "89 [source: n1]"]


def test_a_stream_cut_by_max_tokens_keeps_its_text_and_logs_the_stop_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wire = Wire()
    wire.events(
        frame("messageStart", {"role": "assistant"}),
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "The tower was"}}),
        frame("messageStop", {"stopReason": "max_tokens"}),
    )
    with caplog.at_level("WARNING"):
        assert "".join(_model(wire).stream(_request())) == "The tower was"
    assert [r.__dict__.get("stopReason") for r in caplog.records if r.msg == "bedrock.stop_reason"] == [
        "max_tokens"
    ]


def test_a_stream_blocked_before_any_text_fails() -> None:
    wire = Wire()
    wire.events(
        frame("messageStart", {"role": "assistant"}), frame("messageStop", {"stopReason": "content_filtered"})
    )
    with pytest.raises(ModelError, match="content_filtered"):
        list(_model(wire).stream(_request()))


def test_an_error_event_in_the_stream_ends_it_with_a_model_error() -> None:
    wire = Wire()
    wire.events(
        frame("messageStart", {"role": "assistant"}),
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "In"}}),
        frame(
            "serviceUnavailableException",
            {"message": "Bedrock is unable to process"},
            message_type="exception",
        ),
    )
    got: list[str] = []
    with pytest.raises(ModelError, match="serviceUnavailableException: Bedrock is unable to process"):
        for delta in _model(wire).stream(_request()):
            got.append(delta)
    assert got == ["In"]


def test_converse_with_no_text_and_a_context_window_stop_fails() -> None:
    wire = Wire()
    wire.json(
        {
            "output": {"message": {"role": "assistant", "content": []}},
            "stopReason": "model_context_window_exceeded",
            "usage": {"inputTokens": 200000, "outputTokens": 0, "totalTokens": 200000},
            "metrics": {"latencyMs": 10},
        }
    )
    with pytest.raises(ModelError, match="model_context_window_exceeded"):
        _model(wire).complete(_request())


def test_a_throttled_stream_request_is_retried_before_any_text() -> None:
    wire = Wire()
    wire.json({"message": "Too many requests"}, status=429)
    wire.responses[-1][1]["x-amzn-errortype"] = "ThrottlingException"
    wire.events(
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "1889"}}),
        frame("messageStop", {"stopReason": "end_turn"}),
    )
    sleeps: list[float] = []
    model = BedrockConverseChatModel(wire.client, PROFILE, sleep=sleeps.append, jitter=lambda: 1.0)
    assert list(model.stream(_request())) == ["1889"]
    assert sleeps == [0.2] and len(wire.requests) == 2
