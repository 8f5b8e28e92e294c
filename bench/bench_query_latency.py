"""Query latency of ``GET /?text=`` over HTTP against ``ragchat serve`` (local backends, extractive
answerer), with 10k and 100k indexed chunks.

How the index is filled: embedding 100k chunks with MiniLM on a laptop CPU takes hours, so a base set
of SciFact abstracts (title + first ~900 characters) is embedded once with the real embedder, then
replicated up to the target size with small Gaussian noise added to each vector (re-normalised),
and written straight through the stores (documents, notes and vectors in SQLite, the same rows the
ingestion pipeline writes). The evidence vectors a warmed instance has (``PRECOMPUTE_EVIDENCE``, the
default: each chunk's title-prefixed passages and sentences, ``ragchat.services.evidence``) are
embedded once per base text and written for every copy under the copy's own texts (the copies differ
only in their document's title, "SciFact bundle N"); ``PRECOMPUTE_EVIDENCE=false`` measures an
instance without them, where every question embeds its chunks' passages and sentences. Queries are
real SciFact claims, sent one at a time over a keep-alive HTTP connection to a ``ragchat serve``
subprocess; each is embedded by the server, searched, answered extractively. Goals: p50 <= 30 ms at
10k chunks, <= 80 ms at 100k.

Run: ``.venv/bin/python bench/bench_query_latency.py [--sizes 10000,100000] [--queries 200]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

from benchdata import bench_data_dir, cache_dir, models_path, results_dir, smoke

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS = results_dir()
DATA = bench_data_dir()
NAME = "query_latency"
CHUNKS_PER_DOC = 50
NOISE_SIGMA = 0.01  # per dimension; cosine to the base vector stays around 0.98


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _load_corpus(n: int) -> list[str]:
    texts = []
    with (DATA / "scifact" / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            text = f"{row.get('title', '').strip()}. {row.get('text', '').strip()}"[:1000]
            if len(text) > 200:
                texts.append(text)
            if len(texts) >= n:
                break
    return texts


def _load_queries() -> list[str]:
    with (DATA / "scifact" / "queries.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh]


def _settings_env(data_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k in ("PRECOMPUTE_EVIDENCE", "ANSWERABILITY", "EXTRACTIVE_SENTENCES")
    }
    return env | {
        "RAGCHAT_DATA_DIR": str(data_dir),
        "RAGCHAT_MODEL_DIR": str(models_path()),
        "RAGCHAT_CHAT_MODEL": "extractive",
    }


def _base_evidence(texts: list[str], embedder: Any, passages: bool, sentences: bool) -> list[Any]:
    """Each base text's evidence vectors (``chunk_evidence_texts`` order, title "SciFact bundle 0")."""
    import numpy as np
    from ragchat.services.evidence import chunk_evidence_texts

    kind = f"{int(passages)}{int(sentences)}"
    cache = cache_dir() / f"scifact-evidence-{len(texts)}-{kind}.npz"
    if cache.is_file():
        loaded = np.load(cache)
        return [loaded[f"t{i}"] for i in range(len(texts))]
    t0 = time.perf_counter()
    per_text = [
        chunk_evidence_texts(t, "SciFact bundle 0", passages=passages, sentences=sentences) for t in texts
    ]
    flat = [t for group in per_text for t in group]
    vectors = np.asarray(embedder.embed_documents(flat), dtype=np.float32)
    out, at = [], 0
    for group in per_text:
        out.append(vectors[at : at + len(group)])
        at += len(group)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, **{f"t{i}": v for i, v in enumerate(out)})
    print(f"embedded {len(flat)} evidence texts in {time.perf_counter() - t0:.1f} s", flush=True)
    return out


def _fill_evidence(container: Any, doc: Any, notes: list[Any], base: Any, evidence: list[Any]) -> int:
    """What warming the document writes: its chunks' evidence texts with the base text's vectors."""
    from ragchat.services.evidence import chunk_evidence_texts

    warmer = container.evidence_warmer
    rows = {}
    for note, b in zip(notes, base, strict=True):
        own = chunk_evidence_texts(note.text, doc.title, passages=warmer.passages, sentences=warmer.sentences)
        rows[note.id] = list(zip(own, evidence[b].tolist(), strict=True))
    written = container.evidence_store.put(rows)
    container.evidence_store.mark(doc.owner, doc.id, doc.version, doc.title)
    return int(written)


def _fill(
    data_dir: Path, size: int, texts: list[str], vectors: Any, seed: int, evidence: list[Any] | None
) -> dict[str, float]:
    """Write ``size`` chunks (documents READY, notes, vectors, evidence vectors when given) straight
    through the local stores."""
    import numpy as np
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings
    from ragchat.domain.ids import note_id
    from ragchat.domain.models import Document, DocumentStatus, Note, VectorRecord

    settings = load_settings(_settings_env(data_dir))
    container = Container(settings)
    evidence_rows = 0
    owner = settings.local_principal
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    n_docs = (size + CHUNKS_PER_DOC - 1) // CHUNKS_PER_DOC
    for d in range(n_docs):
        doc_id = f"BENCH{d:07d}"
        doc = container.documents.create_document(
            Document(
                id=doc_id,
                owner=owner,
                title=f"SciFact bundle {d}",
                content_type="text/plain",
                source="bench",
                body_key="",
                status=DocumentStatus.READY,
                chunk_count=min(CHUNKS_PER_DOC, size - d * CHUNKS_PER_DOC),
            )
        )
        lo, hi = d * CHUNKS_PER_DOC, min(size, (d + 1) * CHUNKS_PER_DOC)
        base = np.arange(lo, hi) % len(texts)
        noisy = vectors[base] + rng.normal(0.0, NOISE_SIGMA, size=(hi - lo, vectors.shape[1])).astype(
            np.float32
        )
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        notes = [
            Note(id=note_id(doc_id, i), document_id=doc_id, chunk_index=i, text=texts[b], owner=owner)
            for i, b in enumerate(base)
        ]
        container.documents.put_notes(notes)
        container.index.upsert(
            [
                VectorRecord(
                    id=n.id,
                    vector=v.tolist(),
                    text=n.text,
                    owner=owner,
                    document_id=doc_id,
                    chunk_index=n.chunk_index,
                )
                for n, v in zip(notes, noisy, strict=True)
            ]
        )
        if evidence is not None:
            evidence_rows += _fill_evidence(container, doc, notes, base, evidence)
    fill_s = time.perf_counter() - started
    assert container.index.count(owner) == size
    container.close()
    return {"fill_seconds": round(fill_s, 1), "evidence_vectors": evidence_rows}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _measure(data_dir: Path, queries: list[str], n_queries: int, warmup: int) -> dict[str, Any]:
    port = _free_port()
    env = {
        **os.environ,
        "RAGCHAT_DATA_DIR": str(data_dir),
        "RAGCHAT_MODEL_DIR": str(models_path()),
        "RAGCHAT_CHAT_MODEL": "extractive",
    }
    env.pop("ANTHROPIC_API_KEY", None)
    token = secrets.token_urlsafe(32)  # the server requires one (without it, it makes its own per run)
    env["RAGCHAT_API_TOKEN"] = token
    auth = {"Authorization": f"Bearer {token}"}
    log = (data_dir / "serve.log").open("wb")
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("ragchat")), "serve", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        deadline = time.monotonic() + 120
        while True:
            try:
                conn.request("GET", "/health")
                resp = conn.getresponse()
                resp.read()
                if resp.status == 200:
                    break
            except OSError:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ragchat serve did not start; see {data_dir / 'serve.log'}")
            time.sleep(0.2)

        def one(text: str) -> tuple[float, dict[str, Any]]:
            path = "/?" + urllib.parse.urlencode({"text": text})
            t0 = time.perf_counter()
            conn.request("GET", path, headers=auth)
            resp = conn.getresponse()
            body = resp.read()
            ms = (time.perf_counter() - t0) * 1000
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {body[:200]!r}")
            timing = resp.getheader("Server-Timing") or ""
            server_ms.append(float(timing.split("dur=")[1]) if "dur=" in timing else float("nan"))
            return ms, json.loads(body)

        server_ms: list[float] = []

        # The first query after start also loads the index matrix from SQLite: report it separately.
        first_ms, _ = one(queries[0])
        for q in queries[1 : 1 + warmup]:
            one(q)
        latencies, guarded = [], 0
        server_ms.clear()
        for i in range(n_queries):
            ms, body = one(queries[(warmup + 1 + i) % len(queries)])
            latencies.append(ms)
            guarded += bool(body["guardUsed"])
        conn.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    return {
        "queries": n_queries,
        "first_query_ms": round(first_ms, 1),
        "p50_ms": round(_pct(latencies, 50), 1),
        "p95_ms": round(_pct(latencies, 95), 1),
        "mean_ms": round(statistics.fmean(latencies), 1),
        "server_p50_ms": round(_pct(server_ms, 50), 1),
        "server_p95_ms": round(_pct(server_ms, 95), 1),
        "max_ms": round(max(latencies), 1),
        "guard_rate": round(guarded / n_queries, 3),
    }


def _machine(load_at_start: float) -> dict[str, Any]:
    info: dict[str, Any] = {
        "load_average_1m_at_start": load_at_start,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
    }
    try:
        import psutil

        info["memory_gb"] = round(psutil.virtual_memory().total / 1e9, 1)
    except ImportError:  # pragma: no cover
        pass
    return info


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--base", type=int, default=500, help="distinct SciFact texts embedded for real")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    if smoke():  # tiny data: the run proves the code path, its figures mean nothing
        parser.set_defaults(sizes="300", base=12, queries=4, warmup=1)
    args = parser.parse_args(argv if argv is not None else [])
    load_at_start = round(os.getloadavg()[0], 2)
    sizes = [int(s) for s in args.sizes.split(",") if s]

    import numpy as np
    from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    texts = _load_corpus(args.base)
    queries = _load_queries()
    random.Random(7).shuffle(queries)
    # The base embeddings are cached (under the gitignored .ragchat/) so re-runs skip the slow part.
    cache = cache_dir() / f"scifact-base-{len(texts)}.npy"
    embed_s = 0.0
    if cache.is_file():
        vectors = np.load(cache)
        print(f"loaded {len(texts)} base embeddings from {cache}", flush=True)
    else:
        embedder = OnnxMiniLMEmbedder.from_cache(models_path())
        t0 = time.perf_counter()
        vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
        embed_s = time.perf_counter() - t0
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, vectors)
        print(f"embedded {len(texts)} base texts in {embed_s:.1f} s", flush=True)

    evidence = None
    probe = Container(load_settings(_settings_env(Path(tempfile.mkdtemp(prefix="ragchat-probe-")))))
    if probe.evidence_warmer is not None:
        warmer = probe.evidence_warmer
        evidence = _base_evidence(texts, probe.embedder, warmer.passages, warmer.sentences)
    probe.close()
    rows = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix=f"ragchat-bench-{size}-") as tmp:
            data_dir = Path(tmp)
            fill = _fill(data_dir, size, texts, vectors, seed=size, evidence=evidence)
            print(f"{size} chunks written in {fill['fill_seconds']} s", flush=True)
            figures = _measure(data_dir, queries, args.queries, args.warmup)
            print(f"{size} chunks: {figures}", flush=True)
            rows.append({"chunks": size, **fill, **figures})

    goals = {10_000: 30.0, 100_000: 80.0}
    result = {
        "benchmark": NAME,
        "method": (
            f"{len(texts)} SciFact abstracts embedded with all-MiniLM-L6-v2 (ONNX), replicated with "
            f"Gaussian noise (sigma {NOISE_SIGMA}/dim, re-normalised) to the target size and written "
            "through the local "
            "stores; SciFact claims sent sequentially as GET /?text= over one keep-alive HTTP connection to "
            "`ragchat serve` (extractive answerer, the settings' defaults unless overridden in the "
            "environment). Evidence vectors precomputed as warming writes them: "
            f"{'yes' if evidence is not None else 'no'}. Latency = client-side request time "
            "(query embedding + search + decision + answer + HTTP)."
        ),
        "base_texts": len(texts),
        "base_embed_seconds": round(embed_s, 1),
        "rows": rows,
        "goals_p50_ms": {str(k): v for k, v in goals.items()},
        "machine": _machine(load_at_start),
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{NAME}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = [
        "### Query latency (`GET /?text=` over HTTP, `ragchat serve`, extractive)",
        "",
        "| Indexed chunks | p50 ms | p95 ms | mean ms | server p50 / p95 ms | goal p50 | first query ms "
        "| queries |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        goal = goals.get(r["chunks"])
        lines.append(
            f"| {r['chunks']:,} | {r['p50_ms']} | {r['p95_ms']} | {r['mean_ms']} | "
            f"{r['server_p50_ms']} / {r['server_p95_ms']} | "
            f"{'≤ ' + str(int(goal)) if goal else '–'} | {r['first_query_ms']} | {r['queries']} |"
        )
    machine: dict[str, Any] = result["machine"]
    lines += [
        "",
        f"Index filled with {len(texts)} real SciFact embeddings replicated with small noise "
        "(not embedded one by one); queries are SciFact claims, embedded by the server per request. "
        + (
            "Evidence vectors (each chunk's passages and sentences) precomputed, as a warmed instance "
            "has them (`PRECOMPUTE_EVIDENCE`, the default). "
            if evidence is not None
            else "No evidence vectors precomputed: every question embeds its chunks' passages and sentences. "
        )
        + "Machine: "
        f"{machine['processor']}, {machine['cpu_count']} cores, "
        f"Python {machine['python']}, "
        f"1-min load average {machine['load_average_1m_at_start']} at start, "
        f"{machine['load_average_1m_at_end']} at end "
        "(shared machine). Server = time inside the resolver (`Server-Timing`); the rest is HTTP and "
        "scheduling. First query includes loading the index matrix.",
    ]
    (RESULTS / f"{NAME}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
