"""No silent re-creation (issue 29, item 2): a store that has written to a namespace and
then finds it gone raises NamespaceLost and writes nothing, instead of configuring it
again and carrying on; ``recreate()`` starts it again on purpose. A store that never
wrote to it, a store that dropped it itself, a namespace expired by idle_ttl_s and a
damaged namespace (its policy key alone deleted) still configure as before."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio

from memevict import MemoryStore, NamespaceChanged, NamespaceLost, Policy, commands
from memevict.aio import AsyncMemoryStore
from memevict.errors import from_response
from memevict.scripts import key_name, register
from tests.proxy import Proxy
from tests.servers import Server

POLICY = Policy(max_hot=3, protect_s=0)


class SplitBrain:
    """A store's client reaches server ``a`` through a proxy; ``switch()`` points the
    proxy at the empty server ``b`` and drops the client's connections, as a client
    that reconnects to an address now served by a server that came back empty."""

    def __init__(self, binary: str) -> None:
        self.a, self.b = Server(binary).start(), Server(binary).start()
        self.proxy = Proxy(self.a.port)

    def switch(self) -> None:
        self.proxy.target_port = self.b.port

    def keys_on_b(self) -> list[bytes]:
        reader = self.b.client()
        try:
            return list(reader.keys("*"))
        finally:
            reader.close()

    def stop(self) -> None:
        self.proxy.close()
        self.a.stop()
        self.b.stop()


@pytest.fixture
def brain(server: Server) -> Iterator[SplitBrain]:
    s = SplitBrain(server.binary)
    try:
        yield s
    finally:
        s.stop()


def test_an_empty_server_in_the_primarys_place_is_not_written_to(brain: SplitBrain) -> None:
    client = redis.Redis(port=brain.proxy.port)
    store = MemoryStore(client, "lost", POLICY)
    for i in range(5):
        store.remember(f"m{i}", 1.0 + i)
    brain.switch()
    client.connection_pool.disconnect()
    with pytest.raises(NamespaceLost, match=r"store\.recreate\(\)"):
        store.remember("after", 9.0)
    with pytest.raises(NamespaceLost):
        store.stats()  # (a read too: the store would configure the namespace to answer it)
    assert brain.keys_on_b() == []  # nothing written
    assert store.recreate() == POLICY
    store.remember("after", 9.0)
    assert store.stats().hot == 1  # started again, empty, on purpose
    client.close()


def test_the_async_store_raises_it_too(brain: SplitBrain) -> None:
    async def run() -> None:
        client = redis.asyncio.Redis(port=brain.proxy.port)
        store = AsyncMemoryStore(client, "lost", POLICY)
        await store.remember("m0", 1.0)
        brain.switch()
        await client.connection_pool.disconnect()
        with pytest.raises(NamespaceLost):
            await store.remember("after", 9.0)
        assert brain.keys_on_b() == []
        await store.recreate()
        await store.remember("after", 9.0)
        assert (await store.stats()).hot == 1
        await client.aclose()

    asyncio.run(run())


def test_what_still_configures(client: redis.Redis) -> None:
    """A store that never wrote to the namespace, one that dropped it itself, and one
    whose namespace lost only its policy key (damaged, not gone): configured as before."""
    store = MemoryStore(client, "cfg", POLICY)
    store.remember("a", 1.0)
    client.delete(key_name("cfg", "policy"))  # damaged: the memories are there
    store.remember("b", 1.0)
    assert store.get("a") is not None
    store.drop()
    store.remember("c", 1.0)  # (this store dropped it: its next write starts it again)
    assert store.stats().hot == 1
    client.flushdb()
    with pytest.raises(NamespaceLost):
        store.remember("d", 1.0)
    assert client.keys("memevict:{cfg}:*") == []
    newcomer = MemoryStore(client, "cfg", POLICY)  # never wrote to it: configures it
    newcomer.remember("e", 1.0)
    assert newcomer.stats().hot == 1


def test_a_namespace_expired_by_idle_ttl_s_starts_again(client: redis.Redis) -> None:
    store = MemoryStore(client, "idle", Policy(max_hot=3, protect_s=0, idle_ttl_s=0.3))
    store.remember("a", 1.0)
    time.sleep(0.5)  # past idle_ttl_s: expired by design
    assert not client.exists(key_name("idle", "policy"))
    store.remember("b", 1.0)
    assert store.stats().hot == 1
    client.delete(*client.keys("memevict:{idle}:*"))  # gone well before idle_ttl_s
    with pytest.raises(NamespaceLost):
        store.remember("c", 1.0)


# --- issue 38, item 2: the loss is decided, and a damaged namespace healed, with the policy
# in force, which a store picks up at its next write after an operator changed it.


def gone(client: redis.Redis, namespace: str, within_s: float = 5.0) -> None:
    """Waits until every key of ``namespace`` but its receipts has expired."""
    deadline = time.monotonic() + within_s
    while [k for k in client.keys(f"memevict:{{{namespace}}}:*") if b":call:" not in k]:
        assert time.monotonic() < deadline, "the namespace did not expire"
        time.sleep(0.02)


def test_a_worker_picks_up_an_idle_ttl_an_operator_set(client: redis.Redis) -> None:
    worker = MemoryStore(client, "picked", POLICY)
    worker.remember("a", 1.0)
    MemoryStore(client, "picked").set_policy(idle_ttl_s=0.3)  # an operator's change
    worker.remember("b", 1.0)  # (picks it up)
    assert worker.policy.idle_ttl_s == 0.3
    gone(client, "picked")  # expired as configured
    worker.remember("c", 1.0)  # started again, not NamespaceLost
    assert worker.stats().hot == 1


def test_a_worker_picks_up_an_idle_ttl_an_operator_took_back(client: redis.Redis) -> None:
    worker = MemoryStore(client, "kept", Policy(max_hot=3, protect_s=0, idle_ttl_s=0.3))
    worker.remember("a", 1.0)
    MemoryStore(client, "kept").set_policy(idle_ttl_s=0)  # never expire, from now on
    worker.remember("b", 1.0)
    time.sleep(0.5)  # longer than the idle_ttl_s the worker opened with
    client.flushdb()  # lost, not expired: its keys no longer expire
    with pytest.raises(NamespaceLost):
        worker.remember("c", 1.0)
    assert client.keys("memevict:{kept}:*") == []


def test_a_lost_state_heals_with_the_policy_an_operator_set(client: redis.Redis) -> None:
    worker = MemoryStore(client, "healed", POLICY)
    worker.remember("a", 1.0)
    MemoryStore(client, "healed").set_policy(max_hot=5)
    client.delete(key_name("healed", "state"))
    worker.remember("b", 1.0)  # the stored policy, not PolicyMismatch
    assert worker.policy.max_hot == 5
    assert MemoryStore(client, "healed").policy.max_hot == 5
    assert {m.id for m in worker.top(10)} == {"a", "b"}


def test_a_lost_policy_is_stored_again_as_a_worker_last_saw_it(client: redis.Redis) -> None:
    """A policy key lost alone is stored again with the policy of the store that heals
    it: the one in force at its last write, an operator's change since its opening too."""
    worker = MemoryStore(client, "healed", POLICY)
    worker.remember("a", 1.0)
    MemoryStore(client, "healed").set_policy(max_hot=5)
    worker.remember("b", 1.0)  # (picks it up)
    client.delete(key_name("healed", "policy"))
    worker.remember("c", 1.0)
    assert MemoryStore(client, "healed").policy.max_hot == 5
    assert {m.id for m in worker.top(10)} == {"a", "b", "c"}


def test_the_async_store_heals_with_the_policy_an_operator_set(client: redis.Redis) -> None:
    async def run() -> None:
        aclient = redis.asyncio.Redis(port=client.connection_pool.connection_kwargs["port"])
        worker = await AsyncMemoryStore(aclient, "healed", POLICY)
        await worker.remember("a", 1.0)
        MemoryStore(client, "healed").set_policy(max_hot=5)
        client.delete(key_name("healed", "state"))
        await worker.remember("b", 1.0)
        assert worker.policy.max_hot == 5
        await aclient.aclose()

    asyncio.run(run())


# --- issue 38, item 5: the guard holds across stores. A namespace made again by another
# store (a restarted worker, the CLI, a per-request from_url) is not written to silently by
# a store that had written to the one lost.


def test_a_namespace_made_again_by_another_store_is_not_written_to(client: redis.Redis) -> None:
    worker = MemoryStore(client, "again", POLICY)
    worker.remember("a", 1.0)
    client.flushdb()
    fresh = MemoryStore(client, "again", POLICY)  # a restarted worker: makes it again
    fresh.remember("f", 1.0)
    with pytest.raises(NamespaceLost):
        worker.remember("w", 1.0)
    with pytest.raises(NamespaceLost):
        worker.remember_many([("w2", 1.0)])
    assert fresh.get("w") is None and fresh.get("w2") is None
    assert worker.recreate() == POLICY  # accepting the loss: it writes to the new one
    worker.remember("w", 1.0)
    assert {m.id for m in fresh.top(10)} == {"f", "w"}


def test_a_namespace_dropped_and_made_again_by_a_url_store(
    client: redis.Redis, server: Server
) -> None:
    worker = MemoryStore(client, "again", POLICY)
    worker.remember("a", 1.0)
    with MemoryStore.from_url(server.url, "again") as other:
        other.drop()
    with MemoryStore.from_url(server.url, "again", POLICY) as per_request:
        per_request.remember("r", 1.0)
    for write in (
        lambda: worker.touch("r"),
        lambda: worker.forget("r"),
        lambda: worker.decay(0.5),
        lambda: worker.set_policy(max_hot=7),
    ):
        with pytest.raises(NamespaceLost):
            write()
    assert MemoryStore(client, "again").policy == POLICY


def test_the_async_store_is_not_fooled_either(client: redis.Redis) -> None:
    async def run() -> None:
        aclient = redis.asyncio.Redis(port=client.connection_pool.connection_kwargs["port"])
        worker = AsyncMemoryStore(aclient, "again", POLICY)
        await worker.remember("a", 1.0)
        client.flushdb()
        MemoryStore(client, "again", POLICY).remember("f", 1.0)
        with pytest.raises(NamespaceLost):
            await worker.remember("w", 1.0)
        assert MemoryStore(client, "again").get("w") is None
        await aclient.aclose()

    asyncio.run(run())


def test_a_namespace_expired_and_made_again_by_another_store_is_written_to(
    client: redis.Redis,
) -> None:
    idle = Policy(max_hot=3, protect_s=0, idle_ttl_s=0.3)
    worker = MemoryStore(client, "idle2", idle)
    worker.remember("a", 1.0)
    gone(client, "idle2")  # expired by design
    MemoryStore(client, "idle2", idle).remember("f", 1.0)
    worker.remember("w", 1.0)  # (as if it had started it again itself)
    assert {m.id for m in worker.top(10)} == {"f", "w"}


def test_a_store_that_wrote_nothing_takes_a_namespace_made_again(client: redis.Redis) -> None:
    opened = MemoryStore(client, "again", POLICY)  # (configured it: wrote no memory)
    client.flushdb()
    MemoryStore(client, "again", POLICY).remember("f", 1.0)
    opened.remember("o", 1.0)  # nothing of its own was lost: it takes the new one
    assert {m.id for m in opened.top(10)} == {"f", "o"}


def test_a_raw_write_for_another_namespace_is_refused_before_it_writes(
    client: redis.Redis,
) -> None:
    """The script's side of the guard: a write whose ARGV seen is not the namespace's
    fails NAMESPACE_CHANGED, which says the namespace's seen, and writes nothing."""
    store = MemoryStore(client, "raw", POLICY)
    store.remember("a", 1.0)
    handles = register(client)
    seen = store._seen  # (what configure told the store)
    call = commands.remember("b", 2.0, text=None, whitelist=False, now=None)
    assert handles.remember("raw", {**call.args, "seen": seen}, call="c1")
    MemoryStore(client, "raw").set_policy(max_hot=4)  # (one more revision)
    keys = sorted(client.keys("memevict:{raw}:*"))
    before = [client.dump(k) for k in keys]
    with pytest.raises(redis.ResponseError) as raised:
        handles.remember("raw", {**call.args, "seen": seen}, call="c2")
    changed = from_response(raised.value)
    assert isinstance(changed, NamespaceChanged)
    incarnation, revision = seen.split(":")
    assert changed.seen == f"{incarnation}:{int(revision) + 1}"
    assert sorted(client.keys("memevict:{raw}:*")) == keys
    assert [client.dump(k) for k in keys] == before
    assert handles.remember("raw", {**call.args, "seen": changed.seen}, call="c3")
