"""The streaming turn (docs/chat.md) with a model that streams step by step under the test's control:
``answer_start`` before anything slow, validated deltas, keep-alives while the model is silent,
hang-up and stop (from another service instance sharing the store). Stream time is a fake clock;
nothing sleeps (the only waits are on events the code under test sets)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ragchat.bootstrap import Chat, build_chat
from ragchat.config import load_settings
from ragchat.domain.models import Note, VectorRecord
from ragchat.services.chat.streaming import KEEPALIVE, Event
from ragchat.services.retrieval import Retriever

from tests.fakes import (
    FakeClock,
    FakeConversationStore,
    FakeCounters,
    FakeDocumentStore,
    FakeEmbedder,
    FakePacing,
    FakeVectorIndex,
    SteppedChatModel,
)

OWNER = "alice"
SKY = "The sky appears blue because of Rayleigh scattering of sunlight."
QUESTION = "Why is the sky blue?"


class Shared:
    """The stores every service instance (request, process, Lambda container) shares."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.store = FakeConversationStore(clock=self.clock)
        self.counters = FakeCounters()
        self.documents = FakeDocumentStore(clock=self.clock)
        self.embedder = FakeEmbedder(dimension=64)
        self.index = FakeVectorIndex(dimension=64)
        self.settings = load_settings({"MIN_SIMILARITY": "0.3", "RAGCHAT_DATA_DIR": "/nonexistent"})
        vec = self.embedder.vector_for(SKY)
        self.index.upsert(
            [VectorRecord(id="n-sky", vector=vec, text=SKY, owner=OWNER, document_id="d1", chunk_index=0)]
        )
        self.documents.put_notes([Note(id="n-sky", document_id="d1", chunk_index=0, text=SKY, owner=OWNER)])

    def service(self, model: Any, pacing: FakePacing | None = None) -> Chat:
        return build_chat(
            conversations=self.store,
            counters=self.counters,
            retriever=Retriever(self.embedder, self.index, self.settings),
            model=model,
            documents=self.documents,
            settings=self.settings,
            clock=self.clock,
            sleep=lambda _s: None,
            pacing=pacing.pacing if pacing else None,
        )

    def last_message(self, conv_id: str) -> Any:
        return self.store.list_messages(OWNER, conv_id).items[-1]


def _start(shared: Shared, **pacing: Any) -> tuple[SteppedChatModel, FakePacing, Chat, str]:
    model = SteppedChatModel()
    fake = FakePacing(model, **pacing)
    service = shared.service(model, fake)
    return model, fake, service, service.conversations.create(OWNER).id


def _next_real(events: Iterator[Event]) -> Event:
    """The next event that is not a keep-alive."""
    while True:
        event = next(events)
        if event != KEEPALIVE:
            return event


def _take(events: Iterator[Event], text: str) -> list[Event]:
    """Events until the deltas so far add up to ``text`` (each model delta is relayed as it comes)."""
    got: list[Event] = []
    while _deltas(got) != text:
        assert text.startswith(_deltas(got)) and len(got) < 50, got
        got.append(_next_real(events))
    return got


def _deltas(out: list[Event]) -> str:
    return "".join(d["text"] for n, d in out if n == "answer_delta")


def test_answer_start_goes_out_before_retrieval_and_the_model_call() -> None:
    shared = Shared()
    model, _fake, service, conv = _start(shared)
    _model_id, events = service.turns.stream(OWNER, conv, QUESTION)
    name, data = next(events)
    assert name == "answer_start" and data["conversationId"] == conv
    assert model.requests == [] and shared.embedder.query_calls == 0  # nothing slow has happened yet
    model.send("Blue.")
    model.finish()
    out = list(events)
    assert out[-1][0] == "answer_end" and out[-1][1]["messageId"] == data["messageId"]


def test_deltas_are_validated_as_they_stream_and_add_up_to_the_stored_answer() -> None:
    shared = Shared()
    model, _fake, service, conv = _start(shared)
    _m, events = service.turns.stream(OWNER, conv, QUESTION)
    next(events)
    model.send("Rayleigh ", "scattering [source: n-", "sky] and [source: ", "made-up-7] more.")
    # released as it comes (the partial tag "[source: n-" was held only until it completed)
    got = _take(events, "Rayleigh scattering [source: n-sky] and more.")
    model.send("\n\nSources: n-sky, made-up-7\n")
    model.finish()
    out = got + list(events)
    streamed = _deltas(out)
    stored = shared.last_message(conv)
    assert streamed == stored.content
    assert "made-up-7" not in streamed and streamed.count("Sources:") == 1
    assert streamed.endswith("(Removed invalid citation)\n\nSources: n-sky")
    assert not stored.interrupted


def test_keep_alive_while_the_model_is_silent() -> None:
    shared = Shared()
    model, fake, service, conv = _start(shared)
    _m, events = service.turns.stream(OWNER, conv, QUESTION)
    next(events)
    assert next(events) == KEEPALIVE  # the model said nothing yet: a comment line keeps the stream open
    assert 15.0 <= fake.now < 16.0
    assert next(events) == KEEPALIVE
    assert 30.0 <= fake.now < 31.0
    model.send("Blue [source: n-sky].")
    model.finish()
    out = list(events)
    assert _deltas(out) == shared.last_message(conv).content
    assert out[-1][0] == "answer_end"


def test_hang_up_stops_the_model_stream_and_stores_the_partial_answer_interrupted() -> None:
    shared = Shared()
    model, _fake, service, conv = _start(shared)
    _m, events = service.turns.stream(OWNER, conv, QUESTION)
    next(events)
    model.send("Rayleigh scattering ")
    assert _next_real(events) == ("answer_delta", {"text": "Rayleigh scattering"})
    events.close()  # the client went away
    stored = shared.last_message(conv)
    assert stored.role == "assistant" and stored.interrupted
    assert stored.content == "Rayleigh scattering"
    model.send("more ", "and more ")  # the worker takes at most the delta it was waiting for
    assert model.closed.wait(10)  # ... and closes the model stream
    assert len(model.read) <= 2
    assert not service.turns.stop(OWNER, conv)  # nothing in flight any more


def test_stop_from_another_instance_ends_the_stream_with_the_partial_answer() -> None:
    shared = Shared()
    model, fake, service, conv = _start(shared)
    other = shared.service(SteppedChatModel())  # another request / process / container
    _m, events = service.turns.stream(OWNER, conv, QUESTION)
    start = next(events)
    model.send("Blue light scatters ", "[source: n-sky] more")
    _take(events, "Blue light scatters [source: n-sky] more")
    assert other.turns.stop(OWNER, conv) is True  # an answer was in flight
    reads_before = fake.now
    out = list(events)  # ends by itself within the next stop check
    assert fake.now - reads_before <= 0.5 + 0.01
    assert [n for n, _ in out][-2:] == ["sources", "answer_end"]
    end = out[-1][1]
    stored = shared.last_message(conv)
    assert end["messageId"] == start[1]["messageId"] == stored.id and end["interrupted"] is True
    assert stored.interrupted and stored.content == end["content"]
    assert "Blue light scatters [source: n-sky] more" in stored.content
    streamed = "Blue light scatters [source: n-sky] more" + _deltas(out)
    assert streamed == stored.content  # the last delta carries the Sources line
    model.send("ignored")
    assert model.closed.wait(10)
    # the stop was honoured: the next answer is not stopped by the old flag
    shared.clock.advance(5)
    _m, events = service.turns.stream(OWNER, conv, "And why is it red at sunset?")
    next(events)
    model.send("Sunset.")
    model.finish()
    assert not list(events)[-1][1].get("interrupted")


def test_a_stop_for_another_owner_is_not_found() -> None:
    shared = Shared()
    _model, _fake, service, conv = _start(shared)
    try:
        service.turns.stop("mallory", conv)
    except Exception as exc:
        assert type(exc).__name__ == "NotFound"
    else:
        raise AssertionError("another owner could stop the conversation")


def test_a_retrieval_failure_after_answer_start_is_an_error_event() -> None:
    from ragchat.domain.errors import TransientError

    shared = Shared()
    model, _fake, service, conv = _start(shared)
    shared.index.fail_searches = 5
    _m, events = service.turns.stream(OWNER, conv, QUESTION)
    out = list(events)
    assert [n for n, _ in out] == ["answer_start", "error"]
    assert out[-1][1] == {"code": "unavailable", "message": out[-1][1]["message"]}
    assert model.requests == []
    assert TransientError.status == 503
