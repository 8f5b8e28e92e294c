"""Time as a value: services take a ``Clock`` (epoch seconds) so tests never sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], float]

system_clock: Clock = time.time


def utc_iso(ts: float) -> str:
    """Epoch seconds → ``2026-01-02T03:04:05.678Z`` (millisecond precision, sortable)."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_iso(value: str) -> float:
    """Inverse of :func:`utc_iso`."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
