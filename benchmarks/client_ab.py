"""A/B of the Python client path: a git revision's memevict against the working tree's.

The Lua is the same on both sides; what differs is the Python that builds,
sends and parses a call. Both versions cannot be imported into one process,
so each round runs one process per side (the order alternates), and each
process times, on its own connection:

    noop    raw redis-py EVALSHA of ``return 1`` with remember's KEYS and ARGV
            (the same code on both sides: the round's yardstick)
    fixed   ``MemoryStore.remember`` (mode="scripts") of a script returning a
            fixed remember reply (P2's client path)
    real    ``MemoryStore.remember`` (the default mode) of a new id on a full
            store of 10,000 memories: one eviction per call (P3's call)

µs per call; medians over rounds, B / A paired by round, and fixed's calls/s
÷ noop's (P2) per side.

    python benchmarks/client_ab.py BASE_REV [URL] [--rounds 16] [--calls 2000]

Without URL it runs on an embedded Valkey. Given one it FLUSHES that server.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAPACITY = 10_000
SIDES = ("A", "B")


def one_side(url: str, side: str, calls: int, round_no: int) -> None:
    """Run in a child process (the side's memevict first on sys.path): prints
    µs per call of each peer as JSON."""
    import redis

    from memevict.bench.peers import NOOP_SCRIPT, fixed_reply_spec, importance, raw_remember
    from memevict.store import MemoryStore

    client = redis.Redis.from_url(url)
    noop = raw_remember(client, client.script_load(NOOP_SCRIPT), "ab-noop")
    fixed = MemoryStore(client, f"ab-fixed-{side}", mode="scripts")
    fixed._specs = {**fixed._specs, "remember": fixed_reply_spec()}  # as the bench's peer
    real = MemoryStore(client, f"ab-real-{side}")  # filled by the parent
    peers = {
        "noop": lambda i: noop(f"m-{i}", importance(i)),
        "fixed": lambda i: fixed.remember(f"m-{i}", importance(i)),
        "real": lambda i: real.remember(f"r{round_no}-{i}", importance(i)),
    }
    out = {}
    for name, call in peers.items():
        start = time.perf_counter()
        for i in range(calls):
            call(i)
        out[name] = (time.perf_counter() - start) / calls * 1e6
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the git revision of side A (B: the working tree)")
    parser.add_argument("url", nargs="?", help="the server (default: an embedded Valkey)")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--calls", type=int, default=2000, help="calls per round and peer")
    parser.add_argument("--side", help=argparse.SUPPRESS)  # the child process's
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.side:
        one_side(opts.url, opts.side, opts.calls, opts.round)
        return

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ab import checkout, connected, server_version  # benchmarks/ab.py

    from memevict import MemoryStore, Policy

    loaders = {"A": checkout(opts.base, "loader", "lua") / "loader", "B": ROOT / "loader"}
    with connected(opts.url) as client:
        url = opts.url or "redis://{host}:{port}".format(**client.get_connection_kwargs())
        for side in SIDES:
            store = MemoryStore(client, f"ab-real-{side}", Policy(max_hot=CAPACITY, protect_s=0))
            for start in range(0, CAPACITY, 100):
                store.remember_many([(f"w{k}", 1.0 + k % 13) for k in range(start, start + 100)])
        us: dict[str, dict[str, list[float]]] = {side: {} for side in SIDES}
        for r in range(opts.rounds):
            for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                env = dict(os.environ, PYTHONPATH=str(loaders[side]))
                args = [url, "--side", side, "--calls", str(opts.calls), "--round", str(r)]
                child = subprocess.run(
                    [sys.executable, __file__, opts.base, *args],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                for name, value in json.loads(child.stdout).items():
                    us[side].setdefault(name, []).append(value)
        print(
            f"{server_version(client)}: µs per call, median of {opts.rounds} rounds x "
            f"{opts.calls} calls; A = {opts.base}, B = the working tree"
        )
        for name in us["A"]:
            a, b = us["A"][name], us["B"][name]
            paired = statistics.median(y / x for x, y in zip(a, b, strict=True))
            print(
                f"  {name:6s} A {statistics.median(a):7.1f}  B {statistics.median(b):7.1f}"
                f"  B / A {paired:.3f}"
            )
        for side in SIDES:
            p2 = statistics.median(
                x / y for x, y in zip(us[side]["noop"], us[side]["fixed"], strict=True)
            )
            print(f"  {side}: fixed calls/s ÷ noop calls/s (P2), paired by round: {p2:.3f}")


if __name__ == "__main__":
    main()
