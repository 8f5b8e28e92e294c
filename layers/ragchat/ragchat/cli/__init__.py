"""The ``ragchat`` command line: ``serve``, ``ingest``, ``ask``, ``chat``, ``bench``, ``calibrate``,
``workspaces``, ``users`` and ``token``.

``ingest``, ``ask`` and ``chat`` use the local backends in-process (the same container
``ragchat serve`` builds) or, with ``--api URL`` (and ``--token``), a running or deployed API through
the one HTTP client in ``ragchat.cli.client``. Each command lives in its own module.
"""

from __future__ import annotations

import typer

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
for command in (serve, ingest, ask, chat, bench, calibrate):
    app.command()(command)
app.add_typer(workspaces)
app.add_typer(users)
app.add_typer(token)


def main() -> None:  # pragma: no cover - console entry point alias
    app()


__all__ = ["app", "main"]
