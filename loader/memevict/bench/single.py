"""T1, P1, P2, P3 (one client), T6 and P4: remember() on a full store against
its peers, one client, unpipelined; remember_many in batches against single
remembers; and remember() in each mode (EVALSHA, FCALL) beside the default."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import redis

from memevict.bench.peers import Call, PeerSetup, importance, remember_peers
from memevict.bench.server import measured, usec_per_op
from memevict.bench.timing import Sample, Samples, rotated, time_calls
from memevict.registry import Mode
from memevict.store import MemoryStore

BATCH_PEER = "remember_many"
MODE_PEERS: tuple[Mode, ...] = ("scripts", "functions")  # remember() asking for each mode


@dataclass(frozen=True)
class SingleClient:
    capacity: int
    batch: int  # items per remember_many call
    mode: Mode  # the mode the "memevict" peer ran in: the default store's
    samples: dict[str, Sample]  # PEERS, BATCH_PEER and MODE_PEERS


def measure_single_client(
    client: redis.Redis, setup: PeerSetup, *, rounds: int, ops: int, batch: int
) -> SingleClient:
    """``rounds`` interleaved rounds of ``ops`` items per peer; server time per
    op from INFO commandstats around each run."""
    calls = remember_peers(client, setup, "one")
    store = MemoryStore(client, setup.namespace)
    items = {name: 1 for name in calls}

    def remember_batch(i: int) -> None:
        store.remember_many([(f"one-b{i}-{k}", importance(k)) for k in range(batch)])

    calls[BATCH_PEER] = remember_batch
    items[BATCH_PEER] = batch
    for mode in MODE_PEERS:
        calls[mode] = _remember_in(MemoryStore(client, setup.namespace, mode=mode))
        items[mode] = 1
    samples = Samples()
    next_id = dict.fromkeys(calls, 0)
    for r in range(rounds):
        for name in rotated(list(calls), r):
            n = max(1, ops // items[name])
            latencies, stats = measured(client, partial(time_calls, calls[name], n, next_id[name]))
            server = usec_per_op(stats, n)
            next_id[name] += n
            samples.add(name, latencies, items_per_call=items[name], server_us=server)
    return SingleClient(setup.capacity, batch, store.mode, samples.all())


def _remember_in(store: MemoryStore) -> Call:
    return lambda i: store.remember(f"one-{store.mode}-{i}", importance(i))
