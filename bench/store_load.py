"""Peak and resident memory, and the first query's time, when a process opens a big local vector
index (diagnostic for issue 23 item 5; not written to bench/results/).

    python bench/store_load.py build /tmp/v.db 300000       # random 384-d vectors, 100 per document
    python bench/store_load.py new /tmp/v.db                 # this checkout's LocalVectorIndex
    python bench/store_load.py old /tmp/v.db /tmp/vi_old.py  # another version of vector_index.py

Run ``old`` and ``new`` alternately, each in a fresh process.
"""

from __future__ import annotations

import importlib.util
import os
import resource
import sys
import time
from typing import Any

import numpy as np
import psutil
from ragchat.adapters.local.sqlite_store.db import SqliteDatabase
from ragchat.domain.models import SearchFilter, VectorRecord


def build(path: str, n: int) -> None:
    from ragchat.adapters.local.vector_index import LocalVectorIndex

    rng = np.random.default_rng(0)
    index = LocalVectorIndex(SqliteDatabase(path), dimension=384)
    for start in range(0, n, 5000):
        block = rng.normal(size=(5000, 384)).astype(np.float32)
        records = [
            VectorRecord(
                id=f"n{start + i}",
                vector=block[i].tolist(),
                text="t",
                owner="u",
                document_id=f"d{(start + i) // 100}",
                chunk_index=i,
                collection=None,
                enabled=True,
            )
            for i in range(5000)
        ]
        index.upsert(records)


def module(mode: str) -> Any:
    if mode == "new":
        from ragchat.adapters.local import vector_index

        return vector_index
    spec = importlib.util.spec_from_file_location("vi_old", sys.argv[3])
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules["vi_old"] = loaded
    spec.loader.exec_module(loaded)
    return loaded


def main() -> None:
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "build":
        build(path, int(sys.argv[3]))
        return
    m = module(mode)
    started = time.perf_counter()
    index = m.LocalVectorIndex(SqliteDatabase(path), dimension=384)
    index.search(np.ones(384, dtype=np.float32).tolist(), SearchFilter("u"), 5)
    first = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    resident = psutil.Process().memory_info().rss / 2**20
    print(
        f"{mode}: first query {first:.2f} s, peak RSS {peak:.0f} MB, resident after {resident:.0f} MB, "
        f"1-min load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
