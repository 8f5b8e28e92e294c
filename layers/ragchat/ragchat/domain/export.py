"""A conversation as a Markdown document (``GET …/export?format=markdown``)."""

from __future__ import annotations

from collections.abc import Sequence

from ragchat.domain.models import Conversation, Message, SourceRef

_ROLE_NAMES = {"user": "User", "assistant": "Assistant", "system-summary": "Summary"}


def _source_line(src: SourceRef) -> str:
    """``- `id` — Title, p. 3: text``; what is not known is left out (older messages: ``- `id`: text``)."""
    where = [src.title] if src.title else []
    if src.page is not None:
        where.append(f"p. {src.page}")
    head = f"- `{src.id}` — {', '.join(where)}" if where else f"- `{src.id}`"
    return f"{head}: {src.text}"


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
            lines += [_source_line(s) for s in m.sources]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
