"""How well memevict.importance's rules tell the turns that matter, and how fast.

    python benchmarks/labeler_quality.py [SEEDS] [--json FILE]

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


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("seeds", nargs="?", type=int, default=10)
    opts = cli.parse_args()
    run = Run(opts)
    found = measure(opts.seeds)
    run.row(
        "The labeler's quality",
        f"AUC against evidence, generated multi-session: {found['multi_session_auc_mean']:.3f}"
        f" ({opts.seeds} seeds); {found['us_per_message']:.1f} µs a message",
    )
    run.finish(found)


if __name__ == "__main__":
    main()
