"""fp32 vs int8 MiniLM (``EMBEDDER_PRECISION``), alternated A/B rounds on the same SciFact passages.

Usage: ``python bench/bench_embedder_precision.py [passages] [rounds]`` (default 64 passages, 6
rounds; ``RAGCHAT_BENCH_DATA`` points at the data). Each round embeds the passages with both models,
the order swapped every round, so both see the same machine load; the figures are medians, with the
1-minute load average after every round. Writes ``bench/results/embedder_precision.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from benchdata import bench_data_dir  # noqa: E402


def main() -> None:
    from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder
    from ragchat.config import load_settings

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    texts: list[str] = []
    with (bench_data_dir() / "scifact" / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            texts.append(doc["title"] + "\n" + doc["text"])
            if len(texts) >= n:
                break
    path = load_settings().models_path
    embedders = {k: OnnxMiniLMEmbedder.from_cache(path, precision=k) for k in ("fp32", "int8")}
    for e in embedders.values():
        e.embed_array(texts[:8])  # warm-up
    times: dict[str, list[float]] = {k: [] for k in embedders}
    loads = [os.getloadavg()[0]]
    for r in range(rounds):
        for k in ("fp32", "int8") if r % 2 == 0 else ("int8", "fp32"):
            started = time.perf_counter()
            embedders[k].embed_array(texts)
            times[k].append(time.perf_counter() - started)
        loads.append(os.getloadavg()[0])
        print(r, {k: round(v[-1], 2) for k, v in times.items()}, f"load {loads[-1]:.1f}", flush=True)
    median = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "passages": n,
        "rounds": rounds,
        "seconds": times,
        "median_seconds": median,
        "passages_per_second": {k: n / v for k, v in median.items()},
        "speedup_of_medians": median["fp32"] / median["int8"],
        "per_round_speedup": [a / b for a, b in zip(times["fp32"], times["int8"], strict=True)],
        "load_average_1min": loads,
        "cpus": os.cpu_count(),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    out = ROOT / "bench" / "results" / "embedder_precision.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
