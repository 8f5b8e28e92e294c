"""The rate limiter over every ``Counters`` adapter (SQLite, DynamoDB on moto, the fake): exactly
``RATE_LIMIT_REQUESTS`` of a burst of simultaneous requests are admitted, and refused ones are not
counted. Time is an injected constant, so nothing here waits."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ragchat.domain.errors import RateLimited
from ragchat.domain.limits import Rule
from ragchat.services.chat.limits import ChatLimits
from ragchat.services.limits import RequestLimiter

T0 = 1_767_225_600.0


def _burst(n: int, request: Callable[[int], None]) -> int:
    """Fire ``n`` requests from 10 threads at once; how many were admitted."""
    admitted: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(10)

    def worker(offset: int) -> None:
        start.wait()
        for i in range(offset, n, 10):
            try:
                request(i)
            except RateLimited:
                continue
            with lock:
                admitted.append(i)

    pool = [threading.Thread(target=worker, args=(k,)) for k in range(10)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=120)
    return len(admitted)


def test_exactly_60_of_100_simultaneous_questions_are_admitted(counters):
    limiter = RequestLimiter(counters, lambda: T0, {"ask": Rule(60, 300)})
    assert _burst(100, lambda _: limiter.check("ask", "alice", "203.0.113.9")) == 60
    # only the admitted ones were counted, in both dimensions
    keys = ["rl:ask:owner:alice:5890752", "rl:ask:ip:203.0.113.9:5890752"]
    assert counters.get_many(keys, now=T0) == dict.fromkeys(keys, 60)


def test_exactly_60_of_100_simultaneous_chat_messages_are_admitted(counters):
    limiter = ChatLimits(RequestLimiter(counters, lambda: T0, {"chat": Rule(60, 300)}))
    assert _burst(100, lambda _: limiter.check("alice", "conv-1", "203.0.113.9", [])) == 60


def test_a_shared_address_admits_no_more_than_its_limit(counters):
    """Four users behind one address, 25 requests each at once: per owner at most 20, per address
    at most 60 (a refusal by the address gives the owner's slot back, so none leaks)."""
    limiter = RequestLimiter(counters, lambda: T0, {"notes": Rule(20, 300)}, ip_requests=60)
    owners = ["ann", "bea", "cid", "dan"]
    admitted = _burst(100, lambda i: limiter.check("notes", owners[i % 4], "198.51.100.1"))
    assert admitted <= 60
    counted = counters.get_many([f"rl:notes:owner:{o}:5890752" for o in owners], now=T0)
    assert all(v <= 20 for v in counted.values())
    assert sum(counted.values()) == admitted == counters.get("rl:notes:ip:198.51.100.1:5890752", now=T0)


def test_a_daily_byte_ceiling_admits_exactly_what_fits_at_once(counters):
    """Ingestion bytes per owner per day (``amount`` = the body's size): 20 uploads of 30 bytes at
    once against 100 bytes a day: exactly 3 pass, and a refused one counts neither its document nor
    its bytes."""
    limiter = RequestLimiter(
        counters, lambda: T0, {"ingest_documents": Rule(1000, 86400), "ingest_bytes": Rule(100, 86400)}
    )
    assert _burst(20, lambda _: limiter.charge_ingestion("alice", 30)) == 3
    limiter.charge_ingestion("alice", 10)  # what is left still fits
    assert (
        sum(counters.get_many([f"rl:ingest_documents:owner:alice:{int(T0 // 86400)}"], now=T0).values()) == 4
    )


def test_the_look_before_the_body_refuses_exactly_when_the_next_request_would_be(counters):
    """``peek`` (no counting) agrees with ``check`` on every store, in every dimension, across the
    sliding window's two buckets."""
    now = [T0]
    rules = {"chat": Rule(3, 300), "chat:owner": Rule(5, 300)}
    limiter = RequestLimiter(counters, lambda: now[0], rules, ip_requests=100)
    admitted = 0
    for i in range(8):  # two conversations: the conversation's 3, then the owner's 5
        conv = "c1" if i < 4 else "c2"
        try:
            limiter.peek("chat", "alice", "203.0.113.9", scope=conv)
            peeked = True
        except RateLimited:
            peeked = False
        try:
            limiter.check("chat", "alice", "203.0.113.9", scope=conv)
            checked = True
        except RateLimited:
            checked = False
        assert peeked == checked, i
        admitted += checked
    assert admitted == 5
    now[0] += 300  # the next bucket: the previous one still weighs almost fully
    try:
        limiter.peek("chat", "alice", None, scope="c3")
        raise AssertionError("the owner's window is still full")
    except RateLimited as refused:
        assert refused.retry_after >= 1
    now[0] += 300  # two windows on: room again, and peeking counted nothing
    limiter.peek("chat", "alice", None, scope="c3")
    limiter.peek("chat", "alice", None, scope="c3")
    assert counters.get(f"rl:chat:owner:alice:{int(now[0] // 300)}", now=now[0]) == 0
