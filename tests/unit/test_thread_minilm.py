"""Conversations that keep the thread (issue 19) as a user sees them: the local stack (SQLite, the
embedded index, MiniLM, the extractive answerer) over three small documents, through the chat turn
and the one-shot question. Follow-ups keep their subject, an off-topic follow-up is refused as on a
first turn, a two-part question answers both parts (or says which is not covered), a name no
document mentions is refused with a sentence saying so, and the query used comes back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ragchat.domain.prompts import GUARD_REPLY

REPO = Path(__file__).resolve().parents[2]
OWNER = "alice"

DOCS = {
    "canoe-hire.md": """# Lakeside canoe hire

## Prices

A canoe costs 22 pounds per hour. A two-seat canoe costs 30 pounds per hour.

The deposit for a canoe is 60 pounds, returned when the canoe comes back undamaged.

Children under 10 paddle free in a two-seat canoe with an adult.

## Opening hours

The boathouse opens at 9:00 and closes at 17:00 on weekdays. On Sundays it opens at 11:00 and closes
at 16:00.
""",
    "bike-share.md": """# City bike share

## Prices

A day pass for a bike costs 8 pounds. An electric bike costs 3 pounds per ride.

The deposit for a bike is 150 pounds, taken from your card when you register.

## Docks

Bikes are returned to any of the 40 docks in the city centre.
""",
    "office-guide.md": """# Office guide

## Parking

The car park behind the office has 30 spaces, given out on a first-come basis.

## Kitchen

Coffee is free. The fridge is emptied every Friday at 16:00.
""",
}


def _models_path() -> Path | None:
    from ragchat.adapters.local.onnx_embedder import MODEL_FILES, model_dir
    from ragchat.config import load_settings

    candidates = []
    with contextlib.suppress(Exception):
        candidates.append(load_settings().models_path)
    candidates.append(REPO / ".ragchat" / "models")
    wanted = MODEL_FILES[load_settings({}).embedder_precision]  # the file the default settings load
    return next((p for p in candidates if (model_dir(p) / wanted).is_file()), None)


MODELS = _models_path()
pytestmark = pytest.mark.skipif(MODELS is None, reason="MiniLM ONNX model not prepared: run `make model`")


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    env = {
        "RAGCHAT_DATA_DIR": str(tmp_path_factory.mktemp("thread")),
        "RAGCHAT_MODEL_DIR": str(MODELS),
        "RAGCHAT_CHAT_MODEL": "extractive",
    }
    container = Container(load_settings(env))
    for name, text in DOCS.items():
        container.ingestion.submit_file(OWNER, data=text.encode(), filename=name)
    container.launcher.wait_idle(120)
    yield container
    close = getattr(container, "close", None)
    if callable(close):
        close()


def _talk(box: Any, *messages: str) -> list[Any]:
    conv = box.chat.conversations.create(OWNER).id
    return [box.chat.turns.send(OWNER, conv, m) for m in messages]


def _titles(result: Any) -> set[str]:
    return {(s.title or "").removesuffix(".md") for s in result.message.sources or []}


def test_an_elliptical_follow_up_keeps_its_subject_and_says_what_was_searched(box: Any) -> None:
    first, follow = _talk(box, "When does the canoe boathouse open on weekdays?", "And on Sundays?")
    assert "9:00" in first.message.content
    assert not follow.guard_used and "11:00" in follow.message.content
    assert _titles(follow) == {"canoe-hire"}
    assert follow.message.query == "When does the canoe boathouse open on weekdays? And on Sundays?"


def test_a_pronoun_follow_up_answers_about_the_thing_named_before(box: Any) -> None:
    _, follow = _talk(box, "How much does a canoe cost per hour?", "How big is the deposit for one?")
    # the canoe's deposit comes first (the bike share's may follow: it answers "the deposit" too)
    assert follow.message.content.startswith("The deposit for a canoe is 60 pounds")
    assert "canoe-hire" in _titles(follow)


def test_an_off_topic_follow_up_is_refused_as_on_a_first_turn(box: Any) -> None:
    _, follow = _talk(box, "How much does a canoe cost per hour?", "Who won the football match last night?")
    assert follow.guard_used and follow.message.content == GUARD_REPLY and follow.message.sources == []


@pytest.mark.parametrize(
    ("first", "off_topic"),
    [
        # short, naming its own subject, near the documents' topic: the boathouse's closing time
        # is similar, but no note mentions a supermarket
        ("When does the canoe boathouse open on weekdays?", "What time does the supermarket close?"),
        # "is there" asks whether something exists; it does not refer back to the canoe
        ("How much does a canoe cost per hour?", "Is there a sauna?"),
        ("How much does a bike day pass cost?", "Is there a swimming pool nearby?"),
    ],
)
def test_a_short_off_topic_follow_up_naming_its_own_subject_is_refused(
    box: Any, first: str, off_topic: str
) -> None:
    answered, follow = _talk(box, first, off_topic)
    assert not answered.guard_used
    assert follow.guard_used and follow.message.content == GUARD_REPLY and follow.message.sources == []


@pytest.mark.parametrize(
    ("first", "off_topic"),
    [
        # "What about X" with a subject no earlier message and no note of the conversation's has
        ("How much does a canoe cost per hour?", "What about the swimming pool next door?"),
        # the thing asked for is what counts: the boathouse is in the notes, a sauna is not
        ("When does the canoe boathouse open on weekdays?", "Is there a sauna at the boathouse?"),
        # "these days" says when; it refers back to nothing
        ("How much does a canoe cost per hour?", "What does a litre of diesel cost these days?"),
        # the weather's "it" is not the canoe
        ("When does the canoe boathouse open on Sundays?", "Will it rain on Sunday?"),
    ],
)
def test_an_off_topic_follow_up_is_refused_whatever_its_shape(box: Any, first: str, off_topic: str) -> None:
    answered, follow = _talk(box, first, off_topic)
    assert not answered.guard_used
    assert follow.guard_used and follow.message.content == GUARD_REPLY and follow.message.sources == []


@pytest.mark.parametrize(
    ("first", "follow_up", "fact"),
    [
        ("How much does a canoe cost per hour?", "What about kids?", "Children under 10 paddle free"),
        ("How much does a canoe cost per hour?", "What about a two-seat canoe?", "30 pounds"),
        ("How much does a canoe cost per hour?", "Is there a deposit?", "60 pounds"),
    ],
)
def test_a_follow_up_about_the_conversations_subject_is_still_answered(
    box: Any, first: str, follow_up: str, fact: str
) -> None:
    _, follow = _talk(box, first, follow_up)
    assert not follow.guard_used and fact in follow.message.content
    assert "canoe-hire" in _titles(follow)


def test_a_second_part_about_a_subject_no_note_mentions_is_said_to_be_not_covered(box: Any) -> None:
    [turn] = _talk(box, "How much does a canoe cost per hour and is there a sauna?")
    assert "22 pounds" in turn.message.content
    assert "don't cover this part of the question: “Is there a sauna?”" in turn.message.content
    assert _titles(turn) == {"canoe-hire"}


def test_a_short_follow_up_about_a_subject_the_notes_mention_is_still_answered(box: Any) -> None:
    _, shift = _talk(box, "How much does a canoe cost per hour?", "When is the fridge emptied?")
    assert not shift.guard_used and "Friday" in shift.message.content
    assert _titles(shift) == {"office-guide"}
    _, lean = _talk(box, "How much does a bike day pass cost?", "Is there a deposit for it?")
    assert not lean.guard_used and "150 pounds" in lean.message.content
    assert "bike-share" in _titles(lean)


def test_a_two_part_question_answers_and_cites_both_parts(box: Any) -> None:
    [both] = _talk(box, "What does a bike day pass cost and how many spaces has the office car park?")
    assert "8 pounds" in both.message.content and "30 spaces" in both.message.content
    assert _titles(both) == {"bike-share", "office-guide"}
    [half] = _talk(box, "What does a bike day pass cost and how do I book the office sauna?")
    assert "8 pounds" in half.message.content
    assert "don't cover this part of the question: “How do I book the office sauna?”" in half.message.content


def test_a_name_no_document_mentions_is_refused_in_chat_and_one_shot(box: Any) -> None:
    [turn] = _talk(box, "How much does the Voyager 9 canoe cost per hour?")
    assert turn.guard_used and turn.message.sources == []
    assert turn.message.content == f"{GUARD_REPLY} Your documents don't mention “Voyager 9”."
    ask = box.ask.ask(OWNER, "Is there parking at the Lisbon office?")
    assert ask.guard_used and ask.sources == []
    assert ask.answer == f"{GUARD_REPLY} Your documents don't mention “Lisbon”."


def test_the_stream_says_what_was_searched_and_quotes_whole_sentences_without_markup(box: Any) -> None:
    conv = box.chat.conversations.create(OWNER).id
    box.chat.turns.send(OWNER, conv, "When does the canoe boathouse open on weekdays?")
    _, events = box.chat.turns.stream(OWNER, conv, "And on Sundays?")
    out = dict(events)
    assert out["sources"]["query"] == "When does the canoe boathouse open on weekdays? And on Sundays?"
    text = out["answer_end"]["content"]
    assert "#" not in text and "**" not in text
    body = text.split("\n\nSources:")[0]
    for quote in body.split(" [source: ")[:-1]:
        sentence = quote.split("] ")[-1]
        assert sentence[0].isupper() and sentence.endswith((".", "!", "?"))
