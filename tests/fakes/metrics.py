"""A ``Metrics`` port that records what the services emit (``tests/unit/test_observability.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Recorded:
    name: str
    value: float
    unit: str
    dimensions: dict[str, str] = field(default_factory=dict)


class RecordingMetrics:
    """Every ``add`` in order; ``total(name)`` sums a metric's values (optionally of one dimension)."""

    def __init__(self) -> None:
        self.recorded: list[Recorded] = []

    def add(
        self,
        name: str,
        value: float = 1.0,
        *,
        unit: str = "Count",
        dimensions: Mapping[str, str] | None = None,
    ) -> None:
        self.recorded.append(Recorded(name, float(value), unit, dict(dimensions or {})))

    def of(self, name: str) -> list[Recorded]:
        return [r for r in self.recorded if r.name == name]

    def total(self, name: str, **dimensions: str) -> float:
        return sum(r.value for r in self.of(name) if dimensions.items() <= r.dimensions.items())
