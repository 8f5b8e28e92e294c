"""What the ``ragchat`` commands share: options, error exit, settings, the container, logging."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from ragchat.domain.extraction import EXTENSION_TYPES, PRIMARY_EXTENSIONS

if TYPE_CHECKING:
    from ragchat.bootstrap import Container
    from ragchat.config import Settings

# File types the CLI ingests, by extension: the domain's one table (the API accepts the same set).
SUPPORTED = EXTENSION_TYPES
SUPPORTED_LIST = " ".join(PRIMARY_EXTENSIONS.values())

ApiOption = Annotated[
    str | None,
    typer.Option(
        "--api", metavar="URL", help="Base URL of a ragchat API (default: local backends in-process)."
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        metavar="TOKEN",
        envvar="RAGCHAT_TOKEN",
        help="Bearer token for --api (env RAGCHAT_TOKEN); for a local ragchat serve, its token "
        "kept in RAGCHAT_DATA_DIR/serve.token by default.",
    ),
]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="Show log lines (debug level).")]
WorkspaceOption = Annotated[
    str | None,
    typer.Option(
        metavar="WORKSPACE", help="A workspace's name or id (ragchat workspaces list); default: your own."
    ),
]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


# Exit codes (docs/usage.md): 1 a file failed or a request went wrong; 2 a path given does not exist
# (as for any other bad argument); 3 ``ask`` refused (nothing found that answers); 4 an unknown
# ``--collection``.
EXIT_FAILED = 1
EXIT_MISSING = 2
EXIT_REFUSED = 3
EXIT_UNKNOWN_COLLECTION = 4


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` on stderr; the caller raises the returned ``typer.Exit``."""
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(code)


def load_settings() -> Settings:
    from ragchat.config import ConfigError
    from ragchat.config import load_settings as load

    try:
        return load()
    except ConfigError as exc:
        raise fail(str(exc), 2) from None


def api_token_for(api: str, token: str | None) -> str | None:
    """``token`` if given; else, for a loopback ``api`` URL, the token of the local ``ragchat serve``
    run on this data dir (``ragchat.serving.local_token``: a 0600 file only this user can read)."""
    if token:
        return token
    from ragchat.config import ConfigError
    from ragchat.config import load_settings as load
    from ragchat.serving.local_token import read_token

    try:
        data_dir = load().data_dir
    except ConfigError:
        return None
    return read_token(data_dir, api)


def build_container(settings: Settings | None = None) -> Container:
    from ragchat.bootstrap import Container

    return Container(settings or load_settings())


def log_handler(stream: TextIO | None = None) -> logging.Handler:
    """Log lines on ``stream`` (stderr): one line per event with its structured fields
    (``chat.retrieval conversationId=... ids=[...] scores=[...]``; ``ragchat.observability``)."""
    from ragchat.observability import FieldsFormatter

    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(FieldsFormatter(LOG_FORMAT, datefmt="%H:%M:%S"))
    return handler


def setup_logging(verbose: bool = False) -> None:
    """``serve``: log lines on stderr at INFO (DEBUG with ``--verbose``)."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[log_handler()])


@contextmanager
def quiet_logging(verbose: bool, level: int = logging.CRITICAL) -> Iterator[None]:
    """While a command runs: it prints its own results, so log lines up to ``level`` stay off the
    terminal; with ``--verbose`` every log line (DEBUG and up) goes to stderr. Logging is as it was
    afterwards (a command run in-process, e.g. by a test, leaves no logging switched off)."""
    before = logging.root.manager.disable
    if verbose:
        logging.disable(logging.NOTSET)
        logging.basicConfig(level=logging.DEBUG, handlers=[log_handler()])
        logging.getLogger("ragchat").setLevel(logging.DEBUG)
    else:
        logging.disable(level)
    try:
        yield
    finally:
        logging.disable(before)
