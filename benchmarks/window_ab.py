"""A/B of window.lua: a git revision's against the working tree's, in one run.

One namespace of 10,000 hot memories with text (a seventh of them in groups,
of one member each: k // 3 of every seventh k); both versions are loaded as
scripts and their replies (the memories, their tokens and left: not what a
later reply may add after them) compared, at one fixed now, for no budget
and for 4,000 and 32,000 tokens, then run in 16 interleaved rounds of 5
calls per budget. Server time per call from INFO commandstats (EVALSHA, the entry
only); medians, and B / A paired by round, per budget and over all three.

The replies must be the same where A was not cut short by a count: always
without a budget, and with one when A holds fewer than 400 memories (the
most any window returned before b130e70; with a group of up to G members, at
most 400 - G: the count cannot have left a group out) and either filled its
budget or left no hot memory out. Elsewhere B may take more (b130e70: no
count of memories cuts a budgeted window), never over its budget; where A
stopped at its 500 candidates rather than at 400 memories, B holds all of
A's memories and more. Each budget's line gives the memories and tokens
each side returned beside its server times.

    python benchmarks/window_ab.py BASE_REV|LUA_DIR [URL]

Without URL it runs on an embedded Valkey. Given one it FLUSHES that server.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis
from ab import connected, lua_at, server_version  # benchmarks/ab.py

from memevict import Item, MemoryStore, Policy
from memevict.scripts import ScriptSpec, parse, specs

BUDGETS = ("", "4000", "32000")
CAP = 400  # the most memories a window returned before b130e70, with a budget or without


def fill(client: redis.Redis) -> None:
    store = MemoryStore(client, "w", Policy(max_hot=20000, protect_s=0))
    for start in range(0, 10000, 100):
        store.remember_many(
            [
                Item(
                    f"m{k}",
                    1 + k % 10,
                    text="some text of a message " * 3,
                    tokens=10 + k % 50,
                    group=f"g{k // 3}" if k % 7 == 0 else None,
                )
                for k in range(start, start + 100)
            ]
        )


@dataclass(frozen=True)
class Returned:
    """What one window reply holds."""

    memories: int
    tokens: int
    left: int  # hot memories not in it
    ids: frozenset[bytes]

    @classmethod
    def of(cls, reply: Any) -> Returned:
        memories, tokens, left = reply[:3]
        return cls(len(memories), int(tokens), int(left), frozenset(m[0] for m in memories))


@dataclass(frozen=True)
class Row:
    """One budget's comparison: what each side returned, and its server time."""

    budget: str  # '' for none
    a: Returned
    b: Returned
    verdict: str
    a_us: float  # median over rounds of the per-call mean
    b_us: float
    paired: float  # B / A, median over rounds

    @property
    def name(self) -> str:
        return f"{int(self.budget):,} tokens" if self.budget else "no budget"


def verdict(budget: str, replies: Sequence[Any], largest_group: int) -> str:
    """Checks two replies for one budget against what b130e70 changed; says how they compare."""
    a, b = Returned.of(replies[0]), Returned.of(replies[1])
    if replies[0][:3] == replies[1][:3]:  # (memories, tokens, left: not what may follow them)
        return "the same"
    assert budget, "the replies differ without a budget"
    limit = int(budget)
    assert b.tokens <= limit, f"B returned {b.tokens} tokens for a budget of {limit}"
    if a.memories > CAP - largest_group:
        return f"differ, A cut at its {CAP} memories"
    # A was not cut by its count: it stopped when full, out of memories or at 500 candidates.
    assert a.tokens < limit and a.left > 0, f"the replies differ for budget {budget} (A not capped)"
    assert a.ids < b.ids, f"B is not A's window and more for budget {budget}"
    return "differ, A cut at its 500 candidates (B holds A's and more)"


def scripts(base: str) -> tuple[ScriptSpec, ScriptSpec]:
    """window.lua of ``base`` (a git revision or a lua/ directory) and of the working tree."""
    root = lua_at(base)
    return parse("window", (root / "window.lua").read_text(), root), specs()["window"]


def compare(
    client: redis.Redis,
    namespace: str,
    base: str,
    budgets: Sequence[str],
    *,
    rounds: int,
    calls: int,
    largest_group: int,
) -> tuple[list[Row], tuple[float, float, float]]:
    """Both window.lua versions on one namespace: the replies checked (verdict), then
    ``rounds`` interleaved rounds (the side order alternating) of ``calls`` EVALSHA per
    budget and side. Per budget a Row; over all budgets A's and B's median µs per
    call and B / A paired by round."""
    old, new = scripts(base)
    shas = {"A": client.script_load(old.source), "B": client.script_load(new.source)}
    keys = new.key_names(namespace)
    seconds, micros = client.time()
    now = str(seconds * 1000 + micros // 1000)  # one now for both: the same scores
    replies = {
        budget: [client.evalsha(sha, len(keys), *keys, budget, now) for sha in shas.values()]
        for budget in budgets
    }
    verdicts = {budget: verdict(budget, replies[budget], largest_group) for budget in budgets}
    us: dict[tuple[str, str], list[float]] = {(s, b): [] for s in shas for b in budgets}
    for r in range(rounds):
        for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
            for budget in budgets:
                client.config_resetstat()
                for _ in range(calls):
                    client.evalsha(shas[side], len(keys), *keys, budget, "")
                stats = client.info("commandstats")["cmdstat_evalsha"]
                us[side, budget].append(float(stats["usec_per_call"]))
    rows = [
        Row(
            budget,
            Returned.of(replies[budget][0]),
            Returned.of(replies[budget][1]),
            verdicts[budget],
            statistics.median(us["A", budget]),
            statistics.median(us["B", budget]),
            statistics.median(b / a for a, b in zip(us["A", budget], us["B", budget], strict=True)),
        )
        for budget in budgets
    ]
    # Every budget has as many calls: a round's mean per call is the mean of its budgets'.
    per_round = {
        side: [statistics.fmean(us[side, b][r] for b in budgets) for r in range(rounds)]
        for side in shas
    }
    paired = statistics.median(b / a for a, b in zip(per_round["A"], per_round["B"], strict=True))
    return rows, (statistics.median(per_round["A"]), statistics.median(per_round["B"]), paired)


def row_line(row: Row) -> str:
    return (
        f"  {row.name:14s} A {row.a.memories:5,} memories {row.a.tokens:7,} tokens"
        f" {row.a_us:7.0f} µs | B {row.b.memories:5,} memories {row.b.tokens:7,} tokens"
        f" {row.b_us:7.0f} µs | B / A paired {row.paired:.3f} | replies: {row.verdict}"
    )


def main() -> None:
    base = sys.argv[1]
    with connected(sys.argv[2] if len(sys.argv) > 2 else None) as client:
        fill(client)
        rows, (a, b, paired) = compare(
            client, "w", base, BUDGETS, rounds=16, calls=5, largest_group=1
        )
        print(
            f"server {server_version(client)}: window at 10,000 hot memories; A ({base}), "
            f"B (working tree); server µs per call (EVALSHA), median of 16 rounds x 5 per budget"
        )
        for row in rows:
            print(row_line(row))
        print(
            f"all three budgets, 15 calls a round: A {a:.0f}, B {b:.0f}; B / A paired {paired:.3f}"
        )


if __name__ == "__main__":
    main()
