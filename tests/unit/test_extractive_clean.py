"""Extractive answers quote clean sentences (issue 33, item 8): no emphasis marks left by a split, no
passage's first sentence that began before the passage, and a request for a summary says plainly
that summaries need a model."""

from __future__ import annotations

from ragchat.domain.extractive import SUMMARY_NOTE, extractive_answer
from ragchat.domain.models import Hit


def hit(text: str, hit_id: str = "n1") -> Hit:
    return Hit(id=hit_id, text=text, score=1.0, document_id="d1")


def test_no_emphasis_debris_in_a_quote() -> None:
    answer = extractive_answer(
        "Where are AWS credentials kept?", [hit("Tools.** AWS credentials are kept in the vault.")]
    )
    assert "**" not in answer
    assert answer.startswith("Tools. AWS credentials are kept in the vault.")


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
