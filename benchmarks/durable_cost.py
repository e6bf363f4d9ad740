"""What a durable write costs (issue 29): remember() with durable_replicas=1 against the
default, side by side on one primary with one replica, in one run.

    python benchmarks/durable_cost.py [--binary valkey|redis|PATH] [--rounds 7]
        [--calls 2000] [--threads 8] [--json FILE]

Starts its own primary and replica (the embedded Valkey's binary, or ``--binary redis``:
redis-server) on free loopback ports. Each side has its namespace (max_hot 1,000, every
remember of a new id evicting one); ``--rounds`` interleaved rounds (the order
alternating) of ``--calls`` remembers per side, from 1 thread and from ``--threads``
threads at once (a client each). Medians over rounds of calls/s and of the p99 latency;
durable / default paired by round.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import redis
from _harness import Run, binary, interleave, node, paired, parser, started

from memevict import MemoryStore, Policy

POLICY = Policy(max_hot=1000, protect_s=0)
SIDES = {"default": False, "durable_replicas=1": True}


def store(port: int, namespace: str, durable: bool) -> MemoryStore:
    replicas = 1 if durable else 0
    return MemoryStore(redis.Redis(port=port), namespace, POLICY, durable_replicas=replicas)


def fill(port: int, namespace: str) -> None:
    s = store(port, namespace, False)
    for i in range(0, 1000, 100):
        s.remember_many([(f"w{i + k}", 1.0 + k % 7) for k in range(100)])
    s.client.close()


def calls_per_s(
    port: int, namespace: str, durable: bool, calls: int, threads: int, tag: str
) -> tuple[float, float]:
    """calls/s over all threads, and the p99 latency (ms) of one call."""
    stores = [store(port, namespace, durable) for _ in range(threads)]
    times: list[float] = []

    def work(s: MemoryStore, t: int) -> None:
        for i in range(calls // threads):
            start = time.perf_counter()
            s.remember(f"{tag}-{t}-{i}", 1.0 + i % 7)
            times.append(time.perf_counter() - start)

    workers = [threading.Thread(target=work, args=(s, t)) for t, s in enumerate(stores)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    for s in stores:
        s.client.close()
    return len(times) / elapsed, statistics.quantiles(times, n=100)[98] * 1e3


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--binary", default="valkey", help="valkey, redis or a server binary")
    cli.add_argument("--rounds", type=int, default=7)
    cli.add_argument("--calls", type=int, default=2000)
    cli.add_argument("--threads", type=int, default=8)
    opts = cli.parse_args()
    run = Run(opts)
    found: dict[str, Any] = {}
    with started(binary(opts.binary), replicas=1) as (primary, _):
        run.on(node(primary.client(), primary.url))
        env = run.environment
        print(
            f"{env['server']} {env['server_version']}, a primary and one replica; median of "
            f"{opts.rounds} rounds"
        )
        for name in SIDES:
            fill(primary.port, name.replace("=", "-"))
        for threads in (1, opts.threads):

            def one(name: str, r: int, threads: int = threads) -> tuple[float, float]:
                namespace, tag = name.replace("=", "-"), f"t{threads}r{r}"
                return calls_per_s(primary.port, namespace, SIDES[name], opts.calls, threads, tag)

            rounds = interleave(opts.rounds, list(SIDES), one)
            rates = {name: [rate for rate, _ in rounds[name]] for name in SIDES}
            p99s = {name: [p99 for _, p99 in rounds[name]] for name in SIDES}
            for name in SIDES:
                print(
                    f"  {threads} thread(s)  {name:20} {statistics.median(rates[name]):8.0f} "
                    f"calls/s, p99 {statistics.median(p99s[name]):6.2f} ms"
                )
            ratio = paired(rates["durable_replicas=1"], rates["default"])
            print(f"  {threads} thread(s)  durable / default calls/s {ratio:.3f}")
            found[str(threads)] = {
                name: {
                    "calls_per_s": statistics.median(rates[name]),
                    "p99_ms": statistics.median(p99s[name]),
                    "calls_per_s_by_round": rates[name],
                }
                for name in SIDES
            } | {"durable_vs_default": ratio}
    ratios = [found[str(t)]["durable_vs_default"] for t in (1, opts.threads)]
    run.row(
        "What a durable write costs",
        f"{ratios[0]:.3f}x the calls/s from 1 thread, {ratios[1]:.3f}x from {opts.threads}",
    )
    run.finish({"threads": found})


if __name__ == "__main__":
    main()
