"""What reading one document may spend (its CPU budget and text ceiling), and a page of its text:
shared by the readers of every format (``extraction``, ``images``, ``scanned``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ragchat.domain.errors import ExtractionError
from ragchat.domain.file_errors import too_slow_to_read

#: a page of a document's text and its metadata (``{"page": n}`` for a PDF page)
Page = tuple[str, dict[str, Any]]


class CpuBudget:
    """CPU seconds of the current thread a document may still spend (``time.thread_time``)."""

    def __init__(
        self,
        seconds: float,
        clock: Callable[[], float] = time.thread_time,
        wall: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds = seconds
        self.clock = clock
        self.wall = wall  # times what another process does for the document (``elsewhere``)
        self.started = clock()
        self.elsewhere = 0.0  # seconds spent by another process for this document (the OCR engine)
        self.chars_left: int | None = None  # extracted text still allowed (``None``: no ceiling)
        self.too_much_text = ""  # the refusal once it is spent

    def text(self, chars: int) -> None:
        """Count ``chars`` more characters of extracted text against the text ceiling (if any)."""
        if self.chars_left is None:
            return
        self.chars_left -= chars
        if self.chars_left < 0:
            raise ExtractionError(self.too_much_text)

    def left(self) -> float:
        """Seconds of the budget not yet spent."""
        return self.seconds - self.used()

    def used(self) -> float:
        """This thread's CPU since the start, and the time other processes worked for it."""
        return self.clock() - self.started + self.elsewhere

    def check(self, stage: str) -> None:
        used = self.used()
        if used > self.seconds:  # the child reader's CPU limit says the same (domain.file_errors)
            raise ExtractionError(too_slow_to_read(self.seconds).replace(" of CPU.", f" of CPU ({stage})."))
