"""The policy is stored per namespace and shared by every worker."""

from __future__ import annotations

import dataclasses

import pytest
import redis

from memevict import BadPolicy, MemoryStore, Policy, PolicyMismatch
from memevict.scripts import key_name

T0 = 1_700_000_000_000
S = 1000


def test_first_store_stores_its_policy_and_others_use_it(client: redis.Redis) -> None:
    policy = Policy(max_hot=7, half_life_s=60.5, jitter=0.0)
    MemoryStore(client, "ns", policy)
    assert MemoryStore(client, "ns").policy == policy
    assert MemoryStore(client, "fresh-ns").policy == Policy()


def test_a_different_policy_raises_unless_replacing(client: redis.Redis) -> None:
    MemoryStore(client, "ns", Policy(max_hot=7))
    with pytest.raises(PolicyMismatch):
        MemoryStore(client, "ns", Policy(max_hot=8))
    assert MemoryStore(client, "ns").policy.max_hot == 7
    replaced = MemoryStore(client, "ns", Policy(max_hot=8), replace_policy=True)
    assert replaced.policy.max_hot == 8
    assert MemoryStore(client, "ns").policy.max_hot == 8


def test_the_stored_policy_governs_every_worker(client: redis.Redis) -> None:
    a = MemoryStore(client, "ns", Policy(max_hot=2, protect_s=0))
    b = MemoryStore(client, "ns")
    a.set_policy(dataclasses.replace(a.policy, max_hot=3))
    for i in range(4):
        b.remember(f"m{i}", 1.0 + i, now=T0)
    assert b.stats(now=T0).hot == 3  # b follows the policy a stored after b was made


def test_a_new_half_life_applies_from_when_it_is_set(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(half_life_s=1800, protect_s=0, jitter=0.0))
    store.remember("old-high", 8.0, now=T0)
    store.remember("new-low", 3.0, now=T0 + 3600 * S)
    store.remember("wl", 1.0, whitelist=True, now=T0)
    store.decay(0.5)
    now = T0 + 3600 * S
    assert [m.id for m in store.top(3, now=now)][1:] == ["new-low", "old-high"]  # 3 vs 8/4 = 2
    store.set_policy(Policy(half_life_s=7200, protect_s=0, jitter=0.0), now=now)
    # At the change nothing moves: recency already lost stays lost...
    scores = {m.id: m.score for m in store.top(3, now=now)}
    assert scores["old-high"] == pytest.approx(8.0 * 0.5 ** (3600 / 1800) * 0.5)
    assert scores["new-low"] == pytest.approx(3.0 * 0.5)
    assert scores["wl"] == pytest.approx(10.0)
    # ...and from then on it halves every 7200 s, for old and new memories alike.
    later = now + 7200 * S
    store.remember("newest", 3.0, now=later)
    scores = {m.id: m.score for m in store.top(4, now=later)}
    assert scores["old-high"] == pytest.approx(8.0 * 0.5 ** (3600 / 1800) * 0.5 * 0.5)
    assert scores["new-low"] == pytest.approx(3.0 * 0.5 * 0.5)
    assert scores["newest"] == pytest.approx(3.0)
    assert [m.id for m in store.top(4, now=later)] == ["wl", "newest", "new-low", "old-high"]


def test_a_new_half_life_rewrites_no_key(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(half_life_s=1800, protect_s=0))
    for i in range(50):
        store.remember(f"m{i}", 1.0 + i, whitelist=i % 10 == 0, now=T0 + i * S)
    indexes = [key_name("ns", role) for role in ("hot", "fresh", "wl", "prot", "meta")]
    before = [client.dump(k) for k in indexes]
    store.set_policy(Policy(half_life_s=60, protect_s=0), now=T0 + 100 * S)
    assert [client.dump(k) for k in indexes] == before


@pytest.mark.parametrize(
    "fields",
    [
        {"max_hot": 0},
        {"max_hot": 1.5},
        {"evict_batch": -1},
        {"half_life_s": 0},
        {"half_life_s": float("inf")},
        {"whitelist_boost": 0.5},
        {"protect_s": float("nan")},
        {"score_min": -0.1},
        {"jitter": -1},
        {"cold_max": True},
    ],
)
def test_bad_policy_fields_are_rejected(fields: dict[str, float]) -> None:
    with pytest.raises(BadPolicy):
        Policy(**fields)  # type: ignore[arg-type]


def test_a_replaced_policy_applies_at_once(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(max_hot=10, whitelist_cap=5, protect_s=0))
    for i in range(4):
        store.remember(f"w{i}", 1.0 + i, whitelist=True, now=T0)
    for i in range(6):
        store.remember(f"m{i}", 1.0 + i, now=T0)
    store.set_policy(Policy(max_hot=5, whitelist_cap=2, protect_s=0))
    s = store.stats()
    assert (s.whitelisted, s.hot, s.cold) == (2, 5, 5)
    top_ids = {m.id for m in store.top(5)}
    assert {"w2", "w3"} <= top_ids  # the two highest whitelisted stay whitelisted
