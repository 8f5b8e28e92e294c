"""A chat message as the user typed it (docs/security.md): sanitization, the conversation title, the token
estimate, and the model ids stored on answers no model wrote."""

from __future__ import annotations

import re
import unicodedata

from ragchat.domain.errors import PayloadTooLarge, ValidationError

MAX_MESSAGE_CHARS = 4000
TITLE_CHARS = 80
# The model id stored on an assistant message that was not produced by a model.
FALLBACK_MODEL = "fallback"
GUARD_MODEL = "guard"
# Suggestions sent with an SSE ``refusal`` event.
REFUSAL_SUGGESTIONS = ("Rephrase your question", "Add documents that cover this topic")
# Said after the guard reply when the caller has nothing indexed to answer from (the page links "add one").
NO_DOCUMENTS_HINT = "You have no documents yet — add one."


def indexing_hint(count: int) -> str:
    """Said after the guard reply while some of the caller's documents are still being indexed."""
    if count == 1:
        return "1 document is still being indexed: ask again once it is ready."
    return f"{count} documents are still being indexed: ask again once they are ready."


_WS = re.compile(r"\s+")
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def sanitize_message(raw: object, *, max_chars: int = MAX_MESSAGE_CHARS) -> str:
    """Control characters removed, whitespace collapsed to single spaces, trimmed (docs/security.md).

    Raises ``ValidationError`` (400) when nothing is left or the content is not a string, and
    ``PayloadTooLarge`` (413) when the sanitized text is longer than ``max_chars``."""
    if not isinstance(raw, str):
        raise ValidationError("content must be a string")
    text = "".join(ch for ch in raw if ch in "\t\n\r" or unicodedata.category(ch) != "Cc")
    text = _WS.sub(" ", text).strip()
    if not text:
        raise ValidationError("content must not be empty")
    if len(text) > max_chars:
        raise PayloadTooLarge(f"content is longer than {max_chars} characters ({len(text)})")
    return text


def make_title(text: str, *, limit: int = TITLE_CHARS) -> str:
    """A conversation title from the first user message: the first ``limit`` characters, cut at the
    last word boundary, with ``…`` appended when cut."""
    text = _WS.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    if not text[limit].isspace():
        space = cut.rfind(" ")
        if space > 0:
            cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


def estimate_tokens(text: str) -> int:
    """docs/chat.md estimate: the number of pieces left when the text is split on whitespace and
    punctuation."""
    return len(_TOKEN.findall(text))
