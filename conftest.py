"""The suite's order: the tests marked ``slow`` (a real-ASL state machine with thousands of batches,
``sam local`` in Docker, the 1,000-page PDF, the schema fuzzer) run first. ``make test`` spreads the
suite over the CPUs with pytest-xdist; starting the long tests first lets the quick ones fill the
other workers around them, instead of a long test starting last and running alone.

It lives at the repository root, not in ``tests/``: a conftest there would put ``tests/`` on
``sys.path``, where ``tests/events.py`` shadows the ``events`` package that opensearch-py imports."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: slow ones first
