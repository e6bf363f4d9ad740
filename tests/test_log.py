"""The eviction log (issue 42): every memory that leaves a tier is one entry of the
namespace's stream, written by the call that moved it (lib/memory.lua, log_left), read
with ``MemoryStore.evictions``. Checked here for each reason, and over random call
sequences against the calls' own replies and the store before and after each call, on
both servers."""

from __future__ import annotations

import asyncio
import math
import random

import pytest
import redis
import redis.asyncio

from memevict import AsyncMemoryStore, Item, MemoryStore, Policy
from memevict.errors import MemevictError, NotFound
from memevict.log import MOVES
from memevict.results import Eviction
from memevict.scripts import key_name
from tests.servers import Server

T0 = 1_700_000_000_000
S = 1000  # a second, in ms


def logged(store: MemoryStore, since: str | None = None) -> list[Eviction]:
    """Every entry of the log after ``since`` (all of it without), oldest first."""
    found: list[Eviction] = []
    page = store.evictions(since=since, count=200) if since else store.evictions(count=200)
    if since is None and len(page) == 200:
        raise AssertionError("the test's log outgrew one page")
    while page:
        found += page
        if since is None:
            break
        page = store.evictions(since=found[-1].log_id, count=200)
    return found


def test_no_log_by_default(client: redis.Redis) -> None:
    store = MemoryStore(client, "off", Policy(max_hot=2, protect_s=0, protect_memories=0))
    for n in range(5):
        assert store.remember(f"m{n}", 1.0, now=T0 + n).evicted or n < 2
    assert store.evictions() == []
    assert not client.exists(key_name("off", "log"))


def test_each_reason_and_what_it_records(client: redis.Redis) -> None:
    policy = Policy(
        max_hot=3, protect_s=0, protect_memories=0, clock="wall", whitelist_cap=1, cold_max=1,
        log_max=100,
    )  # fmt: skip
    store = MemoryStore(client, "why", policy)
    for n, imp in enumerate([5.0, 1.0, 3.0]):
        store.remember(f"m{n}", imp, text=f"text {n}", now=T0)
    # max_hot: the lowest goes cold, with its score at the call's now (wall clock: the
    # score get reports at that now before the call).
    before = store.get("m1", now=T0 + 60 * S)
    assert before is not None
    assert store.remember("m3", 4.0, now=T0 + 60 * S).evicted == ("m1",)
    [e] = store.evictions()
    assert (e.id, e.reason, e.from_tier, e.to_tier, e.group) == ("m1", "max_hot", "hot", "cold", "")
    assert e.importance == 1.0 and e.at == T0 + 60 * S
    assert math.isclose(e.score, before.score, rel_tol=1e-12)
    # cold_max 1: the next eviction pushes m1 past the line, and it is dropped for good
    # (in batches: cold_max 1 drops at 2 past it; so two more evictions).
    store.remember("m4", 9.0, now=T0 + 61 * S)
    store.remember("m5", 9.0, now=T0 + 62 * S)
    reasons = [(x.id, x.reason, x.to_tier) for x in store.evictions()]
    assert ("m1", "cold_max", "deleted") in reasons
    assert store.get("m1") is None
    # whitelist_cap: a second whitelisted memory demotes the lower one; demote: by hand.
    store.whitelist("m4", now=T0 + 63 * S)
    mark = store.evictions()[-1].log_id
    demoted = store.whitelist("m5", now=T0 + 64 * S).demoted
    new = logged(store, mark)
    assert [(x.id, x.reason, x.from_tier, x.to_tier) for x in new] == [
        (d, "whitelist_cap", "whitelist", "hot") for d in demoted
    ]
    assert new[0].score == pytest.approx(new[0].importance * policy.whitelist_boost, rel=1e-3)
    mark = new[-1].log_id
    store.demote("m5", now=T0 + 65 * S)
    assert [(x.id, x.reason) for x in logged(store, mark)] == [("m5", "demote")]
    # forget, from each tier: the field from says which.
    store.whitelist("m5", now=T0 + 66 * S)
    cold = [m.id for m in store.scan("cold").memories]
    mark = store.evictions()[-1].log_id
    store.forget("m5")
    store.forget(cold[0])
    assert [(x.id, x.reason, x.from_tier, x.to_tier) for x in logged(store, mark)] == [
        ("m5", "forget", "whitelist", "deleted"),
        (cold[0], "forget", "cold", "deleted"),
    ]


def test_max_tokens_evict_batch_and_groups(client: redis.Redis) -> None:
    policy = Policy(
        max_hot=100, max_tokens=100, evict_batch=1, protect_s=0, protect_memories=0,
        log_max=100,
    )  # fmt: skip
    store = MemoryStore(client, "tok", policy)
    store.remember_many(
        [Item("a", 1.0, tokens=30, group="g"), Item("b", 1.0, tokens=30, group="g")], now=T0
    )
    store.remember("c", 5.0, tokens=30, now=T0)
    batch = store.remember_many([Item("d", 6.0, tokens=30)], now=T0 + 1)
    # Over by 20 tokens: the group (the lowest unit) goes whole for max_tokens; then
    # evict_batch's one extra (c: the lowest left) once the budget holds.
    log = store.evictions()
    assert [e.id for e in log] == list(batch.evicted)
    assert sorted((e.id, e.reason, e.group) for e in log) == [
        ("a", "max_tokens", "g"),
        ("b", "max_tokens", "g"),
        ("c", "evict_batch", ""),
    ]
    assert log[-1].id == "c"  # (the group first: it left whole, then the extra one)


def test_the_log_keeps_the_newest_log_max_entries(client: redis.Redis) -> None:
    store = MemoryStore(
        client, "cap", Policy(max_hot=1, protect_s=0, protect_memories=0, log_max=5)
    )
    evicted = []
    for n in range(400):
        evicted += store.remember(f"m{n}", 1.0 + n % 7, now=T0 + n).evicted
    assert client.xlen(key_name("cap", "log")) == 5  # (exactly: MAXLEN 5)
    kept = [e.id for e in store.evictions(count=200) if e.reason == "max_hot"]
    assert kept == evicted[-len(kept) :] and len(kept) >= 5
    # A lowered log_max trims at once (exactly); 0 deletes the log.
    store.set_policy(log_max=2)
    assert [e.id for e in store.evictions()] == [e.id for e in logged(store)][-2:]
    assert client.xlen(key_name("cap", "log")) == 2
    store.set_policy(log_max=0)
    assert not client.exists(key_name("cap", "log"))
    store.remember("x", 9.0, now=T0 + 500)
    assert store.evictions() == []


def test_paging_with_since(client: redis.Redis) -> None:
    store = MemoryStore(
        client, "page", Policy(max_hot=1, protect_s=0, protect_memories=0, log_max=100)
    )
    for n in range(30):
        store.remember(f"m{n}", 1.0, now=T0 + n)
    every = store.evictions(count=200)
    assert len(every) == 29
    assert store.evictions(count=3) == every[-3:]
    pages = []
    since = None
    while True:
        page = store.evictions(since=since, count=7) if since else store.evictions(count=7)[:0]
        if since is None:
            since, page = every[0].log_id, [every[0]]
        elif not page:
            break
        pages += page
        since = page[-1].log_id
    assert pages == every


# --- random call sequences -------------------------------------------------------------

IDS = [f"k{n}" for n in range(14)]


def tiers(store: MemoryStore, now: int) -> dict[str, tuple[str, float, str | None]]:
    """Every known id of IDS: its tier, importance and group (get, at now)."""
    found = {}
    for memory_id in IDS:
        m = store.get(memory_id, now=now)
        if m is not None:
            found[memory_id] = (m.tier, m.importance, m.group)
    return found


def cold_tokens(store: MemoryStore, memory_id: str, now: int) -> int | None:
    """The tokens of a memory evicted by the last call (None if it is gone since)."""
    m = store.get(memory_id, now=now)
    return m.tokens if m is not None else None


@pytest.mark.parametrize("seed", [1, 2])
def test_the_log_holds_exactly_what_left(client: redis.Redis, seed: int) -> None:
    """Random calls on a small namespace (both budgets, groups, whitelist, forget,
    recall, evict, policy changes): after each, the entries it added are its reply's
    evicted ids (hot to cold) and demoted ids (whitelist to hot), in order; a deleted
    entry for every memory that was known and is gone; nothing else."""
    rng = random.Random(seed)
    policy = Policy(
        max_hot=6, max_tokens=60, evict_batch=1, protect_s=0, protect_memories=0,
        whitelist_cap=2, cold_max=3, log_max=50,
    )  # fmt: skip
    store = MemoryStore(client, f"prop{seed}", policy)
    now, mark, max_hot, total = T0, None, policy.max_hot, 0
    for step in range(250):
        now += rng.choice([1, 1000, 60_000])
        before = tiers(store, now)
        kind = rng.choice(
            ["remember"] * 4
            + ["many", "whitelist", "demote", "forget", "recall", "evict", "policy"]
        )
        target = rng.choice(IDS)
        evicted: tuple[str, ...] = ()
        demoted: tuple[str, ...] = ()
        forgotten: set[str] = set()
        remembered: set[str] = set()
        try:
            if kind == "remember":
                group = rng.choice([None, None, "g1", "g2"])
                r = store.remember(
                    target,
                    rng.uniform(0.5, 9),
                    tokens=rng.randint(1, 20),
                    whitelist=rng.random() < 0.15,
                    group=group,
                    now=now,
                )
                evicted, demoted, remembered = r.evicted, r.demoted, {target}
            elif kind == "many":
                items = [
                    Item(rng.choice(IDS), rng.uniform(0.5, 9), tokens=rng.randint(1, 20))
                    for _ in range(rng.randint(1, 4))
                ]
                b = store.remember_many(items, now=now)
                evicted, demoted = b.evicted, b.demoted
                remembered = {i.id for i in items}
            elif kind == "whitelist":
                r = store.whitelist(target, now=now)
                evicted, demoted = r.evicted, r.demoted
            elif kind == "demote":
                r = store.demote(target, now=now)
                evicted, demoted = r.evicted, r.demoted
            elif kind == "recall":
                r = store.recall(target, now=now)
                evicted, demoted = r.evicted, r.demoted
            elif kind == "evict":
                e = store.evict(now=now)
                evicted, demoted = e.evicted, e.demoted
            elif kind == "forget":
                group = before[target][2] if target in before else None
                forgotten = {i for i in before if group and before[i][2] == group} | {target}
                store.forget(target)
            else:
                max_hot = rng.randint(3, 8)
                store.set_policy(max_hot=max_hot, cold_max=rng.randint(0, 4), now=now)
        except NotFound:
            pass
        except MemevictError as error:  # (a full group, a budget: nothing was written)
            assert type(error).__name__ in ("GroupFull", "OverBudget"), error
        new = logged(store, mark) if mark else logged(store)
        if new:
            mark = new[-1].log_id
        after = tiers(store, now)
        what = (step, kind, target, new)
        assert all((e.reason in MOVES and e.at == now) or kind == "forget" for e in new), what
        to_cold = [e.id for e in new if e.to_tier == "cold"]
        if kind == "policy":  # (configure's reply says nothing of what it moved)
            moved = {
                i for i in before if before[i][0] == "hot" and after.get(i, ("",))[0] == "cold"
            }
            assert moved <= set(to_cold), what
            assert all(
                before[i][0] == "hot" and after.get(i, ("cold",))[0] == "cold" for i in to_cold
            ), what
        else:
            assert to_cold == list(evicted), what
        # Each eviction's reason, from the hot tier as the call left it: at the i-th of
        # n, it held the memories and tokens of those still to go besides (a group is
        # one unit: its reason is its first member's).
        left = store.stats(now=now)
        leaving = [e for e in new if e.to_tier == "cold"]
        tokens = [cold_tokens(store, e.id, now) for e in leaving]
        known = None not in tokens  # (one evicted and dropped at once: its tokens are gone)
        for i, e in enumerate(leaving):
            first = i
            while e.group and first > 0 and leaving[first - 1].group == e.group:
                first -= 1
            size = left.hot + len(leaving) - first
            if size > max_hot:
                assert e.reason == "max_hot", (what, i, size)
            elif known:
                held = left.tokens + sum(t or 0 for t in tokens[first:])
                over = "max_tokens" if held > 60 else "evict_batch"
                assert e.reason == over, (what, i, size, held)
        assert [e.id for e in new if e.to_tier == "hot"] == list(demoted), what
        for e in new:
            if e.to_tier == "hot":
                want = "demote" if kind == "demote" and e.id == target else "whitelist_cap"
                assert e.reason == want and e.from_tier == "whitelist", what
        deleted = [e for e in new if e.to_tier == "deleted"]
        gone = {i for i in before if i not in after}
        assert gone <= {e.id for e in deleted}, what
        for e in deleted:
            assert e.reason == ("forget" if e.id in forgotten else "cold_max"), what
            assert e.id not in after or e.id in remembered, what
        for e in new:
            assert math.isfinite(e.score) and e.score > 0, what
            if e.id in before and e.reason != "forget":
                assert e.importance == before[e.id][1] or e.id in remembered, what
        total += len(new)
        assert client.xlen(key_name(f"prop{seed}", "log")) == min(total, policy.log_max)


def test_the_async_store_reads_the_same_log(client: redis.Redis, server: Server) -> None:
    store = MemoryStore(
        client, "async-log", Policy(max_hot=1, protect_s=0, protect_memories=0, log_max=10)
    )
    for n in range(6):
        store.remember(f"m{n}", 1.0, now=T0 + n)

    async def read() -> tuple[list[Eviction], list[Eviction]]:
        aclient = redis.asyncio.Redis(port=server.port)
        try:
            astore = AsyncMemoryStore(aclient, "async-log")
            newest = await astore.evictions(count=3)
            return newest, await astore.evictions(since=newest[0].log_id)
        finally:
            await aclient.aclose()

    newest, after = asyncio.run(read())
    assert newest == store.evictions(count=3) and after == newest[1:]
