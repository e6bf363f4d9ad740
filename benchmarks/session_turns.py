"""G1 (issue 26): an agent turn through MemevictSession against the SDK's own RedisSession.

A turn = append one message (``add_items([message])``), then read the context to send to
the model (``get_items()``). MemevictSession at max_tokens 4,000 (~100 messages of ~40
tokens in its context); the SDK's RedisSession keeps everything and returns the last 100
(``SessionSettings(limit=100)``). Both on one asyncio client pool of the same server.
Sessions are filled to ``--warm`` messages first (untimed), then:

- 1 session at a time: ``--turns`` turns on one session, latency per turn;
- N sessions at once (``--concurrent``): N sessions each doing ``--turns`` turns under
  ``asyncio.gather``; turns per second over the whole run.

Rounds interleave the two (the order alternating); medians over rounds, and
memevict / RedisSession turns per second paired by round.

    python benchmarks/session_turns.py [URL] [--rounds 5] [--turns 200] [--warm 2000]
        [--concurrent 20]

Without URL it runs on an embedded Valkey; given one it FLUSHES that server.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from typing import Any

import redis.asyncio
from ab import connected, server_version  # benchmarks/ab.py
from agents.extensions.memory.redis_session import RedisSession
from agents.memory import SessionSettings
from parser_ab import WORDS, url_of  # benchmarks/parser_ab.py

from memevict.integrations.openai_agents import MemevictSession

MAX_TOKENS = 4000
LIMIT = 100


def text(rng: random.Random, n: int) -> str:
    """A message of 10-30 words (~40 tokens: ~100 fit in max_tokens); every fifth carries
    a number (business data)."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(10, 30))]
    return " ".join(words) + (f" total ${n}00." if n % 5 == 0 else ".")


def make(kind: str, client: redis.asyncio.Redis, sid: str) -> Any:
    if kind == "memevict":
        return MemevictSession(sid, client=client, max_tokens=MAX_TOKENS)
    return RedisSession(sid, redis_client=client, session_settings=SessionSettings(limit=LIMIT))


async def turn(session: Any, rng: random.Random, n: int) -> int:
    role = "user" if n % 2 == 0 else "assistant"
    await session.add_items([{"role": role, "content": text(rng, n)}])
    return len(await session.get_items())


async def warm(session: Any, messages: int) -> None:
    rng = random.Random(1)
    for start in range(0, messages, 50):  # (as the history grows, 50 at a time)
        batch = [
            {"role": "user" if n % 2 == 0 else "assistant", "content": text(rng, n)}
            for n in range(start, min(start + 50, messages))
        ]
        await session.add_items(batch)


async def one_at_a_time(session: Any, turns: int) -> tuple[list[float], int]:
    rng, times, sent = random.Random(2), [], 0
    for n in range(turns):
        start = time.perf_counter()
        sent = await turn(session, rng, n)
        times.append((time.perf_counter() - start) * 1e3)
    return times, sent


async def at_once(sessions: list[Any], turns: int) -> float:
    async def run(session: Any, seed: int) -> None:
        rng = random.Random(seed)
        for n in range(turns):
            await turn(session, rng, n)

    start = time.perf_counter()
    await asyncio.gather(*(run(s, k) for k, s in enumerate(sessions)))
    return len(sessions) * turns / (time.perf_counter() - start)


async def main_async(url: str, opts: argparse.Namespace) -> None:
    pool = redis.asyncio.BlockingConnectionPool.from_url(url, max_connections=50, timeout=None)
    client = redis.asyncio.Redis(connection_pool=pool)
    kinds = ("memevict", "redis-session")
    single = {k: make(k, client, f"g1-{k}") for k in kinds}
    many = {k: [make(k, client, f"g1-{k}-{i}") for i in range(opts.concurrent)] for k in kinds}
    for kind in kinds:
        for session in [single[kind], *many[kind]]:
            await warm(session, opts.warm)
    p50: dict[str, list[float]] = {k: [] for k in kinds}
    p99: dict[str, list[float]] = {k: [] for k in kinds}
    rate1: dict[str, list[float]] = {k: [] for k in kinds}
    rate_n: dict[str, list[float]] = {k: [] for k in kinds}
    sent: dict[str, int] = {}
    for r in range(opts.rounds):
        for kind in kinds if r % 2 == 0 else kinds[::-1]:
            times, sent[kind] = await one_at_a_time(single[kind], opts.turns)
            p50[kind].append(statistics.median(times))
            p99[kind].append(statistics.quantiles(times, n=100)[98])
            rate1[kind].append(1e3 * len(times) / sum(times))
            rate_n[kind].append(await at_once(many[kind], opts.turns // 4))
    for kind in kinds:
        print(
            f"  {kind:14} 1 session: p50 {statistics.median(p50[kind]):6.2f} ms, p99 "
            f"{statistics.median(p99[kind]):6.2f} ms, {statistics.median(rate1[kind]):7.0f} "
            f"turns/s | {opts.concurrent} at once: {statistics.median(rate_n[kind]):7.0f} "
            f"turns/s | context {sent[kind]} messages"
        )

    def paired(rates: dict[str, list[float]]) -> float:
        return statistics.median(
            m / s for m, s in zip(rates["memevict"], rates["redis-session"], strict=True)
        )

    print(
        f"  memevict / RedisSession turns/s: 1 session {paired(rate1):.3f}, "
        f"{opts.concurrent} at once {paired(rate_n):.3f}"
    )
    await client.aclose()
    await pool.disconnect()


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("url", nargs="?")
    cli.add_argument("--rounds", type=int, default=5)
    cli.add_argument("--turns", type=int, default=200)
    cli.add_argument("--warm", type=int, default=2000)
    cli.add_argument("--concurrent", type=int, default=20)
    opts = cli.parse_args()
    with connected(opts.url) as client:
        print(
            f"server {server_version(client)}: a turn (add one message, read the context); "
            f"memevict max_tokens {MAX_TOKENS:,}, RedisSession limit {LIMIT}; "
            f"{opts.warm:,} messages a session first; median of {opts.rounds} rounds"
        )
        asyncio.run(main_async(url_of(client), opts))


if __name__ == "__main__":
    main()
