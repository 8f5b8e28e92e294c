"""``make bench``: the first answer at READY, at full quality (issue 31 item 4).

Runs ``bench/first_answer.py`` in fresh processes: three times on the sample document, once on a
generated ``FIRST_ANSWER_PDF_PAGES``-page PDF (default 1,000; 0 skips it), and writes the first
question's time at READY (and READY's) to ``bench/results/first_answer.{json,md}``. Goal: ≤ 500 ms p50.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from benchdata import results_dir, smoke

BENCH = Path(__file__).resolve().parent
RESULTS = results_dir()
_READY = re.compile(r"READY after ([\d.]+) s")
_ASKED = re.compile(r"^(\d+) ms ", re.MULTILINE)


def _run(*args: str) -> tuple[float, float]:
    """(READY after, s; the first question at READY, ms) of one fresh process."""
    out = subprocess.run(
        [sys.executable, str(BENCH / "first_answer.py"), *args],
        capture_output=True, text=True, check=True, timeout=1800,
    ).stdout  # fmt: skip
    ready, asked = _READY.search(out), _ASKED.search(out)
    assert ready and asked, out
    return float(ready.group(1)), float(asked.group(1))


def main() -> None:
    # a smoke run: one run on the sample document and a 2-page PDF (the figures mean nothing)
    pages = int(os.environ.get("FIRST_ANSWER_PDF_PAGES", "2" if smoke() else "1000"))
    rows = {"sample document": [_run() for _ in range(1 if smoke() else 3)]}
    if pages:
        rows[f"{pages:,}-page PDF"] = [_run("--pdf-pages", str(pages))]
    load = os.getloadavg()[0]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "first_answer.json").write_text(json.dumps({"runs": rows, "load": load}, indent=1))
    lines = [
        "### First answer at READY, full quality (`bench/bench_first_answer.py`)",
        "",
        f"Default settings, extractive answerer, each run a fresh process; 1-min load {load:.1f}.",
        "",
        "| document | READY after | first question at READY (each run) | p50 | ≤ 500 ms |",
        "|---|---:|---:|---:|---|",
    ]
    for name, runs in rows.items():
        p50 = statistics.median(ms for _, ms in runs)
        ready = " / ".join(f"{s:.2f} s" for s, _ in runs)
        each = " / ".join(f"{ms:.0f} ms" for _, ms in runs)
        lines.append(f"| {name} | {ready} | {each} | {p50:.0f} ms | {'met' if p50 <= 500 else 'missed'} |")
    (RESULTS / "first_answer.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
