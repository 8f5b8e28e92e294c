"""How the terminal shows an answer: ``[source: id]`` tags become numbered markers ``[1]``, the
``Sources:`` line goes, and the sources are listed once, numbered, with their titles (wrapped to the
terminal, never cut). The stored and ``--json`` answers keep the API's tags and ``Sources:`` line."""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragchat.domain.citations import CITATION_RE, SOURCES_PREFIX

if TYPE_CHECKING:
    from ragchat.cli.client import Source

_SPACE_BEFORE_MARK = re.compile(r"(?<![ \t])[ \t]++(\[\d+\])")  # a run entered at its start: linear


def numbered(answer: str, sources: Sequence[Source]) -> tuple[str, list[tuple[int, Source]]]:
    """The answer with a number for each cited source (in order of first citation; listed sources
    that are not cited follow), and the sources in that numbering."""
    by_id = {s.id: s for s in sources}
    order: dict[str, int] = {}
    for source_id in [m.group(1) for m in CITATION_RE.finditer(answer)] + [s.id for s in sources]:
        if source_id in by_id:
            order.setdefault(source_id, len(order) + 1)

    def mark(match: re.Match[str]) -> str:
        n = order.get(match.group(1))
        return f"[{n}]" if n is not None else ""

    body = without_sources_line(answer)
    body = CITATION_RE.sub(mark, body)
    body = _SPACE_BEFORE_MARK.sub(r" \1", body)
    body = re.sub(r"(\[\d+\]) (?=\[\d+\])", r"\1", body)  # [1] [2] → [1][2]
    return body.strip(), [(n, by_id[i]) for i, n in order.items()]


def without_sources_line(answer: str) -> str:
    """``answer`` without its last non-blank line when that line starts with ``Sources: ``, nor the
    blank lines before it. A scanner: the pattern it replaces (``(?:\\n[ \\t]*)*^Sources: …\\s*\\Z``)
    retried a run of newlines from each of them (issue 30: quadratic)."""
    start = answer.rstrip().rfind("\n") + 1  # where the last non-blank line starts
    if not answer.startswith(SOURCES_PREFIX, start):
        return answer
    if start == 0:
        return ""
    head = answer[:start]  # ends with a newline: cut at the first newline of its blank tail
    return answer[: head.find("\n", len(head.rstrip(" \t\n")))]


def source_lines(items: Sequence[tuple[int, Source]], width: int | None = None) -> list[str]:
    """``[1] Title, p. 3`` then its snippet, indented; wrapped to ``width`` (the terminal's)."""
    width = width or shutil.get_terminal_size((100, 24)).columns
    lines: list[str] = []
    for n, src in items:
        head = f"[{n}] "
        indent = " " * len(head)
        title = src.where() or src.id
        lines += textwrap.wrap(
            title, width, initial_indent=head, subsequent_indent=indent, break_long_words=True
        )
        snippet = " ".join(src.text.split())
        if snippet:
            lines += textwrap.wrap(f"“{snippet}”", width, initial_indent=indent, subsequent_indent=indent)
    return lines
