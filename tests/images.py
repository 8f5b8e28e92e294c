"""Pictures of text made in the tests (no binary fixtures in git): a PDF page with Helvetica text
(:func:`tests.pdfs.make_pdf`) rendered by PDFium, written as PNG (or re-wrapped as another format)."""

from __future__ import annotations

import struct
import zlib
from typing import Any

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


def _gray_page(lines: list[str], width: int) -> tuple[int, int, bytes]:
    """(width, height, 8-bit grey rows) of ``lines`` printed on a page."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(make_pdf(["\n".join(lines)]))
    page = doc[0]
    bitmap = page.render(scale=width / page.get_size()[0], grayscale=True)
    w, h, stride = bitmap.width, bitmap.height, bitmap.stride
    buf = bytes(bitmap.buffer)
    per = stride // w  # bytes per pixel of the rendered bitmap
    rows = b"".join(buf[y * stride : y * stride + w * per : per] for y in range(h))
    bitmap.close()
    page.close()
    doc.close()
    return w, h, rows


def text_tiff(pages: list[list[str]], width: int = 1700) -> bytes:
    """An uncompressed, 8-bit grey, little-endian TIFF with one page per item of ``pages``."""
    out = bytearray(b"II*\x00\x00\x00\x00\x00")
    previous_next = 4  # where the offset of the next directory is written
    for lines in pages:
        w, h, rows = _gray_page(lines, width)
        strip = len(out)
        out += rows
        if len(out) % 2:
            out += b"\x00"
        entries = [
            (256, 4, 1, w),  # ImageWidth
            (257, 4, 1, h),  # ImageLength
            (258, 3, 1, 8),  # BitsPerSample
            (259, 3, 1, 1),  # Compression: none
            (262, 3, 1, 1),  # PhotometricInterpretation: black is zero
            (273, 4, 1, strip),  # StripOffsets
            (277, 3, 1, 1),  # SamplesPerPixel
            (278, 4, 1, h),  # RowsPerStrip
            (279, 4, 1, len(rows)),  # StripByteCounts
        ]
        ifd = len(out)
        struct.pack_into("<I", out, previous_next, ifd)
        out += struct.pack("<H", len(entries))
        for tag, kind, count, value in entries:
            out += struct.pack("<HHI", tag, kind, count) + (
                struct.pack("<HH", value, 0) if kind == 3 else struct.pack("<I", value)
            )
        previous_next = len(out)
        out += b"\x00\x00\x00\x00"
    return bytes(out)


def jpeg_header(width: int, height: int) -> bytes:
    """The start of a JPEG: SOI, an APP0 (JFIF) segment, then a baseline start of frame declaring
    ``width`` × ``height``."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def webp_lossless_header(width: int, height: int) -> bytes:
    """A RIFF/WEBP file whose ``VP8L`` chunk declares ``width`` × ``height``."""
    bits = (width - 1) | ((height - 1) << 14)
    chunk = b"\x2f" + bits.to_bytes(4, "little") + b"\x00" * 8
    body = b"WEBP" + b"VP8L" + struct.pack("<I", len(chunk)) + chunk
    return b"RIFF" + struct.pack("<I", len(body)) + body


def tiff_of_pages(count: int, width: int = 10, height: int = 10) -> bytes:
    """A TIFF header with ``count`` directories of ``width`` × ``height`` (no pixel data)."""
    out = bytearray(b"II*\x00\x08\x00\x00\x00")
    for i in range(count):
        out += struct.pack("<H", 2)
        out += struct.pack("<HHII", 256, 4, 1, width) + struct.pack("<HHII", 257, 4, 1, height)
        out += struct.pack("<I", len(out) + 4 if i < count - 1 else 0)
    return bytes(out)


# Amazon Textract's DetectDocumentText answer for a picture of text (its real response shape)


def _box(top: float, height: float = 0.02, left: float = 0.1, width: float = 0.6) -> dict[str, Any]:
    return {
        "BoundingBox": {"Width": width, "Height": height, "Left": left, "Top": top},
        "Polygon": [
            {"X": left, "Y": top},
            {"X": left + width, "Y": top},
            {"X": left + width, "Y": top + height},
            {"X": left, "Y": top + height},
        ],
    }


def textract_detected(lines: list[tuple[str, float]]) -> dict[str, Any]:
    """A ``DetectDocumentText`` response: a PAGE, then each LINE (text, top) with its WORDs."""
    blocks: list[dict[str, Any]] = []
    line_ids = []
    for n, (text, top) in enumerate(lines):
        word_ids = [f"w{n}-{k}" for k in range(len(text.split()))]
        line_ids.append(f"l{n}")
        blocks.append(
            {
                "BlockType": "LINE",
                "Confidence": 99.1,
                "Text": text,
                "Geometry": _box(top),
                "Id": f"l{n}",
                "Relationships": [{"Type": "CHILD", "Ids": word_ids}],
            }
        )
        blocks += [
            {
                "BlockType": "WORD",
                "Confidence": 98.7,
                "Text": word,
                "TextType": "PRINTED",
                "Geometry": _box(top, left=0.1 + 0.1 * k, width=0.08),
                "Id": word_ids[k],
            }
            for k, word in enumerate(text.split())
        ]
    page = {
        "BlockType": "PAGE",
        "Geometry": _box(0.0, 1.0, 0.0, 1.0),
        "Id": "page-1",
        "Relationships": [{"Type": "CHILD", "Ids": line_ids}],
    }
    return {
        "DocumentMetadata": {"Pages": 1},
        "Blocks": [page, *blocks],
        "DetectDocumentTextModelVersion": "1.0",
        "ResponseMetadata": {"HTTPStatusCode": 200},
    }


def scanned_pdf(pages: list[list[str]], width: int = 1275) -> bytes:
    """A PDF whose pages are pictures of ``pages``' lines and hold no text layer (a scan): each a
    grey image drawn over the whole letter-size page."""
    from tests.pdfs import pdf_of

    n = len(pages)
    kids = " ".join(f"{3 + 3 * i} 0 R" for i in range(n))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode()]
    for i, lines in enumerate(pages):
        w, h, rows = _gray_page(lines, width)
        packed = zlib.compress(rows)
        draw = b"q 612 0 0 792 0 0 cm /Im0 Do Q"
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /XObject << /Im0 %d 0 R >> >> /Contents %d 0 R >>" % (5 + 3 * i, 4 + 3 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(draw), draw))
        objects.append(
            b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
            b"/BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream"
            % (w, h, len(packed), packed)
        )
    return pdf_of(objects)
