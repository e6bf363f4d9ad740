"""A simulation as a printed summary and as JSON; several simulations (one per
transcript) as the mean, min and max of each policy's measures."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memevict.simulate.policies import grid_of
from memevict.simulate.quality import LabelerQuality, labeler_quality, pooled_quality
from memevict.simulate.replay import Answer, Answers, Outcome, Simulation
from memevict.simulate.transcript import MemoryTurn, Transcript

CHECKPOINTS = 6  # columns of the retention-over-turns table
HINDSIGHT = "hindsight"
HINDSIGHT_NOTE = (
    "hindsight: the best window of the same size, chosen knowing the questions; a ceiling, "
    "not a policy\n(greedy: within 1 - 1/e of the best for answerable, the best when each "
    "question has one evidence turn)."
)


@dataclass(frozen=True, slots=True)
class Measure:
    """One column: its title, its JSON name, whether it is a share (0..1),
    and how to read it from an outcome (None: not measured)."""

    title: str
    name: str
    share: bool
    digits: int
    of: Callable[[Answers], float | None]


def _outcome_measure(read: Callable[[Outcome], float | None]) -> Callable[[Answers], float | None]:
    return lambda o: read(o) if isinstance(o, Outcome) else None


MEASURES = (
    Measure("critical kept", "critical_retained", True, 0,
            _outcome_measure(lambda o: o.critical_retained)),
    Measure("mean importance", "mean_importance", False, 2,
            _outcome_measure(lambda o: o.mean_importance)),
    Measure("whitelisted kept", "whitelisted_retained", True, 0,
            _outcome_measure(lambda o: o.whitelisted_kept / o.whitelisted_total
                             if o.whitelisted_total else None)),
    Measure("wrongful evictions", "wrongful_evictions", False, 0,
            _outcome_measure(lambda o: o.wrongful_evictions)),
    Measure("recalls needed", "recalls_needed", False, 0,
            _outcome_measure(lambda o: o.recalls_needed)),
    Measure("evictions", "evictions", False, 0, _outcome_measure(lambda o: o.evictions)),
    Measure("ms/turn", "ms_per_turn", False, 3, _outcome_measure(lambda o: o.ms_per_turn)),
)  # fmt: skip
QUESTION_MEASURES = (
    Measure("answerable at ask", "answerable_at_ask", True, 0, lambda o: o.answerable_at_ask),
    Measure("all evidence at ask", "fully_at_ask", True, 0, lambda o: o.fully_at_ask),
    Measure("answerable at end", "answerable_at_end", True, 0, lambda o: o.answerable_at_end),
    Measure("all evidence at end", "fully_at_end", True, 0, lambda o: o.fully_at_end),
)


def heading(simulation: Simulation) -> str:
    return f"{_described(simulation.transcript)}; window of {simulation.window} memories."


def _described(t: Transcript) -> str:
    said = [e for e in t.events if isinstance(e, MemoryTurn)]
    parts = [f"{t.turns} turns", f"{t.actions} actions", f"{len(t.critical)} critical facts"]
    if t.questions:
        parts.append(f"{len(t.questions)} questions")
    sessions = {e.session for e in said if e.session is not None}
    if sessions:
        parts.append(f"{len(sessions)} sessions")
    speakers = list(dict.fromkeys(e.speaker for e in said if e.speaker is not None))
    if speakers:
        shown = ", ".join(speakers[:5]) + (", ..." if len(speakers) > 5 else "")
        parts.append(f"speakers {shown}")
    return f"{t.source}: {', '.join(parts)}"


def _rows(simulation: Simulation) -> dict[str, Answers]:
    """Every row of the report by key: the policies, then hindsight."""
    rows: dict[str, Answers] = dict(simulation.outcomes)
    if simulation.hindsight is not None:
        rows[HINDSIGHT] = simulation.hindsight
    return rows


def _measures(questions: bool) -> tuple[Measure, ...]:
    return MEASURES + QUESTION_MEASURES if questions else MEASURES


def table(simulation: Simulation) -> str:
    """The summary: one row per policy, then critical retention over turns."""
    measures = _measures(bool(simulation.transcript.questions))
    rows = [[key, *(_cell(m, o) for m in measures)] for key, o in _rows(simulation).items()]
    header = ["policy", *(m.title for m in measures)]
    lines = [heading(simulation), *_notes(simulation.transcript), "", *_aligned([header, *rows])]
    if simulation.hindsight is not None:
        lines += ["", HINDSIGHT_NOTE]
    quality = labeler_quality(simulation.transcript)
    if quality is not None:
        lines += ["", *_quality_lines(quality)]
    over_time = _retention_rows(simulation.outcomes)
    if over_time:
        lines += ["", "Critical facts kept, by turn:", *_aligned(over_time)]
    return "\n".join(lines)


def _notes(t: Transcript) -> list[str]:
    """What reading the transcript fixed or dropped, a line each."""
    return [f"  read: {what}: {n}" for what, n in t.notes]


def _auc(quality: LabelerQuality | None) -> str:
    return "-" if quality is None or quality.auc is None else f"{quality.auc:.3f}"


def _quality_lines(q: LabelerQuality) -> list[str]:
    """The importances against the evidence: AUC, then turns and evidence per importance."""
    rows = [["importance", "turns", "share", "evidence", "of them evidence"]]
    rows += [
        [x, str(n), f"{n / q.turns:.0%}", str(e), f"{e / n:.0%}"] for x, n, e in q.by_importance
    ]
    return [
        f"Importance against the questions' evidence: AUC {_auc(q)} ({q.evidence} of "
        f"{q.turns} turns are evidence; 0.5 is chance, 1.0 ranks every one first)",
        *_aligned(rows),
    ]


def _cell(measure: Measure, o: Answers) -> str:
    """A measure of one outcome: shares as n/total (p%)."""
    if isinstance(o, Outcome) and measure.name == "whitelisted_retained":
        return f"{o.whitelisted_kept}/{o.whitelisted_total}"
    value = measure.of(o)
    if value is None:
        return "-"
    if isinstance(o, Outcome) and measure.name == "critical_retained":
        return f"{len(o.critical_kept)}/{o.critical_total} ({value:.0%})"
    if measure in QUESTION_MEASURES:
        answered = sum(bool(getattr(a, measure.name)) for a in o.answers)
        return f"{answered}/{o.questions} ({value:.0%})"
    return f"{value:.{measure.digits}f}"


def _retention_rows(outcomes: dict[str, Outcome]) -> list[list[str]]:
    samples = next(iter(outcomes.values())).retention if outcomes else ()
    if not samples:
        return []
    # Every policy is sampled after the same turns.
    picks = sorted({round(k * (len(samples) - 1) / (CHECKPOINTS - 1)) for k in range(CHECKPOINTS)})
    header = ["turn", *(str(samples[i][0]) for i in picks)]
    return [header] + [
        [key, *(f"{o.retention[i][1]:.0%}" for i in picks)] for key, o in outcomes.items()
    ]


def timeline(simulation: Simulation, width: int = 60) -> str:
    """What left each memevict policy's tiers, turn by turn, and why (``simulate
    --timeline``): after which memory turn, the memory, where it went, the reason (rule 15
    of docs/rules.md), its score and importance as it left, and the start of its text as
    it was said; then how many left for each reason."""
    lines: list[str] = []
    for key, o in simulation.outcomes.items():
        if not o.timeline:
            continue
        said: dict[str, str] = {}  # each memory's text as last said, up to the event
        by_event = {x.event for x in o.timeline}
        texts: dict[int, dict[str, str]] = {}
        for i, event in enumerate(simulation.transcript.events):
            if isinstance(event, MemoryTurn):
                said[event.id] = " ".join((event.text or "").split())
            if i in by_event:
                texts[i] = dict(said)
        rows = [["turn", "memory", "from", "to", "reason", "score", "importance", "text"]]
        for x in o.timeline:
            text = texts[x.event].get(x.id, "")
            shown = text if len(text) <= width else text[: width - 1] + "…"
            score, importance = f"{x.score:.4g}", f"{x.importance:.3g}"
            rows.append(
                [str(x.turn), x.id, x.from_tier, x.to_tier, x.reason, score, importance, shown]
            )
        reasons: dict[str, int] = {}
        for x in o.timeline:
            reasons[x.reason] = reasons.get(x.reason, 0) + 1
        counts = ", ".join(f"{reason} {n}" for reason, n in sorted(reasons.items()))
        lines += [
            "",
            f"What left {key}'s tiers, turn by turn (reasons: docs/rules.md, rule 15):",
            *_aligned(rows, text_last=True),
            f"{len(o.timeline)} in all: {counts}",
        ]
    return "\n".join(lines).lstrip("\n")


def _aligned(rows: list[list[str]], text_last: bool = False) -> list[str]:
    """Columns padded to their widest cell: the first (and with ``text_last`` the last)
    flush left, numbers flush right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    text = {0, len(widths) - 1} if text_last else {0}
    lines = []
    for row in rows:
        cells = [
            cell.ljust(width) if i in text else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def to_json(simulation: Simulation) -> dict[str, Any]:
    policies: dict[str, Any] = {}
    for key, o in simulation.outcomes.items():
        policies[key] = _outcome(o)
        policy = simulation.policies.get(key)
        if policy is not None:
            policies[key]["policy"] = dataclasses.asdict(policy)
            policies[key]["grid"] = grid_of(key, policy)
    if simulation.hindsight is not None:
        policies[HINDSIGHT] = _hindsight(simulation.hindsight)
    return {
        "transcript": _transcript(simulation.transcript),
        "window": simulation.window,
        "policies": policies,
    }


def _transcript(t: Transcript) -> dict[str, Any]:
    said = [e for e in t.events if isinstance(e, MemoryTurn)]
    roles: dict[str, int] = {}
    for e in said:
        if e.role is not None:
            roles[e.role] = roles.get(e.role, 0) + 1
    quality = labeler_quality(t)
    return {
        "source": t.source,
        "turns": t.turns,
        "actions": t.actions,
        "critical": len(t.critical),
        "questions": len(t.questions),
        "sessions": len({e.session for e in said if e.session is not None}),
        "speakers": sorted({e.speaker for e in said if e.speaker is not None}),
        "roles": roles,
        "notes": dict(t.notes),
        "labeler": None
        if quality is None
        else {
            "auc": quality.auc,
            "turns": quality.turns,
            "evidence": quality.evidence,
            "by_importance": [
                {"importance": x, "turns": n, "evidence": e} for x, n, e in quality.by_importance
            ],
        },
    }


def _answers(o: Answers) -> dict[str, Any]:
    return {
        "questions": o.questions,
        "answerable_at_ask": o.answerable_at_ask,
        "fully_at_ask": o.fully_at_ask,
        "answerable_at_end": o.answerable_at_end,
        "fully_at_end": o.fully_at_end,
        "answers": [_answer(a) for a in o.answers],
    }


def _answer(a: Answer) -> dict[str, Any]:
    return {
        "question": a.question,
        "evidence": list(a.evidence),
        "at": a.at,
        "kept_at_ask": list(a.kept_at_ask),
        "kept_at_end": list(a.kept_at_end),
        "answerable_at_ask": a.answerable_at_ask,
        "fully_at_ask": a.fully_at_ask,
        "answerable_at_end": a.answerable_at_end,
        "fully_at_end": a.fully_at_end,
    }


def _outcome(o: Outcome) -> dict[str, Any]:
    return {
        "turns": o.turns,
        "actions": o.actions,
        "critical_total": o.critical_total,
        "critical_kept": list(o.critical_kept),
        "critical_retained": o.critical_retained,
        "retention": [[turn, fraction] for turn, fraction in o.retention],
        "mean_importance": o.mean_importance,
        "whitelisted_total": o.whitelisted_total,
        "whitelisted_kept": o.whitelisted_kept,
        "evictions": o.evictions,
        "wrongful_evictions": o.wrongful_evictions,
        "recalls_needed": o.recalls_needed,
        "ms_per_turn": round(o.ms_per_turn, 4),
        "window": list(o.window),
        **_answers(o),
        **({"timeline": [dataclasses.asdict(x) for x in o.timeline]} if o.timeline else {}),
    }


_OUTCOME_ONLY = (
    "turns", "actions", "critical_total", "critical_kept", "critical_retained", "retention",
    "mean_importance", "whitelisted_total", "whitelisted_kept", "evictions",
    "wrongful_evictions", "recalls_needed", "ms_per_turn", "window",
)  # fmt: skip


def _hindsight(o: Answers) -> dict[str, Any]:
    """The ceiling's entry: the question measures; the rest null."""
    return {**dict.fromkeys(_OUTCOME_ONLY), **_answers(o)}


# -- several transcripts -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Spread:
    """A measure over the transcripts that have it."""

    mean: float
    min: float
    max: float
    n: int  # transcripts measured


def summary(simulations: Sequence[Simulation]) -> dict[str, dict[str, Spread | None]]:
    """Per policy (in the order first met), per measure: its spread over the
    transcripts, None where no transcript measured it."""
    questions = any(s.transcript.questions for s in simulations)
    rows: dict[str, list[Answers]] = {}
    for simulation in simulations:
        for key, o in _rows(simulation).items():
            rows.setdefault(key, []).append(o)
    found: dict[str, dict[str, Spread | None]] = {}
    for key, outcomes in rows.items():
        found[key] = {}
        for measure in _measures(questions):
            values = [v for v in (measure.of(o) for o in outcomes) if v is not None]
            found[key][measure.name] = (
                Spread(sum(values) / len(values), min(values), max(values), len(values))
                if values
                else None
            )
    return found


def summary_table(simulations: Sequence[Simulation]) -> str:
    """Several transcripts: per policy and measure, mean (min..max)."""
    questions = any(s.transcript.questions for s in simulations)
    measures = _measures(questions)
    spreads = summary(simulations)
    header = ["policy", *(m.title for m in measures)]
    rows = [
        [key, *(_spread_cell(m, found[m.name]) for m in measures)] for key, found in spreads.items()
    ]
    windows = sorted({s.window for s in simulations})
    qualities = [labeler_quality(s.transcript) for s in simulations]
    lines = [
        f"{len(simulations)} transcripts; window of {', '.join(map(str, windows))} memories.",
    ]
    for s, quality in zip(simulations, qualities, strict=True):
        auc = f"; labeler AUC {_auc(quality)}" if quality is not None else ""
        lines += [f"  {_described(s.transcript)}{auc}", *_notes(s.transcript)]
    lines += ["", "Mean (min..max) over the transcripts:", *_aligned([header, *rows])]
    if HINDSIGHT in spreads:
        lines += ["", HINDSIGHT_NOTE]
    pooled = pooled_quality([s.transcript for s in simulations])
    if pooled is not None:
        lines += ["", "All transcripts together:", *_quality_lines(pooled)]
    return "\n".join(lines)


def _spread_cell(measure: Measure, spread: Spread | None) -> str:
    if spread is None:
        return "-"
    if measure.share:
        return f"{spread.mean:.0%} ({spread.min:.0%}..{spread.max:.0%})"
    digits = measure.digits if measure.digits else 1
    low, high = (f"{x:.{measure.digits}f}" for x in (spread.min, spread.max))
    return f"{spread.mean:.{digits}f} ({low}..{high})"


def summary_json(simulations: Sequence[Simulation]) -> dict[str, Any]:
    return {
        "transcripts": [to_json(s) for s in simulations],
        "summary": {
            key: {
                name: dataclasses.asdict(spread) if spread is not None else None
                for name, spread in found.items()
            }
            for key, found in summary(simulations).items()
        },
    }
