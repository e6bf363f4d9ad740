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
