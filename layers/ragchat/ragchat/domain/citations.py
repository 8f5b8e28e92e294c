"""Citation validation (SPEC §7).

An answer cites a note as ``[source: <id>]``. After generation:

1. every tag is found with ``\\[source:\\s*([A-Za-z0-9_-]+)\\]``;
2. valid ids = retrieved ids ∩ found ids (in order of first use);
3. tags whose id is not valid are removed; if any were, `` (Removed invalid citation)`` is appended;
4. the standard line ``Sources: id1, id2`` (valid ids) is appended when there is at least one.

A trailing ``Sources: ...`` line the model wrote itself is replaced by the standard one rather than
duplicated. Ids written bare on that line count like tags (models often list them only there): a
retrieved one is valid, an unknown one is reported as removed. Validation is idempotent:
validating its own output changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

CITATION_PATTERN = r"\[source:\s*([A-Za-z0-9_-]+)\]"
CITATION_RE = re.compile(CITATION_PATTERN)
REMOVED_NOTE = " (Removed invalid citation)"
SOURCES_PREFIX = "Sources: "

# A tag together with the spaces before it, so removing it leaves no double space.
_TAG_WITH_SPACE = re.compile(r"[ \t]*" + CITATION_PATTERN)
_ID = re.compile(r"[A-Za-z0-9_-]+")
# The model's own trailing sources block: a "Sources:" line (optionally bold / a heading) that is
# the last non-blank line, or followed only by list items.
_TRAILING_SOURCES = re.compile(
    r"(?:^|\n)[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?(?:sources?|citations?)[ \t]*(?::(?:\*\*|__)?|(?:\*\*|__):)"
    r"(?P<inline>[^\n]*)(?P<items>(?:\n[ \t]*(?:[-*•]|\d+[.)])[^\n]*)*)\s*\Z",
    re.IGNORECASE,
)
# Words that may appear on a sources line without being ids.
_FILLER = frozenset({"none", "n", "a", "na", "and", "id", "ids"})


@dataclass(slots=True, frozen=True)
class CitationResult:
    text: str
    generated_ids: list[str] = field(default_factory=list)  # every id found, in order, unique
    valid_ids: list[str] = field(default_factory=list)  # retrieved ∩ found, order of first use
    removed: list[str] = field(default_factory=list)  # ids whose tags were removed


def _unique(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def sources_line(ids: Sequence[str]) -> str:
    return SOURCES_PREFIX + ", ".join(ids)


def with_sources_line(body: str, ids: Sequence[str]) -> str:
    """``body`` followed by the standard ``Sources:`` line (nothing appended when ``ids`` is empty)."""
    body = body.rstrip()
    if not ids:
        return body
    return f"{body}\n\n{sources_line(ids)}" if body else sources_line(ids)


def _looks_like_id(token: str) -> bool:
    return any(c.isdigit() or c in "-_" for c in token)


def _split_trailing_sources(text: str, retrieved: set[str]) -> tuple[str, list[str], list[str]]:
    """Split off the model's own trailing sources block.

    Returns (text without it, tag ids in it, bare ids in it). A last line such as
    ``Source: the 2019 report`` is prose, not a sources block, and is left alone: every bare token
    must be a retrieved id, look like an id (has a digit, ``-`` or ``_``) or be a filler word."""
    match = _TRAILING_SOURCES.search(text)
    if match is None:
        return text, [], []
    block = match.group("inline") + match.group("items")
    tag_ids = CITATION_RE.findall(block)
    tokens = [t for t in _ID.findall(CITATION_RE.sub(" ", block)) if any(c.isalnum() for c in t)]
    if not all(t in retrieved or _looks_like_id(t) or t.lower() in _FILLER for t in tokens):
        return text, [], []
    bare = [t for t in tokens if t in retrieved or (_looks_like_id(t) and t.lower() not in _FILLER)]
    return text[: match.start()], tag_ids, bare


def validate_citations(text: str, retrieved_ids: Sequence[str], *, enabled: bool = True) -> CitationResult:
    """Validate the citations of a generated answer against the ids actually retrieved.

    With ``enabled=False`` the text is returned unchanged; the ids are still reported (and
    ``valid_ids`` still holds only retrieved ids, so stored sources stay trustworthy)."""
    retrieved = set(retrieved_ids)
    if not enabled:
        found = _unique(CITATION_RE.findall(text))
        return CitationResult(text=text, generated_ids=found, valid_ids=[i for i in found if i in retrieved])

    body, block_tag_ids, block_bare_ids = _split_trailing_sources(text, retrieved)
    generated = _unique([*CITATION_RE.findall(body), *block_tag_ids, *block_bare_ids])
    valid = [i for i in generated if i in retrieved]
    removed = [i for i in generated if i not in retrieved]

    def keep_or_drop(match: re.Match[str]) -> str:
        return match.group(0) if match.group(1) in retrieved else ""

    if not body.strip() and not valid:
        body = text  # the answer is nothing but a sources line naming nothing usable: keep it
    cleaned = _TAG_WITH_SPACE.sub(keep_or_drop, body).rstrip()
    if removed:
        cleaned = (cleaned + REMOVED_NOTE).strip()
    return CitationResult(
        text=with_sources_line(cleaned, valid),
        generated_ids=generated,
        valid_ids=valid,
        removed=removed,
    )


def strip_citations(text: str) -> str:
    """Text without any ``[source: id]`` tags or trailing ``Sources:`` line (summaries carry none)."""
    body, _, _ = _split_trailing_sources(text, set())
    body = _TAG_WITH_SPACE.sub("", body)
    body = re.sub(r"[ \t]+([.,;:!?])", r"\1", body)
    return re.sub(r"[ \t]{2,}", " ", body).strip()
