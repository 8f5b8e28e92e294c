"""Rate limits on the costly routes (SPEC §11), over the ``Counters`` port.

Semantics
---------
Every limited request is counted in a few *dimensions*, each a two-bucket sliding window of
``requests`` per ``window_s`` seconds on its own counter:

- chat messages: per conversation and per source IP (:mod:`ragchat.services.chat.limits`);
- one-shot questions (``ask``), notes (``notes``: ``POST /notes``, ``POST /documents``) and uploads
  (``uploads``): per owner and per source IP.

Each route has its own buckets (a burst of notes does not eat the questions' allowance). The per-IP
bucket counts everyone behind one address (a NAT) together, with the route's limit or
``RATE_LIMIT_IP_REQUESTS``; the per-owner (per-conversation) buckets are independent, so one user
spending their own allowance never refuses another user, and only *admitted* requests fill the
shared IP bucket.

A request is admitted only if every dimension has room, and then it is counted in all of them; a
refused request is counted in none (a client retrying while limited lets the window drain). Each
dimension's check-and-add is one atomic conditional increment (``Counters.increment_up_to``), so of
100 simultaneous requests against a limit of 60 exactly 60 pass. When a later dimension refuses, the
earlier ones are given back (a decrement); until then a concurrent request may see them one higher,
which can only refuse, never over-admit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.clock import Clock
from ragchat.domain.errors import RateLimited
from ragchat.domain.limits import Rule, admit_ceiling, sliding_retry_after, window_position

if TYPE_CHECKING:
    from ragchat.ports import Counters

logger = Logger(service="ragchat", child=True)


@dataclass(slots=True, frozen=True)
class Dimension:
    """One window a request is counted in: ``name`` for logs, ``key`` the counter prefix."""

    name: str
    key: str
    rule: Rule


@dataclass(slots=True, frozen=True)
class Refusal:
    dimension: str
    retry_after: int


class SlidingWindows:
    """Admit a request in every dimension or in none (see the module docstring)."""

    def __init__(self, counters: Counters, clock: Clock) -> None:
        self.counters = counters
        self.clock = clock

    def admit(self, dims: Sequence[Dimension]) -> Refusal | None:
        now = self.clock()
        positions = [window_position(now, d.rule.window_s) for d in dims]
        prev_keys = [f"{d.key}:{pos.bucket - 1}" for d, pos in zip(dims, positions, strict=True)]
        previous = self.counters.get_many(prev_keys, now=now) if dims else {}
        counted: list[tuple[str, Rule]] = []
        for d, pos, prev_key in zip(dims, positions, prev_keys, strict=True):
            prev = previous.get(prev_key, 0)
            key, window_s = f"{d.key}:{pos.bucket}", d.rule.window_s
            ceiling = admit_ceiling(prev, pos.elapsed, window_s, d.rule.requests)
            if self.counters.increment_up_to(key, limit=ceiling, ttl_seconds=2 * window_s, now=now) is None:
                for done_key, rule in counted:  # not admitted: counted nowhere
                    self.counters.increment(done_key, amount=-1, ttl_seconds=2 * rule.window_s, now=now)
                current = self.counters.get(key, now=now)
                retry = sliding_retry_after(prev, current, pos.elapsed, window_s, d.rule.requests)
                return Refusal(d.name, retry)
            counted.append((key, d.rule))
        return None


class RequestLimiter:
    """Per-owner and per-IP limits on the costly routes other than chat. ``check(route, owner, ip)``
    counts an admitted request or raises :class:`RateLimited` (429 + ``Retry-After``) without
    counting it. Disabled (``rules`` empty): every request passes and nothing is counted."""

    def __init__(
        self,
        counters: Counters,
        clock: Clock,
        rules: Mapping[str, Rule],
        *,
        ip_requests: int | None = None,
    ) -> None:
        self.windows = SlidingWindows(counters, clock)
        self.rules = dict(rules)
        self.ip_requests = ip_requests

    @property
    def enabled(self) -> bool:
        return bool(self.rules)

    def check(self, route: str, owner: str | None, ip: str | None = None) -> None:
        if not self.rules:
            return
        rule = self.rules[route]
        dims = [Dimension("owner", f"rl:{route}:owner:{owner}", rule)] if owner else []
        if ip:
            ip_rule = Rule(self.ip_requests or rule.requests, rule.window_s)
            dims.append(Dimension("ip", f"rl:{route}:ip:{ip}", ip_rule))
        refusal = self.windows.admit(dims)
        if refusal is not None:
            logger.info(
                "rate_limit",
                extra={
                    "route": route,
                    "ip": ip,
                    "type": "limit",
                    "dimension": refusal.dimension,
                    "retryAfter": refusal.retry_after,
                },
            )
            raise RateLimited(f"Rate limit exceeded; retry in {refusal.retry_after} s", refusal.retry_after)
