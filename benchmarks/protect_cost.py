"""What protection by activity costs remember() (issue 40): protect_memories 8 (the
default) against 0, side by side on one server in one run, at capacity.

    python benchmarks/protect_cost.py [--binary valkey|redis|PATH] [--rounds 7]
        [--calls 300] [--json FILE]

Starts its own server (the embedded Valkey's binary, or ``--binary redis``). For each
protect_s of 30 (the default) and 0: two namespaces of the default Policy but for
max_hot 100 and protect_memories 8 or 0, each filled to capacity; then ``--rounds``
interleaved rounds of ``--calls`` remembers of new memories a side, a minute apart on
the namespace's clock (so protection by time runs out between calls, as in a
conversation), importances drawn alike on both sides; server µs per call from INFO
commandstats, protect_memories 8 / 0 paired by round.
"""

from __future__ import annotations

import random
import statistics
import sys
from dataclasses import replace
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

SIDES = (0, 8)  # protect_memories
T0 = 1_750_000_000_000
MINUTE_MS = 60_000


def measure(client: redis.Redis, protect_s: float, rounds: int, calls: int) -> dict[str, Any]:
    """Both sides at protect_s: remember's server µs by round."""
    client.flushall()
    base = Policy(max_hot=100, protect_s=protect_s)
    stores = {n: MemoryStore(client, f"p{n}", replace(base, protect_memories=n)) for n in SIDES}
    clock = dict.fromkeys(SIDES, T0)
    draws = {n: random.Random(1) for n in SIDES}  # the same importances on both sides

    def remember(n: int, memory_id: str) -> None:
        clock[n] += MINUTE_MS
        stores[n].remember(memory_id, draws[n].uniform(1, 9), text="a message", now=clock[n])

    for n in SIDES:
        for i in range(3 * base.max_hot):
            remember(n, f"fill{i}")

    def one(n: int, r: int) -> float:
        def run() -> None:
            for i in range(calls):
                remember(n, f"r{r}-{i}")

        return server_us(client, run, calls)

    us = interleave(rounds, list(SIDES), one)
    ratio = paired(us[8], us[0])
    print(
        f"  protect_s {protect_s:g}: remember {statistics.median(us[0]):6.1f} µs with "
        f"protect_memories 0, {statistics.median(us[8]):6.1f} µs with 8: {ratio:.3f}"
    )
    return {"remember_us": {str(n): us[n] for n in SIDES}, "ratio_8_vs_0": ratio}


def main(argv: list[str] | None = None) -> int:
    cli = rounds_parser(__doc__)
    opts = parsed_rounds(cli, argv)
    run = Run(opts)
    with started(binary(opts.binary)) as servers:
        client = servers[0].client()
        run.on(node(client, servers[0].url))
        print(f"{opts.rounds} rounds of {opts.calls} remembers a side, max_hot 100")
        found = {f"{p:g}": measure(client, p, opts.rounds, opts.calls) for p in (30.0, 0.0)}
    run.row(
        "What protection by activity costs",
        "remember with protect_memories 8 ÷ 0: "
        + ", ".join(f"{r['ratio_8_vs_0']:.2f}x at protect_s {p}" for p, r in found.items()),
    )
    run.finish({"protect_s": found})
    return 0


if __name__ == "__main__":
    sys.exit(main())
