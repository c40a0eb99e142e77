"""Plots (matplotlib, imported only when a plot is asked for)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuarch.catalog.evolution import EvolutionRow, Metric
from gpuarch.errors import GpuarchError
from gpuarch.files import check_output_path, write_whole

__all__ = ["PLOT_SUFFIXES", "check_plot_path", "plot_batch_sweep", "plot_errors",
           "plot_evolution", "plot_gpu_scaling", "plot_pareto", "plot_roofline"]

PLOT_SUFFIXES = (".png", ".svg")


def check_plot_path(path: Path) -> None:
    """A usage error naming --plot for a path a plot cannot be written to (checked before
    any long work)."""
    check_output_path(path, "--plot", PLOT_SUFFIXES)


def _pyplot(path: Path) -> Any:
    """matplotlib.pyplot, after checking the target path (errors name --plot)."""
    check_plot_path(path)
    try:
        import matplotlib
    except ImportError:
        raise GpuarchError(
            "--plot needs matplotlib: pip install 'gpuarch[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, plt: Any, path: Path) -> None:
    """Write the figure whole or not at all."""
    try:
        write_whole(path, lambda tmp: fig.savefig(tmp, dpi=120))
    finally:
        plt.close(fig)


def plot_evolution(rows: Sequence[EvolutionRow], metrics: Sequence[Metric], path: Path) -> None:
    """Growth of each metric since the first generation (log scale), and the ridge point.

    Each metric is drawn as a step line of the best value reached so far (the frontier), with
    each generation's flagship as a marker: lines that climb apart show the gap between
    compute and memory bandwidth, steps show the jumps at Volta, Ampere, Hopper and
    Blackwell. The file is written whole or not at all.
    """
    plt = _pyplot(path)
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
    _save(fig, plt, path)


def plot_roofline(result: dict[str, Any], path: Path) -> None:
    """The roofline (bandwidth slope, compute ceiling) with each operator placed on it."""
    plt = _pyplot(path)
    peak = result["peak_tflops"]
    bw_tb = result["memory_bandwidth_gb_s"] / 1000
    ridge = result["ridge_point_flop_per_byte"]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    xs = [0.1, ridge, max(ridge * 100, 1e4)]
    ax.plot(xs, [min(peak, x * bw_tb) for x in xs], color="black",
            label=f"roofline: {peak:,.0f} TFLOPS, {bw_tb * 1000:,.0f} GB/s")
    for op in result["ops"]:
        if op["arithmetic_intensity"]:
            ax.plot(op["arithmetic_intensity"], op["achieved_tflops"], marker="o",
                    linestyle="none", label=f"{op['op']} ({op['bound']}-bound)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of DRAM traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{result['gpu']}, {result['precision']}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, plt, path)


def plot_pareto(advice: Any, path: Path) -> None:
    """The advisor's Pareto front: time against cost, energy as colour, GPU as marker."""
    plt = _pyplot(path)
    training = hasattr(advice, "tokens")
    rows = [o for o in advice.pareto if (o.cost_usd if training else o.usd_per_million_tokens)
            is not None]
    if not rows:
        raise GpuarchError("--plot: no option with a price to plot (give --price)")
    xs = [o.time_days if training else o.request_latency_s for o in rows]
    ys = [o.cost_usd if training else o.usd_per_million_tokens for o in rows]
    cs = [(o.energy_mwh if training else o.kwh_per_million_tokens) or 0.0 for o in rows]
    markers = "osD^v<>phX*"
    gpus = sorted({o.gpu_name for o in rows})
    fig, ax = plt.subplots(figsize=(8, 5.5))
    lo, hi = min(cs), max(cs)
    for n, name in enumerate(gpus):
        idx = [i for i, o in enumerate(rows) if o.gpu_name == name]
        art = ax.scatter([xs[i] for i in idx], [ys[i] for i in idx], c=[cs[i] for i in idx],
                         vmin=lo, vmax=hi if hi > lo else lo + 1, cmap="viridis",
                         marker=markers[n % len(markers)], label=name, edgecolors="black",
                         linewidths=0.4)
    fig.colorbar(art, ax=ax, label="energy (MWh)" if training else "energy (kWh per 1M "
                 "output tokens)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training time (days)" if training else "request latency (s)")
    ax.set_ylabel("cost (USD)" if training else "USD per 1M output tokens")
    what = (f"training {advice.model}, {advice.tokens:.3g} tokens" if training else
            f"serving {advice.model}, {advice.input_len} in / {advice.output_len} out")
    ax.set_title(f"Pareto front: {what}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, plt, path)


def plot_batch_sweep(sweep: Any, path: Path) -> None:
    """A serving batch sweep (``estimate.sweep.BatchSweep``): output tokens/s per GPU
    against tokens/s per user, one point per batch labelled with the requests in flight,
    the frontier joined by a line, batches that do not fit hollow."""
    plt = _pyplot(path)
    first = sweep.points[0].estimate
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for p in sweep.points:
        e = p.estimate
        x, y = e.output_tokens_per_s_per_user, e.output_tokens_per_s / e.gpus
        ax.scatter([x], [y], marker="o", s=36, edgecolors="black", linewidths=0.6,
                   facecolors="#4c78a8" if e.fits_in_memory else "none", zorder=3)
        ax.annotate(f"{p.in_flight:,}", (x, y), textcoords="offset points", xytext=(5, 4),
                    fontsize=8)
    front = sorted(sweep.frontier, key=lambda p: p.estimate.output_tokens_per_s_per_user)
    if len(front) > 1:
        ax.plot([p.estimate.output_tokens_per_s_per_user for p in front],
                [p.estimate.output_tokens_per_s / p.estimate.gpus for p in front],
                color="#f58518", label="frontier", zorder=2)
        ax.legend(fontsize=8)
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(_plain_number)
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(plain)
    ax.tick_params(which="minor", labelsize=7)
    ax.set_xlabel("output tokens/s per user (1 / TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(f"{first.model} on {first.gpus} x {first.gpu}, {sweep.input_len:,} in / "
                 f"{sweep.output_len:,} out, {first.assumptions['batching']} batching\n"
                 "labels: requests in flight; hollow: does not fit", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    _save(fig, plt, path)


def plot_errors(summary: Any, path: Path, what: str) -> None:
    """A validation's signed errors (``validation.stats.ErrorSummary``'s rows: the model over
    the measurement, minus 1, as the table prints and the bound counts them) as a strip per
    GPU: the band of the issue's bound shaded, a figure beyond it drawn red and, past twice
    the bound, as a triangle on the plot's edge; squares are durations (TTFT, TPOT,
    latency: + is the model slower), circles rates (+ is the model faster); hollow points
    were added after the fit they test (out of sample). ``what`` names the figures."""
    plt = _pyplot(path)
    import math

    from gpuarch.validation.stats import DURATION_METRICS

    rows = summary.rows
    gpus = sorted({r.gpu for r in rows}, key=lambda g: (-sum(r.gpu == g for r in rows), g))
    bound = summary.bound * 100
    edge = 2 * bound
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(gpus) + 2.5), 4.8))
    ax.axhspan(-bound, bound, color="#54a24b", alpha=0.12, zorder=0)
    ax.axhline(0, color="black", linewidth=0.8, zorder=1)
    # points grouped by how they are drawn (one scatter a group keeps an SVG small)
    groups: dict[tuple[str, str, bool], tuple[list[float], list[float]]] = {}
    for i, gpu in enumerate(gpus):
        for j, r in enumerate(r for r in rows if r.gpu == gpu):
            error = r.error * 100
            shown = max(-edge, min(edge, error)) if math.isfinite(error) else edge
            marker = "^" if shown != error else \
                "s" if getattr(r, "metric", "") in DURATION_METRICS else "o"
            key = (marker, "#e45756" if abs(error) > bound else "#4c78a8",
                   bool(getattr(r, "out_of_sample", False)))
            xs, ys = groups.setdefault(key, ([], []))
            xs.append(i + ((j * 0.618) % 1 - 0.5) * 0.6)  # spread evenly, not at random
            ys.append(shown)
    for (marker, colour, late), (xs, ys) in groups.items():
        ax.scatter(xs, ys, s=16, zorder=2, edgecolors=colour, linewidths=0.8,
                   facecolors="none" if late else colour, marker=marker)
    durations = any(marker == "s" for marker, _, _ in groups)
    ax.set_xticks(range(len(gpus)))
    ax.set_xticklabels([f"{g}\n({sum(r.gpu == g for r in rows)})" for g in gpus],
                       fontsize=7, rotation=30, ha="right")
    ax.set_xlim(-0.7, len(gpus) - 0.3)
    ax.set_ylim(-edge * 1.08, edge * 1.08)
    ax.set_ylabel("model over measured, minus 1 (%)")
    ax.grid(True, axis="y", alpha=0.3)
    kinds = "; squares: durations, + slower" if durations else ""
    ax.set_title(f"{len(rows)} {what}: mean |error| {summary.mean_abs_error:.1%}, "
                 f"{summary.beyond} beyond ±{bound:.0f}% (red; past ±{edge:.0f}% at the "
                 f"edge); circles: rates, + faster{kinds}; hollow: out of sample",
                 fontsize=8)
    fig.tight_layout()
    _save(fig, plt, path)


def plot_load(rows: Sequence[Any], path: Path) -> None:
    """Serving runs under load beside the simulation (``validation.serving_load``'s rows at
    each run's own rate): a panel for each of TTFT, TPOT and the whole request, seconds
    against the rate, the published figure filled and the simulated one hollow, a colour a
    statistic; where every run is of one GPU and count (a sweep of one deployment), each
    statistic's points joined in rate order."""
    plt = _pyplot(path)
    from matplotlib.ticker import FuncFormatter

    from gpuarch.validation.serving_load import METRICS

    rows = [r for r in rows if r.load == "scheduled"]
    families = [f for f in ("ttft_s", "tpot_s", "latency_s")
                if any(METRICS[r.metric][0] == f for r in rows)]
    colours = {"mean": "#4c78a8", "p50": "#54a24b", "p90": "#f58518", "p99": "#e45756"}
    one_deployment = len({(r.gpu, r.gpus) for r in rows}) == 1
    fig, axes = plt.subplots(1, len(families), figsize=(4.2 * len(families), 4.6),
                             squeeze=False)
    plain = FuncFormatter(_plain_number)
    for ax, family in zip(axes[0], families, strict=True):
        for stat, colour in colours.items():
            mine = sorted((r for r in rows if METRICS[r.metric] == (family, stat)),
                          key=lambda r: r.rate_per_s)
            if not mine:
                continue
            xs = [r.rate_per_s for r in mine]
            style = "-" if one_deployment and len(mine) > 1 else "none"
            ax.plot(xs, [r.published for r in mine], marker="o", linestyle=style,
                    color=colour, label=f"{stat} measured")
            ax.plot(xs, [r.predicted for r in mine], marker="s", linestyle=style.replace(
                "-", "--"), color=colour, markerfacecolor="none", label=f"{stat} simulated")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.tick_params(which="minor", labelsize=7)
        ax.set_xlabel("requests/s")
        ax.set_ylabel("seconds")
        ax.set_title({"ttft_s": "time to first token", "tpot_s": "time per output token",
                      "latency_s": "request latency"}[family], fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{len({r.id for r in rows})} run(s) under load: measured (filled) beside "
                 "the serving simulation (hollow)", fontsize=10)
    fig.tight_layout()
    _save(fig, plt, path)


def plot_gpu_scaling(scaling: Any, path: Path) -> None:
    """A training scaling table (``estimate.scaling.GpuScaling``): tokens/s against GPUs
    (log-log), the ideal line through the smallest count that ran, each point labelled with
    its scaling efficiency; counts that do not fit hollow, counts that cannot run left out."""
    plt = _pyplot(path)
    from matplotlib.ticker import FuncFormatter

    ran = [p for p in scaling.points if p.estimate is not None]
    base = scaling.base_point
    fig, ax = plt.subplots(figsize=(8, 5.5))
    xs = [p.gpus for p in ran]
    ys = [p.estimate.tokens_per_s for p in ran]
    ideal = [base.estimate.tokens_per_s * n / base.gpus for n in xs]
    ax.plot(xs, ideal, linestyle="--", color="#999999", label="ideal (every GPU adds its share)")
    ax.plot(xs, ys, color="#4c78a8", zorder=2)
    for p, x, y in zip(ran, xs, ys, strict=True):
        ax.scatter([x], [y], s=36, edgecolors="black", linewidths=0.6, zorder=3,
                   facecolors="#4c78a8" if p.estimate.fits_in_memory else "none")
        ax.annotate(f"{scaling.efficiency(p):.0%}", (x, y), textcoords="offset points",
                    xytext=(5, -12), fontsize=8)
    plain = FuncFormatter(_plain_number)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(plain)
    ax.yaxis.set_major_formatter(plain)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("tokens/s")
    est = base.estimate
    ax.set_title(f"{est.model} on {est.gpu}, global batch {scaling.global_batch:,} sequences\n"
                 "labels: scaling efficiency; hollow: does not fit", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, plt, path)


def _plain_number(value: float, _position: object = None) -> str:
    """A log axis's tick as a plain number: 1,000,000 rather than 1e+06."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


def _fractional_year(date: str) -> float:
    """``"2020-05-14"`` -> 2020.37 (month resolution is enough for a plot)."""
    parts = date.split("-")
    month = int(parts[1]) if len(parts) > 1 else 1
    return int(parts[0]) + (month - 1) / 12
