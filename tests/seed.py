"""The reference peer in the stress harness: the seed article's client-side
functions (memevict.seed.SeedPeer: ZADD then ZCARD/ZRANGE/ZREM to evict,
ZRANGE then ZSCORE/ZADD per member to decay), one sorted set per namespace.

The article has no touch, whitelist, demote or recall: those calls are
recorded as unsupported and change nothing. Used by tests/test_stress.py to
show what memevict's atomic scripts prevent.
"""

from __future__ import annotations

import time

import redis

from memevict.policy import Policy
from memevict.seed import SeedPeer
from memevict.stress import Record, Snapshot


class SeedTarget(SeedPeer):
    def __init__(self, client: redis.Redis, namespace: str, policy: Policy) -> None:
        super().__init__(client, f"seed:{{{namespace}}}:memories", policy.max_hot)

    def call(self, op: str, id: str, importance: float, whitelist: bool, now: int | None) -> Record:
        evicted: list[str] = []
        outcome = "ok"
        if op == "remember":
            evicted = self.remember(id, importance, whitelist)
        elif op == "decay":
            self.decay_memories(0.95)
        elif op == "evict":
            evicted = self.evict_if_full()
        elif op == "forget":
            self.client.zrem(self.key, id)
        else:
            outcome = "unsupported"
        return Record("", op, id, importance, whitelist, now, 0, 0, outcome, tuple(evicted))

    def tier(self, id: str) -> str | None:
        return "hot" if self.client.zscore(self.key, id) is not None else None

    def snapshot(self) -> Snapshot:
        pipe = self.client.pipeline(transaction=True)
        pipe.zrange(self.key, 0, -1, withscores=True)
        at = time.time() * 1000
        (members,) = pipe.execute()
        scores = {m.decode(): float(s) for m, s in members}
        return Snapshot(
            at=at,
            end=time.time() * 1000,
            hot=scores,
            fresh={},
            wl={},
            cold={},
            prot={},
            meta=None,
            text={},
            importance=scores,
            stats=None,
        )
