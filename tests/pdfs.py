"""Small PDFs made in the tests (no binary fixtures in git)."""

from __future__ import annotations

import io

from pypdf import PdfReader, PdfWriter


def make_pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF with Helvetica text per page (``\\n`` starts a new line; "" = a blank page)."""
    n = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        lines = [ln.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for ln in text.split("\n")]
        shown = " T* ".join(f"({ln}) Tj" for ln in lines)
        stream = f"BT /F1 12 Tf 14 TL 72 720 Td {shown} ET".encode() if text else b""
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    return pdf_of(objects)


def encrypted(pdf: bytes, user_password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    writer.encrypt(user_password, owner_password="owner-secret")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def book_pdf(pages: int, lines_per_page: int = 40) -> bytes:
    """A ``pages``-page PDF of prose, ``lines_per_page`` lines of ~60 characters per page (a
    1,000-page one is ~2.8 MB: made at run time, never stored)."""
    line = "Page {p} line {n}: the committee reviewed the budget and the plan."
    return make_pdf(
        ["\n".join(line.format(p=p, n=n) for n in range(lines_per_page)) for p in range(1, pages + 1)]
    )


def form_bomb_pdf(draws: int = 64, repeats: int = 20_000) -> bytes:
    """A small PDF whose one page draws the same form ``draws`` times; the form shows a short word
    ``repeats`` times, compressed to a few bytes (issue 43: 1,454 bytes cost 21.9 s of CPU to read,
    and its text runs to millions of characters). Its size barely grows with either count."""
    import zlib

    form = zlib.compress(b"BT /F1 12 Tf 72 720 Td " + b"(ferns ) Tj " * repeats + b"ET", 9)
    page = b" ".join(b"q /Fm0 Do Q" for _ in range(draws))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 3 0 R >> /XObject << /Fm0 6 0 R >> >> /Contents 5 0 R >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(page), page),
        b"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
        b"/Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream" % (len(form), form),
    ]
    return pdf_of(objects)


def form_bomb(depth: int, fanout: int = 64) -> bytes:
    """A one-page PDF of a few KB whose text costs ``fanout ** depth`` draws to extract: the page
    draws form X0 ``fanout`` times, X0 draws X1 ``fanout`` times, ..., the last form shows a word
    (issue 43: depth 2 took pypdf 5.5 s of CPU here, depth 3 minutes)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    first = 6  # the object number of X0

    def draws(level: int) -> bytes:
        return (b"q /X%d Do Q " % level) * fanout

    page = draws(0)
    objects.append(
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> "
        b"/XObject << /X0 %d 0 R >> >> /Contents 5 0 R >>" % first
    )
    objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(page), page))
    for level in range(depth):
        if level < depth - 1:
            stream = draws(level + 1)
            resources = b"/XObject << /X%d %d 0 R >>" % (level + 1, first + level + 1)
        else:
            stream, resources = b"BT /F1 12 Tf 72 720 Td (bomb) Tj ET", b"/Font << /F1 3 0 R >>"
        objects.append(
            b"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << %s >> /Length %d >>"
            b"\nstream\n%s\nendstream" % (resources, len(stream), stream)
        )
    return pdf_of(objects)


def pdf_of(objects: list[bytes]) -> bytes:
    """A PDF file of these objects (numbered from 1; object 1 is the catalog), with its xref table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
