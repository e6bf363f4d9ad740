"""G1's stretch (issue 26), bounded: what a turn would cost if the write returned the context.

A prototype, not a feature: ``add_items`` sends its ``remember_many`` and the next turn's
``context`` in one pipeline (one round trip; the context is computed for the recent items
as they stand after the write), and keeps the context. Two variants of ``get_items``:

- ``cached``: returns the kept context without asking the server. One round trip a turn,
  but exact only while this session is the namespace's only writer: a write by another
  worker between two turns is not seen until this session's next write. The upper bound
  of any one-round-trip design.
- ``checked``: first asks the server whether the namespace changed (one small read: an
  ``HGET`` of one field, the cost of reading a version counter; nothing is compared, as
  memevict keeps no such counter today), and would read the context again if it had.
  Exact under concurrent writers; two round trips a turn, as today.

Each against ``MemevictSession`` as it is and the SDK's ``RedisSession``, on the workload
of ``session_turns.py`` (1 session at a time), rounds interleaved, ratios to
``RedisSession`` paired by round.

    python benchmarks/session_one_trip.py [URL] [--rounds 7] [--turns 200] [--warm 2000]

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
from parser_ab import url_of  # benchmarks/parser_ab.py
from session_turns import MAX_TOKENS, make, text, warm  # benchmarks/session_turns.py

from memevict import commands
from memevict.integrations._conversation import _compose, _skip, recent_of
from memevict.integrations.openai_agents import (
    _GROUP_ROOM,
    Item,
    MemevictSession,
    entries_of,
    loads_all,
    whole_calls,
)
from memevict.labelers import aimportances_of
from memevict.registry import invocation


class OneTrip(MemevictSession):
    """MemevictSession whose write also reads the next context, in one pipeline."""

    def __init__(self, *args: Any, checked: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.checked = checked
        self.kept: list[tuple[str, str]] | None = None

    async def add_items(self, items: list[Item]) -> None:
        conversation, store = self.conversation, self.store
        await conversation.settle()
        entries, self._open_group = entries_of(items, self._open_group)
        importances = await aimportances_of(conversation.labeler, [e.message for e in entries])
        self._added = [*self._added, *entries][-(self.recent + _GROUP_ROOM) :]
        first, budget = conversation._first((), recent_of(self._added, self.recent))
        write = commands.remember_many(conversation._items(entries, importances), now=None)
        read = commands.context(budget, skip=_skip(first), now=None)
        pipe = store.client.pipeline(transaction=False)
        for call in (write, read):
            spec, keys, args = store._parts(call)
            pipe.execute_command(
                *invocation(store.client, store.registry.mode, spec, keys, args).command
            )
        written, context = await pipe.execute()
        write.parse(written)
        self.kept = _compose(read.parse(context), first)

    async def get_items(self, limit: int | None = None) -> list[Item]:
        if self.kept is None:
            return await super().get_items(limit)
        if self.checked:  # (the round trip of a version check)
            await self.store.client.hget(self.store._keys["context"][1], "version")
        return whole_calls(loads_all([text for _, text in self.kept]))


async def rate(session: Any, turns: int) -> float:
    rng = random.Random(2)
    start = time.perf_counter()
    for n in range(turns):
        role = "user" if n % 2 == 0 else "assistant"
        await session.add_items([{"role": role, "content": text(rng, n)}])
        await session.get_items()
    return turns / (time.perf_counter() - start)


async def main_async(url: str, opts: argparse.Namespace) -> None:
    pool = redis.asyncio.BlockingConnectionPool.from_url(url, max_connections=50, timeout=None)
    client = redis.asyncio.Redis(connection_pool=pool)
    sessions = {
        "MemevictSession": make("memevict", client, "trip-a"),
        "one trip, checked": OneTrip("trip-b", client=client, max_tokens=MAX_TOKENS, checked=True),
        "one trip, cached": OneTrip("trip-c", client=client, max_tokens=MAX_TOKENS, checked=False),
        "RedisSession": make("redis-session", client, "trip-d"),
    }
    for session in sessions.values():
        await warm(session, opts.warm)
    rates: dict[str, list[float]] = {k: [] for k in sessions}
    same = True  # the kept context against a fresh read, after every round
    for r in range(opts.rounds):
        order = list(sessions.items())
        for kind, session in order if r % 2 == 0 else order[::-1]:
            rates[kind].append(await rate(session, opts.turns))
            if isinstance(session, OneTrip):
                same &= await session.get_items() == await MemevictSession.get_items(session)
    for kind, got in rates.items():
        ratio = statistics.median(a / b for a, b in zip(got, rates["RedisSession"], strict=True))
        print(f"  {kind:18} {statistics.median(got):6.0f} turns/s, {ratio:.3f}x RedisSession")
    print(f"  the kept context is a fresh read's: {'yes' if same else 'NO'}")
    await client.aclose()
    await pool.disconnect()


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("url", nargs="?")
    cli.add_argument("--rounds", type=int, default=7)
    cli.add_argument("--turns", type=int, default=200)
    cli.add_argument("--warm", type=int, default=2000)
    opts = cli.parse_args()
    with connected(opts.url) as client:
        print(
            f"server {server_version(client)}: 1 session, a turn (add one message, read the "
            f"context); {opts.warm:,} messages a session first; median of {opts.rounds} rounds"
        )
        asyncio.run(main_async(url_of(client), opts))


if __name__ == "__main__":
    main()
