"""T7: an evicting remember() with token budgets and linked memories in use,
against one without, on the same server in the same run.

One namespace per arm, each at the steady state of an agent's memory that is
full: protect_s=0 (a new memory is evictable at once) and cold_max =
capacity (the cold tier is trimmed as it fills):

  plain   tokens 1, no group, a count budget (max_hot = capacity): every
          remember evicts one memory
  tokens  tokens random in 10..500, a token budget (max_tokens = capacity x
          255, the mean cost; max_hot out of reach); of every four memories
          two are alone and two are a pair in one group (a tool call and its
          output), so half of the memories are linked
  ttl     the tokens arm with idle_ttl_s set, for information: every write
          also sets the expiry of the namespace's keys

Under a token budget a remember evicts only when the new memory does not fit
in what the last eviction left, and then often more than one memory (a pair,
or several small ones for a large one), where every evicting call of plain
evicts exactly one. So the server time of every call is read on its own
(INFO commandstats after each call, the script-entry commands only), and the
ratio (T7) compares the calls that did the same eviction work, one memory
moved to the cold tier: the median over rounds of tokens' mean over plain's
mean, rounds interleaved. Every evicting call, whatever it moved, is
reported beside it.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import redis

from memevict.bench.peers import FILL_BATCH, importance
from memevict.bench.server import BenchKeys, time_script_calls
from memevict.bench.timing import Sample, Samples, rotated, server_time_ratio
from memevict.commands import Item
from memevict.policy import Policy
from memevict.results import Remembered
from memevict.store import MemoryStore

ARMS = ("plain", "tokens", "ttl")
TOKENS = (10, 500)  # a memory's cost, uniform in this range
MEAN_TOKENS = 255
IDLE_TTL_S = 86_400.0
SEED = 14


@dataclass(frozen=True)
class Arm:
    """One arm's calls: ``sample`` has every call's latency and, per round,
    the mean server time of the calls that evicted exactly one memory."""

    sample: Sample
    evicting: float  # share of the calls that evicted
    evicted_per_eviction: float  # memories moved to cold per evicting call
    evicting_server_us: float | None  # median over rounds, every call that evicted
    quiet_server_us: float | None  # median over rounds, calls that evicted nothing
    every_server_us: float  # median over rounds, every call


@dataclass(frozen=True)
class Budget:
    capacity: int  # plain's max_hot; the token arms' max_tokens is capacity x MEAN_TOKENS
    max_tokens: int
    arms: dict[str, Arm]

    def ratio(self, arm: str = "tokens") -> float | None:
        """``arm``'s server time per remember that evicted one memory over
        plain's, paired by round."""
        return server_time_ratio(self.arms[arm].sample, self.arms["plain"].sample)

    def evicting_ratio(self, arm: str = "tokens") -> float | None:
        """The same over every call that evicted, whatever it moved (medians
        over rounds)."""
        mine, plain = self.arms[arm].evicting_server_us, self.arms["plain"].evicting_server_us
        return None if mine is None or not plain else mine / plain

    def every_ratio(self, arm: str = "tokens") -> float:
        """The same over every call, evicting or not (medians over rounds)."""
        return self.arms[arm].every_server_us / self.arms["plain"].every_server_us


class _Workload:
    """One arm's namespace and its remember(i), the same memory for a given i
    whether filled in batches or remembered one by one."""

    def __init__(self, client: redis.Redis, namespace: str, arm: str, capacity: int) -> None:
        self.arm, self.next_id = arm, 0
        if arm == "plain":
            policy = Policy(max_hot=capacity, protect_s=0, protect_memories=0, cold_max=capacity)
        else:
            policy = Policy(
                max_hot=100 * capacity,
                max_tokens=capacity * MEAN_TOKENS,
                protect_s=0,
                protect_memories=0,
                cold_max=capacity,
                idle_ttl_s=IDLE_TTL_S if arm == "ttl" else 0.0,
            )
        self.store = MemoryStore(client, namespace, policy, replace_policy=True)
        self._tokens = random.Random(SEED)

    def item(self, i: int) -> Item:
        if self.arm == "plain":
            return Item(f"{self.arm}-{i}", importance(i))
        tokens = self._tokens.randint(*TOKENS)
        group = f"pair-{i // 4}" if i % 4 >= 2 else None
        return Item(f"{self.arm}-{i}", importance(i), tokens=tokens, group=group)

    def remember(self, i: int) -> Remembered:
        m = self.item(i)
        return self.store.remember(m.id, m.importance, tokens=m.tokens, group=m.group)

    def fill(self, count: int, warm_up: int) -> None:
        """count memories in batches (filling the budget and the cold tier),
        then warm_up more one by one."""
        for start in range(0, count, FILL_BATCH):
            end = min(count, start + FILL_BATCH)
            self.store.remember_many([self.item(i) for i in range(start, end)])
        for i in range(count, count + warm_up):
            self.remember(i)
        self.next_id = count + warm_up


def measure_budget(
    client: redis.Redis,
    keys: BenchKeys,
    *,
    capacity: int,
    rounds: int,
    ops: int,
    progress: Callable[[str], None],
) -> Budget:
    workloads = {
        arm: _Workload(client, keys.namespace(f"budget-{arm}"), arm, capacity) for arm in ARMS
    }
    for workload in workloads.values():
        workload.fill(3 * capacity, capacity)
    samples = Samples()
    calls = dict.fromkeys(ARMS, 0)
    evicting = dict.fromkeys(ARMS, 0)
    evicted = dict.fromkeys(ARMS, 0)
    quiet: dict[str, list[float]] = {arm: [] for arm in ARMS}
    evicting_us: dict[str, list[float]] = {arm: [] for arm in ARMS}
    every: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for r in range(rounds):
        for arm in rotated(ARMS, r):
            w = workloads[arm]
            found = time_script_calls(client, w.remember, ops, w.next_id)
            w.next_id += ops
            moved = [(len(reply.evicted), usec) for reply, _, usec in found]
            evicted_us = [usec for n, usec in moved if n > 0]
            one_us = [usec for n, usec in moved if n == 1]
            quiet_us = [usec for n, usec in moved if n == 0]
            calls[arm] += ops
            evicting[arm] += len(evicted_us)
            evicted[arm] += sum(n for n, _ in moved)
            every[arm].append(statistics.fmean(usec for _, usec in moved))
            if quiet_us:
                quiet[arm].append(statistics.fmean(quiet_us))
            if evicted_us:
                evicting_us[arm].append(statistics.fmean(evicted_us))
            samples.add(
                arm,
                [seconds for _, seconds, _ in found],
                server_us=statistics.fmean(one_us) if one_us else None,
            )
        progress(f"token budgets: round {r + 1}/{rounds}")
    return Budget(
        capacity=capacity,
        max_tokens=capacity * MEAN_TOKENS,
        arms={
            arm: Arm(
                sample=samples.sample(arm),
                evicting=evicting[arm] / calls[arm],
                evicted_per_eviction=evicted[arm] / evicting[arm] if evicting[arm] else 0.0,
                evicting_server_us=(
                    statistics.median(evicting_us[arm]) if evicting_us[arm] else None
                ),
                quiet_server_us=statistics.median(quiet[arm]) if quiet[arm] else None,
                every_server_us=statistics.median(every[arm]),
            )
            for arm in ARMS
        },
    )
