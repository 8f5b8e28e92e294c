"""Local ingestion pipeline throughput and one-shot question latency.

Ingests SciFact abstracts (read from ``/work/shared/bench-data`` or ``RAGCHAT_BENCH_DATA`` at run
time, never copied) through the real local stack — ``IngestionService`` → inline pipeline →
SQLite notes + embedded vector index + all-MiniLM-L6-v2 (ONNX) — then asks SciFact test queries
through ``AskService`` with the extractive answerer. Writes ``bench/results/ingestion.{json,md}``.

Usage: ``python bench/bench_ingestion.py [--docs 300] [--queries 50]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DATA = Path(os.environ.get("RAGCHAT_BENCH_DATA", "/work/shared/bench-data")) / "scifact"


def _load(n_docs: int, n_queries: int) -> tuple[list[dict[str, Any]], list[str]]:
    queries = {}
    with (DATA / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            queries[row["_id"]] = row["text"]
    wanted_docs: list[str] = []
    test_queries: list[str] = []
    with (DATA / "qrels" / "test.tsv").open(encoding="utf-8") as fh:
        next(fh)  # header
        for line in fh:
            qid, did, _ = line.rstrip("\n").split("\t")
            if qid in queries and len(test_queries) < n_queries and queries[qid] not in test_queries:
                test_queries.append(queries[qid])
            if len(wanted_docs) < n_docs and did not in wanted_docs:
                wanted_docs.append(did)
    corpus: dict[str, dict[str, Any]] = {}
    with (DATA / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            corpus[row["_id"]] = row
    # the documents the test queries are about first, then others up to n_docs
    chosen = [d for d in wanted_docs if d in corpus]
    taken = set(chosen)
    chosen += [d for d in corpus if d not in taken][: max(n_docs - len(chosen), 0)]
    return [corpus[d] for d in chosen[:n_docs]], test_queries


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args(argv if argv is not None else [])

    from ragchat.config import load_settings
    from ragchat.container import Container
    from ragchat.domain.models import DocumentStatus

    docs, queries = _load(args.docs, args.queries)
    model_dir = os.environ.get("RAGCHAT_MODEL_DIR") or str(ROOT / ".ragchat" / "models")
    with tempfile.TemporaryDirectory(prefix="ragchat-bench-") as tmp:
        settings = load_settings(
            {"RAGCHAT_DATA_DIR": tmp, "RAGCHAT_MODEL_DIR": model_dir, "RAGCHAT_CHAT_MODEL": "extractive"}
        )
        container = Container(settings)
        owner = "bench"
        container.embedder.embed_query("warm up")  # load the model outside the timed part

        t0 = time.perf_counter()
        ids = [
            container.ingestion.submit(owner, body=f"{d['title']}\n\n{d['text']}", title=d["title"]).id
            for d in docs
        ]
        submitted = time.perf_counter() - t0
        idle = container.launcher.wait_idle(3600)  # type: ignore[attr-defined]
        total = time.perf_counter() - t0
        final = [container.documents.get_document(owner, i) for i in ids]
        ready = [d for d in final if d is not None and d.status == DocumentStatus.READY]
        chunks = sum(d.chunk_count for d in ready)

        latencies: list[float] = []
        guarded = 0
        for q in queries:
            s = time.perf_counter()
            result = container.ask.ask(owner, q)
            latencies.append((time.perf_counter() - s) * 1000)
            guarded += int(result.guard_used)
        container.launcher.close()  # type: ignore[attr-defined]

    figures = {
        "documents": len(docs),
        "ready": len(ready),
        "idle": idle,
        "chunks": chunks,
        "submit_seconds": round(submitted, 3),
        "submit_ms_per_doc": round(submitted / max(len(docs), 1) * 1000, 2),
        "ingest_seconds": round(total, 3),
        "docs_per_second": round(len(ready) / total, 2) if total else None,
        "chunks_per_second": round(chunks / total, 2) if total else None,
        "queries": len(queries),
        "ask_ms_p50": round(_pct(latencies, 50), 1),
        "ask_ms_p95": round(_pct(latencies, 95), 1),
        "guard_rate": round(guarded / max(len(queries), 1), 3),
        "min_similarity": settings.similarity_threshold,
    }
    machine = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ingestion.json").write_text(
        json.dumps({"figures": figures, "machine": machine}, indent=2) + "\n", encoding="utf-8"
    )
    md = [
        "### Local ingestion and one-shot questions",
        "",
        f"SciFact abstracts through the local stack (SQLite, embedded index, MiniLM ONNX, extractive "
        f"answerer) on {machine['cpus']} CPUs, Python {machine['python']}.",
        "",
        "| documents | chunks | time to READY | docs/s | chunks/s | submit per doc | ask p50 | ask p95 |",
        "|---|---|---|---|---|---|---|---|",
        f"| {figures['ready']}/{figures['documents']} | {chunks} | {figures['ingest_seconds']} s "
        f"| {figures['docs_per_second']} | {figures['chunks_per_second']} "
        f"| {figures['submit_ms_per_doc']} ms | {figures['ask_ms_p50']} ms | {figures['ask_ms_p95']} ms |",
        "",
        f"{figures['queries']} SciFact test queries; guard rate {figures['guard_rate']:.0%} at "
        f"MIN_SIMILARITY {figures['min_similarity']}.",
    ]
    (RESULTS / "ingestion.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
