"""The rules at their edges: time that runs backwards, floors, ties, policy
changes and lost keys (issue 13). Each test pins one rule docs/rules.md states;
expected values are worked out here from the rules, never by the code under
test.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import pytest
import redis

from memevict import (
    BadArgument,
    BadNow,
    BadPolicy,
    Evicted,
    Item,
    MemoryStore,
    NotFound,
    Policy,
    PolicyMismatch,
    ReplyNotKept,
    UnsafeMaxmemoryPolicy,
    commands,
)
from memevict.scripts import key_name
from tests.conftest import StoreFactory, state_of
from tests.test_bad_input import ABOVE_RANGE

T0 = 1_700_000_000_000
S = 1000  # ms per second
H = 1800 * S  # the scenario half-life (half_life_s 1800), in ms


def recency(age_ms: float) -> float:
    return float(0.5 ** (age_ms / H))


# --- the namespace's time never runs backwards --------------------------------------------


def test_a_touch_from_the_past_does_not_move_the_last_access_back(
    make_store: StoreFactory,
) -> None:
    store = make_store(protect_s=0)
    store.remember("a", 4.0, now=T0)
    store.touch("a", now=T0 + H)
    store.touch("a", now=T0)  # a worker whose clock is an hour behind
    m = store.get("a", now=T0 + 2 * H)
    assert m is not None
    assert m.last_access == T0 + H
    # one half-life since the last access, not two
    assert 4.0 * recency(H) <= m.score < 4.0 * recency(H) + 0.001


def test_a_remember_from_the_past_does_not_shorten_protection(make_store: StoreFactory) -> None:
    store = make_store(max_hot=1, protect_s=30)
    store.remember("a", 1.0, now=T0 + 10 * S)  # protected until T0 + 40 s
    store.remember("a", 1.0, now=T0)  # from the past: read as T0 + 10 s
    m = store.get("a")
    assert m is not None and m.protected_until == T0 + 40 * S
    # the protection get reports holds: a at T0 + 35 s is not evictable
    r = store.remember("b", 9.0, now=T0 + 35 * S)
    assert r.evicted == ()
    assert store.get("a", now=T0 + 35 * S).tier == "hot"  # type: ignore[union-attr]


def test_reads_from_the_past_agree_with_each_other_and_with_eviction(
    make_store: StoreFactory,
) -> None:
    store = make_store(protect_s=0, max_hot=10)
    store.remember("old", 6.0, now=T0)  # 6 x 1/4 = 1.5 at T0 + 2H
    store.remember("new", 2.0, now=T0 + 2 * H)  # 2 at T0 + 2H
    # At T0, before "new" was remembered, a now-aware reader would rank
    # "new" by a recency above 1; the namespace's time is T0 + 2H for every call.
    one = store.top(1, now=T0)
    two = store.top(2, now=T0)
    assert [m.id for m in two] == ["new", "old"]
    assert [m.id for m in one] == ["new"]
    assert two[0].score > two[1].score
    assert 1.5 <= two[1].score < 1.5 + 0.001
    got = {m.id: m.score for m in two}
    for m in two:
        read = store.get(m.id, now=T0)
        assert read is not None and read.score == got[m.id]
    # set_policy at T0 evicts the one that top and get rank lowest: "old"
    store.set_policy(dataclasses.replace(store.policy, max_hot=1), now=T0)
    assert store.get("old").tier == "cold"  # type: ignore[union-attr]
    assert store.get("new").tier == "hot"  # type: ignore[union-attr]


# --- no score rises without an access; order and reported scores agree -----------------


def test_a_whitelist_the_cap_undoes_keeps_the_decay_it_took(make_store: StoreFactory) -> None:
    store = make_store(protect_s=0, whitelist_cap=0, score_min=0)
    store.remember("a", 10.0, now=T0)
    store.decay(0.01)  # 10 -> 0.1
    r = store.whitelist("a", now=T0)
    assert r.demoted == ("a",)
    assert 0.1 <= r.score < 0.1 + 0.001  # not 10: whitelisting is not an access
    m = store.get("a", now=T0 + H)
    assert m is not None and 0.05 <= m.score < 0.05 + 0.001


def test_a_demoted_memory_resumes_the_decay_it_took_before_it_was_whitelisted(
    make_store: StoreFactory,
) -> None:
    store = make_store(protect_s=0, whitelist_cap=1, score_min=0)
    store.remember("a", 10.0, now=T0)
    store.decay(0.1)  # 10 -> 1
    store.whitelist("a", now=T0)
    store.decay(0.1)  # does not touch a whitelisted memory
    r = store.demote("a", now=T0 + H)
    assert 0.5 <= r.score < 0.5 + 0.001  # 10 x 0.1 x recency(H)


def test_eviction_keeps_the_decay_a_memory_took(make_store: StoreFactory) -> None:
    store = make_store(protect_s=0, max_hot=1, score_min=0)
    store.remember("a", 10.0, now=T0)
    store.decay(0.001)  # 10 -> 0.01
    r = store.remember("b", 1.0, now=T0)
    assert r.evicted == ("a",)
    cold = store.get("a", now=T0)
    assert cold is not None and cold.tier == "cold"
    assert 0.01 <= cold.score < 0.01 + 0.001  # not 10
    later = store.get("a", now=T0 + H)
    assert later is not None and 0.005 <= later.score < 0.005 + 0.001


def test_top_order_agrees_with_the_reported_scores_around_the_floor(
    make_store: StoreFactory,
) -> None:
    store = make_store(protect_s=0, score_min=0.1, whitelist_boost=1)
    store.remember("wl", 0.05, whitelist=True, now=T0)  # reports 0.05: no floor
    store.remember("floored", 0.01, now=T0)  # reports the floor, 0.1
    store.remember("real", 0.2, now=T0)  # 0.2
    top = store.top(3, now=T0)
    assert [m.id for m in top] == ["real", "floored", "wl"]
    assert top[1].score == 0.1
    assert [m.score for m in top] == sorted((m.score for m in top), reverse=True)
    assert [m.id for m in store.top(2, now=T0)] == ["real", "floored"]


def test_memories_evicted_together_leave_the_cold_tier_lowest_score_first(
    make_store: StoreFactory,
) -> None:
    store = make_store(protect_s=0, max_hot=3, cold_max=2)
    store.remember("a", 9.0, now=T0)
    store.remember("b", 1.0, now=T0)
    store.remember("c", 5.0, now=T0)
    batch = store.remember_many([("x", 20.0), ("y", 20.0), ("z", 20.0)], now=T0)
    assert batch.evicted == ("b", "c", "a")  # lowest first
    # the cold tier holds 2: the importance-1 memory goes for good, not the 9
    assert store.get("b") is None
    assert store.get("a").tier == "cold"  # type: ignore[union-attr]
    assert store.get("c").tier == "cold"  # type: ignore[union-attr]
    # and the next eviction at the same ms drops the lowest of those two next
    store.remember("w", 30.0, now=T0)
    assert store.get("c") is None and store.get("a") is not None


# --- every accepted value gives finite, correct arithmetic ---------------------------------


def test_policy_values_above_their_range_are_refused() -> None:
    for field, value in ABOVE_RANGE.items():
        with pytest.raises(BadPolicy, match=field):
            Policy(**{field: value})  # type: ignore[arg-type]
    for tiny in (1e-310, 1e-300, 0.0009):
        with pytest.raises(BadPolicy, match="half_life_s"):
            Policy(half_life_s=tiny)


def test_the_extremes_of_every_range_give_finite_scores(make_store: StoreFactory) -> None:
    store = make_store(
        half_life_s=0.001,
        whitelist_boost=1e6,
        whitelist_cap=200,
        protect_s=1e9,
        score_min=0,
        jitter=1,
        retry_window_s=86400,
        max_hot=2,
    )
    top = store.remember("top", 1e12, whitelist=True, now=T0)
    assert top.score == pytest.approx(1e18)
    tiny = store.remember("tiny", 5e-324, now=T0)
    assert math.isfinite(tiny.score) and 0 < tiny.score <= 1  # importance + jitter
    old = store.get("tiny", now=T0 + 10**9 * S)  # a million half-lives of 1 ms later
    assert old is not None and old.score == 0.0  # underflows to 0, never NaN
    assert old.protected_until == T0 + 10**9 * S
    for m in store.top(10, now=T0 + 10**9 * S):
        assert math.isfinite(m.score)


def test_a_now_in_seconds_is_refused_with_a_hint(make_store: StoreFactory) -> None:
    store = make_store()
    with pytest.raises(BadNow, match="seconds"):
        store.remember("a", 1.0, now=T0 // 1000)
    assert store.stats().hot == 0


# --- bounded work per call: the backlog drains over the following calls ---------------------

WORK = 200  # memories one call moves at most (lua/lib/memory.lua)


def drain(store: MemoryStore, now: int) -> list[Evicted]:
    """evict() until no backlog is left; every call's work stays bounded."""
    calls = []
    while True:
        e = store.evict(now=now)
        calls.append(e)
        assert len(e.evicted) <= WORK
        if e.backlog == 0:
            return calls
        assert len(calls) < 1000


def burst(store: MemoryStore, n: int, now: int) -> dict[str, float]:
    """n memories remembered at now in batches, with distinct importances."""
    importances = {f"m{i}": float(1 + (i * 37) % n) for i in range(n)}
    ids = list(importances)
    for i in range(0, n, 100):
        store.remember_many([(m, importances[m]) for m in ids[i : i + 100]], now=now)
    return importances


def test_a_burst_whose_protection_runs_out_at_once_drains_in_bounded_steps(
    make_store: StoreFactory,
) -> None:
    store = make_store(max_hot=10, protect_s=30, cold_max=100_000)
    importances = burst(store, 1000, T0)
    assert store.stats(now=T0).over == 990  # all protected: nothing evictable
    later = T0 + 31 * S
    r = store.remember("new", 1.0, now=later)
    # 1000 protections ran out at once: this call handles WORK of them and
    # evicts nothing yet (the lowest evictable may be among the rest)
    assert r.evicted == () and r.over == 991
    stats = store.stats(now=later)
    assert stats.backlog > 0 and stats.over == 991
    calls = drain(store, later)
    assert len(calls) >= 1000 // WORK
    # the end is what one unbounded call would have left: "new" (protected)
    # and the 9 highest of the burst
    highest = sorted(importances, key=lambda m: -importances[m])[:9]
    assert {m.id for m in store.top(20, now=later)} == {"new", *highest}
    assert store.stats(now=later).backlog == 0


def test_a_lower_max_hot_on_a_big_store_evicts_in_bounded_steps(make_store: StoreFactory) -> None:
    store = make_store(max_hot=2000, protect_s=0, cold_max=100_000)
    importances = burst(store, 1000, T0)
    store.set_policy(dataclasses.replace(store.policy, max_hot=10), now=T0)
    stats = store.stats(now=T0)
    assert stats.hot == 1000 - WORK and stats.backlog == stats.over == 1000 - WORK - 10
    drain(store, T0)
    top = sorted(importances, key=lambda m: -importances[m])[:10]
    assert {m.id for m in store.top(20, now=T0)} == set(top)


def test_a_lower_cold_max_holds_at_once_for_every_reader(make_store: StoreFactory) -> None:
    store = make_store(max_hot=1, protect_s=0, cold_max=100_000)
    for i in range(0, 600, 100):
        store.remember_many(
            [(f"c{k}", 1.0) for k in range(i, i + 100)], now=T0 + i * S
        )  # c0..c599, evicted oldest batch first
    assert store.stats(now=T0 + 600 * S).cold == 599
    store.set_policy(dataclasses.replace(store.policy, cold_max=10), now=T0 + 600 * S)
    stats = store.stats(now=T0 + 600 * S)
    assert stats.cold == 10 and stats.backlog == 599 - WORK - 10
    # the ten most recently evicted are there; every other one is gone for get,
    # recall, whitelist, demote and forget, though not yet deleted
    held = [store.get(f"c{k}") for k in range(600)]
    cold = [m.id for m in held if m is not None and m.tier == "cold"]
    assert len(cold) == 10
    gone = "c300"
    assert gone not in cold and store.get(gone) is None
    for method in (store.recall, store.whitelist, store.demote):
        with pytest.raises(NotFound):
            method(gone)
    with pytest.raises(NotFound):
        store.forget(gone)
    # remembered again, it is a new memory: new creation time, no old text
    r = store.remember("c301", 2.0, now=T0 + 601 * S)
    assert r.score >= 2.0
    m = store.get("c301")
    assert m is not None and m.created == T0 + 601 * S and m.text is None
    drain(store, T0 + 601 * S)
    assert store.stats().backlog == 0


def test_a_lower_whitelist_cap_demotes_in_bounded_steps(make_store: StoreFactory) -> None:
    store = make_store(max_hot=1000, protect_s=0, whitelist_cap=100)
    for i in range(0, 100, 50):
        store.remember_many(
            [Item(f"w{k}", 1.0 + k, whitelist=True) for k in range(i, i + 50)], now=T0
        )
    store.set_policy(dataclasses.replace(store.policy, whitelist_cap=0), now=T0)
    assert 0 < store.stats(now=T0).whitelisted < 100
    calls = drain(store, T0)
    assert all(len(e.demoted) <= 16 for e in calls)
    assert store.stats(now=T0).whitelisted == 0


# --- receipts are bounded ------------------------------------------------------------------


def test_a_receipt_keeps_at_most_16_kb_and_a_resent_call_is_still_applied_once(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    store = make_store(max_hot=1, protect_s=0)
    items = [(f"{i:04d}" + "x" * 1020, 1.0 + i) for i in range(100)]  # 1 KB ids
    call = commands.remember_many(items, now=T0)
    batch = store._run(call)
    assert len(batch.evicted) == 99  # a reply of about 100 KB
    receipt = key_name(store.namespace, f"call:{call.call}")
    assert client.get(receipt) == b""  # not kept
    assert 0 < client.pttl(receipt) <= 60_000
    before = store.stats(now=T0)
    with pytest.raises(ReplyNotKept):
        store._run(call)  # the same call again: refused, not applied twice
    assert store.stats(now=T0) == before
    # a small reply is kept and returned again
    small = commands.remember("a", 2.0, text=None, whitelist=False, now=T0)
    assert store._run(small) == store._run(small)


# --- a lost key never leaves a namespace unusable ---------------------------------------------

ROLES = ("policy", "state", "meta", "text", "hot", "fresh", "prot", "wl", "cold", "log")


def a_namespace_in_every_state(store: MemoryStore) -> None:
    """Hot, protected, whitelisted and cold memories, with texts and decay ticks."""
    store.remember("old", 2.0, text="o", now=T0)
    store.remember("wl", 3.0, whitelist=True, text="w", now=T0)
    store.decay(0.5)
    for i in range(6):
        store.remember(f"m{i}", 1.0 + i, text=f"t{i}", now=T0 + 60 * S + i)


@pytest.mark.parametrize("role", ROLES)
def test_every_call_works_after_losing_any_one_key(
    make_store: StoreFactory, client: redis.Redis, role: str
) -> None:
    store = make_store(max_hot=5, protect_s=30, whitelist_cap=2, log_max=100)
    a_namespace_in_every_state(store)
    client.delete(key_name(store.namespace, role))
    lost_log = role == "log"
    later = T0 + 200 * S
    for i in range(8):  # evicts, expires protection, trims
        store.remember(f"n{i}", 5.0 + i, now=later + i)
    store.whitelist("n7", now=later + 10)
    store.demote("n7", now=later + 11)
    store.touch("n6", now=later + 12)
    store.evict(now=later + 13)
    stats = store.stats(now=later + 13)
    listed = len(store.top(200, now=later + 13))
    # index entries whose metadata was lost are counted until a call meets them
    assert (
        listed == stats.hot if role in ("policy", "state", "text", "cold") else listed <= stats.hot
    )
    assert store.get("n6", now=later + 13) is not None
    for m in store.top(200, now=later + 13):
        assert math.isfinite(m.score) and m.score > 0
    cold = [m for m in (store.get(f"m{i}") for i in range(6)) if m and m.tier == "cold"]
    for m in cold:
        assert store.recall(m.id, now=later + 20).score > 0
    # a store opened afresh on the namespace works too
    assert MemoryStore(client, store.namespace).get("n6") is not None
    # the log goes on (what it held before is gone with it)
    log = store.evictions(count=200)
    assert log and all(e.at >= later for e in log) == lost_log


def test_a_lost_state_is_rebuilt_from_the_newest_memory(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    store = make_store(max_hot=100, protect_s=30, score_min=0)
    a_namespace_in_every_state(store)
    before = {m.id: m.score for m in store.top(200, now=T0 + 120 * S)}
    client.delete(key_name(store.namespace, "state"))
    after = {m.id: m.score for m in store.top(200, now=T0 + 120 * S)}
    # every score, and so every order, as before: nothing decayed since the
    # newest memory was placed (ticks taken after it would be forgotten)
    assert after.keys() == before.keys()
    for id, score in before.items():
        assert after[id] == pytest.approx(score, rel=1e-9), id


def test_a_store_warns_when_the_server_may_evict_its_keys(client: redis.Redis) -> None:
    saved = client.config_get("maxmemory-policy")["maxmemory-policy"]
    try:
        client.config_set("maxmemory-policy", "allkeys-lru")
        with pytest.warns(UnsafeMaxmemoryPolicy, match="allkeys-lru"):
            MemoryStore(client, "warned")
        for safe in ("noeviction", "volatile-lru"):
            client.config_set("maxmemory-policy", safe)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                MemoryStore(client, "warned")
    finally:
        client.config_set("maxmemory-policy", saved)


# --- operators and workers share one policy ---------------------------------------------------


def test_fields_change_atomically_without_losing_another_change(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    worker = make_store(max_hot=10)
    operator = MemoryStore(client, worker.namespace)  # adopts the stored policy
    operator.set_policy(half_life_s=60.0)
    # the worker's snapshot is stale; changing one field keeps the operator's
    changed = worker.set_policy(max_hot=7)
    assert (changed.max_hot, changed.half_life_s) == (7, 60.0)
    assert worker.policy == changed
    assert operator.policy.max_hot == 10  # a snapshot ...
    assert operator.reload_policy() == changed  # ... read again on demand
    assert operator.policy == changed


def test_a_worker_restarted_with_an_old_policy_can_adopt_the_stored_one(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    started_with = Policy(max_hot=10)
    store = MemoryStore(client, "shared", started_with)
    store.set_policy(max_hot=20)  # an operator's change
    with pytest.raises(PolicyMismatch, match="adopt_policy"):
        MemoryStore(client, "shared", started_with)
    restarted = MemoryStore(client, "shared", started_with, adopt_policy=True)
    assert restarted.policy.max_hot == 20
    # on a new namespace the policy it brings is the one stored
    assert MemoryStore(client, "new", started_with, adopt_policy=True).policy == started_with


def test_bad_field_changes_write_nothing(make_store: StoreFactory, client: redis.Redis) -> None:
    store = make_store(max_hot=10)
    before = store.reload_policy()
    with pytest.raises(BadPolicy):
        store.set_policy(max_hot=0)
    with pytest.raises(BadPolicy):
        store.set_policy(max_hot_typo=3)
    with pytest.raises(BadArgument):
        store.set_policy(before, max_hot=3)
    with pytest.raises(BadPolicy):
        store.set_policy()
    assert store.reload_policy() == before


# --- where ties are exact (docs/rules.md: Ranges) -----------------------------------------

# Memories of importance I last used at the same G (the same ms on the wall clock)
# are told apart by jitter alone; their keys stay distinct while
#   |K| < 2^52 x jitter / (6 x N x (I + jitter)),
# K = ln I + (half-lives since the namespace began) x ln 2 + the decay ticks' -ln(rate).


def distinct_keys_at(make_store: StoreFactory, client: redis.Redis, age_s: float) -> int:
    store = make_store(half_life_s=60, jitter=0.001, max_hot=1000, protect_s=0)
    epoch = int(state_of(client, store.namespace)["epoch"])
    at = epoch + int(age_s * S)
    for i in range(0, 200, 100):
        store.remember_many([(f"m{k}", 1e5) for k in range(i, i + 100)], now=at)
    keys = client.zrange(key_name(store.namespace, "hot"), 0, -1, withscores=True)
    return len({score for _, score in keys})


def bound_of_k(importance: float, jitter: float, n: int) -> float:
    return float(2**52 * jitter / (6 * n * (importance + jitter)))


def test_ties_are_exact_inside_the_stated_range(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    # importance 1e5, 200 memories: |K| < 3.75e4, about 37 days at a 60 s half-life
    limit = bound_of_k(1e5, 0.001, 200)
    age_s = limit / 4 / math.log(2) * 60  # a quarter of the way: about 9 days
    assert distinct_keys_at(make_store, client, age_s) == 200


def test_keys_are_rebased_so_ties_stay_exact_however_old_the_namespace(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    # ten years at a 60 s half-life: G alone is 100x the bound, but the keys
    # are kept near zero (the hot tier fits in one call's work), so no offset
    # collides; before rebasing 22 of 200 were distinct
    assert distinct_keys_at(make_store, client, 10 * 365 * 86400) == 200


def test_rebasing_changes_no_score_and_no_order(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    store = make_store(half_life_s=60, protect_s=0, whitelist_cap=5, score_min=0)
    epoch = int(state_of(client, store.namespace)["epoch"])
    store.remember("w", 3.0, whitelist=True, now=epoch)
    for i in range(5):
        store.remember(f"m{i}", 1.0 + i, now=epoch + i * 60 * S)
    store.decay(0.5)
    later = epoch + 365 * 86400 * S  # G has moved by half a million: past REBASE
    before = [(m.id, m.score) for m in store.top(10, now=later)]
    d0 = state_of(client, store.namespace)["decay"]
    store.evict(now=later)  # a write: rebases
    assert abs(state_of(client, store.namespace)["decay"] - d0) > 4096
    assert state_of(client, store.namespace)["wbase"] != 0
    after = [(m.id, m.score) for m in store.top(10, now=later)]
    assert [i for i, _ in after] == [i for i, _ in before]
    for (_, a), (_, b) in zip(after, before, strict=True):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-300)
    # and a memory used now gets a small key again (old ones keep keys as low
    # as their age: their scores are far below any tie that matters)
    store.remember("new", 2.0, now=later)
    store.remember("w2", 2.0, whitelist=True, now=later)
    for role, id in (("hot", "new"), ("wl", "w2")):
        key = client.zscore(key_name(store.namespace, role), id)
        assert key is not None and abs(key) < 4096 + 20, (role, key)
