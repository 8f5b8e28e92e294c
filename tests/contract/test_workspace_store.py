"""The ``WorkspaceStore`` contract, run against every store in ``WORKSPACE_STORES`` (conftest.py).

What any store must do: a workspace is created with its owner as first member; reads are strongly
consistent (a member removed is not found by the very next read, whichever way it is asked);
``memberships(user)`` and ``members(workspace)`` agree; a rename shows at once in both; deleting a
workspace takes every membership with it; nothing leaks between workspaces or users.
"""

from __future__ import annotations

import pytest
from ragchat.domain.clock import utc_iso
from ragchat.domain.errors import Conflict, NotFound
from ragchat.domain.workspaces import Membership, Role, Workspace
from ragchat.ports import WorkspaceStore

from tests.fakes import FakeClock


def _roles(found: list[Membership]) -> dict[tuple[str, str], Role]:
    return {(m.workspace_id, m.user_id): m.role for m in found}


def test_is_a_workspace_store(workspace_store: WorkspaceStore) -> None:
    assert isinstance(workspace_store, WorkspaceStore)


def test_create_stores_the_workspace_with_its_owner(
    workspace_store: WorkspaceStore, clock: FakeClock
) -> None:
    created = workspace_store.create_workspace(Workspace("ws_team", "Team"), "alice")

    stamp = utc_iso(clock())
    assert created == Workspace("ws_team", "Team", stamp, stamp)
    assert workspace_store.get_workspace("ws_team") == created
    assert workspace_store.membership("ws_team", "alice") == Membership(
        "ws_team", "alice", Role.OWNER, "Team"
    )
    assert workspace_store.members("ws_team") == [Membership("ws_team", "alice", Role.OWNER, "Team")]
    assert workspace_store.memberships("alice") == [Membership("ws_team", "alice", Role.OWNER, "Team")]


def test_creating_an_existing_id_conflicts_and_changes_nothing(workspace_store: WorkspaceStore) -> None:
    workspace_store.create_workspace(Workspace("ws_team", "Team"), "alice")

    with pytest.raises(Conflict):
        workspace_store.create_workspace(Workspace("ws_team", "Mine now"), "mallory")

    assert workspace_store.get_workspace("ws_team").name == "Team"  # type: ignore[union-attr]
    assert workspace_store.membership("ws_team", "mallory") is None
    assert workspace_store.memberships("mallory") == []


def test_unknown_workspace_and_strangers_find_nothing(workspace_store: WorkspaceStore) -> None:
    workspace_store.create_workspace(Workspace("ws_team", "Team"), "alice")

    assert workspace_store.get_workspace("ws_other") is None
    assert workspace_store.membership("ws_team", "bob") is None
    assert workspace_store.membership("ws_other", "alice") is None
    assert workspace_store.members("ws_other") == []
    assert workspace_store.memberships("bob") == []
    assert workspace_store.rename_workspace("ws_other", "x") is None
    assert workspace_store.remove_member("ws_team", "bob") is False
    assert workspace_store.delete_workspace("ws_other") is False


def test_members_and_memberships_agree_and_roles_change(workspace_store: WorkspaceStore) -> None:
    workspace_store.create_workspace(Workspace("ws_a", "Alpha"), "alice")
    workspace_store.create_workspace(Workspace("ws_b", "Beta"), "bob")

    added = workspace_store.put_member("ws_a", "bob", Role.VIEWER)
    workspace_store.put_member("ws_a", "carol", Role.EDITOR)

    assert added == Membership("ws_a", "bob", Role.VIEWER, "Alpha")
    assert _roles(workspace_store.members("ws_a")) == {
        ("ws_a", "alice"): Role.OWNER,
        ("ws_a", "bob"): Role.VIEWER,
        ("ws_a", "carol"): Role.EDITOR,
    }
    assert _roles(workspace_store.memberships("bob")) == {
        ("ws_a", "bob"): Role.VIEWER,
        ("ws_b", "bob"): Role.OWNER,
    }
    assert {m.workspace_name for m in workspace_store.memberships("bob")} == {"Alpha", "Beta"}

    workspace_store.put_member("ws_a", "bob", Role.EDITOR)  # a role change, not a second membership

    assert workspace_store.membership("ws_a", "bob").role is Role.EDITOR  # type: ignore[union-attr]
    assert _roles(workspace_store.memberships("bob"))[("ws_a", "bob")] is Role.EDITOR
    assert len(workspace_store.members("ws_a")) == 3


def test_a_removed_member_is_gone_from_the_very_next_read(workspace_store: WorkspaceStore) -> None:
    workspace_store.create_workspace(Workspace("ws_a", "Alpha"), "alice")
    workspace_store.put_member("ws_a", "bob", Role.EDITOR)

    assert workspace_store.remove_member("ws_a", "bob") is True

    assert workspace_store.membership("ws_a", "bob") is None
    assert workspace_store.memberships("bob") == []
    assert [m.user_id for m in workspace_store.members("ws_a")] == ["alice"]
    assert workspace_store.remove_member("ws_a", "bob") is False


def test_rename_shows_at_once_for_every_member(workspace_store: WorkspaceStore, clock: FakeClock) -> None:
    created = workspace_store.create_workspace(Workspace("ws_a", "Alpha"), "alice")
    workspace_store.put_member("ws_a", "bob", Role.VIEWER)
    clock.advance(60)

    renamed = workspace_store.rename_workspace("ws_a", "Handbook")

    assert renamed == Workspace("ws_a", "Handbook", created.created_at, utc_iso(clock()))
    assert workspace_store.get_workspace("ws_a") == renamed
    assert [m.workspace_name for m in workspace_store.memberships("bob")] == ["Handbook"]
    assert workspace_store.membership("ws_a", "alice").workspace_name == "Handbook"  # type: ignore[union-attr]
    assert {m.workspace_name for m in workspace_store.members("ws_a")} == {"Handbook"}


def test_delete_takes_every_membership_and_leaves_other_workspaces(workspace_store: WorkspaceStore) -> None:
    workspace_store.create_workspace(Workspace("ws_a", "Alpha"), "alice")
    workspace_store.create_workspace(Workspace("ws_b", "Beta"), "alice")
    workspace_store.put_member("ws_a", "bob", Role.EDITOR)
    workspace_store.put_member("ws_b", "bob", Role.VIEWER)

    assert workspace_store.delete_workspace("ws_a") is True

    assert workspace_store.get_workspace("ws_a") is None
    assert workspace_store.members("ws_a") == []
    assert workspace_store.membership("ws_a", "bob") is None
    assert _roles(workspace_store.memberships("bob")) == {("ws_b", "bob"): Role.VIEWER}
    assert _roles(workspace_store.memberships("alice")) == {("ws_b", "alice"): Role.OWNER}
    assert workspace_store.delete_workspace("ws_a") is False


def test_a_member_cannot_be_added_to_a_missing_or_deleted_workspace(workspace_store: WorkspaceStore) -> None:
    workspace_store.create_workspace(Workspace("ws_a", "Alpha"), "alice")
    workspace_store.delete_workspace("ws_a")

    with pytest.raises(NotFound):
        workspace_store.put_member("ws_a", "bob", Role.EDITOR)
    with pytest.raises(NotFound):
        workspace_store.put_member("ws_never", "bob", Role.EDITOR)

    assert workspace_store.memberships("bob") == []
    assert workspace_store.membership("ws_a", "bob") is None


def test_a_recreated_id_starts_with_only_its_new_owner(workspace_store: WorkspaceStore) -> None:
    workspace_store.create_workspace(Workspace("ws_a", "Alpha"), "alice")
    workspace_store.put_member("ws_a", "bob", Role.EDITOR)
    workspace_store.delete_workspace("ws_a")

    workspace_store.create_workspace(Workspace("ws_a", "Again"), "carol")

    assert _roles(workspace_store.members("ws_a")) == {("ws_a", "carol"): Role.OWNER}
    assert workspace_store.membership("ws_a", "bob") is None
    assert workspace_store.memberships("alice") == []


def test_many_memberships_are_all_listed(workspace_store: WorkspaceStore) -> None:
    for n in range(30):
        workspace_store.create_workspace(Workspace(f"ws_{n:02d}", f"W{n:02d}"), f"owner{n}")
        workspace_store.put_member(f"ws_{n:02d}", "bob", Role.VIEWER if n % 2 else Role.EDITOR)

    found = workspace_store.memberships("bob")

    assert sorted(m.workspace_id for m in found) == [f"ws_{n:02d}" for n in range(30)]
    assert {m.workspace_id: m.workspace_name for m in found}["ws_17"] == "W17"
    assert {m.workspace_id: m.role for m in found}["ws_04"] is Role.EDITOR


@pytest.mark.parametrize("change", ["demote", "remove"])
def test_the_last_owner_is_kept_when_asked(workspace_store: WorkspaceStore, change: str) -> None:
    """``keep_owner``: the store refuses, in the same atomic step as the write, a change that would
    leave the workspace with no owner, and changes nothing; with two owners either may go."""
    workspace_store.create_workspace(Workspace("ws_team", "Team"), "alice")
    workspace_store.put_member("ws_team", "bob", Role.EDITOR)

    def go(user: str) -> object:
        if change == "demote":
            return workspace_store.put_member("ws_team", user, Role.VIEWER, keep_owner=True)
        return workspace_store.remove_member("ws_team", user, keep_owner=True)

    with pytest.raises(Conflict, match=f"^Cannot {change} the last owner of this workspace"):
        go("alice")
    assert workspace_store.membership("ws_team", "alice").role is Role.OWNER  # type: ignore[union-attr]

    workspace_store.put_member("ws_team", "bob", Role.OWNER, keep_owner=True)
    go("alice")
    assert [(m.user_id, m.role) for m in workspace_store.members("ws_team") if m.role is Role.OWNER] == [
        ("bob", Role.OWNER)
    ]
    with pytest.raises(Conflict):
        go("bob")
    assert workspace_store.remove_member("ws_team", "nobody", keep_owner=True) is False
