"""The reading lane: the split step of documents that may take long to read (a PDF, an HTML page,
an Office file, an e-book, a text over a megabyte), run on a thread of its own beside the local
ingestion worker.

Issue 43: a PDF being read held the worker, so another user's one-line note waited behind it (29.5 s
in ``bench/bench_fair_ingestion.py``, up to ``PARSE_CPU_SECONDS``). The worker now hands such a
document's split to the lane and goes on with its rounds (other documents' text, their embedding);
the lane answers with the document's plan (or the split's error) and wakes the worker, which takes it
up at its next round. The lane reads one document at a time: with ``ragchat serve`` the reading
itself runs in a parsing child of its own (``ragchat.adapters.local.parse_process.LanedParser``), so
the lane's thread only waits for it, under the child's CPU, memory and wall-clock limits.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

Split = Callable[[], dict[str, Any]]  # one document's split step (its plan)


class ReadingLane:
    """One daemon thread running submitted splits in turn. Thread-safe; results are taken by the
    worker (:meth:`take`) in the order they finished."""

    def __init__(self) -> None:
        self._inbox: queue.SimpleQueue[tuple[object, Split] | None] = queue.SimpleQueue()
        self._lock = threading.Condition()
        self._reading: set[object] = set()  # submitted, not yet taken back
        self._done: list[tuple[object, dict[str, Any] | None, Exception | None]] = []
        self._wake: Callable[[], None] = lambda: None
        self._thread: threading.Thread | None = None
        self._closed = False

    def on_done(self, wake: Callable[[], None]) -> None:
        """``wake`` is called (from the lane's thread) after each split ends."""
        self._wake = wake

    def free(self) -> bool:
        """Whether the lane reads nothing now (a split submitted now starts at once)."""
        with self._lock:
            return not self._reading and not self._closed

    def holds(self, token: object) -> bool:
        with self._lock:
            return token in self._reading

    def ready(self) -> bool:
        """Whether a split has ended and waits to be taken."""
        with self._lock:
            return bool(self._done)

    def submit(self, token: object, split: Split) -> None:
        """Run ``split`` on the lane; its plan or error comes back with ``token`` from :meth:`take`."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the reading lane is closed")
            self._reading.add(token)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ragchat-read", daemon=True)
                self._thread.start()
        self._inbox.put((token, split))

    def take(self) -> list[tuple[object, dict[str, Any] | None, Exception | None]]:
        """The splits that ended since the last call: ``(token, plan, None)`` or ``(token, None, error)``."""
        with self._lock:
            done, self._done = self._done, []
            for token, _, _ in done:
                self._reading.discard(token)
            return done

    def wait(self, timeout: float) -> bool:
        """Block until a split has ended (or ``timeout`` seconds). True when one waits to be taken."""
        with self._lock:
            return self._lock.wait_for(lambda: bool(self._done), timeout)

    def close(self) -> None:
        """Take no more splits; the thread ends after the one it runs (whose result nobody takes)."""
        with self._lock:
            self._closed = True
        self._inbox.put(None)

    def _run(self) -> None:
        while (item := self._inbox.get()) is not None:
            token, split = item
            plan: dict[str, Any] | None = None
            error: Exception | None = None
            try:
                plan = split()
            except Exception as exc:  # the worker records it (FAILED, or left for the next start)
                error = exc
            with self._lock:
                self._done.append((token, plan, error))
                self._lock.notify_all()
            self._wake()
