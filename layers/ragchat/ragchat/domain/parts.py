"""Multi-part questions (docs/retrieval.md): "What does a tandem cost and what is the deposit?" asks two
things; each part is retrieved, decided and answered on its own, so a part the documents do not cover
is said to be not covered while the other is answered.

A question is split where a second question begins: after a question mark followed by more text, or
at "and" followed by a question word or an auxiliary verb ("… and who fixes the boiler?", "… and is
breakfast covered?"). A part too short to stand alone leans on the part before it (its subject is
carried, as for a follow-up).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_PARTS = 3
SOURCES_SEPARATOR = "\n\nSources: "
_QUESTION_WORDS = (
    "what|how|when|where|who|whom|whose|which|why|is|are|was|were|do|does|did|can|could|will|would|"
    "should|may|must|has|have"
)
_SPLIT = re.compile(
    # possessive, and starting where the spaces start: ``\s*,?\s+`` split every run of spaces every
    # way (cubic: 1,000 spaces took 8 s; issue 30)
    rf"(?<=\?)\s++(?=\S)|(?<!\s)(?:\s*+,\s++|\s++)and\s++(?:also\s++)?(?=(?:{_QUESTION_WORDS})\b)",
    re.IGNORECASE,
)
_MIN_WORDS = 3  # a part must have at least this many words ("and how soon?" qualifies the first part)


def split_parts(question: str) -> list[str]:
    """The parts of ``question`` (each ending with ``?`` when the question did), at most
    :data:`MAX_PARTS`; ``[question]`` when it asks one thing."""
    pieces = [p.strip(" ,;") for p in _SPLIT.split(question) if p and p.strip(" ,;")]
    if len(pieces) < 2 or any(len(p.split()) < _MIN_WORDS for p in pieces):
        return [question]
    if len(pieces) > MAX_PARTS:
        pieces = [*pieces[: MAX_PARTS - 1], " ".join(pieces[MAX_PARTS - 1 :])]
    asks = question.rstrip().endswith("?")
    out = []
    for p in pieces:
        p = p[0].upper() + p[1:]
        if asks and not p.endswith(("?", ".", "!")):
            p += "?"
        out.append(p)
    return out


def parts_reply(parts: Sequence[str], answers: Sequence[str | None]) -> str:
    """One answer for a multi-part question: each part's answer (without its ``Sources:`` line), or,
    for a part nothing covers (``None``), a sentence saying so, in the question's order."""
    out = []
    for part, answer in zip(parts, answers, strict=True):
        if answer is None:
            out.append(not_covered_sentence(part))
        else:
            body, sep, _ = answer.rpartition(SOURCES_SEPARATOR)
            out.append((body if sep else answer).strip())
    return "\n\n".join(out)


def not_covered_sentence(part: str) -> str:
    return f"Your documents don't cover this part of the question: “{part}”"
