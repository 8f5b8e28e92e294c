"""What the extractive reader's readings (:mod:`ragchat.domain.reading`) make of a turn (docs/reader.md,
the extractive answerer with a reader).

- **What the reader reads** of a retrieved note (:func:`passage_of`): the note's own sentences as the
  extractive answerer splits them (:func:`ragchat.domain.extractive.split_sentences`: Markdown and
  plain headings left out or kept apart, a table row labelled by its header), as plain text, joined
  by a space (". " after one without an end mark: a heading, a row), with where each sentence is;
  the document's title on a first line of its own, as the reader was trained (SQuAD's article title
  above its paragraph). A span in the title is no answer; any other is inside known sentences, and
  a heading never runs into the sentence quoted ("Cargo bikes Employees may…").
- **The decision** (:func:`answers`): the best span over every passage read, by margin (best span −
  no answer); the turn is answered when that margin reaches the reader's threshold, refused otherwise.
- **The answer** (:func:`reader_answer`): the sentence(s) holding the best span — at most
  ``MAX_SENTENCES``; a sentence that refers back ("It opens at nine.") with the one before it — each
  followed by its ``[source: id]``, then the ``Sources:`` line. The span itself is what the citation
  highlights (:attr:`Found.span`).
- **A refusal's suggestions** (:func:`passage_suggestions`): the closest passages, by title and a
  short excerpt, so the user sees what the notes do say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragchat.domain.citations import strip_citations, with_sources_line
from ragchat.domain.context import title_words
from ragchat.domain.extractive import MAX_SENTENCE_CHARS, plain_text, refers_back, split_sentences
from ragchat.domain.models import Hit
from ragchat.domain.prompts import truncate_at_word
from ragchat.domain.reading import Reading

#: sentences an answer quotes at most
MAX_SENTENCES = 3
#: closest passages a refusal offers, and the characters of each shown
SUGGESTED_PASSAGES = 2
SUGGESTION_CHARS = 140
_ENDS = frozenset(".!?…:;\"'”’)]")


@dataclass(frozen=True, slots=True)
class Passage:
    """What the reader reads of one note: its plain sentences joined by a space (``text``) and each
    sentence's ``(start, end)`` in it."""

    hit_id: str
    text: str
    sentences: tuple[tuple[int, int], ...]
    #: where the note's own text starts (after its document's title line)
    body: int = 0


def passage_of(hit: Hit, title: str | None = None) -> Passage:
    """The passage the reader reads of ``hit`` in a document titled ``title`` (module docstring)."""
    head = title_words(title or "")
    text = f"{head}\n" if head else ""
    body = len(text)
    bounds: list[tuple[int, int]] = []
    for sentence in split_sentences(strip_citations(hit.text)):
        plain = plain_text(sentence)
        if not plain:
            continue
        if len(text) > body:  # a sentence without an end mark (a heading kept apart, a row) still ends
            text += " " if text[-1] in _ENDS else ". "
        bounds.append((len(text), len(text) + len(plain)))
        text += plain
    return Passage(hit.id, text, tuple(bounds), body)


@dataclass(frozen=True, slots=True)
class Found:
    """The best answer span of a turn: the passage it is in, the reading, and the passage's rank
    among the passages read (0 = the best retrieved)."""

    passage: Passage
    reading: Reading
    rank: int

    @property
    def hit_id(self) -> str:
        return self.passage.hit_id

    @property
    def margin(self) -> float:
        return self.reading.margin

    @property
    def span(self) -> str:
        """The answer span's text (what the citation highlights)."""
        return self.passage.text[self.reading.start : self.reading.end].strip()

    def sentences(self, limit: int = MAX_SENTENCES) -> list[str]:
        """The sentences holding the span (at most ``limit``); a first one that refers back is read
        with the one before it."""
        bounds = self.passage.sentences
        held = [i for i, (a, b) in enumerate(bounds) if a < self.reading.end and b > self.reading.start]
        if not held:
            return []
        first = held[0]
        if first > 0 and refers_back(self._text(first)) and len(held) < limit:
            held.insert(0, first - 1)
        return [self._text(i) for i in held[:limit]]

    def _text(self, i: int) -> str:
        a, b = self.passage.sentences[i]
        return self.passage.text[a:b]


def best_found(passages: Sequence[Passage], readings: Sequence[Reading]) -> Found | None:
    """The reading with the highest margin over all passages (ties: the better-ranked passage);
    ``None`` when no passage has a span in its text (a span in the title line does not count)."""
    if len(passages) != len(readings):
        raise ValueError(f"{len(readings)} readings for {len(passages)} passages")
    best: Found | None = None
    for rank, (passage, reading) in enumerate(zip(passages, readings, strict=True)):
        if not reading.found or reading.end > len(passage.text) or reading.start < passage.body:
            continue  # no span, or one in the title: no answer in the note
        if best is None or reading.margin > best.margin:
            best = Found(passage, reading, rank)
    return best


def answers(found: Found | None, threshold: float) -> bool:
    """Does the best span beat "no answer" by at least ``threshold`` (the reader's operating point)?"""
    return found is not None and found.margin >= threshold


def holder_first(hit_id: str, found_in: Sequence[Hit], hits: Sequence[Hit]) -> list[Hit]:
    """``hits`` with the note ``hit_id`` (one of ``found_in``, the notes the reader read) first: the
    note holding the answer is quoted, and sent to a model first, even when a re-ranking moved it."""
    holder = next(h for h in found_in if h.id == hit_id)
    return [holder, *(h for h in hits if h.id != hit_id)]


def reader_answer(found: Found, max_sentences: int = MAX_SENTENCES) -> str:
    """The extractive answer: the sentence(s) holding the span, each followed by its citation, then
    the ``Sources:`` line (passes ``validate_citations`` unchanged)."""
    quoted = [
        f"{truncate_at_word(s, MAX_SENTENCE_CHARS)} [source: {found.hit_id}]"
        for s in found.sentences(max_sentences)
    ]
    if not quoted:  # a span outside every sentence cannot happen (passage_of); the span itself then
        quoted = [f"{found.span} [source: {found.hit_id}]"]
    return with_sources_line(" ".join(quoted), [found.hit_id])


def passage_suggestions(
    hits: Sequence[Hit], titles: Mapping[str, str] | None = None, limit: int = SUGGESTED_PASSAGES
) -> list[str]:
    """The closest passages a refusal offers: 'Closest passage, in "<title>": <first sentence…>',
    one per document, best first."""
    out: list[str] = []
    seen: set[str] = set()
    for hit in hits:
        doc = hit.document_id or hit.id
        if doc in seen:
            continue
        passage = passage_of(hit)
        if not passage.text:
            continue
        seen.add(doc)
        title = (titles or {}).get(hit.document_id or "")
        where = f' in "{title}"' if title else ""
        out.append(f"Closest passage{where}: {truncate_at_word(passage.text, SUGGESTION_CHARS)}")
        if len(out) == limit:
            break
    return out
