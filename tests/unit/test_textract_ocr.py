"""Issue 45 item 2 in the cloud: Amazon Textract's ``DetectDocumentText`` reads pictures in the split
step. Stubbed with botocore's ``Stubber`` (the request and response are checked against Textract's
service model): the lines come back as lines with paragraphs apart, a picture Textract cannot read
FAILS with its words, throttling is left to the state machine's retries, and what the synchronous
API cannot take (WebP, a TIFF of several pages, over 10 MB, over 10,000 pixels a side) is refused
before anything is stored."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from ragchat.adapters.aws.textract import TextractOcr, lines_text
from ragchat.domain.errors import ExtractionError
from ragchat.domain.images import image_info

from tests.events import json_body
from tests.images import jpeg_header, png_header, textract_detected, tiff_of_pages, webp_lossless_header
from tests.unit.api_support import make_api

HARBOUR = [
    ("Harbour notes", 0.05),
    ("The harbour office opens at seven in the morning.", 0.12),  # a gap above: a new paragraph
    ("Ferries to the island leave every hour.", 0.145),
    ("Parking at the pier costs four euros a day.", 0.20),
]


def stubbed() -> tuple[Any, Stubber]:
    client = boto3.client(
        "textract", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    return client, Stubber(client)


def test_lines_come_back_as_lines_with_paragraphs_apart() -> None:
    client, stub = stubbed()
    png = png_header(1700, 2200)
    stub.add_response("detect_document_text", textract_detected(HARBOUR), {"Document": {"Bytes": png}})
    with stub:
        pages = TextractOcr(lambda: client).read(png, "image/png", 60)
    stub.assert_no_pending_responses()
    assert pages == [
        "Harbour notes\n\nThe harbour office opens at seven in the morning.\n"
        "Ferries to the island leave every hour.\n\nParking at the pier costs four euros a day."
    ]


def test_a_second_column_starts_a_paragraph() -> None:
    text = lines_text(
        textract_detected([("Left column ends here.", 0.80), ("Right column starts.", 0.10)])["Blocks"]
    )
    assert text == "Left column ends here.\n\nRight column starts."


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("UnsupportedDocumentException", 400),
        ("BadDocumentException", 400),
        ("DocumentTooLargeException", 400),
    ],
)
def test_a_picture_textract_cannot_read_is_an_extraction_error_with_its_words(code: str, status: int) -> None:
    client, stub = stubbed()
    stub.add_client_error(
        "detect_document_text",
        service_error_code=code,
        service_message="Request has unsupported document format",
        http_status_code=status,
    )
    with stub, pytest.raises(ExtractionError) as err:
        TextractOcr(lambda: client).read(b"\x89PNG", "image/png", 60)
    assert err.value.message == (
        f"Amazon Textract could not read the picture ({code}: Request has unsupported document format)."
    )


def test_throttling_is_raised_for_the_state_machine_to_retry() -> None:
    client, stub = stubbed()
    stub.add_client_error(
        "detect_document_text",
        service_error_code="ProvisionedThroughputExceededException",
        http_status_code=400,
    )
    with stub, pytest.raises(ClientError):
        TextractOcr(lambda: client).read(b"\x89PNG", "image/png", 60)


def test_the_synchronous_size_limit_is_enforced_as_aws_would() -> None:
    """The AWS contract (tests/aws_contracts/limits.py, on every client): over 10 MB is AWS's
    ValidationException, which is why :meth:`TextractOcr.refuses` stops such a picture first."""
    client, stub = stubbed()
    stub.add_response("detect_document_text", textract_detected(HARBOUR))  # never reached
    with stub, pytest.raises(ClientError, match="AWS limit: document of 10,000,001 bytes"):
        TextractOcr(lambda: client).read(b"\x00" * 10_000_001, "image/png", 60)
    assert TextractOcr(lambda: client).refuses(image_info(png_header(100, 100)), 10_000_001) is not None


def test_the_client_is_made_only_when_a_picture_is_read() -> None:
    made: list[int] = []
    ocr = TextractOcr(lambda: made.append(1))
    assert ocr.missing() is None and ocr.refuses(image_info(png_header(100, 100)), 1000) is None
    assert made == []


@pytest.mark.parametrize(
    ("data", "size", "words"),
    [
        (webp_lossless_header(100, 100), 1000, "does not read WebP"),
        (tiff_of_pages(2), 1000, "this TIFF has 2 pages"),
        (png_header(100, 100), 11 * 1024 * 1024, "at most 10.0 MB; this one has 11.5 MB"),
        (jpeg_header(12_000, 3_000), 1000, "at most 10000 pixels on each side; this one is 12000 × 3000"),
    ],
)
def test_what_the_synchronous_api_cannot_take_is_refused_up_front(data: bytes, size: int, words: str) -> None:
    reason = TextractOcr(lambda: None).refuses(image_info(data), size)
    assert reason is not None and words in reason


def test_a_picture_read_by_textract_answers_citing_it() -> None:
    client, stub = stubbed()
    png = png_header(1700, 2200)
    stub.add_response("detect_document_text", textract_detected(HARBOUR), {"Document": {"Bytes": png}})
    api = make_api(ocr=TextractOcr(lambda: client))
    with stub:
        res = api.call(
            "POST",
            "/documents",
            query={"filename": "harbour.png"},
            raw_body=png,
            headers={"Content-Type": "image/png"},
        )
        assert res["statusCode"] == 202, res["body"]
    doc_id = json_body(res)["documentId"]
    doc = json_body(api.call("GET", f"/documents/{doc_id}", query={"include": "body"}))
    assert doc["status"] == "READY" and doc["textFrom"] == "ocr"
    assert "Harbour notes\n\nThe harbour office opens" in doc["body"]
    notes = json_body(api.call("GET", "/notes", query={"documentId": doc_id}))["items"]
    assert all(n["metadata"]["ocr"] == "textract" for n in notes)
    body = json_body(api.call("GET", "/", query={"text": "When does the harbour office open?"}))
    assert "seven in the morning" in body["answer"] and body["sources"][0]["title"] == "harbour.png"

    webp = api.call(
        "POST",
        "/documents",
        query={"filename": "shot.webp"},
        raw_body=webp_lossless_header(100, 100),
        headers={"Content-Type": "image/webp"},
    )
    assert webp["statusCode"] == 400
    assert json_body(webp)["error"].startswith(
        "Pictures are read by Amazon Textract here, which does not read WebP."
    )


def test_a_scanned_pdf_is_read_by_textract_one_call_per_page() -> None:
    from tests.images import scanned_pdf

    client, stub = stubbed()
    for lines in (HARBOUR[:2], [("The lock keepers open the gates at dawn.", 0.1)]):
        stub.add_response("detect_document_text", textract_detected(lines))
    api = make_api(ocr=TextractOcr(lambda: client))
    with stub:
        res = api.call(
            "POST",
            "/documents",
            query={"filename": "scan.pdf"},
            raw_body=scanned_pdf([["page one"], ["page two"]], width=400),
            headers={"Content-Type": "application/pdf"},
        )
        assert res["statusCode"] == 202, res["body"]
    stub.assert_no_pending_responses()
    doc_id = json_body(res)["documentId"]
    assert json_body(api.call("GET", f"/documents/{doc_id}"))["status"] == "READY"
    notes = json_body(api.call("GET", "/notes", query={"documentId": doc_id}))["items"]
    pages = {n["metadata"]["page"]: n["text"] for n in notes}
    assert "Harbour notes" in pages[1] and "lock keepers" in pages[2]
    assert all(n["metadata"]["ocr"] == "textract" for n in notes)
