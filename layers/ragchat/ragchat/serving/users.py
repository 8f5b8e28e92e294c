"""Several users of one ``ragchat serve`` (docs/workspaces.md): ``RAGCHAT_USERS_FILE``.

The file maps each user's name to the SHA-256 (hex) of their token, as JSON (``{"ana": "<hash>"}``)
or TOML (``ana = "<hash>"``); the tokens themselves are never stored. ``ragchat users add NAME``
makes a token, prints it once and stores its hash. A request's bearer token is hashed and looked up:
its user's name becomes the principal (``authorizer.claims.sub``), so members of a shared workspace
are added by name. Without the file, the server knows one user (``RAGCHAT_LOCAL_USER``) and its
per-run token (``ragchat.serving.local_token``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ragchat.domain.errors import ValidationError
from ragchat.domain.workspaces import SHARED_PREFIX

if TYPE_CHECKING:
    from ragchat.config import Settings

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_HASH = re.compile(r"^[0-9a-f]{64}$")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.strip().encode("utf-8", "surrogateescape")).hexdigest()


def validate_user_name(name: str) -> str:
    if not NAME.match(name) or name.startswith(SHARED_PREFIX):
        raise ValidationError(
            f"a user name is 1-64 letters, digits, '_', '.', '@', '-' (not starting with {SHARED_PREFIX!r})"
        )
    return name


def load_users(path: Path) -> dict[str, str]:
    """``name → token hash`` from ``path`` (JSON, or TOML for a ``.toml`` file); a missing file is
    no user. A malformed file is an error naming it (the server does not start)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        if Path(path).suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            data = json.loads(text or "{}")
    except ValueError as exc:
        raise ValueError(f"{path}: not a users file ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of user name to token hash")
    users: dict[str, str] = {}
    for name, digest in data.items():
        if not isinstance(digest, str) or not _HASH.match(digest.lower()) or not NAME.match(str(name)):
            raise ValueError(f"{path}: user {name!r} needs a SHA-256 hex token hash")
        users[str(name)] = digest.lower()
    return users


def _write(path: Path, users: Mapping[str, str]) -> None:
    if path.suffix == ".toml":
        text = "".join(f'"{name}" = "{digest}"\n' for name, digest in sorted(users.items()))
    else:
        text = json.dumps(dict(sorted(users.items())), indent=2) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".users-")  # 0600
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(tmp, path)


def add_user(path: Path, name: str) -> str:
    """Make ``name`` a user (a new token replaces an old one) and return the token (shown once)."""
    from ragchat.serving.local_token import new_token

    users = load_users(path)
    token = new_token()
    users[validate_user_name(name)] = token_hash(token)
    _write(Path(path), users)
    return token


def remove_user(path: Path, name: str) -> bool:
    users = load_users(path)
    if users.pop(name, None) is None:
        return False
    _write(Path(path), users)
    return True


class LocalUsers:
    """Who a bearer token belongs to, among the users of the file (read once at start); and the
    server's ``UserDirectory``: a workspace member is added by the name of one of them."""

    def __init__(self, users: Mapping[str, str], *, also: Iterable[str] = ()) -> None:
        """``also``: names known besides the file's (the user of ``RAGCHAT_API_TOKEN``)."""
        self._by_hash = {digest: name for name, digest in users.items()}
        self._hashes = dict(users)
        self._names = {*users, *also}

    def resolve(self, identifier: str) -> str | None:
        """The user ``identifier`` names (``ragchat.ports.UserDirectory``), ``None`` for nobody."""
        name = identifier.strip()
        return name if name in self._names else None

    def hash_of(self, name: str) -> str | None:
        """The token hash of the user ``name`` (what a browser session is bound to)."""
        return self._hashes.get(name)

    def __bool__(self) -> bool:
        return bool(self._by_hash)

    def who(self, authorization: str) -> str | None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = token_hash(token)
        for known, name in self._by_hash.items():
            if hmac.compare_digest(known, digest):
                return name
        return None


def users_of(settings: Settings) -> LocalUsers | None:
    """The users of ``RAGCHAT_USERS_FILE`` (``None`` without one, or while it lists nobody), the user
    of ``RAGCHAT_API_TOKEN`` among them. ``ragchat serve`` and ``ragchat workspaces`` use them as
    the user directory: a workspace member is added by the name of one of them (a misspelt name is
    a 404, not access kept for whoever is given that name later)."""
    if not settings.users_file:
        return None
    token_user = [settings.local_principal] if settings.api_token else []
    users = LocalUsers(load_users(settings.users_file), also=token_user)
    return users if users else None  # a file with nobody yet: names are not checked
