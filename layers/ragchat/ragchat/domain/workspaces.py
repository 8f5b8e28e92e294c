"""Workspaces: shared knowledge with members and roles (plain Python, no storage).

A workspace is the unit that owns documents: every stored record's ``owner`` field (documents,
notes, vectors, blobs) holds a *workspace id*. Each user has a personal workspace whose id is the
user id itself, so data written before workspaces existed is already in its owner's personal
workspace: nothing moves. Shared workspaces get ids that cannot be a user id (``ws_`` + a random
suffix; user ids never start with ``ws_``).

Conversations are not in a workspace: they stay keyed by the user who created them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from ragchat.domain.errors import Conflict

SHARED_PREFIX = "ws_"


class Role(StrEnum):
    VIEWER = "viewer"
    EDITOR = "editor"
    OWNER = "owner"


_RANK = {Role.VIEWER: 0, Role.EDITOR: 1, Role.OWNER: 2}


def can_read(role: Role) -> bool:
    """Ask, chat, list and read documents."""
    return role in _RANK


def can_write(role: Role) -> bool:
    """Add, replace, disable and delete documents."""
    return _RANK[role] >= _RANK[Role.EDITOR]


def can_manage(role: Role) -> bool:
    """Rename, manage members, delete the workspace."""
    return role is Role.OWNER


def is_shared(workspace_id: str) -> bool:
    """A shared workspace's id (a personal workspace's id is its user's id)."""
    return workspace_id.startswith(SHARED_PREFIX)


def personal_workspace_id(user_id: str) -> str:
    """The id of ``user_id``'s personal workspace: the user id itself (no migration needed)."""
    return user_id


@dataclass(slots=True, frozen=True)
class Workspace:
    id: str
    name: str
    created_at: str = ""
    updated_at: str = ""


@dataclass(slots=True, frozen=True)
class Membership:
    """``user_id`` is a member of ``workspace_id`` with ``role`` (``workspace_name`` for display)."""

    workspace_id: str
    user_id: str
    role: Role
    workspace_name: str = ""


def leaves_no_owner(members: Iterable[Membership], user_id: str, role: Role | None) -> bool:
    """Would giving ``user_id`` ``role`` (``None``: removing them) leave the workspace without an
    owner? Stores decide this in the same atomic step as the write (two owners demoting each other
    at the same instant must not both succeed)."""
    owners = {m.user_id for m in members if m.role is Role.OWNER}
    return role is not Role.OWNER and owners == {user_id}


def last_owner(role: Role | None) -> Conflict:
    what = "remove" if role is None else "demote"
    return Conflict(
        f"Cannot {what} the last owner of this workspace: make another member owner first "
        "(or delete the workspace)"
    )
