"""The rules for the labels a user gives documents and conversations alike: ``title`` and
``collection``. One home, applied by the API, the document/ingestion services and conversation
creation (SPEC §3: a document title is at most 1000 characters)."""

from __future__ import annotations

import re

from ragchat.domain.errors import ValidationError

MAX_TITLE_CHARS = 1000
MAX_COLLECTION_CHARS = 64
COLLECTION_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
COLLECTION_RULE = (
    "collection must be 1-64 characters: letters, digits, '_', '-', '.', ':' "
    "(starting with a letter or digit)"
)


def validate_title(title: object) -> str:
    """A given title, stripped: a non-blank string of at most ``MAX_TITLE_CHARS`` characters."""
    if not isinstance(title, str):
        raise ValidationError("title must be a string")
    clean = title.strip()
    if len(clean) > MAX_TITLE_CHARS:
        raise ValidationError(f"title must be at most {MAX_TITLE_CHARS} characters")
    if not clean:
        raise ValidationError("title must not be blank")
    return clean


def optional_title(title: object) -> str | None:
    """An optional title on creation, stripped: ``None`` or blank → ``None`` (the caller derives
    one); otherwise the ``validate_title`` rule."""
    if title is None or (isinstance(title, str) and not title.strip()):
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
