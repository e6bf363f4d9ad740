"""How well a transcript's importances tell the turns its questions need.

A turn is *evidence* when some question names it. AUC is the chance that an evidence turn
has a higher importance than a turn no question needs (ties count half): 0.5 is a coin,
1.0 ranks every evidence turn first. Beside it, per importance: how many turns have it and
how many of those are evidence. Nothing here talks to a server.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from memevict.importance import CATEGORIES, category_of
from memevict.simulate.transcript import MemoryTurn, Transcript


@dataclass(frozen=True, slots=True)
class LabelerQuality:
    """A transcript's importances against its questions' evidence."""

    turns: int  # memory turns (the latest importance of each id)
    evidence: int  # of them, named by a question
    auc: float | None  # None: no evidence turn, or nothing but evidence
    # (importance, turns, evidence), high first: by category where every importance is one
    # the rules give ("7 business": 6.3 to 7.7), else by value (rounded to 0.1 past 12 values)
    by_importance: tuple[tuple[str, int, int], ...]


def labeler_quality(transcript: Transcript) -> LabelerQuality | None:
    """The quality of the transcript's importances, or None if it asks no question."""
    return pooled_quality([transcript])


def pooled_quality(transcripts: Sequence[Transcript]) -> LabelerQuality | None:
    """The quality of several transcripts' importances, each against its own questions:
    turns counted together, AUC the mean of theirs; None if none asks a question."""
    split = [_split(t) for t in transcripts if t.questions]
    if not split:
        return None
    aucs = [auc(positive, negative) for positive, negative in split if positive and negative]
    positive = [x for p, _ in split for x in p]
    everything = positive + [x for _, n in split for x in n]
    return LabelerQuality(
        len(everything),
        len(positive),
        sum(aucs) / len(aucs) if aucs else None,
        rows(everything, positive),
    )


def _split(transcript: Transcript) -> tuple[list[float], list[float]]:
    """The importances (the latest of each id) of the evidence turns, and of the others."""
    importance: dict[str, float] = {}
    for e in transcript.events:
        if isinstance(e, MemoryTurn) and e.importance is not None:
            importance[e.id] = e.importance
    needed = {id for q in transcript.questions for id in q.evidence}
    positive = [x for id, x in importance.items() if id in needed]
    return positive, [x for id, x in importance.items() if id not in needed]


def rows(importances: list[float], positive: list[float]) -> tuple[tuple[str, int, int], ...]:
    """The per-importance rows of :class:`LabelerQuality`."""
    values = set(importances)
    if all(category_of(x) is not None for x in values):

        def key(x: float) -> tuple[float, str]:
            category = str(category_of(x))
            return CATEGORIES[category], f"{CATEGORIES[category]:g} {category}"
    elif len(values) > 12:

        def key(x: float) -> tuple[float, str]:
            return round(x, 1), f"{round(x, 1):g}"
    else:

        def key(x: float) -> tuple[float, str]:
            return x, f"{x:g}"

    turns, evidence = Counter(map(key, importances)), Counter(map(key, positive))
    return tuple((k[1], turns[k], evidence[k]) for k in sorted(turns, reverse=True))


def auc(positive: list[float], negative: list[float]) -> float:
    """Mann-Whitney AUC of ``positive`` over ``negative``, ties counting half."""
    below, ties = 0, 0
    counts = Counter(negative)
    ordered = sorted(counts)
    for p in positive:
        below += sum(counts[x] for x in ordered if x < p)
        ties += counts[p]
    return (below + ties / 2) / (len(positive) * len(negative))
