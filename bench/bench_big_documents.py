"""Big documents on the local stack (issue 8): a 1,000-page PDF to READY, and a short note posted
just after it.

The PDF is generated at run time (``tests/pdfs.py``: 40 lines of ~60 characters per page, 3.2 MB
for 1,000 pages; never stored) and submitted through ``IngestionService`` to the real local stack
(SQLite notes, file blobs, SQLite vector index, the ONNX MiniLM embedder, the background worker).
A one-line note is submitted right after it. Recorded: the time to accept each (the 202), the
note's and the book's time to READY, the PDF's extraction time alone, chunks, peak RSS.

Usage: ``python -m bench.bench_big_documents [--pages 1000]`` from the repository root (or through
``bench/run_all.py``). Writes ``bench/results/big_documents.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchdata import models_path, results_dir, smoke

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``tests.pdfs`` makes the PDF, also when run_all.py loads this file
    sys.path.insert(0, str(ROOT))
RESULTS = results_dir()
OWNER = "bench"
NOTE = "Ferns reproduce with spores rather than seeds."


def _container(tmp: str) -> Any:
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    model_dir = str(models_path())
    settings = load_settings(
        {"RAGCHAT_DATA_DIR": tmp, "RAGCHAT_MODEL_DIR": model_dir, "RAGCHAT_CHAT_MODEL": "extractive"}
    )
    return Container(settings)


def _ready_at(container: Any, doc_id: str, started: float, out: dict[str, float]) -> None:
    """Poll the store (as a client would) until the document leaves PENDING/PROCESSING."""
    while True:
        doc = container.documents.get_document(OWNER, doc_id)
        if doc is not None and doc.status.value in ("READY", "FAILED"):
            out[doc_id] = time.perf_counter() - started
            return
        time.sleep(0.05)


def measure(pages: int) -> dict[str, Any]:
    from ragchat.domain.extraction import extract

    from tests.pdfs import book_pdf

    pdf = book_pdf(pages)
    t0 = time.perf_counter()
    extracted = extract(pdf, content_type="application/pdf")
    extract_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        container = _container(tmp)
        container.embedder.embed_documents(["warm-up"])
        done: dict[str, float] = {}
        started = time.perf_counter()
        book = container.ingestion.submit(OWNER, body=pdf, filename="book.pdf")
        book_accept = time.perf_counter() - started
        note_started = time.perf_counter()
        note = container.ingestion.submit(OWNER, body=NOTE)
        note_accept = time.perf_counter() - note_started
        watchers = [
            threading.Thread(target=_ready_at, args=(container, book.id, started, done)),
            threading.Thread(target=_ready_at, args=(container, note.id, note_started, done)),
        ]
        for w in watchers:
            w.start()
        for w in watchers:
            w.join()
        container.launcher.close()  # the worker thread ends before the process does
        final = container.documents.get_document(OWNER, book.id)
        return {
            "pages": pages,
            "pdf_bytes": len(pdf),
            "extracted_pages": len(extracted),
            "extract_seconds": extract_s,
            "book_accept_seconds": book_accept,
            "note_accept_seconds": note_accept,
            "book_status": final.status.value,
            "book_chunks": final.chunk_count,
            "book_ready_seconds": done[book.id],
            "note_ready_seconds": done[note.id],
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "embedder_precision": container.settings.embedder_precision,
            "cpus": os.cpu_count(),
            "load_average_1min": os.getloadavg()[0],
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }


def _markdown(r: dict[str, Any]) -> str:
    return (
        "### Big documents on the local stack (MiniLM, background worker)\n\n"
        "| PDF | accepted (202) in | extraction alone | book READY after | chunks | "
        "note posted after it READY after | peak RSS |\n|---|---|---|---|---|---|---|\n"
        f"| {r['pages']:,} pages, {r['pdf_bytes'] / 1e6:.1f} MB | {r['book_accept_seconds']:.2f} s | "
        f"{r['extract_seconds']:.1f} s | {r['book_ready_seconds']:.1f} s ({r['book_status']}) | "
        f"{r['book_chunks']:,} | {r['note_ready_seconds']:.1f} s | {r['peak_rss_mb']:.0f} MB |\n\n"
        f"MiniLM {r.get('embedder_precision', 'fp32')}, on {r['cpus']} CPUs (1-min load average "
        f"{r['load_average_1min']:.1f} at the end), Python {r['python']}, {r['measured_at']}. "
        "The note waits for the book's "
        "extraction and split (one step, not sliced), then is embedded in a round of its own before "
        "any of the book's batches (before issue 8's fix it waited for the whole book).\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=1000)
    if smoke():  # tiny data: the run proves the code path, its figures mean nothing
        parser.set_defaults(pages=3)
    args = parser.parse_args([] if argv is None else argv)  # run_all.py calls main() with no args
    result = measure(args.pages)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "big_documents.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "big_documents.md").write_text(_markdown(result))
    print(_markdown(result))


if __name__ == "__main__":
    main(sys.argv[1:])
