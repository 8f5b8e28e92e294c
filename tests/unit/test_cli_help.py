"""``ragchat --help`` lists each command with a whole sentence (issue 45: click cut each one at ~45
characters with "...", mid-sentence: "Run the whole API locally (a local API Gateway in front of...")."""

from __future__ import annotations

import pytest
from ragchat.cli import app
from typer.testing import CliRunner

GROUPS = ([], ["workspaces"], ["users"], ["token"])


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: " ".join(g) or "ragchat")
def test_every_listed_command_has_a_whole_sentence(group: list[str]) -> None:
    shown = CliRunner().invoke(app, [*group, "--help"], terminal_width=100)
    assert shown.exit_code == 0, shown.output
    listing = shown.output.split("Commands:", 1)[1]
    assert "..." not in listing, listing
    entries = [line for line in listing.splitlines() if line.startswith("  ") and line[2] != " "]
    assert len(entries) >= 1
    # each entry's text (its first line and any continuation) ends a sentence
    text = " ".join(listing.split())
    assert text.count(".") >= len(entries), listing
