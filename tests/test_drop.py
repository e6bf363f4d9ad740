"""drop always works (issue 38, item 17): a namespace in any state, damaged as
tests/test_damage.py and tests/test_bad_input.py damage it (a key of another type in any
role, the policy key of another type, keys missing, policy fields edited, packed copies
flipped), is deleted whole by ``MemoryStore(...).drop()``, by ``AsyncMemoryStore(...).drop()``
and by ``memevict.drop_namespace``; a store opened afterwards starts it again, empty."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import redis
import redis.asyncio

from memevict import MemoryStore, Policy
from memevict.aio import AsyncMemoryStore
from memevict.scripts import key_name, specs

NS = "broken"
POLICY = Policy(max_hot=3, protect_s=0, whitelist_cap=1)

PLANT: dict[str, Callable[[redis.Redis, str], object]] = {
    "string": lambda c, k: c.set(k, "planted"),
    "hash": lambda c, k: c.hset(k, "planted", "1"),
    "zset": lambda c, k: c.zadd(k, {"planted": 1}),
}


def fill(client: redis.Redis) -> None:
    """Every role in use: hot, cold, whitelisted, grouped, with texts."""
    store = MemoryStore(client, NS, POLICY)
    store.remember("w", 9.0, whitelist=True, text="w")
    store.remember("g1", 1.0, group="g", text="g1")
    store.remember("g2", 1.0, group="g")
    for i in range(4):
        store.remember(f"m{i}", 2.0 + i, text=f"t{i}")
    store.decay(0.9)


def flip(client: redis.Redis, role: str) -> None:
    key = key_name(NS, role)
    packed = client.hget(key, "packed")
    assert packed
    client.hset(key, "packed", bytes([packed[0] ^ 0xFF]) + packed[1:])


DROP = specs()["drop"]
DAMAGE: dict[str, Callable[[redis.Redis], object]] = {
    **{
        f"{role} is a {planted}": (
            lambda c, role=role, planted=planted: (
                c.delete(key_name(NS, role)),
                PLANT[planted](c, key_name(NS, role)),
            )
        )
        for role, key_type in zip(DROP.keys, DROP.key_types, strict=True)
        for planted in sorted(set(PLANT) - {key_type})
    },
    "no policy": lambda c: c.delete(key_name(NS, "policy")),
    "no policy nor state": lambda c: c.delete(key_name(NS, "policy"), key_name(NS, "state")),
    "only the text left": lambda c: c.delete(*(key_name(NS, r) for r in DROP.keys if r != "text")),
    "packed policy flipped": lambda c: flip(c, "policy"),
    "packed state flipped": lambda c: flip(c, "state"),
    "a policy field edited": lambda c: c.hset(key_name(NS, "policy"), "max_hot", "banana"),
    "a policy field edited, the packed copy damaged": lambda c: c.hset(
        key_name(NS, "policy"), mapping={"jitter": "a lot", "packed": b"\xc1"}
    ),
}
# A store opening this one is refused (BadPolicy, tests/test_policy.py): a store that
# brings its own policy replaces it, and drop_namespace needs no store.
UNOPENABLE = "a policy field edited, the packed copy damaged"


def left(client: redis.Redis) -> list[bytes]:
    """The namespace's keys but its receipts (each expires on its own)."""
    return sorted(k for k in client.keys(f"memevict:{{{NS}}}:*") if b":call:" not in k)


def damaged(client: redis.Redis, kind: str) -> None:
    client.flushall()
    fill(client)
    DAMAGE[kind](client)
    assert left(client)


def starts_again(client: redis.Redis) -> None:
    assert left(client) == []
    store = MemoryStore(client, NS, POLICY)
    store.remember("new", 1.0)
    assert [m.id for m in store.top(10)] == ["new"]


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_store_drops_a_damaged_namespace(client: redis.Redis, kind: str) -> None:
    damaged(client, kind)
    if kind == UNOPENABLE:
        store = MemoryStore(client, NS, POLICY, replace_policy=True)
    else:
        store = MemoryStore(client, NS)
    assert store.drop() > 0
    starts_again(client)
    store.remember("after", 1.0)  # the store that dropped it starts it again too
    assert {m.id for m in store.top(10)} == {"new", "after"}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_an_async_store_drops_a_damaged_namespace(client: redis.Redis, kind: str) -> None:
    damaged(client, kind)
    port = client.connection_pool.connection_kwargs["port"]

    async def run() -> int:
        aclient = redis.asyncio.Redis(port=port)
        try:
            return await AsyncMemoryStore(aclient, NS).drop()
        finally:
            await aclient.aclose()

    assert asyncio.run(run()) > 0
    starts_again(client)


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_drop_namespace_needs_no_store(client: redis.Redis, kind: str) -> None:
    from memevict import drop_namespace
    from memevict.aio import drop_namespace as async_drop_namespace

    damaged(client, kind)
    assert drop_namespace(client, NS) > 0
    starts_again(client)
    damaged(client, kind)
    port = client.connection_pool.connection_kwargs["port"]

    async def run() -> int:
        aclient = redis.asyncio.Redis(port=port)
        try:
            return await async_drop_namespace(aclient, NS)
        finally:
            await aclient.aclose()

    assert asyncio.run(run()) > 0
    starts_again(client)
    assert drop_namespace(client, "never-made") == 0
