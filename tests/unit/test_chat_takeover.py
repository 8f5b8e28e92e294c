"""A retried ``messageId`` whose first attempt died after storing the question (e.g. kill -9)."""

from __future__ import annotations

from ragchat.domain.ids import new_id
from ragchat.domain.models import Message
from ragchat.services.chat.replay import IDEMPOTENCY_MAX_WAIT_S

from tests.fakes.clock import FakeClock
from tests.unit.test_chat_service import OWNER, Rig

QUESTION = "Why is the sky blue?"


def _rig(env: dict[str, str] | None = None) -> tuple[Rig, list[float]]:
    clock = FakeClock()
    waited: list[float] = []

    def sleep(seconds: float) -> None:  # the retry's polls move the service clock
        waited.append(seconds)
        clock.advance(seconds)

    return Rig(env, sleep=sleep, clock=clock), waited


def _dead_first_attempt(rig: Rig, conv_id: str) -> Message:
    user = Message(
        id=new_id(), conversation_id=conv_id, owner=OWNER, role="user", content=QUESTION,
        client_message_id="m-1",
    )  # fmt: skip
    return rig.store.add_message(user)


def test_a_retry_takes_over_within_the_wait_limit_with_the_whole_model_budget() -> None:
    rig, waited = _rig()
    conv = rig.conv()
    user = _dead_first_attempt(rig, conv)
    result = rig.chat.turns.send(OWNER, conv, QUESTION, message_id="m-1")
    assert 0 < sum(waited) <= IDEMPOTENCY_MAX_WAIT_S + 0.1
    assert not result.replayed and result.message.model == rig.model.model_id  # not the fallback
    assert rig.model.requests[-1].timeout_s == rig.settings.model_turn_budget_s  # the wait ate none
    msgs = rig.store.list_messages(OWNER, conv).items
    assert [(m.role, m.id if m.role == "user" else None) for m in msgs] == [
        ("user", user.id),
        ("assistant", None),
    ]
    again = rig.chat.turns.send(OWNER, conv, QUESTION, message_id="m-1")
    assert again.replayed and again.message.id == result.message.id


def test_a_first_attempt_older_than_the_takeover_setting_is_answered_at_once() -> None:
    rig, waited = _rig({"IDEMPOTENCY_TAKEOVER_SECONDS": "1"})
    conv = rig.conv()
    _dead_first_attempt(rig, conv)
    rig.clock.advance(2)  # the server was restarted meanwhile
    result = rig.chat.turns.send(OWNER, conv, QUESTION, message_id="m-1")
    assert waited == [] and not result.replayed
    assert [m.role for m in rig.store.list_messages(OWNER, conv).items] == ["user", "assistant"]
