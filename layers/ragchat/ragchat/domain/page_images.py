"""A PDF page as the reader sees it (issue 33: "a document viewer (text, and PDF pages)").

The viewer shows the cited page's image with the page's text below it (the cited sentences
highlighted, findable and selectable). The image is rendered on the server from the stored original
(:class:`ragchat.ports.PageRenderer`) as a PNG no wider than ``PAGE_WIDTH`` pixels.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

#: pixels across a rendered page: the side panel is 28rem (448 CSS px) wide, so this is sharp on a
#: 2x screen; a text page is ~100-250 kB as PNG
PAGE_WIDTH = 900
#: a page whose PNG is larger than this (a full-page photograph) is rendered at half the width, then a
#: quarter: a Lambda response is at most 6 MB and base64 adds a third
MAX_PNG_BYTES = 3_000_000
#: a page far taller than wide (a receipt, a poster strip) is rendered smaller, so its image stays bounded
MAX_HEIGHT = 4 * PAGE_WIDTH


@dataclass(frozen=True)
class PageImage:
    page: int  # 1-based
    pages: int  # the document's page count
    width: int
    height: int
    png: bytes  # the image's bytes: a PNG, or for a picture its own format (``mime``)
    mime: str = "image/png"


def png(width: int, height: int, rgb: bytes, stride: int) -> bytes:
    """A PNG of 8-bit RGB rows (``stride`` bytes apart in ``rgb``), written with the standard library."""
    row = width * 3
    raw = b"".join(b"\x00" + rgb[y * stride : y * stride + row] for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def gray_png(width: int, height: int, gray: bytes, stride: int) -> bytes:
    """A PNG of 8-bit grey rows (``stride`` bytes apart in ``gray``): a scanned page for OCR."""
    raw = b"".join(b"\x00" + gray[y * stride : y * stride + width] for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body
