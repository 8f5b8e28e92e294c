"""Summaries never nest and are stored after the turn they summarize (issue 10, docs/chat.md)."""

from __future__ import annotations

from ragchat.domain.history import extractive_summary
from ragchat.domain.messages import estimate_tokens
from ragchat.domain.models import Message, SourceRef
from ragchat.services.chat import ExtractiveSummarizer

from tests.fakes import FakeChatModel
from tests.unit.test_chat_service import OWNER, Rig


def _turn(i: int) -> list[Message]:
    q = Message(id=f"q{i}", conversation_id="c", owner=OWNER, role="user", content=f"Question {i} on tides?")
    answer = f"Answer {i} [source: n-{i}].\n\nSources: n-{i}"
    a = Message(id=f"a{i}", conversation_id="c", owner=OWNER, role="assistant", content=answer,
                sources=[SourceRef(f"n-{i}", "x")])  # fmt: skip
    return [q, a]


def _assert_flat(text: str) -> None:
    assert "Earlier: Earlier" not in text and text.count("Earlier:") <= 1
    for label in ("User asked:", "Answers given:", "Relevant source ids:"):
        assert text.count(label) <= 1, text


def test_rounds_of_extractive_summaries_never_nest() -> None:
    summary: str | None = None
    for i in range(12):
        summary = extractive_summary(_turn(i), previous=summary)
        _assert_flat(summary)
        assert estimate_tokens(summary) <= 181
        assert f"Question {i} on tides?" in summary  # the newest turn is always in it
    assert summary is not None and "n-11" in summary


def test_early_rounds_keep_earlier_questions_in_one_list() -> None:
    first = extractive_summary(_turn(1))
    second = extractive_summary(_turn(2), previous=first)
    assert "User asked: Question 1 on tides? | Question 2 on tides?" in second
    assert "Relevant source ids: n-1, n-2" in second


def test_an_llm_summary_or_an_old_nested_one_gets_one_prefix() -> None:
    text = extractive_summary(_turn(3), previous="Earlier: Earlier: The user wants tide tables.")
    _assert_flat(text)
    assert text.startswith("Earlier: The user wants tide tables.")


def _summarizing_rig() -> Rig:
    return Rig(
        {"ENABLE_CHAT_SUMMARIZATION": "true", "MAX_CHAT_HISTORY": "4"},
        model=FakeChatModel("Blue [source: n-sky].", model_id="extractive"),
        summarizer=ExtractiveSummarizer(),
    )


def test_summaries_through_many_turns_never_nest() -> None:
    rig = _summarizing_rig()
    c = rig.conv()
    for i in range(12):
        rig.say(c, f"Why is the sky blue, take {i}?")
    summaries = [m for m in rig.store.list_messages(OWNER, c, limit=100).items if m.role == "system-summary"]
    assert len(summaries) >= 3
    for s in summaries:
        _assert_flat(s.content)
    assert "take 0" not in rig.model.requests[-1].messages[-1].content


def test_the_summary_is_stored_after_the_answer_of_its_turn() -> None:
    rig = _summarizing_rig()
    c = rig.conv()
    for i in range(3):
        rig.say(c, f"Why is the sky blue, take {i}?")
    before = len(rig.store.list_messages(OWNER, c, limit=100).items)
    rig.say(c, "Why is the sky blue, take 3?")  # 7 messages > 4: this turn summarizes
    roles = [m.role for m in rig.store.list_messages(OWNER, c, limit=100).items[before:]]
    assert roles == ["user", "assistant", "system-summary"]
    conv = rig.chat.conversations.get(OWNER, c)
    msgs = rig.store.list_messages(OWNER, c, limit=100).items
    assert conv.last_summary_id == msgs[-1].id
    # the next turn reads the summary back as its context
    rig.say(c, "And the ocean?")
    assert rig.model.requests[-1].messages[0].content.startswith("Summary of the earlier conversation:")


def test_the_summary_token_limit_is_the_answer_models_own_tokens() -> None:
    """Claude 5.5 counts ~30 % more tokens for the same text: a window of ~4,800 estimated tokens is
    over its 6,000-token limit (4,615 estimated), not over Haiku 4.5's."""
    answer = " ".join(["tide"] * 1500)
    question = " ".join(["sky"] * 600)

    def summaries(model_id: str) -> int:
        rig = Rig(
            {"ENABLE_CHAT_SUMMARIZATION": "true", "MAX_CHAT_HISTORY": "12"},
            model=FakeChatModel(f"{answer} [source: n-sky].", model_id=model_id),
            summarizer=ExtractiveSummarizer(),
        )
        c = rig.conv()
        for _ in range(3):  # the third turn's window: 600 + 1,500 + 600 + 1,500 + 600 estimated tokens
            rig.say(c, f"Why is the sky blue? {question}")
        items = rig.store.list_messages(OWNER, c, limit=100).items
        return sum(m.role == "system-summary" for m in items)

    assert summaries("us.anthropic.claude-haiku-4-5-20251001-v1:0") == 0
    assert summaries("us.anthropic.claude-haiku-5-5") == 1
