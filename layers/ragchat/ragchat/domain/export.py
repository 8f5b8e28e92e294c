"""A conversation as a Markdown document (``GET …/export?format=markdown``): each answer's
``[source: id]`` tags become numbered footnotes (``[^1]``), and one "Sources" section at the end
lists each source once with its document's title, PDF page and a snippet cut between words."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragchat.domain.citations import SOURCE_TEXT_CHARS, TAG_WITH_SPACE_PATTERN, strip_sources_line
from ragchat.domain.models import Conversation, Message, SourceRef

_ROLE_NAMES = {"user": "User", "assistant": "Assistant", "system-summary": "Summary"}
_TAG = re.compile(TAG_WITH_SPACE_PATTERN)


def snippet(text: str, *, limit: int = SOURCE_TEXT_CHARS) -> str:
    """``text`` on one line; a stored excerpt that was cut (it fills the limit) ends at the last whole
    word, with "…"."""
    flat = " ".join(text.split())
    if len(flat) < limit:
        return flat
    cut = flat[:limit]
    head = cut.rsplit(" ", 1)[0] if " " in cut else cut
    return head.rstrip(" ,;:-–—") + "…"


def _footnote(number: int, src: SourceRef) -> str:
    """``[^1]: Title, p. 3 — “text…”``; with no title (older messages) the source's id stands in."""
    where = [src.title or f"`{src.id}`"]
    if src.page is not None:
        where.append(f"p. {src.page}")
    quote = snippet(src.text)
    return f"[^{number}]: {', '.join(where)}" + (f" — “{quote}”" if quote else "")


class _Footnotes:
    """Numbers for sources across the whole conversation: the same source keeps its number."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.refs: dict[str, SourceRef] = {}

    def number(self, source_id: str, ref: SourceRef | None) -> int:
        if source_id not in self.numbers:
            self.numbers[source_id] = len(self.numbers) + 1
        if ref is not None and source_id not in self.refs:
            self.refs[source_id] = ref
        return self.numbers[source_id]

    def body(self, message: Message) -> str:
        """The answer with its tags as footnote marks (no ``Sources:`` line); its listed sources
        that the text did not cite are numbered too, after the cited ones."""
        sources = message.sources or []
        by_id = {s.id: s for s in sources}
        text = strip_sources_line(message.content)
        text = _TAG.sub(lambda m: f"[^{self.number(m.group(1), by_id.get(m.group(1)))}]", text)
        for src in sources:
            self.number(src.id, src)
        return text

    def section(self) -> list[str]:
        listed = [(n, self.refs.get(i, SourceRef(i, ""))) for i, n in self.numbers.items()]
        return ["## Sources", "", *(_footnote(n, ref) for n, ref in listed), ""] if listed else []


def export_markdown(conv: Conversation, messages: Sequence[Message]) -> str:
    """Title, a metadata list, one section per message (with its model and an ``[interrupted]``
    mark), then the numbered sources."""
    lines = [f"# {conv.title or 'Conversation'}", ""]
    meta = [f"- Conversation: `{conv.id}`", f"- Created: {conv.created_at}"]
    if conv.collection:
        meta.append(f"- Collection: {conv.collection}")
    if conv.document_id:
        meta.append(f"- Document: `{conv.document_id}`")
    if conv.persona:
        meta.append(f"- Persona: {conv.persona}")
    lines += [*meta, ""]
    notes = _Footnotes()
    for m in messages:
        head = f"## {_ROLE_NAMES.get(m.role, m.role)} — {m.created_at}"
        if m.role == "assistant" and m.model:
            head += f" ({m.model})"
        if m.interrupted:
            head += " [interrupted]"
        lines += [head, "", notes.body(m) if m.role == "assistant" else m.content, ""]
    lines += notes.section()
    return "\n".join(lines).rstrip() + "\n"
