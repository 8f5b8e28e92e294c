"""Opening a large local vector index (``vector_index`` with its ``vector_ann`` snapshot): the
snapshot's file is prefetched once per generation, and the delta (the rows the snapshot does not
hold in their current state) is read whole, each row once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ragchat.adapters.local import vector_ann
from ragchat.adapters.local import vector_index as vector_index_module
from ragchat.adapters.local.sqlite_store import SqliteDatabase
from ragchat.adapters.local.vector_index import LocalVectorIndex
from ragchat.adapters.local.vector_matrix import load_matrix
from ragchat.domain.models import SearchFilter, VectorRecord

DIM = 16
ALICE = SearchFilter("alice")


def records(vectors: np.ndarray, start: int = 0) -> list[VectorRecord]:
    return [
        VectorRecord(id=f"n{start + i:04d}", vector=[float(x) for x in v], text=f"text {start + i}",
                     owner="alice", document_id=f"d{(start + i) // 10}", chunk_index=(start + i) % 10)
        for i, v in enumerate(vectors)
    ]  # fmt: skip


def exact_ids(current: dict[str, np.ndarray], query: np.ndarray, k: int) -> list[str]:
    ids = sorted(current)
    matrix = np.stack([current[i] / np.linalg.norm(current[i]) for i in ids])
    scores = matrix @ (query / np.linalg.norm(query))
    order = sorted(range(len(ids)), key=lambda i: (-float(scores[i]), ids[i]))[:k]
    return [ids[i] for i in order]


@pytest.fixture
def vectors() -> np.ndarray:
    return np.random.default_rng(7).normal(size=(400, DIM)).astype(np.float32)


@pytest.fixture
def prefetched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    monkeypatch.setattr(vector_ann, "prefetch", lambda path: seen.append(Path(path).name))
    return seen


def test_opening_an_index_prefetches_its_snapshot_once_per_generation(
    tmp_path: Path, vectors: np.ndarray, prefetched: list[str]
) -> None:
    path = tmp_path / "ragchat.db"
    db = SqliteDatabase(path)
    writer = LocalVectorIndex(db, dimension=DIM, ann_min_rows=100, ann_merge_rows=50)
    writer.upsert(records(vectors[:120]))
    assert prefetched == []  # no snapshot when it opened; the one it wrote is searched from memory
    db.close()

    reopened = SqliteDatabase(path)
    index = LocalVectorIndex(reopened, dimension=DIM, ann_min_rows=100, ann_merge_rows=50)
    assert prefetched == ["ragchat.db.ann-1.usearch"]  # at opening, before any search
    current = {f"n{i:04d}": vectors[i] for i in range(120)}
    for query in vectors[300:310]:
        assert [h.id for h in index.search(query, ALICE, 5)] == exact_ids(current, query, 5)
    assert prefetched == ["ragchat.db.ann-1.usearch"]  # not again for the same file

    index.upsert(records(vectors[120:180], start=120))  # the delta reaches ann_merge_rows
    current |= {f"n{i:04d}": vectors[i] for i in range(120, 180)}
    for query in vectors[300:310]:
        assert [h.id for h in index.search(query, ALICE, 5)] == exact_ids(current, query, 5)
    assert prefetched == ["ragchat.db.ann-1.usearch", "ragchat.db.ann-2.usearch"]

    LocalVectorIndex(reopened, dimension=DIM, ann_min_rows=None)  # snapshots ignored: none read
    assert prefetched == ["ragchat.db.ann-1.usearch", "ragchat.db.ann-2.usearch"]
    reopened.close()


def test_prefetch_reads_a_snapshot_file_and_skips_what_it_cannot_or_should_not(
    tmp_path: Path, vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ragchat.db"
    db = SqliteDatabase(path)
    LocalVectorIndex(db, dimension=DIM, ann_min_rows=100, ann_merge_rows=50).upsert(records(vectors))
    db.close()
    snapshot = vector_ann.snapshot_path(path, 1)
    size = snapshot.stat().st_size
    monkeypatch.setattr(vector_ann, "_PREFETCH_CHUNK", 4096)  # a small file through the whole loop,
    monkeypatch.setattr(vector_ann, "_PREFETCH_AHEAD", 8192)  # waits included
    assert vector_ann._prefetch(snapshot)

    garbage = tmp_path / "garbage.usearch"  # a header that does not fit the file: read front to back
    garbage.write_bytes(b"\xff" * 20_000)
    assert vector_ann._prefetch(garbage)
    assert not vector_ann._prefetch(tmp_path / "gone.usearch")  # removed by a newer snapshot
    monkeypatch.setattr(vector_ann, "_memory_available", lambda: size)  # more than half of it
    assert not vector_ann._prefetch(snapshot)
    monkeypatch.setattr(vector_ann, "_memory_available", lambda: None)  # unknown: left alone
    assert not vector_ann._prefetch(snapshot)


def test_the_delta_holds_every_row_the_snapshot_lacks_once(
    tmp_path: Path, vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ragchat.db"
    db = SqliteDatabase(path)
    index = LocalVectorIndex(db, dimension=DIM, ann_min_rows=100, ann_merge_rows=10_000)
    index.upsert(records(vectors[:150]))  # the snapshot: rids 1-150
    with db.read() as conn:
        assert vector_ann.ann_state(conn) == (1, 150)
    index.upsert(records(vectors[150:200], start=150))  # after it
    index.upsert(records(vectors[200:203], start=5))  # rows it holds, changed since
    index.delete(["n0007", "n0160"])  # one it holds, one after it
    with db.write() as conn:  # as an abandoned build leaves it: changes above the snapshot noted too
        conn.execute("UPDATE index_state SET value = 10000 WHERE key = 'ann_watch_rid'")
    index.upsert(records(vectors[203:205], start=170))  # rows after it, changed: noted as stale too

    current = {f"n{i:04d}": vectors[i] for i in range(200)}
    current |= {"n0005": vectors[200], "n0006": vectors[201], "n0170": vectors[203], "n0171": vectors[204]}
    current.pop("n0007")
    current.pop("n0160")
    expected = {f"n{i:04d}" for i in range(150, 200)} - {"n0160"} | {"n0005", "n0006"}
    monkeypatch.setattr(vector_index_module, "_LOAD_ROWS", 7)  # rows read in several pages
    with db.read() as conn:
        matrix = load_matrix(conn, DIM, str(path), 7, after_rid=150)
    assert sorted(matrix.ids) == sorted(expected)  # each once: the stale rows above 150 are not repeated
    assert matrix.n == len(expected) and len(matrix.row_of) == len(expected)
    for id_, row in matrix.row_of.items():
        stored = current[id_] / np.linalg.norm(current[id_])
        assert np.allclose(matrix.vectors[row], stored, atol=1e-6)

    reopened = LocalVectorIndex(SqliteDatabase(path), dimension=DIM, ann_min_rows=100, ann_merge_rows=10_000)
    for query in vectors[300:320]:
        assert [h.id for h in reopened.search(query, ALICE, 5)] == exact_ids(current, query, 5)
        assert [h.id for h in index.search(query, ALICE, 5)] == exact_ids(current, query, 5)
    assert reopened.count("alice") == len(current)
    db.close()
