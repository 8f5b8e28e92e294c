"""In-memory fakes of every port in ``ragchat.ports``, for unit tests.

They behave like the real adapters as far as the port docstrings say (owner confinement, record as
stored with timestamps from an injected clock, upsert by id, opaque cursors, enabled filtering) and
add a few knobs for tests: call counters, recorded requests and scripted failures. Nothing here opens
a socket, touches the disk or sleeps.

Typical use::

    clock = FakeClock()
    docs = FakeDocumentStore(clock=clock)
    index = FakeVectorIndex(dimension=64)
    embedder = FakeEmbedder(dimension=64)
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ragchat.domain.clock import utc_iso
from ragchat.domain.errors import Conflict, ModelError, NotFound, TransientError, ValidationError
from ragchat.domain.models import (
    Completion,
    Conversation,
    Document,
    DocumentStatus,
    Hit,
    Message,
    ModelRequest,
    Note,
    Page,
    SearchFilter,
    VectorRecord,
)

__all__ = [
    "FakeBlobStore",
    "FakeChatModel",
    "FakeClock",
    "FakeConversationStore",
    "FakeCounters",
    "FakeDocumentStore",
    "FakeEmbedder",
    "FakeLauncher",
    "FakeVectorIndex",
    "unit",
]

_WORD = re.compile(r"[A-Za-z0-9]+")
# What ``update_document`` / ``update_conversation`` may change (the adapters refuse anything else).
_DOC_CHANGEABLE = {f.name for f in dataclasses.fields(Document)} - {"id", "owner", "created_at", "updated_at"}
_CONV_CHANGEABLE = {"title", "collection", "document_id", "persona", "summary_cursor", "last_summary_id"}


# --------------------------------------------------------------------------------------------- clock
class FakeClock:
    """A ``Clock`` (epoch seconds callable) that only moves when told to."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


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


# ------------------------------------------------------------------------------------------ documents
class FakeDocumentStore:
    """``DocumentStore`` in memory. Returned records are copies (mutating them changes nothing)."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock or FakeClock()
        self.docs: dict[str, Document] = {}
        self.notes: dict[str, Note] = {}
        self._seq: dict[str, int] = {}
        self._n = 0
        self._lock = threading.RLock()

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

    def list_notes(
        self, owner: str, *, document_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Note]:
        with self._lock:
            items = [n for n in self.notes.values() if n.owner == owner]
            if document_id is not None:
                items = [n for n in items if n.document_id == document_id]
                items.sort(key=lambda n: n.chunk_index)
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

    def delete_notes_of_document(self, owner: str, doc_id: str) -> list[str]:
        with self._lock:
            ids = [n.id for n in self.notes.values() if n.owner == owner and n.document_id == doc_id]
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

    def get(self, key: str, *, now: float) -> int:
        with self._lock:
            value, expires = self.values.get(key, (0, 0.0))
            return value if expires > now else 0

    def get_many(self, keys: Sequence[str], *, now: float) -> dict[str, int]:
        return {k: self.get(k, now=now) for k in keys}

    def reset(self, key: str) -> None:
        with self._lock:
            self.values.pop(key, None)


# ------------------------------------------------------------------------------------------- embedder
def unit(vector: Sequence[float]) -> list[float]:
    """Scale to unit length (zero vectors stay zero)."""
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else [0.0 for _ in vector]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    if not na or not nb:
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=False)) / (na * nb)


class FakeEmbedder:
    """Deterministic bag-of-words embedder: each lower-cased word is hashed to a dimension, so texts
    sharing words are similar and identical texts have similarity 1.0.

    Knobs: ``vectors`` maps an exact text to a fixed vector (normalised); ``fail_with`` is raised by
    every call while set; ``calls``/``query_calls``/``document_calls`` count calls;
    ``embedded_texts`` records what was embedded."""

    def __init__(self, dimension: int = 64, model_id: str = "fake-embedder") -> None:
        self.dimension = dimension
        self.model_id = model_id
        self.vectors: dict[str, list[float]] = {}
        self.fail_with: BaseException | None = None
        self.query_calls = 0
        self.document_calls = 0
        self.embedded_texts: list[str] = []

    @property
    def calls(self) -> int:
        return self.query_calls + self.document_calls

    def vector_for(self, text: str) -> list[float]:
        if text in self.vectors:
            return unit(self.vectors[text])
        vec = [0.0] * self.dimension
        for word in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            vec[h % self.dimension] += 1.0
        if not any(vec):
            vec[0] = 1.0
        return unit(vec)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.document_calls += 1
        if self.fail_with is not None:
            raise self.fail_with
        self.embedded_texts.extend(texts)
        return [self.vector_for(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        if self.fail_with is not None:
            raise self.fail_with
        self.embedded_texts.append(text)
        return self.vector_for(text)


# --------------------------------------------------------------------------------------- vector index
class FakeVectorIndex:
    """``VectorIndex`` in memory: exact cosine search; ``hybrid_search`` fuses a word-overlap keyword
    ranking with the vector ranking by reciprocal rank fusion (k=60).

    Knobs: ``fail_searches`` — number of upcoming ``search``/``hybrid_search`` calls that raise
    ``TransientError``; ``search_calls`` records ``(k, filter)`` per call; ``hybrid_calls`` counts
    hybrid searches; ``scores`` overrides the score of given ids (to script exact similarities)."""

    def __init__(self, dimension: int = 64) -> None:
        self.dimension = dimension
        self.records: dict[str, VectorRecord] = {}
        self.fail_searches = 0
        self.search_calls: list[tuple[int, SearchFilter]] = []
        self.hybrid_calls = 0
        self.scores: dict[str, float] = {}
        self._lock = threading.RLock()

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        with self._lock:
            for r in records:  # all or nothing: check every vector before storing any
                if len(r.vector) != self.dimension:
                    raise ValueError(
                        f"vector {r.id} has dimension {len(r.vector)}, expected {self.dimension}"
                    )
            for r in records:
                self.records[r.id] = dataclasses.replace(r, vector=list(r.vector))

    def _candidates(self, flt: SearchFilter) -> list[VectorRecord]:
        return [
            r
            for r in self.records.values()
            if r.owner == flt.owner
            and r.enabled
            and (flt.collection is None or r.collection == flt.collection)
            and (flt.document_id is None or r.document_id == flt.document_id)
        ]

    def _check_query(self, vector: Sequence[float]) -> None:
        if len(vector) != self.dimension:
            raise ValueError(f"query vector has dimension {len(vector)}, expected {self.dimension}")

    def _maybe_fail(self) -> None:
        if self.fail_searches > 0:
            self.fail_searches -= 1
            raise TransientError("vector index temporarily unavailable")

    @staticmethod
    def _hit(r: VectorRecord, score: float, similarity: float) -> Hit:
        return Hit(
            id=r.id,
            score=score,
            text=r.text,
            document_id=r.document_id,
            chunk_index=r.chunk_index,
            collection=r.collection,
            similarity=similarity,
        )

    def _similarity(self, vector: Sequence[float], r: VectorRecord) -> float:
        return self.scores.get(r.id, _cosine(vector, r.vector))

    def _vector_ranked(self, vector: Sequence[float], flt: SearchFilter) -> list[Hit]:
        hits = []
        for r in self._candidates(flt):
            sim = self._similarity(vector, r)
            hits.append(self._hit(r, sim, sim))
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits

    def search(self, vector: Sequence[float], flt: SearchFilter, k: int) -> list[Hit]:
        with self._lock:
            self.search_calls.append((k, flt))
            self._maybe_fail()
            self._check_query(vector)
            return self._vector_ranked(vector, flt)[:k]

    def hybrid_search(self, text: str, vector: Sequence[float], flt: SearchFilter, k: int) -> list[Hit]:
        with self._lock:
            self.search_calls.append((k, flt))
            self.hybrid_calls += 1
            self._maybe_fail()
            self._check_query(vector)
            vec = self._vector_ranked(vector, flt)
            words = set(_WORD.findall(text.lower()))
            kw = [(len(words & set(_WORD.findall(r.text.lower()))), r) for r in self._candidates(flt)]
            kw = [(s, r) for s, r in kw if s > 0]
            kw.sort(key=lambda sr: (-sr[0], sr[1].id))
            fused: dict[str, float] = {}
            for rank, h in enumerate(vec):
                fused[h.id] = fused.get(h.id, 0.0) + 1.0 / (60 + rank + 1)
            for rank, (_, r) in enumerate(kw):
                fused[r.id] = fused.get(r.id, 0.0) + 1.0 / (60 + rank + 1)
            out = [
                self._hit(self.records[i], s, self._similarity(vector, self.records[i]))
                for i, s in fused.items()
            ]
            out.sort(key=lambda h: (-h.score, h.id))
            return out[:k]

    def delete(self, ids: Sequence[str]) -> None:
        with self._lock:
            for i in ids:
                self.records.pop(i, None)

    def delete_document(self, owner: str, document_id: str) -> int:
        with self._lock:
            ids = [r.id for r in self.records.values() if r.owner == owner and r.document_id == document_id]
            for i in ids:
                del self.records[i]
            return len(ids)

    def set_enabled(self, owner: str, document_id: str, enabled: bool) -> None:
        with self._lock:
            for r in self.records.values():
                if r.owner == owner and r.document_id == document_id:
                    r.enabled = enabled

    def count(self, owner: str) -> int:
        with self._lock:
            return sum(1 for r in self.records.values() if r.owner == owner and r.enabled)


# ----------------------------------------------------------------------------------------- chat model
class FakeChatModel:
    """``ChatModel`` returning scripted answers.

    ``reply`` is either a fixed string or a function of the ``ModelRequest``; ``replies`` (a list)
    is consumed first, one per call. ``fail_with`` (an exception, or a list of exceptions consumed one
    per call) makes calls raise. ``requests`` records every request. ``stream`` yields the answer in
    word-sized deltas."""

    def __init__(
        self,
        reply: str | Callable[[ModelRequest], str] = "Answer.",
        *,
        model_id: str = "fake-model",
        tool_hits: Sequence[Hit] = (),
    ) -> None:
        self.model_id = model_id
        self.reply = reply
        self.replies: list[str] = []
        self.fail_with: BaseException | list[BaseException] | None = None
        self.requests: list[ModelRequest] = []
        self.tool_hits = list(tool_hits)

    @property
    def calls(self) -> int:
        return len(self.requests)

    def _text(self, request: ModelRequest) -> str:
        self.requests.append(request)
        if isinstance(self.fail_with, list):
            if self.fail_with:
                raise self.fail_with.pop(0)
        elif self.fail_with is not None:
            raise self.fail_with
        if self.replies:
            return self.replies.pop(0)
        return self.reply(request) if callable(self.reply) else self.reply

    def complete(self, request: ModelRequest) -> Completion:
        return Completion(text=self._text(request), model=self.model_id, tool_hits=list(self.tool_hits))

    def stream(self, request: ModelRequest) -> Iterator[str]:
        text = self._text(request)
        yield from re.findall(r"\S+\s*|\s+", text)


# ------------------------------------------------------------------------------------------ blob store
class FakeBlobStore:
    """``BlobStore`` in memory: ``objects`` maps key → bytes, ``content_types`` key → content type."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.content_types: dict[str, str] = {}
        self._lock = threading.Lock()

    def put(self, key: str, data: bytes, *, content_type: str = "application/octet-stream") -> None:
        with self._lock:
            self.objects[key] = bytes(data)
            self.content_types[key] = content_type

    def get(self, key: str) -> bytes:
        with self._lock:
            return self.objects[key]

    def delete(self, key: str) -> None:
        with self._lock:
            self.objects.pop(key, None)
            self.content_types.pop(key, None)

    def delete_prefix(self, prefix: str) -> int:
        with self._lock:
            keys = [k for k in self.objects if k.startswith(prefix)]
            for k in keys:
                del self.objects[k]
                self.content_types.pop(k, None)
            return len(keys)

    def keys(self, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(k for k in self.objects if k.startswith(prefix))


# ---------------------------------------------------------------------------------------- launcher
class FakeLauncher:
    """``IngestionLauncher`` that records starts; with ``run`` set (e.g. ``steps.run``) it runs the
    pipeline synchronously on ``start``. A document is run at most once per ``start`` while running."""

    def __init__(self, run: Callable[[str, str], Any] | None = None) -> None:
        self.run = run
        self.started: list[tuple[str, str]] = []
        self._running: set[tuple[str, str]] = set()

    def start(self, owner: str, document_id: str) -> None:
        key = (owner, document_id)
        self.started.append(key)
        if self.run is None or key in self._running:
            return
        self._running.add(key)
        try:
            self.run(owner, document_id)
        finally:
            self._running.discard(key)


# Re-exported so tests can script model failures without another import.
FakeModelError = ModelError


def _conformance() -> None:  # pragma: no cover - checked by mypy, never called
    from ragchat import ports

    _d: ports.DocumentStore = FakeDocumentStore()
    _c: ports.ConversationStore = FakeConversationStore()
    _n: ports.Counters = FakeCounters()
    _v: ports.VectorIndex = FakeVectorIndex()
    _e: ports.Embedder = FakeEmbedder()
    _m: ports.ChatModel = FakeChatModel()
    _b: ports.BlobStore = FakeBlobStore()
    _l: ports.IngestionLauncher = FakeLauncher()
