"""Rate limits and per-owner ceilings (docs/security.md): ONE limiter, :class:`RequestLimiter`, for every
limited route, configured in one place (``Settings.limit_rules``).

Semantics
---------
Every limited request is counted in a few *dimensions*, each a two-bucket sliding window of
``requests`` per ``window_s`` seconds on its own counter:

- chat messages (``chat``): per owner (``chat:owner``: across all their conversations, so opening
  new ones does not reset it), per source IP and per conversation (the ``scope``), plus the
  flood rule on the conversation's stored messages (:mod:`ragchat.services.chat.limits`);
- conversations created (``conversations``), one-shot questions (``ask``), notes and files
  (``notes``: ``POST /notes``, ``POST /documents``) and upload grants (``uploads``): per owner and
  per source IP; the local upload receiver (``receiver``): per IP (a URL's holder has no principal);
- ingestion ceilings per owner per day, whatever the door (API, upload, S3): documents
  (``ingest_documents``) and bytes (``ingest_bytes``, counted by the body's size).

Each route has its own buckets (a burst of notes does not eat the questions' allowance). The per-IP
bucket counts everyone behind one address (a NAT) together, with the route's limit or
``RATE_LIMIT_IP_REQUESTS``; the per-owner (per-conversation) buckets are independent, so one user
spending their own allowance never refuses another user, and only *admitted* requests fill the
shared IP bucket.

A request is admitted only if every dimension has room, and then it is counted in all of them; a
refused request is counted in none (a client retrying while limited lets the window drain). Each
dimension's check-and-add is one atomic conditional increment (``Counters.increment_up_to``: a
conditional update in DynamoDB, one statement in SQLite), so of 100 simultaneous requests against a
limit of 60 exactly 60 pass. When a later dimension refuses, the earlier ones are given back (a
decrement); until then a concurrent request may see them one higher, which can only refuse, never
over-admit. Refusals are 429 with ``Retry-After``.
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
    from ragchat.config import Settings
    from ragchat.ports import Counters

logger = Logger(service="ragchat", child=True)


@dataclass(slots=True, frozen=True)
class Dimension:
    """One window a request is counted in: ``name`` for logs, ``key`` the counter prefix."""

    name: str
    key: str
    rule: Rule
    amount: int = 1  # what this request adds (1 request, or a body's bytes)


@dataclass(slots=True, frozen=True)
class Refusal:
    dimension: str
    retry_after: int


class SlidingWindows:
    """Admit a request in every dimension or in none (see the module docstring)."""

    def __init__(self, counters: Counters, clock: Clock) -> None:
        self.counters = counters
        self.clock = clock

    def give_back(self, route: str, owner: str, rule: Rule | None) -> None:
        """Undo one admitted owner count of ``route`` (a later check of the same request refused)."""
        if rule is None:
            return
        now = self.clock()
        bucket = window_position(now, rule.window_s).bucket
        key = f"rl:{route}:owner:{owner}:{bucket}"
        self.counters.increment(key, amount=-1, ttl_seconds=2 * rule.window_s, now=now)

    def full(self, dims: Sequence[Dimension]) -> Refusal | None:
        """Whether one of ``dims`` has no room for its request now, counting nothing (a read)."""
        now = self.clock()
        positions = [window_position(now, d.rule.window_s) for d in dims]
        keys = [
            (f"{d.key}:{p.bucket - 1}", f"{d.key}:{p.bucket}") for d, p in zip(dims, positions, strict=True)
        ]
        values = self.counters.get_many([k for pair in keys for k in pair], now=now) if dims else {}
        for d, pos, (prev_key, key) in zip(dims, positions, keys, strict=True):
            prev, current = values.get(prev_key, 0), values.get(key, 0)
            if current + d.amount > admit_ceiling(prev, pos.elapsed, d.rule.window_s, d.rule.requests):
                retry = sliding_retry_after(prev, current, pos.elapsed, d.rule.window_s, d.rule.requests)
                return Refusal(d.name, retry)
        return None

    def admit(self, dims: Sequence[Dimension]) -> Refusal | None:
        now = self.clock()
        positions = [window_position(now, d.rule.window_s) for d in dims]
        prev_keys = [f"{d.key}:{pos.bucket - 1}" for d, pos in zip(dims, positions, strict=True)]
        previous = self.counters.get_many(prev_keys, now=now) if dims else {}
        counted: list[Dimension] = []
        for d, pos, prev_key in zip(dims, positions, prev_keys, strict=True):
            prev = previous.get(prev_key, 0)
            key, window_s = f"{d.key}:{pos.bucket}", d.rule.window_s
            ceiling = admit_ceiling(prev, pos.elapsed, window_s, d.rule.requests)
            admitted = self.counters.increment_up_to(
                key, limit=ceiling, amount=d.amount, ttl_seconds=2 * window_s, now=now
            )
            if admitted is None:
                for done in counted:  # not admitted: counted nowhere
                    ttl = 2 * done.rule.window_s
                    self.counters.increment(done.key, amount=-done.amount, ttl_seconds=ttl, now=now)
                current = self.counters.get(key, now=now)
                retry = sliding_retry_after(
                    prev, current + d.amount - 1, pos.elapsed, window_s, d.rule.requests
                )
                return Refusal(d.name, retry)
            counted.append(Dimension(d.name, key, d.rule, d.amount))
        return None


class RequestLimiter:
    """The one limiter (module docstring). ``check(route, owner, ip, scope=…, amount=…)`` counts an
    admitted request or raises :class:`RateLimited` (429 + ``Retry-After``) without counting it. A
    route without a rule (rate limiting off) passes and counts nothing."""

    def __init__(
        self,
        counters: Counters,
        clock: Clock,
        rules: Mapping[str, Rule],
        *,
        ip_requests: int | None = None,
    ) -> None:
        self.windows = SlidingWindows(counters, clock)
        self.clock = clock
        self.rules = dict(rules)
        self.ip_requests = ip_requests

    @classmethod
    def of(cls, settings: Settings, counters: Counters, clock: Clock) -> RequestLimiter:
        """The limiter the settings configure (``Settings.limit_rules``; none when rate limiting is off)."""
        rules = {route: Rule(*rule) for route, rule in settings.limit_rules().items()}
        return cls(counters, clock, rules, ip_requests=settings.rate_limit_ip_requests)

    @property
    def enabled(self) -> bool:
        return bool(self.rules)

    def check(
        self,
        route: str,
        owner: str | None,
        ip: str | None = None,
        *,
        scope: str | None = None,
        amount: int = 1,
    ) -> None:
        dims = self._dimensions(route, owner, ip, scope, amount)
        if dims:
            self._refuse(route, ip, scope, self.windows.admit(dims))

    def peek(self, route: str, owner: str | None, ip: str | None = None, *, scope: str | None = None) -> None:
        """Raise :class:`RateLimited` when one more request of ``route`` would be refused now, counting
        nothing: the check made before a request's body is read (and before any work), where the
        request cannot be counted yet (a chat turn's replayed ``messageId`` is known only from its
        body); :meth:`check` counts it later."""
        dims = self._dimensions(route, owner, ip, scope, 1)
        if dims:
            self._refuse(route, ip, scope, self.windows.full(dims))

    def _dimensions(
        self, route: str, owner: str | None, ip: str | None, scope: str | None, amount: int
    ) -> list[Dimension]:
        rule = self.rules.get(route)
        if rule is None:
            return []
        owner_rule = self.rules.get(f"{route}:owner", rule)  # e.g. chat turns per owner
        dims = [Dimension("owner", f"rl:{route}:owner:{owner}", owner_rule, amount)] if owner else []
        if scope:
            dims.append(Dimension("scope", f"rl:{route}:scope:{scope}", rule, amount))
        if ip:
            ip_rule = Rule(self.ip_requests or rule.requests, rule.window_s)
            dims.append(Dimension("ip", f"rl:{route}:ip:{ip}", ip_rule, amount))
        return dims

    @staticmethod
    def _refuse(route: str, ip: str | None, scope: str | None, refusal: Refusal | None) -> None:
        if refusal is None:
            return
        event = "chat.rate_limit" if route == "chat" else "rate_limit"
        extra = {"route": route, "ip": ip, "type": "limit", "dimension": refusal.dimension}
        if route == "chat":
            extra["conversationId"] = scope
        logger.info(event, extra={**extra, "retryAfter": refusal.retry_after})
        what = _REFUSED.get(route, "Rate limit exceeded")
        raise RateLimited(f"{what}; retry in {refusal.retry_after} s", refusal.retry_after)

    def charge_ingestion(self, owner: str, size: int) -> None:
        """One more document of ``size`` bytes for ``owner`` today (``ingest_documents`` then
        ``ingest_bytes``), or ``RateLimited`` and nothing counted."""
        self.check("ingest_documents", owner)
        try:
            self.check("ingest_bytes", owner, amount=max(1, size))
        except RateLimited:
            self.windows.give_back("ingest_documents", owner, self.rules.get("ingest_documents"))
            raise


_REFUSED = {
    "ingest_documents": "Daily document limit reached",
    "ingest_bytes": "Daily ingestion volume reached",
    "conversations": "Too many new conversations",
}
