"""The stop flag of an answer in flight (docs/chat.md) on every ``Counters`` adapter registered in
``conftest.COUNTERS`` (SQLite, DynamoDB on moto, the fake): two ``StopFlags`` sharing one store stand
for two processes / Lambda containers."""

from __future__ import annotations

from ragchat.services.chat.stops import STREAM_TTL_S, StopFlags

T0 = 1_767_225_600.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def test_a_stop_from_another_instance_reaches_the_answer_in_flight(counters):
    clock = Clock()
    streaming, stopping = StopFlags(counters, clock), StopFlags(counters, clock)
    assert stopping.stop("c1") is False  # nothing in flight
    clock.now += 1
    started = streaming.begin("c1")
    assert streaming.stop_requested("c1", started) is False  # the earlier stop does not apply
    clock.now += 2
    assert stopping.stop("c1") is True  # in flight
    assert stopping.stop("c2") is False  # other conversations are independent
    assert streaming.stop_requested("c1", started) is True
    assert streaming.stop_requested("c1", started) is False  # honoured once
    streaming.end("c1")
    assert stopping.stop("c1") is False


def test_a_marker_left_by_a_dead_process_expires(counters):
    clock = Clock()
    flags = StopFlags(counters, clock)
    flags.begin("c3")
    clock.now += STREAM_TTL_S
    assert flags.stop("c3") is False
