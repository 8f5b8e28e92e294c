"""``ConversationStore`` on SQLite: tables ``conversations`` and ``messages`` (schema in :mod:`.schema`).

Conversations list most recently updated first; messages in creation order ``(created_at, id)``.
``message_count`` is counted from ``messages`` on read, so it can never drift.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ragchat.adapters.local.sqlite_store.db import (
    SqliteDatabase,
    check_limit,
    decode_cursor,
    encode_cursor,
    placeholders,
)
from ragchat.domain.clock import Clock, system_clock, utc_iso
from ragchat.domain.errors import Conflict, NotFound
from ragchat.domain.models import Conversation, Feedback, Message, Page, source_from_json, source_json

_CONV_COLUMNS = (
    "id, owner, title, collection, document_id, persona, summary_cursor, last_summary_id, "
    "created_at, updated_at, workspace"
)
_CONV_CHANGEABLE = {"title", "collection", "document_id", "persona", "summary_cursor", "last_summary_id"}
_MSG_COLUMNS = (
    "id, conversation_id, owner, role, content, sources, model, client_message_id, interrupted, created_at, "
    "feedback, query"
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
        workspace=row["workspace"],
    )


def _row_to_message(row: sqlite3.Row) -> Message:
    sources = None
    if row["sources"] is not None:
        sources = [source_from_json(s) for s in json.loads(row["sources"])]
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
        feedback=row["feedback"],
        query=row["query"],
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
                    f"INSERT INTO conversations ({_CONV_COLUMNS}) VALUES ({placeholders(11)})",
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
                        conv.workspace,
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

    def find_conversation(self, conv_id: str) -> Conversation | None:
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT {_CONV_COLUMNS}, {_COUNT} FROM conversations c WHERE id = ?", (conv_id,)
            ).fetchone()
        return _row_to_conversation(row) if row else None

    def list_conversations(
        self, owner: str, *, limit: int = 50, cursor: str | None = None
    ) -> Page[Conversation]:
        limit = check_limit(limit)
        where = "owner = ?"
        params: list[Any] = [owner]
        if cursor:
            updated_at, last_id = decode_cursor(cursor, (str, str))
            where += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
            params += [updated_at, updated_at, last_id]
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_CONV_COLUMNS}, {_COUNT} FROM conversations c WHERE {where} "
                "ORDER BY updated_at DESC, id DESC LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
        items = [_row_to_conversation(r) for r in rows[:limit]]
        next_cursor = encode_cursor(items[-1].updated_at, items[-1].id) if len(rows) > limit else None
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
        sources = None if msg.sources is None else json.dumps([source_json(s) for s in msg.sources])
        with self.db.write() as conn:
            found = conn.execute(
                "SELECT 1 FROM conversations WHERE id = ? AND owner = ?", (msg.conversation_id, msg.owner)
            ).fetchone()
            if found is None:
                raise NotFound("Conversation not found")
            try:
                conn.execute(
                    f"INSERT INTO messages ({_MSG_COLUMNS}) VALUES ({placeholders(12)})",
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
                        msg.feedback,
                        msg.query,
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
        limit = check_limit(limit)
        where = "conversation_id = ? AND owner = ?"
        params: list[Any] = [conv_id, owner]
        if cursor:
            created_at, last_id = decode_cursor(cursor, (str, str))
            where += " AND (created_at > ? OR (created_at = ? AND id > ?))"
            params += [created_at, created_at, last_id]
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_MSG_COLUMNS} FROM messages WHERE {where} ORDER BY created_at ASC, id ASC LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
        items = [_row_to_message(r) for r in rows[:limit]]
        next_cursor = encode_cursor(items[-1].created_at, items[-1].id) if len(rows) > limit else None
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

    def set_feedback(
        self, owner: str, conv_id: str, message_id: str, feedback: Feedback | None
    ) -> Message | None:
        with self.db.write() as conn:
            conn.execute(
                "UPDATE messages SET feedback = ? WHERE id = ? AND conversation_id = ? AND owner = ?",
                (feedback, message_id, conv_id, owner),
            )
            row = conn.execute(
                f"SELECT {_MSG_COLUMNS} FROM messages WHERE id = ? AND conversation_id = ? AND owner = ?",
                (message_id, conv_id, owner),
            ).fetchone()
        return _row_to_message(row) if row else None
