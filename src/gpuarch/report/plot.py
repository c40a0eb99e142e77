"""Plots (matplotlib, imported only when a plot is asked for)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gpuarch.catalog.evolution import EvolutionRow, Metric
from gpuarch.errors import GpuarchError

__all__ = ["PLOT_SUFFIXES", "plot_evolution"]

PLOT_SUFFIXES = (".png", ".svg")


def plot_evolution(rows: Sequence[EvolutionRow], metrics: Sequence[Metric], path: Path) -> None:
    """Growth of each metric since the first generation (log scale), and the ridge point.

    Each metric is drawn as a step line of the best value reached so far (the frontier), with
    each generation's flagship as a marker: lines that climb apart show the gap between
    compute and memory bandwidth, steps show the jumps at Volta, Ampere, Hopper and
    Blackwell. The file is written whole or not at all.
    """
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise GpuarchError(f"--plot: {str(path)!r} must end in .png or .svg")
    if not path.resolve().parent.is_dir():
        raise GpuarchError(f"--plot: folder {str(path.parent)!r} does not exist")
    try:
        import matplotlib
    except ImportError:
        raise GpuarchError(
            "--plot needs matplotlib: pip install 'gpuarch[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(rows, key=lambda r: r.debut)
    xs = [_fractional_year(r.debut) for r in rows]
    fig, (ax_growth, ax_ridge) = plt.subplots(
        2, 1, figsize=(10, 9), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    growth = [m for m in metrics if m is not Metric.RIDGE]
    for metric in growth:
        points = [(x, r.values.get(metric)) for x, r in zip(xs, rows, strict=True)]
        known = [(x, y) for x, y in points if y]
        if len(known) < 2:
            continue
        base = known[0][1]
        frontier, best = [], 0.0
        for _, y in known:
            best = max(best, y)
            frontier.append(best / base)
        line = ax_growth.step([x for x, _ in known], frontier, where="post",
                              label=f"{metric.label} (x first)")
        ax_growth.plot([x for x, _ in known], [y / base for _, y in known], linestyle="none",
                       marker="o", fillstyle="none", color=line[0].get_color())
    ax_growth.set_yscale("log")
    ax_growth.set_ylabel("growth since the first generation shown (x)")
    ax_growth.grid(True, which="both", alpha=0.3)
    ax_growth.legend(loc="upper left", fontsize=8)
    ax_growth.set_title("NVIDIA GPUs by generation: best so far (line), each generation's "
                        "flagship (circles)", fontsize=10)

    ridge = [(x, r.values.get(Metric.RIDGE), r.architecture) for x, r in zip(xs, rows,
                                                                             strict=True)]
    ridge_known = [(x, y, a) for x, y, a in ridge if y]
    if ridge_known:
        ax_ridge.plot([x for x, _, _ in ridge_known], [y for _, y, _ in ridge_known],
                      marker="s", color="tab:red")
        for x, y, arch in ridge_known:
            ax_ridge.annotate(arch, (x, y), textcoords="offset points", xytext=(4, 4),
                              fontsize=8)
    ax_ridge.set_yscale("log")
    ax_ridge.set_ylabel("ridge point (FLOP per byte)")
    ax_ridge.set_xlabel("launch of the generation's first product")
    ax_ridge.grid(True, which="both", alpha=0.3)
    for x in xs:
        ax_growth.axvline(x, color="grey", alpha=0.15)
    fig.tight_layout()

    path = path.resolve()
    fd, tmp = tempfile.mkstemp(prefix=".gpuarch-", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)


def _fractional_year(date: str) -> float:
    """``"2020-05-14"`` -> 2020.37 (month resolution is enough for a plot)."""
    parts = date.split("-")
    month = int(parts[1]) if len(parts) > 1 else 1
    return int(parts[0]) + (month - 1) / 12
