"""Precomputed evidence vectors in the local SQLite file (``EvidenceStore``).

A question embeds, besides itself, the texts its decision and its answer read: the two-sentence,
title-prefixed passages of the top chunks (``ragchat.domain.answerability``) and the sentences of the
hits (``ragchat.domain.extractive``). They depend only on the chunk's text and its document's title,
so they are embedded once after ingestion (:mod:`ragchat.services.evidence`) and read here by chunk.

Rows are ``(chunk_id, key, vector)``: ``key`` is a 16-byte BLAKE2b digest of the embedding model's
key (its id, plus the precision of its weights when not fp32: ``EMBEDDER_PRECISION=int8`` vectors
never mix with fp32 ones) and the exact text, so a lookup can only ever return the vector of that
very text (a renamed document's passages simply miss and are embedded at question time). Vectors are
stored as int8 with a float32 scale (388 bytes for MiniLM's 384 dimensions; the cosine error is
below 0.005). Triggers in the schema delete a chunk's rows with its vector row or when its text
changes, and a document's ``evidence_documents`` marker with the document. The marker names the
model key it was written for, so a document warmed with one precision is warmed again for the other
(the texts already stored for it are not embedded again).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np

from ragchat.adapters.local.sqlite_store.db import SqliteDatabase

_BATCH = 500  # chunk ids per IN (...) query


def encode(vector: Sequence[float]) -> bytes:
    """int8 codes after a float32 scale (the largest magnitude / 127)."""
    arr = np.asarray(vector, dtype=np.float32).reshape(-1)
    peak = float(np.max(np.abs(arr))) if arr.size else 0.0
    scale = peak / 127.0 if peak > 0 else 1.0
    codes = np.clip(np.rint(arr / scale), -127, 127).astype(np.int8)
    return bytes(np.float32(scale).tobytes()) + bytes(codes.tobytes())


def decode(blob: bytes) -> list[float]:
    scale = float(np.frombuffer(blob[:4], dtype=np.float32)[0])
    values: list[float] = (np.frombuffer(blob[4:], dtype=np.int8).astype(np.float32) * scale).tolist()
    return values


class SqliteEvidenceStore:
    """Evidence vectors by chunk, for one embedding model (``model_id``, with its precision when not
    fp32, is part of every key)."""

    def __init__(self, db: SqliteDatabase, model_id: str) -> None:
        self.db = db
        self.model_id = model_id
        # a marker written before markers named their model: its vectors are under the bare model id
        self._unnamed = model_id.split("@", 1)[0]

    def key(self, text: str) -> bytes:
        return hashlib.blake2b(f"{self.model_id}\0{text}".encode(), digest_size=16).digest()

    def vectors_of(self, chunk_ids: Sequence[str], texts: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors of ``texts`` among ``chunk_ids``' rows (texts without one are absent)."""
        wanted = {self.key(t): t for t in texts}
        ids = list(dict.fromkeys(chunk_ids))
        if not wanted or not ids:
            return {}
        out: dict[str, list[float]] = {}
        with self.db.read() as conn:
            for start in range(0, len(ids), _BATCH):
                batch = ids[start : start + _BATCH]
                marks = ",".join("?" * len(batch))
                sql = f"SELECT key, vector FROM evidence_vectors WHERE chunk_id IN ({marks})"
                rows = conn.execute(sql, batch)
                for row in rows:
                    text = wanted.get(bytes(row["key"]))
                    if text is not None and text not in out:
                        out[text] = decode(row["vector"])
        return out

    def warmed_chunks(self, chunk_ids: Sequence[str]) -> set[str]:
        """Those of ``chunk_ids`` whose document has all its evidence for its current version and
        title (:meth:`mark`), and those without a document (never warmed: embedded on request)."""
        ids = list(dict.fromkeys(chunk_ids))
        out: set[str] = set()
        with self.db.read() as conn:
            for start in range(0, len(ids), _BATCH):
                batch = ids[start : start + _BATCH]
                marks = ",".join("?" * len(batch))
                sql = f"""SELECT v.id FROM vectors v
                    LEFT JOIN documents d ON d.owner = v.owner AND d.id = v.document_id
                    LEFT JOIN evidence_documents e ON e.owner = v.owner AND e.document_id = v.document_id
                    WHERE v.id IN ({marks}) AND (v.document_id IS NULL OR (e.document_id IS NOT NULL
                        AND e.version IS d.version AND e.title IS d.title
                        AND COALESCE(e.model, ?) = ?))"""
                params = [*batch, self._unnamed, self.model_id]
                out.update(str(row["id"]) for row in conn.execute(sql, params))
        return out

    def put(self, vectors: Mapping[str, Sequence[tuple[str, Sequence[float]]]]) -> int:
        """Store ``chunk_id → [(text, vector), …]``; a chunk no longer indexed gets nothing (its
        vector row went while the texts were embedded). Returns the rows written."""
        rows = [
            (self.key(text), encode(vector), chunk_id)
            for chunk_id, pairs in vectors.items()
            for text, vector in pairs
        ]
        if not rows:
            return 0
        with self.db.write() as conn:
            before = conn.total_changes
            conn.executemany(
                """INSERT OR IGNORE INTO evidence_vectors (chunk_id, key, vector)
                SELECT id, ?, ? FROM vectors WHERE id = ?""",
                rows,
            )
            return int(conn.total_changes - before)

    def mark(self, owner: str, document_id: str, version: str | None, title: str) -> None:
        """Record that ``document_id`` (this content version and title) has all its evidence for
        this store's model key."""
        with self.db.write() as conn:  # nothing for a document deleted meanwhile
            conn.execute(
                """INSERT INTO evidence_documents (owner, document_id, version, title, model)
                SELECT owner, id, ?, ?, ? FROM documents WHERE owner = ? AND id = ?
                ON CONFLICT (owner, document_id) DO UPDATE SET
                    version = excluded.version, title = excluded.title, model = excluded.model""",
                (version, title, self.model_id, owner, document_id),
            )

    def unwarmed(self) -> list[tuple[str, str]]:
        """READY documents whose evidence is missing or was computed for another version, title or
        model key."""
        with self.db.read() as conn:
            rows = conn.execute(
                """SELECT d.owner, d.id FROM documents d
                LEFT JOIN evidence_documents e ON e.owner = d.owner AND e.document_id = d.id
                WHERE d.status = 'READY'
                    AND (e.document_id IS NULL OR e.version IS NOT d.version OR e.title IS NOT d.title
                        OR COALESCE(e.model, ?) != ?)
                ORDER BY d.created_at, d.id""",
                (self._unnamed, self.model_id),
            ).fetchall()
        return [(r["owner"], r["id"]) for r in rows]
