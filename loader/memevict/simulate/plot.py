"""The plot: the fraction of critical facts kept over turns, one line per policy."""

from __future__ import annotations

from memevict.simulate.replay import Simulation
from memevict.simulate.report import heading


def matplotlib_missing() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return True
    return False


def draw(simulation: Simulation, path: str) -> None:
    """Writes a PNG to path; needs matplotlib (pip install 'memevict[plot]')."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(8, 4.5))
    for key, outcome in simulation.outcomes.items():
        turns = [turn for turn, _ in outcome.retention]
        kept = [fraction for _, fraction in outcome.retention]
        ax.plot(turns, kept, label=key, drawstyle="steps-post")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("turn")
    ax.set_ylabel("critical facts said so far that are in the window")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower left")
    ax.set_title(heading(simulation), fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
