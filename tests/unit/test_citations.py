"""Citation validation (docs/retrieval.md): only retrieved ids survive, invalid ones are removed and noted,
the standard Sources line closes the answer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from ragchat.domain.citations import CITATION_RE, strip_citations, validate_citations

RETRIEVED = ["note-1", "note_2", "N3"]


def test_spec_regex() -> None:
    assert CITATION_RE.pattern == r"\[source:\s*([A-Za-z0-9_-]+)\]"
    assert CITATION_RE.findall("[source: a-1] [source:b_2] [source:   C3] [Source: x] [source: a.b]") == [
        "a-1",
        "b_2",
        "C3",
    ]


def test_valid_citations_are_kept_and_sources_line_appended() -> None:
    answer = "Aspirin helps [source: note_2]. Rest too [source: note-1]."
    result = validate_citations(answer, RETRIEVED)
    assert result.text == answer + "\n\nSources: note_2, note-1"
    assert result.valid_ids == ["note_2", "note-1"]
    assert result.generated_ids == ["note_2", "note-1"]
    assert result.removed == []


def test_hallucinated_id_is_removed_noted_and_left_out_of_sources() -> None:
    result = validate_citations("Fact [source: note-1]. Made up [source: fake-99].", RETRIEVED)
    assert result.text == "Fact [source: note-1]. Made up. (Removed invalid citation)\n\nSources: note-1"
    assert result.generated_ids == ["note-1", "fake-99"]
    assert result.valid_ids == ["note-1"]
    assert result.removed == ["fake-99"]


def test_only_invalid_citations_gives_note_and_no_sources_line() -> None:
    result = validate_citations("Something [source: ghost].", RETRIEVED)
    assert result.text == "Something. (Removed invalid citation)"
    assert result.valid_ids == []
    assert "Sources:" not in result.text


def test_no_citations_leaves_text_alone() -> None:
    result = validate_citations("I cannot find that in the documents.", RETRIEVED)
    assert result.text == "I cannot find that in the documents."
    assert (result.generated_ids, result.valid_ids, result.removed) == ([], [], [])


def test_sources_are_listed_once_in_order_of_first_use() -> None:
    text = "A [source: N3]. B [source: note-1]. C [source: N3]."
    assert validate_citations(text, RETRIEVED).text.endswith("\n\nSources: N3, note-1")


def test_models_own_sources_line_is_replaced_not_duplicated() -> None:
    text = "Answer [source: note-1].\n\nSources: note-1, fake-2"
    result = validate_citations(text, RETRIEVED)
    assert result.text == "Answer [source: note-1]. (Removed invalid citation)\n\nSources: note-1"
    assert result.text.count("Sources:") == 1
    assert result.removed == ["fake-2"]


def test_bold_or_bulleted_sources_block_is_replaced() -> None:
    text = "Answer [source: note-1].\n\n**Sources:**\n- [source: note-1]\n- note_2"
    result = validate_citations(text, RETRIEVED)
    assert result.text == "Answer [source: note-1].\n\nSources: note-1, note_2"
    assert result.valid_ids == ["note-1", "note_2"]


def test_a_closing_prose_line_starting_with_source_is_not_mistaken_for_citations() -> None:
    text = "Answer [source: note-1].\nSource: the annual report of the company"
    result = validate_citations(text, RETRIEVED)
    assert result.text == text + "\n\nSources: note-1"


def test_ids_are_case_sensitive() -> None:
    result = validate_citations("X [source: NOTE-1].", RETRIEVED)
    assert result.removed == ["NOTE-1"]
    assert result.valid_ids == []


def test_disabled_validation_returns_text_unchanged_but_reports_ids() -> None:
    text = "Fact [source: note-1]. Made up [source: fake-99]."
    result = validate_citations(text, RETRIEVED, enabled=False)
    assert result.text == text
    assert result.generated_ids == ["note-1", "fake-99"]
    assert result.valid_ids == ["note-1"]
    assert result.removed == []


def test_validation_is_idempotent_on_examples() -> None:
    for text in [
        "Fact [source: note-1]. Made up [source: fake-99].",
        "Answer.\n\nSources: note-1",
        "[source: fake] only",
        "",
    ]:
        once = validate_citations(text, RETRIEVED).text
        assert validate_citations(once, RETRIEVED).text == once


_ids = st.sampled_from([*RETRIEVED, "fake-1", "zz"])
_piece = st.one_of(
    st.text(alphabet=st.characters(blacklist_characters="[]"), max_size=30),
    _ids.map(lambda i: f" [source: {i}]"),
    _ids.map(lambda i: f"\n\nSources: {i}"),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_piece, max_size=8).map("".join))
def test_validated_text_only_cites_retrieved_ids_and_is_stable(text: str) -> None:
    result = validate_citations(text, RETRIEVED)
    assert set(CITATION_RE.findall(result.text)) <= set(RETRIEVED)
    assert set(result.valid_ids) <= set(RETRIEVED)
    assert validate_citations(result.text, RETRIEVED).text == result.text
    if result.valid_ids:
        assert result.text.endswith("Sources: " + ", ".join(result.valid_ids))


def test_strip_citations_removes_tags_and_sources_line() -> None:
    text = "Users want refunds [source: note-1], fast [source: x]. \n\nSources: note-1"
    assert strip_citations(text) == "Users want refunds, fast."


def test_strip_citations_keeps_the_space_before_a_word_that_starts_with_a_dot() -> None:
    # an extractive answer quoted "Supported files are.txt,.md,.html and.pdf."
    text = "Supported files are .txt, .md, .html and .pdf [source: a]. Use .env files too [source: b]!"
    assert strip_citations(text) == "Supported files are .txt, .md, .html and .pdf. Use .env files too!"
