"""How well a transcript's importances tell the turns its questions need.

A turn is *evidence* when some question names it. AUC is the chance that an evidence turn
has a higher importance than a turn no question needs (ties count half): 0.5 is a coin,
1.0 ranks every evidence turn first. Beside it, per importance: how many turns have it and
how many of those are evidence. Nothing here talks to a server.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from memevict.simulate.transcript import MemoryTurn, Transcript


@dataclass(frozen=True, slots=True)
class LabelerQuality:
    """A transcript's importances against its questions' evidence."""

    turns: int  # memory turns (the latest importance of each id)
    evidence: int  # of them, named by a question
    auc: float | None  # None: no evidence turn, or nothing but evidence
    by_importance: tuple[tuple[float, int, int], ...]  # (importance, turns, evidence), high first


def labeler_quality(transcript: Transcript) -> LabelerQuality | None:
    """The quality of the transcript's importances, or None if it asks no question."""
    if not transcript.questions:
        return None
    importance: dict[str, float] = {}
    for e in transcript.events:
        if isinstance(e, MemoryTurn) and e.importance is not None:
            importance[e.id] = e.importance
    needed = {id for q in transcript.questions for id in q.evidence}
    positive = [x for id, x in importance.items() if id in needed]
    negative = [x for id, x in importance.items() if id not in needed]
    turns, evidence = Counter(importance.values()), Counter(positive)
    return LabelerQuality(
        len(importance),
        len(positive),
        auc(positive, negative) if positive and negative else None,
        tuple((x, turns[x], evidence[x]) for x in sorted(turns, reverse=True)),
    )


def auc(positive: list[float], negative: list[float]) -> float:
    """Mann-Whitney AUC of ``positive`` over ``negative``, ties counting half."""
    below, ties = 0, 0
    counts = Counter(negative)
    ordered = sorted(counts)
    for p in positive:
        below += sum(counts[x] for x in ordered if x < p)
        ties += counts[p]
    return (below + ties / 2) / (len(positive) * len(negative))
