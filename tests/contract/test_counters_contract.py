"""Counters contract: every adapter registered in ``conftest.COUNTERS`` must pass. Time is the
``now`` argument, so nothing here waits."""

from __future__ import annotations

import threading

T0 = 1_767_225_600.0


def test_a_new_counter_starts_from_zero(counters):
    assert counters.get("ip:1", now=T0) == 0
    assert counters.increment("ip:1", ttl_seconds=300, now=T0) == 1
    assert counters.increment("ip:1", ttl_seconds=300, now=T0 + 1) == 2
    assert counters.increment("ip:1", amount=5, ttl_seconds=300, now=T0 + 2) == 7
    assert counters.get("ip:1", now=T0 + 2) == 7


def test_a_live_counter_keeps_its_first_expiry(counters):
    counters.increment("conv:a", ttl_seconds=10, now=T0)
    # a later increment with a long ttl does not push the expiry out
    assert counters.increment("conv:a", ttl_seconds=1000, now=T0 + 9) == 2
    assert counters.get("conv:a", now=T0 + 9.999) == 2
    assert counters.get("conv:a", now=T0 + 10) == 0  # expires_at <= now: expired


def test_an_expired_counter_starts_again_with_a_new_expiry(counters):
    counters.increment("conv:b", amount=3, ttl_seconds=10, now=T0)
    assert counters.increment("conv:b", ttl_seconds=10, now=T0 + 10) == 1
    assert counters.get("conv:b", now=T0 + 19.5) == 1
    assert counters.get("conv:b", now=T0 + 20) == 0


def test_get_many_reports_absent_and_expired_as_zero(counters):
    counters.increment("a", ttl_seconds=100, now=T0)
    counters.increment("b", amount=2, ttl_seconds=5, now=T0)
    assert counters.get_many(["a", "b", "c"], now=T0 + 10) == {"a": 1, "b": 0, "c": 0}
    assert counters.get_many([], now=T0) == {}


def test_reset(counters):
    counters.increment("breaker:conv:x", amount=4, ttl_seconds=120, now=T0)
    counters.reset("breaker:conv:x")
    assert counters.get("breaker:conv:x", now=T0) == 0
    assert counters.increment("breaker:conv:x", ttl_seconds=120, now=T0) == 1
    counters.reset("never-set")  # not an error


def test_keys_are_independent(counters):
    counters.increment("ip:1", ttl_seconds=60, now=T0)
    counters.increment("ip:2", amount=2, ttl_seconds=60, now=T0)
    assert counters.get_many(["ip:1", "ip:2"], now=T0) == {"ip:1": 1, "ip:2": 2}


def test_increments_are_atomic_under_concurrency(counters):
    threads, per_thread = 6, 25
    results: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def worker() -> None:
        start.wait()
        for _ in range(per_thread):
            value = counters.increment("ip:hot", ttl_seconds=300, now=T0)
            with lock:
                results.append(value)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=60)
    total = threads * per_thread
    assert counters.get("ip:hot", now=T0) == total
    # every increment saw a distinct value: none was lost or double-counted
    assert sorted(results) == list(range(1, total + 1))


def test_put_sets_a_value_and_its_expiry_replacing_any(counters):
    counters.put("stop:conv:a", 1_767_225_600_123, ttl_seconds=300, now=T0)
    assert counters.get("stop:conv:a", now=T0 + 299) == 1_767_225_600_123  # epoch milliseconds fit
    counters.increment("stream:conv:a", amount=7, ttl_seconds=10, now=T0)
    counters.put("stream:conv:a", 3, ttl_seconds=1000, now=T0 + 5)
    assert counters.get_many(["stream:conv:a"], now=T0 + 500) == {"stream:conv:a": 3}  # new expiry
    assert counters.get("stop:conv:a", now=T0 + 300) == 0  # expired
    counters.put("stop:conv:a", 5, ttl_seconds=300, now=T0 + 400)
    assert counters.increment("stop:conv:a", ttl_seconds=300, now=T0 + 401) == 6  # a live counter again
    counters.reset("stream:conv:a")
    assert counters.get("stream:conv:a", now=T0 + 6) == 0


def test_increment_up_to_adds_only_while_the_result_fits(counters):
    assert counters.increment_up_to("rl:a", limit=2, ttl_seconds=300, now=T0) == 1
    assert counters.increment_up_to("rl:a", limit=2, ttl_seconds=300, now=T0 + 1) == 2
    assert counters.increment_up_to("rl:a", limit=2, ttl_seconds=300, now=T0 + 2) is None
    assert counters.get("rl:a", now=T0 + 2) == 2  # the refused call changed nothing
    # a higher limit (the sliding window's room grows as the previous bucket ages) admits again
    assert counters.increment_up_to("rl:a", limit=3, ttl_seconds=300, now=T0 + 3) == 3
    assert counters.increment_up_to("rl:b", limit=0, ttl_seconds=300, now=T0) is None
    assert counters.get("rl:b", now=T0) == 0


def test_increment_up_to_keeps_the_expiry_and_restarts_an_expired_counter(counters):
    assert counters.increment_up_to("rl:c", limit=1, ttl_seconds=10, now=T0) == 1
    assert counters.increment_up_to("rl:c", limit=1, ttl_seconds=1000, now=T0 + 9) is None
    assert counters.get("rl:c", now=T0 + 10) == 0  # still expires 10 s after it started
    assert counters.increment_up_to("rl:c", limit=1, ttl_seconds=10, now=T0 + 10) == 1
    assert counters.get("rl:c", now=T0 + 19.5) == 1


def test_increment_up_to_admits_exactly_the_limit_of_concurrent_calls(counters):
    """100 simultaneous requests against a limit of 60: exactly 60 are admitted and counted."""
    threads, per_thread, limit = 10, 10, 60
    admitted: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def worker() -> None:
        start.wait()
        for _ in range(per_thread):
            value = counters.increment_up_to("rl:hot", limit=limit, ttl_seconds=300, now=T0)
            if value is not None:
                with lock:
                    admitted.append(value)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=60)
    assert sorted(admitted) == list(range(1, limit + 1))
    assert counters.get("rl:hot", now=T0) == limit


def test_a_local_store_removes_counters_by_prefix(counters) -> None:
    """``ragchat serve`` at start removes the previous run's turn leases (issue 43); ``_`` and ``%``
    in a prefix are plain characters. DynamoDB has no such read (its leases expire)."""
    from ragchat.ports import LocalCounters

    if not isinstance(counters, LocalCounters):
        assert type(counters).__name__.startswith("Dynamo")
        return
    for key in ("turn:conv:a", "turn:conv:b", "turn:convX", "stream:conv:a", "turn_conv:c"):
        counters.put(key, 1, ttl_seconds=60, now=0.0)
    assert counters.reset_prefix("turn:conv:") == 2
    assert counters.reset_prefix("turn_") == 1
    left = counters.get_many(["turn:conv:a", "turn:conv:b", "turn:convX", "stream:conv:a"], now=0.0)
    assert left == {"turn:conv:a": 0, "turn:conv:b": 0, "turn:convX": 1, "stream:conv:a": 1}


def test_put_new_writes_only_where_no_live_counter_is(counters):
    assert counters.put_new("ws-bytes:ws_a", 500, ttl_seconds=10, now=T0) is True
    assert counters.put_new("ws-bytes:ws_a", 7, ttl_seconds=10, now=T0 + 1) is False  # live: untouched
    assert counters.get("ws-bytes:ws_a", now=T0 + 1) == 500
    assert counters.put_new("ws-bytes:ws_a", 7, ttl_seconds=10, now=T0 + 10) is True  # expired: replaced
    assert counters.get("ws-bytes:ws_a", now=T0 + 19) == 7
    counters.reset("ws-bytes:ws_a")
    assert counters.put_new("ws-bytes:ws_a", 0, ttl_seconds=10, now=T0 + 19) is True


def test_of_concurrent_put_new_exactly_one_writes(counters):
    threads = 6
    won: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def worker(value: int) -> None:
        start.wait()
        if counters.put_new("first", value, ttl_seconds=60, now=T0):
            with lock:
                won.append(value)

    pool = [threading.Thread(target=worker, args=(v,)) for v in range(1, threads + 1)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(30)
    assert len(won) == 1
    assert counters.get("first", now=T0) == won[0]
