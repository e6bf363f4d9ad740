"""The plot: time per call against store size, log-log, memevict against the seed peer."""

from __future__ import annotations

from memevict.bench.sizes import OPS, Sizes

TITLES = {
    "decay": "decay",
    "evict": "remember on a full store (evicts)",
    "remember": "remember on a store not full",
}
STYLES = {"memevict": ("tab:blue", "o"), "seed": ("tab:orange", "s")}


def matplotlib_missing() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return True
    return False


def draw(sizes: Sizes, path: str, title: str) -> None:
    """Writes a PNG to path; needs matplotlib (pip install 'memevict[bench]')."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(OPS), figsize=(5 * len(OPS), 4.5))
    for ax, op in zip(axes, OPS, strict=True):
        for peer, (color, marker) in STYLES.items():
            found = sizes.samples.get(peer, {}).get(op, {})
            xs = sorted(found)
            ax.plot(
                xs,
                [found[n].us_per_call for n in xs],
                marker=marker,
                color=color,
                label="memevict" if peer == "memevict" else "seed article",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        times = [
            s.us_per_call
            for peer in STYLES
            for s in sizes.samples.get(peer, {}).get(op, {}).values()
        ]
        if times:  # at least a decade and a half, so that noise on a flat line looks flat
            ax.set_ylim(min(times) / 2, max(times) * 3)
        ax.set_title(TITLES[op])
        ax.set_xlabel("memories in the store")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_ylabel("µs per call (client side, median over rounds)")
    axes[0].legend(loc="center right")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
