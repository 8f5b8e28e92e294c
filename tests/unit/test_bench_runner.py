"""``make bench``'s runner (``bench/run_all.py``) runs every benchmark as with no arguments, and one
that fails, even through ``sys.exit``, is reported without stopping the others."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

READS_ARGV = """
import argparse, sys
from pathlib import Path
def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=3)
    args = parser.parse_args()  # sys.argv, as bench_splitting reads it
    (Path(sys.argv[0]).parent / "a.ran").write_text(str(args.size))
"""
EXITS = """
import sys
def main():
    sys.exit("bench b: no data")
"""
AFTER = """
from pathlib import Path
def main():
    (Path(__file__).parent / "c.ran").write_text("yes")
"""


@pytest.fixture
def run_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("RAGCHAT_BENCH_RESULTS", str(tmp_path / "results"))
    sys.path.insert(0, str(BENCH))
    try:
        import run_all as module
    finally:
        sys.path.remove(str(BENCH))
    for name, code in (("a", READS_ARGV), ("b", EXITS), ("c", AFTER)):
        (tmp_path / f"bench_{name}.py").write_text(code, encoding="utf-8")
    monkeypatch.setattr(module, "BENCH_DIR", tmp_path)
    monkeypatch.setattr(module, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(module, "README", tmp_path / "no-docs.md")
    yield module


def test_each_benchmark_runs_as_with_no_arguments_and_a_failure_stops_no_other(
    run_all: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run_all.py", "--only", "a", "--only", "b", "--only", "c"]
    monkeypatch.setattr(sys, "argv", argv)
    assert run_all.main() == 1
    assert (tmp_path / "a.ran").read_text() == "3"
    assert (tmp_path / "c.ran").read_text() == "yes"
    assert "failed: b" in capsys.readouterr().err
    assert sys.argv == argv
