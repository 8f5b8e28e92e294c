"""One answer at a time per conversation (docs/chat.md, ``services/chat/stops.py``): a message sent
while the conversation is still answering the previous one gets 409 and is not stored, so the
conversation reads question, answer, question, answer. Before, two messages sent at once were both
answered and interleaved (two questions, then two answers). The turn in flight is a real streaming
turn held open by the test's model, answered by one service instance while another instance
(another request, process or Lambda container sharing the stores) is sent the second message."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ragchat.domain.errors import Conflict
from ragchat.services.chat.stops import BUSY, TURN_LEASE_TTL_S, TurnLeases

from tests.fakes import FakeChatModel
from tests.unit.api_support import make_api
from tests.unit.test_chat_streaming import OWNER, QUESTION, Shared, _next_real, _start

ANSWER = "Rayleigh scattering of sunlight. [source: n-sky]"


def _roles(shared: Shared, conv_id: str) -> list[str]:
    return [m.role for m in shared.store.list_messages(OWNER, conv_id).items]


def _finish(model: Any, events: Any) -> None:
    model.send(ANSWER)
    model.finish()
    for _ in events:
        pass


def test_a_message_sent_while_the_previous_is_answered_gets_409_and_is_not_stored() -> None:
    shared = Shared()
    model, _fake, first, conv_id = _start(shared)
    _model_id, events = first.turns.stream(OWNER, conv_id, QUESTION)
    assert _next_real(events)[0] == "answer_start"
    other = shared.service(FakeChatModel(ANSWER))  # another instance sharing the stores

    with pytest.raises(Conflict) as refused:
        other.turns.send(OWNER, conv_id, "And why is it red at sunset?")
    assert refused.value.status == 409 and refused.value.message == BUSY
    assert _roles(shared, conv_id) == ["user"]  # the refused message was not stored
    elsewhere = other.conversations.create(OWNER).id  # other conversations are not held up
    assert other.turns.send(OWNER, elsewhere, QUESTION).message.role == "assistant"

    _finish(model, events)
    answered = other.turns.send(OWNER, conv_id, "And why is it red at sunset?")
    assert answered.message.role == "assistant"
    assert _roles(shared, conv_id) == ["user", "assistant", "user", "assistant"]


def test_a_retry_of_the_message_being_answered_waits_instead_of_409() -> None:
    shared = Shared()
    model, _fake, first, conv_id = _start(shared)
    _model_id, events = first.turns.stream(OWNER, conv_id, QUESTION, message_id="m-1")
    assert _next_real(events)[0] == "answer_start"
    other = shared.service(FakeChatModel(ANSWER))

    retried = other.turns.send(OWNER, conv_id, QUESTION, message_id="m-1")  # the client timed out

    assert retried.message.role == "assistant"
    with pytest.raises(Conflict):  # a new message is still refused while the first answer runs
        other.turns.send(OWNER, conv_id, "Another question", message_id="m-2")
    _finish(model, events)


def test_a_turn_that_fails_lets_the_next_message_through() -> None:
    shared = Shared()
    model, _fake, first, conv_id = _start(shared)
    _model_id, events = first.turns.stream(OWNER, conv_id, QUESTION)
    assert _next_real(events)[0] == "answer_start"
    model.fail(RuntimeError("the model went away"))
    for _ in events:
        pass

    other = shared.service(FakeChatModel(ANSWER))
    assert other.turns.send(OWNER, conv_id, "Try again: why is the sky blue?").message.role == "assistant"


def test_a_turn_left_by_a_process_that_died_holds_the_conversation_for_a_minute_at_most() -> None:
    shared = Shared()
    service = shared.service(FakeChatModel(ANSWER))
    conv_id = service.conversations.create(OWNER).id
    assert TurnLeases(shared.counters, shared.clock).take(conv_id)  # a turn whose process died

    with pytest.raises(Conflict):
        service.turns.send(OWNER, conv_id, QUESTION)
    shared.clock.advance(TURN_LEASE_TTL_S + 1)
    assert service.turns.send(OWNER, conv_id, QUESTION).message.role == "assistant"


def test_the_api_answers_409_with_what_to_do() -> None:
    api = make_api()
    res = api.call("POST", "/chat/conversations", body={})
    conv_id = json.loads(res["body"])["id"]
    leases = TurnLeases(api.container.counters, api.clock)
    assert leases.take(conv_id)  # another request is answering this conversation

    res = api.call("POST", f"/chat/conversations/{conv_id}/messages", body={"content": "Hello?"})

    assert res["statusCode"] == 409
    assert json.loads(res["body"]) == {"error": BUSY}
    leases.release(conv_id)
    res = api.call("POST", f"/chat/conversations/{conv_id}/messages", body={"content": "Hello?"})
    assert res["statusCode"] == 200
