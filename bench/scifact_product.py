"""SciFact retrieval as the product ingests it (issue 31): each abstract is one document, body "title,
blank line, text" and its title (as ``bench_chroma.py`` submits them), read by ``parse_document`` with
the settings (CHUNK_SIZE, CHUNK_OVERLAP, CHUNK_HEADERS: each chunk's contextual header), each chunk
embedded as header + text (``embedding_text``), a document scoring as its best chunk. Vector (exact
cosine) and ``RETRIEVAL_MODE=hybrid`` (``bench_scifact.hybrid_run``: the chunks in a real local index,
keywords over the chunk text), nDCG@10, recall@10 and recall@100 on the 300 test claims, and the
tokens embedded. ``bench_scifact.py`` measures the splitter alone (no header, title and text joined by
a space); this one is what a chunking change does to the service's own vectors.

``python bench/scifact_product.py --label NAME [--env KEY=VALUE ...]`` writes
bench/results/scifact-product-NAME.json (vectors cached in the temp folder like bench_scifact's).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scifact
from bench_scifact import RESULTS, embed_cached, evaluate, hybrid_run, load
from benchdata import models_path, smoke_sample


def product_chunks(env: dict[str, str]) -> tuple[Any, list[str], list[str], list[int], list[str]]:
    """The settings, each chunk's embedded text and note text, its document position, the doc ids."""
    from bench_chroma import _docs
    from bench_chroma import product_chunks as as_split
    from ragchat.config import load_settings

    settings = load_settings(env)
    docs = smoke_sample(_docs(10**6), 40)
    embedded: list[str] = []
    notes: list[str] = []
    owner: list[int] = []
    for n, doc in enumerate(docs):
        for text, embeds in as_split(doc, settings):
            embedded.append(embeds)
            notes.append(text)
            owner.append(n)
    return settings, embedded, notes, owner, [d["id"] for d in docs]


def per_query_ndcg(
    scores: Any, doc_ids: list[str], qids: list[str], qrels: dict[str, dict[str, int]]
) -> list[float]:
    """nDCG@10 of each query (``evaluate``'s mean, kept per query for a paired comparison)."""
    return [evaluate(scores[row : row + 1], doc_ids, [qid], qrels)["ndcg@10"] for row, qid in enumerate(qids)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--label", required=True)
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE settings")
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in args.env)

    import numpy as np
    from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder

    _, _, queries, qrels = load()
    qids = smoke_sample([q for q in queries if q in qrels], 8)
    settings, embedded, notes, owner, doc_ids = product_chunks(env)
    embedder = OnnxMiniLMEmbedder.from_cache(models_path(), precision=settings.embedder_precision)
    q_vecs = embed_cached(embedder, [queries[q] for q in qids], "scifact-queries")
    started = time.perf_counter()
    c_vecs = embed_cached(embedder, embedded, "scifact-product")
    chunk_scores = q_vecs @ c_vecs.T
    starts = np.flatnonzero(np.r_[True, np.diff(np.asarray(owner)) != 0])
    vector = evaluate(np.maximum.reduceat(chunk_scores, starts, axis=1), doc_ids, qids, qrels)
    doc_scores = np.maximum.reduceat(chunk_scores, starts, axis=1)
    per_query = {"vector": per_query_ndcg(doc_scores, doc_ids, qids, qrels)}
    texts = [queries[q] for q in qids]
    seen: list[Any] = []

    def capture(scores: Any, *rest: Any) -> dict[str, float]:
        seen.append(scores)
        return evaluate(scores, *rest)

    bench_scifact.evaluate = capture  # hybrid_run's scores, for the per-query figures
    hybrid = hybrid_run(notes, owner, c_vecs, q_vecs, texts, doc_ids, qids, qrels)
    bench_scifact.evaluate = evaluate
    per_query["hybrid"] = per_query_ndcg(seen[-1], doc_ids, qids, qrels)
    with embedder._tokenizer_lock:
        tokens = sum(len(e.ids) for e in embedder._tokenizer.encode_batch(embedded))
    result = {
        "label": args.label,
        "env": env,
        "chunk_size": settings.chunk_size,
        "chunk_overlap": settings.chunk_overlap,
        "chunk_headers": settings.chunk_headers,
        "documents": len(doc_ids),
        "chunks": len(embedded),
        "tokens_embedded": tokens,
        "vector": vector,
        "hybrid": hybrid,
        "seconds": round(time.perf_counter() - started, 1),
        "per_query_ndcg@10": per_query,
    }
    (RESULTS / f"scifact-product-{args.label}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "per_query_ndcg@10"}, indent=2))


if __name__ == "__main__":
    main()
