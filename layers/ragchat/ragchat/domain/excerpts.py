"""What a source shows of its passage (issue 33: a citation shows what it supports).

A stored source keeps a short excerpt of its chunk (``SOURCE_TEXT_CHARS``) for lists, exports and
the terminal; the whole passage is one request away (``GET /notes/{id}``). The excerpt is plain
text (no Markdown headings, emphasis marks or link syntax), starts at the first of the chunk's
sentences the answer quotes (the chunk's first sentence when it quotes none: a model's paraphrase),
holds whole sentences, and a sentence longer than the room is cut between words with "…". One that
does not start at the chunk's start begins with "…".
"""

from __future__ import annotations

from collections.abc import Sequence

from ragchat.domain.citations import SOURCE_TEXT_CHARS, strip_citations
from ragchat.domain.extractive import plain_text, split_sentences
from ragchat.domain.models import Hit, SourceRef
from ragchat.domain.prompts import truncate_at_word

ELLIPSIS = "…"


def excerpt(text: str, answer: str = "", limit: int = SOURCE_TEXT_CHARS) -> str:
    """The excerpt of a chunk of ``text`` cited by ``answer`` (see the module docstring)."""
    sentences = [s for s in (plain_text(s) for s in split_sentences(text)) if s]
    if not sentences:
        return truncate_at_word(" ".join(text.split()), limit)
    said = " ".join(plain_text(strip_citations(answer)).split()) if answer else ""
    start = next((i for i, s in enumerate(sentences) if said and s in said), 0)
    lead = ELLIPSIS if start else ""
    out = lead + sentences[start]
    if len(out) > limit:
        return truncate_at_word(out, limit)
    for sentence in sentences[start + 1 :]:
        if len(out) + 1 + len(sentence) > limit:
            room = limit - len(out) - 1
            if room >= 40:  # enough of the next sentence to be worth reading
                out += " " + truncate_at_word(sentence, room)
            break
        out += " " + sentence
    return out


def source_refs(hits: Sequence[Hit], ids: Sequence[str], answer: str = "") -> list[SourceRef]:
    """Stored sources: one per valid id, in the order of ``ids``, each with the :func:`excerpt` of
    its passage that ``answer`` quotes."""
    by_id = {h.id: h for h in hits}
    return [SourceRef(i, excerpt(by_id[i].text, answer)) for i in ids if i in by_id]
