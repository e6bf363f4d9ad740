"""Model-based test: random operation sequences on a real store and on tests/model.py.

Each example draws a small policy (either clock), then runs up to STEPS
operations (policy changes, and memories whose importance comes from the
built-in labeler, included) with an explicit, only-advancing clock on a small
id alphabet (so operations collide on the same memories), applying each to
the store and to the model. Every reply must match the model's, and
after every step the whole state must too: every hot memory field by field and
in order through top(), every cold one through get(), stats(), and the raw
keys of the namespace (which ids exist, each index's members, texts, the
jitter counter and decay sum).

It runs once per server leg (the ``client`` fixture). MEMEVICT_MODEL_EXAMPLES
sets the number of examples per leg, e.g. higher for a long hunt.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Sequence

import pytest
import redis
from hypothesis import HealthCheck, reject, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from memevict import Memory, MemoryStore, NotFound, OverBudget, Policy, Remembered
from memevict.importance import Message, category_of, importance_of, label, rules
from memevict.scripts import key_name
from memevict.state import unpack_state
from tests.model import Mem, Model, NearTie, TooCostly, Unknown

NAMESPACE = "model"
IDS = ("a", "b", "c", "d", "e", "f", "g")
REL = 1e-9  # scores: the store's rounding differs from the model's far below this
EXAMPLES = int(os.environ.get("MEMEVICT_MODEL_EXAMPLES", "200"))
STEPS = 30

ids = st.sampled_from(IDS)
# Small fixed values make ties of importance x recency (up to jitter) likely;
# the floats cover the rest, down to scores below the floor.
importances = st.sampled_from([0.5, 1.0, 2.0, 3.0, 8.0]) | st.floats(0.01, 20.0)
rates = st.sampled_from([0.5, 0.9, 1.0]) | st.floats(0.01, 1.0)
# 1000 and 2000 land exactly on protection ends (protect_s 0, 1 or 2); minutes
# (half_life_s is one) let recency outweigh importance.
steps_ms = st.sampled_from([0, 1, 999, 1000, 2000, 60_000, 180_000]) | st.integers(0, 240_000)
texts = st.sampled_from([None, "x", "y"])
# Costs (docs/rules.md, rule 10) and groups (rule 11): two groups on seven ids link
# memories often enough that groups are evicted, recalled and forgotten whole.
costs = st.sampled_from([1, 1, 2, 3, 5, 7])
linked = st.sampled_from([None, "p", "p", "q"])
budgets = st.sampled_from([0, 0, 6, 10])
# Small hot tiers, so most steps evict; now and then one of 10 or 20, where a tenth
# of max_hot lets protect_memories protect 1 or 2 of the newest (docs/rules.md, rule 5).
hot_sizes = st.sampled_from([2, 3, 4, 2, 3, 4, 10, 20])
# Messages for the labeler, one per category, each with the category the docs'
# rules give it (decided by hand, not by running the labeler).
LABELLED = (
    (Message("hi!", role="user"), "chitchat"),
    (Message("From now on, answer in French.", role="user"), "instruction"),
    (Message("my password is hunter2", role="user"), "instruction"),
    (Message("Traceback (most recent call last):\nKeyError: 3", role="tool"), "tool_error"),
    (Message("The budget for Q3 is $12,000.", role="user"), "business"),
    (Message("The root cause was a stale cache.", role="assistant"), "conclusion"),
    (Message("the design of the parser came up at length", role="user"), "context"),
    (Message("ls -la", kind="function_call"), "context"),
)
# Both clocks, and half-lives short enough that recency matters on each.
clocks = st.sampled_from(["wall", "activity"])
half_lives_s = st.sampled_from([30.0, 60.0, 600.0])
half_lives_memories = st.sampled_from([1.0, 2.0, 5.0])
policies = st.builds(
    Policy,
    max_hot=hot_sizes,
    evict_batch=st.integers(0, 1),
    clock=clocks,
    half_life_memories=half_lives_memories,
    half_life_s=half_lives_s,
    whitelist_boost=st.sampled_from([1.0, 10.0]),
    whitelist_cap=st.integers(0, 2),
    protect_s=st.sampled_from([0.0, 1.0, 2.0]),
    protect_memories=st.sampled_from([0, 1, 3]),
    score_min=st.sampled_from([0.0, 0.1, 0.5]),
    jitter=st.just(0.001),
    cold_max=st.integers(0, 3),
    max_tokens=budgets,
)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=0.0)


def assert_remembered(got: Remembered | None, want: Remembered | None) -> None:
    if want is None or got is None:
        assert got == want
        return
    assert (got.id, got.evicted, got.demoted, got.over, got.over_tokens) == (
        want.id,
        want.evicted,
        want.demoted,
        want.over,
        want.over_tokens,
    )
    assert close(got.score, want.score), (got.score, want.score)


def assert_memory(got: Memory | None, want: Memory | None) -> None:
    if want is None or got is None:
        assert got == want
        return
    # Everything exact but the score, which the store computes from its decay key.
    assert got == dataclasses.replace(want, score=got.score)
    assert close(got.score, want.score), (want.id, got.score, want.score)


def assert_order(got: Sequence[str], groups: list[list[str]]) -> None:
    """got is the start of the runs' concatenation, any order inside a near-tied run."""
    rest = list(got)
    for group in groups:
        if not rest:
            return
        head, rest = rest[: len(group)], rest[len(group) :]
        if len(head) == len(group):
            assert sorted(head) == sorted(group), (got, groups)
        else:
            assert set(head) <= set(group), (got, groups)
    assert not rest, (got, groups)


def machine(client: redis.Redis) -> type[RuleBasedStateMachine]:
    keys = {role: key_name(NAMESPACE, role) for role in ("meta", "text", "state")}
    zsets = {
        role: key_name(NAMESPACE, role)
        for role in ("hot", "fresh", "prot", "wl", "cold", "ghot", "groups", "links")
    }

    class Eviction(RuleBasedStateMachine):
        store: MemoryStore
        model: Model
        now: int

        def __init__(self) -> None:
            super().__init__()
            client.flushall()

        @initialize(policy=policies, batch=st.lists(st.tuples(ids, importances), max_size=6))
        def start(self, policy: Policy, batch: list[tuple[str, float]]) -> None:
            self.store = MemoryStore(client, NAMESPACE, policy)
            # The namespace's clock starts at the server's time; starting the
            # test clock there keeps the store's decay keys small and exact.
            self.now = int(unpack_state(client.hget(keys["state"], "packed"))["epoch"])  # type: ignore[arg-type]
            self.model = Model(policy, self.now)
            # Hypothesis may leave the rules that add memories out of a whole
            # example (swarm testing); start with some so the others have work.
            self.remember_several(batch)

        @rule(ms=steps_ms)
        def advance(self, ms: int) -> None:
            self.now += ms

        @rule(id=ids, importance=importances, text=texts, whitelist=st.booleans(), after=steps_ms)
        def remember_later(
            self, id: str, importance: float, text: str | None, whitelist: bool, after: int
        ) -> None:
            # Whitelisted memories of different ages make the cap rank by recency.
            self.advance(after)
            self.remember(id, importance, text, whitelist)

        @rule(
            id=ids,
            importance=importances,
            text=texts,
            whitelist=st.booleans(),
            tokens=costs,
            group=linked,
        )
        def remember(
            self,
            id: str,
            importance: float,
            text: str | None,
            whitelist: bool,
            tokens: int = 1,
            group: str | None = None,
        ) -> None:
            try:
                want = self.model.remember(id, importance, text, whitelist, self.now, tokens, group)
            except NearTie:
                reject()
            except TooCostly:
                with pytest.raises(OverBudget):
                    self.store.remember(id, importance, tokens=tokens, now=self.now)
                return
            got = self.store.remember(
                id,
                importance,
                text=text,
                whitelist=whitelist,
                tokens=tokens,
                group=group,
                now=self.now,
            )
            assert_remembered(got, want)

        # Importance as an agent gets it: from the built-in labeler. The category
        # of each message is known by hand (the rules of docs/rules.md), so the model
        # takes the table's value and the store the labeler's.
        @rule(id=ids, labelled=st.sampled_from(LABELLED), whitelist=st.booleans())
        def remember_labelled(
            self, id: str, labelled: tuple[Message, str], whitelist: bool
        ) -> None:
            message, category = labelled
            importance = importance_of(rules, message)
            assert category_of(importance) == category, (message, label(message))
            self.remember(id, importance, message.text, whitelist)

        # Hypothesis picks among rules evenly; this second way in keeps the hot
        # tier full enough that most steps evict, demote or recall something.
        @rule(batch=st.lists(st.tuples(ids, importances), min_size=1, max_size=4))
        def remember_several(self, batch: list[tuple[str, float]]) -> None:
            for id, importance in batch:
                self.remember(id, importance, None, False)

        def pick(self, data: st.DataObject, acts_on: Callable[[Mem], bool]) -> str:
            # Half the time an id the operation acts on (else any the model holds),
            # half the time any id, unknown ones included.
            held = self.model.memories.values()
            useful = sorted(m.id for m in held if acts_on(m)) or sorted(m.id for m in held)
            return data.draw(st.sampled_from(useful) | ids if useful else ids, label="id")

        @rule(data=st.data())
        def touch(self, data: st.DataObject) -> None:
            id = self.pick(data, lambda m: not m.cold)
            try:
                want = self.model.touch(id, self.now)
            except NearTie:
                reject()
            except Unknown:
                with pytest.raises(NotFound):
                    self.store.touch(id, now=self.now)
                return
            assert_remembered(self.store.touch(id, now=self.now), want)

        @rule(rate=rates)
        def decay(self, rate: float) -> None:
            self.model.decay(rate)
            self.store.decay(rate)

        @rule()
        def evict(self) -> None:
            try:
                want = self.model.evict(self.now)
            except NearTie:
                reject()
            assert self.store.evict(now=self.now) == want

        def by_id(self, op: str, id: str) -> None:
            """whitelist, demote or recall: NotFound for an unknown id."""
            try:
                want = getattr(self.model, op)(id, self.now)
            except NearTie:
                reject()
            except Unknown:
                with pytest.raises(NotFound):
                    getattr(self.store, op)(id, now=self.now)
                return
            assert_remembered(getattr(self.store, op)(id, now=self.now), want)

        @rule(data=st.data())
        def whitelist(self, data: st.DataObject) -> None:
            self.by_id("whitelist", self.pick(data, lambda m: not m.whitelisted))

        @rule(data=st.data())
        def demote(self, data: st.DataObject) -> None:
            self.by_id("demote", self.pick(data, lambda m: m.whitelisted))

        @rule(data=st.data())
        def recall(self, data: st.DataObject) -> None:
            self.by_id("recall", self.pick(data, lambda m: m.cold))

        @rule(data=st.data())
        def forget(self, data: st.DataObject) -> None:
            id = self.pick(data, lambda m: True)
            try:
                self.model.forget(id)
            except Unknown:
                with pytest.raises(NotFound):
                    self.store.forget(id)
                return
            self.store.forget(id)

        # A new clock or half-life (and lower caps) from now on: recency already
        # lost stays lost for every memory, in scores, eviction and demotion.
        @rule(
            clock=clocks,
            half_life_s=half_lives_s,
            half_life_memories=half_lives_memories,
            max_hot=hot_sizes,
            whitelist_cap=st.integers(0, 2),
            max_tokens=budgets,
            protect_memories=st.sampled_from([0, 1, 3]),
        )
        def set_policy(
            self,
            clock: str,
            half_life_s: float,
            half_life_memories: float,
            max_hot: int,
            whitelist_cap: int,
            max_tokens: int,
            protect_memories: int,
        ) -> None:
            policy = dataclasses.replace(
                self.model.policy,
                clock=clock,
                half_life_s=half_life_s,
                half_life_memories=half_life_memories,
                max_hot=max_hot,
                whitelist_cap=whitelist_cap,
                max_tokens=max_tokens,
                protect_memories=protect_memories,
            )
            try:
                self.model.set_policy(policy, self.now)
            except NearTie:
                reject()
            assert self.store.set_policy(policy, now=self.now) == policy

        @rule(k=st.integers(0, 4))
        def top_k(self, k: int) -> None:
            got = [m.id for m in self.store.top(k, now=self.now)]
            assert len(got) == min(k, len(self.model.hot()))
            assert_order(got, self.model.top_groups(self.now))

        @rule(tokens=st.none() | st.integers(1, 15))
        def window(self, tokens: int | None) -> None:
            try:
                want = self.model.window(tokens, self.now)
            except NearTie:
                reject()
            got = self.store.window(tokens, now=self.now)
            assert [m.id for m in got] == want
            assert got.tokens == sum(m.tokens for m in got) <= (tokens or got.tokens)
            assert got.left == len(self.model.hot()) - len(want)

        @rule(data=st.data())
        def get(self, data: st.DataObject) -> None:
            id = self.pick(data, lambda m: True)
            assert_memory(self.store.get(id, now=self.now), self.model.get(id, self.now))

        # A call from a worker whose clock is behind (or an explicit now from the
        # past): the namespace's time never runs backwards.
        @rule(
            back=st.sampled_from([1, 1000, 60_000]) | st.integers(1, 240_000),
            op=st.sampled_from(["remember", "touch", "recall", "whitelist", "evict", "top", "get"]),
            id=ids,
            importance=importances,
            data=st.data(),
        )
        def from_the_past(
            self, back: int, op: str, id: str, importance: float, data: st.DataObject
        ) -> None:
            now, self.now = self.now, self.now - back
            try:
                if op == "remember":
                    self.remember(id, importance, None, False)
                elif op == "evict":
                    self.evict()
                elif op == "top":
                    self.top_k(4)
                else:
                    getattr(self, op)(data)
            finally:
                self.now = now

        @invariant()
        def agrees(self) -> None:
            # Hot memories are checked field by field through top(), gone ones
            # through the raw meta hash; get() covers the cold ones here and
            # any one id in the `get` rule.
            self.same_top()
            for m in self.model.cold():
                assert_memory(self.store.get(m.id, now=self.now), self.model.get(m.id, self.now))
            assert self.store.stats(now=self.now) == self.model.stats(self.now)
            self.same_indexes()

        def same_top(self) -> None:
            hot = len(self.model.hot())
            got = self.store.top(hot + 1, now=self.now)
            assert_order([m.id for m in got], self.model.top_groups(self.now))
            assert len(got) == hot
            for m in got:
                assert_memory(m, self.model.get(m.id, self.now))

        def same_indexes(self) -> None:
            pipe = client.pipeline(transaction=False)
            pipe.hkeys(keys["meta"])
            pipe.hgetall(keys["text"])
            pipe.hgetall(keys["state"])
            for key in zsets.values():
                pipe.zrange(key, 0, -1, withscores=True)
            meta, text, state, *indexes = pipe.execute()
            raw = {
                role: {member.decode(): score for member, score in entries}
                for role, entries in zip(zsets, indexes, strict=True)
            }
            model = self.model
            hot = [m for m in model.hot() if not m.whitelisted]
            evictable = [m for m in hot if not m.in_fresh]
            assert {m.decode() for m in meta} == set(model.memories)
            assert {k.decode(): v.decode() for k, v in text.items()} == {
                m.id: m.text for m in model.memories.values() if m.text is not None
            }
            assert set(raw["hot"]) == {m.id for m in evictable if m.group is None}
            assert set(raw["ghot"]) == {m.id for m in evictable if m.group is not None}
            assert set(raw["groups"]) == {u[0].group for u in model.units() if u[0].group}
            assert set(raw["links"]) == {
                f"{m.group}\0{m.id}" for m in model.memories.values() if m.group
            }
            assert set(raw["fresh"]) == {m.id for m in hot if m.in_fresh}
            assert set(raw["wl"]) == {m.id for m in model.hot() if m.whitelisted}
            assert raw["prot"] == {m.id: m.prot_key for m in model.hot() if m.in_prot}
            # the cold tier: by eviction ms, then lowest score first
            assert {id: math.floor(at) for id, at in raw["cold"].items()} == {
                m.id: m.cold_since for m in model.cold()
            }
            assert sorted(raw["cold"], key=raw["cold"].__getitem__) == [
                m.id for m in model.cold_order()
            ]
            assert set(state) == {b"packed"}
            fields = unpack_state(state[b"packed"])
            assert fields["seq"] == model.seq
            assert math.isclose(fields["decay"], model.decay_sum, abs_tol=1e-12)

    return Eviction


def test_store_follows_the_model(client: redis.Redis) -> None:
    run_state_machine_as_test(
        machine(client),
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
