"""What a policy field costs remember(): the field on against off, side by side on one
server in one run, at capacity.

    python benchmarks/policy_cost.py {protect,log} [--binary valkey|redis|PATH]
        [--rounds 7] [--calls 300] [--json FILE]

protect (issue 40): protect_memories 8 (the default) against 0, at protect_s 30 (the
default) and at 0; max_hot 100.
log (issue 42): log_max 1,000 against 0 (the default: no eviction log), under a count
budget (max_hot 100) with the cold tier full (cold_max 200: each remember also drops
one past cold_max on average, in batches, a second entry of the log) and below cold_max
(the default 10,000: one entry a remember), and under a token budget (max_tokens 4,000)
with the cold tier full.

Starts its own server (the embedded Valkey's binary, or ``--binary redis``). For each
case: two namespaces of the case's policy but for the field, each filled past capacity
(a log full); then ``--rounds`` interleaved rounds of ``--calls`` remembers of new
memories (40 tokens each) a side, a minute apart on the namespace's clock (so protection
by time runs out between calls, as in a conversation), importances drawn alike on both
sides; server µs per call from INFO commandstats, on / off paired by round.
"""

from __future__ import annotations

import random
import statistics
import sys
from dataclasses import dataclass, replace
from typing import Any

import redis
from _harness import (
    Run,
    binary,
    interleave,
    node,
    paired,
    parsed_rounds,
    rounds_parser,
    server_us,
    started,
)

from memevict import MemoryStore, Policy

T0 = 1_750_000_000_000
MINUTE_MS = 60_000


@dataclass(frozen=True)
class Field:
    name: str  # the Policy field
    off: int
    on: int
    fill: int  # memories remembered before the rounds
    cases: dict[str, Policy]  # the policies it is measured under, by name
    subject: str  # the section of RESULTS.md


FIELDS = {
    "protect": Field(
        "protect_memories",
        0,
        8,
        300,
        {
            "protect_s 30": Policy(max_hot=100, protect_s=30),
            "protect_s 0": Policy(max_hot=100, protect_s=0),
        },
        "What protection by activity costs",
    ),
    "log": Field(
        "log_max",
        0,
        1000,
        1500,
        {
            "max_hot 100, the cold tier full": Policy(max_hot=100, cold_max=200),
            "max_hot 100, the cold tier below cold_max": Policy(max_hot=100),
            "max_tokens 4000, the cold tier full": Policy(
                max_hot=10_000, max_tokens=4000, cold_max=200
            ),
        },
        "What the eviction log costs",
    ),
}


def measure(
    client: redis.Redis, field: Field, base: Policy, rounds: int, calls: int
) -> dict[str, Any]:
    """Both sides under one policy: remember's server µs by round."""
    client.flushall()
    sides = (field.off, field.on)
    stores = {
        n: MemoryStore(client, f"{field.name}{n}", replace(base, **{field.name: n})) for n in sides
    }
    clock = dict.fromkeys(sides, T0)
    draws = {n: random.Random(1) for n in sides}  # the same importances on both sides

    def remember(n: int, memory_id: str) -> None:
        clock[n] += MINUTE_MS
        importance = draws[n].uniform(1, 9)
        stores[n].remember(memory_id, importance, text="a message", tokens=40, now=clock[n])

    for n in sides:
        for i in range(field.fill):
            remember(n, f"fill{i}")

    def one(n: int, r: int) -> float:
        def run() -> None:
            for i in range(calls):
                remember(n, f"r{r}-{i}")

        return server_us(client, run, calls)

    us = interleave(rounds, list(sides), one)
    ratio = paired(us[field.on], us[field.off])
    print(
        f"  remember {statistics.median(us[field.off]):6.1f} µs with {field.name} {field.off}, "
        f"{statistics.median(us[field.on]):6.1f} µs with {field.on}: {ratio:.3f}"
    )
    return {"remember_us": {str(n): us[n] for n in sides}, "ratio": ratio}


def main(argv: list[str] | None = None) -> int:
    cli = rounds_parser(__doc__)
    cli.add_argument("field", choices=sorted(FIELDS))
    opts = parsed_rounds(cli, argv)
    field = FIELDS[opts.field]
    run = Run(opts)
    found: dict[str, Any] = {}
    with started(binary(opts.binary)) as servers:
        client = servers[0].client()
        run.on(node(client, servers[0].url))
        print(f"{opts.rounds} rounds of {opts.calls} remembers a side")
        for name, base in field.cases.items():
            print(f" {name}:")
            found[name] = measure(client, field, base, opts.rounds, opts.calls)
    run.row(
        field.subject,
        f"remember with {field.name} {field.on} ÷ {field.off}: "
        + ", ".join(f"{r['ratio']:.2f}x ({name})" for name, r in found.items()),
    )
    run.finish({"field": field.name, "off": field.off, "on": field.on, "cases": found})
    return 0


if __name__ == "__main__":
    sys.exit(main())
