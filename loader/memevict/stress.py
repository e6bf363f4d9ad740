"""Stress: many worker processes hammer one namespace; a reader checks the rules.

``run(config)`` starts ``config.workers`` processes (every other one with
``config.threads`` threads) that send a random mix of remember, touch, decay,
evict, whitelist, demote, recall and forget, half with the server clock and
half with an explicit, slightly skewed ``now``. Every call is recorded with
its wall-clock start and end. Meanwhile a reader takes atomic snapshots
(MULTI/EXEC) of every key of the namespace, with searches of the lexical index
(rule 14) in the same transaction, and checks them; at the end the call log is
checked too. Violations are counted by kind; memevict must show none.

The target under test is pluggable (``config.target``, "module:Class"), so the
seed article's client-side functions (tests/seed.py) run the same workload.
"""

from __future__ import annotations

import bisect
import contextlib
import importlib
import itertools
import math
import random
import re
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from multiprocessing import get_context
from typing import Any, Protocol, TypeVar

import redis

from memevict.commands import MAX_BATCH, Item, search
from memevict.errors import MemevictError, NotDurable, NotFound
from memevict.policy import Policy
from memevict.results import Batch, Evicted, Remembered
from memevict.scripts import key_name, specs
from memevict.state import unpack_state
from memevict.store import MemoryStore, ScriptRegistry

OPS = ("remember", "touch", "decay", "evict", "whitelist", "demote", "recall", "forget", "burst")
WEIGHTS = (40, 12, 4, 8, 9, 9, 10, 8, 1)
# A burst: remember_many of BURST new memories at one now. They are protected
# together and their protection runs out together, more than a call's work
# (WORK, lib/memory.lua) when bursts overlap, so the backlog rules run too.
BURST = MAX_BATCH
WORK = 200
IMPORTANCES = (1.0, 3.0, 5.0, 7.0, 8.0, 10.0)  # the seed article's categories
CRITICAL = 10.0
BARE = 1.0  # a remember at this importance sends no text (send_op)
META = struct.Struct("<ddddddBdd")  # lib/memory.lua META; the group's name follows
SLACK_MS = 5.0  # wall clock vs server clock on one machine, and rounding to whole ms
# The outcome of a call whose connection failed (a failover): it may have been applied,
# with effects nobody saw, so the log checks assume it may have undone anything. So
# may a NamespaceLost: raised by a resend that reached an empty server, after the
# first attempt may have been applied on the old primary (and replicated).
UNKNOWN = "unknown"
MAYBE_APPLIED = frozenset({UNKNOWN, "NamespaceLost"})
T = TypeVar("T")


def cold_due(cold: int, cold_max: int) -> int:
    """The cold memories past cold_max the next call deletes (docs/rules.md, rule 8):
    every one, once there are 1 + cold_max // 64 of them (at most 32)."""
    excess = cold - cold_max
    return excess if excess >= min(32, 1 + cold_max // 64) else 0


def stress_policy() -> Policy:
    """Small enough that every rule fires constantly under load."""
    return Policy(
        max_hot=20,
        max_tokens=50,  # memories cost 1..5 tokens (tokens_of): both budgets bind
        evict_batch=1,
        half_life_s=5.0,
        whitelist_cap=4,
        protect_s=0.25,
        protect_memories=2,  # a tenth of max_hot: the newest 2 are protected too
        cold_max=40,
        jitter=0.001,
        idle_ttl_s=600,  # every write keeps every key alive: checked on each snapshot
        index=1,  # remembers with text are indexed: checked on each snapshot (rule 14)
    )


WINDOW_BUDGET = 20  # tokens of the window each snapshot reads
# prot ranks a memory protected by activity alone at ACTIVITY + its order (lib/memory.lua)
ACTIVITY = 2**50
# Each snapshot searches for the own terms (term_of) of PROBES ids it last saw indexed
# and PROBES it saw at all, in one query of k PROBE_K (room for all), and for one
# shared term ("cost" and 1..5), k PROBE_K: two searches, so the reader's extra work
# on the server stays small (a search costs 0.1-1 ms there).
PROBES = 3
PROBE_K = 10


@dataclass(frozen=True)
class StressConfig:
    url: str
    namespace: str = "stress"
    workers: int = 16
    threads: int = 3
    ops: int = 200  # per thread
    ids: int = 60
    seed: int = 1
    skew_ms: int = 30
    policy: Policy = field(default_factory=stress_policy)
    target: str = "memevict.stress:MemevictTarget"


@dataclass(frozen=True, slots=True)
class Record:
    """One call: what was asked, when (wall ms), and what came back."""

    worker: str
    op: str
    id: str
    importance: float
    whitelist: bool
    now: int | None
    t0: float
    t1: float
    outcome: str  # "ok", the error class name, or UNKNOWN
    evicted: tuple[str, ...] = ()
    demoted: tuple[str, ...] = ()
    changed: bool = False  # touch/demote/forget/remember: the call took effect


@dataclass
class Snapshot:
    """What a reader saw at one instant (taken inside MULTI/EXEC)."""

    at: float  # wall ms when the snapshot was sent
    end: float  # wall ms when its reply arrived: it shows the state at one instant between
    hot: dict[str, float]
    fresh: dict[str, float]
    wl: dict[str, float]
    cold: dict[str, float]
    prot: dict[str, float]
    meta: dict[str, bytes] | None  # None: the target keeps no metadata (the seed peer)
    text: dict[str, bytes]
    importance: dict[str, float]  # what each memory's score is built from, as stored
    stats: tuple[int, ...] | None  # the target's own counts (Stats), same transaction
    stats_now: int = 0
    seq: int = 0  # memories remembered in the namespace (its state's order counter)
    ghot: dict[str, float] = field(default_factory=dict)
    groups: dict[str, float] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)
    # window(WINDOW_BUDGET) in the same transaction: (id, tokens) in its order
    window: list[tuple[str, int]] | None = None
    ttls: dict[str, int] = field(default_factory=dict)  # PTTL of each key that exists
    # The lexical index (lib/index.lua), None: the target keeps none (the seed peer).
    entries: dict[bytes, str] | None = None  # entry -> id
    entry_of: dict[str, bytes] = field(default_factory=dict)  # id -> entry
    last_entry: int = 0  # the last entry given out
    # search(query, PROBE_K) in the same transaction: (the query's terms, ids found)
    searches: list[tuple[tuple[str, ...], list[str]]] = field(default_factory=list)


class Target(Protocol):
    """What a worker drives and what the reader looks at."""

    def __init__(self, client: redis.Redis, namespace: str, policy: Policy) -> None: ...

    def call(self, op: str, id: str, importance: float, whitelist: bool, now: int | None) -> Record:
        """Runs one op; the returned Record has no times or worker yet."""
        ...

    def snapshot(self) -> Snapshot: ...

    def tier(self, id: str) -> str | None:
        """'hot', 'cold' or None (gone), through the target's own read path."""
        ...


def _number(memory_id: str) -> int | None:
    """n of an id mN of the workload."""
    found = re.fullmatch(r"m(\d+)", memory_id)
    return int(found.group(1)) if found else None


def tokens_of(memory_id: str) -> int:
    """A memory's cost, a function of its id: m7 costs 3; any other id 1."""
    n = _number(memory_id)
    return 1 if n is None else 1 + n % 5


def group_of(memory_id: str) -> str | None:
    """m0..m29 come in linked pairs (m0 and m1 in g0, ...); the rest in no group."""
    n = _number(memory_id)
    return f"g{n // 2}" if n is not None and n < 30 else None


def term_of(memory_id: str) -> str:
    """The term only ``memory_id``'s text holds: "id" and the id's bytes in hex."""
    return "id" + memory_id.encode("utf-8", "surrogateescape").hex()


def owner_of(term: str) -> str | None:
    """The id whose term_of is ``term``; None for any other term."""
    found = re.fullmatch(r"id((?:[0-9a-f]{2})+)", term)
    return bytes.fromhex(found.group(1)).decode("utf-8", "surrogateescape") if found else None


def text_for(memory_id: str) -> bytes:
    """The text stored with a memory: a function of its id, with non-ASCII and
    binary bytes, so any corruption on a move between tiers shows. Its terms
    (memevict.terms) are the id's own term_of and "cost" and its tokens, which
    about a fifth of the memories share."""
    words = f"{term_of(memory_id)} cost{tokens_of(memory_id)}"
    return words.encode() + b"|\x00\xff\xfe|" + "é✓".encode() * 3


def indexable(memory_id: str) -> bool:
    """Whether the workload indexes a memory remembered with text: all but m5, m11,
    m17, ... (n % 6 == 5), sent with no terms (terms=[]): they have text, never terms."""
    n = _number(memory_id)
    return n is None or n % 6 != 5


def terms_for(memory_id: str) -> tuple[str, ...]:
    """The terms the workload indexes a memory by when it is remembered with text:
    its text's, or none (indexable)."""
    if not indexable(memory_id):
        return ()
    return (term_of(memory_id), f"cost{tokens_of(memory_id)}")


def cold_gone(s: Snapshot, cold_max: int) -> set[str]:
    """The cold memories past cold_max, waiting to be dropped: every call treats them as
    gone (lib/memory.lua cold_gone): the oldest (by score, then id, as ZREVRANK ranks
    them) past the cold_max newest, with every cold member of the first one's group."""
    if len(s.cold) <= cold_max:
        return set()
    ranked = sorted(
        s.cold, key=lambda x: (s.cold[x], x.encode("utf-8", "surrogateescape")), reverse=True
    )
    gone = set(ranked[cold_max:])
    raw = (s.meta or {}).get(ranked[cold_max], b"")
    group = raw[META.size :] if len(raw) > META.size else b""
    if group:
        gone |= {x for x in s.cold if (s.meta or {}).get(x, b"")[META.size :] == group}
    return gone


def burst_ids(id: str) -> list[str]:
    return [f"{id}-{k}" for k in range(BURST)]


def send_op(
    store: Any, op: str, id: str, importance: float, whitelist: bool, now: int | None
) -> Any:
    """One op of the mix on a store: its result, or with an AsyncMemoryStore
    the coroutine to await for it."""
    if op == "burst":
        items = [
            Item(x, importance, text=text_for(x).decode("utf-8", "surrogateescape"))
            for x in burst_ids(id)
        ]
        return store.remember_many(items, now=now)
    if op == "remember":
        # A remember at importance BARE sends no text: the memory keeps the text and
        # terms it has, or has none (and is not indexed) until one with text.
        text = None if importance == BARE else text_for(id).decode("utf-8", "surrogateescape")
        return store.remember(
            id,
            importance,
            text=text,
            whitelist=whitelist,
            tokens=tokens_of(id),
            group=group_of(id),
            now=now,
            terms=None if text is None or indexable(id) else [],
        )
    if op == "decay":
        return store.decay(0.95)
    if op == "evict":
        return store.evict(now=now)
    if op == "forget":
        return store.forget(id)
    return getattr(store, op)(id, now=now)


class MemevictTarget:
    """``options``: more MemoryStore settings (the failover campaign's durable writes)."""

    def __init__(self, client: redis.Redis, namespace: str, policy: Policy, **options: Any) -> None:
        self.client = client
        self.namespace = namespace
        self.store = MemoryStore(client, namespace, policy, **options)
        self.load()
        # What the last snapshot held (indexed ids, then every id): the next one searches
        # for some of them, by then perhaps gone.
        self.seen: tuple[list[str], list[str]] = ([], [])
        self.rng = random.Random(0)

    def load(self) -> None:
        """snapshot() sends EVALSHA_RO inside MULTI (again after a failover: a promoted
        replica has no script cache)."""
        ScriptRegistry(self.client, "scripts").load()

    def call(self, op: str, id: str, importance: float, whitelist: bool, now: int | None) -> Record:
        try:
            result = send_op(self.store, op, id, importance, whitelist, now)
        except NotDurable as error:  # applied, not confirmed: what it did is known
            return replace(
                _record(op, id, importance, whitelist, now, error.result), outcome="NotDurable"
            )
        return _record(op, id, importance, whitelist, now, result)

    def tier(self, id: str) -> str | None:
        memory = self.store.get(id)
        return None if memory is None else memory.tier

    def queries(self, probes: Sequence[str] | None) -> list[tuple[str, ...]]:
        """What a snapshot searches for (PROBES): the own terms of ``probes`` (None:
        of ids the last snapshot saw), and a shared term."""
        if probes is None:
            indexed, every = self.seen
            probes = self.rng.sample(indexed, min(PROBES, len(indexed)))
            probes += self.rng.sample(every, min(PROBES, len(every)))
        own = tuple(dict.fromkeys(term_of(x) for x in probes))
        shared = (f"cost{self.rng.randint(1, 5)}",)
        return [own, shared] if own else [shared]

    def snapshot(self, probes: Sequence[str] | None = None) -> Snapshot:
        """``probes``: the ids whose own term (term_of) the snapshot searches for;
        None: some the reader picks."""
        ns = self.namespace
        spec = self.store.registry.specs["stats"]
        stats_now = int(time.time() * 1000)
        pipe = self.client.pipeline(transaction=True)
        for role in ("hot", "fresh", "wl", "cold", "prot", "ghot", "groups"):
            pipe.zrange(key_name(ns, role), 0, -1, withscores=True)
        pipe.zrange(key_name(ns, "links"), 0, -1)
        pipe.hgetall(key_name(ns, "meta"))
        pipe.hgetall(key_name(ns, "text"))
        pipe.hget(key_name(ns, "state"), "packed")
        keys = spec.key_names(ns)
        pipe.evalsha_ro(spec.sha, len(keys), *keys, str(stats_now))
        window = self.store.registry.specs["window"]
        keys = window.key_names(ns)
        pipe.evalsha_ro(window.sha, len(keys), *keys, str(WINDOW_BUDGET), str(stats_now), "", "")
        pipe.hgetall(key_name(ns, "entries"))
        pipe.hgetall(key_name(ns, "entry_of"))
        pipe.hget(key_name(ns, "terms"), "")  # the last entry given out
        queries = self.queries(probes)
        searches = [search(" ".join(q), PROBE_K, tier="all", now=stats_now) for q in queries]
        finder = self.store.registry.specs["search"]
        keys = finder.key_names(ns)
        for call in searches:
            pipe.evalsha_ro(finder.sha, len(keys), *keys, *finder.argv(call.args))
        roles = [
            key_name(ns, r)
            for r in sorted({r for x in specs().values() for r in x.keys})
            if r != "receipt"
        ]
        for key in roles:
            pipe.pttl(key)
        at = time.time() * 1000
        (hot, fresh, wl, cold, prot, ghot, groups, links, meta, text, latest, stats, win, *rest) = (
            pipe.execute()
        )
        entries, entry_of, last, *rest = rest
        found, ttls = rest[: len(searches)], rest[len(searches) :]
        snap = Snapshot(
            at=at,
            end=time.time() * 1000,
            hot=_scores(hot),
            fresh=_scores(fresh),
            wl=_scores(wl),
            cold=_scores(cold),
            prot=_scores(prot),
            meta=_fields(meta),
            text=_fields(text),
            importance={
                k: META.unpack_from(v)[0] for k, v in _fields(meta).items() if len(v) >= META.size
            },
            stats=tuple(int(x) for x in stats),
            # stats runs at the namespace's time if stats_now is behind it
            stats_now=max(stats_now, int(unpack_state(latest)["latest"]) if latest else 0),
            seq=int(unpack_state(latest)["seq"]) if latest else 0,
            ghot=_scores(ghot),
            groups=_scores(groups),
            links=[x.decode("utf-8", "surrogateescape") for x in links],
            window=[(m[0].decode("utf-8", "surrogateescape"), int(m[9])) for m in win[0]],
            ttls={k: int(t) for k, t in zip(roles, ttls, strict=True) if int(t) != -2},
            entries={e: x.decode("utf-8", "surrogateescape") for e, x in entries.items()},
            entry_of=_fields(entry_of),
            last_entry=int(last or 0),
            searches=[
                (query, [m.memory.id for m in call.parse(reply)])
                for query, call, reply in zip(queries, searches, found, strict=True)
            ],
        )
        self.seen = (sorted(snap.entry_of), sorted(snap.meta or ()))
        return snap


def _record(
    op: str, id: str, importance: float, whitelist: bool, now: int | None, result: object
) -> Record:
    evicted: tuple[str, ...] = ()
    demoted: tuple[str, ...] = ()
    changed = True
    if isinstance(result, Remembered):
        evicted, demoted = result.evicted, result.demoted
        changed = op != "demote" or id in demoted
    elif isinstance(result, Evicted | Batch):
        evicted = result.evicted
    elif result is None:  # touch of a cold memory changed nothing; forget and decay did
        changed = op != "touch"
    return Record("", op, id, importance, whitelist, now, 0.0, 0.0, "ok", evicted, demoted, changed)


def _scores(pairs: Iterable[tuple[bytes, float]]) -> dict[str, float]:
    return {k.decode("utf-8", "surrogateescape"): float(v) for k, v in pairs}


def _fields(mapping: dict[bytes, bytes]) -> dict[str, bytes]:
    return {k.decode("utf-8", "surrogateescape"): v for k, v in mapping.items()}


def load_target(path: str) -> type[Target]:
    module, _, name = path.partition(":")
    cls: type[Target] = getattr(importlib.import_module(module), name)
    return cls


# Workers


def _thread_calls(config: StressConfig, worker: str, rng: random.Random) -> list[Record]:
    client = redis.Redis.from_url(config.url)
    target = load_target(config.target)(client, config.namespace, config.policy)
    records = [
        one_call(target, worker, rng, n, config.ids, config.skew_ms) for n in range(config.ops)
    ]
    client.close()
    return records


def one_call(
    target: Target, worker: str, rng: random.Random, n: int, ids: int, skew_ms: int
) -> Record:
    """Call ``n`` of ``worker``: an op drawn from the mix on one of ``ids`` memories, half
    with the server's clock and half with its own, skewed by up to ``skew_ms``. A failed
    connection (redis.RedisError past the client's resends) is recorded as UNKNOWN."""
    op = rng.choices(OPS, WEIGHTS)[0]
    memory_id = f"m{rng.randrange(ids)}"
    if op == "burst":  # ids burst_ids(memory_id), new to the namespace
        memory_id = f"b{worker}.{n}"
    importance = rng.choice(IMPORTANCES)
    whitelist = op == "remember" and rng.random() < 0.15
    now = None
    if rng.random() < 0.5:  # a worker with its own, slightly skewed clock
        now = int(time.time() * 1000) + rng.randint(-skew_ms, skew_ms)
    t0 = time.time() * 1000
    try:
        r = target.call(op, memory_id, importance, whitelist, now)
    except (MemevictError, redis.RedisError) as error:
        outcome = UNKNOWN if isinstance(error, redis.RedisError) else type(error).__name__
        r = Record("", op, memory_id, importance, whitelist, now, 0, 0, outcome)
    t1 = time.time() * 1000
    return replace(r, worker=worker, t0=t0, t1=t1)


def _worker(config: StressConfig, index: int) -> list[Record]:
    threads = config.threads if index % 2 else 1
    results: list[list[Record]] = [[] for _ in range(threads)]
    failed: list[BaseException] = []

    def run(t: int) -> None:
        rng = random.Random(config.seed * 1_000_003 + index * 101 + t)
        try:
            results[t] = _thread_calls(config, f"w{index}.{t}", rng)
        except BaseException as error:
            failed.append(error)

    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    if failed:
        raise failed[0]
    return [r for rs in results for r in rs]


# Checks


@dataclass
class Report:
    target: str
    processes: int
    threads: int
    calls: int
    errors: Counter[str]
    snapshots: int
    backlogged: int  # snapshots that saw work waiting for later calls
    checks: int
    violations: Counter[str]
    examples: dict[str, str]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.violations and set(self.errors) <= {"NotFound"}

    def lines(self) -> list[str]:
        out = [
            f"target       {self.target}",
            f"processes    {self.processes} ({self.threads} threads)",
            f"calls        {self.calls} in {self.seconds:.1f} s "
            f"({self.calls / max(self.seconds, 1e-9):.0f}/s)",
            f"errors       {dict(self.errors) or 'none'} (NotFound is expected: random ids)",
            f"snapshots    {self.snapshots} ({self.backlogged} with a backlog)",
            f"checks       {self.checks}",
            f"violations   {sum(self.violations.values())}",
        ]
        for kind, n in sorted(self.violations.items()):
            out.append(f"  {kind}: {n}  e.g. {self.examples[kind]}")
        return out


def _acts_on(c: Record, x: str) -> bool:
    """Call c names memory x, or another member of x's group."""
    return c.id == x or (group_of(x) is not None and group_of(c.id) == group_of(x))


def _now_of(r: Record) -> float:
    """The latest now call r can have run at by its own clock."""
    return r.now if r.now is not None else r.t1


class Checker:
    """Counts rule violations. ``importances``: every importance the workload
    uses, so a changed one shows; None skips that check. ``shaped``: the
    workload remembers each id with tokens_of and group_of, and with text_for
    and terms_for or no text (send_op does)."""

    def __init__(
        self,
        policy: Policy,
        importances: Collection[float] | None = IMPORTANCES,
        shaped: bool = True,
    ) -> None:
        self.policy = policy
        self.importances = importances
        self.shaped = shaped
        self.checks = 0
        self.backlogged = 0  # snapshots that saw work waiting for later calls
        self.violations: Counter[str] = Counter()
        self.examples: dict[str, str] = {}

    def expect(self, ok: bool, kind: str, example: str) -> None:
        self.checks += 1
        if not ok:
            self.violations[kind] += 1
            self.examples.setdefault(kind, example)

    def snapshot(self, s: Snapshot) -> None:
        """The rules that hold after every script, as one reader saw them."""
        p = self.policy
        tiers = [set(s.hot), set(s.fresh), set(s.wl), set(s.ghot), set(s.cold)]
        hot_ids = tiers[0] | tiers[1] | tiers[2] | tiers[3]
        every = hot_ids | tiers[4]
        total = sum(len(t) for t in tiers[:4])
        backlog = self.backlog(s)
        self.backlogged += backlog > 0
        units = len(s.hot) + len(s.groups)  # what eviction can take
        # Work beyond a call's budget waits for later calls (docs/rules.md: Bounded
        # work per call): max_hot and max_tokens hold once nothing waits.
        self.expect(
            backlog > 0 or (len(s.hot) <= p.max_hot and (total <= p.max_hot or not units)),
            "over capacity",
            f"{len(s.hot)} evictable, {total} hot, max_hot {p.max_hot}",
        )
        if s.meta is not None and p.max_tokens:
            tokens = self.tokens(s)
            self.expect(
                backlog > 0 or tokens <= p.max_tokens or not units,
                "over the token budget",
                f"{tokens} tokens, {units} evictable units, max_tokens {p.max_tokens}",
            )
        self.expect(len(s.wl) <= p.whitelist_cap, "whitelist over cap", f"{len(s.wl)}")
        self.expect(
            cold_due(len(s.cold), p.cold_max) == 0, "cold tier over cold_max", f"{len(s.cold)}"
        )
        self.expect(sum(len(t) for t in tiers) == len(every), "id in two tiers", str(tiers))
        for memory_id, raw in s.text.items():
            self.expect(raw == text_for(memory_id), "text changed", memory_id)
        if s.meta is None:
            return
        self.expect(
            set(s.meta) == every, "orphan metadata or index entry", str(set(s.meta) ^ every)
        )
        self.expect(
            set(s.prot) <= hot_ids and set(s.fresh) <= set(s.prot),
            "orphan protection entry",
            str(set(s.prot) - hot_ids),
        )
        self.expect(set(s.text) <= set(s.meta), "orphan text", str(set(s.text) - set(s.meta)))
        self._groups(s, hot_ids)
        self._window(s, hot_ids)
        self._index(s)
        ttl_ms = self.policy.idle_ttl_s * 1000
        for key, ttl in s.ttls.items():
            self.expect(not ttl_ms or 0 < ttl <= ttl_ms, "key not kept alive", f"{key} pttl {ttl}")
        for memory_id, raw in s.meta.items():
            self._meta(memory_id, raw, s)
        if s.stats is not None:
            protected = sum(1 for t in s.prot.values() if not self.ran_out(t, s))
            over = max(0, len(hot_ids) - p.max_hot)
            tokens = self.tokens(s)
            view = (
                len(hot_ids),
                min(len(s.cold), p.cold_max),
                len(s.wl),
                protected,
                over,
                backlog,
                tokens,
                max(0, tokens - p.max_tokens) if p.max_tokens else 0,
            )
            self.expect(s.stats == view, "stats disagree with the indexes", f"{s.stats} {view}")

    def tokens(self, s: Snapshot) -> int:
        """The hot tier's tokens, summed from the metadata."""
        assert s.meta is not None
        hot = set(s.hot) | set(s.fresh) | set(s.wl) | set(s.ghot)
        return sum(
            int(META.unpack_from(raw)[7])
            for x, raw in s.meta.items()
            if x in hot and len(raw) >= META.size
        )

    def ran_out(self, key: float, s: Snapshot) -> bool:
        """A key of prot whose protection ran out at the snapshot: a protected-until ms
        by its now, or (above ACTIVITY) an order by the newest memories it protects
        (lib/memory.lua: protection)."""
        if key < ACTIVITY:
            return key <= s.stats_now
        p = self.policy
        return key <= ACTIVITY + s.seq - min(p.protect_memories, p.max_hot // 10)

    def backlog(self, s: Snapshot) -> int:
        """The work waiting for later calls (docs/rules.md: Bounded work per call),
        as stats counts it; 0 for a target that keeps no stats (the seed peer)."""
        if s.stats is None or s.meta is None:
            return 0
        p = self.policy
        over = max(0, len(s.hot) + len(s.fresh) + len(s.wl) + len(s.ghot) - p.max_hot)
        over_tokens = max(0, self.tokens(s) - p.max_tokens) if p.max_tokens else 0
        units = len(s.hot) + len(s.groups)
        due = max(min(over, units), 1 if over_tokens else 0) if units else 0
        return (
            sum(1 for t in s.prot.values() if self.ran_out(t, s))
            + due
            + max(0, len(s.wl) - p.whitelist_cap)
            + cold_due(len(s.cold), p.cold_max)
        )

    def _window(self, s: Snapshot, hot_ids: set[str]) -> None:
        """The window holds its budget, whole groups, in first-remembered order."""
        if s.window is None or s.meta is None:
            return
        ids = [x for x, _ in s.window]
        self.expect(
            sum(t for _, t in s.window) <= WINDOW_BUDGET, "window over budget", str(s.window)
        )
        self.expect(set(ids) <= hot_ids, "window holds a memory not hot", str(ids))
        order = [META.unpack_from(s.meta[x])[8] for x in ids if x in s.meta]
        self.expect(order == sorted(order), "window out of order", str(ids))
        members: dict[str, set[str]] = {}
        for link in s.links:
            group, _, memory_id = link.partition("\0")
            members.setdefault(group, set()).add(memory_id)
        for x in ids:
            group = s.meta.get(x, b"")[META.size :].decode("utf-8", "surrogateescape")
            if group:
                self.expect(
                    members.get(group, set()) & hot_ids <= set(ids),
                    "window splits a group",
                    f"{group}: {ids}",
                )

    def _index(self, s: Snapshot) -> None:
        """The lexical index (docs/rules.md, rule 14): entries and entry_of are
        inverses, and hold live memories only; shaped, exactly the live memories
        remembered with text and terms (terms_for). Every search in the snapshot
        returned live indexed memories holding one of its terms, and one for memories'
        own terms (term_of) found each of them that is indexed and not gone."""
        if s.entries is None or s.meta is None:
            return
        if not self.policy.index:
            index = len(s.entries) + len(s.entry_of)
            self.expect(not index, "index kept while off", f"{index} fields")
            return
        for e, x in s.entries.items():
            self.expect(
                s.entry_of.get(x) == e, "index maps disagree", f"entries {e.hex()} -> {x!r}"
            )
            self.expect(
                len(e) == 4 and 0 < int.from_bytes(e, "big") <= s.last_entry,
                "entry never given out",
                f"{e.hex()} (last {s.last_entry})",
            )
        for x, e in s.entry_of.items():
            self.expect(
                s.entries.get(e) == x, "index maps disagree", f"entry_of {x!r} -> {e.hex()}"
            )
            self.expect(x in s.meta, "index holds a deleted memory", x)
        if self.shaped:
            for x in s.meta:
                wanted = x in s.text and indexable(x)
                self.expect(
                    wanted == (x in s.entry_of),
                    "live memory missing from the index" if wanted else "indexed without terms",
                    f"{x} (text: {x in s.text})",
                )
        gone = cold_gone(s, self.policy.cold_max)
        for query, found in s.searches:
            for x in found:
                live = x in s.meta and x not in gone
                self.expect(live, "search returned a memory that is gone", f"{query}: {x}")
                self.expect(
                    x in s.entry_of, "search returned a memory not indexed", f"{query}: {x}"
                )
                self.expect(
                    not self.shaped or bool(set(query) & set(terms_for(x))),
                    "search returned a memory without its terms",
                    f"{query}: {x}",
                )
            owners = {x for x in map(owner_of, query) if x is not None}
            if len(owners) <= PROBE_K:  # (then the search has room for every one)
                for x in owners & set(s.entry_of) & set(s.meta) - gone:
                    self.expect(x in found, "search missed an indexed memory", f"{query}: {x}")

    def _groups(self, s: Snapshot, hot_ids: set[str]) -> None:
        """A group's members are in one tier, its links match their metadata,
        and groups holds exactly the groups whose members are all evictable."""
        assert s.meta is not None
        members: dict[str, list[str]] = {}
        for link in s.links:
            group, _, memory_id = link.partition("\0")
            members.setdefault(group, []).append(memory_id)
        for group, ids in members.items():
            where = {"hot" if x in hot_ids else "cold" if x in s.cold else "gone" for x in ids}
            self.expect(len(where) == 1 and "gone" not in where, "group split", f"{group}: {ids}")
            for x in ids:
                raw = s.meta.get(x, b"")
                self.expect(raw[META.size :].decode() == group, "link disagrees", f"{x} {group}")
            evictable = all(x in s.ghot for x in ids)
            self.expect((group in s.groups) == evictable, "groups index wrong", f"{group}: {ids}")
        for x in s.ghot:
            raw = s.meta.get(x, b"")
            self.expect(len(raw) > META.size, "ungrouped memory in ghot", x)

    def drained(self, backlog: int, calls: int) -> None:
        """After the workers stop, evict() calls drain a backlog at WORK moves
        each (a memory whose protection ran out costs two: out of protection,
        then out of the hot tier)."""
        limit = math.ceil(2 * backlog / WORK) + 1
        self.expect(
            calls <= limit, "backlog not drained", f"{backlog} waiting took {calls} evict calls"
        )

    def _meta(self, memory_id: str, raw: bytes, s: Snapshot) -> None:
        assert s.meta is not None
        if len(raw) < META.size:
            self.expect(False, "metadata corrupt", memory_id)
            return
        imp, j, _created, _la, till, _g, flags, tokens, _n = META.unpack_from(raw)
        group = raw[META.size :].decode("utf-8", "surrogateescape")
        self.expect(
            not self.shaped
            or (tokens == tokens_of(memory_id) and group == (group_of(memory_id) or "")),
            "tokens or group changed",
            f"{memory_id} tokens={tokens} group={group!r}",
        )
        known = self.importances is None or imp in self.importances
        self.expect(
            known and 0 < j < self.policy.jitter,
            "metadata changed",
            f"{memory_id} imp={imp} j={j}",
        )
        cold, wl = bool(flags & 1), bool(flags & 2)
        self.expect(
            cold == (memory_id in s.cold) and wl == (memory_id in s.wl),
            "flags disagree with the indexes",
            memory_id,
        )
        if cold:
            # The cold score is the `now` of the eviction: protection by time had run out
            # by then.
            self.expect(
                till <= s.cold[memory_id],
                "evicted while protected",
                f"{memory_id} till={till} evicted at {s.cold[memory_id]}",
            )

    def per_id(self, tiers: dict[str, str | None], s: Snapshot) -> None:
        """At rest: each id's own view (get) puts it in exactly the tier the
        indexes do, and the stats count the same ids."""
        hot = set(s.hot) | set(s.fresh) | set(s.wl) | set(s.ghot)
        for memory_id, tier in tiers.items():
            where = "hot" if memory_id in hot else "cold" if memory_id in s.cold else None
            self.expect(tier == where, "get disagrees with the indexes", f"{memory_id}: {tier}")
        if s.stats is not None:
            counted = (
                sum(t == "hot" for t in tiers.values()),
                sum(t == "cold" for t in tiers.values()),
            )
            self.expect(counted == s.stats[:2], "stats disagree with get", f"{counted} {s.stats}")

    def log(self, records: Sequence[Record], snapshots: Sequence[Snapshot]) -> None:
        """Rules only the call log can show: what was evicted, and lost updates."""
        by_id: dict[str, list[Record]] = {}
        linked: dict[str, set[str]] = {}  # group -> the ids the log names in it
        for r in records:
            if group_of(r.id):
                linked.setdefault(str(group_of(r.id)), set()).add(r.id)
        for r in records:
            # A call on one member of a group acts on the others too (forget,
            # recall, remember bring the whole group along).
            names = linked.get(str(group_of(r.id)), {r.id}) if group_of(r.id) else {r.id}
            for x in names | {r.id}:
                by_id.setdefault(x, []).append(r)
            for x in (*r.evicted, *r.demoted):
                if x not in names:
                    by_id.setdefault(x, []).append(r)
        # A call runs at the namespace's latest now if its own is behind it
        # (docs/rules.md, rule 9): at most the latest now of any call sent before it ended.
        started = sorted(records, key=lambda r: r.t0)
        starts = [r.t0 for r in started]
        latest = list(itertools.accumulate((_now_of(r) for r in started), max))
        for r in records:
            sent = bisect.bisect_left(starts, r.t1)
            ran_by = max(_now_of(r), latest[sent - 1] if sent else -math.inf)
            for x in r.evicted:
                self._evicted(x, r, by_id.get(x, []), ran_by)
        for memory_id, rs in by_id.items():
            self._critical_kept(memory_id, rs, snapshots)

    def _evicted(self, x: str, e: Record, rs: Sequence[Record], ran_by: float) -> None:
        """x was evicted by e: it must not have been whitelisted or protected then.

        Only certain cases count: x was made whitelisted or fresh by a call w that
        ended before e started, and no call that could have undone that (found in
        the log) overlaps the time from w's start to e's end.
        """
        self.checks += 1
        if e.id == x and e.op in ("remember", "recall"):
            # A remember or recall protects its memory from that instant.
            self.expect(False, "evicted right after being remembered", f"{x} by its own {e.op}")
            return
        protect_ms = self.policy.protect_s * 1000
        e_now_max = ran_by + SLACK_MS
        for w in rs:
            if w is e or w.id != x or w.t1 >= e.t0 or w.outcome != "ok":
                continue
            between = [c for c in rs if c is not w and c is not e and c.t1 > w.t0 and c.t0 < e.t1]
            made_whitelisted = w.op == "whitelist" or (w.op == "remember" and w.whitelist)
            undone = x in e.demoted or any(
                (c.id == x and c.op == "demote")
                or (_acts_on(c, x) and c.op == "forget")
                or x in c.demoted
                or c.outcome in MAYBE_APPLIED
                for c in between
            )
            if made_whitelisted and x not in w.demoted and not undone:
                self.expect(False, "evicted while whitelisted", f"{x} by {e.worker} {e.op}")
            if w.op in ("remember", "recall"):
                till_min = (w.now if w.now is not None else w.t0) + protect_ms - SLACK_MS
                refreshed = any(_acts_on(c, x) and c.op != "touch" for c in between)
                if e_now_max < till_min and not refreshed:
                    self.expect(
                        False,
                        "evicted right after being remembered",
                        f"{x} remembered by {w.worker}, evicted by {e.worker} {e.op}",
                    )

    def _critical_kept(self, x: str, rs: Sequence[Record], snapshots: Sequence[Snapshot]) -> None:
        """A memory remembered as critical keeps that importance while no other call on it
        can have run: the snapshot was sent after the remember returned, and every other
        call on the memory ended before the remember started or started after the
        snapshot's reply (so the server ran it after the snapshot)."""
        for r in rs:
            critical = r.op == "remember" and r.importance == CRITICAL and not r.whitelist
            if not critical or r.id != x or r.outcome != "ok":
                continue
            others = [c for c in rs if c is not r and c.t1 >= r.t0]
            for s in snapshots:
                quiet = all(c.t0 > s.end for c in others)
                if r.t1 < s.at and quiet and x in s.importance:
                    self.checks += 1
                    imp = s.importance[x]
                    self.expect(
                        imp == CRITICAL,
                        "critical memory overwritten by a stale score",
                        f"{x}: {imp} after remember({CRITICAL})",
                    )


def settle(
    reader: Target, checker: Checker, records: Sequence[Record], snapshots: list[Snapshot], ids: int
) -> None:
    """After the workers stop: every protection runs out, evict() calls drain what waits,
    each id's own view is checked against the indexes, then the call log."""
    # Protection runs from a call's own now, up to skew_ms ahead of the wall clock: it
    # has run out for every call once the latest now plus protect_s has passed (else
    # one running out while the backlog drains needs one more evict() than counted).
    latest = max((_now_of(r) for r in records), default=0.0)
    till = latest + checker.policy.protect_s * 1000 + SLACK_MS
    time.sleep(max(checker.policy.protect_s + SLACK_MS / 1000, till / 1000 - time.time()))
    final = _again(reader.snapshot)
    checker.snapshot(final)
    waiting, calls = checker.backlog(final), 0
    while checker.backlog(final) > 0 and calls < 1000:
        _again(partial(reader.call, "evict", "", 0.0, False, None))
        calls += 1
        final = _again(reader.snapshot)
        checker.snapshot(final)
    checker.drained(waiting, calls)
    kept = {f"m{i}" for i in range(ids)}.union(
        final.hot, final.fresh, final.wl, final.ghot, final.cold
    )  # the workload's ids and every burst memory still kept
    checker.per_id({x: _again(partial(reader.tier, x)) for x in sorted(kept)}, final)
    snapshots.append(final)
    checker.log(records, snapshots)


def _built(target_of: Callable[[], MemevictTarget]) -> MemevictTarget:
    """A target whose store's configure (a write) its replicas confirmed: built again
    (configure is idempotent) while a durable store's raises NotDurable, up to 10 times."""
    for _ in range(9):
        try:
            return target_of()
        except NotDurable:
            time.sleep(0.1)
    return target_of()


def _again(call: Callable[[], T]) -> T:
    """call(), sent again while its connection fails, for up to 30 s: after a failover a
    connection to the demoted server fails once, then the client connects again."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return call()
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class Threaded:
    """The workload on ``threads`` threads of this process, and a reader checking atomic
    snapshots, until the caller sets ``stop``; then ``finish()`` settles and checks the
    rest. What the failover test and campaign run through kills: ``target_of()`` gives
    each thread its own target (durable stores there); a snapshot that fails (a failover)
    is counted in ``unreadable`` and the reader loads the scripts again."""

    def __init__(
        self,
        target_of: Callable[[], MemevictTarget],
        policy: Policy,
        threads: int,
        stop: threading.Event,
        ids: int = 60,
    ) -> None:
        self.stop, self.ids = stop, ids
        self.checker = Checker(policy)
        self.snapshots: list[Snapshot] = []
        self.records: list[list[Record]] = [[] for _ in range(threads)]
        self.unreadable = 0
        # (built now: a store's first call configures, a write that a failover can fail)
        self.reader = _built(target_of)
        targets = [_built(target_of) for _ in range(threads)]
        self.team = [
            threading.Thread(target=self._work, args=(t, x)) for t, x in enumerate(targets)
        ]
        self.team.append(threading.Thread(target=self._read))
        for thread in self.team:
            thread.start()

    def _work(self, t: int, target: MemevictTarget) -> None:
        rng, n = random.Random(t), 0
        while not self.stop.is_set():
            self.records[t].append(one_call(target, f"w{t}", rng, n, self.ids, skew_ms=30))
            n += 1

    def _read(self) -> None:
        reader = self.reader
        while not self.stop.is_set():
            try:
                snap = reader.snapshot()
            except redis.RedisError:
                self.unreadable += 1
                time.sleep(0.1)
                with contextlib.suppress(redis.RedisError):
                    reader.load()
                continue
            self.checker.snapshot(snap)
            self.snapshots.append(snap)
            time.sleep(0.02)  # (the log checks compare every snapshot with the calls)

    def finish(self) -> list[Record]:
        """Waits for the threads (``stop`` set), then ``settle``; the calls made."""
        for thread in self.team:
            thread.join()
        records = [r for rs in self.records for r in rs]
        _again(self.reader.load)  # (on the master the last failover left)
        settle(self.reader, self.checker, records, self.snapshots, self.ids)
        return records


def run(config: StressConfig) -> Report:
    """Runs the workload and checks it; the namespace is cleared first."""
    client = redis.Redis.from_url(config.url)
    for key in client.scan_iter(match=key_name(config.namespace, "*")):
        client.delete(key)
    reader = load_target(config.target)(client, config.namespace, config.policy)
    checker = Checker(config.policy)
    snapshots: list[Snapshot] = []
    done = threading.Event()
    failed: list[BaseException] = []

    def read() -> None:
        try:
            while not done.is_set():
                snap = reader.snapshot()
                checker.snapshot(snap)
                snapshots.append(snap)
        except BaseException as error:
            failed.append(error)

    sampler = threading.Thread(target=read)
    sampler.start()
    try:
        with ProcessPoolExecutor(config.workers, mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(_worker, config, i) for i in range(config.workers)]
            records = [r for f in futures for r in f.result()]
    finally:
        done.set()
        sampler.join()
    if failed:
        raise failed[0]
    # From the first call to the last (process start-up excluded).
    seconds = (max(r.t1 for r in records) - min(r.t0 for r in records)) / 1000 if records else 0.0
    settle(reader, checker, records, snapshots, config.ids)
    client.close()
    return Report(
        target=config.target.rpartition(":")[2],
        processes=config.workers,
        threads=config.workers // 2 * config.threads + (config.workers + 1) // 2,
        calls=len(records),
        errors=Counter(r.outcome for r in records if r.outcome != "ok"),
        snapshots=len(snapshots),
        backlogged=checker.backlogged,
        checks=checker.checks,
        violations=checker.violations,
        examples=checker.examples,
        seconds=seconds,
    )


__all__ = ["NotFound", "Report", "StressConfig", "Threaded", "run"]
