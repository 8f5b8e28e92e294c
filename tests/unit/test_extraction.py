"""Extraction (docs/ingestion.md): supported types give text pages; everything else a clear 400."""

from __future__ import annotations

import pytest
from ragchat.domain.errors import ValidationError
from ragchat.domain.extraction import ExtractionError, detect_content_type, extract
from ragchat.domain.splitting import split_pages

from tests.pdfs import encrypted, make_pdf

# ------------------------------------------------------------------------------ content types


@pytest.mark.parametrize(
    ("filename", "declared", "expected"),
    [
        ("notes.txt", None, "text/plain"),
        ("README.md", None, "text/markdown"),
        ("page.HTM", None, "text/html"),
        ("uploads/report.pdf", "application/octet-stream", "application/pdf"),
        ("guide.md", "text/plain", "text/markdown"),  # text/plain is refined by the extension
        ("guide.md", "text/x-markdown", "text/markdown"),
        (None, "text/html; charset=utf-8", "text/html"),
        (None, "APPLICATION/PDF", "application/pdf"),
        (None, None, "text/plain"),  # a note posted as a string
        ("paper.pdf", "image/png", "application/pdf"),  # a wrong label defers to a known extension
    ],
)
def test_content_type_detection(filename: str | None, declared: str | None, expected: str) -> None:
    assert detect_content_type(filename, declared) == expected


@pytest.mark.parametrize(
    ("filename", "declared"),
    [
        ("slides.key", None),
        (None, "application/x-iwork-pages"),
        ("archive", "application/zip"),
        ("a.doc", ""),
    ],
)
def test_unsupported_types_are_rejected_naming_the_supported_ones(
    filename: str | None, declared: str | None
) -> None:
    with pytest.raises(ValidationError) as info:
        extract(b"whatever", content_type=declared, filename=filename)
    assert info.value.status == 400
    assert not isinstance(info.value, ExtractionError)
    for name in (".txt", ".md", ".html", ".pdf", ".docx", ".pptx", ".xlsx", ".odt", ".epub", ".rtf"):
        assert name in info.value.message
    assert info.value.message.startswith("This file type is not supported")


# ---------------------------------------------------------------------------------- plain text


def test_plain_text_with_bom_and_crlf() -> None:
    pages = extract("\ufeffCafé au lait\r\nsecond line".encode(), content_type="text/plain", filename=None)
    assert pages == [("Café au lait\nsecond line", {})]


def test_utf16_text_with_bom_is_decoded() -> None:
    assert extract("héllo".encode("utf-16"), content_type=None, filename="a.txt") == [("héllo", {})]


def test_undecodable_bytes_are_a_clear_400() -> None:
    with pytest.raises(ExtractionError) as info:
        extract(b"caf\xe9 latin-1", content_type=None, filename="a.txt")
    assert info.value.status == 400
    assert "not UTF-8" in info.value.message and "position 3" in info.value.message


def test_binary_bytes_labelled_as_text_are_rejected() -> None:
    with pytest.raises(ExtractionError, match="binary"):
        extract(b"PK\x03\x04\x00\x00abc", content_type="text/plain", filename=None)


@pytest.mark.parametrize("data", [b"", b"   \n\t  ", b"\xef\xbb\xbf"])
def test_a_document_without_text_is_rejected(data: bytes) -> None:
    with pytest.raises(ExtractionError, match="no text"):
        extract(data, content_type="text/plain", filename=None)


def test_markdown_is_kept_as_written_and_splits_at_headings() -> None:
    part_one, part_two = "First part text. " * 14, "End. " * 15
    body = f"# Title\n\nIntro.\n\n## Part one\n\n{part_one}\n\n## Part two\n\n{part_two}"
    pages = extract(body.encode(), content_type=None, filename="doc.md")
    assert pages == [(body, {})]
    chunks = split_pages(pages, content_type="text/markdown", chunk_size=300)
    assert [c.text.split("\n")[0] for c in chunks] == ["# Title", "## Part two"]
    assert chunks[-1].text == "## Part two\n\n" + ("End. " * 15).strip()


# ---------------------------------------------------------------------------------------- HTML

HTML = b"""<!DOCTYPE html>
<html><head><title>Refund   policy</title><style>body { color: red }</style>
<script>var secret = "do not index";</script></head>
<body>
  <!-- internal comment -->
  <nav><a href="/">Home</a></nav>
  <h1>Refunds</h1>
  <p>Refunds are issued
     within <b>30 days</b> &amp; no questions.<br>Contact support.</p>
  <script>trackVisitor();</script><noscript>Enable JavaScript</noscript>
  <template><p>hidden template</p></template>
  <ul><li>Item one</li><li>Item two</li></ul>
  <table><tr><td>Plan</td><td>Days</td></tr><tr><td>Pro</td><td>60</td></tr></table>
</body></html>"""


def test_html_gives_visible_text_only_with_block_structure() -> None:
    [(text, meta)] = extract(HTML, content_type="text/html", filename=None)
    hidden = ("secret", "trackVisitor", "color: red", "internal comment", "Enable JavaScript", "template")
    assert not [h for h in hidden if h in text]
    assert meta == {"title": "Refund policy"}
    assert "Refunds are issued within 30 days & no questions.\nContact support." in text
    assert "Refunds\n\nRefunds are issued" in text  # heading and paragraph are separate blocks
    assert "Item one\nItem two" in text
    assert "Plan Days\nPro 60" in text
    assert "  " not in text


def test_html_without_visible_text_is_rejected() -> None:
    with pytest.raises(ExtractionError):
        extract(
            b"<html><head><title>x</title></head><body><script>1</script></body></html>",
            content_type=None,
            filename="empty.html",
        )


# ----------------------------------------------------------------------------------------- PDF


def test_pdf_pages_keep_their_numbers_and_blank_pages_are_skipped() -> None:
    pdf = make_pdf(["Aspirin lowers fever (page one).", "", "Ibuprofen reduces inflammation."])
    pages = extract(pdf, content_type="application/pdf", filename="drugs.pdf")
    assert pages == [
        ("Aspirin lowers fever (page one).", {"page": 1}),
        ("Ibuprofen reduces inflammation.", {"page": 3}),
    ]
    chunks = split_pages(pages, content_type="application/pdf")
    assert [(c.index, c.metadata) for c in chunks] == [(0, {"page": 1}), (1, {"page": 3})]


def test_two_page_pdf_detected_by_extension() -> None:
    pages = extract(make_pdf(["One", "Two"]), content_type=None, filename="x.pdf")
    assert [meta["page"] for _, meta in pages] == [1, 2]


@pytest.mark.parametrize(
    "data",
    [
        make_pdf(["Some text here"])[:150],  # truncated
        b"%PDF-1.4\n" + b"\x00garbage" * 50,  # corrupt
        b"This is not a PDF at all",
    ],
)
def test_unreadable_pdf_is_a_clear_400(data: bytes) -> None:
    with pytest.raises(ExtractionError) as info:
        extract(data, content_type="application/pdf", filename=None)
    assert info.value.status == 400
    assert info.value.message.startswith("Could not read PDF")


def test_password_protected_pdf_is_rejected() -> None:
    with pytest.raises(ExtractionError, match="password"):
        extract(encrypted(make_pdf(["secret"]), "pw"), content_type=None, filename="x.pdf")


def test_pdf_encrypted_with_empty_user_password_is_read() -> None:
    pages = extract(encrypted(make_pdf(["open text"]), ""), content_type=None, filename="x.pdf")
    assert pages == [("open text", {"page": 1})]


def test_pdf_without_text_is_rejected() -> None:
    with pytest.raises(ExtractionError, match="no extractable text"):
        extract(make_pdf(["", ""]), content_type=None, filename="scan.pdf")
