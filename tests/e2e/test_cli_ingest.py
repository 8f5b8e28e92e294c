"""``ragchat ingest`` in-process (local backends) on a folder, then ``ragchat ask`` on the result;
``ragchat ingest --api`` against a real ``ragchat serve``; log lines only with ``--verbose``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import TOKEN, model_ready, models_path, run_server

pytestmark = pytest.mark.e2e

# A log record as the CLI would print it: "12:00:00 INFO ragchat… ingest.ready" or "INFO:ragchat…".
LOG_LINE = re.compile(r"\b(DEBUG|INFO|WARNING|ERROR)\b[: ].*ragchat|\b(ingest|chat)\.[a-z_]+\b")


def log_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if LOG_LINE.search(line)]


def needs_model() -> None:
    if not model_ready(models_path()):
        pytest.skip(f"the MiniLM model is not prepared in {models_path()} (run `make model`)")


def run(args: list[str], data_dir: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "RAGCHAT_DATA_DIR": str(data_dir),
        "RAGCHAT_MODEL_DIR": str(models_path()),
        "RAGCHAT_CHAT_MODEL": "extractive",
        "COLUMNS": "200",
    }
    env.pop("ANTHROPIC_API_KEY", None)
    cli = Path(sys.executable).with_name("ragchat")
    return subprocess.run([str(cli), *args], env=env, capture_output=True, text=True, timeout=300, cwd=cwd)


def test_ingest_folder_reports_ready_and_failed(tmp_path: Path):
    needs_model()
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

    # A relative folder, as a user types it: the table's File column then fits on one line whatever
    # the temporary directory's length (a long absolute path folds onto a second line of the row).
    out = run(["ingest", "docs"], data_dir, cwd=tmp_path)
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
    assert "skipped (unsupported: ignored.bin)" in out.stdout  # named, never dropped silently
    assert "3 ready, 1 failed" in out.stdout
    assert log_lines(out.stdout + out.stderr) == []  # no --verbose: the table, no log lines

    # Re-ingesting the same files replaces them (stable ids), it does not duplicate.
    again = run(["ingest", str(docs / "volcanoes.md")], data_dir)
    assert again.returncode == 0, again.stdout + again.stderr

    ans = run(["ask", "How do honey bees tell each other where flowers are?", "--json"], data_dir)
    assert ans.returncode == 0, ans.stderr
    body = json.loads(ans.stdout)
    assert body["guardUsed"] is False
    assert "waggle dance" in body["answer"]
    assert len(body["sources"]) >= 1
    assert log_lines(ans.stdout + ans.stderr) == []


def test_verbose_ingest_and_ask_print_their_log_lines(tmp_path: Path):
    needs_model()
    note = tmp_path / "bees.txt"
    note.write_text("Honey bees communicate the location of flowers with a waggle dance.")
    data_dir = tmp_path / "data"

    out = run(["ingest", "--verbose", str(note)], data_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 ready, 0 failed" in out.stdout
    assert any("ingest.ready" in line for line in log_lines(out.stderr)), out.stderr

    ans = run(["ask", "--verbose", "How do honey bees tell each other where flowers are?"], data_dir)
    assert ans.returncode == 0, ans.stderr
    assert "waggle dance" in ans.stdout
    assert any("chat.retrieval" in line for line in log_lines(ans.stderr)), ans.stderr
    assert log_lines(ans.stdout) == []  # the answer itself stays clean


def test_ingest_through_the_api_twice_replaces_the_document(tmp_path: Path):
    note = tmp_path / "glaciers.md"
    note.write_text("# Glaciers\n\nGlaciers carve U-shaped valleys.\n")
    (tmp_path / "server").mkdir()
    with run_server(tmp_path / "server") as srv:
        api = ["--api", srv.url, "--token", TOKEN]
        first = run(["ingest", *api, str(note)], tmp_path / "unused")
        assert first.returncode == 0, first.stdout + first.stderr
        assert "1 ready, 0 failed" in first.stdout

        note.write_text("# Glaciers\n\nGlaciers grind rock into fine flour as they move downhill.\n")
        second = run(["ingest", *api, str(note)], tmp_path / "unused")
        assert second.returncode == 0, second.stdout + second.stderr
        assert "1 ready (1 new version), 0 failed" in second.stdout  # told it replaced the first
        assert log_lines(first.stdout + first.stderr + second.stdout + second.stderr) == []

        docs = srv.request("GET", "/documents").json()["items"]
        assert len(docs) == 1, docs
        doc = srv.request("GET", f"/documents/{docs[0]['id']}?include=body").json()
        assert doc["status"] == "READY" and doc["source"] == f"file:{note.resolve()}"
        assert "fine flour" in doc["body"] and "U-shaped" not in doc["body"]

        ans = run(["ask", *api, "--json", "What do glaciers grind rock into?"], tmp_path / "unused")
        assert ans.returncode == 0, ans.stderr
        assert "fine flour" in json.loads(ans.stdout)["answer"]
