"""The unit-test suite cannot reach the network (tests/unit/conftest.py)."""

from __future__ import annotations

import socket

import pytest
from pytest_socket import SocketBlockedError


@pytest.mark.filterwarnings("ignore:A test tried to use socket")
def test_opening_an_internet_socket_fails() -> None:
    with pytest.raises(SocketBlockedError):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)
