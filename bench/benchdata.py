"""Where the benchmark data sets are: ``RAGCHAT_BENCH_DATA`` when set, otherwise ``../shared/bench-data``
next to the repository. Read at run time, never copied in."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def bench_data_dir() -> Path:
    return Path(os.environ.get("RAGCHAT_BENCH_DATA") or REPO.parent / "shared" / "bench-data")
