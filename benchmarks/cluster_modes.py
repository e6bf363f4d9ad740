"""Evicting remember() on a cluster: EVALSHA against FCALL, side by side.

    python benchmarks/cluster_modes.py [--binary valkey|redis|PATH] [--rounds 10]
        [--calls 500] [--json FILE]

A throwaway cluster of 3 masters on loopback (tests/cluster.py) of the embedded Valkey's
binary, or of the one given; one namespace full at 1,000 memories (protect_s=0, so every
call evicts) served by a store in each mode; interleaved rounds of evicting calls. Per
mode: calls per second at 1 client and server µs per call (INFO commandstats of the node
that owns the namespace, the script entries); medians over rounds and FCALL ÷ EVALSHA
paired by round.
"""

from __future__ import annotations

import statistics
import time

from _harness import Run, binary, cluster, interleave, node, paired, parser, server_us

from memevict import MemoryStore, Policy
from memevict.scripts import key_name

NAMESPACE = "modes"


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--binary", default="valkey", help="valkey, redis or a server binary")
    cli.add_argument("--rounds", type=int, default=10)
    cli.add_argument("--calls", type=int, default=500, help="calls per round and mode")
    opts = cli.parse_args()
    run = Run(opts)
    with cluster(binary(opts.binary)) as c:
        client = c.client()
        i = c.owner(c.keyslot(key_name(NAMESPACE, "meta")))
        owner = c.node(i)
        run.on(node(owner, c.nodes[i].url))
        policy = Policy(max_hot=1000, protect_s=0)
        stores = {
            "evalsha": MemoryStore(client, NAMESPACE, policy, mode="scripts"),
            "fcall": MemoryStore(client, NAMESPACE, mode="functions"),
        }
        for b in range(0, 1000, 100):
            stores["evalsha"].remember_many([(f"w{k}", 1 + k % 10) for k in range(b, b + 100)])
        n = 0

        def calls(command: str) -> float:
            nonlocal n
            start = time.perf_counter()
            for _ in range(opts.calls):
                n += 1
                stores[command].remember(f"x{n}", 1 + n % 10)
            return opts.calls / (time.perf_counter() - start)

        def one(command: str, _: int) -> tuple[float, float]:
            per_s: list[float] = []
            us = server_us(owner, lambda: per_s.append(calls(command)), opts.calls)
            return per_s[0], us

        rounds = interleave(opts.rounds, list(stores), one)
        client.close()
    env = run.environment
    print(
        f"{env['server']} {env['server_version']}, 3 masters: evicting remember, medians of "
        f"{opts.rounds} rounds x {opts.calls}"
    )
    found = {}
    for k, what in enumerate(("calls/s", "server µs")):
        values = {command: [r[k] for r in rounds[command]] for command in stores}
        e, f = (statistics.median(values[c]) for c in ("evalsha", "fcall"))
        ratio = paired(values["fcall"], values["evalsha"])
        print(f"  {what}: EVALSHA {e:.1f}, FCALL {f:.1f}; FCALL / EVALSHA paired {ratio:.2f}")
        found["calls_per_s" if k == 0 else "server_us"] = {
            "evalsha": e,
            "fcall": f,
            "fcall_vs_evalsha": ratio,
            "by_round": values,
        }
    run.row(
        "Cluster: EVALSHA against FCALL",
        f"FCALL {found['server_us']['fcall_vs_evalsha']:.2f}x the server time, "
        f"{found['calls_per_s']['fcall_vs_evalsha']:.2f}x the calls/s ({env['server']})",
    )
    run.finish(found)


if __name__ == "__main__":
    main()
