"""What a user feels of ``EVIDENCE_WARMING`` (issue 23 item 4): questions on chunks asked about for the
first time, and the same questions again, with the evidence warmed in the background against embedded
on demand.

Each round runs each mode in a fresh process, the order alternating: SciFact abstracts are ingested
(``--docs``: the abstracts cited by the first test claims, then others up to that number) into a
throwaway data dir with the local MiniLM and the extractive answerer; ``background`` then waits until
every chunk's evidence is stored (``wait_warm``, as a server that had time); ``on_demand`` does not
(nothing is embedded after READY). Then the claims are asked one by one (first touch: in
``on_demand`` each question embeds and stores its chunks' missing evidence), then all of them again
(repeated). Per mode: READY and everything-done time, p50/p95 of both passes, the evidence texts
embedded per question, and the answers, compared across modes (with their source ids taken out).

Usage: ``python bench/evidence_latency.py [--docs 200] [--rounds 2]``. Writes
bench/results/evidence_latency.{json,md}.
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

from benchdata import bench_data_dir, models_path, results_dir

ROOT = Path(__file__).resolve().parent.parent
RESULTS = results_dir()
sys.path.insert(0, str(ROOT / "bench"))
MODES = ("on_demand", "background")


def _data(n_docs: int) -> tuple[list[dict[str, str]], list[str]]:
    """``n_docs`` abstracts (those the first test claims cite, then the corpus in order) and those
    claims."""

    base = bench_data_dir() / "scifact"
    corpus = {}
    with (base / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            corpus[row["_id"]] = {"id": row["_id"], "title": row["title"], "text": row["text"]}
    claims = {}
    with (base / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            claims[row["_id"]] = row["text"]
    cited: dict[str, list[str]] = {}
    for line in (base / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        query, doc, _ = line.split("\t")
        cited.setdefault(query, []).append(doc)
    chosen: dict[str, None] = {}
    questions = []
    for query, docs in cited.items():
        if len(chosen) + len(docs) > n_docs // 2:
            break
        chosen.update(dict.fromkeys(d for d in docs if d in corpus))
        questions.append(claims[query])
    for doc in corpus:
        if len(chosen) >= n_docs:
            break
        chosen.setdefault(doc)
    return [corpus[d] for d in chosen], questions


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 1)


def _phase(mode: str, n_docs: int) -> dict[str, Any]:
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    docs, questions = _data(n_docs)
    models = str(models_path())
    with tempfile.TemporaryDirectory(prefix="ragchat-bench-evidence-") as tmp:
        env = {
            "RAGCHAT_DATA_DIR": tmp,
            "RAGCHAT_MODEL_DIR": models,
            "RAGCHAT_CHAT_MODEL": "extractive",
            "EVIDENCE_WARMING": mode,
        }
        box = Container(load_settings(env))
        embedder = box.embedder
        embedder.embed_documents(["warm up"])
        embedded: list[int] = []
        real = embedder.embed_documents

        def counting(texts: Any) -> Any:
            embedded.append(len(texts))
            return real(texts)

        owner = "bench"
        started = time.perf_counter()
        for d in docs:
            box.ingestion.submit(owner, body=f"{d['title']}\n\n{d['text']}", title=d["title"])
        assert box.launcher.wait_idle(3600)
        ready_s = time.perf_counter() - started
        assert box.launcher.wait_warm(3600)  # type: ignore[attr-defined]
        done_s = time.perf_counter() - started
        embedder.embed_documents = counting  # type: ignore[method-assign]
        passes: dict[str, Any] = {}
        answers: list[list[Any]] = []
        for name in ("first", "repeated"):
            ms, texts = [], []
            for q in questions:
                embedded.clear()
                t = time.perf_counter()
                result = box.ask.ask(owner, q)
                ms.append((time.perf_counter() - t) * 1000)
                texts.append(sum(embedded))
                if name == "first":
                    answers.append([result.guard_used, result.answer.split("[source:")[0]])
            passes[name] = {
                "p50_ms": _pct(ms, 0.5),
                "p95_ms": _pct(ms, 0.95),
                "mean_ms": round(statistics.fmean(ms), 1),
                "evidence_texts_per_question": round(statistics.fmean(texts), 1),
            }
        with box._sqlite.read() as conn:
            stored = conn.execute("SELECT COUNT(*) FROM evidence_vectors").fetchone()[0]
            chunks = conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        box.close()
    return {
        "docs": len(docs),
        "chunks": chunks,
        "questions": len(questions),
        "seconds_to_ready": round(ready_s, 2),
        "seconds_to_everything_done": round(done_s, 2),
        "evidence_vectors_stored": stored,
        "passes": passes,
        "answers": answers,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--phase", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv if argv is not None else [])
    if args.phase:
        out = _phase(args.phase, args.docs)
        print(json.dumps({"phase": args.phase, **out}), flush=True)
        return out

    load_start = round(os.getloadavg()[0], 2)
    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):
        order = MODES if r % 2 == 0 else MODES[::-1]
        row: dict[str, Any] = {"order": list(order)}
        for mode in order:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--phase", mode, "--docs", str(args.docs)]
            proc = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT)
            line = next((x for x in reversed(proc.stdout.splitlines()) if x.startswith('{"phase"')), None)
            if line is None:
                raise RuntimeError(f"{mode} printed no result:\n{proc.stderr[-3000:]}")
            row[mode] = json.loads(line)
            row[mode]["load_1m_after"] = round(os.getloadavg()[0], 2)
            shown = {k: v for k, v in row[mode].items() if k != "answers"}
            print(f"round {r + 1} {mode}: {shown}", flush=True)
        a, b = row["on_demand"].pop("answers"), row["background"].pop("answers")
        row["answers_equal"] = sum(1 for x, y in zip(a, b, strict=True) if x == y)
        row["answers_differ"] = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        rounds.append(row)
    machine = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1m_at_start": load_start,
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    result = {"rounds": rounds, "machine": machine}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "evidence_latency.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (RESULTS / "evidence_latency.md").write_text(_markdown(result), encoding="utf-8")
    print(_markdown(result))
    return result


def _markdown(result: dict[str, Any]) -> str:
    rounds, m = result["rounds"], result["machine"]
    first = rounds[0]["on_demand"]

    def per(mode: str, get: Any) -> str:
        return " / ".join(str(get(r[mode])) for r in rounds)

    lines = [
        f"### `EVIDENCE_WARMING`: questions a user asks ({first['docs']} SciFact abstracts, "
        f"{first['chunks']:,} chunks, {first['questions']} claims; per round)",
        "",
        "| | READY | everything done | first touch p50 | evidence texts embedded per question "
        "| repeated p50 | evidence vectors stored |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in MODES:

        def ms(name: str, key: str, mode: str = mode) -> str:
            return per(mode, lambda x: x["passes"][name][key])

        lines.append(
            f"| `{mode}` | {per(mode, lambda x: x['seconds_to_ready'])} s "
            f"| {per(mode, lambda x: x['seconds_to_everything_done'])} s "
            f"| {ms('first', 'p50_ms')} ms (p95 {ms('first', 'p95_ms')}) "
            f"| {ms('first', 'evidence_texts_per_question')} "
            f"| {ms('repeated', 'p50_ms')} ms (p95 {ms('repeated', 'p95_ms')}) "
            f"| {per(mode, lambda x: x['evidence_vectors_stored'])} |"
        )
    same = " / ".join(f"{r['answers_equal']}/{r['on_demand']['questions']}" for r in rounds)
    lines += [
        "",
        f"Answers equal between the modes (source ids taken out): {same}. Each mode in a fresh process, "
        f"alternated; {m['cpus']} CPUs, Python {m['python']}, 1-min load average "
        f"{m['load_average_1m_at_start']} at start, {m['load_average_1m_at_end']} at end, {m['when']}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
