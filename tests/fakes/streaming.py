"""A chat model that streams step by step under the test's control, and stream pacing on a fake
clock: the stream's waits return at once, advancing the fake clock, while the model is silent."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

from ragchat.domain.models import Completion, ModelRequest
from ragchat.services.chat.pump import Item, StreamPacing


class SteppedChatModel:
    """``ChatModel`` whose ``stream`` yields exactly the deltas the test ``send``s, when it sends them
    (``finish`` ends the answer, ``fail`` raises). ``closed`` is set when the stream is closed;
    ``read`` lists the deltas the stream handed out."""

    def __init__(self, model_id: str = "stepped-model") -> None:
        self.model_id = model_id
        self.requests: list[ModelRequest] = []
        self.read: list[str] = []
        self.started = threading.Event()
        self.closed = threading.Event()
        self._steps: list[str | BaseException | None] = []
        self._waiting = False
        self._cond = threading.Condition()

    def send(self, *deltas: str) -> None:
        self._push(*deltas)

    def finish(self) -> None:
        self._push(None)

    def fail(self, exc: BaseException) -> None:
        self._push(exc)

    def _push(self, *steps: str | BaseException | None) -> None:
        with self._cond:
            self._steps.extend(steps)
            self._cond.notify_all()

    def silent(self) -> bool:
        """The stream waits for the test's next step."""
        with self._cond:
            return self._waiting and not self._steps

    def _next(self) -> str | BaseException | None:
        with self._cond:
            while not self._steps:
                self._waiting = True
                self._cond.wait()
            self._waiting = False
            return self._steps.pop(0)

    def stream(self, request: ModelRequest) -> Iterator[str]:
        self.requests.append(request)
        self.started.set()
        try:
            while True:
                step = self._next()
                if step is None:
                    return
                if isinstance(step, BaseException):
                    raise step
                self.read.append(step)
                yield step
        finally:
            self.closed.set()

    def complete(self, request: ModelRequest) -> Completion:
        return Completion(text="".join(self.stream(request)), model=self.model_id)


class FakePacing:
    """``StreamPacing`` on a fake clock: a wait returns the worker's next item, or — while ``model``
    is silent — advances the clock by the timeout and returns None. Nothing sleeps."""

    def __init__(self, model: SteppedChatModel, **kwargs: Any) -> None:
        self.model = model
        self.now = 0.0
        self.pacing = StreamPacing(clock=self.clock, wait=self.wait, **kwargs)

    def clock(self) -> float:
        return self.now

    def wait(self, q: queue.Queue[Item], timeout: float) -> Item | None:
        try:
            return q.get_nowait()
        except queue.Empty:
            pass
        if self.model.silent():
            self.now += max(timeout, 0.001)  # time always moves on
            return None
        try:  # the model is producing: its item is on the way (bounded, in case a test is wrong)
            return q.get(timeout=10)
        except queue.Empty:
            return None
