"""``ragchat chat`` shows what was searched for a follow-up ("Searched: …"), locally and with
``--api`` (issue 36 item 3): a wrong carried query is visible."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ragchat.cli.chat import _converse
from ragchat.cli.client import Reply

from tests.unit.api_support import make_api
from tests.unit.test_cli_client import BEES, client_for, write


class Session:
    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies

    def create(self, *, collection: str | None, document_id: str | None, persona: str | None) -> str:
        return "c1"

    def send(self, conv_id: str, text: str) -> Reply:
        return self.replies.pop(0)

    def export(self, conv_id: str) -> str:
        return ""


def _typed(monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> None:
    feed: Iterator[str] = iter(lines)

    def fake_input(prompt: str = "") -> str:
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr("builtins.input", fake_input)


def test_the_terminal_shows_the_searched_question_of_a_follow_up_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _typed(monkeypatch, ["Why is the sky blue?", "And at sunset?"])
    session = Session(
        [
            Reply("Scattering.", [], "Why is the sky blue"),  # the message itself: nothing extra shown
            Reply("Longer path.", [], "Why is the sky red at sunset?"),
        ]
    )
    _converse(session, None, collection=None, document=None, persona=None)
    out = capsys.readouterr().out
    assert out.count("Searched:") == 1
    assert "  Searched: Why is the sky red at sunset?\nassistant> Longer path." in out


def test_the_api_client_reads_the_searched_question_the_turn_returns(tmp_path: Path) -> None:
    api = make_api()
    client = client_for(api)
    client.upload(write(tmp_path, "bees.txt", BEES))
    conv = client.create_conversation(collection=None, persona=None)["id"]
    client.send_message(conv, "How do honey bees tell each other where flowers are?")
    reply = client.send_message(conv, "And how do they dance?")
    assert reply.query is not None and "dance" in reply.query
