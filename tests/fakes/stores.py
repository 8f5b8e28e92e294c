"""In-memory ``DocumentStore``, ``ConversationStore`` and ``Counters``: registered in the contract suites
(``tests/contract``), so they behave as the SQLite and DynamoDB adapters do."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ragchat.domain.clock import utc_iso
from ragchat.domain.errors import Conflict, NotFound, ValidationError
from ragchat.domain.models import (
    Conversation,
    Document,
    DocumentStatus,
    Feedback,
    Message,
    Note,
    Page,
)
from ragchat.domain.uploads import UploadOutcome

from tests.fakes.clock import FakeClock

# What ``update_document`` / ``update_conversation`` may change (the adapters refuse anything else).
_DOC_CHANGEABLE = {f.name for f in dataclasses.fields(Document)} - {"id", "owner", "created_at", "updated_at"}
_CONV_CHANGEABLE = {"title", "collection", "document_id", "persona", "summary_cursor", "last_summary_id"}


def _page(items: list[Any], limit: int, cursor: str | None) -> Page[Any]:
    """Offset pagination behind an opaque-looking cursor."""
    start = 0
    if cursor:
        try:
            start = int(cursor.removeprefix("o:"))
        except ValueError:
            raise ValidationError("Invalid cursor") from None
    chunk = items[start : start + limit]
    nxt = f"o:{start + limit}" if start + limit < len(items) else None
    return Page(items=[dataclasses.replace(x) for x in chunk], cursor=nxt)


def _keyed_page(notes: list[Any], limit: int, cursor: str | None) -> Page[Any]:
    """A document's notes in (chunk index, id) order after the cursor's position."""
    if cursor:
        try:
            index, _, last = cursor.removeprefix("k:").partition(":")
            after = (int(index), last)
        except ValueError:
            raise ValidationError("Invalid cursor") from None
        notes = [n for n in notes if (n.chunk_index, n.id) > after]
    chunk = notes[:limit]
    nxt = f"k:{chunk[-1].chunk_index}:{chunk[-1].id}" if len(notes) > limit else None
    return Page(items=[dataclasses.replace(x) for x in chunk], cursor=nxt)


# ------------------------------------------------------------------------------------------ documents
_UNFINISHED = (DocumentStatus.PENDING, DocumentStatus.PROCESSING)


class FakeDocumentStore:
    """``DocumentStore`` in memory. Returned records are copies (mutating them changes nothing)."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock or FakeClock()
        self.docs: dict[str, Document] = {}
        self.notes: dict[str, Note] = {}
        self._seq: dict[str, int] = {}
        self._n = 0
        self._lock = threading.RLock()
        self.uploads: dict[tuple[str, str], tuple[UploadOutcome, float]] = {}

    def _tick(self, key: str) -> None:
        self._n += 1
        self._seq[key] = self._n

    def create_document(self, doc: Document) -> Document:
        with self._lock:
            taken = self.docs.get(doc.id)
            if taken is not None and taken.owner != doc.owner:  # ids are global, as in the adapters
                raise Conflict(f"document id {doc.id} is already taken")
            now = utc_iso(self.clock())
            stored = dataclasses.replace(
                doc, status=DocumentStatus(doc.status), created_at=now, updated_at=now
            )
            self.docs[doc.id] = stored
            self._tick("d:" + doc.id)
            return dataclasses.replace(stored)

    def get_document(self, owner: str, doc_id: str) -> Document | None:
        with self._lock:
            doc = self.docs.get(doc_id)
            return dataclasses.replace(doc) if doc is not None and doc.owner == owner else None

    def list_documents(
        self, owner: str, *, collection: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Document]:
        with self._lock:
            items = [
                d
                for d in self.docs.values()
                if d.owner == owner and (collection is None or d.collection == collection)
            ]
            items.sort(key=lambda d: (d.created_at, self._seq["d:" + d.id]), reverse=True)
            return _page(items, limit, cursor)

    def unfinished(self) -> list[tuple[str, str]]:
        with self._lock:
            waiting = [d for d in self.docs.values() if d.status in _UNFINISHED]
            waiting.sort(key=lambda d: (d.created_at, self._seq["d:" + d.id]))
            return [(d.owner, d.id) for d in waiting]

    def update_document(self, owner: str, doc_id: str, changes: dict[str, Any]) -> Document | None:
        unknown = set(changes) - _DOC_CHANGEABLE
        if unknown:
            raise ValueError(f"cannot change document field(s): {', '.join(sorted(unknown))}")
        if "status" in changes:
            changes = {**changes, "status": DocumentStatus(changes["status"])}
        with self._lock:
            doc = self.docs.get(doc_id)
            if doc is None or doc.owner != owner:
                return None
            updated = dataclasses.replace(doc, **changes, updated_at=utc_iso(self.clock()))
            self.docs[doc_id] = updated
            return dataclasses.replace(updated)

    def delete_document(self, owner: str, doc_id: str) -> bool:
        with self._lock:
            doc = self.docs.get(doc_id)
            if doc is None or doc.owner != owner:
                return False
            del self.docs[doc_id]
            self.delete_notes_of_document(owner, doc_id)
            return True

    def find_by_content(self, owner: str, content_hash: str) -> Document | None:
        with self._lock:
            found = [d for d in self.docs.values() if d.owner == owner and d.content_hash == content_hash]
            found.sort(key=lambda d: (d.created_at, self._seq["d:" + d.id]), reverse=True)
            return dataclasses.replace(found[0]) if found else None

    def record_upload(self, outcome: UploadOutcome, *, expires_at: float) -> None:
        with self._lock:
            self.uploads[(outcome.owner, outcome.upload_id)] = (outcome, expires_at)

    def upload_outcome(self, owner: str, upload_id: str, *, now: float) -> UploadOutcome | None:
        with self._lock:
            outcome, expires_at = self.uploads.get((owner, upload_id), (None, 0.0))
            return outcome if outcome is not None and expires_at > now else None

    def add_chunks_done(self, owner: str, doc_id: str, version: str | None, count: int) -> Document | None:
        with self._lock:
            doc = self.docs.get(doc_id)
            if doc is None or doc.owner != owner:
                return None
            if version is not None and doc.version is not None and doc.version != version:
                return None
            updated = dataclasses.replace(
                doc, chunks_done=doc.chunks_done + int(count), updated_at=utc_iso(self.clock())
            )
            self.docs[doc_id] = updated
            return dataclasses.replace(updated)

    def put_notes(self, notes: Sequence[Note]) -> list[Note]:
        with self._lock:
            out = []
            now = utc_iso(self.clock())
            for note in notes:
                stored = dataclasses.replace(note, created_at=now)
                self.notes[note.id] = stored
                self._tick("n:" + note.id)
                out.append(dataclasses.replace(stored))
            return out

    def get_notes(self, owner: str, ids: Sequence[str]) -> list[Note]:
        with self._lock:
            return [
                dataclasses.replace(self.notes[i])
                for i in dict.fromkeys(ids)  # each note once, in the order first asked for
                if i in self.notes and self.notes[i].owner == owner
            ]

    def get_notes_and_documents(
        self, owner: str, note_ids: Sequence[str], document_ids: Sequence[str]
    ) -> tuple[list[Note], list[Document]]:
        with self._lock:
            docs = [
                dataclasses.replace(self.docs[i])
                for i in dict.fromkeys(document_ids)
                if i in self.docs and self.docs[i].owner == owner
            ]
        return self.get_notes(owner, note_ids), docs

    def list_notes(
        self, owner: str, *, document_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Note]:
        with self._lock:
            items = [n for n in self.notes.values() if n.owner == owner]
            if document_id is not None:  # keyed by the last note's (chunk index, id), as the real
                # stores are: a cursor stays valid when notes of the page before it are deleted
                items = [n for n in items if n.document_id == document_id]
                items.sort(key=lambda n: (n.chunk_index, n.id))
                return _keyed_page(items, limit, cursor)
            else:
                items.sort(key=lambda n: (n.created_at, self._seq["n:" + n.id]), reverse=True)
            return _page(items, limit, cursor)

    def delete_note(self, owner: str, note_id: str) -> Note | None:
        with self._lock:
            note = self.notes.get(note_id)
            if note is None or note.owner != owner:
                return None
            del self.notes[note_id]
            return dataclasses.replace(note)

    def delete_notes_of_document(self, owner: str, doc_id: str, *, limit: int | None = None) -> list[str]:
        with self._lock:
            mine = [n for n in self.notes.values() if n.owner == owner and n.document_id == doc_id]
            ids = [n.id for n in sorted(mine, key=lambda n: (n.chunk_index, n.id))][:limit]
            for i in ids:
                del self.notes[i]
            return ids


# -------------------------------------------------------------------------------------- conversations
class FakeConversationStore:
    """``ConversationStore`` in memory."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock or FakeClock()
        self.conversations: dict[str, Conversation] = {}
        self.messages: dict[str, Message] = {}
        self._seq: dict[str, int] = {}
        self._n = 0
        self._lock = threading.RLock()

    def _tick(self, key: str) -> None:
        self._n += 1
        self._seq[key] = self._n

    def _msgs(self, owner: str, conv_id: str) -> list[Message]:
        """Ascending by creation (timestamp, then insertion order)."""
        items = [m for m in self.messages.values() if m.conversation_id == conv_id and m.owner == owner]
        items.sort(key=lambda m: (m.created_at, self._seq["m:" + m.id]))
        return items

    def create_conversation(self, conv: Conversation) -> Conversation:
        with self._lock:
            if conv.id in self.conversations:
                raise Conflict(f"conversation {conv.id} already exists")
            now = utc_iso(self.clock())
            stored = dataclasses.replace(conv, created_at=now, updated_at=now, message_count=0)
            self.conversations[conv.id] = stored
            self._tick("c:" + conv.id)
            return dataclasses.replace(stored)

    def get_conversation(self, owner: str, conv_id: str) -> Conversation | None:
        with self._lock:
            conv = self.conversations.get(conv_id)
            if conv is None or conv.owner != owner:
                return None
            return dataclasses.replace(conv, message_count=len(self._msgs(owner, conv_id)))

    def find_conversation(self, conv_id: str) -> Conversation | None:
        with self._lock:
            conv = self.conversations.get(conv_id)
        return None if conv is None else self.get_conversation(conv.owner, conv_id)

    def list_conversations(
        self, owner: str, *, limit: int = 50, cursor: str | None = None
    ) -> Page[Conversation]:
        with self._lock:
            items = [
                dataclasses.replace(c, message_count=len(self._msgs(owner, c.id)))
                for c in self.conversations.values()
                if c.owner == owner
            ]
            items.sort(key=lambda c: (c.updated_at, self._seq["c:" + c.id]), reverse=True)
            return _page(items, limit, cursor)

    def update_conversation(self, owner: str, conv_id: str, changes: dict[str, Any]) -> Conversation | None:
        unknown = set(changes) - _CONV_CHANGEABLE
        if unknown:
            raise ValueError(f"cannot update conversation field(s): {', '.join(sorted(unknown))}")
        with self._lock:
            conv = self.conversations.get(conv_id)
            if conv is None or conv.owner != owner:
                return None
            updated = dataclasses.replace(conv, **changes, updated_at=utc_iso(self.clock()))
            self.conversations[conv_id] = updated
            self._tick("c:" + conv_id)
            return dataclasses.replace(updated, message_count=len(self._msgs(owner, conv_id)))

    def delete_conversation(self, owner: str, conv_id: str) -> bool:
        with self._lock:
            conv = self.conversations.get(conv_id)
            if conv is None or conv.owner != owner:
                return False
            del self.conversations[conv_id]
            for m in self._msgs(owner, conv_id):
                del self.messages[m.id]
            return True

    def add_message(self, msg: Message) -> Message:
        with self._lock:
            conv = self.conversations.get(msg.conversation_id)
            if conv is None or conv.owner != msg.owner:
                raise NotFound(f"conversation {msg.conversation_id} not found")
            if msg.client_message_id is not None:
                for m in self._msgs(msg.owner, msg.conversation_id):
                    if m.client_message_id == msg.client_message_id and m.role == msg.role:
                        raise Conflict("Duplicate client message id")
            now = utc_iso(self.clock())
            stored = dataclasses.replace(msg, created_at=now)
            self.messages[msg.id] = stored
            self._tick("m:" + msg.id)
            self.conversations[conv.id] = dataclasses.replace(conv, updated_at=now)
            self._tick("c:" + conv.id)
            return dataclasses.replace(stored)

    def recent_messages(self, owner: str, conv_id: str, limit: int) -> list[Message]:
        with self._lock:
            items = self._msgs(owner, conv_id)
            items.reverse()
            return [dataclasses.replace(m) for m in items[:limit]]

    def list_messages(
        self, owner: str, conv_id: str, *, limit: int = 1000, cursor: str | None = None
    ) -> Page[Message]:
        with self._lock:
            return _page(self._msgs(owner, conv_id), limit, cursor)

    def get_message(self, owner: str, conv_id: str, message_id: str) -> Message | None:
        with self._lock:
            m = self.messages.get(message_id)
            if m is None or m.owner != owner or m.conversation_id != conv_id:
                return None
            return dataclasses.replace(m)

    def find_by_client_message_id(self, owner: str, conv_id: str, client_message_id: str) -> list[Message]:
        with self._lock:
            return [
                dataclasses.replace(m)
                for m in self._msgs(owner, conv_id)
                if m.client_message_id == client_message_id
            ]

    def set_feedback(
        self, owner: str, conv_id: str, message_id: str, feedback: Feedback | None
    ) -> Message | None:
        with self._lock:
            m = self.messages.get(message_id)
            if m is None or m.owner != owner or m.conversation_id != conv_id:
                return None
            m.feedback = feedback
            return dataclasses.replace(m)

    def delete_messages_after(self, owner: str, conv_id: str, message_id: str | None) -> int:
        with self._lock:
            items = self._msgs(owner, conv_id)
            ids = [m.id for m in items]
            if message_id is not None and message_id not in ids:
                return 0
            later = ids if message_id is None else ids[ids.index(message_id) + 1 :]
            for i in later:
                del self.messages[i]
            return len(later)


# ------------------------------------------------------------------------------------------- counters
class FakeCounters:
    """``Counters`` in memory: ``{key: (value, expires_at)}``."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()

    def increment(self, key: str, *, amount: int = 1, ttl_seconds: float, now: float) -> int:
        with self._lock:
            value, expires = self.values.get(key, (0, 0.0))
            if expires <= now:
                value, expires = 0, now + ttl_seconds
            value += amount
            self.values[key] = (value, expires)
            return value

    def increment_up_to(
        self, key: str, *, limit: int, amount: int = 1, ttl_seconds: float, now: float
    ) -> int | None:
        with self._lock:
            value, expires = self.values.get(key, (0, 0.0))
            if expires <= now:
                value, expires = 0, now + ttl_seconds
            if value + amount > limit:
                return None
            self.values[key] = (value + amount, expires)
            return value + amount

    def get(self, key: str, *, now: float) -> int:
        with self._lock:
            value, expires = self.values.get(key, (0, 0.0))
            return value if expires > now else 0

    def get_many(self, keys: Sequence[str], *, now: float) -> dict[str, int]:
        return {k: self.get(k, now=now) for k in keys}

    def reset(self, key: str) -> None:
        with self._lock:
            self.values.pop(key, None)

    def put(self, key: str, value: int, *, ttl_seconds: float, now: float) -> None:
        with self._lock:
            self.values[key] = (int(value), now + ttl_seconds)

    def put_new(self, key: str, value: int, *, ttl_seconds: float, now: float) -> bool:
        with self._lock:
            if self.values.get(key, (0, 0.0))[1] > now:
                return False
            self.values[key] = (int(value), now + ttl_seconds)
            return True

    def reset_prefix(self, prefix: str) -> int:
        with self._lock:
            gone = [k for k in self.values if k.startswith(prefix)]
            for key in gone:
                del self.values[key]
            return len(gone)
