"""Readiness of the chat_stream function's server: time from starting ``python -m ragchat.lambda_web``
to the first 200 on ``GET /health``, which is when the Lambda Web Adapter's readiness check passes and
the sandbox can take its first request.

Included: interpreter start, imports, settings and container, the chat resolver built, the warm-up
(chat service with its adapters and clients, the embedder; for the local backend the MiniLM ONNX
model is loaded), binding the port, and the first /health round trip (polled every 5 ms, so up to
~5 ms of polling granularity). Not included: the Lambda runtime and the adapter extension starting,
downloading the layer, anything on the network (the AWS variant uses placeholder credentials; clients
are created, nothing is called).

Two variants: ``local`` (SQLite + MiniLM, what the e2e test runs) and ``aws`` (DynamoDB, OpenSearch,
Titan and Bedrock adapters, what Lambda builds). Median of 5 fresh processes each.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench_cold_start import ENV as COLD_START_ENV
from benchdata import models_path, results_dir, smoke

ROOT = Path(__file__).resolve().parents[1]
RESULTS = results_dir()
RUNS = 1 if smoke() else 5  # a smoke run: one start per backend
POLL_S = 0.005
TIMEOUT_S = 120.0

# the same placeholder AWS environment as the Lambda entry-point cold-start bench (no network used)
AWS_ENV = COLD_START_ENV


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def time_to_ready(env: dict[str, str]) -> float:
    """Milliseconds from Popen to the first 200 on /health."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/health"
    started = time.perf_counter()
    with tempfile.TemporaryFile() as stderr:  # a file, not a pipe nobody reads while it runs
        proc = subprocess.Popen(
            [sys.executable, "-m", "ragchat.lambda_web"],
            env={**env, "AWS_LWA_PORT": str(port)},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        try:
            while True:
                try:
                    with urllib.request.urlopen(url, timeout=5) as resp:
                        if resp.status == 200:
                            return (time.perf_counter() - started) * 1000
                # not listening yet, or listening but not answering within 5 s (a loaded machine): ask again
                except OSError:
                    pass
                if proc.poll() is not None:
                    stderr.seek(0)
                    raise RuntimeError(f"ragchat.lambda_web exited: {stderr.read().decode()[-2000:]}")
                if time.perf_counter() - started > TIMEOUT_S:
                    raise RuntimeError("ragchat.lambda_web did not become ready")
                time.sleep(POLL_S)
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def variants(data_dir: Path) -> dict[str, dict[str, str]]:
    models = str(models_path())
    base = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    return {
        "local": {
            **base,
            "RAGCHAT_DATA_DIR": str(data_dir),
            "RAGCHAT_MODEL_DIR": models,
            "RAGCHAT_CHAT_MODEL": "extractive",
        },
        "aws": {**base, **AWS_ENV},
    }


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, env in variants(Path(tmp)).items():
            times = [time_to_ready(env) for _ in range(RUNS)]
            rows.append(
                {
                    "backend": name,
                    "ready_ms_median": round(statistics.median(times), 1),
                    "ready_ms_min": round(min(times), 1),
                    "ready_ms_max": round(max(times), 1),
                    "runs_ms": [round(t, 1) for t in times],
                }
            )
    load = os.getloadavg()
    result = {
        "benchmark": "lwa_cold_start",
        "python": sys.version.split()[0],
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "loadavg_1m_at_end": round(load[0], 2),
        },
        "note": (
            "process start of `python -m ragchat.lambda_web` to the first 200 on /health (the Lambda Web "
            "Adapter readiness check): interpreter, imports, container, resolver, warm-up (chat service, "
            "embedder), bind. Excludes the Lambda runtime, the adapter extension and the network. "
            "Lambda arm64 CPUs differ: use as relative figures."
        ),
        "results": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "lwa_cold_start.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "### chat_stream readiness (python -m ragchat.lambda_web start to first 200 on /health)",
        "",
        "| backend | median (ms) | min (ms) | max (ms) | runs |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        figures = (r["ready_ms_median"], r["ready_ms_min"], r["ready_ms_max"], RUNS)
        lines.append(f"| {r['backend']} | " + " | ".join(str(f) for f in figures) + " |")
    (RESULTS / "lwa_cold_start.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
