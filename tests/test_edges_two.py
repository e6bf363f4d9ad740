"""Every rule at the edges, round two (issue 28): lost and hand-edited keys, idle expiry,
library versions. Each test is the reproduction of a finding; each failed on the code
before its fix (see the issue's closing note)."""

from __future__ import annotations

import asyncio
import re
import warnings

import pytest
import redis
import redis.asyncio

from memevict import (
    AsyncMemoryStore,
    MemoryStore,
    NamespaceLost,
    NoPolicy,
    NotFound,
    Policy,
    ReadOnly,
    UnsafeMaxmemoryPolicy,
)
from memevict.functions import library
from memevict.namespaces import namespaces
from memevict.scripts import key_name, lua_root
from memevict.state import unpack_state
from memevict.store import FIELDS_ADDED_SINCE_0_1_0
from tests.conftest import StoreFactory
from tests.servers import Server

T0 = 1_800_000_000_000


def hot_tokens(store: MemoryStore) -> int:
    """The tokens of the hot memories, summed from what get reports of each."""
    return sum(m.tokens for m in store.top(200) if m.tier == "hot")


def test_a_lost_meta_key_leaves_no_phantom_tokens(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    """Item 1: the total forgets the memories whose metadata was lost, by the next call
    that meets them or the next store open, so a new memory is not evicted for them."""
    for reopen in (False, True):
        store = make_store(f"lost{reopen}", max_hot=100, max_tokens=100, protect_s=0)
        for i in range(10):
            store.remember(f"m{i}", 3.0, tokens=10, now=T0 + i)
        client.delete(key_name(store.namespace, "meta"))
        if reopen:
            store = MemoryStore(client, store.namespace)
            assert store.stats().tokens == 0
        got = store.remember("new", 3.0, tokens=10, now=T0 + 100)
        assert got.evicted == () and store.get("new").tier == "hot"  # type: ignore[union-attr]
        assert store.stats().tokens == 10 == hot_tokens(store)


def test_a_memory_whose_metadata_went_by_hand_gives_back_its_tokens(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    """Item 1, one field: the lowest memory's metadata deleted; when eviction meets its
    entry the total is summed again from the hot tier, and no other memory pays for it."""
    store = make_store("one", max_hot=100, max_tokens=50, protect_s=0)
    store.remember("low", 1.0, tokens=20, now=T0)
    for i in range(3):
        store.remember(f"m{i}", 5.0, tokens=10, now=T0 + 1 + i)
    client.hdel(key_name(store.namespace, "meta"), "low")
    got = store.remember("new", 5.0, tokens=10, now=T0 + 10)  # 60 > 50 counting "low"
    assert got.evicted == ()  # "low" was met first: its entry dropped, nothing evicted
    assert store.stats().tokens == 40 == hot_tokens(store)
    assert {m.id for m in store.top(200)} == {"m0", "m1", "m2", "new"}


def policy(**fields: float | str) -> Policy:
    return Policy(**fields)  # type: ignore[arg-type]


def test_a_lost_state_keeps_the_window_order_of_a_recalled_memory(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    """Item 9: the order counter is rebuilt past every memory's order, cold ones too, so
    a memory recalled after the rebuild comes back to its old place in the window."""
    store = make_store("order", max_hot=2, protect_s=0)
    store.remember("h1", 9.0, now=T0)
    store.remember("h2", 9.0, now=T0 + 1)
    for i in range(2):  # the newest two, each evicted at once
        store.remember(f"c{i}", 0.5, now=T0 + 2 + i)
        assert store.get(f"c{i}").tier == "cold"  # type: ignore[union-attr]
    client.delete(key_name(store.namespace, "state"))
    store = MemoryStore(client, store.namespace)
    store.set_policy(max_hot=4)
    store.remember("new", 9.0, now=T0 + 10)
    store.recall("c1", now=T0 + 11)
    assert [m.id for m in store.window(now=T0 + 12)] == ["h1", "h2", "c1", "new"]


def test_a_state_rebuilt_on_open_expires_with_the_namespace(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    """Item 2: under idle_ttl_s, the state configure rebuilds gets the namespace's expiry,
    so it cannot outlive the rest and haunt a namespace made again later."""
    store = make_store("idle", idle_ttl_s=600, max_tokens=60, protect_s=0)
    store.remember("a", 1.0, tokens=50, now=T0)
    state = key_name(store.namespace, "state")
    client.delete(state)
    MemoryStore(client, store.namespace)  # rebuilds the state
    assert client.exists(state) and 0 < client.pttl(state) <= 600_000
    assert abs(client.pttl(state) - client.pttl(key_name(store.namespace, "meta"))) < 5_000


def test_idle_expiry_under_a_volatile_policy_is_warned_of(client: redis.Redis) -> None:
    """Item 3: idle_ttl_s gives every key a TTL, so a volatile-* maxmemory policy may evict
    them one by one: the store warns, as it does of allkeys-*; without idle_ttl_s it
    does not."""
    saved = client.config_get("maxmemory-policy")["maxmemory-policy"]
    try:
        client.config_set("maxmemory-policy", "volatile-lru")
        with pytest.warns(UnsafeMaxmemoryPolicy, match="volatile-lru.*idle_ttl_s=60"):
            MemoryStore(client, "idle", policy(idle_ttl_s=60))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            MemoryStore(client, "kept", policy(idle_ttl_s=0))

        async def opened() -> None:
            store = AsyncMemoryStore(client_of(client), "idle2", policy(idle_ttl_s=60))
            try:
                await store.stats()
            finally:
                await store.aclose()

        with pytest.warns(UnsafeMaxmemoryPolicy, match="volatile-lru"):
            asyncio.run(opened())
    finally:
        client.config_set("maxmemory-policy", saved)


def test_the_maxmemory_warning_points_at_the_line_that_made_the_store(
    server: Server, client: redis.Redis
) -> None:
    """Issue 38: the warning names the application's line, not memevict's nor asyncio's
    (an async store warns at its first call, from a task)."""
    saved = client.config_get("maxmemory-policy")["maxmemory-policy"]

    async def opened() -> None:
        store = AsyncMemoryStore(client_of(client), "made-async")  # (the line warned at)
        try:
            await store.stats()
        finally:
            await store.aclose()

    try:
        client.config_set("maxmemory-policy", "allkeys-lru")
        made = [
            lambda: MemoryStore(client, "made-sync"),
            lambda: MemoryStore.from_url(server.url, "made-url").close(),
            lambda: asyncio.run(opened()),
        ]
        for make in made:
            with pytest.warns(UnsafeMaxmemoryPolicy) as warned:
                make()
            ours = [w for w in warned if w.category is UnsafeMaxmemoryPolicy]
            assert [w.filename for w in ours] == [__file__]
    finally:
        client.config_set("maxmemory-policy", saved)


def client_of(sync: redis.Redis) -> redis.asyncio.Redis:
    kwargs = sync.connection_pool.connection_kwargs
    return redis.asyncio.Redis(host=kwargs["host"], port=kwargs["port"])


STATE_FIELDS_0_1_0 = ("epoch", "decay", "seq", "g0", "x0", "latest", "wbase")


def as_0_1_0(client: redis.Redis, namespace: str) -> None:
    """Rewrites a namespace as memevict 0.1.0 kept it: the policy without its packed copy
    nor the fields added since, the state in fields without tokens, metadata of 49 bytes
    (no tokens, no order: each memory costs 1)."""
    client.hdel(key_name(namespace, "policy"), "packed", *FIELDS_ADDED_SINCE_0_1_0)
    state = key_name(namespace, "state")
    values = unpack_state(client.hget(state, "packed"))  # type: ignore[arg-type]
    client.delete(state)
    client.hset(state, mapping={f: repr(values[f]) for f in STATE_FIELDS_0_1_0})
    meta = key_name(namespace, "meta")
    for id, raw in client.hgetall(meta).items():
        client.hset(meta, id, raw[:49])


def test_a_namespace_of_0_1_0_opens_with_its_tokens_and_reads_everywhere(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    """Item 4: its 8 hot memories cost 1 each: the total is 8 once a store opens it, a
    lower max_tokens evicts, forgetting never takes the total below 0; read-only stores
    and namespaces() read it before and after a writable store opened it."""
    store = make_store("v010", max_hot=10, protect_s=0)
    for i in range(8):
        store.remember(f"m{i}", 1.0 + i, text=f"t{i}", now=T0 + i)
    as_0_1_0(client, "v010")
    for _ in range(2):  # before and after the writable open
        read_only = MemoryStore(client, "v010", read_only=True)
        assert read_only.stats(now=T0 + 20).hot == 8
        assert read_only.policy.max_tokens == 0
        assert [n.name for n in namespaces(client)] == ["v010"]
        opened = MemoryStore(client, "v010")
        assert opened.stats(now=T0 + 20).tokens == 8
    opened.set_policy(max_tokens=5, now=T0 + 20)
    assert opened.stats(now=T0 + 20).tokens == 5 == hot_tokens(opened)
    for m in opened.top(200, now=T0 + 21):
        opened.forget(m.id)
    assert opened.stats(now=T0 + 22).tokens == 0
    assert client.hget(key_name("v010", "policy"), "max_tokens") == b"5"


def test_the_fields_added_since_0_1_0_are_the_same_in_lua_and_python() -> None:
    source = (lua_root() / "lib" / "policy.lua").read_text()
    defaults = dict(re.findall(r"\{'(\w+)', '(?:int|num|word)'[^{}]*, '([^']*)'\}", source))
    assert defaults == FIELDS_ADDED_SINCE_0_1_0


def test_a_damaged_packed_policy_is_never_used_and_heals(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    """Item 6: a packed policy with a value out of its range (max_hot 3 -> -1, one byte)
    or of the wrong type (strings) is refused NO_POLICY before any write; a writable
    store packs it again from the fields and goes on, reads included."""
    key = key_name("packed", "policy")
    for damage in ("flipped", "strings"):
        store = make_store("packed", max_hot=3, protect_s=0)
        for i in range(3):
            store.remember(f"m{damage}{i}", 5.0, now=T0 + i)
        packed = client.hget(key, "packed")
        # (array 18: its type and length in 3 bytes, then max_hot 3)
        assert packed is not None and packed[:3] == b"\xdc\x00\x12" and packed[3] == 3
        if damage == "flipped":
            client.hset(key, "packed", packed[:3] + b"\xff" + packed[4:])  # max_hot -1
        else:
            client.hset(key, "packed", packed[:3] + b"\xa11" * 18)
        assert store.stats(now=T0 + 10).hot == 3  # a read heals it too
        assert client.hget(key, "packed") == packed
        got = store.remember(f"n{damage}", 9.0, now=T0 + 11)
        assert len(got.evicted) == 1 and got.evicted != (f"n{damage}",)
        client.delete(*client.keys("memevict:{packed}:*"))
    read_only = MemoryStore(client, "ro", policy(max_hot=3))
    read_only.remember("a", 1.0)
    packed = client.hget(key_name("ro", "policy"), "packed")
    client.hset(key_name("ro", "policy"), "packed", packed[:3] + b"\xff" + packed[4:])  # type: ignore[index]
    with pytest.raises(NoPolicy, match="damaged"):
        MemoryStore(client, "ro", read_only=True).stats()


def test_a_half_life_edited_by_hand_starts_a_new_piece_of_the_clock(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    """Item 7: HSET half_life_memories by an operator reaches the scripts when a store
    opens, from then on, as set_policy's would: no untouched memory's score rises, and an
    old memory never outranks a fresh one of the same importance."""
    store = make_store("hand", clock="activity", half_life_memories=20, protect_s=0)
    store.remember("old", 5.0, now=T0)
    for i in range(10):
        store.remember(f"m{i}", 1.0, now=T0 + 1 + i)
    before = store.get("old", now=T0 + 20).score  # type: ignore[union-attr]
    client.hset(key_name("hand", "policy"), "half_life_memories", "5000")
    reopened = MemoryStore(client, "hand")
    assert reopened.policy.half_life_memories == 5000
    after = reopened.get("old", now=T0 + 20).score  # type: ignore[union-attr]
    assert after == pytest.approx(before, rel=1e-9)
    reopened.remember("fresh", 5.0, now=T0 + 30)
    assert [m.id for m in reopened.top(2, now=T0 + 31)] == ["fresh", "old"]


def test_another_versions_library_never_takes_an_open_stores_calls(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    """Item 8: each version's library has its own name, so another version loaded under
    open stores (here the same code renamed, registering functions of the same names as
    0.1.0's) does not replace this one's functions; and when this one's is deleted the
    next call loads it again and goes on."""
    store = make_store("versions", max_hot=3, protect_s=0)
    if store.mode != "functions":
        pytest.skip("the store runs EVALSHA here")
    store.remember("a", 1.0, now=T0)
    # another version, named as 0.1.0 named it, whose remember refuses this one's calls
    other = (
        library()
        .source.replace(library().name, "memevict")
        .replace(
            "local function script_remember(keys, args)",
            "local function script_remember(keys, args)\n"
            "if true then return redis.error_reply('ERR ARITY another version') end",
        )
    )
    client.function_load(other, replace=True)
    assert store.remember("b", 2.0, now=T0 + 1).evicted == ()
    client.function_delete(library().name)  # gone: the call loads it again
    assert [m.id for m in store.top(3, now=T0 + 2)] == ["b", "a"]
    assert {text(e[1]) for e in client.function_list()} >= {library().name, "memevict"}


def text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def test_a_read_only_store_never_writes_and_set_policy_survives_a_drop(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    """Item 10: a read_only store on a primary refuses every write (ReadOnly, nothing
    sent: not even drop); set_policy right after another worker's drop raises
    NamespaceLost, as every other write does (issue 29), and applies after recreate()
    (sync and async)."""
    store = make_store("ro2", max_hot=3, protect_s=0)
    store.remember("a", 1.0, now=T0)
    reader = MemoryStore(client, "ro2", read_only=True)
    client.config_resetstat()
    for write in (
        lambda: reader.remember("b", 1.0),
        lambda: reader.forget("a"),
        lambda: reader.touch("a"),
        lambda: reader.set_policy(max_hot=9),
        lambda: reader.drop(),
    ):
        with pytest.raises(ReadOnly, match="read-only"):
            write()
    stats = client.info("commandstats")
    assert not any(k in stats for k in ("cmdstat_fcall", "cmdstat_evalsha", "cmdstat_eval"))
    assert reader.get("a") is not None and store.get("a") is not None

    MemoryStore(client, "ro2").drop()
    with pytest.raises(NamespaceLost):
        store.set_policy(max_hot=7)
    store.recreate()
    assert store.set_policy(max_hot=7).max_hot == 7 and store.stats().hot == 0

    async def dropped_then_set() -> int:
        writer = AsyncMemoryStore(client_of(client), "ro2")
        try:
            await writer.remember("c", 1.0)
            MemoryStore(client, "ro2").drop()
            with pytest.raises(NamespaceLost):
                await writer.set_policy(max_hot=5)
            await writer.recreate()
            return (await writer.set_policy(max_hot=5)).max_hot
        finally:
            await writer.aclose()

    assert asyncio.run(dropped_then_set()) == 5


def test_a_memory_past_cold_max_stays_gone(make_store: StoreFactory, client: redis.Redis) -> None:
    """Item 5: a memory past cold_max (dropped in batches) is gone for every call, and
    stays gone when another cold memory leaves the tier (forgotten, recalled); a group
    across the line is gone whole, and recalling a member brings nothing back."""
    store = make_store("line", max_hot=1, protect_s=0, cold_max=64)
    for i in range(66):  # 65 cold: one past the line, not dropped yet (batches of 2)
        store.remember(f"m{i:02}", 1.0 + i / 100, now=T0 + i)  # (each evicts the one before)
    assert client.zcard(key_name("line", "cold")) == 65 and store.stats().cold == 64
    assert store.get("m00", now=T0 + 100) is None  # the oldest: past the line
    for leave in ("forget", "recall"):
        store.forget("m10") if leave == "forget" else store.recall("m11", now=T0 + 101)
        assert store.get("m00", now=T0 + 102) is None, leave
        with pytest.raises(NotFound):
            store.recall("m00", now=T0 + 103)
    grouped = make_store("gline", max_hot=2, protect_s=0, cold_max=65)
    for i in range(33):  # pairs evicted whole, oldest first
        grouped.remember(f"a{i:02}", 1.0 + i / 10, group=f"g{i:02}", now=T0 + 2 * i)
        grouped.remember(f"b{i:02}", 1.0 + i / 10, group=f"g{i:02}", now=T0 + 2 * i + 1)
    grouped.remember("x", 9.0, now=T0 + 90)  # evicts the last pair
    assert client.zcard(key_name("gline", "cold")) == 66  # 33 pairs: one past the line
    gone = [grouped.get(f"{h}00", now=T0 + 92) for h in "ab"]
    assert gone == [None, None]  # the whole group, not one member
    with pytest.raises(NotFound):
        grouped.recall("b00", now=T0 + 93)
