"""The store's default half-life as a curve: real conversations' end questions against
questions about what was just said, for each half_life_memories of a grid.

    python benchmarks/half_life.py [PATH ...] [--url URL] [--window 100]
        [--grid 250,500,1000,2000,4000,10000,1e9] [--seeds 10] [--sessions 20]
        [--last 4] [--protect-s S] [--protect-memories N] [--json FILE]

Every policy is the store's default Policy but for half_life_memories (1e9: about no
decay), protect_s and protect_memories if given, and max_hot = the window; every transcript
is labelled by the built-in rules and replayed by memevict.simulate.simulate, FIFO beside
memevict, on one server (an embedded Valkey without --url; given one it FLUSHES that
server).

- PATH: LoCoMo files (``locomo10.json``, or one sample a file) or directories of them,
  read by memevict.simulate.locomo. Their questions are asked at the end: the share whose
  evidence the window holds one turn of, and memevict's count ÷ FIFO's, per conversation
  and pooled (summed over the conversations).
- Generated sessions (memevict.simulate.sessions), seeds 1..--seeds of --sessions
  sessions, with two checks of what was just said added (memevict.simulate.recent):
  ``recent``, a question about each fact statement at a user turn 2-8 turns later in its
  session (held: the window holds the statement then), and ``last N``, at each user turn
  with N turns before it in its session, whether the window holds all N (and the mean
  share of them it holds). Beside them, the sessions' own questions: those asked during
  the conversation, answerable when asked, and all of them answerable at the end. Shares
  are pooled over the seeds; ``÷FIFO`` is memevict's count over FIFO's.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis
from _harness import Run, parser, paths_of, server

from memevict import BadPolicy, Policy
from memevict.importance import load_labeler
from memevict.simulate import Outcome, label_transcript, memevict_policies, simulate
from memevict.simulate.locomo import read_locomo
from memevict.simulate.recent import (
    LAST_TURNS,
    RECENT,
    last_turn_checks,
    recent_questions,
    with_questions,
)
from memevict.simulate.sessions import generate_sessions
from memevict.simulate.transcript import Transcript

GRID = "250,500,1000,2000,4000,10000,1e9"
MEASURES = ("recent", "last", "last_mean", "during", "end")  # of the generated sessions


def policies(
    window: int, grid: str, protect_s: float | None = None, protect_memories: int | None = None
) -> dict[str, Policy]:
    """memevict's policies by report key: the default Policy but for half_life_memories
    (and protect_s and protect_memories, if given)."""
    given = {"protect_s": protect_s, "protect_memories": protect_memories}
    fields = {name: value for name, value in given.items() if value is not None}
    return memevict_policies(window, fields, [f"half_life_memories={grid}"])


def run_policies(
    client: redis.Redis, t: Transcript, chosen: dict[str, Policy]
) -> dict[str, Outcome]:
    """FIFO's outcome (``fifo``) and each memevict policy's, by report key."""
    window = next(iter(chosen.values())).max_hot
    return simulate(client, t, window, chosen, policies=("fifo", "memevict")).outcomes


def locomo(client: redis.Redis, paths: list[Path], chosen: dict[str, Policy]) -> dict[str, Any]:
    """Questions answerable at the end, by conversation and policy, and their totals."""
    rules = load_labeler("rules")
    found: dict[str, Any] = {"conversations": {}}
    for path in paths:
        for t in read_locomo(path):
            outcomes = run_policies(client, label_transcript(t, rules), chosen)
            found["conversations"][t.source] = {
                "questions": len(t.questions),
                "held": {
                    k: sum(a.answerable_at_end for a in o.answers) for k, o in outcomes.items()
                },
            }
    return found


def generated(
    client: redis.Redis, seeds: int, sessions: int, last: int, chosen: dict[str, Policy]
) -> dict[str, Any]:
    """The recent checks and the sessions' own questions, counted by seed and policy:
    [held, asked] each, and for ``last_mean`` the turns held and asked for."""
    rules = load_labeler("rules")
    by_seed: dict[str, Any] = {}
    for seed in range(1, seeds + 1):
        t = generate_sessions(seed, sessions)
        extra = (*recent_questions(t, seed), *last_turn_checks(t, last))
        checked = with_questions(label_transcript(t, rules), extra)
        counts: dict[str, dict[str, list[int]]] = {}
        for key, outcome in run_policies(client, checked, chosen).items():
            c = {m: [0, 0] for m in MEASURES}
            for q, a in zip(checked.questions, outcome.answers, strict=True):
                if q.category == RECENT:
                    _add(c["recent"], a.answerable_at_ask)
                elif q.category == LAST_TURNS:
                    _add(c["last"], a.fully_at_ask)
                    c["last_mean"][0] += len(a.kept_at_ask)
                    c["last_mean"][1] += len(a.evidence)
                else:
                    _add(c["end"], a.answerable_at_end)
                    if q.at is not None:
                        _add(c["during"], a.answerable_at_ask)
            counts[key] = c
        by_seed[str(seed)] = {"turns": t.turns, "counts": counts}
    return by_seed


def _add(count: list[int], held: bool) -> None:
    count[0] += held
    count[1] += 1


def share(held: int, total: int) -> float | None:
    return held / total if total else None


def ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _hl(x: float) -> str:
    """A half-life as the grid gives it: 2000, 1e9."""
    return f"{x:g}" if x < 1e6 else f"{x:.0e}".replace("e+0", "e").replace("e+", "e")


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def curve(
    keys: dict[str, float], real: dict[str, Any], made: dict[str, Any]
) -> list[dict[str, Any]]:
    """One row a policy (FIFO first): the pooled shares and ratios."""
    rows = []
    convs = real["conversations"]
    total = sum(c["questions"] for c in convs.values())
    fifo_real = sum(c["held"]["fifo"] for c in convs.values())
    pooled = {
        m: {
            k: [sum(s["counts"][k][m][i] for s in made.values()) for i in (0, 1)]
            for k in ["fifo", *keys]
        }
        for m in MEASURES
    }
    for key in ["fifo", *keys]:
        held_real = sum(c["held"][key] for c in convs.values())
        row: dict[str, Any] = {
            "policy": key,
            "half_life_memories": keys.get(key),
            "locomo_share": share(held_real, total),
            "locomo_vs_fifo": ratio(held_real, fifo_real),
            "locomo_vs_fifo_by_conversation": {
                name: ratio(c["held"][key], c["held"]["fifo"]) for name, c in convs.items()
            },
        }
        for m in MEASURES:
            held, asked = pooled[m][key]
            row[m] = share(held, asked)
            row[f"{m}_vs_fifo"] = ratio(held, pooled[m]["fifo"][0])
            row[f"{m}_count"] = [held, asked]
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]], last: int, names: list[str]) -> list[str]:
    short = [Path(n).stem[:8] for n in names]
    head = ["half-life", "LoCoMo", "÷FIFO", *short, "recent", "÷FIFO"]
    head += [f"last {last}", "mean", "during", "at end"]
    lines = ["  ".join(f"{h:>9}" for h in head)]
    for r in rows:
        hl = r["half_life_memories"]
        cells = ["FIFO" if hl is None else _hl(hl), _pct(r["locomo_share"])]
        cells.append(_x(r["locomo_vs_fifo"]) if hl is not None else "")
        by = r["locomo_vs_fifo_by_conversation"]
        cells += [_x(by[n]) if hl is not None else "" for n in names]
        cells += [_pct(r["recent"]), _x(r["recent_vs_fifo"]) if hl is not None else ""]
        cells += [_pct(r[m]) for m in ("last", "last_mean", "during", "end")]
        lines.append("  ".join(f"{c:>9}" for c in cells))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser(__doc__)
    cli.add_argument("paths", nargs="*", help="LoCoMo files or directories of them")
    cli.add_argument("--url")
    cli.add_argument("--window", type=int, default=100)
    cli.add_argument("--grid", default=GRID, help="half_life_memories values, by commas")
    cli.add_argument("--seeds", type=int, default=10, help="generated sessions, seeds 1..N")
    cli.add_argument("--sessions", type=int, default=20)
    cli.add_argument("--last", type=int, default=4, help="turns before a user turn to hold")
    cli.add_argument("--protect-s", type=float, help="every policy's protect_s")
    cli.add_argument("--protect-memories", type=int, help="every policy's protect_memories")
    opts = cli.parse_args(argv)
    run = Run(opts)
    try:
        chosen = policies(opts.window, opts.grid, opts.protect_s, opts.protect_memories)
    except (BadPolicy, ValueError) as error:  # (one usage line, no traceback)
        cli.error(str(error))
    keys = {key: p.half_life_memories for key, p in chosen.items()}
    with server(opts.url) as found:
        run.on(found)
        real = locomo(found.client, paths_of(opts.paths), chosen)
        made = generated(found.client, opts.seeds, opts.sessions, opts.last, chosen)
    rows = curve(keys, real, made)
    names = list(real["conversations"])
    questions = sum(c["questions"] for c in real["conversations"].values())
    recent = rows[0]["recent_count"][1]
    print(
        f"W={opts.window}; LoCoMo: {len(names)} conversations, {questions} questions, "
        f"answerable at the end; generated: seeds 1..{opts.seeds}, {recent} recent "
        f"questions, {rows[0]['last_count'][1]} last-{opts.last} checks, "
        f"{rows[0]['during_count'][1]} questions asked during, {rows[0]['end_count'][1]} at end"
    )
    for line in table(rows, opts.last, names):
        print(line)
    summary = ", ".join(
        f"{_hl(r['half_life_memories'])} {_x(r['locomo_vs_fifo'])} / {_pct(r['recent'])}"
        for r in rows[1:]
    )
    run.row(
        "The store's default half-life",
        f"W={opts.window}, LoCoMo ÷ FIFO / recent statements held: {summary}",
    )
    run.finish({"locomo": real, "generated": made, "curve": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
