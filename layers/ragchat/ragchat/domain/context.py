"""Contextual chunk headers: what a chunk's vector is computed from.

A 1,000-character chunk cut from the middle of a document often never names what it is about
("Otherwise the delivery is retried …" says nothing of webhooks). Its vector is computed from a short
header — the document's title and the nearest Markdown heading above the chunk — followed by the
chunk's text; the note stores and shows the plain text only. Questions phrased with the document's
topic words then land on every chunk of that document, not only on its first one.

Vectors stored before this header existed were computed from the plain text: re-ingest documents
(or rebuild the index) to give them the header.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

#: headers longer than this are cut (a heading is a line, not a paragraph)
MAX_HEADER_CHARS = 200
# A heading line's start; its text is the rest of the line less trailing spaces and ``#``s. The whole
# line as one regex (``^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$``) retried the tail at every character:
# quadratic in the line (issue 30: "# x" + " #" × 64,000 + "y" froze the server 37 s).
_HEADING_START = re.compile(r" {0,3}#{1,6}[ \t]")
_LINE = re.compile(r"[^\n]*+")
_EXTENSION = re.compile(r"\.(md|markdown|txt|html?|pdf|csv|json|rst)$", re.IGNORECASE)
_PROBE = 60  # characters of a chunk's start used to find it in the text
_SEPARATORS = re.compile(r"[-_]+")  # a file name's word separators (a title's words have none)


def title_words(title: str) -> str:
    """A document title as words: a file name loses its extension and its ``-``/``_`` separators
    ("expense-policy.md" → "expense policy")."""
    stem = _EXTENSION.sub("", title.strip())
    return " ".join(_SEPARATORS.sub(" ", stem).split())


def nearest_headings(text: str, chunks: Sequence[str]) -> list[str]:
    """For each chunk of ``text`` (in order), the last Markdown heading starting before the chunk
    ("" when there is none, when the chunk starts with its own heading, or when it is not found)."""
    found = [
        (m.start(), heading) for m in _LINE.finditer(text) if (heading := _heading(m.group())) is not None
    ]
    starts = [start for start, _ in found]  # ascending: the last heading before ``at`` is a bisection
    out: list[str] = []
    cursor = 0
    for chunk in chunks:
        probe = chunk.strip()[:_PROBE]
        at = text.find(probe, cursor) if probe else -1
        if at < 0:
            at = text.find(probe) if probe else -1
        if at < 0:
            out.append("")
            continue
        cursor = at
        above = bisect.bisect_left(starts, at)  # headings starting before ``at``
        starts_with_heading = _heading(chunk.strip().split("\n", 1)[0]) is not None
        out.append(found[above - 1][1] if above and not starts_with_heading else "")
    return out


def _heading(line: str) -> str | None:
    """The text of a Markdown ATX heading line (``## Setup ##`` → ``Setup``), ``None`` for another
    line. Linear: one match of a bounded prefix and one strip."""
    m = _HEADING_START.match(line)
    if m is None:
        return None
    rest = line[m.end() :]
    if not rest:
        return None
    rest = rest.lstrip(" \t") or " "  # spaces only: a heading with no text
    # at least one character of text, then none of the trailing spaces and #s (a closing sequence)
    return rest[: max(1, len(rest.rstrip(" \t#")))].strip()


def chunk_header(title: str, heading: str = "", text: str = "") -> str:
    """The header line: the title's words, then the heading unless it repeats the title. A title the
    chunk's text already starts with (a note titled by its first line) is not repeated."""
    words = title_words(title)
    # compared as words on both sides: the title's ``-``/``_`` became spaces, so the text's do too
    start = " ".join(text.lstrip(" \t\n#").split()[:40])
    start = " ".join(_SEPARATORS.sub(" ", start).split()).casefold()
    if words and start.startswith(words.rstrip("…").strip().casefold()):
        words = ""
    parts = [words]
    if heading and heading.casefold() != words.casefold():
        parts.append(heading)
    return " — ".join(p for p in parts if p)[:MAX_HEADER_CHARS]


def embedding_text(header: str, text: str) -> str:
    """What is embedded for a chunk: its header, a newline, its text (the text alone without one)."""
    return f"{header}\n{text}" if header else text
