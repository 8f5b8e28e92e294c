"""The circuit breaker is checked once per model call (issue 22 item 5), keeping its rules:
5 consecutive failures within 120 s open it, a success resets it. What is counted: reads of the
conversation's breaker counter per turn, in the one-shot and the streaming path."""

from __future__ import annotations

from typing import Any

from ragchat.domain.errors import ModelError

from tests.unit.test_chat_service import OWNER, Rig

FALLBACK_PREFIX = "Temporary issue generating response."


def _count_breaker_reads(rig: Rig) -> list[str]:
    reads: list[str] = []
    get = rig.counters.get

    def counted(key: str, **kwargs: Any) -> int:
        if key.startswith("breaker:"):
            reads.append(key)
        return get(key, **kwargs)

    rig.counters.get = counted  # type: ignore[method-assign]
    return reads


def _stream(rig: Rig, conv: str, text: str) -> tuple[str, list[str]]:
    rig.clock.advance(10)
    model, events = rig.chat.turns.stream(OWNER, conv, text)
    return model, [name for name, _ in events]


def test_each_turn_reads_the_breaker_at_most_once_and_only_after_a_fallback() -> None:
    rig = Rig()
    reads = _count_breaker_reads(rig)
    conv = rig.conv()
    rig.say(conv, "Why is the sky blue?")
    assert reads == []  # after a model answer the count is known to be 0: no read

    rig.model.fail_with = ModelError("down")
    for n in range(1, 6):
        before = len(reads)
        out = rig.say(conv, "Why is the sky blue?")
        assert out.message.content.startswith(FALLBACK_PREFIX)
        assert len(reads) - before == (0 if n == 1 else 1)  # one check per model call

    calls = rig.model.calls
    before = len(reads)
    out = rig.say(conv, "Why is the sky blue?")  # open: the model is skipped after one read
    assert rig.model.calls == calls and out.model == "fallback"
    assert len(reads) - before == 1

    before = len(reads)
    model, names = _stream(rig, conv, "Why is the sky blue?")
    assert model == "fallback" and names[-1] == "answer_end"
    assert rig.model.calls == calls and len(reads) - before == 1  # streaming: one read as well

    rig.clock.advance(200)  # past the 120 s window: the model is tried again, a success resets
    rig.model.fail_with = None
    before = len(reads)
    model, names = _stream(rig, conv, "Why is the sky blue?")
    assert model != "fallback" and rig.model.calls == calls + 1
    assert len(reads) - before == 1
    assert rig.counters.get(f"breaker:conv:{conv}", now=rig.clock()) == 0
