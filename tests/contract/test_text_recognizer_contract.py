"""The ``TextRecognizer`` port (issue 45), one suite for each engine: Tesseract (the real program,
skipped where it is not installed) and Amazon Textract (botocore's Stubber, answering what Textract
answers for the same picture). Each reads a picture's lines as lines with its paragraphs apart,
takes a small PNG, and turns a picture it cannot read into an ``ExtractionError`` naming the
problem; ``NoOcr`` refuses everything with its reason."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from ragchat.adapters.aws.textract import TextractOcr
from ragchat.adapters.local.tesseract import TesseractOcr
from ragchat.domain.errors import ExtractionError
from ragchat.domain.images import NoOcr, image_info
from ragchat.ports import TextRecognizer

from tests.images import text_png, textract_detected

LINES = ["Harbour notes", "", "The harbour office opens at seven.", "Ferries leave every hour."]
# where Textract finds those lines on the picture (a gap above the second: a new paragraph)
PLACED = [
    ("Harbour notes", 0.05),
    ("The harbour office opens at seven.", 0.12),
    ("Ferries leave every hour.", 0.145),
]
EXPECTED = "Harbour notes\n\nThe harbour office opens at seven.\nFerries leave every hour."


@contextmanager
def tesseract(answer: str) -> Iterator[TextRecognizer]:
    if shutil.which("tesseract") is None:
        pytest.skip("the tesseract program is not installed (make ensure-tesseract)")
    yield TesseractOcr()


@contextmanager
def textract(answer: str) -> Iterator[TextRecognizer]:
    client = boto3.client(
        "textract", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    stub = Stubber(client)
    if answer == "lines":
        stub.add_response("detect_document_text", textract_detected(PLACED))
    else:
        stub.add_client_error(
            "detect_document_text",
            service_error_code="BadDocumentException",
            service_message="Amazon Textract isn't able to read the document.",
            http_status_code=400,
        )
    with stub:
        yield TextractOcr(lambda: client)


ENGINES = {"tesseract": tesseract, "textract": textract}


@pytest.fixture(params=sorted(ENGINES))
def engine(request: pytest.FixtureRequest) -> Any:
    return ENGINES[request.param]


def test_it_is_a_text_recognizer_that_can_read_here(engine: Any) -> None:
    with engine("lines") as ocr:
        assert isinstance(ocr, TextRecognizer)
        assert ocr.missing() is None
        assert ocr.refuses(image_info(text_png(LINES, 900)), 50_000) is None


def test_lines_stay_lines_and_paragraphs_stay_apart(engine: Any) -> None:
    with engine("lines") as ocr:
        pages = ocr.read(text_png(LINES), "image/png", 60)
    assert len(pages) == 1
    assert pages[0].strip() == EXPECTED


def test_a_picture_it_cannot_read_is_an_extraction_error(engine: Any) -> None:
    broken = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    with engine("unreadable") as ocr, pytest.raises(ExtractionError) as err:
        ocr.read(broken, "image/png", 60)
    assert err.value.message.startswith(("OCR could not read the picture", "Amazon Textract could not read"))


def test_no_ocr_refuses_everything_with_its_reason() -> None:
    ocr = NoOcr("OCR is off here.")
    assert isinstance(ocr, TextRecognizer)
    assert ocr.missing() == ocr.refuses(image_info(text_png(LINES, 300)), 1) == "OCR is off here."
    with pytest.raises(ExtractionError, match=r"^OCR is off here\.$"):
        ocr.read(b"", "image/png", 1)
