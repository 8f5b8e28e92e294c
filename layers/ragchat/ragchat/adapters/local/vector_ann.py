"""The approximate snapshot of a large local vector index (``vector_index``): an HNSW graph
(usearch) in a file next to the SQLite database, memory-mapped read-only for searching.

SQLite stays the source of truth; the file is a derived snapshot. ``index_state`` says which file
is current (``ann_generation``) and which rows it holds: those with ``rid <= ann_max_rid``, as they
were when it was written. Rows inserted after it (higher rids) and rows it holds that were
re-vectored or deleted since (noted in ``vectors_ann_stale`` by triggers, schema step 9) are the
*delta*, searched exactly in memory; a search takes the graph's candidates that are not stale,
reads them from SQLite with the filter applied there, scores them exactly and merges them with the
delta's. When the delta has grown, ``refresh`` writes the next file (the current one plus the
delta) and switches to it.

Crash safety: a file is written under a temporary name, flushed to disk and renamed to its
generation's name before the transaction that makes it current commits; a crash before that
commit leaves the previous generation current (the new file is an orphan, removed by the next
refresh). A file that cannot be opened is ignored (exact search over every row) and replaced by
the next refresh. Opening a snapshot maps the file; :func:`prefetch` reads it into the page cache in
the background (``vector_index`` calls it as soon as it knows which file is current): a search
reads the graph's pages in random order, and the first ones after a start with a cold page cache
would otherwise wait on them one fault at a time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragchat.adapters.local.sqlite_store.db import SqliteDatabase

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]
UIntArray = npt.NDArray[np.uint64]

#: Defaults of ``LocalVectorIndex(ann_min_rows=..., ann_merge_rows=...)``.
ANN_MIN_ROWS = 50_000  # below this many rows the index is searched exactly (no snapshot)
ANN_MERGE_ROWS = 20_000  # a delta this big is folded into the next snapshot
#: Graph parameters (``bench/bench_ann_choice.py`` chose them on real MiniLM vectors).
DTYPE = "i8"
CONNECTIVITY = 16
EXPANSION_ADD = 64
EXPANSION_SEARCH = 256
_PAGE = 8192
_PREFETCH_CHUNK = 128 * 1024  # bytes per readahead request (the kernel caps one at its readahead size)
_PREFETCH_AHEAD = 8 * 2**20  # at most this much of it queued at a time


def snapshot_path(db_path: Path, generation: int) -> Path:
    return db_path.with_name(f"{db_path.name}.ann-{generation}.usearch")


def ann_state(conn: Any) -> tuple[int, int]:
    """(generation, max_rid) of the current snapshot; generation 0: none."""
    rows = dict(
        conn.execute(
            "SELECT key, value FROM index_state WHERE key IN ('ann_generation', 'ann_max_rid')"
        ).fetchall()
    )
    return int(rows.get("ann_generation", 0)), int(rows.get("ann_max_rid", 0))


def _memory_available() -> int | None:
    """Bytes of memory the kernel could give without swapping (``MemAvailable``); None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def prefetch(path: Path) -> None:
    """Read the snapshot file into the page cache, in a background thread (see :func:`_prefetch`)."""
    if hasattr(os, "posix_fadvise"):  # Linux and most Unixes; elsewhere the searches' faults read it
        threading.Thread(target=_prefetch, args=(path,), name="ragchat-ann-prefetch", daemon=True).start()


def _prefetch(path: Path) -> bool:
    """Ask the kernel to read ``path`` into the page cache (``POSIX_FADV_WILLNEED``, which starts the
    reads and returns without waiting for them); True when it did.

    A search visits the graph's nodes and vectors in no order that readahead can follow: with a cold
    page cache, the first searches wait on one read per page fault (at 1M vectors: 0.5-1.2 s for the
    first one). One sequential pass over the file is cheaper. The graph (the file's tail: node
    links, which opening the view reads through first) comes before the vectors. Skipped for a
    file larger than half the memory available: it would only push itself and everything else out
    of the cache."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # removed by a newer snapshot's builder: nothing to read
        return False
    try:
        size = os.fstat(fd).st_size
        available = _memory_available()
        if available is None or size > available // 2:
            return False
        graph = 0  # usearch's layout: uint32 rows, uint32 bytes per vector, the vectors, the graph
        head = os.pread(fd, 8, 0)
        if len(head) == 8:
            rows, width = struct.unpack("<II", head)
            graph = 8 + rows * width if 8 + rows * width <= size else 0
        for start, end in ((graph, size), (0, graph)):
            for offset in range(start, end, _PREFETCH_CHUNK):
                os.posix_fadvise(fd, offset, min(_PREFETCH_CHUNK, end - offset), os.POSIX_FADV_WILLNEED)
                if offset - _PREFETCH_AHEAD >= start:  # wait for the read this far behind: a bounded
                    os.pread(fd, 1, offset - _PREFETCH_AHEAD)  # queue, which other reads can join
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _usearch_index() -> Any:
    """``usearch.index.Index``, imported after onnxruntime when that is installed.

    onnxruntime's extension crashes the process (SIGSEGV while it registers its pybind11 types) when
    it is imported after usearch's (usearch 2.26.6 with onnxruntime 1.32.0); in the other order both
    work. A process that searches a snapshot is a local one that embeds its questions with
    onnxruntime (the local MiniLM) anyway: importing it first costs it nothing more."""
    with contextlib.suppress(ImportError):
        import onnxruntime  # noqa: F401

    from usearch.index import Index

    return Index


class AnnSnapshot:
    """One generation's file, mapped read-only (``Index.view``)."""

    def __init__(self, path: Path, generation: int, dimension: int) -> None:
        Index = _usearch_index()

        # Without key lookups: a search needs none, and building the table of 1M keys took ~0.1 s.
        index = Index.restore(
            str(path), view=True, expansion_search=EXPANSION_SEARCH, enable_key_lookups=False
        )
        if index is None or index.ndim != dimension:
            raise ValueError(f"{path} is not a {dimension}-dimensional usearch index")
        self.index = index
        self.path = path
        self.generation = generation

    def __len__(self) -> int:
        return len(self.index)

    def search(self, query: FloatArray, count: int) -> UIntArray:
        """The keys (SQLite rids) of about the ``count`` nearest rows, nearest first."""
        matches = self.index.search(query, count)
        keys: UIntArray = np.asarray(matches.keys, dtype=np.uint64)
        return keys


def _rows(conn: Any, sql: str, params: tuple[Any, ...], dimension: int) -> Iterator[tuple[Any, FloatArray]]:
    cursor = conn.execute(sql, params)
    while True:
        page = cursor.fetchmany(_PAGE)
        if not page:
            return
        keys = np.fromiter((r[0] for r in page), dtype=np.uint64, count=len(page))
        vectors = np.frombuffer(b"".join(r[1] for r in page), dtype=np.float32).reshape(len(page), dimension)
        yield keys, vectors


def _new_index(dimension: int) -> Any:
    Index = _usearch_index()

    return Index(
        ndim=dimension,
        metric="ip",  # the stored vectors are unit length: inner product = cosine
        dtype=DTYPE,
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )


def _durable_write(index: Any, path: Path) -> None:
    """Save under a temporary name, flush it to disk, rename, flush the directory."""
    tmp = path.with_name(path.name + ".tmp")
    index.save(str(tmp))
    os.chmod(tmp, 0o600)  # the vectors are the user's data, private like the database
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    with contextlib.suppress(OSError):  # not every filesystem lets a directory be fsynced
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def remove_stale_files(db_path: Path, keep: int) -> None:
    """Delete every snapshot file (and leftover temporary) of this database but generation ``keep``
    (called by the builder, who holds the lock: no other file is being written)."""
    for path in db_path.parent.glob(f"{db_path.name}.ann-*"):
        if path.name != snapshot_path(db_path, keep).name:
            with contextlib.suppress(OSError):
                path.unlink()


def _due(conn: Any, min_rows: int, merge_rows: int) -> bool:
    generation, max_rid = ann_state(conn)
    if generation == 0:  # the rid bound first: count(*) only near the threshold
        top = int(conn.execute("SELECT coalesce(max(rid), 0) FROM vectors").fetchone()[0])
        return top >= min_rows and int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0]) >= min_rows
    newer = int(conn.execute("SELECT count(*) FROM vectors WHERE rid > ?", (max_rid,)).fetchone()[0])
    stale = int(conn.execute("SELECT count(*) FROM vectors_ann_stale").fetchone()[0])
    return newer + stale >= merge_rows


def refresh(db: SqliteDatabase, dimension: int, *, min_rows: int, merge_rows: int) -> bool:
    """Write the next snapshot when it is due (see the module docstring); True when it did.

    Due: no snapshot yet and at least ``min_rows`` rows, or a delta of at least ``merge_rows``.
    The graph is built outside any write transaction (other writers and every reader go on); the
    switch is one short transaction, abandoned if another process switched first. One builder
    at a time (a lock file next to the database): a thread or process that finds it taken leaves
    the work to the holder."""
    with db.read() as conn:  # most writes end here, without taking the write lock
        if not _due(conn, min_rows, merge_rows):
            return False
    with _builder(db.path) as alone:
        return alone and _refresh(db, dimension, min_rows, merge_rows)


@contextlib.contextmanager
def _builder(db_path: Path) -> Iterator[bool]:
    """Whether this caller holds ``<db>.ann.lock`` (released when the block ends, or when the
    process dies)."""
    import fcntl

    fd = os.open(db_path.with_name(db_path.name + ".ann.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _refresh(db: SqliteDatabase, dimension: int, min_rows: int, merge_rows: int) -> bool:
    with db.write() as conn:
        if not _due(conn, min_rows, merge_rows):  # another process wrote one meanwhile
            return False
        generation, max_rid = ann_state(conn)
        top = int(conn.execute("SELECT coalesce(max(rid), 0) FROM vectors").fetchone()[0])
        # from here every change to a row up to ``top`` is noted as stale (with its write's counter)
        conn.execute("UPDATE index_state SET value = max(value, ?) WHERE key = 'ann_watch_rid'", (top,))
        seen = int(conn.execute("SELECT value FROM index_state WHERE key = 'version'").fetchone()[0])
    index = _build(db, dimension, generation, max_rid, top, seen)
    _durable_write(index, snapshot_path(db.path, generation + 1))
    del index
    with db.write() as conn:
        switched = ann_state(conn)[0] == generation  # else another process switched first
        if switched:
            conn.execute("UPDATE index_state SET value = ? WHERE key = 'ann_generation'", (generation + 1,))
            conn.execute("UPDATE index_state SET value = ? WHERE key = 'ann_max_rid'", (top,))
            conn.execute("DELETE FROM vectors_ann_stale WHERE seq <= ?", (seen,))
            conn.execute("UPDATE index_state SET value = value + 1 WHERE key = 'version'")
        current = ann_state(conn)[0]
    remove_stale_files(db.path, current)
    return switched


def _build(db: SqliteDatabase, dimension: int, generation: int, max_rid: int, top: int, seen: int) -> Any:
    """The next graph: the current file less the rows noted stale up to change ``seen``, plus their
    present state and the rows up to ``top`` it does not hold; from every row if there is no
    readable current file."""
    index = None
    params: tuple[int, ...]
    if generation:
        try:
            index = _new_index(dimension)
            index.load(str(snapshot_path(db.path, generation)))
        except Exception as exc:  # missing or damaged: build the next one from every row
            log.warning("vector snapshot %s unreadable (%s); rebuilding it", generation, exc)
            index = None
    with db.read() as conn:
        if index is None:
            index = _new_index(dimension)
            sql, params = "SELECT rid, vector FROM vectors WHERE rid <= ? ORDER BY rid", (top,)
        else:
            stale = [r[0] for r in conn.execute("SELECT rid FROM vectors_ann_stale WHERE seq <= ?", (seen,))]
            if stale:
                index.remove(np.asarray(stale, dtype=np.uint64))
            sql = (
                "SELECT rid, vector FROM vectors WHERE (rid > ? AND rid <= ?) OR rid IN "
                "(SELECT rid FROM vectors_ann_stale WHERE seq <= ?)"  # no ORDER BY: it would scan
            )
            params = (max_rid, top, seen)
        for keys, vectors in _rows(conn, sql, params, dimension):
            index.add(keys, vectors)
    return index
