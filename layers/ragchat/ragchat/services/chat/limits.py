"""Chat rate limits (SPEC §11): a sliding window per conversation and per IP, and the flood check.

The circuit breaker, which guards model calls rather than requests, is
:class:`ragchat.services.model_calls.CircuitBreaker`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.clock import Clock, parse_iso
from ragchat.domain.errors import RateLimited
from ragchat.domain.limits import flood_retry_after, sliding_count, sliding_retry_after, window_position
from ragchat.domain.models import Message

if TYPE_CHECKING:
    from ragchat.ports import Counters

logger = Logger(service="ragchat", child=True)


class RateLimiter:
    """``requests`` messages per ``window_s`` seconds per conversation and per source IP (two-bucket
    sliding window in ``Counters``), and no burst of 5 user messages under 2 s apart on average."""

    def __init__(self, counters: Counters, clock: Clock, *, requests: int, window_s: int) -> None:
        self.counters = counters
        self.clock = clock
        self.requests = requests
        self.window_s = window_s

    def check(self, conv_id: str, ip: str | None, history: Sequence[Message]) -> None:
        """Count this message; raise ``RateLimited`` (429 + Retry-After) when it is over a limit."""
        now = self.clock()
        window_s = self.window_s
        pos = window_position(now, window_s)
        dims = [("conv", conv_id)] + ([("ip", ip)] if ip else [])
        prev_keys = [f"{kind}:{value}:{pos.bucket - 1}" for kind, value in dims]
        previous = self.counters.get_many(prev_keys, now=now)
        for (kind, value), prev_key in zip(dims, prev_keys, strict=True):
            current = self.counters.increment(
                f"{kind}:{value}:{pos.bucket}", ttl_seconds=2 * window_s, now=now
            )
            prev = previous.get(prev_key, 0)
            if sliding_count(prev, current, pos.elapsed, window_s) > self.requests:
                retry = sliding_retry_after(prev, current, pos.elapsed, window_s, self.requests)
                _limited(conv_id, ip, kind, retry)
        user_times = [parse_iso(m.created_at) for m in history if m.role == "user" and m.created_at]
        flood = flood_retry_after(user_times, now)
        if flood is not None:
            _limited(conv_id, ip, "flood", flood)


def _limited(conv_id: str, ip: str | None, dimension: str, retry: int) -> None:
    logger.info(
        "chat.rate_limit",
        extra={
            "conversationId": conv_id,
            "ip": ip,
            "type": "limit",
            "dimension": dimension,
            "retryAfter": retry,
        },
    )
    what = "Too many messages in a short time" if dimension == "flood" else "Rate limit exceeded"
    raise RateLimited(f"{what}; retry in {retry} s", retry)
