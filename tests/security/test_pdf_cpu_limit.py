"""A PDF stopped by the parsing child's CPU limit fails with the limit's reason (issue 43 item 7): the
child's ``SIGXCPU`` exception was an ``Exception``, caught by the PDF reader's own handlers: the
document FAILED as "Could not read PDF: ." (when ``extraction``'s handler caught it), or pypdf
swallowed it and read on until the wall-clock limit (180 s by default) stopped the child, holding the
ingestion worker meanwhile. Measured on this 3 KB PDF under a 1 s limit: stopped by the wall limit
(60 s) before, by the CPU limit after."""

from __future__ import annotations

import logging

import pytest
from ragchat.adapters.local.parse_process import ProcessParser
from ragchat.domain.extraction import ExtractionError
from ragchat.domain.file_errors import too_slow_to_read
from ragchat.domain.parsing import ParseJob

from tests.pdfs import form_bomb


def test_a_pdf_over_the_childs_cpu_limit_fails_by_that_limit(caplog: pytest.LogCaptureFixture) -> None:
    pdf = form_bomb(depth=3)  # minutes of pypdf's CPU from 3 KB
    job = ParseJob("application/pdf", "bomb.pdf", 1000, 100, headers=False, cpu_seconds=600)
    # a wall-clock limit far above the CPU one: only the CPU limit may stop it (even on a busy machine)
    parser = ProcessParser(cpu_seconds=1, memory_bytes=2_000_000_000, wall_seconds=300)
    try:
        with caplog.at_level(logging.WARNING), pytest.raises(ExtractionError) as refused:
            parser.parse(lambda: pdf, job)
    finally:
        parser.close()
    assert refused.value.message == too_slow_to_read(1)
    assert "parse.wall_limit" not in caplog.text  # stopped by the CPU limit, not the wall clock
