"""A turn as SPEC §10 events: ``answer_start``, ``answer_delta``…, ``sources``, ``answer_end``; or
``refusal`` / ``error``.

Deltas pass through the streaming citation filter as they arrive; once the model is done the answer
is validated like a JSON turn and whatever validation appended (the ``Sources:`` line) follows as a
last delta. A client that goes away stops generation and keeps the partial answer, marked
interrupted; a model failure before any text gives the fallback reply, after some text an ``error``
event (the partial answer is kept).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from ragchat.domain.citations import CitationStreamFilter
from ragchat.domain.ids import new_id
from ragchat.domain.messages import REFUSAL_SUGGESTIONS
from ragchat.domain.models import Message, source_json
from ragchat.services.chat.state import Turn, TurnResult, model_request

if TYPE_CHECKING:
    from ragchat.services.answering import Answer, Answerer
    from ragchat.services.model_calls import ModelCaller

logger = Logger(service="ragchat", child=True)

Event = tuple[str, dict[str, Any]]
# Stores the assistant message of a turn: (turn, answer, assistant id, interrupted) → the result.
StoreAnswer = Callable[[Turn, "Answer", str, bool], TurnResult]

MODEL_FAILED = "The model failed while answering; the partial answer was kept."


def closing_events(message: Message) -> Iterator[Event]:
    yield "sources", {"sources": [source_json(s) for s in message.sources or []]}
    yield "answer_end", {"messageId": message.id, "content": message.content}


def refusal_events(result: TurnResult) -> Iterator[Event]:
    yield (
        "refusal",
        {
            "message": result.message.content,
            "suggestions": list(REFUSAL_SUGGESTIONS),
            "messageId": result.message.id,
        },
    )


def replay_events(result: TurnResult) -> Iterator[Event]:
    """A stored answer (a replay, a guard reply or a tool-mode answer) as one delta."""
    msg = result.message
    if result.guard_used:
        yield from refusal_events(result)
        return
    yield "answer_start", {"conversationId": msg.conversation_id, "messageId": msg.id}
    yield "answer_delta", {"text": msg.content}
    yield from closing_events(msg)


class TurnStream:
    """The events of one turn whose answer the model streams."""

    def __init__(
        self, turn: Turn, *, caller: ModelCaller, answerer: Answerer, store: StoreAnswer, validate: bool
    ) -> None:
        self.turn = turn
        self.caller = caller
        self.answerer = answerer
        self.store = store
        self.validate = validate
        self.assistant_id = new_id()
        self.raw: list[str] = []
        self.sent: list[str] = []

    def events(self, breaker_is_open: bool) -> Iterator[Event]:
        turn = self.turn
        yield "answer_start", {"conversationId": turn.conv.id, "messageId": self.assistant_id}
        if breaker_is_open:
            yield from self._fallback()
            return
        deltas = self.caller.stream(model_request(self.answerer, turn), deadline=turn.deadline)
        t0 = time.perf_counter()
        try:
            yield from self._deltas(deltas)
        except GeneratorExit:
            # The client went away: stop generating, keep what was produced, marked interrupted.
            _close(deltas)
            turn.timings["ai_completion"] = (time.perf_counter() - t0) * 1000
            self.store(turn, self._partial(), self.assistant_id, True)
            logger.info(
                "chat.event",
                extra={
                    "conversationId": turn.conv.id,
                    "type": "stream_interrupted",
                    "messageId": self.assistant_id,
                },
            )
            raise
        except Exception as exc:
            _close(deltas)
            turn.timings["ai_completion"] = (time.perf_counter() - t0) * 1000
            self.caller.failed(turn.breaker, exc)
            yield from self._after_failure()
            return
        turn.timings["ai_completion"] = (time.perf_counter() - t0) * 1000
        self.caller.succeeded(turn.breaker)
        yield from self._finish()

    def _deltas(self, deltas: Iterator[str]) -> Iterator[Event]:
        filt = CitationStreamFilter(h.id for h in self.turn.retrieval.hits) if self.validate else None
        for delta in deltas:
            self.raw.append(delta)
            out = filt.feed(delta) if filt else delta
            if out:
                self.sent.append(out)
                yield "answer_delta", {"text": out}

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

    def _finish(self) -> Iterator[Event]:
        turn = self.turn
        answer = self.answerer.finish(
            "".join(self.raw),
            turn.retrieval,
            model=self.caller.model_id,
            conversation_id=turn.conv.id,
            timings=turn.timings,
        )
        streamed = "".join(self.sent)
        if answer.text.startswith(streamed) and len(answer.text) > len(streamed):
            yield "answer_delta", {"text": answer.text[len(streamed) :]}
        yield from closing_events(self.store(turn, answer, self.assistant_id, False).message)

    def _partial(self) -> Answer:
        return self.answerer.finish(
            "".join(self.raw),
            self.turn.retrieval,
            model=self.caller.model_id,
            conversation_id=self.turn.conv.id,
        )


def _close(iterator: Any) -> None:
    close = getattr(iterator, "close", None)
    if callable(close):
        close()
