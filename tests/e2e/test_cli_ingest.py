"""``ragchat ingest`` in-process (local backends) on a folder, then ``ragchat ask`` on the result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import model_ready, models_path

pytestmark = pytest.mark.e2e


def run(args: list[str], data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "RAGCHAT_DATA_DIR": str(data_dir),
        "RAGCHAT_MODEL_DIR": str(models_path()),
        "RAGCHAT_CHAT_MODEL": "extractive",
        "COLUMNS": "200",
    }
    env.pop("ANTHROPIC_API_KEY", None)
    cli = Path(sys.executable).with_name("ragchat")
    return subprocess.run([str(cli), *args], env=env, capture_output=True, text=True, timeout=300)


def test_ingest_folder_reports_ready_and_failed(tmp_path: Path):
    if not model_ready(models_path()):
        pytest.skip(f"the MiniLM model is not prepared in {models_path()} (run `make model`)")
    docs = tmp_path / "docs"
    (docs / "nested").mkdir(parents=True)
    (docs / "volcanoes.md").write_text(
        "# Volcanoes\n\nA volcano erupts when magma rises through the crust and gas pressure builds up.\n"
    )
    (docs / "nested" / "bees.txt").write_text(
        "Honey bees communicate the location of flowers with a waggle dance."
    )
    (docs / "nested" / "page.html").write_text(
        "<html><body><h1>Glaciers</h1><p>Glaciers carve U-shaped valleys.</p>"
        "<script>x()</script></body></html>"
    )
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 definitely not a pdf")
    (docs / "ignored.bin").write_bytes(b"\x00\x01")
    data_dir = tmp_path / "data"

    out = run(["ingest", str(docs)], data_dir)
    assert out.returncode == 1, out.stdout + out.stderr  # one file failed
    lines = out.stdout.splitlines()
    status = {
        name: ("READY" in line, "FAILED" in line)
        for line in lines
        for name in ("volcanoes.md", "bees.txt", "page.html", "broken.pdf")
        if name in line
    }
    assert status["volcanoes.md"] == (True, False)
    assert status["bees.txt"] == (True, False)
    assert status["page.html"] == (True, False)
    assert status["broken.pdf"] == (False, True)
    assert "ignored.bin" not in out.stdout
    assert "3 ready, 1 failed" in out.stdout

    # Re-ingesting the same files replaces them (stable ids), it does not duplicate.
    again = run(["ingest", str(docs / "volcanoes.md")], data_dir)
    assert again.returncode == 0, again.stdout + again.stderr

    ans = run(["ask", "How do honey bees tell each other where flowers are?", "--json"], data_dir)
    assert ans.returncode == 0, ans.stderr
    body = json.loads(ans.stdout)
    assert body["guardUsed"] is False
    assert "waggle dance" in body["answer"]
    assert len(body["sources"]) >= 1
