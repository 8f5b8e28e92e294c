"""Chat turn latency over HTTP (``ragchat serve``'s local server in-process, extractive answerer,
real MiniLM query embedding, SQLite + embedded vector index holding 10,000 chunks) and the number of
store round trips a turn makes.

Corpus: SciFact abstracts (``RAGCHAT_BENCH_DATA`` or ``../shared/bench-data``) cut into chunks of
about 800 characters at sentence ends, the first 10,000 kept. The chunks of the documents relevant
to the 20 benchmark queries are embedded with MiniLM; the others get random unit vectors (embedding
10k chunks on this machine takes many minutes, and an exact index costs the same per search whatever
the vectors are). A conversation is first filled to 20 messages, then every measured turn is one
``POST /chat/conversations/{id}/messages`` on a kept-alive connection. The instance is warmed, as a
serving one is once its ingestion worker is idle: every chunk has a READY document and its evidence
vectors (its passages and sentences; real for the relevant chunks, random like their chunk vectors
for the others), so a turn embeds only its question.

Round trips: the conversation store, the counters and the document store are wrapped in a counting
proxy; every method call is one round trip. The vector index calls (``count`` for the empty
knowledge-base check, ``search``) are counted separately.
"""

from __future__ import annotations

import http.client
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchdata import bench_data_dir, models_path, results_dir, smoke

RESULTS = results_dir()
DATA = bench_data_dir() / "scifact"
REPO = Path(__file__).resolve().parents[1]
N_CHUNKS = 10_000
N_QUERIES = 20
PREFILL_MESSAGES = 20
MEASURED_TURNS = 60
if smoke():  # tiny data: the run proves the code path, its figures mean nothing
    N_CHUNKS, N_QUERIES, PREFILL_MESSAGES, MEASURED_TURNS = 200, 4, 4, 6
OWNER = "local"


class Counting:
    """Proxy counting every method call on the wrapped port."""

    def __init__(self, inner: Any, name: str, counts: Counter[str]) -> None:
        self._inner = inner
        self._name = name
        self._counts = counts

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)
        if not callable(value) or attr.startswith("_"):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self._counts[f"{self._name}.{attr}"] += 1
            return value(*args, **kwargs)

        return call


def _chunks(text: str, size: int = 800) -> list[str]:
    sentences = re.split(r"(?<=[.!?])\s+", text)
    out: list[str] = []
    cur = ""
    for s in sentences:
        if cur and len(cur) + len(s) + 1 > size:
            out.append(cur)
            cur = s
        else:
            cur = f"{cur} {s}".strip()
    if cur:
        out.append(cur)
    return out


def _warm(container: Any, chunks: list[tuple[str, str, str]], relevant: set[str], rng: Any) -> float:
    """What a warmed instance holds: a READY document per SciFact abstract and every chunk's evidence
    vectors (``ragchat.services.evidence``), embedded for real for the relevant documents' chunks and
    random (like their chunk vectors) for the others. Returns the seconds spent."""
    import numpy as np
    from ragchat.domain.models import Document, DocumentStatus
    from ragchat.services.evidence import chunk_evidence_texts

    warmer, store = container.evidence_warmer, container.evidence_store
    if warmer is None:
        return 0.0
    t0 = time.perf_counter()
    titles = {doc_id: f"scifact-{doc_id}.txt" for doc_id, _, _ in chunks}
    for doc_id, title in titles.items():
        container.documents.create_document(
            Document(
                id=f"sf{doc_id}",
                owner=OWNER,
                title=title,
                content_type="text/plain",
                source="bench",
                body_key="",
                status=DocumentStatus.READY,
            )
        )
    rows: dict[str, list[tuple[str, Any]]] = {}
    for doc_id, chunk_id, text in chunks:
        texts = chunk_evidence_texts(
            text, titles[doc_id], passages=warmer.passages, sentences=warmer.sentences
        )
        if doc_id in relevant:
            vectors = container.embedder.embed_documents(texts)
        else:
            r = rng.standard_normal((len(texts), container.embedder.dimension)).astype("float32")
            vectors = (r / np.linalg.norm(r, axis=1, keepdims=True)).tolist()
        rows[chunk_id] = list(zip(texts, vectors, strict=True))
    store.put(rows)
    for doc_id, title in titles.items():
        store.mark(OWNER, f"sf{doc_id}", None, title)
    return time.perf_counter() - t0


def _corpus() -> tuple[list[tuple[str, str, str]], list[tuple[str, set[str]]]]:
    qrels: dict[str, set[str]] = {}
    for line in (DATA / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, did, _ = line.split("\t")
        qrels.setdefault(qid, set()).add(did)
    queries = {}
    for line in (DATA / "queries.jsonl").read_text().splitlines():
        q = json.loads(line)
        if q["_id"] in qrels:
            queries[q["_id"]] = q["text"]
    chosen = sorted(queries)[:N_QUERIES]
    wanted = set().union(*(qrels[q] for q in chosen))
    docs: list[tuple[str, str, str]] = []  # (doc id, chunk id, text)
    relevant: list[tuple[str, str, str]] = []
    for line in (DATA / "corpus.jsonl").read_text().splitlines():
        d = json.loads(line)
        for i, chunk in enumerate(_chunks(f"{d['title']}. {d['text']}")):
            item = (d["_id"], f"sf{d['_id']}-{i:03d}", chunk)
            (relevant if d["_id"] in wanted else docs).append(item)
    chunks = relevant + docs[: N_CHUNKS - len(relevant)]
    return chunks, [(queries[q], qrels[q]) for q in chosen]


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))]


def main() -> None:
    import numpy as np
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings
    from ragchat.domain.models import SearchFilter, VectorRecord
    from ragchat.local_server import LocalServer

    RESULTS.mkdir(exist_ok=True)
    load_at_start = round(os.getloadavg()[0], 2)
    models = models_path()
    chunks, queries = _corpus()
    relevant_docs = set().union(*(r for _, r in queries))
    with tempfile.TemporaryDirectory(prefix="bench-chat-") as tmp:
        settings = load_settings(
            {
                "RAGCHAT_DATA_DIR": tmp,
                "RAGCHAT_MODEL_DIR": str(models),
                "RAGCHAT_CHAT_MODEL": "extractive",
                "READER": os.environ.get("READER", "off"),  # docs/reader.md: its cost per turn
            }
        )
        container = Container(settings)
        embedder = container.embedder
        rng = np.random.default_rng(7)
        real = [c for c in chunks if c[0] in relevant_docs]
        t0 = time.perf_counter()
        real_vectors = embedder.embed_documents([c[2] for c in real])
        embed_s = time.perf_counter() - t0
        vectors = {c[1]: v for c, v in zip(real, real_vectors, strict=True)}
        records = []
        for doc_id, chunk_id, text in chunks:
            vec = vectors.get(chunk_id)
            if vec is None:
                r = rng.standard_normal(embedder.dimension).astype("float32")
                vec = (r / np.linalg.norm(r)).tolist()
            records.append(
                VectorRecord(
                    id=chunk_id,
                    vector=list(vec),
                    text=text,
                    owner=OWNER,
                    document_id=f"sf{doc_id}",
                    chunk_index=0,
                )
            )
        for i in range(0, len(records), 1000):
            container.index.upsert(records[i : i + 1000])
        evidence_s = _warm(container, chunks, relevant_docs, rng)

        counts: Counter[str] = Counter()
        for port in ("conversations", "counters", "documents", "index"):
            container.__dict__[port] = Counting(getattr(container, port), port, counts)
        server = LocalServer(container, port=0)
        server.start()
        host, port = server.httpd.server_address[:2]
        conn = http.client.HTTPConnection(str(host), int(port), timeout=60)

        def call(method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any], dict[str, str]]:
            conn.request(
                method,
                path,
                body=json.dumps(body) if body is not None else None,
                headers={"Content-Type": "application/json"},
            )
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, json.loads(data) if data else {}, {k.lower(): v for k, v in resp.getheaders()}

        try:
            status, conv, _ = call("POST", "/chat/conversations", {})
            assert status == 201, conv
            path = f"/chat/conversations/{conv['id']}/messages"
            for i in range(PREFILL_MESSAGES // 2):
                status, _, _ = call("POST", path, {"content": queries[i % len(queries)][0]})
                assert status == 200
            latencies: list[float] = []
            server_ms: list[float] = []
            per_turn: list[Counter[str]] = []
            guards = 0
            for i in range(MEASURED_TURNS):
                question = queries[i % len(queries)][0]
                counts.clear()
                t = time.perf_counter()
                status, reply, headers = call("POST", path, {"content": question})
                latencies.append((time.perf_counter() - t) * 1000)
                assert status == 200, reply
                timing = headers.get("server-timing", "")
                server_ms.append(float(timing.split("dur=")[1]) if "dur=" in timing else float("nan"))
                guards += headers.get("x-model-used") == "guard"
                per_turn.append(Counter(counts))
            q_ms, s_ms = [], []
            flt = SearchFilter(owner=OWNER)
            for _ in range(30):
                t = time.perf_counter()
                qv = embedder.embed_query(queries[0][0])
                q_ms.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                container.index.search(qv, flt, 3)
                s_ms.append((time.perf_counter() - t) * 1000)
        finally:
            conn.close()
            server.stop()

    store_calls = [sum(v for k, v in c.items() if not k.startswith("index.")) for c in per_turn]
    index_calls = [sum(v for k, v in c.items() if k.startswith("index.")) for c in per_turn]
    breakdown = Counter[str]()
    for c in per_turn:
        breakdown.update(c)
    result = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "load_average_1m_at_start": load_at_start,
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        },
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "setup": {
            "chunks": len(chunks),
            "embedded_chunks": len(real),
            "embedding_seconds": round(embed_s, 2),
            "evidence_vectors_seconds": round(evidence_s, 2),
            "conversation_messages_before_measuring": PREFILL_MESSAGES,
            "measured_turns": MEASURED_TURNS,
            "model": "extractive",
            "embedder": settings.embedding_model_id,
        },
        "latency_ms": {
            "p50": round(_percentile(latencies, 50), 2),
            "p95": round(_percentile(latencies, 95), 2),
            "mean": round(statistics.fmean(latencies), 2),
            "max": round(max(latencies), 2),
        },
        "server_app_ms_p50": round(_percentile(server_ms, 50), 2),
        "query_embedding_ms_p50": round(_percentile(q_ms, 50), 2),
        "vector_search_ms_p50": round(_percentile(s_ms, 50), 2),
        "guard_replies": guards,
        "store_round_trips_per_turn": {"min": min(store_calls), "max": max(store_calls)},
        "vector_index_calls_per_turn": {"min": min(index_calls), "max": max(index_calls)},
        "calls_per_turn_by_method": {k: v / len(per_turn) for k, v in sorted(breakdown.items())},
        "goals": {"p50_ms": 40, "store_round_trips": 4},
    }
    if os.environ.get("READER", "off") == "on":  # the reader's variant goes aside (docs/reader.md)
        result["reader"] = "on"
        (RESULTS / "chat_turn-reader.json").write_text(json.dumps(result, indent=2) + "\n")
        return
    (RESULTS / "chat_turn.json").write_text(json.dumps(result, indent=2) + "\n")
    lat = result["latency_ms"]
    methods = ", ".join(
        f"{k.split('.', 1)[1]} {v:g}"
        for k, v in result["calls_per_turn_by_method"].items()
        if not k.startswith("index.")
    )
    lines = [
        f"### Chat turn over HTTP (extractive, {len(chunks):,} chunks, "
        f"{PREFILL_MESSAGES}-message conversation)",
        "",
        "| p50 ms | p95 ms | in the resolver p50 ms | of which: query embedding p50 ms "
        "| vector search p50 ms | store round trips / turn | vector index calls / turn |",
        "|---|---|---|---|---|---|---|",
        f"| {lat['p50']} | {lat['p95']} | {result['server_app_ms_p50']} | "
        f"{result['query_embedding_ms_p50']} | "
        f"{result['vector_search_ms_p50']} | "
        f"{min(store_calls)}–{max(store_calls)} ({methods}) | {min(index_calls)}–{max(index_calls)} |",
        "",
        f"{MEASURED_TURNS} turns, {guards} guard replies; goals: p50 ≤ 40 ms, ≤ 4 store round trips. "
        + (
            "Warmed: every chunk's evidence vectors stored, so a turn embeds only its question. "
            if evidence_s
            else "Not warmed (PRECOMPUTE_EVIDENCE=false): a question's first turn embeds its evidence. "
        )
        + f"{result['machine']['cpus']} CPUs ({result['machine']['processor']}), Python "
        f"{result['machine']['python']}, 1-min load average {load_at_start} at start, "
        f"{result['machine']['load_average_1m_at_end']} at end. In the resolver = `Server-Timing` "
        "(the rest is HTTP and the client).",
    ]
    (RESULTS / "chat_turn.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
