"""A turn as docs/chat.md events: ``answer_start``, ``answer_delta``…, ``sources``, ``answer_end``; or
``refusal`` / ``error``; and :data:`KEEPALIVE` (a comment line) when no event went out for 15 s.

The model is read in a worker thread (:mod:`.pump`); the generator waits on it with a timeout, so it
sends keep-alives while the model is silent and reads the stop flag (:mod:`.stops`) every 0.5 s of
stream time. Deltas are validated as they arrive (:class:`ValidatedStream`): they add up to the
stored answer, whose ``Sources:`` line (and anything held back) follows as a last delta.

Endings: a client that goes away (``GeneratorExit``) stops the model stream and keeps the partial
answer, marked interrupted; a stop request does the same but still ends with ``sources`` and
``answer_end`` (``interrupted: true``); a model failure before any text gives the fallback reply,
after some text an ``error`` event (the partial answer is kept).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from ragchat.domain.citation_stream import ValidatedStream
from ragchat.domain.errors import RagchatError
from ragchat.domain.messages import REFUSAL_SUGGESTIONS
from ragchat.domain.models import Message, source_json
from ragchat.services.chat.pump import Delta, DeltaPump, Done, Failed, Item, StreamPacing
from ragchat.services.chat.state import Turn, TurnResult, model_request
from ragchat.services.logs import log_error
from ragchat.services.model_calls import ModelTimeout

if TYPE_CHECKING:
    from ragchat.services.answering import Answer, Answerer
    from ragchat.services.model_calls import ModelCaller

logger = Logger(service="ragchat", child=True)

Event = tuple[str, dict[str, Any]]
# Not an SSE event: the serializer writes it as the comment line ``: keep-alive``.
KEEPALIVE: Event = ("keep-alive", {})
# Stores the assistant message of a turn: (turn, answer, assistant id, interrupted) → the result.
StoreAnswer = Callable[[Turn, "Answer", str, bool], TurnResult]

MODEL_FAILED = "The model failed while answering; the partial answer was kept."
DEADLINE_GRACE_S = 5.0  # a model silent this long past the turn budget is given up on
_STOPPED = "stopped"


_ERROR_CODES = {429: "rate_limited", 502: "model_error", 503: "unavailable"}


def error_event(exc: Exception) -> Event:
    """docs/chat.md ``error`` for a turn that failed after ``answer_start`` (a domain error keeps its
    message, e.g. a vector index still waking up; anything else is an internal error)."""
    if isinstance(exc, RagchatError) and exc.status != 500:
        return "error", {"code": _ERROR_CODES.get(exc.status, "error"), "message": exc.message}
    return "error", {"code": "internal", "message": "Internal error"}


def closing_events(message: Message) -> Iterator[Event]:
    sources: dict[str, Any] = {"sources": [source_json(s) for s in message.sources or []]}
    if message.query is not None:
        sources["query"] = message.query  # what was searched (a follow-up's standalone query)
    yield "sources", sources
    end: dict[str, Any] = {"messageId": message.id, "content": message.content}
    if message.interrupted:
        end["interrupted"] = True
    yield "answer_end", end


def refusal_events(result: TurnResult) -> Iterator[Event]:
    yield (
        "refusal",
        {
            "message": result.message.content,
            "suggestions": [*result.suggestions, *REFUSAL_SUGGESTIONS],
            "messageId": result.message.id,
            **({"query": result.message.query} if result.message.query is not None else {}),
        },
    )


def answer_events(result: TurnResult) -> Iterator[Event]:
    """A stored answer after ``answer_start``: a refusal, or one delta and the closing events."""
    if result.guard_used:
        yield from refusal_events(result)
        return
    yield "answer_delta", {"text": result.message.content}
    yield from closing_events(result.message)


def replay_events(result: TurnResult) -> Iterator[Event]:
    """A stored answer (a replay) as the first request sent it: ``answer_start``, then a refusal, or
    one delta and the closing events."""
    msg = result.message
    yield "answer_start", {"conversationId": msg.conversation_id, "messageId": msg.id}
    yield from answer_events(result)


class TurnStream:
    """The events (after ``answer_start``) of one turn whose answer the model streams."""

    def __init__(
        self,
        turn: Turn,
        assistant_id: str,
        *,
        caller: ModelCaller,
        answerer: Answerer,
        store: StoreAnswer,
        validate: bool,
        pacing: StreamPacing,
        stop_requested: Callable[[], bool] | None = None,
    ) -> None:
        self.turn = turn
        self.assistant_id = assistant_id
        self.caller = caller
        self.answerer = answerer
        self.store = store
        self.pacing = pacing
        self.stop_requested = stop_requested
        self.validated = ValidatedStream(h.id for h in turn.retrieval.hits) if validate else None
        self.raw: list[str] = []
        self.sent: list[str] = []

    def events(self, breaker_is_open: bool) -> Iterator[Event]:
        turn = self.turn
        if breaker_is_open:
            yield from self._fallback()
            return
        deltas = self.caller.stream(model_request(self.answerer, turn), deadline=turn.deadline)
        pump = DeltaPump(deltas, size=self.pacing.queue_size)
        t0 = time.perf_counter()
        try:
            outcome = yield from self._relay(pump)
        except GeneratorExit:
            # The client went away: stop generating, keep what was produced, marked interrupted.
            pump.stop()
            turn.timings["ai_completion"] = (time.perf_counter() - t0) * 1000
            self.store(turn, self._partial(), self.assistant_id, True)
            self._log("stream_interrupted")
            raise
        pump.stop()
        turn.timings["ai_completion"] = (time.perf_counter() - t0) * 1000
        if outcome == _STOPPED:
            self._log("stream_stopped")
            yield from self._close_with(self._partial(), interrupted=True)
        elif isinstance(outcome, Failed):
            self.caller.failed(turn.breaker, outcome.error)
            yield from self._after_failure()
        else:
            self.caller.succeeded(turn.breaker)
            yield from self._close_with(self._finished(), interrupted=False)

    def _relay(self, pump: DeltaPump) -> Generator[Event, None, Item | str]:
        """Relays deltas (and keep-alives); returns ``Done``, ``Failed`` or :data:`_STOPPED`."""
        p = self.pacing
        last_event = last_check = p.clock()
        while True:
            now = p.clock()
            if self.stop_requested is not None and now - last_check >= p.stop_check_s:
                last_check = now
                if self.stop_requested():
                    return _STOPPED
            timeout = p.keepalive_s - (now - last_event)
            if self.stop_requested is not None:
                timeout = min(timeout, p.stop_check_s - (now - last_check))
            item = p.wait(pump.queue, max(timeout, 0.0))
            if item is None:
                if p.clock() - last_event >= p.keepalive_s:
                    yield KEEPALIVE
                    last_event = p.clock()
                if self.caller.clock() > self.turn.deadline + DEADLINE_GRACE_S:
                    return Failed(ModelTimeout("The model stayed silent past the turn budget"))
                continue
            if isinstance(item, Delta):
                self.raw.append(item.text)
                out = self.validated.feed(item.text) if self.validated else item.text
                if out:
                    self.sent.append(out)
                    yield "answer_delta", {"text": out}
                    last_event = p.clock()
            elif isinstance(item, Done | Failed):
                return item

    def _fallback(self) -> Iterator[Event]:
        answer = self.answerer.fallback(
            self.turn.retrieval, conversation_id=self.turn.conv.id, timings=self.turn.timings
        )
        yield "answer_delta", {"text": answer.text}
        yield from closing_events(self.store(self.turn, answer, self.assistant_id, False).message)

    def _after_failure(self) -> Iterator[Event]:
        if not self.sent:
            yield from self._fallback()
            return
        self.store(self.turn, self._partial(), self.assistant_id, True)
        yield "error", {"code": "model_error", "message": MODEL_FAILED}

    def _close_with(self, answer: Answer, *, interrupted: bool) -> Iterator[Event]:
        """The last delta (what validation added, what was held back), then the closing events."""
        streamed = "".join(self.sent)
        if answer.text.startswith(streamed):
            if len(answer.text) > len(streamed):
                yield "answer_delta", {"text": answer.text[len(streamed) :]}
        else:  # cannot happen (the property tests of ValidatedStream); say so if it does
            log_error(self.turn.conv.id, "StreamDiverged", "streamed deltas are not a prefix of the answer")
        yield from closing_events(self.store(self.turn, answer, self.assistant_id, interrupted).message)

    def _finished(self) -> Answer:
        return self.answerer.finish(
            "".join(self.raw),
            self.turn.retrieval,
            model=self.caller.model_id,
            conversation_id=self.turn.conv.id,
            timings=self.turn.timings,
        )

    def _partial(self) -> Answer:
        return self.answerer.finish(
            "".join(self.raw),
            self.turn.retrieval,
            model=self.caller.model_id,
            conversation_id=self.turn.conv.id,
        )

    def _log(self, kind: str) -> None:
        logger.info(
            "chat.event",
            extra={"conversationId": self.turn.conv.id, "type": kind, "messageId": self.assistant_id},
        )
