"""What reading uploads in a child process costs (issue 30: ``ragchat serve`` reads each upload in a
warm child process under hard limits, ``adapters/local/parse_process.py``).

Measured, each against reading in the server's own process (``parse_document``):

- starting a child (the first document after a start, or after a document over a limit), median of 5;
- a small note read by the warm child, median of 200 (the per-document overhead);
- texts of 1 MB and 20 MB (prose with Markdown headings), median of 3.

Writes ``bench/results/parse_process.json`` and ``.md``. ``RAGCHAT_BENCH_SMOKE=1``: fewer runs.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from typing import Any

from benchdata import results_dir, smoke
from ragchat.adapters.local.parse_process import ProcessParser
from ragchat.domain.parsing import ParseJob, parse_document

RESULTS = results_dir()
JOB = ParseJob("text/markdown", "Bench", chunk_size=1000, overlap=100, headers=True, cpu_seconds=600)
NOTE = b"# Lighthouses\n\nKeepers trimmed the wicks every evening before dusk.\n"
LINE = "Keepers trimmed the wicks every evening before dusk, and logged the ships they saw. "


def _text(size: int) -> bytes:
    part = "\n\n".join(f"## Part {i}\n\n" + LINE * 12 for i in range(64)).encode()
    return (part * (size // len(part) + 1))[:size]


def _parser() -> ProcessParser:
    return ProcessParser(cpu_seconds=600, memory_bytes=4096 * 10**6, wall_seconds=900)


def _timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    runs = 1 if smoke() else 5
    notes = 20 if smoke() else 200
    starts = []
    for _ in range(runs):
        parser = _parser()
        starts.append(_timed(lambda p=parser: p.parse(lambda: NOTE, JOB)))
        parser.close()
    parser = _parser()
    parser.parse(lambda: NOTE, JOB)
    child_note = [_timed(lambda: parser.parse(lambda: NOTE, JOB)) for _ in range(notes)]
    own_note = [_timed(lambda: parse_document(NOTE, JOB)) for _ in range(notes)]
    sizes: dict[str, dict[str, float]] = {}
    for label, size in (("1 MB", 1_000_000), ("20 MB", 20_000_000)):
        body = _text(size)
        reps = 1 if smoke() else 3
        sizes[label] = {
            "child_s": statistics.median(
                _timed(lambda b=body: parser.parse(lambda: b, JOB)) for _ in range(reps)
            ),
            "in_process_s": statistics.median(
                _timed(lambda b=body: parse_document(b, JOB)) for _ in range(reps)
            ),
        }
    parser.close()
    result = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        "child_start_s": statistics.median(starts),
        "note_child_ms": statistics.median(child_note) * 1000,
        "note_in_process_ms": statistics.median(own_note) * 1000,
        "sizes": sizes,
    }
    (RESULTS / "parse_process.json").write_text(json.dumps(result, indent=2) + "\n")
    rows = "\n".join(
        f"| {label} text | {v['child_s']:.2f} s | {v['in_process_s']:.2f} s |" for label, v in sizes.items()
    )
    (RESULTS / "parse_process.md").write_text(
        f"""# Reading uploads in a child process (bench/bench_parse_process.py)

{result["date"]}, {result["machine"]}. Medians.

| What | Child process | In the server's process |
|---|---|---|
| start a child (first document, or after one over a limit) | {result["child_start_s"]:.2f} s | — |
| a small note ({len(NOTE)} B) | {result["note_child_ms"]:.2f} ms | {result["note_in_process_ms"]:.3f} ms |
{rows}

The child's cost is the copy of the body to it and of the chunks back (pickled); in exchange a
document can neither hold the server's GIL nor take more than its CPU, memory and wall-clock limits.
"""
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
