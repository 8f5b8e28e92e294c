"""A conversation as a Markdown document (``GET …/export?format=markdown``)."""

from __future__ import annotations

from collections.abc import Sequence

from ragchat.domain.models import Conversation, Message

_ROLE_NAMES = {"user": "User", "assistant": "Assistant", "system-summary": "Summary"}


def export_markdown(conv: Conversation, messages: Sequence[Message]) -> str:
    """Title, a metadata list, then one section per message (with its model, an ``[interrupted]``
    mark and its sources)."""
    lines = [f"# {conv.title or 'Conversation'}", ""]
    meta = [f"- Conversation: `{conv.id}`", f"- Created: {conv.created_at}"]
    if conv.collection:
        meta.append(f"- Collection: {conv.collection}")
    if conv.document_id:
        meta.append(f"- Document: `{conv.document_id}`")
    if conv.persona:
        meta.append(f"- Persona: {conv.persona}")
    lines += [*meta, ""]
    for m in messages:
        head = f"## {_ROLE_NAMES.get(m.role, m.role)} — {m.created_at}"
        if m.role == "assistant" and m.model:
            head += f" ({m.model})"
        if m.interrupted:
            head += " [interrupted]"
        lines += [head, "", m.content, ""]
        if m.sources:
            lines.append("Sources:")
            lines += [f"- `{s.id}`: {s.text}" for s in m.sources]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
