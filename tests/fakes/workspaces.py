"""In-memory ``WorkspaceStore``: registered in the contract suite (``tests/contract``), so it behaves
as the SQLite (and DynamoDB) adapters do."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

from ragchat.domain.clock import utc_iso
from ragchat.domain.errors import Conflict, NotFound
from ragchat.domain.workspaces import Membership, Role, Workspace, last_owner, leaves_no_owner

from tests.fakes.clock import FakeClock


class FakeWorkspaceStore:
    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock or FakeClock()
        self.workspaces: dict[str, Workspace] = {}
        self.roles: dict[tuple[str, str], Role] = {}  # (workspace, user) → role
        self._lock = threading.RLock()

    def _member(self, ws: str, user: str) -> Membership:
        return Membership(ws, user, self.roles[(ws, user)], self.workspaces[ws].name)

    def create_workspace(self, workspace: Workspace, owner: str) -> Workspace:
        with self._lock:
            if workspace.id in self.workspaces:
                raise Conflict("A workspace with this id already exists")
            now = utc_iso(self.clock())
            stored = dataclasses.replace(workspace, created_at=now, updated_at=now)
            self.workspaces[workspace.id] = stored
            self.roles[(workspace.id, owner)] = Role.OWNER
            return stored

    def get_workspace(self, workspace_id: str) -> Workspace | None:
        return self.workspaces.get(workspace_id)

    def rename_workspace(self, workspace_id: str, name: str) -> Workspace | None:
        with self._lock:
            ws = self.workspaces.get(workspace_id)
            if ws is None:
                return None
            renamed = dataclasses.replace(ws, name=name, updated_at=utc_iso(self.clock()))
            self.workspaces[workspace_id] = renamed
            return renamed

    def delete_workspace(self, workspace_id: str) -> bool:
        with self._lock:
            for key in [k for k in self.roles if k[0] == workspace_id]:
                del self.roles[key]
            return self.workspaces.pop(workspace_id, None) is not None

    def memberships(self, user_id: str) -> list[Membership]:
        with self._lock:
            found = [self._member(ws, u) for (ws, u) in self.roles if u == user_id]
        return sorted(found, key=lambda m: (m.workspace_name, m.workspace_id))

    def membership(self, workspace_id: str, user_id: str) -> Membership | None:
        with self._lock:
            return self._member(workspace_id, user_id) if (workspace_id, user_id) in self.roles else None

    def members(self, workspace_id: str) -> list[Membership]:
        with self._lock:
            found = [self._member(ws, u) for (ws, u) in self.roles if ws == workspace_id]
        return sorted(found, key=lambda m: m.user_id)

    def put_member(
        self, workspace_id: str, user_id: str, role: Role, *, keep_owner: bool = False
    ) -> Membership:
        with self._lock:
            if workspace_id not in self.workspaces:
                raise NotFound("Workspace not found")
            if keep_owner and leaves_no_owner(self.members(workspace_id), user_id, Role(role)):
                raise last_owner(Role(role))
            self.roles[(workspace_id, user_id)] = Role(role)
            return self._member(workspace_id, user_id)

    def remove_member(self, workspace_id: str, user_id: str, *, keep_owner: bool = False) -> bool:
        with self._lock:
            if keep_owner and leaves_no_owner(self.members(workspace_id), user_id, None):
                raise last_owner(None)
            return self.roles.pop((workspace_id, user_id), None) is not None
