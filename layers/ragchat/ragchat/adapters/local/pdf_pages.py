"""PDF pages rendered with PDFium (``pypdfium2``, the engine of Chromium's PDF viewer), in process.

Imported only where a page is shown (``DocumentService.page_image``): ``pypdfium2`` loads a 9 MB
native library (~50 ms), which no other request needs. Only READY documents get here: their bytes
went through the ingestion's parser first. PDFium is not thread-safe: one render at a time.
"""

from __future__ import annotations

import threading

from ragchat.domain.errors import NotFound, ValidationError
from ragchat.domain.page_images import MAX_HEIGHT, PageImage, png

_LOCK = threading.Lock()


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
