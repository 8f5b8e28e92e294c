"""The rules for the labels a user gives documents and conversations alike: ``title`` and
``collection``. One home, applied by the API, the document/ingestion services and conversation
creation (docs/api.md: a document title is at most 1000 characters)."""

from __future__ import annotations

import re

from ragchat.domain.errors import ValidationError

MAX_TITLE_CHARS = 1000
MAX_COLLECTION_CHARS = 64
COLLECTION_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
# Line breaks and other whitespace controls in a title become a space; other control characters
# (NUL, escape, …) are dropped: a title is one line of text (issue 8).
_BREAKS = re.compile(r"[\t\n\r\v\f\x1c-\x1f\x85\u2028\u2029]+")
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
COLLECTION_RULE = (
    "collection must be 1-64 characters: letters, digits, '_', '-', '.', ':' "
    "(starting with a letter or digit)"
)


def clean_title(title: str) -> str:
    """``title`` on one line without control characters, stripped."""
    return _CONTROLS.sub("", _BREAKS.sub(" ", title)).strip()


def validate_title(title: object) -> str:
    """A given title, stripped, without control characters: a non-blank string of at most
    ``MAX_TITLE_CHARS`` characters."""
    if not isinstance(title, str):
        raise ValidationError("title must be a string")
    clean = clean_title(title)
    if len(clean) > MAX_TITLE_CHARS:
        raise ValidationError(f"title must be at most {MAX_TITLE_CHARS} characters")
    if not clean:
        raise ValidationError("title must not be blank")
    return clean


def optional_title(title: object) -> str | None:
    """An optional title on creation, stripped: ``None`` or blank → ``None`` (the caller derives
    one); otherwise the ``validate_title`` rule."""
    if title is None or (isinstance(title, str) and not clean_title(title)):
        return None
    return validate_title(title)


def validate_collection(collection: object) -> str | None:
    """A collection name, stripped (``None``/blank: no collection); see ``COLLECTION_RULE``."""
    if collection is None:
        return None
    if not isinstance(collection, str):
        raise ValidationError("collection must be a string")
    clean = collection.strip()
    if not clean:
        return None
    if not COLLECTION_PATTERN.match(clean):
        raise ValidationError(COLLECTION_RULE)
    return clean
