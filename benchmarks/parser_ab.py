"""An agent turn with redis-py's pure-Python reply parser against hiredis's, in one run.

redis-py parses replies in Python unless the hiredis package is installed; memevict's
replies are nested arrays (a window of 100 memories is ~1,100 elements). Two clients of
one server, each on a pool whose connections use one parser, drive the same turns:

- openai: ``MemevictSession``: ``get_items()`` then ``add_items([user, assistant])``;
- pydantic-ai: ``SyncMemevictHistory`` called with the run's history, then the reply.

max_tokens 4,000 (~100 messages in the context), the history past the budget (``--warm``
turns first), rounds interleaved (the side order alternating); median µs per turn (client
and server, wall clock) and B / A paired by round (A: pure Python, B: hiredis).

    python benchmarks/parser_ab.py [URL] [--turns 100] [--rounds 10] [--warm 120]

Without URL it runs on an embedded Valkey; with one it writes namespaces of its own and
drops them.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio
from ab import connected, server_version  # benchmarks/ab.py
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from redis._parsers import _AsyncHiredisParser, _AsyncRESP2Parser, _HiredisParser, _RESP2Parser

from memevict.integrations.openai_agents import MemevictSession
from memevict.integrations.pydantic_ai import SyncMemevictHistory

MAX_TOKENS = 4000
WORDS = [
    "order",
    "invoice",
    "deploy",
    "meeting",
    "Lisbon",
    "budget",
    "replica",
    "password",
    "retry",
    "cache",
]
PARSERS = {
    "python": (_RESP2Parser, _AsyncRESP2Parser),
    "hiredis": (_HiredisParser, _AsyncHiredisParser),
}


def text(rng: random.Random, n: int) -> str:
    """A message of 20-60 words; every fifth carries a number (business data)."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(20, 60))]
    return " ".join(words) + (f" total ${n}00." if n % 5 == 0 else ".")


class OpenAITurns:
    def __init__(self, url: str, parser: str, rng: random.Random) -> None:
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            url, max_connections=4, timeout=None, parser_class=PARSERS[parser][1]
        )
        self.client = redis.asyncio.Redis(connection_pool=pool)
        self.session = MemevictSession(
            f"parser-{parser}", client=self.client, max_tokens=MAX_TOKENS
        )
        self.rng, self.n = rng, 0

    async def turn(self) -> int:
        self.n += 1
        items = await self.session.get_items()
        user = {"role": "user", "content": text(self.rng, self.n)}
        reply = {"role": "assistant", "content": text(self.rng, self.n + 1)}
        await self.session.add_items([user, reply])
        return len(items)

    async def close(self) -> None:
        await self.session.clear_session()
        await self.client.aclose()


class PydanticTurns:
    def __init__(self, url: str, parser: str, rng: random.Random) -> None:
        pool = redis.BlockingConnectionPool.from_url(
            url, max_connections=4, parser_class=PARSERS[parser][0]
        )
        self.client = redis.Redis(connection_pool=pool)
        self.history = SyncMemevictHistory(
            f"parser-{parser}", client=self.client, max_tokens=MAX_TOKENS
        )
        self.rng, self.n = rng, 0
        self.messages: list[ModelMessage] = []

    def turn(self) -> int:
        self.n += 1
        request = ModelRequest([UserPromptPart(text(self.rng, self.n))])
        out = self.history([*self.messages, request])
        self.messages = [*out, ModelResponse([TextPart(text(self.rng, self.n + 1))])]
        return len(out)

    def close(self) -> None:
        self.history.clear_session()
        self.client.close()


def url_of(client: redis.Redis) -> str:
    """The URL of ``client``'s server (a TCP port or a unix socket)."""
    kw = client.connection_pool.connection_kwargs
    if kw.get("path"):
        return f"unix://{kw['path']}?db={kw.get('db', 0)}"
    return f"redis://{kw['host']}:{kw['port']}/{kw.get('db', 0)}"


def timed(turn: Callable[[], Any], loop: asyncio.AbstractEventLoop | None) -> tuple[float, int]:
    start = time.perf_counter()
    sent = loop.run_until_complete(turn()) if loop else turn()
    return (time.perf_counter() - start) * 1e6, sent


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("url", nargs="?")
    cli.add_argument("--turns", type=int, default=100)
    cli.add_argument("--rounds", type=int, default=10)
    cli.add_argument("--warm", type=int, default=120)
    opts = cli.parse_args()
    loop = asyncio.new_event_loop()
    with connected(opts.url) as client:
        url = url_of(client)
        print(f"server {server_version(client)}; max_tokens {MAX_TOKENS}")
        for name, kind in (("openai", OpenAITurns), ("pydantic-ai", PydanticTurns)):
            async_turns = kind is OpenAITurns
            sides = {p: kind(url, p, random.Random(7)) for p in PARSERS}
            on = loop if async_turns else None
            for side in sides.values():
                for _ in range(opts.warm):
                    timed(side.turn, on)
            medians: dict[str, list[float]] = {p: [] for p in sides}
            sent: dict[str, list[int]] = {p: [] for p in sides}
            for r in range(opts.rounds):
                for parser in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                    runs = [timed(sides[parser].turn, on) for _ in range(opts.turns)]
                    medians[parser].append(statistics.median(us for us, _ in runs))
                    sent[parser] += [n for _, n in runs]
            for side in sides.values():
                if async_turns:
                    loop.run_until_complete(side.close())
                else:
                    side.close()
            a, b = medians["python"], medians["hiredis"]
            paired = statistics.median(y / x for x, y in zip(a, b, strict=True))
            print(
                f"  {name:12} python {statistics.median(a):8.0f} µs/turn | hiredis "
                f"{statistics.median(b):8.0f} µs/turn | B / A paired {paired:.3f} | "
                f"messages sent {statistics.median(sent['python']):.0f} / "
                f"{statistics.median(sent['hiredis']):.0f}"
            )
    loop.close()


if __name__ == "__main__":
    main()
