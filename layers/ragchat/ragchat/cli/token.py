"""``ragchat token``: the local token of ``ragchat serve`` (``ragchat.serving.local_token``)."""

from __future__ import annotations

from typing import Annotated

import typer

from ragchat.cli.common import load_settings

token = typer.Typer(
    name="token",
    help="The token ragchat serve keeps in the data dir (RAGCHAT_DATA_DIR/serve.token).",
    no_args_is_help=True,
)


@token.command("rotate")
def rotate(
    url: Annotated[
        str, typer.Option(metavar="URL", help="The server's address, for the sign-in link printed.")
    ] = "http://127.0.0.1:8000",
) -> None:
    """Replace the token and sign every browser out. A running ragchat serve takes the new token at
    its next request; the old token and every page signed in with it get 401."""
    from ragchat.serving.local_token import rotate_token, sign_in_link, token_path
    from ragchat.serving.sessions import session_key

    settings = load_settings()
    new = rotate_token(settings.data_dir)
    session_key(settings.data_dir, rotate=True)  # the sessions of the users file's users too
    typer.echo(f"New token in {token_path(settings.data_dir)} (readable by you only).")
    typer.echo(f"Every browser is signed out; sign in again: {sign_in_link(url.rstrip('/'), new)}")
