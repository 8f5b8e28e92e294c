"""Pictures of text made in the tests (no binary fixtures in git): a PDF page with Helvetica text
(:func:`tests.pdfs.make_pdf`) rendered by PDFium, written as PNG (or re-wrapped as another format)."""

from __future__ import annotations

import struct
import zlib

from tests.pdfs import make_pdf


def text_png(lines: list[str], width: int = 1700) -> bytes:
    """A PNG of ``lines`` (``""``: a blank line, a paragraph break) as a printed page, ~200 dpi."""
    from ragchat.adapters.local.pdf_pages import PdfiumPages

    return PdfiumPages().render(make_pdf(["\n".join(lines)]), 1, width).png


def png_header(width: int, height: int) -> bytes:
    """A PNG's signature and ``IHDR`` declaring ``width`` × ``height`` (what an image bomb shows),
    followed by one tiny compressed row and the end: a few dozen bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00"))
        + chunk(b"IEND", b"")
    )
