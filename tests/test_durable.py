"""Durable writes (issue 29): a store with ``durable_replicas`` sends each write with a
WAIT on the same connection and raises NotDurable, with the call's result, when fewer
replicas confirm in time. A primary and a replica of their own per test; the replica is
frozen with SIGSTOP to lag."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from memevict import BadArgument, MemoryStore, NotDurable, Policy, Remembered
from memevict.aio import AsyncMemoryStore
from memevict.commands import Item
from memevict.scripts import key_name, namespace_keys
from memevict.stress import MemevictTarget, Threaded, stress_policy
from tests.cluster import KINDS, Cluster, binary
from tests.servers import Server

NS = "dur"
POLICY = Policy(max_hot=3, protect_s=0)
T0 = 1_700_000_000_000


class Pair:
    """A primary and one replica of it, synced; ``args`` for both servers."""

    def __init__(self, binary: str, *args: str) -> None:
        # (no 5 s wait for more replicas before the first sync)
        args = (*args, "--repl-diskless-sync-delay", "0")
        self.primary = Server(binary, extra=args).start()
        self.replica = Server(
            binary, extra=(*args, "--replicaof", "127.0.0.1", str(self.primary.port))
        ).start()
        reader = self.replica.client()
        deadline = time.monotonic() + 10
        while reader.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "replica did not sync"
            time.sleep(0.05)
        reader.close()
        # The functions library loaded and on the replica before a test's short timeouts
        # (a replica compiling it can take longer than they allow).
        warm = self.primary.client()
        MemoryStore(warm, "warm-up")
        assert warm.wait(1, 10_000) == 1
        warm.close()

    def freeze(self) -> None:
        assert self.replica.process is not None
        os.kill(self.replica.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.replica.process is not None
        os.kill(self.replica.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        self.thaw()
        self.replica.stop()
        self.primary.stop()


@pytest.fixture
def pair(server: Server) -> Iterator[Pair]:
    p = Pair(server.binary)
    try:
        yield p
    finally:
        p.stop()


def on_replica(pair: Pair, id: str) -> bool:
    reader = pair.replica.client()
    try:
        return reader.hexists(key_name(NS, "meta"), id)
    finally:
        reader.close()


def test_a_confirmed_write_is_on_the_replica_when_the_call_returns(pair: Pair) -> None:
    client = pair.primary.client()
    store = MemoryStore(client, NS, POLICY, durable_replicas=1, durable_timeout_ms=5000)
    for i in range(30):  # each looked for on the replica at once, with no wait of the test's
        store.remember(f"m{i}", 1.0 + i % 7, now=T0 + i)
        assert on_replica(pair, f"m{i}"), i
    batch = store.remember_many([Item(f"b{i}", 2.0) for i in range(5)], now=T0 + 40)
    assert all(on_replica(pair, id) for id in batch.ids)
    store.forget("m29")
    assert not on_replica(pair, "m29")


def test_an_unconfirmed_write_raises_not_durable_with_its_result(pair: Pair) -> None:
    client = pair.primary.client()
    patient = MemoryStore(client, NS, POLICY, durable_replicas=1, durable_timeout_ms=10_000)
    patient.remember("a", 3.0, now=T0)  # confirmed, however busy the machine
    durable = MemoryStore(client, NS, POLICY, durable_replicas=1, durable_timeout_ms=200)
    plain = MemoryStore(client, NS, POLICY)
    other = MemoryStore(pair.primary.client(), NS, durable_replicas=1, durable_timeout_ms=200)
    pair.freeze()
    plain.remember("p", 2.0, now=T0 + 1)  # (a default store does not ask)
    with pytest.raises(NotDurable) as raised:
        durable.remember("b", 5.0, now=T0 + 2, call_id="call-b")
    error = raised.value
    assert error.replicas == 0
    assert isinstance(error.result, Remembered) and error.result.id == "b"
    assert "applied on the primary" in str(error)
    assert client.hexists(key_name(NS, "meta"), "b")  # applied, as it says

    # The same call again, from another connection too, while the replica still lags:
    # answered from the receipt, and not confirmed (the WAIT covers the first call).
    with pytest.raises(NotDurable):
        other.remember("b", 5.0, now=T0 + 2, call_id="call-b")
    pair.thaw()
    again = other.remember("b", 5.0, now=T0 + 2, call_id="call-b")
    assert again == error.result  # the first reply: applied once
    assert on_replica(pair, "b")
    assert durable.stats(now=T0 + 3).hot == 3  # a, p, b: nothing applied twice


def test_the_async_store_waits_too(pair: Pair) -> None:
    async def run() -> None:
        client = redis.asyncio.Redis(host="127.0.0.1", port=pair.primary.port)
        patient = AsyncMemoryStore(
            client, NS, POLICY, durable_replicas=1, durable_timeout_ms=10_000
        )
        await patient.remember("a", 3.0, now=T0)
        assert on_replica(pair, "a")
        store = AsyncMemoryStore(client, NS, POLICY, durable_replicas=1, durable_timeout_ms=1000)
        await store.remember("b", 3.0, now=T0 + 1)  # (its first call configures: not frozen yet)
        pair.freeze()
        with pytest.raises(NotDurable) as raised:
            await store.remember("c", 3.0, now=T0 + 2)
        assert isinstance(raised.value.result, Remembered)
        pair.thaw()
        await client.aclose()

    asyncio.run(run())


def test_an_async_stores_first_call_is_what_a_not_durable_describes(pair: Pair) -> None:
    """Issue 38, item 1: the first call of an AsyncMemoryStore configures the namespace
    first; an unconfirmed write raises NotDurable with the write's own result, and the
    write is applied (the configure is confirmed with it, by the write's WAIT)."""

    async def run() -> None:
        client = redis.asyncio.Redis(host="127.0.0.1", port=pair.primary.port)
        store = AsyncMemoryStore(client, NS, POLICY, durable_replicas=1, durable_timeout_ms=200)
        pair.freeze()
        with pytest.raises(NotDurable) as raised:
            await store.remember("a", 3.0, now=T0)
        assert isinstance(raised.value.result, Remembered) and raised.value.result.id == "a"
        assert await client.hexists(key_name(NS, "meta"), "a")  # applied, as it says
        pair.thaw()
        patient = AsyncMemoryStore(client, NS, durable_replicas=1, durable_timeout_ms=10_000)
        await patient.remember("b", 3.0, now=T0 + 1)  # (its WAIT covers "a" too)
        assert on_replica(pair, "a") and on_replica(pair, "b")
        await client.aclose()

    asyncio.run(run())


@pytest.mark.parametrize("role", ["policy", "state"])
def test_a_write_after_a_lost_key_is_what_a_not_durable_describes(pair: Pair, role: str) -> None:
    """Issue 38, item 1: a write that finds a key of its namespace lost heals it
    (configure) and is sent again; NotDurable describes the write, which is applied."""
    client = pair.primary.client()
    patient = MemoryStore(client, NS, POLICY, durable_replicas=1, durable_timeout_ms=10_000)
    patient.remember("a", 3.0, now=T0)
    store = MemoryStore(client, NS, POLICY, durable_replicas=1, durable_timeout_ms=200)
    client.delete(key_name(NS, role))
    pair.freeze()
    with pytest.raises(NotDurable) as raised:
        store.remember("b", 5.0, now=T0 + 1, call_id="call-b")
    assert isinstance(raised.value.result, Remembered) and raised.value.result.id == "b"
    assert client.hexists(key_name(NS, "meta"), "b")
    pair.thaw()
    assert patient.remember("b", 5.0, now=T0 + 1, call_id="call-b") == raised.value.result
    assert on_replica(pair, "b")


def test_a_drop_not_confirmed_leaves_the_store_as_a_drop_does(pair: Pair) -> None:
    """Issue 38, item 1: drop() applied but not confirmed (NotDurable, .result the keys
    deleted): the store's next write starts the namespace again, as after a drop."""
    client = pair.primary.client()
    patient = MemoryStore(client, NS, POLICY, durable_replicas=1, durable_timeout_ms=10_000)
    patient.remember("a", 3.0, now=T0)
    store = MemoryStore(client, NS, POLICY, durable_replicas=1, durable_timeout_ms=200)
    present = client.exists(*namespace_keys(NS))
    pair.freeze()
    with pytest.raises(NotDurable) as raised:
        store.drop()
    assert raised.value.result == present  # drop's own result
    assert client.exists(*namespace_keys(NS)) == 0
    pair.thaw()
    with contextlib.suppress(NotDurable):  # (the replica may still be catching up)
        store.remember("b", 3.0, now=T0 + 1)  # not NamespaceLost
    assert store.stats().hot == 1


def test_a_policy_change_not_confirmed_is_the_policy(pair: Pair) -> None:
    """Issue 38, item 1: set_policy applied but not confirmed: NotDurable's result is the
    policy it returns when confirmed, and the store runs with it."""
    client = pair.primary.client()
    MemoryStore(client, NS, POLICY, durable_replicas=1, durable_timeout_ms=10_000)
    store = MemoryStore(client, NS, POLICY, durable_replicas=1, durable_timeout_ms=200)
    pair.freeze()
    with pytest.raises(NotDurable) as raised:
        store.set_policy(max_hot=7)
    assert isinstance(raised.value.result, Policy) and raised.value.result.max_hot == 7
    assert store.policy.max_hot == 7
    pair.thaw()


def test_waitaof_confirms_the_primarys_append_only_file(server: Server) -> None:
    p = Pair(server.binary, "--appendonly", "yes", "--appendfsync", "everysec")
    try:
        client = p.primary.client()
        try:
            client.execute_command("WAITAOF", 0, 0, 0)
        except redis.ResponseError:  # Redis before 7.2 has no WAITAOF: refused, and said so
            with pytest.raises(NotDurable, match="refused WAITAOF"):
                MemoryStore(client, NS, POLICY, durable_aof=True)
            return
        # A patient store for the write that must be confirmed (with appendfsync everysec
        # the fsync alone can take a second on a busy machine); a short one for the next.
        store = MemoryStore(
            client, NS, POLICY, durable_replicas=1, durable_aof=True, durable_timeout_ms=10_000
        )
        store.remember("a", 3.0, now=T0)
        assert on_replica(p, "a")
        short = MemoryStore(client, NS, POLICY, durable_replicas=1, durable_aof=True)
        p.freeze()
        with pytest.raises(NotDurable, match=r"the primary's AOF: yes"):
            short.remember("b", 3.0, now=T0 + 1)
    finally:
        p.stop()


def test_waitaof_without_appendonly_is_not_durable(pair: Pair) -> None:
    with pytest.raises(NotDurable, match="refused WAITAOF"):
        MemoryStore(pair.primary.client(), NS, POLICY, durable_aof=True)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("durable_replicas", -1),
        ("durable_replicas", 1.5),
        ("durable_replicas", True),
        ("durable_timeout_ms", -5),
        ("durable_timeout_ms", "100"),
        ("durable_aof", 1),
    ],
)
def test_bad_durability_is_refused_before_anything_is_sent(
    client: redis.Redis, field: str, value: object
) -> None:
    client.delete(key_name("never", "policy"))
    with pytest.raises(BadArgument, match=field):
        MemoryStore(client, "never", **{field: value})  # type: ignore[arg-type]
    with pytest.raises(BadArgument, match=field):
        AsyncMemoryStore(redis.asyncio.Redis(), "never", **{field: value})  # type: ignore[arg-type]
    assert not client.exists(key_name("never", "policy"))


@pytest.mark.parametrize("kind", KINDS)
def test_no_confirmed_write_is_lost_when_a_primary_is_killed(kind: str) -> None:
    """A cluster of 3 masters with a replica each: durable writes to one namespace, its
    master killed (SIGKILL) after 100 of them, then 5 more (the new master has no
    replica until the old one comes back: those are applied, not confirmed). Every
    write confirmed is there after the failover, and the same calls resent to the new
    master are answered from their receipts: each applied once. Meanwhile memevict
    stress's mix runs on another namespace of the same master, through durable stores,
    and every rule is checked before, during and after the failover (Threaded)."""
    c = Cluster(binary(kind), node_timeout_ms=1000).start()
    try:
        c.add_replicas()
        owner = c.owner(c.keyslot(key_name(NS, "meta")))
        client = c.client()
        rules = next(  # (a namespace the kill hits too)
            f"rules{k}"
            for k in range(100)
            if c.owner(c.keyslot(key_name(f"rules{k}", "meta"))) == owner
        )
        stop = threading.Event()
        checked = Threaded(
            lambda: MemevictTarget(
                c.client(), rules, stress_policy(), durable_replicas=1, durable_timeout_ms=300
            ),
            stress_policy(),
            threads=2,
            stop=stop,
        )
        MemoryStore(client, NS, Policy(max_hot=1000, protect_s=0))  # (the library, as Pair)
        assert c.command(owner, "WAIT", 1, 10_000) == 1
        # A patient store for the 100 writes before the kill, which must all be confirmed
        # however busy the machine; a short one for the 5 after, which cannot be.
        patient, store = (
            MemoryStore(
                client,
                NS,
                Policy(max_hot=1000, protect_s=0),
                durable_replicas=1,
                durable_timeout_ms=timeout_ms,
                migration_wait_s=30,
            )
            for timeout_ms in (10_000, 300)
        )

        async def refused() -> None:  # (the asyncio cluster client: not supported)
            aclient = c.async_client()
            try:
                with pytest.raises(BadArgument, match="sync RedisCluster"):
                    await AsyncMemoryStore(aclient, NS, durable_replicas=1).stats()
            finally:
                await aclient.aclose()

        asyncio.run(refused())
        replies: dict[str, Remembered] = {}  # of the confirmed writes
        unconfirmed = []
        for i in range(105):
            if i == 100:
                c.nodes[owner].crash()
                killed = time.time() * 1000
            try:
                writer = patient if i < 100 else store
                replies[f"m{i}"] = writer.remember(f"m{i}", 1.0 + i % 7, call_id=f"c{i}")
            except NotDurable:
                unconfirmed.append(f"m{i}")
        assert list(replies)[:100] == [f"m{i}" for i in range(100)]
        time.sleep(0.5)  # (the mix goes on under the new master)
        stop.set()
        calls = checked.finish()
        assert not checked.checker.violations, checked.checker.examples
        assert checked.checker.checks > 1000
        # The mix ran on both sides of the kill, and was seen after it.
        assert any(r.t1 < killed and r.outcome == "ok" for r in calls)
        assert any(r.t0 > killed and r.outcome in ("ok", "NotDurable") for r in calls)
        assert any(s.at > killed for s in checked.snapshots)
        found = {m.id for m in store.top(200)}
        assert set(replies) <= found, sorted(set(replies) - found)[:10]
        hot = store.stats().hot
        assert hot == len(found)
        # Item 4: the same calls again, to the promoted replica: a confirmed write's
        # receipt was confirmed with it (one script), so each is answered with its first
        # reply and nothing is applied twice.
        # (Through a default store: the new master has no replica yet to wait for.)
        plain = MemoryStore(client, NS)
        for id, reply in replies.items():
            assert plain.remember(id, 1.0 + int(id[1:]) % 7, call_id=f"c{id[1:]}") == reply
        assert store.stats().hot == hot
        client.close()
    finally:
        c.stop()
