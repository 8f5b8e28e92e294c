"""Local ingestion: pipeline overhead over the raw embedder on the same chunks, peak memory, and
one-shot question latency.

SciFact abstracts (read from ``../shared/bench-data`` or ``RAGCHAT_BENCH_DATA`` at run time,
never copied) go through the real local stack. Three phases, each in a fresh subprocess with the
same warm-up (its own peak RSS; onnxruntime speeds up as it meets more input shapes, so variants
measured one after another in one process would favour the later):

- ``raw_batches``: the chunks the pipeline's splitter produces for every document
  (``IngestSteps.chunks_of``, blank chunks dropped as ``split`` does) embedded with
  ``embedder.embed_documents`` directly, one call per document and 64-chunk batch (what
  ``IngestSteps.run`` does for one document at a time);
- ``raw_one_call``: the same chunks in a single ``embed_documents`` call (the embedder's own
  length-sorted batching: the best the embedder can do);
- ``e2e``: every document is submitted through ``IngestionService`` and the inline pipeline runs it to
  ``READY`` (SQLite notes + embedded vector index + blobs; the worker coalesces queued documents'
  embedder calls). The ports are wrapped in a timing proxy, so the time inside the embedder, the
  document store, the index and the blob store is known. Then SciFact test queries are asked
  through ``AskService`` (extractive answerer).

Overhead = raw chunks/s / end-to-end chunks/s − 1, against both raw variants (goal ≤ 15%).
Writes ``bench/results/ingestion.{json,md}``.

Usage: ``python bench/bench_ingestion.py [--docs 300] [--queries 50] [--precision fp32|int8] [--out NAME]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchdata import bench_data_dir, models_path, results_dir, smoke

ROOT = Path(__file__).resolve().parent.parent
RESULTS = results_dir()
DATA = bench_data_dir() / "scifact"
GOAL_OVERHEAD_PCT = 15.0


def _load(n_docs: int, n_queries: int) -> tuple[list[dict[str, Any]], list[str]]:
    queries = {}
    with (DATA / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            queries[row["_id"]] = row["text"]
    wanted_docs: list[str] = []
    test_queries: list[str] = []
    with (DATA / "qrels" / "test.tsv").open(encoding="utf-8") as fh:
        next(fh)  # header
        for line in fh:
            qid, did, _ = line.rstrip("\n").split("\t")
            if qid in queries and len(test_queries) < n_queries and queries[qid] not in test_queries:
                test_queries.append(queries[qid])
            if len(wanted_docs) < n_docs and did not in wanted_docs:
                wanted_docs.append(did)
    corpus: dict[str, dict[str, Any]] = {}
    with (DATA / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            corpus[row["_id"]] = row
    # the documents the test queries are about first, then others up to n_docs
    chosen = [d for d in wanted_docs if d in corpus]
    taken = set(chosen)
    chosen += [d for d in corpus if d not in taken][: max(n_docs - len(chosen), 0)]
    return [corpus[d] for d in chosen[:n_docs]], test_queries


def _body(doc: dict[str, Any]) -> str:
    return f"{doc['title']}\n\n{doc['text']}"


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


class Timed:
    """Proxy adding the wall time of every method call on the wrapped port to ``seconds[name]``."""

    def __init__(self, inner: Any, name: str, seconds: dict[str, float], calls: dict[str, int]) -> None:
        self._inner, self._name, self._seconds, self._calls = inner, name, seconds, calls

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)
        if not callable(value) or attr.startswith("_"):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                key = f"{self._name}.{attr}"
                self._seconds[key] += time.perf_counter() - t0
                self._calls[key] += 1

        return call


def _container(tmp: str) -> Any:
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    model_dir = str(models_path())
    env = {"RAGCHAT_DATA_DIR": tmp, "RAGCHAT_MODEL_DIR": model_dir, "RAGCHAT_CHAT_MODEL": "extractive"}
    if os.environ.get("EMBEDDER_PRECISION"):  # --precision (default: the setting's default)
        env["EMBEDDER_PRECISION"] = os.environ["EMBEDDER_PRECISION"]
    return Container(load_settings(env))


def _chunks_per_doc(container: Any, docs: list[dict[str, Any]]) -> list[list[str]]:
    """The chunks ``IngestSteps.split`` makes of each document (blank ones dropped, as it does)."""
    from ragchat.domain.models import Document

    steps = container.ingest_steps
    per_doc: list[list[str]] = []
    for i, d in enumerate(docs):
        doc = Document(
            id=f"D{i}", owner="bench", title=d["title"], content_type="text/plain", source="bench",
            body_key="",
        )  # fmt: skip
        per_doc.append([c.text for c in steps.chunks_of(doc, _body(d).encode("utf-8")) if c.text.strip()])
    return per_doc


def _phase_raw(docs: list[dict[str, Any]], *, one_call: bool) -> dict[str, Any]:
    from ragchat.services.ingestion import BATCH_SIZE

    with tempfile.TemporaryDirectory(prefix="ragchat-bench-raw-") as tmp:
        container = _container(tmp)
        per_doc = _chunks_per_doc(container, docs)
        everything = [c for chunks in per_doc for c in chunks]
        embedder = container.embedder
        embedder.embed_query("warm up")  # the same warm-up as the end-to-end phase
        calls = 0
        t0 = time.perf_counter()
        if one_call:
            embedder.embed_documents(everything)
            calls = 1
        else:
            for chunks in per_doc:
                for start in range(0, len(chunks), BATCH_SIZE):
                    embedder.embed_documents(chunks[start : start + BATCH_SIZE])
                    calls += 1
        seconds = time.perf_counter() - t0
    return {
        "chunks": len(everything),
        "chars": sum(len(c) for c in everything),
        "embed_calls": calls,
        "seconds": round(seconds, 3),
        "peak_rss_mb": _peak_rss_mb(),
    }


def _phase_e2e(docs: list[dict[str, Any]], queries: list[str]) -> dict[str, Any]:
    from ragchat.domain.models import DocumentStatus

    seconds: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    with tempfile.TemporaryDirectory(prefix="ragchat-bench-e2e-") as tmp:
        container = _container(tmp)
        owner = "bench"
        container.embedder.embed_query("warm up")  # load the model outside the timed part
        for port in ("embedder", "documents", "index", "blobs"):
            container.__dict__[port] = Timed(getattr(container, port), port, seconds, calls)

        t0 = time.perf_counter()
        ids = [container.ingestion.submit(owner, body=_body(d), title=d["title"]).id for d in docs]
        submitted = time.perf_counter() - t0
        idle = container.launcher.wait_idle(3600)
        total = time.perf_counter() - t0
        final = [container.documents.get_document(owner, i) for i in ids]
        ready = [d for d in final if d is not None and d.status == DocumentStatus.READY]
        chunks = sum(d.chunk_count for d in ready)
        port_seconds = {k: round(v, 3) for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])}
        port_calls = dict(calls)
        rss_after_ingest = _peak_rss_mb()

        latencies: list[float] = []
        guarded = 0
        for q in queries:
            s = time.perf_counter()
            result = container.ask.ask(owner, q)
            latencies.append((time.perf_counter() - s) * 1000)
            guarded += int(result.guard_used)
        threshold = container.settings.similarity_threshold
        container.launcher.close()
    return {
        "documents": len(docs),
        "ready": len(ready),
        "idle": idle,
        "chunks": chunks,
        "submit_seconds": round(submitted, 3),
        "seconds_to_ready": round(total, 3),
        "port_seconds": port_seconds,
        "port_calls": port_calls,
        "peak_rss_mb_ingest": rss_after_ingest,
        "queries": len(queries),
        "ask_ms_p50": round(_pct(latencies, 50), 1),
        "ask_ms_p95": round(_pct(latencies, 95), 1),
        "guard_rate": round(guarded / max(len(queries), 1), 3),
        "min_similarity": threshold,
        "embedder_precision": container.settings.embedder_precision,
    }


def _run_phase(phase: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--phase", phase]
    cmd += ["--docs", str(args.docs), "--queries", str(args.queries)]
    env = dict(os.environ, **({"EMBEDDER_PRECISION": args.precision} if args.precision else {}))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT, env=env)
    for line in reversed(out.stdout.splitlines()):
        if line.startswith('{"phase"'):
            result: dict[str, Any] = json.loads(line)
            return result
    raise RuntimeError(f"phase {phase} printed no result:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--phase", choices=("raw_batches", "raw_one_call", "e2e"), help=argparse.SUPPRESS)
    parser.add_argument("--precision", choices=("fp32", "int8"), help="default: EMBEDDER_PRECISION's default")
    parser.add_argument("--out", default="ingestion", help="results file name (bench/results/<out>.json|md)")
    if smoke():  # tiny data: the run proves the code path, its figures mean nothing
        parser.set_defaults(docs=12, queries=4)
    args = parser.parse_args(argv if argv is not None else [])

    if args.phase:
        docs, queries = _load(args.docs, args.queries)
        if args.phase == "e2e":
            figures = _phase_e2e(docs, queries)
        else:
            figures = _phase_raw(docs, one_call=args.phase == "raw_one_call")
        print(json.dumps({"phase": args.phase, **figures}), flush=True)
        return figures

    load_start = round(os.getloadavg()[0], 2)
    # Each phase in a fresh process with the same warm-up: onnxruntime gets faster as it meets more
    # input shapes, so measuring one variant after another in one process would favour the later.
    raw = _run_phase("raw_batches", args)
    best = _run_phase("raw_one_call", args)
    e2e = _run_phase("e2e", args)
    load_end = round(os.getloadavg()[0], 2)

    chunks = e2e["chunks"]
    e2e_cps = chunks / e2e["seconds_to_ready"]
    raw_cps = raw["chunks"] / raw["seconds"]
    best_cps = best["chunks"] / best["seconds"]
    embed_in_pipeline = e2e["port_seconds"].get("embedder.embed_documents", 0.0)
    figures = {
        "documents": e2e["documents"],
        "ready": e2e["ready"],
        "chunks": chunks,
        "same_chunks_as_raw": chunks == raw["chunks"] == best["chunks"],
        "raw_chunks_per_second_same_batches": round(raw_cps, 2),
        "raw_chunks_per_second_one_call": round(best_cps, 2),
        "e2e_chunks_per_second": round(e2e_cps, 2),
        "overhead_pct_vs_same_batches": round((raw_cps / e2e_cps - 1) * 100, 1),
        "overhead_pct_vs_one_call": round((best_cps / e2e_cps - 1) * 100, 1),
        "embed_seconds_inside_pipeline": round(embed_in_pipeline, 3),
        "non_embedding_seconds_inside_pipeline": round(e2e["seconds_to_ready"] - embed_in_pipeline, 3),
        "non_embedding_pct_of_e2e": round((1 - embed_in_pipeline / e2e["seconds_to_ready"]) * 100, 1),
        "docs_per_second": round(e2e["ready"] / e2e["seconds_to_ready"], 2),
        "submit_ms_per_doc": round(e2e["submit_seconds"] / max(e2e["documents"], 1) * 1000, 2),
        "peak_rss_mb_raw_batches": raw["peak_rss_mb"],
        "peak_rss_mb_raw_one_call": best["peak_rss_mb"],
        "peak_rss_mb_e2e": e2e["peak_rss_mb_ingest"],
        "ask_ms_p50": e2e["ask_ms_p50"],
        "ask_ms_p95": e2e["ask_ms_p95"],
        "guard_rate": e2e["guard_rate"],
        "queries": e2e["queries"],
        "min_similarity": e2e["min_similarity"],
        "embedder_precision": e2e.get("embedder_precision"),
        "goal_overhead_pct": GOAL_OVERHEAD_PCT,
    }
    machine = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_1m_at_start": load_start,
        "load_average_1m_at_end": load_end,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"figures": figures, "raw_batches": raw, "raw_one_call": best, "e2e": e2e, "machine": machine}
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    top_ports = ", ".join(
        f"{k} {v:.2f} s ({e2e['port_calls'].get(k, 0)} calls)"
        for k, v in list(e2e["port_seconds"].items())[:6]
    )
    md = [
        "### Local ingestion: pipeline overhead over the raw embedder, memory, one-shot questions",
        "",
        f"{figures['documents']} SciFact abstracts → {chunks} chunks, MiniLM "
        f"{figures['embedder_precision']}, on {machine['cpus']} CPUs, Python "
        f"{machine['python']}, 1-min load average {load_start} at start, {load_end} at end.",
        "",
        "| raw embedder, pipeline's batches | raw embedder, one call | end to end to READY | overhead "
        "(vs pipeline's batches / one call) | goal | peak RSS raw (batches / one call) / e2e "
        "| ask p50 / p95 |",
        "|---|---|---|---|---|---|---|",
        f"| {figures['raw_chunks_per_second_same_batches']} chunks/s "
        f"| {figures['raw_chunks_per_second_one_call']} chunks/s "
        f"| {figures['e2e_chunks_per_second']} chunks/s ({e2e['seconds_to_ready']} s) "
        f"| {figures['overhead_pct_vs_same_batches']}% / {figures['overhead_pct_vs_one_call']}% "
        f"| ≤ {GOAL_OVERHEAD_PCT:.0f}% | {figures['peak_rss_mb_raw_batches']} / "
        f"{figures['peak_rss_mb_raw_one_call']} / {figures['peak_rss_mb_e2e']} MB "
        f"| {figures['ask_ms_p50']} / {figures['ask_ms_p95']} ms |",
        "",
        f"Raw = `embed_documents` over exactly the chunks the splitter produces, one call per "
        f"document and 64-chunk batch as `IngestSteps.run` makes them ({raw['embed_calls']} calls), or "
        f"all in one call; each variant in a fresh process. End to end, "
        f"{figures['non_embedding_pct_of_e2e']}% of the time to READY is spent outside the embedder "
        f"({figures['non_embedding_seconds_inside_pipeline']} s). Time inside the ports "
        f"during ingestion: {top_ports}. Asking: {figures['queries']} SciFact test queries, guard rate "
        f"{figures['guard_rate']:.0%} at MIN_SIMILARITY {figures['min_similarity']}.",
    ]
    (RESULTS / f"{args.out}.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
