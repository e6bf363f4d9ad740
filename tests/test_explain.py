"""explain(id): why a memory ranks where it does, checked against top, window and get.

The property test builds random namespaces (remembers of random importances, tokens
and groups, whitelists, demotions, decay ticks, touches, recalls, evictions to the
cold tier, both clocks, a jitter of 0 now and then for exact ties) and asks explain
of every id: its rank is its place in top's list with the same score, it is in
window(tokens) exactly when the window holds it, the reason it is not is the one
top's order and the window's contents give, and its parts multiply to its score.
The other tests take each tier, each reason, the bounds, the async store and the CLI.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
import redis
import redis.asyncio
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memevict import (
    AsyncMemoryStore,
    Explanation,
    GroupFull,
    Item,
    Memory,
    MemoryStore,
    NotFound,
    OverBudget,
    Policy,
)
from memevict.cli import main
from memevict.scripts import key_name
from memevict.state import read_state
from tests.servers import Server

T0 = 1_700_000_000_000
REL = 1e-9
IDS = ("a", "b", "c", "d", "e", "f", "g")
ID = st.sampled_from(IDS)

policies = st.builds(
    Policy,
    max_hot=st.sampled_from([2, 3, 4, 10]),  # (10: protect_memories protects 1)
    evict_batch=st.integers(0, 1),
    clock=st.sampled_from(["activity", "wall"]),
    half_life_memories=st.sampled_from([1.0, 3.0]),
    half_life_s=st.sampled_from([30.0, 600.0]),
    whitelist_boost=st.sampled_from([1.0, 10.0]),
    whitelist_cap=st.integers(0, 2),
    protect_s=st.sampled_from([0.0, 0.0, 1.0]),
    protect_memories=st.sampled_from([0, 1, 3]),
    score_min=st.sampled_from([0.0, 0.1, 0.5, 2.0]),
    jitter=st.sampled_from([0.001, 0.001, 0.0]),  # (0: exact ties, ranked by id)
    cold_max=st.sampled_from([0, 2, 4, 4]),
    max_tokens=st.sampled_from([0, 0, 8, 12]),
)
remembers = st.tuples(
    st.just("remember"),
    ID,
    st.sampled_from([0.05, 0.5, 1.0, 3.0, 8.0]) | st.floats(0.01, 20.0),
    st.booleans(),
    st.sampled_from([1, 1, 2, 3, 5]),
    st.sampled_from([None, None, "p", "q"]),
)
operations = st.lists(
    st.one_of(
        remembers,
        remembers,  # (most steps remember: the hot tier fills, memories go cold)
        remembers,
        st.tuples(st.just("whitelist"), ID),
        st.tuples(st.sampled_from(["touch", "recall", "demote", "forget"]), ID),
        st.tuples(st.just("decay"), st.sampled_from([0.5, 0.9])),
        st.tuples(st.just("evict")),
        st.tuples(st.just("advance"), st.sampled_from([1, 999, 1000, 60_000])),
    ),
    max_size=16,
)
# A namespace starts with a few memories, so the steps after have some to act on.
namespaces = st.tuples(st.lists(remembers, min_size=3, max_size=8), operations).map(
    lambda parts: parts[0] + parts[1]
)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=0.0)


def build(store: MemoryStore, start: int, ops: list[tuple[Any, ...]]) -> int:
    """Runs the operations on the store; returns the namespace's now after them."""
    now = start
    for op, *args in ops:
        try:
            if op == "remember":
                id, importance, whitelist, tokens, group = args
                store.remember(
                    id, importance, whitelist=whitelist, tokens=tokens, group=group, now=now
                )
            elif op == "decay":
                store.decay(args[0])
            elif op == "evict":
                store.evict(now=now)
            elif op == "advance":
                now += args[0]
            elif op == "forget":
                store.forget(args[0])
            else:
                getattr(store, op)(args[0], now=now)
        except (NotFound, OverBudget, GroupFull):
            pass
    return now


def window_order(top: list[Memory], client: redis.Redis, namespace: str) -> list[str]:
    """The hot memories in the order the window reaches them (rule 12: top's), but
    memories whose decay keys are equal (exact ties: a jitter of 0) as it reads them:
    of one index highest id first, of several the lowest id that each offers next."""
    keys = {}
    for m in top:
        if not m.whitelisted:
            for role in ("fresh", "ghot" if m.group else "hot"):
                found = client.zscore(key_name(namespace, role), m.id)
                if found is not None:
                    keys[m.id] = (role, found)
                    break
    order: list[str] = []
    at = 0
    while at < len(top):
        run = [top[at]]
        while (
            top[at].id in keys
            and at + len(run) < len(top)
            and keys.get(top[at + len(run)].id, ("", None))[1] == keys[top[at].id][1]
        ):
            run.append(top[at + len(run)])
        streams = {
            role: sorted((m.id for m in run if keys.get(m.id, ("",))[0] == role), reverse=True)
            for role in ("hot", "ghot", "fresh", "")
        }
        while any(streams.values()):
            first = min((ids for ids in streams.values() if ids), key=lambda ids: ids[0])
            order.append(first.pop(0))
        at += len(run)
    return order


def expected_fit(
    memory: Memory, top: list[Memory], order: list[str], window: set[str], tokens: int
) -> tuple[str | None, int, int]:
    """(reason, left, cost) of a hot memory for window(tokens), from the window's order
    and contents alone: its unit is itself or its group's hot members, at the turn of
    the first of them; left is tokens less the window's units before it."""
    turn = {id: i for i, id in enumerate(order)}

    def head(m: Memory) -> int:
        return min(turn[x.id] for x in top if x.group == m.group) if m.group else turn[m.id]

    cost = sum(x.tokens for x in top if x.group == memory.group) if memory.group else memory.tokens
    mine = head(memory)
    left = tokens - sum(x.tokens for x in top if x.id in window and head(x) < mine)
    if memory.id in window:
        return None, left, cost
    if left <= 0:
        return "ranked_out", left, cost
    if cost > left:
        return ("group_does_not_fit" if memory.group else "does_not_fit"), left, cost
    return "stopped", left, cost


def check(store: MemoryStore, client: redis.Redis, now: int, tokens: int) -> list[Explanation]:
    """explain of every id (and an unknown one) agrees with get, top, window and stats."""
    top = store.top(200, now=now)
    window = store.window(tokens, now=now)
    inside = {m.id for m in window}
    order = window_order(top, client, store.namespace)
    policy = store.policy
    fresh = key_name(store.namespace, "fresh")
    found = []
    for id in (*IDS, "unknown"):
        e = store.explain(id, tokens, now=now)
        got = store.get(id, now=now)
        assert e.id == id
        if got is None:
            assert e == Explanation(id, "absent"), e
            continue
        found.append(e)
        assert e.memory == got  # (the same score, computed the same way)
        assert e.parts is not None and e.protection is not None and e.window is not None
        parts, held = e.parts, e.protection
        # The parts multiply to the score, the floor said when it applies.
        if parts.floored:
            assert got.score == policy.score_min and parts.product < policy.score_min * (1 + REL)
        else:
            assert close(parts.product, got.score), (parts, got.score)
        assert parts.boost == (policy.whitelist_boost if got.whitelisted else 1.0)
        assert parts.importance == got.importance
        assert parts.clock == policy.clock
        half_life = policy.half_life_memories if policy.clock == "activity" else policy.half_life_s
        assert parts.half_life == half_life
        if got.whitelisted:
            assert (parts.recency, parts.decay, parts.floored) == (1.0, 1.0, False)
        else:
            assert math.isclose(
                -math.log(parts.recency),
                parts.age * math.log(2) / half_life,
                rel_tol=REL,
                abs_tol=1e-12,
            )
            assert 0 < parts.decay <= 1 + REL
        assert held.until == got.protected_until
        # Tier, rank and window.
        if got.tier == "cold":
            assert e.tier == "cold" and e.rank is None and not held.protected
            assert (e.window.included, e.window.reason) == (False, "cold")
            continue
        in_fresh = client.zscore(fresh, id) is not None
        assert e.tier == ("whitelisted" if got.whitelisted else "protected" if in_fresh else "hot")
        assert e.rank is not None
        assert top[e.rank - 1].id == id and top[e.rank - 1].score == got.score, (e.rank, top)
        assert held.protected == (held.by_time or held.by_activity)
        assert e.window.included == (id in inside)
        reason, left, cost = expected_fit(got, top, order, inside, tokens)
        assert (e.window.reason, e.window.left, e.window.cost) == (reason, left, cost), e.window
        assert reason != "stopped"  # (fewer than 100 candidates here)
    hot = [e for e in found if e.tier != "cold"]
    assert sorted(e.rank or 0 for e in hot) == list(range(1, len(top) + 1))
    # stats counts the protected index as stored: the same once no protection that ran
    # out waits for a write (a memory whose time ran out may still be one of the newest).
    stats = store.stats(now=now)
    protected = sum(bool(e.protection and e.protection.protected) for e in hot)
    assert stats.protected == protected or (stats.backlog > 0 and stats.protected < protected)
    return found


@settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(policy=policies, ops=namespaces, tokens=st.integers(1, 14), later=st.sampled_from([0, 1500]))
def test_explain_agrees_with_top_window_and_get(
    client: redis.Redis, policy: Policy, ops: list[tuple[Any, ...]], tokens: int, later: int
) -> None:
    client.flushall()
    store = MemoryStore(client, "explain", policy)
    start = read_state(client, "explain")
    assert start is not None
    now = build(store, int(start["epoch"]), ops)
    check(store, client, now, tokens)
    check(store, client, now + later, tokens)  # (protection by time run out, read only)


# ---------------------------------------------------------------------------
# Each tier, each reason, and the bounds.


def scenario(client: redis.Redis, **fields: Any) -> MemoryStore:
    policy = {"clock": "wall", "protect_s": 0, "protect_memories": 0, **fields}
    return MemoryStore(client, "tiers", Policy(**policy))


def test_each_tier_and_an_unknown_id(client: redis.Redis) -> None:
    store = scenario(client, max_hot=3, cold_max=2, whitelist_cap=1, protect_s=30)
    store.remember("gone", 1, now=T0)
    store.remember("cold", 1.5, now=T0)
    store.remember("w", 2, whitelist=True, now=T0 + 40_000)
    store.remember("h1", 5, now=T0 + 40_000)  # (gone goes cold)
    store.remember("h2", 4, now=T0 + 40_000)  # (cold goes cold)
    store.remember("p", 3, text="new", now=T0 + 100_000)  # (h2 goes cold, gone past cold_max)
    now = T0 + 110_000
    tiers = {id: store.explain(id, now=now).tier for id in ("gone", "cold", "w", "h1", "h2", "p")}
    assert tiers == {
        "gone": "absent",
        "cold": "cold",
        "w": "whitelisted",
        "h1": "hot",
        "h2": "cold",
        "p": "protected",
    }
    assert store.get("gone", now=now) is None
    assert store.explain("nope", 5, now=now) == Explanation("nope", "absent")
    p = store.explain("p", now=now)
    assert p.protection is not None and p.memory is not None
    assert (p.protection.protected, p.protection.by_time, p.protection.until) == (
        True,
        True,
        T0 + 130_000,
    )
    assert p.memory.text == "new" and p.window is None
    assert [m.id for m in store.top(5, now=now)] == ["w", "h1", "p"]
    assert [store.explain(id, now=now).rank for id in ("w", "h1", "p")] == [1, 2, 3]
    # The protection ran out (read only: the index holds it until the next write).
    later = store.explain("p", now=T0 + 140_000)
    assert later.tier == "protected" and later.protection is not None
    assert not later.protection.protected


def test_protection_by_activity_says_until_which_order(client: redis.Redis) -> None:
    store = scenario(client, max_hot=100, protect_memories=3, clock="activity")
    for id in "abcd":
        store.remember(id, 1, now=T0)
    a, d = store.explain("a", now=T0), store.explain("d", now=T0)
    assert a.protection is not None and d.protection is not None
    assert not a.protection.protected and a.tier == "hot"
    assert (d.protection.by_activity, d.protection.order, d.protection.until_order) == (True, 4, 7)
    assert d.protection.order_now == 4 and d.tier == "protected"


def test_a_whitelisted_memory_below_the_floor_ranks_below_every_decaying_one(
    client: redis.Redis,
) -> None:
    store = scenario(client, score_min=1.0, whitelist_boost=1)
    store.remember("w", 0.1, whitelist=True, now=T0)
    store.remember("x", 0.01, now=T0)  # floored at 1
    store.remember("y", 0.5, now=T0)  # floored at 1
    top = [m.id for m in store.top(10, now=T0)]
    assert top[-1] == "w"
    ranks = {id: store.explain(id, now=T0).rank for id in top}
    assert ranks == {id: i for i, id in enumerate(top, 1)}
    x = store.explain("x", now=T0)
    assert (
        x.parts is not None and x.parts.floored and x.memory is not None and x.memory.score == 1.0
    )


@pytest.mark.parametrize(
    ("budget", "id", "reason", "left", "cost"),
    [
        (10, "small", None, 1, 1),  # big (9) above it, 1 left
        (9, "small", "ranked_out", 0, 1),  # big fills it
        (10, "mid", "does_not_fit", 1, 2),
        (10, "g1", "group_does_not_fit", 1, 4),  # a group of 2 + 2 tokens
        (10, "g2", "group_does_not_fit", 1, 4),  # (its group ranks by g1)
        (10, "cold", "cold", 0, 1),
    ],
)
def test_each_window_reason(
    client: redis.Redis, budget: int, id: str, reason: str | None, left: int, cost: int
) -> None:
    store = scenario(client, max_hot=5)
    store.remember("cold", 0.01, now=T0)
    store.remember("big", 9, tokens=9, now=T0)
    store.remember("mid", 5, tokens=2, now=T0)
    store.remember("g1", 4, tokens=2, group="call", now=T0)
    store.remember("g2", 0.5, tokens=2, group="call", now=T0)
    store.remember("small", 0.1, now=T0)  # ("cold" goes: max_hot 5)
    e = store.explain(id, budget, now=T0)
    assert e.window is not None
    assert (e.window.tokens, e.window.reason, e.window.left, e.window.cost) == (
        budget,
        reason,
        left,
        cost,
    )
    assert e.window.included == (id in {m.id for m in store.window(budget, now=T0)})


def test_a_window_that_stopped_before_its_turn(client: redis.Redis) -> None:
    # big leaves 1 token; 100 memories of 2 tokens in a row do not fit and the window
    # stops (rule 12) before "small", which would fit.
    store = scenario(client, max_hot=1000)
    store.remember("big", 100, tokens=9, now=T0)
    store.remember_many([Item(f"m{i}", 5 + i / 1000, tokens=2) for i in range(100)], now=T0)
    store.remember("small", 1, now=T0)
    e = store.explain("small", 10, now=T0)
    assert e.window is not None and e.rank == 102
    assert (e.window.included, e.window.reason, e.window.left, e.window.cost) == (
        False,
        "stopped",
        1,
        1,
    )
    assert [m.id for m in store.window(10, now=T0)] == ["big"]


def test_exact_ties_rank_by_id_up_to_the_bound(client: redis.Redis) -> None:
    # jitter 0 and one ms: equal keys in one index, ranked by id as top ranks them.
    store = scenario(client, max_hot=1000, jitter=0)
    store.remember("top", 2, now=T0)
    ids = [f"t{i:03}" for i in range(201)]
    store.remember_many([(x, 1.0) for x in ids[:100]], now=T0)
    store.remember_many([(x, 1.0) for x in ids[100:199]], now=T0)
    top = [m.id for m in store.top(200, now=T0)]  # (every hot memory)
    assert top == ["top", *ids[:199]]
    assert [store.explain(id, now=T0).rank for id in top[::37]] == list(range(1, 201, 37))
    # 201 ties in one index: past the 200 compared, the rank is unknown (the bound).
    store.remember_many([(x, 1.0) for x in ids[199:]], now=T0)
    assert store.explain("t150", now=T0).rank is None
    assert store.explain("top", now=T0).rank == 1


def test_the_parts_of_a_decayed_memory_on_the_wall_clock(client: redis.Redis) -> None:
    store = scenario(client, half_life_s=60, score_min=0)
    store.remember("m", 8, now=T0)
    store.decay(0.5)
    e = store.explain("m", now=T0 + 120_000)  # two half-lives
    assert e.parts is not None and e.memory is not None
    assert (e.parts.clock, e.parts.half_life) == ("wall", 60.0)
    assert math.isclose(e.parts.age, 120.0) and math.isclose(e.parts.recency, 0.25)
    assert math.isclose(e.parts.decay, 0.5)
    assert close(e.parts.product, e.memory.score) and close(
        e.memory.score, (8 + e.parts.jitter) / 8
    )


def test_the_async_store_explains_the_same(server: Server, client: redis.Redis) -> None:
    store = scenario(client, max_hot=3)
    store.remember("a", 3, tokens=2, now=T0)
    store.remember("b", 1, now=T0)

    async def main() -> list[Explanation]:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
        try:
            astore = await AsyncMemoryStore(aclient, "tiers")
            return [await astore.explain(id, 2, now=T0) for id in ("a", "b", "nope")]
        finally:
            await aclient.aclose()

    assert asyncio.run(main()) == [store.explain(id, 2, now=T0) for id in ("a", "b", "nope")]


# ---------------------------------------------------------------------------
# The CLI.


def cli(server: Server, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--url", server.url, "--namespace", "tiers", *args])
    return result.exit_code, result.output


def test_the_cli_explains(server: Server, client: redis.Redis) -> None:
    store = scenario(client, max_hot=5)
    store.remember("big", 9, tokens=9, now=T0)
    store.remember("g1", 4, tokens=2, group="call", now=T0)
    store.remember("w", 0.2, whitelist=True, now=T0)  # (2, with the boost of 10)
    code, out = cli(server, "explain", "g1", "--tokens", "10", "--now", str(T0))
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "g1: hot, rank 2 (as top orders the hot memories)"
    assert lines[1].startswith("  score 4.00") and "x boost 1 +" in lines[1]
    assert lines[-2] == "  tokens 2, group call"
    assert (
        lines[-1]
        == "  not in window(10): its group's 2 tokens do not fit in the 1 left at its turn"
    )
    code, out = cli(server, "explain", "w", "--json", "--now", str(T0))
    data = json.loads(out)
    assert code == 0 and data["tier"] == "whitelisted" and data["rank"] == 3
    assert data["parts"]["boost"] == 10.0 and data["window"] is None
    code, out = cli(server, "explain", "nope")
    assert code == 1 and out.strip() == "Error: NotFound: no memory nope"
    code, out = cli(server, "explain", "nope", "--json")
    assert code == 0 and json.loads(out) == {
        "id": "nope",
        "tier": "absent",
        "memory": None,
        "parts": None,
        "protection": None,
        "rank": None,
        "window": None,
    }
    assert cli(server, "explain", "g1", "--tokens", "0")[0] == 1  # (BadTokens, one line)


def test_exact_ties_in_a_window_are_explained_in_the_windows_order(client: redis.Redis) -> None:
    # jitter 0, one ms: a and b tie exactly. top ranks them by id; the window reads the
    # index highest id first (lib/window.lua), and explain's reason follows the window.
    store = scenario(client, jitter=0)
    store.remember("a", 1, now=T0)
    store.remember("b", 1, now=T0)
    assert [m.id for m in store.top(2, now=T0)] == ["a", "b"]
    assert [m.id for m in store.window(1, now=T0)] == ["b"]
    a, b = store.explain("a", 1, now=T0), store.explain("b", 1, now=T0)
    assert (a.rank, b.rank) == (1, 2)
    assert a.window is not None and b.window is not None
    assert (a.window.included, a.window.reason, a.window.left) == (False, "ranked_out", 0)
    assert (b.window.included, b.window.reason, b.window.left) == (True, None, 1)
