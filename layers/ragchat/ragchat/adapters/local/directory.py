"""``UserDirectory`` for ``ragchat serve`` until it knows its users by name: an identifier is the
user id itself (a local user's id is their name). A directory over the local users file replaces it
by implementing the same one-method port."""

from __future__ import annotations


class IdentityDirectory:
    """Every non-empty identifier names the user of that id."""

    def resolve(self, identifier: str) -> str | None:
        value = identifier.strip()
        return value or None
