"""The policy is stored per namespace and shared by every worker."""

from __future__ import annotations

import dataclasses
import re
import struct

import pytest
import redis

from memevict import BadPolicy, MemoryStore, Policy, PolicyMismatch
from memevict.scripts import key_name, lua_root
from memevict.state import STATE_FIELDS, STATE_FORMAT
from tests.conftest import state_of

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


def test_a_namespace_made_under_the_old_defaults_keeps_them_and_says_so(
    client: redis.Redis,
) -> None:
    """A namespace made before issue 40 (its policy's half-life 500 and no
    protect_memories field) keeps them; a Policy relying on the new defaults is
    refused with the fields named and the values that keep it as it is."""
    old = Policy(max_hot=50, half_life_memories=500.0, protect_memories=0)
    MemoryStore(client, "made-before", old)
    client.hdel(key_name("made-before", "policy"), "protect_memories", "packed")
    assert MemoryStore(client, "made-before").policy == old  # read as it was
    with pytest.raises(PolicyMismatch) as refused:
        MemoryStore(client, "made-before", Policy(max_hot=50))
    message = str(refused.value)
    assert "half_life_memories=500.0 (given 10000.0)" in message
    assert "protect_memories=0 (given 8)" in message
    assert "give half_life_memories=500.0, protect_memories=0 to keep" in message
    assert MemoryStore(client, "made-before", old).policy == old  # as the message says
    # a field the user changed is named, with no word about defaults
    with pytest.raises(PolicyMismatch) as other:
        MemoryStore(client, "made-before", dataclasses.replace(old, max_hot=60))
    assert "max_hot=50 (given 60)" in str(other.value) and "default" not in str(other.value)
    moved = MemoryStore(client, "made-before", Policy(max_hot=50), replace_policy=True)
    assert moved.policy == Policy(max_hot=50)


def test_the_stored_policy_governs_every_worker(client: redis.Redis) -> None:
    a = MemoryStore(client, "ns", Policy(max_hot=2, protect_s=0))
    b = MemoryStore(client, "ns")
    a.set_policy(dataclasses.replace(a.policy, max_hot=3))
    for i in range(4):
        b.remember(f"m{i}", 1.0 + i, now=T0)
    assert b.stats(now=T0).hot == 3  # b follows the policy a stored after b was made


def test_a_new_half_life_applies_from_when_it_is_set(client: redis.Redis) -> None:
    wall = Policy(clock="wall", half_life_s=1800, protect_s=0, jitter=0.0)
    store = MemoryStore(client, "ns", wall)
    store.remember("old-high", 8.0, now=T0)
    store.remember("new-low", 3.0, now=T0 + 3600 * S)
    store.remember("wl", 1.0, whitelist=True, now=T0)
    store.decay(0.5)
    now = T0 + 3600 * S
    assert [m.id for m in store.top(3, now=now)][1:] == ["new-low", "old-high"]  # 3 vs 8/4 = 2
    store.set_policy(dataclasses.replace(wall, half_life_s=7200), now=now)
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
    store = MemoryStore(client, "ns", Policy(clock="wall", half_life_s=1800, protect_s=0))
    for i in range(50):
        store.remember(f"m{i}", 1.0 + i, whitelist=i % 10 == 0, now=T0 + i * S)
    indexes = [key_name("ns", role) for role in ("hot", "fresh", "wl", "prot", "meta")]
    before = [client.dump(k) for k in indexes]
    store.set_policy(Policy(clock="wall", half_life_s=60, protect_s=0), now=T0 + 100 * S)
    store.set_policy(Policy(half_life_memories=7, protect_s=0), now=T0 + 200 * S)
    assert [client.dump(k) for k in indexes] == before


def test_the_activity_clock_ages_by_memories_remembered_not_by_time(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(half_life_memories=10, protect_s=0, jitter=0.0))
    store.remember("fact", 8.0, now=T0)
    two_weeks = T0 + 14 * 86400 * S
    assert store.get("fact", now=two_weeks).score == pytest.approx(8.0)  # type: ignore[union-attr]
    store.remember_many([(f"m{i}", 1.0) for i in range(10)], now=two_weeks)
    assert store.get("fact", now=two_weeks).score == pytest.approx(4.0)  # type: ignore[union-attr]
    store.touch("fact", now=two_weeks)  # touch remembers nothing: the clock stands still
    store.remember("m10", 1.0, now=two_weeks)
    assert store.get("fact", now=two_weeks).score == pytest.approx(8.0 * 0.5**0.1)  # type: ignore[union-attr]
    # the batch's items are remembered in turn: the first is 10 memories old
    assert store.get("m0", now=two_weeks).score == pytest.approx(0.5)  # type: ignore[union-attr]


def test_a_clock_change_keeps_recency_already_lost_in_every_path(client: redis.Redis) -> None:
    """Wall clock (half-life 1 h) for 2 h, then the activity clock (half-life
    4 memories): every memory keeps the 2 half-lives it lost and halves every
    4 memories after, hot or cold, whitelisted or not."""
    wall = Policy(max_hot=4, clock="wall", half_life_s=3600, protect_s=0, jitter=0.0)
    wall = dataclasses.replace(wall, whitelist_cap=2, score_min=0.0)
    store = MemoryStore(client, "ns", wall)
    store.remember("old", 8.0, now=T0)  # used at T0: 2 half-lives lost at the change
    store.remember("wl-old", 4.0, whitelist=True, now=T0)
    store.remember("cold", 1.0, now=T0)
    store.remember("low", 1.0, now=T0 + 3600 * S)  # 1 half-life lost at the change
    store.remember("wl-new", 3.0, whitelist=True, now=T0 + 7200 * S)  # none lost
    # 5 memories, max_hot 4: "cold" (1 x 1/4 at T0 + 2 h) is the lowest and goes cold.
    change = T0 + 7200 * S
    assert store.get("cold", now=change).tier == "cold"  # type: ignore[union-attr]
    activity = dataclasses.replace(wall, clock="activity", half_life_memories=4, max_hot=20)
    store.set_policy(activity, now=change)

    def score(memory_id: str) -> float:
        return store.get(memory_id, now=change + 86400 * S).score  # type: ignore[union-attr]

    # Time alone changes nothing now; each score is its loss at the change.
    assert score("old") == pytest.approx(8.0 / 4)
    assert score("low") == pytest.approx(1.0 / 2)
    assert score("cold") == pytest.approx(1.0 / 4)  # cold score
    # 4 memories remembered: one half-life more for all of them.
    store.remember_many([(f"n{i}", 100.0) for i in range(2)], now=change)
    store.demote("wl-old", now=change)  # demote: importance x recency, from its last use
    store.demote("wl-new", now=change)
    store.whitelist("wl-new", now=change)  # whitelist of a hot memory
    store.whitelist("wl-old", now=change)
    store.remember_many([(f"n{i}", 100.0) for i in range(2, 4)], now=change)
    assert score("cold") == pytest.approx(1.0 / 4 / 2)
    # The cap (2) ranks whitelisted memories by importance x recency: remembering
    # a third demotes wl-old (4 x 1/4 x 1/2 = 0.5) and keeps wl-new (3 x 1/2).
    third = store.remember("wl-third", 1.0, whitelist=True, now=change)
    assert third.demoted == ("wl-old",)
    assert score("wl-old") == pytest.approx(4.0 / 4 / 2 * 0.5**0.25)
    # Eviction order, 9 hot memories down to 8: "low" (1/2 x 0.5^(5/4)) goes,
    # not "wl-old" (4/4 x 0.5^(5/4)) nor "old" (8/4 x 0.5^(5/4)).
    store.set_policy(dataclasses.replace(activity, max_hot=8), now=change)
    assert {m.id for m in store.top(20, now=change)} == {
        "old", "wl-old", "wl-new", "wl-third", "n0", "n1", "n2", "n3"
    }  # fmt: skip
    assert score("low") == pytest.approx(1.0 / 2 / 2 * 0.5**0.25)


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
        {"protect_memories": -1},
        {"protect_memories": 2.5},
        {"protect_memories": 1_000_001},
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


# The scripts read the policy packed in one field (lib/policy.lua); the fields
# are what people and the Python package read.


def test_a_hand_edit_of_a_field_applies_when_a_store_next_opens(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(max_hot=3, protect_s=0))
    client.hset(key_name("ns", "policy"), "max_hot", "1")  # by hand
    for i in range(3):
        store.remember(f"m{i}", 1.0 + i, now=T0)
    assert store.stats(now=T0).hot == 3  # the packed copy still says 3
    assert MemoryStore(client, "ns").policy.max_hot == 1  # opening checks and packs the fields
    assert store.remember("m3", 9.0, now=T0).evicted == ("m0", "m1", "m2")


def test_a_bad_hand_edit_is_restored_when_a_store_opens(client: redis.Redis) -> None:
    """A field edited out of its range goes back to the value the scripts ran with (the
    packed copy) when a writable store opens; with no sound packed copy either, the open
    is refused."""
    MemoryStore(client, "ns", Policy(max_hot=3, jitter=0.002))
    client.hset(key_name("ns", "policy"), "jitter", "a lot")
    with pytest.raises(BadPolicy, match="jitter is 'a lot'"):
        MemoryStore(client, "ns", read_only=True)
    assert MemoryStore(client, "ns").policy.jitter == 0.002
    assert client.hget(key_name("ns", "policy"), "jitter") == b"0.002"
    client.hset(key_name("ns", "policy"), mapping={"jitter": "a lot", "packed": b"\xc1"})
    with pytest.raises(BadPolicy, match="edited: jitter"):
        MemoryStore(client, "ns")


def test_a_damaged_packed_policy_is_packed_again(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(max_hot=1, protect_s=0))
    store.remember("a", 1.0, now=T0)
    for damage in (b"\xc1", b"\x92\x01\x02", b"not msgpack"):
        client.hset(key_name("ns", "policy"), "packed", damage)
        # The script refuses before any write (NO_POLICY); the store configures
        # again, which packs the fields again, and the call goes through.
        assert store.remember(f"b{damage[0]}", 2.0, now=T0).evicted != ()
    assert store.stats(now=T0).hot == 1


def test_a_policy_without_the_packed_field_is_read_from_its_fields(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(max_hot=1, protect_s=0))
    client.hdel(key_name("ns", "policy"), "packed")  # as memevict 0.1.0 stored it
    store.remember("a", 1.0, now=T0)
    assert store.remember("b", 2.0, now=T0).evicted == ("a",)
    assert not client.hexists(key_name("ns", "policy"), "packed")  # a write does not pack it
    MemoryStore(client, "ns")
    assert client.hexists(key_name("ns", "policy"), "packed")  # opening does


def test_the_python_state_layout_is_the_luas() -> None:
    source = (lua_root() / "lib" / "policy.lua").read_text()
    names = re.search(r"local STATE = \{(.*)\}", source)
    form = re.search(r"local PACKED_STATE = '(.*)'", source)
    assert names is not None and form is not None
    assert tuple(re.findall(r"'(\w+)'", names.group(1))) == STATE_FIELDS
    assert struct.calcsize(form.group(1)) == struct.calcsize(STATE_FORMAT) == 72


def test_a_state_kept_in_fields_is_read_and_packed(client: redis.Redis) -> None:
    """memevict 0.1.0 kept each state value as a field: a write reads them
    and writes the state packed, the fields removed."""
    store = MemoryStore(client, "ns", Policy(max_hot=2, protect_s=0, clock="wall"))
    store.remember("a", 1.0, now=T0)
    state = state_of(client, "ns")
    key = key_name("ns", "state")
    client.delete(key)
    fields = {k: repr(v) for k, v in state.items()}
    client.hset(key, mapping=fields)
    assert store.get("a", now=T0) is not None  # a read leaves the fields
    assert client.hlen(key) == len(STATE_FIELDS)
    store.remember("b", 2.0, now=T0 + S)
    assert client.hkeys(key) == [b"packed"]
    after = state_of(client, "ns")
    assert after["seq"] == state["seq"] + 1 and after["epoch"] == state["epoch"]
    assert store.remember("c", 3.0, now=T0 + 2 * S).evicted == ("a",)


def test_a_damaged_state_is_rebuilt(client: redis.Redis) -> None:
    store = MemoryStore(client, "ns", Policy(max_hot=2, protect_s=0, clock="wall"))
    store.remember("a", 1.0, now=T0)
    store.remember("b", 2.0, now=T0)
    client.hset(key_name("ns", "state"), "packed", b"not eight doubles")
    # The call fails NO_POLICY before any write; the store configures again,
    # which rebuilds the state from the memories (docs/operations.md: Lost keys).
    assert store.remember("c", 3.0, now=T0 + S).evicted == ("a",)
    assert len(client.hget(key_name("ns", "state"), "packed") or b"") == 72
