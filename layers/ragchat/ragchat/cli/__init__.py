"""The ``ragchat`` command line: ``serve``, ``ingest``, ``ask``, ``chat``, ``bench``, ``calibrate``,
``workspaces``, ``users`` and ``token``.

``ingest``, ``ask`` and ``chat`` use the local backends in-process (the same container
``ragchat serve`` builds) or, with ``--api URL`` (and ``--token``), a running or deployed API through
the one HTTP client in ``ragchat.cli.client``. Each command lives in its own module.
"""

from __future__ import annotations

import typer
from typer.models import DefaultPlaceholder

from ragchat.cli.ask import ask
from ragchat.cli.bench import bench
from ragchat.cli.calibrate import calibrate
from ragchat.cli.chat import chat
from ragchat.cli.ingest import ingest
from ragchat.cli.serve import serve
from ragchat.cli.token import token
from ragchat.cli.workspaces import users, workspaces

app = typer.Typer(
    name="ragchat",
    help="Retrieval-augmented notes and chat: run the local API, ingest files, ask questions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: flags without a type column (no "<bool>"), options with a metavar
)


def first_sentence(text: str | None) -> str | None:
    """The first sentence of a help text, whole (click cuts a long one at ~45 characters with "...",
    mid-sentence: issue 45)."""
    if not text:
        return None
    flat = " ".join(text.strip().split("\n\n", 1)[0].split())
    end = flat.find(". ")
    return flat if end < 0 else flat[: end + 1]


def whole_short_helps(group: typer.Typer) -> None:
    """Give every command and group of ``group`` its first sentence as the line listed in ``--help``."""
    for info in group.registered_commands:
        if info.short_help is None and info.callback is not None:
            info.short_help = first_sentence(info.help or info.callback.__doc__)
    for sub in group.registered_groups:
        typer_info = sub.typer_instance.info if sub.typer_instance else None
        unset = sub.short_help is None or isinstance(sub.short_help, DefaultPlaceholder)
        if unset and typer_info is not None and isinstance(typer_info.help, str):
            sub.short_help = first_sentence(typer_info.help)
        if sub.typer_instance is not None:
            whole_short_helps(sub.typer_instance)


for command in (serve, ingest, ask, chat, bench, calibrate):
    app.command()(command)
app.add_typer(workspaces)
app.add_typer(users)
app.add_typer(token)
whole_short_helps(app)


def main() -> None:  # pragma: no cover - console entry point alias
    app()


__all__ = ["app", "main"]
