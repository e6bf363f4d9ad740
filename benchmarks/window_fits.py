"""A window whose hot tier fits the budget (an adapter's namespace), at growing store sizes.

An adapter's namespace holds max_tokens of hot memories (~100 messages of ~40 tokens at
4,000) and everything else in the cold tier. Each namespace here is filled with N
memories of 10-70 tokens (N - ~100 of them evicted to the cold tier; a seventh in groups
of two), then window(4,000) and window(2,000) (which does not fit: ranked) run on a git
revision's window.lua (A) and the working tree's (B) in interleaved rounds; the replies
must be the same. Server time per call from INFO commandstats (EVALSHA, the entry only).

    python benchmarks/window_fits.py BASE_REV|LUA_DIR [URL] [--sizes 1000,10000,100000]

Without URL it runs on an embedded Valkey; given one it FLUSHES that server.
"""

from __future__ import annotations

import argparse

import redis
from ab import connected, server_version  # benchmarks/ab.py
from window_ab import compare, row_line  # benchmarks/window_ab.py

from memevict import Item, MemoryStore, Policy

MAX_TOKENS = 4000


def fill(client: redis.Redis, namespace: str, size: int) -> None:
    policy = Policy(max_hot=100_000, max_tokens=MAX_TOKENS, protect_s=0, cold_max=size)
    store = MemoryStore(client, namespace, policy)
    for start in range(0, size, 100):
        store.remember_many(
            [
                Item(
                    f"m{k}",
                    1 + k % 10,
                    text="some words of a message " * (1 + k % 5),
                    tokens=10 + k % 61,
                    group=f"g{k // 2}" if k % 7 in (0, 1) and k % 2 == 0 else None,
                )
                for k in range(start, min(start + 100, size))
            ]
        )


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("base")
    cli.add_argument("url", nargs="?")
    cli.add_argument("--sizes", default="1000,10000,100000")
    cli.add_argument("--rounds", type=int, default=12)
    cli.add_argument("--calls", type=int, default=10)
    opts = cli.parse_args()
    with connected(opts.url) as client:
        print(
            f"server {server_version(client)}: window of a namespace holding max_tokens "
            f"{MAX_TOKENS:,} hot; A ({opts.base}), B (working tree); server µs per call "
            f"(EVALSHA), median of {opts.rounds} rounds x {opts.calls}"
        )
        for size in (int(s) for s in opts.sizes.split(",")):
            namespace = f"fits-{size}"
            fill(client, namespace, size)
            hot = MemoryStore(client, namespace).stats()
            print(f"{size:,} memories ({hot.hot} hot, {hot.tokens:,} tokens; {hot.cold:,} cold)")
            rows, _ = compare(
                client,
                namespace,
                opts.base,
                (str(MAX_TOKENS), str(MAX_TOKENS // 2)),
                rounds=opts.rounds,
                calls=opts.calls,
                largest_group=2,
            )
            for row in rows:
                print(row_line(row))
            client.delete(*client.keys(f"memevict:{{{namespace}}}:*"))


if __name__ == "__main__":
    main()
