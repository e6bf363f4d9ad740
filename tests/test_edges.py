"""The rules at their edges: time that runs backwards, floors, ties, policy
changes and lost keys (issue 13). Each test pins one rule the README states;
expected values are worked out here from the rules, never by the code under
test.
"""

from __future__ import annotations

import dataclasses

from tests.conftest import StoreFactory

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
