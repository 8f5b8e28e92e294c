"""The model's deltas read in a worker thread (docs/chat.md).

The stream generator waits on the pump's queue with a timeout, so it can send a keep-alive while the
model is silent and check the stop flag between deltas; when the client hangs up (or a stop is
requested) :meth:`DeltaPump.stop` makes the worker stop reading and close the model stream at its
next delta. The queue is small: the worker reads at most a few deltas ahead of the client.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Delta:
    text: str


@dataclass(frozen=True, slots=True)
class Done:
    """The model finished its answer."""


@dataclass(frozen=True, slots=True)
class Failed:
    error: Exception


Item = Delta | Done | Failed
# Waits up to ``timeout`` seconds for the worker's next item; None when there was none.
Wait = Callable[["queue.Queue[Item]", float], Item | None]


def queue_wait(q: queue.Queue[Item], timeout: float) -> Item | None:
    try:
        return q.get(timeout=max(timeout, 0.0))
    except queue.Empty:
        return None


@dataclass(frozen=True, slots=True)
class StreamPacing:
    """When a stream sends keep-alives and reads the stop flag (tests inject ``clock`` and ``wait``)."""

    keepalive_s: float = 15.0  # a comment line when no event was sent for this long (API Gateway idles out)
    stop_check_s: float = 0.5  # read the stop flag at most this often (stream time)
    clock: Callable[[], float] = time.monotonic
    wait: Wait = queue_wait
    queue_size: int = 4


class DeltaPump:
    """Reads ``deltas`` in a daemon thread into :attr:`queue`: ``Delta``…, then ``Done`` or ``Failed``."""

    _PUT_SLICE_S = 0.1  # how often a worker blocked on a full queue looks at the stop flag

    def __init__(self, deltas: Iterator[str], *, size: int = 4) -> None:
        self.queue: queue.Queue[Item] = queue.Queue(maxsize=max(size, 1))
        self._stop = threading.Event()
        self.closed = threading.Event()  # set once the model stream is closed
        self._thread = threading.Thread(target=self._run, args=(deltas,), name="model-stream", daemon=True)
        self._thread.start()

    def _run(self, deltas: Iterator[str]) -> None:
        try:
            for text in deltas:
                if not self._put(Delta(text)):
                    return
            self._put(Done())
        except Exception as exc:
            self._put(Failed(exc))
        finally:
            _close(deltas)
            self.closed.set()

    def _put(self, item: Item) -> bool:
        while not self._stop.is_set():
            try:
                self.queue.put(item, timeout=self._PUT_SLICE_S)
                return True
            except queue.Full:
                continue
        return False

    def stop(self) -> None:
        """Stop reading: the worker closes the model stream after the delta it is waiting for."""
        self._stop.set()


def _close(iterator: Any) -> None:
    close = getattr(iterator, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # closing a stream that already failed
            close()
