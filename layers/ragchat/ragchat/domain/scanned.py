"""Scanned PDFs (issue 45): a PDF with no text layer on any page is read by OCR, page by page.

Each page is rendered with PDFium (``pypdfium2``, already what the document viewer draws pages with)
as an 8-bit grey PNG at :data:`OCR_DPI` (at most :data:`MAX_SIDE` pixels on a side and the
the most pixels of a picture: a page of a huge media box is drawn smaller, never decoded huge),
then handed to the OCR engine like an uploaded picture. A PDF with text on some pages keeps its text
layer as it is (its textless pages are usually blank, or figures). The CPU budget is checked between
pages. Pure computation (a parsing library, imported when used); no I/O.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ragchat.domain.content_types import PNG
from ragchat.domain.errors import ExtractionError

if TYPE_CHECKING:
    from ragchat.domain.images import TextRecognizer
    from ragchat.domain.read_budget import CpuBudget, Page

#: PDFium is not thread-safe: every use of it in a process holds this lock (the viewer's renderer too)
PDFIUM_LOCK = threading.Lock()
#: the resolution a scanned page is drawn at for OCR (Tesseract reads best from about 200-300 dpi)
OCR_DPI = 200
#: the most pixels on a side (Amazon Textract's limit for a synchronous call)
MAX_SIDE = 10_000


def scanned_pages(data: bytes, budget: CpuBudget, ocr: TextRecognizer, max_pixels: int) -> list[Page]:
    """The text of each page of a PDF by OCR: ``(text, {"page": n, "ocr": engine})``, blank pages
    left out."""
    from ragchat.domain.images import ocr_pages, read_by_ocr

    pages: list[Page] = []
    for number, picture in _rendered(data, budget, max_pixels):
        texts = read_by_ocr(ocr, picture, PNG, budget)
        budget.check(f"OCR of PDF page {number}")
        for text, meta in ocr_pages(texts, ocr.engine):
            budget.text(len(text))
            if text:
                pages.append((text, {**meta, "page": number}))
    return pages


def _rendered(data: bytes, budget: CpuBudget, max_pixels: int) -> Any:
    """(page number, grey PNG) of each page, lazily."""
    import pypdfium2 as pdfium

    from ragchat.domain.page_images import gray_png

    with PDFIUM_LOCK:
        try:
            doc = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as err:
            raise ExtractionError(f"Could not read PDF: {err}.") from None
        count = len(doc)
    try:
        for index in range(count):
            budget.check(f"PDF page {index + 1}")
            with PDFIUM_LOCK:
                page = doc[index]
                width, height = page.get_size()  # points (1/72 inch)
                scale = OCR_DPI / 72
                if width > 0 and height > 0:
                    scale = min(scale, MAX_SIDE / width, MAX_SIDE / height)
                    if max_pixels:
                        scale = min(scale, (max_pixels / (width * height)) ** 0.5)
                bitmap = page.render(scale=scale, force_bitmap_format=pdfium.raw.FPDFBitmap_Gray)
                picture = gray_png(bitmap.width, bitmap.height, bytes(bitmap.buffer), bitmap.stride)
                bitmap.close()
                page.close()
            yield index + 1, picture
    finally:
        with PDFIUM_LOCK:
            doc.close()
