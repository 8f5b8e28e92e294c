"""The first question on a document that just turned READY, against later ones (issue 23 item 3).

Ingests ``samples/how-ingestion-works.md`` into a throwaway data dir (the configured embedder, the
extractive answerer; ``EVIDENCE_VECTORS``, ``EVIDENCE_WARMING`` and ``EMBEDDER_PRECISION`` from the
environment), waits for
READY, then, with ``--wait-warm``, for its evidence vectors too; then
asks three questions (the first one again last) and prints each one's time. Not written to
``bench/results/`` (a diagnostic: run it both ways, alternated).

``--pdf-pages N``: a generated N-page PDF (``tests/pdfs.book_pdf``) instead of the sample document,
asked about its pages (issue 31 item 4: the first answer at READY on a 1,000-page PDF).

Usage: ``python bench/first_answer.py [--wait-warm] [--pdf-pages N]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = [
    "How are documents split into chunks?",
    "What happens when ingestion fails?",
    "How are documents split into chunks?",
]

PDF_QUESTIONS = [
    "What did the committee review on page 500?",
    "What did the committee review?",
    "What did the committee review on page 500?",
]


def main() -> None:
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    body = (ROOT / "layers" / "ragchat" / "ragchat" / "samples" / "how-ingestion-works.md").read_text()
    with tempfile.TemporaryDirectory() as tmp:
        wanted = ("EVIDENCE_VECTORS", "EVIDENCE_WARMING", "EMBEDDER_PRECISION")
        passed = {k: v for k, v in os.environ.items() if k in wanted}
        env = {"RAGCHAT_DATA_DIR": tmp, "RAGCHAT_CHAT_MODEL": "extractive", **passed}
        box = Container(load_settings(env))
        box.embedder.embed_documents(["warm-up"])
        questions = QUESTIONS
        if "--pdf-pages" in sys.argv:
            sys.path.insert(0, str(ROOT))
            from tests.pdfs import book_pdf

            pages = int(sys.argv[sys.argv.index("--pdf-pages") + 1])
            pdf = book_pdf(pages)
            doc = box.ingestion.submit_file("bench", data=pdf, filename="book.pdf")
            questions = PDF_QUESTIONS
        else:
            doc = box.ingestion.submit("bench", body=body, filename="ingest.md")
        started = time.perf_counter()
        while box.documents.get_document("bench", doc.id).status.value not in ("READY", "FAILED"):
            time.sleep(0.01)
        print(f"READY after {time.perf_counter() - started:.2f} s", flush=True)
        if "--wait-warm" in sys.argv:
            box.launcher.wait_warm(120)
            print(f"evidence stored after {time.perf_counter() - started:.2f} s", flush=True)
        for question in questions:
            asked = time.perf_counter()
            result = box.ask.ask("bench", question)
            ms = (time.perf_counter() - asked) * 1000
            said = "refused" if result.guard_used else f"answered, {len(result.sources)} sources"
            print(f"{ms:.0f} ms  {question}  ({said}: {result.answer[:70]!r})", flush=True)
        print(f"1-min load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        box.close()  # stops the warmer before its data dir goes


if __name__ == "__main__":
    main()
