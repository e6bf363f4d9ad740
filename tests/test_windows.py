"""Agent-shaped windows (issue 14): token budgets, linked memories (groups),
the chronological window, scan, drop and idle expiry. Expected values are
worked out here from the rules of docs/rules.md, never by the code under test.
"""

from __future__ import annotations

import itertools
import random
import time

import pytest
import redis

from memevict import (
    GroupFull,
    Item,
    Memory,
    MemoryStore,
    NamespaceLost,
    NoPolicy,
    NotFound,
    OverBudget,
)
from memevict.scripts import key_name, namespace_keys
from tests.conftest import StoreFactory, scenario_policy

T0 = 1_700_000_000_000
S = 1000


# ---------------------------------------------------------------------------
# Token budgets


def test_the_token_budget_evicts_the_lowest_until_it_holds(make_store: StoreFactory) -> None:
    store = make_store(max_hot=100, max_tokens=10, protect_s=0)
    store.remember("a", 1.0, tokens=4, now=T0)
    store.remember("b", 5.0, tokens=4, now=T0)
    r = store.remember("c", 3.0, tokens=4, now=T0)  # 12 > 10: the lowest, a, goes
    assert r.evicted == ("a",) and (r.over, r.over_tokens) == (0, 0)
    stats = store.stats(now=T0)
    assert (stats.hot, stats.tokens, stats.over_tokens, stats.backlog) == (2, 8, 0, 0)
    # a memory of 9 tokens needs both b and c gone (8 + 9 - 10 = 7 over)
    r = store.remember("d", 9.0, tokens=9, now=T0)
    assert sorted(r.evicted) == ["b", "c"] and store.stats(now=T0).tokens == 9


def test_a_changed_cost_counts_and_a_cold_memory_takes_none(make_store: StoreFactory) -> None:
    store = make_store(max_hot=1, protect_s=10)
    store.remember("a", 1.0, tokens=7, now=T0)
    store.remember("a", 1.0, tokens=3, now=T0)  # re-remembered at a new cost
    assert store.stats(now=T0).tokens == 3
    store.remember("b", 5.0, tokens=2, now=T0 + 20 * S)  # max_hot 1: a goes cold
    assert store.stats(now=T0 + 20 * S).tokens == 2
    store.recall("a", now=T0 + 40 * S)  # back (3) and protected: b goes cold
    assert store.stats(now=T0 + 40 * S).tokens == 3
    memory = store.get("a", now=T0 + 40 * S)
    assert memory is not None and (memory.tokens, memory.tier) == (3, "hot")
    store.forget("a")
    assert store.stats(now=T0 + 40 * S).tokens == 0


def test_a_memory_over_the_whole_budget_is_refused(
    client: redis.Redis, make_store: StoreFactory
) -> None:
    store = make_store(max_tokens=100)
    store.remember("a", 1.0, tokens=100, now=T0)  # exactly the budget: kept
    before = {k: client.dump(k) for k in client.keys("*") if b":call:" not in k}
    with pytest.raises(OverBudget):
        store.remember("b", 1.0, tokens=101, now=T0)
    with pytest.raises(OverBudget):
        store.remember_many([("c", 1.0), Item("d", 1.0, tokens=101)], now=T0)
    assert {k: client.dump(k) for k in client.keys("*") if b":call:" not in k} == before


def test_only_whitelisted_and_protected_left_reports_over_tokens(
    make_store: StoreFactory,
) -> None:
    store = make_store(max_tokens=10, protect_s=60)
    store.remember("a", 1.0, tokens=6, now=T0)
    r = store.remember("b", 2.0, tokens=6, now=T0)  # both protected
    assert r.evicted == () and r.over_tokens == 2
    assert store.stats(now=T0).over_tokens == 2
    # protection ends: the next call evicts the lower
    assert store.evict(now=T0 + 61 * S).evicted == ("a",)


def test_lowering_max_tokens_evicts_at_once(make_store: StoreFactory) -> None:
    store = make_store(protect_s=0)
    for i in range(5):
        store.remember(f"m{i}", 1.0 + i, tokens=10, now=T0)
    store.set_policy(max_tokens=25, now=T0)
    assert sorted(m.id for m in store.window(now=T0)) == ["m3", "m4"]
    assert store.stats(now=T0).tokens == 20


# ---------------------------------------------------------------------------
# Groups


def test_a_group_is_evicted_whole_at_the_rank_of_its_highest_member(
    make_store: StoreFactory,
) -> None:
    store = make_store(max_hot=3, protect_s=0)
    store.remember("call", 1.0, group="t1", now=T0)  # low alone...
    store.remember("output", 9.0, group="t1", now=T0)  # ...but its group ranks at 9
    store.remember("chat", 2.0, now=T0)
    r = store.remember("note", 3.0, now=T0)  # 4 > 3: the lowest unit is chat (2), not call
    assert r.evicted == ("chat",)
    r = store.remember("fact", 10.0, now=T0)  # units: note 3, t1 9, fact protected? no: 0 s
    assert r.evicted == ("note",)
    r = store.remember("fact2", 10.0, now=T0)  # now t1 (9) is the lowest: both members go
    assert sorted(r.evicted) == ["call", "output"]
    for x in ("call", "output"):
        memory = store.get(x, now=T0)
        assert memory is not None and (memory.tier, memory.group) == ("cold", "t1")


def test_a_group_with_a_protected_or_whitelisted_member_stays(make_store: StoreFactory) -> None:
    store = make_store(max_hot=2, protect_s=60)
    store.remember("call", 1.0, group="t1", now=T0)
    store.remember("output", 1.0, group="t1", now=T0 + 50 * S)  # protected till +110 s
    r = store.remember("x", 5.0, now=T0 + 100 * S)  # call's protection ran out, output's not
    assert r.evicted == () and r.over == 1
    store.whitelist("output", now=T0 + 105 * S)
    r = store.evict(now=T0 + 200 * S)  # whitelisted: still not evicted; x is the only unit
    assert r.evicted == ("x",)
    assert store.get("call", now=T0 + 200 * S).tier == "hot"  # type: ignore[union-attr]


def test_a_group_is_recalled_and_forgotten_whole(make_store: StoreFactory) -> None:
    store = make_store(max_hot=2, protect_s=10)
    store.remember("q", 1.0, group="qa", now=T0)
    store.remember("a", 1.0, group="qa", now=T0)
    store.remember("x", 5.0, now=T0 + 20 * S)  # 3 > 2: the group goes
    assert store.stats(now=T0 + 20 * S).cold == 2
    store.recall("a", now=T0 + 40 * S)  # brings q back too, protected: x goes cold
    assert {m.id for m in store.window(now=T0 + 40 * S)} == {"q", "a"}
    store.remember("y", 9.0, now=T0 + 60 * S)
    store.remember("z", 9.5, now=T0 + 60 * S)  # the group goes again
    assert store.get("q", now=T0 + 60 * S).tier == "cold"  # type: ignore[union-attr]
    # a new member of a cold group brings the group back (y and z go)
    store.remember("a2", 1.0, group="qa", now=T0 + 70 * S)
    assert {m.id for m in store.window(now=T0 + 70 * S)} == {"q", "a", "a2"}
    store.forget("q")
    for x in ("q", "a", "a2"):
        assert store.get(x, now=T0 + 70 * S) is None
    with pytest.raises(NotFound):
        store.forget("a")


def test_a_group_holds_at_most_100(client: redis.Redis, make_store: StoreFactory) -> None:
    store = make_store(max_hot=1000)
    store.remember_many([Item(f"m{i}", 1.0, group="big") for i in range(100)], now=T0)
    before = {k: client.dump(k) for k in client.keys("*") if b":call:" not in k}
    with pytest.raises(GroupFull):
        store.remember("m100", 1.0, group="big", now=T0)
    with pytest.raises(GroupFull):
        store.remember_many([("x", 1.0), Item("m101", 1.0, group="big")], now=T0)
    assert {k: client.dump(k) for k in client.keys("*") if b":call:" not in k} == before
    store.remember("m0", 2.0, group="big", now=T0)  # a member again: no new member


def test_moving_a_memory_to_another_group(make_store: StoreFactory) -> None:
    store = make_store(max_hot=2, protect_s=0)
    store.remember("a", 1.0, group="g1", now=T0)
    store.remember("b", 1.0, group="g1", now=T0)
    store.remember("b", 8.0, group="g2", now=T0)  # b leaves g1
    r = store.remember("c", 5.0, now=T0)  # 3 > 2: g1 (a alone, 1) is the lowest unit
    assert r.evicted == ("a",)
    b = store.get("b", now=T0)
    assert b is not None and (b.group, b.tier) == ("g2", "hot")


# ---------------------------------------------------------------------------
# The window


def test_the_window_is_in_time_order_and_takes_the_best_that_fit(
    make_store: StoreFactory,
) -> None:
    store = make_store(protect_s=0)
    store.remember("sys", 10.0, text="system", tokens=5, whitelist=True, now=T0)
    store.remember("big", 9.0, text="big", tokens=50, now=T0)
    store.remember("low", 1.0, text="low", tokens=5, now=T0)
    store.remember("mid", 5.0, text="mid", tokens=5, now=T0)
    window = store.window(tokens=12, now=T0)
    # by score: sys (100) 5, big 50 does not fit: skipped, mid 5 fits, low 5 does not
    assert [m.id for m in window] == ["sys", "mid"]  # first remembered first
    assert window.tokens == 10 and window.left == 2
    assert [m.text for m in window] == ["system", "mid"]
    whole = store.window(now=T0)
    assert [m.id for m in whole] == ["sys", "big", "low", "mid"] and whole.tokens == 65


def test_a_budgeted_window_fills_its_budget_past_400_memories(
    make_store: StoreFactory,
) -> None:
    """No count of memories cuts a window with a budget: 600 memories of 2 tokens fit in
    1,300 tokens, so all of them are sent; at 1,000 tokens, the best 500 (one of each pair
    of groups too, whole). Without a budget the window still stops at 400."""
    store = make_store(max_hot=10_000, protect_s=0)
    items = [Item(f"m{i:03}", 1.0 + i % 7, tokens=2) for i in range(500)]
    items += [Item(f"g{i:03}", 2.0, tokens=2, group=f"grp{i // 2}") for i in range(100)]
    for start in range(0, len(items), 100):
        store.remember_many(items[start : start + 100], now=T0)
    everything = store.window(tokens=1300, now=T0)
    assert len(everything) == 600 and everything.tokens == 1200 and everything.left == 0
    half = store.window(tokens=1000, now=T0)
    assert half.tokens == 1000 and len(half) == 500 and half.left == 100
    # by importance: 1 + i % 7, the highest first; the lowest ones left out
    lowest = min(m.importance for m in half)
    assert all(m.importance >= lowest for m in half)
    assert {m.importance for m in half if m.id.startswith("m")} >= {7.0, 6.0, 5.0}
    grouped = [m for m in half if m.group]
    assert len({m.group for m in grouped}) * 2 == len(grouped)  # whole groups only
    assert len(store.window(now=T0)) == 400


def test_the_window_order_survives_eviction_and_recall(make_store: StoreFactory) -> None:
    store = make_store(max_hot=2, protect_s=10)
    store.remember("first", 1.0, now=T0)
    store.remember("second", 5.0, now=T0 + 20 * S)
    store.remember("third", 6.0, now=T0 + 40 * S)  # first goes cold
    store.recall("first", now=T0 + 60 * S)  # back and protected: second (5) goes cold
    store.remember("third", 7.0, now=T0 + 70 * S)  # re-remembered: keeps its place
    assert [m.id for m in store.window(now=T0 + 70 * S)] == ["first", "third"]


def test_a_window_takes_groups_whole_or_not_at_all(make_store: StoreFactory) -> None:
    store = make_store(protect_s=0)
    store.remember("call", 9.0, tokens=3, group="t", now=T0)
    store.remember("out", 1.0, tokens=8, group="t", now=T0)
    store.remember("note", 5.0, tokens=4, now=T0)
    # t ranks at 9 but costs 11: with 10 tokens only note fits
    assert [m.id for m in store.window(tokens=10, now=T0)] == ["note"]
    assert [m.id for m in store.window(tokens=11, now=T0)] == ["call", "out"]
    assert [m.id for m in store.window(tokens=15, now=T0)] == ["call", "out", "note"]


def test_an_agent_conversation_through_a_token_budget(make_store: StoreFactory) -> None:
    """200 turns of an agent with tool calls: each window holds its budget,
    never holds part of a group, keeps time order, and the instruction given
    first is in every window."""
    rng = random.Random(7)
    budget, window_tokens = 3000, 1500
    store = make_store(
        namespace="agent", clock="activity", max_hot=10_000, max_tokens=budget, protect_s=0
    )
    # A user instruction: whitelisted, as docs/adapters.md advises for what must stay
    store.remember(
        "instruction", 10.0, text="never share the API key", tokens=40, whitelist=True, now=T0
    )
    members: dict[str, list[str]] = {}
    order = ["instruction"]
    now = T0
    for turn in range(200):
        now += 30 * S
        user = f"u{turn}"
        store.remember(user, rng.choice([1.0, 3.0, 5.0]), tokens=rng.randint(10, 80), now=now)
        order.append(user)
        for call in range(rng.randint(0, 3)):
            group = f"t{turn}.{call}"
            importance = 8.0 if rng.random() < 0.1 else 3.0  # a tool error, or a result
            store.remember(f"{group}.call", 3.0, tokens=rng.randint(20, 60), group=group, now=now)
            store.remember(
                f"{group}.out", importance, tokens=rng.randint(50, 600), group=group, now=now
            )
            members[group] = [f"{group}.call", f"{group}.out"]
            order += members[group]
        store.remember(f"a{turn}", 1.0, tokens=rng.randint(20, 200), now=now)
        order.append(f"a{turn}")

        stats = store.stats(now=now)
        assert stats.tokens <= budget and stats.over_tokens == 0, turn
        for tokens in (window_tokens, None):
            window = store.window(tokens=tokens, now=now)
            ids = [m.id for m in window]
            assert window.tokens == sum(m.tokens for m in window) <= (tokens or budget), turn
            assert ids == sorted(ids, key=order.index), turn  # the conversation's order
            assert "instruction" in ids, turn
            for group in {m.group for m in window if m.group}:
                assert set(members[group]) <= set(ids), (turn, group)  # never half a group
    assert store.stats(now=now).cold > 0  # the budget made it evict


# ---------------------------------------------------------------------------
# scan, drop, idle expiry


def test_scan_pages_through_every_memory_of_a_tier(make_store: StoreFactory) -> None:
    store = make_store(max_hot=150, protect_s=0)
    store.remember_many([Item(f"m{i}", 1.0 + i % 7, text=f"t{i}") for i in range(100)], now=T0)
    store.remember_many([Item(f"n{i}", 10.0) for i in range(100)], now=T0)  # 50 go cold
    for tier, expected in (("hot", 150), ("cold", 50)):
        seen: list[str] = []
        cursor, pages = 0, 0
        while True:
            page = store.scan(tier, cursor, 20, now=T0)  # type: ignore[arg-type]
            assert all(m.tier == tier for m in page.memories)
            seen += [m.id for m in page.memories]
            cursor, pages = page.cursor, pages + 1
            if cursor == 0:
                break
        assert len(set(seen)) == expected and pages > 1
    every: dict[str, Memory] = {}
    cursor = 0
    while True:
        page = store.scan("hot", cursor, 200, now=T0)
        every.update((m.id, m) for m in page.memories)
        if (cursor := page.cursor) == 0:
            break
    memory = every["n0"]
    assert memory.text is None and memory.importance == 10.0


def test_drop_deletes_the_namespace_and_nothing_else(
    client: redis.Redis, make_store: StoreFactory
) -> None:
    other = make_store(namespace="other")
    other.remember("keep", 1.0, now=T0)
    store = make_store(namespace="gone", max_hot=3, protect_s=0)
    for i in range(6):
        store.remember(f"m{i}", 1.0, text="x", group=f"g{i % 2}", whitelist=i == 5, now=T0)
    present = [k for k in namespace_keys("gone") if client.exists(k)]
    roles = {k.rsplit(":", 1)[1] for k in present}
    assert {"policy", "state", "meta", "text", "links", "wl", "cold"} <= roles
    assert store.drop() == len(present)
    assert [k for k in client.keys("memevict:{gone}:*") if b":call:" not in k] == []
    assert other.get("keep", now=T0) is not None
    with pytest.raises(NoPolicy):
        MemoryStore(client, "gone", read_only=True)
    # a writer afterwards starts the namespace again, empty, with its policy
    store.remember("new", 1.0, now=T0)
    assert store.stats(now=T0).hot == 1 and store.get("m0", now=T0) is None


def test_drop_counts_the_keys_it_deleted(client: redis.Redis, make_store: StoreFactory) -> None:
    store = make_store(namespace="count")
    store.remember("a", 1.0, text="t", now=T0)
    present = [k for k in namespace_keys("count") if client.exists(k)]
    assert store.drop() == len(present) and store.drop() == 0


def test_an_idle_namespace_expires_with_all_its_keys(
    client: redis.Redis, make_store: StoreFactory
) -> None:
    store = make_store(namespace="idle", idle_ttl_s=1.5, max_hot=2, protect_s=0)
    store.remember("a", 1.0, text="t", group="g", now=T0)
    store.remember("b", 2.0, now=T0)
    store.remember("c", 3.0, whitelist=True, now=T0)  # a (with its group) goes cold
    keys = [k for k in namespace_keys("idle") if client.exists(k)]
    assert len(keys) >= 8
    ttls = [client.pttl(k) for k in keys]
    assert all(1000 < t <= 1500 for t in ttls), ttls  # never earlier than 1.5 s
    time.sleep(0.8)
    store.remember("d", 4.0, now=T0)  # a write: every key lives 1.5 s from now
    assert all(client.pttl(k) > 1000 for k in keys if client.exists(k))
    time.sleep(0.8)  # 1.6 s after the first write, 0.8 s after the last
    assert store.get("d", now=T0) is not None
    time.sleep(1.0)  # 1.8 s without a write
    assert [k for k in client.keys("memevict:{idle}:*") if b":call:" not in k] == []


def test_idle_ttl_0_takes_the_expiry_back(client: redis.Redis, make_store: StoreFactory) -> None:
    store = make_store(namespace="keep", idle_ttl_s=100)
    store.remember("a", 1.0, text="t", now=T0)
    assert client.pttl(key_name("keep", "meta")) > 0
    store.set_policy(idle_ttl_s=0, now=T0)
    keys = [k for k in namespace_keys("keep") if client.exists(k)]
    assert keys and all(client.pttl(k) == -1 for k in keys)  # no expiry


def test_a_policy_stored_before_the_new_fields_reads_them_as_0(
    client: redis.Redis, make_store: StoreFactory
) -> None:
    store = make_store(namespace="old", max_hot=3)
    store.remember("a", 1.0, now=T0)
    # as 0.1.0 stored it: no packed copy, and none of the fields added since
    client.hdel(key_name("old", "policy"), "max_tokens", "idle_ttl_s", "packed")
    assert store.remember("b", 1.0, tokens=10**6, now=T0).over_tokens == 0
    assert MemoryStore(client, "old").policy == scenario_policy(max_hot=3)


def test_a_lost_links_key_heals_when_the_members_are_placed_again(
    client: redis.Redis, make_store: StoreFactory
) -> None:
    store = make_store(namespace="heal", max_hot=3, protect_s=0)
    store.remember("call", 1.0, group="t", now=T0)
    store.remember("out", 2.0, group="t", now=T0)
    client.delete(key_name("heal", "links"))  # docs/operations.md: Lost keys
    store.touch("call", now=T0)
    store.touch("out", now=T0)  # placed again: links written, the group ranked again
    store.remember("a", 5.0, now=T0)
    r = store.remember("b", 6.0, now=T0)  # 4 > 3: the group (2) is the lowest unit
    assert sorted(r.evicted) == ["call", "out"]


def test_a_hot_memory_moved_into_a_cold_group_brings_it_back(make_store: StoreFactory) -> None:
    store = make_store(namespace="move", max_hot=2, protect_s=10)
    store.remember("a", 1.0, group="g", now=T0)
    store.remember("b", 1.0, group="g", now=T0)
    store.remember("c", 5.0, now=T0 + 20 * S)  # the group goes cold
    assert store.get("a", now=T0 + 20 * S).tier == "cold"  # type: ignore[union-attr]
    store.remember("c", 5.0, group="g", now=T0 + 40 * S)  # c joins g: g is one tier again
    tiers = {x: store.get(x, now=T0 + 40 * S).tier for x in "abc"}  # type: ignore[union-attr]
    assert set(tiers.values()) == {"hot"}, tiers


def test_lowering_cold_max_drops_whole_groups_in_bounded_steps(
    client: redis.Redis, make_store: StoreFactory
) -> None:
    store = make_store(namespace="trim", max_hot=1, protect_s=0)
    for i in range(40):  # 40 groups of 10 go cold
        store.remember_many([Item(f"g{i}.{k}", 1.0, group=f"g{i}") for k in range(10)], now=T0)
    store.remember("top", 100.0, now=T0)
    assert store.stats(now=T0).cold == 400
    cold = key_name("trim", "cold")
    sizes = [client.zcard(cold)]
    store.set_policy(cold_max=5, now=T0)  # 395 to drop: more than one call's work
    sizes.append(client.zcard(cold))
    while store.evict(now=T0).backlog:
        sizes.append(client.zcard(cold))
    sizes.append(client.zcard(cold))
    steps = [a - b for a, b in itertools.pairwise(sizes)]
    assert len(steps) > 1 and all(step < 200 + 100 for step in steps), steps  # WORK + GROUP_MAX
    # whole groups go, so the tier ends at or below cold_max, with whole groups
    left = [m.decode() for m in client.zrange(cold, 0, -1)]
    assert len(left) <= 5 and len(left) % 10 == 0


def test_a_budgeted_window_of_over_8000_memories(make_store: StoreFactory) -> None:
    """Lua's unpack takes at most ~8,000 values: the texts of a larger window are read in
    parts (this failed with 'too many results to unpack')."""
    store = make_store(max_hot=20_000, protect_s=0)
    for start in range(0, 9000, 100):
        store.remember_many(
            [Item(f"m{i}", 1.0, text=f"t{i}", tokens=1) for i in range(start, start + 100)],
            now=T0,
        )
    window = store.window(tokens=9000, now=T0)
    assert len(window) == 9000 and window.tokens == 9000
    assert [m.text for m in window][8990:] == [f"t{i}" for i in range(8990, 9000)]


def test_the_window_tells_a_namespace_created_again(
    make_store: StoreFactory, client: redis.Redis
) -> None:
    """epoch: the ms the namespace's state began; the same until its keys are lost."""
    before = int(time.time() * 1000)
    store = make_store(protect_s=0)  # (configured at the server's clock)
    store.remember("a", 1.0, now=T0)
    first = store.window(now=T0 + S)
    assert before - 5000 <= first.epoch <= int(time.time() * 1000) + 5000
    assert store.window(tokens=5, now=T0 + 2 * S).epoch == first.epoch
    time.sleep(0.01)
    client.flushdb()
    with pytest.raises(NamespaceLost):  # (not configured again behind the caller's back)
        store.remember("b", 1.0, now=T0 + 3 * S)
    store.recreate()
    store.remember("b", 1.0, now=T0 + 3 * S)
    again = store.window(now=T0 + 4 * S)
    assert again.epoch > first.epoch and [m.id for m in again] == ["b"]


@pytest.mark.parametrize("plain", [False, True])
@pytest.mark.parametrize("tokens", [None, 40, 300, 10_000])
def test_context_is_the_window_as_ids_and_texts(
    make_store: StoreFactory, tokens: int, plain: bool
) -> None:
    """The same memories in the same order, ranked (40, 300) or all of a hot tier that fits
    (10,000: context reads no scores) or without a budget; a memory without text has None.
    plain: no group, whitelist or protection, so that a ranked context reads the hot index
    alone, without its keys, over more than one chunk of 100."""
    store = make_store(max_hot=1000, protect_s=0)
    rng = random.Random(5)
    for k in range(250 if plain else 120):
        store.remember(
            f"m{k}",
            rng.choice([1.0, 3.0, 7.0, 10.0]),
            text=None if k % 9 == 0 else f"text {k}",
            whitelist=k % 25 == 0 and not plain,
            tokens=rng.randint(1, 9),
            group=f"g{k // 3}" if k % 5 == 0 and not plain else None,
            now=T0 + k * S,
        )
    if plain:  # (ranked: more than one chunk of candidates)
        tokens = {40: 40, 300: 1000}.get(tokens, tokens)
    window = store.window(tokens, now=T0 + 300 * S)
    context = store.context(tokens, now=T0 + 300 * S)
    assert [(m.id, m.text) for m in window] == list(context)
    assert (window.tokens, window.left, window.epoch) == (
        context.tokens,
        context.left,
        context.epoch,
    )
    if tokens in (None, 10_000):  # every hot memory, those stored without text too
        assert len(context) == (250 if plain else 120)
        assert sum(text is None for _, text in context) == (28 if plain else 14)
    else:  # ranked: some left out
        assert 0 < len(context) < (250 if plain else 120)


def test_context_leaves_out_what_it_is_told_to_skip(make_store: StoreFactory) -> None:
    """skip: as if those memories were not hot; their tokens are the caller's."""
    store = make_store(max_hot=6, protect_s=0)
    for id, importance in (("a", 1.0), ("b", 5.0), ("c", 3.0), ("d", 9.0)):
        store.remember(id, importance, text=id, tokens=4, now=T0)
    store.remember("x1", 8.0, tokens=2, group="g", now=T0)
    store.remember("x2", 8.0, tokens=2, group="g", now=T0)
    # ranked: d (9) then the group g (8, 4 tokens) fill 8; without d, g and b (5)
    assert [id for id, _ in store.context(8, now=T0)] == ["d", "x1", "x2"]
    ctx = store.context(8, skip=["d"], now=T0)
    assert [id for id, _ in ctx] == ["b", "x1", "x2"] and (ctx.tokens, ctx.left) == (8, 2)
    # a skipped member leaves the rest of its group, at the rest's cost
    ctx = store.context(6, skip=["d", "x2"], now=T0)
    assert [id for id, _ in ctx] == ["b", "x1"] and (ctx.tokens, ctx.left) == (6, 2)
    # the hot tier less the skipped fits: all of it, in order (a, b, c: 12 tokens)
    ctx = store.context(12, skip=["d", "x1", "x2"], now=T0)
    assert list(ctx) == [("a", "a"), ("b", "b"), ("c", "c")] and (ctx.tokens, ctx.left) == (12, 0)
    # unknown ids, and a cold memory (not hot: nothing to leave out), change nothing
    store.remember("y", 1.0, tokens=4, now=T0)  # max_hot 6: the lowest, a or y, goes cold
    cold = next(id for id in ("a", "y") if store.get(id, now=T0).tier == "cold")  # type: ignore[union-attr]
    assert store.context(8, skip=["nope", cold], now=T0) == store.context(8, now=T0)


@pytest.mark.parametrize("tokens", [30, 120, 400])
def test_context_skipping_is_the_context_without_those_memories(
    make_store: StoreFactory, tokens: int
) -> None:
    """A namespace with the skipped memories forgotten is the reference (forget changes no
    other memory's score), ranked (30, 120) or fitting (400)."""
    stores = [make_store(f"n{k}", max_hot=1000, protect_s=0, clock="activity") for k in (1, 2)]
    rng = random.Random(11)
    calls = [
        dict(
            id=f"m{k}",
            importance=rng.choice([1.0, 3.0, 7.0, 10.0]),
            text=f"text {k}",
            whitelist=k % 17 == 0,
            tokens=rng.randint(1, 9),
            group=f"g{k // 3}" if k % 4 == 0 else None,
            now=T0 + k * S,
        )
        for k in range(80)
    ]
    for store in stores:
        for call in calls:
            store.remember(**call)  # type: ignore[arg-type]
    skip = [f"m{k}" for k in rng.sample(range(80), 12)]
    for id in skip:
        stores[1].forget(id)
    got = stores[0].context(tokens, skip=skip, now=T0 + 100 * S)
    want = stores[1].context(tokens, now=T0 + 100 * S)
    assert list(got) == list(want) and (got.tokens, got.left) == (want.tokens, want.left)
    assert not set(skip) & {id for id, _ in got}


def test_memories_of_one_order_are_in_creation_order(
    client: redis.Redis, make_store: StoreFactory
) -> None:
    """Metadata as 0.1.0 stored it has no order (0 for all): such memories sort by
    creation, then id, before the newer ones."""
    store = make_store(namespace="v1", max_hot=10, protect_s=0)
    for k, id in enumerate(["z", "y", "x", "w"]):
        store.remember(id, 1.0, text=id, now=T0 + k * S)
    meta = key_name("v1", "meta")
    for id in ["z", "y", "x"]:  # 0.1.0's layout: the first 49 bytes, then the group ('')
        client.hset(meta, id, client.hget(meta, id)[:49])  # type: ignore[index]
    for tokens in (None, 100):
        assert [id for id, _ in store.context(tokens, now=T0 + 9 * S)] == ["z", "y", "x", "w"]
        assert [m.id for m in store.window(tokens, now=T0 + 9 * S)] == ["z", "y", "x", "w"]
