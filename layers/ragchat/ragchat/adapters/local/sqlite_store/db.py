"""The shared SQLite file (:class:`SqliteDatabase`: pooled connections, serialized writes, migrations
on open) and the small helpers the stores share (opaque cursors, limits, batching)."""

from __future__ import annotations

import base64
import binascii
import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragchat.adapters.local.sqlite_store.schema import MIGRATIONS, SCHEMA_VERSION
from ragchat.domain.errors import ValidationError


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
        from ragchat.adapters.local.files import private_dir, private_file

        private_dir(self.path.parent)
        private_file(self.path)  # SQLite gives the -wal and -shm files the database's mode
        for suffix in ("-wal", "-shm"):
            sidecar = self.path.with_name(self.path.name + suffix)
            if sidecar.exists():  # made 0644 by an earlier version
                private_file(sidecar)
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


def encode_cursor(*key: Any) -> str:
    raw = json.dumps(list(key), separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, kinds: tuple[type, ...]) -> list[Any]:
    """Decode a cursor made by :func:`encode_cursor`; anything else is a 400."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError, RecursionError):  # RecursionError: deep nesting
        raise ValidationError("Invalid cursor") from None
    if (
        not isinstance(values, list)
        or len(values) != len(kinds)
        or not all(isinstance(v, k) and not isinstance(v, bool) for v, k in zip(values, kinds, strict=True))
        or not all(_encodable(v) for v in values)
    ):
        raise ValidationError("Invalid cursor")
    return values


def _encodable(value: Any) -> bool:
    """A text SQLite can bind (``"\\ud800"`` in JSON decodes to a lone surrogate, which it cannot)."""
    if not isinstance(value, str):
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_limit(limit: int) -> int:
    if limit < 1:
        raise ValidationError("limit must be at least 1")
    return int(limit)


def json_or_empty(value: str | None) -> dict[str, Any]:
    if not value:
        return {}
    loaded = json.loads(value)
    return loaded if isinstance(loaded, dict) else {}


def placeholders(n: int) -> str:
    return ",".join("?" * n)


BATCH = 500  # stay well under SQLite's bound-parameter limit
