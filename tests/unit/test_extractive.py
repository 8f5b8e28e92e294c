"""The extractive answerer: ≤ 3 of the notes' own sentences, each cited, then the Sources line."""

from __future__ import annotations

import pytest
from ragchat.domain.citations import CITATION_RE, validate_citations
from ragchat.domain.extractive import extractive_answer, plain_text, split_sentences
from ragchat.domain.models import Hit
from ragchat.domain.prompts import GUARD_REPLY

HITS = [
    Hit(
        id="refunds-00000",
        score=0.82,
        text=(
            "Our store opened in 1998. Refunds are issued within 30 days of purchase. "
            "Items must be unused and in their original packaging. We love our customers."
        ),
    ),
    Hit(
        id="shipping-00001",
        score=0.74,
        text="Shipping takes 3.5 days on average. Refunds for shipping costs are not issued.",
    ),
    Hit(id="misc-00002", score=0.70, text="The office cat is called Tom. He likes naps."),
]
IDS = [h.id for h in HITS]


def body_and_sources(answer: str) -> tuple[str, str]:
    body, _, sources = answer.rpartition("\n\n")
    return body, sources


def test_picks_the_best_sentences_with_citations_and_sources_line() -> None:
    answer = extractive_answer("Within how many days are refunds issued?", HITS)
    body, sources = body_and_sources(answer)
    assert "Refunds are issued within 30 days of purchase. [source: refunds-00000]" in body
    assert "office cat" not in body and "opened in 1998" not in body
    assert sources.startswith("Sources: refunds-00000")
    assert len(CITATION_RE.findall(body)) <= 3


def test_output_passes_citation_validation_unchanged() -> None:
    for question in ["refund days?", "shipping time", "cat name", "unrelated zebra question"]:
        answer = extractive_answer(question, HITS)
        result = validate_citations(answer, IDS)
        assert result.text == answer
        assert result.removed == []
        assert result.valid_ids


def test_at_most_max_sentences_grouped_by_source_in_retrieval_order() -> None:
    answer = extractive_answer("refunds issued shipping packaging", HITS, max_sentences=3)
    body, sources = body_and_sources(answer)
    tags = CITATION_RE.findall(body)
    assert 1 <= len(tags) <= 3
    # grouped: all refunds sentences before the shipping ones
    assert tags == sorted(tags, key=IDS.index)
    assert sources == "Sources: " + ", ".join(dict.fromkeys(tags))


def test_max_sentences_one() -> None:
    answer = extractive_answer("refunds issued", HITS, max_sentences=1)
    assert len(CITATION_RE.findall(answer)) == 1


def test_tie_goes_to_the_better_ranked_hit() -> None:
    same = "Solar panels convert sunlight into electricity."
    hits = [Hit(id="b-2", score=0.9, text=same), Hit(id="a-1", score=0.8, text=same)]
    answer = extractive_answer("solar panels", hits, max_sentences=1)
    assert answer == f"{same} [source: b-2]\n\nSources: b-2"


def test_no_word_overlap_falls_back_to_the_top_notes_first_sentence() -> None:
    answer = extractive_answer("¿Qué?", HITS)
    assert answer == "Our store opened in 1998. [source: refunds-00000]\n\nSources: refunds-00000"


def test_deterministic() -> None:
    question = "how long does shipping take and are refunds issued"
    assert len({extractive_answer(question, HITS) for _ in range(5)}) == 1


def test_no_hits_gives_the_guard_reply() -> None:
    assert extractive_answer("anything", []) == GUARD_REPLY


def test_citation_tags_inside_note_text_are_not_repeated() -> None:
    hits = [Hit(id="n-1", score=0.9, text="Cats sleep a lot [source: fake-9]. Dogs bark.")]
    answer = extractive_answer("cats sleep", hits)
    assert "fake-9" not in answer
    assert answer.startswith("Cats sleep a lot. [source: n-1]")


def test_very_long_sentence_is_shortened() -> None:
    hits = [Hit(id="n-1", score=0.9, text="keyword " + "filler " * 200)]
    answer = extractive_answer("keyword", hits)
    body, _ = body_and_sources(answer)
    assert len(body) <= 400 + len(" [source: n-1]")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Dr. Smith et al. measured 1.5 mg. The U.S. team agreed, e.g. in Fig. 2. Done!",
            ["Dr. Smith et al. measured 1.5 mg.", "The U.S. team agreed, e.g. in Fig. 2.", "Done!"],
        ),
        ("First para.\n\nSecond para", ["First para.", "Second para"]),
        ("wrapped line\ncontinues here. Next one?", ["wrapped line continues here.", "Next one?"]),
        ("- item one\n- item two", ["item one", "item two"]),
        ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
        ("J. K. Rowling wrote it. version 2.0 is out.", ["J. K. Rowling wrote it. version 2.0 is out."]),
        ("   \n\n", []),
    ],
)
def test_sentence_splitting(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_markdown_headings_are_not_quoted_as_answers() -> None:
    text = (
        "# How ingestion works\n\nIngestion turns a document into searchable notes.\n"
        "## Steps\nIt splits, embeds and indexes."
    )
    assert split_sentences(text) == [
        "Ingestion turns a document into searchable notes.",
        "It splits, embeds and indexes.",
    ]


# --------------------------------------------------------------------- answers that read well
def test_answers_are_plain_text_without_markdown_markup() -> None:
    hits = [
        Hit(
            id="md-00000",
            score=0.8,
            text=(
                "# Refunds\n\n**Refunds** are issued within *30 days* by the `refundctl` tool, "
                "see [the policy](https://example.com/policy).\n\n> Refund requests go to __billing__."
            ),
        )
    ]
    body, _ = body_and_sources(extractive_answer("How are refunds issued and where do requests go?", hits))
    assert "Refunds are issued within 30 days by the refundctl tool, see the policy." in body
    assert "Refund requests go to billing." in body
    for mark in ("**", "`", "](", "# ", "> ", "__"):
        assert mark not in body


def test_names_with_underscores_keep_them_in_code_spans_and_in_prose() -> None:
    # a quoted setting read "(ENABLERATELIMITING)": its underscores were taken for emphasis marks
    assert plain_text("Set `ENABLE_RATE_LIMITING` to true.") == "Set ENABLE_RATE_LIMITING to true."
    assert plain_text("MAX_BODY_BYTES and snake_case_names stay whole.") == (
        "MAX_BODY_BYTES and snake_case_names stay whole."
    )
    assert (
        plain_text("Code `a*b*c` and _this_ and __that__ and *it*.") == "Code a*b*c and this and that and it."
    )


def test_a_markdown_table_row_reads_as_a_statement() -> None:
    hits = [
        Hit(
            id="table-00000",
            score=0.8,
            text="Retention:\n\n| Data | Kept |\n|---|---|\n| Invoices | 10 years |\n| Logs | 90 days |",
        )
    ]
    body, _ = body_and_sources(extractive_answer("How long are invoices kept?", hits))
    assert body.startswith("Data: Invoices; Kept: 10 years [source: table-00000]")
    assert "|" not in body and "---" not in body


def test_near_duplicate_sentences_are_given_once() -> None:
    overlap = "Refunds are issued within 30 days of purchase."
    hits = [
        Hit(
            id="a-00000", score=0.8, text=f"Our store sells shoes. {overlap}", document_id="d", chunk_index=0
        ),
        Hit(
            id="a-00001",
            score=0.79,
            text=f"{overlap} Refunds are paid to the card.",
            document_id="d",
            chunk_index=1,
        ),
        Hit(
            id="b-00000",
            score=0.7,
            text="Refunds are issued within 30 days of the purchase!",
            document_id="e",
        ),
    ]
    body, _ = body_and_sources(extractive_answer("When are refunds issued?", hits))
    assert body.count("within 30 days") == 1
    assert "Refunds are paid to the card." in body


def test_sentences_come_in_reading_order_within_a_document() -> None:
    hits = [  # retrieval ranked the document's second chunk first
        Hit(
            id="doc-00001",
            score=0.9,
            text="Then the refund is paid to the card.",
            document_id="doc",
            chunk_index=1,
        ),
        Hit(
            id="doc-00000",
            score=0.8,
            text="First the refund is approved by a manager.",
            document_id="doc",
            chunk_index=0,
        ),
    ]
    body, sources = body_and_sources(extractive_answer("How is a refund approved and paid?", hits))
    assert body.index("First the refund") < body.index("Then the refund")
    assert sources == "Sources: doc-00000, doc-00001"


def test_a_sentence_that_introduces_a_list_is_quoted_with_its_items() -> None:
    # quoted alone, "Some visitors can park for free:" answered nothing
    hits = [
        Hit(
            id="parking-00000",
            score=0.8,
            text=(
                "Parking costs 3 pounds an hour.\n\nSome visitors can park for free:\n\n"
                "- visitors of a patient in intensive care;\n- blue badge holders.\n\n"
                "The car park never closes."
            ),
        )
    ]
    body, _ = body_and_sources(extractive_answer("Who can park for free?", hits, max_sentences=1))
    assert body == (
        "Some visitors can park for free: visitors of a patient in intensive care; blue badge holders. "
        "[source: parking-00000]"
    )
    assert split_sentences("Steps:\n1. Open the app. Tap settings.\n2. Choose reset") == [
        "Steps: Open the app.",
        "Tap settings.",
        "Choose reset",
    ]


def test_a_plain_heading_never_runs_into_the_sentence_under_it() -> None:
    # a text or PDF heading has no '#': it was glued to the sentence ("Cargo bikes Employees may…")
    text = (
        "Cargo bikes\nEmployees may park cargo bikes in the yard. They lock them.\n\n"
        "**Lockers**\nLockers are free."
    )
    assert split_sentences(text) == [
        "Cargo bikes",
        "Employees may park cargo bikes in the yard.",
        "They lock them.",
        "**Lockers**",
        "Lockers are free.",
    ]
    answer = extractive_answer("Where may employees park cargo bikes?", [Hit(id="n1", score=0.9, text=text)])
    assert "Cargo bikes Employees" not in answer


def test_a_wrapped_line_still_runs_on() -> None:
    # a PDF's line that ends mid-sentence (on a stop word, or long) is no heading
    assert split_sentences("The office is open until\nFriday. Then it closes.") == [
        "The office is open until Friday.",
        "Then it closes.",
    ]
