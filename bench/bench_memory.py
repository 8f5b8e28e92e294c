"""Peak memory of the ingestion split step on big uploads (issue 18 item 8).

The split step is the one that holds a whole upload: it reads the body, extracts the text, cuts the
chunks, builds their headers and writes the batch files. Each case runs in a fresh child process
(so one case's peak does not hide another's) that builds the body, then runs ``IngestSteps.split``
over in-memory stores; the figures are the child's peak RSS (``ru_maxrss``) before and after the
split, and the split's wall time. Bodies: plain text of N MiB (prose lines), and a PDF of N MB
(``tests/pdfs.book_pdf``, 40 lines a page).

Usage (from the repository root, so ``tests`` imports):
``python -m bench.bench_memory [--text-mib 16 64 ...] [--pdf-mb 4 16 ...]``.
Writes ``bench/results/memory.{json,md}``. Sizes the machine cannot run in reasonable time are
extrapolated in the Markdown from the measured ones (linear fit), and marked as such.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# the child runs as ``python -m bench.bench_memory`` from the repository root (``tests`` imports)
sys.path[:0] = [p for p in (str(ROOT / "bench"), str(ROOT)) if p not in sys.path]

from benchdata import results_dir, smoke  # noqa: E402

RESULTS = results_dir()
LINE = "The committee reviewed the budget, the plan and the schedule for the coming year. "


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def _text_body(mib: float) -> bytes:
    size = int(mib * 1024 * 1024)
    paragraph = (LINE * 12 + "\n\n").encode()
    return (paragraph * (size // len(paragraph) + 1))[:size]


def _pdf_body(mb: float) -> bytes:
    from tests.pdfs import book_pdf

    pages = max(1, int(mb * 1_000_000 / 3_200))  # ~3.2 KB a page (40 lines of ~60 characters)
    return book_pdf(pages)


def child(kind: str, size: float) -> dict[str, Any]:
    """One case, in this process: build the body, split it, report peak RSS."""
    from ragchat.config import load_settings
    from ragchat.services.ingestion import IngestionService, IngestSteps

    from tests.fakes import FakeBlobStore, FakeDocumentStore, FakeEmbedder, FakeLauncher, FakeVectorIndex

    base = _rss_mb()
    body = _text_body(size) if kind == "text" else _pdf_body(size)
    settings = load_settings({"MAX_UPLOAD_BYTES": str(max(len(body), 500 * 1024 * 1024))})
    docs, blobs = FakeDocumentStore(), FakeBlobStore()
    embedder = FakeEmbedder()
    steps = IngestSteps(docs, blobs, embedder, FakeVectorIndex(dimension=embedder.dimension), settings)
    service = IngestionService(docs, blobs, FakeLauncher(run=None), settings)
    name = "big.txt" if kind == "text" else "big.pdf"
    key = f"uploads/bench/{name}"  # as a direct (presigned) upload: the body is in the bucket already
    blobs.put(key, body)
    doc = service.submit("bench", body=body, filename=name, stored_key=key)
    del body
    loaded = _rss_mb()
    started = time.perf_counter()
    plan = steps.split("bench", doc.id, doc.version)
    seconds = time.perf_counter() - started
    return {
        "kind": kind,
        "size": size,
        "unit": "MiB" if kind == "text" else "MB",
        "body_bytes": len(blobs.get(doc.body_key)),
        "chunks": plan["chunkCount"],
        "batches": plan["batchCount"],
        "rss_start_mb": round(base, 1),
        "rss_before_split_mb": round(loaded, 1),
        "rss_peak_mb": round(_rss_mb(), 1),
        "split_seconds": round(seconds, 1),
    }


def _run(kind: str, size: float) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.bench_memory", "--child", kind, str(size)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:  # the case failed: say how, keep the others
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"kind": kind, "size": size, "unit": "MiB" if kind == "text" else "MB", "error": last[:300]}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _fit(rows: list[dict[str, Any]], target: float) -> float | None:
    """Peak RSS at ``target`` by a least-squares line through the measured (size, peak) points."""
    if len(rows) < 2:
        return None
    xs = [r["size"] for r in rows]
    ys = [r["rss_peak_mb"] for r in rows]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my + slope * (target - mx)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", nargs=2, metavar=("KIND", "SIZE"))
    parser.add_argument("--text-mib", nargs="*", type=float, default=[16, 32, 64])
    parser.add_argument("--pdf-mb", nargs="*", type=float, default=[2, 4, 8])
    if smoke():  # tiny data: the run proves the code path, its figures mean nothing
        parser.set_defaults(text_mib=[0.5], pdf_mb=[0.1])
    args = parser.parse_args([] if argv is None else argv)  # run_all.py calls main() with no args
    if args.child:
        print(json.dumps(child(args.child[0], float(args.child[1]))))
        return
    rows = [_run("text", s) for s in args.text_mib] + [_run("pdf", s) for s in args.pdf_mb]
    load = os.getloadavg()
    meta = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_avg_1m": round(load[0], 2),
    }
    text_rows = [r for r in rows if r["kind"] == "text" and "error" not in r]
    pdf_rows = [r for r in rows if r["kind"] == "pdf" and "error" not in r]
    extrapolated = {"text_500_mib_peak_mb": _fit(text_rows, 500), "pdf_100_mb_peak_mb": _fit(pdf_rows, 100)}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "memory.json").write_text(
        json.dumps({"meta": meta, "rows": rows, "extrapolated": extrapolated}, indent=2) + "\n"
    )
    lines = [
        "# Peak memory of the split step (bench/bench_memory.py)",
        "",
        f"{meta['date']}, Python {meta['python']}, {meta['machine']}, {meta['cpus']} CPUs, "
        f"load average {meta['load_avg_1m']} (1 min).",
        "",
        "| body | size | chunks | peak RSS before split | peak RSS after split | split |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['kind']} | {r['size']:g} {r['unit']} | failed: {r['error']} | | | |")
            continue
        lines.append(
            f"| {r['kind']} | {r['size']:g} {r['unit']} ({r['body_bytes']:,} B) | {r['chunks']:,} "
            f"| {r['rss_before_split_mb']:,.0f} MB | {r['rss_peak_mb']:,.0f} MB "
            f"| {r['split_seconds']:.1f} s |"
        )
    lines += ["", "Extrapolated (least-squares line through the rows above; not measured):", ""]
    for key, value in extrapolated.items():
        lines.append(f"- {key}: {'n/a' if value is None else f'{value:,.0f} MB'}")
    (RESULTS / "memory.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    failed = [f"{r['kind']} {r['size']:g}: {r['error']}" for r in rows if "error" in r]
    if failed:
        raise RuntimeError("cases failed: " + "; ".join(failed))


if __name__ == "__main__":
    main(sys.argv[1:])
