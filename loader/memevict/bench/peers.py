"""The peers of ``remember()``, one call each, and the filling every store starts from.

zadd         raw ZADD of one member, one round trip: the floor for any write
seed         the seed article's remember: ZADD, then evict_if_full (ZCARD, ZRANGE, ZREM)
noop         a do-nothing script (``return 1``) sent as EVALSHA with the KEYS and
             ARGV memevict's remember sends, as a user hand-writing redis-py sends
             it: the KEYS and the fixed ARGV built once
floor        one EVALSHA with remember's KEYS and ARGV making only the commands an
             evicting remember cannot do without (floor_script), on a full store
client_path  ``MemoryStore.remember`` (mode="scripts") of a script that returns a
             fixed reply: memevict's client side against noop's raw redis-py call
memevict     ``MemoryStore.remember``, in the default mode (what users get)
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

from memevict import commands
from memevict.bench.server import BenchKeys
from memevict.policy import Policy
from memevict.scripts import ScriptSpec, specs
from memevict.seed import SeedPeer
from memevict.store import MemoryStore, ScriptRegistry

PEERS = ("zadd", "seed", "noop", "floor", "client_path", "memevict")
NOOP_SCRIPT = "#!lua\nreturn 1"
FIXED_REPLY_SCRIPT = "#!lua\nreturn {'1.5', {}, {}, 0, 0}"  # a valid remember reply
# After a line naming its keys and arguments (floor_script): the new memory in,
# the lowest hot one out to cold. ZCARD is the count remember reads to decide to
# evict; the store is full, so the floor always evicts.
FLOOR_BODY = """local record = string.rep('h', 65)
redis.call('HSET', meta, id, record)
redis.call('ZADD', hot, score, id)
redis.call('ZCARD', hot)
local lowest = redis.call('ZRANGE', hot, 0, 0, 'WITHSCORES')
redis.call('ZREM', hot, lowest[1])
redis.call('ZADD', cold, lowest[2], lowest[1])
redis.call('HSET', meta, lowest[1], 'c' .. string.sub(record, 2))
return lowest[1]
"""
FILL_BATCH = 100  # remember_many's most items per call

Call = Callable[[int], object]


def importance(i: int) -> float:
    """The importances of the article's categories, cycling: 1 .. 10."""
    return 1.0 + i % 10


def floor_script() -> str:
    """FLOOR_BODY on remember's meta, hot and cold keys, id and importance."""
    spec = specs()["remember"]
    key = {role: f"KEYS[{i}]" for i, role in enumerate(spec.keys, 1)}
    arg = {name: f"ARGV[{i}]" for i, name in enumerate(spec.args, 1)}
    return (
        "#!lua\n"
        f"local meta, hot, cold = {key['meta']}, {key['hot']}, {key['cold']}\n"
        f"local id, score = {arg['id']}, {arg['importance']}\n" + FLOOR_BODY
    )


def fixed_reply_spec() -> ScriptSpec:
    """remember's spec (keys, arguments, reply parsing) with FIXED_REPLY_SCRIPT as source."""
    sha = hashlib.sha1(FIXED_REPLY_SCRIPT.encode("utf-8")).hexdigest()
    return dataclasses.replace(specs()["remember"], source=FIXED_REPLY_SCRIPT, sha=sha)


@dataclass(frozen=True)
class PeerSetup:
    """Where each peer writes: memevict's, the floor's and the seed's stores are
    full at ``capacity``, so every remember also evicts one memory. Picklable,
    for the processes of the concurrent clients."""

    namespace: str
    seed_key: str
    zadd_key: str
    noop_sha: str
    noop_namespace: str
    floor_sha: str
    floor_namespace: str
    client_path_namespace: str
    capacity: int


def prepare_peers(client: redis.Redis, keys: BenchKeys, capacity: int) -> PeerSetup:
    """Fills memevict's and the floor's stores (protect_s=0 and protect_memories=0, so the memory a
    remember evicts is evictable) and the seed's sorted set to capacity, and
    loads the scripts."""
    client.script_load(FIXED_REPLY_SCRIPT)
    setup = PeerSetup(
        namespace=keys.namespace("peers"),
        seed_key=keys.key("seed"),
        zadd_key=keys.key("zadd"),
        noop_sha=client.script_load(NOOP_SCRIPT),
        noop_namespace=keys.namespace("noop"),
        floor_sha=client.script_load(floor_script()),
        floor_namespace=keys.namespace("floor"),
        client_path_namespace=keys.namespace("client-path"),
        capacity=capacity,
    )
    policy = Policy(max_hot=capacity, protect_s=0, protect_memories=0)
    ids = [f"warm-{i}" for i in range(capacity)]
    for namespace in (setup.namespace, setup.floor_namespace):
        fill_store(client, MemoryStore(client, namespace, policy, replace_policy=True), ids)
    fill_seed(client, setup.seed_key, ids)
    return setup


def raw_remember(client: redis.Redis, sha: str, namespace: str) -> Callable[[str, float], object]:
    """EVALSHA of ``sha`` with remember's KEYS on ``namespace`` and ARGV for
    (id, importance), no text: the KEYS and the other ARGV built once."""
    spec = specs()["remember"]
    if spec.args[:2] != ("id", "importance"):
        raise RuntimeError(f"remember's ARGV start with {spec.args[:2]}, not id, importance")
    keys = spec.key_names(namespace)
    n = len(keys)
    call = commands.remember("id", 1.0, text=None, whitelist=False, now=None)
    rest = spec.argv(call.args)[2:]

    def send(memory_id: str, importance: float) -> object:
        return client.evalsha(sha, n, *keys, memory_id, repr(importance), *rest)

    return send


def remember_peers(client: redis.Redis, setup: PeerSetup, tag: str) -> dict[str, Call]:
    """Each peer as call(i), remembering a new id per i; ``tag`` keeps the ids
    of different clients apart."""
    store = MemoryStore(client, setup.namespace)
    seed = SeedPeer(client, setup.seed_key, setup.capacity)
    noop = raw_remember(client, setup.noop_sha, setup.noop_namespace)
    floor = raw_remember(client, setup.floor_sha, setup.floor_namespace)
    fixed = MemoryStore(client, setup.client_path_namespace, mode="scripts")
    # StoreBase looks a call's script up in _specs: remember's, with the fixed reply.
    fixed._specs = {**fixed._specs, "remember": fixed_reply_spec()}
    return {
        "zadd": lambda i: client.zadd(setup.zadd_key, {f"{tag}-{i}": 1.0}),
        "seed": lambda i: seed.remember(f"{tag}-{i}", importance(i)),
        "noop": lambda i: noop(f"{tag}-{i}", importance(i)),
        "floor": lambda i: floor(f"{tag}-{i}", importance(i)),
        "client_path": lambda i: fixed.remember(f"{tag}-{i}", importance(i)),
        "memevict": lambda i: store.remember(f"{tag}-{i}", importance(i)),
    }


def fill_store(
    client: redis.Redis, store: MemoryStore, ids: Sequence[str], *, batches: bool = True
) -> None:
    """Remembers ids (importances 1..10, no text) in batches of FILL_BATCH:
    with remember_many (``batches``), else as a pipeline of raw EVALSHA of the
    remember script that keeps no receipts."""
    if not batches:
        ScriptRegistry(client, "scripts").load()  # the pipeline sends EVALSHA
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
