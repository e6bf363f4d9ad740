"""T8: window() on a namespace of many hot memories, server time per call.

The namespace holds ``memories`` hot memories, none evicted (protect_s=0):
tokens random in 10..500 with a text of 4 bytes per token, 1 in 100
whitelisted, and of every four memories two are alone and two are a pair in
one group. The cases, in interleaved rounds:

  window(tokens=B) for each budget B; call k of a run asks for B - k tokens.
            Whether the chosen memories fill the budget exactly decides how
            far a call looks (it stops when nothing is left, else it goes on
            through the candidates for one small enough), so a run covers a
            spread of budgets rather than one lucky or unlucky number.
  window()  no budget: every hot memory, at most 400 (for information)

The server time of every call is read on its own (INFO commandstats after
each call: EVALSHA_RO or FCALL_RO, the script's entry only).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import redis

from memevict.bench.peers import FILL_BATCH, importance
from memevict.bench.server import BenchKeys, time_script_calls
from memevict.bench.timing import Sample, Samples, rotated
from memevict.commands import Item
from memevict.policy import Policy
from memevict.results import Window
from memevict.store import MemoryStore

NO_BUDGET = "no budget"
TOKENS = (10, 500)
TEXT_BYTES_PER_TOKEN = 4
WHITELIST_EVERY = 100
SEED = 8


@dataclass(frozen=True)
class WindowCase:
    """One case's calls: ``sample`` has each round's mean server time per call."""

    budget: int | None
    sample: Sample
    worst_server_us: float  # the slowest single call
    memories: float  # returned per call, mean
    tokens: float


@dataclass(frozen=True)
class Windows:
    memories: int  # hot memories in the namespace
    whitelisted: int
    grouped: int
    cases: dict[str, WindowCase]  # str(budget) or NO_BUDGET

    def worst_budget(self) -> WindowCase | None:
        """The budget case with the highest server time per call."""
        budgeted = [c for c in self.cases.values() if c.budget is not None]
        return max(budgeted, key=lambda c: c.sample.server_us or 0.0, default=None)


def case_name(budget: int | None) -> str:
    return NO_BUDGET if budget is None else f"{budget:,} tokens"


def fill_window_store(client: redis.Redis, namespace: str, memories: int) -> MemoryStore:
    policy = Policy(max_hot=memories, protect_s=0, protect_memories=0, whitelist_cap=200)
    store = MemoryStore(client, namespace, policy, replace_policy=True)
    rnd = random.Random(SEED)
    for start in range(0, memories, FILL_BATCH):
        batch = []
        for i in range(start, min(memories, start + FILL_BATCH)):
            tokens = rnd.randint(*TOKENS)
            batch.append(
                Item(
                    f"w{i}",
                    importance(i),
                    text="x" * (TEXT_BYTES_PER_TOKEN * tokens),
                    whitelist=i % WHITELIST_EVERY == 0,
                    tokens=tokens,
                    group=f"pair-{i // 4}" if i % 4 >= 2 else None,
                )
            )
        store.remember_many(batch)
    return store


def measure_window(
    client: redis.Redis,
    keys: BenchKeys,
    *,
    memories: int,
    budgets: tuple[int, ...],
    rounds: int,
    calls: int,
    progress: Callable[[str], None],
) -> Windows:
    store = fill_window_store(client, keys.namespace("window"), memories)
    stats = store.stats()
    if stats.hot != memories:
        raise RuntimeError(f"window: {stats.hot:,} hot memories, expected {memories:,}")
    cases: list[int | None] = [*budgets, None]
    samples = Samples()
    worst: dict[str, float] = {}
    returned: dict[str, list[tuple[int, int]]] = {}
    for r in range(rounds):
        for budget in rotated(cases, r):
            name = case_name(budget)

            def call(k: int, budget: int | None = budget) -> Window:
                return store.window(None if budget is None else max(1, budget - k))

            found = time_script_calls(client, call, calls)
            usecs = [usec for _, _, usec in found]
            samples.add(name, [s for _, s, _ in found], server_us=statistics.fmean(usecs))
            worst[name] = max(worst.get(name, 0.0), *usecs)
            returned.setdefault(name, []).extend((len(w), w.tokens) for w, _, _ in found)
        progress(f"window: round {r + 1}/{rounds}")
    return Windows(
        memories=memories,
        whitelisted=stats.whitelisted,
        grouped=sum(1 for i in range(memories) if i % 4 >= 2),
        cases={
            case_name(budget): WindowCase(
                budget=budget,
                sample=samples.sample(case_name(budget)),
                worst_server_us=worst[case_name(budget)],
                memories=statistics.fmean(n for n, _ in returned[case_name(budget)]),
                tokens=statistics.fmean(t for _, t in returned[case_name(budget)]),
            )
            for budget in cases
        },
    )
