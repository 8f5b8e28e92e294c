"""Model calls with deadlines (issue 8): a model that accepts and never answers costs a turn at most
the turn budget (15 s by default), then docs/retrieval.md's fallback; the timed-out call counts for the
breaker. Time is a FakeClock: the hung model 'waits' by advancing it, nothing sleeps."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from ragchat.config import load_settings
from ragchat.domain.errors import TransientError
from ragchat.domain.models import Completion, ModelRequest
from ragchat.domain.prompts import FALLBACK_PREFIX
from ragchat.services.answering import Answerer, AskService
from ragchat.services.model_calls import ModelCaller, ModelTimeout
from ragchat.services.retrieval import Retriever

from tests.fakes import FakeChatModel, FakeClock
from tests.unit.test_chat_service import OWNER, Rig

FIRST_TOKEN_S = 10.0


class HungModel(FakeChatModel):
    """Accepts every call and never answers: each attempt waits its first-token timeout (or what is
    left of the call's budget, if less) on the fake clock, then times out as an adapter would."""

    def __init__(self, clock: FakeClock, *, deltas_before_hang: list[str] | None = None) -> None:
        super().__init__("unused", model_id="claude-fake")
        self.clock = clock
        self.timeouts: list[float | None] = []
        self.deltas_before_hang = deltas_before_hang or []

    def _hang(self, request: ModelRequest) -> None:
        self.requests.append(request)
        self.timeouts.append(request.timeout_s)
        wait = FIRST_TOKEN_S if request.timeout_s is None else min(FIRST_TOKEN_S, request.timeout_s)
        self.clock.advance(wait)
        raise TransientError("model timed out")

    def complete(self, request: ModelRequest) -> Completion:
        self._hang(request)
        raise AssertionError("unreachable")

    def stream(self, request: ModelRequest) -> Iterator[str]:
        yield from self.deltas_before_hang
        self._hang(request)


def _rig(**env: str) -> tuple[Rig, HungModel]:
    clock = FakeClock()
    model = HungModel(clock)
    # retry waits pass on the fake clock too
    return Rig(env, model=model, clock=clock, sleep=clock.advance), model


def _timed_say(rig: Rig, conv: str, text: str) -> tuple[Any, float]:
    rig.clock.advance(10)
    start = rig.clock()
    result = rig.chat.turns.send(OWNER, conv, text)
    return result, rig.clock() - start


def test_settings_default_to_3_10_15_seconds_and_can_be_changed() -> None:
    s = load_settings({})
    assert (s.model_connect_timeout_s, s.model_first_token_timeout_s, s.model_turn_budget_s) == (3, 10, 15)
    s = load_settings({"MODEL_TURN_BUDGET_SECONDS": "20", "MODEL_FIRST_TOKEN_TIMEOUT_SECONDS": "5"})
    assert (s.model_first_token_timeout_s, s.model_turn_budget_s) == (5, 20)


def test_a_hung_model_costs_a_turn_at_most_the_budget_then_the_fallback() -> None:
    rig, model = _rig()
    conv = rig.conv()
    result, elapsed = _timed_say(rig, conv, "Why is the sky blue?")
    assert result.model == "fallback" and result.message.content.startswith(FALLBACK_PREFIX)
    assert elapsed <= 15.0
    # 10 s first-token timeout, a 0.2 s retry wait, the rest of the budget; no third attempt
    assert model.timeouts[0] == 15.0 and len(model.timeouts) == 2
    assert rig.counters.get(f"breaker:conv:{conv}", now=rig.clock()) == 1  # the timeout counted


def test_the_turn_budget_setting_governs_the_deadline() -> None:
    rig, model = _rig(MODEL_TURN_BUDGET_SECONDS="8")
    conv = rig.conv()
    result, elapsed = _timed_say(rig, conv, "Why is the sky blue?")
    assert result.model == "fallback" and elapsed <= 8.0
    assert model.timeouts == [8.0]


def test_five_hung_turns_open_the_breaker_and_the_sixth_costs_no_model_time() -> None:
    rig, model = _rig()
    conv = rig.conv()
    for i in range(5):
        result, elapsed = _timed_say(rig, conv, f"Sky question {i}?")
        assert result.model == "fallback" and elapsed <= 15.0
    calls = model.calls
    result, elapsed = _timed_say(rig, conv, "Sky question 6?")
    assert result.model == "fallback" and elapsed == 0.0
    assert model.calls == calls


def test_a_hung_stream_gives_the_fallback_within_the_budget() -> None:
    rig, _ = _rig()
    conv = rig.conv()
    rig.clock.advance(10)
    start = rig.clock()
    model_id, events = rig.chat.turns.stream(OWNER, conv, "Why is the sky blue?")
    assert model_id == "claude-fake"  # known before the model is asked
    names = [name for name, _ in events]
    assert names == ["answer_start", "answer_delta", "sources", "answer_end"]
    assert rig.clock() - start <= 15.0
    stored = rig.store.list_messages(OWNER, conv).items[-1]
    assert stored.model == "fallback"
    assert rig.counters.get(f"breaker:conv:{conv}", now=rig.clock()) == 1


def test_a_stream_still_running_at_the_deadline_is_cut_and_its_text_kept() -> None:
    clock = FakeClock()

    class Slow(FakeChatModel):
        def stream(self, request: ModelRequest) -> Iterator[str]:
            self.requests.append(request)
            for word in ["The sky ", "is blue ", "because ", "of ", "scattering "]:
                clock.advance(4)  # 4 s per delta: the 15 s budget ends during the fourth
                yield word

    rig = Rig(model=Slow("unused"), clock=clock)
    conv = rig.conv()
    clock.advance(10)
    start = clock()
    _, events = rig.chat.turns.stream(OWNER, conv, "Why is the sky blue?")
    got = list(events)
    assert got[-1][0] == "error" and got[-1][1]["code"] == "model_error"
    # cut at the first delta after the deadline (a silent stream is cut by its read timeout)
    assert clock() - start <= 15.0 + 4.0
    stored = rig.store.list_messages(OWNER, conv).items[-1]
    assert stored.interrupted and stored.content.startswith("The sky is blue")


def test_a_hung_model_costs_a_one_shot_question_at_most_the_budget() -> None:
    rig, _ = _rig()
    model = HungModel(rig.clock)
    retriever = Retriever(rig.embedder, rig.index, rig.settings)
    caller = ModelCaller(
        model, sleep=rig.clock.advance, clock=rig.clock, budget_s=rig.settings.model_turn_budget_s
    )
    ask = AskService(retriever, Answerer(caller, rig.settings), rig.settings)
    start = rig.clock()
    result = ask.ask(OWNER, "Why is the sky blue?")
    assert result.model == "fallback" and result.answer.startswith(FALLBACK_PREFIX)
    assert rig.clock() - start <= 15.0


def test_a_spent_budget_fails_the_stream_while_iterating_not_before() -> None:
    clock = FakeClock()
    caller = ModelCaller(FakeChatModel("Blue."), clock=clock, budget_s=15)
    deltas = caller.stream(ModelRequest("s", [], [], "q"), deadline=clock() - 1)  # no error yet
    with pytest.raises(ModelTimeout):
        next(deltas)
