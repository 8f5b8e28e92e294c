"""Contextual chunk headers: a chunk is embedded with its document's title and nearest heading."""

from __future__ import annotations

from ragchat.domain.context import chunk_header, embedding_text, nearest_headings, title_words

DOC = """# Travel and Expense Policy

Intro paragraph about who the policy applies to.

## Transport

Mileage for a private car is reimbursed at 0.36 EUR per kilometre.

## Approval

Managers approve claims within five working days.
"""


def test_a_file_name_title_reads_as_words() -> None:
    assert title_words("expense-policy.md") == "expense policy"
    assert title_words("Super_Bowl_50") == "Super Bowl 50"
    assert title_words("Quarterly report") == "Quarterly report"


def test_each_chunk_gets_the_heading_above_it() -> None:
    chunks = [
        "Intro paragraph about who the policy applies to.",
        "Mileage for a private car is reimbursed at 0.36 EUR per kilometre.",
        "## Approval\n\nManagers approve claims within five working days.",
    ]
    # a chunk that starts with its own heading already carries it
    assert nearest_headings(DOC, chunks) == ["Travel and Expense Policy", "Transport", ""]


def test_a_chunk_not_found_in_the_text_gets_no_heading() -> None:
    assert nearest_headings(DOC, ["Text from somewhere else entirely."]) == [""]


def test_the_header_joins_title_and_heading_without_repeating_the_title() -> None:
    assert chunk_header("expense-policy.md", "Transport") == "expense policy — Transport"
    assert chunk_header("Webhooks", "webhooks") == "Webhooks"
    assert chunk_header("webhooks.html") == "webhooks"


def test_a_note_titled_by_its_first_line_is_not_prefixed_again() -> None:
    note = "Ferns reproduce with spores rather than seeds."
    assert chunk_header("Ferns reproduce with spores rather…", text=note) == ""
    assert embedding_text("", note) == note


def test_the_embedded_text_is_the_header_then_the_text() -> None:
    assert (
        embedding_text("expense policy — Transport", "Mileage …") == "expense policy — Transport\nMileage …"
    )


def test_a_title_with_hyphens_that_the_text_starts_with_is_not_embedded_twice() -> None:
    # Issue 31: the title's words lose their hyphens ("myeloid derived") but the text keeps them, so a
    # first chunk that starts with its own title got the title again in front (2 of 5 SciFact titles).
    title = "Induction of myelodysplasia by myeloid-derived suppressor cells."
    first = f"{title}\n\nMyelodysplastic syndromes (MDS) are age-dependent stem cell malignancies."
    assert chunk_header(title, text=first) == ""
    assert chunk_header("parental_leave-policy.txt", text="Parental leave policy\n\nTwelve weeks.") == ""
    # a later chunk that does not start with the title still gets it, hyphens as words
    later = chunk_header(title, text="MDS patients show")
    assert later == "Induction of myelodysplasia by myeloid derived suppressor cells."
