"""The persona registry of one process (loaded at start-up by the bootstrap): checks a requested
persona and gives a conversation's role paragraph."""

from __future__ import annotations

from collections.abc import Mapping

from ragchat.domain.errors import ValidationError
from ragchat.domain.models import Conversation
from ragchat.domain.personas import BUILTIN_PERSONAS, DEFAULT_PERSONA, resolve_persona
from ragchat.services.logs import log_error


class Personas:
    def __init__(self, registry: Mapping[str, str] | None = None) -> None:
        """``registry``: persona name → role paragraph (default: the built-in ones)."""
        self.registry: dict[str, str] = dict(BUILTIN_PERSONAS if registry is None else registry)

    def check(self, name: str) -> str:
        """The paragraph of ``name``; ``ValidationError`` for a persona that is not configured."""
        return resolve_persona(self.registry, name)

    def paragraph(self, conv: Conversation) -> str:
        """The role paragraph of a stored conversation (the default one, logged, when its persona is
        no longer configured)."""
        try:
            return resolve_persona(self.registry, conv.persona)
        except ValidationError:
            log_error(conv.id, "UnknownPersona", f"persona {conv.persona!r} no longer configured")
            return self.registry.get(DEFAULT_PERSONA, "")
