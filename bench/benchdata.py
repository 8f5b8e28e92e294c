"""What every benchmark shares: where the data sets are, where the model is, where results go, and
whether this is a smoke run.

- Data sets: ``RAGCHAT_BENCH_DATA`` when set, otherwise ``../shared/bench-data`` next to the
  repository. Read at run time, never copied in.
- The MiniLM model: the product's own resolution (``Settings.models_path``: ``RAGCHAT_MODEL_DIR``,
  else the per-user cache ``$XDG_CACHE_HOME`` or ``~/.cache`` + ``/ragchat/models``), so a benchmark
  finds the model wherever ``make install`` put it.
- Results: ``bench/results`` unless ``RAGCHAT_BENCH_RESULTS`` names another folder (the smoke test
  writes into a temporary one).
- Smoke mode (``RAGCHAT_BENCH_SMOKE=1``): every benchmark runs its own code path on tiny data in a
  few seconds. The figures mean nothing; the run proves the entry point still works.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[1]


def bench_data_dir() -> Path:
    return Path(os.environ.get("RAGCHAT_BENCH_DATA") or REPO.parent / "shared" / "bench-data")


def models_path() -> Path:
    """The model cache the product reads (``ragchat.config.Settings.models_path``)."""
    from ragchat.config import load_settings

    return load_settings().models_path


def results_dir() -> Path:
    path = Path(os.environ.get("RAGCHAT_BENCH_RESULTS") or REPO / "bench" / "results")
    path.mkdir(parents=True, exist_ok=True)
    return path


def smoke() -> bool:
    return os.environ.get("RAGCHAT_BENCH_SMOKE", "").strip() not in ("", "0")


def cache_dir() -> Path:
    """Where benchmarks cache embeddings between runs (kept out of the results; a smoke run keeps
    its own next to its results so it never reuses a real run's cache)."""
    if smoke():
        return results_dir() / "bench-cache"
    return REPO / ".ragchat" / "bench-cache"


def smoke_sample(items: Iterable[T], n: int) -> list[T]:
    """``items``; in a smoke run only the first ``n`` of them."""
    out = list(items)
    return out[:n] if smoke() else out
