"""Issue 45 item 2 over the API: Office, e-book and RTF files uploaded raw or as a form become
READY documents whose text (``?include=body``, what the citation panel shows) keeps headings,
lists and tables, and whose content answers questions; pictures and zip bombs are refused before
anything is stored; a bomb found while reading FAILS with its reason."""

from __future__ import annotations

import pytest

from tests.events import json_body
from tests.office_files import (
    SAMPLE_RTF,
    deep_xml,
    epub,
    many_entries,
    pptx,
    sample_docx,
    sample_odt,
    xlsx,
    zipped,
)
from tests.unit.api_support import make_api

OCTET = {"Content-Type": "application/octet-stream"}
FILES = {
    "hours.docx": (sample_docx, "| Saturday | closed |"),
    "deck.pptx": (lambda: pptx([("Welcome", ["The kickoff is on the roof terrace"])]), "## Slide 1: Welcome"),
    "prices.xlsx": (lambda: xlsx({"Prices": [["Item", "Cost"], ["Espresso", 3]]}), "| Espresso | 3 |"),
    "parking.odt": (sample_odt, "# Parking rules"),
    "novel.epub": (
        lambda: epub(["<h1>The lighthouse</h1><p>The keeper climbed the stairs.</p>"]),
        "# The lighthouse",
    ),
    "cafe.rtf": (lambda: SAMPLE_RTF, "- Soup of the day\n- Sandwiches"),
}


@pytest.mark.parametrize("filename", sorted(FILES))
def test_an_office_file_becomes_a_document_with_its_structure_kept(filename: str) -> None:
    api = make_api()
    make, expected = FILES[filename]
    res = api.call(
        "POST",
        "/documents",
        query={"filename": filename},
        raw_body=make(),
        headers={"Content-Type": "application/octet-stream"},
    )
    assert res["statusCode"] == 202, res["body"]
    doc = json_body(api.call("GET", f"/documents/{json_body(res)['documentId']}", query={"include": "body"}))
    assert doc["status"] == "READY", doc
    assert doc["title"] == filename
    assert expected in doc["body"]


def test_a_word_document_answers_a_question_from_its_table() -> None:
    api = make_api()
    api.call(
        "POST",
        "/documents",
        query={"filename": "hours.docx"},
        raw_body=sample_docx(),
        headers={"Content-Type": "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
    )
    body = json_body(api.call("GET", "/", query={"text": "Does the help desk open at nine on weekdays?"}))
    assert body["guardUsed"] is False
    assert "nine" in body["answer"]
    assert body["sources"][0]["title"] == "hours.docx"


def test_a_picture_ocr_does_not_read_is_refused_saying_which_it_reads() -> None:
    api = make_api()
    res = api.call(
        "POST",
        "/documents",
        query={"filename": "scan.gif"},
        raw_body=b"GIF89a....",
        headers={"Content-Type": "image/gif"},
    )
    assert res["statusCode"] == 400
    assert json_body(res)["error"].startswith("This picture format is not read: OCR reads .png, .jpg, .tif")
    assert api.launcher.started == []


def test_a_zip_bomb_is_refused_before_anything_is_stored() -> None:
    api = make_api()
    res = api.call(
        "POST",
        "/documents",
        query={"filename": "bomb.docx"},
        raw_body=many_entries(extra={"word/document.xml": "<x/>"}),
        headers=OCTET,
    )
    assert res["statusCode"] == 400
    assert "holds 10002 parts (at most 10000): a zip bomb?" in json_body(res)["error"]
    assert api.launcher.started == [] and json_body(api.call("GET", "/documents"))["items"] == []


def test_a_bomb_found_while_reading_fails_the_document_with_the_reason() -> None:
    api = make_api()
    res = api.call(
        "POST",
        "/documents",
        query={"filename": "deep.odt"},
        raw_body=zipped({"content.xml": deep_xml("")}),
        headers=OCTET,
    )
    assert res["statusCode"] == 202, res["body"]
    doc = json_body(api.call("GET", f"/documents/{json_body(res)['documentId']}"))
    assert doc["status"] == "FAILED"
    assert (
        doc["error"]
        == "Could not read the OpenDocument text (content.xml): its XML nests deeper than 256 elements."
    )


def test_a_file_that_is_not_what_its_name_says_is_refused() -> None:
    api = make_api()
    res = api.call(
        "POST",
        "/documents",
        query={"filename": "notes.docx"},
        raw_body=b"just text, not a zip",
        headers=OCTET,
    )
    assert res["statusCode"] == 400
    assert json_body(res)["error"].startswith(
        "Could not read the Word document: it is not a valid zip archive"
    )
    res = api.call(
        "POST", "/documents", query={"filename": "notes.rtf"}, raw_body=b"plain words", headers=OCTET
    )
    assert res["statusCode"] == 400
    assert json_body(res)["error"] == "This is not an RTF document: it does not start with {\\rtf."
