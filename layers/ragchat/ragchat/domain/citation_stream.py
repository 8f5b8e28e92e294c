"""A model answer streamed as it will be stored (docs/chat.md): the deltas a client receives are already
validated, and their concatenation equals :func:`~ragchat.domain.citations.validate_citations`'s text.

Two stages, each holding back only what the rest of the answer could still change:

1. **The model's own sources block.** Validation drops a trailing ``Sources:`` heading with its list
   items; so a line that is (or could still become) such a heading is held, together with the list
   items after it, until a line follows that ends the block (released then) or the answer ends
   (the block is then replaced by the standard line in the last delta).
2. **Tags.** :class:`~ragchat.domain.citations.CitationStreamFilter` drops tags with ids that were not
   retrieved, holds a tag still arriving and trailing whitespace.

:meth:`ValidatedStream.rest` gives the last delta: the validated answer after what was sent (the held
text, `` (Removed invalid citation)`` and the standard ``Sources:`` line).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ragchat.domain.citations import SOURCES_HEADING, SOURCES_ITEM, CitationStreamFilter

_HEADING = re.compile(SOURCES_HEADING, re.IGNORECASE)
_ITEM = re.compile(SOURCES_ITEM)
_ITEM_START = re.compile(r"[ \t]*\d*")  # what a list item looks like before its marker is complete


def _word_prefixes(word: str) -> str:
    """A pattern for every prefix of ``word`` and, once complete, an optional plural ``s`` and the
    spaces / ``**`` / ``__`` before its colon."""
    pattern = r"s?[ \t*_]*"
    for ch in reversed(word):
        pattern = f"{ch}(?:{pattern})?"
    return pattern


# A heading line still arriving (no colon yet): a generous superset of the heading's prefixes.
_HEADING_START = re.compile(
    r"[ \t#*_]*(?:" + _word_prefixes("source") + "|" + _word_prefixes("citation") + ")?", re.IGNORECASE
)


def could_be_sources_block(text: str) -> bool:
    """Whether ``text`` (starting at a line start) could still become the answer's trailing sources
    block: a heading line, then list items, then only whitespace. Once false, no continuation makes
    it true again."""
    lines = text.split("\n")
    head = lines[0]
    if len(lines) == 1:
        return bool(_HEADING.match(head) or _HEADING_START.fullmatch(head))
    if not _HEADING.match(head):
        return False
    blank = False
    for i, line in enumerate(lines[1:], start=1):
        if not line or line.isspace():
            blank = True  # only whitespace may follow now
            continue
        if blank:
            return False
        last = i == len(lines) - 1
        if not (_ITEM.match(line) or (last and _ITEM_START.fullmatch(line))):
            return False
    return True


class _BlockHold:
    """Stage 1: passes raw text on, holding back from the first line start that could begin the
    trailing sources block."""

    def __init__(self) -> None:
        self._held = ""
        self._at_line_start = True  # the held text starts at a line start

    def feed(self, delta: str) -> str:
        buf = self._held + delta
        starts = [0] if self._at_line_start else []
        starts += [i + 1 for i, ch in enumerate(buf) if ch == "\n"]
        cut = next((p for p in starts if could_be_sources_block(buf[p:])), None)
        self._at_line_start = cut is not None
        if cut is None:
            cut = len(buf)
        self._held = buf[cut:]
        return buf[:cut]


class ValidatedStream:
    """The validated deltas of one answer. ``feed`` each model delta and send what it returns (often
    ``""`` while something is held); when the model is done, send ``rest(final)`` where ``final`` is
    the validated answer (``validate_citations(all deltas, retrieved).text``)."""

    def __init__(self, retrieved: Iterable[str]) -> None:
        self._blocks = _BlockHold()
        self._tags = CitationStreamFilter(retrieved)
        self._sent: list[str] = []
        self.diverged = False  # set if ``rest`` found the sent text not a prefix of the final one

    @property
    def sent(self) -> str:
        return "".join(self._sent)

    def feed(self, delta: str) -> str:
        out = self._tags.feed(self._blocks.feed(delta))
        if out:
            self._sent.append(out)
        return out

    def rest(self, final: str) -> str:
        """What remains to send so that the deltas add up to ``final``."""
        sent = self.sent
        if not final.startswith(sent):
            self.diverged = True
            return ""
        self._sent.append(final[len(sent) :])
        return final[len(sent) :]
