"""Chat limits (docs/security.md): the flood rule, then the one limiter (:class:`ragchat.services.limits.
RequestLimiter`, route ``chat``) per owner, per source IP and per conversation.

They are checked inside the turn, not at the route: a retried ``messageId`` that was already answered
is a replay, not a new message, and must not be counted; and the flood rule reads the conversation's
stored messages. The windows themselves (and what "refused requests are not counted" means) are
:mod:`ragchat.services.limits`.

The circuit breaker, which guards model calls rather than requests, is
:class:`ragchat.services.model_calls.CircuitBreaker`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.clock import parse_iso
from ragchat.domain.errors import RateLimited
from ragchat.domain.limits import flood_retry_after
from ragchat.domain.models import Message

if TYPE_CHECKING:
    from ragchat.services.limits import RequestLimiter

logger = Logger(service="ragchat", child=True)


class ChatLimits:
    """No burst of 5 user messages under 2 s apart on average (checked first: a refused message is
    counted nowhere), then the ``chat`` rule of ``limiter`` per owner, IP and conversation (a new
    conversation does not reset the owner's allowance)."""

    def __init__(self, limiter: RequestLimiter) -> None:
        self.limiter = limiter

    def check(self, owner: str, conv_id: str, ip: str | None, history: Sequence[Message]) -> None:
        """Count this message; raise ``RateLimited`` (429 + Retry-After) when it is over a limit."""
        user_times = [parse_iso(m.created_at) for m in history if m.role == "user" and m.created_at]
        flood = flood_retry_after(user_times, self.limiter.clock())
        if flood is not None:
            logger.info(
                "chat.rate_limit",
                extra={
                    "conversationId": conv_id, "ip": ip, "type": "limit", "dimension": "flood",
                    "retryAfter": flood,
                },
            )  # fmt: skip
            raise RateLimited(f"Too many messages in a short time; retry in {flood} s", flood)
        self.limiter.check("chat", owner, ip, scope=conv_id)
