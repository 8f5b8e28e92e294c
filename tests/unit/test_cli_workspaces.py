"""``ragchat users …``, ``ragchat workspaces …`` and ``--workspace`` on ``ingest``/``ask``/``chat``
(issue 32), in-process on the local backends: one user shares a workspace, another ingests into it,
a third asks it; a non-member is told the workspace does not exist."""

from __future__ import annotations

from pathlib import Path

import pytest
from ragchat.cli import app
from typer.testing import CliRunner


@pytest.fixture
def cli(tmp_path: Path):  # type: ignore[no-untyped-def]
    base = {
        "COLUMNS": "200",
        "RAGCHAT_DATA_DIR": str(tmp_path / "data"),
        "RAGCHAT_USERS_FILE": str(tmp_path / "users.json"),
        "RAGCHAT_CHAT_MODEL": "extractive",
    }

    def invoke(*args: str, user: str = "local", stdin: str | None = None):  # type: ignore[no-untyped-def]
        env = {**base, "RAGCHAT_LOCAL_USER": user}
        return CliRunner().invoke(app, list(args), env=env, input=stdin)

    return invoke


def test_users_add_prints_a_token_once(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    added = cli("users", "add", "ana")
    assert added.exit_code == 0, added.output
    token = added.stdout.strip().splitlines()[0]
    assert len(token) >= 40 and token not in (tmp_path / "users.json").read_text()
    assert cli("users", "list").stdout.split() == ["ana"]
    assert cli("users", "add", "ws_evil").exit_code == 1


def test_a_team_shares_a_workspace_from_the_command_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    created = cli("workspaces", "create", "Handbook", "--user", "ana")
    assert created.exit_code == 0, created.output
    ws = created.stdout.strip()
    assert ws.startswith("ws_")
    assert cli("workspaces", "add-member", ws, "ben", "--role", "editor", "--user", "ana").exit_code == 0
    assert cli("workspaces", "add-member", ws, "cy", "--user", "ana").exit_code == 0
    members = cli("workspaces", "members", ws, "--user", "cy").stdout
    assert members.split("\n")[:3] == ["ana\towner", "ben\teditor", "cy\tviewer"]
    note = tmp_path / "hours.md"
    note.write_text("# Opening hours\n\nThe office opens at 8:30 on weekdays.\n")
    ingested = cli("ingest", str(note), "--workspace", ws, user="ben")
    assert ingested.exit_code == 0, ingested.output
    answered = cli("ask", "When does the office open?", "--workspace", ws, user="cy")
    assert answered.exit_code == 0 and "8:30" in answered.output
    everywhere = cli("ask", "When does the office open?", user="cy")  # every workspace of cy
    assert everywhere.exit_code == 0 and "8:30" in everywhere.output
    # a viewer cannot ingest; a non-member is told the workspace does not exist
    assert cli("ingest", str(note), "--workspace", ws, user="cy").exit_code == 1
    outsider = cli("ask", "When does the office open?", "--workspace", ws, user="dee")
    assert outsider.exit_code == 1 and "Workspace not found" in outsider.output
    assert cli("ask", "When does the office open?", user="dee").exit_code == 3  # refused: sees nothing
    chatted = cli("chat", "--workspace", ws, user="cy", stdin="When does the office open?\n/quit\n")
    assert chatted.exit_code == 0 and "8:30" in chatted.output
    listed = cli("workspaces", "list", "--user", "cy").stdout.splitlines()
    assert listed == ["cy\towner\tPersonal", f"{ws}\tviewer\tHandbook"]
    assert cli("workspaces", "rename", ws, "Team", "--user", "cy").exit_code == 1  # viewer
    assert cli("workspaces", "remove-member", ws, "ana", "--user", "ana").exit_code == 1  # last owner
    assert (
        cli("workspaces", "delete", ws, "--yes", "--user", "ana").stdout.strip()
        == f"deleted {ws} (1 documents)"
    )
    assert cli("ask", "When does the office open?", user="cy").exit_code == 3


def test_a_member_must_be_a_user_of_the_users_file(cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("users", "add", "ana").exit_code == 0
    assert cli("users", "add", "ben").exit_code == 0
    ws = cli("workspaces", "create", "Handbook", "--user", "ana").stdout.strip()
    misspelt = cli("workspaces", "add-member", ws, "bem", "--user", "ana")
    assert misspelt.exit_code == 1 and "No user 'bem'" in misspelt.output
    assert cli("workspaces", "add-member", ws, "ben", "--user", "ana").exit_code == 0
    assert cli("workspaces", "members", ws, "--user", "ana").stdout.split("\n")[:2] == [
        "ana\towner",
        "ben\tviewer",
    ]
