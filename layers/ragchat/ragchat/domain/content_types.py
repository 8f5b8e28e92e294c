"""The content types ragchat reads (one definition; :mod:`ragchat.domain.extraction` maps file
extensions to them, :mod:`ragchat.domain.office` and :mod:`ragchat.domain.rtf` read the newer ones)."""

from __future__ import annotations

TEXT = "text/plain"
MARKDOWN = "text/markdown"
HTML = "text/html"
PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
ODT = "application/vnd.oasis.opendocument.text"
EPUB = "application/epub+zip"
RTF = "application/rtf"
PNG = "image/png"
JPEG = "image/jpeg"
TIFF = "image/tiff"
WEBP = "image/webp"

# Pictures whose text is read by OCR (:mod:`ragchat.domain.images`; an engine behind the
# ``TextRecognizer`` port: Tesseract locally).
IMAGE_TYPES = frozenset({PNG, JPEG, TIFF, WEBP})

# Read from a zip of XML parts (:mod:`ragchat.domain.office`).
OFFICE_TYPES = frozenset({DOCX, PPTX, XLSX, ODT, EPUB})
# Types whose bytes are not their text: the split step keeps their extracted text (what
# ``GET /documents/{id}?include=body`` and the citation panel show).
EXTRACTED_TYPES = frozenset({PDF, HTML, *OFFICE_TYPES, RTF, *IMAGE_TYPES})
# Types whose extracted text is Markdown-like (headings, lists, tables): split Markdown-aware.
MARKDOWN_TEXT_TYPES = frozenset({MARKDOWN, *OFFICE_TYPES, RTF})
