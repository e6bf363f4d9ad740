"""Server memory of one agent session of 2,000 messages: MemevictSession against the SDK's
RedisSession, and what a user can set to lower memevict's (issue 26).

Each session gets the same messages (session_turns.py's, ~40 tokens each) added one
turn at a time (``add_items([message])``, as an agent adds them); then MEMORY USAGE of
every key of the session, summed (memevict's receipts apart: ``call:*`` keys, kept for
``retry_window_s``, 60 s by default). memevict variants: the adapters' defaults
(max_tokens 4,000, cold_max 10,000), ``cold_max=500`` (the cold tier trimmed), and
``retry_window_s=0`` (no receipts: a write resent by redis-py after a lost reply may
then apply twice).

    python benchmarks/session_memory.py [URL] [--messages 2000]

Without URL it runs on an embedded Valkey; given one it FLUSHES that server.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from typing import Any

import redis.asyncio
from ab import connected, server_version  # benchmarks/ab.py
from agents.extensions.memory.redis_session import RedisSession
from parser_ab import url_of  # benchmarks/parser_ab.py
from session_turns import text  # benchmarks/session_turns.py

from memevict.integrations.openai_agents import MemevictSession

VARIANTS: dict[str, dict[str, Any]] = {
    "memevict (defaults)": {},
    "memevict cold_max=500": {"cold_max": 500},
    "memevict retry_window_s=0": {"retry_window_s": 0},
}


async def usage(client: redis.asyncio.Redis, pattern: str) -> tuple[int, int]:
    """Bytes of the keys matching ``pattern``, and of those that are receipts."""
    total = receipts = 0
    async for key in client.scan_iter(match=pattern, count=1000):
        size = int(await client.memory_usage(key, samples=0) or 0)
        total += size
        if b":call:" in key:
            receipts += size
    return total, receipts


async def fill(session: Any, messages: int) -> None:
    rng = random.Random(1)
    for n in range(messages):
        role = "user" if n % 2 == 0 else "assistant"
        await session.add_items([{"role": role, "content": text(rng, n)}])


async def main_async(url: str, messages: int) -> None:
    client = redis.asyncio.Redis.from_url(url)
    rows: list[tuple[str, int, int]] = []
    for n, (name, policy) in enumerate(VARIANTS.items()):
        session = MemevictSession(f"mem-{n}", client=client, max_tokens=4000, **policy)
        await fill(session, messages)
        rows.append((name, *await usage(client, f"memevict:{{openai:mem-{n}}}:*")))
    sdk = RedisSession("mem-sdk", redis_client=client)
    await fill(sdk, messages)
    rows.append(("RedisSession", *await usage(client, "agents:session:mem-sdk*")))
    sdk_bytes = rows[-1][1]
    for name, total, receipts in rows:
        print(
            f"  {name:28} {total / 1024:8.0f} KiB (receipts {receipts / 1024:5.0f} KiB)"
            f"  {total / sdk_bytes:5.2f}x RedisSession"
        )
    await client.aclose()


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("url", nargs="?")
    cli.add_argument("--messages", type=int, default=2000)
    opts = cli.parse_args()
    with connected(opts.url) as client:
        print(f"server {server_version(client)}: one session of {opts.messages:,} messages")
        asyncio.run(main_async(url_of(client), opts.messages))


if __name__ == "__main__":
    main()
