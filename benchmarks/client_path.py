"""Where the client path's time goes (target P2): three calls side by side.

    noop         raw redis-py EVALSHA of ``return 1`` with remember's KEYS and ARGV
    fixed raw    the same raw EVALSHA of the fixed-reply script (a valid remember
                 reply: a score and two empty lists and two counts)
    MemoryStore  ``MemoryStore.remember`` (mode="scripts") of that fixed-reply script

fixed raw - noop is redis-py reading the reply's shape; MemoryStore - fixed raw
is memevict's own layer (arguments by name, call id and receipt key, the parsed
result). 9 interleaved rounds of 2,000 calls each; medians of µs per call.

    python benchmarks/client_path.py [URL] [--rounds 9] [--calls 2000]

Without URL it runs on an embedded Valkey. Given one it FLUSHES that server.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import redis
from ab import connected, server_version  # benchmarks/ab.py

from memevict.bench.peers import (
    FIXED_REPLY_SCRIPT,
    NOOP_SCRIPT,
    fixed_reply_spec,
    importance,
    raw_remember,
)
from memevict.store import MemoryStore


def measure(client: redis.Redis, label: str, rounds: int, calls_per_round: int) -> None:
    noop = raw_remember(client, client.script_load(NOOP_SCRIPT), "p2noop")
    fixed_raw = raw_remember(client, client.script_load(FIXED_REPLY_SCRIPT), "p2fixed")
    store = MemoryStore(client, "p2store", mode="scripts")
    store._specs = {**store._specs, "remember": fixed_reply_spec()}  # as the bench's peer
    calls: dict[str, Callable[[int], object]] = {
        "noop": lambda i: noop(f"m-{i}", importance(i)),
        "fixed raw": lambda i: fixed_raw(f"m-{i}", importance(i)),
        "MemoryStore": lambda i: store.remember(f"m-{i}", importance(i)),
    }
    us: dict[str, list[float]] = {name: [] for name in calls}
    for r in range(rounds):
        order = list(calls) if r % 2 == 0 else list(calls)[::-1]
        for name in order:
            call = calls[name]
            start = time.perf_counter()
            for i in range(calls_per_round):
                call(i)
            us[name].append((time.perf_counter() - start) / calls_per_round * 1e6)
    medians = {name: statistics.median(values) for name, values in us.items()}
    line = ", ".join(f"{name} {value:.1f}" for name, value in medians.items())
    ratio = statistics.median(a / b for a, b in zip(us["noop"], us["MemoryStore"], strict=True))
    print(f"{label}: µs per call, median of {rounds} rounds x {calls_per_round}: {line}")
    print(f"  MemoryStore calls/s ÷ noop calls/s, paired by round: {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", help="the server (default: an embedded Valkey)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=2000, help="calls per round and peer")
    opts = parser.parse_args()
    with connected(opts.url) as client:
        measure(client, server_version(client), opts.rounds, opts.calls)


if __name__ == "__main__":
    main()
