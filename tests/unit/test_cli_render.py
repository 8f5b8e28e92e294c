"""What the terminal shows: ``ragchat ask`` prints each source once, numbered, with its full title;
``ragchat chat`` knows its own commands; ``ragchat ingest`` never cuts a title, path or id."""

from __future__ import annotations

import importlib
from io import StringIO

import pytest
import typer
from ragchat.cli import app
from ragchat.cli.ask import print_answer
from ragchat.cli.client import Answer, Reply, Source
from ragchat.cli.ingest import IngestOutcome, _print_summary
from ragchat.cli.render import numbered, source_lines
from rich.console import Console
from typer.testing import CliRunner

chat_cli = importlib.import_module("ragchat.cli.chat")

LONG_TITLE = "The staff handbook of the northern regional office, chapter seven: opening hours and holidays"
STORED = (
    "The office opens at 8:30. [source: D1-00000] On Saturdays it opens at 10:00. [source: D2-00003] "
    "[source: D1-00000]\n\nSources: D1-00000, D2-00003"
)
SOURCES = [
    Source("D1-00000", "The office opens at 8:30 on weekdays.", LONG_TITLE),
    Source("D2-00003", "Saturday: 10:00 to 13:00.", "Weekend hours", 2),
]


def test_tags_become_numbers_and_the_sources_line_goes() -> None:
    body, items = numbered(STORED, SOURCES)
    assert body == "The office opens at 8:30. [1] On Saturdays it opens at 10:00. [2][1]"
    assert [(n, s.id) for n, s in items] == [(1, "D1-00000"), (2, "D2-00003")]


def test_an_uncited_listed_source_follows_and_a_refusal_has_none() -> None:
    body, items = numbered("Only the second. [source: D2-00003]", SOURCES)
    assert body == "Only the second. [1]"
    assert [(n, s.id) for n, s in items] == [(1, "D2-00003"), (2, "D1-00000")]
    refusal = "I don't have sufficiently relevant documents to answer confidently."
    assert numbered(refusal, []) == (refusal, [])


def test_ask_prints_the_sources_once_with_whole_titles(capsys: pytest.CaptureFixture[str]) -> None:
    print_answer(Answer(STORED, SOURCES, False, {}))
    out = capsys.readouterr().out
    assert "[source:" not in out and "D1-00000" not in out
    assert out.count("Sources") == 1
    assert out.count("Weekend hours, p. 2") == 1
    assert " ".join(out.split()).count(LONG_TITLE) == 1  # wrapped maybe, never cut


def test_a_title_wider_than_the_terminal_wraps_whole() -> None:
    lines = source_lines([(1, SOURCES[0])], width=40)
    assert all(len(line) <= 40 for line in lines)
    assert lines[0].startswith("[1] ") and all(line.startswith("    ") for line in lines[1:])
    assert " ".join(" ".join(lines).split()).startswith(f"[1] {LONG_TITLE}")


class FakeSession:
    def __init__(self) -> None:
        self.sent: list[str] = []
        self.notice: str | None = None

    def create(self, *, collection: str | None, document_id: str | None, persona: str | None) -> str:
        return "C1"

    def send(self, conv_id: str, text: str) -> Reply:
        self.sent.append(text)
        return Reply(STORED, SOURCES)

    def export(self, conv_id: str) -> str:
        return "# exported"


def run_chat(monkeypatch: pytest.MonkeyPatch, typed: str) -> tuple[FakeSession, str]:
    session = FakeSession()
    monkeypatch.setattr(chat_cli, "LocalChat", lambda *_: session)
    result = CliRunner().invoke(app, ["chat"], input=typed)
    assert result.exit_code == 0, result.output
    return session, result.output


def test_chat_commands_are_not_sent_as_questions(monkeypatch: pytest.MonkeyPatch) -> None:
    session, out = run_chat(
        monkeypatch, "/help\n/HELP\n/exprot\nWhen is it open?\n/export\n/quit\nnot sent\n"
    )
    assert session.sent == ["When is it open?"]
    assert out.count("/new") >= 2 and "Commands:" in out  # /help lists the commands (twice)
    assert "unknown command /exprot" in out
    assert "# exported" in out
    assert "[1]" in out and "[source:" not in out


def test_a_question_that_starts_with_a_slash_is_still_a_question(monkeypatch: pytest.MonkeyPatch) -> None:
    session, _ = run_chat(monkeypatch, "/etc/hosts is what file?\n")
    assert session.sent == ["/etc/hosts is what file?"]


def test_the_ingest_summary_never_cuts_a_path_title_or_id() -> None:
    path = "/home/someone/projects/handbooks/northern-regional-office/chapter-07-opening-hours.md"
    outcomes = [
        IngestOutcome(path, "READY", "DVERYLONGDOCUMENTID0000001", 4, title=LONG_TITLE),
        IngestOutcome("/tmp/same.txt", "READY", "D2", 1, title="Same", duplicate=True),
        IngestOutcome("/tmp/bad.pdf", "FAILED", error="PDF has no text layer [scanned?]"),
        IngestOutcome("/tmp/edited.txt", "READY", "D3", 2, title="Edited", new_version=True),
    ]
    out = StringIO()
    console = Console(file=out, width=110, color_system=None)  # the table (80 columns: blocks)
    assert _print_summary(console, outcomes) == 1
    columns = table_columns(out.getvalue())
    expected = {0: path, 1: LONG_TITLE, 4: "DVERYLONGDOCUMENTID0000001", 5: "unchanged: already ingested"}
    for index, text in expected.items():
        assert "".join(text.split()) in columns[index], (index, text)
    assert "[scanned?]" in columns[5]
    assert "newversion:replacestheearlierone" in columns[5]
    assert "…" not in out.getvalue()
    assert "3 ready (1 unchanged, 1 new version), 1 failed" in out.getvalue()


def table_columns(rendered: str) -> list[str]:
    """Each column's text, its lines joined without whitespace (a wrapped cell reads whole)."""
    columns: list[str] = []
    for line in rendered.splitlines():
        if not line.startswith("│"):
            continue
        cells = line.strip("│").split("│")
        columns += [""] * (len(cells) - len(columns))
        for i, cell in enumerate(cells):
            columns[i] += "".join(cell.split())
    return columns


@pytest.mark.parametrize("command", ["serve", "ingest", "ask", "chat", "bench"])
def test_help_reads_like_prose(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    assert "<bool>" not in result.output and "BOOLEAN" not in result.output


def test_typer_is_what_the_cli_runs_on() -> None:
    assert isinstance(app, typer.Typer)


def test_a_command_run_in_process_leaves_logging_as_it_found_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    ask_module = importlib.import_module("ragchat.cli.ask")

    seen: list[int] = []

    def answer(question: str, collection: str | None, workspace: str | None = None) -> Answer:
        seen.append(logging.root.manager.disable)  # quiet while the command runs
        return Answer("Nothing.", [], False, {})

    monkeypatch.setattr(ask_module, "ask_local", answer)
    before = logging.root.manager.disable
    assert CliRunner().invoke(app, ["ask", "anything?"]).exit_code == 0
    assert seen == [logging.CRITICAL]
    assert logging.root.manager.disable == before


def test_chat_says_once_what_the_server_said_about_the_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    session = FakeSession()
    session.notice = "The persona 'teacher' changes how answers are written only when a language model"
    monkeypatch.setattr(chat_cli, "LocalChat", lambda *_: session)
    out = CliRunner().invoke(app, ["chat", "--persona", "teacher"], input="When is it open?\n").output
    assert out.count("The persona 'teacher'") == 1
