"""Unit tests never touch the network: every test in tests/unit runs with sockets disabled
(pytest-socket). Unix-domain sockets stay allowed because asyncio's event loop needs a socketpair."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytest_socket import disable_socket, enable_socket


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    disable_socket(allow_unix_socket=True)
    yield
    enable_socket()
