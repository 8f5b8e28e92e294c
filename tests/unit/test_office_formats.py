"""Issue 45 item 2: Word, PowerPoint, Excel, OpenDocument, EPUB and RTF files are read as text a
person searches and reads (headings as ``#``, list items as ``- ``, table rows as ``| a | b |``);
pictures are refused with a clear reason; every format's bomb (zip bomb by size, ratio or entry
count, XML entity expansion, deep nesting) is refused with the limit it passed."""

from __future__ import annotations

import pytest
from ragchat.domain.errors import ValidationError
from ragchat.domain.extraction import ExtractionError, detect_content_type, extract
from ragchat.domain.parsing import ParseJob, parse_document

from tests.office_files import (
    BILLION_LAUGHS,
    SAMPLE_RTF,
    XML,
    W,
    deep_xml,
    docx,
    epub,
    many_entries,
    odt,
    pptx,
    sample_docx,
    sample_odt,
    w_para,
    xlsx,
    zip_bomb,
    zipped,
)


def text_of(data: bytes, filename: str) -> str:
    return "\n\n".join(t for t, _ in extract(data, content_type=None, filename=filename))


def test_a_word_document_keeps_its_headings_lists_and_tables() -> None:
    text = text_of(sample_docx(), "hours.docx")
    assert text == (
        "# Office hours\n\nThe help desk opens at nine on weekdays.\n\n## Where to find us\n\n"
        "- Room 4.12, second floor\n  - Bring your badge\n\n"
        "| Day | Opens |\n| --- | --- |\n| Monday | 09:00 |\n| Saturday | closed |"
    )


def test_word_headings_come_from_the_style_name_not_its_id() -> None:
    # a German Word names the style id "berschrift1" but its name stays "heading 1"
    style = '<w:style w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style>'
    styles = f"{XML}<w:styles {W}>{style}</w:styles>"
    body = w_para("Einleitung", "berschrift1") + w_para("Text.")
    data = zipped(
        {
            "word/document.xml": f"{XML}<w:document {W}><w:body>{body}</w:body></w:document>",
            "word/styles.xml": styles,
        }
    )
    assert text_of(data, "bericht.docx") == "# Einleitung\n\nText."


def test_a_presentation_reads_slide_by_slide_in_presentation_order() -> None:
    data = pptx([("Welcome", ["Agenda", "Coffee at ten"]), ("Roadmap", ["Ship in May"])])
    pages = extract(data, content_type=None, filename="deck.pptx")
    assert [t for t, _ in pages] == [
        "## Slide 1: Welcome\n\n- Agenda\n- Coffee at ten",
        "## Slide 2: Roadmap\n\n- Ship in May",
    ]


def test_a_workbook_reads_each_sheet_as_a_table() -> None:
    data = xlsx({"Prices": [["Item", "Cost"], ["Tea", 2], ["", 7]], "Staff": [["Name"], ["Ada"]]})
    assert text_of(data, "book.xlsx") == (
        "## Prices\n\n| Item | Cost |\n| --- | --- |\n| Tea | 2 |\n|  | 7 |\n\n"
        "## Staff\n\n| Name |\n| --- |\n| Ada |"
    )


def test_an_opendocument_text_keeps_headings_lists_and_tables() -> None:
    assert text_of(sample_odt(), "parking.odt") == (
        "# Parking rules\n\nVisitors park on level two.\n\n- Show the ticket\n- Pay at the machine\n\n"
        "| Hours | Price |\n| --- | --- |\n| 1 | 2 EUR |"
    )


def test_an_epub_reads_its_chapters_in_spine_order() -> None:
    data = epub(
        [
            "<h1>Chapter One</h1><p>It was a dark&nbsp;night.</p><ul><li>one</li></ul>",
            "<h2>Two</h2><p>Dawn.</p>",
        ]
    )
    pages = [t for t, _ in extract(data, content_type="application/epub+zip", filename=None)]
    assert pages == ["# Chapter One\n\nIt was a dark night.\n\n- one", "## Two\n\nDawn."]


def test_rtf_keeps_text_accents_headings_lists_and_tables_and_skips_the_rest() -> None:
    text = text_of(SAMPLE_RTF, "cafe.rtf")
    assert text == (
        "# Café opening times\n\nThe café serves lunch until 14:00 € 5 a meal.\n\n"
        "- Soup of the day\n- Sandwiches\n\n| Item | Price |\n| --- | --- |\n| Tea | 2 |\n\nClosing words."
    )
    assert "Calibri" not in text and "Hidden title" not in text and "Writer" not in text


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("a.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        ("a.PPTX", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
        ("a.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
        ("a.odt", "application/vnd.oasis.opendocument.text"),
        ("a.epub", "application/epub+zip"),
        ("a.rtf", "application/rtf"),
    ],
)
def test_office_extensions_are_recognised(filename: str, expected: str) -> None:
    assert detect_content_type(filename, "application/octet-stream") == expected
    assert detect_content_type(None, expected) == expected


@pytest.mark.parametrize(
    ("filename", "declared"), [("anim.gif", None), ("photo.HEIC", "image/heic"), (None, "image/bmp")]
)
def test_other_picture_formats_are_refused_saying_which(filename: str | None, declared: str | None) -> None:
    with pytest.raises(ValidationError, match=r"^This picture format is not read: OCR reads \.png, \.jpg"):
        detect_content_type(filename, declared)


def test_office_text_is_split_at_its_headings_with_them() -> None:
    sections = "".join(
        w_para(f"Section {n}", "Heading1") + w_para((f"Words of section {n}. ") * 30) for n in range(3)
    )
    job = ParseJob(
        content_type="application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        title="t",
        chunk_size=1000,
        overlap=100,
        headers=False,
        cpu_seconds=30,
    )
    chunks = parse_document(docx(sections), job).chunks
    assert [c.text.split("\n", 1)[0] for c in chunks] == ["# Section 0", "# Section 1", "# Section 2"]


# ------------------------------------------------------------------------------------ bombs
DOC = "word/document.xml"
BOMBS = {
    "docx": DOC,
    "pptx": "ppt/presentation.xml",
    "xlsx": "xl/workbook.xml",
    "odt": "content.xml",
    "epub": "META-INF/container.xml",
}


@pytest.mark.parametrize("ext", sorted(BOMBS))
def test_a_zip_bomb_by_ratio_is_refused(ext: str) -> None:
    with pytest.raises(ExtractionError, match=r"inflates \d+ times \(at most 200\): a zip bomb\?"):
        text_of(zip_bomb(BOMBS[ext]), f"bomb.{ext}")


@pytest.mark.parametrize("ext", sorted(BOMBS))
def test_a_zip_with_too_many_entries_is_refused(ext: str) -> None:
    with pytest.raises(ExtractionError, match=r"holds 10002 parts \(at most 10000\): a zip bomb\?"):
        text_of(many_entries(extra={BOMBS[ext]: "<x/>"}), f"bomb.{ext}")


def test_a_zip_too_big_in_all_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragchat.domain import zipxml

    monkeypatch.setattr(zipxml, "MAX_TOTAL_BYTES", 1_000_000)
    with pytest.raises(ExtractionError, match=r"unpacks to \d+ bytes \(at most 1000000\): a zip bomb\?"):
        text_of(docx(w_para("x" * 2_000_000)), "big.docx")


@pytest.mark.parametrize("ext", sorted(BOMBS))
def test_xml_entity_expansion_is_refused(ext: str) -> None:
    lol = BILLION_LAUGHS + "<root>&lol3;</root>"
    with pytest.raises(ExtractionError, match="declares a DOCTYPE or entities"):
        text_of(zipped({BOMBS[ext]: lol, "word/styles.xml": lol}), f"bomb.{ext}")


@pytest.mark.parametrize("ext", sorted(BOMBS))
def test_deep_xml_nesting_is_refused(ext: str) -> None:
    with pytest.raises(ExtractionError, match="nests deeper than 256 elements"):
        text_of(zipped({BOMBS[ext]: deep_xml("")}), f"bomb.{ext}")


def test_an_external_entity_is_refused() -> None:
    doctype = '<!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    xxe = f"{XML}{doctype}<w:document {W}><w:body>&x;</w:body></w:document>"
    with pytest.raises(ExtractionError, match="declares a DOCTYPE"):
        text_of(zipped({DOC: xxe}), "x.docx")


def test_deeply_nested_rtf_groups_are_refused() -> None:
    with pytest.raises(ExtractionError, match="groups nest deeper than 256"):
        text_of(b"{\\rtf1 " + b"{" * 100_000 + b"x" + b"}" * 100_000 + b"}", "deep.rtf")


def test_a_broken_office_file_says_so() -> None:
    with pytest.raises(
        ExtractionError, match="Could not read the Word document: it is not a valid zip archive"
    ):
        text_of(b"PK\x03\x04 not really", "broken.docx")
    with pytest.raises(
        ExtractionError, match=r"Could not read the OpenDocument text \(content.xml\): its XML is malformed"
    ):
        text_of(odt("<text:p>unclosed"), "broken.odt")


def test_both_rest_apis_pass_every_binary_upload_type_as_bytes() -> None:
    """API Gateway hands a raw body whose Content-Type is not a binary media type to the function as
    UTF-8 text: a .docx sent as itself would arrive mangled."""
    from pathlib import Path

    from ragchat.domain.extraction import SUPPORTED_TYPES

    template = (Path(__file__).resolve().parents[2] / "template.yaml").read_text(encoding="utf-8")
    for ctype in SUPPORTED_TYPES:
        if not ctype.startswith("text/"):
            assert template.count(f"- {ctype.replace('/', '~1')}\n") == 2, ctype
