"""Functions mode: the scripts as the Redis Functions library ``memevict`` (FCALL).

A default store (mode="auto") runs functions on both test servers, so the
rule scenarios of tests/test_rules.py run through FCALL there; here they run
again through a scripts-mode store (EVALSHA), so both modes run every rule. A
store that asks for "auto" falls back to EVALSHA on a server without
Functions, and keeps an explicit mode. A random mix of
calls gives the same replies and byte-identical keys in both modes; the
library is loaded when missing or stale, persists with the data and
replicates to a read replica.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from memevict import MemevictError, MemoryStore, NotLoaded, Policy, ReadOnly
from memevict.functions import function_name, library
from memevict.scripts import key_name, namespace_keys, specs
from tests.conftest import scenario_policy
from tests.servers import Server, redis_binary, valkey_binary

# Every scenario of tests/test_rules.py, collected again here with this
# module's make_store: each one now runs through EVALSHA.
from tests.test_rules import *  # noqa: F403

T0 = 1_700_000_000_000


@pytest.fixture
def make_store(client: redis.Redis) -> Callable[..., MemoryStore]:
    def make(namespace: str = "t", **policy: float) -> MemoryStore:
        store = MemoryStore(client, namespace, scenario_policy(**policy), mode="scripts")
        assert store.mode == "scripts"
        return store

    return make


def test_the_default_store_runs_functions(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(protect_s=0))
    assert store.mode == "functions"
    assert loaded_version(client) == library().version
    calls = client.info("commandstats")["cmdstat_fcall"]["calls"]
    store.remember("a", 1.0, now=T0)
    assert client.info("commandstats")["cmdstat_fcall"]["calls"] == calls + 1


@pytest.mark.parametrize("kind", ["valkey", "redis"])
def test_without_functions_the_default_store_runs_scripts(kind: str) -> None:
    """A server whose FUNCTION, FCALL and FCALL_RO are unknown commands (as on
    Redis 6): mode="auto" runs EVALSHA there; mode="functions" refuses."""
    binary = valkey_binary() if kind == "valkey" else redis_binary()
    if binary is None:
        if os.environ.get("MEMEVICT_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server not found and MEMEVICT_REQUIRE_REDIS=1")
        pytest.skip("redis-server not installed")
    renamed = [a for c in ("FUNCTION", "FCALL", "FCALL_RO") for a in ("--rename-command", c, "")]
    server = Server(binary, extra=tuple(renamed)).start()
    try:
        client = server.client()
        store = MemoryStore(client, "ns", Policy(max_hot=1, protect_s=0))
        assert store.mode == "scripts"
        store.remember("a", 1.0, now=T0)
        assert store.remember("b", 2.0, now=T0).evicted == ("a",)
        assert client.info("commandstats")["cmdstat_evalsha"]["calls"] >= 2
        with pytest.raises(MemevictError):
            MemoryStore(client, "ns", mode="functions")
        client.close()
    finally:
        server.stop()


def loaded_version(client: redis.Redis) -> str | None:
    try:
        reply = client.execute_command("FCALL_RO", library().version_function, 0)
    except redis.ResponseError:
        return None
    return bytes(reply).decode()


def test_the_library_has_one_function_per_script(client: redis.Redis) -> None:
    client.function_flush()
    MemoryStore(client, "ns", mode="functions")
    [entry] = client.function_list(library=library().name)
    functions = [dict_of(f) for f in dict_of(entry)["functions"]]
    flags = {text(f["name"]): sorted(map(text, f["flags"])) for f in functions}
    assert set(flags) == {function_name(n) for n in specs()} | {library().version_function}
    for name, spec in specs().items():
        assert flags[function_name(name)] == (["no-writes"] if spec.read_only else []), name
    assert loaded_version(client) == library().version


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def dict_of(reply: Any) -> dict[str, Any]:
    """FUNCTION LIST answers with flat [name, value, ...] lists on RESP2."""
    if isinstance(reply, dict):
        return {text(k): v for k, v in reply.items()}
    return {text(k): v for k, v in zip(reply[::2], reply[1::2], strict=True)}


OPS = ("remember", "remember", "many", "touch", "decay", "evict", "whitelist", "demote")
OPS += ("recall", "forget", "get", "top", "stats", "window", "scan")


def random_calls(store: MemoryStore, rng: random.Random, steps: int) -> Iterator[object]:
    """A seeded mix of every method, with explicit times; yields each result or error."""
    now = T0
    for _ in range(steps):
        now += rng.choice((0, 1, 500, 30_000))
        memory_id = f"m{rng.randrange(12)}"
        op = rng.choice(OPS)
        try:
            if op == "remember":
                importance = rng.choice((1, 3, 5, 7, 8, 10))
                whitelist = rng.random() < 0.2
                yield store.remember(
                    memory_id,
                    importance,
                    text=f"t{now}",
                    whitelist=whitelist,
                    tokens=rng.randint(1, 5),
                    group=rng.choice((None, None, "p", "q")),
                    now=now,
                )
            elif op == "many":
                items = [(f"m{rng.randrange(12)}", float(rng.randrange(1, 11))) for _ in range(3)]
                yield store.remember_many(items, now=now)
            elif op == "decay":
                yield store.decay(0.8)
            elif op == "forget":
                yield store.forget(memory_id)
            elif op == "top":
                yield store.top(20, now=now)
            elif op == "window":
                yield store.window(rng.choice((None, 6)), now=now)
            elif op == "scan":
                yield store.scan(rng.choice(("hot", "cold")), 0, 100, now=now)
            elif op in ("evict", "stats"):
                yield getattr(store, op)(now=now)
            else:
                yield getattr(store, op)(memory_id, now=now)
        except MemevictError as error:
            yield type(error).__name__


def test_functions_behave_as_scripts(client: redis.Redis) -> None:
    policy = Policy(
        max_hot=5, whitelist_cap=2, protect_s=1, cold_max=4, half_life_s=60, max_tokens=12
    )
    by_script = MemoryStore(client, "a", policy, mode="scripts")
    by_function = MemoryStore(client, "b", policy, mode="functions")
    # The same start: the recency clock's epoch is taken from the server's
    # clock when a namespace is made, so b starts from a copy of a's state.
    client.hset(key_name("b", "state"), mapping=client.hgetall(key_name("a", "state")))
    script_results = list(random_calls(by_script, random.Random(7), 400))
    function_results = list(random_calls(by_function, random.Random(7), 400))
    assert script_results == function_results
    assert "NotFound" in script_results  # the mix reaches the error paths too
    # The same bytes in every key of the two namespaces (receipts aside).
    assert client.exists(*namespace_keys("a")) >= 7  # meta, text, hot, cold, ... all in use
    for key_a, key_b in zip(namespace_keys("a"), namespace_keys("b"), strict=True):
        assert client.dump(key_a) == client.dump(key_b), key_a


def test_each_namespace_runs_its_own_policy_as_it_is_now(client: redis.Redis) -> None:
    """The library keeps the last policy it parsed between calls (lib/policy.lua):
    namespaces of different policies called in turn, and a policy replaced by
    another store, each take effect in the very next call."""
    small = MemoryStore(client, "small", Policy(max_hot=2, protect_s=0), mode="functions")
    large = MemoryStore(client, "large", Policy(max_hot=5, protect_s=0), mode="functions")
    for i in range(8):
        small.remember(f"s{i}", 1.0, now=T0 + i)
        large.remember(f"l{i}", 1.0, now=T0 + i)
    assert (small.stats().hot, large.stats().hot) == (2, 5)
    other = MemoryStore(client, "large", mode="scripts")
    other.set_policy(Policy(max_hot=3, protect_s=0), now=T0 + 8)  # evicts down to 3
    assert len(large.remember("l8", 1.0, now=T0 + 9).evicted) == 1
    assert large.stats().hot == 3
    other.set_policy(Policy(max_hot=6, protect_s=0), now=T0 + 10)
    assert large.remember("l9", 1.0, now=T0 + 11).evicted == ()
    assert large.stats().hot == 4


def test_a_missing_or_stale_library_is_loaded(client: redis.Redis) -> None:
    client.function_flush()
    assert loaded_version(client) is None
    store = MemoryStore(client, "ns", Policy(protect_s=0), mode="functions")
    assert loaded_version(client) == library().version
    # FUNCTION FLUSH mid-run: the next call loads the library again.
    store.remember("a", 1.0, now=T0)
    client.function_flush()
    assert store.remember("b", 2.0, now=T0).score >= 2.0
    assert [m.id for m in store.top(5, now=T0)] == ["b", "a"]
    # Another version of the library is replaced when a store opens.
    stale = library().source.replace(library().version, "0" * 40)
    client.function_load(stale, replace=True)
    assert loaded_version(client) == "0" * 40
    MemoryStore(client, "ns", mode="functions")
    assert loaded_version(client) == library().version


def test_a_read_only_store_does_not_load_the_library(client: redis.Redis) -> None:
    MemoryStore(client, "ns", mode="functions").remember("a", 1.0, now=T0)
    client.function_flush()
    with pytest.raises(NotLoaded, match="memevict load --functions"):
        MemoryStore(client, "ns", read_only=True, mode="functions")
    assert loaded_version(client) is None
    # The default mode reads by EVALSHA_RO instead, and still loads nothing.
    reader = MemoryStore(client, "ns", read_only=True)
    assert reader.mode == "scripts"
    assert [m.id for m in reader.top(5, now=T0)] == ["a"]
    assert loaded_version(client) is None


@pytest.mark.slow  # (a replica, or a 200-turn agent: seconds)
def test_functions_persist_and_replicate(server: Server) -> None:
    primary = Server(server.binary, extra=("--appendonly", "yes")).start()
    replica = Server(server.binary, extra=("--replicaof", "127.0.0.1", str(primary.port)))
    try:
        client = primary.client()
        store = MemoryStore(client, "ns", Policy(max_hot=2, protect_s=0), mode="functions")
        for i in range(4):
            store.remember(f"m{i}", 1.0 + i, now=T0 + i)
        replica.start()
        reader = replica.client()
        deadline = time.monotonic() + 10
        while reader.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "replica did not sync"
            time.sleep(0.05)
        assert client.wait(1, 5000) == 1
        # The replica got the library with the data: a read-only store needs no load.
        on_replica = MemoryStore(reader, "ns", read_only=True, mode="functions")
        assert loaded_version(reader) == library().version
        assert on_replica.top(5, now=T0 + 9) == store.top(5, now=T0 + 9)
        assert on_replica.stats(now=T0 + 9) == store.stats(now=T0 + 9)
        with pytest.raises(ReadOnly):  # a write function, refused by the replica
            on_replica.recall("m3", now=T0 + 9)
        client.close()
        reader.close()
        # The library is saved with the dataset: after kill -9 and a restart
        # from the append-only file, it is there before any store loads it.
        primary.crash()
        primary.start()
        restarted = primary.client()
        assert loaded_version(restarted) == library().version
        assert MemoryStore(restarted, "ns", mode="functions").stats(now=T0 + 9).hot == 2
        restarted.close()
    finally:
        replica.stop()
        primary.stop()
