"""``ragchat chat``: a conversation in the terminal, against the local backends or ``--api``."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Annotated, Protocol

import typer

from ragchat.cli.common import (
    ApiOption,
    TokenOption,
    WorkspaceOption,
    api_token_for,
    build_container,
    fail,
    quiet_logging,
)

if TYPE_CHECKING:
    from ragchat.cli.client import ApiClient, Reply


class ChatSession(Protocol):
    def create(self, *, collection: str | None, document_id: str | None, persona: str | None) -> str: ...
    def send(self, conv_id: str, text: str) -> Reply: ...
    def export(self, conv_id: str) -> str: ...


class LocalChat:
    def __init__(self, workspace: str | None = None) -> None:
        logging.basicConfig(level=logging.WARNING)
        self.container = build_container()
        self.owner = self.container.settings.local_principal
        self.workspace = workspace
        self.notice: str | None = None  # what the last ``create`` has to say (e.g. about the persona)

    def create(self, *, collection: str | None, document_id: str | None, persona: str | None) -> str:
        from ragchat.domain.personas import persona_notice

        spaces = self.container.workspaces
        pinned = spaces.require(self.owner, self.workspace).id if self.workspace else None
        conv = self.container.chat.conversations.create(
            self.owner, collection=collection, document_id=document_id, persona=persona,
            workspace=pinned, readable=() if pinned else spaces.readable(self.owner),
        )  # fmt: skip
        self.notice = persona_notice(conv.persona, self.container.model_reads())
        return str(conv.id)

    def send(self, conv_id: str, text: str) -> Reply:
        from ragchat.cli.client import Reply, Source

        msg = self.container.chat.turns.send(self.owner, conv_id, text).message
        sources = [Source(s.id, s.text, s.title, s.page) for s in msg.sources or []]
        return Reply(msg.content, sources, msg.query)

    def export(self, conv_id: str) -> str:
        from ragchat.domain.export import export_markdown

        return export_markdown(*self.container.chat.conversations.transcript(self.owner, conv_id))


class RemoteChat:
    def __init__(self, client: ApiClient, workspace: str | None = None) -> None:
        self.client = client
        self.workspace = workspace
        self.notice: str | None = None

    def create(self, *, collection: str | None, document_id: str | None, persona: str | None) -> str:
        data = self.client.create_conversation(
            collection=collection, document_id=document_id, persona=persona, workspace=self.workspace
        )
        self.notice = str(data["notice"]) if data.get("notice") else None
        return str(data["id"])

    def send(self, conv_id: str, text: str) -> Reply:
        return self.client.send_message(conv_id, text)

    def export(self, conv_id: str) -> str:
        return self.client.export(conv_id).markdown()


HELP = """Commands:
  /help     this list
  /new      start a new conversation (same collection, document and persona)
  /export   print this conversation as Markdown
  /quit     leave (also /exit, Ctrl+D)
Anything else is sent as a question."""
COMMANDS = ("/help", "/new", "/export", "/quit", "/exit")


def _same(a: str, b: str) -> bool:
    return re.sub(r"\W+", " ", a.lower()).strip() == re.sub(r"\W+", " ", b.lower()).strip()


def _print_reply(reply: Reply, asked: str = "") -> None:
    from ragchat.cli.render import numbered, source_lines

    body, items = numbered(reply.content, reply.sources)
    if reply.query and not _same(reply.query, asked):  # a follow-up's standalone question
        typer.secho(f"  Searched: {reply.query}", dim=True)
    typer.secho("assistant> ", bold=True, nl=False)
    typer.echo(body)
    if items:
        typer.secho("  sources:", dim=True)
        for line in source_lines(items):
            typer.secho(f"  {line}", dim=True)


def _read_line() -> str | None:
    """The next non-blank line typed, or None at end of input / Ctrl+C."""
    while True:
        try:
            text = input("you> ").strip()
        except (EOFError, KeyboardInterrupt):
            typer.echo("")
            return None
        if text:
            return text


def chat(
    conversation: Annotated[
        str | None, typer.Option("--conversation", "-c", metavar="ID", help="Continue this conversation id.")
    ] = None,
    collection: Annotated[
        str | None, typer.Option(metavar="NAME", help="Only retrieve from this collection.")
    ] = None,
    document: Annotated[
        str | None, typer.Option(metavar="ID", help="Only retrieve from this document id.")
    ] = None,
    persona: Annotated[
        str | None, typer.Option(metavar="NAME", help="A configured persona (RAGCHAT_PERSONAS_FILE).")
    ] = None,
    workspace: WorkspaceOption = None,
    api: ApiOption = None,
    token: TokenOption = None,
) -> None:
    """Hold a conversation in the terminal (numbered sources under each answer). Type /help for the
    commands: /new starts a fresh conversation, /export prints it as Markdown, /quit leaves."""
    from ragchat.cli.client import ApiClient

    with quiet_logging(False, level=logging.INFO):  # the chat.* events would flood the terminal
        client = ApiClient(api, api_token_for(api, token)) if api else None
        session: ChatSession = RemoteChat(client, workspace) if client else LocalChat(workspace)
        _converse(session, conversation, collection=collection, document=document, persona=persona)


def _converse(
    session: ChatSession,
    conversation: str | None,
    *,
    collection: str | None,
    document: str | None,
    persona: str | None,
) -> None:
    """The conversation loop: questions are sent, ``/commands`` are done here."""
    from ragchat.cli.client import ApiError
    from ragchat.domain.errors import RagchatError

    errors = (RagchatError, ApiError)

    def start() -> str:
        conv_id = session.create(collection=collection, document_id=document, persona=persona)
        typer.secho(f"conversation {conv_id}", dim=True)
        if notice := getattr(session, "notice", None):
            typer.secho(notice, fg=typer.colors.YELLOW)
        return conv_id

    try:
        conv_id = conversation or start()
    except errors as exc:
        raise fail(exc.message) from None
    typer.secho("Ask away (/help for commands, /quit to leave).", dim=True)
    while (text := _read_line()) is not None and text.lower() not in ("/quit", "/exit"):
        command = text.lower() if text.startswith("/") and " " not in text.strip() else ""
        try:
            if command == "/help":
                typer.echo(HELP)
            elif command == "/new":
                conv_id = start()
            elif command == "/export":
                typer.echo(session.export(conv_id))
            elif command:  # a typo'd command is not sent as a question
                typer.secho(f"unknown command {text}: /help lists the commands", fg=typer.colors.YELLOW)
            else:
                _print_reply(session.send(conv_id, text), text)
        except errors as exc:
            typer.secho(f"error: {exc.message}", fg=typer.colors.RED)
