"""Specific names in a question (docs/retrieval.md step 1): a question naming a product, model, place or code
that no document mentions ("the Model 9 recall", "the Lisbon office") is refused, even when the
documents are about something close (another model, another office): similarity cannot tell
"Model 9" from "Model 7", an exact lookup can.

A name is a run of capitalised words or codes (a letter, then digits: ``X9``, ``E-42``), not at the
start of the sentence, with a number right after it ("Model 9", "SunMax 300"); weekdays, months,
holidays, a few words capitalised by habit, acronyms ("US", "VPN": a document may spell them out)
and abbreviations starting with a digit ("2FA") are not names; a possessive ends a name ("Kestrel
Mobile's Swift plan" names "Kestrel Mobile's" and "Swift"). A name is known when its words occur
together (adjacent, case-insensitively, plurals folded) in a document text or title.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’&+-]*[A-Za-z0-9]|[A-Za-z0-9]")
ACRONYM_CHARS = 5
_SENTENCES = re.compile(r"(?<=[.!?])\s+")
_AFTER_TO = re.compile(r"\bto\s+(?:new\s+)?$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?:;]\s*$")
#: capitalised by habit, not names of something the documents must mention
NOT_NAMES = frozenset(
    """i i'm i've i'd i'll monday tuesday wednesday thursday friday saturday sunday mondays tuesdays
    wednesdays thursdays fridays saturdays sundays january february march april may june july august
    september october november december christmas easter new year weekend weekends ok okay please
    thanks hi hello mr mrs ms dr""".split()  # noqa: SIM905
)


def _is_code(word: str) -> bool:
    """A model or error code: a letter first, then digits among letters ("X9", "E-42"); "2FA", "4K"
    and "5G" are abbreviations a document may spell out."""
    return word[0].isalpha() and any(c.isdigit() for c in word)


def _is_acronym(word: str) -> bool:
    """ "US", "VPN", "SDKs": a document may spell them out ("United States"), so they are no names."""
    core = word.removesuffix("s")
    return core.isupper() and len(core) <= ACRONYM_CHARS


def _is_capitalised(word: str) -> bool:
    return word[0].isupper() and word.lower() not in NOT_NAMES and not _is_acronym(word)


def asking_sentences(question: str) -> str:
    """The sentences that ask (end with ``?``); the whole text when none does. "Our company signs
    in through Okta. Where do I reset my password?" asks about the password, not about Okta."""
    sentences = _SENTENCES.split(question.strip())
    asking = [s for s in sentences if s.rstrip().endswith("?")]
    return " ".join(asking) if asking else question


def specific_names(question: str) -> list[str]:
    """The names and codes in the asking sentences of ``question``, in order, each once (a name
    right after "to" is a destination, "a flight to New York": not checked)."""
    question = asking_sentences(question)
    names: list[str] = []
    current: list[str] = []

    def close() -> None:
        if current:
            names.append(" ".join(current))
            current.clear()

    for match in _TOKEN.finditer(question):
        word = match.group(0)
        before = question[: match.start()]
        sentence_start = not before.strip() or bool(_SENTENCE_END.search(before))
        destination = not current and _AFTER_TO.search(before) is not None
        if destination:
            close()
        elif _is_code(word) or (_is_capitalised(word) and not sentence_start):
            current.append(word)
            if word.endswith(("'s", "’s")):  # a possessive ends its name: "Kestrel Mobile's Swift plan"
                close()
        elif current and word.isdigit():  # "Model 9", "SunMax 300"
            current.append(word)
            close()
        else:
            close()
    close()
    return list(dict.fromkeys(names))


def _fold(word: str) -> str:
    word = word.lower().replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


def _pattern(name: str) -> re.Pattern[str]:
    words = [re.escape(_fold(w)) for w in name.split()]
    return re.compile(r"(?<![a-z0-9])" + r"[\s\-_/]*".join(w + r"(?:'?s)?" for w in words) + r"(?![a-z0-9])")


def mentioned(name: str, texts: Iterable[str]) -> bool:
    """Does any of ``texts`` mention ``name`` (its words adjacent, case and plural aside)?"""
    pattern = _pattern(name)
    return any(pattern.search(t.lower().replace("’", "'")) for t in texts)


def unknown_names(names: Iterable[str], texts: Iterable[str]) -> list[str]:
    """The ``names`` that none of ``texts`` mentions."""
    texts = list(texts)
    return [n for n in names if not mentioned(n, texts)]


def not_found_sentence(names: list[str]) -> str:
    """What a refusal says about the names it did not find."""
    quoted = [f"“{n}”" for n in names]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"Your documents don't mention {listed}."
