"""How well memevict.importance's rules tell the turns that matter, and how fast.

    python benchmarks/labeler_quality.py [SEEDS] [--locomo FILE ...] [--json FILE]

- Multi-session generator (memevict.simulate.sessions, 20 sessions a seed):
  AUC of the rules' importance against "the turn is evidence for a question"
  (the chance that an evidence turn gets a higher importance than a turn no
  question needs, ties counting half), and the share of each category that is
  evidence.
- Single-session generator (memevict.simulate.generator, 400 turns a seed):
  AUC against "the generator's category is instruction, tool error or
  business data" (importance >= 7), and how often the rules give the
  generator's category exactly.
- Speed: the rules' mean µs per message over every generated text (CPU time).
- With ``--locomo``, LoCoMo-format files (real conversations): the AUC against "the turn
  is evidence for a question" per file and pooled, and by rule: the share of turns each
  rule decides and the share of those that are evidence (docs/simulate.md's table); the
  same by length (under 20 tokens or not, four characters a token) and, for the questions
  of each LoCoMo category, how often an evidence turn is under 20 tokens.

Both generators were written without reading the rules (and the rules without
reading the generators), but they are still ours: real conversations may
score lower.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from _harness import Run, parser

from memevict.importance import Message, label
from memevict.simulate.generator import generate
from memevict.simulate.locomo import read_locomo
from memevict.simulate.sessions import generate_sessions
from memevict.simulate.transcript import MemoryTurn


def auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """Mann-Whitney AUC, ties counting half."""
    counts = Counter(negative)
    below = 0.0
    for p in positive:
        below += sum(n for x, n in counts.items() if x < p) + counts[p] / 2
    return below / (len(positive) * len(negative))


def measure(seeds: int) -> dict[str, Any]:
    texts: list[Message] = []
    session_aucs, by_category = [], Counter[tuple[str, bool]]()
    for seed in range(1, seeds + 1):
        t = generate_sessions(seed, 20)
        evidence = {e for q in t.questions for e in q.evidence}
        pos, neg = [], []
        for e in t.events:
            if isinstance(e, MemoryTurn):
                message = Message(e.text or "", role=e.role)
                texts.append(message)
                found = label(message)
                (pos if e.id in evidence else neg).append(found.importance)
                by_category[found.category, e.id in evidence] += 1
        session_aucs.append(auc(pos, neg))
    single_aucs, exact, total = [], 0, 0
    for seed in range(1, seeds + 1):
        pos, neg = [], []
        for e in generate(seed, 400).events:
            if isinstance(e, MemoryTurn) and e.category is not None:
                message = Message(e.text or "")
                texts.append(message)
                found = label(message)
                (pos if e.importance is not None and e.importance >= 7 else neg).append(
                    found.importance
                )
                exact += found.category == e.category
                total += 1
        single_aucs.append(auc(pos, neg))
    started = time.process_time()
    for message in texts:
        label(message)
    us = (time.process_time() - started) / len(texts) * 1e6

    def spread(xs: list[float]) -> str:
        return f"{sum(xs) / len(xs):.3f} ({min(xs):.3f}..{max(xs):.3f})"

    print(f"multi-session, {seeds} seeds: AUC vs evidence {spread(session_aucs)}")
    shares: dict[str, float] = {}
    for category in ("instruction", "tool_error", "business", "conclusion", "context", "chitchat"):
        yes, no = by_category[category, True], by_category[category, False]
        if yes + no:
            shares[category] = yes / (yes + no)
            print(f"  {category:<12} {yes + no:>5} turns, {yes / (yes + no):.0%} evidence")
    print(f"single-session, {seeds} seeds: AUC vs importance >= 7 {spread(single_aucs)}")
    print(f"  category exactly the generator's: {exact / total:.0%} of {total} turns")
    print(f"speed: {us:.1f} µs/message (CPU) over {len(texts)} messages")
    return {
        "seeds": seeds,
        "multi_session_auc": session_aucs,
        "multi_session_auc_mean": sum(session_aucs) / len(session_aucs),
        "evidence_share_by_category": shares,
        "single_session_auc": single_aucs,
        "single_session_auc_mean": sum(single_aucs) / len(single_aucs),
        "category_exact": exact / total,
        "us_per_message": us,
        "messages": len(texts),
    }


SHORT = 20  # tokens: a short line (about 80 characters)


def by_rule(paths: Sequence[str]) -> dict[str, Any]:
    """What the rules do on real conversations: AUC per file and pooled, and by rule the
    share of turns and of them evidence."""
    turns = Counter[tuple[str, bool]]()
    lengths = Counter[tuple[bool, bool]]()
    aucs: dict[str, float] = {}
    pooled: tuple[list[float], list[float]] = ([], [])
    categories = Counter[tuple[str, bool]]()
    for path in paths:
        for t in read_locomo(path):
            evidence = {e for q in t.questions for e in q.evidence}
            pos, neg = [], []
            short: dict[str, bool] = {}
            for e in t.events:
                if isinstance(e, MemoryTurn):
                    found = label(Message(e.text or "", role=e.role))
                    is_evidence = e.id in evidence
                    (pos if is_evidence else neg).append(found.importance)
                    turns[found.rule, is_evidence] += 1
                    short[e.id] = len(e.text or "") < 4 * SHORT
                    lengths[short[e.id], is_evidence] += 1
            for q in t.questions:
                categories[q.category or "?", any(short.get(e, False) for e in q.evidence)] += 1
            aucs[t.source] = auc(pos, neg)
            pooled[0].extend(pos)
            pooled[1].extend(neg)
    total = sum(turns.values())
    rules = sorted({r for r, _ in turns}, key=lambda r: -(turns[r, True] + turns[r, False]))
    table = {}
    print(f"LoCoMo-format, {len(aucs)} conversations: AUC pooled {auc(*pooled):.3f}")
    for source, value in aucs.items():
        print(f"  {source}: {value:.3f}")
    print(f"  {'rule':<20} {'turns':>6} {'share':>6} {'evidence':>9}")
    for rule in rules:
        yes, no = turns[rule, True], turns[rule, False]
        table[rule] = {"turns": yes + no, "share": (yes + no) / total, "evidence": yes / (yes + no)}
        print(f"  {rule:<20} {yes + no:>6} {(yes + no) / total:>6.1%} {yes / (yes + no):>9.1%}")
    for is_short in (True, False):
        yes, no = lengths[is_short, True], lengths[is_short, False]
        name = f"under {SHORT} tokens" if is_short else f"{SHORT} tokens or more"
        print(f"  {name}: {yes + no} turns, {yes / max(1, yes + no):.1%} evidence")
    for category in sorted({c for c, _ in categories}):
        yes, no = categories[category, True], categories[category, False]
        share = yes / (yes + no)
        print(f"  questions of category {category}: {yes + no}, {share:.0%} with a short evidence")
    return {"auc_pooled": auc(*pooled), "auc": aucs, "by_rule": table}


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("seeds", nargs="?", type=int, default=10)
    cli.add_argument("--locomo", nargs="+", default=[], metavar="FILE")
    opts = cli.parse_args()
    run = Run(opts)
    found = measure(opts.seeds)
    if opts.locomo:
        found["locomo"] = by_rule(opts.locomo)
    run.row(
        "The labeler's quality",
        f"AUC against evidence, generated multi-session: {found['multi_session_auc_mean']:.3f}"
        f" ({opts.seeds} seeds); {found['us_per_message']:.1f} µs a message",
    )
    run.finish(found)


if __name__ == "__main__":
    main()
