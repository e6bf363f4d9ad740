"""A/B of window.lua: a git revision's against the working tree's, in one run.

One namespace of 10,000 hot memories with text (a seventh of them in groups
of up to three); both versions are loaded as scripts, must give the same
reply for no budget and for 4,000 and 32,000 tokens, then run in 16
interleaved rounds of 5 calls per budget. Server time per call from INFO
commandstats; medians, and B / A paired by round.

    python benchmarks/window_ab.py BASE_REV|LUA_DIR [URL]

Without URL it runs on an embedded Valkey. Given one it FLUSHES that server.
"""

from __future__ import annotations

import sys

import redis
from ab import alternate, connected, lua_at, server_version  # benchmarks/ab.py

from memevict import Item, MemoryStore, Policy
from memevict.scripts import parse, specs

BUDGETS = ("", "4000", "32000")


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


def main() -> None:
    base = sys.argv[1]
    with connected(sys.argv[2] if len(sys.argv) > 2 else None) as client:
        fill(client)
        root = lua_at(base)
        old, new = parse("window", (root / "window.lua").read_text(), root), specs()["window"]
        shas = {"A": client.script_load(old.source), "B": client.script_load(new.source)}
        keys = new.key_names("w")
        for budget in BUDGETS:
            replies = [client.evalsha(sha, len(keys), *keys, budget, "") for sha in shas.values()]
            assert replies[0] == replies[1], f"the replies differ for budget {budget!r}"

        def run(side: str) -> None:
            for budget in BUDGETS:
                for _ in range(5):
                    client.evalsha(shas[side], len(keys), *keys, budget, "")

        a, b, paired = alternate(client, 16, "evalsha", run)
        print(
            f"server {server_version(client)}: window at 10,000 hot memories (no budget, 4,000 "
            f"and 32,000 tokens), the same replies; server µs per call, median of 16 rounds x "
            f"15: A ({base}) {a:.0f}, B (working tree) {b:.0f}; B / A paired {paired:.3f}"
        )


if __name__ == "__main__":
    main()
