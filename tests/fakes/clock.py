"""The injected clock of the unit and contract tests."""

from __future__ import annotations


# --------------------------------------------------------------------------------------------- clock
class FakeClock:
    """A ``Clock`` (epoch seconds callable) that only moves when told to."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now
