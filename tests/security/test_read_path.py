"""Extraction stays off the request path: ``GET /documents/{id}?include=body`` of a PDF or an HTML
page parsed the whole document on the request (a big PDF's every page again on every read, as often
as a reader liked). The text is now kept by the split step and served as stored;
these tests replace the extractor with a counter and assert the read path never calls it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import ragchat.domain.extraction as extraction

from tests.pdfs import make_pdf
from tests.unit.api_support import Api, make_api

PAGES = [f"Page {i}: the harbour ferry leaves at {i % 12 + 1} o'clock from pier {i}." for i in range(300)]
HTML = (
    "<html><body>"
    + "".join(f"<section><h2>Part {i}</h2><p>Lighthouse fact {i}.</p></section>" for i in range(2000))
    + "</body></html>"
)


def _post(api: Api, name: str, data: bytes, ctype: str) -> str:
    res = api.call(
        "POST", "/documents", raw_body=data, headers={"Content-Type": ctype}, query={"filename": name}
    )
    assert res["statusCode"] == 202, res
    return str(json.loads(res["body"])["documentId"])


def _read(api: Api, doc_id: str) -> dict[str, Any]:
    return api.call("GET", f"/documents/{doc_id}", query={"include": "body"})


@pytest.fixture
def extractor_calls(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[str]]:
    """Count every call of the extractor (and its PDF and HTML parsers) from now on."""
    calls: list[str] = []
    for name in ("extract", "_pdf_pages", "_html_pages", "flatten_html"):
        real = getattr(extraction, name)

        def spy(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(extraction, name, spy)
    return lambda: calls


@pytest.mark.parametrize(
    ("name", "data", "ctype", "expected"),
    [
        ("ferries.pdf", make_pdf(PAGES), "application/pdf", "Page 299: the harbour ferry"),
        ("lighthouses.html", HTML.encode(), "text/html", "Lighthouse fact 1999."),
    ],
)
def test_reading_a_parsed_documents_text_does_not_parse_it(
    extractor_calls: Callable[[], list[str]], name: str, data: bytes, ctype: str, expected: str
) -> None:
    api = make_api()
    doc_id = _post(api, name, data, ctype)  # ingested now (the pipeline runs in the test)
    assert json.loads(api.call("GET", f"/documents/{doc_id}")["body"])["status"] == "READY"
    assert extractor_calls(), "ingestion extracts the text once"
    extractor_calls().clear()

    for _ in range(3):
        res = _read(api, doc_id)
        assert res["statusCode"] == 200
        assert expected in json.loads(res["body"])["body"]
    assert extractor_calls() == []


def test_before_its_text_is_extracted_a_read_is_409_and_parses_nothing(
    extractor_calls: Callable[[], list[str]],
) -> None:
    api = make_api(run_pipeline=False)
    doc_id = _post(api, "ferries.pdf", make_pdf(PAGES[:3]), "application/pdf")
    extractor_calls().clear()  # the inline check of a small PDF before the 202 is not the read path
    res = _read(api, doc_id)
    assert res["statusCode"] == 409
    assert "not extracted yet (PENDING)" in json.loads(res["body"])["error"]
    assert extractor_calls() == []


def test_deleting_a_document_deletes_its_kept_text() -> None:
    api = make_api()
    doc_id = _post(api, "lighthouses.html", HTML.encode(), "text/html")
    blobs = api.container.blobs
    assert blobs.keys("extracted/")  # type: ignore[attr-defined]
    assert api.call("DELETE", f"/documents/{doc_id}")["statusCode"] == 204
    assert blobs.keys("extracted/") == []  # type: ignore[attr-defined]


def test_a_document_ingested_before_its_text_was_kept_is_extracted_once_then_served(
    extractor_calls: Callable[[], list[str]],
) -> None:
    api = make_api()
    doc_id = _post(api, "ferries.pdf", make_pdf(PAGES[:20]), "application/pdf")
    blobs = api.container.blobs
    for key in blobs.keys("extracted/"):  # type: ignore[attr-defined]
        blobs.delete(key)  # as an upgrade finds a document ingested by an older version
    extractor_calls().clear()

    first = _read(api, doc_id)  # readable, not lost: its text is extracted this once and kept
    assert first["statusCode"] == 200
    assert "Page 19: the harbour ferry" in json.loads(first["body"])["body"]
    assert "extract" in extractor_calls()
    extractor_calls().clear()
    for _ in range(2):
        assert _read(api, doc_id)["statusCode"] == 200
    assert extractor_calls() == []  # later reads parse nothing
