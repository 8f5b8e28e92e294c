"""What reading pictures by OCR costs and how well it reads (issue 45: Tesseract locally,
``adapters/local/tesseract.py``).

A letter page of 30 lines of Helvetica 12 pt (a PDF made here: no fixture) is drawn by PDFium at
100, 200 and 300 dpi and read by Tesseract (``TesseractOcr.read``, the program on one thread):
seconds (median of 3) and the share of the page's words read back exactly. Then the same page
through the parsing child with its limits (``ProcessParser`` with the OCR engine, warm), and a
two-page scanned PDF (150 dpi pictures, no text layer: drawn at 200 dpi and read page by page,
``domain/scanned.py``).

Writes ``bench/results/ocr.json`` and ``.md``. ``RAGCHAT_BENCH_SMOKE=1``: one run, 200 dpi only.
Without the ``tesseract`` program it says so and writes nothing.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import statistics
import sys
import time
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from benchdata import results_dir, smoke

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.* helpers

from tests.pdfs import pdf_of

RESULTS = results_dir()
LINES = [
    f"Line {n}: the harbour office opens at seven, and the ferry to the island leaves at {n % 12 + 1}."
    for n in range(30)
]


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9]+", text)


def _recall(truth: str, read: str) -> float:
    """The share of the page's words (with their counts) found in what was read."""
    want: dict[str, int] = {}
    for w in _words(truth):
        want[w] = want.get(w, 0) + 1
    got: dict[str, int] = {}
    for w in _words(read):
        got[w] = got.get(w, 0) + 1
    return sum(min(n, got.get(w, 0)) for w, n in want.items()) / sum(want.values())


def _text_pdf(lines: list[str]) -> bytes:
    """A letter page of ``lines`` in Helvetica 12 pt (a text layer)."""
    shown = " T* ".join(f"({line}) Tj" for line in lines)
    stream = f"BT /F1 12 Tf 14 TL 72 720 Td {shown} ET".encode()
    return pdf_of(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            b"/Contents 5 0 R >>",
            b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        ]
    )


def _scanned_pdf(pages: list[bytes]) -> bytes:
    """A PDF whose pages are pictures (150 dpi grey) of ``pages``' first pages: no text layer."""
    import zlib

    import pypdfium2 as pdfium

    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    for source in pages:
        doc = pdfium.PdfDocument(source)
        bitmap = doc[0].render(scale=150 / 72, force_bitmap_format=pdfium.raw.FPDFBitmap_Gray)
        w, h, stride, buf = bitmap.width, bitmap.height, bitmap.stride, bytes(bitmap.buffer)
        rows = zlib.compress(b"".join(buf[y * stride : y * stride + w] for y in range(h)))
        doc.close()
        n = len(objects) + 1
        kids.append(f"{n} 0 R")
        draw = b"q 612 0 0 792 0 0 cm /Im0 Do Q"
        objects += [
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /XObject << /Im0 %d 0 R >> >> /Contents %d 0 R >>" % (n + 2, n + 1),
            b"<< /Length %d >>\nstream\n%s\nendstream" % (len(draw), draw),
            b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
            b"/BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream"
            % (w, h, len(rows), rows),
        ]
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>".encode()
    return pdf_of(objects)


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def main() -> None:
    if shutil.which("tesseract") is None:
        print(
            "bench ocr: SKIPPED: the tesseract program is not installed (make ensure-tesseract, or "
            "apt-get install tesseract-ocr); nothing written",
            flush=True,
        )
        return
    from ragchat.adapters.local.parse_process import ProcessParser
    from ragchat.adapters.local.pdf_pages import PdfiumPages
    from ragchat.adapters.local.tesseract import TesseractOcr
    from ragchat.domain.content_types import PDF, PNG
    from ragchat.domain.parsing import ParseJob, parse_document

    runs = 1 if smoke() else 3
    truth = "\n".join(LINES)
    pdf = _text_pdf(LINES)
    ocr = TesseractOcr()
    by_dpi: dict[str, dict[str, Any]] = {}
    for dpi in (200,) if smoke() else (100, 200, 300):
        picture = PdfiumPages().render(pdf, 1, int(8.5 * dpi)).png
        times, cpu, read = [], [], ""
        for _ in range(runs):
            before = _children_cpu()
            seconds, pages = _timed(lambda p=picture: ocr.read(p, PNG, 600))
            cpu.append(_children_cpu() - before)  # the tesseract process's own CPU time
            times.append(seconds)
            read = "\n".join(pages)
        by_dpi[str(dpi)] = {
            "seconds": statistics.median(times),
            "cpu_seconds": statistics.median(cpu),
            "recall": _recall(truth, read),
            "bytes": len(picture),
        }
    job = ParseJob(PNG, "Bench", 1000, 100, True, 600)
    parser = ProcessParser(
        cpu_seconds=600, memory_bytes=4096 * 10**6, wall_seconds=900, parse=partial(parse_document, ocr=ocr)
    )
    page = PdfiumPages().render(pdf, 1, 1700).png
    parser.parse(lambda: page, job)  # warm
    child = statistics.median(_timed(lambda: parser.parse(lambda: page, job))[0] for _ in range(runs))
    parser.close()
    scan = _scanned_pdf([_text_pdf(LINES[:15]), _text_pdf(LINES[15:])])
    scan_job = ParseJob(PDF, "Bench", 1000, 100, True, 600)
    scan_s, parsed = _timed(lambda: parse_document(scan, scan_job, ocr))
    scanned_recall = _recall(truth, "\n".join(c.text for c in parsed.chunks))
    result = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        "tesseract": os.popen("tesseract --version 2>&1").readline().strip(),
        "by_dpi": by_dpi,
        "child_200dpi_s": child,
        "scanned_pdf_2_pages_s": scan_s,
        "scanned_pdf_recall": scanned_recall,
    }
    (RESULTS / "ocr.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    rows = "\n".join(
        f"| a letter page at {dpi} dpi ({r['bytes'] / 1000:.0f} KB PNG) | {r['seconds']:.2f} s "
        f"| {r['cpu_seconds']:.2f} s | {r['recall']:.1%} |"
        for dpi, r in by_dpi.items()
    )
    md = f"""# Reading pictures by OCR (bench/bench_ocr.py)

{result["date"]}, {result["machine"]}, {result["tesseract"]}. Medians of {runs}.

| What | Wall time | Tesseract's CPU | Words read back |
|---|---|---|---|
{rows}
| the 200 dpi page through the parsing child (warm, with its limits) | {child:.2f} s | — | — |
| a two-page scan (150 dpi pictures, read at 200 dpi) | {scan_s:.2f} s | — | {scanned_recall:.1%} |

One thread per picture (`OMP_THREAD_LIMIT=1`). Wall times follow the machine's load (shared
here); Tesseract's CPU time is what counts against `PARSE_CPU_SECONDS`. It grows with the pixels,
less than linearly (9 times the pixels from 100 to 300 dpi).
"""
    (RESULTS / "ocr.md").write_text(md, encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
