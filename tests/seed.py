"""The reference peer: the seed article's client-side functions, as written there.

remember = ZADD of importance (x10 when whitelisted), then evict_if_full;
evict_if_full = ZCARD, ZRANGE of the lowest, ZREM each; decay_memories =
ZRANGE of everything, then ZSCORE and ZADD per member, skipping scores >= 10.
Each step is its own round trip, so other workers interleave between them.
The article has no touch, whitelist, demote or recall: those calls are
recorded as unsupported and change nothing. Used by tests/test_stress.py to
show what memevict's atomic scripts prevent.
"""

from __future__ import annotations

import time

import redis

from memevict.policy import Policy
from memevict.stress import Record, Snapshot

BOOST = 10.0
SKIP_DECAY_AT = 10.0


class SeedTarget:
    def __init__(self, client: redis.Redis, namespace: str, policy: Policy) -> None:
        self.client = client
        self.key = f"seed:{{{namespace}}}:memories"
        self.max_hot = policy.max_hot

    def remember(self, memory_id: str, importance: float, whitelist: bool) -> list[str]:
        self.client.zadd(self.key, {memory_id: importance * (BOOST if whitelist else 1.0)})
        return self.evict_if_full()

    def evict_if_full(self) -> list[str]:
        size = self.client.zcard(self.key)
        if size <= self.max_hot:
            return []
        lowest = self.client.zrange(self.key, 0, size - self.max_hot - 1)
        return [m.decode() for m in lowest if self.client.zrem(self.key, m)]

    def decay_memories(self, rate: float) -> None:
        for member in self.client.zrange(self.key, 0, -1):
            score = self.client.zscore(self.key, member)
            if score is not None and score < SKIP_DECAY_AT:
                self.client.zadd(self.key, {member: score * rate})

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
