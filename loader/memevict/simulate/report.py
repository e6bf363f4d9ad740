"""A simulation as a printed summary and as JSON."""

from __future__ import annotations

from typing import Any

from memevict.simulate.replay import Outcome, Simulation

CHECKPOINTS = 6  # columns of the retention-over-turns table

_COLUMNS = (
    ("policy", "<"),
    ("critical kept", ">"),
    ("mean importance", ">"),
    ("whitelisted kept", ">"),
    ("wrongful evictions", ">"),
    ("recalls needed", ">"),
    ("evictions", ">"),
    ("ms/turn", ">"),
)


def heading(simulation: Simulation) -> str:
    t = simulation.transcript
    return (
        f"{t.source}: {t.turns} turns, {t.actions} actions, "
        f"{len(t.critical)} critical facts; window of {simulation.window} memories."
    )


def table(simulation: Simulation) -> str:
    """The summary: one row per policy, then critical retention over turns."""
    rows = [[key, *_cells(o)] for key, o in simulation.outcomes.items()]
    lines = [heading(simulation), "", *_aligned([[name for name, _ in _COLUMNS], *rows])]
    over_time = _retention_rows(simulation.outcomes)
    if over_time:
        lines += ["", "Critical facts kept, by turn:", *_aligned(over_time)]
    return "\n".join(lines)


def _cells(o: Outcome) -> list[str]:
    if o.critical_retained is None:
        critical = "-"
    else:
        critical = f"{len(o.critical_kept)}/{o.critical_total} ({o.critical_retained:.0%})"
    return [
        critical,
        f"{o.mean_importance:.2f}",
        f"{o.whitelisted_kept}/{o.whitelisted_total}",
        str(o.wrongful_evictions),
        str(o.recalls_needed),
        str(o.evictions),
        f"{o.ms_per_turn:.3f}",
    ]


def _retention_rows(outcomes: dict[str, Outcome]) -> list[list[str]]:
    samples = next(iter(outcomes.values())).retention
    if not samples:
        return []
    # Every policy is sampled after the same turns.
    picks = sorted({round(k * (len(samples) - 1) / (CHECKPOINTS - 1)) for k in range(CHECKPOINTS)})
    header = ["turn", *(str(samples[i][0]) for i in picks)]
    return [header] + [
        [key, *(f"{o.retention[i][1]:.0%}" for i in picks)] for key, o in outcomes.items()
    ]


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def to_json(simulation: Simulation) -> dict[str, Any]:
    t = simulation.transcript
    return {
        "transcript": {
            "source": t.source,
            "turns": t.turns,
            "actions": t.actions,
            "critical": len(t.critical),
        },
        "window": simulation.window,
        "policies": {key: _outcome(o) for key, o in simulation.outcomes.items()},
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
    }
