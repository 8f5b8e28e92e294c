"""Loading the persona registry from ``RAGCHAT_PERSONAS_FILE`` (JSON or TOML)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from ragchat.domain.personas import BUILTIN_PERSONAS, parse_personas


def load_personas(path: Path | None) -> dict[str, str]:
    """The registry in ``path`` (the built-in ``default`` alone when ``None``). Raises ``ConfigError``
    naming ``RAGCHAT_PERSONAS_FILE`` when the file cannot be read or parsed."""
    if path is None:
        return dict(BUILTIN_PERSONAS)
    from ragchat.config import ConfigError  # the one config import: its error type

    try:
        raw = path.read_text(encoding="utf-8")
        data = tomllib.loads(raw) if path.suffix.lower() == ".toml" else json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("expected a table/object of personas")
        return parse_personas(data)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"RAGCHAT_PERSONAS_FILE: cannot load personas from {path}: {exc}") from None
