"""Markdown links and emphasis taken off a sentence, in time linear in its length.

Each function gives exactly what one ``re.sub`` over the sentence gave (the patterns are quoted
below), but never reads the same stretch of text again from each start: as patterns, a sentence of
``[`` without ``]``, or of ``**x `` that never closes, was scanned to its end from every start
(issue 30: quadratic). A closing mark is found with ``str.find`` or, for emphasis, by bisecting the
sorted positions where each mark could close.
"""

from __future__ import annotations

import re
from bisect import bisect_left

# (marks tried in this order at one position, whether the mark must stand at a word's edge)
_STARS = ("**", "*", "~~")
_UNDERSCORES = ("__", "_")
_MARK = re.compile(r"[*~_]")


def unlink(text: str) -> str:
    """Each ``[text](url)`` or ``![alt](url)`` replaced by its text: ``re.sub(r"!?\\[([^\\]]*)\\]\\([^)]*\\)",
    r"\\1", text)``. A ``[`` ends at the first ``]``; every ``[`` before that ``]`` shares its fate."""
    out: list[str] = []
    done = at = 0  # text[:done] is in ``out``; no link starts before ``at``
    while (opening := text.find("[", at)) >= 0:
        closing = text.find("]", opening + 1)
        if closing < 0:
            break  # no later ``[`` can close either
        if not text.startswith("(", closing + 1):
            at = closing + 1
            continue
        end = text.find(")", closing + 2)
        if end < 0:
            break  # no later link can end either
        start = opening - 1 if opening > done and text[opening - 1] == "!" else opening
        out += [text[done:start], text[opening + 1 : closing]]
        done = at = end + 1
    out.append(text[done:])
    return "".join(out)


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


class _Closers:
    """Where each mark can close: after a non-space, and (underscores) not before a word character;
    sorted, so the first one after a position is a bisection away."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.newlines = [i for i, ch in enumerate(text) if ch == "\n"]
        self.at: dict[str, list[int]] = {}
        for mark in (*_STARS, *_UNDERSCORES):
            edge = mark in _UNDERSCORES
            self.at[mark] = [
                q
                for q in _occurrences(text, mark)
                if q > 0
                and not text[q - 1].isspace()
                and not (edge and q + len(mark) < len(text) and _is_word(text[q + len(mark)]))
            ]

    def first(self, mark: str, after: int) -> int:
        """The first closing ``mark`` at or after ``after`` on the same line, or -1."""
        found = self.at[mark]
        i = bisect_left(found, after)
        if i == len(found):
            return -1
        line_end = (
            self.newlines[j]
            if (j := bisect_left(self.newlines, after - 1)) < len(self.newlines)
            else len(self.text)
        )
        return found[i] if found[i] <= line_end else -1


def _occurrences(text: str, mark: str) -> list[int]:
    found, i = [], text.find(mark)
    while i >= 0:
        found.append(i)
        i = text.find(mark, i + 1)
    return found


def unemphasise(text: str) -> str:
    """Each emphasised span replaced by its text: ``re.sub`` of
    ``(\\*\\*|\\*|~~)(?=\\S)(.+?)(?<=\\S)\\1|(?<!\\w)(__|_)(?=\\S)(.+?)(?<=\\S)\\3(?!\\w)`` by group 2 or 4
    (the span's text: at least one character, on one line, ending at the first closing mark)."""
    closers: _Closers | None = None
    out: list[str] = []
    done = p = 0
    while (found := _MARK.search(text, p)) is not None:
        p = found.start()
        closers = closers or _Closers(text)
        span = _span(text, p, closers)
        if span is None:
            p += 1
            continue
        inner, end = span
        out += [text[done:p], inner]
        done = p = end
    out.append(text[done:])
    return "".join(out)


def _span(text: str, p: int, closers: _Closers) -> tuple[str, int] | None:
    """(text, end) of the emphasis that starts at ``p``, as the pattern's branches try it in order."""
    candidates = list(_STARS)
    if p == 0 or not _is_word(text[p - 1]):
        candidates += _UNDERSCORES
    for mark in candidates:
        body = p + len(mark)
        if not text.startswith(mark, p) or body >= len(text) or text[body].isspace():
            continue
        q = closers.first(mark, body + 1)
        if q >= 0:
            return text[body:q], q + len(mark)
    return None
