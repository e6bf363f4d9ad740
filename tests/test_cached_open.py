"""A store opened per request (issue 38, item 15): ``cached_open=True``, which the adapters'
session objects use, opens from what a store before it on the same client found, sending
nothing, and what went stale since is caught by its first write. Commands are counted
on the client (a subclass that counts what it sends to the real server)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.cluster

from memevict import MemoryStore, Policy
from memevict.errors import NotDurable, PolicyMismatch
from memevict.functions import library
from memevict.integrations.openai_agents import MemevictSession
from memevict.scripts import key_name
from tests.cluster import Cluster
from tests.servers import Server

T0 = 1_700_000_000_000


class Counting(redis.Redis):
    """A client that counts the commands it sends."""

    sent: list[str]

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(str(args[0]))
        return super().execute_command(*args, **options)


class AsyncCounting(redis.asyncio.Redis):
    sent: list[str]

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(str(args[0]))
        return await super().execute_command(*args, **options)


@pytest.fixture
def counting(server: Server) -> Iterator[Counting]:
    client = Counting(port=server.port)
    client.sent = []
    client.flushall()
    client.function_flush()
    yield client
    client.close()


def _sent(client: Counting, make: Any) -> tuple[Any, list[str]]:
    before = len(client.sent)
    made = make()
    return made, client.sent[before:]


def test_a_store_opened_again_on_its_client_sends_nothing(counting: Counting) -> None:
    first, sent = _sent(counting, lambda: MemoryStore(counting, "ns", Policy(max_hot=3)))
    assert len(sent) >= 3  # the library's version (and its load), a configure, CONFIG GET
    again, sent = _sent(counting, lambda: MemoryStore(counting, "ns", cached_open=True))
    assert sent == []
    assert again.policy == first.policy == Policy(max_hot=3)
    assert again.mode == first.mode
    _, sent = _sent(counting, lambda: again.remember("a", 1.0, now=T0))
    assert len(sent) == 1
    # Without cached_open, a store asks as it always did.
    _, sent = _sent(counting, lambda: MemoryStore(counting, "ns"))
    assert len(sent) >= 2
    # Another namespace on the same client is configured (the library is known).
    other, sent = _sent(counting, lambda: MemoryStore(counting, "other", cached_open=True))
    assert len(sent) == 1 and other.policy == Policy()


def test_a_policy_changed_since_is_taken_by_the_first_write(
    counting: Counting, server: Server
) -> None:
    MemoryStore(counting, "ns", Policy(max_hot=3, protect_s=0))
    operator = MemoryStore(server.client(), "ns")  # another client: this one's cache is stale
    operator.set_policy(max_hot=1)
    stale = MemoryStore(counting, "ns", cached_open=True)
    assert stale.policy.max_hot == 3  # as this client last saw it
    stale.remember("a", 1.0, now=T0)
    assert stale.policy.max_hot == 1  # refused, the change taken, sent again
    assert stale.remember("b", 2.0, now=T0).evicted == ("a",)


def test_a_namespace_lost_since_is_started_again_by_the_first_write(
    counting: Counting, server: Server
) -> None:
    MemoryStore(counting, "ns", Policy(max_hot=3)).remember("old", 1.0, now=T0)
    server.client().flushall()
    server.client().function_flush()
    fresh = MemoryStore(counting, "ns", Policy(max_hot=3), cached_open=True)
    fresh.remember("a", 1.0, now=T0)  # loads the library, starts the namespace again
    assert [m.id for m in fresh.top(5, now=T0)] == ["a"]
    assert counting.hget(key_name("ns", "policy"), "max_hot") == b"3"
    if fresh.mode == "functions":
        assert counting.function_list(library=library().name)


def test_another_policy_asked_for_is_checked_against_the_server(counting: Counting) -> None:
    MemoryStore(counting, "ns", Policy(max_hot=3))
    with pytest.raises(PolicyMismatch):
        MemoryStore(counting, "ns", Policy(max_hot=4), cached_open=True)
    _, sent = _sent(
        counting,
        lambda: MemoryStore(counting, "ns", Policy(max_hot=4), cached_open=True, adopt_policy=True),
    )
    assert sent == []  # adopting: the stored policy, as known


def test_a_durable_store_configures_and_waits_whatever_the_cache(counting: Counting) -> None:
    MemoryStore(counting, "ns")
    with pytest.raises(NotDurable):  # no replica confirms the configure
        MemoryStore(counting, "ns", cached_open=True, durable_replicas=1, durable_timeout_ms=20)


def test_a_session_made_per_request_sends_what_a_kept_one_sends(server: Server) -> None:
    """An OpenAI session turn (read the window, add the question, add the answer) on a
    shared client: a session object per request sent 6 commands against 3 before."""

    async def turn(session: MemevictSession, i: int) -> None:
        await session.get_items()
        await session.add_items([{"role": "user", "content": f"question {i}"}])
        await session.add_items([{"role": "assistant", "content": f"answer {i}"}])

    async def run() -> tuple[float, float]:
        client = AsyncCounting(port=server.port)
        client.sent = []
        await client.flushall()
        kept = MemevictSession("kept", client=client)
        await turn(kept, 0)
        await turn(MemevictSession("request", client=client), 0)
        start = len(client.sent)
        for i in range(1, 11):
            await turn(kept, i)
        per_kept = (len(client.sent) - start) / 10
        start = len(client.sent)
        for i in range(1, 11):
            await turn(MemevictSession("request", client=client), i)
        per_request = (len(client.sent) - start) / 10
        texts = [item["content"] for item in await MemevictSession("x", client=client).get_items()]
        assert texts == []  # (another session's namespace: nothing)
        request = await MemevictSession("request", client=client).get_items()
        assert [item["content"] for item in request][-2:] == ["question 10", "answer 10"]
        await client.aclose()
        return per_kept, per_request

    per_kept, per_request = asyncio.run(run())
    assert per_kept == 3
    assert per_request == per_kept


class ClusterCounting(redis.cluster.RedisCluster):
    def __init__(self, **kwargs: Any) -> None:
        self.sent: list[str] = []
        super().__init__(**kwargs)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(str(args[0]))
        return super().execute_command(*args, **options)


def test_on_a_cluster_each_node_is_known_apart(cluster: Cluster) -> None:
    client = ClusterCounting(host="127.0.0.1", port=cluster.nodes[0].port)
    names = [f"ns{i}" for i in range(12)]  # (on every node: 12 hash slots of 3 masters)
    nodes = {client.get_node_from_key(key_name(n, "policy")).name for n in names}
    assert len(nodes) == 3
    for name in names:
        MemoryStore(client, name)
    for name in names:
        before = len(client.sent)
        store = MemoryStore(client, name, cached_open=True)
        assert client.sent[before:] == []
        assert store.remember("a", 1.0, now=T0).score > 0
    client.close()
