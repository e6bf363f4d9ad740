"""The seed article's client-side eviction, as written there: memevict's reference peer.

remember = ZADD of importance (x10 when whitelisted), then evict_if_full;
evict_if_full = ZCARD, ZRANGE of the lowest, ZREM each; decay_memories =
ZRANGE of everything, then ZSCORE and ZADD per member, skipping scores >= 10.
Each step is its own round trip, so other workers interleave between them.
``memevict bench`` times it against memevict; tests/seed.py drives it in the
stress harness to show the races memevict's atomic scripts prevent.
"""

from __future__ import annotations

from typing import cast

import redis

BOOST = 10.0  # score multiplier of a whitelisted memory
SKIP_DECAY_AT = 10.0  # decay_memories leaves scores at or above this alone


class SeedPeer:
    """The article's functions on one sorted set ``key`` holding at most ``max_hot`` members."""

    def __init__(self, client: redis.Redis, key: str, max_hot: int) -> None:
        self.client = client
        self.key = key
        self.max_hot = max_hot

    def remember(self, memory_id: str, importance: float, whitelist: bool = False) -> list[str]:
        """ZADD, then evict_if_full; returns the evicted ids."""
        self.client.zadd(self.key, {memory_id: importance * (BOOST if whitelist else 1.0)})
        return self.evict_if_full()

    def evict_if_full(self) -> list[str]:
        """Removes the lowest-scored members above max_hot; returns their ids."""
        size = self.client.zcard(self.key)
        if size <= self.max_hot:
            return []
        # A client without decode_responses (the bench's, the stress harness's) reads bytes.
        lowest = cast("list[bytes]", self.client.zrange(self.key, 0, size - self.max_hot - 1))
        return [m.decode() for m in lowest if self.client.zrem(self.key, m)]

    def decay_memories(self, rate: float) -> None:
        """Multiplies every score below SKIP_DECAY_AT by rate, one member at a time."""
        for member in cast("list[bytes]", self.client.zrange(self.key, 0, -1)):
            score = self.client.zscore(self.key, member)
            if score is not None and score < SKIP_DECAY_AT:
                self.client.zadd(self.key, {member: score * rate})
