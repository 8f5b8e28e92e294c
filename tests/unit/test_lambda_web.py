"""The chat_stream server behind the Lambda Web Adapter, without sockets: requests as the adapter sends
them become events through ``ragchat.lambda_web`` and go through the real resolver over fakes."""

from __future__ import annotations

import json
import threading
from http.client import HTTPMessage
from typing import Any

import pytest
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from ragchat.api.app import create_app
from ragchat.lambda_web import AREAS, event_for, refusal
from ragchat.local_server import ResolverPool, response_body, response_headers

from tests.events import api_event
from tests.unit.api_support import Api, make_api
from tests.unit.test_chat_api import _index

MESSAGES = "/chat/conversations/{id}/messages"


def context(
    sub: str | None = "alice",
    *,
    ip: str = "198.51.100.7",
    request_id: str = "apigw-req-1",
    api_key_id: str | None = None,
) -> dict[str, Any]:
    """The requestContext API Gateway (REST, Cognito authorizer) hands the adapter."""
    return {
        "resourcePath": MESSAGES,
        "httpMethod": "POST",
        "path": "/Prod/chat/conversations/x/messages",
        "stage": "Prod",
        "requestId": request_id,
        "accountId": "123456789012",
        "apiId": "abc123defg",
        "identity": {"sourceIp": ip, "apiKeyId": api_key_id, "userAgent": "curl/8"},
        "authorizer": {"claims": {"sub": sub}} if sub else {},
    }


def headers(ctx: dict[str, Any] | str | None, **extra: str) -> HTTPMessage:
    msg = HTTPMessage()
    msg["Content-Type"] = "application/json"
    msg["X-Amzn-Trace-Id"] = "Root=1-abc"
    for name, value in extra.items():
        msg[name.replace("_", "-")] = value
    if ctx is not None:
        msg["x-amzn-request-context"] = ctx if isinstance(ctx, str) else json.dumps(ctx)
        msg["x-amzn-lambda-context"] = json.dumps(
            {
                "request_id": "lambda-req-9",
                "deadline": 4102444800000,
                "invoked_function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:chat-stream",
                "env_config": {"function_name": "chat-stream", "memory": 1024, "version": "$LATEST"},
            }
        )
    return msg


class Adapter:
    """What the adapter sends, resolved the way ``AdapterHTTPServer`` does (minus the socket)."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.api: Api = make_api(env)
        self.pool = ResolverPool(lambda: create_app(self.api.container, areas=AREAS))

    def send(
        self, method: str, path: str, ctx: dict[str, Any] | None, body: Any = None, **extra: str
    ) -> tuple[int, dict[str, str], Any]:
        hdrs = headers(ctx, **extra)
        data = json.dumps(body).encode() if body is not None else b""
        refused = refusal(path, hdrs)
        if refused is not None:
            return refused[0], {}, refused[1]
        event, lambda_ctx = event_for(method, path, hdrs, data, "127.0.0.1")
        result = self.pool.resolve(event, lambda_ctx)
        got = {k.lower(): v for k, v in response_headers(result)}
        payload = response_body(result)
        text = payload.decode() if isinstance(payload, bytes) else "".join(payload)
        return int(result["statusCode"]), got, text

    def conversation(self, ctx: dict[str, Any]) -> str:
        status, _, text = self.send("POST", "/chat/conversations", ctx, {})
        assert status == 201, text
        return str(json.loads(text)["id"])


def test_event_carries_the_gateway_context_and_not_the_adapter_headers() -> None:
    ctx = context("alice", ip="198.51.100.7", request_id="apigw-req-1", api_key_id="key-1")
    event, lambda_ctx = event_for(
        "POST", "/chat/conversations/c1/messages?x=1", headers(ctx), b"{}", "127.0.0.1"
    )
    rc = event["requestContext"]
    assert rc["authorizer"]["claims"]["sub"] == "alice"
    assert rc["identity"]["sourceIp"] == "198.51.100.7"
    assert rc["identity"]["apiKeyId"] == "key-1"
    assert rc["requestId"] == "apigw-req-1" and rc["stage"] == "Prod"
    assert event["resource"] == MESSAGES
    assert event["path"] == "/chat/conversations/c1/messages"
    assert event["queryStringParameters"] == {"x": "1"}
    names = {n.lower() for n in event["headers"]} | {n.lower() for n in event["multiValueHeaders"]}
    assert "x-amzn-request-context" not in names and "x-amzn-lambda-context" not in names
    assert event["headers"]["X-Amzn-Trace-Id"] == "Root=1-abc"  # ordinary headers still pass
    assert lambda_ctx.aws_request_id == "lambda-req-9"
    assert lambda_ctx.function_name == "chat-stream"
    assert lambda_ctx.invoked_function_arn.endswith(":function:chat-stream")


@pytest.mark.parametrize(
    "ctx",
    [None, "", "not json", "[1, 2]", '"alice"', '{"authorizer": "alice"}', '{"identity": [1]}'],
    ids=["missing", "empty", "garbled", "list", "string", "bad-authorizer", "bad-identity"],
)
def test_missing_or_garbled_context_is_401_and_never_a_default_user(ctx: str | None) -> None:
    adapter = Adapter()
    hdrs = headers(None) if ctx is None else headers(None, x_amzn_request_context=ctx)
    assert refusal("/chat/conversations/c1/messages", hdrs) == (401, {"error": "Unauthorized"}, {})
    status, _, body = adapter.send("POST", "/chat/conversations", None if ctx is None else ctx, {})  # type: ignore[arg-type]
    assert (status, body) == (401, {"error": "Unauthorized"})


def test_a_bearer_token_without_context_is_401() -> None:
    hdrs = headers(None, Authorization="Bearer anything")
    assert refusal("/chat/conversations", hdrs) is not None


def test_health_needs_no_context() -> None:
    status, _, text = Adapter().send("GET", "/health", None)
    assert status == 200 and json.loads(text)["status"] == "ok"


def test_context_without_a_principal_is_401_from_the_app() -> None:
    status, _, text = Adapter().send("POST", "/chat/conversations", context(sub=None), {})
    assert status == 401, text


def test_conversations_belong_to_the_context_principal() -> None:
    adapter = Adapter()
    conv = adapter.conversation(context("alice"))
    status, _, _ = adapter.send("GET", f"/chat/conversations/{conv}", context("alice"))
    assert status == 200
    status, _, _ = adapter.send("GET", f"/chat/conversations/{conv}", context("bob"))
    assert status == 404


def test_streamed_answer_is_an_iterator_and_json_still_works() -> None:
    adapter = Adapter()
    _index(adapter.api, "d1#0", "The sky appears blue because of Rayleigh scattering of sunlight.")
    ctx = context("alice")
    conv = adapter.conversation(ctx)
    hdrs = headers(ctx, Accept="text/event-stream")
    event, lambda_ctx = event_for(
        "POST", f"/chat/conversations/{conv}/messages", hdrs, b'{"content": "Why is the sky blue?"}', "::1"
    )
    result = adapter.pool.resolve(event, lambda_ctx)
    body = response_body(result)
    assert not isinstance(body, bytes)  # the server writes it chunk by chunk
    frames = [f for f in "".join(body).split("\n\n") if f.strip()]
    names = [f.split("\n")[0].removeprefix("event: ") for f in frames]
    assert names[0] == "answer_start" and names[-2:] == ["sources", "answer_end"], names

    status, got, text = adapter.send(
        "POST", f"/chat/conversations/{conv}/messages", ctx, {"content": "Why is the sky blue?"}
    )
    assert status == 200 and got["content-type"].startswith("application/json")
    assert json.loads(text)["role"] == "assistant"


def test_rate_limits_count_the_callers_source_ip() -> None:
    adapter = Adapter(
        {
            "ENABLE_RATE_LIMITING": "true",
            "RATE_LIMIT_REQUESTS": "2",
            "RATE_LIMIT_CHAT_OWNER_REQUESTS": "50",
            "RATE_LIMIT_CONVERSATIONS_REQUESTS": "50",
        }
    )
    ctx_a = context("alice", ip="203.0.113.1")
    convs = [adapter.conversation(ctx_a) for _ in range(4)]
    for conv in convs[:2]:
        adapter.api.clock.advance(30)
        assert (
            adapter.send("POST", f"/chat/conversations/{conv}/messages", ctx_a, {"content": "sky?"})[0] == 200
        )
    adapter.api.clock.advance(30)
    status, _, _ = adapter.send(
        "POST", f"/chat/conversations/{convs[2]}/messages", ctx_a, {"content": "sky?"}
    )
    assert status == 429  # a third message from the same address, in a fresh conversation
    ctx_b = context("alice", ip="203.0.113.2")
    status, _, _ = adapter.send(
        "POST", f"/chat/conversations/{convs[3]}/messages", ctx_b, {"content": "sky?"}
    )
    assert status == 200


def test_pool_keeps_concurrent_requests_apart() -> None:
    """Powertools keeps the current event on a class attribute; the pool pins it per resolver."""
    release = threading.Event()
    entered = threading.Event()

    def factory() -> APIGatewayRestResolver:
        app = APIGatewayRestResolver()
        r = APIGatewayRouter()  # type: ignore[no-untyped-call]

        @r.get("/slow")
        def slow() -> dict[str, Any]:
            entered.set()
            assert release.wait(10)
            return {"path": r.current_event.path, "sub": r.current_event.request_context.authorizer.claims}

        @r.get("/fast")
        def fast() -> dict[str, Any]:
            return {"path": r.current_event.path}

        app.include_router(r)
        return app

    pool = ResolverPool(factory)
    out: dict[str, Any] = {}
    worker = threading.Thread(
        target=lambda: out.setdefault("slow", pool.resolve(api_event("GET", "/slow", principal="alice")))
    )
    worker.start()
    assert entered.wait(10)
    fast = pool.resolve(api_event("GET", "/fast", principal="bob"))
    release.set()
    worker.join(10)
    assert json.loads(fast["body"])["path"] == "/fast"
    assert json.loads(out["slow"]["body"]) == {"path": "/slow", "sub": {"sub": "alice"}}
