"""The local ingestion pipeline: the same steps the cloud state machine runs, called in one
background worker thread, so ``POST /notes`` answers 202 at once and the document moves
``PENDING → PROCESSING → READY | FAILED`` behind it.

The worker is fair: it runs the documents in hand round by round, a slice of each per round
(:class:`~ragchat.services.ingest_runner.SlicedRunner`), so a short note posted while a big
document is processing is READY a round or two later instead of after the big one; a document
deleted meanwhile is dropped at its next slice. A PDF, page or Office file is read on the runner's
reading lane, beside the worker: the rounds go on while it is read.

With a ``warmer`` (:class:`~ragchat.services.evidence.EvidenceWarmer`), a document that finished is
queued for its evidence vectors, which the worker embeds only when no ingestion is waiting: the
warmer yields between batches as soon as a document is started, and resumes later.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ragchat.services.ingest_runner import SlicedRunner

if TYPE_CHECKING:
    from ragchat.services.ingest_steps import IngestSteps

logger = logging.getLogger(__name__)

Key = tuple[str, str]
Warmer = Callable[[str, str, Callable[[], bool]], bool]


# Documents the worker takes from the queue per round (they are split before the round's embedding).
MAX_DOCUMENTS_PER_RUN = 128


class InlineIngestionLauncher:
    """``IngestionLauncher`` with one worker thread.

    A document is never run twice at the same time: starting one that is queued is a no-op (the run
    will read the latest body); starting one that is running queues exactly one more run after the
    current one (a replacement uploaded mid-run is not lost). The worker takes up to
    ``max_documents_per_run`` queued documents per round into its :class:`SlicedRunner`, which
    gives every document in hand a slice per round with their embedder calls coalesced (about
    ``coalesce_texts`` texts per call)."""

    def __init__(
        self,
        steps_factory: Callable[[], IngestSteps],
        *,
        runner: SlicedRunner,
        max_documents_per_run: int = MAX_DOCUMENTS_PER_RUN,
        warmer: Warmer | None = None,
    ) -> None:
        """``runner``: the worker's rounds (built by the composition root, with at most
        ``max_documents_per_run`` new documents per round)."""
        self._steps_factory = steps_factory
        self._warmer = warmer
        self._warm: deque[Key] = deque()  # documents whose evidence vectors are still to embed
        self._warming = False
        self._max_per_run = max(1, int(max_documents_per_run))
        self._runner = runner
        self._queue: deque[Key] = deque()
        self._queued: set[Key] = set()
        self._running: set[Key] = set()
        self._rerun: set[Key] = set()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.completed = 0  # runs finished (for tests and the CLI's progress)
        self._arrivals = 0  # documents started so far (to tell those that came during a round)
        self._seen = 0
        if runner.lane is not None:
            runner.lane.on_done(self._wake)  # a document read apart is taken up at once

    # ------------------------------------------------------------------ IngestionLauncher
    def start(self, owner: str, document_id: str, *, version: str | None = None) -> None:
        # ``version`` is not needed here: a start while running always queues one more run, which
        # reads the newest body; the run in hand took the document's version at its split, and its
        # later steps stand down once the submit records a newer one (IngestSteps checks it).
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
            self._arrivals += 1
            self._queued.add(key)
            self._ensure_worker()
            self._cond.notify_all()

    # ------------------------------------------------------------------ extras
    def resume(self, pending: Iterable[Key]) -> None:
        """Queue documents a crash left ``PENDING``/``PROCESSING`` (called at server start)."""
        for owner, document_id in pending:
            self.start(owner, document_id)

    def warm(self, keys: Iterable[Key]) -> None:
        """Queue documents for their evidence vectors (e.g. READY ones a server finds unwarmed at
        start); embedded when no ingestion is waiting. Without a warmer: nothing."""
        if self._warmer is None:
            return
        with self._cond:
            if self._closed:
                return
            for key in keys:
                if key not in self._warm:
                    self._warm.append(key)
            if self._warm:
                self._ensure_worker()
                self._cond.notify_all()

    def wait_warm(self, timeout: float = 30.0) -> bool:
        """Block until ingestion is idle and no evidence is left to embed, at most ``timeout``
        seconds. True when done."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._running or self._warm or self._warming:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def in_flight(self, owner: str, document_id: str) -> bool:
        """Whether this worker has the document queued or running (a PENDING/PROCESSING document it
        has not is stuck: a crash, or a worker error, left it behind)."""
        key = (owner, document_id)
        with self._cond:
            return key in self._queued or key in self._running

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
            self._warm.clear()
            self._cond.notify_all()
            thread = self._thread
        self._runner.close()
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
                # (documents only waiting for the reading lane: nothing to do until it wakes us)
                while (
                    not self._queue
                    and not self._runner.runnable()
                    and not self._closed
                    and not (self._warm and not self._runner.active())
                ):
                    self._cond.wait()
                if self._closed:
                    self._running.clear()  # left PENDING/PROCESSING: ``resume`` takes them up
                    self._cond.notify_all()
                    return
                warm = self._warm.popleft() if not self._queue and not self._runner.active() else None
                self._warming = warm is not None
            if warm is not None:
                self._warm_one(warm)
                continue
            with self._cond:
                keys: list[Key] = []
                while self._queue and len(keys) < self._max_per_run:
                    key = self._queue.popleft()
                    self._queued.discard(key)
                    keys.append(key)
                self._running.update(keys)
                self._seen = self._arrivals
            finished: list[Key] = []
            try:
                finished = self._round(keys)
            except Exception:  # the steps record failures themselves; this is a last resort
                logger.exception("ingest.worker_error", extra={"documentIds": [k[1] for k in keys]})
                self._runner.clear()  # dropped: they stay PENDING/PROCESSING until ``resume``
                with self._cond:
                    finished = sorted(self._running)
            finally:
                self._finish(finished)

    def _round(self, keys: list[Key]) -> list[Key]:
        steps = self._steps_factory()
        self._runner.add(keys)
        return self._runner.round(steps, arrived=self._arrived)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _arrived(self) -> bool:
        """Whether a document was started since this round took its work."""
        with self._cond:
            return self._arrivals != self._seen and bool(self._queue)

    def _warm_one(self, key: Key) -> None:
        """Embed one document's evidence; it goes back to the front when an upload interrupted it."""
        assert self._warmer is not None
        done = True
        try:
            done = self._warmer(*key, self._upload_waiting)
        except Exception:  # a question embeds what it reaches meanwhile
            logger.exception("evidence.warm_error", extra={"documentId": key[1]})
        with self._cond:
            self._warming = False
            if not done and not self._closed and key not in self._warm:
                self._warm.appendleft(key)
            self._cond.notify_all()

    def _upload_waiting(self) -> bool:
        with self._cond:
            return bool(self._queue) or self._closed

    def _finish(self, finished: list[Key]) -> None:
        with self._cond:
            for key in finished:
                self._running.discard(key)
                self.completed += 1
                if self._warmer is not None and key not in self._warm:
                    self._warm.append(key)
                if key in self._rerun and not self._closed:
                    self._rerun.discard(key)
                    self._queue.append(key)
                    self._queued.add(key)
            self._cond.notify_all()
