"""``ragchat ingest`` as a user runs it in an 80-column terminal (issue 33, item 10): ids and file
names are never split, a missing path is a clear error with its own exit code (no progress bar, no
table), and a folder's unsupported files are reported as skipped by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ragchat.cli import app
from typer.testing import CliRunner

NAME = "chapter-07-opening-hours-and-holidays.md"


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RAGCHAT_DATA_DIR", str(tmp_path / "data"))

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(
            app, ["ingest", *args], env={"COLUMNS": "80", "RAGCHAT_DATA_DIR": str(tmp_path / "data")}
        )

    return invoke


def test_a_missing_file_is_a_clear_error_with_exit_code_2(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = run(str(tmp_path / "nope.md"))
    assert result.exit_code == 2
    assert f"no such file or folder: {tmp_path / 'nope.md'}" in result.output
    assert "0/0" not in result.output and "Ingestion summary" not in result.output


def test_a_folder_reports_its_unsupported_files_as_skipped(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "handbooks" / "northern-regional-office"
    folder.mkdir(parents=True)
    (folder / NAME).write_text("# Opening hours\n\nThe office opens at 8:30 on weekdays.\n")
    (folder / "a.pages").write_bytes(b"PK\x03\x04")
    result = run(str(tmp_path / "handbooks"))
    assert result.exit_code == 0, result.output
    assert "1 ready, 0 failed, 1 skipped (unsupported: a.pages)" in result.output
    line = next(line for line in result.output.splitlines() if line.startswith("READY"))
    assert NAME in line, result.output  # the file name whole, on its line
    assert re.search(r"(^|\s)D[0-9A-Z]{25}(\s|$)", result.output, re.M), (
        result.output
    )  # the id whole on a line
    assert all(len(line) <= 80 for line in result.output.splitlines())


def test_help_states_the_size_limit_before_anything_is_sent() -> None:
    result = CliRunner().invoke(app, ["ingest", "--help"], env={"COLUMNS": "200"})
    assert "Files up to 21.8 MB each" in result.output


def test_refusal_and_unknown_collection_have_their_own_exit_codes(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    note = tmp_path / "hours.md"
    note.write_text("# Opening hours\n\nThe office opens at 8:30 on weekdays.\n")
    assert run(str(note), "--collection", "finance").exit_code == 0
    env = {"COLUMNS": "80", "RAGCHAT_DATA_DIR": str(tmp_path / "data")}

    def ask(*args: str):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(app, ["ask", *args], env=env)

    answered = ask("When does the office open?", "--collection", "finance")
    assert answered.exit_code == 0 and "8:30" in answered.output
    refused = ask("What is the capital of Mongolia?")
    assert refused.exit_code == 3, refused.output
    unknown = ask("When does the office open?", "--collection", "finanse")
    assert unknown.exit_code == 4
    assert 'no collection named "finanse" (your collections: finance)' in unknown.output


def test_the_same_content_under_another_name_is_already_there(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Issue 45 item 3: one document per content, whichever file brings it."""
    first, copy = tmp_path / "hours.md", tmp_path / "copy-of-hours.md"
    for path in (first, copy):
        path.write_text("# Opening hours\n\nThe office opens at 8:30 on weekdays.\n")
    assert run(str(first)).exit_code == 0
    result = run(str(copy))
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert re.search(r"Already there: “hours\.md” \(D[0-9A-Z]{25}\) has exactly this content", flat), flat
    assert "1 ready (1 already there), 0 failed" in flat


def test_ingest_tells_each_documents_progress_while_it_is_indexed(tmp_path: Path) -> None:
    """Issue 45 item 5: chunks done / total and the time left, as the document moves on."""
    from ragchat.cli.client import Accepted, DocumentState
    from ragchat.cli.ingest import ingest_one

    states = iter(
        [
            DocumentState("D1", "PENDING", 0, "", "big.md", "waiting to be read"),
            DocumentState("D1", "PROCESSING", 0, "", "big.md", "64 / 200 chunks (32%), about 7 s left"),
            DocumentState("D1", "READY", 200, "", "big.md"),
        ]
    )

    class Backend:
        def submit(self, path: Path, collection: str | None) -> Accepted:
            return Accepted("D1", "PENDING")

        def status(self, doc_id: str) -> DocumentState:
            return next(states)

        def close(self) -> None:
            pass

    heard: list[str] = []
    outcome = ingest_one(Backend(), tmp_path / "big.md", None, 60, heard.append)
    assert heard == ["waiting to be read", "64 / 200 chunks (32%), about 7 s left"]
    assert (outcome.status, outcome.chunks) == ("READY", 200)
