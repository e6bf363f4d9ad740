"""The namespace's version, and the hot tier an adapter holds from its own writes.

Every call that writes makes a new version (lua/lib/receipts.lua, configure); an adapter's
conversation keeps the hot tier as of a version and serves the window from it while one
read of the version says nothing else wrote (memevict.integrations._conversation.Held).
The served window must be the server's at every step, with other workers writing to the
same session in between: checked here against a fresh read, on both servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import struct
from typing import Any

import pytest
import redis
import redis.asyncio

from memevict import Item, MemoryStore, Policy
from memevict.acl import acl_rules
from memevict.errors import NotFound
from memevict.integrations._conversation import _compose, _skip, recent_of
from memevict.integrations.openai_agents import MemevictSession, items_of, whole_calls
from memevict.scripts import key_name
from tests.cluster import Cluster
from tests.servers import Server

T0 = 1_700_000_000_000
WORDS = [
    "invoice",
    "Lisbon",
    "password",
    "budget",
    "meeting",
    "retry",
    "deploy",
    "replica",
    "cache",
    "order",
]


def version(store: MemoryStore) -> int:
    found = store.version()
    assert found is not None
    return found.version


def test_every_write_makes_one_version_and_a_read_none(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(max_hot=3, protect_s=0, clock="wall"))
    v = version(store)
    writes: list[Any] = [
        lambda: store.remember("a", 1.0, text="alpha", now=T0),
        lambda: store.remember_many([Item("b", 2.0), Item("c", 3.0)], now=T0),
        lambda: store.remember("d", 4.0, now=T0),  # (evicts a)
        lambda: store.touch("b", now=T0),
        lambda: store.whitelist("c", now=T0),
        lambda: store.demote("c", now=T0),
        lambda: store.recall("a", now=T0),
        lambda: store.decay(0.5),
        lambda: store.evict(now=T0),
        lambda: store.forget("d"),
    ]
    for write in writes:
        write()
        assert version(store) == v + 1
        v += 1
    reads: list[Any] = [
        lambda: store.get("a"),
        lambda: store.top(5),
        store.stats,
        store.window,
        store.context,
        lambda: store.search("alpha", 3),
        lambda: store.scan("hot"),
    ]
    for read in reads:
        read()
        assert version(store) == v
    done = store.remember_many([Item("e", 1.0)], now=T0, call_id="once")
    assert done.version == v + 1 == version(store)
    again = store.remember_many([Item("e", 1.0)], now=T0, call_id="once")
    assert again == done and version(store) == v + 1  # (a repeat writes nothing)
    store.set_policy(max_hot=2)
    assert version(store) > v + 1
    assert store.context().version == version(store)
    with pytest.raises(NotFound):  # (a refused call writes nothing)
        store.touch("nope")
    assert store.context().version == version(store)


def test_a_state_packed_without_the_version_reads_as_version_0(client: redis.Redis) -> None:
    """A namespace of memevict before issue 41: eight doubles."""
    store = MemoryStore(client, "ns", Policy(max_hot=2, protect_s=0, clock="wall"))
    store.remember("a", 1.0, now=T0)
    key = key_name("ns", "state")
    packed = client.hget(key, "packed")
    assert packed is not None and len(packed) == 72
    client.hset(key, "packed", packed[:64])
    assert version(store) == 0 and store.context().version == 0
    assert MemoryStore(client, "ns").stats().hot == 1  # (opened again: nothing to migrate)
    assert store.remember_many([Item("b", 2.0)], now=T0).version == 1
    after = client.hget(key, "packed")
    assert after is not None and len(after) == 72 and after[:56] != packed[:56]
    assert struct.unpack("<9d", after)[8] == 1.0
    assert store.remember("c", 3.0, now=T0).evicted == ("a",)  # (the rules go on)


def test_a_state_made_again_gets_a_version_no_one_saw(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(max_hot=5, protect_s=0, clock="wall"))
    for n in range(3):
        store.remember(f"m{n}", 1.0, now=T0)
    seen = version(store)
    client.delete(key_name("ns", "state"))
    MemoryStore(client, "ns")  # (configure rebuilds it from the memories)
    again = store.version()
    assert again is not None and again.version > seen + 1_000_000
    assert store.version() == again and store.stats().hot == 3


def test_a_batch_reply_names_orders_and_the_version(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(max_hot=10, protect_s=0, clock="wall"))
    first = store.remember_many([Item("a", 1.0), Item("b", 1.0)], now=T0)
    assert first.orders == (1, 2) and first.moved == ()
    second = store.remember_many([Item("c", 1.0), Item("a", 2.0)], now=T0)
    assert second.orders == (3, 1)  # (a memory keeps the order of its first remember)
    assert second.version == first.version + 1
    whole = store.context(100, detail=True)
    assert [id for id, _ in whole] == ["a", "b", "c"]
    assert whole.orders == (1, 2, 3) and whole.sizes == (1, 1, 1)
    assert store.context(100).orders == ()  # (detail only when asked)


def test_a_group_brought_back_is_named(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(max_hot=2, protect_s=0, clock="wall"))
    store.remember_many([Item("call", 1.0, group="g"), Item("out", 1.0, group="g")], now=T0)
    store.remember_many([Item("x", 5.0), Item("y", 5.0)], now=T0)  # (the group goes cold)
    assert store.get("call", now=T0).tier == "cold"  # type: ignore[union-attr]
    done = store.remember_many([Item("new", 9.0, group="g")], now=T0)
    assert set(done.moved) >= {"call", "out"} or "call" in done.evicted


# --- the window an adapter serves, against a fresh read -----------------------------------


def _expected(session: MemevictSession, fresh: Any) -> list[dict[str, Any]]:
    first, _ = session.conversation._first((), recent_of(session._added, session.recent))
    items, _ = items_of(_compose(fresh, first))
    return whole_calls(items)


async def _fresh(session: MemevictSession) -> Any:
    conversation = session.conversation
    first, budget = conversation._first((), recent_of(session._added, session.recent))
    return await conversation.store.context(budget, skip=_skip(first))


def _message(rng: random.Random, n: int) -> dict[str, Any]:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40)))
    return {"role": "user" if n % 2 == 0 else "assistant", "content": f"{n}: {words}"}


def _tool_exchange(n: int) -> list[dict[str, Any]]:
    call = {"type": "function_call", "call_id": f"c{n}", "name": "lookup", "arguments": "{}"}
    return [call, {"type": "function_call_output", "call_id": f"c{n}", "output": f"r{n}"}]


@pytest.mark.parametrize("seed", [1, 2])
def test_every_served_window_is_the_servers_with_other_writers(server: Server, seed: int) -> None:
    """Two sessions of one conversation and a third worker writing through a plain store
    (a forget, a recall of an evicted message, a policy change) take turns at random; a
    lock makes each step whole, so another worker's writes land between a session's own
    write and its next read, and each read is checked against a fresh one at once."""
    rng = random.Random(seed)

    async def run() -> tuple[int, int]:
        client = redis.asyncio.Redis.from_url(server.url)
        await client.flushall()
        sessions = [
            MemevictSession("held", client=client, max_tokens=400, recall_share=0) for _ in range(2)
        ]
        other = sessions[0].store
        lock = asyncio.Lock()
        served = held = 0
        n = 0

        async def step(k: int) -> None:
            nonlocal served, held, n
            session = sessions[k % 2]
            async with lock:
                roll = rng.random()
                if roll < 0.45:
                    n += 1
                    await session.add_items([_message(rng, n)])
                elif roll < 0.5:
                    n += 1
                    await session.add_items(_tool_exchange(n))
                elif roll < 0.9:
                    items = await session.get_items()
                    fresh = await _fresh(session)
                    assert items == _expected(session, fresh)
                    served += 1
                    held += session.conversation._held is not None
                elif roll < 0.95:
                    page = await other.scan("hot", 0, 100)
                    if page.memories:
                        victim = rng.choice(page.memories).id
                        with contextlib.suppress(NotFound):
                            await other.forget(victim)
                    cold = await other.scan("cold", 0, 100)
                    if cold.memories:
                        await other.recall(rng.choice(cold.memories).id)
                else:
                    await other.set_policy(max_tokens=rng.choice([300, 400]))

        for _k in range(400):
            await step(rng.randrange(2))
            await asyncio.sleep(0)
        for session in sessions:
            await session.close()
        await client.aclose()
        return served, held

    served, held = asyncio.run(run())
    assert served > 100 and held > served // 3  # (the held path did serve)


def test_the_held_window_on_a_cluster(cluster: Cluster) -> None:
    """On a cluster the version is read from the node of the session's slot (the state
    key's hash tag): every get_items served from the hot tier held, and each the window
    a fresh read returns."""
    rng = random.Random(3)

    async def run() -> tuple[int, int]:
        client = cluster.async_client()
        session = MemevictSession("held-cluster", client=client, max_tokens=400, recall_share=0)
        await session.clear_session()
        served = held = 0
        for n in range(60):
            await session.add_items([_message(rng, n)])
            items = await session.get_items()
            assert items == _expected(session, await _fresh(session))
            served += 1
            held += session.conversation._held is not None
        await session.clear_session()
        await client.aclose()
        return served, held

    served, held = asyncio.run(run())
    assert held == served == 60


def test_a_user_without_hgetall_is_served_by_context(
    server: Server, client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """A user made with the ACL rules of memevict before issue 41 lacks HGETALL: the
    session says so once and reads every window with context, the same windows."""
    rules = [r for r in acl_rules("openai:", prefix=True) if r != "+hgetall"]
    assert len(rules) == len(acl_rules("openai:", prefix=True)) - 1
    user, password = f"old-{secrets.token_hex(4)}", secrets.token_hex(16)
    client.execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *rules)
    rng = random.Random(4)

    async def run() -> int:
        restricted = redis.asyncio.Redis(
            host="127.0.0.1", port=server.port, username=user, password=password
        )
        session = MemevictSession("old-acl", client=restricted, max_tokens=400, recall_share=0)
        for n in range(30):
            await session.add_items([_message(rng, n)])
            items = await session.get_items()
            assert items == _expected(session, await _fresh(session))
        held = session.conversation._held
        await session.clear_session()
        await restricted.aclose()
        return 0 if held is None else 1

    try:
        with caplog.at_level("WARNING", logger="memevict.integrations"):
            assert asyncio.run(run()) == 0
        said = [r for r in caplog.records if "may not run HGETALL" in r.getMessage()]
        assert len(said) == 1
    finally:
        client.execute_command("ACL", "DELUSER", user)


def test_one_session_object_used_by_many_tasks_at_once(server: Server) -> None:
    """Tasks sharing one session object (a service that does not serialize a user's
    requests): no call fails, each window read holds no item twice, and once they are done
    the window served is the server's."""
    rng = random.Random(5)

    async def run() -> None:
        client = redis.asyncio.Redis.from_url(server.url)
        session = MemevictSession("held-tasks", client=client, max_tokens=400, recall_share=0)
        await session.clear_session()

        async def worker(k: int) -> None:
            for n in range(25):
                await session.add_items([_message(rng, 100 * k + n)])
                items = await session.get_items()
                texts = [str(i.get("content")) for i in items]
                assert len(texts) == len(set(texts))

        await asyncio.gather(*(worker(k) for k in range(4)))
        items = await session.get_items()
        assert items == _expected(session, await _fresh(session))
        assert session.conversation._held is not None  # (and it serves again)
        await session.clear_session()
        await client.aclose()

    asyncio.run(run())
