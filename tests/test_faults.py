"""Faults: resent calls, SCRIPT FLUSH, restarts, SCRIPT KILL, maxmemory, read replicas."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from memevict import (
    AsyncMemoryStore,
    Memory,
    MemoryStore,
    OutOfMemory,
    Policy,
    ReadOnly,
    Remembered,
)
from memevict.functions import library
from memevict.registry import Mode
from memevict.scripts import namespace_keys, specs
from memevict.stress import Checker, MemevictTarget, text_for
from tests.conftest import state_of
from tests.proxy import Proxy
from tests.servers import Server

T0 = 1_700_000_000_000
NS = "faults"


def evalsha_calls(client: redis.Redis) -> int:
    """Script calls: EVALSHA, or FCALL (a default store runs functions)."""
    stats = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "fcall"))


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
    applied = state_of(client, NS)["decay"]
    # With receipts the second run is a replay; without them the tick squares.
    ticks = 1 if window else 2
    assert math.isclose(applied, ticks * math.log(0.5), rel_tol=1e-12)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_from_url_store_resends_a_lost_reply_once(
    client: redis.Redis, proxy: Proxy, kind: str
) -> None:
    """MemoryStore.from_url's client resends after a lost reply, as redis-py's Redis()
    does (Redis.from_url alone would not): the call returns, applied once (issue 29)."""
    url = f"redis://127.0.0.1:{proxy.port}/0"
    if kind == "sync":
        with MemoryStore.from_url(url, NS, Policy()) as store:
            store.remember("a", 1.0, now=T0)
            proxy.drop_replies(1)
            store.decay(0.5)
    else:

        async def run() -> None:
            store = AsyncMemoryStore.from_url(url, NS, Policy())
            try:
                await store.remember("a", 1.0, now=T0)
                proxy.drop_replies(1)
                await store.decay(0.5)
            finally:
                await store.aclose()

        asyncio.run(run())
    assert math.isclose(state_of(client, NS)["decay"], math.log(0.5), rel_tol=1e-12)


def test_a_resent_remember_reports_what_it_evicted(client: redis.Redis, proxy: Proxy) -> None:
    store = MemoryStore(through(proxy), NS, Policy(max_hot=2, protect_s=0))
    store.remember("low", 1.0, now=T0)
    store.remember("mid", 2.0, now=T0)
    seq = state_of(client, NS)["seq"]
    before = evalsha_calls(client)
    proxy.drop_replies(1)
    r = store.remember("high", 3.0, now=T0 + 1000)
    assert evalsha_calls(client) - before == 2
    # The first run evicted "low"; the resend replays that reply instead of
    # running again (which would evict nothing and draw a second jitter).
    assert r.evicted == ("low",)
    assert state_of(client, NS)["seq"] == seq + 1


@pytest.mark.parametrize(
    "method",
    ["touch", "whitelist", "demote", "recall", "forget", "evict", "set_policy", "remember_many"],
)
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
        # configure keeps no receipt: running it twice gives the same result.
        "set_policy": lambda: store.set_policy(replace(policy, max_hot=1)),
        "remember_many": lambda: store.remember_many([("c", 3.0), ("a", 4.0)], now=T0 + 1000),
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
        "set_policy": lambda: expected_client.set_policy(replace(policy, max_hot=1)),
        "remember_many": lambda: expected_client.remember_many(
            [("c", 3.0), ("a", 4.0)], now=T0 + 1000
        ),
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


# What Redis guarantees, and why every memevict script checks everything first.


def test_redis_does_not_roll_back_a_script_that_fails_half_way(client: redis.Redis) -> None:
    """The server guarantee the scripts are designed around: a script runs
    without interleaving, but writes made before a runtime error stay."""
    half = "#!lua\nredis.call('HSET', KEYS[1], 'f', 'v')\nreturn redis.call('INCR', KEYS[2])"
    client.set("not-a-number", "x")
    with pytest.raises(redis.ResponseError):
        client.eval(half, 2, "written-first", "not-a-number")
    assert client.hget("written-first", "f") == b"v"


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


# The server stopped and restarted mid-run.


def checked(client: redis.Redis, namespace: str, policy: Policy) -> Checker:
    """The stress checker's structural rules over the namespace as it is now."""
    checker = Checker(policy, importances=None, shaped=False)
    checker.snapshot(MemevictTarget(client, namespace, policy).snapshot())
    return checker


@pytest.mark.parametrize("mode", ["scripts", "functions"])
def test_restart_mid_run(server: Server, mode: Mode) -> None:
    durable = Server(server.binary, extra=("--appendonly", "yes", "--appendfsync", "always"))
    durable.start()
    policy = Policy(max_hot=15, protect_s=0.05, whitelist_cap=3, cold_max=30)
    fast_fail = Retry(NoBackoff(), 1)  # fail within a second while the server is down
    client = redis.Redis(port=durable.port, retry=fast_fail, socket_connect_timeout=0.5)
    store = MemoryStore(client, NS, policy, mode=mode)
    outcomes: list[tuple[float, str]] = []
    stop = threading.Event()

    def work() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            try:
                memory_id = f"m{i % 40}"
                text = text_for(memory_id).decode("utf-8", "surrogateescape")
                store.remember(memory_id, 1.0 + i % 9, text=text, whitelist=i % 11 == 0)
                if i % 7 == 0:
                    store.demote(f"m{i % 40}")
                if i % 13 == 0:
                    store.decay(0.9)
                outcomes.append((time.monotonic(), "ok"))
            except (redis.ConnectionError, redis.TimeoutError) as error:
                outcomes.append((time.monotonic(), type(error).__name__))
                time.sleep(0.01)

    def served_after(moment: float) -> int:
        return sum(1 for t, o in list(outcomes) if t > moment and o == "ok")

    worker = threading.Thread(target=work)
    worker.start()
    try:
        time.sleep(0.5)
        durable.crash()
        down = time.monotonic()
        time.sleep(0.5)
        durable.start()
        up = time.monotonic()
        # Until 20 calls succeeded after the restart (or 10 s: the assertion below says).
        while time.monotonic() < up + 10 and served_after(up + 0.1) <= 20:
            time.sleep(0.05)
    finally:
        stop.set()
        worker.join()
    admin = durable.client()
    try:
        failed_while_down = [o for t, o in outcomes if down < t < up and o != "ok"]
        assert failed_while_down, "calls while the server was down must fail"
        # LOADING (BusyLoadingError, a ConnectionError) while the AOF is read back.
        assert set(failed_while_down) <= {"ConnectionError", "TimeoutError", "BusyLoadingError"}
        assert served_after(up + 0.1) > 20
        # Scripts were reloaded (EVAL after NOSCRIPT), or the library came back
        # with the data (AOF), and nothing is half-written.
        if mode == "scripts":
            used = [specs()[name].sha for name in ("remember", "demote", "decay")]
            assert all(admin.script_exists(*used))
        else:
            assert admin.function_list(library=library().name)
        assert not checked(admin, NS, policy).violations
    finally:
        admin.close()
        durable.stop()


# maxmemory with noeviction: a typed error, state unchanged; reads still work.


def test_out_of_memory(client: redis.Redis) -> None:
    store = MemoryStore(client, NS, Policy(max_hot=5, protect_s=0))
    for i in range(8):
        store.remember(f"m{i}", 1.0 + i, text="x" * 100, now=T0 + i)
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory-policy", "noeviction")
    # Well below what the server uses: filling up to a limit just above it
    # left the server now over, now under it, as buffers were freed (flaky).
    client.config_set("maxmemory", used // 2)
    try:
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            client.set("ballast", "y")
        before = snapshot(client)
        with pytest.raises(OutOfMemory):
            store.remember("new", 9.0, now=T0 + 100)
        with pytest.raises(OutOfMemory):
            store.decay(0.5)
        assert snapshot(client) == before
        assert [m.id for m in store.top(3, now=T0 + 100)] == ["m7", "m6", "m5"]
        got = store.get("m0", now=T0 + 100)
        assert got is not None and got.tier == "cold"
        assert store.stats(now=T0 + 100).hot == 5
    finally:
        client.config_set("maxmemory", 0)


# A read replica serves get, top and stats; writes fail with a clear error.


def test_read_replica(client: redis.Redis, server: Server) -> None:
    replica = Server(server.binary, extra=("--replicaof", "127.0.0.1", str(server.port)))
    replica.start()
    try:
        reader = replica.client()
        deadline = time.monotonic() + 10
        while reader.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "replica did not sync"
            time.sleep(0.05)
        store = MemoryStore(client, NS, Policy(max_hot=3, protect_s=0))
        for i in range(5):
            store.remember(f"m{i}", 1.0 + i, text=f"t{i}", now=T0 + i)
        assert client.wait(1, 5000) == 1
        on_replica = MemoryStore(reader, NS, read_only=True)
        assert on_replica.policy == store.policy
        assert on_replica.top(10, now=T0 + 10) == store.top(10, now=T0 + 10)
        assert on_replica.get("m0", now=T0 + 10) == store.get("m0", now=T0 + 10)
        assert on_replica.stats(now=T0 + 10) == store.stats(now=T0 + 10)
        with pytest.raises(ReadOnly):
            on_replica.remember("x", 1.0)
        with pytest.raises(ReadOnly):
            MemoryStore(reader, NS)  # a writing store configures its namespace
        reader.close()
    finally:
        replica.stop()
