"""Issue 45 item 2: pictures are read in the parsing child (``ragchat serve``'s ``PARSE_*`` limits):
an image bomb is refused there from its header, Tesseract is stopped at the document's CPU budget
(it runs as the child's subprocess, killed when the budget is spent), and the next picture is read
normally by the same child."""

from __future__ import annotations

import shutil
from functools import partial

import pytest
from ragchat.adapters.local.parse_process import ProcessParser
from ragchat.adapters.local.tesseract import TesseractOcr
from ragchat.domain.content_types import PNG
from ragchat.domain.extraction import ExtractionError
from ragchat.domain.parsing import ParseJob, parse_document

from tests.images import png_header, text_png

pytestmark = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="the tesseract program is not installed (make ensure-tesseract)"
)


def job(cpu_seconds: float) -> ParseJob:
    return ParseJob(
        content_type=PNG,
        title="t",
        chunk_size=1000,
        overlap=100,
        headers=True,
        cpu_seconds=cpu_seconds,
    )


def test_a_bomb_and_a_slow_picture_are_stopped_and_the_next_is_read() -> None:
    parser = ProcessParser(
        cpu_seconds=1,
        memory_bytes=4_000_000_000,
        wall_seconds=60,
        parse=partial(parse_document, ocr=TesseractOcr()),
    )
    try:
        with pytest.raises(
            ExtractionError, match=r"30000 × 30000 pixels .* at most 50.0 megapixels are read"
        ):
            parser.parse(lambda: png_header(30_000, 30_000), job(1))
        # a page of dense text at ~400 dpi: several seconds of Tesseract, over a 1 s budget
        dense = text_png(
            [f"Line {n}: the harbour office opens at seven and closes at five." for n in range(45)], 3400
        )
        with pytest.raises(ExtractionError, match=r"^The file took too long to read: the limit is 1 s"):
            parser.parse(lambda: dense, job(1))
        small = text_png(["The pier lamps are lit at dusk."], 1200)
        parsed = parser.parse(lambda: small, job(30))
        assert "The pier lamps are lit at dusk." in parsed.chunks[0].text
        assert parsed.chunks[0].metadata == {"ocr": "tesseract"}
    finally:
        parser.close()
