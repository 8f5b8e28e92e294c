"""Chat rate limits (docs/api.md): per conversation and per IP; refused messages are counted nowhere
(neither in the other dimension nor by a retry), the flood rule, and the chat-specific override."""

from __future__ import annotations

import pytest
from ragchat.domain.errors import RateLimited

from tests.unit.test_chat_service import OWNER, Rig

Q = "Why is the sky blue?"


def refused(rig: Rig, conv: str, ip: str = "10.0.0.1") -> int | None:
    """The Retry-After of a refused message, or None when it was answered."""
    try:
        rig.chat.turns.send(OWNER, conv, Q, ip=ip)
    except RateLimited as exc:
        return exc.retry_after
    return None


def test_messages_refused_by_their_conversation_do_not_fill_the_ip_bucket() -> None:
    rig = Rig(
        {
            "ENABLE_RATE_LIMITING": "true",
            "RATE_LIMIT_REQUESTS": "2",
            "RATE_LIMIT_IP_REQUESTS": "4",
            "RATE_LIMIT_CHAT_OWNER_REQUESTS": "100",
        }
    )
    a, b, c = rig.conv(), rig.conv(), rig.conv()
    rig.say(a, Q, ip="10.0.0.1")
    rig.say(a, Q, ip="10.0.0.1")
    for _ in range(5):
        rig.clock.advance(10)
        assert refused(rig, a) is not None
    rig.say(b, Q, ip="10.0.0.1")
    rig.say(b, Q, ip="10.0.0.1")  # the address's 4: the 5 refusals above took none of them
    rig.clock.advance(10)
    assert refused(rig, c) is not None  # now the address is full
    assert refused(rig, c, ip="10.0.0.2") is None


def test_a_client_retrying_while_limited_gets_through_when_told() -> None:
    rig = Rig(
        {"ENABLE_RATE_LIMITING": "true", "RATE_LIMIT_REQUESTS": "2", "RATE_LIMIT_WINDOW_SECONDS": "100"}
    )
    c = rig.conv()
    rig.say(c, Q, ip="10.0.0.1")
    rig.say(c, Q, ip="10.0.0.1")
    rig.clock.advance(1)
    told = refused(rig, c)
    assert told is not None
    waited = 0
    while refused(rig, c) is not None:
        rig.clock.advance(1)
        waited += 1
        assert waited <= 400, "never let in again"
    assert waited == told


def test_a_message_refused_as_a_flood_is_not_counted() -> None:
    rig = Rig({"ENABLE_RATE_LIMITING": "true", "RATE_LIMIT_REQUESTS": "5"})
    c = rig.conv()
    for _ in range(4):
        rig.clock.advance(1)
        rig.chat.turns.send(OWNER, c, Q, ip="10.0.0.1")
    rig.clock.advance(1)
    wait = refused(rig, c)
    assert wait is not None  # a flood
    rig.clock.advance(wait)
    assert refused(rig, c) is None  # the fifth of five: the flood refusal took no slot
    rig.clock.advance(10)
    assert refused(rig, c) is not None


def test_the_chat_specific_setting_overrides_the_general_one() -> None:
    rig = Rig({"ENABLE_RATE_LIMITING": "true", "RATE_LIMIT_REQUESTS": "50", "RATE_LIMIT_CHAT_REQUESTS": "1"})
    c = rig.conv()
    rig.say(c, Q, ip="10.0.0.1")
    with pytest.raises(RateLimited):
        rig.say(c, Q, ip="10.0.0.1")
