"""SQLite adapters for the local embedded backend: documents, notes, conversations, messages, counters.

Everything lives in one SQLite file (``<data dir>/ragchat.db``) in WAL mode, so a threaded HTTP
server, its background ingestion worker and a separate ``ragchat ingest`` process can all use it at
once. The vector index (:mod:`ragchat.adapters.local.vector_index`) keeps its tables in the same file.

Concurrency model (:class:`SqliteDatabase`):

* a small pool of connections; a thread holds one for the duration of a ``read()``/``write()`` block
  (nested blocks in the same thread reuse it);
* writes are serialized inside the process by a lock and across processes by ``BEGIN IMMEDIATE`` plus
  ``busy_timeout``; reads run concurrently (WAL readers never block writers);
* the schema is created and migrated on open: ``schema_version`` records the last applied step of
  :data:`MIGRATIONS`, and each step runs in its own transaction.

Timestamps are written here from the injected clock (``utc_iso``); what the methods return is the
record as stored. Lists are ordered by a sort key and paginated with opaque cursors that encode the
last sort key of the page (not an offset), so inserts between page requests neither duplicate nor
skip items.
"""

from __future__ import annotations

import base64
import binascii
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragchat.domain.clock import Clock, system_clock, utc_iso
from ragchat.domain.errors import Conflict, NotFound, ValidationError
from ragchat.domain.models import (
    Conversation,
    Document,
    DocumentStatus,
    Message,
    Note,
    Page,
    SourceRef,
)

# ---------------------------------------------------------------------------------------- schema
# Ordered migrations: step N (1-based) brings the schema from version N-1 to N. Append only; never
# edit a released step. Each step is a list of single statements run in one transaction.
MIGRATIONS: list[list[str]] = [
    # 1: documents, notes, conversations, messages, counters
    [
        """CREATE TABLE documents (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            title TEXT NOT NULL,
            content_type TEXT NOT NULL,
            source TEXT NOT NULL,
            body_key TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            collection TEXT,
            status TEXT NOT NULL,
            error TEXT,
            chunk_count INTEGER NOT NULL DEFAULT 0,
            enabled INTEGER NOT NULL DEFAULT 1,
            split INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
        # list documents by owner newest first (optionally within a collection)
        "CREATE INDEX documents_by_owner ON documents (owner, created_at, id)",
        "CREATE INDEX documents_by_collection ON documents (owner, collection, created_at, id)",
        """CREATE TABLE notes (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            document_id TEXT,
            chunk_index INTEGER NOT NULL,
            text TEXT NOT NULL,
            collection TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL
        )""",
        # notes of a document in chunk order; all notes of an owner newest first
        "CREATE INDEX notes_by_document ON notes (owner, document_id, chunk_index, id)",
        "CREATE INDEX notes_by_owner ON notes (owner, created_at, id)",
        """CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            collection TEXT,
            document_id TEXT,
            persona TEXT,
            summary_cursor TEXT,
            last_summary_id TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
        "CREATE INDEX conversations_by_owner ON conversations (owner, updated_at, id)",
        """CREATE TABLE messages (
            id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL,
            owner TEXT NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            sources TEXT,
            model TEXT,
            client_message_id TEXT,
            interrupted INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL
        )""",
        # messages of a conversation in creation order: (created_at, id); ULIDs are monotonic within
        # a process, so two messages written in the same millisecond keep their order.
        "CREATE INDEX messages_by_conversation ON messages (conversation_id, created_at, id)",
        # idempotency: one message per (conversation, client message id, role), enforced under races
        """CREATE UNIQUE INDEX messages_client_id ON messages (conversation_id, client_message_id, role)
            WHERE client_message_id IS NOT NULL""",
        """CREATE TABLE counters (
            key TEXT PRIMARY KEY,
            value INTEGER NOT NULL,
            expires_at REAL NOT NULL
        )""",
        "CREATE INDEX counters_by_expiry ON counters (expires_at)",
    ],
    # 2: the local vector index (vectors + FTS5 keyword index kept in sync by triggers)
    [
        """CREATE TABLE vectors (
            rid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            owner TEXT NOT NULL,
            document_id TEXT,
            chunk_index INTEGER NOT NULL,
            collection TEXT,
            enabled INTEGER NOT NULL DEFAULT 1,
            text TEXT NOT NULL,
            vector BLOB NOT NULL
        )""",
        "CREATE INDEX vectors_by_document ON vectors (owner, document_id)",
        """CREATE VIRTUAL TABLE vectors_fts USING fts5(
            text, content='vectors', content_rowid='rid', tokenize='porter unicode61'
        )""",
        """CREATE TRIGGER vectors_ai AFTER INSERT ON vectors BEGIN
            INSERT INTO vectors_fts (rowid, text) VALUES (new.rid, new.text);
        END""",
        """CREATE TRIGGER vectors_ad AFTER DELETE ON vectors BEGIN
            INSERT INTO vectors_fts (vectors_fts, rowid, text) VALUES ('delete', old.rid, old.text);
        END""",
        """CREATE TRIGGER vectors_au AFTER UPDATE OF text ON vectors BEGIN
            INSERT INTO vectors_fts (vectors_fts, rowid, text) VALUES ('delete', old.rid, old.text);
            INSERT INTO vectors_fts (rowid, text) VALUES (new.rid, new.text);
        END""",
        # change counter: bumped by every index write, so a process notices another one's writes
        "CREATE TABLE index_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
        "INSERT INTO index_state (key, value) VALUES ('version', 0)",
    ],
    # 3: document frequencies of the keyword index (hybrid search leaves out near-universal terms)
    [
        "CREATE VIRTUAL TABLE vectors_vocab USING fts5vocab(vectors_fts, 'row')",
    ],
]

SCHEMA_VERSION = len(MIGRATIONS)


class SqliteDatabase:
    """One SQLite file shared by every local adapter; safe to use from many threads.

    ``read()`` yields a connection inside a read transaction (a consistent snapshot);
    ``write()`` yields one inside ``BEGIN IMMEDIATE`` and commits on success, rolls back on error.
    """

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = 10_000, max_idle: int = 8) -> None:
        self.path = Path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._max_idle = max_idle
        self._idle: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._closed = False
        self._migrate()

    # ------------------------------------------------------------------ connections
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout_ms / 1000,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,  # pooled: used by one thread at a time
        )
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        held: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if held is not None:  # nested block in the same thread
            yield held
            return
        if self._closed:
            raise RuntimeError("database is closed")
        with self._pool_lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        self._local.conn = conn
        try:
            yield conn
        finally:
            self._local.conn = None
            if conn.in_transaction:  # pragma: no cover - defensive
                conn.rollback()
            with self._pool_lock:
                keep = not self._closed and len(self._idle) < self._max_idle
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        with self._connection() as conn:
            if conn.in_transaction:
                yield conn
                return
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        with self._write_lock, self._connection() as conn:
            if conn.in_transaction:  # nested in an enclosing write: part of its transaction
                yield conn
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")

    def close(self) -> None:
        with self._pool_lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ------------------------------------------------------------------ schema
    def schema_version(self) -> int:
        with self.read() as conn:
            row = conn.execute("SELECT version FROM schema_version").fetchone()
            return int(row[0]) if row else 0

    def _migrate(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.write() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = conn.execute("SELECT version FROM schema_version").fetchone()
            current = int(row[0]) if row else 0
            if row is None:
                conn.execute("INSERT INTO schema_version (version) VALUES (0)")
            if current > SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path} has schema version {current}, newer than this ragchat "
                    f"({SCHEMA_VERSION}); upgrade ragchat or use another RAGCHAT_DATA_DIR"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version - 1]:
                    conn.execute(statement)
                conn.execute("UPDATE schema_version SET version = ?", (version,))


# ---------------------------------------------------------------------------------------- helpers
def _encode_cursor(*key: Any) -> str:
    raw = json.dumps(list(key), separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode_cursor(cursor: str, kinds: tuple[type, ...]) -> list[Any]:
    """Decode a cursor made by :func:`_encode_cursor`; anything else is a 400."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError):
        raise ValidationError("Invalid cursor") from None
    if (
        not isinstance(values, list)
        or len(values) != len(kinds)
        or not all(isinstance(v, k) and not isinstance(v, bool) for v, k in zip(values, kinds, strict=True))
    ):
        raise ValidationError("Invalid cursor")
    return values


def _check_limit(limit: int) -> int:
    if limit < 1:
        raise ValidationError("limit must be at least 1")
    return int(limit)


def _json_or_empty(value: str | None) -> dict[str, Any]:
    if not value:
        return {}
    loaded = json.loads(value)
    return loaded if isinstance(loaded, dict) else {}


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


_BATCH = 500  # stay well under SQLite's bound-parameter limit


# ---------------------------------------------------------------------------------------- documents
_DOC_COLUMNS = (
    "id, owner, title, content_type, source, body_key, metadata, collection, status, error, "
    "chunk_count, enabled, split, created_at, updated_at"
)
_DOC_CHANGEABLE = {
    "title",
    "content_type",
    "source",
    "body_key",
    "metadata",
    "collection",
    "status",
    "error",
    "chunk_count",
    "enabled",
    "split",
}
_NOTE_COLUMNS = "id, owner, document_id, chunk_index, text, collection, metadata, created_at"


def _row_to_document(row: sqlite3.Row) -> Document:
    return Document(
        id=row["id"],
        owner=row["owner"],
        title=row["title"],
        content_type=row["content_type"],
        source=row["source"],
        body_key=row["body_key"],
        metadata=_json_or_empty(row["metadata"]),
        collection=row["collection"],
        status=DocumentStatus(row["status"]),
        error=row["error"],
        chunk_count=int(row["chunk_count"]),
        enabled=bool(row["enabled"]),
        split=bool(row["split"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _row_to_note(row: sqlite3.Row) -> Note:
    return Note(
        id=row["id"],
        document_id=row["document_id"],
        chunk_index=int(row["chunk_index"]),
        text=row["text"],
        owner=row["owner"],
        collection=row["collection"],
        metadata=_json_or_empty(row["metadata"]),
        created_at=row["created_at"],
    )


def _doc_value(field: str, value: Any) -> Any:
    if field == "metadata":
        return json.dumps(value or {})
    if field in ("enabled", "split"):
        return int(bool(value))
    if field == "status":
        return str(DocumentStatus(value))
    if field == "chunk_count":
        return int(value)
    return value


class SqliteDocumentStore:
    """``DocumentStore`` on SQLite (tables ``documents`` and ``notes``)."""

    def __init__(self, db: SqliteDatabase, *, clock: Clock = system_clock) -> None:
        self.db = db
        self.clock = clock

    def _now(self) -> str:
        return utc_iso(self.clock())

    # ------------------------------------------------------------------ documents
    def create_document(self, doc: Document) -> Document:
        now = self._now()
        with self.db.write() as conn:
            existing = conn.execute("SELECT owner FROM documents WHERE id = ?", (doc.id,)).fetchone()
            if existing is not None and existing["owner"] != doc.owner:
                raise Conflict("A document with this id already exists")
            conn.execute(
                f"INSERT OR REPLACE INTO documents ({_DOC_COLUMNS}) VALUES ({_placeholders(15)})",
                (
                    doc.id,
                    doc.owner,
                    doc.title,
                    doc.content_type,
                    doc.source,
                    doc.body_key,
                    json.dumps(doc.metadata or {}),
                    doc.collection,
                    str(DocumentStatus(doc.status)),
                    doc.error,
                    int(doc.chunk_count),
                    int(bool(doc.enabled)),
                    int(bool(doc.split)),
                    now,
                    now,
                ),
            )
            row = conn.execute(f"SELECT {_DOC_COLUMNS} FROM documents WHERE id = ?", (doc.id,)).fetchone()
        return _row_to_document(row)

    def get_document(self, owner: str, doc_id: str) -> Document | None:
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT {_DOC_COLUMNS} FROM documents WHERE id = ? AND owner = ?", (doc_id, owner)
            ).fetchone()
        return _row_to_document(row) if row else None

    def list_documents(
        self, owner: str, *, collection: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Document]:
        limit = _check_limit(limit)
        where = ["owner = ?"]
        params: list[Any] = [owner]
        if collection is not None:
            where.append("collection = ?")
            params.append(collection)
        if cursor:
            created_at, last_id = _decode_cursor(cursor, (str, str))
            where.append("(created_at < ? OR (created_at = ? AND id < ?))")
            params += [created_at, created_at, last_id]
        sql = (
            f"SELECT {_DOC_COLUMNS} FROM documents WHERE {' AND '.join(where)} "
            "ORDER BY created_at DESC, id DESC LIMIT ?"
        )
        with self.db.read() as conn:
            rows = conn.execute(sql, (*params, limit + 1)).fetchall()
        items = [_row_to_document(r) for r in rows[:limit]]
        next_cursor = _encode_cursor(items[-1].created_at, items[-1].id) if len(rows) > limit else None
        return Page(items=items, cursor=next_cursor)

    def update_document(self, owner: str, doc_id: str, changes: dict[str, Any]) -> Document | None:
        unknown = set(changes) - _DOC_CHANGEABLE
        if unknown:
            raise ValueError(f"cannot change document field(s): {', '.join(sorted(unknown))}")
        assignments = [f"{field} = ?" for field in changes]
        params = [_doc_value(field, value) for field, value in changes.items()]
        assignments.append("updated_at = ?")
        params.append(self._now())
        with self.db.write() as conn:
            cur = conn.execute(
                f"UPDATE documents SET {', '.join(assignments)} WHERE id = ? AND owner = ?",
                (*params, doc_id, owner),
            )
            if cur.rowcount == 0:
                return None
            row = conn.execute(f"SELECT {_DOC_COLUMNS} FROM documents WHERE id = ?", (doc_id,)).fetchone()
        return _row_to_document(row)

    def delete_document(self, owner: str, doc_id: str) -> bool:
        with self.db.write() as conn:
            cur = conn.execute("DELETE FROM documents WHERE id = ? AND owner = ?", (doc_id, owner))
            if cur.rowcount == 0:
                return False
            conn.execute("DELETE FROM notes WHERE owner = ? AND document_id = ?", (owner, doc_id))
        return True

    # ------------------------------------------------------------------ notes
    def put_notes(self, notes: Sequence[Note]) -> list[Note]:
        if not notes:
            return []
        now = self._now()
        rows = [
            (
                n.id,
                n.owner,
                n.document_id,
                int(n.chunk_index),
                n.text,
                n.collection,
                json.dumps(n.metadata or {}),
                now,
            )
            for n in notes
        ]
        with self.db.write() as conn:
            conn.executemany(
                f"INSERT OR REPLACE INTO notes ({_NOTE_COLUMNS}) VALUES ({_placeholders(8)})", rows
            )
        stored: dict[str, Note] = {}
        for n in notes:  # the last write of an id wins, as in the table
            stored[n.id] = Note(
                id=n.id,
                document_id=n.document_id,
                chunk_index=int(n.chunk_index),
                text=n.text,
                owner=n.owner,
                collection=n.collection,
                metadata=json.loads(json.dumps(n.metadata or {})),
                created_at=now,
            )
        return list(stored.values())

    def get_notes(self, owner: str, ids: Sequence[str]) -> list[Note]:
        wanted = list(dict.fromkeys(ids))
        found: dict[str, Note] = {}
        with self.db.read() as conn:
            for start in range(0, len(wanted), _BATCH):
                batch = wanted[start : start + _BATCH]
                for row in conn.execute(
                    f"SELECT {_NOTE_COLUMNS} FROM notes "
                    f"WHERE owner = ? AND id IN ({_placeholders(len(batch))})",
                    (owner, *batch),
                ):
                    found[row["id"]] = _row_to_note(row)
        return [found[i] for i in wanted if i in found]

    def list_notes(
        self, owner: str, *, document_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Note]:
        limit = _check_limit(limit)
        if document_id is not None:
            where = "owner = ? AND document_id = ?"
            params: list[Any] = [owner, document_id]
            if cursor:
                chunk_index, last_id = _decode_cursor(cursor, (int, str))
                where += " AND (chunk_index > ? OR (chunk_index = ? AND id > ?))"
                params += [chunk_index, chunk_index, last_id]
            order = "chunk_index ASC, id ASC"
        else:
            where = "owner = ?"
            params = [owner]
            if cursor:
                created_at, last_id = _decode_cursor(cursor, (str, str))
                where += " AND (created_at < ? OR (created_at = ? AND id < ?))"
                params += [created_at, created_at, last_id]
            order = "created_at DESC, id DESC"
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_NOTE_COLUMNS} FROM notes WHERE {where} ORDER BY {order} LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
        items = [_row_to_note(r) for r in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            last = items[-1]
            next_cursor = (
                _encode_cursor(last.chunk_index, last.id)
                if document_id is not None
                else _encode_cursor(last.created_at, last.id)
            )
        return Page(items=items, cursor=next_cursor)

    def delete_note(self, owner: str, note_id: str) -> Note | None:
        with self.db.write() as conn:
            row = conn.execute(
                f"SELECT {_NOTE_COLUMNS} FROM notes WHERE id = ? AND owner = ?", (note_id, owner)
            ).fetchone()
            if row is None:
                return None
            conn.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        return _row_to_note(row)

    def delete_notes_of_document(self, owner: str, doc_id: str) -> list[str]:
        with self.db.write() as conn:
            ids = [
                r["id"]
                for r in conn.execute(
                    "SELECT id FROM notes WHERE owner = ? AND document_id = ? ORDER BY chunk_index, id",
                    (owner, doc_id),
                )
            ]
            conn.execute("DELETE FROM notes WHERE owner = ? AND document_id = ?", (owner, doc_id))
        return ids


# ---------------------------------------------------------------------------------------- conversations
_CONV_COLUMNS = (
    "id, owner, title, collection, document_id, persona, summary_cursor, last_summary_id, "
    "created_at, updated_at"
)
_CONV_CHANGEABLE = {"title", "collection", "document_id", "persona", "summary_cursor", "last_summary_id"}
_MSG_COLUMNS = (
    "id, conversation_id, owner, role, content, sources, model, client_message_id, interrupted, created_at"
)
_COUNT = "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) AS message_count"


def _row_to_conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(
        id=row["id"],
        owner=row["owner"],
        title=row["title"],
        collection=row["collection"],
        document_id=row["document_id"],
        persona=row["persona"],
        summary_cursor=row["summary_cursor"],
        last_summary_id=row["last_summary_id"],
        message_count=int(row["message_count"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _row_to_message(row: sqlite3.Row) -> Message:
    sources = None
    if row["sources"] is not None:
        sources = [SourceRef(id=s["id"], text=s["text"]) for s in json.loads(row["sources"])]
    return Message(
        id=row["id"],
        conversation_id=row["conversation_id"],
        owner=row["owner"],
        role=row["role"],
        content=row["content"],
        sources=sources,
        model=row["model"],
        client_message_id=row["client_message_id"],
        interrupted=bool(row["interrupted"]),
        created_at=row["created_at"],
    )


class SqliteConversationStore:
    """``ConversationStore`` on SQLite (tables ``conversations`` and ``messages``)."""

    def __init__(self, db: SqliteDatabase, *, clock: Clock = system_clock) -> None:
        self.db = db
        self.clock = clock

    def _now(self) -> str:
        return utc_iso(self.clock())

    def _get(self, conn: sqlite3.Connection, owner: str, conv_id: str) -> Conversation | None:
        row = conn.execute(
            f"SELECT {_CONV_COLUMNS}, {_COUNT} FROM conversations c WHERE id = ? AND owner = ?",
            (conv_id, owner),
        ).fetchone()
        return _row_to_conversation(row) if row else None

    def create_conversation(self, conv: Conversation) -> Conversation:
        now = self._now()
        with self.db.write() as conn:
            try:
                conn.execute(
                    f"INSERT INTO conversations ({_CONV_COLUMNS}) VALUES ({_placeholders(10)})",
                    (
                        conv.id,
                        conv.owner,
                        conv.title,
                        conv.collection,
                        conv.document_id,
                        conv.persona,
                        conv.summary_cursor,
                        conv.last_summary_id,
                        now,
                        now,
                    ),
                )
            except sqlite3.IntegrityError:
                raise Conflict("A conversation with this id already exists") from None
            stored = self._get(conn, conv.owner, conv.id)
        assert stored is not None
        return stored

    def get_conversation(self, owner: str, conv_id: str) -> Conversation | None:
        with self.db.read() as conn:
            return self._get(conn, owner, conv_id)

    def list_conversations(
        self, owner: str, *, limit: int = 50, cursor: str | None = None
    ) -> Page[Conversation]:
        limit = _check_limit(limit)
        where = "owner = ?"
        params: list[Any] = [owner]
        if cursor:
            updated_at, last_id = _decode_cursor(cursor, (str, str))
            where += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
            params += [updated_at, updated_at, last_id]
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_CONV_COLUMNS}, {_COUNT} FROM conversations c WHERE {where} "
                "ORDER BY updated_at DESC, id DESC LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
        items = [_row_to_conversation(r) for r in rows[:limit]]
        next_cursor = _encode_cursor(items[-1].updated_at, items[-1].id) if len(rows) > limit else None
        return Page(items=items, cursor=next_cursor)

    def update_conversation(self, owner: str, conv_id: str, changes: dict[str, Any]) -> Conversation | None:
        unknown = set(changes) - _CONV_CHANGEABLE
        if unknown:
            raise ValueError(f"cannot change conversation field(s): {', '.join(sorted(unknown))}")
        assignments = [f"{field} = ?" for field in changes] + ["updated_at = ?"]
        params = [*changes.values(), self._now()]
        with self.db.write() as conn:
            cur = conn.execute(
                f"UPDATE conversations SET {', '.join(assignments)} WHERE id = ? AND owner = ?",
                (*params, conv_id, owner),
            )
            if cur.rowcount == 0:
                return None
            return self._get(conn, owner, conv_id)

    def delete_conversation(self, owner: str, conv_id: str) -> bool:
        with self.db.write() as conn:
            cur = conn.execute("DELETE FROM conversations WHERE id = ? AND owner = ?", (conv_id, owner))
            if cur.rowcount == 0:
                return False
            conn.execute("DELETE FROM messages WHERE conversation_id = ? AND owner = ?", (conv_id, owner))
        return True

    # ------------------------------------------------------------------ messages
    def add_message(self, msg: Message) -> Message:
        now = self._now()
        sources = (
            None if msg.sources is None else json.dumps([{"id": s.id, "text": s.text} for s in msg.sources])
        )
        with self.db.write() as conn:
            found = conn.execute(
                "SELECT 1 FROM conversations WHERE id = ? AND owner = ?", (msg.conversation_id, msg.owner)
            ).fetchone()
            if found is None:
                raise NotFound("Conversation not found")
            try:
                conn.execute(
                    f"INSERT INTO messages ({_MSG_COLUMNS}) VALUES ({_placeholders(10)})",
                    (
                        msg.id,
                        msg.conversation_id,
                        msg.owner,
                        msg.role,
                        msg.content,
                        sources,
                        msg.model,
                        msg.client_message_id,
                        int(bool(msg.interrupted)),
                        now,
                    ),
                )
            except sqlite3.IntegrityError:
                raise Conflict("Duplicate message id or client message id") from None
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, msg.conversation_id))
            row = conn.execute(f"SELECT {_MSG_COLUMNS} FROM messages WHERE id = ?", (msg.id,)).fetchone()
        return _row_to_message(row)

    def recent_messages(self, owner: str, conv_id: str, limit: int) -> list[Message]:
        if limit < 1:
            return []
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_MSG_COLUMNS} FROM messages WHERE conversation_id = ? AND owner = ? "
                "ORDER BY created_at DESC, id DESC LIMIT ?",
                (conv_id, owner, int(limit)),
            ).fetchall()
        return [_row_to_message(r) for r in rows]

    def list_messages(
        self, owner: str, conv_id: str, *, limit: int = 1000, cursor: str | None = None
    ) -> Page[Message]:
        limit = _check_limit(limit)
        where = "conversation_id = ? AND owner = ?"
        params: list[Any] = [conv_id, owner]
        if cursor:
            created_at, last_id = _decode_cursor(cursor, (str, str))
            where += " AND (created_at > ? OR (created_at = ? AND id > ?))"
            params += [created_at, created_at, last_id]
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_MSG_COLUMNS} FROM messages WHERE {where} ORDER BY created_at ASC, id ASC LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
        items = [_row_to_message(r) for r in rows[:limit]]
        next_cursor = _encode_cursor(items[-1].created_at, items[-1].id) if len(rows) > limit else None
        return Page(items=items, cursor=next_cursor)

    def get_message(self, owner: str, conv_id: str, message_id: str) -> Message | None:
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT {_MSG_COLUMNS} FROM messages WHERE id = ? AND conversation_id = ? AND owner = ?",
                (message_id, conv_id, owner),
            ).fetchone()
        return _row_to_message(row) if row else None

    def find_by_client_message_id(self, owner: str, conv_id: str, client_message_id: str) -> list[Message]:
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_MSG_COLUMNS} FROM messages "
                "WHERE conversation_id = ? AND owner = ? AND client_message_id = ? "
                "ORDER BY created_at ASC, id ASC",
                (conv_id, owner, client_message_id),
            ).fetchall()
        return [_row_to_message(r) for r in rows]

    def delete_messages_after(self, owner: str, conv_id: str, message_id: str | None) -> int:
        with self.db.write() as conn:
            if message_id is None:
                cur = conn.execute(
                    "DELETE FROM messages WHERE conversation_id = ? AND owner = ?", (conv_id, owner)
                )
                return int(cur.rowcount)
            pivot = conn.execute(
                "SELECT created_at, id FROM messages WHERE id = ? AND conversation_id = ? AND owner = ?",
                (message_id, conv_id, owner),
            ).fetchone()
            if pivot is None:
                return 0
            cur = conn.execute(
                "DELETE FROM messages WHERE conversation_id = ? AND owner = ? "
                "AND (created_at > ? OR (created_at = ? AND id > ?))",
                (conv_id, owner, pivot["created_at"], pivot["created_at"], pivot["id"]),
            )
            return int(cur.rowcount)


# ---------------------------------------------------------------------------------------- counters
class SqliteCounters:
    """``Counters`` on SQLite: one atomic ``INSERT … ON CONFLICT DO UPDATE … RETURNING`` per increment.

    Expired rows are purged now and then (every ``purge_every`` increments) so the table stays small.
    """

    def __init__(self, db: SqliteDatabase, *, purge_every: int = 1000) -> None:
        self.db = db
        self._purge_every = purge_every
        self._writes = 0

    def increment(self, key: str, *, amount: int = 1, ttl_seconds: float, now: float) -> int:
        with self.db.write() as conn:
            row = conn.execute(
                """INSERT INTO counters (key, value, expires_at) VALUES (:key, :amount, :expires)
                ON CONFLICT (key) DO UPDATE SET
                    value = CASE WHEN counters.expires_at <= :now THEN :amount
                                 ELSE counters.value + :amount END,
                    expires_at = CASE WHEN counters.expires_at <= :now THEN :expires
                                      ELSE counters.expires_at END
                RETURNING value""",
                {"key": key, "amount": int(amount), "expires": float(now) + float(ttl_seconds), "now": now},
            ).fetchone()
            self._writes += 1
            if self._writes % self._purge_every == 0:
                conn.execute("DELETE FROM counters WHERE expires_at <= ?", (float(now),))
        return int(row[0])

    def get(self, key: str, *, now: float) -> int:
        return self.get_many([key], now=now)[key]

    def get_many(self, keys: Sequence[str], *, now: float) -> dict[str, int]:
        result = dict.fromkeys(keys, 0)
        wanted = list(result)
        with self.db.read() as conn:
            for start in range(0, len(wanted), _BATCH):
                batch = wanted[start : start + _BATCH]
                for row in conn.execute(
                    f"SELECT key, value FROM counters WHERE key IN ({_placeholders(len(batch))}) "
                    "AND expires_at > ?",
                    (*batch, float(now)),
                ):
                    result[row["key"]] = int(row["value"])
        return result

    def reset(self, key: str) -> None:
        with self.db.write() as conn:
            conn.execute("DELETE FROM counters WHERE key = ?", (key,))
