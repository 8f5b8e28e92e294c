"""The local token of ``ragchat serve`` (docs/security.md, "Other accounts on the same machine").

127.0.0.1 is reachable by every account on the machine, so a server without a token would serve one
user's documents to all of them (the files are 0600, the API was not). Unless ``RAGCHAT_API_TOKEN``
is set (or ``--insecure-no-auth`` asks for no token at all), ``ragchat serve`` requires the token
kept in ``<data dir>/serve.token`` as ``Authorization: Bearer <token>`` (or the page's session
cookie made from it, ``ragchat.serving.sessions``). The token is made (256 random bits) the first
time and kept: the same user on the same machine stays signed in across runs, tabs and restarts.
``ragchat token rotate`` replaces it (a running server takes the new one at its next request, and
every browser session made from the old one stops working). It reaches its user two ways, never
through the API:

- printed at start, in the link ``http://127.0.0.1:8000/ui#token=<token>`` (as Jupyter does): the
  page trades it for its session cookie and takes it out of the address bar at once. It sits after
  ``#``, so the browser never sends it to the server (no access log, no ``Referer``);
- the 0600 file in the 0700 data dir, for the same user's commands: ``ragchat ask/chat/ingest --api
  http://127.0.0.1:…`` read it when given no ``--token``, and ``curl -H "Authorization: Bearer
  $(cat .ragchat/serve.token)"`` works. A file that is not the user's own and private (another
  owner, or readable by others) is never trusted: a new token replaces it.
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


def _private_text(path: Path) -> str | None:
    """The file's text when it is this user's own and nobody else's to read or write (else ``None``)."""
    try:
        with open(path, "rb") as handle:  # one open: the checks and the read are of the same file
            info = os.fstat(handle.fileno())
            if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & 0o077):
                return None
            return handle.read(4096).decode("ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def stable_token(data_dir: Path) -> str:
    """The token of ``data_dir``: the one kept there, else a new one, kept from now on."""
    kept = _private_text(token_path(data_dir))
    if kept is not None and len(kept) >= 32:
        return kept
    token = new_token()
    write_token(data_dir, token)
    return token


def rotate_token(data_dir: Path) -> str:
    """A new token for ``data_dir`` (``ragchat token rotate``): the old one, and every browser
    session made from it, stop working."""
    token = new_token()
    write_token(data_dir, token)
    return token


class TokenFile:
    """The token a running server checks: the file's, read again when the file changes (a stat per
    request), so ``ragchat token rotate`` takes effect without a restart. A file gone or made
    unsafe keeps the last good token."""

    def __init__(self, data_dir: Path, token: str) -> None:
        self.path = token_path(data_dir)
        self._token = token
        self._seen = self._stamp()

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            info = self.path.stat()
        except OSError:
            return None
        return (info.st_mtime_ns, info.st_ino, info.st_size)

    def current(self) -> str:
        stamp = self._stamp()
        if stamp != self._seen:
            self._seen = stamp
            token = _private_text(self.path)
            if token is not None and len(token) >= 32:
                self._token = token
        return self._token


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
