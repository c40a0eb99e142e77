"""Terminal text for the advisor: the ranked options with their reasons, the Pareto front,
and what was assumed (prices with their sources, node overhead, PUE)."""

from __future__ import annotations

from typing import Any

from gpuarch.report.text import fmt, table

__all__ = ["render_inference_advice", "render_training_advice"]


def _usd(x: float | None) -> str:
    if x is None:
        return "-"
    return f"${x:,.0f}" if x >= 100 else f"${x:,.2f}" if x >= 0.1 else f"${x:.3f}"


def _layout(o: Any) -> str:
    parts = [f"TP{o.tp}", f"PP{o.pp}"]
    if o.vpp > 1:
        parts[-1] += f"x{o.vpp}"
    if o.cp > 1:
        parts.append(f"CP{o.cp}")
    if o.ep > 1:
        parts.append(f"EP{o.ep}")
    dp = o.gpus // (o.tp * o.pp * o.cp)
    parts.append(f"DP{dp}")
    return " ".join(parts)


def _train_row(i: str, o: Any) -> list[str]:
    return [i, o.gpu_name, str(o.gpus), _layout(o), str(o.micro_batch), str(o.zero),
            o.recompute, ("SP" if o.sequence_parallel else "")
            + ("+ov" if o.tp_comm_overlap else "") or "-", o.precision,
            fmt(o.time_days), _usd(o.cost_usd), fmt(o.energy_mwh), f"{o.mfu * 100:.0f}%",
            fmt(o.memory_per_gpu_gib), o.bottleneck or "-", "*" if o.pareto else ""]


_TRAIN_HEAD = ["#", "GPU", "GPUs", "layout", "mb", "ZeRO", "recompute", "TP comm", "prec",
               "days", "cost", "MWh", "MFU", "GiB/GPU", "bound", "P"]
_TRAIN_RIGHT = [True, False, True, False, True, True, False, False, False, True, True, True,
                True, True, False, False]


def _footer(advice: Any, elapsed: float) -> list[str]:
    lines = []
    if advice.skipped:
        reasons: dict[str, list[str]] = {}
        for key, why in advice.skipped:
            reasons.setdefault(why, []).append(key)
        for why, keys in reasons.items():
            lines.append(f"not searched, {why}: {', '.join(keys)}")
    prices = advice.assumptions.get("prices", {})
    used = sorted({o.gpu for o in (*advice.top, *advice.pareto)})
    for key in used:
        if key in prices:
            p = prices[key]
            lines.append(f"price {key}: {_usd(p['usd_per_gpu_hour'])}/GPU-hour, {p['from']}")
    network = advice.assumptions.get("network", {})
    if network.get("assumed_for"):
        lines.append(f"network assumed at {network['assumed_gbit_s_per_gpu']:g} Gb/s per GPU "
                     f"for: {', '.join(network['assumed_for'])}")
    if network.get("one_node_only"):
        lines.append("one node only (the catalog gives no scale-out network; --network "
                     f"assumes one): {', '.join(network['one_node_only'])}")
    lines.append(f"energy: GPU board power at the modelled utilisation, + "
                 f"{advice.assumptions['node_overhead']:.0%} node overhead, x PUE "
                 f"{advice.assumptions['pue']}")
    lines.append(f"searched {advice.evaluated:,} configurations in {elapsed:.1f} s "
                 f"({advice.feasible:,} met every constraint)")
    return lines


def render_training_advice(advice: Any, elapsed: float = 0.0) -> str:
    """Top options by the objective, each with its reason; then the Pareto front."""
    out = [f"Training {advice.model} on {advice.tokens:.3g} tokens, ranked by "
           f"{advice.objective}"]
    if not advice.top:
        out.append("No configuration meets the constraints: relax --budget-usd, "
                   "--deadline-days, --max-power-kw or --max-gpus, or widen --gpu.")
        out += _footer(advice, elapsed)
        return "\n".join(out)
    out.append(table(_TRAIN_HEAD, [_train_row(str(i), o) for i, o in enumerate(advice.top, 1)],
                     _TRAIN_RIGHT))
    out.append("")
    out.append("why:")
    for i, o in enumerate(advice.top, 1):
        out.append(f"  {i}. {o.bottleneck}-bound: {o.reason}")
    if len(advice.per_gpu) > 1:
        out.append("")
        out.append(f"best plan on each GPU, by {advice.objective}:")
        out.append(table(_TRAIN_HEAD, [_train_row("", o) for o in advice.per_gpu],
                         _TRAIN_RIGHT))
    out.append("")
    out.append(f"Pareto front over time, cost and energy ({len(advice.pareto)} options, "
               "fastest first; P marks members above):")
    out.append(table(_TRAIN_HEAD, [_train_row("", o) for o in advice.pareto[:15]],
                     _TRAIN_RIGHT))
    if len(advice.pareto) > 15:
        out.append(f"  ... {len(advice.pareto) - 15} more (--json lists all)")
    out.append("")
    out += _footer(advice, elapsed)
    return "\n".join(out)


_INF_HEAD = ["#", "GPU", "GPUs", "replicas", "TP", "PP", "batch", "formats", "TTFT ms",
             "TPOT ms", "out tok/s", "$/hour", "$/1M tok", "kWh/1M", "decode", "P"]
_INF_RIGHT = [True, False, True, True, True, True, True, False, True, True, True, True, True,
              True, False, False]


def _inf_row(i: str, o: Any) -> list[str]:
    return [i, o.gpu_name, str(o.gpus), str(o.replicas), str(o.tp), str(o.pp), str(o.batch),
            f"W{o.weights}/KV {o.kv_cache}", fmt(o.ttft_ms), fmt(o.tpot_ms),
            fmt(o.output_tokens_per_s), _usd(o.usd_per_hour), _usd(o.usd_per_million_tokens),
            fmt(o.kwh_per_million_tokens), o.bottleneck.get("decode", "-"),
            "*" if o.pareto else ""]


def render_inference_advice(advice: Any, elapsed: float = 0.0) -> str:
    """Top deployments by the objective with reasons; then the Pareto front."""
    label = {"cost": "cost per million output tokens", "time": "request latency",
             "energy": "energy per million output tokens"}[advice.objective]
    out = [f"Serving {advice.model} at {advice.input_len} input / {advice.output_len} output "
           f"tokens, ranked by {label}"]
    if not advice.top:
        out.append("No deployment meets the constraints: relax --ttft-ms, --tpot-ms, "
                   "--min-throughput, --budget-usd-per-hour, --max-power-kw or --max-gpus.")
        out += _footer(advice, elapsed)
        return "\n".join(out)
    out.append(table(_INF_HEAD, [_inf_row(str(i), o) for i, o in enumerate(advice.top, 1)],
                     _INF_RIGHT))
    out.append("")
    out.append("why:")
    for i, o in enumerate(advice.top, 1):
        out.append(f"  {i}. {o.reason}")
    if len(advice.per_gpu) > 1:
        out.append("")
        out.append(f"best deployment on each GPU, by {label}:")
        out.append(table(_INF_HEAD, [_inf_row("", o) for o in advice.per_gpu], _INF_RIGHT))
    out.append("")
    out.append(f"Pareto front over latency, cost and energy ({len(advice.pareto)} options, "
               "lowest latency first):")
    out.append(table(_INF_HEAD, [_inf_row("", o) for o in advice.pareto[:15]], _INF_RIGHT))
    if len(advice.pareto) > 15:
        out.append(f"  ... {len(advice.pareto) - 15} more (--json lists all)")
    out.append("")
    out.append(f"fleet: {advice.assumptions['fleet']}; batching: "
               f"{advice.assumptions['batching']}")
    out += _footer(advice, elapsed)
    return "\n".join(out)
