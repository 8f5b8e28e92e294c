"""The suite's order: the tests marked ``slow`` (a real-ASL state machine with thousands of batches,
``sam local`` in Docker, the 1,000-page PDF, the schema fuzzer) run first. ``make test`` spreads the
suite over the CPUs with pytest-xdist; starting the long tests first lets the quick ones fill the
other workers around them, instead of a long test starting last and running alone.

It lives at the repository root, not in ``tests/``: a conftest there would put ``tests/`` on
``sys.path``, where ``tests/events.py`` shadows the ``events`` package that opensearch-py imports."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: slow ones first


@pytest.fixture(autouse=True)
def aws_limits() -> Iterator[None]:
    """AWS's request limits on every botocore client a test creates (moto- or Stubber-backed): a
    request past one fails as the service would (``tests/aws_contracts/limits.py``)."""
    from tests.aws_contracts.hooks import session_handler
    from tests.aws_contracts.limits import before_parameter_build

    with session_handler("before-parameter-build", before_parameter_build):
        yield
