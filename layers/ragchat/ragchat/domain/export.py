"""A conversation as a Markdown document (``GET …/export?format=markdown``, the page's "Export" and
``ragchat chat``'s ``/export``): each answer's ``[source: id]`` tags become numbered footnotes
(``[^1]``), and one "Sources" section at the end lists each source once with its document's title,
PDF page and a quote cut at a sentence end (else between words). Times read as people write them
("29 Nov 2026, 08:19 UTC"), never as stored ISO strings with milliseconds; a refusal carries no
model name (the guard is not a model)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragchat.domain.citations import SOURCE_TEXT_CHARS, TAG_WITH_SPACE_PATTERN, strip_sources_line
from ragchat.domain.messages import GUARD_MODEL
from ragchat.domain.models import Conversation, Message, SourceRef

_ROLE_NAMES = {"user": "User", "assistant": "Assistant", "system-summary": "Summary"}
_TAG = re.compile(TAG_WITH_SPACE_PATTERN)


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_SENTENCE_END = (". ", "! ", "? ", ".” ", '." ')


def readable_time(stamp: str) -> str:
    """``2026-11-29T08:19:12.345Z`` → ``29 Nov 2026, 08:19 UTC``; anything else as it is."""
    from datetime import UTC, datetime

    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return stamp
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return f"{when.day} {_MONTHS[when.month - 1]} {when.year}, {when:%H:%M} UTC"


def snippet(text: str, *, limit: int = SOURCE_TEXT_CHARS) -> str:
    """``text`` on one line; a stored excerpt that was cut (it fills the limit) ends after its last
    whole sentence when that keeps a fair part of it, else at the last whole word, with "…"."""
    flat = " ".join(text.split())
    if len(flat) < limit:
        return flat
    cut = flat[:limit]
    end = max(cut.rfind(mark) + len(mark) - 1 for mark in _SENTENCE_END)
    if end >= limit // 4:  # a whole sentence of 40 characters or more
        return cut[:end].rstrip()
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
    meta = [f"- Conversation: `{conv.id}`", f"- Started: {readable_time(conv.created_at)}"]
    if conv.collection:
        meta.append(f"- Collection: {conv.collection}")
    if conv.document_id:
        meta.append(f"- Document: `{conv.document_id}`")
    if conv.persona:
        meta.append(f"- Persona: {conv.persona}")
    lines += [*meta, ""]
    notes = _Footnotes()
    for m in messages:
        head = f"## {_ROLE_NAMES.get(m.role, m.role)} — {readable_time(m.created_at)}"
        if m.role == "assistant" and m.model and m.model != GUARD_MODEL:
            head += f" ({m.model})"
        if m.interrupted:
            head += " [interrupted]"
        lines += [head, "", notes.body(m) if m.role == "assistant" else m.content, ""]
    lines += notes.section()
    return "\n".join(lines).rstrip() + "\n"
