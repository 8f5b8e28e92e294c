"""Pure chat arithmetic: sanitize, titles, windows, summary plans, rate limits, flood, breaker,
personas, the streaming citation filter, retries."""

from __future__ import annotations

import pytest
from ragchat.domain.citations import CitationStreamFilter, validate_citations
from ragchat.domain.errors import PayloadTooLarge, ValidationError
from ragchat.domain.history import HistoryWindow, cap_window, extractive_summary, plan_summary
from ragchat.domain.limits import (
    LatencyWindow,
    breaker_open,
    call_with_retries,
    flood_retry_after,
    sliding_count,
    sliding_retry_after,
)
from ragchat.domain.messages import estimate_tokens, make_title, sanitize_message
from ragchat.domain.models import Message, SourceRef
from ragchat.domain.personas import parse_personas, resolve_persona


def _msgs(roles: str) -> list[Message]:
    return [
        Message(
            id=f"m{i}",
            conversation_id="c",
            owner="o",
            role="user" if r == "u" else "assistant",
            content=f"{r}{i}",
        )
        for i, r in enumerate(roles)
    ]


def test_sanitize() -> None:
    assert sanitize_message("  a\x00b\x1f  c \n\n d\t") == "ab c d"
    with pytest.raises(ValidationError):
        sanitize_message(" \x07 \n")
    with pytest.raises(ValidationError):
        sanitize_message(42)
    assert len(sanitize_message("x" * 4000)) == 4000
    with pytest.raises(PayloadTooLarge):
        sanitize_message("x" * 4001)


def test_title() -> None:
    assert make_title("Short question?") == "Short question?"
    long = "word " * 30
    t = make_title(long)
    assert t.endswith("…") and len(t) <= 81 and not t[:-1].endswith(" ")
    assert t[:-1] == " ".join(["word"] * 16)
    assert make_title("x" * 100) == "x" * 80 + "…"


def test_estimate_tokens() -> None:
    assert estimate_tokens("Hello, world! It's 2026.") == 5


def test_cap_window_keeps_last_two_user_messages() -> None:
    msgs = _msgs("uaaaaaaua")  # the 2nd-last user message is at index 0
    kept = cap_window(msgs, 4)
    assert kept[0].id == "m0"
    assert [m.id for m in cap_window(_msgs("uauauaua"), 4)] == ["m4", "m5", "m6", "m7"]


def test_plan_summary_by_count_and_tokens() -> None:
    msgs = _msgs("uauauauau")
    plan = plan_summary(HistoryWindow(None, msgs), 6)
    assert plan is not None and plan.reason == "count"
    assert [m.id for m in plan.keep] == ["m5", "m6", "m7", "m8"]  # newest MAX-2
    assert plan_summary(HistoryWindow(None, msgs[:6]), 6) is None
    big = _msgs("uauau")
    big[1].content = "w " * 7000
    plan = plan_summary(HistoryWindow(None, big), 12)
    assert plan is not None and plan.reason == "tokens"
    assert [m.id for m in plan.to_summarize] == ["m0", "m1"]
    assert [m.id for m in plan.keep] == ["m2", "m3", "m4"]  # the last 2 user messages stay
    # only 2 user messages: nothing can be folded without dropping one of them
    assert plan_summary(HistoryWindow(None, big[:3]), 12) is None


def test_extractive_summary_has_no_citation_tags() -> None:
    msgs = _msgs("ua")
    msgs[0].content = "How do tides work? Also something else."
    msgs[1].content = "The moon pulls water [source: n-1]. More.\n\nSources: n-1"
    msgs[1].sources = [SourceRef("n-1", "moon")]
    text = extractive_summary(msgs, previous="Earlier talk [source: n-0]")
    assert "[source:" not in text
    assert "How do tides work?" in text and "n-1" in text
    assert estimate_tokens(extractive_summary(_msgs("ua" * 200))) <= 181


def test_sliding_window() -> None:
    assert sliding_count(60, 0, 150, 300) == 30
    assert sliding_count(10, 5, 0, 300) == 15
    # 60 in the previous bucket, halfway through: ~30 counted; one more fits when the estimate ≤ 59
    assert sliding_retry_after(60, 30, 150, 300, 60) == 5
    assert sliding_retry_after(0, 61, 10, 300, 60) >= 290


def test_flood() -> None:
    assert flood_retry_after([0, 1, 2, 3], 4) == 4  # span 4 s over 4 gaps; needs 8 s
    assert flood_retry_after([0, 2, 4, 6], 8) is None
    assert flood_retry_after([0, 1, 2], 3) is None  # fewer than 5 messages


def test_breaker_and_latency_window() -> None:
    assert not breaker_open(4) and breaker_open(5)
    lw = LatencyWindow(50, 10)
    out = [lw.add(float(i)) for i in range(1, 21)]
    assert out[8] is None and out[9] == (5.0, 10.0) and out[19] == (10.0, 19.0)


def test_personas() -> None:
    reg = parse_personas(
        {"teacher": "Be patient.", "personas_ignored": "x"} if False else {"teacher": "Be patient."}
    )
    assert reg == {"default": "", "teacher": "Be patient."}
    assert resolve_persona(reg, None) == ""
    with pytest.raises(ValidationError) as refused:
        resolve_persona(reg, "pirate")
    # says what there is and where more come from (issue 45)
    assert "'pirate'" in refused.value.message and "default, teacher" in refused.value.message
    assert "RAGCHAT_PERSONAS_FILE" in refused.value.message
    with pytest.raises(ValueError):
        parse_personas({"bad name!": "x"})
    with pytest.raises(ValueError):
        parse_personas({"p": 3})


def test_stream_filter_matches_validation() -> None:
    text = "Blue [source: n-1] and [source: fake-2] done [source: n-1]."
    f = CitationStreamFilter(["n-1"])
    out = "".join(f.feed(text[i : i + 3]) for i in range(0, len(text), 3)) + f.flush()
    assert out == "Blue [source: n-1] and done [source: n-1]."
    assert f.removed == ["fake-2"]
    final = validate_citations(text, ["n-1"]).text
    assert final.startswith(out.rstrip("."))


def test_retries() -> None:
    sleeps: list[float] = []
    calls = {"n": 0}

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 3:
            raise TimeoutError("slow")
        return "ok"

    assert (
        call_with_retries(flaky, retryable=lambda e: isinstance(e, TimeoutError), sleep=sleeps.append) == "ok"
    )
    assert sleeps == [0.2, 0.4]
    with pytest.raises(KeyError):
        call_with_retries(lambda: {}["x"], retryable=lambda e: False, sleep=sleeps.append)
