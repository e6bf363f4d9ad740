"""An agent's session: memevict's MemevictSession against the OpenAI Agents SDK's own
RedisSession, in turns per second (G1) and in server memory, and the server time of
context(), the read behind every turn.

    python benchmarks/sessions.py [URL] [--parts turns,memory,context] [--rounds 5]
        [--turns 200] [--warm 2000] [--concurrent 20] [--messages 2000]
        [--base REV] [--calls 50] [--skip 4] [--json FILE]

turns (G1 and S1, issues 26 and 41): a turn = append one message
(``add_items([message])``), then read the context to send to the model
(``get_items()``). MemevictSession at max_tokens 4,000 (~100 messages of ~40 tokens in
its context), as it is (recall by relevance on: a user message just added is the
window's query) and with ``recall_share=0`` (recall off: no index, no query); the SDK's
RedisSession keeps everything and returns the last 100 (``SessionSettings(limit=100)``).
All on one asyncio client pool of the same server. Sessions are filled to ``--warm``
messages first (untimed); then each of ``--rounds`` rounds runs, for each kind (the order
alternating), ``--turns`` turns on one session (latency per turn) and ``--concurrent``
sessions at once, each doing ``--turns`` / 4 turns under ``asyncio.gather`` (turns per
second over the whole run). Server µs a turn: INFO commandstats of the commands the
client sends outside a MULTI block (counted in redis-py: adapter_turn.py's Wire), over
each part, per turn: for memevict its FCALLs or EVALSHAs and the HGETALL of its version
(a script's inner commands have lines of their own, not added); for RedisSession its
WATCH, TYPE, MULTI, EXEC (which holds its queued commands' time) and LRANGE. Medians over
rounds; memevict / RedisSession turns per second and server µs paired by round.

memory: each session gets the same ``--messages`` messages, added one turn at a time;
then MEMORY USAGE of every key of the session, summed (memevict's receipts apart:
``call:*`` keys, kept for ``retry_window_s``, 60 s by default). memevict: the adapters'
defaults (max_tokens 4,000, cold_max 10,000), ``cold_max=500`` (the cold tier trimmed)
and ``retry_window_s=0`` (no receipts: a write resent by redis-py after a lost reply may
then apply twice).

context: the namespace of a MemevictSession given ``--warm`` messages (~100 hot, the rest
cold), then context as a turn calls it: a budget of 4,000 less the last ``--skip``
messages' tokens (about: of their stored text), those skipped. Server µs per EVALSHA of
the working tree's context.lua, ``--calls`` a round; with ``--base`` (a git revision or a
lua/ directory) that revision's context.lua against the tree's, the sides interleaved, B
/ A paired by round, and whether both replies are the same.

Without URL it runs on an embedded Valkey; given one it FLUSHES that server.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import redis
import redis.asyncio
from _harness import Run, ainterleave, paired, parser, script_at, script_rounds, server
from adapter_turn import Wire
from agents.extensions.memory.redis_session import RedisSession
from agents.memory import SessionSettings

from memevict import MemoryStore
from memevict.integrations._conversation import approx_tokens
from memevict.integrations.openai_agents import MemevictSession
from memevict.scripts import key_name

PARTS = ("turns", "memory", "context")
T = TypeVar("T")
MAX_TOKENS = 4000
LIMIT = 100
KINDS = ("memevict", "memevict-recall-off", "redis-session")
PEER = "redis-session"
WORDS = ["order", "invoice", "deploy", "meeting", "Lisbon", "budget", "replica", "password"]
WORDS += ["retry", "cache"]
VARIANTS: dict[str, dict[str, Any]] = {
    "memevict (defaults)": {},
    "memevict cold_max=500": {"cold_max": 500},
    "memevict retry_window_s=0": {"retry_window_s": 0},
}


def text(rng: random.Random, n: int) -> str:
    """A message of 10-30 words (~40 tokens: ~100 fit in max_tokens); every fifth carries
    a number (business data)."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(10, 30))]
    return " ".join(words) + (f" total ${n}00." if n % 5 == 0 else ".")


def make(kind: str, client: redis.asyncio.Redis, sid: str) -> Any:
    if kind == "memevict":
        return MemevictSession(sid, client=client, max_tokens=MAX_TOKENS)
    if kind == "memevict-recall-off":
        return MemevictSession(sid, client=client, max_tokens=MAX_TOKENS, recall_share=0)
    return RedisSession(sid, redis_client=client, session_settings=SessionSettings(limit=LIMIT))


def message(rng: random.Random, n: int) -> dict[str, str]:
    return {"role": "user" if n % 2 == 0 else "assistant", "content": text(rng, n)}


async def warm(session: Any, messages: int) -> None:
    rng = random.Random(1)
    for start in range(0, messages, 50):  # (as the history grows, 50 at a time)
        await session.add_items([message(rng, n) for n in range(start, min(start + 50, messages))])


async def turn(session: Any, rng: random.Random, n: int) -> int:
    await session.add_items([message(rng, n)])
    return len(await session.get_items())


# --- turns ------------------------------------------------------------------------------------


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


class Metered:
    """INFO commandstats of the commands the client sent outside a MULTI block (the Wire
    counts them in redis-py) over a part, in server µs per turn."""

    def __init__(self, url: str) -> None:
        self.stats = redis.Redis.from_url(url)  # (its own commands are not metered)
        self.wire = Wire()
        self.wire.install()

    async def part(self, run: Awaitable[T], turns: int) -> tuple[T, float]:
        self.stats.config_resetstat()
        self.wire.top.clear()
        self.wire.on = True
        try:
            found = await run
        finally:
            self.wire.on = False
        calls = self.stats.info("commandstats")
        usec = sum(calls.get(f"cmdstat_{name}", {}).get("usec", 0) for name in self.wire.top)
        return found, usec / turns


async def turns(url: str, opts: argparse.Namespace, run: Run) -> dict[str, Any]:
    pool = redis.asyncio.BlockingConnectionPool.from_url(url, max_connections=50, timeout=None)
    client = redis.asyncio.Redis(connection_pool=pool)
    single = {k: make(k, client, f"g1-{k}") for k in KINDS}
    many = {k: [make(k, client, f"g1-{k}-{i}") for i in range(opts.concurrent)] for k in KINDS}
    for kind in KINDS:
        for session in [single[kind], *many[kind]]:
            await warm(session, opts.warm)
    meter = Metered(url)

    async def one_round(kind: str, _: int) -> dict[str, float]:
        (times, sent), server_us = await meter.part(
            one_at_a_time(single[kind], opts.turns), opts.turns
        )
        each = opts.turns // 4
        at_once_per_s, at_once_us = await meter.part(
            at_once(many[kind], each), opts.concurrent * each
        )
        return {
            "p50_ms": statistics.median(times),
            "p99_ms": statistics.quantiles(times, n=100)[98],
            "turns_per_s": 1e3 * len(times) / sum(times),
            "concurrent_turns_per_s": at_once_per_s,
            "context_messages": sent,
            "server_us": server_us,
            "concurrent_server_us": at_once_us,
        }

    rounds = await ainterleave(opts.rounds, KINDS, one_round)
    await client.aclose()
    await pool.disconnect()
    by_round = {k: {m: [r[m] for r in rounds[k]] for m in rounds[k][0]} for k in KINDS}
    medians = {k: {m: statistics.median(v) for m, v in by_round[k].items()} for k in KINDS}
    for kind, m in medians.items():
        print(
            f"  {kind:19} 1 session: p50 {m['p50_ms']:6.2f} ms, p99 {m['p99_ms']:6.2f} ms, "
            f"{m['turns_per_s']:7.0f} turns/s, {m['server_us']:6.1f} server µs a turn | "
            f"{opts.concurrent} at once: {m['concurrent_turns_per_s']:7.0f} turns/s, "
            f"{m['concurrent_server_us']:6.1f} server µs a turn | context "
            f"{m['context_messages']:.0f} messages"
        )
    measures = ("turns_per_s", "concurrent_turns_per_s", "server_us", "concurrent_server_us")
    ratios = {
        kind: {what: paired(by_round[kind][what], by_round[PEER][what]) for what in measures}
        for kind in KINDS
        if kind != PEER
    }
    for kind, r in ratios.items():
        print(
            f"  {kind} / RedisSession: turns/s {r['turns_per_s']:.3f} at 1 session, "
            f"{r['concurrent_turns_per_s']:.3f} at {opts.concurrent}; server µs a turn "
            f"{r['server_us']:.2f}x at 1, {r['concurrent_server_us']:.2f}x at {opts.concurrent}"
        )
    off, on = ratios["memevict-recall-off"], ratios["memevict"]
    run.row(
        "G1 and S1: an agent turn against the SDK's RedisSession",
        f"memevict ÷ RedisSession, recall off: turns/s {off['turns_per_s']:.2f} / "
        f"{off['concurrent_turns_per_s']:.2f}, server µs {off['server_us']:.1f}x / "
        f"{off['concurrent_server_us']:.1f}x at 1 / {opts.concurrent} sessions; recall on: "
        f"{on['turns_per_s']:.2f} / {on['concurrent_turns_per_s']:.2f}, "
        f"{on['server_us']:.1f}x / {on['concurrent_server_us']:.1f}x",
    )
    return {"kinds": medians, "by_round": by_round, "ratios": ratios}


# --- memory -----------------------------------------------------------------------------------


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
        await session.add_items([message(rng, n)])


async def memory(url: str, messages: int, run: Run) -> dict[str, Any]:
    client = redis.asyncio.Redis.from_url(url)
    found: dict[str, tuple[int, int]] = {}
    for n, (name, policy) in enumerate(VARIANTS.items()):
        session = MemevictSession(f"mem-{n}", client=client, max_tokens=MAX_TOKENS, **policy)
        await fill(session, messages)
        found[name] = await usage(client, key_name(f"openai:mem-{n}", "*"))
    sdk = RedisSession("mem-sdk", redis_client=client)
    await fill(sdk, messages)
    found["RedisSession"] = await usage(client, "agents:session:mem-sdk*")
    await client.aclose()
    sdk_bytes = found["RedisSession"][0]
    sessions = {
        name: {"bytes": total, "receipt_bytes": receipts, "x_redis_session": total / sdk_bytes}
        for name, (total, receipts) in found.items()
    }
    for name, s in sessions.items():
        print(
            f"  {name:28} {s['bytes'] / 1024:8.0f} KiB (receipts {s['receipt_bytes'] / 1024:5.0f}"
            f" KiB)  {s['x_redis_session']:5.2f}x RedisSession"
        )
    run.row(
        "Memory per session",
        f"{sessions['memevict (defaults)']['x_redis_session']:.2f}x RedisSession's bytes "
        f"({sessions['memevict cold_max=500']['x_redis_session']:.2f}x with cold_max=500), "
        f"{messages:,} messages",
    )
    return {"messages": messages, "sessions": sessions}


# --- context ------------------------------------------------------------------------------------


async def context_namespace(url: str, messages: int, skip: int) -> tuple[str, list[str]]:
    """G1's namespace, and the ids of its last ``skip`` messages (what a turn skips)."""
    client = redis.asyncio.Redis.from_url(url)
    session = make("memevict", client, "context")
    await warm(session, messages)
    await client.aclose()
    return session.store.namespace, [e.id for e in session._added[-skip:]] if skip else []


def context(client: redis.Redis, url: str, opts: argparse.Namespace, run: Run) -> dict[str, Any]:
    namespace, skip = asyncio.run(context_namespace(url, opts.warm, opts.skip))
    texts = client.hmget(key_name(namespace, "text"), skip) if skip else []
    budget = MAX_TOKENS - sum(approx_tokens((t or b"").decode()) for t in texts)
    stats = MemoryStore(client, namespace).stats()
    specs = {"B": script_at(None, "context")}
    if opts.base:
        specs = {"A": script_at(opts.base, "context"), **specs}
    if opts.base and (specs["A"].keys, specs["A"].args) != (specs["B"].keys, specs["B"].args):
        raise SystemExit(f"context at {opts.base} takes other KEYS or ARGV: pick a later --base")
    shas = {side: client.script_load(spec.source) for side, spec in specs.items()}
    keys = specs["B"].key_names(namespace)
    values = {
        "budget": str(budget),
        "now": "",
        "terms": "",
        "share": "",
        "detail": "0",
        "skip": skip,
    }
    args = specs["B"].argv({name: values[name] for name in specs["B"].args})
    replies = [client.evalsha(sha, len(keys), *keys, *args) for sha in shas.values()]
    same = all(reply == replies[0] for reply in replies)  # (a variant leaving a part out differs)
    us = script_rounds(client, shas, keys, {"context": args}, rounds=opts.rounds, calls=opts.calls)
    by_round = {side: found["context"] for side, found in us.items()}
    medians = {side: statistics.median(v) for side, v in by_round.items()}
    print(
        f"  G1's namespace: {stats.hot} hot, {stats.tokens:,} tokens, {stats.cold:,} cold; "
        f"budget {budget:,}, {len(skip)} skipped; {len(replies[-1][0])} memories returned; "
        f"server µs per call (EVALSHA), median of {opts.rounds} rounds x {opts.calls}"
    )
    found: dict[str, Any] = {"memories": len(replies[-1][0]), "budget": budget}
    found |= {"server_us": medians, "by_round": by_round}
    if opts.base:
        found |= {"base": opts.base, "paired": paired(by_round["B"], by_round["A"]), "same": same}
        print(
            f"  A ({opts.base}) {medians['A']:6.1f} µs   B (working tree) {medians['B']:6.1f}"
            f" µs   B / A {found['paired']:.3f} | replies: {'the same' if same else 'differ'}"
        )
    else:
        print(f"  context (working tree) {medians['B']:6.1f} µs")
    versus = f" (B / A {opts.base}: {found['paired']:.3f})" if opts.base else ""
    run.row(
        "context(): the window an agent turn reads",
        f"{medians['B']:.1f} µs of server time ({run.environment['server']}){versus}",
    )
    return found


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("url", nargs="?")
    cli.add_argument("--parts", default=",".join(PARTS), help="of turns,memory,context")
    cli.add_argument("--rounds", type=int, default=5)
    cli.add_argument("--turns", type=int, default=200)
    cli.add_argument("--warm", type=int, default=2000)
    cli.add_argument("--concurrent", type=int, default=20)
    cli.add_argument("--messages", type=int, default=2000)
    cli.add_argument("--base", help="context: a git revision or lua/ directory to compare")
    cli.add_argument("--calls", type=int, default=50, help="context: calls per side a round")
    cli.add_argument("--skip", type=int, default=4, help="context: the messages a turn skips")
    opts = cli.parse_args()
    parts = opts.parts.split(",")
    if not parts or set(parts) - set(PARTS):
        cli.error(f"--parts: of {','.join(PARTS)}")
    run = Run(opts)
    results: dict[str, Any] = {}
    with server(opts.url) as found:
        run.on(found)
        print(f"server {run.environment['server']} {run.environment['server_version']}")
        if "turns" in parts:
            print(
                f"turns: add one message, read the context; memevict max_tokens {MAX_TOKENS:,},"
                f" RedisSession limit {LIMIT}; {opts.warm:,} messages a session first; median "
                f"of {opts.rounds} rounds"
            )
            results["turns"] = asyncio.run(turns(found.url, opts, run))
        if "memory" in parts:
            print(f"memory: one session of {opts.messages:,} messages")
            results["memory"] = asyncio.run(memory(found.url, opts.messages, run))
        if "context" in parts:
            print(f"context: a namespace of {opts.warm:,} messages")
            results["context"] = context(found.client, found.url, opts, run)
    run.finish(results)


if __name__ == "__main__":
    main()
