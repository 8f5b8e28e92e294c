"""Searching a large local vector index through its snapshot (``vector_ann``): the graph's
candidates read from SQLite with the filter applied there and rescored exactly, or, when they
cannot serve the filter, an exact scan of the filtered rows. Used by ``vector_index``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragchat.adapters.local.sqlite_store.db import SqliteDatabase
from ragchat.adapters.local.vector_ann import AnnSnapshot
from ragchat.domain.models import SearchFilter

FloatArray = npt.NDArray[np.float32]
CANDIDATES = 64  # snapshot candidates read per search at least (then rescored exactly)
MAX_CANDIDATES = 4096  # beyond this many, a filter the snapshot cannot serve is scanned exactly
SMALL = 1024  # a snapshot of at most this many rows is read whole (only tests make them)
_BATCH = 500  # rids per SQL IN (...)
_PAGE = 8192  # rows per read of a scan


def filter_sql(flt: SearchFilter, *, by_rid: bool = False) -> tuple[str, list[Any]]:
    """The WHERE clause (and its parameters) of the switched-on rows of ``flt.partitions`` (the
    owners searched) within the filter.
    The unary ``+`` keeps SQLite off an index that would read far more rows than needed: with
    ``by_rid`` (the rows are looked up by rid) off every index, with a document off
    ``vectors_by_owner`` (``vectors_by_document`` finds just the document's rows)."""
    plus = "+" if by_rid else ""
    owners = flt.partitions
    owned = f"{plus}owner = ?" if len(owners) == 1 else f"{plus}owner IN ({','.join('?' * len(owners))})"
    where = [owned, f"{'+' if by_rid or flt.document_id is not None else ''}enabled = 1"]
    params: list[Any] = list(owners)
    if flt.collection is not None:
        where.append(f"{plus}collection = ?")
        params.append(flt.collection)
    if flt.document_id is not None:
        where.append(f"{plus}document_id = ?")
        params.append(flt.document_id)
    return " AND ".join(where), params


def score_rows(rows: Sequence[Any], query: FloatArray) -> list[tuple[str, float]]:
    """(note id, cosine) of rows with ``id`` and unit-length ``vector`` columns."""
    if not rows:
        return []
    vectors = np.frombuffer(b"".join(r["vector"] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    scores = vectors @ query
    return [(r["id"], float(score)) for r, score in zip(rows, scores, strict=True)]


def _best(scored: list[tuple[str, float]], k: int) -> list[tuple[str, float]]:
    return sorted(scored, key=lambda t: (-t[1], t[0]))[:k]


def rank_snapshot(
    db: SqliteDatabase,
    ann: AnnSnapshot,
    stale: frozenset[int],
    query: FloatArray,
    flt: SearchFilter,
    k: int,
) -> list[tuple[str, float]] | None:
    """The snapshot's best ``k`` within the filter, among the rows it holds in their current state
    (``stale`` rids are the delta's), scored exactly; None when even ``MAX_CANDIDATES``
    candidates do not give ``k`` (the caller scans instead)."""
    where, params = filter_sql(flt, by_rid=True)
    fetch = max(2 * k, CANDIDATES)
    small = len(ann) <= SMALL
    if small:  # a graph this small is read whole: exact, unless some rows cannot be reached
        fetch = max(fetch, len(ann))  # in it (HNSW can leave a few; a large graph just misses them)
    while True:
        keys = ann.search(query, fetch)
        if small and len(keys) < len(ann):
            return None
        rids = [int(key) for key in keys if int(key) not in stale]
        rows: list[Any] = []
        with db.read() as conn:
            for start in range(0, len(rids), _BATCH):
                batch = rids[start : start + _BATCH]
                marks = ",".join("?" * len(batch))
                sql = f"SELECT id, vector FROM vectors WHERE rid IN ({marks}) AND {where}"
                rows.extend(conn.execute(sql, (*batch, *params)))
        if len(rows) >= k or len(keys) < fetch:  # enough, or the snapshot has no more
            return _best(score_rows(rows, query), k)
        if fetch >= MAX_CANDIDATES:
            return None
        fetch = min(fetch * 4, MAX_CANDIDATES)


def scan(db: SqliteDatabase, query: FloatArray, flt: SearchFilter, k: int) -> list[tuple[str, float]]:
    """Exact top ``k`` over the filtered rows read from SQLite a page at a time (every row, the
    delta's too)."""
    where, params = filter_sql(flt)
    best: list[tuple[str, float]] = []
    with db.read() as conn:
        cursor = conn.execute(f"SELECT id, vector FROM vectors WHERE {where}", params)
        while page := cursor.fetchmany(_PAGE):
            best = _best(best + score_rows(page, query), k)
    return best
