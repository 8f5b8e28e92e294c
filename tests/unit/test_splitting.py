"""Splitting (docs/ingestion.md): chunk size is a hard limit, consecutive chunks overlap, Markdown splits at
headings, PDF page numbers follow their chunks."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ragchat.domain.splitting import split_pages, split_text

REPO = Path(__file__).resolve().parents[2]


def _bench_data() -> Path | None:
    for candidate in (
        os.environ.get("RAGCHAT_BENCH_DATA", ""),
        str(REPO.parent / "shared" / "bench-data"),
    ):
        if candidate and (Path(candidate) / "scifact" / "corpus.jsonl").is_file():
            return Path(candidate)
    return None


def _scifact_texts(limit: int = 400) -> list[str]:
    data = _bench_data()
    if data is None:
        pytest.skip("SciFact bench data not available")
    texts = []
    with (data / "scifact" / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            texts.append(f"{doc['title']}\n\n{doc['text']}")
            if len(texts) >= limit:
                break
    return texts


def _overlap(a: str, b: str) -> int:
    """Length of the longest suffix of ``a`` that is a prefix of ``b``."""
    for n in range(min(len(a), len(b)), 0, -1):
        if a.endswith(b[:n]):
            return n
    return 0


PROSE = " ".join(
    f"Sentence number {i} talks about cerebral white matter development in preterm infants."
    for i in range(60)
)


def test_short_text_is_one_chunk() -> None:
    assert split_text("  Hello world.\n", content_type="text/plain") == ["Hello world."]


@pytest.mark.parametrize("blank", ["", "   ", "\n\n\t \n"])
def test_blank_text_gives_no_chunks(blank: str) -> None:
    assert split_text(blank, content_type="text/plain") == []


def test_long_prose_is_split_within_size_with_about_100_chars_overlap() -> None:
    chunks = split_text(PROSE, content_type="text/plain")
    assert len(chunks) >= 5
    assert all(0 < len(c) <= 1000 for c in chunks)
    for a, b in itertools.pairwise(chunks):
        assert 50 <= _overlap(a, b) <= 100
        assert not b[0].isspace() and b.split()[0] in a  # the overlap starts at a whole word
    # nothing is lost: every word of the input is in some chunk, in order
    assert " ".join(chunks).split()[-1] == PROSE.split()[-1]
    assert all(c in PROSE for c in chunks)


def test_paragraph_boundaries_are_preferred() -> None:
    para_a = "Alpha " * 100  # 600 chars
    para_b = "Beta " * 100  # 500 chars
    chunks = split_text(f"{para_a.strip()}\n\n{para_b.strip()}", content_type="text/plain", overlap=0)
    assert chunks == [para_a.strip(), para_b.strip()]


def test_a_word_longer_than_the_chunk_size_is_cut_by_characters() -> None:
    chunks = split_text("x" * 2500, content_type="text/plain")
    assert all(len(c) <= 1000 for c in chunks)
    assert "".join(chunks).count("x") >= 2500


def test_custom_sizes_are_honoured() -> None:
    chunks = split_text(PROSE, content_type="text/plain", chunk_size=200, overlap=20)
    assert all(len(c) <= 200 for c in chunks)
    assert len(chunks) > len(PROSE) // 200


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (100, 100), (100, -1)])
def test_bad_sizes_are_rejected(size: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        split_text("text", content_type="text/plain", chunk_size=size, overlap=overlap)


def test_splitting_is_deterministic() -> None:
    assert split_text(PROSE, content_type="text/plain") == split_text(PROSE, content_type="text/plain")


def test_windows_newlines_are_normalised() -> None:
    chunks = split_text("line one\r\nline two\r\n", content_type="text/plain")
    assert chunks == ["line one\nline two"]


MARKDOWN = "\n\n".join(
    [
        "# Guide",
        "Intro paragraph. " * 10,
        "## Installation",
        "Run the installer and follow the prompts. " * 12,
        "## Usage",
        "```\nragchat serve\n```",
        "Ask questions about your notes. " * 12,
    ]
)


def test_markdown_chunks_start_at_headings_without_overlap() -> None:
    chunks = split_text(MARKDOWN, content_type="text/markdown", chunk_size=600)
    assert all(len(c) <= 600 for c in chunks)
    starts = [c for c in chunks if c.startswith("## ")]
    assert any(c.startswith("## Installation") for c in starts)
    assert any(c.startswith("## Usage") for c in starts)
    # the code fence is kept whole
    assert any("```\nragchat serve\n```" in c for c in chunks)


def test_markdown_content_type_parameters_are_ignored() -> None:
    plain = split_text(MARKDOWN, content_type="text/markdown", chunk_size=600)
    assert split_text(MARKDOWN, content_type="Text/Markdown; charset=utf-8", chunk_size=600) == plain


def test_split_pages_keeps_page_metadata_and_numbers_chunks_across_pages() -> None:
    pages = [(PROSE, {"page": 1}), ("Short second page.", {"page": 2}), ("   ", {"page": 3})]
    chunks = split_pages(pages, content_type="application/pdf")
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert chunks[-1].text == "Short second page."
    assert chunks[-1].metadata == {"page": 2}
    assert {c.metadata["page"] for c in chunks[:-1]} == {1}
    chunks[0].metadata["page"] = 99  # each chunk has its own copy
    assert pages[0][1] == {"page": 1}


def test_scifact_chunks_never_exceed_the_size() -> None:
    total = 0
    for text in _scifact_texts():
        chunks = split_text(text, content_type="text/plain")
        assert chunks, "a non-blank abstract gives at least one chunk"
        assert all(0 < len(c) <= 1000 and c == c.strip() for c in chunks)
        total += len(chunks)
    assert total >= 400


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(min_size=0, max_size=3000),
    size=st.integers(min_value=20, max_value=400),
    ratio=st.floats(min_value=0.0, max_value=0.5),
    markdown=st.booleans(),
)
def test_random_unicode_respects_size_and_loses_no_words(
    text: str, size: int, ratio: float, markdown: bool
) -> None:
    overlap = int(size * ratio)
    ctype = "text/markdown" if markdown else "text/plain"
    chunks = split_text(text, content_type=ctype, chunk_size=size, overlap=overlap)
    assert all(0 < len(c) <= size and c.strip() == c for c in chunks)
    normalised = text.replace("\r\n", "\n").replace("\r", "\n")
    assert all(c in normalised for c in chunks)
    if not normalised.strip():
        assert chunks == []
    else:
        joined = "".join("".join(c.split()) for c in chunks)
        # every non-space character appears (overlap may repeat some)
        assert len(joined) >= len("".join(normalised.split()))


def test_lone_surrogates_from_json_do_not_crash_the_splitter() -> None:
    assert split_text("caf\ud800e", content_type="text/plain") == ["caf\ufffde"]


# Long texts are handed to the splitter in bounded windows (linear time, issue 8). These properties
# hold however the windows fall: small chunk sizes make texts of a few thousand characters span
# many windows.
_SOME_TEXT = st.text(
    alphabet=st.sampled_from([*"abcdé .,;\n\n#-*`\u0301\u200d", "\U0001f44d", "\U0001f3fd"]),
    max_size=6000,
)


@settings(max_examples=60, deadline=None)
@given(text=_SOME_TEXT, size=st.integers(min_value=10, max_value=300), markdown=st.booleans())
def test_without_overlap_the_chunks_are_the_text_in_order(text: str, size: int, markdown: bool) -> None:
    ctype = "text/markdown" if markdown else "text/plain"
    chunks = split_text(text, content_type=ctype, chunk_size=size, overlap=0)
    assert all(0 < len(c) <= size for c in chunks)
    assert "".join("".join(c.split()) for c in chunks) == "".join(text.split())


_SPACES = ("Zs", "Zl", "Zp", "Cc", "Cs")


@settings(max_examples=40, deadline=None)
@given(
    unit=st.text(alphabet=st.characters(blacklist_categories=_SPACES), min_size=1, max_size=5),
    repeat=st.integers(min_value=1, max_value=3000),
    size=st.integers(min_value=20, max_value=500),
)
def test_text_without_whitespace_is_cut_into_full_chunks(unit: str, repeat: int, size: int) -> None:
    text = unit * repeat
    chunks = split_text(text, content_type="text/plain", chunk_size=size, overlap=size // 10)
    assert "".join(chunks) == text  # no word boundary to overlap at: consecutive pieces
    assert all(0 < len(c) <= size for c in chunks)


def test_a_megabyte_without_whitespace_is_split_into_full_chunks() -> None:
    text = "x" * 1_000_000
    chunks = split_text(text, content_type="text/plain")
    assert "".join(chunks) == text
    assert len(chunks) == -(-len(text) // 900)  # every chunk full except the last


def test_long_prose_keeps_overlapping_across_window_edges() -> None:
    sentence = "Every sentence of this long paragraph says a little more about nothing at all"
    text = " ".join(f"{sentence} {i}" for i in range(3000))  # 250 k characters, no sentence ends
    chunks = split_text(text, content_type="text/plain")
    assert all(len(c) <= 1000 for c in chunks)
    assert all(_overlap(a, b) > 0 for a, b in itertools.pairwise(chunks))
    assert "".join(chunks[-1].split())[-4:] == "2999"


def test_combining_marks_stay_with_their_letter_in_long_unbroken_text() -> None:
    text = "e\u0301" * 40_000  # 80 k code points, 40 k user-perceived characters, no whitespace
    chunks = split_text(text, content_type="text/plain")
    assert "".join(chunks) == text
    assert not any(c.startswith("\u0301") for c in chunks)
