"""Extractive answers quote clean sentences (issue 33, item 8): no emphasis marks left by a split, no
passage's first sentence that began before the passage, and a request for a summary says plainly
that summaries need a model."""

from __future__ import annotations

from ragchat.domain.excerpts import excerpt
from ragchat.domain.extractive import SUMMARY_NOTE, extractive_answer, plain_text, split_sentences
from ragchat.domain.models import Hit


def hit(text: str, hit_id: str = "n1") -> Hit:
    return Hit(id=hit_id, text=text, score=1.0, document_id="d1")


def test_no_emphasis_debris_in_a_quote() -> None:
    answer = extractive_answer(
        "Where are AWS credentials kept?", [hit("Tools.** AWS credentials are kept in the vault.")]
    )
    assert "**" not in answer
    # the label's opening marks were cut off by a chunk boundary: still a label, not quoted
    assert answer.startswith("AWS credentials are kept in the vault.")


def test_a_bold_run_in_label_is_not_quoted() -> None:
    """ "**Tools.** The fuel dock opens at 7" labels its paragraph as a heading would: a quote starts at
    the sentence (it read "Tools. The fuel dock opens at 7")."""
    text = "**Tools.** The fuel dock opens at 7 every morning.\n\n- __Opening hours__. The office opens at 9."
    answer = extractive_answer("When does the fuel dock open?", [hit(text)])
    assert answer.startswith("The fuel dock opens at 7 every morning.")
    assert "Tools" not in answer
    assert split_sentences(text) == ["The fuel dock opens at 7 every morning.", "The office opens at 9."]
    assert excerpt(text, answer) == "The fuel dock opens at 7 every morning. The office opens at 9."


def test_bold_words_that_are_the_sentence_are_kept() -> None:
    """Bold words that are part of the sentence stay, and a bold sentence of its own is a sentence
    (only a label of one or two words is dropped, as a heading is)."""
    assert split_sentences("**Never** share your password.") == ["**Never** share your password."]
    answer = extractive_answer("Can I share my password?", [hit("**Never** share your password.")])
    assert answer.startswith("Never share your password.")
    assert split_sentences("**No dogs allowed.** Cats stay at home.") == [
        "No dogs allowed.",
        "Cats stay at home.",
    ]
    assert plain_text(split_sentences("**Note:** Back up first.")[0]) == "Note: Back up first."


def test_an_answer_never_begins_mid_sentence() -> None:
    text = (
        "transitions; t3.small.search nodes host the domain. "
        "The domain uses t3.small.search nodes in two zones."
    )
    answer = extractive_answer("Which nodes host the search domain?", [hit(text)])
    assert not answer.startswith("transitions")
    assert answer.startswith("The domain uses t3.small.search nodes in two zones.")


def test_a_summary_request_says_summaries_need_a_model() -> None:
    answer = extractive_answer(
        "Summarize the handbook", [hit("The handbook covers opening hours and holidays.")]
    )
    assert answer.startswith(SUMMARY_NOTE)
    assert "The handbook covers opening hours and holidays. [source: n1]" in answer
    assert "Claude" in SUMMARY_NOTE
