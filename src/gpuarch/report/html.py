"""One self-contained HTML report: styles inline, charts as inline SVG, no scripts, nothing
fetched. It renders typed results (evolution rows, the feature matrix, advice, a roofline
summary) and computes nothing itself."""

from __future__ import annotations

import functools
import html
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuarch.catalog.evolution import EvolutionRow, Metric
from gpuarch.catalog.queries import FeatureMatrix
from gpuarch.errors import GpuarchError
from gpuarch.estimate.activation_offload import OFFLOAD_TAG_KEY
from gpuarch.files import check_output_path, write_whole_text
from gpuarch.report.advise_text import inference_empty, training_empty
from gpuarch.report.text import fmt
from gpuarch.units import from_si
from gpuarch.validation.bands import band_sentence

__all__ = ["ReportInputs", "check_report_path", "inline_svg", "render_report", "write_report"]

_STYLE = """
pre { background: #f6f6f8; padding: 0.6rem; overflow: auto; font-size: 0.8rem; }
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px;
       color: #1d1d1f; line-height: 1.45; padding: 0 1rem; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.8rem 0; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.5rem; text-align: right; }
th { background: #f4f4f6; } td.l, th.l { text-align: left; }
td.yes { background: #d9f2dc; text-align: center; } td.no { color: #bbb; text-align: center; }
.note { color: #555; font-size: 0.85rem; } figure { margin: 1rem 0; }
figure svg { max-width: 100%; height: auto; }
"""


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report shows, computed by the library beforehand."""

    title: str
    generated: str  # date, and the gpuarch version
    evolution_rows: Sequence[EvolutionRow]
    evolution_metrics: Sequence[Metric]
    features: FeatureMatrix
    training: Any  # advise.TrainingAdvice
    serving: Any  # advise.infer.InferenceAdvice
    roofline: dict[str, Any]  # perf.roofline.roofline_summary of the training pick
    ops: Any = None  # validation.ops.OpSummary: operators timed on a real GPU
    # validation.stats.ErrorSummary of the shipped points, by "training" and "serving"
    accuracy: dict[str, Any] = field(default_factory=dict)
    # report.launch.Launch of each pick, by "training" and "serving" (absent: none)
    launches: dict[str, Any] = field(default_factory=dict)


def inline_svg(draw: Callable[[Path], None]) -> str:
    """A chart drawn by one of report.plot's functions, as inline SVG markup."""
    with tempfile.TemporaryDirectory(prefix="gpuarch-report-") as tmp:
        path = Path(tmp) / "chart.svg"
        draw(path)
        text = path.read_text(encoding="utf-8")
    start = text.find("<svg")
    if start < 0:
        raise GpuarchError("report: a chart did not render as SVG")
    return f"<figure>{text[start:]}</figure>"


def _e(value: object) -> str:
    return html.escape(str(value))


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]], left: int = 1) -> str:
    head = "".join(f'<th class="l">{_e(h)}</th>' if i < left else f"<th>{_e(h)}</th>"
                   for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(
        f'<td class="l">{_e(c)}</td>' if i < left else f"<td>{_e(c)}</td>"
        for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:,.0f}" if x >= 100 else f"${x:,.2f}"


def _evolution(inputs: ReportInputs) -> str:
    from gpuarch.report.plot import plot_evolution

    def cell(r: EvolutionRow, m: Metric) -> str:
        value = r.values.get(m)
        return fmt(None if value is None else from_si(value, m.unit))

    rows = [[r.architecture, r.flagship, r.flagship_launch,
             *(cell(r, m) for m in inputs.evolution_metrics)]
            for r in inputs.evolution_rows]
    headers = ["Architecture", "Flagship", "Launch",
               *(f"{m.label} ({m.unit.label})" if m.unit.label else m.label
                 for m in inputs.evolution_metrics)]
    return ("<h2>How the architectures grew</h2>"
            + inline_svg(lambda p: plot_evolution(inputs.evolution_rows,
                                                  inputs.evolution_metrics, p))
            + _table(headers, rows, left=3))


def _features(m: FeatureMatrix) -> str:
    head = "".join(f"<th>{_e(a)}</th>" for a in m.architectures)
    body = "".join(
        f'<tr><td class="l">{_e(name)}</td>' + "".join(
            f'<td class="yes" title="{_e(cell)}">&#10003;</td>' if cell is not None
            else '<td class="no">&middot;</td>' for cell in cells) + "</tr>"
        for name, cells in zip(m.feature_names, m.cells, strict=True))
    return ('<h2>Which architecture brought what</h2><table><thead><tr><th class="l">Feature'
            f"</th>{head}</tr></thead><tbody>{body}</tbody></table>"
            '<p class="note">Hover a tick for what the feature changed on that architecture.'
            "</p>")


def _launch(launch: Any) -> str:
    """A pick's command (``report.launch.Launch``): the script, its files, its notes."""
    if launch is None:
        return ""
    files = "".join(f"<p class=\"note\">{_e(name)}:</p><pre>{_e(text)}</pre>"
                    for name, text in launch.files)
    notes = "".join(f"<li>{_e(n)}</li>" for n in launch.notes)
    return (f"<h3>Run it: {_e(launch.name)}</h3><pre>{_e(chr(10).join(launch.lines()))}</pre>"
            f"{files}<p class=\"note\">Flags as in {_e(launch.checked)}.</p>"
            + (f"<ul class=\"note\">{notes}</ul>" if notes else ""))


def _training(advice: Any, launch: Any = None) -> str:
    from gpuarch.report.plot import plot_pareto

    out = [f"<h2>Training {_e(advice.model)} on {advice.tokens:.3g} tokens</h2>"]
    if not advice.top:
        return out[0] + "<p>" + "<br>".join(
            _e(line) for line in training_empty(advice).splitlines()) + "</p>"
    best = advice.top[0]
    out.append(f"<p><b>Pick:</b> {best.gpus} x {_e(best.gpu_name)}, TP{best.tp} PP{best.pp}"
               f" CP{best.cp} EP{best.ep}, {_e(best.precision)}: {best.time_days:.3g} days, "
               f"{_usd(best.cost_usd)}, {fmt(best.energy_mwh)} MWh. "
               f"<i>{_e(best.bottleneck)}-bound:</i> {_e(best.reason)}</p>")
    out.append(_launch(launch))
    rows = [[o.gpu_name, o.gpus, f"TP{o.tp} PP{o.pp} CP{o.cp} EP{o.ep}", o.micro_batch,
             o.zero_label, o.recompute_label, o.precision,
             fmt(o.time_days), _usd(o.cost_usd),
             fmt(o.energy_mwh), f"{o.mfu:.0%}", fmt(o.memory_per_gpu_gib), o.bottleneck]
            for o in advice.per_gpu]
    out.append("<h3>Best plan on each GPU</h3>" + _table(
        ["GPU", "GPUs", "layout", "micro-batch", "ZeRO", "recompute", "precision", "days",
         "cost", "MWh", "MFU", "GiB/GPU", "bound"], rows))
    if any(o.offload_modules for o in advice.per_gpu):
        out.append(f"<p>recompute {_e(OFFLOAD_TAG_KEY)}</p>")
    if any(o.cost_usd is not None for o in advice.pareto):
        out.append("<h3>Time, cost and energy: the Pareto front</h3>"
                   + inline_svg(lambda p: plot_pareto(advice, p)))
    return "".join(out)


def _serving(advice: Any, launch: Any = None) -> str:
    from gpuarch.report.plot import plot_pareto

    out = [f"<h2>Serving {_e(advice.model)} at {advice.input_len} in / {advice.output_len} "
           "out tokens</h2>"]
    if not advice.top:
        return out[0] + "<p>" + "<br>".join(
            _e(line) for line in inference_empty(advice).splitlines()) + "</p>"
    best = advice.top[0]
    replicas = f"{best.replicas} replica{'s' if best.replicas > 1 else ''}"
    out.append(f"<p><b>Pick:</b> {best.gpus} x {_e(best.gpu_name)} ({replicas} "
               f"of TP{best.tp} PP{best.pp}{_ep(best)}), {_e(best.formats)}, "
               f"batch {best.batch}: TTFT {best.ttft_ms:.3g} ms, TPOT "
               f"{best.tpot_ms:.3g} ms, {_usd(best.usd_per_million_tokens)} per million "
               f"output tokens. {_e(best.reason)}</p>")
    out.append(_launch(launch))
    rows = [[o.gpu_name, o.gpus, f"TP{o.tp} PP{o.pp}{_ep(o)}", o.batch,
             o.formats, fmt(o.ttft_ms), fmt(o.tpot_ms),
             fmt(o.output_tokens_per_s), _usd(o.usd_per_hour), _usd(o.usd_per_million_tokens),
             fmt(o.kwh_per_million_tokens), o.bottleneck.get("decode", "-")]
            for o in advice.per_gpu]
    out.append("<h3>Best deployment on each GPU</h3>" + _table(
        ["GPU", "GPUs", "split", "batch", "formats", "TTFT ms", "TPOT ms", "out tok/s",
         "$/hour", "$/1M tok", "kWh/1M", "decode"], rows))
    if any(o.usd_per_million_tokens is not None for o in advice.pareto):
        out.append("<h3>Latency, cost and energy: the Pareto front</h3>"
                   + inline_svg(lambda p: plot_pareto(advice, p)))
    return "".join(out)


def _roofline(result: dict[str, Any]) -> str:
    from gpuarch.report.plot import plot_roofline

    rows = [[o["op"], fmt(o["arithmetic_intensity"]), fmt(o["achieved_tflops"]), o["bound"]]
            for o in result["ops"]]
    return (f"<h2>Where the work sits on {_e(result['gpu'])}'s roofline</h2>"
            f"<p>{result['peak_tflops']:,.0f} TFLOPS {_e(result['precision'])} against "
            f"{result['memory_bandwidth_gb_s']:,.0f} GB/s: ridge point "
            f"{result['ridge_point_flop_per_byte']:.0f} FLOP/byte. Training and prefill "
            "GEMMs sit right of it (compute-bound); decode sits left (memory-bound).</p>"
            + inline_svg(lambda p: plot_roofline(result, p))
            + _table(["operator", "FLOP/byte", "TFLOP/s", "bound"], rows))


def _bands(inputs: ReportInputs) -> str:
    """Each answer's error bands: how far the model has been from published figures of the
    same kind on each architecture compared."""
    items = [f"<li>{_e(task)}, {_e(band_sentence(arch, band))}</li>"
             for task, advice in (("training", inputs.training), ("serving", inputs.serving))
             for arch, band in advice.assumptions.get("error_bands", {}).items()]
    items += [f"<li>{_e(task)}, a measured run near the best plan: {n['error']:+.0%} "
              f"{_e(n['summary'])}</li>"
              for task, advice in (("training", inputs.training), ("serving", inputs.serving))
              for n in advice.assumptions.get("nearest_published", [])]
    if not items:
        return ""
    return ("<p class=\"note\">Error bands (gpuarch validate bands): the figures above are "
            "the model's own, unadjusted; on published measurements of the same kind its "
            "error was:</p><ul class=\"note\">" + "".join(items) + "</ul>")


def _ops(summary: Any) -> str:
    """The parts checked on a real GPU: operators timed there beside the model's times."""
    if summary is None:
        return ""
    rows = [[kind, int(v["n"]), f"{v['mean_abs_error']:.1%}", f"{v['median_ratio']:.2f}",
             f"{v['min_ratio']:.2f}-{v['max_ratio']:.2f}"]
            for kind, v in summary.by_kind.items()]
    gpu = summary.header.get("gpu") or summary.product
    day = str(summary.header.get("created", ""))[:10]
    return ('<p class="note">The parts, checked on a real GPU (gpuarch validate ops): '
            f"single operators timed on an {_e(gpu)} on {_e(day)} beside the model's "
            "per-operator times. Model/measured above 1: the model is slower. Attention and "
            "training's grouped expert GEMMs are priced at effective efficiencies fitted to "
            "whole runs, slower than the kernels alone.</p>"
            + _table(["operators", "n", "mean |error|", "median model/measured", "range"],
                     rows))


def _accuracy(accuracy: dict[str, Any]) -> str:
    """How far the models are from every published measurement shipped: a line and a strip
    chart of the signed errors (``report.plot.plot_errors``) for training and serving."""
    from gpuarch.report.plot import plot_errors

    parts = []
    for task, what, command in (("training", "training points", "validate training"),
                                ("serving", "serving figures", "validate inference")):
        summary = accuracy.get(task)
        if summary is None:
            continue
        parts.append(
            f"<p class=\"note\">{_e(task.capitalize())} (gpuarch {command}): "
            f"{len(summary.rows):,} published {what}, mean |error| "
            f"{summary.mean_abs_error:.1%}, median {summary.median_abs_error:.1%}, "
            f"{summary.beyond} beyond ±{summary.bound:.0%}. Each figure's error, by GPU "
            "(red: beyond the bound):</p>"
            + inline_svg(functools.partial(plot_errors, summary, what=what)))
    return "<h2>Accuracy against published measurements</h2>" + "".join(parts) \
        if parts else ""


def _power(power: dict[str, Any] | None) -> str:
    """A sentence on how far the power model is from measured power (gpuarch validate
    power), or nothing without it."""
    if not power:
        return ""
    serving, training = power["serving"], power["training"]
    return (f" Against measured power (gpuarch validate power): {serving['compared']} "
            f"serving configurations' GPU power, mean |error| {serving['mean_abs_error']:.0%} "
            f"(mean {serving['mean_error']:+.0%}); {training['compared']} metered training "
            f"runs' node power, mean |error| {training['mean_abs_error']:.0%}.")


def render_report(inputs: ReportInputs) -> str:
    """The whole page."""
    assumptions = inputs.training.assumptions
    prices = "; ".join(f"{k}: {_usd(v['usd_per_gpu_hour'])}/GPU-hour ({v['from']})"
                       for k, v in sorted(assumptions.get("prices", {}).items()))
    parts = [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>{_e(inputs.title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(inputs.title)}</h1><p class=\"note\">{_e(inputs.generated)}. Every "
        "hardware number comes from the gpuarch catalog, which cites its source; estimates "
        "come from gpuarch's validated models (their error bands are under Assumptions).</p>",
        _training(inputs.training, inputs.launches.get("training")),
        _serving(inputs.serving, inputs.launches.get("serving")),
        _roofline(inputs.roofline),
        _evolution(inputs),
        _features(inputs.features),
        _accuracy(inputs.accuracy),
        "<h2>Assumptions</h2>",
        _bands(inputs),
        _ops(inputs.ops),
        f"<p class=\"note\">Energy: GPU board power at the modelled utilisation, plus "
        f"{assumptions.get('node_overhead', 0):.0%} node overhead, times PUE "
        f"{assumptions.get('pue', '')}.{_power(inputs.accuracy.get('power'))} "
        f"Prices: {_e(prices)}.</p>",
        "</body></html>",
    ]
    return "\n".join(parts)


def check_report_path(path: Path) -> Path:
    """The folder the page goes to, or a usage error naming --out (checked before any work)."""
    return check_output_path(path, "--out", (".html", ".htm"))


def write_report(inputs: ReportInputs, path: Path) -> None:
    """Write the page whole or not at all."""
    check_report_path(path)
    write_whole_text(path, render_report(inputs))


def _ep(o: Any) -> str:
    """' EP<n>' for a serving unit with expert parallelism, else nothing."""
    return f" EP{o.ep}" if getattr(o, "ep", 1) > 1 else ""
