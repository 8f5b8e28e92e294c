"""Tool-use mode limits (docs/chat.md): how many tool rounds a turn may take and how many notes a search
may return."""

from __future__ import annotations

MAX_TOOL_ROUNDS = 4
MAX_TOOL_LIMIT = 20


def clamp_limit(value: object, default: int = 5) -> int:
    try:
        n = int(str(value))
    except (TypeError, ValueError):
        n = default
    return max(1, min(MAX_TOOL_LIMIT, n))
