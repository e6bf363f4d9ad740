"""window() on a large store: what a budgeted window returns and its server time, by
budget; with --fits, G2: a window whose hot tier fits its budget, by store size.

    python benchmarks/window_budget.py [URL] [--memories 10000,1000000]
        [--rounds 9] [--calls 5] [--base b130e70~1] [--fits] [--json FILE]

By budget (the default). Since b130e70 no count of memories cuts a budgeted window
(before: at most 400 memories of 500 candidates): it takes memories until its budget is
full, its work bounded by what it returns plus 500 candidates not taken. So its cost grows
with the budget. For each ``--memories`` N, a namespace of N hot memories, agent-like
(text 100..400 bytes, tokens 10..120 in step with it, importances 1..10, about a fifth in
groups of 2 or 3; none evicted, none whitelisted), filled by remember_many of 100. Then,
in ``--rounds`` interleaved rounds (the order rotating) of ``--calls`` calls each,
store.window() for budgets of 2,000 / 8,000 / 32,000 / 128,000 tokens, without a budget,
and, up to 10,000 memories, with a budget of the whole hot tier's tokens (the worst case:
every memory returned). Server time from INFO commandstats, the script entry only
(FCALL_RO or EVALSHA_RO): per call, median of the rounds' means, and the slowest single
call, against T4's 5 ms.

--fits (G2, issue 26): an adapter's namespace holds max_tokens of hot memories (~100
messages of ~40 tokens at 4,000) and everything else in the cold tier. Each namespace is
filled with N memories of 10-70 tokens (a seventh in groups of two), so N - ~100 are
evicted; then window(4,000) (which fits) and window(2,000) (which does not: ranked).
``--memories`` defaults to 1000,10000,100000 there.

Both then compare window.lua of ``--base`` (a git revision or a lua/ directory) with the
working tree's on the same namespace: both loaded as scripts, their replies checked (the
same, or differing only as b130e70 allows: ``verdict``), then EVALSHA interleaved (the
side order alternating), server µs per call, B / A paired by round, per budget and over
all. In --fits mode the working tree's side is G2's figure.

Without URL it runs on an embedded Valkey. Given one it FLUSHES that server.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import redis
from _harness import Run, interleave, paired, parser, script_at, script_rounds, server

from memevict import Item, MemoryStore, Policy
from memevict.bench.server import time_script_calls
from memevict.errors import MemevictError
from memevict.scripts import key_name

NAMESPACE = "wb"
BUDGETS = (2_000, 8_000, 32_000, 128_000)
COMPARED = ("2000", "8000", "32000")  # the budgets base and working tree are compared at
WHOLE_UP_TO = 10_000  # the whole-tier budget only up to this many memories (it returns them all)
T4_MS = 5.0
G2_US = 500.0
BATCH = 100  # remember_many's most items per call
GROUPED = 0.09  # the share of units (a memory alone, or a group) that are a group of 2 or 3
LARGEST_GROUP = 3
TOKENS = (10, 120)
TEXT = (100, 400)  # bytes, in step with the tokens
WORDS = (
    "the user asked whether the deploy finished and the assistant checked the logs then "
    "summarised the failing step with the error and a suggested fix for the config file "
)
FITS_TOKENS = 4000  # --fits: the namespace's max_tokens, and the budget that fits
FITS_COMPARED = (str(FITS_TOKENS), str(FITS_TOKENS // 2))
CAP = 400  # the most memories a window returned before b130e70, with a budget or without


def items(memories: int, seed: int = 25) -> list[Item]:
    """N agent-like memories, the same for a seed: ids m0.. in the order remembered."""
    rnd = random.Random(seed)
    words = WORDS * 4
    out: list[Item] = []
    while len(out) < memories:
        size = rnd.choice((2, 3)) if rnd.random() < GROUPED else 1
        group = f"g{len(out)}" if size > 1 else None
        for _ in range(min(size, memories - len(out))):
            tokens = rnd.randint(*TOKENS)
            length = TEXT[0] + (tokens - TOKENS[0]) * (TEXT[1] - TEXT[0]) // (TOKENS[1] - TOKENS[0])
            start = rnd.randrange(len(WORDS))
            i = len(out)
            text = f"[{i}] {words[start : start + length]}"[:length]
            out.append(
                Item(f"m{i}", float(rnd.randint(1, 10)), text=text, tokens=tokens, group=group)
            )
    return out


def fill(client: redis.Redis, memories: int) -> MemoryStore:
    """The namespace, every memory hot (max_hot is N, protect_s 0: none protected)."""
    store = MemoryStore(
        client, NAMESPACE, Policy(max_hot=memories, protect_s=0), replace_policy=True
    )
    all_items = items(memories)
    for start in range(0, memories, BATCH):
        store.remember_many(all_items[start : start + BATCH])
    return store


def fill_fits(client: redis.Redis, size: int) -> MemoryStore:
    """--fits: N memories of 10-70 tokens under max_tokens 4,000, the rest cold."""
    policy = Policy(max_hot=100_000, max_tokens=FITS_TOKENS, protect_s=0, cold_max=size)
    store = MemoryStore(client, NAMESPACE, policy, replace_policy=True)
    for start in range(0, size, BATCH):
        store.remember_many(
            [
                Item(
                    f"m{k}",
                    1 + k % 10,
                    text="some words of a message " * (1 + k % 5),
                    tokens=10 + k % 61,
                    group=f"g{k // 2}" if k % 7 in (0, 1) and k % 2 == 0 else None,
                )
                for k in range(start, min(start + BATCH, size))
            ]
        )
    return store


# --- the window of the working tree, by budget -------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    budget: int | None
    memories: int = 0  # returned (every call of a case returns the same)
    tokens: int = 0
    server_us: float = 0.0  # median over rounds of the round's mean per call
    slowest_us: float = 0.0  # the slowest single call
    error: str | None = None  # the call's error, if it failed (then not timed)

    def line(self) -> str:
        if self.error is not None:
            return f"  {self.name:26s} error: {self.error}"
        ms = self.server_us / 1000
        return (
            f"  {self.name:26s} {self.memories:9,} {self.tokens:11,} {ms:10.2f}"
            f" {self.slowest_us / 1000:11.2f}  {'over' if ms > T4_MS else 'within'}"
        )


def measure(
    client: redis.Redis,
    store: MemoryStore,
    cases: Sequence[tuple[str, int | None]],
    rounds: int,
    calls: int,
) -> list[Case]:
    """Each case called once (what it returns; a case whose call fails is reported,
    not timed), then timed in ``rounds`` rounds, the case order rotating: each call's
    server time read on its own (the slowest), their mean per round."""
    returned: dict[str, tuple[int, int]] = {}
    failed: dict[str, Case] = {}
    for name, budget in cases:
        try:
            window = store.window(budget)
        except MemevictError as e:
            failed[name] = Case(name, budget, error=str(e))
        else:
            returned[name] = (len(window), window.tokens)
    timed = {name: budget for name, budget in cases if name in returned}

    def call(name: str, _: int) -> list[float]:
        found = time_script_calls(client, lambda _: store.window(timed[name]), calls)
        for reply, _seconds, _usec in found:
            got = (len(reply), reply.tokens)
            assert got == returned[name], f"{name}: {returned[name]} then {got}"
        return [usec for _reply, _seconds, usec in found]

    found = interleave(rounds, list(timed), call)
    return [
        failed.get(name)
        or Case(
            name,
            budget,
            *returned[name],
            statistics.median(statistics.fmean(usecs) for usecs in found[name]),
            max(max(usecs) for usecs in found[name]),
        )
        for name, budget in cases
    ]


# --- a revision's window.lua against the working tree's -----------------------------------------


@dataclass(frozen=True)
class Returned:
    """What one window reply holds."""

    memories: int
    tokens: int
    left: int  # hot memories not in it
    ids: frozenset[bytes]

    @classmethod
    def of(cls, reply: Any) -> Returned:
        memories, tokens, left = reply[:3]
        return cls(len(memories), int(tokens), int(left), frozenset(m[0] for m in memories))


@dataclass(frozen=True)
class Row:
    """One budget's comparison: what each side returned, and its server time."""

    budget: str  # '' for none
    a: Returned
    b: Returned
    verdict: str
    a_by_round: list[float]  # µs per call, each round's mean
    b_by_round: list[float]

    @property
    def a_us(self) -> float:
        return statistics.median(self.a_by_round)

    @property
    def b_us(self) -> float:
        return statistics.median(self.b_by_round)

    @property
    def paired(self) -> float:
        """B / A, the median over rounds."""
        return paired(self.b_by_round, self.a_by_round)

    @property
    def name(self) -> str:
        return f"{int(self.budget):,} tokens" if self.budget else "no budget"

    def line(self) -> str:
        return (
            f"  {self.name:14s} A {self.a.memories:5,} memories {self.a.tokens:7,} tokens"
            f" {self.a_us:7.0f} µs | B {self.b.memories:5,} memories {self.b.tokens:7,} tokens"
            f" {self.b_us:7.0f} µs | B / A paired {self.paired:.3f} | replies: {self.verdict}"
        )

    def to_json(self) -> dict[str, Any]:
        found = asdict(self)
        for side in ("a", "b"):
            found[side].pop("ids")
        return {**found, "a_us": self.a_us, "b_us": self.b_us, "paired": self.paired}


def verdict(budget: str, replies: Sequence[Any], largest_group: int) -> str:
    """Checks two replies for one budget against what b130e70 changed; says how they compare.

    The same where A was not cut short by a count: always without a budget, and with one
    when A holds fewer than 400 memories (with a group of up to G members, at most 400 - G:
    the count cannot have left a group out) and either filled its budget or left no hot
    memory out. Elsewhere B may take more, never over its budget; where A stopped at its
    500 candidates rather than at 400 memories, B holds all of A's memories and more."""
    a, b = Returned.of(replies[0]), Returned.of(replies[1])
    if replies[0][:3] == replies[1][:3]:  # (memories, tokens, left: not what may follow them)
        return "the same"
    assert budget, "the replies differ without a budget"
    limit = int(budget)
    assert b.tokens <= limit, f"B returned {b.tokens} tokens for a budget of {limit}"
    if a.memories > CAP - largest_group:
        return f"differ, A cut at its {CAP} memories"
    # A was not cut by its count: it stopped when full, out of memories or at 500 candidates.
    assert a.tokens < limit and a.left > 0, f"the replies differ for budget {budget} (A not capped)"
    assert a.ids < b.ids, f"B is not A's window and more for budget {budget}"
    return "differ, A cut at its 500 candidates (B holds A's and more)"


def compare(
    client: redis.Redis,
    base: str,
    budgets: Sequence[str],
    *,
    rounds: int,
    calls: int,
    largest_group: int,
) -> tuple[list[Row], dict[str, float]]:
    """Both window.lua versions on the namespace: the replies checked (verdict) at one now,
    then ``rounds`` interleaved rounds of ``calls`` EVALSHA per budget and side. A Row per
    budget; over all budgets, A's and B's median µs per call and B / A paired by round."""
    specs = {"A": script_at(base, "window"), "B": script_at(None, "window")}
    shas = {side: client.script_load(spec.source) for side, spec in specs.items()}
    keys = {side: spec.key_names(NAMESPACE) for side, spec in specs.items()}
    seconds, micros = client.time()
    now = str(seconds * 1000 + micros // 1000)  # one now for both: the same scores

    def argv(side: str, budget: str, at: str) -> list[str]:
        """The side's ARGV by name (a revision before the query's takes no terms)."""
        values = {"budget": budget, "now": at, "terms": "", "share": ""}
        return [str(v) for v in specs[side].argv({n: values[n] for n in specs[side].args})]

    replies = {
        budget: [
            client.evalsha(shas[s], len(keys[s]), *keys[s], *argv(s, budget, now))[:4] for s in shas
        ]
        for budget in budgets
    }
    cases: dict[str, Sequence[str] | Mapping[str, Sequence[str]]] = {
        budget: {side: argv(side, budget, "") for side in shas} for budget in budgets
    }
    us = script_rounds(client, shas, keys, cases, rounds=rounds, calls=calls)
    rows = [
        Row(
            budget,
            Returned.of(replies[budget][0]),
            Returned.of(replies[budget][1]),
            verdict(budget, replies[budget], largest_group),
            us["A"][budget],
            us["B"][budget],
        )
        for budget in budgets
    ]
    # Every budget has as many calls: a round's mean per call is the mean of its budgets'.
    per_round = {
        side: [statistics.fmean(us[side][b][r] for b in budgets) for r in range(rounds)]
        for side in shas
    }
    overall = {side: statistics.median(per_round[side]) for side in shas}
    return rows, {**overall, "paired": paired(per_round["B"], per_round["A"])}


# --- the two modes --------------------------------------------------------------------------------


def by_budget(client: redis.Redis, n: int, opts: Any) -> dict[str, Any]:
    t0 = time.monotonic()
    store = fill(client, n)
    filled = time.monotonic() - t0
    stats = store.stats()
    assert stats.hot == n, f"{stats.hot:,} hot memories, expected {n:,}"
    used = client.info("memory")["used_memory"] / 2**20
    cases: list[tuple[str, int | None]] = [(f"{b:,} tokens", b) for b in BUDGETS]
    if n <= WHOLE_UP_TO:
        cases.append((f"whole tier ({stats.tokens:,} tokens)", stats.tokens))
    cases.append(("no budget", None))
    found = measure(client, store, cases, opts.rounds, opts.calls)
    print(
        f"\n{n:,} hot memories ({stats.tokens:,} tokens; filled in "
        f"{filled:.0f} s, {used:,.0f} MiB used), {store.mode}: "
        f"server time per window call, median of {opts.rounds} rounds x {opts.calls}"
    )
    print(
        f"  {'budget':26s} {'memories':>9s} {'tokens':>11s} {'server ms':>10s}"
        f" {'slowest ms':>11s}  T4 (<= {T4_MS:g} ms)"
    )
    for case in found:
        print(case.line())
    rows, overall = compare(
        client,
        opts.base,
        COMPARED,
        rounds=opts.rounds,
        calls=opts.calls,
        largest_group=LARGEST_GROUP,
    )
    print(
        f"A ({opts.base}) against B (working tree) at {n:,} memories, EVALSHA, "
        f"median of {opts.rounds} rounds x {opts.calls} per budget:"
    )
    for row in rows:
        print(row.line())
    print(
        f"  all {len(rows)} budgets: A {overall['A']:.0f} µs, B {overall['B']:.0f} µs; "
        f"B / A paired {overall['paired']:.3f}"
    )
    return {
        "hot": stats.hot,
        "tokens": stats.tokens,
        "cases": [asdict(c) for c in found],
        "compared": {"rows": [r.to_json() for r in rows], **overall},
    }


def fits(client: redis.Redis, size: int, opts: Any) -> dict[str, Any]:
    store = fill_fits(client, size)
    hot = store.stats()
    print(f"{size:,} memories ({hot.hot} hot, {hot.tokens:,} tokens; {hot.cold:,} cold)")
    rows, overall = compare(
        client, opts.base, FITS_COMPARED, rounds=opts.rounds, calls=opts.calls, largest_group=2
    )
    for row in rows:
        print(row.line())
    client.delete(*client.keys(key_name(NAMESPACE, "*")))
    return {
        "hot": hot.hot,
        "cold": hot.cold,
        "compared": {"rows": [r.to_json() for r in rows], **overall},
    }


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("url", nargs="?")
    cli.add_argument("--memories", help="comma-separated sizes")
    cli.add_argument("--rounds", type=int, default=9)
    cli.add_argument("--calls", type=int, default=5, help="calls per case and round")
    cli.add_argument("--base", default="b130e70~1", help="git revision or lua/ directory")
    cli.add_argument("--fits", action="store_true", help="G2: a hot tier that fits, by size")
    opts = cli.parse_args()
    default = "1000,10000,100000" if opts.fits else "10000,1000000"
    sizes = [int(n.replace("_", "")) for n in (opts.memories or default).split(",")]
    run = Run(opts)
    found: dict[str, Any] = {}
    with server(opts.url) as served:
        run.on(served)
        client = served.client
        env = run.environment
        print(
            f"server {env['server']} {env['server_version']} ({env['allocator']}), "
            f"{opts.url or 'embedded Valkey'}"
        )
        if opts.fits:
            print(
                f"window of a namespace holding max_tokens {FITS_TOKENS:,} hot; A "
                f"({opts.base}), B (working tree); server µs per call (EVALSHA), median of "
                f"{opts.rounds} rounds x {opts.calls}"
            )
        for n in sizes:
            client.flushall()
            found[str(n)] = (fits if opts.fits else by_budget)(client, n, opts)
        client.flushall()
    largest = found[str(max(sizes))]
    if opts.fits:
        us = {r["budget"]: r["b_us"] for r in largest["compared"]["rows"]}
        run.row(
            "G2: a window whose hot tier fits",
            f"at {max(sizes):,} memories: window(4,000) {us['4000']:.0f} µs, window(2,000) "
            f"{us['2000']:.0f} µs (G2: ≤ {G2_US:.0f} µs)",
        )
    else:
        ms = ", ".join(
            f"{c['name']} {c['server_us'] / 1000:.2f} ms"
            for c in largest["cases"]
            if c["error"] is None
        )
        run.row("The window's cost by budget", f"at {max(sizes):,} hot memories: {ms}")
    run.finish({"mode": "fits" if opts.fits else "budget", "sizes": found})


if __name__ == "__main__":
    main()
