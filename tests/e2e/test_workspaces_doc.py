"""The ten-line flow of docs/workspaces.md runs as written against a real ``ragchat serve`` (MiniLM,
SQLite, extractive answerer): three users, a shared workspace, an editor's file, a viewer's answer
from it, the viewer's removal. The block is run with ``bash -e``; the only changes are the port,
a wait for the server to listen, and a wait for the document to be READY (a reader typing has
both)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import free_port, model_ready, models_path

pytestmark = pytest.mark.e2e

DOC = Path(__file__).resolve().parents[2] / "docs" / "workspaces.md"


def test_the_ten_line_flow_runs_as_written(tmp_path: Path) -> None:
    if not model_ready(models_path()):
        pytest.skip(f"the MiniLM model is not prepared in {models_path()}")
    block = re.search(r"```sh\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block is not None
    lines = block.group(1).strip().splitlines()
    assert len(lines) <= 10
    port = free_port()
    script = []
    for line in lines:
        line = line.replace("localhost:8000", f"localhost:{port}")
        if line.startswith("ragchat serve"):
            line = f"ragchat serve --port {port} > serve.log 2>&1 &\nSERVER=$!; trap 'kill $SERVER' EXIT\n"
            line += f"until curl -sf localhost:{port}/health >/dev/null; do sleep 0.2; done"
        script.append(line)
        if "--data-binary" in line:  # the document: wait until it is READY
            script.append(
                f'until curl -s -H "Authorization: Bearer $BEN" localhost:{port}/documents?workspace=$WS'
                " | grep -q READY; do sleep 0.2; done"
            )
    after = f'api $CY -o /dev/null -w "%{{http_code}}" "localhost:{port}/documents?workspace=$WS"'
    script.append(f'echo; echo "after: $({after})"')
    (tmp_path / "hours.md").write_text("# Hours\n\nThe office opens at 8:30 on weekdays.\n")
    bindir = str(Path(sys.executable).parent)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAGCHAT_") and k != "ANTHROPIC_API_KEY"},
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        "RAGCHAT_DATA_DIR": str(tmp_path / ".ragchat"),
        "RAGCHAT_MODEL_DIR": str(models_path()),
        "RAGCHAT_CHAT_MODEL": "extractive",
    }
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", "\n".join(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, (out, done.stderr, (tmp_path / "serve.log").read_text()[-2000:])
    assert '"role":"editor"' in out and '"role":"viewer"' in out
    assert '"workspace":{"id":"ws_' in out and '"name":"Handbook"' in out and "8:30" in out
    assert out.strip().endswith("after: 404")
