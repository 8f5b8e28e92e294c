"""The reading child process never outlives the server (a known gap of issue 30's isolation).

``ragchat serve`` reads uploads in a warm child process (``adapters/local/parse_process.py``). When
the server is killed outright (``kill -9``, the out-of-memory killer) nothing runs its shutdown, and
a child busy with a slow document used to keep reading, an orphan, until its CPU limit (60 s by
default) or for ever while it waits. Here a real server-like parent process reads a document that
holds its reader (``parse_bombs.gated_reader``: the gate never opens, so the child would wait 60 s),
the parent is killed with SIGKILL, and the child must be gone within a few seconds: killed while the
child is reading, and killed while the child is still starting (it then finds itself an orphan
from its first moment).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAYER = REPO / "layers" / "ragchat"
GONE_WITHIN_S = 10.0  # the child's watch looks every 0.5 s; the gated read alone lasts 60 s

PARENT = """
import sys, threading, time
from ragchat.adapters.local.parse_process import ProcessParser
from ragchat.domain.parsing import ParseJob
from tests.security.parse_bombs import gated_reader

parser = ProcessParser(cpu_seconds=60, memory_bytes=2**31, wall_seconds=120, parse=gated_reader)
job = ParseJob(
    content_type="text/plain", title="t", chunk_size=1000, overlap=100, headers=True, cpu_seconds=60
)
body = b"GATE:" + sys.argv[1].encode() + b"\\nA note that waits."
threading.Thread(target=parser.parse, args=(lambda: body, job), daemon=True).start()
while parser._process is None:
    time.sleep(0.01)
print(parser._process.pid, flush=True)
time.sleep(120)
"""


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def _alive(pid: int) -> bool:
    """Is ``pid`` a running process (a zombie waiting to be reaped counts as gone)?"""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to see the child")
@pytest.mark.parametrize("when", ["reading", "starting"])
def test_the_reading_child_ends_when_the_server_is_killed(tmp_path: Path, when: str) -> None:
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(LAYER), str(REPO)])}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path / "never-opened")],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child), "the reading child is not running"
        if when == "reading":  # its watch thread runs, and the document has been sent to it
            deadline = time.monotonic() + 30
            while _threads(child) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert _threads(child) >= 2, "the child never started reading"
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + GONE_WITHIN_S
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = _alive(child)
        if alive:
            os.kill(child, signal.SIGKILL)  # do not leave it behind for the rest of the suite
        assert not alive, "the reading child kept running after the server was killed"
    finally:
        if parent.poll() is None:
            parent.kill()
