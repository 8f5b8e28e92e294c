"""A conversation remembers the workspace it is pinned to (issue 32), in every conversation store;
one stored before workspaces (or unpinned) reads back ``None``: it searches all its user's."""

from __future__ import annotations

from ragchat.domain.models import Conversation


def test_the_pinned_workspace_is_stored_and_read_back(conversation_store):
    conversation_store.create_conversation(Conversation(id="c1", owner="alice", workspace="ws_team"))
    conversation_store.create_conversation(Conversation(id="c2", owner="alice"))
    assert conversation_store.get_conversation("alice", "c1").workspace == "ws_team"
    assert conversation_store.get_conversation("alice", "c2").workspace is None
    listed = {c.id: c.workspace for c in conversation_store.list_conversations("alice").items}
    assert listed == {"c1": "ws_team", "c2": None}
    conversation_store.update_conversation("alice", "c1", {"title": "Renamed"})
    assert conversation_store.get_conversation("alice", "c1").workspace == "ws_team"
    assert conversation_store.get_conversation("bob", "c1") is None  # still its user's alone
