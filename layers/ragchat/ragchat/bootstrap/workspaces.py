"""Workspaces: the service that resolves who may read and change which workspace, and the scope
of a conversation's turn."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

from ragchat.bootstrap.backends import Backends

if TYPE_CHECKING:
    from ragchat.domain.models import Conversation
    from ragchat.services.workspaces import WorkspaceService

#: the workspaces a conversation's turn searches (id → name)
Scope = Callable[["Conversation"], dict[str, str]]


class WorkspaceRoot(Backends):
    @cached_property
    def workspaces(self) -> WorkspaceService:
        from ragchat.services.documents import DocumentService
        from ragchat.services.workspaces import WorkspaceService

        deleter = DocumentService(
            self.documents,
            self.index,
            self.blobs,
            held=self.workspace_bytes,
            attempts=self.ingest_attempts,
            clock=self.clock,
        )

        # a member added is looked up (Cognito on AWS; locally the users file, else the name is the
        # user id), the directory built only then (a stack without a user pool serves the rest)
        def resolve_member(who: str) -> str | None:
            return self.user_directory.resolve(who)

        return WorkspaceService(
            self.workspace_store,
            self.documents,
            deleter,
            self.blobs,
            resolve_member=resolve_member,
            held=self.workspace_bytes,
            clock=self.clock,  # a DELETE's time budget (the tests' clock is injected)
        )

    def conversation_scope(self, conv: Conversation) -> dict[str, str]:
        """What a conversation's turn searches, read on every turn: its pinned workspace (404 once
        its user is no member), else every workspace its user belongs to."""
        if conv.workspace:
            access = self.workspaces.require(conv.owner, conv.workspace)
            return {access.id: access.name}
        return self.workspaces.names(conv.owner)
