"""The local vector index at scale (issue 23 item 5): resident memory, time to the first query
after process start, p50/p95 and recall@10, with its approximate snapshot (``vector_ann``) and
without it (exact search over the whole matrix, as before).

* **1M synthetic vectors** (random 384-d, unit length, 100 per document; filled once through
  ``LocalVectorIndex.upsert`` into ``.ragchat/bench-cache/store-<n>/``): each mode is opened in a
  fresh process, alternately; the first query's time is measured from the process's start
  (interpreter and imports included), with the files in the page cache ("warm": right after an
  untimed run of the same mode) and after evicting them from it (``posix_fadvise(DONTNEED)``,
  "cold"); then 200 single queries. Recall@10
  of the snapshot mode against exact search at 1M on these random vectors (the hardest case for
  a graph index: no structure).
* **Real MiniLM vectors** (``real_vectors.py``, SciFact sentences and SQuAD texts): recall@10 of
  ``LocalVectorIndex`` with a snapshot against exact search, with queries that are real claims
  and questions.

Run on a quiet machine: ``.venv/bin/python bench/bench_vector_store.py
[--n 1000000] [--real 40000] [--rounds 2]``; writes bench/results/vector_store.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from benchdata import cache_dir, results_dir, smoke

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = results_dir()
DIM = 384
PER_DOC = 100
DELTA = 15_000  # rows written after the last snapshot (the delta, searched exactly)
QUERIES = 200
EXACT_QUERIES = 60  # the exact mode takes ~0.2 s a query at 1M: fewer, to fit the benchmark's slot


def _unit(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)


def _records(block: np.ndarray, start: int) -> list[Any]:
    from ragchat.domain.models import VectorRecord

    return [
        VectorRecord(id=f"n{start + i}", vector=v, text="t", owner="u",
                     document_id=f"d{(start + i) // PER_DOC}", chunk_index=(start + i) % PER_DOC)
        for i, v in enumerate(block)
    ]  # fmt: skip


def fill(path: Path, n: int, ann_min_rows: int) -> dict[str, Any]:
    """``n`` rows through ``upsert``: all but the last ``DELTA`` without a snapshot, then one
    snapshot of them (as ``refresh`` writes it), then the last rows, which stay in the delta (below
    ``ann_merge_rows``): the state of an index that has grown past its last snapshot. (Growing to
    1M through ~48 incremental snapshots builds the same graph, at the cost of reading and writing
    the file each time: too long for the time this benchmark has.)"""
    from ragchat.adapters.local import vector_ann
    from ragchat.adapters.local.sqlite_store.db import SqliteDatabase
    from ragchat.adapters.local.vector_index import LocalVectorIndex

    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    db = SqliteDatabase(path)
    plain = LocalVectorIndex(db, dimension=DIM, ann_min_rows=None)
    index = LocalVectorIndex(db, dimension=DIM, ann_min_rows=ann_min_rows)
    base = max(0, n - DELTA)
    started = time.perf_counter()
    for start in range(0, n, 5000):
        if start == base:
            rows_s = time.perf_counter() - started
            vector_ann.refresh(db, DIM, min_rows=ann_min_rows, merge_rows=vector_ann.ANN_MERGE_ROWS)
            snapshot_s = time.perf_counter() - started - rows_s
        block = _unit(rng.standard_normal((min(5000, n - start), DIM), dtype=np.float32))
        (plain if start < base else index).upsert(_records(block, start))
    seconds = time.perf_counter() - started
    db.close()
    return {
        "fill_seconds": round(seconds, 1),
        "rows_seconds": round(rows_s, 1),
        "snapshot_seconds": round(snapshot_s, 1),
        "delta_rows": n - base,
        "db_mb": round(path.stat().st_size / 2**20),
        "snapshot_mb": round(sum(p.stat().st_size for p in path.parent.glob("*.usearch")) / 2**20),
    }


def _evict(path: Path) -> None:
    for file in [path, *path.parent.glob(f"{path.name}*")]:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


CHILD = r"""
import os, sys, time, resource, json
t_start = time.perf_counter()
import numpy as np, psutil
from ragchat.adapters.local.sqlite_store.db import SqliteDatabase
from ragchat.adapters.local.vector_index import LocalVectorIndex
from ragchat.domain.models import SearchFilter
mode, path, n_queries, min_rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(1)
queries = rng.standard_normal((n_queries + 1, 384), dtype=np.float32)
index = LocalVectorIndex(SqliteDatabase(path), dimension=384,
                         ann_min_rows=None if mode == "exact" else min_rows)
t_open = time.perf_counter()
index.search(queries[0], SearchFilter("u"), 5)
first = time.perf_counter()
print("FIRST", flush=True)
times, found = [], []
for q in queries[1:]:
    t = time.perf_counter()
    hits = index.search(q, SearchFilter("u"), 10)
    times.append(time.perf_counter() - t)
    found.append([h.id for h in hits])
doc_times = []
for i, q in enumerate(queries[1:51]):
    t = time.perf_counter()
    index.search(q, SearchFilter("u", document_id=f"d{i * 97}"), 5)
    doc_times.append(time.perf_counter() - t)
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
print(json.dumps({
    "imports_s": t_open - t_start, "first_query_after_imports_s": first - t_open,
    "p50_ms": float(np.percentile(times, 50)) * 1000, "p95_ms": float(np.percentile(times, 95)) * 1000,
    "document_filter_p50_ms": float(np.percentile(doc_times, 50)) * 1000,
    "rss_mb": psutil.Process().memory_info().rss / 2**20,
    "rss_anon_mb": int(status["RssAnon"].split()[0]) / 1024,
    "rss_file_mb": int(status["RssFile"].split()[0]) / 1024,
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "found": found,
}), flush=True)
"""


def open_and_query(mode: str, path: Path, cold: bool, ann_min_rows: int) -> dict[str, Any]:
    """One timed run; "warm" after an untimed run of the same mode (the page cache as a previous
    start left it: the runs alternate, and another mode's cold run evicts this one's files)."""
    if cold:
        _evict(path)
    elif not smoke():  # a smoke run: no untimed run first (the figures mean nothing)
        _run(mode, path, ann_min_rows)
    return _run(mode, path, ann_min_rows)


def _run(mode: str, path: Path, ann_min_rows: int) -> dict[str, Any]:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, mode, str(path), str(QUERIES if mode == "ann" else EXACT_QUERIES),
         str(ann_min_rows)],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    first = time.perf_counter() - started
    assert line.strip() == "FIRST", line
    result: dict[str, Any] = json.loads(proc.stdout.readline())
    proc.wait()
    result["first_query_after_start_s"] = first
    result["load_1min"] = os.getloadavg()[0]
    return result


def exact_top(path: Path, n_queries: int) -> list[list[str]]:
    """Exact top 10 of the child's queries (same seed), by a full scan of the stored vectors."""
    import sqlite3

    rng = np.random.default_rng(1)
    queries = _unit(rng.standard_normal((n_queries + 1, DIM), dtype=np.float32)[1:])
    conn = sqlite3.connect(path)
    best_scores = np.full((n_queries, 10), -np.inf, dtype=np.float32)
    best_ids = np.zeros((n_queries, 10), dtype=object)
    cursor = conn.execute("SELECT id, vector FROM vectors")
    while page := cursor.fetchmany(50_000):
        vectors = np.frombuffer(b"".join(r[1] for r in page), dtype=np.float32).reshape(len(page), DIM)
        ids = np.array([r[0] for r in page], dtype=object)
        scores = queries @ vectors.T
        all_scores = np.concatenate([best_scores, scores], axis=1)
        all_ids = np.concatenate([best_ids, np.broadcast_to(ids, scores.shape)], axis=1)
        top = np.argsort(-all_scores, axis=1)[:, :10]
        best_scores = np.take_along_axis(all_scores, top, axis=1)
        best_ids = np.take_along_axis(all_ids, top, axis=1)
    conn.close()
    return [list(row) for row in best_ids]


def real_recall(n: int) -> dict[str, Any]:
    """Recall@10 of LocalVectorIndex (snapshot + delta) on real vectors against exact search."""
    import tempfile

    from ragchat.adapters.local.sqlite_store.db import SqliteDatabase
    from ragchat.adapters.local.vector_index import LocalVectorIndex
    from ragchat.domain.models import SearchFilter
    from real_vectors import real_vectors

    base, queries = real_vectors(n)
    truth = np.argsort(-(queries @ base.T), axis=1)[:, :10]
    out: dict[str, Any] = {"vectors": len(base), "queries": len(queries)}
    # (label, ann_min_rows, ann_merge_rows): a snapshot rewritten after every write of 5,000 rows;
    # one written at 80% of the rows, the rest searched exactly as the delta
    for label, min_rows, merge_rows in (
        ("snapshot rewritten every 5,000 rows (all in it)", 1000, 1),
        ("one snapshot at 80% of the rows, the rest in the delta", int(len(base) * 0.8), 10**9),
    ):
        with tempfile.TemporaryDirectory() as tmp:
            db = SqliteDatabase(Path(tmp) / "ragchat.db")
            index = LocalVectorIndex(db, dimension=DIM, ann_min_rows=min_rows, ann_merge_rows=merge_rows)
            records = _records(base, 0)
            for start in range(0, len(records), 5000):
                index.upsert(records[start : start + 5000])
            times, hits = [], 0
            for q, t in zip(queries, truth, strict=True):
                started = time.perf_counter()
                found = index.search(q, SearchFilter("u"), 10)
                times.append(time.perf_counter() - started)
                hits += len({h.id for h in found} & {f"n{i}" for i in t})
            ann = index._ann  # what the search went through (a benchmark may look inside)
            out[label] = {
                "recall_at_10": round(hits / truth.size, 4),
                "p50_ms": round(float(np.percentile(times, 50)) * 1000, 2),
                "snapshot_rows": len(ann) if ann is not None else 0,
                "delta_rows": index._matrix.n if index._matrix is not None else 0,
            }
            db.close()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--real", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-real", action="store_true")
    parser.add_argument("--ann-min-rows", type=int, default=50_000, help="LocalVectorIndex(ann_min_rows=...)")
    parser.add_argument("--fill-only", action="store_true", help="fill the store (not timed) and stop")
    if smoke():  # tiny data: the run proves the code path, its figures mean nothing
        parser.set_defaults(n=2000, real=300, rounds=1)
    args = parser.parse_args([] if argv is None else argv)  # run_all.py calls main() with no args
    path = cache_dir() / f"store-{args.n}" / "ragchat.db"
    result: dict[str, Any] = {"name": "vector_store", "n": args.n, "dimension": DIM}
    fill_file = path.with_name("fill.json")
    if not path.is_file():
        filled = fill(path, args.n, args.ann_min_rows) | {"load_1min_after": round(os.getloadavg()[0], 2)}
        fill_file.write_text(json.dumps(filled), encoding="utf-8")
        print("filled", filled, flush=True)
    if fill_file.is_file():
        result["fill"] = json.loads(fill_file.read_text(encoding="utf-8"))
    if args.fill_only:
        return
    runs: dict[str, list[dict[str, Any]]] = {}
    for r in range(args.rounds):
        for mode in ("ann", "exact") if r % 2 == 0 else ("exact", "ann"):
            for cold in (False, True):
                run = open_and_query(mode, path, cold, args.ann_min_rows)
                key = f"{mode} {'cold' if cold else 'warm'}"
                runs.setdefault(key, []).append(run)
                print(key, {k: round(v, 3) for k, v in run.items() if k != "found"}, flush=True)
    truth = exact_top(path, QUERIES)
    summary = {}
    for key, items in runs.items():
        found = items[0]["found"]
        recall = sum(len(set(f) & set(t)) for f, t in zip(found, truth, strict=False)) / (10 * len(found))
        summary[key] = {
            field: [round(i[field], 3) for i in items]
            for field in ("first_query_after_start_s", "imports_s", "p50_ms", "p95_ms",
                          "document_filter_p50_ms", "rss_mb", "rss_anon_mb", "rss_file_mb",
                          "peak_rss_mb", "load_1min")
        }  # fmt: skip
        summary[key]["recall_at_10_vs_exact"] = round(recall, 4)
    result["runs"] = summary
    if not args.skip_real:
        result["real"] = real_recall(args.real)
        print("real", result["real"], flush=True)
    result["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count()}
    result["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "vector_store.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (RESULTS / "vector_store.md").write_text(_markdown(result), encoding="utf-8")
    print(json.dumps(summary, indent=1))


def _markdown(result: dict[str, Any]) -> str:
    def span(values: list[float], fmt: str = "{:.0f}") -> str:
        """One value, or the median and every run's value (in run order)."""
        if len(values) == 1:
            return fmt.format(values[0])
        return f"{fmt.format(float(np.median(values)))} ({', '.join(fmt.format(v) for v in values)})"

    rounds = max(len(r["first_query_after_start_s"]) for r in result["runs"].values())
    lines = [
        f"### Local vector index at {result['n']:,} random {DIM}-d vectors",
        "",
        *(
            [f"{rounds} runs of each mode: the median, then each run's figure in brackets.", ""]
            if rounds > 1
            else []
        ),
        "| mode, page cache | first query after process start | p50 / p95 of one search (k=10) | "
        "document-filtered p50 | resident (anonymous + file-backed) | peak RSS | recall@10 vs exact | "
        "1-min load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, r in result["runs"].items():
        lines.append(
            f"| {key} | {span(r['first_query_after_start_s'], '{:.2f}')} s | "
            f"{span(r['p50_ms'], '{:.1f}')} / {span(r['p95_ms'], '{:.1f}')} ms | "
            f"{span(r['document_filter_p50_ms'], '{:.1f}')} ms | {span(r['rss_mb'])} MB "
            f"({span(r['rss_anon_mb'])} + {span(r['rss_file_mb'])}) | {span(r['peak_rss_mb'])} MB | "
            f"{r['recall_at_10_vs_exact']} | {span(r['load_1min'], '{:.1f}')} |"
        )
    real = result.get("real")
    if real:
        lines += [
            "",
            f"Real MiniLM vectors ({real['vectors']:,} SciFact sentences and SQuAD texts, "
            f"{real['queries']:,} real queries), recall@10 of `LocalVectorIndex` against exact search:",
            "",
            "| snapshot | rows in it / in the delta | recall@10 | p50 |",
            "|---|---:|---:|---:|",
        ]
        for label, r in real.items():
            if isinstance(r, dict):
                lines.append(
                    f"| {label} | {r['snapshot_rows']:,} / {r['delta_rows']:,} | {r['recall_at_10']} | "
                    f"{r['p50_ms']} ms |"
                )
    fill = result.get("fill")
    if fill:
        lines += ["", f"Filled through `upsert` in {fill['rows_seconds']} s, the snapshot of all but the "
                  f"last {fill['delta_rows']:,} rows built in {fill['snapshot_seconds']} s (file "
                  f"{fill['snapshot_mb']} MB, SQLite {fill['db_mb']} MB)."]  # fmt: skip
    machine = result["machine"]
    lines += ["", f"{result['date']}, Python {machine['python']}, {machine['cpus']} CPUs."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main(sys.argv[1:])
