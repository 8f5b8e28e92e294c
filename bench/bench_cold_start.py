"""Cold start of each Lambda entry point, measured in fresh interpreters (what a new Lambda execution
environment pays before its first request, minus the runtime's own start).

For each function: the module import (``functions/<area>/app.py``), then the first-request
readiness: the resolver built and the modules a request touches imported (AWS adapters, boto3
clients created; no network). Run with ``-X importtime`` too, to name the heaviest imports.
This is the figure behind SnapStart on the chat function (docs/deploy.md).
"""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path

from benchdata import results_dir, smoke

ROOT = Path(__file__).resolve().parents[1]
RESULTS = results_dir()
RUNS = 0 if smoke() else 5  # a smoke run: only the traced interpreter of each function

ENV = {
    "RAGCHAT_BACKEND": "aws",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "DOCUMENTS_TABLE": "t-docs",
    "CONVERSATIONS_TABLE": "t-convs",
    "COUNTERS_TABLE": "t-counters",
    "DOCUMENTS_BUCKET": "b-docs",
    "OPENSEARCH_ENDPOINT": "https://example.us-east-1.aoss.amazonaws.com",
    "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:bench",
    "RAGCHAT_CHAT_MODEL": "bedrock",
    "POWERTOOLS_SERVICE_NAME": "ragchat",
}

# Runs in a fresh interpreter: import the entry point, then build what the first request needs.
PROBE = r"""
import importlib.util, json, sys, time
t0 = time.perf_counter()
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
t1 = time.perf_counter()
from ragchat.api.app import create_app
from ragchat.bootstrap import Container
area = sys.argv[2]
container = Container()
create_app(container, areas=set(sys.argv[3].split(",")))
if area == "chat_api":
    container.conversations; container.counters; container.embedder; container.chat_model
    import ragchat.adapters.aws.opensearch  # noqa: F401  (connecting is lazy; the import is what costs)
elif area == "notes_api":
    container.documents; container.blobs; container.launcher
elif area == "ingest_steps":
    container.documents; container.blobs; container.embedder
    import ragchat.adapters.aws.opensearch  # noqa: F401
t2 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1000, "ready_ms": (t2 - t0) * 1000}))
"""

FUNCTIONS = {
    "chat_api": "chat",
    "notes_api": "notes",
    "web_ui": "ops,ui",
    "ingest_steps": "notes",
}


def measure(area: str, areas: str) -> dict[str, object]:
    env = {**os.environ, **ENV}
    app = str(ROOT / "functions" / area / "app.py")
    imports, ready = [], []
    for _ in range(RUNS):
        out = subprocess.run(
            [sys.executable, "-c", PROBE, app, area, areas],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        imports.append(figures["import_ms"])
        ready.append(figures["ready_ms"])
    traced = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", PROBE, app, area, areas],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    if not imports:  # a smoke run: the traced interpreter's own figures (slowed by the trace)
        figures = json.loads(traced.stdout.strip().splitlines()[-1])
        imports.append(figures["import_ms"])
        ready.append(figures["ready_ms"])
    top = heaviest_imports(traced.stderr)
    return {
        "function": area,
        "import_ms_median": round(statistics.median(imports), 1),
        "first_request_ready_ms_median": round(statistics.median(ready), 1),
        "runs": len(imports),
        "heaviest_top_level_imports_ms": top,
    }


# our own package and the stdlib plumbing that wraps every import
SKIP = {"ragchat", "app", "json", "importlib", "site", "encodings", "typing", "collections", "re"}


def heaviest_imports(trace: str, n: int = 5) -> dict[str, float]:
    """Top-level packages by cumulative import time from ``-X importtime`` output."""
    totals: dict[str, float] = {}
    for line in trace.splitlines():
        m = re.match(r"import time:\s+\d+\s+\|\s+(\d+)\s+\|(\s*)(\S+)", line)
        if not m:
            continue
        cumulative_us, name = int(m.group(1)), m.group(3)
        top = name.split(".")[0]
        if top in SKIP:
            continue
        # the outermost import of a package carries its cumulative time (max over its lines)
        totals[top] = max(totals.get(top, 0.0), cumulative_us / 1000)
    return dict(sorted(totals.items(), key=lambda kv: -kv[1])[:n])


def main() -> None:
    rows = [measure(area, areas) for area, areas in FUNCTIONS.items()]
    result = {
        "benchmark": "cold_start",
        "python": sys.version.split()[0],
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
        },
        "note": "fresh interpreter per run; no network; Lambda arm64 CPUs differ, use as relative figures",
        "results": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cold_start.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "### Cold start (Lambda entry points, fresh interpreter)",
        "",
        "| function | module import (ms, median) | ready for first request (ms, median) "
        "| heaviest imports (ms) |",
        "|---|---:|---:|---|",
    ]
    for r in rows:
        heavy = ", ".join(f"{k} {v:.0f}" for k, v in r["heaviest_top_level_imports_ms"].items())  # type: ignore[attr-defined]
        lines.append(
            f"| {r['function']} | {r['import_ms_median']} | {r['first_request_ready_ms_median']} | {heavy} |"
        )
    (RESULTS / "cold_start.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
