"""Attack (issue 43, findings 3 and 4): small files that cost the server far more than their size.

- A 1,454-byte PDF whose page draws one form 64 times cost the server process 21.9 s of CPU on the
  request thread before its 202 (the PDF check, for PDFs up to 5 MiB, had no limit): the check now
  runs in a child process of its own under ``PDF_CHECK_CPU_SECONDS`` (and a wall-clock limit).
- Three 1.7 KB PDFs each became ~4,700 chunks: the text a document may extract, per byte of the file
  and in all, and the chunks it may become are capped, and a document over a ceiling is FAILED with
  the reason.

CPU is measured as the server process's (``time.process_time``: the server runs in this process;
the check's child is not counted, and is what the budget bounds), never as wall time.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from ragchat.adapters.local.parse_process import ProcessPdfCheck
from ragchat.domain import parsing
from ragchat.domain.extraction import ExtractionError
from ragchat.domain.parsing import ParseJob, parse_document

from tests.integration.serving_support import serving
from tests.pdfs import form_bomb_pdf, make_pdf
from tests.unit.api_support import make_api

CHECKED = {"PARSE_ISOLATION": "process", "PDF_CHECK_CPU_SECONDS": "1"}


def _post_pdf(served: Any, data: bytes) -> tuple[int, dict[str, Any]]:
    conn = served.connection()
    try:
        headers = {"Content-Type": "application/pdf"}
        conn.request("POST", "/documents?filename=plan.pdf", body=data, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_a_small_pdf_that_is_expensive_to_open_is_refused_within_the_checks_cpu_budget() -> None:
    bomb = form_bomb_pdf(draws=16)  # ~1.5 KB; opening it costs ~12 s of CPU here, unbounded
    assert len(bomb) < 2000
    with serving("serve", env=CHECKED) as served:
        check = served.api.container.ingestion.pdf_check
        assert isinstance(check, ProcessPdfCheck) and check.ready.wait(120)  # its child is up
        assert _post_pdf(served, make_pdf(["A plain page."]))[0] == 202
        started = time.process_time()
        status, answer = _post_pdf(served, bomb)
        used = time.process_time() - started
        listed = served.call("GET", "/documents")
    assert status == 400
    assert "took more than 1 s of CPU to open (PDF_CHECK_CPU_SECONDS)" in answer["error"]
    assert used < 0.5, f"{used:.2f} s of the server's CPU (21.9 s before, on the request thread)"
    assert len(json.loads(listed[2])["items"]) == 1  # nothing stored for the refused one


def test_a_check_that_would_wait_for_another_users_is_left_to_the_pipeline() -> None:
    check = ProcessPdfCheck(cpu_seconds=1, wall_seconds=10, memory_bytes=2048 * 10**6, wait_s=0.01)
    try:
        assert check.ready.wait(120)
        assert check._parser._lock.acquire(timeout=1)  # another upload's check is running
        try:
            check(form_bomb_pdf(draws=16))  # not opened now: no wait, no refusal
        finally:
            check._parser._lock.release()
        assert check.deferred == 1
        with pytest.raises(ExtractionError, match="no %PDF header"):
            check(b"not a pdf at all")  # the child free again: checked as before
    finally:
        check.close()


# ------------------------------------------------------------------------------ the ceilings
def _job(**ceilings: Any) -> ParseJob:
    return ParseJob("application/pdf", "Plan", 1000, 0, headers=False, cpu_seconds=60, **ceilings)


def test_a_tiny_file_expanding_to_more_chunks_than_the_ceiling_fails_with_the_reason() -> None:
    api = make_api({"MAX_CHUNKS_PER_DOCUMENT": "20"})
    pdf = form_bomb_pdf(draws=2, repeats=4000)  # ~1.2 KB → ~48,000 characters → ~49 chunks
    posted = api.call(
        "POST",
        "/documents",
        query={"filename": "plan.pdf"},
        raw_body=pdf,
        headers={"Content-Type": "application/pdf"},
    )
    assert posted["statusCode"] == 202, posted
    doc_id = json.loads(posted["body"])["documentId"]
    doc = json.loads(api.call("GET", f"/documents/{doc_id}")["body"])
    assert doc["status"] == "FAILED"
    assert "chunks; at most 20 are kept per document (MAX_CHUNKS_PER_DOCUMENT)" in doc["error"]
    assert api.index.count("alice") == 0  # nothing of it searchable


def test_text_far_larger_than_its_file_stops_the_reading_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(parsing, "EXPANSION_FLOOR_CHARS", 100_000)
    pdf = form_bomb_pdf(draws=2, repeats=20_000)  # ~1.3 KB → 240,000 characters
    with pytest.raises(ExtractionError, match=r"expands to far more text than its size: more than 100,000"):
        parse_document(pdf, _job(max_expansion=10.0))
    assert parse_document(pdf, _job(max_expansion=1000.0)).chunks  # within a looser ceiling


def test_the_text_ceiling_holds_for_every_type() -> None:
    text = ("Ferns reproduce with spores. " * 200).encode()  # 5,800 characters
    with pytest.raises(ExtractionError, match=r"more than 5,000 characters \(MAX_EXTRACTED_CHARS\)"):
        parse_document(text, _text_job(5000))
    assert parse_document(text, _text_job(10_000)).chunks


def _text_job(max_chars: int) -> ParseJob:
    return ParseJob("text/plain", "Ferns", 1000, 0, headers=False, cpu_seconds=60, max_chars=max_chars)
