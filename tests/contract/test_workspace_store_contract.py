"""WorkspaceStore contract: every adapter in ``conftest.WORKSPACE_STORES`` must pass (register a
new one there with one line)."""

from __future__ import annotations

import pytest
from ragchat.domain.errors import Conflict, NotFound
from ragchat.domain.workspaces import Role, Workspace


def test_create_makes_the_creator_owner(workspace_store, clock):
    ws = workspace_store.create_workspace(Workspace(id="ws_1", name="Handbook"), "alice")
    assert (ws.id, ws.name) == ("ws_1", "Handbook")
    assert ws.created_at == ws.updated_at != ""
    assert workspace_store.get_workspace("ws_1") == ws
    member = workspace_store.membership("ws_1", "alice")
    assert (member.role, member.workspace_name) == (Role.OWNER, "Handbook")
    assert workspace_store.membership("ws_1", "bob") is None
    with pytest.raises(Conflict):
        workspace_store.create_workspace(Workspace(id="ws_1", name="Again"), "bob")
    assert workspace_store.membership("ws_1", "bob") is None


def test_memberships_list_a_users_workspaces_by_name(workspace_store):
    workspace_store.create_workspace(Workspace(id="ws_b", name="Zebra"), "alice")
    workspace_store.create_workspace(Workspace(id="ws_a", name="Apple"), "bob")
    workspace_store.put_member("ws_a", "alice", Role.VIEWER)
    found = workspace_store.memberships("alice")
    assert [(m.workspace_id, m.role, m.workspace_name) for m in found] == [
        ("ws_a", Role.VIEWER, "Apple"),
        ("ws_b", Role.OWNER, "Zebra"),
    ]
    assert workspace_store.memberships("carol") == []


def test_put_member_adds_or_changes_the_role(workspace_store):
    workspace_store.create_workspace(Workspace(id="ws_1", name="Team"), "alice")
    assert workspace_store.put_member("ws_1", "bob", Role.VIEWER).role is Role.VIEWER
    assert workspace_store.put_member("ws_1", "bob", Role.EDITOR).role is Role.EDITOR
    assert [(m.user_id, m.role) for m in workspace_store.members("ws_1")] == [
        ("alice", Role.OWNER),
        ("bob", Role.EDITOR),
    ]
    with pytest.raises(NotFound):
        workspace_store.put_member("ws_missing", "bob", Role.VIEWER)


def test_removed_member_has_no_access_on_the_next_read(workspace_store):
    workspace_store.create_workspace(Workspace(id="ws_1", name="Team"), "alice")
    workspace_store.put_member("ws_1", "bob", Role.EDITOR)
    assert workspace_store.remove_member("ws_1", "bob") is True
    assert workspace_store.membership("ws_1", "bob") is None
    assert workspace_store.memberships("bob") == []
    assert workspace_store.remove_member("ws_1", "bob") is False


def test_rename_shows_in_memberships(workspace_store, clock):
    workspace_store.create_workspace(Workspace(id="ws_1", name="Team"), "alice")
    clock.advance(5)
    renamed = workspace_store.rename_workspace("ws_1", "Support")
    assert renamed.name == "Support" and renamed.updated_at > renamed.created_at
    assert workspace_store.memberships("alice")[0].workspace_name == "Support"
    assert workspace_store.rename_workspace("ws_missing", "x") is None


def test_delete_removes_workspace_and_memberships(workspace_store):
    workspace_store.create_workspace(Workspace(id="ws_1", name="Team"), "alice")
    workspace_store.put_member("ws_1", "bob", Role.VIEWER)
    assert workspace_store.delete_workspace("ws_1") is True
    assert workspace_store.get_workspace("ws_1") is None
    assert workspace_store.membership("ws_1", "bob") is None
    assert workspace_store.memberships("alice") == []
    assert workspace_store.members("ws_1") == []
    assert workspace_store.delete_workspace("ws_1") is False
