"""Turning an uploaded file's bytes into text pages (docs/ingestion.md).

Supported: ``text/plain`` (.txt), ``text/markdown`` (.md, .markdown), ``text/html`` (.html, .htm:
visible text only), ``application/pdf`` (.pdf: text per page, ``{"page": n}`` 1-based, empty
pages skipped), Office and e-book formats (:mod:`ragchat.domain.office`), RTF, and pictures (.png,
.jpg, .tif, .webp: read by an OCR engine, :mod:`ragchat.domain.images`). Anything else is a
``ValidationError`` naming the supported types; a file that is supported but unreadable (corrupt
or encrypted PDF, bytes that are not UTF-8 text, no text at all) is an ``ExtractionError`` (also a
400) with a message a person can act on.

Text files are decoded as UTF-8 (a UTF-8 BOM is dropped; a UTF-16 file is recognised by its BOM).
There is deliberately no guessing fallback (Latin-1 would "succeed" on any bytes and index
mojibake): undecodable bytes are rejected with the position of the first bad byte.

Parsing libraries (pypdf, selectolax) are imported inside the functions that use them.

Budgets (docs/security.md): extraction is linear in the input. HTML is parsed with element nesting
capped at :data:`MAX_HTML_DEPTH` (the HTML parser's cost grows with the square of the depth: 200,000
nested ``<div>`` took minutes); deeper tags are dropped by a linear pre-pass, their text kept. A
document may spend at most :data:`MAX_EXTRACTION_CPU_S` seconds of CPU (checked between PDF pages
and after each parsing stage); over it, :class:`ExtractionError` says so and the document FAILS
while the worker goes on with the next one.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ragchat.domain.content_types import (
    DOCX,
    EPUB,
    HTML,
    IMAGE_TYPES,
    JPEG,
    MARKDOWN,
    ODT,
    OFFICE_TYPES,
    PNG,
    PPTX,
    RTF,
    TEXT,
    TIFF,
    WEBP,
    XLSX,
)
from ragchat.domain.content_types import (
    PDF as PDF,
)
from ragchat.domain.errors import ExtractionError as ExtractionError
from ragchat.domain.errors import ValidationError
from ragchat.domain.file_errors import unsupported_type
from ragchat.domain.images import MAX_IMAGE_PIXELS, NO_OCR, NO_TEXT_IN_IMAGE, scanned_unread
from ragchat.domain.read_budget import CpuBudget, Page

if TYPE_CHECKING:
    from ragchat.domain.images import TextRecognizer


SUPPORTED_TYPES: dict[str, tuple[str, ...]] = {
    TEXT: (".txt", ".text"),
    MARKDOWN: (".md", ".markdown"),
    HTML: (".html", ".htm"),
    PDF: (".pdf",),
    DOCX: (".docx",),
    PPTX: (".pptx",),
    XLSX: (".xlsx",),
    ODT: (".odt",),
    EPUB: (".epub",),
    RTF: (".rtf",),
    PNG: (".png",),
    JPEG: (".jpg", ".jpeg"),
    TIFF: (".tif", ".tiff"),
    WEBP: (".webp",),
}
_ALIASES = {
    "text/x-markdown": MARKDOWN,
    "application/xhtml+xml": HTML,
    "application/x-pdf": PDF,
    "text/rtf": RTF,
    "application/x-rtf": RTF,
    "image/jpg": JPEG,
    "image/pjpeg": JPEG,
    "image/tif": TIFF,
}
# Pictures of other formats are not read: refused by name, with what to do instead.
IMAGE_EXTENSIONS = frozenset({".gif", ".bmp", ".heic", ".heif", ".svg", ".avif", ".jxl"})
IMAGES_NOT_READ = (
    "This picture format is not read: OCR reads .png, .jpg, .tif and .webp pictures. "
    "Save it as PNG (or add the text itself) and upload it again."
)
# Declared types that say nothing: the file name's extension decides.
_GENERIC = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/unknown"})
# Every supported extension → its content type (``.htm`` → ``text/html``).
EXTENSION_TYPES: dict[str, str] = {ext: ctype for ctype, exts in SUPPORTED_TYPES.items() for ext in exts}
_BY_EXTENSION = EXTENSION_TYPES
# The usual extension of each supported type (the first listed): ``.txt .md .html .pdf .docx``…
PRIMARY_EXTENSIONS: dict[str, str] = {ctype: exts[0] for ctype, exts in SUPPORTED_TYPES.items()}


MAX_HTML_DEPTH = 256
MAX_EXTRACTION_CPU_S = 60.0


def supported_description() -> str:
    return ", ".join(f"{ctype} ({' '.join(exts)})" for ctype, exts in SUPPORTED_TYPES.items())


def supported_extensions() -> str:
    """``.txt, .md, .html, .pdf, … or .rtf`` (for messages)."""
    exts = list(PRIMARY_EXTENSIONS.values())
    return ", ".join(exts[:-1]) + " or " + exts[-1]


def type_for_filename(filename: str | None) -> str | None:
    """The supported content type a file name's extension stands for (``None``: no such extension)."""
    return _BY_EXTENSION.get(_extension(filename))


def supported_type(declared: str | None) -> str | None:
    """A declared ``Content-Type`` (parameters and aliases allowed) as a supported type, else ``None``."""
    base = (declared or "").split(";", 1)[0].strip().lower()
    base = _ALIASES.get(base, base)
    return base if base in SUPPORTED_TYPES else None


def _extension(filename: str | None) -> str:
    if not filename:
        return ""
    name = filename.rsplit("/", 1)[-1]
    return "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""


def is_image(filename: str | None, declared: str | None = None) -> bool:
    """A picture of a format OCR does not read, by its name (``.gif``, ``.heic``…), or by its declared
    ``image/…`` type when it has no extension: refused with :data:`IMAGES_NOT_READ`."""
    ext = _extension(filename)
    base = (declared or "").split(";", 1)[0].strip().lower()
    base = _ALIASES.get(base, base)
    return ext in IMAGE_EXTENSIONS or (not ext and base.startswith("image/") and base not in SUPPORTED_TYPES)


def detect_content_type(filename: str | None, declared: str | None) -> str:
    """The content type to extract ``filename`` with, given what the client ``declared``.

    A supported declared type wins, except that ``text/plain`` is refined by a ``.md``/``.html``/
    ``.pdf`` extension (clients often label everything text/plain), and a picture's type by any
    supported extension (a picture's bytes say what it is when it is read). A missing, generic
    (``application/octet-stream``) or unsupported declared type defers to a supported extension.
    With neither, the text is plain text (a note posted as a string). Anything else raises
    ``ValidationError``.
    """
    base = (declared or "").split(";", 1)[0].strip().lower()
    base = _ALIASES.get(base, base)
    ext = _extension(filename)
    from_ext = _BY_EXTENSION.get(ext)
    if base in SUPPORTED_TYPES and not ((base == TEXT or base in IMAGE_TYPES) and from_ext):
        return base
    if from_ext:
        return from_ext
    if not ext and (base in SUPPORTED_TYPES or base in _GENERIC):
        return base if base in SUPPORTED_TYPES else TEXT
    if is_image(filename, declared):
        raise ValidationError(IMAGES_NOT_READ)
    what = declared if base and base not in _GENERIC and not filename else filename
    raise ValidationError(unsupported_type(what, supported_extensions()))


def is_pdf(data: bytes) -> bool:
    """Do these bytes start like a PDF file (``%PDF-``), whatever they were declared as? A PDF read
    as text would index its source code ("1 0 obj << /Type /Catalog …"), so it is read as a PDF."""
    return data.lstrip()[:5] == b"%PDF-"


def extract(
    data: bytes,
    *,
    content_type: str | None,
    filename: str | None = None,
    budget: CpuBudget | None = None,
    ocr: TextRecognizer | None = None,
    max_image_pixels: int = MAX_IMAGE_PIXELS,
) -> list[Page]:
    """Text pages of a document: ``[(text, metadata), ...]``; at least one, none blank. ``budget``:
    the CPU time it may take (default :data:`MAX_EXTRACTION_CPU_S` from now). ``ocr``: the engine
    that reads pictures (``None``: a picture is refused with :data:`NO_OCR`); ``max_image_pixels``:
    the largest page it is given (0: no limit)."""
    budget = budget or CpuBudget(MAX_EXTRACTION_CPU_S)
    ctype = detect_content_type(filename, content_type)
    if ctype == PDF or is_pdf(data):
        pages = _pdf_pages(data, budget, ocr, max_image_pixels)
    elif ctype in IMAGE_TYPES:
        from ragchat.domain.images import image_pages

        pages = [(_clean(text), meta) for text, meta in image_pages(data, budget, ocr, max_image_pixels)]
    elif ctype in OFFICE_TYPES:
        from ragchat.domain.office import office_pages

        pages = office_pages(data, ctype, budget.check, html=html_markdown)
    elif ctype == RTF:
        from ragchat.domain.rtf import rtf_text

        pages = [(_clean(rtf_text(data, budget.check)), {})]
    elif ctype == HTML:
        pages = _html_pages(_decode(data), budget)
    else:
        pages = [(_decode(data), {})]
    if ctype != PDF and not is_pdf(data):  # (a PDF's pages were counted as they were read)
        budget.text(sum(len(text) for text, _ in pages))
    budget.check("text extracted")
    pages = [(text, meta) for text, meta in pages if text.strip()]
    if not pages:
        raise ExtractionError(NO_TEXT_IN_IMAGE if ctype in IMAGE_TYPES else "The document contains no text.")
    return pages


def _decode(data: bytes) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return _clean(data.decode("utf-16"))
        except UnicodeDecodeError as exc:
            raise ExtractionError(f"Could not decode UTF-16 text: {exc.reason}.") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExtractionError(
            f"The file is not UTF-8 text (invalid byte 0x{data[exc.start]:02x} at position {exc.start}); "
            "save it as UTF-8 and upload it again."
        ) from exc
    if "\x00" in text:
        raise ExtractionError("The file looks binary (it contains NUL bytes), not text.")
    return _clean(text)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _clean(text: str) -> str:
    """Normalise newlines and drop control characters (keeps tabs and newlines)."""
    return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


# ---------------------------------------------------------------------------------------- HTML

_INVISIBLE = ["script", "style", "noscript", "template", "head", "iframe", "object", "svg", "canvas"]
# Elements that start a paragraph (blank line) or a line of their own.
_PARAGRAPH = (
    "p,h1,h2,h3,h4,h5,h6,blockquote,pre,table,ul,ol,dl,section,article,header,footer,"
    "nav,aside,main,figure,form,fieldset,address,details,hr"
)
_LINE = "br,div,li,tr,dt,dd,figcaption,summary,caption,option,label"
_CELL = "td,th"
# Markers (private-use characters) inserted around block elements before whitespace is collapsed.
_PARA_MARK, _LINE_MARK = "\ue000", "\ue001"
# A run of spaces and markers holding at least one marker, taken whole from the run's start (spaces,
# then a marker): ``[ M]*[M][ M]*`` tried every start of a run of spaces (issue 30: quadratic).
_MARKS = re.compile(r"(?<![ \ue000\ue001]) *+[\ue000\ue001][ \ue000\ue001]*+")


# Elements that never have content (no closing tag to wait for).
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source"}
    | {"track", "wbr", "basefont", "bgsound", "frame", "keygen"}
)
# A tag's start; the tag ends at the next ``>`` (found with ``str.find``). The whole tag as one regex
# (``<(/?)(name)\b[^>]*>``) scanned to the end of the text for every ``<a `` without a ``>``: quadratic
# (issue 30: 900 KB held the server 84 s).
# The name runs to whitespace, ``/`` or ``>``, as the HTML tokenizer reads it (so ``<div->`` is
# ``div-``, the element the parser nests).
_TAG_START = re.compile(r"<(/?)([A-Za-z][^\t\n\f />]*+)")


def flatten_html(html: str, max_depth: int = MAX_HTML_DEPTH) -> tuple[str, int]:
    """``html`` with every element opened deeper than ``max_depth`` (and its closing tag) replaced by
    a space, so the parser never nests deeper; the text is kept. Returns (html, tags dropped).

    One pass over the tags with a stack: a closing tag pops up to its element when that element is
    open (per-name counts make the check O(1); each element is popped once), so it is linear."""
    stack: list[str] = []
    open_count: dict[str, int] = {}
    dropped_open: dict[str, int] = {}
    dropped = 0

    def keep(closing: bool, name: str) -> bool:
        nonlocal dropped
        if name in _VOID:
            return True
        if not closing:
            if len(stack) >= max_depth:
                dropped_open[name] = dropped_open.get(name, 0) + 1
                dropped += 1
                return False
            stack.append(name)
            open_count[name] = open_count.get(name, 0) + 1
            return True
        if dropped_open.get(name, 0) > 0 and not (stack and stack[-1] == name):
            dropped_open[name] -= 1
            dropped += 1
            return False
        if open_count.get(name, 0) > 0:
            while stack:
                top = stack.pop()
                open_count[top] -= 1
                if top == name:
                    break
        return True

    out: list[str] = []
    done = 0  # html[:done] is in ``out``
    for start, end, closing, name in _tags(html):
        if not keep(closing, name):
            out += [html[done:start], " "]
            done = end
    out.append(html[done:])
    return "".join(out), dropped


def _tags(html: str) -> Iterator[tuple[int, int, bool, str]]:
    """(start, end, closing, lower-case name) of each tag ``<name …>``/``</name …>``, left to right;
    a tag runs to the first ``>`` after its name. Linear: each character is looked at a bounded
    number of times; once no ``>`` follows, no later tag can end either."""
    at = 0
    while True:
        m = _TAG_START.search(html, at)
        if m is None:
            return
        end = html.find(">", m.end())
        if end < 0:
            return
        yield m.start(), end + 1, m.group(1) == "/", m.group(2).lower()
        at = end + 1


def html_markdown(html: str) -> str:
    """An (X)HTML page's visible text with headings as ``#`` lines, list items as ``- `` lines and
    table rows as ``| a | b |`` (an EPUB chapter)."""
    return _html_pages(html, markdown=True)[0][0]


def _markdown_marks(tree: Any) -> None:
    """Insert the Markdown a reader of the text needs (after the block marks, so each lands inside
    its block's line): ``#``×level before headings, ``- `` before list items, pipes around cells."""
    for level in range(1, 7):
        for node in tree.css(f"h{level}"):
            node.insert_before("#" * level + " ")
    for node in tree.css("li"):
        node.insert_before("- ")
    for node in tree.css(_CELL):
        node.insert_before("| ")
    for node in tree.css("tr"):
        node.insert_after(" |")


def _html_pages(html: str, budget: CpuBudget | None = None, *, markdown: bool = False) -> list[Page]:
    from selectolax.lexbor import LexborHTMLParser

    budget = budget or CpuBudget(MAX_EXTRACTION_CPU_S)
    html, _dropped = flatten_html(html.replace(_PARA_MARK, "").replace(_LINE_MARK, ""))
    budget.check("HTML pre-pass")
    tree = LexborHTMLParser(html)
    budget.check("HTML parsed")
    title_node = tree.css_first("title")
    title = " ".join(title_node.text().split()) if title_node is not None else ""
    tree.strip_tags(_INVISIBLE, recursive=True)
    for selector, mark in ((_PARAGRAPH, _PARA_MARK), (_LINE, _LINE_MARK), (_CELL, " ")):
        for node in tree.css(selector):
            node.insert_before(mark)
            node.insert_after(mark)
    if markdown:
        _markdown_marks(tree)
    root = tree.body or tree.root
    raw = root.text(separator="") if root is not None else ""
    collapsed = re.sub(r"\s+", " ", raw)
    text = _MARKS.sub(lambda m: "\n\n" if _PARA_MARK in m.group() else "\n", collapsed).strip()
    return [(text, {"title": title} if title else {})]


# ----------------------------------------------------------------------------------------- PDF


def check_pdf(data: bytes) -> None:
    """Raise :class:`ExtractionError` (400) for a PDF that is not a PDF, corrupt, encrypted or has
    no text, reading no further than the first page with text (cheap enough to run before the 202;
    damage further on is found by the pipeline, which then marks the document ``FAILED``)."""
    for _ in _pdf_texts(data):
        return
    raise ExtractionError(NO_PDF_TEXT)


def _pdf_pages(
    data: bytes,
    budget: CpuBudget | None = None,
    ocr: TextRecognizer | None = None,
    max_pixels: int = MAX_IMAGE_PIXELS,
) -> list[Page]:
    """The text layer's pages; for a PDF with none (a scan), each page read by ``ocr``
    (:mod:`ragchat.domain.scanned`)."""
    pages = list(_pdf_texts(data, budget))
    if pages:
        return pages
    reason = ocr.missing() if ocr is not None else NO_OCR
    if reason:
        raise ExtractionError(scanned_unread(reason))
    assert ocr is not None
    from ragchat.domain.scanned import scanned_pages

    pages = scanned_pages(data, budget or CpuBudget(MAX_EXTRACTION_CPU_S), ocr, max_pixels)
    if not pages:
        raise ExtractionError("OCR found no text on any page of the PDF (its pages have no text layer).")
    return pages


#: what :func:`check_pdf` says of a PDF with no text layer (the intake then asks whether OCR can read it)
NO_PDF_TEXT = "The PDF has no extractable text."


def _pdf_texts(data: bytes, budget: CpuBudget | None = None) -> Iterator[Page]:
    """The non-blank pages' text, lazily; ExtractionError for an unreadable PDF."""
    from pypdf import PdfReader

    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise ExtractionError("Could not read PDF: the file is not a PDF (no %PDF header).")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception as exc:  # a missing crypto backend or an unsupported algorithm
                raise ExtractionError(f"Could not read PDF: it is encrypted ({exc}).") from exc
            if not opened:
                raise ExtractionError("Could not read PDF: it is password-protected.")
        for number, page in enumerate(reader.pages, start=1):
            if budget is not None:
                budget.check(f"PDF page {number}")
            text = _clean(page.extract_text() or "")
            text = "\n".join(line.rstrip() for line in text.split("\n")).strip()
            if budget is not None:
                budget.text(len(text))
            if text:
                yield text, {"page": number}
    except ExtractionError:
        raise
    except Exception as exc:  # pypdf raises many types on malformed input; all mean "unreadable"
        raise ExtractionError(f"Could not read PDF: {exc or type(exc).__name__}.") from exc
