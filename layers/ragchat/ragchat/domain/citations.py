"""Citation validation (docs/retrieval.md).

An answer cites a note as ``[source: <id>]``. After generation:

1. every tag is found with ``\\[source:\\s*([A-Za-z0-9_-]+)\\]``;
2. valid ids = retrieved ids ∩ found ids (in order of first use);
3. tags whose id is not valid are removed; if any were, `` (Removed invalid citation)`` is appended;
4. the standard line ``Sources: id1, id2`` (valid ids) is appended when there is at least one.

The validated text never starts or ends with whitespace (before its ``Sources:`` line).

A trailing ``Sources: ...`` line the model wrote itself is replaced by the standard one rather than
duplicated. Ids written bare on that line count like tags (models often list them only there): a
retrieved one is valid, an unknown one is reported as removed. Validation is idempotent:
validating its own output changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# The one citation pattern: every module that finds, strips or streams tags uses these.
_ID_CHAR = r"[A-Za-z0-9_-]"
CITATION_ID = _ID_CHAR + "+"
CITATION_PATTERN = r"\[source:\s*(" + CITATION_ID + r")\]"
CITATION_RE = re.compile(CITATION_PATTERN)
# What a tag looks like while it is still arriving (a streaming prefix).
_PARTIAL_TAG = re.compile(r"\[source:\s*" + _ID_CHAR + "*")
SOURCE_TEXT_CHARS = 160
REMOVED_NOTE = " (Removed invalid citation)"
SOURCES_PREFIX = "Sources: "

# A tag together with the spaces before it, so removing it leaves no double space. A run of spaces
# is entered only at its start (the lookbehind): tried from each of its spaces, a run without a tag
# after it was scanned again from every one (issue 30: quadratic).
TAG_WITH_SPACE_PATTERN = r"(?<![ \t])[ \t]*+" + CITATION_PATTERN
_TAG_WITH_SPACE = re.compile(TAG_WITH_SPACE_PATTERN)
_ID = re.compile(CITATION_ID)
_WS = re.compile(r"\s+")
# possessive, entered at a run's start (as above); the lookahead accepts no mark, so taking the marks
# whole changes nothing
_SPACE_BEFORE_PUNCTUATION = re.compile(r"(?<![ \t])[ \t]++([.,;:!?]++)(?=[\s\"'”’)\]]|$)")
# The model's own trailing sources block: a "Sources:" line (optionally bold / a heading) that is
# the last non-blank line, or followed only by list items.
# The heading of that block (matched at a line start, case-insensitive) and one of its list items.
SOURCES_HEADING = (
    r"[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?(?:sources?|citations?)[ \t]*(?::(?:\*\*|__)?|(?:\*\*|__):)"
)
SOURCES_ITEM = r"[ \t]*(?:[-*•]|\d+[.)])"
# The line's rest and the items are taken whole (possessive): given back one character at a time to
# the final ``\s*`` they made a heading followed by a long run of spaces quadratic (issue 30); the
# block can only end where a line ends, so nothing given back could ever have matched.
_TRAILING_SOURCES = re.compile(
    r"(?:^|\n)"
    + SOURCES_HEADING
    + r"(?P<inline>[^\n]*+)(?P<items>(?:\n"
    + SOURCES_ITEM
    + r"[^\n]*+)*+)\s*\Z",
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
    cleaned = _TAG_WITH_SPACE.sub(keep_or_drop, body).strip()
    if removed:
        cleaned = (cleaned + REMOVED_NOTE).lstrip()
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
    # "refunds [source: a], fast" → "refunds, fast"; punctuation that starts a word stays apart
    # (".txt, .md and .pdf" are file types, not the end of a sentence)
    body = _SPACE_BEFORE_PUNCTUATION.sub(r"\1", body)
    return re.sub(r"[ \t]{2,}", " ", body).strip()


def strip_sources_line(text: str) -> str:
    """Text without its trailing ``Sources:`` line (the tags stay)."""
    body, _, _ = _split_trailing_sources(text, set())
    return body.rstrip()


def strip_citation_tags(text: str) -> str:
    without = CITATION_RE.sub("", text)
    return _WS.sub(" ", without).strip()


def citation_ids(text: str) -> list[str]:
    """Cited ids in order of first use."""
    seen: dict[str, None] = {}
    for m in CITATION_RE.finditer(text):
        seen.setdefault(m.group(1), None)
    return list(seen)


class CitationStreamFilter:
    """Drops ``[source: id]`` tags whose id is not in ``valid`` (with the spaces and tabs before them,
    as citation validation does) from a stream of text deltas, holding back only what could still
    become a tag and trailing whitespace (validation strips it at the end); leading whitespace is
    dropped. ``removed`` lists the dropped ids. :mod:`ragchat.domain.citation_stream` adds the
    ``Sources:`` block to this."""

    _MAX_TAG = 200

    def __init__(self, valid: Iterable[str]) -> None:
        self._valid = set(valid)
        self._buf = ""
        self._ws = ""
        self._started = False
        self.removed: list[str] = []

    def _emit(self, text: str) -> str:
        text = self._ws + text
        kept = text.rstrip()
        self._ws = text[len(kept) :]
        if not self._started:
            kept = kept.lstrip()
            self._started = bool(kept)
            if not kept:
                self._ws = ""
        return kept

    def feed(self, delta: str) -> str:
        self._buf += delta
        out: list[str] = []
        while self._buf:
            start = self._buf.find("[")
            if start < 0:
                out.append(self._emit(self._buf))
                self._buf = ""
                break
            if start > 0:
                out.append(self._emit(self._buf[:start]))
                self._buf = self._buf[start:]
            m = CITATION_RE.match(self._buf)
            if m:
                if m.group(1) in self._valid:
                    out.append(self._emit(m.group(0)))
                else:
                    self.removed.append(m.group(1))
                    self._ws = self._ws.rstrip(" \t")  # a removed tag takes the spaces before it
                self._buf = self._buf[m.end() :]
                continue
            if self._could_be_tag(self._buf):
                break  # wait for more text
            out.append(self._emit(self._buf[0]))
            self._buf = self._buf[1:]
        return "".join(out)

    def flush(self) -> str:
        rest, self._buf, self._ws = self._ws + self._buf, "", ""
        return rest

    def _could_be_tag(self, buf: str) -> bool:
        if len(buf) > self._MAX_TAG or "]" in buf:
            return False
        prefix = "[source:"
        if len(buf) <= len(prefix):
            return prefix.startswith(buf)
        if not buf.startswith(prefix):
            return False
        return _PARTIAL_TAG.fullmatch(buf) is not None
