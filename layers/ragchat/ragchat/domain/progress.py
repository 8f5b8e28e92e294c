"""How far an indexing document has got, and how long it may still take (issue 45 item 5).

The split step records how many chunks the document was cut into and when (``chunks_total``,
``indexing_since``); every batch embedded and indexed adds its chunks to ``chunks_done`` in one
atomic write (the cloud's batches finish in parallel). The estimate assumes the rest goes at the
pace so far: ``left = elapsed × (total − done) / done``. Pure: the caller passes the time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ragchat.domain.clock import parse_iso
from ragchat.domain.models import Document, DocumentStatus

IN_FLIGHT = (DocumentStatus.PENDING, DocumentStatus.PROCESSING)


@dataclass(frozen=True, slots=True)
class Progress:
    """``stage``: ``queued`` (accepted, not yet read), ``reading`` (being read and split: ``total``
    is ``None``) or ``indexing``; ``percent`` and ``seconds_left`` are ``None`` until they can be
    told (no chunk indexed yet: no pace)."""

    stage: str
    done: int
    total: int | None
    percent: int | None
    seconds_left: int | None


def progress_of(doc: Document, now: float) -> Progress | None:
    """The progress of a document being ingested (``None`` once it is READY or FAILED)."""
    if DocumentStatus(doc.status) not in IN_FLIGHT:
        return None
    total = doc.chunks_total
    if total is None:
        stage = "queued" if DocumentStatus(doc.status) == DocumentStatus.PENDING else "reading"
        return Progress(stage, 0, None, None, None)
    done = max(0, min(doc.chunks_done, total))  # a retried batch is counted twice: never over 100%
    percent = math.floor(100 * done / total) if total else 100
    left: int | None = None
    if done > 0 and doc.indexing_since:
        try:
            elapsed = now - parse_iso(doc.indexing_since)
        except (TypeError, ValueError):
            elapsed = -1.0
        if elapsed >= 0:
            left = math.ceil(elapsed * (total - done) / done)
    return Progress("indexing", done, total, percent, left)


def describe(progress: Progress) -> str:
    """``12 / 40 chunks (30%), about 1 min left`` (the CLI's words; the pages say the same)."""
    if progress.total is None:
        return "waiting to be read" if progress.stage == "queued" else "reading the file"
    text = f"{progress.done} / {progress.total} chunks ({progress.percent}%)"
    if progress.seconds_left is not None and progress.done < progress.total:
        text += f", about {duration(progress.seconds_left)} left"
    return text


def duration(seconds: int) -> str:
    """``45 s``, ``3 min``, ``1 h 5 min``: rounded up to what a person reads at a glance."""
    if seconds < 60:
        return f"{max(seconds, 1)} s"
    minutes = math.ceil(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min" if minutes % 60 else f"{minutes // 60} h"
