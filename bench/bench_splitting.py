"""Splitter comparison: semantic-text-splitter (what ragchat uses) vs langchain-text-splitters.

Splits every SciFact abstract (title + blank line + text; read from ``RAGCHAT_BENCH_DATA`` or
``../shared/bench-data``) at 1000 characters with 100 of overlap and records, per splitter:
install size (the distribution and everything it requires), import time (fresh interpreter, median
of 5), split time (best of 3), chunk counts and sizes, and how much consecutive chunks overlap.

langchain-text-splitters is not a ragchat dependency. Its figures are measured by running this file
with an interpreter that has it (``RAGCHAT_BENCH_LANGCHAIN_PYTHON=/path/to/python``, e.g. a scratch
venv with ``pip install langchain-text-splitters``); without one, the figures recorded by the last
such run are kept (with their date) rather than dropped.

Big documents (issue 8; ``--big`` measures only these and keeps the rest): ``split_text`` on
100 kB – 20 MB of three shapes built from SciFact: prose (abstracts, blank line between them),
one paragraph of words (the abstracts without sentence ends or line breaks: the shape that made
the library's chunk search quadratic) and one 20 MB word without any whitespace. For comparison,
the library called on the whole text (as ``split_text`` did before it used windows) up to 400 kB.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchdata import bench_data_dir, results_dir, smoke_sample

RESULTS = results_dir()
DATA = bench_data_dir() / "scifact" / "corpus.jsonl"
CHUNK, OVERLAP = 1000, 100

SPLITTERS = {
    "ragchat split_text (semantic-text-splitter)": ("semantic-text-splitter", "semantic_text_splitter"),
    "semantic-text-splitter (library overlap)": ("semantic-text-splitter", "semantic_text_splitter"),
    "langchain RecursiveCharacterTextSplitter": ("langchain-text-splitters", "langchain_text_splitters"),
}


def _texts() -> list[str]:
    with DATA.open(encoding="utf-8") as fh:
        texts = [f"{d['title']}\n\n{d['text']}" for d in map(json.loads, fh)]
    return smoke_sample(texts, 40)  # a smoke run: tiny data, the figures mean nothing


def _splitter(name: str) -> Any:
    if name.startswith("ragchat"):
        from ragchat.domain.splitting import split_text

        return lambda t: split_text(t, content_type="text/plain", chunk_size=CHUNK, overlap=OVERLAP)
    if name.startswith("semantic"):
        from semantic_text_splitter import TextSplitter

        return TextSplitter(CHUNK, overlap=OVERLAP).chunks
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(chunk_size=CHUNK, chunk_overlap=OVERLAP).split_text


def _overlap(a: str, b: str) -> int:
    for n in range(min(len(a), len(b), 2 * OVERLAP), 0, -1):
        if a.endswith(b[:n]):
            return n
    return 0


def _install_size(dist_name: str) -> dict[str, Any]:
    """Bytes on disk of a distribution and its (non-extra) requirements, recursively."""
    from importlib import metadata

    try:
        from packaging.requirements import Requirement
    except ImportError:  # pragma: no cover
        return {}
    seen: dict[str, int] = {}
    todo = [dist_name]
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[key] = sum(
            (Path(str(dist.locate_file(f))).stat().st_size if Path(str(dist.locate_file(f))).exists() else 0)
            for f in dist.files or []
        )
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return {"packages": len(seen), "bytes": sum(seen.values()), "names": sorted(seen)}


def _import_seconds(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    runs = [float(subprocess.check_output([sys.executable, "-c", code], text=True)) for _ in range(5)]
    return statistics.median(runs)


def measure(name: str, texts: list[str]) -> dict[str, Any]:
    dist, module = SPLITTERS[name]
    split = _splitter(name)
    best = float("inf")
    chunks: list[list[str]] = []
    for _ in range(3):
        started = time.perf_counter()
        chunks = [split(t) for t in texts]
        best = min(best, time.perf_counter() - started)
    lengths = [len(c) for doc in chunks for c in doc]
    overlaps = [_overlap(a, b) for doc in chunks for a, b in itertools.pairwise(doc)]
    return {
        "splitter": name,
        "install": _install_size(dist),
        "import_seconds": _import_seconds(module),
        "split_seconds": best,
        "documents": len(texts),
        "chunks": len(lengths),
        "max_chunk_chars": max(lengths),
        "mean_chunk_chars": statistics.fmean(lengths),
        "pairs": len(overlaps),
        "pairs_with_overlap": sum(1 for o in overlaps if o > 0),
        "mean_overlap_chars": statistics.fmean(overlaps) if overlaps else 0.0,
        "python": sys.version.split()[0],
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _langchain_figures(previous: dict[str, Any]) -> dict[str, Any] | None:
    name = "langchain RecursiveCharacterTextSplitter"
    other = os.environ.get("RAGCHAT_BENCH_LANGCHAIN_PYTHON")
    if other:
        out = subprocess.check_output([other, __file__, "--langchain-json"], text=True)
        return dict(json.loads(out))
    old = previous.get("splitters", {}).get(name)
    return dict(old) if old else None


BIG_SIZES = (100_000, 400_000, 2_000_000, 20_000_000)
UNBOUNDED_MAX = 400_000  # the whole-text library call is quadratic: measured only up to here


def _big_texts(size: int) -> dict[str, str]:
    prose = "\n\n".join(_texts())
    prose = prose * (size // len(prose) + 1)
    words = " ".join(prose.replace(".", " ").split())
    return {"prose": prose[:size], "words, one paragraph": words[:size], "no whitespace": "x" * size}


def _timed(split: Any, text: str) -> tuple[float, int]:
    started = time.perf_counter()
    chunks = split(text)
    return time.perf_counter() - started, len(chunks)


def measure_big() -> list[dict[str, Any]]:
    from ragchat.domain.splitting import split_text
    from semantic_text_splitter import TextSplitter

    rows: list[dict[str, Any]] = []
    for size in BIG_SIZES:
        for shape, text in _big_texts(size).items():
            seconds, chunks = _timed(lambda t: split_text(t, content_type="text/plain"), text)
            row = {"shape": shape, "chars": size, "split_text_seconds": seconds, "chunks": chunks}
            if size <= UNBOUNDED_MAX:
                library = TextSplitter(CHUNK - OVERLAP).chunk_indices
                row["library_whole_text_seconds"] = _timed(library, text)[0]
            rows.append(row)
            print(row, flush=True)
    return rows


def _big_markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "### Splitting big documents (split_text, 1000 chars / 100 overlap, plain text)",
        "",
        "Command: `python bench/bench_splitting.py --big` (this table only; `--all`: both tables).",
        "",
        "| shape | characters | split_text | chunks | library on the whole text (before) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        before = r.get("library_whole_text_seconds")
        lines.append(
            f"| {r['shape']} | {r['chars']:,} | {r['split_text_seconds']:.2f} s | {r['chunks']:,} | "
            f"{f'{before:.2f} s' if before is not None else 'not measured (quadratic)'} |"
        )
    return "\n".join(lines) + "\n"


def _markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "### Splitting (SciFact abstracts, 1000 chars / 100 overlap)",
        "",
        "| splitter | install (packages, MB) | import | split all | chunks | max chars | "
        "pairs overlapping | mean overlap |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        inst = r.get("install") or {}
        lines.append(
            f"| {r['splitter']} | {inst.get('packages', '?')}, {inst.get('bytes', 0) / 1e6:.1f} | "
            f"{r['import_seconds'] * 1000:.0f} ms | {r['split_seconds']:.2f} s | {r['chunks']} | "
            f"{r['max_chunk_chars']} | {r['pairs_with_overlap']}/{r['pairs']} | "
            f"{r['mean_overlap_chars']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    RESULTS.mkdir(exist_ok=True)
    out_json = RESULTS / "splitting.json"
    previous = json.loads(out_json.read_text()) if out_json.exists() else {}
    big = measure_big() if "--big" in sys.argv or "--all" in sys.argv else previous.get("big_documents", [])
    if "--big" in sys.argv:
        rows = list(previous["splitters"].values())
    else:
        texts = _texts()
        rows = [measure(name, texts) for name in list(SPLITTERS)[:2]]
        langchain = _langchain_figures(previous)
        if langchain:
            rows.append(langchain)
    result = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
        },
        "chunk_size": CHUNK,
        "overlap": OVERLAP,
        "splitters": {r["splitter"]: r for r in rows},
        "big_documents": big,
    }
    out_json.write_text(json.dumps(result, indent=2) + "\n")
    text = _markdown(rows) + ("\n" + _big_markdown(big) if big else "")
    (RESULTS / "splitting.md").write_text(text)
    print(text)


if __name__ == "__main__":
    if "--langchain-json" in sys.argv:
        print(json.dumps(measure("langchain RecursiveCharacterTextSplitter", _texts())))
    else:
        main()
