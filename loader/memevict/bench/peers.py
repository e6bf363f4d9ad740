"""The peers of ``remember()``, one call each, and the filling every store starts from.

zadd      raw ZADD of one member, one round trip: the floor for any write
seed      the seed article's remember: ZADD, then evict_if_full (ZCARD, ZRANGE, ZREM)
noop      a do-nothing script (``return 1``) sent as EVALSHA with the KEYS and
          ARGV memevict's remember sends, through ``client.evalsha`` as
          ScriptRegistry.run sends it
memevict  ``MemoryStore.remember``
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

from memevict import commands
from memevict.bench.server import BenchKeys
from memevict.policy import Policy
from memevict.scripts import specs
from memevict.seed import SeedPeer
from memevict.store import MemoryStore, ScriptRegistry

PEERS = ("zadd", "seed", "noop", "memevict")
NOOP_SCRIPT = "#!lua\nreturn 1"
FILL_BATCH = 100  # remember_many's most items per call

Call = Callable[[int], object]


def importance(i: int) -> float:
    """The importances of the article's categories, cycling: 1 .. 10."""
    return 1.0 + i % 10


@dataclass(frozen=True)
class PeerSetup:
    """Where each peer writes: memevict's and the seed's stores are full at
    ``capacity``, so every remember also evicts one memory. Picklable, for the
    processes of the concurrent clients."""

    namespace: str
    seed_key: str
    zadd_key: str
    noop_sha: str
    noop_namespace: str
    capacity: int


def prepare_peers(client: redis.Redis, keys: BenchKeys, capacity: int) -> PeerSetup:
    """Fills memevict's store (protect_s=0, so the memory a remember evicts is
    evictable) and the seed's sorted set to capacity, and loads the no-op script."""
    setup = PeerSetup(
        namespace=keys.namespace("peers"),
        seed_key=keys.key("seed"),
        zadd_key=keys.key("zadd"),
        noop_sha=client.script_load(NOOP_SCRIPT),
        noop_namespace=keys.namespace("noop"),
        capacity=capacity,
    )
    policy = Policy(max_hot=capacity, protect_s=0)
    store = MemoryStore(client, setup.namespace, policy, replace_policy=True)
    ids = [f"warm-{i}" for i in range(capacity)]
    fill_store(client, store, ids)
    fill_seed(client, setup.seed_key, ids)
    return setup


def remember_peers(client: redis.Redis, setup: PeerSetup, tag: str) -> dict[str, Call]:
    """Each peer as call(i), remembering a new id per i; ``tag`` keeps the ids
    of different clients apart."""
    store = MemoryStore(client, setup.namespace)
    seed = SeedPeer(client, setup.seed_key, setup.capacity)
    spec = specs()["remember"]
    noop_keys = spec.key_names(setup.noop_namespace)

    def zadd(i: int) -> None:
        client.zadd(setup.zadd_key, {f"{tag}-{i}": 1.0})

    def seed_remember(i: int) -> None:
        seed.remember(f"{tag}-{i}", importance(i))

    def noop(i: int) -> None:
        call = commands.remember(f"{tag}-{i}", importance(i), text=None, whitelist=False, now=None)
        client.evalsha(setup.noop_sha, len(noop_keys), *noop_keys, *spec.argv(call.args))

    def memevict(i: int) -> None:
        store.remember(f"{tag}-{i}", importance(i))

    return {"zadd": zadd, "seed": seed_remember, "noop": noop, "memevict": memevict}


def fill_store(
    client: redis.Redis, store: MemoryStore, ids: Sequence[str], *, batches: bool = True
) -> None:
    """Remembers ids (importances 1..10, no text) in batches of FILL_BATCH:
    with remember_many (``batches``), else as a pipeline of raw EVALSHA of the
    remember script that keeps no receipts."""
    if not batches:
        ScriptRegistry(client).load()
    for start in range(0, len(ids), FILL_BATCH):
        chunk = ids[start : start + FILL_BATCH]
        if batches:
            store.remember_many(
                [(memory_id, importance(start + k)) for k, memory_id in enumerate(chunk)]
            )
        else:
            _pipelined_remember(client, store.namespace, chunk, start)


def _pipelined_remember(
    client: redis.Redis, namespace: str, ids: Sequence[str], start: int
) -> None:
    spec = specs()["remember"]
    keys = spec.key_names(namespace)  # the receipt key of call id '': no receipt
    pipe = client.pipeline(transaction=False)
    for k, memory_id in enumerate(ids):
        call = commands.remember(
            memory_id, importance(start + k), text=None, whitelist=False, now=None
        )
        pipe.evalsha(spec.sha, len(keys), *keys, *spec.argv(call.args))
    pipe.execute()


def fill_seed(client: redis.Redis, key: str, ids: Sequence[str]) -> None:
    """ZADD of ids into one sorted set, with the importances fill_store gives them."""
    for start in range(0, len(ids), FILL_BATCH):
        chunk = ids[start : start + FILL_BATCH]
        client.zadd(key, {memory_id: importance(start + k) for k, memory_id in enumerate(chunk)})
