"""Attack 6: no per-owner ceiling on chat (15 of 15 turns passed by opening new conversations against a
per-conversation limit of 5), unlimited conversation creation, and ingestion without a daily ceiling.
Refusals are 429 with ``Retry-After`` and leave nothing behind."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import unquote

from ragchat.api.handler import http_handler
from ragchat.local_server import LocalServer
from ragchat.serving.asgi import Limits

from tests.events import api_event
from tests.unit.api_support import Api, make_api

LIMITS = {"ENABLE_RATE_LIMITING": "true", "RATE_LIMIT_REQUESTS": "100", "RATE_LIMIT_CHAT_REQUESTS": "5"}


def _retry_after(res: dict[str, Any]) -> str | None:
    headers = {k.lower(): v for k, v in (res.get("headers") or {}).items()}
    for k, values in (res.get("multiValueHeaders") or {}).items():
        headers.setdefault(k.lower(), values[-1])
    return headers.get("retry-after")


def _new_conversation(api: Api) -> dict[str, Any]:
    return api.call("POST", "/chat/conversations", body={})


def test_new_conversations_do_not_reset_the_owners_chat_allowance() -> None:
    api = make_api({**LIMITS, "RATE_LIMIT_IP_REQUESTS": "100"})  # one address for both users here
    statuses = []
    for i in range(15):
        conv = json.loads(_new_conversation(api)["body"])["id"]
        api.clock.advance(3)  # slower than the flood rule
        res = api.call("POST", f"/chat/conversations/{conv}/messages", body={"content": f"question {i}"})
        statuses.append(res["statusCode"])
        if res["statusCode"] == 429:
            assert _retry_after(res) and json.loads(res["body"])["retryAfter"] >= 1
    assert statuses.count(200) == 5 and statuses.count(429) == 10
    # another owner is not affected
    other = json.loads(api.call("POST", "/chat/conversations", body={}, principal="bob")["body"])["id"]
    res = api.call("POST", f"/chat/conversations/{other}/messages", body={"content": "hi"}, principal="bob")
    assert res["statusCode"] == 200


def test_conversation_creation_is_limited_per_owner() -> None:
    api = make_api({**LIMITS, "RATE_LIMIT_CONVERSATIONS_REQUESTS": "3"})
    results = [_new_conversation(api) for _ in range(5)]
    assert [r["statusCode"] for r in results] == [201, 201, 201, 429, 429]
    assert _retry_after(results[3])
    listed = json.loads(api.call("GET", "/chat/conversations")["body"])
    assert len(listed["items"]) == 3


def test_documents_per_day_are_capped_and_a_refused_one_is_not_stored() -> None:
    api = make_api({**LIMITS, "INGEST_DOCUMENTS_PER_DAY": "2"})
    results = [api.call("POST", "/notes", body={"text": f"note number {i}"}) for i in range(3)]
    assert [r["statusCode"] for r in results] == [202, 202, 429]
    assert "Daily document limit" in json.loads(results[2]["body"])["error"] and _retry_after(results[2])
    assert len(json.loads(api.call("GET", "/documents")["body"])["items"]) == 2
    # when told, there is room again
    wait = json.loads(results[2]["body"])["retryAfter"]
    assert 0 < wait <= 2 * 24 * 3600  # a sliding day (two buckets): at most two days for a burst
    api.clock.advance(wait)
    assert api.call("POST", "/notes", body={"text": "later that day"})["statusCode"] == 202


def test_bytes_per_day_are_capped_across_notes_and_files() -> None:
    api = make_api({**LIMITS, "INGEST_BYTES_PER_DAY": "100"})
    assert api.call("POST", "/notes", body={"text": "x" * 60})["statusCode"] == 202
    res = api.call(
        "POST", "/documents", raw_body=b"y" * 60, headers={"Content-Type": "text/plain"},
        query={"filename": "f.txt"},
    )  # fmt: skip
    assert res["statusCode"] == 429 and "volume" in json.loads(res["body"])["error"]
    assert api.call("POST", "/notes", body={"text": "z" * 40})["statusCode"] == 202
    assert len(json.loads(api.call("GET", "/documents")["body"])["items"]) == 2


def test_without_the_flag_nothing_is_limited() -> None:
    api = make_api({"INGEST_DOCUMENTS_PER_DAY": "1", "RATE_LIMIT_CONVERSATIONS_REQUESTS": "1"})
    assert [_new_conversation(api)["statusCode"] for _ in range(3)] == [201] * 3
    assert [api.call("POST", "/notes", body={"text": f"n{i}"})["statusCode"] for i in range(3)] == [202] * 3


# ---------------------------------------------------------------- refused before the body and the work
def _spent_chat_allowance(api: Api) -> str:
    """A conversation of an owner who has just used their whole chat allowance (5 turns)."""
    conv = json.loads(_new_conversation(api)["body"])["id"]
    for i in range(5):
        api.clock.advance(3)  # slower than the flood rule
        assert (
            api.call("POST", f"/chat/conversations/{conv}/messages", body={"content": f"q{i}"})["statusCode"]
            == 200
        )
    return str(conv)


def _messages(api: Api, conv: str) -> int:
    return len(json.loads(api.call("GET", f"/chat/conversations/{conv}")["body"])["messages"])


def test_an_owner_over_the_chat_limit_is_refused_before_the_body_is_parsed_or_anything_retrieved() -> None:
    api = make_api({**LIMITS, "RATE_LIMIT_IP_REQUESTS": "100"})
    conv = _spent_chat_allowance(api)
    embedder = api.container.embedder
    searched, stored = embedder.query_calls, _messages(api, conv)  # type: ignore[attr-defined]
    turns = (
        (f"/chat/conversations/{conv}/messages", "POST"),
        (f"/chat/conversations/{conv}/messages/m1", "PUT"),
    )
    for path, method in turns:
        # not even JSON: a body the resolver would refuse with a 400 once parsed
        res = api.call(method, path, raw_body=b"{" * 100_000, headers={"Content-Type": "application/json"})
        assert res["statusCode"] == 429, res
        assert _retry_after(res) and json.loads(res["body"])["retryAfter"] >= 1
    # the same through the chat Lambda's own handler (what API Gateway invokes)
    handler = http_handler({"chat"}, container=lambda: api.container)
    raw = {"raw_body": b"{" * 100_000, "headers": {"Content-Type": "application/json"}}
    assert handler(api_event("POST", turns[0][0], **raw), None)["statusCode"] == 429
    assert embedder.query_calls == searched  # type: ignore[attr-defined]  # nothing retrieved
    assert _messages(api, conv) == stored  # nothing stored
    # other routes of the same owner are not affected
    assert api.call("GET", "/documents")["statusCode"] == 200


def test_an_owner_over_the_conversation_limit_is_refused_before_the_body_is_parsed() -> None:
    api = make_api({**LIMITS, "RATE_LIMIT_CONVERSATIONS_REQUESTS": "2"})
    assert [_new_conversation(api)["statusCode"] for _ in range(2)] == [201, 201]
    res = api.call(
        "POST", "/chat/conversations", raw_body=b"[" * 100_000, headers={"Content-Type": "application/json"}
    )
    assert res["statusCode"] == 429 and _retry_after(res)


def test_ragchat_serve_refuses_an_owner_over_the_limit_from_the_headers_alone() -> None:
    api = make_api({**LIMITS, "RATE_LIMIT_IP_REQUESTS": "100"})
    conv = _spent_chat_allowance(api)
    searched, stored = api.container.embedder.query_calls, _messages(api, conv)  # type: ignore[attr-defined]
    local = LocalServer(api.container, port=0)
    local.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", int(local.httpd.server_address[1]), timeout=30)
        # 100 MB announced, not one byte sent: the answer can only come from the headers
        conn.putrequest("POST", f"/chat/conversations/{conv}/messages")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(100 * 1024 * 1024))
        conn.endheaders()
        resp = conn.getresponse()
        assert resp.status == 429  # (a body that big would otherwise be 413)
        assert int(resp.getheader("Retry-After") or 0) >= 1
        assert json.loads(resp.read())["retryAfter"] >= 1
        conn.close()
    finally:
        local.stop()
    assert api.container.embedder.query_calls == searched  # type: ignore[attr-defined]
    assert _messages(api, conv) == stored


# Paths the router sends to the limited routes (it matches the percent-decoded path against
# ``^<rule>/*$``) though they are not spelled as the route is (issue 30, finding 7).
TRICK_TURNS = (
    "/chat/conversations/{conv}/messages/",
    "/chat/conversations/{conv}/messages//",
    "/chat/%63onversations/{conv}/messages",
    "/chat/conversations/{conv}/%6Dessages///",
    "/%63hat/conversations/{conv}/messages/m1//",  # PUT …/messages/{messageId}
)


def test_a_path_spelled_otherwise_is_refused_before_the_body_like_the_route_it_reaches() -> None:
    """``/chat/conversations//`` and ``/chat/%63onversations`` reached the router (which normalises) but
    not the check made before the body (raw path, one optional slash): an over-limit client's body was
    read and parsed. The body is announced and never sent: only a refusal from the headers answers
    before the body timeout (3 s here; the old code answered 408 after it)."""
    api = make_api({**LIMITS, "RATE_LIMIT_IP_REQUESTS": "100", "RATE_LIMIT_CONVERSATIONS_REQUESTS": "1"})
    conv = _spent_chat_allowance(api)
    assert api.call("POST", "/chat/conversations", body={}, principal="local")["statusCode"] == 201  # spent
    searched, stored = api.container.embedder.query_calls, _messages(api, conv)  # type: ignore[attr-defined]
    local = LocalServer(api.container, port=0, limits=Limits(body_timeout=3.0))
    local.start()
    port = int(local.httpd.server_address[1])
    targets = [("PUT" if p.endswith("m1//") else "POST", p.format(conv=conv)) for p in TRICK_TURNS]
    targets += [
        ("POST", "/chat/conversations//"),
        ("POST", "/chat/%63onversations"),
        ("POST", "/chat/conversations/"),
    ]
    try:
        for method, path in targets:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.putrequest(method, path)
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(1024 * 1024))  # under the body limit
            conn.endheaders()
            resp = conn.getresponse()
            assert (resp.status, json.loads(resp.read())["retryAfter"] >= 1) == (429, True), (method, path)
            conn.close()
    finally:
        local.stop()
    assert api.container.embedder.query_calls == searched  # type: ignore[attr-defined]
    assert _messages(api, conv) == stored
    # the buffered Lambda handler (API Gateway hands it the body) refuses them before parsing it too
    handler = http_handler({"chat"}, container=lambda: api.container)
    for method, path in targets:
        event = api_event(method, unquote(path), raw_body=b"{" * 100_000, principal="local")
        assert handler(event, None)["statusCode"] == 429, (method, path)
