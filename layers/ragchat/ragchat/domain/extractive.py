"""The extractive answerer (docs/retrieval.md): an answer made of the retrieved notes' own sentences.

The retrieved chunks are split into sentences; each sentence is scored against the question with
BM25 (k1=1.2, b=0.75) over the candidate sentences, after lower-casing, stop-word removal and a
light plural folding. Up to ``max_sentences`` best sentences are kept (ties: the better-ranked
hit, then the earlier sentence); a sentence that nearly repeats one already kept (chunks overlap,
documents repeat themselves) is skipped for the next best. The kept sentences are given in reading
order: documents in the order retrieval first ranked them, and within a document by chunk, then by
position. Each is plain text — Markdown emphasis, code spans, links, quote marks and table pipes
removed — followed by ``[source: <id>]``, then the ``Sources: id1, id2`` line. When no sentence
shares a word with the question (retrieval already judged the notes relevant) the first sentence of
the top note is given. Deterministic, and the output passes ``validate_citations`` unchanged.

By meaning: given a ``relevance`` callable (each text's similarity to the question, e.g. the cosine
of sentence embeddings; the caller supplies it, this module imports nothing outer) a sentence scores
its similarity + ``LEXICAL_WEIGHT`` × its BM25 over the best BM25 (0 without a shared word), so a
question in the user's own words finds the sentence that means it, while an exact identifier or
error code still wins a near-tie. A sentence that refers back ("It was about 100 metres tall.")
is also read with the sentence before it in its note, and the higher similarity counts. The
sentences within ``RELATIVE_MARGIN`` of the best score are kept (at most ``max_sentences``),
near-duplicates skipped, in reading order, as above. Only the ``MAX_SCORED_SENTENCES`` best by BM25
(ties: retrieval rank, then position) are compared by meaning, which bounds what an answer costs to
embed.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ragchat.domain.citations import strip_citations, with_sources_line
from ragchat.domain.context import title_words
from ragchat.domain.markdown_marks import unemphasise, unlink
from ragchat.domain.models import Hit
from ragchat.domain.prompts import GUARD_REPLY, truncate_at_word

MAX_SENTENCE_CHARS = 400
_K1, _B = 1.2, 0.75

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves tell please explain describe give
    know much many may might must shall also""".split()  # noqa: SIM905
)

_ABBREVIATIONS = frozenset(
    """e.g i.e vs cf al approx ca fig figs eq eqs ref refs no nos vol vols p pp ed eds dr mr mrs ms
    prof sr jr st mt inc ltd co corp dept est resp jan feb mar apr jun jul aug sep sept oct nov dec
    u.s u.k a.m p.m ph.d""".split()  # noqa: SIM905
)

# End of a sentence: terminal punctuation, optional closing quotes/brackets, then whitespace.
# A sentence end: starts only where a run of end marks starts, and takes it whole (possessive): from
# every ``!`` of a run of them the old pattern scanned to the run's end (issue 30: quadratic).
_BOUNDARY = re.compile(r"(?<![.!?…])([.!?…]++)[\"'”’)\]]*+\s+")
_BULLET = re.compile(r"\s*(?:[-*•]|\d+[.)])\s")
_WORD = re.compile(r"\w+")


_HEADING = re.compile(r"^\s{0,3}#{1,6}(\s|$)")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
# possessive throughout: ``\s*\|?\s*`` split a run of spaces every way (issue 30: quadratic); each
# part is followed by something it cannot match, so nothing given back could ever have helped
_TABLE_RULE = re.compile(r"^\s*+\|?+\s*+:?+-{2,}+:?+\s*+(?:\|\s*+:?+-{2,}+:?+\s*+)*+\|?+\s*+$")
_CODE = re.compile(r"`+([^`]*)`+")
# quote markers: the leading run of spaces and ``>`` up to its last ``>`` (``^(\s*>)+`` kept a
# backtracking frame per marker: memory and time grew faster than the run)
_QUOTE = re.compile(r"^[\s>]*>\s?")
NEAR_DUPLICATE = 0.8  # share of common words (Jaccard) above which two sentences say the same
# By meaning (``relevance`` given): the weight of the normalised BM25 added to the similarity, and
# how far below the best score a sentence may be and still be quoted.
LEXICAL_WEIGHT = 0.1
# chosen on SQuAD 2.0 (bench/bench_extractive.py): as complete as three BM25 sentences, a quarter shorter
RELATIVE_MARGIN = 0.15
#: sentences compared by meaning per answer (each costs an embedding the first time it is seen): the
#: best by BM25, ties by retrieval rank and position, so a paraphrase reads the top notes' sentences
MAX_SCORED_SENTENCES = 24

Relevance = Callable[[list[str]], list[float]]
"""Each candidate sentence's similarity to the question (the question is the caller's to embed)."""


def plain_text(sentence: str) -> str:
    """A sentence without Markdown markup: links keep their text, emphasis and code spans lose their
    marks (a code span's text stays as written: ``ENABLE_RATE_LIMITING``), quote markers go, table
    cells are joined with "; "."""
    text = _QUOTE.sub("", sentence)
    if _TABLE_ROW.match(text):
        text = "; ".join(c for c in _cells(text) if c)
    text = unlink(text)
    # a code span's text is kept as written: the even parts are prose, the odd ones code
    parts = _CODE.split(text)
    for i in range(0, len(parts), 2):
        for _ in range(2):  # nested emphasis (***both***)
            parts[i] = unemphasise(parts[i])  # underscores only at word edges: MAX_BODY_BYTES is one word
    return _STRAY_MARKS.sub("", " ".join("".join(parts).split())).strip()


# emphasis marks left over where a sentence split ran through "**Tools.** AWS credentials…"
_STRAY_MARKS = re.compile(
    r"^(?:\*{1,3}|_{2,3}|~~)(?=\s)|(?<=\s)(?:\*{1,3}|_{2,3}|~~)$|(?<=[.!?:;,])(?:\*{1,3}|_{2,3}|~~)(?=\s|$)"
)
SUMMARY_NOTE = (
    "Summaries need a model (the Claude answer mode); without one, here are the passages that match best:"
)
_SUMMARY_ASK = re.compile(r"\b(summari[sz]e|summary|overview|tl;?dr)\b", re.IGNORECASE)


def _mid_sentence(pos: int, sentence: str) -> bool:
    """A passage's first sentence that starts in lower case began before the passage did (a chunk
    boundary ran through it): quoted, it would read "transitions; t3.small.search…"."""
    return pos == 0 and sentence[:1].islower()


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``; paragraphs and list items always end a sentence; abbreviations
    (``e.g.``, ``Dr.``, ``et al.``), initials (``J. Smith``) and decimals (``1.5``) do not. A table
    row is a sentence of its own, each cell named by its column's header ("| Half plot | 48 pounds |"
    under "| Plot | Rent per year |" reads "Plot: Half plot; Rent per year: 48 pounds"): a row
    alone does not say what its numbers are. A sentence that introduces a list ("Some visitors park
    for free:") is read with its items ("…: visitors of a patient in intensive care; blue badge
    holders."), up to ``LIST_CHARS``: alone it says nothing."""
    return [sentence for sentence, _ in _split(text)]


def _split(text: str) -> list[tuple[str, bool]]:
    """:func:`split_sentences`, each sentence with whether it is a table row."""
    sentences: list[str] = []
    rows: set[int] = set()  # the sentences that are table rows
    lead: int | None = None  # the sentence introducing a list, while its items come
    listed: set[int] = set()  # sentences that took in a list's items
    for paragraph in re.split(r"\n[ \t]*\n", text):
        segments: list[str] = []
        after_row = False
        alone = False  # the last segment is one line so far (a heading line may label what follows)
        header: list[str] | None = None
        for line in paragraph.split("\n"):
            if _HEADING.match(line):  # a Markdown heading labels the text; it is not an answer
                continue
            if _TABLE_RULE.match(line):  # a rule; a table row right above it is the header row
                if after_row:
                    header = _cells(segments.pop())
                continue
            row = bool(_TABLE_ROW.match(line))  # a table row is a statement of its own
            if not row:
                header = None
            elif header is not None:  # each cell named by its column: "Plot: Half plot; Rent: 48 pounds"
                line = _labelled(header, line)
            joins = segments and not row and not after_row and not _BULLET.match(line)
            if joins and not (alone and heading_line(segments[-1]) and line.lstrip()[:1].isupper()):
                segments[-1] += " " + line
                alone = False
            else:  # a heading line ("Cargo bikes") never runs into the sentence under it
                segments.append(line)
                alone = True
            after_row = row
        for segment in segments:
            bullet = _BULLET.match(segment)
            if bullet:
                segment = segment[bullet.end() :]
            label, rest = _run_in(" ".join(segment.split()))
            parts = label + _split_segment(rest)
            if bullet and parts and lead is not None and len(sentences[lead]) < LIST_CHARS:
                # an item of the list the sentence before introduces ("… park for free:")
                item = parts.pop(0).rstrip(";,.")
                joiner = " " if sentences[lead].endswith(":") else "; "
                sentences[lead] += joiner + item
                listed.add(lead)
                if parts:
                    lead = None
            elif not bullet or parts:
                lead = None
            if _TABLE_ROW.match(segment):
                rows.update(range(len(sentences), len(sentences) + len(parts)))
            sentences.extend(parts)
            if not bullet and parts and parts[-1].endswith(":"):
                lead = len(sentences) - 1
    ended = [s + "." if i in listed and s[-1].isalnum() else s for i, s in enumerate(sentences)]
    return [(s, i in rows) for i, s in enumerate(ended) if any(c.isalnum() for c in s)]


#: a line of at most this many words, without end punctuation, is a heading when a sentence starts
#: on the next line ("Cargo bikes" above "Employees may park…"); a PDF's wrapped line is longer
HEADING_WORDS = 6
HEADING_CHARS = 60
_EMPHASIS_EDGE = re.compile(r"^(?:\*\*|__)|(?:\*\*|__)$")


def heading_line(line: str) -> bool:
    """Is ``line`` a plain-text (or bold) heading: short, capitalised, no end punctuation, not
    ending on a stop word (a wrapped line of a sentence: "The office is open until")?"""
    text = _EMPHASIS_EDGE.sub("", line.strip()).strip()
    words = text.split()
    return (
        0 < len(words) <= HEADING_WORDS
        and len(text) <= HEADING_CHARS
        and text[:1].isupper()
        and text[-1].isalnum()
        and words[-1].lower() not in STOP_WORDS
    )


# A bold run-in label ending a sentence at a paragraph's (or list item's) start: "**Tools.** The fuel
# dock opens at 7" (also "__Tools__. The…", and "Tools.** The…" where a chunk boundary cut off the
# opening marks). Bounded and anchored: linear in the text.
_RUN_IN = re.compile(r"(?:\*\*|__)?+([^*_\n]{1,80}?)(?:\.(?:\*\*|__)|(?:\*\*|__)\.)\s+(?=\S)")
#: a run-in label of at most this many words is a heading ("Tools.", "Opening hours."): not quoted;
#: a longer one is a bold sentence of its own ("**No dogs allowed.** Cats…")
RUN_IN_WORDS = 2


def _run_in(segment: str) -> tuple[list[str], str]:
    """(the sentence a bold run-in label makes, if it is one: [] for a heading-like label, the rest
    of ``segment``). Bold words that are part of a sentence ("**Never** share…") are no label; a
    label ending with a colon ("**Note:** Back up first") reads with its text and stays."""
    found = _RUN_IN.match(segment)
    if found is None or not any(c.isalnum() for c in found.group(1)):
        return [], segment
    label = found.group(1).strip()
    return ([] if len(label.split()) <= RUN_IN_WORDS else [label + "."]), segment[found.end() :]


#: a sentence introducing a list ("Some visitors park for free:") is read with its items, as long
#: as it is shorter than this (the items after that stay sentences of their own)
LIST_CHARS = 300


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def _labelled(header: list[str], row: str) -> str:
    """A table row with each cell prefixed by its column's header (as written when the counts
    differ or a header cell is empty)."""
    cells = _cells(row)
    if len(cells) != len(header):
        return row
    return "| " + " | ".join(f"{h}: {c}" if h and c else c for h, c in zip(header, cells, strict=True)) + " |"


def _last_word(text: str, start: int, end: int) -> str:
    """The last run of non-space characters of ``text[start:end]`` when it reaches ``end`` ("" when
    ``text[end - 1]`` is a space). Walks back from ``end`` only: a search from ``start`` (``(\\S+)$``)
    re-read the whole sentence at every abbreviation, quadratic in a sentence of them."""
    at = end
    while at > start and not text[at - 1].isspace():
        at -= 1
    return text[at:end]


def _split_segment(segment: str) -> list[str]:
    out: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(segment):
        end = match.end()
        if end >= len(segment):
            break
        following = segment[end]
        if following.islower():
            continue
        if match.group(1) == ".":
            word = _last_word(segment, start, match.start()).lower().lstrip("(\"'")
            if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
                continue
        out.append(segment[start:end].strip())
        start = end
    out.append(segment[start:].strip())
    return [s for s in out if s]


@functools.lru_cache(maxsize=1 << 16)
def _fold(token: str) -> str:
    """Light plural folding: ``studies`` → ``study``, ``diseases`` → ``disease``."""
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def tokens(text: str) -> list[str]:
    """Content words of ``text``: lower-cased, stop words and one-letter words removed, folded."""
    return [
        _fold(w) for w in _WORD.findall(text.lower()) if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())
    ]


@dataclass(slots=True)
class _Candidate:
    hit_rank: int
    position: int
    text: str
    terms: Counter[str]
    score: float = 0.0
    meaning: str = ""  # the text compared by meaning: ``text``, or a table row with its title


def _unique_hits(hits: Sequence[Hit]) -> list[Hit]:
    seen: set[str] = set()
    out: list[Hit] = []
    for hit in hits:
        if hit.id not in seen:
            seen.add(hit.id)
            out.append(hit)
    return out


def extractive_answer(
    question: str,
    hits: Sequence[Hit],
    *,
    max_sentences: int = 3,
    min_relative: float = 0.25,
    relevance: Relevance | None = None,
    titles: Mapping[str, str] | None = None,
) -> str:
    """An answer made of at most ``max_sentences`` sentences of ``hits`` (best first by retrieval).

    Without ``relevance``, sentences scoring below ``min_relative`` × the best BM25 are left out;
    with it, sentences more than ``RELATIVE_MARGIN`` below the best score by meaning (see the module
    docstring); ``titles`` (document id → title) puts a table row's document title in front of it
    when it is compared by meaning. Without hits the guard reply is returned (the caller normally
    guards first). Errors of ``relevance`` propagate (the caller decides on a fallback)."""
    ranked = _unique_hits(hits)
    if not ranked:
        return GUARD_REPLY
    known = titles or {}

    def title_of(hit: Hit) -> str | None:
        return known.get(hit.document_id or "")

    candidates = [
        _Candidate(rank, pos, plain, Counter(tokens(plain)), meaning=titled(plain, row, title_of(hit)))
        for rank, hit in enumerate(ranked)
        for pos, (sentence, row) in enumerate(_split(strip_citations(hit.text)))
        if (plain := plain_text(sentence)) and not _mid_sentence(pos, plain)
    ]
    if not candidates:
        return GUARD_REPLY
    _score(candidates, set(tokens(question)))
    if relevance is not None:
        chosen = _by_meaning(candidates, relevance, max_sentences)
    else:
        chosen = _by_words(candidates, min_relative, max_sentences)
    chosen.sort(key=_reading_order(ranked))
    parts = [
        f"{truncate_at_word(c.text, MAX_SENTENCE_CHARS)} [source: {ranked[c.hit_rank].id}]" for c in chosen
    ]
    used = list(dict.fromkeys(ranked[c.hit_rank].id for c in chosen))
    if _SUMMARY_ASK.search(question):  # a quote is not a summary: say what would make one
        parts.insert(0, SUMMARY_NOTE)
    return with_sources_line(" ".join(parts), used)


def _best_first(candidates: list[_Candidate]) -> list[_Candidate]:
    """By score; ties: the better-ranked hit, then the earlier sentence."""
    return sorted(candidates, key=lambda c: (-c.score, c.hit_rank, c.position))


def _by_words(candidates: list[_Candidate], min_relative: float, limit: int) -> list[_Candidate]:
    """The best sentences by BM25 (the top note's first sentence when none shares a word)."""
    ordered = _best_first(candidates)
    best = ordered[0].score
    if best <= 0:
        return [min(candidates, key=lambda c: (c.hit_rank, c.position))]
    return _distinct([c for c in ordered if c.score >= min_relative * best], limit)


def _by_meaning(candidates: list[_Candidate], relevance: Relevance, limit: int) -> list[_Candidate]:
    """The best sentences by similarity (a sentence that refers back: also read with the one before
    it, the higher counting) + ``LEXICAL_WEIGHT`` × normalised BM25, within ``RELATIVE_MARGIN`` of
    the best, among the ``MAX_SCORED_SENTENCES`` best by BM25 (ties: the better-ranked hit, then the
    earlier sentence)."""
    text_at = {(c.hit_rank, c.position): c.text for c in candidates}
    candidates = _best_first(candidates)[:MAX_SCORED_SENTENCES]
    # a sentence that refers back ("It was 100 metres tall.") is also read with the one before it
    windows = {
        i: with_before(before, c.text)
        for i, c in enumerate(candidates)
        if refers_back(c.text) and (before := text_at.get((c.hit_rank, c.position - 1)))
    }
    scored = relevance([c.meaning or c.text for c in candidates] + list(windows.values()))
    if len(scored) != len(candidates) + len(windows):
        raise ValueError(f"relevance gave {len(scored)} scores for {len(candidates) + len(windows)} texts")
    in_context = dict(zip(windows, scored[len(candidates) :], strict=True))
    similarities = [max(alone, in_context.get(i, alone)) for i, alone in enumerate(scored[: len(candidates)])]
    top_bm25 = max(c.score for c in candidates)
    for c, similarity in zip(candidates, similarities, strict=True):
        lexical = c.score / top_bm25 if top_bm25 > 0 else 0.0
        c.score = float(similarity) + LEXICAL_WEIGHT * lexical
    ordered = _best_first(candidates)
    floor = ordered[0].score - RELATIVE_MARGIN
    return _distinct([c for c in ordered if c.score >= floor], limit)


def with_before(before: str, sentence: str) -> str:
    """A sentence that refers back, read with the one before it."""
    return f"{before} {sentence}"


def relevance_texts(text: str, title: str | None = None) -> list[str]:
    """Every text the answer by meaning may embed for a chunk of ``text`` in a document titled
    ``title``: its plain sentences (a table row with the title in front), and each sentence that
    refers back read with the one before it (what :func:`extractive_answer` passes to
    ``relevance``; embedded ahead of time by ``ragchat.services.evidence``)."""
    split = [(plain_text(s), row) for s, row in _split(strip_citations(text))]
    plains = [p for p, _ in split]
    windows = [
        with_before(before, p) for before, p in itertools.pairwise(plains) if before and p and refers_back(p)
    ]
    return [titled(p, row, title) for p, row in split if p] + windows


def titled(sentence: str, row: bool, title: str | None) -> str:
    """The text a sentence is compared by meaning as: a table row ("Length of stay: Up to 4 hours;
    Charge: 6 pounds") with its document's title words in front, as a chunk's vector is computed
    with its header; a row names neither the place nor the thing its numbers belong to. Any other
    sentence as it is."""
    words = title_words(title) if row and title else ""
    return f"{words}: {sentence}" if words else sentence


#: first words by which a sentence refers back to the one before it (and names nothing alone)
REFERRING_WORDS = frozenset(
    """it its this these that those they their them he she his her such both either neither there
    here then also however otherwise instead""".split()  # noqa: SIM905
)


def refers_back(sentence: str) -> bool:
    first = _WORD.match(sentence.lstrip("\"'(“‘ "))
    return first is not None and first.group(0).lower() in REFERRING_WORDS


def _score(candidates: list[_Candidate], query: set[str]) -> None:
    """BM25 of each candidate sentence against the question's words, over the candidates."""
    n = len(candidates)
    avg_len = sum(sum(c.terms.values()) for c in candidates) / n or 1.0
    df = Counter(term for c in candidates for term in c.terms.keys() & query)
    for c in candidates:
        length = sum(c.terms.values())
        for term in query & c.terms.keys():
            tf = c.terms[term]
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            c.score += idf * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * length / avg_len))


def _near_duplicate(a: _Candidate, b: _Candidate) -> bool:
    if a.text.casefold() == b.text.casefold():
        return True
    x, y = set(a.terms), set(b.terms)
    if not x or not y:
        return False
    return len(x & y) / len(x | y) >= NEAR_DUPLICATE or x <= y or y <= x


def _distinct(ordered: list[_Candidate], limit: int) -> list[_Candidate]:
    """The best ``limit`` candidates, skipping any that nearly repeats one already taken."""
    chosen: list[_Candidate] = []
    for c in ordered:
        if len(chosen) == limit:
            break
        if not any(_near_duplicate(c, k) for k in chosen):
            chosen.append(c)
    return chosen


def _reading_order(ranked: list[Hit]) -> Callable[[_Candidate], tuple[int, int, int]]:
    """Documents in the order retrieval first ranked them; within one, by chunk then position (a
    hit without a document id is a document of its own)."""
    doc_rank: dict[str, int] = {}
    for hit in ranked:
        doc_rank.setdefault(hit.document_id or f"\0{hit.id}", len(doc_rank))

    def key(c: _Candidate) -> tuple[int, int, int]:
        hit = ranked[c.hit_rank]
        return doc_rank[hit.document_id or f"\0{hit.id}"], hit.chunk_index, c.position

    return key
