"""What the reader (``ragchat.ports.Reader``, docs/reader.md) finds in one passage for one question:
its best answer span and how that span scores against "no answer here"."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Reading:
    #: the best span's character offsets in the passage (``-1`` when the passage had no tokens)
    start: int
    end: int
    #: the span's start + end logits, and the no-answer ([CLS]) start + end logits
    span_score: float
    null_score: float

    @property
    def found(self) -> bool:
        return self.start >= 0 and self.end > self.start

    @property
    def margin(self) -> float:
        """Best span − no answer: above the calibrated threshold, the passage answers."""
        return self.span_score - self.null_score if self.found else -math.inf

    @property
    def probability(self) -> float:
        """σ(margin): a probability-like "this passage answers the question"."""
        z = self.margin
        if z == -math.inf:
            return 0.0
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))
