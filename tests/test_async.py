"""AsyncMemoryStore: the same API as MemoryStore, every rule scenario run through
it, and hundreds of coroutines on one namespace checked against the rules."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from memevict import AsyncMemoryStore, MemevictError, MemoryStore, Policy
from memevict.stress import (
    IMPORTANCES,
    OPS,
    WEIGHTS,
    Checker,
    MemevictTarget,
    Record,
    Snapshot,
    _record,
    send_op,
    stress_policy,
)
from tests.conftest import scenario_policy
from tests.servers import Server

# Every scenario of tests/test_rules.py, collected again here with this
# module's make_store: each one now runs through the async store.
from tests.test_rules import *  # noqa: F403
from tests.test_rules import T0


class AwaitedStore:
    """An AsyncMemoryStore for the sync scenario tests: each method call runs
    to completion on the test's event loop."""

    def __init__(self, store: AsyncMemoryStore, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if not inspect.iscoroutinefunction(attr):
            return attr
        return lambda *args, **kwargs: self._loop.run_until_complete(attr(*args, **kwargs))


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def make_store(
    server: Server, client: redis.Redis, loop: asyncio.AbstractEventLoop
) -> Iterator[Callable[..., AwaitedStore]]:
    opened: list[redis.asyncio.Redis] = []

    def make(namespace: str = "t", **policy: float) -> AwaitedStore:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        opened.append(aclient)
        store = AsyncMemoryStore(aclient, namespace, scenario_policy(**policy))
        loop.run_until_complete(store._opened())
        return AwaitedStore(store, loop)

    yield make
    for aclient in opened:
        loop.run_until_complete(aclient.aclose())


def test_the_async_store_has_the_sync_api() -> None:
    def public(cls: type) -> dict[str, inspect.Signature]:
        return {
            name: inspect.signature(member)
            for name, member in vars(cls).items()
            if callable(member) and not name.startswith("_")
        }

    sync, awaited = public(MemoryStore), public(AsyncMemoryStore)
    sync["aclose"] = sync.pop("close")  # redis-py's names: close(), and aclose() on asyncio
    assert set(sync) == set(awaited)
    assert set(sync) >= {"set_policy", "remember", "remember_many", "decay", "top", "stats"}
    for name, signature in sync.items():
        assert inspect.iscoroutinefunction(getattr(AsyncMemoryStore, name)), name
        # the same parameters, defaults and result types (annotations are strings here)
        assert str(awaited[name]) == str(signature), name
    init = inspect.signature(MemoryStore.__init__).parameters
    assert list(inspect.signature(AsyncMemoryStore.__init__).parameters) == list(init)


def test_awaiting_the_store_configures_it(server: Server, client: redis.Redis) -> None:
    async def main() -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        store = AsyncMemoryStore(aclient, "ns", Policy(max_hot=7))
        with pytest.raises(MemevictError, match="not open yet"):
            _ = store.policy
        assert await store is store
        assert store.policy == Policy(max_hot=7)
        # stored where a sync store of the namespace finds it
        assert MemoryStore(client, "ns").policy == Policy(max_hot=7)
        # a store used without awaiting it opens on its first call
        lazy = AsyncMemoryStore(aclient, "lazy", Policy(max_hot=3))
        await asyncio.gather(*(lazy.remember(f"m{i}", 1 + i, now=T0 + i) for i in range(10)))
        assert lazy.policy == Policy(max_hot=3)
        assert (await lazy.stats(now=T0 + 1000)).hot == 10  # all still protected
        await aclient.aclose()

    asyncio.run(main())


def test_hundreds_of_coroutines_on_one_namespace(server: Server, client: redis.Redis) -> None:
    """300 coroutines on one connection pool send a random mix of every write
    while a thread takes atomic snapshots; the stress checker (memevict/stress.py)
    then checks every snapshot and the whole call log against the rules."""
    # 300 coroutines re-remember 60 ids every few ms: a short protection
    # window leaves some of them evictable.
    policy = dataclasses.replace(stress_policy(), protect_s=0.01)
    namespace = "crowd"
    reader = MemevictTarget(client, namespace, policy)
    checker = Checker(policy)
    snapshots: list[Snapshot] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            snapshot = reader.snapshot()
            checker.snapshot(snapshot)
            snapshots.append(snapshot)

    async def worker(store: AsyncMemoryStore, n: int) -> list[Record]:
        rng = random.Random(n)
        records = []
        for _ in range(12):
            op = rng.choices(OPS, WEIGHTS)[0]
            memory_id = f"m{rng.randrange(60)}"
            importance = rng.choice(IMPORTANCES)
            whitelist = op == "remember" and rng.random() < 0.15
            t0 = time.time() * 1000
            try:
                result = await send_op(store, op, memory_id, importance, whitelist, None)
                r = _record(op, memory_id, importance, whitelist, None, result)
                outcome = "ok"
            except MemevictError as error:
                r, outcome = None, type(error).__name__
            t1 = time.time() * 1000
            evicted, demoted, changed = (r.evicted, r.demoted, r.changed) if r else ((), (), False)
            records.append(
                Record(
                    f"c{n}",
                    op,
                    memory_id,
                    importance,
                    whitelist,
                    None,
                    t0,
                    t1,
                    outcome,
                    evicted,
                    demoted,
                    changed,
                )
            )
        return records

    async def main() -> list[Record]:
        # 300 coroutines share 50 connections: the others wait for one.
        pool = redis.asyncio.BlockingConnectionPool(
            host="127.0.0.1", port=server.port, max_connections=50
        )
        aclient = redis.asyncio.Redis(connection_pool=pool)
        store = await AsyncMemoryStore(aclient, namespace, policy)
        try:
            batches = await asyncio.gather(*(worker(store, n) for n in range(300)))
        finally:
            await aclient.aclose()
            await pool.disconnect()
        return [r for batch in batches for r in batch]

    sampler = threading.Thread(target=read)
    sampler.start()
    try:
        records = asyncio.run(main())
    finally:
        done.set()
        sampler.join()
    final = reader.snapshot()
    checker.snapshot(final)
    ids = {f"m{i}" for i in range(60)}.union(
        final.hot, final.fresh, final.wl, final.ghot, final.cold
    )
    checker.per_id({x: reader.tier(x) for x in sorted(ids)}, final)
    checker.log(records, [*snapshots, final])
    assert len(records) == 3600
    assert {r.outcome for r in records} <= {"ok", "NotFound"}
    assert sum(r.outcome == "ok" and r.op == "remember" for r in records) > 1000
    assert any(r.evicted for r in records), "no eviction"
    assert any(r.demoted for r in records), "no demotion"
    assert len(snapshots) >= 3
    assert checker.checks > 10_000
    assert not checker.violations, (checker.violations, checker.examples)
