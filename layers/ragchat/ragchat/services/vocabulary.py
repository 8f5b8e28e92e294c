"""The reader policy's word check (docs/retrieval.md step 4): are the words of a question let through on
borderline evidence words the caller's notes use at all?

With Claude the guard lets borderline evidence through (between the reader and the extractive
cutoffs of :mod:`ragchat.domain.answerability`). Such evidence is often about the same domain as the
question without being about what it asks: "Which bike should I buy for commuting?" beside a cycling
club's ride rules. The check looks up each of the question's subject words
(:func:`ragchat.domain.followups.subject_words`) that the evidence does not have, among all the
caller's notes (one keyword search per such word, as for unknown names), and records the share found
nowhere as the decision's ``unknown_words`` signal; the decision is then made again with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ragchat.domain.answerability import READER_POLICY, decide_for
from ragchat.domain.citations import strip_citations
from ragchat.domain.followups import subject_words, uncovered

if TYPE_CHECKING:
    from ragchat.domain.answerability import Coefficients, Decision
    from ragchat.domain.models import Hit

#: a keyword search among the caller's notes: (word, notes to read) -> the notes found
WordSearch = Callable[[str, int], "list[Hit]"]

#: notes read per word by the keyword lookup
LOOKUP_HITS = 5
#: words looked up per question at most (the others count as found: the check errs towards reading)
MAX_LOOKUPS = 6


def unknown_word_share(search: WordSearch, question: str, hits: list[Hit]) -> float:
    """The share of ``question``'s subject words that neither ``hits`` nor a keyword ``search`` among
    the caller's notes contain; 0.0 for a question without subject words."""
    words = sorted(set(subject_words(question)))
    if not words:
        return 0.0
    missing = uncovered(words, [strip_citations(h.text) for h in hits])[:MAX_LOOKUPS]
    nowhere = [w for w in missing if uncovered([w], [h.text for h in search(w, LOOKUP_HITS)])]
    return len(nowhere) / len(words)


def check_words(
    search: WordSearch,
    question: str,
    hits: list[Hit],
    decision: Decision,
    threshold: float,
    coefficients: Coefficients,
) -> Decision:
    """The reader decision made again with the ``unknown_words`` signal."""
    signals = replace(decision.signals, unknown_words=unknown_word_share(search, question, hits))
    return decide_for(READER_POLICY, signals, threshold, coefficients)
