"""The suite's own layout: pytest (rootdir-relative "prepend" import mode, no ``__init__.py`` in the
test folders) imports each test file by its basename, so two files with the same name in different
folders stop the whole run at collection ("import file mismatch") — in CI that is every test lost."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_files_share_a_name() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        by_name[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert clashes == {}, f"rename one of each: {clashes}"
