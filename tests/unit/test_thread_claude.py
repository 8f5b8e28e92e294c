"""Follow-ups with a Claude-like model (issue 19 item 6), on the fake model service: a follow-up costs
one short condense call, whose standalone question is searched and reaches the answer's prompt next
to the history summary and the sources; a question that stands alone costs no extra call; a failed
condense call still answers (the local carried query)."""

from __future__ import annotations

from ragchat.domain.errors import ModelError
from ragchat.domain.models import ModelRequest
from ragchat.domain.prompts import CONDENSE_PROMPT, GUARD_REPLY, SUMMARY_PROMPT

from tests.fakes import FakeChatModel
from tests.unit.test_chat_service import OWNER, Rig

CONDENSED = "Why does the ocean look blue?"


def reply(req: ModelRequest) -> str:
    if req.system == SUMMARY_PROMPT:
        return "The user asked why the sky is blue [source: n-sky]."
    if req.system == CONDENSE_PROMPT:
        return CONDENSED
    return f"Because of light [source: {req.sources[0].id}]" if req.sources else "No sources."


def answers(model: FakeChatModel) -> list[ModelRequest]:
    return [r for r in model.requests if r.system not in (CONDENSE_PROMPT, SUMMARY_PROMPT)]


def test_a_follow_up_is_condensed_once_searched_and_the_prompt_carries_it_with_summary_and_sources() -> None:
    model = FakeChatModel(reply)
    rig = Rig({"ENABLE_CHAT_SUMMARIZATION": "true", "MAX_CHAT_HISTORY": "4"}, model=model)
    c = rig.conv()
    for i in range(3):
        rig.say(c, f"Why is the sky blue, question {i}?")
    before = len(model.requests)
    out = rig.say(c, "And the ocean?")

    condense = [r for r in model.requests[before:] if r.system == CONDENSE_PROMPT]
    assert len(condense) == 1  # one short call for the follow-up
    assert "Why is the sky blue, question 2?" in condense[0].messages[0].content
    assert "And the ocean?" in condense[0].messages[0].content

    prompt = answers(model)[-1]
    assert prompt.messages[0].content.startswith("Summary of the earlier conversation: ")
    assert prompt.messages[-1].content == f"And the ocean?\n\n(Standalone question searched: {CONDENSED})"
    assert prompt.system.index("[Source id=n-ocean]") < prompt.system.index("[Source id=n-sky]")
    assert out.message.query == CONDENSED
    stored = rig.store.list_messages(OWNER, c).items
    assert [m.query for m in stored if m.role == "assistant"][-1] == CONDENSED
    assert "[source: n-ocean]" in out.message.content


def test_a_question_that_stands_alone_makes_no_condense_call() -> None:
    model = FakeChatModel(reply)
    rig = Rig(model=model)
    c = rig.conv()
    rig.say(c, "Why is the sky blue?")
    out = rig.say(c, "Why is grass green?")  # searched both ways locally, no model call for it
    assert [r.system for r in model.requests].count(CONDENSE_PROMPT) == 0
    assert model.calls == 2
    assert not out.guard_used


def test_a_failed_condense_call_still_answers_from_the_local_carried_query() -> None:
    model = FakeChatModel(reply)
    rig = Rig(model=model)
    c = rig.conv()
    rig.say(c, "Why is the sky blue?")
    model.fail_with = [ModelError("condense down")]
    out = rig.say(c, "And that?")
    assert not out.guard_used and out.message.content != GUARD_REPLY
    assert model.calls == 3  # first answer, the failed condense call, this answer
    assert out.message.query in ("And that?", "Why is the sky blue? And that?")
