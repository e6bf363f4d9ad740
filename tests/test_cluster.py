"""memevict on a Redis / Valkey Cluster of three masters (tests/cluster.py).

The whole rule scenario suite of tests/test_rules.py and the window suite of
tests/test_windows.py (tokens, groups, window, scan, drop, idle expiry) run
here again, on the cluster, sync and async, scripts and functions: the star
imports re-collect their test functions in this module, and the ``client``
and ``make_store`` fixtures below override the conftest ones for them. Then:
many namespaces spread over the nodes, each whole on the node of its slot;
one script command per call, sent to that node only; and a slot moved to
another node while a namespace is in use (before, during, after).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import cast

import pytest
import redis
import redis.asyncio.cluster
import redis.cluster
from click.testing import CliRunner
from redis.crc import key_slot
from redis.exceptions import AskError, MovedError

import tests.test_rules
import tests.test_windows
from memevict import AsyncMemoryStore, Eviction, Item, Memory, MemoryStore, Policy, Stats, Window
from memevict.cli import main
from memevict.functions import library
from memevict.registry import Mode
from memevict.scripts import key_name, namespace_keys, specs
from tests.cluster import KINDS, Cluster, binary
from tests.conftest import StoreFactory, scenario_policy
from tests.test_async import AwaitedStore
from tests.test_rules import *  # noqa: F403 (the scenario suite, collected again here)
from tests.test_windows import *  # noqa: F403 (tokens, groups, window, scan, drop, expiry)

T0 = 1_700_000_000_000
S = 1000  # ms per second


@pytest.fixture(scope="module")
def cluster_client(cluster: Cluster) -> Iterator[redis.cluster.RedisCluster]:
    """One cluster client of each cluster for the module's ~300 tests on it: a new one
    reads the command table (COMMAND) and the slot map first, ~20 ms of CPU a test. A store
    takes nothing from an earlier one on its client unless opened with cached_open
    (memevict/clientcache.py), which no test here asks for; a slot moved by an earlier test
    is found by the client's MOVED handling (as a long-lived client finds it)."""
    c = cluster.client()
    yield c
    c.close()


@pytest.fixture
def client(
    cluster: Cluster, cluster_client: redis.cluster.RedisCluster
) -> redis.cluster.RedisCluster:
    """Overrides the conftest client for every test here, the rule suite's too."""
    cluster.wait_stable()
    cluster_client.flushall()  # sent to every primary
    cluster_client.script_flush()
    return cluster_client


@pytest.fixture(scope="module")
def async_cluster_client(
    cluster: Cluster,
) -> Iterator[tuple[asyncio.AbstractEventLoop, redis.asyncio.cluster.RedisCluster]]:
    """An event loop and one asyncio cluster client on it, for the module's async stores of
    ``cluster`` (as cluster_client: a new one read COMMAND and the slot map for each store)."""
    loop = asyncio.new_event_loop()
    aclient = cluster.async_client()
    yield loop, aclient
    loop.run_until_complete(aclient.aclose())
    loop.close()


@pytest.fixture(params=("scripts", "functions"))
def mode(request: pytest.FixtureRequest) -> Mode:
    """Each test here runs in both modes: EVALSHA and FCALL (what a default
    store, mode="auto", runs on a cluster)."""
    return cast(Mode, request.param)


@pytest.fixture(params=("sync", "async"))
def make_store(
    request: pytest.FixtureRequest, client: redis.cluster.RedisCluster, mode: Mode
) -> StoreFactory:
    """MemoryStore on the cluster client, or AsyncMemoryStore on the asyncio
    cluster client (each call run to completion on its event loop)."""
    if request.param == "sync":

        def make(namespace: str = "t", **policy: float) -> MemoryStore:
            return MemoryStore(client, namespace, scenario_policy(**policy), mode=mode)

        return make
    loop, aclient = request.getfixturevalue("async_cluster_client")

    def make_async(namespace: str = "t", **policy: float) -> MemoryStore:
        store = AsyncMemoryStore(aclient, namespace, scenario_policy(**policy), mode=mode)
        loop.run_until_complete(store._opened())
        return cast(MemoryStore, AwaitedStore(store, loop))

    return make_async


# The rule suite really runs here, on the cluster fixtures.


RULE_TESTS = sorted(
    n
    for module in (tests.test_rules, tests.test_windows)
    for n in vars(module)
    if n.startswith("test_")
)


def test_the_rule_suite_is_collected_on_the_cluster_fixtures(
    request: pytest.FixtureRequest,
) -> None:
    assert len(RULE_TESTS) >= 20
    assert all(
        globals()[n] in (getattr(m, n, None) for m in (tests.test_rules, tests.test_windows))
        for n in RULE_TESTS
    )
    here = [
        item
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.module is not None
        and item.module.__name__ == __name__
        and item.originalname in RULE_TESTS
    ]
    assert here, "no rule test collected in this module"
    for item in here:
        defs = item._fixtureinfo.name2fixturedefs
        # the last definition of a name is the one a test gets
        for name in ("make_store", "client"):
            used = defs[name][-1].func
            assert (used.__module__, used.__name__) == (__name__, name), item.nodeid
        assert {"cluster", "mode"} <= set(item.fixturenames)
        assert "server" not in item.fixturenames


def test_the_store_sees_a_cluster_client(make_store: StoreFactory, cluster: Cluster) -> None:
    store = make_store("seen")
    cluster_clients = (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)
    assert isinstance(store.client, cluster_clients)
    store.remember("a", 1.0, now=T0)
    owner = cluster.owner(cluster.keyslot(key_name("seen", "meta")))
    assert cluster.node(owner).hexists(key_name("seen", "meta"), "a")


def test_the_async_cluster_client_reaches_every_node(
    cluster: Cluster, client: redis.cluster.RedisCluster
) -> None:
    owners = cluster.slot_map(0)
    keys = {  # a key in a slot of each node
        cluster.ids.index(owners[cluster.keyslot(k)]): k for k in (f"k{n}" for n in range(30))
    }
    assert sorted(keys) == list(range(cluster.size))

    async def write() -> None:
        c = cluster.async_client()
        try:
            for i, key in keys.items():
                await c.set(key, f"node {i}")
        finally:
            await c.aclose()

    asyncio.run(write())
    assert all(cluster.node(i).get(key) == f"node {i}" for i, key in keys.items())


# Namespaces spread over the nodes, each whole on the node of its slot.


def test_a_thousand_namespaces_each_live_on_the_node_of_their_slot(
    cluster: Cluster, client: redis.cluster.RedisCluster, mode: Mode
) -> None:
    names = [f"agent-{i}" for i in range(1000)]
    stores: dict[str, MemoryStore] = {}
    for i, ns in enumerate(names):
        store = MemoryStore(client, ns, Policy(max_hot=2, protect_s=0), mode=mode)
        store.remember("fact", 2 + i % 8, text=f"fact of {ns}", now=T0)
        store.remember("chat", 1.0, now=T0 + S)
        store.remember("more", 1.5, now=T0 + 2 * S)  # evicts chat
        stores[ns] = store

    probe = cluster.node(0).pipeline(transaction=False)
    for ns in names:
        probe.cluster("KEYSLOT", key_name(ns, "policy"))
    slots = {ns: int(slot) for ns, slot in zip(names, probe.execute(), strict=True)}
    assert all(key_slot(key_name(ns, "policy").encode()) == slots[ns] for ns in names)
    owners = cluster.slot_map(0)
    assert all(cluster.slot_map(i) == owners for i in range(1, cluster.size))

    found: dict[str, set[int]] = {ns: set() for ns in names}
    roles: dict[str, list[str]] = {ns: [] for ns in names}
    for i in range(cluster.size):
        keys = [str(k) for k in cluster.node(i).keys("*")]  # this node's keys only
        assert cluster.node(i).dbsize() == len(keys)
        for key in keys:
            ns, role = key.split("{", 1)[1].split("}:", 1)
            assert owners[slots[ns]] == cluster.ids[i], f"{key} is on node {i}"
            found[ns].add(i)
            roles[ns].append(role.split(":")[0])
    assert all(len(nodes) == 1 for nodes in found.values())
    per_node = [sum(1 for ns in names if i in found[ns]) for i in range(cluster.size)]
    assert sum(per_node) == 1000 and min(per_node) > 0, per_node
    # protect_s=0: no prot or fresh key; one receipt per remember
    assert all(
        sorted(r) == ["call"] * 3 + ["cold", "hot", "meta", "policy", "state", "text"]
        for r in roles.values()
    )

    for i, ns in enumerate(names):
        store = stores[ns]
        fact = store.get("fact", now=T0 + 2 * S)
        assert fact is not None
        assert (fact.importance, fact.text, fact.tier) == (2 + i % 8, f"fact of {ns}", "hot")
        chat = store.get("chat", now=T0 + 2 * S)
        assert chat is not None and chat.tier == "cold"
        assert [m.id for m in store.top(5, now=T0 + 2 * S)] == ["fact", "more"]
        s = store.stats(now=T0 + 2 * S)
        assert (s.hot, s.cold) == (2, 1)


# A namespace with every role key non-empty, and one call of each method on it.

POLICY = Policy(max_hot=5, protect_s=30, whitelist_cap=3, index=1, log_max=100)  # (every role)
NOW = T0 + 50 * S


def fill(store: MemoryStore) -> None:
    """Leaves every role key of the namespace non-empty."""
    r = store.remember_many(
        [
            Item(f"m{i}", 1 + i, text=f"text {i:02}", group="pair" if i in (5, 6) else None)
            for i in range(8)
        ],
        now=T0,
    )
    assert (r.evicted, r.over) == ((), 3)  # all protected
    store.whitelist("m7", now=T0 + S)
    assert sorted(store.evict(now=T0 + 31 * S).evicted) == ["m0", "m1", "m2"]
    # protected until T0 + 70 s: fresh and prot stay non-empty
    assert store.remember("late", 2.5, text="late", now=T0 + 40 * S).evicted == ("m3",)


CALLS: dict[str, Callable[[MemoryStore], object]] = {
    "window": lambda s: s.window(tokens=4, now=NOW),
    "remember": lambda s: s.remember("new", 6, text="new", now=NOW),
    "remember_many": lambda s: s.remember_many([("b1", 3), ("b2", 9)], now=NOW),
    "touch": lambda s: s.touch("m4", now=NOW),
    "decay": lambda s: s.decay(0.9),
    "evict": lambda s: s.evict(now=NOW),
    "whitelist": lambda s: s.whitelist("m5", now=NOW),
    "demote": lambda s: s.demote("m7", now=NOW),
    "recall": lambda s: s.recall("m0", now=NOW),
    "forget": lambda s: s.forget("m6"),
    "get": lambda s: s.get("m5", now=NOW),
    "top": lambda s: s.top(10, now=NOW),
    "stats": lambda s: s.stats(now=NOW),
    "explain": lambda s: s.explain("m5", 4, now=NOW),
}


# One script command per call, sent to the node of the namespace's slot only.

SCRIPT_INTERNAL = {c for spec in specs().values() for c in spec.commands}


def command_counts(probes: list[redis.Redis]) -> dict[tuple[int, str], int]:
    """(node, command) -> calls so far; commands a script calls count too,
    so those are left out of the comparison."""
    return {
        (i, name.removeprefix("cmdstat_")): int(stat["calls"])
        for i, probe in enumerate(probes)
        for name, stat in probe.info("commandstats").items()
    }


@pytest.mark.parametrize("method", list(CALLS))
def test_a_call_is_one_script_command_on_the_node_of_its_slot(
    cluster: Cluster, client: redis.cluster.RedisCluster, mode: Mode, method: str
) -> None:
    store = MemoryStore(client, "routed", POLICY, mode=mode)
    fill(store)
    store.registry.load()
    owner = cluster.owner(cluster.keyslot(key_name("routed", "meta")))
    probes = [cluster.node(i) for i in range(cluster.size)]
    before = command_counts(probes)
    CALLS[method](store)
    after = command_counts(probes)
    sent = {
        key: n - before.get(key, 0)
        for key, n in after.items()
        if n != before.get(key, 0) and key[1] != "info" and key[1] not in SCRIPT_INTERNAL
    }
    verbs = ("evalsha", "evalsha_ro") if mode == "scripts" else ("fcall", "fcall_ro")
    assert len(sent) == 1 and next(iter(sent.items())) in {((owner, v), 1) for v in verbs}, sent


def test_the_eviction_log_is_read_from_the_node_of_its_slot(
    cluster: Cluster, client: redis.cluster.RedisCluster
) -> None:
    """evictions() is one XREVRANGE (then XRANGE with since), on the namespace's node."""
    store = MemoryStore(client, "logged", POLICY)
    fill(store)
    log = store.evictions()
    assert [e.id for e in log if e.to_tier == "cold"] == ["m0", "m1", "m2", "m3"]  # (fill's)
    assert store.evictions(since=log[0].log_id, count=200) == log[1:]
    owner = cluster.owner(cluster.keyslot(key_name("logged", "log")))
    assert cluster.node(owner).xlen(key_name("logged", "log")) == len(log)

    async def read() -> list[Eviction]:  # (the asyncio cluster client routes it too)
        c = cluster.async_client()
        try:
            return await AsyncMemoryStore(c, "logged").evictions()
        finally:
            await c.aclose()

    assert asyncio.run(read()) == log


# A slot moved to another node while its namespace is in use.


def two_namespaces(cluster: Cluster) -> tuple[str, str, int, int, int]:
    """A namespace to move, a control namespace on another node that stays,
    the moving one's slot, its node and the node it moves to."""
    moving = "moving"
    slot = cluster.keyslot(key_name(moving, "meta"))
    source = cluster.owner(slot)
    staying = next(
        ns
        for ns in (f"staying-{n}" for n in range(100))
        if cluster.owner(cluster.keyslot(key_name(ns, "meta"))) != source
    )
    return moving, staying, slot, source, (source + 1) % cluster.size


def leaves(value: object) -> list[object]:
    """A result flattened, for comparing the replies of two namespaces (but for a
    window's epoch: when its namespace began)."""
    if isinstance(value, Window):
        value = dataclasses.replace(value, epoch=0)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.astuple(value)
    if isinstance(value, list | tuple):
        return [type(value).__name__, len(value), *(x for v in value for x in leaves(v))]
    return [value]


def alike(a: object, b: object) -> bool:
    """Equal, but for scores within 1e-9: each namespace counts its recency
    clock from its own epoch (the server time of its first use), so the same
    calls give scores that differ in the last digits."""
    left, right = leaves(a), leaves(b)
    return len(left) == len(right) and all(
        math.isclose(x, y, rel_tol=1e-9)
        if isinstance(x, float) and isinstance(y, float)
        else x == y
        for x, y in zip(left, right, strict=True)
    )


def outcome(call: Callable[[], object]) -> tuple[str, object]:
    try:
        return "ok", call()
    except Exception as error:
        return "error", f"{type(error).__module__}.{type(error).__name__}: {error}"


def test_a_namespace_follows_its_slot_to_another_node(
    cluster: Cluster, client: redis.cluster.RedisCluster, mode: Mode
) -> None:
    moving, staying, slot, source, target = two_namespaces(cluster)
    stores = [MemoryStore(client, ns, POLICY, mode=mode) for ns in (moving, staying)]
    for store in stores:
        fill(store)
    before = [[outcome(partial(c, s)) for c in CALLS.values()] for s in stores]
    assert alike(before[0], before[1]), before
    assert all(kind == "ok" for kind, _ in before[0])

    present = sorted(cluster.node(source).keys(f"memevict:{{{moving}}}:*"))
    assert len(present) > len(namespace_keys(moving))  # with receipts
    assert cluster.migrate_slot(slot, source, target, batch=3) == len(present)
    assert cluster.node(source).keys(f"memevict:{{{moving}}}:*") == []
    assert sorted(cluster.node(target).keys(f"memevict:{{{moving}}}:*")) == present
    with pytest.raises(MovedError):  # the old node sends clients on
        cluster.node(source).hgetall(key_name(moving, "meta"))
    assert cluster.owner(slot) == target
    # the client still thinks the slot is on the old node: its next call gets MOVED
    assert client.nodes_manager.get_node_from_slot(slot).port == cluster.nodes[source].port

    later = T0 + 3600 * S
    calls: list[Callable[[MemoryStore], object]] = [
        lambda s: s.remember("after", 4, text="x", now=later),
        lambda s: s.touch("m4", now=later),
        lambda s: s.remember_many([("c1", 2), ("c2", 8)], now=later),
        lambda s: s.evict(now=later),
        lambda s: s.get("after", now=later),
        lambda s: s.top(100, now=later),
        lambda s: s.stats(now=later),
    ]
    after = [[outcome(partial(c, s)) for c in calls] for s in stores]
    assert client.nodes_manager.get_node_from_slot(slot).port == cluster.nodes[target].port
    assert alike(after[0], after[1]), after
    assert all(kind == "ok" for kind, _ in after[0]), [x for x in after[0] if x[0] != "ok"]


def same_slot_namespace(slot: int, prefix: str) -> str:
    for n in range(200_000):
        if key_slot(key_name(f"{prefix}-{n}", "meta").encode()) == slot:
            return f"{prefix}-{n}"
    raise AssertionError(f"no namespace {prefix}-N in slot {slot}")


def contents(cluster: Cluster, node: int, namespace: str) -> dict[bytes, object]:
    """Every key of the namespace on ``node`` (receipts too) with its value."""
    r = cluster.nodes[node].client()  # bytes: texts and DUMP payloads need not be UTF-8
    out: dict[bytes, object] = {}
    for key in sorted(cast(list[bytes], r.keys(f"memevict:{{{namespace}}}:*"))):
        kind = r.type(key)
        if kind == b"hash":
            out[key] = r.hgetall(key)
        elif kind == b"zset":
            out[key] = r.zrange(key, 0, -1, withscores=True)
        else:
            out[key] = (kind, r.dump(key))
    return out


HALF_READS = ("get", "top", "stats", "window")
HALF_WRITES = ("remember", "touch", "evict", "remember_many")
WAIT_S = 0.05  # how long the stores here retry a call refused while the slot migrates
REFUSED = (
    f"memevict.errors.SlotMigrating: the namespace's cluster slot was still migrating after "
    f"{WAIT_S:g} s of retries (TRYAGAIN); nothing was written"
)


def test_calls_while_a_slot_is_half_migrated(
    cluster: Cluster, client: redis.cluster.RedisCluster, mode: Mode
) -> None:
    """What every call does in each half-migrated state of its slot.

    Measured (redis-py 8.1, Valkey 9.1.2 and Redis 7.0.15): a node serves a
    multi-key script in a migrating slot only if it holds every one of its
    KEYS; otherwise it answers TRYAGAIN, which redis-py retries until its
    16-redirection TTL runs out and raises ClusterError("TTL exhausted.")
    (0.1-0.4 s). memevict sends the call again for up to migration_wait_s
    and then raises SlotMigrating. Here the migration waits in each state
    longer than that: writes always have a missing key (the fresh receipt
    key), so every write is refused while the slot migrates; reads are served
    (by the source, or after ASK by the target) while all of the namespace's
    role keys exist and sit on one side, and refused when one role is empty
    (its key does not exist) or the keys are split. A refused call changes
    nothing.
    """
    full = "half-full"
    slot = cluster.keyslot(key_name(full, "meta"))
    sparse = same_slot_namespace(slot, "half-sparse")
    source = cluster.owner(slot)
    target = (source + 1) % cluster.size
    store = MemoryStore(client, full, POLICY, mode=mode, migration_wait_s=WAIT_S)
    fill(store)
    sparse_store = MemoryStore(
        client, sparse, Policy(protect_s=0), mode=mode, migration_wait_s=WAIT_S
    )
    sparse_store.remember("only", 1.0, now=T0)  # no text, fresh, prot, wl or cold key
    full_keys = namespace_keys(full)
    assert cluster.node(source).exists(*full_keys) == len(full_keys)
    expected = {name: CALLS[name](store) for name in HALF_READS}
    expected_sparse = sparse_store.stats(now=NOW)
    snapshot = {ns: contents(cluster, source, ns) for ns in (full, sparse)}

    first = [key_name(full, r) for r in ("hot", "meta", "wl", "cold")] + [key_name(sparse, "hot")]
    seen: dict[tuple[str, str], tuple[str, object]] = {}

    def between(step: str, moved: int) -> None:
        on_source = [
            k for k in full_keys if outcome(partial(cluster.node(source).exists, k))[0] == "ok"
        ]
        gone = [k for k in full_keys if k not in on_source]
        if step == "marked":
            assert gone == []
        else:
            assert gone, "no key of the namespace has moved"
            with pytest.raises(AskError):  # the source sends clients to the target
                cluster.node(source).exists(gone[0])
            with pytest.raises(MovedError):  # the target serves only after ASKING
                cluster.node(target).exists(gone[0])
            assert all(cluster.asking(target, "EXISTS", k) == 1 for k in gone)
        state = "all on the source" if not gone else "split" if on_source else "all moved"
        for name in HALF_READS:
            seen[state, name] = outcome(partial(CALLS[name], store))
        seen[state, "stats of a namespace with empty roles"] = outcome(
            lambda: sparse_store.stats(now=NOW)
        )
        for name in HALF_WRITES:
            seen[state, name] = outcome(partial(CALLS[name], store))

    # Each refused call costs redis-py's own 16 redirections, half of them 50 ms
    # apart, before memevict's retries; 4 keep this test's ~70 refusals quick.
    client.RedisClusterRequestTTL = 4
    try:
        cluster.migrate_slot(slot, source, target, between=between, first=first, batch=1000)
    finally:
        client.RedisClusterRequestTTL = redis.cluster.RedisCluster.RedisClusterRequestTTL

    for (state, name), (kind, value) in seen.items():
        if kind == "ok":  # a call served mid-migration answers as before it
            assert name in HALF_READS and value == expected[name], (state, name)
    assert {key: value if kind == "error" else "ok" for key, (kind, value) in seen.items()} == {
        **{("all on the source", n): "ok" for n in HALF_READS},
        ("all on the source", "stats of a namespace with empty roles"): REFUSED,
        **{("all on the source", n): REFUSED for n in HALF_WRITES},
        **{("split", n): REFUSED for n in HALF_READS},
        ("split", "stats of a namespace with empty roles"): REFUSED,
        **{("split", n): REFUSED for n in HALF_WRITES},
        **{("all moved", n): "ok" for n in HALF_READS},
        ("all moved", "stats of a namespace with empty roles"): REFUSED,
        **{("all moved", n): REFUSED for n in HALF_WRITES},
    }
    # the refused calls changed nothing, and both namespaces moved whole
    assert {ns: contents(cluster, target, ns) for ns in (full, sparse)} == snapshot
    assert sparse_store.stats(now=NOW) == expected_sparse
    assert all(outcome(partial(CALLS[n], store))[0] == "ok" for n in HALF_WRITES)


def busy_call(store: MemoryStore, step: int) -> object:
    now = NOW + step * S
    match step % 5:
        case 0:
            return store.remember(f"w{step}", 1 + step % 9, now=now)
        case 1:
            return store.touch("m4", now=now)
        case 2:
            return store.remember_many([(f"v{step}", 2), (f"u{step}", 7)], now=now)
        case 3:
            return store.evict(now=now)
        case _:
            return store.top(10, now=now)


def test_writes_ride_out_a_slot_migration(
    cluster: Cluster, client: redis.cluster.RedisCluster, mode: Mode
) -> None:
    """A slot migration as fast as a resharding tool makes it (here about
    0.45 s between SETSLOT MIGRATING and SETSLOT NODE) fails no call: the
    store resends what the nodes refuse until the slot has moved."""
    moving, staying, slot, source, target = two_namespaces(cluster)
    stores = [MemoryStore(client, ns, POLICY, mode=mode) for ns in (moving, staying)]
    for store in stores:
        fill(store)
    phase = ["before"]
    marked = threading.Event()
    failures: list[BaseException] = []

    def between(step: str, moved: int) -> None:
        phase[0] = step
        marked.set()
        time.sleep(0.15)

    def migrate() -> None:
        try:
            cluster.migrate_slot(
                slot,
                source,
                target,
                between=between,
                first=[key_name(moving, "meta")],
                batch=1000,
            )
        except BaseException as error:
            failures.append(error)
        finally:
            phase[0] = "after"
            marked.set()

    migrator = threading.Thread(target=migrate)
    migrator.start()
    started: list[str] = []
    try:
        assert marked.wait(10)
        step = 0
        while migrator.is_alive() or step < 4:
            started.append(phase[0])
            results = [busy_call(store, step) for store in stores]
            assert alike(results[0], results[1]), (phase[0], step, results)
            step += 1
    finally:
        migrator.join()
    assert failures == []
    assert {"marked", "batch", "moved"} & set(started)
    assert alike(stores[0].top(100, now=NOW + 60 * S), stores[1].top(100, now=NOW + 60 * S))
    assert stores[0].stats(now=NOW + 60 * S) == stores[1].stats(now=NOW + 60 * S)


def test_load_reaches_every_node(cluster: Cluster, client: redis.cluster.RedisCluster) -> None:
    """`memevict load` given one node's URL loads every node CLUSTER NODES lists."""
    nodes = [cluster.node(i) for i in range(cluster.size)]
    for node in nodes:
        node.script_flush()
        node.function_flush()
    url = f"redis://127.0.0.1:{cluster.nodes[1].port}/0"
    result = CliRunner().invoke(main, ["--url", url, "load", "--json"])
    assert result.exit_code == 0, result.output
    loaded = json.loads(result.output)
    assert sorted(n["address"] for n in loaded["nodes"]) == sorted(
        f"127.0.0.1:{server.port}" for server in cluster.nodes
    )
    shas = [spec.sha for spec in specs().values()]
    assert all(all(node.script_exists(*shas)) for node in nodes)
    result = CliRunner().invoke(main, ["--url", url, "load", "--functions"])
    assert result.exit_code == 0, result.output
    assert all(node.function_list(library=library().name) for node in nodes)


def test_every_cli_command_works_against_a_cluster_url(
    cluster: Cluster, client: redis.cluster.RedisCluster
) -> None:
    # the URL of one node: the CLI sees a cluster and routes every call by slot
    url = f"redis://127.0.0.1:{cluster.nodes[0].port}/0"
    ns = next(f"cli-{i}" for i in range(1000) if cluster.owner(key_slot(f"cli-{i}".encode())) != 0)

    def cli(*args: str) -> str:
        result = CliRunner().invoke(main, ["--url", url, "-n", ns, *args])
        assert result.exit_code == 0, (args, result.output)
        return result.output

    cli("policy", "--max-hot", "2", "--protect-s", "0")
    for i, importance in enumerate(("2", "5", "9")):
        cli("remember", f"m{i}", "-i", importance, "--text", f"t{i}")
    assert json.loads(cli("get", "m2", "--json"))["tier"] == "hot"
    assert [m["id"] for m in json.loads(cli("top", "--json"))] == ["m2", "m1"]
    assert json.loads(cli("stats", "--json"))["cold"] == 1
    for command in (["touch", "m1"], ["whitelist", "m1"], ["demote", "m1"], ["recall", "m0"]):
        cli(*command)
    cli("decay", "0.5")
    cli("evict")
    cli("forget", "m0")
    out = cli("simulate", "--turns", "40", "--window", "10", "--json")
    assert json.loads(out)


def test_a_default_store_on_a_cluster_runs_functions(cluster: Cluster) -> None:
    """mode="auto" on a cluster client: FCALL, as on a single server."""
    client = cluster.client()
    assert MemoryStore(client, "auto", POLICY).mode == "functions"
    client.close()


# A failover: the master of the namespace's slot is killed (kill -9) right
# before a call. redis-py resends a keyed EVALSHA to the new owner; an FCALL
# names its node, so the registry resends it itself (memevict.registry).
FAILOVER_POLICY = Policy(max_hot=3, protect_s=0)


def _failover_cluster(kind: str, node_timeout_ms: int = 1000) -> tuple[Cluster, int]:
    """A 3-master cluster with a replica each (node timeout 1 s by default, so a
    replica takes over in about 2 s) and the master of namespace "fo"."""
    c = Cluster(binary(kind), node_timeout_ms=node_timeout_ms).start()
    try:
        c.add_replicas()
        return c, c.owner(c.keyslot(key_name("fo", "meta")))
    except BaseException:
        c.stop()
        raise


def _check_after_failover(stats: Stats, after: Memory | None) -> None:
    # m0..m4 at max_hot 3 (m0, m1 cold), then "after" evicted m2: each write
    # applied once, nothing written before the WAIT lost.
    assert (stats.hot, stats.cold) == (3, 3)
    assert after is not None and after.tier == "hot"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("asked", "node_timeout_ms"),
    # (4 s: the takeover outlasts redis-py's own resends of an EVALSHA, 2 to 3 s; the
    # registry sends it again until a replica serves it: issue 29. EVALSHA at 1 s, which
    # redis-py's resends alone outlast, is the easier case of the same path.)
    [("auto", 1000), ("scripts", 4000)],
)
def test_a_call_waits_out_a_failover(kind: str, asked: str, node_timeout_ms: int) -> None:
    c, owner = _failover_cluster(kind, node_timeout_ms)
    try:
        client = c.client()
        store = MemoryStore(client, "fo", FAILOVER_POLICY, mode=asked, migration_wait_s=30)
        assert store.mode == ("functions" if asked == "auto" else "scripts")
        for i in range(5):
            store.remember(f"m{i}", 1.0 + i, now=T0 + i * S)
        c.command(owner, "WAIT", 1, 5000)  # on the replica too
        c.nodes[owner].crash()
        store.remember("after", 9.0, now=T0 + 10 * S)
        _check_after_failover(store.stats(now=T0 + 10 * S), store.get("after", now=T0 + 10 * S))
        client.close()
    finally:
        c.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_an_async_call_waits_out_a_failover(kind: str) -> None:
    c, owner = _failover_cluster(kind)

    async def run() -> tuple[Stats, Memory | None]:
        aclient = c.async_client()
        store = AsyncMemoryStore(aclient, "fo", FAILOVER_POLICY, migration_wait_s=30)
        for i in range(5):
            await store.remember(f"m{i}", 1.0 + i, now=T0 + i * S)
        assert store.mode == "functions"
        c.command(owner, "WAIT", 1, 5000)
        c.nodes[owner].crash()
        await store.remember("after", 9.0, now=T0 + 10 * S)
        stats = await store.stats(now=T0 + 10 * S)
        after = await store.get("after", now=T0 + 10 * S)
        await aclient.aclose()
        return stats, after

    try:
        _check_after_failover(*asyncio.run(run()))
    finally:
        c.stop()
