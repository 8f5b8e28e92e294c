"""Another user's one-line note while one user's uploads expand to thousands of chunks (issue 43,
finding 4: three 1.7 KB PDFs of ~4,700 chunks each from user A held user B's one-line note back 178 s).

The local ingestion worker (``InlineIngestionLauncher`` + ``SlicedRunner`` with its reading lane, as
``ragchat serve`` builds them) over in-memory stores: a warm-up note first (so no first-use cost falls
in the measure), then user A submits three small PDFs whose page draws the same compressed form
``DRAWS`` times (each ~1.4 KB, seconds of CPU to read, ~270 chunks), then user B submits a
one-line note. Measured: the wall time from B's submit to B's note READY, and whether A's documents
were still PROCESSING then. The embedder stands in for MiniLM at a fixed cost per text
(``EMBED_MS_PER_TEXT``: a sleep, so the figure does not depend on the machine's load). The PDFs are
read for real: ``--isolation off`` (default) in this process (``PARSE_ISOLATION=off``: the reading
lane's thread shares the interpreter with the worker), ``--isolation on`` in the parsing children
``ragchat serve`` uses (``LanedParser``). Median of ``RUNS``.

``python bench/bench_fair_ingestion.py [--label NAME] [--isolation on|off]`` (default label: "reading
lane") writes ``bench/results/fair_ingestion.json`` (one entry per label, kept across runs) and
``.md``. For the "before" row, run it with ``PYTHONPATH`` pointing at an older checkout's
``layers/ragchat``.
``RAGCHAT_BENCH_SMOKE=1``: one smaller run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.* helpers

from benchdata import results_dir, smoke
from ragchat.adapters.local.pipeline import InlineIngestionLauncher
from ragchat.config import load_settings
from ragchat.domain.models import DocumentStatus
from ragchat.services import ingestion as ingestion_module
from ragchat.services.ingest_runner import SlicedRunner
from ragchat.services.ingestion import IngestionService, IngestSteps

from tests.fakes import FakeBlobStore, FakeDocumentStore, FakeEmbedder, FakeVectorIndex
from tests.pdfs import form_bomb_pdf

RESULTS = results_dir()
EMBED_MS_PER_TEXT = 5.0
DRAWS = 2
NOTE = "Ferns reproduce with spores rather than seeds."


class TimedEmbedder(FakeEmbedder):
    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        time.sleep(len(texts) * EMBED_MS_PER_TEXT / 1000)
        return super().embed_documents(texts)


def _runner() -> SlicedRunner:
    try:  # the reading lane (issue 43 item 4); a checkout before it has none
        from ragchat.services.ingest_lane import ReadingLane
    except ImportError:
        return SlicedRunner()
    return SlicedRunner(lane=ReadingLane())


def _parser(isolation: str, settings: Any) -> Any:
    """The parsing children ``ragchat serve`` uses (``--isolation on``), or ``None``: in-process."""
    if isolation == "off":
        return None
    from ragchat.adapters.local.parse_process import LanedParser, ProcessParser

    def child() -> ProcessParser:
        mb = settings.parse_memory_mb * 1024 * 1024
        return ProcessParser(
            cpu_seconds=settings.parse_cpu_s, memory_bytes=mb, wall_seconds=settings.parse_wall_s
        )

    return LanedParser(child)


def _wait_done(docs: FakeDocumentStore, owner: str, doc_id: str) -> None:
    while True:
        doc = docs.get_document(owner, doc_id)
        if doc is not None and doc.status in (DocumentStatus.READY, DocumentStatus.FAILED):
            return
        time.sleep(0.01)


def one_run(draws: int, isolation: str = "off") -> dict[str, Any]:
    ingestion_module.INLINE_PDF_CHECK_BYTES = 0  # what is measured is the queue, not the check
    settings = load_settings({"PARSE_ISOLATION": "off", "RAGCHAT_DATA_DIR": "/tmp/ragchat-bench-fair"})
    docs, blobs, embedder = FakeDocumentStore(), FakeBlobStore(), TimedEmbedder()
    index = FakeVectorIndex(dimension=embedder.dimension)
    parser = _parser(isolation, settings)
    steps = IngestSteps(docs, blobs, embedder, index, settings, parser=parser)
    launcher = InlineIngestionLauncher(lambda: steps, runner=_runner())
    ingestion = IngestionService(docs, blobs, launcher, settings)
    try:
        _wait_done(docs, "user-c", ingestion.submit("user-c", body="A warm-up note.").id)
        pdfs = [form_bomb_pdf(draws=draws) + b"%" + str(i).encode() for i in range(3)]  # three versions
        heavy = [ingestion.submit("user-a", body=pdf, content_type="application/pdf").id for pdf in pdfs]
        started = time.perf_counter()
        note = ingestion.submit("user-b", body=NOTE).id
        _wait_done(docs, "user-b", note)
        waited = time.perf_counter() - started
        a_states = sorted(str(d.status) for d in (docs.get_document("user-a", i) for i in heavy) if d)
        launcher.wait_idle(600)
        chunks = [getattr(docs.get_document("user-a", i), "chunk_count", 0) for i in heavy]
        a_done = time.perf_counter() - started
    finally:
        launcher.close()
        if parser is not None:
            parser.close()
    return {"b_ready_s": waited, "a_states_then": a_states, "a_chunks": chunks, "a_all_done_s": a_done}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="reading lane")
    parser.add_argument("--isolation", choices=("on", "off"), default="off")
    args = parser.parse_args()
    runs, draws = (1, 1) if smoke() else (3, DRAWS)
    load = os.getloadavg()[0]  # the machine is shared: what else ran beside it
    results = [one_run(draws, args.isolation) for _ in range(runs)]
    summary = {
        "runs": runs,
        "draws": draws,
        "isolation": args.isolation,
        "load_1min": round(load, 1),
        "b_ready_s_median": round(statistics.median(r["b_ready_s"] for r in results), 2),
        "b_ready_s_max": round(max(r["b_ready_s"] for r in results), 2),
        "a_chunks": results[0]["a_chunks"],
        "a_states_when_b_ready": results[0]["a_states_then"],
        "a_all_done_s_median": round(statistics.median(r["a_all_done_s"] for r in results), 1),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }
    out = RESULTS / "fair_ingestion.json"
    previous = json.loads(out.read_text()) if out.exists() else {}
    labels = previous.get("labels", {})
    labels[args.label] = summary
    machine = f"{platform.system()} {platform.machine()}, {platform.python_version()}"
    out.write_text(
        json.dumps({"machine": machine, "embed_ms_per_text": EMBED_MS_PER_TEXT, "labels": labels}, indent=2)
        + "\n"
    )
    text = render(labels, draws, summary["a_chunks"][0])
    (RESULTS / "fair_ingestion.md").write_text(text)
    print(text)


def render(labels: dict[str, dict[str, Any]], draws: int, chunks: int) -> str:
    """The Markdown table of every recorded label, in the order recorded."""
    lines = [
        "### Another user's note while one user's PDFs expand (local ingestion worker, issue 43)",
        "",
        f"User A: three ~1.4 KB PDFs (one page drawing a compressed form {draws} times, "
        f"~{chunks} chunks each); then user B: a one-line note. "
        f"Embedder: {EMBED_MS_PER_TEXT:g} ms per text. Load: the machine's 1-minute load average "
        "(2 cores, shared).",
        "",
        "| Run | PDFs read | B's note READY after (median / max s) | A's documents then | A all done (s) "
        "| load |",
        "|---|---|---|---|---|---|",
    ]
    for label, r in labels.items():
        states = ", ".join(r["a_states_when_b_ready"])
        where = "in the parsing children" if r.get("isolation") == "on" else "in the server process"
        lines.append(
            f"| {label} ({r['date']}) | {where} | {r['b_ready_s_median']} / {r['b_ready_s_max']} | "
            f"{states} | {r['a_all_done_s_median']} | {r.get('load_1min', '17–25')} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
