"""Reading an uploaded document: its bytes → text pages → chunks → each chunk's header.

This is the pure-Python, CPU-bound part of the split step (docs/ingestion.md), kept in one function
so it can run where a hostile document cannot hold the server: ``ragchat serve`` runs it in a child
process with hard CPU and memory limits (:mod:`ragchat.adapters.local.parse_process`); the split
Lambda runs it in-process (its own process, bounded by the function's timeout). Plain Python: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragchat.domain.content_types import EXTRACTED_TYPES, MARKDOWN, MARKDOWN_TEXT_TYPES
from ragchat.domain.errors import ValidationError
from ragchat.domain.extraction import check_pdf, extract
from ragchat.domain.file_errors import too_many_chunks
from ragchat.domain.images import MAX_IMAGE_PIXELS
from ragchat.domain.models import Chunk
from ragchat.domain.read_budget import CpuBudget, Page

if TYPE_CHECKING:
    from ragchat.domain.images import TextRecognizer

# Content types whose extracted pages the split step keeps (PDF, HTML, Office, e-books, RTF: their
# text is not their bytes).
KEEP_PAGES = EXTRACTED_TYPES
# Content types whose reading may take long (a parser of their format, not a text split): the local
# worker reads them apart from text, so a note never waits for a PDF being read (issue 43).
READ_APART = EXTRACTED_TYPES
# A text file larger than this is read apart too (splitting takes up to ~0.25 s of CPU per MB: a
# 500 MiB upload held the worker for tens of seconds).
APART_BYTES = 1_000_000


def reads_apart(content_type: str, size: int) -> bool:
    """Whether a document of this type and size (bytes) is read apart from short text: a PDF, a
    page, an Office file, an e-book, RTF, or a text over :data:`APART_BYTES`."""
    return content_type in READ_APART or size > APART_BYTES


class ParsingInterrupted(RuntimeError):
    """The reader stopped because the server is stopping: the document is left as it is (resumed at
    the next start), not failed."""


@dataclass(frozen=True, slots=True)
class ParseJob:
    """How to read one document (everything :func:`parse_document` needs besides its bytes)."""

    content_type: str
    title: str
    chunk_size: int
    overlap: int
    headers: bool  # ``CHUNK_HEADERS``: each chunk's contextual header
    cpu_seconds: float  # the extraction's CPU budget (checked between stages)
    max_chars: int = 0  # ``MAX_EXTRACTED_CHARS`` (0: no ceiling)
    max_expansion: float = 0.0  # ``MAX_TEXT_EXPANSION``: characters per byte of the file (0: none)
    max_chunks: int = 0  # ``MAX_CHUNKS_PER_DOCUMENT`` (0: no ceiling)
    max_image_pixels: int = MAX_IMAGE_PIXELS  # the largest picture page OCR is given (0: no limit)


@dataclass(slots=True)
class Parsed:
    """A read document: its chunks (none blank) and their headers ("" each without headers); the
    extracted pages only for the types whose text is kept (:data:`KEEP_PAGES`), else empty."""

    chunks: list[Chunk]
    headers: list[str]
    pages: list[Page] = field(default_factory=list)


# A file may always expand to this much text, whatever its size (a short note in a small PDF).
EXPANSION_FLOOR_CHARS = 1_000_000


def text_ceiling(budget: CpuBudget, job: ParseJob, size: int) -> None:
    """Set ``budget``'s text ceiling for a file of ``size`` bytes: ``MAX_EXTRACTED_CHARS``, and
    ``MAX_TEXT_EXPANSION`` characters per byte of the file (at least :data:`EXPANSION_FLOOR_CHARS`);
    reading stops with the reason as soon as the text runs past it (issue 43: a 1.7 KB PDF drawing
    the same compressed text over and over became ~4,700 chunks)."""
    from ragchat.domain.file_errors import expands_too_much, too_much_text

    if job.max_chars:
        budget.chars_left, budget.too_much_text = job.max_chars, too_much_text(job.max_chars)
    if job.max_expansion:
        by_size = max(EXPANSION_FLOOR_CHARS, int(job.max_expansion * size))
        if budget.chars_left is None or by_size < budget.chars_left:
            budget.chars_left = by_size
            budget.too_much_text = expands_too_much(size, by_size, job.max_expansion)


def parse_document(body: bytes, job: ParseJob, ocr: TextRecognizer | None = None) -> Parsed:
    """Extract, split and head one document. Raises ``ValidationError`` (an ``ExtractionError``)
    when it holds no text or overruns its CPU budget. ``ocr``: the engine that reads pictures
    (``None``: pictures are refused)."""
    from ragchat.domain.context import chunk_header, nearest_headings
    from ragchat.domain.splitting import split_pages

    budget = CpuBudget(job.cpu_seconds)
    text_ceiling(budget, job, len(body))
    pages = extract(
        body, content_type=job.content_type, budget=budget, ocr=ocr, max_image_pixels=job.max_image_pixels
    )
    del body  # not held while the text is chunked
    # Office, e-book and RTF text is written with Markdown headings, lists and tables: split as such
    split_type = MARKDOWN if job.content_type in MARKDOWN_TEXT_TYPES else job.content_type
    chunks = split_pages(pages, content_type=split_type, chunk_size=job.chunk_size, overlap=job.overlap)
    chunks = [c for c in chunks if c.text.strip()]
    if not chunks:
        raise ValidationError("No text could be extracted from the document")
    if job.max_chunks and len(chunks) > job.max_chunks:
        raise ValidationError(too_many_chunks(len(chunks), job.max_chunks))
    budget.check("text split")
    headers = [""] * len(chunks)
    if job.headers:
        text = "\n".join(page for page, _ in pages)
        headings = nearest_headings(text, [c.text for c in chunks])
        headers = [chunk_header(job.title, h, c.text) for c, h in zip(chunks, headings, strict=True)]
        budget.check("chunk headers")
    return Parsed(chunks, headers, pages if job.content_type in KEEP_PAGES else [])


def check_pdf_body(body: bytes, job: object) -> None:
    """The accept-time PDF check (``extraction.check_pdf``) as a parser's function: what the check's
    child process runs (``ragchat.adapters.local.parse_process.ProcessPdfCheck``)."""
    check_pdf(body)


class InProcessParser:
    """The :class:`~ragchat.ports.DocumentParser` of the split Lambda (a process of its own, bounded
    by its timeout), ``ragchat ingest`` with ``PARSE_ISOLATION=off`` and the tests over fakes.
    ``ocr``: the engine that reads pictures (``None``: pictures are refused)."""

    def __init__(self, ocr: TextRecognizer | None = None) -> None:
        self.ocr = ocr

    def parse(self, body: Callable[[], bytes], job: ParseJob) -> Parsed:
        return parse_document(body(), job, self.ocr)  # the bytes go to parse_document alone (it drops them)
