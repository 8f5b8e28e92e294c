"""Conversations and their messages (docs/api.md): create, list, read, delete, export, and the rewind an
edit needs (the edited message and everything after it removed)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from ragchat.domain.errors import Forbidden, NotFound, ValidationError
from ragchat.domain.ids import new_id
from ragchat.domain.labels import clean_title, validate_title
from ragchat.domain.messages import make_title
from ragchat.domain.models import Conversation, Feedback, Message, Page

if TYPE_CHECKING:
    from ragchat.ports import ConversationStore, DocumentStore

logger = Logger(service="ragchat", child=True)

# A search reads the owner's conversations page by page, at most this many pages per request, and
# the messages of at most MESSAGE_READS conversations whose title does not match (one query each).
SEARCH_READS = 20
MESSAGE_READS = 200


def _matches(conv: Conversation, words: list[str]) -> bool:
    """Every word is in the title (an untitled one is "New conversation", as listed) or collection."""
    hay = f"{conv.title or 'New conversation'} {conv.collection or ''}".casefold()
    return all(word in hay for word in words)


class Conversations:
    def __init__(
        self,
        store: ConversationStore,
        documents: DocumentStore,
        check_persona: Callable[[str], object],
    ) -> None:
        self.store = store
        self.documents = documents
        self.check_persona = check_persona  # raises ValidationError for an unknown persona

    def create(
        self,
        owner: str,
        *,
        title: str | None = None,
        collection: str | None = None,
        document_id: str | None = None,
        persona: str | None = None,
        workspace: str | None = None,
        readable: Sequence[str] = (),
    ) -> Conversation:
        """``workspace``: the one workspace its questions search (checked by the caller), else
        every one of ``readable`` (default: ``owner``'s own); ``document_id`` must be in one of
        those."""
        if persona is not None:
            self.check_persona(persona)  # unknown → 400
        places = (workspace,) if workspace else (tuple(readable) or (owner,))
        if document_id and all(self.documents.get_document(ws, document_id) is None for ws in places):
            raise NotFound("Document not found")
        conv = Conversation(
            id=new_id(),
            owner=owner,
            workspace=workspace or None,
            title=" ".join(clean_title(title).split()) if title else "",
            collection=collection or None,
            document_id=document_id or None,
            persona=persona or None,
        )
        return self.store.create_conversation(conv)

    def list_conversations(
        self, owner: str, *, limit: int = 50, cursor: str | None = None, search: str | None = None
    ) -> Page[Conversation]:
        """Newest first. ``search``: only those whose title (or collection), or whose messages taken
        together, hold every word of it, case-insensitively, read through the owner's conversations
        in pages no bigger than the matches still wanted (so a page never overflows ``limit`` and the
        store's cursor goes on exactly after it), at most ``SEARCH_READS`` store reads per call and
        the messages of at most ``MESSAGE_READS`` conversations: a page may then hold fewer than
        ``limit`` matches and still have a cursor to go on from."""
        words = search.casefold().split() if search else []
        if not words:
            return self.store.list_conversations(owner, limit=limit, cursor=cursor)
        found: list[Conversation] = []
        budget = [MESSAGE_READS]
        for _ in range(SEARCH_READS):
            page = self.store.list_conversations(owner, limit=limit - len(found), cursor=cursor)
            found += [conv for conv in page.items if self._found(owner, conv, words, budget)]
            cursor = page.cursor
            if cursor is None or len(found) == limit or budget[0] <= 0:
                break
        return Page(items=found, cursor=cursor)

    def _found(self, owner: str, conv: Conversation, words: list[str], budget: list[int]) -> bool:
        """The title matches, or (while ``budget`` lasts) the conversation's messages hold every word."""
        if _matches(conv, words):
            return True
        if budget[0] <= 0 or not conv.message_count:
            return False
        budget[0] -= 1
        hay = " ".join(m.content for m in self.store.list_messages(owner, conv.id, limit=1000).items)
        hay = hay.casefold()
        return all(word in hay for word in words)

    def get(
        self,
        owner: str,
        conv_id: str,
        *,
        shared_home: Callable[[str, Conversation], str | None] | None = None,
    ) -> Conversation:
        """``owner``'s conversation. Another user's is ``NotFound``, as a missing one is, unless
        ``shared_home(owner, conversation)`` names a workspace ``owner`` is a member of that holds it:
        then ``Forbidden`` saying it is another member's (conversations stay private to whoever
        started them). A non-member learns nothing: the same 404 as for an id never used."""
        conv = self.store.get_conversation(owner, conv_id)
        if conv is not None:
            return conv
        other = self.store.find_conversation(conv_id) if shared_home is not None else None
        where = shared_home(owner, other) if shared_home is not None and other is not None else None
        if other is not None and other.owner != owner and where:
            raise Forbidden(
                f"That conversation belongs to another member of “{where}”: conversations are private "
                "to the person who started them."
            )
        raise NotFound("Conversation not found")

    def messages(
        self, owner: str, conv_id: str, *, limit: int = 1000, cursor: str | None = None
    ) -> Page[Message]:
        return self.store.list_messages(owner, conv_id, limit=limit, cursor=cursor)

    def rename(self, owner: str, conv_id: str, title: object) -> Conversation:
        """Give the conversation a title of the caller's choosing (the labels rule: one line, not
        blank, at most 1000 characters). ``NotFound`` for a conversation that is not the caller's."""
        clean = validate_title(title)
        conv = self.store.update_conversation(owner, conv_id, {"title": clean})
        if conv is None:
            raise NotFound("Conversation not found")
        return conv

    def delete(self, owner: str, conv_id: str) -> None:
        if not self.store.delete_conversation(owner, conv_id):
            raise NotFound("Conversation not found")

    def rate(self, owner: str, conv_id: str, message_id: str, feedback: Feedback | None) -> Message:
        """Store the user's thumbs up / down (``None`` clears it) on an answer of the conversation."""
        self.get(owner, conv_id)
        target = self.store.get_message(owner, conv_id, message_id)
        if target is None:
            raise NotFound("Message not found")
        if target.role != "assistant":
            raise ValidationError("Only answers can be rated")
        rated = self.store.set_feedback(owner, conv_id, message_id, feedback)
        if rated is None:  # deleted by an edit in the meantime
            raise NotFound("Message not found")
        logger.info(
            "chat.event",
            extra={
                "conversationId": conv_id,
                "type": "feedback",
                "messageId": message_id,
                "rating": feedback,
            },
        )
        return rated

    def all_messages(self, owner: str, conv_id: str) -> list[Message]:
        out: list[Message] = []
        cursor: str | None = None
        while True:
            page = self.store.list_messages(owner, conv_id, limit=1000, cursor=cursor)
            out.extend(page.items)
            if not page.cursor:
                return out
            cursor = page.cursor

    def transcript(self, owner: str, conv_id: str) -> tuple[Conversation, list[Message]]:
        """A conversation with every message, ascending (what an export shows)."""
        conv = self.get(owner, conv_id)
        return conv, self.all_messages(owner, conv_id)

    def rewind_to(self, owner: str, conv_id: str, message_id: str) -> Message:
        """For an edit: find the user message (by id or client message id), delete it and every later
        message, and return it. Editing the first message empties the conversation; it keeps its id,
        createdAt, scope and persona, and a title made from the old first message is made again."""
        conv = self.get(owner, conv_id)
        target = self._user_message(owner, conv_id, message_id)
        ordered = self.all_messages(owner, conv_id)
        index = next(i for i, m in enumerate(ordered) if m.id == target.id)
        removed_ids = {m.id for m in ordered[index:]}
        self.store.delete_messages_after(owner, conv_id, ordered[index - 1].id if index else None)
        changes: dict[str, Any] = {}
        if conv.last_summary_id in removed_ids:
            changes.update(summary_cursor=None, last_summary_id=None)
        if index == 0 and conv.title == make_title(target.content):
            changes["title"] = ""
        if changes:
            self.store.update_conversation(owner, conv_id, changes)
        logger.info(
            "chat.event",
            extra={
                "conversationId": conv_id,
                "type": "message_edited",
                "messageId": target.id,
                "deletedCount": len(removed_ids),
            },
        )
        return target

    def _user_message(self, owner: str, conv_id: str, message_id: str) -> Message:
        target = self.store.get_message(owner, conv_id, message_id)
        if target is None:
            found = self.store.find_by_client_message_id(owner, conv_id, message_id)
            target = next((m for m in found if m.role == "user"), None)
        if target is None:
            raise NotFound("Message not found")
        if target.role != "user":
            raise ValidationError("Only user messages can be edited")
        return target
