"""The answer in flight of a conversation (docs/chat.md): stopping it from another request, process or
Lambda container, and answering one message at a time. The flags live in ``Counters``, so every
instance sharing the store sees them.

Stopping:

- ``stream:conv:<id>`` = the start of the conversation's streaming answer in flight (epoch ms), set
  when the turn is accepted and removed when its stream ends (it expires by itself after
  :data:`STREAM_TTL_S` should the process die);
- ``stop:conv:<id>`` = when a stop was last requested (epoch ms). A streaming answer that started at
  or before that time stops; one that starts later is not affected, so a stale flag never stops the
  next answer. The answer that honours a stop removes the flag.

Stamps come from the service clock (wall time), so they compare across machines (NTP-synchronized).

One answer at a time (:class:`TurnLeases`): a message sent while the conversation is still answering
the previous one is refused with 409, so the stored conversation always reads question, answer,
question, answer. Without it two requests sent at once to one conversation (two tabs, a double
submit, a client that does not wait) were both answered and their messages interleaved: four
questions, then four answers, each later turn's history and summary built on that order. The lease
``turn:conv:<id>`` is taken atomically when a turn is accepted (``increment_up_to`` with a limit of
1) and released when its answer is stored or the turn fails; one left by a process that died expires
after :data:`TURN_LEASE_TTL_S`. A retry of the message being answered (the same ``messageId``) is not
refused: it waits for that answer (``services/chat/replay.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragchat.domain.clock import Clock

if TYPE_CHECKING:
    from ragchat.ports import Counters

#: a turn lasts at most the API's 29 s (a stream: the model budget plus retrieval); a lease left by
#: a process that died is gone after this (the idempotency takeover's wait, for the same reason)
TURN_LEASE_TTL_S = 60.0
BUSY = "This conversation is still answering your previous message: wait for that answer, then send again."
STREAM_TTL_S = 180.0  # longer than any stream: the model budget (15 s) plus retrieval and slack
STOP_TTL_S = 300.0


def _stream_key(conv_id: str) -> str:
    return f"stream:conv:{conv_id}"


def _turn_key(conv_id: str) -> str:
    return f"turn:conv:{conv_id}"


def _stop_key(conv_id: str) -> str:
    return f"stop:conv:{conv_id}"


class StopFlags:
    def __init__(self, counters: Counters, clock: Clock) -> None:
        self.counters = counters
        self.clock = clock

    def _now_ms(self) -> tuple[float, int]:
        now = self.clock()
        return now, int(now * 1000)

    def begin(self, conv_id: str) -> int:
        """Mark a streaming answer in flight; returns its start stamp for :meth:`stop_requested`."""
        now, ms = self._now_ms()
        self.counters.put(_stream_key(conv_id), ms, ttl_seconds=STREAM_TTL_S, now=now)
        return ms

    def end(self, conv_id: str) -> None:
        self.counters.reset(_stream_key(conv_id))

    def stop(self, conv_id: str) -> bool:
        """Ask the conversation's answer in flight to stop; returns whether one was in flight (the
        flag is set either way: a stream accepted a moment ago may not be marked yet)."""
        now, ms = self._now_ms()
        in_flight = self.counters.get(_stream_key(conv_id), now=now) > 0
        self.counters.put(_stop_key(conv_id), ms, ttl_seconds=STOP_TTL_S, now=now)
        return in_flight

    def stop_requested(self, conv_id: str, started_ms: int) -> bool:
        """Whether a stop was requested since ``started_ms`` (one read); honouring it removes it."""
        requested = self.counters.get(_stop_key(conv_id), now=self.clock())
        if requested and requested >= started_ms:
            self.counters.reset(_stop_key(conv_id))
            return True
        return False


def release_previous_run(counters: Counters) -> int:
    """``ragchat serve`` at start: the turn leases and stream marks a previous run left (killed
    mid-turn, its lease would answer 409 for up to :data:`TURN_LEASE_TTL_S`, ~58 s after a quick
    restart; issue 43) belong to no live turn, and are removed. Only for stores one machine shares
    (``LocalCounters``): in the cloud other containers' turns are live, and their leases expire.
    Returns how many were removed."""
    from ragchat.ports import LocalCounters

    if not isinstance(counters, LocalCounters):
        return 0
    return counters.reset_prefix(_turn_key("")) + counters.reset_prefix(_stream_key(""))


class TurnLeases:
    """One answer at a time per conversation (module docstring)."""

    def __init__(self, counters: Counters, clock: Clock) -> None:
        self.counters = counters
        self.clock = clock

    def take(self, conv_id: str) -> bool:
        """Take the conversation's lease; ``False`` when another turn holds it."""
        key = _turn_key(conv_id)
        return (
            self.counters.increment_up_to(key, limit=1, ttl_seconds=TURN_LEASE_TTL_S, now=self.clock())
            is not None
        )

    def release(self, conv_id: str) -> None:
        self.counters.reset(_turn_key(conv_id))
