"""Raw throughput and parity of the local embedder (all-MiniLM-L6-v2, ONNX, onnxruntime + tokenizers).

Embeds the first N SciFact abstracts (title + " " + text; read at run time from
``RAGCHAT_BENCH_DATA`` or ``../shared/bench-data``, never copied) in calls of 256 passages, and
records passages/s, tokens/s, model load time, peak RSS and the parity with the reference
embeddings made by sentence-transformers at export time. Needs ``make model``.

Usage: ``python bench/bench_embedder.py [--docs 2000] [--threads N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any

from benchdata import bench_data_dir, models_path, results_dir, smoke

ROOT = Path(__file__).resolve().parent.parent
RESULTS = results_dir()
DATA = bench_data_dir() / "scifact"


def machine_info() -> dict[str, Any]:
    import onnxruntime

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "onnxruntime": onnxruntime.__version__,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }


def load_passages(limit: int | None = None) -> list[str]:
    passages = []
    with (DATA / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            passages.append(f"{row['title']} {row['text']}".strip())
            if limit is not None and len(passages) >= limit:
                break
    return passages


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime threads (default: all cores)")
    if smoke():  # tiny data: the run proves the code path, its figures mean nothing
        parser.set_defaults(docs=16)
    args = parser.parse_args([] if argv is None else argv)  # run_all.py calls main() with no args

    import numpy as np
    from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder, model_dir

    RESULTS.mkdir(exist_ok=True)
    rss_before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    embedder = OnnxMiniLMEmbedder.from_cache(models_path(), threads=args.threads)
    load_s = time.perf_counter() - started

    # parity with sentence-transformers (reference.json, written at export time)
    reference = json.loads((model_dir(models_path()) / "reference.json").read_text(encoding="utf-8"))
    got = embedder.embed_array(reference["sentences"])
    cosines = (got * np.asarray(reference["embeddings"], dtype=np.float32)).sum(axis=1)

    passages = load_passages(args.docs)
    tokens = sum(min(len(e.ids), 256) for e in embedder._tokenizer.encode_batch(passages))
    embedder.embed_documents(passages[:16])  # warm-up
    started = time.perf_counter()
    for i in range(0, len(passages), 256):
        embedder.embed_documents(passages[i : i + 256])
    elapsed = time.perf_counter() - started

    single = passages[:50]
    started = time.perf_counter()
    for text in single:
        embedder.embed_query(text)
    single_ms = (time.perf_counter() - started) / len(single) * 1000
    queries = ["What reduces the risk of respiratory infections?"] * 50
    started = time.perf_counter()
    for q in queries:
        embedder.embed_query(q)
    query_ms = (time.perf_counter() - started) / len(queries) * 1000

    figures = {
        "model_id": embedder.model_id,
        "threads": embedder.threads,
        "batch_size": embedder.batch_size,
        "token_budget": embedder.token_budget,
        "passages": len(passages),
        "tokens_after_truncation": tokens,
        "seconds": round(elapsed, 2),
        "passages_per_s": round(len(passages) / elapsed, 1),
        "tokens_per_s": round(tokens / elapsed),
        "single_passage_ms": round(single_ms, 1),
        "short_query_ms": round(query_ms, 2),
        "model_load_s": round(load_s, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_before_load_mb": round(rss_before_mb, 1),
        "parity_sentences": len(reference["sentences"]),
        "parity_reference": reference.get("method"),
        "parity_min_cosine": round(float(cosines.min()), 7),
        "parity_mean_cosine": round(float(cosines.mean()), 7),
    }
    machine = machine_info()
    (RESULTS / "embedder.json").write_text(
        json.dumps({"figures": figures, "machine": machine}, indent=2) + "\n", encoding="utf-8"
    )
    lines = [
        "### Local embedder (all-MiniLM-L6-v2, ONNX, CPU)",
        "",
        f"SciFact abstracts (title + text, first {len(passages)}, truncated to 256 tokens), "
        f"{figures['threads']} onnxruntime threads on {machine['cpus']} CPUs, "
        f"load average {machine['load_average_at_end'][0]} at the end (shared machine).",
        "",
        "| passages/s | tokens/s | one passage | one short query | model load | peak RSS "
        "| parity vs sentence-transformers (min / mean cosine) |",
        "|---|---|---|---|---|---|---|",
        f"| {figures['passages_per_s']} | {figures['tokens_per_s']} | {figures['single_passage_ms']} ms "
        f"| {figures['short_query_ms']} ms | {figures['model_load_s']} s | {figures['peak_rss_mb']} MB "
        f"| {figures['parity_min_cosine']:.6f} / {figures['parity_mean_cosine']:.6f} "
        f"({figures['parity_sentences']} sentences) |",
    ]
    (RESULTS / "embedder.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
