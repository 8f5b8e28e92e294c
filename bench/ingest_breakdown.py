"""Where ragchat's time from accept to READY goes on SciFact abstracts (issue 31 item 3), next to what
the same embedder takes for Chroma's one text per abstract.

Runs ``bench_chroma``'s ``ragchat`` phase (the defaults, ``EVIDENCE_WARMING=on_demand``) in this
process with wall-clock timers wrapped around each stage the worker thread runs: the submits (main
thread), the parse in the child process, the batch files, the embedder's model calls (texts, tokens,
padded tokens), the notes in SQLite, the vector index, and READY (finalize). Then, in the same
process, the same embedder on Chroma's texts (title, blank line, abstract; 256 at a time) and on
ragchat's chunk texts alone (one call), so the embedding share can be read without the rest.

``python bench/ingest_breakdown.py [--docs 200] [--env KEY=VALUE ...]`` prints JSON (nothing written).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_chroma import ADD_BATCH, _body, _docs, _ragchat

_totals: dict[str, float] = defaultdict(float)
_counts: dict[str, int] = defaultdict(int)
_lock = threading.Lock()


def _timed(owner: Any, name: str, label: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            with _lock:
                _totals[label] += time.perf_counter() - started
                _counts[label] += 1

    setattr(owner, name, wrapper)


def _token_counter(embedder: Any) -> dict[str, int]:
    """Wraps the embedder's model call to count rows, real and padded tokens."""
    seen = {"texts": 0, "tokens": 0, "padded": 0, "model_calls": 0}
    session = embedder._session
    run = session.run

    class Counting:
        def run(self, names: Any, feed: dict[str, Any]) -> Any:
            mask = feed["attention_mask"]
            seen["model_calls"] += 1
            seen["texts"] += int(mask.shape[0])
            seen["tokens"] += int(mask.sum())
            seen["padded"] += int(mask.size)
            started = time.perf_counter()
            try:
                return run(names, feed)
            finally:
                with _lock:
                    _totals["model (onnxruntime)"] += time.perf_counter() - started

        def __getattr__(self, item: str) -> Any:
            return getattr(session, item)

    embedder._session = Counting()
    return seen


def breakdown(n_docs: int, env: dict[str, str]) -> dict[str, Any]:
    from ragchat.adapters.local import parse_process, vector_index
    from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder
    from ragchat.adapters.local.sqlite_store import documents
    from ragchat.services import ingest_steps

    steps = ingest_steps.IngestSteps
    _timed(steps, "split", "split (whole step)")
    _timed(parse_process.ProcessParser, "parse", "parse (child process, incl. IPC)")
    _timed(steps, "_write_batches", "batch files (write)")
    _timed(steps, "read_batch", "batch files (read)")
    _timed(OnnxMiniLMEmbedder, "_embed", "embedder (tokenize + model + pool)")
    _timed(documents.SqliteDocumentStore, "put_notes", "notes (SQLite put_notes)")
    _timed(vector_index.LocalVectorIndex, "upsert", "vector index upsert")
    _timed(steps, "finalize", "finalize (READY)")
    _timed(steps, "store_batch", "store_batch (notes + index + evidence)")

    docs = _docs(n_docs)
    env = {"EVIDENCE_WARMING": "on_demand", **env}
    out: dict[str, Any] = {"docs": len(docs), "env": env}
    with tempfile.TemporaryDirectory(prefix="ragchat-breakdown-") as tmp:
        box = _ragchat(tmp, env)
        box.embedder.embed_documents(["warm up"])
        seen = _token_counter(box.embedder)
        started = time.perf_counter()
        for d in docs:
            box.ingestion.submit("bench", body=_body(d), title=d["title"])
        out["submits_s"] = round(time.perf_counter() - started, 2)
        assert box.launcher.wait_idle(3600)
        out["accept_to_last_ready_s"] = round(time.perf_counter() - started, 2)
        out["stages_s"] = {k: round(v, 2) for k, v in sorted(_totals.items(), key=lambda kv: -kv[1])}
        out["calls"] = dict(_counts)
        out["ragchat_embedding"] = dict(seen)
        with box._sqlite.read() as conn:
            texts = [r[0] for r in conn.execute("SELECT text FROM notes")]
        out["chunks"] = len(texts)
        embedder = box.embedder
        for key in seen:
            seen[key] = 0
        t0 = time.perf_counter()
        for i in range(0, len(docs), ADD_BATCH):
            embedder.embed_array([_body(d) for d in docs[i : i + ADD_BATCH]])
        out["chroma_texts_embed_s"] = round(time.perf_counter() - t0, 2)
        out["chroma_embedding"] = dict(seen)
        box.launcher.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE settings for ragchat")
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    print(json.dumps(breakdown(args.docs, env), indent=2))


if __name__ == "__main__":
    main()
