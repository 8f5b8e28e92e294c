"""Rules for what a submitted document may carry (docs/api.md) beside its labels (title and
collection: :mod:`ragchat.domain.labels`): metadata, the ``split`` flag, a caller-chosen id, the
title derived when none is given, plus the readable form of an ingestion error.

Pure functions that raise :class:`ValidationError` (HTTP 400) naming the problem; the ingestion
and documents services apply them, so every entry point (API, CLI, S3) follows the same rules.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ragchat.domain.errors import RagchatError, ValidationError
from ragchat.domain.labels import MAX_TITLE_CHARS, clean_title

DEFAULT_TITLE_CHARS = 200
MAX_METADATA_BYTES = 16 * 1024
MAX_ERROR_CHARS = 500

_DOCUMENT_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def default_title(filename: str | None, text: str | None) -> str:
    """The file name, else the first line of text (shortened at a word), else a placeholder."""
    if filename:
        name = clean_title(filename.replace("\\", "/").rsplit("/", 1)[-1])
        if name:
            return name[:MAX_TITLE_CHARS]
    if text:
        for line in text.splitlines():
            line = clean_title(" ".join(line.split()).lstrip("#"))
            if line:
                if len(line) <= DEFAULT_TITLE_CHARS:
                    return line
                cut = line[:DEFAULT_TITLE_CHARS]
                space = cut.rfind(" ")
                return (cut[:space] if space > DEFAULT_TITLE_CHARS // 2 else cut).rstrip() + "…"
    return "Untitled document"


def already_there(title: str, document_id: str) -> str:
    """What the reply to a duplicate says, at every door (the API's ``message``, the page, ``ragchat
    ingest``): exactly this content is already the workspace's document ``title``."""
    return f"Already there: “{title}” ({document_id}) has exactly this content; nothing new was added."


def validate_metadata(metadata: Any) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise ValidationError("metadata must be a JSON object")
    try:
        encoded = json.dumps(metadata, ensure_ascii=False)
    except (TypeError, ValueError):
        raise ValidationError("metadata must be a JSON object") from None
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise ValidationError(f"metadata is too large (at most {MAX_METADATA_BYTES} bytes as JSON)")
    return dict(metadata)


def check_text_characters(text: str) -> str:
    """A text document's characters at intake: a NUL byte is refused (400) with where it is — it
    means binary data, and would otherwise be accepted now and FAIL in the worker. Other control
    characters are kept here and stripped by extraction (tabs and line breaks stay)."""
    at = text.find("\x00")
    if at >= 0:
        raise ValidationError(
            f"text contains a NUL character (\\u0000) at position {at}: send text, not binary data"
        )
    return text


def validate_split(split: Any) -> bool:
    """``split`` is a JSON boolean (``"yes"``, ``1`` or ``"true"`` are refused); absent means true."""
    if split is None:
        return True
    if not isinstance(split, bool):
        raise ValidationError("split must be a boolean (true or false)")
    return split


def validate_document_id(document_id: str) -> str:
    if not isinstance(document_id, str) or not _DOCUMENT_ID.match(document_id):
        raise ValidationError("document id must be 1-64 characters of letters, digits, '_' or '-'")
    return document_id


def human_error(error: str) -> str:
    """A short, readable failure message. Step Functions hands over a Lambda error's ``Cause`` as a
    JSON string (``{"errorMessage": ..., "errorType": ...}``): keep only the message."""
    text = (error or "").strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            text = str(data.get("errorMessage") or data.get("Cause") or data.get("Error") or text)
    text = " ".join(text.split()) or "Ingestion failed"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def error_message(exc: BaseException) -> str:
    """What an exception says to a user: a domain error's message, else its text or type."""
    if isinstance(exc, RagchatError):
        return exc.message
    text = str(exc).strip()
    return text or type(exc).__name__
