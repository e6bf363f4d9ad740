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

from memevict import MemoryStore, NamespaceLost, Policy
from memevict.aio import AsyncMemoryStore
from memevict.scripts import key_name
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
