"""Which approximate-search library backs the local vector index's snapshot (issue 23 item 5):
usearch, hnswlib and faiss-cpu HNSW, on REAL MiniLM vectors (``real_vectors.py``: SciFact
sentences, SQuAD paragraphs and questions) against exact search.

Per candidate: build time, index size, p50/p95 of one query, recall@10 of the raw top 10 and of
the top 10 after rescoring the top 64 candidates exactly (what ``LocalVectorIndex`` does), import
time (fresh interpreter) and installed size. hnswlib and faiss-cpu are not project dependencies:
``pip install hnswlib faiss-cpu`` into the venv to compare them (missing ones are skipped).

Run: ``.venv/bin/python bench/bench_ann_choice.py [--n 40000]``; writes
bench/results/ann_choice.json and .md.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from benchdata import results_dir, smoke
from real_vectors import real_vectors

RESULTS = results_dir()
K = 10
CANDIDATES = 64


def _exact(base: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    scores = queries @ base.T
    top = np.argpartition(-scores, k, axis=1)[:, :k]
    return top


def _recall(found: list[np.ndarray], truth: np.ndarray) -> float:
    hits = sum(len(set(f.tolist()) & set(t.tolist())) for f, t in zip(found, truth, strict=True))
    return hits / truth.size


def _rescored(base: np.ndarray, query: np.ndarray, keys: np.ndarray) -> np.ndarray:
    keys = keys[keys >= 0]
    scores = base[keys] @ query
    return keys[np.argsort(-scores)[:K]]


# Each candidate: build(base, path) writes the index file and frees the graph it built;
# open(path, dim, ef) maps or loads it and returns search(query, k) -> keys.
def _usearch_build(dtype: str) -> Callable[[np.ndarray, str], None]:
    def build(base: np.ndarray, path: str) -> None:
        from usearch.index import Index

        index = Index(ndim=base.shape[1], metric="ip", dtype=dtype, connectivity=16, expansion_add=64)
        index.add(np.arange(len(base), dtype=np.uint64), base)
        index.save(path)

    return build


def _usearch_open(path: str, dim: int, ef: int) -> Any:
    from usearch.index import Index

    view = Index.restore(path, view=True, expansion_search=ef)  # memory-mapped, nothing copied
    return lambda q, k: np.asarray(view.search(q, k).keys, dtype=np.int64)


def _hnswlib_build(base: np.ndarray, path: str) -> None:
    import hnswlib

    index = hnswlib.Index(space="ip", dim=base.shape[1])
    index.init_index(max_elements=len(base), ef_construction=64, M=16)
    index.add_items(base, np.arange(len(base)))
    index.save_index(path)


def _hnswlib_open(path: str, dim: int, ef: int) -> Any:
    import hnswlib

    loaded = hnswlib.Index(space="ip", dim=dim)
    loaded.load_index(path)  # hnswlib reads the whole file into memory (no mapping)
    loaded.set_ef(ef)
    return lambda q, k: loaded.knn_query(q, k=k)[0][0].astype(np.int64)


def _faiss_build(base: np.ndarray, path: str) -> None:
    import faiss

    index = faiss.IndexHNSWFlat(base.shape[1], 16, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 64
    index.add(base)
    faiss.write_index(index, path)


def _faiss_open(path: str, dim: int, ef: int) -> Any:
    import faiss

    loaded = faiss.read_index(path, faiss.IO_FLAG_MMAP)
    loaded.hnsw.efSearch = ef
    return lambda q, k: loaded.search(q.reshape(1, -1), k)[1][0].astype(np.int64)


# name: (module, build, open, expansion_search)
CANDIDATE_LIBRARIES: dict[str, tuple[str, Callable[..., Any], Callable[..., Any], int]] = {
    "usearch i8": ("usearch", _usearch_build("i8"), _usearch_open, 96),
    "usearch i8, expansion_search 256 (chosen)": ("usearch", _usearch_build("i8"), _usearch_open, 256),
    "usearch f16": ("usearch", _usearch_build("f16"), _usearch_open, 96),
    "usearch f32": ("usearch", _usearch_build("f32"), _usearch_open, 96),
    "hnswlib": ("hnswlib", _hnswlib_build, _hnswlib_open, 96),
    "faiss-cpu HNSWFlat": ("faiss", _faiss_build, _faiss_open, 96),
}


def _import_seconds(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout) for _ in range(1 if smoke() else 3)]  # fmt: skip
    return round(sorted(runs)[len(runs) // 2], 3)


def _installed_mb(module: str) -> float:
    """Size on disk of the installed package (its folder, or its single extension module) and of
    the shared libraries its wheel vendors (``<name>.libs``)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    origin = Path(spec.origin)
    if origin.name == "__init__.py":
        site = origin.parent.parent
        size = sum(p.stat().st_size for p in origin.parent.rglob("*") if p.is_file())
    else:  # a top-level extension module (hnswlib)
        site = origin.parent
        size = origin.stat().st_size
    for lib in set(site.glob(f"{module}*.libs")):
        size += sum(p.stat().st_size for p in lib.rglob("*") if p.is_file())
    return round(size / 2**20, 1)


DEPENDENCIES = {"usearch": ["numkong", "tqdm"]}  # what the package pulls in besides numpy


def _installed_with_dependencies_mb(module: str) -> float:
    return round(sum(_installed_mb(m) for m in [module, *DEPENDENCIES.get(module, [])]), 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=40000)
    if smoke():  # tiny data: the run proves the code path, its figures mean nothing
        parser.set_defaults(n=300)
    args = parser.parse_args([] if argv is None else argv)  # run_all.py calls main() with no args
    base, queries = real_vectors(args.n)
    truth = _exact(base, queries, K)
    rows = []
    for name, (module, build, open_index, ef) in CANDIDATE_LIBRARIES.items():
        if importlib.util.find_spec(module) is None:
            print(f"{name}: not installed, skipped")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "index")
            started = time.perf_counter()
            build(base, path)
            build_s = time.perf_counter() - started
            size_mb = os.path.getsize(path) / 2**20
            gc.collect()
            rss_before = psutil.Process().memory_info().rss
            started = time.perf_counter()
            search = open_index(path, base.shape[1], ef)
            search(queries[0], CANDIDATES)
            open_s = time.perf_counter() - started
            opened_mb = (psutil.Process().memory_info().rss - rss_before) / 2**20
            raw, rescored, times = [], [], []
            for q in queries:
                t = time.perf_counter()
                keys = search(q, CANDIDATES)
                times.append(time.perf_counter() - t)
                raw.append(keys[:K])
                rescored.append(_rescored(base, q, keys))
        row = {
            "library": name,
            "build_s": round(build_s, 2),
            "index_mb": round(size_mb, 1),
            "open_and_first_query_s": round(open_s, 4),
            "resident_after_open_mb": round(opened_mb, 1),
            "query_p50_ms": round(float(np.percentile(times, 50)) * 1000, 3),
            "query_p95_ms": round(float(np.percentile(times, 95)) * 1000, 3),
            "recall_at_10_raw": round(_recall(raw, truth), 4),
            "recall_at_10_rescored_64": round(_recall(rescored, truth), 4),
            "import_s": _import_seconds(module),
            "installed_mb": _installed_with_dependencies_mb(module),
        }
        print(row, flush=True)
        rows.append(row)
    result = {
        "name": "ann_choice",
        "vectors": len(base),
        "queries": len(queries),
        "dimension": int(base.shape[1]),
        "k": K,
        "candidates": CANDIDATES,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_1min": round(os.getloadavg()[0], 2),
        },
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ann_choice.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    lines = [
        f"### Approximate search libraries on {len(base):,} real MiniLM vectors ({len(queries):,} queries)",
        "",
        "| library | build | index file | open + first query | resident after | query p50 / p95 "
        "(64 candidates) | recall@10 raw | recall@10 rescored from 64 | import | installed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['library']} | {r['build_s']} s | {r['index_mb']} MB | {r['open_and_first_query_s']} s | "
            f"{r['resident_after_open_mb']} MB | {r['query_p50_ms']} / "
            f"{r['query_p95_ms']} ms | {r['recall_at_10_raw']} | {r['recall_at_10_rescored_64']} | "
            f"{r['import_s']} s | {r['installed_mb']} MB |"
        )
    lines += [
        "",
        "HNSW with connectivity (M) 16 and expansion_add (efConstruction) 64 everywhere; expansion_search "
        "(ef) 96 unless the row names another. Resident after = RSS growth from opening the file and "
        "answering one query (a memory-mapped file grows it only by the pages that query touched).",
        "",
        f"1-min load {result['machine']['load_1min']}, {result['date']}.",
    ]
    (RESULTS / "ann_choice.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
