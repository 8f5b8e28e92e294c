"""Side by side with ChromaDB (embedded, HNSW) on SciFact abstracts, the same MiniLM ONNX file on
both sides (issue 23 item 7): alternated runs, ratios.

Each round runs, each in a fresh process, in an order that rotates every round:

- ``chroma``: a ``chromadb.PersistentClient`` in a throwaway directory; the abstracts (title, blank
  line, text) are added 256 at a time to a collection whose embedding function is ragchat's own
  ``OnnxMiniLMEmbedder`` over the same ``model.onnx`` (fp32 unless ``--precision int8``; same
  tokenizer, 256-token truncation, length-sorted batches, mean pooling), so only the store differs.
  Time: from the first ``add`` to the last one returning (everything is then searchable).
- ``chroma_chunks`` (unless ``--no-chunks``): Chroma given, as its documents, the very texts ragchat embeds
  (each abstract split by ragchat's own splitter, every chunk after its title header, made before
  the clock starts: a Chroma user splits before adding). Same tokens on both sides, so the ratio is
  the rest of the path (store, index, evidence, READY); Chroma's default phase above embeds only the
  first 256 tokens of each abstract.
- ``ragchat_like``: like for like: ``ragchat`` ingests each abstract as one chunk (``CHUNK_SIZE``
  100000, no chunk header, ``PRECOMPUTE_EVIDENCE=false``): one vector per abstract, nothing else.
  Time: submit of the first to the last READY.
- ``ragchat``: the defaults (1,000-character chunks with their title header, hybrid index,
  evidence vectors): time to the last READY, and to "everything done" (every READY document's
  evidence vectors stored, ``wait_warm``); how many evidence vectors were stored.

chromadb is not a dependency of ragchat: it lives in its own virtualenv (``make bench-chroma-env``
makes ``.venv-chroma``; ``--chroma-python`` or ``RAGCHAT_CHROMA_PYTHON`` points elsewhere). Without
it the benchmark says so and writes nothing.

Usage: ``python bench/bench_chroma.py [--docs 5183] [--rounds 2] [--precision fp32]
[--evidence embedded,pooled_sentences,pooled] [--warming background,on_demand] [--no-like]
[--no-chunks] [--out chroma]`` (``--evidence``: the ``EVIDENCE_VECTORS`` modes to run the defaults with;
``--warming``: the ``EVIDENCE_WARMING`` modes, each pair a phase of its own — with ``on_demand``
nothing is embedded after READY, so everything is done at READY; ``--no-like``: without the
like-for-like phase). Writes bench/results/<out>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchdata import bench_data_dir, models_path, results_dir, smoke

ROOT = Path(__file__).resolve().parent.parent
RESULTS = results_dir()
sys.path.insert(0, str(ROOT / "bench"))
CHROMA_VERSION = "1.5.9"
DEFAULT_CHROMA_PYTHON = ROOT / ".venv-chroma" / "bin" / "python"
ADD_BATCH = 256
EVIDENCE_MODES = ("embedded", "pooled_sentences", "pooled")
WARMING_MODES = ("background", "on_demand")
GOAL_EVERYTHING_DONE = 1.5  # issue 23 item 4: everything done ≤ 1.5× Chroma's time on SciFact


def _docs(n: int) -> list[dict[str, str]]:

    out = []
    with (bench_data_dir() / "scifact" / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            out.append({"id": row["_id"], "title": row["title"], "text": row["text"]})
            if len(out) >= n:
                break
    return out


def _body(doc: dict[str, str]) -> str:
    return f"{doc['title']}\n\n{doc['text']}"


def product_chunks(doc: dict[str, str], settings: Any) -> list[tuple[str, str]]:
    """``(chunk text, text embedded)`` of an abstract as ragchat's split step reads it:
    ``parse_document`` with the settings, each chunk embedded after its header."""
    from ragchat.domain.context import embedding_text
    from ragchat.domain.parsing import ParseJob, parse_document

    job = ParseJob(
        content_type="text/plain",
        title=doc["title"],
        chunk_size=settings.chunk_size,
        overlap=settings.chunk_overlap,
        headers=settings.chunk_headers,
        cpu_seconds=60,
    )
    parsed = parse_document(_body(doc).encode("utf-8"), job)
    return [(c.text, embedding_text(h, c.text)) for c, h in zip(parsed.chunks, parsed.headers, strict=True)]


# ---------------------------------------------------------------------------------------- phases
def _phase_chroma(
    docs: list[dict[str, str]], model_dir: Path, precision: str, texts: Path | None = None
) -> dict[str, Any]:
    """Runs under the chroma virtualenv: ragchat's embedder module is imported from the source tree
    (it needs only onnxruntime, tokenizers and numpy, which chromadb brings). With ``texts`` (a JSON
    list of ``[id, text]``) those are added instead of the abstracts."""
    sys.path.insert(0, str(ROOT / "layers" / "ragchat"))
    import chromadb
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from ragchat.adapters.local.onnx_embedder import MODEL_FILES, TOKENIZER_FILE, OnnxMiniLMEmbedder

    embedder = OnnxMiniLMEmbedder(model_dir / MODEL_FILES[precision], model_dir / TOKENIZER_FILE)
    embedder.embed_documents(["warm up"])

    class MiniLM(EmbeddingFunction[Documents]):
        def __init__(self) -> None:
            pass

        def __call__(self, input: Documents) -> Embeddings:
            return list(embedder.embed_array(list(input)))

        @staticmethod
        def name() -> str:
            return "ragchat-minilm-onnx"

    with tempfile.TemporaryDirectory(prefix="ragchat-bench-chroma-") as tmp:
        client = chromadb.PersistentClient(path=tmp)
        collection = client.create_collection(
            "scifact", embedding_function=MiniLM(), metadata={"hnsw:space": "cosine"}
        )
        items = (
            [(str(i), str(t)) for i, t in json.loads(texts.read_text(encoding="utf-8"))]
            if texts is not None
            else [(d["id"], _body(d)) for d in docs]
        )
        started = time.perf_counter()
        for i in range(0, len(items), ADD_BATCH):
            part = items[i : i + ADD_BATCH]
            collection.add(ids=[k for k, _ in part], documents=[t for _, t in part])
        seconds = time.perf_counter() - started
        count = collection.count()
        probe = collection.query(query_texts=[docs[0]["title"]], n_results=1)
    first = probe["ids"][0][:1]
    return {
        "seconds": round(seconds, 2),
        "vectors": count,
        "found_first": bool(first) and first[0].split("#")[0] == docs[0]["id"],
        "chromadb": chromadb.__version__,
    }


def _ragchat(tmp: str, env: dict[str, str]) -> Any:
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    model_dir = str(models_path())
    settings = load_settings(
        {"RAGCHAT_DATA_DIR": tmp, "RAGCHAT_MODEL_DIR": model_dir, "RAGCHAT_CHAT_MODEL": "extractive", **env}
    )
    return Container(settings)


def _phase_ragchat(
    docs: list[dict[str, str]],
    precision: str,
    *,
    like_for_like: bool,
    evidence: str = "embedded",
    warming: str = "background",
) -> dict[str, Any]:
    from ragchat.domain.models import DocumentStatus

    env = {"EMBEDDER_PRECISION": precision, "EVIDENCE_VECTORS": evidence, "EVIDENCE_WARMING": warming}
    if like_for_like:
        env |= {"CHUNK_SIZE": "100000", "CHUNK_HEADERS": "false", "PRECOMPUTE_EVIDENCE": "false"}
    with tempfile.TemporaryDirectory(prefix="ragchat-bench-chroma-") as tmp:
        box = _ragchat(tmp, env)
        box.embedder.embed_documents(["warm up"])
        owner = "bench"
        started = time.perf_counter()
        ids = [box.ingestion.submit(owner, body=_body(d), title=d["title"]).id for d in docs]
        assert box.launcher.wait_idle(3600)
        ready_s = time.perf_counter() - started
        out: dict[str, Any] = {"seconds_to_ready": round(ready_s, 2)}
        if not like_for_like:
            warm = getattr(box.launcher, "wait_warm", None)
            if warm is not None:
                assert warm(3600)
            out["seconds_to_everything_done"] = round(time.perf_counter() - started, 2)
        final = [box.documents.get_document(owner, i) for i in ids]
        out["ready"] = sum(1 for d in final if d is not None and d.status == DocumentStatus.READY)
        out["chunks"] = sum(d.chunk_count for d in final if d is not None)
        with box._sqlite.read() as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            out["evidence_vectors"] = (
                conn.execute("SELECT COUNT(*) FROM evidence_vectors").fetchone()[0]
                if "evidence_vectors" in tables
                else 0
            )
        box.launcher.close()
    return out


# ---------------------------------------------------------------------------------------- driver
def _run(phase: str, python: str, args: argparse.Namespace, model_dir: Path) -> dict[str, Any]:
    cmd = [python, str(Path(__file__).resolve()), "--phase", phase, "--docs", str(args.docs)]
    cmd += ["--precision", args.precision, "--model-dir", str(model_dir)]
    if phase == "chroma_chunks":
        cmd += ["--texts", str(args.texts)]
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT)
    for line in reversed(out.stdout.splitlines()):
        if line.startswith('{"phase"'):
            result: dict[str, Any] = json.loads(line)
            return result
    raise RuntimeError(f"phase {phase} printed no result:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")


def chroma_python(given: str | None = None) -> str | None:
    """The interpreter that has chromadb, or ``None`` (said by the caller)."""
    python = given or os.environ.get("RAGCHAT_CHROMA_PYTHON") or str(DEFAULT_CHROMA_PYTHON)
    if not Path(python).exists():
        return None
    probe = subprocess.run([python, "-c", "import chromadb"], capture_output=True, check=False)
    return python if probe.returncode == 0 else None


def _write_texts(docs: list[dict[str, str]]) -> Path:
    """The texts ragchat embeds for ``docs`` (``[id, text]`` per chunk), in a throwaway JSON file."""
    from ragchat.config import load_settings

    settings = load_settings({})
    rows = [
        [f"{d['id']}#{n}", embedded]
        for d in docs
        for n, (_, embedded) in enumerate(product_chunks(d, settings))
    ]
    fd, name = tempfile.mkstemp(prefix="ragchat-bench-chroma-texts-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(rows, fh)
    return Path(name)


def _ratio(a: float, b: float) -> float:
    return round(a / b, 2)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=5183, help="SciFact abstracts (5,183: all)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--precision", choices=("fp32", "int8"), default="fp32")
    parser.add_argument("--chroma-python", default=None)
    parser.add_argument(
        "--evidence",
        default="embedded",
        help=f"EVIDENCE_VECTORS modes for the defaults, comma-separated ({', '.join(EVIDENCE_MODES)})",
    )
    parser.add_argument(
        "--warming",
        default="background,on_demand",
        help=f"EVIDENCE_WARMING modes ({', '.join(WARMING_MODES)})",
    )
    parser.add_argument("--no-like", action="store_true", help="skip the like-for-like phase")
    parser.add_argument(
        "--chunks",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also Chroma given the texts ragchat embeds (the same tokens; --no-chunks skips it)",
    )
    parser.add_argument("--out", default="chroma", help="results file name in bench/results (no suffix)")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--texts", type=Path, help=argparse.SUPPRESS)
    if smoke():  # tiny data: the run proves the code path, its figures mean nothing
        parser.set_defaults(docs=12, rounds=1)
    args = parser.parse_args(argv if argv is not None else [])

    if args.phase:
        docs = _docs(args.docs)
        if args.phase in ("chroma", "chroma_chunks"):
            figures = _phase_chroma(docs, Path(args.model_dir), args.precision, args.texts)
        elif args.phase == "ragchat_like":
            figures = _phase_ragchat(docs, args.precision, like_for_like=True)
        else:
            mode, _, warming = args.phase.removeprefix("ragchat-").partition("@")
            figures = _phase_ragchat(
                docs, args.precision, like_for_like=False, evidence=mode, warming=warming or "background"
            )
        print(json.dumps({"phase": args.phase, **figures}), flush=True)
        return figures

    python = chroma_python(args.chroma_python)
    if python is None:
        print(
            f"bench chroma: SKIPPED: chromadb is not installed (run `make bench-chroma-env` for "
            f"chromadb {CHROMA_VERSION} in .venv-chroma, or set RAGCHAT_CHROMA_PYTHON); nothing written",
            flush=True,
        )
        return {"skipped": "chromadb is not installed"}
    from ragchat.adapters.local.onnx_embedder import model_dir as minilm_dir

    model_dir = minilm_dir(models_path())
    evidence = [m for m in args.evidence.split(",") if m]
    if not evidence or any(m not in EVIDENCE_MODES for m in evidence):
        parser.error(f"--evidence takes {', '.join(EVIDENCE_MODES)}")
    warmings = [w for w in args.warming.split(",") if w]
    if not warmings or any(w not in WARMING_MODES for w in warmings):
        parser.error(f"--warming takes {', '.join(WARMING_MODES)}")
    # a background-warmed mode is named as before ("embedded"); an on-demand one "embedded@on_demand"
    modes = [m if w == "background" else f"{m}@{w}" for m in evidence for w in warmings]
    like = () if args.no_like else ("ragchat_like",)
    chunked = ("chroma_chunks",) if args.chunks else ()
    if chunked:
        args.texts = _write_texts(_docs(args.docs))
    phases = ("chroma", *chunked, *like, *(f"ragchat-{m}" for m in modes))
    load_start = round(os.getloadavg()[0], 2)
    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):
        order = phases[r % len(phases) :] + phases[: r % len(phases)]
        row: dict[str, Any] = {"order": list(order)}
        for phase in order:
            interpreter = python if phase.startswith("chroma") else sys.executable
            row[phase] = _run(phase, interpreter, args, model_dir)
            row[phase]["load_1m_after"] = round(os.getloadavg()[0], 2)
            print(f"round {r + 1} {phase}: {row[phase]}", flush=True)
        chroma_s = row["chroma"]["seconds"]
        row["ratios"] = {}
        if like:
            row["ratios"]["like_for_like"] = _ratio(row["ragchat_like"]["seconds_to_ready"], chroma_s)
        for m in modes:
            row["ratios"][f"{m}_ready"] = _ratio(row[f"ragchat-{m}"]["seconds_to_ready"], chroma_s)
            done = row[f"ragchat-{m}"]["seconds_to_everything_done"]
            row["ratios"][f"{m}_everything_done"] = _ratio(done, chroma_s)
            if chunked:
                same = row["chroma_chunks"]["seconds"]
                row["ratios"][f"{m}_everything_done_same_text"] = _ratio(done, same)
        rounds.append(row)
    load_end = round(os.getloadavg()[0], 2)
    if chunked:
        args.texts.unlink(missing_ok=True)
    ratios = {k: [row["ratios"][k] for row in rounds] for k in rounds[0]["ratios"]}
    figures = {
        "docs": args.docs,
        "precision": args.precision,
        "rounds": args.rounds,
        "median_ratios": {k: round(statistics.median(v), 2) for k, v in ratios.items()},
        "ratios_per_round": ratios,
        "goal_everything_done": GOAL_EVERYTHING_DONE,
        "evidence_modes": modes,
        "chunks": rounds[0][f"ragchat-{modes[0]}"]["chunks"],
        "evidence_vectors": {m: rounds[0][f"ragchat-{m}"]["evidence_vectors"] for m in modes},
    }
    machine = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1m_at_start": load_start,
        "load_average_1m_at_end": load_end,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"figures": figures, "rounds": rounds, "machine": machine}
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (RESULTS / f"{args.out}.md").write_text(_markdown(result), encoding="utf-8")
    print(json.dumps(figures, indent=2))
    return result


def _markdown(result: dict[str, Any]) -> str:
    f, m, rounds = result["figures"], result["machine"], result["rounds"]

    def secs(phase: str, key: str) -> str:
        return " / ".join(f"{r[phase][key]:.1f}" for r in rounds)

    def ratio(key: str) -> str:
        per = " / ".join(f"{v:.2f}" for v in f["ratios_per_round"][key])
        return f"**{f['median_ratios'][key]:.2f}×** ({per})"

    chroma = rounds[0]["chroma"].get("chromadb", CHROMA_VERSION)
    lines = [
        f"### Side by side with ChromaDB {chroma} "
        f"(SciFact, {f['docs']:,} abstracts, MiniLM {f['precision']})",
        "",
        "| | seconds (per round) | ratio to Chroma (median; per round) | goal |",
        "|---|---|---|---|",
        f"| Chroma (embedded, HNSW), whole abstracts | {secs('chroma', 'seconds')} | 1 | – |",
    ]
    if "chroma_chunks" in rounds[0]:
        lines.append(
            f"| Chroma given the texts ragchat embeds ({rounds[0]['chroma_chunks']['vectors']:,} "
            f"chunks with their headers) | {secs('chroma_chunks', 'seconds')} | – | – |"
        )
    if "like_for_like" in f["median_ratios"]:
        lines.append(
            f"| ragchat like for like (one vector per abstract) to READY | "
            f"{secs('ragchat_like', 'seconds_to_ready')} | {ratio('like_for_like')} | – |"
        )
    for mode in f["evidence_modes"]:
        phase = f"ragchat-{mode}"
        name, _, warming = mode.partition("@")
        setting = f"`EVIDENCE_VECTORS={name}`" + (f", `EVIDENCE_WARMING={warming}`" if warming else "")
        lines += [
            f"| ragchat defaults, {setting} ({f['chunks']:,} chunks): READY | "
            f"{secs(phase, 'seconds_to_ready')} | {ratio(f'{mode}_ready')} | – |",
            f"| the same, everything done ({f['evidence_vectors'][mode]:,} evidence vectors) | "
            f"{secs(phase, 'seconds_to_everything_done')} | {ratio(f'{mode}_everything_done')} "
            f"| ≤ {f['goal_everything_done']}× |",
        ]
        if f"{mode}_everything_done_same_text" in f["median_ratios"]:
            lines.append(
                "| the same, everything done, against Chroma given the same texts | "
                f"{secs(phase, 'seconds_to_everything_done')} | "
                f"{ratio(f'{mode}_everything_done_same_text')} | – |"
            )
    lines += [
        "",
        f"{f['rounds']} rounds, each phase in a fresh process, order rotated every round; the same "
        "`model.onnx` through ragchat's embedder on both sides (Chroma's embedding function). "
        f"{m['cpus']} CPUs, Python {m['python']}, 1-min load average {m['load_average_1m_at_start']} "
        f"at start, {m['load_average_1m_at_end']} at end, {m['when']}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
