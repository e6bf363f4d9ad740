"""T4: how long a memevict script call blocks the server, on the largest store.

Every MemoryStore method runs a few times while a separate process PINGs on
its own connection (a PING answered late means the server was busy), and the
server's SLOWLOG records every command slower than SLOWLOG_US, mapped back
to script names by SHA. The slowlog settings are restored afterwards. The
last call drops the whole namespace: its keys are UNLINKed, and the server
frees them in the background.

The store's client is an ordinary redis-py client: a call that runs longer
than its socket timeout (5 s by default in redis-py 8) fails on the client
(redis-py resends it and the server answers BUSY) while the script runs on.
That is recorded as the method's error; the bench waits for the server and
goes on, and SLOWLOG still has the script's whole duration.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.connection import Connection
from typing import Any

import redis

from memevict.bench.peers import importance
from memevict.bench.server import busy, wait_until_idle
from memevict.commands import MAX_SCAN, MAX_TOP
from memevict.errors import MemevictError
from memevict.functions import function_name
from memevict.policy import Policy
from memevict.scripts import specs
from memevict.store import MemoryStore

SLOWLOG_US = 1000
SLOWLOG_LEN = 10_000
PING_GAP_S = 0.0005
BATCH = 100
WINDOW_TOKENS = 4_000


@dataclass(frozen=True)
class MethodCalls:
    """One method's calls: how long the slowest took, and the slowest PING meanwhile."""

    method: str
    calls: int
    worst_call_ms: float  # client side
    worst_ping_ms: float | None  # of the PINGs sent or answered during the calls
    error: str | None = None  # what the client raised, if a call failed


@dataclass(frozen=True)
class Blocking:
    size: int
    methods: list[MethodCalls]
    pings: int
    worst_ping_ms: float
    slowlog_us: int  # slowlog-log-slower-than during the run
    # script name -> its longest SLOWLOG entry (µs); scripts never slower than slowlog_us absent
    worst_script_us: dict[str, int]
    slowest: list[tuple[str, int]]  # the longest SLOWLOG entries: (command or script, µs)

    @property
    def worst_us(self) -> int:
        """The longest memevict script call the server logged (0: none above slowlog_us)."""
        return max(self.worst_script_us.values(), default=0)


def _methods(store: MemoryStore, calls: int) -> list[tuple[str, int, Callable[[], Any]]]:
    """(method, calls, one call) in the order they run; the half-life change,
    which rewrites every key, goes last and once."""
    hot = [m.id for m in store.top(3 * calls)]
    evicted: list[str] = []
    counter = iter(range(10**9))

    def remember() -> None:
        i = next(counter)
        evicted.extend(store.remember(f"t4-{i}", importance(i)).evicted)

    def remember_pair() -> None:
        i = next(counter)  # two calls per group: a tool call and its output
        group = f"t4-pair-{i // 2}"
        evicted.extend(store.remember(f"t4-g{i}", importance(i), group=group).evicted)

    cursor = 0

    def scan() -> None:
        nonlocal cursor
        cursor = store.scan("hot", cursor, MAX_SCAN).cursor

    def each(method: Callable[[str], object], ids: list[str]) -> Callable[[], object]:
        it = iter(ids * calls)
        return lambda: method(next(it))

    touched, listed, forgotten = hot[:calls], hot[calls : 2 * calls], hot[2 * calls :]
    methods: list[tuple[str, int, Callable[[], Any]]] = [
        ("remember", calls, remember),
        ("touch", calls, each(store.touch, touched)),
        ("decay", calls, lambda: store.decay(0.99)),
        ("evict", calls, store.evict),
        ("whitelist", calls, each(store.whitelist, listed)),
        ("demote", calls, each(store.demote, listed)),
        ("recall", calls, lambda: store.recall(evicted.pop() if evicted else hot[0])),
        ("forget", calls, each(store.forget, forgotten)),
        ("get", calls, each(store.get, touched)),
        ("top(10)", calls, lambda: store.top(10)),
        ("stats", calls, store.stats),
        ("set_policy (unchanged)", calls, lambda: store.set_policy(store.policy)),
    ]

    def remember_batch() -> None:
        i = next(counter)
        store.remember_many([(f"t4-b{i}-{k}", importance(k)) for k in range(BATCH)])

    methods.append((f"remember_many ({BATCH})", calls, remember_batch))
    methods.append((f"top({MAX_TOP})", calls, lambda: store.top(MAX_TOP)))
    methods.append(("remember with a group (evicting)", calls, remember_pair))
    methods.append(
        (f"window({WINDOW_TOKENS:,} tokens)", calls, lambda: store.window(WINDOW_TOKENS))
    )
    methods.append(("window (no budget)", calls, lambda: store.window()))
    methods.append((f"scan ({MAX_SCAN:,} per page)", calls, scan))
    longer = dataclasses.replace(store.policy, half_life_s=store.policy.half_life_s * 2)
    methods.append(("set_policy (half_life_s changed)", 1, lambda: store.set_policy(longer)))
    return methods


def _burst(
    client: redis.Redis, namespace: str, calls: int, burst: int
) -> list[tuple[str, int, Callable[[], Any]]]:
    """The backlog cases of bounded work: ``burst`` memories remembered within
    one protection window, whose protection then runs out at once, and policy
    changes far below the namespace's size. Their own namespace, filled here."""
    t0 = int(time.time() * 1000)
    after = t0 + 31_000  # the burst's protection (30 s) has run out
    policy = Policy(max_hot=10 * burst, protect_s=30, cold_max=10 * burst)
    store = MemoryStore(client, namespace, policy, replace_policy=True)
    for start in range(0, burst, BATCH):
        store.remember_many([(f"b{start + k}", importance(k)) for k in range(BATCH)], now=t0)
    lower = dataclasses.replace(policy, max_hot=10)
    fewer_cold = dataclasses.replace(lower, cold_max=10)
    return [
        (f"remember, {burst:,} protections ran out", 1, lambda: store.remember("x", 5, now=after)),
        (f"set_policy max_hot {10 * burst:,} -> 10", 1, lambda: store.set_policy(lower, now=after)),
        ("evict, draining that backlog", calls, lambda: store.evict(now=after)),
        ("set_policy cold_max -> 10", 1, lambda: store.set_policy(fewer_cold, now=after)),
    ]


def measure_blocking(
    client: redis.Redis,
    url: str,
    namespace: str,
    size: int,
    calls: int,
    burst_namespace: str,
    burst: int,
) -> Blocking:
    """Every method on ``namespace`` (``size`` memories), then the backlog
    cases on ``burst_namespace`` with ``burst`` memories."""
    store = MemoryStore(client, namespace)
    methods = _methods(store, calls) + _burst(client, burst_namespace, calls, burst)
    # Last: the namespace of every method above goes, whole.
    methods.append((f"drop ({size:,} memories)", 1, store.drop))
    saved = client.config_get("slowlog-*")
    client.config_set("slowlog-log-slower-than", SLOWLOG_US)
    client.config_set("slowlog-max-len", SLOWLOG_LEN)
    client.slowlog_reset()
    windows: list[tuple[str, int, float, float, float, str | None]] = []
    try:
        with Pinger(url) as pinger:
            for method, n, call in methods:
                windows.append((method, n, *_time_method(client, n, call)))
            pings = pinger.samples()
        entries = client.slowlog_get(SLOWLOG_LEN)
    finally:
        wait_until_idle(client)
        for name in ("slowlog-log-slower-than", "slowlog-max-len"):
            if saved.get(name) is not None:
                client.config_set(name, str(saved[name]))
    # A script call in SLOWLOG: EVALSHA <sha> or FCALL <function>, by the store's mode.
    scripts = {
        key: name for name, spec in specs().items() for key in (spec.sha, function_name(name))
    }
    worst_script: dict[str, int] = {}
    slowest: list[tuple[str, int]] = []
    for entry in entries:
        words = bytes(entry["command"]).split(b" ")
        command = words[0].decode(errors="replace").lower()
        what = command
        if command in ("evalsha", "evalsha_ro", "fcall", "fcall_ro") and len(words) > 1:
            what = scripts.get(words[1].decode(errors="replace"), "another script")
            if what != "another script":
                worst_script[what] = max(worst_script.get(what, 0), int(entry["duration"]))
        slowest.append((what, int(entry["duration"])))
    slowest.sort(key=lambda e: -e[1])
    return Blocking(
        size=size,
        methods=[
            MethodCalls(method, n, worst * 1000, _worst_ping_ms(pings, start, end), error)
            for method, n, start, end, worst, error in windows
        ],
        pings=len(pings),
        worst_ping_ms=max((lat for _, lat in pings), default=0.0) * 1000,
        slowlog_us=SLOWLOG_US,
        worst_script_us=worst_script,
        slowest=slowest[:10],
    )


def _time_method(
    client: redis.Redis, calls: int, call: Callable[[], object]
) -> tuple[float, float, float, str | None]:
    """(start, end, slowest call's seconds, error) of ``calls`` calls; stops at
    the first failure, once the server answers again."""
    start, worst, error = time.monotonic(), 0.0, None
    for _ in range(calls):
        t0 = time.perf_counter()
        try:
            call()
        except (MemevictError, redis.RedisError) as failure:
            worst = max(worst, time.perf_counter() - t0)
            error = f"{type(failure).__name__}: {failure}"
            wait_until_idle(client)
            break
        worst = max(worst, time.perf_counter() - t0)
    return start, time.monotonic(), worst, error


def _worst_ping_ms(pings: list[tuple[float, float]], start: float, end: float) -> float | None:
    during = [lat for sent, lat in pings if sent <= end and sent + lat >= start]
    return max(during) * 1000 if during else None


class Pinger:
    """A process sending PING after PING on its own connection, each timed from
    its first attempt until answered (BUSY replies, from a script running past
    busy-reply-threshold, count as not answered)."""

    def __init__(self, url: str) -> None:
        context = get_context("spawn")
        self._pipe, theirs = context.Pipe()
        self._process = context.Process(target=_ping_loop, args=(theirs, url), daemon=True)
        self._process.start()
        theirs.close()
        self._pipe.recv()  # connected
        self._samples: list[tuple[float, float]] | None = None

    def samples(self) -> list[tuple[float, float]]:
        """Stops the PINGs; (monotonic time sent, seconds to the answer) of each."""
        if self._samples is None:
            self._pipe.send("stop")
            self._samples = list(self._pipe.recv())
            self._process.join(timeout=10)
        return self._samples

    def __enter__(self) -> Pinger:
        return self

    def __exit__(self, *_: object) -> None:
        if self._samples is None and self._process.is_alive():
            self._process.terminate()


def _ping_loop(pipe: Connection, url: str) -> None:
    client = redis.Redis.from_url(url)
    client.ping()
    pipe.send("ready")
    samples: list[tuple[float, float]] = []
    while not pipe.poll():
        sent = time.monotonic()
        while True:
            try:
                client.ping()
                break
            except (redis.ResponseError, redis.TimeoutError) as error:
                if not busy(error):
                    raise
                time.sleep(PING_GAP_S)
        samples.append((sent, time.monotonic() - sent))
        time.sleep(PING_GAP_S)
    pipe.send(samples)
    client.close()
