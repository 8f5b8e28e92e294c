"""Splitting document text into chunks (docs/ingestion.md): 1000 characters, ~100 characters of overlap.

Boundaries are chosen by ``semantic-text-splitter`` (Rust, no dependencies), which splits at the
largest semantic unit that fits, from paragraphs (blank lines) down through lines, sentences, words
and finally graphemes (never inside a user-perceived character). For Markdown it uses the Markdown
structure (headings, blocks, lists, code fences) before falling back to the same levels.

Why this library rather than ``langchain-text-splitters`` (measured with ``bench/bench_splitting.py``
on this 2-CPU machine, Python 3.11, all 5,183 SciFact abstracts, 1000/100; bench/results/):

==========================  ===========================  ================================
                            semantic-text-splitter       langchain-text-splitters 1.1.3
==========================  ===========================  ================================
install (with requirements) 1 package, 18.9 MB           34 packages, 66.7 MB
                                                         (langchain-core, langsmith, …)
import time                 10 ms                        1,713 ms
split all abstracts         1.03 s (this module,         3.73 s
                            incl. our overlap)
chunk pairs overlapping     8,461 / 8,461 (mean 96 ch.)  3,826 / 9,903 (mean 36 chars)
==========================  ===========================  ================================

The import time (a Lambda cold start pays it) and the dependency tree decide it;
semantic-text-splitter was already a dependency.

Overlap. The library only overlaps whole units of the level it split at (a whole sentence), so with
prose whose sentences exceed 100 characters it gives no overlap at all. For plain text we therefore
ask it for chunks of ``chunk_size - overlap`` characters without overlap and prefix each chunk with
the last ~``overlap`` characters of the previous one, starting at a word boundary. Markdown is split
at the full ``chunk_size`` so a section that fits stays whole with its heading; a chunk that starts
a new section (a heading) gets no overlap (the previous section's tail would only blur it), and a
chunk continuing a long section gets as much of the ~``overlap`` tail as still fits.
Every chunk is a substring of the (newline-normalised) input and never longer than ``chunk_size``.

Linear time. The library's chunk search costs time quadratic in the length of a run of text that
has no boundary of a higher level (issue 8: 400 k characters of words without sentence ends took
2.3 s, 21.8 MB without whitespace never finished). Text longer than ``_WINDOW_CHUNKS`` chunks is
therefore handed to it one window at a time; each window ends at the best boundary in its second
half: a blank line, else a line break, else a space, else between two characters (never inside a
user-perceived character; text without whitespace is cut into full chunks). A window edge can end
a chunk a little short (at most one per ~16 chunks); the overlap is computed on the whole text, so
it runs across window edges. Shorter texts are split exactly as before. Measured here: 20 MB of
prose ~0.4 s, 20 MB without whitespace ~4 s (bench/results/splitting.md).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, Protocol

from ragchat.domain.models import Chunk

MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})

_HEADING = re.compile(r"#{1,6}\s")
_SPACE = re.compile(r"\s")
# Lone surrogates (possible in JSON input) cannot be encoded; they become U+FFFD.
_SURROGATE = re.compile("[\ud800-\udfff]")
# Text is given to the library in windows of at most this many chunk sizes (see "Linear time").
_WINDOW_CHUNKS = 16
_WINDOW_SEPARATORS = ("\n\n", "\n", " ")
_JOINERS = frozenset("\u200d\u034f")  # zero-width joiner, combining grapheme joiner


class _Splitter(Protocol):
    def chunk_indices(self, text: str) -> list[tuple[int, str]]: ...


@lru_cache(maxsize=16)
def _splitter(markdown: bool, capacity: int) -> _Splitter:
    from semantic_text_splitter import MarkdownSplitter, TextSplitter

    splitter: _Splitter = MarkdownSplitter(capacity) if markdown else TextSplitter(capacity)
    return splitter


def _base_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def split_text(text: str, *, content_type: str, chunk_size: int = 1000, overlap: int = 100) -> list[str]:
    """Split ``text`` into chunks of at most ``chunk_size`` characters.

    Consecutive chunks share about ``overlap`` characters (cut at a word boundary). No chunk is
    empty or whitespace-only; the result is deterministic. Text that is blank gives ``[]``.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    if overlap < 0 or overlap >= chunk_size:
        raise ValueError("overlap must be >= 0 and smaller than chunk_size")
    text = _SURROGATE.sub("\ufffd", text.replace("\r\n", "\n").replace("\r", "\n"))
    if not text.strip():
        return []
    markdown = _base_type(content_type) in MARKDOWN_TYPES
    # Plain text reserves room for the overlap; Markdown uses the full size so that a section
    # that fits stays whole with its heading (its overlap is then added only where it fits).
    capacity = chunk_size if markdown else chunk_size - overlap
    splitter = _splitter(markdown, capacity)
    spans = [
        (offset + start, offset + start + len(piece))
        for offset, end in _windows(text, _WINDOW_CHUNKS * capacity)
        for start, piece in splitter.chunk_indices(text[offset:end])
        if piece.strip()
    ]
    chunks: list[tuple[int, int]] = []  # (start, end) of each chunk in ``text``
    for i, (start, end) in enumerate(spans):
        if i > 0 and overlap > 0 and not (markdown and _HEADING.match(text, start)):
            prev_start, prev_end = spans[i - 1]
            start = _overlap_start(text, start, end, max(prev_start, prev_end - overlap), chunk_size)
            if chunks[-1][0] >= start:  # e.g. a lone heading now carried whole by its section's chunk
                chunks.pop()
        chunks.append((start, end))
    return [text[start:end].strip() for start, end in chunks]


def _windows(text: str, size: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of consecutive windows covering ``text``, each at most ``size`` long."""
    start = 0
    while len(text) - start > size:
        end = _window_end(text, start + size // 2, start + size)
        yield start, end
        start = end
    yield start, len(text)


def _window_end(text: str, lo: int, hi: int) -> int:
    """The best place to end a window within ``text[lo:hi]``: just after a blank line, a line
    break or a space (the last one), else the last grapheme boundary before ``hi``."""
    for separator in _WINDOW_SEPARATORS:
        found = text.rfind(separator, lo, hi)
        if found >= 0:
            return found + len(separator)
    end = hi
    while end > lo and _continues_grapheme(text, end):
        end -= 1
    return end if end > lo else hi


def _continues_grapheme(text: str, pos: int) -> bool:
    """Whether ``text[pos]`` belongs to the same user-perceived character as ``text[pos - 1]``
    (combining marks, joiners, variation selectors, emoji modifiers)."""
    char, before = text[pos], text[pos - 1]
    return (
        unicodedata.category(char) in ("Mn", "Mc", "Me")
        or char in _JOINERS
        or before in _JOINERS
        or "\ufe00" <= char <= "\ufe0f"
        or "\U0001f3fb" <= char <= "\U0001f3ff"
        or ("\U0001f1e6" <= char <= "\U0001f1ff" and "\U0001f1e6" <= before <= "\U0001f1ff")
    )


def _overlap_start(text: str, start: int, end: int, tail_start: int, chunk_size: int) -> int:
    """Where the chunk ``text[start:end]`` begins once extended backwards to the first word
    boundary at or after ``tail_start``, no further than fits in ``chunk_size``."""
    pos = tail_start
    while pos < start:
        if pos > 0 and not text[pos - 1].isspace():  # mid-word: move to the next word start
            nxt = _SPACE.search(text, pos, start)
            if nxt is None:
                break
            pos = nxt.end()
        while pos < start and text[pos].isspace():
            pos += 1
        if len(text[pos:end].strip()) <= chunk_size:
            return pos
        pos += 1  # too long (a long whitespace gap): drop the first word and retry
    return start


def split_pages(
    pages: list[tuple[str, dict[str, Any]]],
    *,
    content_type: str,
    chunk_size: int = 1000,
    overlap: int = 100,
) -> list[Chunk]:
    """Split each page separately (no chunk spans two pages; no overlap across pages).

    Each chunk carries a copy of its page's metadata (e.g. ``{"page": 3}``); indices run 0, 1, 2, …
    across all pages."""
    chunks: list[Chunk] = []
    for text, metadata in pages:
        for piece in split_text(text, content_type=content_type, chunk_size=chunk_size, overlap=overlap):
            chunks.append(Chunk(index=len(chunks), text=piece, metadata=dict(metadata)))
    return chunks
