"""Conversations that keep the thread (``bench/conversations/``): follow-ups, two-part questions,
unknown names and off-topic follow-ups, through the chat turn (``POST …/messages``' service path).

16 short documents in varied domains (rentals, a library, a recipe, a router guide, HR and travel
policies, a tenancy, a cycling club, a clinic, solar panels, a museum, a CI handbook, houseplants, an
electric car, a coworking space, an incident review) are ingested through the real pipeline (a
throwaway local data directory, MiniLM, the extractive answerer, default settings). Each
conversation is one chat conversation; every turn is sent in order.

A turn counts when:
- ``first`` / ``ellipsis`` / ``pronoun`` / ``shift``: it is answered (not refused), the expected
  document is among the cited sources, and the answer contains one of the expected facts;
- ``two_part``: both parts count that way (each part's document cited, each part's fact present);
- ``unknown`` (a name no document mentions) and ``offtopic``: it is refused.

``dev.json`` is the split the method was tuned on; ``test.json`` was written first, before the
method existed, and run once the method was final (blind), then looked at (its misses are known);
``heldout.json`` was written after that, before the off-topic fix was run on it (it has been
looked at and tuned on since); ``heldout2.json`` was written before the work on the held-out misses
began and was run once that work was final (blind), then looked at; ``heldout3.json`` and
``heldout4.json`` were written by someone who had not read the method and each run once (blind);
``heldout5.json`` too, over 8 documents of its own (``docs-heldout5/``, added to the shared 16 for
that split: a split's ``docs`` key names its own folder), and ``heldout6.json`` over 6 more whose
answers are mostly in tables (``docs-heldout6/``).

Usage: ``python bench/bench_conversations.py [--split NAME|both|seen|all] [--show-failures]``
(a split's name; ``both``: dev and test; ``seen``: the seven whose misses have been looked at, all
but heldout6; ``all``: the eight).
Writes bench/results/conversations.{json,md} (the splits run). ``--reader on`` (or ``READER=on``):
the extractive reader decides and carries follow-ups (docs/reader.md); writes only
bench/results/conversations-reader.json (or ``--out``'s name).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchdata import models_path, results_dir, smoke, smoke_sample

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "conversations"
RESULTS = results_dir()
OWNER = "bench"
SPLITS = ("dev", "test", "heldout", "heldout2", "heldout3", "heldout4", "heldout5", "heldout6", "heldout7")
FOLLOW_UPS = ("ellipsis", "pronoun", "shift", "two_part", "unknown", "offtopic")
GOALS = {"first": 0.90, "follow_ups": 0.90, "two_part": 0.75, "unknown": 0.90, "offtopic": 1.0}


def split_docs(split: str) -> str | None:
    """The folder of a split's own documents (added to the shared ones), if it has one."""
    docs: str | None = json.loads((DATA / f"{split}.json").read_text()).get("docs")
    return docs


def conversations(split: str) -> list[dict[str, Any]]:
    """A split's conversations (a smoke run: its first two)."""
    convs: list[dict[str, Any]] = json.loads((DATA / f"{split}.json").read_text())["conversations"]
    return smoke_sample(convs, 2)


def cited(convs: list[dict[str, Any]]) -> set[str]:
    """The documents the turns of ``convs`` expect."""
    turns = [t for c in convs for t in c["turns"]]
    return {p["doc"] for t in turns for p in (t.get("parts") or [t]) if p.get("doc")}


def build(tmp: str, extra: str | None = None, wanted: set[str] | None = None) -> tuple[Any, dict[str, str]]:
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    models = str(models_path())
    passed = ("RAGCHAT_", "CHUNK_", "EVIDENCE_", "PRECOMPUTE_", "EMBEDDER_", "READER")
    env = {k: v for k, v in os.environ.items() if k.startswith(passed)}
    env |= {"RAGCHAT_DATA_DIR": tmp, "RAGCHAT_MODEL_DIR": models, "RAGCHAT_CHAT_MODEL": "extractive"}
    container = Container(load_settings(env))
    names: dict[str, str] = {}
    paths = sorted((DATA / "docs").glob("*.md"))
    if extra:
        paths += sorted((DATA / extra).glob("*.md"))
    if wanted is not None:  # a smoke run: only the documents its conversations expect
        paths = [p for p in paths if p.stem in wanted]
    for path in paths:
        doc = container.ingestion.submit_file(OWNER, data=path.read_bytes(), filename=path.name)
        names[doc.id] = path.stem
    container.launcher.wait_idle(600)
    wait_warm = getattr(container.launcher, "wait_warm", None)
    if wait_warm is not None:
        wait_warm(600)
    return container, names


def _has(content: str, expect: list[str]) -> bool:
    low = content.lower()
    return any(e.lower() in low for e in expect)


def judge(turn: dict[str, Any], reply: dict[str, Any]) -> bool:
    kind = turn["kind"]
    if kind in ("unknown", "offtopic"):
        return bool(reply["guard"])
    if reply["guard"]:
        return False
    cited = set(reply["docs"])
    parts = turn.get("parts") or [turn]
    return all(p["doc"] in cited and _has(reply["content"], p["expect"]) for p in parts)


def run_split(container: Any, names: dict[str, str], split: str) -> dict[str, Any]:
    convs = conversations(split)
    rows = []
    ms: list[float] = []
    for conv in convs:
        cid = container.chat.conversations.create(OWNER).id
        for turn in conv["turns"]:
            t0 = time.perf_counter()
            result = container.chat.turns.send(OWNER, cid, turn["q"])
            ms.append((time.perf_counter() - t0) * 1000)
            msg = result.message
            reply = {
                "guard": result.guard_used,
                "content": msg.content,
                "docs": [names.get(s.document_id or "", "?") for s in msg.sources or []],
                "query": msg.query,
            }
            rows.append({"conversation": conv["id"], **turn, "reply": reply, "ok": judge(turn, reply)})
    by_kind: dict[str, list[bool]] = defaultdict(list)
    for r in rows:
        by_kind[r["kind"]].append(r["ok"])
    follow = [r["ok"] for r in rows if r["kind"] in ("ellipsis", "pronoun", "shift")]
    summary = {k: [sum(v), len(v)] for k, v in sorted(by_kind.items())}
    summary["follow_ups"] = [sum(follow), len(follow)]
    return {"split": split, "summary": summary, "turn_ms_median": statistics.median(ms), "rows": rows}


def markdown(results: list[dict[str, Any]], load: str) -> str:
    lines = [
        "# Conversations that keep the thread",
        "",
        "`python bench/bench_conversations.py` — 16 documents (+8 for held-out 5, +6 for held-out 6), "
        "dev, test and six held-out sets of conversations (`bench/conversations/`), MiniLM, "
        "extractive answerer, default settings, through the chat turn. `follow-ups` = ellipsis + "
        "pronoun + topic-shift turns answered right; `two_part` = both parts answered and cited; "
        "`unknown` / `offtopic` = refused.",
        "",
        f"Machine: {platform.machine()}, load {load}.",
        "",
        "| split | first | follow-ups | two-part (both parts) | unknown names refused | off-topic refused |",
        "|---|---|---|---|---|---|",
    ]
    for res in results:
        s = res["summary"]

        def cell(k: str, s: dict[str, list[int]] = s) -> str:
            ok, n = s.get(k, [0, 0])
            return f"{ok}/{n} ({ok / n:.0%})" if n else "–"

        lines.append(
            f"| {res['split']} | {cell('first')} | {cell('follow_ups')} | {cell('two_part')} | "
            f"{cell('unknown')} | {cell('offtopic')} |"
        )
    goals = ", ".join(f"{k} ≥ {v:.2f}" for k, v in GOALS.items())
    lines += ["", f"Goals (test and the held-out sets): {goals}", ""]
    for res in results:
        misses = [r for r in res["rows"] if not r["ok"]]
        lines.append(f"## {res['split']}: turns missed ({len(misses)})")
        lines.append("")
        for r in misses:
            what = "refused" if r["reply"]["guard"] else f"cited {r['reply']['docs']}"
            query = r["reply"]["query"]
            lines.append(f"- {r['conversation']} {r['kind']}: “{r['q']}” — {what}; query “{query}”")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--split",
        choices=(*SPLITS, "both", "seen", "all"),
        default="dev",
    )
    ap.add_argument("--show-failures", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--out", help="write only bench/results/<OUT>.json (a variant, e.g. READER=on)")
    ap.add_argument("--reader", choices=("on", "off"), help="the extractive reader (default: READER)")
    args = ap.parse_args([] if argv is None else argv)  # run_all.py calls main() with no args
    if args.reader:
        os.environ["READER"] = args.reader
    if os.environ.get("READER") == "on" and not args.out:  # the reader's figures go aside
        args.out = "conversations-reader"
    groups = {
        "both": ["dev", "test"],
        "seen": list(SPLITS[:8]),  # every split whose misses have been looked at
        "all": list(SPLITS),
    }
    splits = groups.get(args.split, [args.split])
    results = []
    # one knowledge base per set of documents: the shared 16, plus a split's own when it has some
    for extra in dict.fromkeys(split_docs(s) for s in splits):
        in_run = [s for s in splits if split_docs(s) == extra]
        wanted = cited([c for s in in_run for c in conversations(s)]) if smoke() else None
        with tempfile.TemporaryDirectory() as tmp:
            container, names = build(tmp, extra, wanted)
            try:
                results += [run_split(container, names, s) for s in in_run]
            finally:
                close = getattr(container, "close", None)
                if callable(close):
                    close()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"READER={os.environ.get('READER', 'off')}")
    for res in results:
        print(res["split"], json.dumps(res["summary"]), f"median turn {res['turn_ms_median']:.1f} ms")
        if args.show_failures:
            for r in res["rows"]:
                if not r["ok"]:
                    rep = r["reply"]
                    head = f"  MISS {r['conversation']} {r['kind']}: {r['q']!r}"
                    print(f"{head} guard={rep['guard']} docs={rep['docs']}")
                    print(f"       query={rep['query']!r}")
                    print(f"       {rep['content'][:300]!r}")
    if args.out:
        out = {"load": load, "reader": os.environ.get("READER", "off"), "results": results}
        (RESULTS / f"{args.out}.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    elif not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        out = {"load": load, "python": sys.version.split()[0], "results": results}
        (RESULTS / "conversations.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
        (RESULTS / "conversations.md").write_text(markdown(results, load) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
