"""One vocabulary for a refused file, whichever door it came through (the page's upload, ``ragchat
ingest`` local or ``--api``, ``POST /documents``, ``POST /uploads``): the same plain sentence, sizes in
MB (10^6 bytes, as file managers show them) with the limit named. No I/O."""

from __future__ import annotations

MB = 1_000_000


def megabytes(size: int) -> str:
    """``31457315`` → ``"31.5 MB"``; below 0.1 MB one more decimal so a small limit never reads 0.0."""
    value = size / MB
    return f"{value:.2f} MB" if value < 0.1 else f"{value:.1f} MB"


def too_large(size: int | None, limit: int) -> str:
    """The refusal for a file over the limit (``size`` may be unknown, e.g. a declared form length)."""
    if size is None:
        return f"The file is too large: the limit is {megabytes(limit)}."
    return f"The file is too large ({megabytes(size)}): the limit is {megabytes(limit)}."


#: the routes whose body is a file (a raw upload, a presigned form), not JSON
FILE_ROUTES = ("/documents", "/uploads/local/")


def body_too_large(size: int, limit: int, path: str) -> str:
    """The 413 of a request body over the limit: a file is pointed to ``POST /uploads``; a JSON body
    (a note, a question) is no file to send elsewhere."""
    if path.startswith(FILE_ROUTES):
        return too_large(size, limit) + " Send a larger file with POST /uploads."
    return f"The request body is too large ({megabytes(size)}): the limit is {megabytes(limit)}."


def limit_note(limit: int) -> str:
    """What the Add page and ``ragchat ingest --help`` say before anything is sent."""
    return f"Files up to {megabytes(limit)}."


EMPTY_FILE = "The file is empty."


def unsupported_type(name: str | None, extensions: str) -> str:
    """The refusal for a file of a type that cannot be read (``extensions``: what can, e.g.
    ``.txt, .md, .html, … or .rtf``); ``name``: the file's name or declared type, when known."""
    shown = f" ({name})" if name else ""
    return f"This file type is not supported{shown}: add {extensions} files."


# Reading a file (extracting, splitting, heading its chunks) runs under limits (docs/security.md):
# a file over one FAILS with one of these, and the next file is read normally.
SPLIT_IT = "Split it into smaller files."


def too_slow_to_read(cpu_seconds: float) -> str:
    """The refusal for a file whose reading used more CPU (or wall-clock) time than allowed."""
    return f"The file took too long to read: the limit is {cpu_seconds:g} s of CPU. {SPLIT_IT}"


def too_much_text(limit_chars: int) -> str:
    """The refusal for a file whose extracted text runs past ``MAX_EXTRACTED_CHARS``."""
    return (
        f"The file holds too much text: more than {limit_chars:,} characters (MAX_EXTRACTED_CHARS). "
        f"{SPLIT_IT}"
    )


def expands_too_much(size: int, limit_chars: int, per_byte: float) -> str:
    """The refusal for a small file whose text is far larger than the file (a PDF drawing the same
    compressed text over and over: ``MAX_TEXT_EXPANSION``)."""
    return (
        f"The file expands to far more text than its size: more than {limit_chars:,} characters from "
        f"{size:,} bytes (at most {per_byte:g} per byte, MAX_TEXT_EXPANSION). It may repeat the same "
        "content many times; export it again or send its text."
    )


def too_many_chunks(count: int, limit: int) -> str:
    """The refusal for a document that would be cut into more than ``MAX_CHUNKS_PER_DOCUMENT``."""
    return (
        f"The document would make {count:,} chunks; at most {limit:,} are kept per document "
        f"(MAX_CHUNKS_PER_DOCUMENT). {SPLIT_IT}"
    )


def too_much_memory(limit_bytes: int) -> str:
    """The refusal for a file whose reading needed more memory than allowed."""
    return f"The file needed too much memory to read: the limit is {megabytes(limit_bytes)}. {SPLIT_IT}"


def interrupted(attempts: int) -> str:
    """Why a document is no longer resumed: its ingestion was interrupted ``attempts`` times (the
    server stopped or crashed while reading it)."""
    times = "once" if attempts == 1 else f"{attempts} times"
    return (
        f"Ingestion was interrupted {times} (the server stopped while reading the file), "
        f"so it is not tried again. {SPLIT_IT[:-1]} or upload it again to retry."
    )
