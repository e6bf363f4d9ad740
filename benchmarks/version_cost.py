"""What the namespace's version costs a write (issue 41): ``remember`` and a one-item
``remember_many`` of a git revision before it (1da6cc0 by default) against the working
tree's, side by side on one server in one run, at capacity.

    python benchmarks/version_cost.py [--base REV] [--binary valkey|redis|PATH]
        [--rounds 7] [--calls 300] [--json FILE]

Starts its own server (the embedded Valkey's binary, or ``--binary redis``) and loads both
trees as Functions libraries of their own (``memevict_base_<version>`` and the tree's),
each configuring a namespace of its own: the store's default Policy but for max_hot 100,
filled to capacity. Then ``--rounds`` interleaved rounds of ``--calls`` writes of new
memories a side (each with a call id of its own, so a receipt, as a store sends them), a
minute apart on the namespace's clock, importances drawn alike on both sides; server µs
per FCALL from INFO commandstats, tree / base paired by round (a write whose items take
other values at the base, remember_many before issue 39, is left out; an argument added
since is not sent to the base). What the tree adds to a write: the version in the state
(a ninth double), made by every call that writes, and remember_many's reply (the
version, each item's order, the ids its groups moved).
"""

from __future__ import annotations

import random
import secrets
import shutil
import statistics
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import redis
from _harness import (
    Run,
    binary,
    checkout,
    interleave,
    node,
    paired,
    parsed_rounds,
    rounds_parser,
    server_us,
    started,
)

from memevict import Policy, commands
from memevict.functions import Library, library, library_of
from memevict.scripts import ScriptSpec, specs, specs_of

BASE = "1da6cc0"
SIDES = ("base", "tree")
WRITES = ("remember", "remember_many")
T0 = 1_750_000_000_000
MINUTE_MS = 60_000


@dataclass
class Side:
    """One tree's library and namespace on the server."""

    lib: Library
    scripts: Mapping[str, ScriptSpec]
    namespace: str
    clock: int = T0

    def call(self, client: redis.Redis, script: str, args: dict[str, Any], call: str = "") -> Any:
        spec = self.scripts[script]
        keys = spec.key_names(self.namespace, call)
        name = f"{self.lib.name}_{script}"
        # (an earlier revision may take fewer arguments: a field added since is left out)
        given = {k: v for k, v in args.items() if k in spec.args}
        return client.fcall(name, len(keys), *keys, *spec.argv(given))


def sides(client: redis.Redis, base: str) -> dict[str, Side]:
    tree = checkout(base, "lua")
    try:
        old = specs_of(tree / "lua")
        found = {
            "base": Side(library_of(old, tree / "lua", "memevict_base"), old, "a"),
            "tree": Side(library(), specs(), "b"),
        }
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    policy = Policy(max_hot=100)
    for side in found.values():
        client.function_load(side.lib.source, replace=True)
        args = {"mode": "replace", **policy.to_args(), "now": str(T0), "seen": ""}
        side.call(client, "configure", args)
    return found


def write(client: redis.Redis, side: Side, how: str, memory_id: str, importance: float) -> None:
    side.clock += MINUTE_MS
    if how == "remember":
        call = commands.remember(
            memory_id, importance, text="a message", whitelist=False, now=side.clock
        )
        args = dict(call.args)
    else:
        item = commands.Item(memory_id, importance, text="a message")
        args = dict(commands.remember_many([item], now=side.clock).args)
    side.call(client, how, args, secrets.token_hex(8))


def measure(client: redis.Redis, base: str, rounds: int, calls: int) -> dict[str, Any]:
    client.flushall()
    found = sides(client, base)
    draws = {name: random.Random(1) for name in SIDES}  # the same importances on both sides
    for name, side in found.items():
        for i in range(300):
            write(client, side, "remember", f"fill{i}", draws[name].uniform(1, 9))
    out: dict[str, Any] = {}
    for how in WRITES:
        if found["base"].scripts[how].group != found["tree"].scripts[how].group:
            print(f"  {how:14s} left out: its items take other values at {base}")
            continue

        def one(name: str, r: int, how: str = how) -> float:
            def run() -> None:
                for i in range(calls):
                    write(client, found[name], how, f"{how}-{r}-{i}", draws[name].uniform(1, 9))

            return server_us(client, run, calls)

        us = interleave(rounds, list(SIDES), one)
        ratio = paired(us["tree"], us["base"])
        print(
            f"  {how:14s} base {statistics.median(us['base']):6.1f} µs, tree "
            f"{statistics.median(us['tree']):6.1f} µs: tree / base {ratio:.3f}"
        )
        out[how] = {"us": us, "ratio": ratio}
    return out


def main(argv: list[str] | None = None) -> int:
    cli = rounds_parser(__doc__)
    cli.add_argument("--base", default=BASE, help=f"the revision before (default {BASE})")
    opts = parsed_rounds(cli, argv)
    run = Run(opts)
    with started(binary(opts.binary)) as servers:
        client = servers[0].client()
        run.on(node(client, servers[0].url))
        print(f"{opts.rounds} rounds of {opts.calls} writes a side, max_hot 100, base {opts.base}")
        found = measure(client, opts.base, opts.rounds, opts.calls)
    run.row(
        "What the namespace's version costs a write",
        ", ".join(f"{how} {r['ratio']:.3f}x" for how, r in found.items())
        + f" the server time of {opts.base}'s",
    )
    run.finish({"base": opts.base, "writes": found})
    return 0


if __name__ == "__main__":
    sys.exit(main())
