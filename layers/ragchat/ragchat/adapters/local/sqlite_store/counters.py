"""``Counters`` on SQLite: table ``counters`` (schema in :mod:`.schema`)."""

from __future__ import annotations

from collections.abc import Sequence

from ragchat.adapters.local.sqlite_store.db import BATCH, SqliteDatabase, placeholders

# Add ``amount`` to a live counter, or start it afresh (``amount``, new expiry) when it is missing or
# expired; the callers append RETURNING (and increment_up_to its limit check).
_ADD = """INSERT INTO counters (key, value, expires_at) VALUES (:key, :amount, :expires)
    ON CONFLICT (key) DO UPDATE SET
        value = CASE WHEN counters.expires_at <= :now THEN :amount ELSE counters.value + :amount END,
        expires_at = CASE WHEN counters.expires_at <= :now THEN :expires ELSE counters.expires_at END"""


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
                _ADD + " RETURNING value",
                {"key": key, "amount": int(amount), "expires": float(now) + float(ttl_seconds), "now": now},
            ).fetchone()
            self._writes += 1
            if self._writes % self._purge_every == 0:
                conn.execute("DELETE FROM counters WHERE expires_at <= ?", (float(now),))
        return int(row[0])

    def increment_up_to(
        self, key: str, *, limit: int, amount: int = 1, ttl_seconds: float, now: float
    ) -> int | None:
        if amount > limit:
            return None
        with self.db.write() as conn:
            # The upsert's WHERE leaves a live counter that would go over ``limit`` untouched, and
            # then RETURNING yields no row: check and add are one statement.
            row = conn.execute(
                _ADD
                + " WHERE counters.expires_at <= :now OR counters.value + :amount <= :limit RETURNING value",
                {
                    "key": key,
                    "amount": int(amount),
                    "expires": float(now) + float(ttl_seconds),
                    "now": now,
                    "limit": int(limit),
                },
            ).fetchone()
        return None if row is None else int(row[0])

    def get(self, key: str, *, now: float) -> int:
        return self.get_many([key], now=now)[key]

    def get_many(self, keys: Sequence[str], *, now: float) -> dict[str, int]:
        result = dict.fromkeys(keys, 0)
        wanted = list(result)
        with self.db.read() as conn:
            for start in range(0, len(wanted), BATCH):
                batch = wanted[start : start + BATCH]
                for row in conn.execute(
                    f"SELECT key, value FROM counters WHERE key IN ({placeholders(len(batch))}) "
                    "AND expires_at > ?",
                    (*batch, float(now)),
                ):
                    result[row["key"]] = int(row["value"])
        return result

    def reset(self, key: str) -> None:
        with self.db.write() as conn:
            conn.execute("DELETE FROM counters WHERE key = ?", (key,))

    def reset_prefix(self, prefix: str) -> int:
        """Remove every counter whose key starts with ``prefix``; how many went."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        with self.db.write() as conn:
            cur = conn.execute("DELETE FROM counters WHERE key LIKE ? ESCAPE '\\'", (escaped + "%",))
            return int(cur.rowcount)

    def put_new(self, key: str, value: int, *, ttl_seconds: float, now: float) -> bool:
        with self.db.write() as conn:
            # one statement: a live row is left as it is (the upsert's WHERE), an expired one replaced
            row = conn.execute(
                "INSERT INTO counters (key, value, expires_at) VALUES (:key, :value, :expires) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at "
                "WHERE counters.expires_at <= :now RETURNING value",
                {
                    "key": key,
                    "value": int(value),
                    "expires": float(now) + float(ttl_seconds),
                    "now": float(now),
                },
            ).fetchone()
        return row is not None

    def put(self, key: str, value: int, *, ttl_seconds: float, now: float) -> None:
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO counters (key, value, expires_at) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
                (key, int(value), float(now) + float(ttl_seconds)),
            )
