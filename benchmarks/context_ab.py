"""context.lua of a git revision (A) against the working tree's (B) on G1's namespace.

The namespace is the one ``session_turns.py`` builds: a ``MemevictSession`` at max_tokens
4,000 given ``--warm`` messages of ~40 tokens (importance from the default labeler), so
~100 messages are hot and the rest cold. Then context as an agent turn calls it: a budget
of 4,000 less the last 4 messages' tokens (about: of their stored text), those 4 skipped
(``--skip 0``: none, and the whole budget). Whether both replies are the same is printed
(a variant that leaves a part out differs); then interleaved rounds (the side order
alternating) of ``--calls`` EVALSHA per side; server µs per call from INFO commandstats;
medians, and B / A paired by round.

    python benchmarks/context_ab.py BASE_REV|LUA_DIR [URL] [--rounds 20] [--calls 50]

Without URL it runs on an embedded Valkey; given one it FLUSHES that server.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

import redis
import redis.asyncio
from ab import connected, lua_at, server_version  # benchmarks/ab.py
from parser_ab import url_of  # benchmarks/parser_ab.py
from session_turns import MAX_TOKENS, make, warm  # benchmarks/session_turns.py

from memevict import MemoryStore
from memevict.integrations._conversation import approx_tokens
from memevict.scripts import parse, specs


async def fill(url: str, messages: int, skip: int) -> tuple[str, list[str]]:
    """The namespace, and the ids of its last ``skip`` messages (what a turn skips)."""
    client = redis.asyncio.Redis.from_url(url)
    session = make("memevict", client, "context-ab")
    await warm(session, messages)
    await client.aclose()
    return session.store.namespace, [e.id for e in session._added[-skip:]] if skip else []


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("base")
    cli.add_argument("url", nargs="?")
    cli.add_argument("--warm", type=int, default=2000)
    cli.add_argument("--skip", type=int, default=4)
    cli.add_argument("--rounds", type=int, default=20)
    cli.add_argument("--calls", type=int, default=50)
    opts = cli.parse_args()
    with connected(opts.url) as client:
        namespace, skip = asyncio.run(fill(url_of(client), opts.warm, opts.skip))
        store = MemoryStore(client, namespace)
        texts = client.hmget(f"memevict:{{{namespace}}}:text", skip) if skip else []
        budget = MAX_TOKENS - sum(approx_tokens((t or b"").decode()) for t in texts)
        stats = store.stats()
        root = lua_at(opts.base)
        old = parse("context", (root / "context.lua").read_text(), root)
        new = specs()["context"]
        shas = {"A": client.script_load(old.source), "B": client.script_load(new.source)}
        keys = new.key_names(namespace)
        args = [str(budget), "", *skip]
        replies = [client.evalsha(sha, len(keys), *keys, *args) for sha in shas.values()]
        same = replies[0] == replies[1]  # (a variant that leaves a part out differs)
        print(
            f"server {server_version(client)}: context of a G1 namespace ({stats.hot} hot, "
            f"{stats.tokens:,} tokens, {stats.cold:,} cold); budget {budget:,}, {len(skip)} "
            f"skipped; {len(replies[0][0])} memories returned; A {opts.base}, B the working "
            f"tree; server µs per call (EVALSHA), median of {opts.rounds} rounds x {opts.calls}"
        )
        us: dict[str, list[float]] = {"A": [], "B": []}
        for r in range(opts.rounds):
            for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
                client.config_resetstat()
                for _ in range(opts.calls):
                    client.evalsha(shas[side], len(keys), *keys, *args)
                us[side].append(
                    float(client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])
                )
        ratio = statistics.median(b / a for a, b in zip(us["A"], us["B"], strict=True))
        print(
            f"  A {statistics.median(us['A']):6.1f} µs   B {statistics.median(us['B']):6.1f} µs"
            f"   B / A {ratio:.3f} | replies: {'the same' if same else 'differ'}"
        )


if __name__ == "__main__":
    main()
