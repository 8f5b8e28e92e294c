"""The domain of issue 19: which messages lean on the conversation and what they carry, how a
question is split into parts, and which names a question uses that no document mentions."""

from __future__ import annotations

import pytest
from ragchat.domain.followups import (
    CONDENSE_SHORT,
    carried_query,
    is_follow_up,
    leans_on_history,
    names_own_subject,
    new_subject_words,
    own_words_covered,
    subject_question,
    uncovered,
)
from ragchat.domain.names import not_found_sentence, specific_names, unknown_names
from ragchat.domain.parts import parts_reply, split_parts


@pytest.mark.parametrize(
    "message",
    [
        "And on Sundays?",
        "What about for students?",
        "How big is the deposit for one?",
        "Is it safe for my cat?",
        "At what time?",
        "Do they need to sign in?",
    ],
)
def test_messages_that_lean_on_the_conversation(message: str) -> None:
    assert is_follow_up(message)


@pytest.mark.parametrize(
    "message",
    [
        "How much does a single kayak cost for a whole day?",
        "How do I factory reset my Nimbus router?",
        "Who won the football match last night?",
        "All hematopoietic stem cells segregate their chromosomes randomly.",
    ],
)
def test_messages_that_stand_alone(message: str) -> None:
    assert not is_follow_up(message)


@pytest.mark.parametrize(
    ("message", "leans", "own_subject"),
    [
        ("And on Sundays?", True, False),  # continues the previous question
        ("Is it safe for my cat?", True, False),  # refers back
        ("At what time?", True, False),  # no subject of its own
        ("Is there a deposit for it?", True, False),  # "it" refers back, "there" does not
        ("Can I keep a dog there?", True, False),  # "there": the place named before
        ("What time does the supermarket close?", False, True),
        ("Is there a sauna?", False, True),  # "is there": does a sauna exist
        ("Are there any showers?", False, True),
        ("Who won the football match last night?", False, False),  # stands alone, not short
        # time phrases and the weather's "it" refer back to nothing: each names its own subject
        ("What does a litre of diesel cost these days?", False, True),
        ("Will it rain on Sunday morning?", False, True),
        ("Is it going to be windy this afternoon?", False, True),
        ("Is it open on Sundays?", True, False),  # "it": the place asked about before
        # "right now" and "at the moment" say when: two subject words are left, so it is short
        ("Is there an outage in my area right now?", False, True),
        ("Canoe races right now?", False, True),
    ],
)
def test_which_messages_lean_on_history_and_which_name_their_own_subject(
    message: str, leans: bool, own_subject: bool
) -> None:
    assert leans_on_history(message) is leans
    assert names_own_subject(message) is own_subject


def test_the_condense_call_is_only_made_for_a_message_with_at_most_one_subject_word() -> None:
    assert is_follow_up("Why is grass green?")  # searched both ways locally (free)
    assert not is_follow_up("Why is grass green?", CONDENSE_SHORT)  # no model call for it
    assert is_follow_up("And water?", CONDENSE_SHORT)


def test_the_subject_is_the_latest_message_that_stood_alone() -> None:
    previous = ["What time does the library open?", "And on Sundays?", "What about holidays?"]
    assert subject_question(previous) == "What time does the library open?"
    assert subject_question([]) is None
    assert carried_query("And on Sundays?", "Opening hours of the library") == (
        "Opening hours of the library. And on Sundays?"
    )


def test_own_words_covered_reads_the_messages_subject_words_only() -> None:
    texts = ["On Sunday the library opens at noon."]
    assert own_words_covered("And on Sundays?", texts) == 1.0
    assert own_words_covered("At what time?", texts) == 1.0  # no subject of its own
    assert own_words_covered("What's the score in the cricket?", texts) == 0.0
    # a short word is found in its plural ("pass" in "passes", folded "passe"), not in a longer word
    assert own_words_covered("How much is a day pass?", ["Day passes cost 20 pounds."]) == 1.0
    assert own_words_covered("How much is a day pass?", ["Every passenger pays 20 pounds."]) == 0.0


def test_the_subject_a_message_brings_into_the_conversation() -> None:
    previous = ["Do I need to wear a life jacket when kayaking?", "Do I have to pay extra for one?"]
    assert new_subject_words("What about council tax?", previous) == ["council", "tax"]
    assert new_subject_words("How about the swimming pool next door?", previous) == [
        "swimming",
        "pool",
        "next",
        "door",
    ]
    assert new_subject_words("Is there a café at the marina?", previous) == ["café"]  # what is asked for
    assert new_subject_words("What about kids?", previous) == ["kid"]
    # already named, referring, or a time: nothing new
    assert new_subject_words("What about kayaking at night?", previous) == []
    assert new_subject_words("What about same-day ones?", previous) == []
    assert new_subject_words("What about Sunday?", previous) == []
    assert new_subject_words("How long does it take?", previous) == []


def test_uncovered_subject_words_are_compared_by_their_first_letters_and_everyday_spelling() -> None:
    notes = ["Children under 12 may only paddle in a tandem kayak.", "Hourly prices for students."]
    assert uncovered(["kid", "tandem", "student"], notes) == []  # "kids" are "children"
    assert uncovered(["council", "tax"], notes) == ["council", "tax"]
    assert uncovered(["fix", "boiler"], ["The landlord does all repairs to the boiler."]) == []


def test_two_questions_joined_by_and_are_split_and_a_short_part_is_kept_whole() -> None:
    assert split_parts("How much notice do I give and who fixes the boiler?") == [
        "How much notice do I give?",
        "Who fixes the boiler?",
    ]
    assert split_parts("What does it cost? And is there a deposit?") == [
        "What does it cost?",
        "And is there a deposit?",
    ]
    assert split_parts("Can I cook and eat in the kitchen?") == ["Can I cook and eat in the kitchen?"]
    assert split_parts("Salt and pepper?") == ["Salt and pepper?"]
    qualified = "Will you publish a report, and how soon?"
    assert split_parts(qualified) == [qualified]


def test_parts_reply_says_which_part_is_not_covered_and_keeps_one_sources_line_out() -> None:
    text = parts_reply(
        ["What does a tandem cost?", "Is there a sauna?"],
        ["A tandem costs 26 pounds. [source: k1]\n\nSources: k1", None],
    )
    assert text == (
        "A tandem costs 26 pounds. [source: k1]\n\n"
        "Your documents don't cover this part of the question: “Is there a sauna?”"
    )


def test_names_and_codes_of_a_question() -> None:
    assert specific_names("Is the Model 9 recall over?") == ["Model 9"]
    assert specific_names("What time does the Lisbon office open on Sundays?") == ["Lisbon"]
    assert specific_names("Does error E-42 or X9 mean the battery?") == ["E-42", "X9"]
    assert specific_names("Where is Jenkins configured in the Foundry Lane space?") == [
        "Jenkins",
        "Foundry Lane",
    ]
    assert specific_names("Is it closed at Christmas or in March?") == []  # capitalised by habit
    assert specific_names("Is 2FA on the VPN required in the US?") == []  # may be spelled out
    assert specific_names("Lisbon is where?") == []  # a first word is capitalised anyway
    assert specific_names("We sign in with Okta. Where do I reset my password?") == []  # not asked
    assert specific_names("How early do I book a flight to New York?") == []  # a destination
    # a possessive ends a name: "Kestrel Mobile's Swift" was one name no document has
    names = specific_names("How much data do I get on Kestrel Mobile's Swift plan?")
    assert names == ["Kestrel Mobile's", "Swift"]
    texts = ["Kestrel Mobile sells three plans.", "Plan: Swift; Data: 5 GB"]
    assert unknown_names(names, texts) == []


def test_a_name_is_known_when_its_words_occur_together() -> None:
    texts = ["The Nimbus X5 router resets in 15 seconds.", "Opening at 9:00 daily."]
    assert unknown_names(["Nimbus X5", "X5", "Nimbus"], texts) == []
    assert unknown_names(["Nimbus X9", "Model 9", "Lisbon"], texts) == ["Nimbus X9", "Model 9", "Lisbon"]
    assert unknown_names(["Routers"], texts) == []  # a plural is the same name
    assert not_found_sentence(["Model 9", "Lisbon"]) == "Your documents don't mention “Model 9” or “Lisbon”."
