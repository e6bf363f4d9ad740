"""Faults: resent calls, SCRIPT FLUSH, restarts, SCRIPT KILL, maxmemory, read replicas."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
import redis

from memevict import Memory, MemoryStore, Policy, Remembered
from memevict.scripts import key_name, namespace_keys
from tests.proxy import Proxy
from tests.servers import Server

T0 = 1_700_000_000_000
NS = "faults"


def evalsha_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def snapshot(client: redis.Redis, namespace: str = NS) -> dict[str, bytes | None]:
    return {k: client.dump(k) for k in namespace_keys(namespace)}  # type: ignore[misc]


@pytest.fixture
def proxy(server: Server, client: redis.Redis) -> Iterator[Proxy]:
    p = Proxy(server.port)
    yield p
    p.close()


def through(proxy: Proxy) -> redis.Redis:
    """A client with redis-py's default retry, whose connection is open before a
    drop is armed, and every script loaded (so a dropped reply is never NOSCRIPT)."""
    c = redis.Redis(host="127.0.0.1", port=proxy.port)
    MemoryStore(c, "warm-up").registry.load()
    return c


def same(a: Memory | None, b: Memory | None) -> bool:
    """Equal memories; scores to 1e-9 (namespaces' clocks start at different epochs)."""
    if a is None or b is None:
        return a is b
    return replace(a, score=0.0) == replace(b, score=0.0) and math.isclose(a.score, b.score)


# Retries: redis-py resends a command whose reply was lost; each call applies once.


@pytest.mark.parametrize("window", [60.0, 0.0], ids=["receipts", "no-receipts"])
def test_a_resent_decay_applies_once(client: redis.Redis, proxy: Proxy, window: float) -> None:
    store = MemoryStore(through(proxy), NS, Policy(retry_window_s=window))
    store.remember("a", 1.0, now=T0)
    before = evalsha_calls(client)
    proxy.drop_replies(1)
    store.decay(0.5)
    assert evalsha_calls(client) - before == 2  # the server really ran it twice
    applied = float(client.hget(key_name(NS, "state"), "decay") or "nan")
    # With receipts the second run is a replay; without them the tick squares.
    ticks = 1 if window else 2
    assert math.isclose(applied, ticks * math.log(0.5), rel_tol=1e-12)


def test_a_resent_remember_reports_what_it_evicted(client: redis.Redis, proxy: Proxy) -> None:
    store = MemoryStore(through(proxy), NS, Policy(max_hot=2, protect_s=0))
    store.remember("low", 1.0, now=T0)
    store.remember("mid", 2.0, now=T0)
    seq = client.hget(key_name(NS, "state"), "seq")
    before = evalsha_calls(client)
    proxy.drop_replies(1)
    r = store.remember("high", 3.0, now=T0 + 1000)
    assert evalsha_calls(client) - before == 2
    # The first run evicted "low"; the resend replays that reply instead of
    # running again (which would evict nothing and draw a second jitter).
    assert r.evicted == ("low",)
    assert int(client.hget(key_name(NS, "state"), "seq") or 0) == int(seq or 0) + 1


@pytest.mark.parametrize("method", ["touch", "whitelist", "demote", "recall", "forget", "evict"])
def test_every_resent_write_returns_its_first_reply(
    client: redis.Redis, proxy: Proxy, method: str
) -> None:
    policy = Policy(max_hot=2, protect_s=0, whitelist_cap=1)
    store = MemoryStore(through(proxy), NS, policy)
    store.remember("w", 5.0, whitelist=True, now=T0)
    store.remember("a", 1.0, now=T0)
    store.remember("b", 2.0, now=T0)  # evicts a
    calls = {
        "touch": lambda: store.touch("b", now=T0 + 1000),
        "whitelist": lambda: store.whitelist("a", now=T0 + 1000),  # recall + demote w
        "demote": lambda: store.demote("w", now=T0 + 1000),
        "recall": lambda: store.recall("a", now=T0 + 1000),
        "forget": lambda: store.forget("a"),
        "evict": lambda: store.evict(now=T0 + 1000),
    }
    expected_client = MemoryStore(client, "twin", policy)
    for memory_id, importance, wl in (("w", 5.0, True), ("a", 1.0, False), ("b", 2.0, False)):
        expected_client.remember(memory_id, importance, whitelist=wl, now=T0)
    twin = {
        "touch": lambda: expected_client.touch("b", now=T0 + 1000),
        "whitelist": lambda: expected_client.whitelist("a", now=T0 + 1000),
        "demote": lambda: expected_client.demote("w", now=T0 + 1000),
        "recall": lambda: expected_client.recall("a", now=T0 + 1000),
        "forget": lambda: expected_client.forget("a"),
        "evict": lambda: expected_client.evict(now=T0 + 1000),
    }
    before = evalsha_calls(client)
    proxy.drop_replies(1)
    got = calls[method]()
    assert evalsha_calls(client) - before >= 2
    # Same reply and same resulting memories as a twin namespace that ran the call once.
    want = twin[method]()
    if isinstance(got, Remembered) and isinstance(want, Remembered):
        assert replace(got, score=0.0) == replace(want, score=0.0)
        assert math.isclose(got.score, want.score)
    else:
        assert got == want
    for memory_id in ("w", "a", "b"):
        assert same(
            store.get(memory_id, now=T0 + 2000), expected_client.get(memory_id, now=T0 + 2000)
        )


# SCRIPT FLUSH in the middle of a run: zero failed calls.


def test_script_flush_mid_run_fails_no_call(client: redis.Redis, server: Server) -> None:
    store = MemoryStore(server.client(), NS, Policy(max_hot=20, protect_s=0))
    stop = threading.Event()
    flushes = 0

    def flusher() -> None:
        nonlocal flushes
        admin = server.client()
        while not stop.is_set():
            admin.script_flush()
            flushes += 1
            time.sleep(0.001)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for i in range(1500):
            store.remember(f"m{i % 50}", 1.0 + i % 7, now=T0 + i)
            if i % 10 == 0:
                store.decay(0.99)
                assert len(store.top(5, now=T0 + i)) == 5 or i < 5
    finally:
        stop.set()
        thread.join()
    assert flushes > 50
    assert store.stats(now=T0 + 2000).hot == 20
