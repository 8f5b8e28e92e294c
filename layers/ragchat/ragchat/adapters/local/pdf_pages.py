"""PDF pages rendered with PDFium (``pypdfium2``, the engine of Chromium's PDF viewer).

Imported only where a page is shown (``DocumentService.page_image``): ``pypdfium2`` loads a 9 MB
native library (~50 ms), which no other request needs. PDFium is not thread-safe: one render at a
time. ``ragchat serve`` renders in a child process under the ``PARSE_*`` limits
(:class:`ProcessPages`, as uploads are read: a PDF that is slow or greedy to draw cannot hold the
server or grow its memory); a Lambda renders in its own process (:class:`PdfiumPages`), bounded by
its timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ragchat.domain.errors import NotFound, ValidationError
from ragchat.domain.extraction import ExtractionError
from ragchat.domain.page_images import MAX_HEIGHT, PageImage, png
from ragchat.domain.scanned import PDFIUM_LOCK

if TYPE_CHECKING:
    from ragchat.adapters.local.parse_process import ProcessParser

#: what the child runs: (the PDF's bytes, (page, width)) -> the page's image
Render = Callable[[bytes, tuple[int, int]], PageImage]

_LOCK = PDFIUM_LOCK  # one lock for PDFium in the process (scanned pages are rendered with it too)


class PdfiumPages:
    """:class:`ragchat.ports.PageRenderer` with PDFium."""

    def render(self, pdf: bytes, page: int, width: int) -> PageImage:
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
                )
                bitmap.close()
                pdf_page.close()
                return out
            finally:
                doc.close()


def render_page(pdf: bytes, job: tuple[int, int]) -> PageImage:
    """One page, in the child process (importable by name for ``spawn``)."""
    page, width = job
    return PdfiumPages().render(pdf, page, width)


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

    def render(self, pdf: bytes, page: int, width: int) -> PageImage:
        try:
            image = self.child.call(lambda: pdf, (page, width))
        except ExtractionError as exc:  # over a limit, or no readable PDF: the reason as it is
            raise ValidationError(exc.message) from None
        assert isinstance(image, PageImage)
        return image

    def close(self) -> None:
        self.child.close()
