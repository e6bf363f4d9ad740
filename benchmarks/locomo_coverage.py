"""Coverage on LoCoMo-format conversations: FIFO, memevict with the built-in labeler, memevict
with a labeler you give, and hindsight, by window size and by token budget.

    python benchmarks/locomo_coverage.py PATH... [--url URL] [--labeler SPEC]
        [--windows 40,100,200] [--budgets 2000,5000,10000] [--json FILE]

PATH: LoCoMo files (``locomo10.json``, or one sample a file) or directories of them, read
by memevict.simulate.locomo (evidence defects fixed or dropped, and counted). Every
question is asked at the end; it is covered when one of its evidence turns is kept.

- Windows (W memories): ``memevict simulate``'s replay (memevict.simulate.simulate): FIFO
  keeps the last W turns; memevict runs with the default Policy and max_hot = W; hindsight
  is the best W turns knowing the questions (greedy).
- Token budgets (B tokens, ~4 characters a token, as the adapters count): FIFO keeps the
  newest turns that fit; memevict runs with the default Policy, max_hot out of the way and
  max_tokens = B, each turn remembered with its tokens, and keeps its hot tier; hindsight
  takes, greedily, the turn covering the most questions not covered yet per token.

memevict runs once with the built-in rules (``rules``) and, with ``--labeler``, once with
that labeler (as ``memevict.importance.load_labeler`` reads it). Beside each labeler: its
AUC against "a question names this turn" (mean over the conversations). Covered questions
are summed over all conversations; ``ratio`` is memevict's (or hindsight's) over FIFO's,
and ``min`` the lowest ratio of one conversation. Without --url it runs on an embedded
Valkey; given one it FLUSHES that server.
"""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import Sequence
from typing import Any

import redis
from _harness import Run, parser, paths_of, server

from memevict import MemoryStore, Policy
from memevict.importance import Labeler, load_labeler
from memevict.integrations._conversation import approx_tokens
from memevict.simulate import simulate
from memevict.simulate.labels import label_transcript
from memevict.simulate.locomo import read_locomo
from memevict.simulate.policies import clear
from memevict.simulate.quality import labeler_quality
from memevict.simulate.transcript import MemoryTurn, Transcript


def turns_of(t: Transcript) -> list[MemoryTurn]:
    return [e for e in t.events if isinstance(e, MemoryTurn)]


def covered(t: Transcript, kept: set[str]) -> list[bool]:
    return [any(e in kept for e in q.evidence) for q in t.questions]


def by_window(client: redis.Redis, labelled: dict[str, Transcript], w: int) -> dict[str, int]:
    """Questions covered with a window of w memories: fifo, hindsight, memevict/<labeler>."""
    found: dict[str, int] = {}
    for name, t in labelled.items():
        chosen = ("memevict",) if found else ("fifo", "memevict", "hindsight")
        s = simulate(client, t, w, {"memevict": Policy(max_hot=w)}, policies=chosen)
        for key, outcome in s.outcomes.items():
            found["memevict/" + name if key == "memevict" else key] = _end(outcome.answers)
        if s.hindsight is not None:
            found["hindsight"] = _end(s.hindsight.answers)
    return found


def _end(answers: Sequence[Any]) -> int:
    return sum(a.answerable_at_end for a in answers)


def by_budget(client: redis.Redis, labelled: dict[str, Transcript], b: int) -> dict[str, int]:
    """Questions covered within b tokens: fifo, hindsight, memevict/<labeler>."""
    first = next(iter(labelled.values()))
    turns = turns_of(first)
    tokens = {e.id: approx_tokens(e.text or "") for e in turns}
    fifo: set[str] = set()
    left = b
    for e in reversed(turns):
        if tokens[e.id] > left:
            break
        fifo.add(e.id)
        left -= tokens[e.id]
    found = {
        "fifo": sum(covered(first, fifo)),
        "hindsight": sum(covered(first, hindsight(first, tokens, b))),
    }
    for name, t in labelled.items():
        found["memevict/" + name] = sum(covered(t, memevict_kept(client, t, tokens, b)))
    return found


def memevict_kept(client: redis.Redis, t: Transcript, tokens: dict[str, int], b: int) -> set[str]:
    namespace = f"locomo-coverage-{secrets.token_hex(4)}"
    clear(client, namespace)
    try:
        store = MemoryStore(client, namespace, Policy(max_hot=100_000, max_tokens=b))
        for e in turns_of(t):
            if tokens[e.id] <= b and e.importance is not None:
                store.remember(e.id, e.importance, tokens=tokens[e.id], now=e.at)
        return {m.id for m in store.window(b)}
    finally:
        clear(client, namespace)


def hindsight(t: Transcript, tokens: dict[str, int], b: int) -> set[str]:
    """Greedy: the turn covering the most questions not covered yet per token, while it
    fits."""
    open_ = {i: set(q.evidence) for i, q in enumerate(t.questions)}
    kept: set[str] = set()
    left = b
    while open_:
        gain: dict[str, int] = {}
        for evidence in open_.values():
            for id in evidence:
                if id not in kept and tokens.get(id, b + 1) <= left:
                    gain[id] = gain.get(id, 0) + 1
        if not gain:
            break
        best = max(gain, key=lambda id: (gain[id] / tokens[id], id))
        kept.add(best)
        left -= tokens[best]
        open_ = {i: ev for i, ev in open_.items() if best not in ev}
    return kept


def table(rows: dict[int, list[dict[str, int]]], totals: int, unit: str) -> list[str]:
    lines = []
    width = max(len(key) for per in rows.values() for key in per[0])
    for size, per in rows.items():
        for key in per[0]:
            got = sum(r[key] for r in per)
            lows = [r[key] / r["fifo"] for r in per if r["fifo"]]
            low = f"{min(lows):5.2f}" if lows and key != "fifo" else "    -"
            lines.append(
                f"  {size:>6} {unit:6} {key:{width}} {got:5}/{totals:<5} {got / totals:6.1%} "
                f"ratio {ratio(per, key):5.2f} min {low}"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser(__doc__)
    cli.add_argument("paths", nargs="+")
    cli.add_argument("--url")
    cli.add_argument("--labeler")
    cli.add_argument("--windows", default="40,100,200")
    cli.add_argument("--budgets", default="2000,5000,10000")
    opts = cli.parse_args(argv)
    run = Run(opts)
    started = time.perf_counter()
    labelers: dict[str, Labeler] = {"rules": load_labeler("rules")}
    if opts.labeler:
        labelers[opts.labeler] = load_labeler(opts.labeler)
    conversations = [t for path in paths_of(opts.paths) for t in read_locomo(path)]
    labelled = [{n: label_transcript(t, lab) for n, lab in labelers.items()} for t in conversations]
    questions = sum(len(t.questions) for t in conversations)
    windows = [int(x) for x in opts.windows.split(",") if x]
    budgets = [int(x) for x in opts.budgets.split(",") if x]
    report: dict[str, Any] = {"conversations": [], "labelers": {}}
    print(f"{len(conversations)} conversations, {questions} questions with evidence")
    for t in conversations:
        print(f"  {t.source}: {t.turns} turns, {len(t.questions)} questions")
        for what, n in t.notes:
            print(f"    read: {what}: {n}")
        report["conversations"].append(
            {
                "source": t.source,
                "turns": t.turns,
                "questions": len(t.questions),
                "notes": dict(t.notes),
            }
        )
    for name in labelers:
        qualities = [labeler_quality(by[name]) for by in labelled]
        aucs = [q.auc for q in qualities if q is not None and q.auc is not None]
        mean = sum(aucs) / len(aucs) if aucs else None
        report["labelers"][name] = {"auc": aucs, "auc_mean": mean}
        shown = ", ".join(f"{a:.3f}" for a in aucs)
        print(f"labeler {name}: AUC against evidence {mean:.3f} (per conversation: {shown})")
    with server(opts.url) as found:
        run.on(found)
        count = {w: [by_window(found.client, by, w) for by in labelled] for w in windows}
        tokens = {b: [by_budget(found.client, by, b) for by in labelled] for b in budgets}
    print("covered questions (summed over the conversations):")
    for line in table(count, questions, "turns") + table(tokens, questions, "tokens"):
        print(line)
    print(f"{time.perf_counter() - started:.0f} s")
    report["windows"] = {str(w): rows for w, rows in count.items()}
    report["budgets"] = {str(b): rows for b, rows in tokens.items()}
    aucs = ", ".join(f"{n} {q['auc_mean']:.3f}" for n, q in report["labelers"].items())
    run.row("The labeler's quality", f"AUC on LoCoMo: {aucs}")
    ratios = [f"W={w} {ratio(rows, 'memevict/rules'):.2f}x" for w, rows in count.items()]
    ratios += [f"{b:,} tokens {ratio(rows, 'memevict/rules'):.2f}x" for b, rows in tokens.items()]
    run.row("Coverage on real conversations (LoCoMo)", "memevict ÷ FIFO: " + ", ".join(ratios))
    run.finish(report)
    return 0


def ratio(rows: Sequence[dict[str, int]], key: str) -> float:
    """Covered questions of ``key`` over FIFO's, summed over the conversations."""
    fifo = sum(r["fifo"] for r in rows)
    return sum(r[key] for r in rows) / fifo if fifo else float("nan")


if __name__ == "__main__":
    sys.exit(main())
