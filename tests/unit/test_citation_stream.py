"""Validated deltas (docs/chat.md): for any model answer and any chunking, the deltas sent add up to the
stored (validated) answer, and no delta ever carries an invented citation or the model's own
``Sources:`` list."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from ragchat.domain.citation_stream import ValidatedStream, could_be_sources_block
from ragchat.domain.citations import validate_citations

RETRIEVED = ["n-1", "n-2", "doc_3"]

PIECES = st.sampled_from(
    [
        "Blue",
        "sky",
        " ",
        "  ",
        "\t",
        "\n",
        "\n\n",
        ".",
        "[source: n-1]",
        "[source: n-2]",
        "[source:doc_3]",
        "[source: fake-9]",
        "[source:\nghost]",
        "[source: ",
        "[",
        "]",
        "Sources:",
        "Sources: n-1, n-2",
        "Sources: fake-9",
        "**Sources:**",
        "## Citations:",
        "Source: the 2019 report",
        "sources",
        "- n-1",
        "- [source: n-2]",
        "1. fake-9",
        "2)",
        "* item",
        "Citation",
        "x",
        "ſ",
    ]
)


def _stream(text: str, cuts: list[int]) -> tuple[list[str], str, ValidatedStream]:
    final = validate_citations(text, RETRIEVED).text
    vs = ValidatedStream(RETRIEVED)
    bounds = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    deltas = []
    for a, b in itertools.pairwise(bounds):
        out = vs.feed(text[a:b])
        assert final.startswith(vs.sent), (text, vs.sent, final)  # never sends what is taken back
        deltas.append(out)
    deltas.append(vs.rest(final))
    return deltas, final, vs


@settings(max_examples=600, deadline=None)
@given(st.lists(PIECES, max_size=25).map("".join), st.lists(st.integers(0, 10_000), max_size=12))
def test_any_chunking_of_any_answer_adds_up_to_the_stored_answer(text: str, cuts: list[int]) -> None:
    deltas, final, vs = _stream(text, cuts)
    assert "".join(deltas) == final
    assert not vs.diverged


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab [so:urce]n-1\n\t*#_-.S", max_size=60), st.lists(st.integers(0, 100), max_size=8))
def test_arbitrary_characters_add_up_too(text: str, cuts: list[int]) -> None:
    deltas, final, _ = _stream(text, cuts)
    assert "".join(deltas) == final


def test_invented_tags_and_the_models_sources_list_never_reach_the_client() -> None:
    text = "Blue [source: n-1] and [source: fake-9] done.\n\nSources: n-1, fake-9"
    deltas, final, _ = _stream(text, list(range(len(text))))  # one character at a time
    assert not any("fake-9" in d for d in deltas)
    assert final == "Blue [source: n-1] and done. (Removed invalid citation)\n\nSources: n-1"
    assert "".join(deltas) == final
    # text is released at once, not held to the end: "Blue [source: n-1] and done." went out early
    assert "".join(deltas[:-1]) == "Blue [source: n-1] and done."


def test_prose_released_as_soon_as_it_cannot_be_a_sources_block() -> None:
    vs = ValidatedStream(RETRIEVED)
    assert vs.feed("Blue.\nSources") == "Blue."  # the line could still become "Sources: …"
    assert vs.feed(" of light vary") == "\nSources of light vary"  # it cannot any more


def test_sources_block_shapes() -> None:
    assert could_be_sources_block("Sour")
    assert could_be_sources_block("**Sources:** n-1\n- n-2\n  ")
    assert could_be_sources_block("Sources:\n1")
    assert not could_be_sources_block("Sources:\n\n- n-1")
    assert not could_be_sources_block("Sources: n-1\nThe end")
    assert not could_be_sources_block("Blue")
