"""The in-memory copy of the local vector index's ``vectors`` table (``vector_index``): one
contiguous float32 matrix plus the filterable columns as integer codes, and its loader."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ragchat.domain.models import SearchFilter

_F32 = np.float32
FloatArray = npt.NDArray[np.float32]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


@dataclass
class Matrix:
    """In-memory copy of the ``vectors`` table (without texts). Rows are reused after deletes."""

    dimension: int
    capacity: int = 0
    n: int = 0  # rows in use (alive or free)
    vectors: FloatArray = field(default_factory=lambda: np.zeros((0, 0), dtype=_F32))
    owner: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    collection: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    document: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    enabled: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    alive: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    ids: list[str | None] = field(default_factory=list)
    row_of: dict[str, int] = field(default_factory=dict)
    free: list[int] = field(default_factory=list)
    codes: dict[str | None, int] = field(default_factory=lambda: {None: 0})
    masks: dict[SearchFilter, tuple[BoolArray, IntArray]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.vectors = np.zeros((0, self.dimension), dtype=_F32)

    def code(self, value: str | None) -> int:
        c = self.codes.get(value)
        if c is None:
            c = self.codes[value] = len(self.codes)
        return c

    def _grow(self, needed: int) -> None:
        if needed <= self.capacity:
            return
        cap = max(needed, self.capacity * 2, 1024)
        vectors = np.zeros((cap, self.dimension), dtype=_F32)
        vectors[: self.n] = self.vectors[: self.n]
        self.vectors = vectors
        for name, dtype in (
            ("owner", np.int64),
            ("collection", np.int64),
            ("document", np.int64),
            ("enabled", np.bool_),
            ("alive", np.bool_),
        ):
            arr = np.zeros(cap, dtype=dtype)
            arr[: self.n] = getattr(self, name)[: self.n]
            setattr(self, name, arr)
        self.capacity = cap

    def put(
        self,
        id_: str,
        vector: FloatArray,
        owner: str,
        document_id: str | None,
        collection: str | None,
        enabled: bool,
    ) -> None:
        row = self.row_of.get(id_)
        if row is None:
            if self.free:
                row = self.free.pop()
            else:
                self._grow(self.n + 1)
                row = self.n
                self.n += 1
                self.ids.append(None)
            self.row_of[id_] = row
            self.ids[row] = id_
        self.vectors[row] = vector
        self.owner[row] = self.code(owner)
        self.document[row] = self.code(document_id)
        self.collection[row] = self.code(collection)
        self.enabled[row] = enabled
        self.alive[row] = True
        self.masks.clear()

    def remove(self, id_: str) -> None:
        row = self.row_of.pop(id_, None)
        if row is None:
            return
        self.alive[row] = False
        self.enabled[row] = False
        self.ids[row] = None
        self.free.append(row)
        self.masks.clear()

    def rows_of_document(self, owner: str, document_id: str) -> IntArray:
        o, d = self.codes.get(owner), self.codes.get(document_id)
        if o is None or d is None:
            return np.zeros(0, dtype=np.int64)
        n = self.n
        return np.flatnonzero(self.alive[:n] & (self.owner[:n] == o) & (self.document[:n] == d))

    def mask(self, flt: SearchFilter) -> tuple[BoolArray, IntArray]:
        """(mask over rows, row numbers) of the alive, enabled rows within the filter; cached."""
        cached = self.masks.get(flt)
        if cached is not None:
            return cached
        n = self.n
        codes = [c for c in (self.codes.get(p) for p in flt.partitions) if c is not None]
        if not codes:
            mask = np.zeros(n, dtype=np.bool_)
        else:
            owned = self.owner[:n] == codes[0] if len(codes) == 1 else np.isin(self.owner[:n], codes)
            mask = self.alive[:n] & self.enabled[:n] & owned
            if flt.collection is not None:
                c = self.codes.get(flt.collection)
                mask &= self.collection[:n] == (c if c is not None else -1)
            if flt.document_id is not None:
                d = self.codes.get(flt.document_id)
                mask &= self.document[:n] == (d if d is not None else -1)
        result = (mask, np.flatnonzero(mask))
        if len(self.masks) > 256:
            self.masks.clear()
        self.masks[flt] = result
        return result


def load_matrix(conn: Any, dimension: int, where: str, page: int, *, after_rid: int | None = None) -> Matrix:
    """Read the ``vectors`` table into a new matrix, ``page`` rows at a time straight into its
    preallocated arrays: no list of every row and no joined copy of every vector (at 1M vectors
    that held three copies of the 1.5 GB of vectors at once). With ``after_rid``: only the rows an
    approximate snapshot does not hold (``vector_ann``): those above it, read in one pass along the
    rowid (the table's order on disk), then those at or below it noted as stale."""
    matrix = Matrix(dimension)
    if after_rid is None:
        queries: list[tuple[str, tuple[Any, ...]]] = [("ORDER BY rid", ())]
        matrix._grow(int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0]))
    else:  # sized by the rid range (no count(*): that is a second pass over the rows)
        queries = [
            ("WHERE rid > ?", (after_rid,)),
            ("WHERE rid IN (SELECT rid FROM vectors_ann_stale) AND rid <= ?", (after_rid,)),
        ]
        top = int(conn.execute("SELECT coalesce(max(rid), 0) FROM vectors").fetchone()[0])
        stale = int(conn.execute("SELECT count(*) FROM vectors_ann_stale").fetchone()[0])
        matrix._grow(min(max(top - after_rid, 0), 4 * page) + stale)
    width = dimension * 4
    code = matrix.code
    ids: list[str] = []
    n = 0
    for selection, params in queries:
        cursor = conn.cursor()
        cursor.row_factory = None  # plain tuples: about half the cost of sqlite3.Row per row
        cursor.execute(
            f"SELECT id, owner, document_id, collection, enabled, vector FROM vectors {selection}", params
        )
        while rows := cursor.fetchmany(page):
            end = n + len(rows)
            if end > matrix.capacity:  # more than sized for (or written since the count)
                matrix._grow(end)
            blob = b"".join([r[5] for r in rows])
            if len(blob) != len(rows) * width:
                raise ValueError(
                    f"the vector index in {where} holds vectors of another dimension than "
                    f"{dimension}; re-ingest into a fresh RAGCHAT_DATA_DIR"
                )
            matrix.vectors[n:end] = np.frombuffer(blob, dtype=_F32).reshape(len(rows), dimension)
            ids += [r[0] for r in rows]
            matrix.owner[n:end] = [code(r[1]) for r in rows]
            matrix.document[n:end] = [code(r[2]) for r in rows]
            matrix.collection[n:end] = [code(r[3]) for r in rows]
            matrix.enabled[n:end] = [bool(r[4]) for r in rows]
            n = end
    matrix.ids = list(ids)
    matrix.row_of = {id_: i for i, id_ in enumerate(ids)}
    matrix.alive[:n] = True
    matrix.n = n
    return matrix
