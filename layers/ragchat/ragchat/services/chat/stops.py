"""Stopping an answer in flight (docs/chat.md) from another request, process or Lambda container: the
flags live in ``Counters``, so every instance sharing the store sees them.

- ``stream:conv:<id>`` = the start of the conversation's streaming answer in flight (epoch ms), set
  when the turn is accepted and removed when its stream ends (it expires by itself after
  :data:`STREAM_TTL_S` should the process die);
- ``stop:conv:<id>`` = when a stop was last requested (epoch ms). A streaming answer that started at
  or before that time stops; one that starts later is not affected, so a stale flag never stops the
  next answer. The answer that honours a stop removes the flag.

Stamps come from the service clock (wall time), so they compare across machines (NTP-synchronized).
With two answers of one conversation in flight at once (the page sends one at a time), the first to
end removes the marker and ``stop`` then reports nothing in flight; the flag still stops the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragchat.domain.clock import Clock

if TYPE_CHECKING:
    from ragchat.ports import Counters

STREAM_TTL_S = 180.0  # longer than any stream: the model budget (15 s) plus retrieval and slack
STOP_TTL_S = 300.0


def _stream_key(conv_id: str) -> str:
    return f"stream:conv:{conv_id}"


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
