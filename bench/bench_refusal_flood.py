"""A client holding the token during a dripping-body flood from clients without it (issue 43, finding 2).

The attack: 300 sockets on the same address (every local account is 127.0.0.1) each send a POST with
a 10 MB Content-Length and no token, then one byte of body a second. Before, each refused request's
body was drained for up to 30 s before its 401 and counted as busy, so the per-address cap (256)
filled and the token holder got 503 15 of 15 times. Measured here: ``ragchat serve``'s server
(in-process, default limits, in-memory stores), the flood from a process of its own (one thread,
non-blocking sockets, reconnecting at once when the server closes one), and the token holder
asking ``GET /documents?limit=1`` ``ASKS`` times on fresh connections while it runs: its success
rate and latency p50/p99.

``python bench/bench_refusal_flood.py [--label before|after]`` writes
``bench/results/refusal_flood.json`` (one entry per label, kept across runs) and ``.md``.
Run it with ``PYTHONPATH`` pointing at an older checkout's ``layers/ragchat`` for the "before" row.
``RAGCHAT_BENCH_SMOKE=1``: a smaller flood.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import platform
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.* helpers

from benchdata import results_dir, smoke
from ragchat.local_server import LocalServer

from tests.unit.api_support import make_api

RESULTS = results_dir()
TOKEN = "bench-flood-token"
HEAD = (
    b"POST /notes HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    b"Content-Length: 10000000\r\n\r\n{"
)


class Flood:
    """``n`` sockets dripping a body byte each ``tick`` seconds, from one thread."""

    def __init__(self, port: int, n: int, tick: float = 1.0) -> None:
        self.port, self.n, self.tick = port, n, tick
        self.stop = threading.Event()
        self.refusals: dict[int, int] = {}
        self.connects = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self, sel: selectors.BaseSelector) -> None:
        s = socket.socket()
        try:
            s.connect(("127.0.0.1", self.port))
            s.sendall(HEAD)
        except OSError:
            s.close()
            return
        s.setblocking(False)
        self.connects += 1
        sel.register(s, selectors.EVENT_READ, b"")

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        for _ in range(self.n):
            self._open(sel)
        next_drip = time.monotonic() + self.tick
        while not self.stop.is_set():
            for key, _ in sel.select(timeout=0.05):
                s: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    chunk = s.recv(65536)
                except OSError:
                    chunk = b""
                if chunk:
                    sel.modify(s, selectors.EVENT_READ, key.data + chunk)
                    continue
                answer = key.data
                if answer.startswith(b"HTTP/1.1 "):
                    status = int(answer.split()[1])
                    self.refusals[status] = self.refusals.get(status, 0) + 1
                sel.unregister(s)
                s.close()
                self._open(sel)  # the attacker comes back at once
            if time.monotonic() >= next_drip:
                next_drip += self.tick
                for key in list(sel.get_map().values()):
                    with contextlib.suppress(OSError):
                        key.fileobj.send(b" ")  # type: ignore[union-attr]
        for key in list(sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]


def _ask(port: int) -> tuple[int, float]:
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/documents?limit=1", headers={"Authorization": f"Bearer {TOKEN}"})
        response = conn.getresponse()
        response.read()
        status = response.status
    except OSError:
        status = 0
    finally:
        conn.close()
    return status, (time.perf_counter() - started) * 1000


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def run_flood(port: int, n: int) -> None:
    """The flood on its own (a process of its own: ``--flood``), until stdin closes; then its counts."""
    flood = Flood(port, n)
    flood.thread.start()
    while flood.connects < n and flood.thread.is_alive():
        time.sleep(0.05)
    print("ready", flush=True)
    sys.stdin.read()
    flood.stop.set()
    flood.thread.join(30)
    print(json.dumps({"connects": flood.connects, "answers": flood.refusals}))


def measure(flood_size: int, asks: int, warmup: float) -> dict[str, Any]:
    api = make_api({"RAGCHAT_API_TOKEN": TOKEN})
    server = LocalServer(api.container, port=0)  # the SERVE_* defaults: 256 connections per address
    server.start()
    port = int(server.httpd.server_address[1])
    quiet = [_ask(port)[1] for _ in range(asks)]  # the same requests without the flood
    command = [sys.executable, __file__, "--flood", str(port), str(flood_size)]
    flood = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert flood.stdout is not None
        assert flood.stdout.readline().strip() == "ready"  # every socket connected, its headers sent
        time.sleep(warmup)  # the flood settles in: a few bytes of body dripped
        answers = [_ask(port) for _ in range(asks)]
    finally:
        out, _ = flood.communicate("", timeout=60)
        server.stop()
    counts = json.loads(out.strip().splitlines()[-1])
    ok = [ms for status, ms in answers if status == 200]
    return {
        "flood_sockets": flood_size,
        "asks": asks,
        "ok": len(ok),
        "statuses": {str(s): [st for st, _ in answers].count(s) for s in sorted({st for st, _ in answers})},
        "p50_ms": round(statistics.median([ms for _, ms in answers]), 1),
        "p99_ms": round(_pct([ms for _, ms in answers], 99), 1),
        "quiet_p50_ms": round(statistics.median(quiet), 1),
        "quiet_p99_ms": round(_pct(quiet, 99), 1),
        "flood_connects": counts["connects"],
        "flood_answers": counts["answers"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="after")
    parser.add_argument("--flood", nargs=2, type=int, metavar=("PORT", "SOCKETS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.flood:
        run_flood(*args.flood)
        return
    flood_size, asks, warmup = (60, 10, 1.0) if smoke() else (300, 30, 3.0)
    result = measure(flood_size, asks, warmup)
    out = RESULTS / "refusal_flood.json"
    previous = json.loads(out.read_text()) if out.exists() else {}
    runs = previous.get("runs", {})
    runs[args.label] = {**result, "date": datetime.now(UTC).strftime("%Y-%m-%d")}
    doc = {"machine": f"{platform.system()} {platform.machine()}, {platform.python_version()}", "runs": runs}
    out.write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        "### Token holder during a dripping-body flood (`ragchat serve`, issue 43)",
        "",
        f"{flood_size} sockets without the token, each a POST declaring 10 MB and then one byte a second;",
        "the token holder asks `GET /documents?limit=1` on a fresh connection, one request after another.",
        "",
        "| Run | Token holder answered 200 | p50 ms | p99 ms | Other answers | Flood connections | "
        "Without the flood: p50 / p99 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, r in runs.items():
        others = {k: v for k, v in r["statuses"].items() if k != "200"} or "-"
        lines.append(
            f"| {label} ({r['date']}) | {r['ok']}/{r['asks']} | {r['p50_ms']} | {r['p99_ms']} | "
            f"{others} | {r['flood_connects']} | {r.get('quiet_p50_ms', '-')} / "
            f"{r.get('quiet_p99_ms', '-')} |"
        )
    (RESULTS / "refusal_flood.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
