"""remember_many: one atomic call that leaves what remembering each item in turn, then
evicting once, leaves.

The reference is built from other public methods: the same items remembered one
by one while max_hot is lifted out of the way, then the policy put back, which
evicts once (evicting after every item can differ: a memory evicted mid-way and
re-remembered, or one re-remembered lower after another left, changes which go)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memevict import BadArgument, Item, MemoryStore, Policy
from tests.servers import Server

T0 = 1_700_000_000_000
S = 1000
IDS = ["a", "b", "c", "d", "e", "f"]

items = st.lists(
    st.builds(
        Item,
        st.sampled_from(IDS),
        st.sampled_from([0.5, 1.0, 2.0, 5.0]) | st.floats(0.01, 10.0),
        st.sampled_from([None, "x", "y"]),
        st.booleans(),
    ),
    min_size=1,
    max_size=8,
)
policies = st.builds(
    Policy,
    max_hot=st.integers(1, 4),
    evict_batch=st.just(0),  # evict_batch applies once per call: a batch evicts fewer extras
    whitelist_cap=st.integers(0, 2),
    protect_s=st.sampled_from([0.0, 60.0]),
    half_life_s=st.just(60.0),
    cold_max=st.just(100),  # no cold memory is dropped, so none is re-created by an item
)


def state(store: MemoryStore, now: int) -> dict[str, tuple[object, ...]]:
    memories = {i: store.get(i, now=now) for i in IDS}
    return {
        i: (m.tier, m.whitelisted, m.importance, m.text, m.created, m.last_access)
        for i, m in memories.items()
        if m is not None
    }


def scores(store: MemoryStore, now: int) -> dict[str, float]:
    return {i: m.score for i in IDS if (m := store.get(i, now=now)) is not None}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(policy=policies, before=items, batch=items)
def test_a_batch_leaves_what_remembering_in_turn_then_evicting_leaves(
    server: Server, policy: Policy, before: list[Item], batch: list[Item]
) -> None:
    client = server.client()
    client.flushall()
    one, many = MemoryStore(client, "one", policy), MemoryStore(client, "many", policy)
    # The same history in both, and the same jitter counter, so offsets match.
    for store in (one, many):
        for i, item in enumerate(before):
            store.remember(
                item.id, item.importance, text=item.text, whitelist=item.whitelist, now=T0 + i
            )
    now = T0 + 90 * S  # past the protection of `before`
    one.set_policy(replace(policy, max_hot=1000), now=now)
    singles = [
        one.remember(item.id, item.importance, text=item.text, whitelist=item.whitelist, now=now)
        for item in batch
    ]
    hot_before = {m.id for m in one.top(200, now=now)}
    one.set_policy(policy, now=now)  # evicts once, the lowest at the end of the batch
    evicted = hot_before - {m.id for m in one.top(200, now=now)}
    got = many.remember_many(batch, now=now)
    assert got.ids == tuple(item.id for item in batch)
    assert got.scores == pytest.approx([r.score for r in singles], rel=1e-9)
    assert state(many, now) == state(one, now)
    assert scores(many, now) == pytest.approx(scores(one, now), rel=1e-9)
    assert many.stats(now=now) == one.stats(now=now)
    assert [m.id for m in many.top(10, now=now)] == [m.id for m in one.top(10, now=now)]
    assert set(got.evicted) == evicted
    assert got.over == max(0, one.stats(now=now).hot - policy.max_hot)
    assert got.demoted == tuple(d for r in singles for d in r.demoted)
    client.close()


def test_a_batch_evicts_once_and_reports_what_it_did(client: redis.Redis) -> None:
    store = MemoryStore(client, "t", Policy(max_hot=2, protect_s=0, whitelist_cap=1))
    store.remember("old", 1.0, now=T0)
    batch = store.remember_many(
        [("a", 5.0), Item("w", 2.0, whitelist=True), Item("v", 3.0, whitelist=True), ("a", 6.0)],
        now=T0 + S,
    )
    assert batch.ids == ("a", "w", "v", "a")
    assert batch.demoted == ("w",)  # the cap of 1 keeps the higher of w and v
    assert sorted(batch.evicted) == ["old", "w"]  # w (2.0) is lower than a (6.0) and v (x10)
    assert batch.over == 0
    assert [m.id for m in store.top(5, now=T0 + S)] == ["v", "a"]
    a = store.get("a", now=T0 + S)
    assert a is not None and a.importance == 6.0


def test_a_bad_item_rejects_the_whole_batch(client: redis.Redis) -> None:
    store = MemoryStore(client, "t")
    store.remember("x", 1.0, now=T0)
    before = {k: client.dump(k) for k in client.keys("*")}
    with pytest.raises(BadArgument):
        store.remember_many([("a", 1.0)] * 101)
    with pytest.raises(ValueError):  # BadImportance is a ValueError too
        store.remember_many([("a", 1.0), ("b", float("nan"))])
    assert {k: client.dump(k) for k in client.keys("*")} == before
