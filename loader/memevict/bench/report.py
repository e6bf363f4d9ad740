"""The bench's results as a printed table and as JSON."""

from __future__ import annotations

import dataclasses
from typing import Any

from memevict.bench.blocking import Blocking
from memevict.bench.budget import Budget
from memevict.bench.concurrent import Concurrent
from memevict.bench.footprint import Footprint
from memevict.bench.single import BATCH_PEER, SingleClient
from memevict.bench.sizes import OPS, Sizes
from memevict.bench.targets import Target
from memevict.bench.timing import Sample, server_time_ratio, throughput_ratio, time_ratio
from memevict.bench.window import Windows

LABELS = {
    "zadd": "raw ZADD",
    "seed": "seed remember + evict_if_full",
    "noop": "do-nothing EVALSHA",
    "floor": "floor script (7 commands)",
    "client_path": "MemoryStore, fixed-reply script",
    "memevict": "memevict remember()",
    BATCH_PEER: "memevict remember_many()",
    "scripts": "memevict remember(), EVALSHA",
    "functions": "memevict remember(), FCALL",
}
MODE_LABELS = {"scripts": "EVALSHA", "functions": "FCALL"}
OP_LABELS = {"decay": "decay", "evict": "evict (full)", "remember": "remember (not full)"}
ARM_LABELS = {
    "plain": "tokens 1, no group (max_hot)",
    "tokens": "tokens 10..500, pairs (max_tokens)",
    "ttl": "the same with idle_ttl_s",
}


@dataclasses.dataclass(frozen=True)
class Results:
    environment: dict[str, Any]
    config: dict[str, Any]
    seconds: float
    single: SingleClient
    concurrent: Concurrent
    sizes: Sizes
    blocking: Blocking
    footprint: Footprint
    budget: Budget
    windows: Windows
    targets: list[Target]


def _peer_ratios(samples: dict[str, Sample]) -> dict[str, float]:
    m = samples["memevict"]
    return {
        f"memevict/{name}": throughput_ratio(m, s)
        for name, s in samples.items()
        if name not in ("memevict", BATCH_PEER)
    }


def decay_speedups(sizes: Sizes) -> dict[int, float]:
    """The seed's decay_memories time over memevict's decay, at each size the seed ran."""
    seed, memevict = sizes.samples["seed"].get("decay", {}), sizes.samples["memevict"]["decay"]
    return {size: time_ratio(seed[size], memevict[size]) for size in sorted(seed)}


def to_json(r: Results) -> dict[str, Any]:
    def samples(found: dict[str, Sample]) -> dict[str, Any]:
        return {name: s.to_json() for name, s in found.items()}

    by_size = {
        peer: {op: {str(n): s.to_json() for n, s in ns.items()} for op, ns in ops.items()}
        for peer, ops in r.sizes.samples.items()
    }
    memevict = r.sizes.samples["memevict"]
    small, big = min(r.sizes.sizes), max(r.sizes.sizes)
    return {
        "environment": r.environment,
        "config": r.config,
        "seconds": r.seconds,
        "single_client": {
            "capacity": r.single.capacity,
            "batch": r.single.batch,
            "mode": r.single.mode,
            "peers": samples(r.single.samples),
            "ratios": _peer_ratios(r.single.samples),
        },
        "concurrent": {
            "clients": r.concurrent.clients,
            "processes": r.concurrent.processes,
            "window_s": r.concurrent.window_s,
            "peers": samples(r.concurrent.samples),
            "ratios": _peer_ratios(r.concurrent.samples),
        },
        "sizes": {
            "sizes": list(r.sizes.sizes),
            "fill_s": {str(n): s for n, s in r.sizes.fill_s.items()},
            "peers": by_size,
            "ratios": {
                f"{op} {big}/{small}": {
                    "client": time_ratio(memevict[op][big], memevict[op][small]),
                    "server": server_time_ratio(memevict[op][big], memevict[op][small]),
                }
                for op in OPS
            },
            "decay_speedup_over_seed": {str(n): x for n, x in decay_speedups(r.sizes).items()},
        },
        "blocking": {
            **dataclasses.asdict(r.blocking),
            "worst_us": r.blocking.worst_us,
        },
        "footprint": {
            **dataclasses.asdict(r.footprint),
            "memevict_per_memory": r.footprint.memevict_per_memory,
            "zset_per_member": r.footprint.zset_per_member,
        },
        "budget": {
            "capacity": r.budget.capacity,
            "max_tokens": r.budget.max_tokens,
            "arms": {
                name: {
                    **arm.sample.to_json(),
                    "evicting": arm.evicting,
                    "evicted_per_eviction": arm.evicted_per_eviction,
                    "quiet_server_us_per_call": arm.quiet_server_us,
                    "evicting_server_us_per_call": arm.evicting_server_us,
                    "every_server_us_per_call": arm.every_server_us,
                }
                for name, arm in r.budget.arms.items()
            },
            "ratios": {name: r.budget.ratio(name) for name in r.budget.arms if name != "plain"},
            "ratios_every_evicting_call": {
                name: r.budget.evicting_ratio(name) for name in r.budget.arms if name != "plain"
            },
            "ratios_every_call": {
                name: r.budget.every_ratio(name) for name in r.budget.arms if name != "plain"
            },
        },
        "window": {
            "memories": r.windows.memories,
            "whitelisted": r.windows.whitelisted,
            "grouped": r.windows.grouped,
            "cases": {
                name: {
                    **case.sample.to_json(),
                    "budget": case.budget,
                    "worst_server_us": case.worst_server_us,
                    "memories": case.memories,
                    "tokens": case.tokens,
                }
                for name, case in r.windows.cases.items()
            },
        },
        "targets": [t.to_json() for t in r.targets],
    }


def _n(x: float | None, digits: int = 0) -> str:
    return "—" if x is None else f"{x:,.{digits}f}"


def _us(sample: Sample | None) -> str:
    if sample is None:
        return "—"
    return _n(sample.us_per_call, 1 if sample.us_per_call < 10_000 else 0)


def _peer_rows(samples: dict[str, Sample], batch: int | None) -> list[str]:
    m = samples["memevict"]
    rows = [
        f"  {'peer':<32}{'ops/s':>9}{'p50 µs':>9}{'p99 µs':>9}{'server µs':>11}"
        f"{'memevict÷peer':>15}"
    ]
    for name, s in samples.items():
        label = LABELS[name].replace("()", f"({batch})") if name == BATCH_PEER else LABELS[name]
        ratio = "" if name == "memevict" else f"{throughput_ratio(m, s):.2f}x"
        server = _n(s.server_us / s.items_per_call if s.server_us is not None else None, 1)
        rows.append(
            f"  {label:<32}{s.ops_per_s:>9,.0f}{s.p50_us:>9,.0f}{s.p99_us:>9,.0f}"
            f"{server:>11}{ratio:>15}"
        )
    if BATCH_PEER in samples:
        rows.append(
            f"  (remember_many: ops/s and server µs per item; p50 and p99 per call of {batch})"
        )
    return rows


def table(r: Results) -> str:
    e, c = r.environment, r.config
    hiredis = "yes" if e["hiredis"] else "no"
    lines = [
        f"memevict bench: {e['server']} {e['server_version']} ({e['where']}, "
        f"allocator {e['allocator']}), "
        f"Python {e['python']}, redis-py {e['redis_py']} (hiredis: {hiredis}), "
        f"memevict {e['memevict']}",
        f"{e['machine']}, {e['date']}, {'quick' if c['quick'] else 'full'} run "
        f"in {r.seconds:.0f} s; medians over interleaved rounds, ratios paired by round",
        "",
        f"remember() on a full store ({r.single.capacity:,} memories, protect_s=0): 1 client, "
        f"unpipelined, {c['rounds']} rounds of {c['ops']:,} calls per peer; memevict "
        f"remember() in the default mode: {r.single.mode} ({MODE_LABELS[r.single.mode]})",
        *_peer_rows(r.single.samples, r.single.batch),
        "",
        f"the same with {r.concurrent.clients} clients ({r.concurrent.processes} processes), "
        f"{c['concurrent_rounds']} rounds of {r.concurrent.window_s:g} s per peer "
        "(ops/s: aggregate)",
        *_peer_rows(r.concurrent.samples, None),
        "",
        *_size_rows(r.sizes, c),
        "",
        *_budget_rows(r.budget, c),
        "",
        *_window_rows(r.windows, c),
        "",
        *_blocking_rows(r.blocking),
        "",
        f"server memory ({r.footprint.memories:,} memories, no text): memevict "
        f"{r.footprint.memevict_per_memory:,.0f} B per memory, a sorted-set member "
        f"{r.footprint.zset_per_member:,.0f} B",
        "",
        "targets",
        f"  {'':<24}{'measured':>12}  {'limit':<8} {'status':<8} what",
    ]
    for t in r.targets:
        measured = "—" if t.measured is None else f"{t.measured:,.2f}{t.unit}"
        limit = f"{'>=' if t.at_least else '<='} {t.limit:g}{t.unit}"
        note = f" ({t.note})" if t.note else ""
        lines.append(f"  {t.id:<24}{measured:>12}  {limit:<8} {t.status:<8} {t.what}{note}")
    return "\n".join(lines)


def _size_rows(sizes: Sizes, c: dict[str, Any]) -> list[str]:
    head = "".join(f"{n:>13,}" for n in sizes.sizes)
    rows = [
        f"time per call against store size, µs (client side; memevict's server side below), "
        f"{c['size_rounds']} rounds of {c['size_ops']:,} calls",
        f"  {'op':<22}{'peer':<10}{head}",
    ]
    for op in OPS:
        for peer in ("memevict", "seed"):
            found = sizes.samples.get(peer, {}).get(op, {})
            cells = "".join(f"{_us(found.get(n)):>13}" for n in sizes.sizes)
            rows.append(f"  {OP_LABELS[op]:<22}{peer:<10}{cells}")
    for op in OPS:
        found = sizes.samples["memevict"][op]
        cells = "".join(f"{_n(found[n].server_us, 1):>13}" for n in sizes.sizes)
        rows.append(f"  {OP_LABELS[op]:<22}{'server':<10}{cells}")
    speedups = ", ".join(f"{x:,.0f}x at {n:,}" for n, x in decay_speedups(sizes).items())
    rows.append(f"  memevict decay() vs the seed's decay_memories: {speedups}")
    fills = ", ".join(f"{n:,} in {s:.1f} s" for n, s in sizes.fill_s.items())
    rows.append(f"  filled (memevict): {fills}")
    return rows


def _budget_rows(b: Budget, c: dict[str, Any]) -> list[str]:
    rows = [
        f"remember() on a full store with token budgets and groups: max_hot {b.capacity:,} "
        f"against max_tokens {b.max_tokens:,}, protect_s=0, cold_max {b.capacity:,}; "
        f"{c['budget_rounds']} rounds of {c['budget_ops']:,} calls per arm, server time of "
        "each call (INFO commandstats, the script entry only)",
        f"  {'arm':<38}{'p50 µs':>9}{'evicting':>10}{'evicted':>9}{'one out':>9}"
        f"{'÷plain':>8}{'evicting':>10}{'÷plain':>8}{'none out':>10}{'every call':>12}"
        f"{'÷plain':>8}",
    ]
    for name, arm in b.arms.items():
        ratio = "" if name == "plain" else f"{_n(b.ratio(name), 2)}x"
        evicting = "" if name == "plain" else f"{_n(b.evicting_ratio(name), 2)}x"
        every = "" if name == "plain" else f"{b.every_ratio(name):.2f}x"
        rows.append(
            f"  {ARM_LABELS[name]:<38}{arm.sample.p50_us:>9,.0f}{arm.evicting:>10.0%}"
            f"{arm.evicted_per_eviction:>9.2f}{_n(arm.sample.server_us, 1):>9}{ratio:>8}"
            f"{_n(arm.evicting_server_us, 1):>10}{evicting:>8}"
            f"{_n(arm.quiet_server_us, 1):>10}{arm.every_server_us:>12,.1f}{every:>8}"
        )
    rows.append(
        "  (evicting: share of calls that evicted; evicted: memories per evicting call; then "
        "server µs per call that evicted one memory (T7), any number, none, and per call)"
    )
    return rows


def _window_rows(w: Windows, c: dict[str, Any]) -> list[str]:
    rows = [
        f"window() at {w.memories:,} hot memories ({w.whitelisted:,} whitelisted, "
        f"{w.grouped:,} in pairs, tokens 10..500, text 4 bytes per token); "
        f"{c['window_rounds']} rounds of {c['window_calls']:,} calls per case "
        "(call k asks for the budget - k tokens)",
        f"  {'case':<22}{'p50 µs':>9}{'server µs':>11}{'slowest':>10}{'memories':>10}"
        f"{'tokens':>10}",
    ]
    for name, case in w.cases.items():
        rows.append(
            f"  {name:<22}{case.sample.p50_us:>9,.0f}{_n(case.sample.server_us, 0):>11}"
            f"{case.worst_server_us:>10,.0f}{case.memories:>10,.0f}{case.tokens:>10,.0f}"
        )
    rows.append(
        "  (server µs: per call, median over rounds of each round's mean; slowest: one call, "
        "µs; memories and tokens: returned per call)"
    )
    return rows


def _blocking_rows(b: Blocking) -> list[str]:
    rows = [
        f"blocking at {b.size:,} memories: every method while another process PINGs "
        f"({b.pings:,} PINGs, worst {b.worst_ping_ms:,.1f} ms)",
        f"  {'method':<36}{'calls':>6}{'worst call ms':>15}{'worst PING ms':>15}",
    ]
    for m in b.methods:
        rows.append(
            f"  {m.method:<36}{m.calls:>6}{m.worst_call_ms:>15,.2f}{_n(m.worst_ping_ms, 2):>15}"
        )
        if m.error:
            rows.append(f"    failed on the client: {m.error}")
    scripts = ", ".join(
        f"{name} {us / 1000:,.1f} ms"
        for name, us in sorted(b.worst_script_us.items(), key=lambda item: -item[1])
    )
    rows.append(
        f"  SLOWLOG, longest per script above {b.slowlog_us / 1000:g} ms: {scripts or 'none'}"
    )
    return rows
