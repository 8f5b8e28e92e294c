"""Issue 45 item 2: Office and e-book files are read in the parsing child (``ragchat serve``'s
``PARSE_*`` limits) like every upload: a bomb is refused there with its reason, and the next file
is read by the same child."""

from __future__ import annotations

import pytest
from ragchat.adapters.local.parse_process import ProcessParser
from ragchat.domain.content_types import DOCX, XLSX
from ragchat.domain.extraction import ExtractionError
from ragchat.domain.parsing import ParseJob

from tests.office_files import BILLION_LAUGHS, sample_docx, zip_bomb, zipped


def job(content_type: str) -> ParseJob:
    return ParseJob(
        content_type=content_type, title="t", chunk_size=1000, overlap=100, headers=True, cpu_seconds=10
    )


def test_bombs_are_refused_in_the_child_and_the_next_file_is_read() -> None:
    parser = ProcessParser(cpu_seconds=10, memory_bytes=1_000_000_000, wall_seconds=60)
    try:
        with pytest.raises(ExtractionError, match="a zip bomb"):
            parser.parse(lambda: zip_bomb("word/document.xml"), job(DOCX))
        laughs = zipped({"xl/workbook.xml": BILLION_LAUGHS + "<workbook>&lol3;</workbook>"})
        with pytest.raises(ExtractionError, match="declares a DOCTYPE or entities"):
            parser.parse(lambda: laughs, job(XLSX))
        parsed = parser.parse(sample_docx, job(DOCX))
        assert "| Monday | 09:00 |" in parsed.chunks[0].text
        assert parsed.pages and parsed.pages[0][0].startswith("# Office hours")  # kept for the reader
    finally:
        parser.close()
