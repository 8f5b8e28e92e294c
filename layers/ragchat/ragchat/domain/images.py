"""Pictures read by OCR (issue 45): what an image is, checked from its header before any engine
decodes it.

An image bomb is a small file that decodes to a huge bitmap (a 50 kB PNG of one colour can declare
30,000 × 30,000 pixels: 3.6 GB decoded). Its size is in the header, so it is refused before OCR:
the format is sniffed from the bytes (not the name), the width and height of every frame are read
(PNG's ``IHDR``, JPEG's start-of-frame marker, TIFF's image file directories, WebP's ``VP8``/
``VP8L``/``VP8X`` chunk), and a frame over ``max_pixels`` or a TIFF of more than
:data:`MAX_IMAGE_PAGES` pages is refused with the numbers. Pure Python, linear in the bytes read; no
I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ragchat.domain.content_types import JPEG, PNG, TIFF, WEBP
from ragchat.domain.errors import ExtractionError
from ragchat.domain.file_errors import too_slow_to_read

if TYPE_CHECKING:
    from ragchat.domain.read_budget import CpuBudget

#: the most pages (TIFF frames) one image may hold
MAX_IMAGE_PAGES = 100
#: the most pixels of one page (an A4 page at 600 dpi is 35 megapixels): an image bomb's are refused
MAX_IMAGE_PIXELS = 50_000_000
#: the largest picture file (413 above it)
MAX_IMAGE_BYTES = 20 * 1024 * 1024
#: the most JPEG segments looked through for the start of frame (a real file has a dozen)
_MAX_JPEG_SEGMENTS = 10_000

_NAMES = {PNG: "PNG", JPEG: "JPEG", TIFF: "TIFF", WEBP: "WebP"}
UNREADABLE = "This is not a readable PNG, JPEG, TIFF or WebP image"
# A picture or a scan where no OCR engine is configured (``OCR=off``).
NO_OCR = (
    "OCR (reading pictures and scanned pages) is off here (OCR=off): "
    "add the text itself, or a PDF with a text layer."
)
# An OCR engine read the picture and found nothing.
NO_TEXT_IN_IMAGE = (
    "OCR found no text in the picture. Text reads best straight, sharp and at about 300 dpi; "
    "or add the text itself."
)


def scanned_unread(reason: str) -> str:
    """The refusal of a PDF with no text layer where OCR cannot run (``reason``: why not)."""
    return f"The PDF has no extractable text: it may be scanned pages, which are read by OCR. {reason}"


class OcrTooSlow(ExtractionError):
    """The OCR engine was stopped at the time it was given: the reading says which CPU budget
    (``PARSE_CPU_SECONDS``) the document ran past."""


@runtime_checkable
class TextRecognizer(Protocol):
    """The OCR port (``ragchat.ports`` re-exports it; defined here, beside what it reads, because the
    parsing that calls it is domain code): the text of a picture (PNG, JPEG, TIFF, WebP), read where
    documents are read. Tesseract locally, Amazon Textract on AWS."""

    engine: str  # recorded in each chunk's metadata (``{"ocr": "tesseract"}``)

    def missing(self) -> str | None:
        """Why pictures cannot be read here (the engine is not installed: what to install), or
        ``None`` when they can. Asked before a picture is accepted (a 400, nothing stored)."""
        ...

    def refuses(self, image: ImageInfo, size: int) -> str | None:
        """Why this engine cannot read this picture (a format, page count, size in bytes or pixels
        past what it takes: Amazon Textract's synchronous limits), or ``None``. Asked before a
        picture is accepted, after its header was read."""
        ...

    def read(self, image: bytes, content_type: str, seconds: float) -> list[str]:
        """The text of each page of ``image`` (a line of the picture per line, a blank line between
        paragraphs), in at most ``seconds`` of wall-clock time; ``ExtractionError`` naming the
        problem (unreadable; :class:`OcrTooSlow`) otherwise."""
        ...


class NoOcr:
    """The ``TextRecognizer`` where pictures cannot be read (``OCR=off``, no engine in this
    deployment): every picture is refused with ``reason`` before anything is stored."""

    engine = "none"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def missing(self) -> str | None:
        return self.reason

    def refuses(self, image: ImageInfo, size: int) -> str | None:
        return self.reason

    def read(self, image: bytes, content_type: str, seconds: float) -> list[str]:
        raise ExtractionError(self.reason)


@dataclass(frozen=True, slots=True)
class ImageInfo:
    content_type: str  # what the bytes are (sniffed), whatever the file was called
    frames: tuple[tuple[int, int], ...]  # (width, height) of each page

    @property
    def pixels(self) -> int:
        return max(w * h for w, h in self.frames)


def sniff(data: bytes) -> str | None:
    """The image type these bytes start like (``None``: none of PNG, JPEG, TIFF, WebP)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if data.startswith(b"\xff\xd8\xff"):
        return JPEG
    if data[:4] in (b"II*\x00", b"MM\x00*"):
        return TIFF
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return WEBP
    return None


def image_info(data: bytes) -> ImageInfo:
    """The type and frame sizes of an image, from its header; ``ExtractionError`` (a 400) when the
    bytes are not one of the four formats or their header is cut short or damaged."""
    ctype = sniff(data)
    if ctype is None:
        raise ExtractionError(f"{UNREADABLE} (its first bytes are not an image header).")
    try:
        frames = _READERS[ctype](data)
    except (struct.error, IndexError, ValueError):
        frames = []
    if not frames or any(w <= 0 or h <= 0 for w, h in frames):
        raise ExtractionError(f"{UNREADABLE}: its {_NAMES[ctype]} header is damaged or cut short.")
    return ImageInfo(ctype, tuple(frames))


def check_image(data: bytes, max_pixels: int = MAX_IMAGE_PIXELS) -> ImageInfo:
    """:func:`image_info`, refusing an image bomb: a page over ``max_pixels`` or more than
    :data:`MAX_IMAGE_PAGES` pages."""
    info = image_info(data)
    if len(info.frames) > MAX_IMAGE_PAGES:
        raise ExtractionError(
            f"The image holds more than {MAX_IMAGE_PAGES} pages (at most {MAX_IMAGE_PAGES} are read): "
            "split it into smaller files."
        )
    for w, h in info.frames:
        if max_pixels and w * h > max_pixels:
            raise ExtractionError(
                f"The image is {w} × {h} pixels ({w * h / 1e6:.1f} megapixels): at most "
                f"{max_pixels / 1e6:.1f} megapixels are read, so that a small file cannot decode to a huge "
                "picture. Scale it down (300 dpi is plenty for text) and upload it again."
            )
    return info


def _png(data: bytes) -> list[tuple[int, int]]:
    if data[12:16] != b"IHDR":
        return []
    w, h = struct.unpack(">II", data[16:24])
    return [(w, h)]


# Start-of-frame markers (baseline, progressive, lossless, arithmetic): not DHT (C4), JPG (C8), DAC (CC)
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg(data: bytes) -> list[tuple[int, int]]:
    at = 2
    for _ in range(_MAX_JPEG_SEGMENTS):
        while at < len(data) and data[at] == 0xFF and at + 1 < len(data) and data[at + 1] == 0xFF:
            at += 1  # fill bytes
        if at + 4 > len(data) or data[at] != 0xFF:
            return []
        marker = data[at + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            at += 2
            continue
        length = struct.unpack(">H", data[at + 2 : at + 4])[0]
        if marker in _SOF:
            h, w = struct.unpack(">HH", data[at + 5 : at + 9])
            return [(w, h)]
        if marker == 0xD9 or length < 2:  # end of image, or a damaged length
            return []
        at += 2 + length
    return []


def _tiff(data: bytes) -> list[tuple[int, int]]:
    order = "<" if data[:2] == b"II" else ">"
    (offset,) = struct.unpack(order + "I", data[4:8])
    frames: list[tuple[int, int]] = []
    seen: set[int] = set()
    while offset and offset not in seen and len(frames) <= MAX_IMAGE_PAGES:
        seen.add(offset)
        (count,) = struct.unpack(order + "H", data[offset : offset + 2])
        size: dict[int, int] = {}
        for i in range(count):
            entry = data[offset + 2 + 12 * i : offset + 14 + 12 * i]
            tag, kind = struct.unpack(order + "HH", entry[:4])
            if tag in (256, 257):  # ImageWidth, ImageLength: a SHORT or a LONG
                fmt = "H" if kind == 3 else "I"
                size[tag] = struct.unpack(order + fmt, entry[8 : 10 if kind == 3 else 12])[0]
        if 256 not in size or 257 not in size:
            return []
        frames.append((size[256], size[257]))
        (offset,) = struct.unpack(order + "I", data[offset + 2 + 12 * count : offset + 6 + 12 * count])
    return frames


def _webp(data: bytes) -> list[tuple[int, int]]:
    kind, chunk = data[12:16], data[20:30]
    if kind == b"VP8 ":  # lossy: a 3-byte frame tag, the start code, then 14-bit sizes
        if chunk[3:6] != b"\x9d\x01\x2a":
            return []
        w, h = struct.unpack("<HH", chunk[6:10])
        return [(w & 0x3FFF, h & 0x3FFF)]
    if kind == b"VP8L":  # lossless: a signature byte, then width-1 and height-1 in 14 bits each
        if chunk[0] != 0x2F:
            return []
        bits = int.from_bytes(chunk[1:5], "little")
        return [((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)]
    if kind == b"VP8X":  # extended: canvas width-1 and height-1 in 24 bits each
        w = int.from_bytes(chunk[4:7], "little") + 1
        h = int.from_bytes(chunk[7:10], "little") + 1
        return [(w, h)]
    return []


_READERS = {PNG: _png, JPEG: _jpeg, TIFF: _tiff, WEBP: _webp}


def ocr_pages(texts: list[str], engine: str) -> list[tuple[str, dict[str, Any]]]:
    """The pages of an OCR'd picture: each page's text with trailing spaces and runs of blank lines
    tidied (a line is a line of the picture, a blank line between paragraphs), its metadata
    ``{"ocr": engine}`` and, for a picture of several pages, ``"page": n``."""
    pages: list[tuple[str, dict[str, Any]]] = []
    for number, text in enumerate(texts, start=1):
        lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\x0c", "\n").split("\n")]
        tidy = "\n".join(lines)
        while "\n\n\n" in tidy:
            tidy = tidy.replace("\n\n\n", "\n\n")
        meta: dict[str, Any] = {"ocr": engine}
        if len(texts) > 1:
            meta["page"] = number
        pages.append((tidy.strip(), meta))
    return pages


def read_by_ocr(ocr: TextRecognizer, image: bytes, content_type: str, budget: CpuBudget) -> list[str]:
    """``ocr.read`` given the budget's time left, its wall-clock time then charged to the budget
    (the engine works in another process, whose CPU this thread's clock does not see); stopped at
    it, the refusal names the document's whole CPU budget (as any reading over it does)."""
    started = budget.wall()
    try:
        return ocr.read(image, content_type, max(1.0, budget.left()))
    except OcrTooSlow:
        raise ExtractionError(too_slow_to_read(budget.seconds)) from None
    finally:  # the engine's time (its own process, or a service) counts against the document's budget
        budget.elsewhere += budget.wall() - started


def image_pages(
    data: bytes, budget: CpuBudget, ocr: TextRecognizer | None, max_pixels: int = MAX_IMAGE_PIXELS
) -> list[tuple[str, dict[str, Any]]]:
    """A picture's text by OCR, once its header shows it is no image bomb (a page over
    ``max_pixels``); the engine gets the CPU time left (in wall-clock seconds: it runs elsewhere)."""
    if ocr is None:
        raise ExtractionError(NO_OCR)
    info = check_image(data, max_pixels)
    texts = read_by_ocr(ocr, data, info.content_type, budget)
    budget.check("OCR")
    return ocr_pages(texts, ocr.engine)
