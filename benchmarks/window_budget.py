"""window() with a token budget on a large store: what it returns and its server time.

Since b130e70 no count of memories cuts a budgeted window (before: at most
400 memories of 500 candidates): it takes memories until its budget is
full, its work bounded by what it returns plus 500 candidates not taken.
So its cost grows with the budget. For each ``--memories`` N, a namespace of
N hot memories, agent-like (text 100..400 bytes, tokens 10..120 in step
with it, importances 1..10, about a fifth in groups of 2 or 3; none
evicted, none whitelisted), filled by remember_many of 100. Then, in
``--rounds`` interleaved rounds (the order rotating) of ``--calls`` calls
each, store.window() for budgets of 2,000 / 8,000 / 32,000 / 128,000
tokens, without a budget, and, up to 10,000 memories, with a budget of the
whole hot tier's tokens (the worst case: every memory returned). Server
time from INFO commandstats, the script entry only (FCALL_RO or
EVALSHA_RO; its inner commands are counted on lines of their own, inside
it): per call, median of the rounds' means, and the slowest single call,
against T4's 5 ms. Then window.lua of ``--base`` (default b130e70~1, the
last before that change) against the working tree's on the same
namespace, as benchmarks/window_ab.py compares them: EVALSHA, interleaved,
B / A paired by round, the replies checked.

    python benchmarks/window_budget.py [URL] [--memories 10000,1000000]
        [--rounds 9] [--calls 5] [--base b130e70~1]

Without URL it runs on an embedded Valkey. Given one it FLUSHES that server.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import redis
from ab import connected, server_version  # benchmarks/ab.py
from window_ab import compare, row_line  # benchmarks/window_ab.py

from memevict import Item, MemoryStore, Policy
from memevict.bench.server import time_script_calls
from memevict.bench.timing import rotated
from memevict.errors import MemevictError
from memevict.results import Window

NAMESPACE = "wb"
BUDGETS = (2_000, 8_000, 32_000, 128_000)
COMPARED = ("2000", "8000", "32000")  # the budgets base and working tree are compared at
WHOLE_UP_TO = 10_000  # the whole-tier budget only up to this many memories (it returns them all)
T4_MS = 5.0
BATCH = 100  # remember_many's most items per call
GROUPED = 0.09  # the share of units (a memory alone, or a group) that are a group of 2 or 3
LARGEST_GROUP = 3
TOKENS = (10, 120)
TEXT = (100, 400)  # bytes, in step with the tokens
WORDS = (
    "the user asked whether the deploy finished and the assistant checked the logs then "
    "summarised the failing step with the error and a suggested fix for the config file "
)


def items(memories: int, seed: int = 25) -> list[Item]:
    """N agent-like memories, the same for a seed: ids m0.. in the order remembered."""
    rnd = random.Random(seed)
    words = WORDS * 4
    out: list[Item] = []
    while len(out) < memories:
        size = rnd.choice((2, 3)) if rnd.random() < GROUPED else 1
        group = f"g{len(out)}" if size > 1 else None
        for _ in range(min(size, memories - len(out))):
            tokens = rnd.randint(*TOKENS)
            length = TEXT[0] + (tokens - TOKENS[0]) * (TEXT[1] - TEXT[0]) // (TOKENS[1] - TOKENS[0])
            start = rnd.randrange(len(WORDS))
            i = len(out)
            text = f"[{i}] {words[start : start + length]}"[:length]
            out.append(
                Item(f"m{i}", float(rnd.randint(1, 10)), text=text, tokens=tokens, group=group)
            )
    return out


def fill(client: redis.Redis, memories: int) -> MemoryStore:
    """The namespace, every memory hot (max_hot is N, protect_s 0: none protected)."""
    store = MemoryStore(
        client, NAMESPACE, Policy(max_hot=memories, protect_s=0), replace_policy=True
    )
    all_items = items(memories)
    for start in range(0, memories, BATCH):
        store.remember_many(all_items[start : start + BATCH])
    return store


@dataclass(frozen=True)
class Case:
    name: str
    budget: int | None
    memories: int = 0  # returned (every call of a case returns the same)
    tokens: int = 0
    server_us: float = 0.0  # median over rounds of the round's mean per call
    slowest_us: float = 0.0  # the slowest single call
    error: str | None = None  # the call's error, if it failed (then not timed)

    def line(self) -> str:
        if self.error is not None:
            return f"  {self.name:26s} error: {self.error}"
        ms = self.server_us / 1000
        return (
            f"  {self.name:26s} {self.memories:9,} {self.tokens:11,} {ms:10.2f}"
            f" {self.slowest_us / 1000:11.2f}  {'over' if ms > T4_MS else 'within'}"
        )


def measure(
    client: redis.Redis,
    store: MemoryStore,
    cases: Sequence[tuple[str, int | None]],
    rounds: int,
    calls: int,
) -> list[Case]:
    """Each case called once (what it returns; a case whose call fails is reported,
    not timed), then timed in ``rounds`` rounds, the case order rotating."""
    returned: dict[str, tuple[int, int]] = {}
    failed: dict[str, Case] = {}
    for name, budget in cases:
        try:
            window = store.window(budget)
        except MemevictError as e:
            failed[name] = Case(name, budget, error=str(e))
        else:
            returned[name] = (len(window), window.tokens)
    timed = [(name, budget) for name, budget in cases if name in returned]
    means: dict[str, list[float]] = {name: [] for name, _ in timed}
    slowest: dict[str, float] = dict.fromkeys(means, 0.0)
    for r in range(rounds):
        for name, budget in rotated(timed, r):

            def call(_: int, budget: int | None = budget) -> Window:
                return store.window(budget)

            found = time_script_calls(client, call, calls)
            usecs = [usec for _, _, usec in found]
            means[name].append(statistics.fmean(usecs))
            slowest[name] = max(slowest[name], *usecs)
            for window, _, _ in found:
                got = (len(window), window.tokens)
                assert got == returned[name], f"{name}: {returned[name]} then {got}"
    return [
        failed.get(name)
        or Case(name, budget, *returned[name], statistics.median(means[name]), slowest[name])
        for name, budget in cases
    ]


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("url", nargs="?")
    cli.add_argument("--memories", default="10000,1000000", help="comma-separated sizes")
    cli.add_argument("--rounds", type=int, default=9)
    cli.add_argument("--calls", type=int, default=5, help="calls per case and round")
    cli.add_argument("--base", default="b130e70~1", help="git revision or lua/ directory")
    opts = cli.parse_args()
    sizes = [int(n.replace("_", "")) for n in opts.memories.split(",")]
    with connected(opts.url) as client:
        allocator = client.info("memory").get("mem_allocator", "?")
        print(f"server {server_version(client)} ({allocator}), {opts.url or 'embedded Valkey'}")
        for n in sizes:
            client.flushall()
            t0 = time.monotonic()
            store = fill(client, n)
            filled = time.monotonic() - t0
            stats = store.stats()
            assert stats.hot == n, f"{stats.hot:,} hot memories, expected {n:,}"
            used = client.info("memory")["used_memory"] / 2**20
            cases: list[tuple[str, int | None]] = [(f"{b:,} tokens", b) for b in BUDGETS]
            if n <= WHOLE_UP_TO:
                cases.append((f"whole tier ({stats.tokens:,} tokens)", stats.tokens))
            cases.append(("no budget", None))
            found = measure(client, store, cases, opts.rounds, opts.calls)
            print(
                f"\n{n:,} hot memories ({stats.tokens:,} tokens; filled in "
                f"{filled:.0f} s, {used:,.0f} MiB used), {store.mode}: "
                f"server time per window call, median of {opts.rounds} rounds x {opts.calls}"
            )
            print(
                f"  {'budget':26s} {'memories':>9s} {'tokens':>11s} {'server ms':>10s}"
                f" {'slowest ms':>11s}  T4 (<= {T4_MS:g} ms)"
            )
            for case in found:
                print(case.line())
            rows, (a, b, paired) = compare(
                client,
                NAMESPACE,
                opts.base,
                COMPARED,
                rounds=opts.rounds,
                calls=opts.calls,
                largest_group=LARGEST_GROUP,
            )
            print(
                f"A ({opts.base}) against B (working tree) at {n:,} memories, EVALSHA, "
                f"median of {opts.rounds} rounds x {opts.calls} per budget:"
            )
            for row in rows:
                print(row_line(row))
            print(
                f"  all {len(rows)} budgets: A {a:.0f} µs, B {b:.0f} µs; B / A paired {paired:.3f}"
            )
        client.flushall()


if __name__ == "__main__":
    main()
