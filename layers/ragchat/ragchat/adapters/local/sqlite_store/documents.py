"""``DocumentStore`` on SQLite: tables ``documents`` and ``notes`` (schema in :mod:`.schema`).

Documents list newest first by ``(created_at, id)``, notes of a document in chunk order; cursors encode
the last sort key of the page, so inserts between page requests neither duplicate nor skip items.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from ragchat.adapters.local.sqlite_store.db import (
    BATCH,
    SqliteDatabase,
    check_limit,
    decode_cursor,
    encode_cursor,
    json_or_empty,
    placeholders,
)
from ragchat.domain.clock import Clock, system_clock, utc_iso
from ragchat.domain.errors import Conflict
from ragchat.domain.models import Document, DocumentStatus, Note, Page
from ragchat.domain.uploads import UploadOutcome

_DOC_COLUMNS = (
    "id, owner, title, content_type, source, body_key, metadata, collection, status, error, "
    "chunk_count, enabled, split, created_at, updated_at, version, content_hash, size, "
    "chunks_total, chunks_done, indexing_since, switching"
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
    "version",
    "content_hash",
    "size",
    "chunks_total",
    "chunks_done",
    "indexing_since",
    "switching",
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
        metadata=json_or_empty(row["metadata"]),
        collection=row["collection"],
        status=DocumentStatus(row["status"]),
        error=row["error"],
        chunk_count=int(row["chunk_count"]),
        enabled=bool(row["enabled"]),
        split=bool(row["split"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        version=row["version"],
        content_hash=row["content_hash"],
        size=row["size"],
        chunks_total=row["chunks_total"],
        chunks_done=int(row["chunks_done"] or 0),
        indexing_since=row["indexing_since"],
        switching=row["switching"],
    )


def _row_to_note(row: sqlite3.Row) -> Note:
    return Note(
        id=row["id"],
        document_id=row["document_id"],
        chunk_index=int(row["chunk_index"]),
        text=row["text"],
        owner=row["owner"],
        collection=row["collection"],
        metadata=json_or_empty(row["metadata"]),
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
                f"INSERT OR REPLACE INTO documents ({_DOC_COLUMNS}) VALUES ({placeholders(22)})",
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
                    doc.version,
                    doc.content_hash,
                    doc.size,
                    doc.chunks_total,
                    int(doc.chunks_done),
                    doc.indexing_since,
                    doc.switching,
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
        limit = check_limit(limit)
        where = ["owner = ?"]
        params: list[Any] = [owner]
        if collection is not None:
            where.append("collection = ?")
            params.append(collection)
        if cursor:
            created_at, last_id = decode_cursor(cursor, (str, str))
            where.append("(created_at < ? OR (created_at = ? AND id < ?))")
            params += [created_at, created_at, last_id]
        sql = (
            f"SELECT {_DOC_COLUMNS} FROM documents WHERE {' AND '.join(where)} "
            "ORDER BY created_at DESC, id DESC LIMIT ?"
        )
        with self.db.read() as conn:
            rows = conn.execute(sql, (*params, limit + 1)).fetchall()
        items = [_row_to_document(r) for r in rows[:limit]]
        next_cursor = encode_cursor(items[-1].created_at, items[-1].id) if len(rows) > limit else None
        return Page(items=items, cursor=next_cursor)

    def unfinished(self) -> list[tuple[str, str]]:
        """Every document still ``PENDING``/``PROCESSING``, whatever its workspace, as (owner, id),
        oldest first: what ``ragchat serve`` resumes at start (one read of the table, at start only)."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT owner, id FROM documents WHERE status IN (?, ?) ORDER BY created_at, id",
                (str(DocumentStatus.PENDING), str(DocumentStatus.PROCESSING)),
            ).fetchall()
        return [(r["owner"], r["id"]) for r in rows]

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

    def find_by_content(self, owner: str, content_hash: str) -> Document | None:
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT {_DOC_COLUMNS} FROM documents WHERE owner = ? AND content_hash = ? "
                "ORDER BY created_at DESC, id DESC LIMIT 1",
                (owner, content_hash),
            ).fetchone()
        return _row_to_document(row) if row else None

    def record_upload(self, outcome: UploadOutcome, *, expires_at: float) -> None:
        o = outcome
        with self.db.write() as conn:
            conn.execute("DELETE FROM upload_outcomes WHERE expires_at <= ?", (self.clock(),))
            conn.execute(
                "INSERT OR REPLACE INTO upload_outcomes (owner, upload_id, uploader, document_id, duplicate, "
                "other_document, refused_status, refused_message, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    o.owner,
                    o.upload_id,
                    o.uploader,
                    o.document_id,
                    o.duplicate,
                    o.other_document,
                    o.refused_status,
                    o.refused_message,
                    expires_at,
                ),
            )

    def upload_outcome(self, owner: str, upload_id: str, *, now: float) -> UploadOutcome | None:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT uploader, document_id, duplicate, other_document, refused_status, refused_message "
                "FROM upload_outcomes "
                "WHERE owner = ? AND upload_id = ? AND expires_at > ?",
                (owner, upload_id, now),
            ).fetchone()
        if row is None:
            return None
        return UploadOutcome(
            owner,
            upload_id,
            row["uploader"],
            row["document_id"],
            bool(row["duplicate"]),
            bool(row["other_document"]),
            int(row["refused_status"]),
            row["refused_message"],
        )

    def add_chunks_done(self, owner: str, doc_id: str, version: str | None, count: int) -> Document | None:
        with self.db.write() as conn:
            cur = conn.execute(
                "UPDATE documents SET chunks_done = chunks_done + ?, updated_at = ? "
                "WHERE id = ? AND owner = ? AND (? IS NULL OR version IS NULL OR version = ?)",
                (int(count), self._now(), doc_id, owner, version, version),
            )
            if cur.rowcount == 0:
                return None
            row = conn.execute(f"SELECT {_DOC_COLUMNS} FROM documents WHERE id = ?", (doc_id,)).fetchone()
        return _row_to_document(row)

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
                f"INSERT OR REPLACE INTO notes ({_NOTE_COLUMNS}) VALUES ({placeholders(8)})", rows
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
            for start in range(0, len(wanted), BATCH):
                batch = wanted[start : start + BATCH]
                for row in conn.execute(
                    # ``+owner``: look the ids up by primary key (a plain ``owner = ?`` lets the
                    # planner scan the owner's index: every note of the owner, ~10 ms at 10k notes)
                    f"SELECT {_NOTE_COLUMNS} FROM notes "
                    f"WHERE +owner = ? AND id IN ({placeholders(len(batch))})",
                    (owner, *batch),
                ):
                    found[row["id"]] = _row_to_note(row)
        return [found[i] for i in wanted if i in found]

    def get_notes_and_documents(
        self, owner: str, note_ids: Sequence[str], document_ids: Sequence[str]
    ) -> tuple[list[Note], list[Document]]:
        notes = self.get_notes(owner, note_ids)
        wanted = list(dict.fromkeys(document_ids))[:BATCH]  # a turn's sources: a handful of documents
        docs: dict[str, Document] = {}
        if wanted:
            with self.db.read() as conn:
                for row in conn.execute(
                    f"SELECT {_DOC_COLUMNS} FROM documents "  # by primary key, as in get_notes
                    f"WHERE +owner = ? AND id IN ({placeholders(len(wanted))})",
                    (owner, *wanted),
                ):
                    docs[row["id"]] = _row_to_document(row)
        return notes, [docs[i] for i in wanted if i in docs]

    def list_notes(
        self, owner: str, *, document_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Note]:
        limit = check_limit(limit)
        if document_id is not None:
            where = "owner = ? AND document_id = ?"
            params: list[Any] = [owner, document_id]
            if cursor:
                chunk_index, last_id = decode_cursor(cursor, (int, str))
                where += " AND (chunk_index > ? OR (chunk_index = ? AND id > ?))"
                params += [chunk_index, chunk_index, last_id]
            order = "chunk_index ASC, id ASC"
        else:
            where = "owner = ?"
            params = [owner]
            if cursor:
                created_at, last_id = decode_cursor(cursor, (str, str))
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
                encode_cursor(last.chunk_index, last.id)
                if document_id is not None
                else encode_cursor(last.created_at, last.id)
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

    def delete_notes_of_document(self, owner: str, doc_id: str, *, limit: int | None = None) -> list[str]:
        with self.db.write() as conn:
            ids = [
                r["id"]
                for r in conn.execute(
                    "SELECT id FROM notes WHERE owner = ? AND document_id = ?"
                    " ORDER BY chunk_index, id LIMIT ?",
                    (owner, doc_id, -1 if limit is None else limit),
                )
            ]
            if limit is None:
                conn.execute("DELETE FROM notes WHERE owner = ? AND document_id = ?", (owner, doc_id))
            else:
                conn.executemany("DELETE FROM notes WHERE id = ?", [(i,) for i in ids])
        return ids
