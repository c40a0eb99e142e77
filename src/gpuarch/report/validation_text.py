"""The validation commands' text: the model against published runs, measured kernels,
collectives, power and load, with their summaries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuarch.report.estimate_text import MOE_KERNEL_SECTIONS, _pct, _shares, _signed
from gpuarch.report.text import fmt, fmt_seconds, table
from gpuarch.units import Unit, from_si
from gpuarch.validation.inference import InferenceSummary
from gpuarch.validation.moe_kernels import RELEASES
from gpuarch.validation.ops import OpSummary
from gpuarch.validation.stats import DURATION_METRICS
from gpuarch.validation.training import ValidationSummary

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


__all__ = [
    "render_attention_kernels",
    "render_collectives",
    "render_engine_all_reduce",
    "render_gdn_kernels",
    "render_gemm_kernels",
    "render_gemm_ridge",
    "render_inference_validation",
    "render_load",
    "render_moe_dispatch",
    "render_moe_kernels",
    "render_ops_validation",
    "render_power_validation",
    "render_validation",
]



def render_validation(s: ValidationSummary, explain: bool = False) -> str:
    rows = [[r.id + (" *" if r.out_of_sample else ""), r.gpu, str(r.gpus), r.layout,
             r.precision, fmt(r.published), fmt(r.predicted), f"{r.error:+.1%}",
             r.published_from] for r in s.rows]
    lines = [table(["Point", "GPU", "GPUs", "Layout", "Prec.", "Published tok/s/GPU",
                    "Predicted", "Error", "Published as"], rows,
                   right=[False, False, True, False, False, True, True, True, False]),
             "",
             f"{len(s.rows)} points: mean absolute error {_pct(s.mean_abs_error)}, "
             f"median {_pct(s.median_abs_error)}, max {_pct(s.max_abs_error)}; "
             f"{_pct(s.share_within)} of points within {s.bound:.0%}, "
             f"{s.beyond} beyond",
             _bias_line(s, "points"),
             *_by_lines(s, (("GPU", "gpu"), ("source", "source"), ("model", "model"),
                            ("framework", "framework"))),
             *_memory_lines(s.rows)]
    if explain:
        lines += ["", "where each predicted step goes:"]
        lines += [f"  {r.id}: {_train_explained(r.explain)}" for r in s.rows]
    return "\n".join(lines + _validation_footer(s, "points", "training"))


def render_ops_validation(s: OpSummary) -> str:
    """Operators timed on a GPU beside the model's times, and the error by kind."""
    h = s.header
    rows = [[r.kind, r.label, r.precision.value if r.precision else "-",
             fmt(from_si(r.measured_s, Unit.US)),
             fmt(from_si(m, Unit.US)) if m is not None else "-",
             f"{m / r.measured_s:.2f}" if m is not None else "-"] for r, m in s.rows]
    lines = [f"Operators timed on {h.get('gpu') or '?'} ({s.product}; torch "
             f"{h.get('torch', '?')}, {h.get('created', '?')}) beside the model's times",
             "",
             table(["Kind", "Operator", "Prec.", "Measured us", "Model us", "Model/measured"],
                   rows, right=[False, False, False, True, True, True]),
             "",
             table(["Kind", "n", "Mean |error|", "Median ratio", "Range"],
                   [[k, str(int(v["n"])), _pct(v["mean_abs_error"]),
                     f"{v['median_ratio']:.2f}",
                     f"{v['min_ratio']:.2f}-{v['max_ratio']:.2f}"]
                    for k, v in s.by_kind.items()],
                   right=[False, True, True, True, True]),
             "",
             "Model/measured above 1: the model is slower than the GPU; rows without a model",
             "time are measured only. What each kind says about the model:",
             "docs/performance-model.md, 'Per-operator check on an H200'."]
    return "\n".join(lines)


def _ratio_cells(doc: Mapping[str, Any], part: str, count: str) -> list[str]:
    """A summary group's count, median model/measured ratio and mean |ln ratio| for one
    part (``{part}_{count}``, ``{part}_median_ratio``, ``{part}_mean_abs_log_ratio``)."""
    median = doc[f"{part}_median_ratio"]
    spread = doc[f"{part}_mean_abs_log_ratio"]
    return [str(doc[f"{part}_{count}"]), "-" if median is None else f"{median:.2f}",
            "-" if spread is None else f"{spread:.2f}"]


def _banded_table(heads: list[str], lead: Sequence[Sequence[str]],
                  summary: Sequence[Mapping[str, Any]], bands: Sequence[tuple[str, str]],
                  count: str) -> str:
    """A measured-kernel summary as a table: each group's ``lead`` cells (under ``heads``),
    then for each band (name, count heading) its count, median model/measured ratio and
    mean |ln ratio| (``validation.measured.band_cells``)."""
    rows = [[*cells, *(cell for name, _ in bands for cell in _ratio_cells(d, name, count))]
            for cells, d in zip(lead, summary, strict=True)]
    heads = [*heads, *(h for _, label in bands for h in (label, "Model/measured", "Mean |ln|"))]
    return table(heads, rows, right=[False] * (len(lead[0]) - 1 if lead else 0)
                 + [True] * (1 + 3 * len(bands)))


def _measured_report(title: str, banded: str, overall: str, below_one: str,
                     source: str) -> str:
    """A measured-kernel comparison as printed: its title, its banded table, the overall
    mean |ln| line, what a ratio below 1 means and where the docs discuss it."""
    return "\n".join([title, "", banded, "", overall,
                      f"Model/measured below 1: {below_one}.", source])


def render_moe_kernels(summary: Sequence[Mapping[str, Any]], kernels: str = "trtllm") -> str:
    """An engine's measured MoE layers beside the serving model's module with its kernels, by
    GPU, shape and format (``validation.moe_kernels.summarize``)."""
    rows = [[d["device"], d["shape"], d["format"], *_ratio_cells(d, "large", "layers"),
             *_ratio_cells(d, "small", "layers")] for d in summary]
    engine = RELEASES[kernels]
    return "\n".join([
        f"{engine}'s MoE layers (NVIDIA aiconfigurator, balanced routing) beside the serving "
        "model's MoE module",
        "",
        table(["GPU", "Shape", "Format", "n >=2k tok", "Model/measured", "Mean |ln|",
               "n <2k tok", "Model/measured", "Mean |ln|"], rows,
              right=[False, False, False, True, True, True, True, True, True]),
        "",
        f"Model/measured below 1: the model prices the module faster than {engine} ran it.",
        "Source and what the comparison says: docs/performance-model.md, "
        f"'{MOE_KERNEL_SECTIONS[kernels]}'."])


def render_gemm_kernels(summary: Sequence[Mapping[str, Any]]) -> str:
    """TensorRT-LLM's measured GEMMs at short K beside the roofline's, relative to each
    curve's plateau, by GPU and format (``validation.gemm_kernels.summarize``)."""
    rows = [[d["device"], d["format"], str(d["gemms"]), f"{d['median_ratio']:.2f}",
             f"{d['mean_abs_log_ratio']:.2f}", f"{d['unscaled_median_ratio']:.2f}",
             f"{d['unscaled_mean_abs_log_ratio']:.2f}"] for d in summary]
    return "\n".join([
        "TensorRT-LLM 1.3.0rc20's dense GEMMs, M = N = 8,192, K = 256-2,048 (NVIDIA "
        "aiconfigurator), time per unit of K over the curve's plateau (K = 4,096-16,384), "
        "beside the roofline's",
        "",
        table(["GPU", "Format", "GEMMs", "Model/measured", "Mean |ln|",
               "Unscaled K: model/measured", "Mean |ln|"], rows,
              right=[False, False, True, True, True, True, True]),
        "",
        "Model/measured below 1: the roofline loses less to the short K than the measurement. "
        "Unscaled: the K at which efficiency halves one length for every format, not scaled "
        "by the format's peak over the 16-bit one.",
        "Source and what the comparison says: docs/performance-model.md, 'Short K in faster "
        "formats'."])


def render_load(rows: Sequence[Any], summary: Mapping[str, Any],
                prompts: Mapping[str, Any], title: str | None = None) -> str:
    """Serving runs under load beside the serving simulation (``validation.serving_load``):
    the shipped Server runs at the scheduled rate and at the measured load, the prompts as
    ``prompts`` says (``drawn_from``: dataset or mean, and the dataset's ``source``), or with
    ``title`` a user's file of runs at their own rates. A column for each figure any run
    gives."""
    from gpuarch.validation.serving_load import METRICS

    given = {r.metric for r in rows}
    metrics = [key for key in METRICS if key in given]
    heads = [key.removesuffix("_s").replace("_", " ").replace("ttft", "TTFT")
             .replace("tpot", "TPOT").replace("latency", "Latency") for key in metrics]
    if title is None:
        drawn = (f"each prompt drawn from the dataset's lengths ({prompts['source']})"
                 if prompts["drawn_from"] == "dataset" else
                 "every prompt the dataset's mean length (--prompts mean)")
        title = ("MLPerf Inference Llama 2 70B Server runs (LoadGen's logged means and 99th "
                 f"percentiles) beside the serving simulation of the same deployment, {drawn}")
    out = [title, ""]
    titles = {"scheduled": "At the scheduled rate",
              "measured": "At the measured load (the scheduled rate times the model's Offline "
                          "figure over the published one for the same system)"}
    for load, load_title in titles.items():
        by_run: dict[str, dict[str, Any]] = {}
        for r in rows:
            if r.load == load:
                by_run.setdefault(r.id, {"row": r})[r.metric] = r
        if not by_run:
            continue
        table_rows = []
        for run_id, cells in by_run.items():
            first = cells["row"]
            even = " even" if first.arrivals == "uniform" else ""
            line = [run_id, f"{first.gpus} x {first.gpu}", fmt(first.rate_per_s) + even,
                    f"{first.mean_batch:.0f}"]
            for key in metrics:
                c = cells.get(key)
                if c is None:
                    line.append("-")
                    continue
                shown = c.published if key.startswith("latency") \
                    else from_si(c.published, Unit.MS)
                line.append(f"{fmt(shown)} {c.error:+.0%}")
            table_rows.append(line)
        out += [load_title, table(["Run", "GPUs", "Rate/s", "Batch",
                                   *(f"{h} (pub., err.)" for h in heads)], table_rows,
                                  right=[False, False] + [True] * (2 + len(metrics))),
                ""]
        per = summary.get(load, {})
        parts = [f"{h}: median |error| {per[k]['median_abs_error']:.0%}, "
                 f"{per[k]['within_25_percent']} of {per[k]['figures']} within 25%"
                 for k, h in zip(metrics, heads, strict=True) if k in per]
        out += ["; ".join(parts) + ".", ""]
    out += ["Published figures in ms (latency in s); error: simulated over published, minus 1. "
            "Rate: requests a second arriving as a Poisson stream ('even': evenly spaced, "
            "the run's arrivals = \"uniform\"). "
            "Batch: the simulation's mean sequences a decode step. A run past the model's "
            "capacity queues without end: its first token is late by minutes.",
            "Source and what the comparison says: docs/performance-model.md, 'Serving under "
            "random arrivals'" + ("; your own runs: docs/your-measurements.md." if prompts.get(
                "drawn_from") == "file" else ".")]
    return "\n".join(out)


def render_gemm_ridge(summary: Sequence[Mapping[str, Any]]) -> str:
    """TensorRT-LLM's measured GEMMs across M beside the roofline's with its overlap
    exponent and with the plain maximum, by GPU and format, and every exponent's score
    (``validation.gemm_ridge.summarize``)."""
    def cell(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    groups = [d for d in summary if d["format"] != "all"]
    total = next(d for d in summary if d["device"] == "all")
    held = next((d for d in summary if d["device"] == "held out"), None)
    rows = [[d["device"], d["format"], str(d["gemms"]), str(d["ridge_gemms"]),
             f"{d['mean_abs_log_ratio']:.3f}", cell(d["ridge_median_ratio"]),
             f"{d['max_mean_abs_log_ratio']:.3f}", cell(d["max_ridge_median_ratio"])]
            for d in groups]
    p = f"{total['overlap']:g}"
    scores = ", ".join(f"{k} {v:.4f}" for k, v in total["by_overlap"].items())
    return "\n".join([
        "TensorRT-LLM 1.3.0rc20's dense GEMMs, N and K 4,096-16,384, M 1-32,768, 0.1 ms and "
        "longer (NVIDIA aiconfigurator), beside the roofline's, each over its GPU and "
        "format's median",
        "",
        table(["GPU", "Format", "GEMMs", "At ridge", f"Mean |ln|, p {p}",
               f"Ridge, p {p}", "Mean |ln|, max", "Ridge, max"], rows,
              right=[False, False, True, True, True, True, True, True]),
        "",
        f"Mean |ln| over the {total['gemms']} GEMMs of H100, H200, B200 and GB200, which set "
        f"p, by exponent: {scores}.",
        *([f"Held out, the {held['gemms']} GEMMs of A100 and L40S: " + ", ".join(
            f"{k} {v:.4f}" for k, v in held["by_overlap"].items()) + "."] if held else []),
        "p: the roofline's time is (compute^p + memory^p)^(1/p) (Efficiency.gemm_overlap); "
        "max: the larger of the two. Ridge: the median model/measured ratio (over the "
        "group's) of the GEMMs whose compute and memory times are within 2x; below 1 the "
        "roofline is faster there than at its level elsewhere.",
        "Source and what the comparison says: docs/performance-model.md, 'Near the ridge'."])


def render_gdn_kernels(summary: Sequence[Mapping[str, Any]]) -> str:
    """flash-linear-attention's measured Gated DeltaNet scan, forward and backward, beside
    the model's, by direction, GPU and regime (``validation.gated_delta_kernels.summarize``)."""
    rows = [[d["direction"], d["device"], d["regime"], str(d["passes"]),
             f"{d['measured_ns_per_token_head']:.2f}", f"{d['median_ratio']:.2f}",
             f"{d['mean_abs_log_ratio']:.3f}"] for d in summary]
    return "\n".join([
        "flash-linear-attention's chunked gated delta rule beside the model's scan, heads of "
        "128: forward as FlashInfer PRs 3481, 3866 and 4078 time it, backward as QwenLM "
        "FlashQLA's benchmark tables do",
        "",
        table(["Pass", "GPU", "Rows", "Count", "Measured ns/token/head", "Model/measured",
               "Mean |ln|"], rows, right=[False, False, False, True, True, True, True]),
        "",
        "wide: sequences x value heads of 32 or more (the forward's 64 heads, one to 16 "
        "sequences: gated_delta_scan and gated_delta_blackwell set on them; the backward's "
        "8,192 or 32,768 tokens in one to eight sequences: gated_delta_backward and "
        "gated_delta_backward_blackwell); narrow: fewer, bound by the chain of a sequence's "
        "chunks (gated_delta_chunk_step_s, walked twice by the backward). "
        "python scripts/fit_gated_delta.py refits them."])


def render_attention_kernels(summary: Sequence[Mapping[str, Any]]) -> str:
    """TensorRT-LLM's measured attention kernels beside the model's attention cores: MLA
    decode and context attention by GPU and format, and the narrow-head rate by GPU
    (``validation.attention_kernels.summarize``)."""
    def ratio_rows(check: str, count_key: str) -> list[list[str]]:
        return [[d["device"], d["format"], str(d[count_key]), f"{d['median_ratio']:.2f}",
                 f"{d['mean_abs_log_ratio']:.2f}"] for d in summary if d["check"] == check]

    right = [False, False, True, True, True]
    narrow = [[d["device"], str(d["passes"]), f"{d['measured_narrow_over_wide']:.2f}",
               f"{d['model_narrow_over_wide']:.2f}"]
              for d in summary if d["check"] == "head_dim"]
    return "\n".join([
        "TensorRT-LLM 1.3.0rc20's attention kernels (NVIDIA aiconfigurator) beside the "
        "model's attention cores",
        "",
        "MLA decode, DeepSeek-V3's 128 heads, 64-1,024 sequences of 4k-32k cached tokens",
        table(["GPU", "KV cache", "Steps", "Model/measured", "Mean |ln|"],
              ratio_rows("mla_decode", "steps"), right=right),
        "",
        "The same kernel in TensorRT-LLM 1.0.0rc6 (aiconfigurator 0.3.0), over an FP8 cache at "
        "its 16-bit rate, beside the model with --no-fp8-mla-decode",
        table(["GPU", "KV cache", "Steps", "Model/measured", "Mean |ln|"],
              ratio_rows("mla_decode_1.0", "steps"), right=right),
        "",
        "Grouped-query and multi-head attention in decode (32/8, 64/8, 8/1 and 32/32 heads of "
        "128), steps of 50 us or more measured (shorter ones are mostly the kernel's fixed "
        "cost, about 15 us)",
        table(["GPU", "KV cache", "Steps", "Model/measured", "Mean |ln|"],
              ratio_rows("decode", "steps"), right=right),
        "",
        "Context attention over 1-4 prompts of 2k-16k tokens, head dim 128",
        table(["GPU", "Format", "Passes", "Model/measured", "Mean |ln|"],
              ratio_rows("context", "passes"), right=right),
        "",
        "Head dim 64 over 128: attention FLOP rate at GPT-OSS's shape (64 heads over 8 KV "
        "heads, 16-bit)",
        table(["GPU", "Passes", "Measured", "Model"], narrow,
              right=[False, True, True, True]),
        "",
        "Model/measured below 1: the model prices the kernel faster than TensorRT-LLM ran it. "
        "Head dim: 1 is the same rate at both widths; the model's is below 1 by its fixed "
        "time per query row and head, which a head of 64 spreads over half the math.",
        "Source and what the comparisons say: docs/performance-model.md, 'MLA in decode', "
        "'A prompt's attention: math and a cost per row' and 'Narrow heads'."])


def render_collectives(summary: Sequence[Mapping[str, Any]], overall: Mapping[str, float]
                       ) -> str:
    """NCCL's measured collectives beside the collectives model, by GPU, collective and GPU
    count, in three size bands (``validation.collectives.summarize``), and the mean |ln
    ratio| of each band over every GPU (``overall``)."""
    from gpuarch.validation.collectives import BANDS

    bands = [name for name, _, _, _ in BANDS]
    lead = [[d["device"], d["collective"], str(d["gpus"])] for d in summary]
    return _measured_report(
        "NCCL collectives inside one NVLink domain (NVIDIA aiconfigurator's measurements) "
        "beside the collectives model",
        _banded_table(["GPU", "Collective", "GPUs"], lead, summary,
                      [(name, f"n {label}") for name, _, _, label in BANDS], "sizes"),
        "mean |ln(model/measured)| over every GPU: " + ", ".join(
            f"{band} {overall[band]:.3f}" for band in bands),
        "the model prices the collective faster than NCCL ran it",
        "Source and what the comparison says: docs/performance-model.md, 'NCCL's measured "
        "collectives'.")


def render_engine_all_reduce(summary: Sequence[Mapping[str, Any]],
                             overall: Mapping[str, float]) -> str:
    """The serving engines' measured all-reduce kernels beside the model's, by GPU, engine and
    GPU count, in three size bands (``validation.engine_all_reduce.summarize``), and the
    mean |ln ratio| of each band over every GPU (``overall``)."""
    from gpuarch.validation.collectives import BANDS

    lead = [[d["device"], d["engine"], str(d["gpus"])] for d in summary]
    return _measured_report(
        "Serving engines' all-reduce kernels inside one NVLink domain (NVIDIA "
        "aiconfigurator's measurements, under CUDA graphs) beside the model's one-shot "
        "kernel or NCCL, the faster",
        _banded_table(["GPU", "Engine", "GPUs"], lead, summary,
                      [(name, f"n {label}") for name, _, _, label in BANDS], "sizes"),
        "mean |ln(model/measured)| over every GPU: " + ", ".join(
            f"{band} {overall[band]:.3f}" for band in (*(b[0] for b in BANDS), "all")),
        "the model prices the all-reduce faster than the engine ran it",
        "Source and what the comparison says: docs/performance-model.md, 'The engines' "
        "all-reduce kernels'.")


def render_moe_dispatch(summary: Sequence[Mapping[str, Any]], overall: Mapping[str, float]
                        ) -> str:
    """Serving engines' measured MoE dispatch and combine kernels beside the model's one-shot
    all-to-all, by source, phase and group size, in three token bands
    (``validation.moe_dispatch.summarize``), and the mean |ln ratio| of each source
    (``overall``)."""
    from gpuarch.validation.moe_dispatch import TOKEN_BANDS

    lead = [[str(d["source"]) + (" (fitted)" if d["fitted"] else ""), str(d["phase"]),
             str(d["ep"])] for d in summary]
    return _measured_report(
        "MoE dispatch and combine kernels (TensorRT-LLM on GB200 and, through DeepEP, on "
        "8-GPU boards; DeepEP on H100 and H800) beside the model's one-shot all-to-all",
        _banded_table(["Source", "Phase", "EP"], lead, summary,
                      [(name, f"n {label} tok.") for name, _, _, label in TOKEN_BANDS], "rows"),
        "mean |ln(model/measured)| by source: " + ", ".join(
            f"{source} {value:.3f}" for source, value in overall.items()),
        "the model prices the kernel faster than it ran",
        "Sources and what the comparison says: docs/performance-model.md, 'MoE dispatch "
        "kernels, measured'.")


def render_inference_validation(s: InferenceSummary, explain: bool = False) -> str:
    rows = [[r.id + (" *" if r.out_of_sample else ""), r.gpu, str(r.gpus), r.formats,
             r.lengths, r.batching, r.metric, *(
                 fmt_seconds(v) if r.metric in DURATION_METRICS else fmt(v)
                 for v in (r.published, r.predicted)),
             f"{r.error:+.1%}"] for r in s.rows]
    lines = [table(["Point", "GPU", "GPUs", "Formats", "In/out", "Batching", "Figure",
                    "Published", "Predicted", "Error"], rows,
                   right=[False, False, True, False, False, False, False, True, True, True]),
             "",
             f"{len(s.rows)} published figures: mean absolute error {_pct(s.mean_abs_error)}, "
             f"median {_pct(s.median_abs_error)}, max {_pct(s.max_abs_error)}; "
             f"{_pct(s.share_within)} within {s.bound:.0%}, "
             f"{s.beyond} beyond",
             _bias_line(s, "figures"),
             *_by_lines(s, (("figure", "metric"), ("GPU", "gpu"), ("source", "source"),
                            ("model", "model"), ("engine", "engine"))),
             *_memory_lines(s.rows)]
    if explain:
        lines += ["", "where each prediction's time goes (one prefill pass; one decode step):"]
        seen: set[str] = set()
        for r in s.rows:  # a point's figures share one estimate
            if r.id not in seen:
                seen.add(r.id)
                lines.append(f"  {r.id}: {_infer_explained(r.explain)}")
    return "\n".join(lines + _validation_footer(s, "figures", "inference"))


def _by_lines(s: Any, groups: Sequence[tuple[str, str]]) -> list[str]:
    """A summary's mean absolute error by each (label, row attribute) of ``groups``, a line
    each, the labels padded to line the short ones up ("by GPU:    ...")."""
    return [f"by {label + ':':<7} " + ", ".join(f"{k} {_pct(v)}" for k, v in s.by(attr).items())
            for label, attr in groups]


def _bias_line(s: Any, noun: str) -> str:
    """Which way the model errs over the rows: the median signed error on rates."""
    bias = s.median_rate_error
    way = ("faster than" if bias > 0 else "slower than") if abs(bias) >= 0.0005 else "as fast as"
    return (f"bias:      the model is {way} these {noun} by a median {abs(bias):.1%} "
            "(signed, on rates: a duration is read as the rate it implies)")


def _memory_lines(rows: Any) -> list[str]:
    """How many published runs fit the model's memory per GPU (they all ran), and those
    that do not, with the data file's reason where it gives one."""
    runs = {r.id: r.memory for r in rows}  # a serving run's figures share one estimate
    lines = [f"memory:    {sum(m.fits for m in runs.values())} of {len(runs)} published runs "
             "fit the model's memory per GPU" + ("" if all(m.fits for m in runs.values())
                                                  else "; not:")]
    return lines + [f"  {i}: {fmt(m.gib)} of {fmt(m.gpu_gib)} GiB"
                    + (f" ({m.exception})" if m.exception else "")
                    for i, m in runs.items() if not m.fits]


def _train_explained(x: dict[str, Any]) -> str:
    """One line: a training step's time by kind, compute and communication by part."""
    step = x["step_time_s"]
    t = x["time_breakdown_s"]
    head = ", ".join(f"{k.replace('_', ' ')} {v / step:.0%}" for k, v in t.items()
                     if v >= 0.005 * step)
    inner = [p for p in (_shares(x["compute_breakdown_s"], step),
                         _shares(x["communication_breakdown_s"], step)) if p]
    return f"step {fmt(step)} s: {head}" + (f"; of the step: {'; '.join(inner)}"
                                             if inner else "")


def _infer_explained(x: dict[str, Any]) -> str:
    """One line: batch, bottlenecks and the parts of a prefill pass and a decode step (a
    disaggregated run: its two pools)."""
    if "disaggregated" in x:
        d, p = x["disaggregated"], x["prefill"]
        def gpus(n: int) -> str:
            return f"{n:,} GPU" + ("" if n == 1 else "s")

        loop = x.get("closed_loop")
        held = (f"{loop['decoding_per_replica']:.1f} a replica on average of the client's "
                f"{loop['concurrency']:,} in flight" if loop else f"batch {x['batch']} a replica")
        return (f"disaggregated: {gpus(d['decode_gpus'])} decoding {held}, a step "
                f"{fmt_seconds(x['tpot_s'])}; {gpus(d['prefill_gpus'])} "
                f"prefilling, passes of {p['prompts_per_pass']} prompt"
                f"{'' if p['prompts_per_pass'] == 1 else 's'} "
                f"{fmt_seconds(p['pass_s'])}, {p['busy']:.0%} busy; the "
                f"{x['bottleneck']['deployment']} pool sets the rate; KV hand-over "
                f"{fmt_seconds(d['kv_transfer_s'])} over {d['kv_link']}")
    pre, dec = x["prefill_parts_s"], x["decode_step_parts_s"]
    b = x["bottleneck"]
    limits = x.get("engine_limits")
    chosen = (f" (limits {limits['max_batch_size']:,} sequences, {limits['max_num_tokens']:,} "
              f"tokens: {limits['source']})") if limits else ""
    run = x.get("offline_run")
    offline = (f"; a run of {run['requests']:,} requests {fmt_seconds(run['run_s'])}, "
               f"{fmt_seconds(run['beyond_steady_s'])} of it beyond the steady rate "
               f"({run['ends_with']})") if run else ""
    return (f"batch {x['batch']}{chosen}; prefill ({b['prefill']}) "
            f"{_shares(pre, sum(pre.values()))}; "
            f"decode ({b['decode']}) {_shares(dec, sum(dec.values()))}{offline}")


def _validation_footer(s: Any, noun: str, fit: str) -> list[str]:
    """The lines under a validation table: the in-sample and out-of-sample errors apart
    (when some rows are out of sample) and the points not compared, with the reason (not
    modelled, or the source's own figures disagree)."""
    lines = []
    if any(r.out_of_sample for r in s.rows):
        lines += [_sample_split(s.rows, noun),
                  "* out of sample: added after the parameters it tests were fitted "
                  f"(scripts/fit_{fit}_efficiency.py leaves it out)"]
    if s.skipped:
        lines += ["", f"{len(s.skipped)} points not compared:"]
        lines += [f"  {i}: {why}" for i, why in s.skipped]
    return lines


def _sample_split(rows: Any, noun: str) -> str:
    """Mean absolute error of the in-sample and the out-of-sample rows, apart."""
    parts = []
    for label, flag in (("in sample", False), ("out of sample", True)):
        errors = [abs(r.error) for r in rows if r.out_of_sample is flag]
        if errors:
            parts.append(f"{len(errors)} {noun} {label} {_pct(sum(errors) / len(errors))}")
    return "mean absolute error: " + ", ".join(parts)


def render_power_validation(rows: Sequence[Any], summary: Mapping[str, Any],
                            serving: Mapping[str, Any], node_overhead: float) -> str:
    """Metered node power of training runs, and GPU power of serving configurations, beside
    the power model at each one's measured pace (``validation.power``): the training
    comparisons and their ``summary``, and ``validate power --json``'s ``serving`` (its
    ``groups``, ``serving_summary`` and source)."""
    from gpuarch.estimate.energy import GPU_POWER_MODEL
    from gpuarch.validation.power import BATCH_BANDS, METERS

    lines: list[str] = []
    if rows:
        body = [[r.id, r.gpu, str(r.gpus), str(r.nodes), r.precision,
                 f"{r.step_time_s:.4g} s", f"{r.hfu:.1%}", f"{r.gpu_power_w:.0f} W", r.meter,
                 f"{from_si(r.measured_w, Unit.KW):.2f} kW",
                 f"{from_si(r.model_w, Unit.KW):.2f} kW", _signed(r.error)] for r in rows]
        runs = summary["compared"]
        lines += ["Training: metered node power beside the power model at each run's "
                  "measured step time", "",
                  table(["Run", "GPU", "GPUs", "Nodes", "Prec.", "Step", "HFU", "GPU (model)",
                         "Meter", "Measured/node", "Model/node", "Error"], body,
                        right=[False, False, True, True, False, True, True, True, False, True,
                               True, True]), "",
                  f"{runs} run{'' if runs == 1 else 's'}: mean absolute error "
                  f"{summary['mean_abs_error']:.1%}, mean {_signed(summary['mean_error'])}, "
                  f"max {summary['max_abs_error']:.1%} (negative: the model draws less)"]
        for r in rows:
            spread = (f"; nodes {from_si(r.node_spread_w[0], Unit.KW):.2f}-"
                      f"{from_si(r.node_spread_w[1], Unit.KW):.2f} kW"
                      if r.node_spread_w else "")
            lines.append(f"  {r.id}: {METERS[r.meter]}, averaged over {r.averaged_over}"
                         f"{spread}")
        lines.append("")
    if serving["groups"]:
        def pair(values: Sequence[float], form: str) -> str:
            return "-".join(format(v, form) for v in values)

        body = [[g["model_id"], g["gpu"], str(g["gpus"]), g["weights"],
                 str(g["configurations"]), pair(g["batch"], ".0f"),
                 pair(g["measured_w"], ".0f"), pair(g["model_w"], ".0f"),
                 _signed(g["mean_error"])] for g in serving["groups"]]
        total = serving
        origin = f" ({serving['source'].split(':')[0]})" if serving["source"] else ""
        lines += ["Serving: GPU power of vLLM serving chat at each batch cap beside the power "
                  f"model at the measured output rate{origin}", "",
                  table(["Model", "GPU", "GPUs", "Weights", "Runs", "Batch", "Measured W/GPU",
                         "Model W/GPU", "Mean error"], body,
                        right=[False, False, True, False, True, True, True, True, True]), "",
                  f"{total['compared']} configurations: mean absolute error "
                  f"{total['mean_abs_error']:.1%}, mean {_signed(total['mean_error'])}; "
                  "mean error by GPU and batch (" + ", ".join(b for b, *_ in BATCH_BANDS)
                  + "):"]
        for gpu, bands in total["by_gpu_and_batch"].items():
            lines.append(f"  {gpu}: " + ", ".join(
                f"{_signed(cell['mean_error'])} ({cell['configurations']})"
                for cell in bands.values()))
        lines += ["  (batch: the mean sequences in flight, smallest-largest of the sweep; W: "
                  "at the smallest and the largest batch; tokens: the output and a prompt a "
                  f"request of {serving['prompt_len']:,} tokens, the mean the serving "
                  "validation fits on these runs: the prompts' lengths are not published)", ""]
    lines += [f"The model: {GPU_POWER_MODEL}, the utilisation taken at each run's measured "
              f"pace, plus {node_overhead:.0%} for the rest of a node (training rows; none "
              "for the GPUs alone), no PUE (gpuarch.estimate.energy). Sources and what the "
              "rows say: docs/advisor.md, 'Power against metered runs'."]
    return "\n".join(lines)
