"""The per-run token of ``ragchat serve`` (docs/security.md, "Other accounts on the same machine").

127.0.0.1 is reachable by every account on the machine, so a server without a token would serve one
user's documents to all of them (the files are 0600, the API was not). Unless ``RAGCHAT_API_TOKEN``
is set (or ``--insecure-no-auth`` asks for no token at all), ``ragchat serve`` makes a random token
for its run and requires it as ``Authorization: Bearer <token>``, the one way this server
authenticates (nothing a browser attaches by itself). It reaches its user two ways, never through the API:

- printed once, in the link ``http://127.0.0.1:8000/ui#token=<token>`` (as Jupyter does): the page
  keeps it in ``sessionStorage`` and takes it out of the address bar at once. It sits after ``#``, so
  the browser never sends it to the server (no access log, no ``Referer``);
- written to ``<data dir>/serve.token``, a 0600 file in the 0700 data dir, for the same user's
  commands: ``ragchat ask/chat/ingest --api http://127.0.0.1:…`` read it when given no ``--token``,
  and ``curl -H "Authorization: Bearer $(cat .ragchat/serve.token)"`` works. The file is removed when
  the server stops (if it still holds this run's token).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

TOKEN_FILE = "serve.token"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe: it travels in a link)."""
    return secrets.token_urlsafe(32)


def token_path(data_dir: Path) -> Path:
    return Path(data_dir) / TOKEN_FILE


def write_token(data_dir: Path, token: str) -> Path:
    """Store ``token`` in ``<data_dir>/serve.token``, readable by this user only (made 0600 before a
    byte is written, renamed into place)."""
    from ragchat.adapters.local.files import private_dir

    folder = private_dir(Path(data_dir))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".serve-token-")  # mkstemp: 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(token + "\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, token_path(folder))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return token_path(folder)


def remove_token(data_dir: Path, token: str) -> None:
    """Remove the token file if it still holds ``token`` (another run may have replaced it)."""
    path = token_path(data_dir)
    with contextlib.suppress(OSError):
        if path.read_text(encoding="ascii").strip() == token:
            path.unlink()


def read_token(data_dir: Path, api_url: str) -> str | None:
    """The token a local ``ragchat serve`` on ``data_dir`` wrote, for a loopback ``api_url`` only (it
    is never sent anywhere else); ``None`` when there is none."""
    host = (urlsplit(api_url).hostname or "").lower()
    if host not in LOOPBACK_NAMES and not host.startswith("127."):
        return None
    try:
        token = token_path(data_dir).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return token or None


def sign_in_link(url: str, token: str) -> str:
    """The page link that signs a browser tab in (the token after ``#``: never sent to the server)."""
    return f"{url}/ui#token={token}"
