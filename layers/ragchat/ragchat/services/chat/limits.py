"""Chat rate limits (SPEC §11): a sliding window per conversation and per IP, and the flood check.

The windows themselves (and what "refused requests are not counted" means) are
:mod:`ragchat.services.limits`.

The circuit breaker, which guards model calls rather than requests, is
:class:`ragchat.services.model_calls.CircuitBreaker`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.clock import Clock, parse_iso
from ragchat.domain.errors import RateLimited
from ragchat.domain.limits import Rule, flood_retry_after
from ragchat.domain.models import Message
from ragchat.services.limits import Dimension, SlidingWindows

if TYPE_CHECKING:
    from ragchat.ports import Counters

logger = Logger(service="ragchat", child=True)


class RateLimiter:
    """``requests`` messages per ``window_s`` seconds per conversation and per source IP (sliding
    windows, see :mod:`ragchat.services.limits`: a refused message is counted nowhere), and no burst
    of 5 user messages under 2 s apart on average. ``ip_requests`` overrides the per-IP limit."""

    def __init__(
        self,
        counters: Counters,
        clock: Clock,
        *,
        requests: int,
        window_s: int,
        ip_requests: int | None = None,
    ) -> None:
        self.windows = SlidingWindows(counters, clock)
        self.clock = clock
        self.rule = Rule(requests, window_s)
        self.ip_rule = Rule(ip_requests or requests, window_s)

    def check(self, conv_id: str, ip: str | None, history: Sequence[Message]) -> None:
        """Count this message; raise ``RateLimited`` (429 + Retry-After) when it is over a limit."""
        user_times = [parse_iso(m.created_at) for m in history if m.role == "user" and m.created_at]
        flood = flood_retry_after(user_times, self.clock())
        if flood is not None:  # checked first: a refused message is not counted
            _limited(conv_id, ip, "flood", flood)
        dims = [Dimension("conv", f"conv:{conv_id}", self.rule)]
        if ip:
            dims.append(Dimension("ip", f"ip:{ip}", self.ip_rule))
        refusal = self.windows.admit(dims)
        if refusal is not None:
            _limited(conv_id, ip, refusal.dimension, refusal.retry_after)


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
