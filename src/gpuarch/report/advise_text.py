"""Terminal text for the advisor: the ranked options with their reasons, the Pareto front,
and what was assumed (prices with their sources, node overhead, PUE)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gpuarch.estimate.activation_offload import OFFLOAD_TAG_KEY
from gpuarch.report.estimate_text import moe_kernels_named
from gpuarch.report.text import fmt, table
from gpuarch.units import Unit, from_si
from gpuarch.validation.bands import band_sentence

__all__ = ["inference_empty", "render_inference_advice", "render_training_advice",
           "training_empty"]


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
    return [i, o.gpu_name, str(o.gpus), _layout(o), str(o.micro_batch),
            o.zero_label,
            o.recompute_label, ("SP" if o.sequence_parallel else "")
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
    for arch, band in advice.assumptions.get("error_bands", {}).items():
        lines.append(f"error band, {band_sentence(arch, band)}")
    near = advice.assumptions.get("nearest_published", [])
    if near:
        lines.append("measured runs nearest the best plan, and the model's error on each: "
                     + "; ".join(f"{n['error']:+.0%} {n['summary']}" for n in near))
    kernels = advice.assumptions.get("moe_kernels")
    if kernels:
        name, others = moe_kernels_named(kernels)
        floor = {k: fmt(from_si(v, Unit.US))
                 for k, v in advice.assumptions["moe_block_floor_s"].items()}
        lines.append(f"MoE kernels: {name}, {floor['before_blackwell']} us "
                     "fixed per expert layer and pass"
                     + (f", {floor['blackwell']} us on Blackwell"
                        if floor["blackwell"] != floor["before_blackwell"] else "")
                     + f"; --moe-kernels {others} for theirs")
    a = advice.assumptions
    options = [f"routing imbalance {a['moe_imbalance']:g}x"
               if (a.get("moe_imbalance") or 1) > 1 else "",
               f"{a['redundant_experts']} redundant experts"
               if a.get("redundant_experts") else "",
               "two-batch overlap" if a.get("two_batch_overlap") else ""]
    if any(options):
        lines.append("expert parallelism: " + ", ".join(o for o in options if o)
                     + " in every split with EP > 1")
    lines.append(f"energy: GPU board power at the modelled utilisation, + "
                 f"{advice.assumptions['node_overhead']:.0%} node overhead, x PUE "
                 f"{advice.assumptions['pue']}")
    lines.append(f"searched {advice.evaluated:,} configurations in {elapsed:.1f} s "
                 f"({advice.feasible:,} met every constraint)")
    return lines


def _render(advice: Any, elapsed: float, *, heading: str, empty: str, head: list[str],
            right: list[bool], row: Callable[[str, Any], list[str]],
            why: Callable[[Any], str], per_gpu: str, front: str,
            extra: Sequence[str] = ()) -> str:
    """The layout both answers share: ranked table, reasons, best per GPU, the front."""
    out = [heading]
    if not advice.top:
        return "\n".join([*out, empty, *_footer(advice, elapsed)])
    out += [table(head, [row(str(i), o) for i, o in enumerate(advice.top, 1)], right), "",
            "why:", *(f"  {i}. {why(o)}" for i, o in enumerate(advice.top, 1))]
    if len(advice.per_gpu) > 1:
        out += ["", per_gpu, table(head, [row("", o) for o in advice.per_gpu], right)]
    out += ["", f"{front} ({len(advice.pareto)} options):",
            table(head, [row("", o) for o in advice.pareto[:15]], right)]
    if len(advice.pareto) > 15:
        out.append(f"  ... {len(advice.pareto) - 15} more (--json lists all)")
    return "\n".join([*out, "", *extra, *_footer(advice, elapsed)])


_RULED_OUT = {"memory": "do not fit in the GPU's memory",
              "interruptions": "are interrupted faster than they recover from it "
                               "(write checkpoints faster: --checkpoint-write-gb-s)",
              "deadline": "miss the deadline (--deadline-days)",
              "budget": "exceed the budget (--budget-usd)",
              "power": "exceed the power limit (--max-power-kw)"}


def training_empty(advice: Any) -> str:
    """Why no training plan is left: how many configurations each constraint ruled out, how
    far the one closest to fitting in memory is from it when none fits, and otherwise the
    best time, cost and power of those that fit, against the constraint they missed."""
    lines = ["No configuration meets the constraints."]
    rejected = getattr(advice, "rejected", {}) or {}
    least = getattr(advice, "least_memory", {}) or {}
    best = getattr(advice, "best_fitting", {}) or {}
    nearest = {
        "deadline": f"; the fastest that fits takes {fmt(best['days'])} days"
        if "days" in best else "",
        "budget": f"; the cheapest that fits costs {_usd(best['usd'])}"
        if "usd" in best else "",
        "power": f"; the least power of those that fit is {fmt(best['power_kw'])} kW"
        if "power_kw" in best else ""}
    if least and least["needed_gib"] > least["available_gib"]:
        nearest["memory"] = (f"; the closest needs {fmt(least['needed_gib'])} GiB per GPU on "
                             f"{least['gpu']}, of its {fmt(least['available_gib'])} GiB: more "
                             "GPUs (--max-gpus), a GPU with more memory (--gpu), a shorter "
                             "--seq-len or lower precision (--precision)")
    if rejected and advice.evaluated:
        lines.append(f"Of the {advice.evaluated:,} searched:")
        lines += [f"  {count:,} {_RULED_OUT.get(name, name)}{nearest.get(name, '')}"
                  for name, count in rejected.items()]
    lines.append("Relax --budget-usd, --deadline-days, --max-power-kw or --max-gpus, or widen "
                 "--gpu.")
    return "\n".join(lines)


_MISSED = {"memory": "do not fit in the GPU's memory at any batch searched",
           "gpus": "need more GPUs than --max-gpus",
           "ttft": "miss the TTFT cap (--ttft-ms)",
           "tpot": "miss the TPOT cap (--tpot-ms)",
           "ttft_p99": "keep the steady state's caps but miss --ttft-p99-ms when replayed",
           "tpot_p99": "keep the steady state's caps but miss --tpot-p99-ms when replayed",
           "pipeline": "have pipeline stages, which the replay cannot check",
           "throughput": "deliver less than --min-throughput",
           "budget": "exceed the hourly budget (--budget-usd-per-hour)",
           "power": "exceed the power limit (--max-power-kw)"}


def inference_empty(advice: Any) -> str:
    """Why no deployment is left: how many aggregated deployments each constraint ruled out
    (the first each missed), and the lowest TTFT and TPOT of those whose batch fits beside
    the latency cap they missed."""
    lines = ["No deployment meets the constraints."]
    rejected = getattr(advice, "rejected", {}) or {}
    best = getattr(advice, "best_fitting", {}) or {}
    nearest = {"ttft": f"; the lowest TTFT of any that fits is {fmt(best['ttft_ms'])} ms"
               if "ttft_ms" in best else "",
               "tpot": f"; the lowest TPOT of any that fits is {fmt(best['tpot_ms'])} ms"
               if "tpot_ms" in best else "",
               "ttft_p99": f"; the lowest TTFT p99 replayed is {fmt(best['ttft_p99_ms'])} ms"
               if "ttft_p99_ms" in best else "",
               "tpot_p99": f"; the lowest TPOT p99 replayed is {fmt(best['tpot_p99_ms'])} ms"
               if "tpot_p99_ms" in best else ""}
    missed = dict(_MISSED)
    tail = (getattr(advice, "assumptions", {}) or {}).get("tail")
    if tail:
        # under percentile caps the steady state's mean is held to the lower cap too
        for name in ("ttft", "tpot"):
            missed[name] = (f"miss the {name.upper()} cap at the steady state's mean "
                            f"(--{name}-ms or --{name}-p99-ms, whichever is lower)")
    if rejected:
        lines.append(f"Of the {sum(rejected.values()):,} aggregated deployments evaluated, "
                     "by the first constraint each misses:")
        lines += [f"  {count:,} {missed.get(name, name)}{nearest.get(name, '')}"
                  for name, count in rejected.items()]
    if tail and tail["limit_reached"]:
        lines.append(f"The first {tail['replayed']:,} deployments in rank order were replayed "
                     "(the limit); none kept the percentile caps.")
    lines.append("Relax --ttft-ms, --tpot-ms, --ttft-p99-ms, --tpot-p99-ms, --min-throughput, "
                 "--budget-usd-per-hour, --max-power-kw or --max-gpus.")
    return "\n".join(lines)


def render_training_advice(advice: Any, elapsed: float = 0.0) -> str:
    """Top options by the objective, each with its reason; then the Pareto front."""
    return _render(
        advice, elapsed,
        heading=("LoRA fine-tuning (rank {}, {}) of ".format(
                    advice.assumptions["lora_rank"], ", ".join(advice.assumptions["lora_modules"]))
                 if advice.assumptions.get("lora_rank") else "Training ")
                + advice.model
                + (f" with {advice.assumptions['mtp_layers']} MTP block(s)"
                   if advice.assumptions.get("mtp_layers") else "")
                + (f", documents of {advice.assumptions['packed_doc_len']:,} tokens packed"
                   if advice.assumptions.get("packed_doc_len") else "")
                + (f", pipelines on {advice.assumptions['pp_schedule']}"
                   if advice.assumptions.get("pp_schedule", "1f1b") != "1f1b" else "")
                + (f", {advice.assumptions['optimizer_offload']:g} of the optimizer on the "
                   "CPU (ZeRO 1-3)" if advice.assumptions.get("optimizer_offload") else "")
                + (f", activations of {','.join(advice.assumptions['offload_modules'])} offloaded"
                   if advice.assumptions.get("offload_modules") else "")
                + f" on {advice.tokens:.3g} tokens, ranked by {advice.objective}",
        empty=training_empty(advice),
        head=_TRAIN_HEAD, right=_TRAIN_RIGHT, row=_train_row,
        why=lambda o: f"{o.bottleneck}-bound: {o.reason}",
        per_gpu=f"best plan on each GPU, by {advice.objective}:",
        front="Pareto front over time, cost and energy, fastest first; P marks members above",
        extra=["key: ZeRO 3+pf = ZeRO-3 with each layer's parameters gathered a layer ahead "
               "(Megatron-FSDP), 3+pf/N = that inside groups of N data-parallel ranks (a "
               "node's), the groups replicas of each other (HSDP); TP comm SP = sequence "
               "parallelism, +ov = TP communication overlapped with GEMMs; recompute "
               + OFFLOAD_TAG_KEY])


_INF_HEAD = ["#", "GPU", "GPUs", "replicas", "TP", "PP", "EP", "batch", "formats", "TTFT ms",
             "TPOT ms", "out tok/s", "$/hour", "$/1M tok", "kWh/1M", "decode", "P"]
_INF_RIGHT = [True, False, True, True, True, True, True, True, False, True, True, True, True,
              True, True, False, False]


def _inf_row(i: str, o: Any) -> list[str]:
    return [i, o.gpu_name, str(o.gpus), str(o.replicas), str(o.tp), str(o.pp), str(o.ep),
            str(o.batch),
            o.formats, fmt(o.ttft_ms), fmt(o.tpot_ms),
            fmt(o.output_tokens_per_s), _usd(o.usd_per_hour), _usd(o.usd_per_million_tokens),
            fmt(o.kwh_per_million_tokens), o.bottleneck.get("decode", "-"),
            "*" if o.pareto else ""]


def _disagg_row(i: str, o: Any) -> list[str]:
    """An inference row with the prefill pool after the replicas (decode TP/PP/EP/batch)."""
    row = _inf_row(i, o)
    return [*row[:4], o.prefill.label if o.prefill else "-", *row[4:]]


def render_inference_advice(advice: Any, elapsed: float = 0.0) -> str:
    """Top deployments by the objective with reasons; then the Pareto front."""
    label = {"cost": "cost per million output tokens", "time": "request latency",
             "energy": "energy per million output tokens"}[advice.objective]
    head, right, row = _INF_HEAD, _INF_RIGHT, _inf_row
    extra = [f"fleet: {advice.assumptions['fleet']}; batching: "
             f"{advice.assumptions['batching']}"]
    if advice.assumptions.get("disaggregated"):
        head = [*head[:4], "prefill", *head[4:]]
        right = [*right[:4], False, *right[4:]]
        row = _disagg_row
        extra.append("prefill: a disaggregated deployment's prefill pool (replicas x split); "
                     "replicas, TP, PP, EP and batch are then the decode pool's, GPUs count "
                     "both; '-' = aggregated. " + advice.assumptions["disaggregated"])
    return _render(
        advice, elapsed,
        heading=f"Serving {advice.model} at {advice.input_len} input"
                + (f" ({advice.assumptions['cached_prefix']:,} of them a cached prefix)"
                   if advice.assumptions.get("cached_prefix") else "")
                + f" / {advice.output_len} output tokens"
                + (f" (spread {advice.assumptions['output_len_cv']:g} sd / mean)"
                   if advice.assumptions.get("output_len_cv") else "")
                + f", ranked by {label}" + _percentile_caps(advice),
        empty=inference_empty(advice),
        head=head, right=right, row=row, why=lambda o: str(o.reason),
        per_gpu=f"best deployment on each GPU, by {label}:",
        front="Pareto front over latency, cost and energy, lowest latency first",
        extra=extra)


def _percentile_caps(advice: Any) -> str:
    """', kept where replays keep TTFT p99 <= 300 ms, TPOT p99 <= 30 ms' under percentile
    caps, else ''."""
    tail = advice.assumptions.get("tail")
    if not tail:
        return ""
    caps = [f"{name} p99 <= {fmt(tail[key])} ms" for name, key in
            (("TTFT", "ttft_p99_ms"), ("TPOT", "tpot_p99_ms")) if tail[key] is not None]
    return ", kept where replays keep " + " and ".join(caps)


def tail_summary(advice: Any) -> str:
    """Under percentile caps: how many deployments the ranking's walk replayed and what
    ruled the others out."""
    tail = advice.assumptions["tail"]
    rejected = advice.rejected
    parts = [f"{rejected[name]:,} {what}" for name, what in (
        ("ttft_p99", "missed the TTFT p99 cap"), ("tpot_p99", "missed the TPOT p99 cap"),
        ("pipeline", "had pipeline stages (not replayed)")) if rejected.get(name)]
    return (f"percentile caps: {tail['replayed']:,} deployments replayed in rank order (at "
            f"most {tail['replay_limit']:,}), {len(advice.top):,} kept"
            + (f"; {', '.join(parts)}" if parts else ""))


def simulated_lines(rows: Sequence[Any], traffic: str, percentile_caps: bool = False
                    ) -> list[str]:
    """``advise infer --simulate``: each top option's simulated TTFT and TPOT median and
    99th percentile (ms), '*' where a 99th percentile exceeds its cap, or why the option
    was not replayed (``advise.simulated.SimulatedOption``); under ``percentile_caps`` the
    replays that kept each option. ``traffic``: the replays' requests, described."""
    def cell(value: float | None, within: bool | None = None) -> str:
        if value is None:
            return "-"
        return f"{value:,.1f}" + ("*" if within is False else "")

    table_rows = []
    for r in rows:
        if r.skipped:
            table_rows.append([str(r.rank), r.deployment, "-", "-", "-", "-", "-", "-",
                               f"not replayed: {r.skipped}"])
            continue
        table_rows.append([str(r.rank), r.deployment, cell(r.ttft_p50_ms),
                           cell(r.ttft_p99_ms, r.ttft_p99_within_cap), cell(r.tpot_p50_ms),
                           cell(r.tpot_p99_ms, r.tpot_p99_within_cap),
                           f"{r.mean_batch:,.1f}",
                           "-" if r.attained is None else f"{r.attained:.1%}", ""])
    head = ["#", "deployment", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "batch",
            "within caps"]
    right = [True, False, True, True, True, True, True, True]
    if any(r.skipped for r in rows):
        head, right = [*head, ""], [*right, False]
    else:
        table_rows = [row[:-1] for row in table_rows]
    caps = ("--ttft-p99-ms/--tpot-p99-ms, each option kept because its 99th percentiles are "
            "within them" if percentile_caps else "'*' = a 99th percentile over its cap")
    return [f"the top options replayed under random arrivals ({traffic}; estimate.simulate): "
            f"TTFT and TPOT in ms; caps: {caps}; within caps: the share of requests that met "
            "every cap",
            table(head, table_rows, right=right)]
