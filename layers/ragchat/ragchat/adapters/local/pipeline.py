"""The local ingestion pipeline: the same steps the cloud state machine runs, called in order in one
background worker thread, so ``POST /notes`` answers 202 at once and the document moves
``PENDING → PROCESSING → READY | FAILED`` behind it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragchat.services.ingestion import IngestSteps

logger = logging.getLogger(__name__)

Key = tuple[str, str]


# Documents the worker takes from the queue at once; their embedder calls are coalesced
# (``IngestSteps.run_many``): many short documents embed far faster together than one by one.
MAX_DOCUMENTS_PER_RUN = 128


class InlineIngestionLauncher:
    """``IngestionLauncher`` with one worker thread and a FIFO queue.

    A document is never run twice at the same time: starting one that is queued is a no-op (the run
    will read the latest body); starting one that is running queues exactly one more run after the
    current one (a replacement uploaded mid-run is not lost). The worker takes up to
    ``max_documents_per_run`` queued documents at a time and hands them to ``steps.run_many`` (when
    the steps have it), which coalesces their embedder calls; otherwise it runs them one by one."""

    def __init__(
        self, steps_factory: Callable[[], IngestSteps], *, max_documents_per_run: int = MAX_DOCUMENTS_PER_RUN
    ) -> None:
        self._steps_factory = steps_factory
        self._max_per_run = max(1, int(max_documents_per_run))
        self._queue: deque[Key] = deque()
        self._queued: set[Key] = set()
        self._running: set[Key] = set()
        self._rerun: set[Key] = set()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.completed = 0  # runs finished (for tests and the CLI's progress)

    # ------------------------------------------------------------------ IngestionLauncher
    def start(self, owner: str, document_id: str, *, version: str | None = None) -> None:
        # ``version`` is not needed here: a start while running always queues one more run, which
        # reads the newest body.
        key = (owner, document_id)
        with self._cond:
            if self._closed:
                raise RuntimeError("ingestion pipeline is closed")
            if key in self._queued:
                return
            if key in self._running:
                self._rerun.add(key)
                return
            self._queue.append(key)
            self._queued.add(key)
            self._ensure_worker()
            self._cond.notify_all()

    # ------------------------------------------------------------------ extras
    def resume(self, pending: Iterable[Key]) -> None:
        """Queue documents a crash left ``PENDING``/``PROCESSING`` (called at server start)."""
        for owner, document_id in pending:
            self.start(owner, document_id)

    def busy(self) -> bool:
        with self._cond:
            return bool(self._queue) or bool(self._running)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until nothing is queued or running, at most ``timeout`` seconds. True when idle."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._running:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def close(self, timeout: float = 10.0) -> None:
        """Stop accepting work, let the current run finish, stop the worker. Queued runs that have not
        started stay ``PENDING`` (``resume`` picks them up next time)."""
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._queued.clear()
            self._rerun.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    # ------------------------------------------------------------------ worker
    def _ensure_worker(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._work, name="ragchat-ingest", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                keys: list[Key] = []
                while self._queue and len(keys) < self._max_per_run:
                    key = self._queue.popleft()
                    self._queued.discard(key)
                    keys.append(key)
                self._running = set(keys)
            try:
                steps = self._steps_factory()
                run_many = getattr(steps, "run_many", None)
                if len(keys) > 1 and callable(run_many):
                    run_many(keys)
                else:
                    for key in keys:
                        self._run_one(steps, key)
            except Exception:  # run_many() records failures itself; this is a last resort
                logger.exception("ingest.worker_error", extra={"documentIds": [k[1] for k in keys]})
            finally:
                with self._cond:
                    self._running = set()
                    self.completed += len(keys)
                    for key in keys:
                        if key in self._rerun and not self._closed:
                            self._rerun.discard(key)
                            self._queue.append(key)
                            self._queued.add(key)
                    self._cond.notify_all()

    @staticmethod
    def _run_one(steps: IngestSteps, key: Key) -> None:
        try:
            steps.run(*key)
        except Exception:  # run() records failures itself; this is a last resort
            logger.exception("ingest.worker_error", extra={"documentId": key[1]})
