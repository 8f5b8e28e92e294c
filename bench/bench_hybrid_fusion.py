"""Which hybrid search ranks best on BEIR SciFact: the vector store's fusion of keyword and vector
rankings, emulated on the same chunks and the same vectors (docs/benchmarks.md, "Hybrid fusion").

The corpus goes through the real splitter (``bench_scifact.chunk_corpus``: CHUNK_SIZE/CHUNK_OVERLAP
defaults, 12,124 chunks), each chunk and test claim is embedded with the local MiniLM (the vectors
``bench_scifact.py`` caches), and each store answers the 300 test claims with its top 100 chunks; a
document scores as its best chunk; nDCG@10, recall@10 and recall@100 against ``qrels/test.tsv``.

Stores compared:

- ``vector``: exact cosine only (the baseline: ``RETRIEVAL_MODE=vector``).
- ``local``: ``RETRIEVAL_MODE=hybrid`` on the embedded index (``LocalVectorIndex``: SQLite FTS5 BM25
  + exact cosine, RRF in the adapter).
- ``s3vectors`` (standard analyzer) and ``s3vectors-en`` (the ``en`` language analyzer): the product's
  S3 Vectors adapter (``S3VectorsIndex.upsert`` / ``hybrid_search``) against the S3 Vectors fake
  (``tests/contract/fake_s3vectors.py``) configured as the template creates the index: one
  ``QueryVectors`` with ``queryTexts`` + ``queryVector``; the service's fusion as documented (BM25 and
  vector rankings fused by RRF). The RRF constant (60) and each ranking's depth (``topK``) are not
  documented: assumptions, as is the ``en`` analyzer's stemmer (approximated).
- ``opensearch-serverless``: what the OpenSearch adapter does on a Serverless collection (no search
  pipelines): a ``match`` query (BM25, standard analyzer) and a k-NN query of ``k`` each, fused by RRF
  in the adapter (``ragchat.domain.retrieval.rrf_scores``).
- ``opensearch-domain``: a managed domain's hybrid query through the adapter's search pipeline:
  min-max normalization of each subquery's scores, weighted arithmetic mean (keyword 0.3, vector 0.7).

BM25 for the emulated services is the fake's (k1 1.2, b 0.75, Lucene's idf). The cloud embeds with
Titan V2, not MiniLM: these figures compare fusions, not embedders.

Usage: ``python bench/bench_hybrid_fusion.py`` (needs ``make model``; reuses bench_scifact's cache).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from bench_scifact import CACHE_HITS, chunk_corpus, embed_cached, evaluate, hybrid_run, load
from benchdata import models_path, results_dir, smoke_sample

ROOT = Path(__file__).resolve().parent.parent
# the S3 Vectors fake lives with the contract tests (as bench_memory.py reads tests.fakes)
sys.path[:0] = [p for p in (str(ROOT),) if p not in sys.path]
RESULTS = results_dir()
DEPTH = 100  # results per question: QueryVectors' topK ceiling, and what the metrics read


def _doc_scores(n_queries: int, n_docs: int) -> Any:
    import numpy as np

    return np.full((n_queries, n_docs), -np.inf, dtype=np.float32)


def vector_only(c_vecs: Any, q_vecs: Any, owner: list[int], n_docs: int) -> Any:
    import numpy as np

    chunk_scores = q_vecs @ c_vecs.T
    starts = np.flatnonzero(np.r_[True, np.diff(np.asarray(owner)) != 0])
    return np.maximum.reduceat(chunk_scores, starts, axis=1)


def s3vectors_run(
    chunks: list[str],
    owner: list[int],
    c_vecs: Any,
    q_vecs: Any,
    texts: list[str],
    n_docs: int,
    analyzer: str,
) -> Any:
    """The product's adapter over the S3 Vectors fake, one hybrid query per claim."""
    from ragchat.adapters.aws.s3vectors import S3VectorsIndex
    from ragchat.domain.models import SearchFilter, VectorRecord

    from tests.contract.fake_s3vectors import FakeS3Vectors

    fake = FakeS3Vectors("bench", "notes", c_vecs.shape[1], text_search={"text": analyzer})
    index = S3VectorsIndex(fake, "bench", "notes", c_vecs.shape[1])
    records = [
        VectorRecord(id=f"c{i}", vector=c_vecs[i].tolist(), text=chunk, owner="bench",
                     document_id=str(owner[i]), chunk_index=i)
        for i, chunk in enumerate(chunks)
    ]  # fmt: skip
    for i in range(0, len(records), 2000):
        index.upsert(records[i : i + 2000])
    scores = _doc_scores(len(texts), n_docs)
    flt = SearchFilter(owner="bench")
    for row, (text, vec) in enumerate(zip(texts, q_vecs, strict=True)):
        for hit in index.hybrid_search(text, vec.tolist(), flt, DEPTH):
            d = int(hit.document_id or 0)
            scores[row, d] = max(scores[row, d], hit.score)
    return scores


def opensearch_runs(
    chunks: list[str], owner: list[int], c_vecs: Any, q_vecs: Any, texts: list[str], n_docs: int
) -> tuple[Any, Any]:
    """(Serverless: RRF of the match and k-NN top ``DEPTH``; domain: min-max, 0.3 / 0.7 mean)."""
    import numpy as np
    from ragchat.adapters.aws.opensearch_bodies import HYBRID_WEIGHTS
    from ragchat.domain.retrieval import rrf_scores

    from tests.contract.fake_s3vectors import Bm25Field

    bm25 = Bm25Field("standard")
    for i, chunk in enumerate(chunks):
        bm25.put(str(i), chunk)
    w_keyword, w_vector = HYBRID_WEIGHTS
    serverless, domain = _doc_scores(len(texts), n_docs), _doc_scores(len(texts), n_docs)
    cosines = q_vecs @ c_vecs.T
    for row, text in enumerate(texts):
        kw = sorted(bm25.scores(text).items(), key=lambda kv: (-kv[1], int(kv[0])))[:DEPTH]
        kw_ranked = [(int(key), score) for key, score in kw]
        top = np.argsort(-cosines[row], kind="stable")[:DEPTH]
        vec_ranked = [(int(j), float(cosines[row, j])) for j in top]
        fused = rrf_scores([[str(j) for j, _ in vec_ranked], [str(j) for j, _ in kw_ranked]])[:DEPTH]
        for key, score in fused:
            d = owner[int(key)]
            serverless[row, d] = max(serverless[row, d], score)
        combined: dict[int, float] = {}
        for weight, ranked in ((w_keyword, kw_ranked), (w_vector, vec_ranked)):
            if not ranked:
                continue
            hi, lo = ranked[0][1], ranked[-1][1]
            for j, s in ranked:
                norm = (s - lo) / (hi - lo) if hi > lo else 1.0
                combined[j] = combined.get(j, 0.0) + weight * norm
        for j, s in sorted(combined.items(), key=lambda kv: -kv[1])[:DEPTH]:
            d = owner[j]
            domain[row, d] = max(domain[row, d], s / (w_keyword + w_vector))
    return serverless, domain


LABELS = {
    "vector": "vector only (exact cosine; RETRIEVAL_MODE=vector)",
    "local": "local index: FTS5 BM25 + cosine, RRF in the adapter (ragchat serve)",
    "s3vectors": "S3 Vectors ENHANCED, queryTexts + queryVector, service RRF (standard analyzer)",
    "s3vectors-en": "S3 Vectors ENHANCED, same, `en` language analyzer (approximated) — the template's",
    "opensearch-serverless": "OpenSearch Serverless: match + k-NN, RRF in the adapter (no search pipelines)",
    "opensearch-domain": "OpenSearch domain: search pipeline, min-max, mean keyword 0.3 / vector 0.7",
}


def main(argv: list[str] | None = None) -> None:
    from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--docs",
        type=int,
        default=0,
        help="a subset: every abstract judged for a test claim, then the others in corpus order up to "
        "this many (0: all 5,183)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=0,
        help="embed each chunk's first N tokens only (0: the embedder's 256), for a loaded machine; "
        "every store gets the same vectors",
    )
    args = parser.parse_args([] if argv is None else argv)
    doc_ids, doc_texts, queries, qrels = load()
    if args.docs:
        judged = {d for rel in qrels.values() for d in rel}
        keep = [i for i, d in enumerate(doc_ids) if d in judged]
        keep += [i for i, d in enumerate(doc_ids) if d not in judged][: max(0, args.docs - len(keep))]
        keep.sort()
        doc_ids, doc_texts = [doc_ids[i] for i in keep], [doc_texts[i] for i in keep]
    doc_ids, doc_texts = smoke_sample(doc_ids, 40), smoke_sample(doc_texts, 40)
    qids = smoke_sample([q for q in queries if q in qrels], 8)
    embedder = OnnxMiniLMEmbedder.from_cache(models_path(), precision="fp32")
    q_vecs = embed_cached(embedder, [queries[q] for q in qids], "scifact-queries")
    settings, chunks, owner = chunk_corpus(doc_texts)
    if args.max_tokens:
        short = OnnxMiniLMEmbedder.from_cache(models_path(), precision="fp32", max_tokens=args.max_tokens)
        c_vecs = embed_cached(short, chunks, f"scifact-chunks-t{args.max_tokens}")
    else:
        c_vecs = embed_cached(embedder, chunks, "scifact-chunks")
    texts = [queries[q] for q in qids]
    n_docs = len(doc_ids)
    runs: dict[str, dict[str, Any]] = {}

    def record(name: str, scores: Any, started: float) -> None:
        figures: dict[str, Any] = evaluate(scores, doc_ids, qids, qrels)
        figures.update(seconds=round(time.perf_counter() - started, 1))
        runs[name] = figures
        print(f"{name}: {figures}", flush=True)

    t0 = time.perf_counter()
    record("vector", vector_only(c_vecs, q_vecs, owner, n_docs), t0)
    t0 = time.perf_counter()
    local = hybrid_run(chunks, owner, c_vecs, q_vecs, texts, doc_ids, qids, qrels)
    runs["local"] = {k: v for k, v in local.items() if k not in ("documents", "vectors")}
    print(f"local: {runs['local']}", flush=True)
    for name, analyzer in (("s3vectors", "standard"), ("s3vectors-en", "en")):
        t0 = time.perf_counter()
        record(name, s3vectors_run(chunks, owner, c_vecs, q_vecs, texts, n_docs, analyzer), t0)
    t0 = time.perf_counter()
    serverless, domain = opensearch_runs(chunks, owner, c_vecs, q_vecs, texts, n_docs)
    record("opensearch-serverless", serverless, t0)
    record("opensearch-domain", domain, t0)
    _write(runs, len(doc_ids), len(chunks), settings, bool(CACHE_HITS), subset=bool(args.docs),
           max_tokens=args.max_tokens)  # fmt: skip


def _write(
    runs: dict[str, dict[str, Any]],
    documents: int,
    vectors: int,
    settings: Any,
    cached: bool,
    *,
    subset: bool,
    max_tokens: int = 0,
) -> None:
    result = {
        "data": "BEIR SciFact test (300 claims)",
        "subset": subset,
        "chunk_tokens_embedded": max_tokens or 256,
        "embedder": "all-MiniLM-L6-v2 ONNX fp32 (local)",
        "documents": documents,
        "vectors": vectors,
        "chunk_size": settings.chunk_size,
        "chunk_overlap": settings.chunk_overlap,
        "depth": DEPTH,
        "vectors_from_cache": cached,
        "runs": runs,
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
        },
    }
    (RESULTS / "hybrid_fusion.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = [
        "### Hybrid fusion by vector store: SciFact (BEIR test, 300 claims), MiniLM vectors, real chunking",
        "",
        "| store and fusion | nDCG@10 | recall@10 | recall@100 |",
        "|---|---|---|---|",
    ]
    for name, label in LABELS.items():
        run = runs.get(name)
        if run:
            lines.append(
                f"| {label} | {run['ndcg@10']:.3f} | {run['recall@10']:.3f} | {run['recall@100']:.3f} |"
            )
    lines += [
        "",
        f"{vectors} chunks of {documents} abstracts"
        + (
            " (a subset: every abstract judged for a test claim, then the first others in corpus order; "
            "fewer distractors than the full 5,183, so the figures are higher than on the whole corpus "
            "and compare the stores with each other only)"
            if subset
            else ""
        )
        + (
            f"; each chunk embedded from its first {max_tokens} tokens (a loaded machine)"
            if max_tokens
            else ""
        )
        + f" (CHUNK_SIZE {settings.chunk_size}, CHUNK_OVERLAP "
        f"{settings.chunk_overlap}); top {DEPTH} chunks per claim, a document scores as its best chunk. "
        "The S3 Vectors rows run the product's adapter against the contract fake (RRF constant 60 and "
        "each ranking's depth = topK are assumptions; the service does not document them). The "
        "OpenSearch rows use the same BM25 (k1 1.2, b 0.75) on the standard analyzer. "
        "`python bench/bench_hybrid_fusion.py`.",
    ]
    (RESULTS / "hybrid_fusion.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
