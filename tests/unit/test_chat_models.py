"""The Claude adapters: request shape and retry policy, against a mocked HTTP transport (Anthropic API)
and a botocore Stubber (Bedrock Converse). No network, no real sleeping (injected sleep)."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx2
import pytest
from ragchat.adapters.aws.anthropic_model import AnthropicChatModel
from ragchat.adapters.aws.bedrock_chat import BedrockConverseChatModel, client_config
from ragchat.domain.errors import ModelError
from ragchat.domain.models import ChatTurn, Hit, ModelRequest

from tests.fakes import FakeClock


def _request() -> ModelRequest:
    return ModelRequest(
        system="SYSTEM PROMPT",
        messages=[
            ChatTurn("assistant", "a stray assistant turn first"),
            ChatTurn("user", "first question"),
            ChatTurn("assistant", "first answer"),
            ChatTurn("user", "follow-up"),
            ChatTurn("user", "current question"),
        ],
        sources=[],
        question="current question",
        max_tokens=300,
    )


def _message(text: str, *, stop: str = "end_turn", content: list[dict[str, Any]] | None = None) -> dict:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content if content is not None else [{"type": "text", "text": text}],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 7},
    }


class Transport:
    """Scripted responses; records every request body."""

    def __init__(self, responses: list[tuple[int, dict[str, Any]] | Exception]) -> None:
        self.responses = list(responses)
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        self.headers.append(dict(request.headers))
        item = self.responses.pop(0)
        if isinstance(item, Exception):
            raise item
        status, body = item
        return httpx2.Response(status, json=body)


def _claude(transport: Transport, sleeps: list[float]) -> AnthropicChatModel:
    client = httpx2.Client(transport=httpx2.MockTransport(transport))
    return AnthropicChatModel(api_key="sk-test", model="claude-test", http_client=client, sleep=sleeps.append)


def test_claude_request_has_system_separate_and_alternating_roles() -> None:
    t = Transport([(200, _message("The answer [source: n1]"))])
    model = _claude(t, [])
    out = model.complete(_request())

    assert out.text == "The answer [source: n1]"
    assert out.model == "claude-test"
    assert (out.input_tokens, out.output_tokens) == (11, 7)
    body = t.bodies[0]
    assert body["system"] == "SYSTEM PROMPT"
    assert body["max_tokens"] == 300
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user"]
    assert body["messages"][-1]["content"] == "follow-up\n\ncurrent question"
    assert all(m["role"] != "system" for m in body["messages"])
    sent = t.headers[0]
    assert "sk-test" in (sent.get("x-api-key", "") + sent.get("authorization", ""))


def test_claude_retries_twice_with_200_then_400_ms() -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    t = Transport([(529, overloaded), (500, overloaded), (200, _message("ok"))])
    sleeps: list[float] = []
    out = _claude(t, sleeps).complete(_request())
    assert out.text == "ok"
    assert sleeps == [0.2, 0.4]
    assert len(t.bodies) == 3


def test_claude_retries_network_errors_then_gives_up() -> None:
    t = Transport([httpx2.ConnectError("down"), httpx2.ReadTimeout("slow"), httpx2.ConnectError("down")])
    sleeps: list[float] = []
    with pytest.raises(ModelError):
        _claude(t, sleeps).complete(_request())
    assert sleeps == [0.2, 0.4]
    assert len(t.bodies) == 3


def test_claude_does_not_retry_a_bad_request() -> None:
    bad = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
    t = Transport([(400, bad)])
    sleeps: list[float] = []
    with pytest.raises(ModelError):
        _claude(t, sleeps).complete(_request())
    assert sleeps == []
    assert len(t.bodies) == 1


def test_claude_retries_rate_limit_429() -> None:
    limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    t = Transport([(429, limited), (200, _message("fine"))])
    sleeps: list[float] = []
    assert _claude(t, sleeps).complete(_request()).text == "fine"
    assert sleeps == [0.2]


class Tools:
    def __init__(self) -> None:
        self.queries: list[tuple[str, int]] = []

    def search_notes(self, query: str, limit: int) -> list[Hit]:
        self.queries.append((query, limit))
        return [Hit(id="n7", score=0.9, text="Seven is the answer.")]

    def get_note(self, note_id: str) -> Hit | None:
        return Hit(id=note_id, score=1.0, text="full text") if note_id == "n8" else None


def test_claude_tool_use_loop_runs_tools_and_reports_tool_hits() -> None:
    tool_call = _message(
        "",
        stop="tool_use",
        content=[
            {"type": "text", "text": "Let me search."},
            {"type": "tool_use", "id": "tu_1", "name": "search_notes", "input": {"query": "x", "limit": 99}},
        ],
    )
    get_call = _message(
        "",
        stop="tool_use",
        content=[{"type": "tool_use", "id": "tu_2", "name": "get_note", "input": {"id": "n8"}}],
    )
    t = Transport([(200, tool_call), (200, get_call), (200, _message("Seven [source: n7]"))])
    tools = Tools()
    out = _claude(t, []).complete_with_tools(_request(), tools)

    assert out.text == "Seven [source: n7]"
    assert [h.id for h in out.tool_hits] == ["n7", "n8"]
    assert tools.queries == [("x", 20)]  # limit clamped to 20
    assert [tl["name"] for tl in t.bodies[0]["tools"]] == ["search_notes", "get_note"]
    second = t.bodies[1]["messages"]
    assert second[-2]["role"] == "assistant" and second[-2]["content"][1]["type"] == "tool_use"
    result = second[-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "tu_1"
    assert "[Source id=n7] Seven is the answer." in result["content"]


def test_claude_tool_rounds_are_bounded() -> None:
    def call(i: int) -> dict:
        return _message(
            "",
            stop="tool_use",
            content=[{"type": "tool_use", "id": f"tu_{i}", "name": "search_notes", "input": {"query": "q"}}],
        )

    t = Transport([(200, call(i)) for i in range(4)] + [(200, _message("done"))])
    out = _claude(t, []).complete_with_tools(_request(), Tools(), max_rounds=4)
    assert out.text == "done"
    assert len(t.bodies) == 5
    assert t.bodies[-1]["tool_choice"] == {"type": "none"}


# ------------------------------------------------------------------------------------ Bedrock Converse
def _bedrock() -> tuple[Any, Any]:
    import boto3
    from botocore.config import Config
    from botocore.stub import Stubber

    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
        config=Config(retries={"total_max_attempts": 1}),
    )
    return client, Stubber(client)


CONVERSE_OK = {
    "output": {"message": {"role": "assistant", "content": [{"text": "From Bedrock [source: n1]"}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 5, "outputTokens": 3, "totalTokens": 8},
    "metrics": {"latencyMs": 10},
}


def test_converse_request_shape() -> None:
    client, stub = _bedrock()
    expected = {
        "modelId": "anthropic.claude-test",
        "system": [{"text": "SYSTEM PROMPT"}],
        "messages": [
            {"role": "user", "content": [{"text": "first question"}]},
            {"role": "assistant", "content": [{"text": "first answer"}]},
            {"role": "user", "content": [{"text": "follow-up\n\ncurrent question"}]},
        ],
        "inferenceConfig": {"maxTokens": 300},
    }
    stub.add_response("converse", CONVERSE_OK, expected)
    with stub:
        out = BedrockConverseChatModel(client, "anthropic.claude-test", sleep=lambda s: None).complete(
            _request()
        )
    stub.assert_no_pending_responses()
    assert out.text == "From Bedrock [source: n1]"
    assert out.model == "anthropic.claude-test"
    assert (out.input_tokens, out.output_tokens) == (5, 3)


def test_converse_retries_throttling_with_backoff() -> None:
    client, stub = _bedrock()
    stub.add_client_error("converse", "ThrottlingException", http_status_code=429)
    stub.add_client_error("converse", "InternalServerException", http_status_code=500)
    stub.add_response("converse", CONVERSE_OK)
    sleeps: list[float] = []
    with stub:
        out = BedrockConverseChatModel(client, "m", sleep=sleeps.append, jitter=lambda: 1.0).complete(
            _request()
        )
    assert out.text.startswith("From Bedrock")
    assert sleeps == [0.2, 0.4]


def test_converse_gives_up_after_two_retries_and_skips_validation_errors() -> None:
    client, stub = _bedrock()
    for _ in range(3):
        stub.add_client_error("converse", "ServiceUnavailableException", http_status_code=503)
    stub.add_client_error("converse", "ValidationException", http_status_code=400)
    sleeps: list[float] = []
    model = BedrockConverseChatModel(client, "m", sleep=sleeps.append, jitter=lambda: 1.0)
    with stub:
        with pytest.raises(ModelError):
            model.complete(_request())
        assert sleeps == [0.2, 0.4]
        with pytest.raises(ModelError):
            model.complete(_request())
    assert sleeps == [0.2, 0.4]  # no retry on a 400


def _converse_tool_call(use_id: str, name: str, args: dict, text: str = "") -> dict:
    content: list[dict] = [{"text": text}] if text else []
    content.append({"toolUse": {"toolUseId": use_id, "name": name, "input": args}})
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 5, "outputTokens": 3, "totalTokens": 8},
        "metrics": {"latencyMs": 10},
    }


def test_converse_tool_use_loop_runs_tools_and_reports_tool_hits() -> None:
    client, stub = _bedrock()
    calls: list[dict] = []
    client.meta.events.register(
        "provide-client-params.bedrock-runtime.Converse",
        lambda params, **_: calls.append(copy.deepcopy(params)),
    )
    stub.add_response(
        "converse", _converse_tool_call("tu_1", "search_notes", {"query": "x", "limit": 99}, "Let me search.")
    )
    stub.add_response("converse", _converse_tool_call("tu_2", "get_note", {"id": "n8"}))
    stub.add_response(
        "converse",
        {
            **CONVERSE_OK,
            "output": {"message": {"role": "assistant", "content": [{"text": "Seven [source: n7]"}]}},
        },
    )
    tools = Tools()
    with stub:
        out = BedrockConverseChatModel(
            client, "anthropic.claude-test", sleep=lambda s: None
        ).complete_with_tools(_request(), tools)
    stub.assert_no_pending_responses()
    assert out.text == "Seven [source: n7]"
    assert [h.id for h in out.tool_hits] == ["n7", "n8"]
    assert tools.queries == [("x", 20)]  # limit clamped to 20
    specs = [t["toolSpec"] for t in calls[0]["toolConfig"]["tools"]]
    assert [s["name"] for s in specs] == ["search_notes", "get_note"]
    assert specs[0]["inputSchema"]["json"]["required"] == ["query"]
    second = calls[1]["messages"]
    assert second[-2]["role"] == "assistant" and second[-2]["content"][1]["toolUse"]["toolUseId"] == "tu_1"
    result = second[-1]["content"][0]["toolResult"]
    assert result["toolUseId"] == "tu_1"
    assert "[Source id=n7] Seven is the answer." in result["content"][0]["text"]
    assert all("toolConfig" in c for c in calls)  # Converse needs it once tool blocks are present


def test_converse_tool_rounds_are_bounded_and_the_last_round_asks_for_an_answer() -> None:
    client, stub = _bedrock()
    calls: list[dict] = []
    client.meta.events.register(
        "provide-client-params.bedrock-runtime.Converse",
        lambda params, **_: calls.append(copy.deepcopy(params)),
    )
    for i in range(3):
        stub.add_response("converse", _converse_tool_call(f"tu_{i}", "search_notes", {"query": "q"}))
    stub.add_response(
        "converse", _converse_tool_call("tu_x", "search_notes", {"query": "q"}, "Best I can say: seven.")
    )
    with stub:
        out = BedrockConverseChatModel(client, "m", sleep=lambda s: None).complete_with_tools(
            _request(), Tools(), max_rounds=3
        )
    stub.assert_no_pending_responses()
    assert len(calls) == 4
    assert out.text == "Best I can say: seven."  # the last call's text; its tool request is not run
    last_user = calls[-1]["messages"][-1]["content"]
    assert last_user[-1]["text"].startswith("No more searches will run")
    assert not any("No more searches" in json.dumps(c["messages"]) for c in calls[:-1])


# ----------------------------------------------------------------------------- deadlines (issue 8)
class HungTransport:
    """A Claude endpoint that accepts and never answers: each attempt 'waits' its whole read timeout
    on a fake clock, then times out as httpx would. Records the timeouts each attempt was given."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.timeouts: list[dict[str, float]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        timeout = dict(request.extensions["timeout"])
        self.timeouts.append(timeout)
        self.clock.advance(timeout["read"])
        raise httpx2.ReadTimeout("no answer")


def _hung_claude(clock: FakeClock, **kwargs: Any) -> tuple[AnthropicChatModel, HungTransport]:
    transport = HungTransport(clock)
    client = httpx2.Client(transport=httpx2.MockTransport(transport))
    model = AnthropicChatModel(
        api_key="sk-test", model="claude-test", http_client=client, sleep=clock.advance, clock=clock, **kwargs
    )
    return model, transport


def test_claude_attempts_have_connect_and_first_token_timeouts() -> None:
    clock = FakeClock()
    model, transport = _hung_claude(clock)
    with pytest.raises(ModelError):
        model.complete(_request())  # no budget: every attempt waits the first-token timeout
    assert [(t["connect"], t["read"]) for t in transport.timeouts] == [(3.0, 10.0)] * 3


def test_a_hung_claude_call_ends_within_its_budget() -> None:
    clock = FakeClock()
    model, transport = _hung_claude(clock, connect_timeout=2.0, first_token_timeout=10.0)
    started = clock()
    request = _request()
    request.timeout_s = 15.0
    with pytest.raises(ModelError):
        model.complete(request)
    assert clock() - started <= 15.0
    # 10 s, then a retry with what is left (15 - 10 - 0.2), then no time for another
    assert [t["read"] for t in transport.timeouts] == [10.0, pytest.approx(4.8)]
    assert transport.timeouts[1]["connect"] == 2.0


def test_a_hung_claude_stream_ends_within_its_budget() -> None:
    clock = FakeClock()
    model, transport = _hung_claude(clock)
    request = _request()
    request.timeout_s = 12.0
    with pytest.raises(ModelError):
        list(model.stream(request))
    assert clock() - FakeClock().now == pytest.approx(12.0)
    assert [t["read"] for t in transport.timeouts] == [10.0, pytest.approx(1.8)]


def test_bedrock_client_config_has_the_timeouts_and_no_botocore_retries() -> None:
    config = client_config(connect_timeout=3.0, first_token_timeout=10.0)
    assert (config.connect_timeout, config.read_timeout) == (3.0, 10.0)
    assert config.retries == {"total_max_attempts": 1}


def test_a_hung_bedrock_call_stops_retrying_when_its_budget_is_spent() -> None:
    from botocore.exceptions import ReadTimeoutError

    clock = FakeClock()

    class HungClient:
        calls = 0

        def converse(self, **kwargs: Any) -> Any:
            HungClient.calls += 1
            clock.advance(10.0)  # the client's read timeout (client_config)
            raise ReadTimeoutError(endpoint_url="https://bedrock-runtime")

    model = BedrockConverseChatModel(HungClient(), "m", sleep=clock.advance, clock=clock)
    request = _request()
    request.timeout_s = 15.0
    started = clock()
    with pytest.raises(ModelError):
        model.complete(request)
    # 10 s, then 4.8 s left: too little for another whole first-token wait, so no retry
    assert HungClient.calls == 1
    assert clock() - started <= 15.0
