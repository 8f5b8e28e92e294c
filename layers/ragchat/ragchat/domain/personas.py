"""The persona registry (docs/retrieval.md): named role paragraphs put ahead of the system prompt."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ragchat.domain.errors import ValidationError

_PERSONA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DEFAULT_PERSONA = "default"
BUILTIN_PERSONAS: dict[str, str] = {DEFAULT_PERSONA: ""}


def parse_personas(data: Mapping[str, object]) -> dict[str, str]:
    """Persona registry from a parsed JSON/TOML document. Accepted shapes::

        {"analyst": "You are a financial analyst ..."}
        {"personas": {"analyst": {"prompt": "You are ...", "description": "..."}}}

    (``prompt``, ``role`` or ``paragraph`` name the role paragraph). The built-in ``default`` (no
    extra paragraph) is always present and may be overridden. Raises ``ValueError`` on bad entries."""
    raw = data.get("personas", data)
    if not isinstance(raw, Mapping):
        raise ValueError("personas: expected a table of name → role paragraph")
    registry = dict(BUILTIN_PERSONAS)
    for name, value in raw.items():
        if not isinstance(name, str) or not _PERSONA_NAME.match(name):
            raise ValueError(f"persona name {name!r}: use 1-64 letters, digits, '-' or '_'")
        if isinstance(value, Mapping):
            value = next((value[k] for k in ("prompt", "role", "paragraph") if k in value), None)
        if not isinstance(value, str):
            raise ValueError(f"persona {name!r}: expected a role paragraph (string)")
        registry[name] = value.strip()
    return registry


def persona_notice(name: str | None, model_writes: bool) -> str | None:
    """What to tell whoever starts a conversation with a persona that cannot take effect: the
    extractive answerer quotes the documents' own sentences, so a role paragraph changes nothing
    there (``None`` when it does, or for the default persona)."""
    if model_writes or not name or name == DEFAULT_PERSONA:
        return None
    return (
        f"The persona '{name}' changes how answers are written only when a language model writes "
        "them (RAGCHAT_CHAT_MODEL=claude); the extractive answerer quotes your documents as they are."
    )


def resolve_persona(registry: Mapping[str, str], name: str | None) -> str:
    """The role paragraph of a persona; unknown names are a 400."""
    key = name or DEFAULT_PERSONA
    if key not in registry:
        known = ", ".join(sorted(registry))
        raise ValidationError(
            f"Unknown persona '{key}' (known: {known}). Personas are defined in the JSON or TOML file "
            "that RAGCHAT_PERSONAS_FILE names (docs/configuration.md)."
        )
    return registry[key]
