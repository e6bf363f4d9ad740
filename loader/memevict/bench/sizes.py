"""T2, T3 and the plot: time per call against store size, memevict and the seed peer.

One memevict namespace and one seed sorted set per size, filled once and all
alive together, so every round runs every size (order rotated) and a ratio
between sizes is taken within a round. The operations:

  decay     memevict ``decay(rate)``; the seed's ``decay_memories(rate)`` (a whole
            pass: up to ``seed_decay_each_round`` every round, then once more for
            sizes up to ``seed_decay_max``)
  evict     a remember on a full store, so it also evicts one memory
  remember  a remember on a store that is not full (max_hot raised by the
            round's calls, then put back, which evicts them, outside the timing)

memevict's server time per call is that of its script calls' entry commands
(EVALSHA or FCALL, whichever the store's mode sends: usec_per_op), with CONFIG
RESETSTAT before each timed run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from memevict.bench.peers import fill_seed, fill_store, importance
from memevict.bench.server import BenchKeys, measured, usec_per_op
from memevict.bench.timing import Sample, Samples, rotated, time_calls
from memevict.policy import Policy
from memevict.seed import SeedPeer
from memevict.store import MemoryStore

OPS = ("decay", "evict", "remember")
DECAY_RATE = 0.99


@dataclass(frozen=True)
class SizeStore:
    """A memevict namespace and a seed sorted set, each holding ``size`` memories,
    full (max_hot = size, protect_s = 0)."""

    size: int
    namespace: str
    seed_key: str
    fill_s: float  # seconds to fill the memevict namespace


def fill_size_stores(
    client: redis.Redis, keys: BenchKeys, sizes: tuple[int, ...], progress: Callable[[str], None]
) -> list[SizeStore]:
    stores = []
    for size in sizes:
        namespace, seed_key = keys.namespace(f"n{size}"), keys.key(f"seed-n{size}")
        store = MemoryStore(
            client,
            namespace,
            Policy(max_hot=size, protect_s=0, protect_memories=0),
            replace_policy=True,
        )
        ids = [f"m{i}" for i in range(size)]
        t0 = time.perf_counter()
        fill_store(client, store, ids)
        fill_s = time.perf_counter() - t0
        fill_seed(client, seed_key, ids)
        stores.append(SizeStore(size, namespace, seed_key, fill_s))
        progress(f"filled {size:,} memories in {fill_s:.1f} s ({fill_s / size * 1e6:.0f} µs each)")
    return stores


@dataclass(frozen=True)
class Sizes:
    sizes: tuple[int, ...]
    # peer ("memevict", "seed") -> op (OPS) -> size -> Sample
    samples: dict[str, dict[str, dict[int, Sample]]]
    fill_s: dict[int, float]


class _Phases:
    """The timed runs on one size; each leaves its stores full at ``size``."""

    def __init__(self, client: redis.Redis, store: SizeStore, ops: int, samples: Samples) -> None:
        self.client, self.size, self.ops, self.samples = client, store.size, ops, samples
        self.store = MemoryStore(client, store.namespace)
        self.full_policy = self.store.policy
        self.seed_key = store.seed_key
        self.next_id = 0

    def _ids(self) -> int:
        first = self.next_id
        self.next_id += self.ops
        return first

    def _run(self, peer: str, op: str, call: Callable[[int], object], calls: int) -> None:
        first = self._ids()
        latencies, stats = measured(self.client, lambda: time_calls(call, calls, first))
        server = usec_per_op(stats, calls)
        self.samples.add(f"{peer}/{op}/{self.size}", latencies, server_us=server)

    def _memevict(self, op: str, call: Callable[[int], object]) -> None:
        self._run("memevict", op, call, self.ops)

    def _seed(self, op: str, call: Callable[[int], object], calls: int) -> None:
        self._run("seed", op, call, calls)

    def memevict_decay(self) -> None:
        self._memevict("decay", lambda _: self.store.decay(DECAY_RATE))

    def memevict_evict(self) -> None:
        self._memevict("evict", lambda i: self.store.remember(f"x{i}", importance(i)))

    def memevict_remember(self) -> None:
        roomy = dataclasses.replace(self.full_policy, max_hot=self.size + self.ops)
        self.store.set_policy(roomy)
        self._memevict("remember", lambda i: self.store.remember(f"x{i}", importance(i)))
        self.store.set_policy(self.full_policy)  # evicts the memories just added

    def seed_evict(self) -> None:
        seed = SeedPeer(self.client, self.seed_key, self.size)
        self._seed("evict", lambda i: seed.remember(f"x{i}", importance(i)), self.ops)

    def seed_remember(self) -> None:
        roomy = SeedPeer(self.client, self.seed_key, self.size + self.ops)
        self._seed("remember", lambda i: roomy.remember(f"x{i}", importance(i)), self.ops)
        SeedPeer(self.client, self.seed_key, self.size).evict_if_full()

    def seed_decay(self) -> None:
        seed = SeedPeer(self.client, self.seed_key, self.size)
        self._seed("decay", lambda _: seed.decay_memories(DECAY_RATE), 1)

    def every_round(self, seed_decay: bool) -> list[Callable[[], None]]:
        phases = [
            self.memevict_decay,
            self.memevict_evict,
            self.memevict_remember,
            self.seed_evict,
            self.seed_remember,
        ]
        return [*phases, self.seed_decay] if seed_decay else phases


def measure_sizes(
    client: redis.Redis,
    stores: list[SizeStore],
    *,
    rounds: int,
    ops: int,
    seed_decay_each_round: int,
    seed_decay_max: int,
    progress: Callable[[str], None],
) -> Sizes:
    samples = Samples()
    phases = [_Phases(client, store, ops, samples) for store in stores]
    for r in range(rounds):
        t0 = time.perf_counter()
        for size_phases in rotated(phases, r):
            seed_decay = size_phases.size <= seed_decay_each_round
            for phase in rotated(size_phases.every_round(seed_decay), r):
                phase()
        progress(f"store sizes: round {r + 1}/{rounds} in {time.perf_counter() - t0:.1f} s")
    for size_phases in phases:
        if seed_decay_each_round < size_phases.size <= seed_decay_max:
            t0 = time.perf_counter()
            size_phases.seed_decay()
            took = time.perf_counter() - t0
            progress(f"seed decay_memories at {size_phases.size:,}: {took:.1f} s")
    found = samples.all()
    by_peer: dict[str, dict[str, dict[int, Sample]]] = {}
    for name, sample in found.items():
        peer, op, size = name.split("/")
        by_peer.setdefault(peer, {}).setdefault(op, {})[int(size)] = sample
    return Sizes(
        sizes=tuple(s.size for s in stores),
        samples=by_peer,
        fill_s={s.size: s.fill_s for s in stores},
    )
