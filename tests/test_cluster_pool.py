"""Hundreds of asyncio sessions on one cluster client (issue 38, item 12).

redis-py's asyncio ``RedisCluster`` opens up to 100 connections per node and then raises
``MaxConnectionsError`` instead of waiting; 500 concurrent sessions failed 76 turns that
way. The asyncio cluster client memevict makes for a cluster URL
(``AsyncMemoryStore.from_url``, the adapters' ``url=``) and the one it offers for sharing
(``memevict.clients.BlockingRedisCluster``) make a call wait for one of its node's
connections instead, at most 50 per node. Each test runs 500 concurrent sessions on a
3-master cluster of each server kind, with no error, and counts the client's connections
on each node with CLIENT LIST (by the client name the URL sets).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from memevict import AsyncMemoryStore, Policy
from memevict.clients import ASYNC_MAX_CONNECTIONS, BlockingRedisCluster, async_client
from memevict.errors import BadArgument
from memevict.integrations.openai_agents import MemevictSession
from memevict.registry import AsyncClient
from tests.cluster import Cluster

SESSIONS = 500


def connections_per_node(cluster: Cluster, name: str) -> list[int]:
    """The connections named ``name`` on each node, by CLIENT LIST."""
    return [
        sum(1 for c in cluster.node(i).client_list() if c.get("name") == name)
        for i in range(cluster.size)
    ]


def within_bound(counts: list[int], most: int) -> bool:
    """At most ``most`` calls' connections on each node; the node of the URL has one more:
    redis-py reads the slot map through a client of its own of that node."""
    bounds = [most + 1] + [most] * (len(counts) - 1)
    return all(0 < n <= bound for n, bound in zip(counts, bounds, strict=True))


async def one_session(store: AsyncMemoryStore) -> None:
    """A session's turns: three memories remembered one call each, then the top."""
    await store
    for i in range(3):
        await store.remember(f"m{i}", 3 + i, text=f"turn {i} of {store.namespace}")
    assert [m.id for m in await store.top(3)] == ["m2", "m1", "m0"]


async def sessions(make: Callable[[int], Awaitable[Any]]) -> list[BaseException]:
    """The errors of SESSIONS concurrent sessions."""
    done = await asyncio.gather(*(make(n) for n in range(SESSIONS)), return_exceptions=True)
    return [e for e in done if isinstance(e, BaseException)]


def test_500_sessions_on_the_client_of_a_store_made_from_a_cluster_url(cluster: Cluster) -> None:
    """The documented sharing on a single server (one client made by memevict, a store per
    session on it), on a cluster URL."""
    name = "memevict-pool-from-url"
    url = f"{cluster.stable_url()}/0?client_name={name}"
    cluster.client().flushall()

    async def run() -> tuple[list[BaseException], list[int]]:
        async with AsyncMemoryStore.from_url(url, "opener") as opener:
            policy = Policy(max_hot=10)
            errors = await sessions(
                lambda n: one_session(AsyncMemoryStore(opener.client, f"pool-{n}", policy))
            )
            return errors, connections_per_node(cluster, name)

    errors, counts = asyncio.run(run())
    assert not errors, f"{len(errors)} sessions failed: {errors[0]!r}; connections {counts}"
    assert within_bound(counts, ASYNC_MAX_CONNECTIONS), counts
    assert connections_per_node(cluster, name) == [0] * cluster.size  # closed with the store


def test_500_openai_sessions_share_one_client_of_a_cluster_url(cluster: Cluster) -> None:
    """The documented sharing (docs/adapters.md): one ``async_client(url)`` passed to
    every adapter."""
    name = "memevict-pool-shared"
    url = f"{cluster.stable_url()}/0?client_name={name}"
    cluster.client().flushall()

    async def turn(client: AsyncClient, n: int) -> None:
        session = MemevictSession(f"user-{n}", client=client)
        await session.add_items([{"role": "user", "content": f"my locker code is {n}"}])
        await session.add_items([{"role": "assistant", "content": "Noted."}])
        items = await session.get_items()
        assert [i["content"] for i in items] == [f"my locker code is {n}", "Noted."]

    async def run() -> tuple[list[BaseException], list[int]]:
        client = await async_client(url)
        assert isinstance(client, BlockingRedisCluster)
        try:
            errors = await sessions(lambda n: turn(client, n))
            return errors, connections_per_node(cluster, name)
        finally:
            await client.aclose()

    errors, counts = asyncio.run(run())
    assert not errors, f"{len(errors)} sessions failed: {errors[0]!r}; connections {counts}"
    assert within_bound(counts, ASYNC_MAX_CONNECTIONS), counts
    assert connections_per_node(cluster, name) == [0] * cluster.size


def test_500_sessions_on_a_blocking_cluster_client_of_10_connections_per_node(
    cluster: Cluster,
) -> None:
    name = "memevict-pool-ten"
    url = f"{cluster.stable_url()}/0?client_name={name}"
    cluster.client().flushall()

    async def run() -> tuple[list[BaseException], list[int]]:
        client = BlockingRedisCluster.from_url(url, max_connections=10)
        try:
            errors = await sessions(
                lambda n: one_session(AsyncMemoryStore(client, f"ten-{n}", Policy(max_hot=10)))
            )
            return errors, connections_per_node(cluster, name)
        finally:
            await client.aclose()

    errors, counts = asyncio.run(run())
    assert not errors, f"{len(errors)} sessions failed: {errors[0]!r}; connections {counts}"
    assert within_bound(counts, 10), counts


@pytest.mark.parametrize("wrong", [0, -1, 1.5, True, "50"])
def test_a_blocking_cluster_client_takes_a_whole_number_of_connections(wrong: object) -> None:
    with pytest.raises(BadArgument, match="max_connections"):
        BlockingRedisCluster(host="127.0.0.1", port=1, max_connections=wrong)  # type: ignore[arg-type]
