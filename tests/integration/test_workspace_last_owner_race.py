"""Two owners demoting (or removing) each other at the same instant, on DynamoDB (moto).

The last-owner rule is a read of the members followed by a write. Without a guard, both requests
read two owners, both write, and the workspace is left with none: nobody can manage or delete it.
The store writes each membership change in one transaction that also bumps the workspace item's
``members_version`` on condition it is the version it read, so the second writer is cancelled,
re-reads and is refused. Deterministic: the other owner's change is made between this request's
read and its write (a hook on the store's first transaction).
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from ragchat.adapters.aws.dynamodb import DynamoWorkspaceStore
from ragchat.domain.errors import Conflict
from ragchat.domain.workspaces import Role, Workspace
from ragchat.services.workspaces import WorkspaceService

from tests.integration.moto_stack import REGION, TABLES, Stack


def _store() -> DynamoWorkspaceStore:
    return DynamoWorkspaceStore(TABLES["documents"], boto3.client("dynamodb", region_name=REGION))


def _service(store: DynamoWorkspaceStore) -> WorkspaceService:
    """Membership changes use only the workspace store."""
    return WorkspaceService(store, None, None, None)  # type: ignore[arg-type]


def _meanwhile(store: DynamoWorkspaceStore, other: Any) -> None:
    """Run ``other`` (the other owner's request) just before ``store``'s first transaction."""
    call = store._t.call
    pending = [other]

    def hooked(operation: str, **kwargs: Any) -> Any:
        if operation == "transact_write_items" and pending:
            pending.pop()()
        return call(operation, **kwargs)

    store._t.call = hooked  # type: ignore[method-assign]


@pytest.mark.parametrize("change", ["demote", "leave"])
def test_two_owners_going_at_once_leave_one_owner(stack: Stack, change: str) -> None:
    setup = _store()
    setup.create_workspace(Workspace("ws_team", "Team"), "alice")
    setup.put_member("ws_team", "bob", Role.OWNER)
    alice_side, bob_side = _store(), _store()
    alice, bob = _service(alice_side), _service(bob_side)

    def go(service: WorkspaceService, user: str) -> None:
        if change == "demote":  # each demotes the other
            service.put_member(user, "ws_team", "bob" if user == "alice" else "alice", "viewer")
        else:  # each leaves
            service.remove_member(user, "ws_team", user)

    _meanwhile(alice_side, lambda: go(bob, "bob"))  # bob's request lands between alice's read and write
    with pytest.raises(Conflict, match=r"^Cannot (demote|remove) the last owner"):
        go(alice, "alice")

    owners = [m.user_id for m in setup.members("ws_team") if m.role is Role.OWNER]
    assert len(owners) == 1


def test_concurrent_changes_that_keep_an_owner_both_land(stack: Stack) -> None:
    """The version only serializes: alice adding carol while bob adds dave both succeed."""
    setup = _store()
    setup.create_workspace(Workspace("ws_team", "Team"), "alice")
    setup.put_member("ws_team", "bob", Role.OWNER)
    alice_side, bob_side = _store(), _store()
    _meanwhile(alice_side, lambda: _service(bob_side).put_member("bob", "ws_team", "dave", "viewer"))

    _service(alice_side).put_member("alice", "ws_team", "carol", "editor")

    assert {m.user_id: m.role for m in setup.members("ws_team")} == {
        "alice": Role.OWNER,
        "bob": Role.OWNER,
        "carol": Role.EDITOR,
        "dave": Role.VIEWER,
    }
