"""Real MiniLM vectors for the vector-store benchmarks: SciFact abstract sentences and SQuAD 2.0
paragraphs and questions, embedded once with the project's embedder and cached in
``.ragchat/bench-cache`` (not in the repository). Queries are SciFact claims and SQuAD questions
that are not in the base set.

    python bench/real_vectors.py 40000      # embeds (minutes) and caches
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
from benchdata import bench_data_dir, cache_dir, models_path, smoke_sample

REPO = Path(__file__).resolve().parents[1]
CACHE = cache_dir()
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")


def _texts(limit: int) -> tuple[list[str], list[str]]:
    data = bench_data_dir()
    base: list[str] = []
    queries: list[str] = []
    squad = json.loads((data / "squad2-dev.json").read_text(encoding="utf-8"))
    questions: list[str] = []
    for article in squad["data"]:
        for paragraph in article["paragraphs"]:
            base.append(paragraph["context"])
            questions.extend(q["question"] for q in paragraph["qas"])
    queries.extend(questions[::2])  # every other question is a query, the rest are indexed texts
    base.extend(questions[1::2])
    with (data / "scifact" / "queries.jsonl").open(encoding="utf-8") as fh:
        queries.extend(json.loads(line)["text"] for line in fh)
    with (data / "scifact" / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            base.extend(s for s in _SENTENCE.split(row.get("text", "")) if len(s) >= 40)
            if len(base) >= limit:
                break
    return base[:limit], smoke_sample(queries, 40)  # a smoke run: a few queries


def real_vectors(limit: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """(base vectors, query vectors), unit length, 384-d; embedded on first use, then cached."""
    path = CACHE / f"real-vectors-{limit}.npz"
    if path.is_file():
        loaded = np.load(path)
        return loaded["base"], loaded["queries"]
    from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder

    embedder = OnnxMiniLMEmbedder.from_cache(models_path())
    base_texts, query_texts = _texts(limit)
    started = time.perf_counter()
    base = np.concatenate(
        [embedder.embed_array(base_texts[i : i + 2048]) for i in range(0, len(base_texts), 2048)]
    )
    queries = embedder.embed_array(query_texts)
    print(f"embedded {len(base_texts)} + {len(query_texts)} texts in {time.perf_counter() - started:.0f} s")
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(path, base=base, queries=queries)
    return base, queries


if __name__ == "__main__":
    b, q = real_vectors(int(sys.argv[1]) if len(sys.argv) > 1 else 40000)
    print(b.shape, q.shape)
