"""T5: server memory per hot memory, against a bare sorted-set member.

``INFO memory`` used_memory before and after remembering ``count`` memories
(no text, protect_s=0: the steady state of a memory past its protection)
through memevict, then before and after ZADD of the same ids into one sorted
set. memevict's fill is a pipeline of remember calls without receipts, so the
figure is the memories themselves, not the per-call receipts that expire
after retry_window_s. Run first, before anything else leaves receipts to expire.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from memevict.bench.peers import fill_seed, fill_store
from memevict.bench.server import BenchKeys
from memevict.policy import Policy
from memevict.store import MemoryStore, ScriptRegistry


@dataclass(frozen=True)
class Footprint:
    memories: int
    memevict_bytes: int  # used_memory delta
    zset_bytes: int

    @property
    def memevict_per_memory(self) -> float:
        return self.memevict_bytes / self.memories

    @property
    def zset_per_member(self) -> float:
        return self.zset_bytes / self.memories


def _used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def measure_footprint(client: redis.Redis, keys: BenchKeys, count: int) -> Footprint:
    namespace, zset = keys.namespace("footprint"), keys.key("footprint")
    store = MemoryStore(
        client,
        namespace,
        Policy(max_hot=count, protect_s=0, protect_memories=0),
        replace_policy=True,
    )
    ids = [f"m{i:07d}" for i in range(count)]
    # The script cache is not part of the memories: the fill sends EVALSHA.
    ScriptRegistry(client, "scripts").load()
    before = _used_memory(client)
    fill_store(client, store, ids, batches=False)
    filled = _used_memory(client)
    fill_seed(client, zset, ids)
    zset_filled = _used_memory(client)
    keys.delete_namespace(client, namespace)
    client.unlink(zset)
    return Footprint(count, filled - before, zset_filled - filled)
