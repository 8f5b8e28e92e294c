"""A text that begins with its long title line (issue 31): with chunk headers on, the title is not
embedded as a chunk of its own nor again as the next chunk's overlap; every chunk carries it in its
header, and all of the text after it is still in the chunks."""

from __future__ import annotations

from ragchat.domain.context import embedding_text
from ragchat.domain.parsing import ParseJob, parse_document

TITLE = (
    "Acute administration of recombinant Angiopoietin-1 ameliorates multiple-organ dysfunction "
    "syndrome and improves survival in murine sepsis."
)
SENTENCES = [f"Sentence {i} reports that angiopoietin dose {i} changed organ function." for i in range(40)]
BODY = TITLE + "\n\n" + " ".join(SENTENCES)


def _job(headers: bool = True, title: str = TITLE) -> ParseJob:
    return ParseJob("text/plain", title, chunk_size=1000, overlap=100, headers=headers, cpu_seconds=30)


def test_the_title_line_is_no_chunk_of_its_own_and_every_chunk_is_embedded_after_it() -> None:
    parsed = parse_document(BODY.encode(), _job())
    texts = [c.text for c in parsed.chunks]
    assert [c.index for c in parsed.chunks] == list(range(len(texts)))
    assert texts[0].startswith("Sentence 0 reports")  # not the title, nor the title's tail
    assert all(h == TITLE.replace("-", " ") for h in parsed.headers)
    embedded = [embedding_text(h, t) for h, t in zip(parsed.headers, texts, strict=True)]
    assert sum(e.count("murine sepsis") for e in embedded) == len(texts)  # once per chunk, no more
    assert all(s in " ".join(texts) for s in SENTENCES)  # nothing of the text is lost


def test_without_headers_or_with_another_title_the_chunks_are_as_split() -> None:
    for job in (_job(headers=False), _job(title="Sepsis notes")):
        parsed = parse_document(BODY.encode(), job)
        assert parsed.chunks[0].text == TITLE


def test_a_short_title_line_stays_at_the_start_of_the_first_chunk() -> None:
    title = "Angiopoietin in sepsis"
    parsed = parse_document((title + "\n\n" + " ".join(SENTENCES)).encode(), _job(title=title))
    assert parsed.chunks[0].text.startswith(title + "\n\nSentence 0")
    assert parsed.headers[0] == ""
