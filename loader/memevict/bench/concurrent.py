"""T1 with many clients: every peer from ``processes`` worker processes with
``connections`` connections (one thread each) apiece, all on one store.

The workers start once and stay up for every round. A run is a time window
set by the parent: every connection calls its peer back to back from the
window's start to its end, and the calls that completed inside the window
count. Aggregate ops/s = those calls / window.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass
from functools import partial
from multiprocessing import get_context
from multiprocessing.connection import Connection
from types import TracebackType

import redis

from memevict.bench.peers import PEERS, Call, PeerSetup, remember_peers
from memevict.bench.server import measured, usec_per_op
from memevict.bench.timing import Sample, Samples, rotated

START_DELAY_S = 0.1  # from sending a run to its window's start: every worker has it by then
# A round in which no call completed (a machine so busy that the workers got the run after
# its window ended) is run again, up to this many times in all; then Samples.add fails.
STALLED_TRIES = 3


@dataclass(frozen=True)
class Concurrent:
    clients: int
    processes: int
    window_s: float
    samples: dict[str, Sample]  # latencies per call; ops_per_s is the aggregate


def measure_concurrent(
    client: redis.Redis,
    url: str,
    setup: PeerSetup,
    *,
    processes: int,
    connections: int,
    rounds: int,
    window_s: float,
) -> Concurrent:
    samples = Samples()
    with Fleet(url, setup, processes, connections) as fleet:
        for r in range(rounds):
            for name in rotated(PEERS, r):
                for _ in range(STALLED_TRIES):
                    latencies, stats = measured(client, partial(fleet.run, name, window_s))
                    if latencies:
                        break
                server = usec_per_op(stats, len(latencies))
                samples.add(name, latencies, window_s=window_s, server_us=server)
    return Concurrent(processes * connections, processes, window_s, samples.all())


class Fleet:
    """The worker processes, each holding its connections and peers."""

    def __init__(self, url: str, setup: PeerSetup, processes: int, connections: int) -> None:
        context = get_context("spawn")
        self._pipes: list[Connection] = []
        self._processes = []
        for index in range(processes):
            ours, theirs = context.Pipe()
            process = context.Process(
                target=_worker, args=(theirs, url, setup, index, connections), daemon=True
            )
            process.start()
            theirs.close()
            self._pipes.append(ours)
            self._processes.append(process)
        for pipe in self._pipes:
            _reply(pipe)  # ready: connected, stores built

    def run(self, peer: str, window_s: float) -> list[float]:
        """Every connection calls ``peer`` for window_s; the latencies of the calls
        that completed in the window."""
        start = time.monotonic() + START_DELAY_S
        for pipe in self._pipes:
            pipe.send((peer, start, window_s))
        return [latency for pipe in self._pipes for latency in _reply(pipe)]

    def close(self) -> None:
        for pipe in self._pipes:
            pipe.send(None)
        for process in self._processes:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def _reply(pipe: Connection) -> list[float]:
    latencies, failure = pipe.recv()
    if failure:
        raise RuntimeError(f"a bench client process failed:\n{failure}")
    return list(latencies)


def _worker(pipe: Connection, url: str, setup: PeerSetup, index: int, connections: int) -> None:
    """One worker process: waits for runs, answers each with its calls' latencies."""
    try:
        clients = [redis.Redis.from_url(url) for _ in range(connections)]
        peers = [remember_peers(c, setup, f"c{index}.{t}") for t, c in enumerate(clients)]
    except Exception:
        pipe.send(([], traceback.format_exc()))
        return
    pipe.send(([], None))
    next_id = [0] * connections
    while (order := pipe.recv()) is not None:
        name, start, window_s = order
        windows = [
            _Window(peers[t][name], next_id[t], start, start + window_s) for t in range(connections)
        ]
        threads = [threading.Thread(target=w.run) for w in windows]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        next_id = [w.next_id for w in windows]
        failure = next((w.failure for w in windows if w.failure), None)
        pipe.send(([x for w in windows for x in w.latencies], failure))
    for c in clients:
        c.close()


class _Window:
    """One connection's calls in one run: back to back from start to end."""

    def __init__(self, call: Call, first: int, start: float, end: float) -> None:
        self.call, self.next_id, self.start, self.end = call, first, start, end
        self.latencies: list[float] = []
        self.failure: str | None = None

    def run(self) -> None:
        try:
            time.sleep(max(0.0, self.start - time.monotonic()))
            while time.monotonic() < self.end:
                t0 = time.perf_counter()
                self.call(self.next_id)
                t1 = time.perf_counter()
                self.next_id += 1
                if time.monotonic() <= self.end:  # completed inside the window
                    self.latencies.append(t1 - t0)
        except Exception:
            self.failure = traceback.format_exc()
