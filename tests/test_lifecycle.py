"""A store's life: made from a URL, used as a context manager, closed; and
``memevict.namespaces``, which lists every namespace on a server or a cluster
without writing anything, with the ``memevict namespaces`` command over it.

Whether a connection is open is asked of the server (CLIENT LIST, by client
name) or seen from its CLIENT ID: a closed client reconnects with a new one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import time
from collections.abc import Callable, Iterator

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from click.testing import CliRunner
from redis.crc import key_slot

import memevict.aio
from memevict import (
    AsyncMemoryStore,
    MemoryStore,
    Namespace,
    NoPolicy,
    Policy,
    PolicyMismatch,
    Stats,
    namespaces,
)
from memevict.cli import main
from memevict.functions import library
from memevict.scripts import key_name
from tests.cluster import Cluster
from tests.servers import Server

T0 = 1_700_000_000_000
OWNED = "memevict-owned"  # the client name of the connections a store makes


def named_url(url: str) -> str:
    return f"{url}?client_name={OWNED}"


def connections(clients: list[redis.Redis], name: str = OWNED) -> int:
    """The connections named ``name`` on these servers, as they see them."""
    return sum(1 for c in clients for entry in c.client_list() if entry["name"] == name)


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 5
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def contents(client: redis.Redis) -> dict[object, object]:
    """Every key of the server with its serialized value (DUMP)."""
    return {key: client.dump(key) for key in client.keys("*")}


@pytest.fixture
def cluster_client(cluster: Cluster) -> Iterator[redis.cluster.RedisCluster]:
    cluster.wait_stable()
    c = cluster.client()
    c.flushall()  # every primary
    yield c
    c.close()


def off_node_zero(cluster: Cluster, prefix: str) -> str:
    """A namespace whose slot is not on node 0: a plain client of node 0 gets MOVED for it."""
    return next(
        ns
        for ns in (f"{prefix}-{i}" for i in range(1000))
        if cluster.owner(key_slot(key_name(ns, "policy").encode())) != 0
    )


# from_url


def test_from_url_has_the_same_signature_on_both_stores() -> None:
    sync = inspect.signature(MemoryStore.from_url)
    assert list(sync.parameters) == ["url", "namespace", "policy", "kwargs"]
    assert str(inspect.signature(AsyncMemoryStore.from_url)) == str(sync)


def test_from_url_makes_a_store_with_the_constructors_arguments(
    server: Server, client: redis.Redis
) -> None:
    store = MemoryStore.from_url(server.url, "made", Policy(max_hot=3, protect_s=0))
    assert store.owns_client and isinstance(store.client, redis.Redis)
    for i in range(4):
        store.remember(f"m{i}", 1 + i)
    assert MemoryStore(client, "made").policy == Policy(max_hot=3, protect_s=0)
    assert client.zcard(key_name("made", "hot")) == 3
    store.close()
    replaced = MemoryStore.from_url(server.url, "made", Policy(max_hot=5), replace_policy=True)
    assert replaced.policy == Policy(max_hot=5) == MemoryStore(client, "made").policy
    replaced.close()
    with pytest.raises(NoPolicy):
        MemoryStore.from_url(server.url, "nosuch", read_only=True)
    assert not client.exists(key_name("nosuch", "policy"))

    async def made_async() -> None:
        store = AsyncMemoryStore.from_url(
            server.url, "made-async", Policy(max_hot=2), mode="functions"
        )
        assert store.owns_client and store.mode == "functions"
        assert await store is store
        await store.remember("a", 1)
        assert store.policy == Policy(max_hot=2)
        await store.aclose()

    asyncio.run(made_async())
    assert MemoryStore(client, "made-async").policy == Policy(max_hot=2)
    assert client.function_list(library=library().name)  # functions mode loaded it


def test_the_store_closes_the_client_it_made(server: Server, client: redis.Redis) -> None:
    with MemoryStore.from_url(named_url(server.url), "owned") as store:
        store.remember("a", 1)
        assert connections([client]) == 1
    wait_until(lambda: connections([client]) == 0, "the with block left its connection open")
    store = MemoryStore.from_url(named_url(server.url), "owned")
    assert connections([client]) == 1
    store.close()
    wait_until(lambda: connections([client]) == 0, "close() left the connection open")


def test_a_store_leaves_the_callers_client_open(server: Server, client: redis.Redis) -> None:
    mine = server.client(client_name="mine")
    connection = mine.client_id()
    with MemoryStore(mine, "theirs") as store:
        store.remember("a", 1)
        assert not store.owns_client
    store.close()
    assert mine.client_id() == connection  # the same connection: never closed
    assert connections([client], "mine") == 1
    mine.close()


def test_a_store_that_fails_to_open_closes_the_client_it_made(
    server: Server, client: redis.Redis
) -> None:
    MemoryStore(client, "clash", Policy(max_hot=3))
    with pytest.raises(PolicyMismatch):
        MemoryStore.from_url(named_url(server.url), "clash", Policy(max_hot=4))
    wait_until(lambda: connections([client]) == 0, "from_url left its connection open")

    async def clash() -> None:
        with pytest.raises(PolicyMismatch):
            async with AsyncMemoryStore.from_url(named_url(server.url), "clash", Policy(max_hot=4)):
                pass

    asyncio.run(clash())
    wait_until(lambda: connections([client]) == 0, "async with left its connection open")


def test_async_with_opens_the_store_and_closes_the_client_it_made(
    server: Server, client: redis.Redis
) -> None:
    async def use() -> None:
        made = AsyncMemoryStore.from_url(named_url(server.url), "owned", Policy(max_hot=3))
        async with made as store:
            assert store is made
            assert store.policy == Policy(max_hot=3)  # opened: raises before
            assert client.exists(key_name("owned", "policy"))
            assert isinstance(store.client, redis.asyncio.Redis)  # not a cluster's
            pool = store.client.connection_pool
            assert isinstance(pool, redis.asyncio.BlockingConnectionPool)
            assert pool.max_connections == 50  # as docs/adapters.md advises
            await asyncio.gather(*(store.remember(f"m{i}", 1 + i) for i in range(20)))
            assert connections([client]) >= 1
        wait_until(lambda: connections([client]) == 0, "async with left its connections open")
        store = await AsyncMemoryStore.from_url(named_url(server.url), "owned")
        assert (await store.stats()).hot == 20
        await store.aclose()
        wait_until(lambda: connections([client]) == 0, "aclose() left the connection open")

    asyncio.run(use())


def test_async_with_leaves_the_callers_client_open(server: Server, client: redis.Redis) -> None:
    async def use() -> None:
        mine = redis.asyncio.Redis(host="127.0.0.1", port=server.port, client_name="mine")
        connection = await mine.client_id()
        async with AsyncMemoryStore(mine, "theirs") as store:
            await store.remember("a", 1)
            assert not store.owns_client
        await store.aclose()
        assert await mine.client_id() == connection  # the same connection: never closed
        assert connections([client], "mine") == 1
        await mine.aclose()

    asyncio.run(use())


def test_from_url_of_a_cluster_node_routes_by_slot(
    cluster: Cluster, cluster_client: redis.cluster.RedisCluster
) -> None:
    url = named_url(f"redis://127.0.0.1:{cluster.nodes[0].port}/0")
    nodes = [cluster.node(i) for i in range(cluster.size)]
    ns = off_node_zero(cluster, "routed")
    owner = cluster.owner(key_slot(key_name(ns, "policy").encode()))
    with MemoryStore.from_url(url, ns, Policy(max_hot=2)) as store:
        assert isinstance(store.client, redis.cluster.RedisCluster)
        store.remember("a", 1)
        assert nodes[owner].hexists(key_name(ns, "meta"), "a")
        assert connections(nodes) >= 1
    wait_until(lambda: connections(nodes) == 0, "the cluster client was left open")

    async def use() -> None:
        made = AsyncMemoryStore.from_url(url, ns, Policy(max_hot=2))
        assert isinstance(made.client, redis.asyncio.Redis)  # until it opens
        async with made as store:
            assert isinstance(store.client, redis.asyncio.cluster.RedisCluster)
            await store.remember("b", 2)
            assert connections(nodes) >= 1
        wait_until(lambda: connections(nodes) == 0, "the async cluster client was left open")

    asyncio.run(use())
    assert nodes[owner].hexists(key_name(ns, "meta"), "b")


# namespaces()


# The counts each test knows by heart; other fields of Stats are checked against
# the namespace's own store.
COUNTS = ("hot", "cold", "whitelisted", "protected", "over", "backlog")
NOW = T0 + 1000


def counts(stats: Stats | None) -> tuple[int, ...]:
    assert stats is not None
    return tuple(getattr(stats, field) for field in COUNTS)


def fill(client: redis.Redis | redis.cluster.RedisCluster) -> dict[str, MemoryStore]:
    """Three namespaces of the counts in KNOWN (none depends on the clock), by name."""
    alpha = MemoryStore(client, "alpha", Policy(max_hot=5, protect_s=0))
    alpha.remember_many([("a1", 1), ("a2", 2)])
    beta = MemoryStore(client, "beta", Policy(max_hot=2, protect_s=0))
    for i in range(4):
        beta.remember(f"b{i}", 1 + i, now=T0 + i)  # b0 and b1 go cold
    beta.whitelist("b3", now=T0 + 5)
    gamma = MemoryStore(client, "gamma", Policy(max_hot=1, protect_s=3600))
    gamma.remember_many([("g1", 1), ("g2", 2)], now=T0)  # both protected: one over
    return {"alpha": alpha, "beta": beta, "gamma": gamma}


KNOWN = {
    "alpha": (2, 0, 0, 0, 0, 0),
    "beta": (2, 2, 1, 0, 0, 0),
    "gamma": (2, 0, 0, 2, 1, 0),
}


def check_listed(listed: list[Namespace], stores: dict[str, MemoryStore]) -> None:
    """``listed`` names exactly the namespaces of ``stores``, in order, each with its counts."""
    assert all(isinstance(n, Namespace) for n in listed)
    assert [n.name for n in listed] == sorted(stores)
    assert all(n.stats == stores[n.name].stats(now=NOW) for n in listed)


def test_namespaces_lists_every_namespace_with_its_counts(
    server: Server, client: redis.Redis
) -> None:
    assert namespaces(client) == []
    stores = fill(client)
    # Keys that only look like a namespace's, and enough others for SCAN to take many steps.
    client.hset("memevict-bench:{bench}:policy", "max_hot", "3")
    client.set(key_name("a-string", "policy"), "not a hash")
    client.hset(key_name("half", "policy"), "max_hot", "3")  # no whole policy: no namespace
    client.mset({f"filler:{i}": i for i in range(5000)})
    before = contents(client)
    listed = namespaces(client, now=NOW)
    assert {n.name: counts(n.stats) for n in listed} == KNOWN
    check_listed(listed, stores)
    assert asyncio.run(listed_async(server)) == listed
    for prefix in ("b", "gamma", "x"):  # (the prefix as the sync listing takes it)
        assert asyncio.run(listed_async(server, prefix)) == [
            n for n in listed if n.name.startswith(prefix)
        ]
    assert contents(client) == before  # nothing created, changed or left behind


async def listed_async(server: Server, prefix: str = "") -> list[Namespace]:
    aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
    try:
        return await memevict.aio.namespaces(aclient, now=NOW, prefix=prefix)
    finally:
        await aclient.aclose()


def test_namespaces_on_a_cluster_reads_every_primary(
    cluster: Cluster, cluster_client: redis.cluster.RedisCluster
) -> None:
    names: dict[int, list[str]] = {i: [] for i in range(cluster.size)}
    for ns in (f"agent-{i}" for i in range(200)):
        owner = cluster.owner(key_slot(key_name(ns, "policy").encode()))
        if len(names[owner]) < 2:
            names[owner].append(ns)
    assert all(len(found) == 2 for found in names.values())  # two on each node
    stores: dict[str, MemoryStore] = {}
    for count, ns in enumerate(sorted(n for found in names.values() for n in found), 1):
        stores[ns] = MemoryStore(cluster_client, ns, Policy(protect_s=0, protect_memories=0))
        stores[ns].remember_many([(f"m{k}", 1 + k) for k in range(count)])
    nodes = [cluster.node(i) for i in range(cluster.size)]
    before = [contents(node) for node in nodes]
    listed = namespaces(cluster_client, now=NOW)
    assert [counts(n.stats) for n in listed] == [(k, 0, 0, 0, 0, 0) for k in range(1, 7)]
    check_listed(listed, stores)

    async def listed_async() -> list[Namespace]:
        aclient = cluster.async_client()
        try:
            return await memevict.aio.namespaces(aclient, now=NOW)
        finally:
            await aclient.aclose()

    assert asyncio.run(listed_async()) == listed
    assert [contents(node) for node in nodes] == before


# memevict namespaces


def test_the_namespaces_command(server: Server, client: redis.Redis) -> None:
    def run(*args: str) -> str:
        result = CliRunner().invoke(main, ["--url", server.url, "namespaces", *args])
        assert result.exit_code == 0, result.output
        return result.output

    assert run() == "(none)\n"
    assert json.loads(run("--json")) == []
    stores = fill(client)
    before = contents(client)
    assert run("--now", str(NOW)).splitlines() == [
        # (tokens: of the hot tier, 1 a memory by default)
        "alpha  hot=2 cold=0 whitelisted=0 protected=0 over=0 backlog=0 tokens=2",
        "beta  hot=2 cold=2 whitelisted=1 protected=0 over=0 backlog=0 tokens=2",
        "gamma  hot=2 cold=0 whitelisted=0 protected=2 over=1 backlog=0 tokens=2",
    ]
    listed = json.loads(run("--json", "--now", str(NOW)))
    assert [n["name"] for n in listed] == ["alpha", "beta", "gamma"]
    assert {n["name"]: tuple(n["stats"][f] for f in COUNTS) for n in listed} == KNOWN
    assert all(n["stats"] == dataclasses.asdict(stores[n["name"]].stats(now=NOW)) for n in listed)
    assert contents(client) == before


def test_the_namespaces_command_on_a_cluster_url(
    cluster: Cluster, cluster_client: redis.cluster.RedisCluster
) -> None:
    ns = off_node_zero(cluster, "cli")
    MemoryStore(cluster_client, ns).remember("a", 1)
    url = f"redis://127.0.0.1:{cluster.nodes[0].port}/0"
    result = CliRunner().invoke(main, ["--url", url, "namespaces", "--json"])
    assert result.exit_code == 0, result.output
    assert [(n["name"], n["stats"]["hot"]) for n in json.loads(result.output)] == [(ns, 1)]
