"""The local vector index's approximate snapshot (``vector_ann``): what the shared contract suite
(which runs it as the ``local-ann`` and ``local-ann-delta`` twins) cannot see — restarts, a crash
while a snapshot is written, a damaged file, another process switching snapshots, filters the
graph's candidates cannot serve."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from ragchat.adapters.local import vector_ann
from ragchat.adapters.local.sqlite_store import SqliteDatabase
from ragchat.adapters.local.vector_index import LocalVectorIndex
from ragchat.domain.models import SearchFilter, VectorRecord

DIM = 16
ALICE = SearchFilter("alice")


def records(vectors, start=0, owner="alice", per_doc=10, prefix="n"):
    return [
        VectorRecord(
            id=f"{prefix}{start + i:04d}",
            vector=[float(x) for x in v],
            text=f"text {start + i}",
            owner=owner,
            document_id=f"{prefix}d{(start + i) // per_doc}",
            chunk_index=(start + i) % per_doc,
        )
        for i, v in enumerate(vectors)
    ]


def exact_ids(vectors: np.ndarray, ids: list[str], query: np.ndarray, k: int) -> list[str]:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    order = np.argsort(-(unit @ (query / np.linalg.norm(query))), kind="stable")[:k]
    return [ids[i] for i in order]


@pytest.fixture
def vectors() -> np.ndarray:
    return np.random.default_rng(3).normal(size=(300, DIM)).astype(np.float32)


def snapshots(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.glob(f"{path.name}.ann-*"))


def test_a_large_index_keeps_a_snapshot_file_and_a_restart_searches_it(tmp_path: Path, vectors):
    path = tmp_path / "ragchat.db"
    db = SqliteDatabase(path)
    index = LocalVectorIndex(db, dimension=DIM, ann_min_rows=100, ann_merge_rows=50)
    index.upsert(records(vectors[:90]))
    assert snapshots(path) == []  # below ann_min_rows: exact search only, no file
    index.upsert(records(vectors[90:200], start=90))
    assert snapshots(path) == ["ragchat.db.ann-1.usearch"]
    index.upsert(records(vectors[200:230], start=200))  # a delta below ann_merge_rows: no new file
    assert snapshots(path) == ["ragchat.db.ann-1.usearch"]
    db.close()

    reopened = SqliteDatabase(path)
    restarted = LocalVectorIndex(reopened, dimension=DIM, ann_min_rows=100, ann_merge_rows=50)
    ids = [f"n{i:04d}" for i in range(230)]
    for query in vectors[:20]:
        hits = restarted.search(query, ALICE, 5)
        assert [h.id for h in hits] == exact_ids(vectors[:230], ids, query, 5)
        best = vectors[int(hits[0].id[1:])]
        cosine = float(best @ query / np.linalg.norm(best) / np.linalg.norm(query))
        assert hits[0].score == pytest.approx(cosine, abs=1e-5)  # an exact cosine, not the graph's
    assert restarted.count("alice") == 230
    restarted.upsert(records(vectors[230:300], start=230))  # the delta reaches ann_merge_rows
    assert snapshots(path) == ["ragchat.db.ann-2.usearch"]  # the previous file is removed
    reopened.close()


def test_a_crash_while_writing_a_snapshot_keeps_the_previous_one(tmp_path: Path, vectors, monkeypatch):
    path = tmp_path / "ragchat.db"
    db = SqliteDatabase(path)
    index = LocalVectorIndex(db, dimension=DIM, ann_min_rows=50, ann_merge_rows=50)
    index.upsert(records(vectors[:100]))
    assert snapshots(path) == ["ragchat.db.ann-1.usearch"]

    def crash(index_: object, target: Path) -> None:
        target.with_name(target.name + ".tmp").write_bytes(b"half a file")  # the process dies here
        raise OSError("no space left on device")

    monkeypatch.setattr(vector_ann, "_durable_write", crash)
    index.upsert(records(vectors[100:200], start=100))  # stored; the next snapshot fails
    ids = [f"n{i:04d}" for i in range(200)]
    for query in vectors[:10]:
        assert [h.id for h in index.search(query, ALICE, 5)] == exact_ids(vectors[:200], ids, query, 5)
    db.close()

    monkeypatch.undo()
    reopened = SqliteDatabase(path)
    restarted = LocalVectorIndex(reopened, dimension=DIM, ann_min_rows=50, ann_merge_rows=50)
    for query in vectors[:10]:  # generation 1 and the rows after it
        assert [h.id for h in restarted.search(query, ALICE, 5)] == exact_ids(vectors[:200], ids, query, 5)
    restarted.upsert(records(vectors[200:260], start=200))
    assert snapshots(path) == ["ragchat.db.ann-2.usearch"]  # the leftover is gone
    reopened.close()


def test_a_damaged_snapshot_is_ignored_and_replaced(tmp_path: Path, vectors):
    path = tmp_path / "ragchat.db"
    db = SqliteDatabase(path)
    LocalVectorIndex(db, dimension=DIM, ann_min_rows=50, ann_merge_rows=50).upsert(records(vectors[:120]))
    db.close()
    (tmp_path / "ragchat.db.ann-1.usearch").write_bytes(b"\0" * 64)

    reopened = SqliteDatabase(path)
    index = LocalVectorIndex(reopened, dimension=DIM, ann_min_rows=50, ann_merge_rows=50)
    ids = [f"n{i:04d}" for i in range(120)]
    for query in vectors[:10]:
        assert [h.id for h in index.search(query, ALICE, 5)] == exact_ids(vectors[:120], ids, query, 5)
    index.upsert(records(vectors[120:180], start=120))  # the next snapshot is built from every row
    assert snapshots(path) == ["ragchat.db.ann-2.usearch"]
    ids = [f"n{i:04d}" for i in range(180)]
    for query in vectors[:10]:
        assert [h.id for h in index.search(query, ALICE, 5)] == exact_ids(vectors[:180], ids, query, 5)
    reopened.close()


def test_changes_to_rows_the_snapshot_holds_are_searched_as_they_are_now(tmp_path: Path, vectors):
    db = SqliteDatabase(tmp_path / "ragchat.db")
    index = LocalVectorIndex(db, dimension=DIM, ann_min_rows=50, ann_merge_rows=10**6)
    index.upsert(records(vectors[:100]))
    target = vectors[0]
    index.upsert([records([-target], start=5)[0]])  # n0005 now points away from the query
    index.delete(["n0000"])  # the query's own row is gone
    index.set_enabled("alice", "nd1", False)  # n0010-n0019 are switched off
    hits = index.search(target, ALICE, 100)
    found = [h.id for h in hits]
    assert "n0000" not in found and not any(f"n00{i}" in found for i in range(10, 20))
    assert found[-1] == "n0005" and hits[-1].score == pytest.approx(-1.0, abs=1e-5)
    index.set_enabled("alice", "nd1", True)
    assert {f"n00{i}" for i in range(10, 20)} <= {h.id for h in index.search(target, ALICE, 100)}
    db.close()


def test_an_owner_with_few_rows_is_found_among_many_of_another(tmp_path: Path, vectors, monkeypatch):
    """The graph's nearest candidates are all another owner's: the filter is scanned exactly."""
    from ragchat.adapters.local import vector_ann_search

    monkeypatch.setattr(vector_ann_search, "CANDIDATES", 8)
    monkeypatch.setattr(vector_ann_search, "MAX_CANDIDATES", 32)  # far fewer than the 300 rows
    monkeypatch.setattr(vector_ann_search, "SMALL", 0)  # searched as a large graph is
    db = SqliteDatabase(tmp_path / "ragchat.db")
    index = LocalVectorIndex(db, dimension=DIM, ann_min_rows=50, ann_merge_rows=50)
    index.upsert(records(vectors[:297], owner="bob") + records(vectors[297:], owner="alice", prefix="a"))
    assert snapshots(tmp_path / "ragchat.db")  # both owners' rows are in the snapshot
    hits = index.search(vectors[0], ALICE, 5)
    assert sorted(h.id for h in hits) == ["a0000", "a0001", "a0002"]
    assert index.count("alice") == 3 and index.count("bob") == 297
    db.close()


def test_a_snapshot_written_by_another_process_is_picked_up(tmp_path: Path, vectors):
    path = tmp_path / "ragchat.db"
    db = SqliteDatabase(path)
    server = LocalVectorIndex(db, dimension=DIM, ann_min_rows=50, ann_merge_rows=50)
    server.upsert(records(vectors[:60]))
    assert server.search(vectors[0], ALICE, 1)[0].id == "n0000"
    np.save(tmp_path / "more.npy", vectors[60:200])
    script = textwrap.dedent(
        f"""
        import numpy as np
        from ragchat.adapters.local.sqlite_store import SqliteDatabase
        from ragchat.adapters.local.vector_index import LocalVectorIndex
        from ragchat.domain.models import VectorRecord
        index = LocalVectorIndex(SqliteDatabase({str(path)!r}), dimension={DIM}, ann_min_rows=50,
                                 ann_merge_rows=50)
        more = np.load({str(tmp_path / "more.npy")!r})
        index.upsert([VectorRecord(id=f"p{{i}}", vector=v.tolist(), text="from another process",
                                   owner="alice", document_id="other", chunk_index=i)
                      for i, v in enumerate(more)])
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert snapshots(path) == ["ragchat.db.ann-2.usearch"]
    hits = server.search(vectors[150], ALICE, 1)
    assert [(h.id, h.text) for h in hits] == [("p90", "from another process")]
    assert server.count("alice") == 200
    db.close()


def test_one_builder_at_a_time_and_no_row_is_found_twice(tmp_path: Path, vectors):
    """Threads writing at once each find a snapshot due; one builds it, the others leave it to
    that one (a builder in another process holds the same lock file)."""
    import fcntl
    import os
    import threading

    path = tmp_path / "ragchat.db"
    db = SqliteDatabase(path)
    index = LocalVectorIndex(db, dimension=DIM, ann_min_rows=20, ann_merge_rows=20)
    index.upsert(records(vectors[:40]))
    assert snapshots(path) == ["ragchat.db.ann-1.usearch"]
    fd = os.open(tmp_path / "ragchat.db.ann.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process is building
    index.upsert(records(vectors[40:100], start=40))
    assert snapshots(path) == ["ragchat.db.ann-1.usearch"]  # left to it
    os.close(fd)

    def write(lo: int, hi: int) -> None:
        for start in range(lo, hi, 10):
            index.upsert(records(vectors[start : start + 10], start=start))

    threads = [threading.Thread(target=write, args=(lo, lo + 50)) for lo in (100, 150, 200, 250)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(snapshots(path)) == 1 and snapshots(path) != ["ragchat.db.ann-1.usearch"]
    ids = [f"n{i:04d}" for i in range(300)]
    for query in vectors[:20]:
        found = [h.id for h in index.search(query, ALICE, 10)]
        assert found == exact_ids(vectors, ids, query, 10)
    assert len({h.id for h in index.search(vectors[0], ALICE, 300)}) == 300
    db.close()


def test_the_snapshot_and_its_lock_are_private_whatever_the_umask(tmp_path: Path, vectors):
    import os
    import stat

    previous = os.umask(0)
    try:
        db = SqliteDatabase(tmp_path / "ragchat.db")
        LocalVectorIndex(db, dimension=DIM, ann_min_rows=50).upsert(records(vectors[:60]))
        db.close()
    finally:
        os.umask(previous)
    for name in ("ragchat.db.ann-1.usearch", "ragchat.db.ann.lock"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name


def test_a_process_that_searched_a_snapshot_can_then_load_the_local_embedder(tmp_path: Path, vectors):
    """onnxruntime's extension crashed the process when imported after usearch's: a server whose
    first request searched a large index (opening its snapshot) died on the next question's
    embedding. The search, then onnxruntime, in a fresh process, must both work."""
    path = tmp_path / "ragchat.db"
    db = SqliteDatabase(path)
    LocalVectorIndex(db, dimension=DIM, ann_min_rows=100, ann_merge_rows=50).upsert(records(vectors[:200]))
    db.close()
    assert snapshots(path) == ["ragchat.db.ann-1.usearch"]
    script = textwrap.dedent(
        f"""
        import sys

        from ragchat.adapters.local.sqlite_store import SqliteDatabase
        from ragchat.adapters.local.vector_index import LocalVectorIndex
        from ragchat.domain.models import SearchFilter

        index = LocalVectorIndex(SqliteDatabase({str(path)!r}), dimension={DIM}, ann_min_rows=100)
        hits = index.search([1.0] * {DIM}, SearchFilter("alice"), 3)
        assert "usearch.index" in sys.modules  # the snapshot was searched
        import onnxruntime  # what the embedder does on the next question

        print(len(hits), onnxruntime.get_device())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["3", "CPU"]
