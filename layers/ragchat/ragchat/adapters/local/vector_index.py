"""``VectorIndex`` for the local backend: exact cosine search over a numpy matrix, kept in SQLite.

Storage: the table ``vectors`` of the shared SQLite file (see ``sqlite_store.schema.MIGRATIONS``) holds each
note's unit-length float32 vector, its text and its filterable metadata; the FTS5 table
``vectors_fts`` indexes the same texts for keyword (BM25) search and is kept in sync by triggers.

Search: the vectors are loaded lazily into one contiguous float32 matrix; a search is one
matrix-vector product, a boolean mask for the filter (owner, enabled, collection, document — cached
per filter until the next write) and ``argpartition`` for the top k. Every write bumps a change
counter (``index_state.version``) in the same transaction; before searching, the index compares it
with the version its matrix was built from, so writes from another process (``ragchat ingest``
while ``ragchat serve`` runs) are noticed and the matrix is reloaded. Writes made through this
object update the matrix in place instead.

Large indexes (from ``ann_min_rows`` rows, 50,000 by default): the rows are also held by an
approximate HNSW snapshot in a memory-mapped file (:mod:`.vector_ann`), and the matrix holds only
the rows the snapshot does not (the delta), so opening the index reads neither the vectors nor
their ids; it starts reading the snapshot's file into the page cache in the background
(``vector_ann.prefetch``), so that the first searches after a start do not wait on its pages one
fault at a time. A search takes the snapshot's nearest candidates, reads them from SQLite with the
filter applied there and scores them exactly (the scores are exact cosines, the candidate set is
approximate), and merges them with the delta's exact ranking. When too few candidates pass the
filter, or a document is named, the filtered rows are scanned exactly from SQLite instead.

Hybrid search: BM25 over FTS5 (filters applied in SQL) and the vector ranking are fused by
reciprocal rank fusion (``score`` = fused score). Every hybrid hit also carries ``similarity``, the
cosine similarity of its vector to the query, which is what similarity gating must use.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragchat.adapters.local import keyword_terms, vector_ann, vector_ann_search
from ragchat.adapters.local.sqlite_store.db import SqliteDatabase
from ragchat.adapters.local.vector_matrix import Matrix, load_matrix
from ragchat.domain.models import Hit, SearchFilter, VectorRecord
from ragchat.domain.retrieval import rrf_scores

logger = logging.getLogger(__name__)
_TOKEN = re.compile(r"\w+", re.UNICODE)
_MAX_QUERY_TOKENS = 64
_F32 = np.float32
_BATCH = 500
_LOAD_ROWS = 8192  # rows per read when the matrix is (re)loaded
_RANK_DEPTH = 20  # what hybrid search takes from the vector ranking (max(k * 4, 20) for k ≤ 5)

FloatArray = npt.NDArray[np.float32]
_VECDOT: Any = getattr(np, "vecdot", None)
#: Default for ``LocalVectorIndex(blas_min_rows=...)``: from this many rows scores go through BLAS.
BLAS_MIN_ROWS = 50_000  # see _scores
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


def _scores(vectors: FloatArray, query: FloatArray, blas_min_rows: int = BLAS_MIN_ROWS) -> FloatArray:
    """Dot product of every row with ``query`` (exact, float32).

    Below ``blas_min_rows`` rows: ``vecdot``, row by row on the calling thread (numpy >= 2;
    ``einsum``, also without BLAS, on older numpy), not ``vectors @ query``: that is a BLAS gemv,
    which OpenBLAS spreads over every core, and for a small matrix the hand-off to its threads costs
    more than the product (measured on 2 cores, 10k x 384: 0.4-0.9 ms either way on an idle machine,
    but up to 8 ms through BLAS when the other core was busy, e.g. with a concurrent request).
    From ``blas_min_rows`` rows the product is memory-bound and BLAS's threads add bandwidth
    (100k x 384 on an idle machine: 9 ms vs 17 ms on one thread), so it goes through BLAS."""
    if vectors.shape[0] >= blas_min_rows:
        product: FloatArray = vectors @ query
        return product
    if _VECDOT is not None:
        out: FloatArray = _VECDOT(vectors, query)
        return out
    result: FloatArray = np.einsum("ij,j->i", vectors, query)
    return result


# set_enabled's statements (their WHERE clause is built from fixed fragments only)
_SELECT_IDS = "SELECT id FROM vectors WHERE "
_UPDATE_ENABLED = "UPDATE vectors SET enabled = ? WHERE "


class LocalVectorIndex:
    """``VectorIndex`` persisted in the shared SQLite database (see the module docstring)."""

    def __init__(
        self,
        db: SqliteDatabase,
        *,
        dimension: int,
        blas_min_rows: int = BLAS_MIN_ROWS,
        ann_min_rows: int | None = vector_ann.ANN_MIN_ROWS,
        ann_merge_rows: int = vector_ann.ANN_MERGE_ROWS,
    ) -> None:
        """``ann_min_rows``: from this many rows an approximate snapshot is kept (``None``: never;
        an existing one is then ignored); ``ann_merge_rows``: delta size that writes the next one."""
        if dimension < 1:
            raise ValueError("dimension must be positive")
        self.db = db
        self.dimension = int(dimension)
        self._blas_min_rows = blas_min_rows
        self._ann_min_rows = ann_min_rows
        self._ann_merge_rows = max(1, int(ann_merge_rows))
        self._lock = threading.RLock()
        self._matrix: Matrix | None = None  # every row, or with a snapshot only the delta
        self._version: int | None = None  # index_state.version the matrix reflects
        self._ann: vector_ann.AnnSnapshot | None = None  # the snapshot the matrix goes with
        self._ann_stale: frozenset[int] = frozenset()  # rids the snapshot holds in an old state
        self._ann_failed: int | None = None  # a generation whose file could not be opened
        self._count_cache: tuple[tuple[int | None, str], int] | None = None  # with a snapshot
        self._df_cache: dict[str, int] = {}  # keyword document frequencies at _df_version
        self._df_version: int | None = None
        self._stems = keyword_terms.Stems()
        self._last_rank: tuple[Any, list[tuple[str, float]]] | None = None
        self._prefetched = 0  # the snapshot generation whose file was last prefetched
        self._check_stored_dimension()
        with self.db.read() as conn:  # the snapshot's file is read while the caller goes on
            self._prefetch(vector_ann.ann_state(conn)[0])

    # ------------------------------------------------------------------ helpers
    def _check_stored_dimension(self) -> None:
        with self.db.read() as conn:
            row = conn.execute("SELECT length(vector) AS n FROM vectors LIMIT 1").fetchone()
        if row is not None and row["n"] != self.dimension * 4:
            raise ValueError(
                f"the vector index in {self.db.path} holds {row['n'] // 4}-dimensional vectors but the "
                f"embedder produces {self.dimension}-dimensional ones; re-ingest into a fresh "
                "RAGCHAT_DATA_DIR (or delete its ragchat.db) after changing the embedding model"
            )

    def _unit(self, vector: Sequence[float], what: str) -> FloatArray:
        arr = np.asarray(vector, dtype=_F32).reshape(-1)
        if arr.shape[0] != self.dimension:
            raise ValueError(f"{what} has dimension {arr.shape[0]}, expected {self.dimension}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{what} contains NaN or infinite values")
        norm = float(np.linalg.norm(arr))
        return arr / norm if norm > 0 else arr

    @staticmethod
    def _read_version(conn: Any) -> int:
        return int(conn.execute("SELECT value FROM index_state WHERE key = 'version'").fetchone()[0])

    @staticmethod
    def _bump(conn: Any) -> int:
        """Increment the change counter inside the current write; returns the version before it."""
        before = LocalVectorIndex._read_version(conn)
        conn.execute("UPDATE index_state SET value = value + 1 WHERE key = 'version'")
        return before

    def _after_write(self, before: int) -> bool:
        """True when the in-memory matrix may be patched in place (it was current before the write
        and holds every row: with a snapshot, which rows the delta holds is SQLite's to say)."""
        if self._matrix is not None and self._version == before and self._ann is None:
            self._version = before + 1
            return True
        self._matrix = None
        self._version = None
        return False

    def _fresh(self) -> Matrix:
        """The matrix, reloaded if the table changed since it was built (another process wrote),
        with the snapshot current at the same version."""
        with self.db.read() as conn:
            version = self._read_version(conn)
            if self._matrix is not None and version == self._version:
                return self._matrix
            generation, max_rid = vector_ann.ann_state(conn)
            self._prefetch(generation)
            ann = self._open_snapshot(generation)
            if ann is None:
                matrix = load_matrix(conn, self.dimension, str(self.db.path), _LOAD_ROWS)
                stale: frozenset[int] = frozenset()
            else:
                matrix = load_matrix(conn, self.dimension, str(self.db.path), _LOAD_ROWS, after_rid=max_rid)
                stale = frozenset(int(r[0]) for r in conn.execute("SELECT rid FROM vectors_ann_stale"))
        self._matrix, self._version, self._ann, self._ann_stale = matrix, version, ann, stale
        self._last_rank = None
        return matrix

    def _prefetch(self, generation: int) -> None:
        """Start reading a snapshot this index will search into the page cache, once per file."""
        if generation == 0 or self._ann_min_rows is None or generation == self._prefetched:
            return
        self._prefetched = generation
        vector_ann.prefetch(vector_ann.snapshot_path(self.db.path, generation))

    def _open_snapshot(self, generation: int) -> vector_ann.AnnSnapshot | None:
        if generation == 0 or self._ann_min_rows is None or generation == self._ann_failed:
            return None
        if self._ann is not None and self._ann.generation == generation:
            return self._ann
        path = vector_ann.snapshot_path(self.db.path, generation)
        try:
            return vector_ann.AnnSnapshot(path, generation, self.dimension)
        except Exception as exc:  # missing or damaged: exact search until the next refresh replaces it
            logger.warning("vector snapshot %s unusable (%s); searching exactly", path, exc)
            self._ann_failed = generation
            return None

    def _maintain(self) -> None:
        """Write the next snapshot if one is due (outside this object's lock: searches go on). The
        write that called it has committed: a failure here is logged, the delta stays exact."""
        if self._ann_min_rows is None or not self.db.path.parent.is_dir():
            return
        try:
            vector_ann.refresh(
                self.db, self.dimension, min_rows=self._ann_min_rows, merge_rows=self._ann_merge_rows
            )
        except Exception:
            logger.exception("could not write the vector index's next snapshot; searching its delta exactly")

    def _rank(self, matrix: Matrix, query: FloatArray, flt: SearchFilter, k: int) -> list[tuple[str, float]]:
        """Top ``k`` (note id, cosine) within the filter, best first. Without a snapshot exact: every
        selected row is scored; with one see the module docstring. The last ranking (at least
        ``_RANK_DEPTH`` deep) is kept for the same matrix, query and filter: a question's vector
        search and its hybrid search score the matrix once."""
        key = (id(matrix), self._version, query.tobytes(), flt)
        last = self._last_rank
        if last is not None and last[0] == key and len(last[1]) >= k:
            return last[1][:k]
        depth = max(k, _RANK_DEPTH)
        approximate = None
        if self._ann is not None and flt.document_id is None:
            approximate = vector_ann_search.rank_snapshot(
                self.db, self._ann, self._ann_stale, query, flt, depth
            )
        if self._ann is not None and approximate is None:  # a document's rows are few and indexed,
            ranked = vector_ann_search.scan(self.db, query, flt, depth)  # or the candidates missed the filter
        else:
            exact = self._rank_all(matrix, query, flt, depth)
            ranked = [(matrix.ids[row] or "", score) for row, score in exact]
            if approximate is not None:
                ranked = sorted(ranked + approximate, key=lambda t: (-t[1], t[0]))[:depth]
        self._last_rank = (key, ranked)
        return ranked[:k]

    def _rank_all(
        self, matrix: Matrix, query: FloatArray, flt: SearchFilter, k: int
    ) -> list[tuple[int, float]]:
        mask, rows = matrix.mask(flt)
        count = int(rows.shape[0])
        if k < 1 or count == 0:
            return []
        n = matrix.n
        if count * 8 < n:  # small selection: gather its rows instead of scoring everything
            scores = _scores(matrix.vectors[rows], query, self._blas_min_rows)
            candidates = rows
        else:
            scores = _scores(matrix.vectors[:n], query, self._blas_min_rows)
            if count < n:
                scores[~mask] = -np.inf
            candidates = None
        kk = min(k, count)
        total = scores.shape[0]
        top = np.argpartition(scores, total - kk)[total - kk :] if kk < total else np.arange(total)
        top = top[np.lexsort((top, -scores[top]))]  # by score desc, then row for stable ties
        if candidates is not None:
            return [(int(candidates[i]), float(scores[i])) for i in top]
        return [(int(i), float(scores[i])) for i in top if mask[i]]

    def _texts(self, ids: Sequence[str]) -> dict[str, tuple[str, str | None, int, str | None, str]]:
        out: dict[str, tuple[str, str | None, int, str | None, str]] = {}
        with self.db.read() as conn:
            for start in range(0, len(ids), _BATCH):
                batch = list(ids[start : start + _BATCH])
                marks = ",".join("?" * len(batch))
                for r in conn.execute(
                    "SELECT id, text, document_id, chunk_index, collection, owner FROM vectors "
                    f"WHERE id IN ({marks})",
                    batch,
                ):
                    row = (r["text"], r["document_id"], int(r["chunk_index"]), r["collection"], r["owner"])
                    out[r["id"]] = row
        return out

    def _hits(self, scored: Sequence[tuple[str, float, float | None]]) -> list[Hit]:
        texts = self._texts([s[0] for s in scored])
        hits = []
        for id_, score, similarity in scored:
            found = texts.get(id_)
            if found is None:  # deleted by another process between ranking and reading
                continue
            text, document_id, chunk_index, collection, owner = found
            hits.append(
                Hit(
                    id=id_,
                    score=score,
                    text=text,
                    document_id=document_id,
                    chunk_index=chunk_index,
                    collection=collection,
                    similarity=similarity,
                    owner=owner,
                )
            )
        return hits

    # ------------------------------------------------------------------ VectorIndex
    def upsert(self, records: Sequence[VectorRecord]) -> None:
        if not records:
            return
        prepared = [(r, self._unit(r.vector, f"vector {r.id!r}")) for r in records]
        rows = [
            (r.id, r.owner, r.document_id, int(r.chunk_index), r.collection, int(bool(r.enabled)), r.text,
             vec.tobytes())
            for r, vec in prepared
        ]  # fmt: skip
        with self._lock:
            with self.db.write() as conn:
                before = self._bump(conn)
                conn.executemany(
                    """INSERT INTO vectors
                        (id, owner, document_id, chunk_index, collection, enabled, text, vector)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET
                        owner = excluded.owner, document_id = excluded.document_id,
                        chunk_index = excluded.chunk_index, collection = excluded.collection,
                        enabled = excluded.enabled, text = excluded.text, vector = excluded.vector""",
                    rows,
                )
            if self._after_write(before):
                assert self._matrix is not None
                for r, vec in prepared:
                    self._matrix.put(r.id, vec, r.owner, r.document_id, r.collection, bool(r.enabled))
        self._maintain()

    def search(self, vector: Sequence[float], flt: SearchFilter, k: int) -> list[Hit]:
        query = self._unit(vector, "query vector")
        with self._lock:
            matrix = self._fresh()
            scored = [(id_, score, score) for id_, score in self._rank(matrix, query, flt, k)]
        return self._hits(scored)

    def hybrid_search(self, text: str, vector: Sequence[float], flt: SearchFilter, k: int) -> list[Hit]:
        query = self._unit(vector, "query vector")
        if k < 1:
            return []
        depth = max(k * 4, 20)  # candidates taken from each ranking before fusing
        with self._lock:
            matrix = self._fresh()
            vector_ranked = self._rank(matrix, query, flt, depth)
            keyword_ids = self._keyword(text, flt, depth)
            fused = rrf_scores([[id_ for id_, _ in vector_ranked], keyword_ids])[:k]
            similarities = self._similarities(matrix, [id_ for id_, _ in fused], query, dict(vector_ranked))
            scored = [(id_, float(score), similarities.get(id_)) for id_, score in fused]
        return self._hits(scored)

    def _similarities(
        self, matrix: Matrix, ids: Sequence[str], query: FloatArray, known: dict[str, float]
    ) -> dict[str, float]:
        """Cosine of each note's vector to the query: ranked, in the matrix, or read from SQLite."""
        out: dict[str, float] = {}
        missing = []
        for id_ in ids:
            row = matrix.row_of.get(id_)
            if id_ in known:
                out[id_] = known[id_]
            elif row is not None:
                out[id_] = float(matrix.vectors[row] @ query)
            else:
                missing.append(id_)
        if missing and self._ann is not None:
            with self.db.read() as conn:
                rows = conn.execute(
                    f"SELECT id, vector FROM vectors WHERE id IN ({','.join('?' * len(missing))})", missing
                ).fetchall()
            out.update(vector_ann_search.score_rows(rows, query))
        return out

    def _keyword(self, text: str, flt: SearchFilter, limit: int) -> list[str]:
        """BM25 ranking of the owner's enabled notes within the filter (FTS5, best first)."""
        tokens = list(dict.fromkeys(t.lower() for t in _TOKEN.findall(text)))[:_MAX_QUERY_TOKENS]
        tokens = self._informative(tokens)
        if not tokens:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)
        owners = flt.partitions
        where = ["vectors_fts MATCH ?", f"v.owner IN ({','.join('?' * len(owners))})", "v.enabled = 1"]
        params: list[Any] = [match, *owners]
        if flt.collection is not None:
            where.append("v.collection = ?")
            params.append(flt.collection)
        if flt.document_id is not None:
            where.append("v.document_id = ?")
            params.append(flt.document_id)
        sql = (
            "SELECT v.id FROM vectors_fts JOIN vectors v ON v.rid = vectors_fts.rowid "
            f"WHERE {' AND '.join(where)} ORDER BY bm25(vectors_fts), v.id LIMIT ?"
        )
        with self.db.read() as conn:
            return [r["id"] for r in conn.execute(sql, (*params, int(limit)))]

    def _informative(self, tokens: list[str]) -> list[str]:
        """The query words worth looking up in a large index (:mod:`.keyword_terms`): held by it, in
        at most half its notes, rarest first within a budget of matching notes. Document
        frequencies come from ``vectors_vocab`` and are cached until the index changes."""
        matrix = self._matrix
        total = len(matrix.row_of) if matrix is not None else 0
        if self._ann is not None:  # about: the snapshot's rows, less the stale ones, plus the delta
            total += len(self._ann) - len(self._ann_stale)
        if total < keyword_terms.PRUNE_MIN_NOTES or not tokens:
            return tokens
        if self._df_version != self._version:
            self._df_cache, self._df_version = {}, self._version
        stems = self._stems(tokens)
        unknown = list(dict.fromkeys(t for terms in stems for t in terms if t not in self._df_cache))
        if unknown:
            with self.db.read() as conn:
                for t in unknown:
                    row = conn.execute("SELECT doc FROM vectors_vocab WHERE term = ?", (t,)).fetchone()
                    self._df_cache[t] = int(row[0]) if row else 0
        return keyword_terms.choose(tokens, stems, self._df_cache.__getitem__, total)

    def delete(self, ids: Sequence[str], *, settled: bool = False) -> None:  # gone at once
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return
        with self._lock:
            with self.db.write() as conn:
                before = self._bump(conn)
                for start in range(0, len(wanted), _BATCH):
                    batch = wanted[start : start + _BATCH]
                    conn.execute(f"DELETE FROM vectors WHERE id IN ({','.join('?' * len(batch))})", batch)
            if self._after_write(before):
                assert self._matrix is not None
                for id_ in wanted:
                    self._matrix.remove(id_)

    def delete_document(self, owner: str, document_id: str, *, tags: Sequence[str] = ()) -> int:
        with self._lock:  # by the document id column: the tags are not needed
            with self.db.write() as conn:
                before = self._bump(conn)
                ids = [
                    r["id"]
                    for r in conn.execute(
                        "SELECT id FROM vectors WHERE owner = ? AND document_id = ?", (owner, document_id)
                    )
                ]
                conn.execute("DELETE FROM vectors WHERE owner = ? AND document_id = ?", (owner, document_id))
            if self._after_write(before):
                assert self._matrix is not None
                for id_ in ids:
                    self._matrix.remove(id_)
        self._maintain()
        return len(ids)

    def set_enabled(
        self,
        owner: str,
        document_id: str,
        enabled: bool,
        *,
        chunk_count: int | None = None,
        tags: Sequence[str] = (),
        chunks: tuple[int, int] | None = None,
    ) -> None:  # searchable at once, by the document id column: chunk_count and tags are not needed
        where = "owner = ? AND document_id = ?"
        params: list[object] = [owner, document_id]
        if chunks is not None:  # one step of finalize: these chunk indexes only (every version's)
            where += " AND chunk_index >= ? AND chunk_index < ?"
            params += [int(chunks[0]), int(chunks[1])]
        with self._lock:
            with self.db.write() as conn:
                before = self._bump(conn)
                ids = [] if chunks is None else [r["id"] for r in conn.execute(_SELECT_IDS + where, params)]
                conn.execute(_UPDATE_ENABLED + where, [int(bool(enabled)), *params])
            if self._after_write(before):
                matrix = self._matrix
                assert matrix is not None
                if chunks is None:
                    matrix.enabled[matrix.rows_of_document(owner, document_id)] = bool(enabled)
                else:
                    rows = [row for i in ids if (row := matrix.row_of.get(i)) is not None]
                    matrix.enabled[rows] = bool(enabled)
                matrix.masks.clear()

    def count(self, owner: str) -> int:
        with self._lock:
            matrix = self._fresh()
            if self._ann is None:
                return int(matrix.mask(SearchFilter(owner=owner))[1].shape[0])
            key = (self._version, owner)
            if self._count_cache is not None and self._count_cache[0] == key:
                return self._count_cache[1]
            with self.db.read() as conn:  # from the (owner, enabled) index, kept until the next write
                found = conn.execute(
                    "SELECT count(*) FROM vectors WHERE owner = ? AND enabled = 1", (owner,)
                ).fetchone()[0]
            self._count_cache = (key, int(found))
            return int(found)
