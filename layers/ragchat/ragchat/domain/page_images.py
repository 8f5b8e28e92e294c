"""A PDF page as the reader sees it (issue 33: "a document viewer (text, and PDF pages)").

The viewer shows the cited page's image with the page's text below it (the cited sentences
highlighted, findable and selectable). The image is rendered on the server from the stored original
(:class:`ragchat.ports.PageRenderer`) as a PNG no wider than ``PAGE_WIDTH`` pixels, with boxes over the
passages the viewer asks for (the cited sentences, the answer's span): found in the page's own text
by their words (:func:`find_passages`) and placed where PDFium drew those characters (issue 45: "no
highlight on the image").
"""

from __future__ import annotations

import re
import struct
import unicodedata
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

#: pixels across a rendered page: the side panel is 28rem (448 CSS px) wide, so this is sharp on a
#: 2x screen; a text page is ~100-250 kB as PNG
PAGE_WIDTH = 900
#: a page whose PNG is larger than this (a full-page photograph) is rendered at half the width, then a
#: quarter: a Lambda response is at most 6 MB and base64 adds a third
MAX_PNG_BYTES = 3_000_000
#: a page far taller than wide (a receipt, a poster strip) is rendered smaller, so its image stays bounded
MAX_HEIGHT = 4 * PAGE_WIDTH


#: at most this many passages are looked for on a page, this many characters in all (a URL's query)
MAX_FIND = 8
MAX_FIND_CHARS = 2000
#: at most this many boxes are drawn on a page (a passage runs over a few lines)
MAX_MARKS = 48


@dataclass(frozen=True)
class Mark:
    """A box over text on the page image, in fractions of the image (0..1, from its top left)."""

    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class PageImage:
    page: int  # 1-based
    pages: int  # the document's page count
    width: int
    height: int
    png: bytes  # the image's bytes: a PNG, or for a picture its own format (``mime``)
    marks: tuple[Mark, ...] = ()  # boxes over the passages asked for (``find``), in reading order
    mime: str = "image/png"


def _folded(text: str) -> tuple[str, list[int]]:
    """``text`` as lower-case letters and digits, every run of anything else one space, and for each
    character kept the index in ``text`` it came from: the page's text (PDFium's, with its line
    breaks, ligatures and hyphens) and a passage (from the extracted text, as the viewer shows it)
    then compare by their words alone."""
    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKC", ch).lower():
            if c.isalnum():
                out.append(c)
                where.append(i)
            elif out and out[-1] != " ":
                out.append(" ")
                where.append(i)
    return "".join(out), where


def find_passages(page_text: str, wanted: Sequence[str]) -> list[tuple[int, int]]:
    """Where each passage of ``wanted`` stands in ``page_text``, as ``(first, last)`` character indices
    (inclusive), in page order; a passage not found whole is looked for by its longest pieces (its
    sentences, its clauses) of at least three words. Passages are compared by their words (case,
    punctuation and line breaks aside)."""
    hay, where = _folded(page_text)
    found: list[tuple[int, int]] = []
    for passage in list(wanted)[:MAX_FIND]:
        needle = _folded(passage[:MAX_FIND_CHARS])[0].strip()
        parts = (_folded(x)[0].strip() for x in re.split(r"[.;:!?]\s+", passage))
        pieces = [needle, *sorted((p for p in parts if p.count(" ") >= 2), key=len, reverse=True)]
        for piece in pieces:
            at = _word_find(hay, piece) if len(piece) >= 3 else -1
            if at >= 0:
                found.append((where[at], where[at + len(piece) - 1]))
                break
    return sorted(set(found))


def _word_find(hay: str, needle: str) -> int:
    """The first place ``needle`` stands in ``hay`` on word boundaries, else -1."""
    start = 0
    while (at := hay.find(needle, start)) >= 0:
        end = at + len(needle)
        if (at == 0 or hay[at - 1] == " ") and (end == len(hay) or hay[end] == " "):
            return at
        start = at + 1
    return -1


def png(width: int, height: int, rgb: bytes, stride: int) -> bytes:
    """A PNG of 8-bit RGB rows (``stride`` bytes apart in ``rgb``), written with the standard library."""
    return _png(width, height, rgb, stride, channels=3, level=6)


def gray_png(width: int, height: int, gray: bytes, stride: int) -> bytes:
    """A PNG of 8-bit grey rows (``stride`` bytes apart in ``gray``): a scanned page for OCR."""
    return _png(width, height, gray, stride, channels=1, level=1)


def _png(width: int, height: int, pixels: bytes, stride: int, *, channels: int, level: int) -> bytes:
    """A PNG of 8-bit rows of ``channels`` (1: grey, 3: RGB), compressed at zlib ``level``."""
    row = width * channels
    raw = b"".join(b"\x00" + pixels[y * stride : y * stride + row] for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    colour = 2 if channels == 3 else 0  # PNG colour types: 2 truecolour, 0 greyscale
    header = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, level)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body
