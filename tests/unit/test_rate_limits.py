"""Rate limits on the costly routes (docs/api.md) through the real resolver: one-shot questions
(``GET /?text=``), notes (``POST /notes``, ``POST /documents``), keyed per owner and per source IP;
refused requests are not counted; route-specific settings override the general ones."""

from __future__ import annotations

import itertools
from typing import Any

from tests.events import api_event, header, json_body
from tests.unit.api_support import Api, make_api

LIMITED = {"ENABLE_RATE_LIMITING": "true"}
NOTE = "Cats sleep for sixteen hours a day and purr when they are content."
_SENT = itertools.count()  # each note or file other bytes: the same twice would be one document (issue 45)


def call(api: Api, method: str, path: str, *, who: str = "alice", ip: str = "203.0.113.9", **kw: Any):
    event = api_event(method, path, principal=who, **kw)
    event["requestContext"]["identity"]["sourceIp"] = ip
    return api.app.resolve(event, None)


def ask(api: Api, **kw: Any) -> int:
    status: int = call(api, "GET", "/", query={"text": "Why do cats purr?"}, **kw)["statusCode"]
    return status


def note(api: Api, **kw: Any) -> int:
    status: int = call(api, "POST", "/notes", body={"text": f"{NOTE} ({next(_SENT)})"}, **kw)["statusCode"]
    return status


def upload(api: Api, **kw: Any) -> int:
    text = f"{NOTE} ({next(_SENT)})"
    res = call(api, "POST", "/documents", raw_body=text, headers={"Content-Type": "text/plain"}, **kw)
    status: int = res["statusCode"]
    return status


def test_ask_is_refused_after_the_limit_with_429_retry_after() -> None:
    api = make_api({**LIMITED, "RATE_LIMIT_REQUESTS": "3"})
    assert [ask(api) for _ in range(3)] == [200, 200, 200]
    res = call(api, "GET", "/", query={"text": "Why do cats purr?"})
    assert res["statusCode"] == 429
    body = json_body(res)
    assert set(body) == {"error", "retryAfter"} and body["retryAfter"] >= 1
    assert header(res, "Retry-After") == str(body["retryAfter"])


def test_notes_and_document_uploads_share_the_notes_limit() -> None:
    api = make_api({**LIMITED, "RATE_LIMIT_REQUESTS": "3"})
    assert [note(api), upload(api), note(api)] == [202, 202, 202]
    assert upload(api) == 429
    assert note(api) == 429
    assert len(api.documents.list_documents("alice").items) == 3  # nothing stored when refused


def test_without_the_flag_nothing_is_limited() -> None:
    api = make_api({"RATE_LIMIT_REQUESTS": "1"})
    assert {ask(api) for _ in range(5)} == {200}
    assert {note(api) for _ in range(5)} == {202}


def test_a_client_retrying_while_limited_gets_through_when_told() -> None:
    """Refused requests are not counted: a client retrying every second while limited is let in
    exactly when the first 429's Retry-After said, and no later."""
    api = make_api({**LIMITED, "RATE_LIMIT_REQUESTS": "2", "RATE_LIMIT_WINDOW_SECONDS": "100"})
    assert [ask(api), ask(api)] == [200, 200]
    api.clock.advance(1)
    first = call(api, "GET", "/", query={"text": "Why do cats purr?"})
    assert first["statusCode"] == 429
    told = json_body(first)["retryAfter"]
    waited = 0
    while ask(api) == 429:
        api.clock.advance(1)
        waited += 1
        assert waited <= 400, "never let in again"
    assert waited == told


def test_the_limit_is_per_owner() -> None:
    api = make_api({**LIMITED, "RATE_LIMIT_REQUESTS": "2"})
    assert [ask(api, ip="198.51.100.1"), ask(api, ip="198.51.100.2")] == [200, 200]
    assert ask(api, ip="198.51.100.3") == 429  # alice, from a third address
    assert ask(api, who="bob", ip="198.51.100.4") == 200


def test_the_limit_is_per_ip() -> None:
    api = make_api({**LIMITED, "RATE_LIMIT_REQUESTS": "2"})
    assert [ask(api, who="alice"), ask(api, who="bob")] == [200, 200]
    assert ask(api, who="carol") == 429  # a third user behind the same address
    assert ask(api, who="carol", ip="198.51.100.7") == 200


def test_users_behind_one_nat_are_not_locked_out_by_a_neighbour_retrying() -> None:
    """Alice spends her own allowance and keeps retrying; her refused requests do not fill the
    address's bucket, so Bob behind the same NAT still gets the rest of it."""
    api = make_api({**LIMITED, "RATE_LIMIT_REQUESTS": "3", "RATE_LIMIT_IP_REQUESTS": "6"})
    assert [ask(api, who="alice") for _ in range(3)] == [200] * 3
    assert {ask(api, who="alice") for _ in range(20)} == {429}
    assert [ask(api, who="bob") for _ in range(3)] == [200] * 3
    assert ask(api, who="carol") == 429  # the address's 6 are all used (by admitted requests only)


def test_a_route_specific_setting_overrides_the_general_one() -> None:
    api = make_api({**LIMITED, "RATE_LIMIT_REQUESTS": "4", "RATE_LIMIT_ASK_REQUESTS": "1"})
    assert [ask(api), ask(api)] == [200, 429]
    assert [note(api) for _ in range(5)] == [202, 202, 202, 202, 429]  # notes keep the general 4


def test_a_route_specific_window_overrides_the_general_one() -> None:
    api = make_api({**LIMITED, "RATE_LIMIT_REQUESTS": "1", "RATE_LIMIT_NOTES_WINDOW_SECONDS": "10"})
    assert [note(api), note(api), ask(api), ask(api)] == [202, 429, 200, 429]
    api.clock.advance(20)  # two notes windows, a small part of the general 300 s
    assert [note(api), ask(api)] == [202, 429]


def test_routes_have_their_own_buckets() -> None:
    api = make_api({**LIMITED, "RATE_LIMIT_REQUESTS": "2"})
    assert [ask(api), ask(api), ask(api)] == [200, 200, 429]
    assert [note(api), note(api), note(api)] == [202, 202, 429]


def test_uploads_have_a_one_line_limiter_with_their_own_override() -> None:
    """``POST /uploads`` calls ``rate_limit(container, "uploads", event)`` (ragchat.api.limits)."""
    from ragchat.api.limits import rate_limit
    from ragchat.domain.errors import RateLimited

    api = make_api({**LIMITED, "RATE_LIMIT_REQUESTS": "5", "RATE_LIMIT_UPLOADS_REQUESTS": "2"})
    event = api_event("POST", "/uploads", principal="alice")
    rate_limit(api.container, "uploads", event)
    rate_limit(api.container, "uploads", event)
    try:
        rate_limit(api.container, "uploads", event)
    except RateLimited as exc:
        assert exc.retry_after >= 1
    else:
        raise AssertionError("the third upload should be refused")
    assert note(api) == 202  # notes keep their own bucket
