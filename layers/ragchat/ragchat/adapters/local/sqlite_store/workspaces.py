"""``WorkspaceStore`` on SQLite: tables ``workspaces`` and ``workspace_members`` (schema step 11).

Personal workspaces are implicit (id = user id) and never stored. Every read is a fresh query: a
removed member's next request already finds no membership.
"""

from __future__ import annotations

import sqlite3

from ragchat.adapters.local.sqlite_store.db import SqliteDatabase
from ragchat.domain.clock import Clock, system_clock, utc_iso
from ragchat.domain.errors import Conflict, NotFound
from ragchat.domain.workspaces import Membership, Role, Workspace, last_owner, leaves_no_owner

_MEMBER_SQL = (
    "SELECT m.workspace_id, m.user_id, m.role, w.name FROM workspace_members m "
    "JOIN workspaces w ON w.id = m.workspace_id"
)


def _workspace(row: sqlite3.Row) -> Workspace:
    return Workspace(
        id=row["id"], name=row["name"], created_at=row["created_at"], updated_at=row["updated_at"]
    )


def _membership(row: sqlite3.Row) -> Membership:
    return Membership(
        workspace_id=row["workspace_id"],
        user_id=row["user_id"],
        role=Role(row["role"]),
        workspace_name=row["name"],
    )


class SqliteWorkspaceStore:
    def __init__(self, db: SqliteDatabase, *, clock: Clock = system_clock) -> None:
        self.db = db
        self.clock = clock

    def create_workspace(self, workspace: Workspace, owner: str) -> Workspace:
        now = utc_iso(self.clock())
        with self.db.write() as conn:
            try:
                conn.execute(
                    "INSERT INTO workspaces (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)",
                    (workspace.id, workspace.name, now, now),
                )
            except sqlite3.IntegrityError:
                raise Conflict("A workspace with this id already exists") from None
            conn.execute(
                "INSERT INTO workspace_members (workspace_id, user_id, role, created_at) VALUES (?, ?, ?, ?)",
                (workspace.id, owner, str(Role.OWNER), now),
            )
        return Workspace(id=workspace.id, name=workspace.name, created_at=now, updated_at=now)

    def get_workspace(self, workspace_id: str) -> Workspace | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT * FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
        return _workspace(row) if row else None

    def rename_workspace(self, workspace_id: str, name: str) -> Workspace | None:
        with self.db.write() as conn:
            conn.execute(
                "UPDATE workspaces SET name = ?, updated_at = ? WHERE id = ?",
                (name, utc_iso(self.clock()), workspace_id),
            )
            row = conn.execute("SELECT * FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
        return _workspace(row) if row else None

    def delete_workspace(self, workspace_id: str) -> bool:
        with self.db.write() as conn:
            conn.execute("DELETE FROM workspace_members WHERE workspace_id = ?", (workspace_id,))
            return conn.execute("DELETE FROM workspaces WHERE id = ?", (workspace_id,)).rowcount > 0

    def memberships(self, user_id: str) -> list[Membership]:
        with self.db.read() as conn:
            rows = conn.execute(f"{_MEMBER_SQL} WHERE m.user_id = ? ORDER BY w.name, w.id", (user_id,))
            return [_membership(r) for r in rows]

    def membership(self, workspace_id: str, user_id: str) -> Membership | None:
        with self.db.read() as conn:
            row = conn.execute(
                f"{_MEMBER_SQL} WHERE m.workspace_id = ? AND m.user_id = ?", (workspace_id, user_id)
            ).fetchone()
        return _membership(row) if row else None

    def members(self, workspace_id: str) -> list[Membership]:
        with self.db.read() as conn:
            rows = conn.execute(f"{_MEMBER_SQL} WHERE m.workspace_id = ? ORDER BY m.user_id", (workspace_id,))
            return [_membership(r) for r in rows]

    def put_member(
        self, workspace_id: str, user_id: str, role: Role, *, keep_owner: bool = False
    ) -> Membership:
        with self.db.write() as conn:
            row = conn.execute("SELECT name FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
            if row is None:
                raise NotFound("Workspace not found")
            self._keep_owner(conn, workspace_id, user_id, Role(role), keep_owner)
            conn.execute(
                "INSERT INTO workspace_members (workspace_id, user_id, role, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = excluded.role",
                (workspace_id, user_id, str(Role(role)), utc_iso(self.clock())),
            )
        return Membership(workspace_id, user_id, Role(role), row["name"])

    def remove_member(self, workspace_id: str, user_id: str, *, keep_owner: bool = False) -> bool:
        with self.db.write() as conn:
            self._keep_owner(conn, workspace_id, user_id, None, keep_owner)
            cur = conn.execute(
                "DELETE FROM workspace_members WHERE workspace_id = ? AND user_id = ?",
                (workspace_id, user_id),
            )
            return cur.rowcount > 0

    @staticmethod
    def _keep_owner(
        conn: sqlite3.Connection, workspace_id: str, user_id: str, role: Role | None, keep_owner: bool
    ) -> None:
        """Inside the write transaction (``BEGIN IMMEDIATE``): no other write can come between."""
        if not keep_owner:
            return
        rows = conn.execute(
            "SELECT user_id FROM workspace_members WHERE workspace_id = ? AND role = ?",
            (workspace_id, str(Role.OWNER)),
        )
        owners = [Membership(workspace_id, r["user_id"], Role.OWNER) for r in rows]
        if leaves_no_owner(owners, user_id, role):
            raise last_owner(role)
