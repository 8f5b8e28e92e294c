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


def limit_note(limit: int) -> str:
    """What the Add page and ``ragchat ingest --help`` say before anything is sent."""
    return f"Files up to {megabytes(limit)}."


EMPTY_FILE = "The file is empty."


def unsupported_type(name: str | None, extensions: str) -> str:
    """The refusal for a file of a type that cannot be read (``extensions``: what can, e.g.
    ``.txt, .md, .html or .pdf``); ``name``: the file's name or declared type, when known."""
    shown = f" ({name})" if name else ""
    return f"This file type is not supported{shown}: add {extensions} files."
