"""Workspaces (docs/workspaces.md): who may read and change which workspace's documents.

Every user has a personal workspace (id = user id, name "Personal", role owner; never stored) and
the shared workspaces they are a member of (``WorkspaceStore``). Access is resolved from the store
on every call and kept no longer than the request that asked: a removed member's next request is
refused. A workspace the caller is not a member of does not exist for them (404, never 403); a
member whose role does not allow the action gets 403.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from aws_lambda_powertools import Logger

from ragchat.domain.errors import Forbidden, NotFound, ValidationError
from ragchat.domain.ids import new_id
from ragchat.domain.labels import clean_title
from ragchat.domain.workspaces import (
    SHARED_PREFIX,
    Membership,
    Role,
    Workspace,
    can_manage,
    is_shared,
    personal_workspace_id,
)
from ragchat.services.blob_keys import blob_segment

if TYPE_CHECKING:
    from ragchat.domain.models import Conversation, Document, Note
    from ragchat.ports import BlobStore, DocumentStore, WorkspaceStore
    from ragchat.services.documents import DocumentService
    from ragchat.services.storage_ceiling import WorkspaceBytes

logger = Logger(service="ragchat", child=True)

PERSONAL_NAME = "Personal"


class WorkspaceDeletion(NamedTuple):
    """What one call of :meth:`WorkspaceService.delete_within` did."""

    documents: int  # documents deleted whole by this call
    chunks: int  # chunks (notes and their vectors) deleted by this call
    finished: bool  # the workspace is gone


MAX_NAME_CHARS = 100
_RANK = {Role.VIEWER: 0, Role.EDITOR: 1, Role.OWNER: 2}
_NEEDS = {Role.VIEWER: "read", Role.EDITOR: "change documents in", Role.OWNER: "manage"}


@dataclass(slots=True, frozen=True)
class Access:
    """The caller's access to one workspace."""

    id: str
    name: str
    role: Role
    personal: bool = False

    def json(self) -> dict[str, object]:
        return {"id": self.id, "name": self.name, "role": str(self.role), "personal": self.personal}


def role_refused(role: Role, need: Role) -> Forbidden:
    """What a member whose ``role`` is below ``need`` is told (e.g. a viewer adding a document)."""
    return Forbidden(f"Your role in this workspace ({role}) cannot {_NEEDS[need]} it")


def validate_name(name: object) -> str:
    if not isinstance(name, str):
        raise ValidationError("name must be a string")
    clean = clean_title(name)
    if not clean:
        raise ValidationError("name must not be blank")
    if len(clean) > MAX_NAME_CHARS:
        raise ValidationError(f"name must be at most {MAX_NAME_CHARS} characters")
    return clean


def validate_member(user_id: object) -> str:
    if not isinstance(user_id, str) or not user_id.strip() or len(user_id) > 256:
        raise ValidationError("userId must be a user id or name (1-256 characters)")
    if user_id.strip().startswith(SHARED_PREFIX):
        raise ValidationError(f"userId: a user id never starts with {SHARED_PREFIX!r}")
    return user_id.strip()


class WorkspaceService:
    def __init__(
        self,
        store: WorkspaceStore,
        documents: DocumentStore,
        deleter: DocumentService,
        blobs: BlobStore,
        *,
        resolve_member: Callable[[str], str | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        held: WorkspaceBytes | None = None,
    ) -> None:
        """``resolve_member``: the user id a member identifier names, or ``None`` for nobody (the
        user directory: Cognito on AWS, the users file of ``ragchat serve``). A member added is
        looked up, so a misspelt id or name is a 404, not access kept for whoever gets it later; a
        member removed is looked up only when given by e-mail (a deleted user can still be removed).
        ``None``: members are given by user id. ``clock``: seconds, for :meth:`delete_within`.
        ``held``: the workspaces' byte ledgers (a deleted workspace's goes with it)."""
        self.clock = clock
        self.store = store
        self.documents = documents
        self.deleter = deleter
        self.blobs = blobs
        self.resolve_member = resolve_member
        self.held = held

    # ------------------------------------------------------------------ access
    def personal(self, user: str) -> Access:
        return Access(personal_workspace_id(user), PERSONAL_NAME, Role.OWNER, personal=True)

    def accessible(self, user: str) -> list[Access]:
        """The caller's workspaces: personal first, then the shared ones by name."""
        shared = [Access(m.workspace_id, m.workspace_name, m.role) for m in self.store.memberships(user)]
        return [self.personal(user), *shared]

    def readable(self, user: str) -> tuple[str, ...]:
        """Ids of every workspace the caller may read (personal first)."""
        return tuple(a.id for a in self.accessible(user))

    def names(self, user: str) -> dict[str, str]:
        return {a.id: a.name for a in self.accessible(user)}

    def require(self, user: str, workspace_id: str | None, need: Role = Role.VIEWER) -> Access:
        """The caller's access to ``workspace_id`` (``None``/blank: the personal one), given by id or
        by the name of one of the caller's workspaces ("Personal", "Lighthouse team", any case:
        names are accepted wherever ids are, issue 45; a name two of them share is a 400 listing
        their ids): NotFound when not a member, Forbidden when the role is below ``need``."""
        ws = (workspace_id or "").strip() or personal_workspace_id(user)
        if ws == personal_workspace_id(user):
            return self.personal(user)
        member = self.store.membership(ws, user) if is_shared(ws) else None
        if member is None:
            return self._checked(self._named(user, ws), need)
        return self._checked(Access(ws, member.workspace_name, member.role), need)

    def shared_home(self, viewer: str, conv: Conversation) -> str | None:
        """The name of a shared workspace ``viewer`` is a member of that holds another user's
        conversation ``conv``: the one it is pinned to, or (a conversation over all of its owner's
        workspaces) one both are members of; ``None`` otherwise (a personal one, a stranger's)."""
        if conv.workspace:
            member = self.store.membership(conv.workspace, viewer) if is_shared(conv.workspace) else None
            return self._name_of(member) if member is not None else None
        for member in self.store.memberships(viewer):
            if self.store.membership(member.workspace_id, conv.owner) is not None:
                return self._name_of(member)
        return None

    def _name_of(self, member: Membership) -> str:
        if member.workspace_name:
            return member.workspace_name
        found = self.store.get_workspace(member.workspace_id)
        return found.name if found is not None and found.name else member.workspace_id

    def _named(self, user: str, name: str) -> Access:
        """The caller's workspace called ``name`` (only the caller's are looked at: nothing is said
        about anyone else's)."""
        wanted = " ".join(name.split()).casefold()
        found = [a for a in self.accessible(user) if " ".join(a.name.split()).casefold() == wanted]
        if len(found) > 1:
            ids = ", ".join(a.id for a in found)
            raise ValidationError(f"Several of your workspaces are named {name!r}: give its id ({ids})")
        if not found:
            raise NotFound("Workspace not found")
        return found[0]

    def find_document(self, user: str, document_id: str, need: Role = Role.VIEWER) -> tuple[Access, Document]:
        """The document ``document_id`` in one of the caller's workspaces (404 when in none)."""
        for access in self.accessible(user):
            doc = self.documents.get_document(access.id, document_id)
            if doc is not None:
                return self._checked(access, need), doc
        raise NotFound("Document not found")

    def find_note(self, user: str, note_id: str, need: Role = Role.VIEWER) -> tuple[Access, Note]:
        for access in self.accessible(user):
            notes = self.documents.get_notes(access.id, [note_id])
            if notes:
                return self._checked(access, need), notes[0]
        raise NotFound("Note not found")

    @staticmethod
    def _checked(access: Access, need: Role) -> Access:
        if _RANK[access.role] < _RANK[need]:
            raise role_refused(access.role, need)
        return access

    # ------------------------------------------------------------------ workspaces
    def create(self, user: str, name: object) -> Access:
        fresh = Workspace(id=SHARED_PREFIX + new_id().lower(), name=validate_name(name))
        ws = self.store.create_workspace(fresh, user)
        logger.info("workspaces.created", extra={"workspaceId": ws.id})
        return Access(ws.id, ws.name, Role.OWNER)

    def _shared(self, user: str, workspace_id: str, need: Role) -> Access:
        access = self.require(user, workspace_id, need)
        if access.personal:
            raise ValidationError("Your personal workspace cannot be renamed, shared or deleted")
        return access

    def rename(self, user: str, workspace_id: str, name: object) -> Access:
        access = self._shared(user, workspace_id, Role.OWNER)
        ws = self.store.rename_workspace(access.id, validate_name(name))
        if ws is None:
            raise NotFound("Workspace not found")
        return Access(ws.id, ws.name, access.role)

    def delete(self, user: str, workspace_id: str) -> int:
        """Delete the workspace, its documents (notes, vectors, blobs) and memberships; returns how
        many documents went. Conversations that searched it keep their messages."""
        return self.delete_within(user, workspace_id, None).documents

    def delete_within(self, user: str, workspace_id: str, seconds: float | None) -> WorkspaceDeletion:
        """:meth:`delete` in bounded steps: each document is deleted a page of chunks at a time
        (:meth:`DocumentService.delete_within`), and once ``seconds`` have passed the call stops
        between two pages (an API request must answer inside API Gateway's 29 s), after one page at
        least (every call makes progress): ``(documents deleted, chunks deleted, finished)``. Not
        finished, the workspace stays with its remaining documents (a document stopped midway is
        still listed, with fewer chunks: its vectors go before its notes, so nothing of it is
        retrievable without its note), and calling again carries on."""
        access = self._shared(user, workspace_id, Role.OWNER)
        started = 0.0 if seconds is None else self.clock()
        removed = chunks = 0
        progressed = False
        while True:
            page = self.documents.list_documents(access.id, limit=100)
            for doc in page.items:
                left: float | None = None
                if seconds is not None:
                    now = self.clock() if progressed else started
                    if progressed and now >= started + seconds:  # after one page at least
                        return self._paused(access.id, removed, chunks)
                    left = max(0.0, started + seconds - now)
                try:
                    notes, done = self.deleter.delete_within(access.id, doc.id, left)
                except NotFound:  # deleted meanwhile (another request): nothing left to do for it
                    continue
                progressed, chunks = True, chunks + notes
                if not done:
                    return self._paused(access.id, removed, chunks)
                removed += 1
            if not page.items:
                break
        for prefix in ("documents", "extracted", "uploads"):
            self.blobs.delete_prefix(f"{prefix}/{blob_segment(access.id)}/")
        self.store.delete_workspace(access.id)
        if self.held is not None:  # its byte ledger (ws-bytes:<id>) is not left behind
            self.held.forget(access.id)
        logger.info(
            "workspaces.deleted", extra={"workspaceId": access.id, "documents": removed, "chunks": chunks}
        )
        return WorkspaceDeletion(removed, chunks, True)

    @staticmethod
    def _paused(workspace_id: str, documents: int, chunks: int) -> WorkspaceDeletion:
        logger.info(
            "workspaces.delete_paused",
            extra={"workspaceId": workspace_id, "documents": documents, "chunks": chunks},
        )
        return WorkspaceDeletion(documents, chunks, False)

    # ------------------------------------------------------------------ members
    def members(self, user: str, workspace_id: str) -> list[Membership]:
        access = self.require(user, workspace_id)
        if access.personal:
            return [Membership(access.id, user, Role.OWNER, PERSONAL_NAME)]
        return self.store.members(access.id)

    def put_member(self, user: str, workspace_id: str, member: object, role: object) -> Membership:
        access = self._shared(user, workspace_id, Role.OWNER)
        who = self._member_id(member, known=True)
        try:
            wanted = Role(role if isinstance(role, str) else "")
        except ValueError:
            raise ValidationError("role must be one of viewer, editor, owner") from None
        return self.store.put_member(access.id, who, wanted, keep_owner=True)

    def remove_member(self, user: str, workspace_id: str, member: object) -> None:
        """An owner removes anyone; any member may leave (remove themselves)."""
        who = self._member_id(member)
        access = self.require(user, workspace_id)
        if access.personal:
            raise ValidationError("Your personal workspace cannot be renamed, shared or deleted")
        if who != user and not can_manage(access.role):
            raise Forbidden(f"Your role in this workspace ({access.role}) cannot manage it")
        if not self.store.remove_member(access.id, who, keep_owner=True):
            raise NotFound("Member not found")

    def _member_id(self, member: object, *, known: bool = False) -> str:
        """The user id ``member`` names (``known``: it must name a user the directory knows)."""
        who = validate_member(member)
        if self.resolve_member is not None and (known or "@" in who):
            found = self.resolve_member(who)
            if found is None and "@" in who:
                raise NotFound("No user with this e-mail address")
            if found is None:
                raise NotFound(f"No user {who!r}: give a member by a user id or e-mail that exists")
            return found
        return who


class PersonalOnly:
    """A ``WorkspaceStore`` that holds nothing: every user has only their personal workspace
    (a backend whose shared-workspace store is not configured); creating one is refused."""

    def create_workspace(self, workspace: Workspace, owner: str) -> Workspace:
        raise ValidationError("Shared workspaces are not available on this deployment")

    def get_workspace(self, workspace_id: str) -> Workspace | None:
        return None

    def rename_workspace(self, workspace_id: str, name: str) -> Workspace | None:
        return None

    def delete_workspace(self, workspace_id: str) -> bool:
        return False

    def memberships(self, user_id: str) -> list[Membership]:
        return []

    def membership(self, workspace_id: str, user_id: str) -> Membership | None:
        return None

    def members(self, workspace_id: str) -> list[Membership]:
        return []

    def put_member(
        self, workspace_id: str, user_id: str, role: Role, *, keep_owner: bool = False
    ) -> Membership:
        raise NotFound("Workspace not found")

    def remove_member(self, workspace_id: str, user_id: str, *, keep_owner: bool = False) -> bool:
        return False


__all__ = ["PERSONAL_NAME", "Access", "PersonalOnly", "WorkspaceService"]
