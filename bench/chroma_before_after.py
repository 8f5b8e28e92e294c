"""``bench_chroma.py``'s side by side with two versions of ragchat in the same rounds (issue 31): each
round runs Chroma, ragchat from this tree and ragchat from another checkout (``--before``, e.g. a
``git worktree`` of the commit to compare with), each in a fresh process, the order rotated every
round; both ragchat phases are divided by the same round's Chroma time. On a shared machine whose
load changes from minute to minute this is what makes "before" and "after" comparable.

``python bench/chroma_before_after.py --before /tmp/old-checkout [--docs 500] [--rounds 3]
[--out chroma-before-after]`` writes bench/results/<out>.json (defaults: ``EVIDENCE_VECTORS=embedded``,
``EVIDENCE_WARMING=on_demand``, as ``bench_chroma.py --no-like --warming on_demand``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_chroma import RESULTS, chroma_python
from benchdata import models_path

ROOT = Path(__file__).resolve().parent.parent
PHASE = "ragchat-embedded@on_demand"


def _run(phase: str, python: str, tree: Path, docs: int) -> dict[str, Any]:
    """One phase of ``bench_chroma.py`` from ``tree`` (its own code on the path), in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(tree / "layers" / "ragchat"))
    cmd = [python, str(tree / "bench" / "bench_chroma.py"), "--phase", phase, "--docs", str(docs)]
    from ragchat.adapters.local.onnx_embedder import model_dir

    cmd += ["--precision", "fp32", "--model-dir", str(model_dir(models_path()))]
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=tree, env=env)
    for line in reversed(out.stdout.splitlines()):
        if line.startswith('{"phase"'):
            result: dict[str, Any] = json.loads(line)
            result["load_1m_after"] = round(os.getloadavg()[0], 2)
            return result
    raise RuntimeError(f"{phase} from {tree} printed no result:\n{out.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", required=True, type=Path, help="the other checkout of ragchat")
    parser.add_argument("--docs", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="chroma-before-after")
    args = parser.parse_args()
    chroma = chroma_python()
    if chroma is None:
        print("SKIPPED: no interpreter with chromadb (make bench-chroma-env)")
        return
    python = sys.executable
    phases = [("chroma", chroma, ROOT), ("after", python, ROOT), ("before", python, args.before)]
    rounds = []
    for r in range(args.rounds):
        row: dict[str, Any] = {}
        for name, python, tree in phases[r % 3 :] + phases[: r % 3]:
            row[name] = _run("chroma" if name == "chroma" else PHASE, python, tree, args.docs)
            print(f"round {r + 1} {name}: {row[name]}", flush=True)
        c = row["chroma"]["seconds"]
        row["ratios"] = {k: round(row[k]["seconds_to_ready"] / c, 2) for k in ("after", "before")}
        rounds.append(row)
    result = {
        "docs": args.docs,
        "before_tree": str(args.before),
        "median_ratio": {k: statistics.median(r["ratios"][k] for r in rounds) for k in ("after", "before")},
        "rounds": rounds,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=2))


if __name__ == "__main__":
    main()
