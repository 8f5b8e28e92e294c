"""PDF pages rendered with PDFium (``pypdfium2``, the engine of Chromium's PDF viewer).

Imported only where a page is shown (``DocumentService.page_image``): ``pypdfium2`` loads a 9 MB
native library (~50 ms), which no other request needs. PDFium is not thread-safe: one render at a
time. ``ragchat serve`` renders in a child process under the ``PARSE_*`` limits
(:class:`ProcessPages`, as uploads are read: a PDF that is slow or greedy to draw cannot hold the
server or grow its memory); a Lambda renders in its own process (:class:`PdfiumPages`), bounded by
its timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ragchat.domain.errors import NotFound, ValidationError
from ragchat.domain.extraction import ExtractionError
from ragchat.domain.page_images import MAX_HEIGHT, MAX_MARKS, Mark, PageImage, find_passages, png
from ragchat.domain.scanned import PDFIUM_LOCK

if TYPE_CHECKING:
    from ragchat.adapters.local.parse_process import ProcessParser

#: what the child runs: (the PDF's bytes, (page, width, passages to mark)) -> the page's image
Render = Callable[[bytes, tuple[int, int, tuple[str, ...]]], PageImage]

_LOCK = PDFIUM_LOCK  # one lock for PDFium in the process (scanned pages are rendered with it too)


class PdfiumPages:
    """:class:`ragchat.ports.PageRenderer` with PDFium."""

    def render(self, pdf: bytes, page: int, width: int, find: Sequence[str] = ()) -> PageImage:
        import pypdfium2 as pdfium

        with _LOCK:
            try:
                doc = pdfium.PdfDocument(pdf)
            except pdfium.PdfiumError as err:
                raise ValidationError(f"This PDF cannot be shown: {err}") from None
            try:
                count = len(doc)
                if not 1 <= page <= count:
                    raise NotFound(f"Page {page} not found: the document has {count} page(s)")
                pdf_page = doc[page - 1]
                w, h = pdf_page.get_size()
                scale = min(width / w, MAX_HEIGHT / h) if w > 0 and h > 0 else 1.0
                bitmap = pdf_page.render(
                    scale=scale, rev_byteorder=True, force_bitmap_format=pdfium.raw.FPDFBitmap_BGR
                )
                out = PageImage(
                    page=page,
                    pages=count,
                    width=bitmap.width,
                    height=bitmap.height,
                    png=png(bitmap.width, bitmap.height, bytes(bitmap.buffer), bitmap.stride),
                    marks=marks_on(pdf_page, find) if find else (),
                )
                bitmap.close()
                pdf_page.close()
                return out
            finally:
                doc.close()


#: device units per page side for PDFium's page-to-image mapping (fractions to 1e-6)
_SCALE = 1_000_000


def marks_on(pdf_page: Any, find: Sequence[str]) -> tuple[Mark, ...]:
    """Boxes over the passages ``find`` on ``pdf_page``: found in the page's text by their words
    (:func:`ragchat.domain.page_images.find_passages`), each character range's line boxes taken
    from PDFium (``FPDFText_CountRects``) and mapped the way the page is drawn (crop box and
    rotation: ``FPDF_PageToDevice``), as fractions of the image."""
    import ctypes

    import pypdfium2.raw as raw

    text_page = pdf_page.get_textpage()
    try:
        count = text_page.count_chars()
        text = "".join(chr(raw.FPDFText_GetUnicode(text_page.raw, i)) for i in range(count))
        marks: list[Mark] = []
        for first, last in find_passages(text, find):
            for i in range(text_page.count_rects(first, last - first + 1)):
                left, bottom, right, top = text_page.get_rect(i)
                corners = []
                for px, py in ((left, top), (right, bottom)):
                    dx, dy = ctypes.c_int(), ctypes.c_int()
                    raw.FPDF_PageToDevice(
                        pdf_page.raw, 0, 0, _SCALE, _SCALE, 0, px, py, ctypes.byref(dx), ctypes.byref(dy)
                    )
                    corners.append((dx.value / _SCALE, dy.value / _SCALE))
                (x0, y0), (x1, y1) = corners
                box = Mark(
                    x=round(max(0.0, min(x0, x1)), 4),
                    y=round(max(0.0, min(y0, y1)), 4),
                    width=round(abs(x1 - x0), 4),
                    height=round(abs(y1 - y0), 4),
                )
                if box.width > 0 and box.height > 0 and len(marks) < MAX_MARKS:
                    marks.append(box)
        return tuple(marks)
    finally:
        text_page.close()


def render_page(pdf: bytes, job: tuple[int, int] | tuple[int, int, tuple[str, ...]]) -> PageImage:
    """One page, in the child process (importable by name for ``spawn``)."""
    page, width, *rest = job
    return PdfiumPages().render(pdf, page, width, rest[0] if rest else ())


class ProcessPages:
    """:class:`ragchat.ports.PageRenderer` in a warm child process under CPU, memory and wall-clock
    limits (:class:`ragchat.adapters.local.parse_process.ProcessParser`, a child of its own: a
    render never waits behind an upload being read). Started with the first page shown."""

    def __init__(
        self, *, cpu_seconds: float, memory_bytes: int, wall_seconds: float, render: Render = render_page
    ) -> None:
        from ragchat.adapters.local.parse_process import ProcessParser

        self.child: ProcessParser = ProcessParser(
            cpu_seconds=cpu_seconds, memory_bytes=memory_bytes, wall_seconds=wall_seconds, parse=render
        )

    def render(self, pdf: bytes, page: int, width: int, find: Sequence[str] = ()) -> PageImage:
        try:
            image = self.child.call(lambda: pdf, (page, width, tuple(find)))
        except ExtractionError as exc:  # over a limit, or no readable PDF: the reason as it is
            raise ValidationError(exc.message) from None
        assert isinstance(image, PageImage)
        return image

    def close(self) -> None:
        self.child.close()
