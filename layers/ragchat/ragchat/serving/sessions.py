"""The pages' sign-in that lasts: a session cookie for ``ragchat serve`` (docs/security.md, "Staying
signed in").

The page trades the token (the link ``ragchat serve`` prints, or one typed) for a session once:
``POST /session`` with ``Authorization: Bearer <token>`` answers ``{"user", "csrf"}`` and sets

    ragchat_session_<port>=<user>.<mac>; Path=/; HttpOnly; SameSite=Strict; Max-Age=<90 days>

``mac`` is an HMAC (key: ``<data dir>/session.key``, 0600) of the user and the SHA-256 of their
current token, so the cookie outlives tabs, browser restarts and server restarts, and stops working
the moment the token changes (``ragchat token rotate``, ``ragchat users add`` again) or the key does.
The token itself never reaches the browser's storage; the cookie is out of scripts' reach
(``HttpOnly``) and not sent by other sites' pages (``SameSite=Strict``).

A cookie is not enough on its own. Cookies ignore ports: a page served from ``127.0.0.1:9000`` — any
local account can run one — would be sent ``127.0.0.1:8000``'s cookie and could replay it. So a
request is signed in by its cookie only together with ``X-Ragchat-Csrf: <csrf>``, the value
``POST /session`` answered (an HMAC of the cookie under the same key): the page keeps it in
``localStorage``, which belongs to one origin (scheme, host *and* port), so every tab of this server
has it and no other origin does. The same header is the CSRF defence: a cross-site form or image can
send the cookie (not with ``SameSite=Strict``, but also) never a custom header, and a cross-origin
``fetch`` with one needs a preflight, which is refused (``ragchat.serving.site``). ``GET /session``
says who the session is (401 without a valid pair); ``DELETE /session`` clears the cookie.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, unquote

SESSION_PATH = "/session"
CSRF_HEADER = "X-Ragchat-Csrf"
KEY_FILE = "session.key"
MAX_AGE_S = 90 * 24 * 3600  # the browser forgets the cookie after this; the server never needs to
Answer = tuple[int, dict[str, Any], dict[str, str]]


class Headers(Protocol):
    def get(self, name: str, default: Any = None) -> Any: ...


def _mac(key: bytes, *parts: str) -> str:
    digest = hmac.new(key, "\n".join(parts).encode("utf-8", "surrogateescape"), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def session_key(data_dir: Path, *, rotate: bool = False) -> bytes:
    """The key of ``data_dir``'s sessions (made once, 0600; ``rotate``: a new one signs every
    browser out)."""
    from ragchat.adapters.local.files import private_dir

    path = Path(data_dir) / KEY_FILE
    if not rotate:
        with contextlib.suppress(OSError), open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            private = not hasattr(os, "getuid") or (info.st_uid == os.getuid() and not info.st_mode & 0o077)
            key = handle.read(64)
            if private and len(key) == 32:
                return key
    folder = private_dir(Path(data_dir))
    key = secrets.token_bytes(32)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".session-key-")  # 0600
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    os.replace(tmp, folder / KEY_FILE)
    return key


class SessionKey:
    """``data_dir``'s session key as a running server uses it: read again when the file changes (a
    stat per request), so ``ragchat token rotate`` signs every browser out without a restart."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self._key = session_key(self.data_dir)
        self._seen = self._stamp()

    def _stamp(self) -> tuple[int, int] | None:
        try:
            info = (self.data_dir / KEY_FILE).stat()
        except OSError:
            return None
        return (info.st_mtime_ns, info.st_ino)

    def current(self) -> bytes:
        stamp = self._stamp()
        if stamp != self._seen and stamp is not None:
            self._seen = stamp
            self._key = session_key(self.data_dir)
        return self._key


def cookie_name(host_header: str) -> str:
    """One cookie per port (two servers of one user on two ports keep their own)."""
    host = host_header.strip()
    port = host.rsplit(":", 1)[1] if host.count(":") == 1 or (host.startswith("[") and "]:" in host) else ""
    return f"ragchat_session_{port if port.isdigit() else '80'}"


def _cookie(headers: Headers, name: str) -> str | None:
    for part in str(headers.get("Cookie") or "").split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value.strip().strip('"')
    return None


class BrowserSessions:
    """Issues and checks the pages' session cookies (module docstring). ``token_hash(user)``: the
    SHA-256 of ``user``'s current token, ``None`` for nobody."""

    def __init__(
        self, key: Callable[[], bytes], token_hash: Callable[[str], str | None], max_age: int = MAX_AGE_S
    ):
        self._key = key
        self._token_hash = token_hash
        self.max_age = max_age

    def _value(self, user: str) -> str | None:
        digest = self._token_hash(user)
        if digest is None:
            return None
        return f"{quote(user, safe='@-_')}.{_mac(self._key(), 'session', user, digest)}"

    def csrf(self, cookie_value: str) -> str:
        return _mac(self._key(), "csrf", cookie_value)

    def user(self, headers: Headers) -> str | None:
        """Who the request's cookie and ``X-Ragchat-Csrf`` pair says it is (``None``: not signed in
        this way). Both must hold; the cookie must be made from the user's current token."""
        value = _cookie(headers, cookie_name(str(headers.get("Host") or "")))
        csrf = str(headers.get(CSRF_HEADER) or "")
        if not value or not csrf or "." not in value:
            return None
        if not hmac.compare_digest(csrf.encode("ascii", "replace"), self.csrf(value).encode("ascii")):
            return None
        user = unquote(value.rsplit(".", 1)[0])
        expected = self._value(user)
        if expected is None:
            return None
        if not hmac.compare_digest(value.encode("ascii", "replace"), expected.encode("ascii")):
            return None
        return user

    def answer(self, method: str, headers: Headers, bearer_user: str | None) -> Answer:
        """``/session``: ``POST`` trades a valid bearer token (``bearer_user``) for the cookie,
        ``GET`` says who the session is, ``DELETE`` clears the cookie."""
        name = cookie_name(str(headers.get("Host") or ""))
        if method == "DELETE":
            cleared = f"{name}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"
            return 200, {"signedOut": True}, {"Set-Cookie": cleared, "Cache-Control": "no-store"}
        if method == "GET":
            user = self.user(headers)
            if user is None:
                return 401, {"error": "Not signed in"}, {"Cache-Control": "no-store"}
            return 200, {"user": user}, {"Cache-Control": "no-store"}
        if method != "POST":
            return 405, {"error": f"Method {method} not allowed on /session"}, {"Allow": "GET, POST, DELETE"}
        value = self._value(bearer_user) if bearer_user is not None else None
        if value is None:
            return 401, {"error": "Unauthorized"}, {"WWW-Authenticate": "Bearer"}
        cookie = f"{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={self.max_age}"
        body = {"user": bearer_user, "csrf": self.csrf(value)}
        return 200, body, {"Set-Cookie": cookie, "Cache-Control": "no-store"}
