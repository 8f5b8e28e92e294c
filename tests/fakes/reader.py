"""A deterministic extractive reader (``ragchat.ports.Reader``) for unit tests."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ragchat.domain.reading import Reading

SURE = 6.0  # span score of a scripted answer
NULL = 2.0  # the no-answer score of every passage
UNSURE = 0.5  # span score of the best guess in a passage that does not hold the answer


class FakeReader:
    """Finds a scripted answer: ``answers`` maps a word or phrase of the question (lower case) to the
    answer text. What is asked is the question's last sentence (a carried query "When does the
    library open? And on Sundays?" asks about Sundays); a passage holding the answer text of a phrase
    it contains reads that span
    with margin ``SURE - NULL`` (answered at the default threshold 0), every other passage its first
    word with margin ``UNSURE - NULL`` (no answer). Records every call (``calls``: question and
    passages) so a test sees what was read, and in how many calls."""

    def __init__(self, answers: Mapping[str, str]) -> None:
        self.answers = {k.lower(): v for k, v in answers.items()}
        self.calls: list[tuple[str, list[str]]] = []

    def read(self, question: str, passages: Sequence[str]) -> list[Reading]:
        self.calls.append((question, list(passages)))
        asked = re.split(r"(?<=[.?!])\s+", question.strip().lower())[-1]
        wanted = [v for k, v in self.answers.items() if k in asked]
        out: list[Reading] = []
        for passage in passages:
            hit = next((a for a in wanted if a in passage), None)
            if hit is not None:
                start = passage.index(hit)
                out.append(Reading(start, start + len(hit), SURE, NULL))
            elif passage.strip():
                first = passage.split()[0]
                start = passage.index(first)
                out.append(Reading(start, start + len(first), UNSURE, NULL))
            else:
                out.append(Reading(-1, -1, float("-inf"), NULL))
        return out

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        return [r.probability for r in self.read(question, passages)]
