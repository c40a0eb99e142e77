"""The accuracy tables README.md quotes, computed from the validations as they stand.

Each table splits one validation (training or serving) by where the points came from: fitted
or added after the fit, the kind of model, the GPU's architecture, the family of sources;
each row gives the count, the mean and median absolute error, the share within the issue's
bound and how many points are beyond it. The misses are listed point by point. README.md
carries the tables between ``<!-- accuracy:TASK -->`` markers; ``scripts/readme_accuracy.py``
rewrites them and ``tests/test_readme_accuracy.py`` fails when they are stale, so every
figure there is one the validation measures today.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuarch.catalog import Catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.validation.bands import KIND_LABELS, model_kind
from gpuarch.validation.inference import (
    SERVING_BOUND,
    load_inference_points,
    validate_inference,
)
from gpuarch.validation.stats import ErrorSummary
from gpuarch.validation.training import (
    TRAINING_BOUND,
    load_training_points,
    point_shape,
    validate_training,
)

__all__ = [
    "TASK_BOUNDS",
    "AccuracyRow",
    "TaskAccuracy",
    "accuracy_rows",
    "render_markdown",
    "sync_readme",
    "task_tables",
]

TASK_BOUNDS = {"training": TRAINING_BOUND, "serving": SERVING_BOUND}
"""Each issue's per-point bound, as its validation counts it."""

TRAINING_FAMILIES = (
    ("MLPerf Training step times (v3.0-v6.0)", ("mlperf-training",)),
    ("Megatron Bridge and NeMo performance tables, cards and DGX Cloud recipes",
     ("mbridge-", "nemo-", "dgxc-nemo")),
    ("papers: Megatron-LM, Korthikanti et al., Llama 3, MT-NLG, BLOOM, zero bubble, "
     "Megatron Core MoE (and its team's ModelZoo tables and trackers' card), MoE Parallel Folding",
     ("megatron-", "korthikanti", "llama3-", "mt-nlg", "bigscience", "zero-bubble",
      "mcore-moe", "mcore-folding")),
    ("llm-foundry's MPT tables", ("llm-foundry",)),
    ("TorchTitan, MaxText, NeMo AutoModel", ("torchtitan", "dgxc-maxtext", "automodel")),
)
SERVING_FAMILIES = (
    ("TensorRT-LLM performance tables and blogs", ("trtllm-",)),
    ("MLPerf Inference Offline (v4.0-v6.1)", ("mlperf-inference",)),
    ("Neural Magic's vLLM 0.7.2 model cards", ("nm-card",)),
    ("SGLang, vLLM, LMDeploy and NIM publications",
     ("lmsys-", "sglang-", "vllm-", "vultr-", "lmdeploy-", "nim-", "gpumode-")),
    ("ML.ENERGY's vLLM 0.11.1 sweeps (LM Arena chat)", ("mlenergy-",)),
    ("InferenceMAX's vLLM 0.13.0 nightly run (GPT-OSS-120B)", ("inferencemax-20667906037",)),
    ("InferenceMAX's TensorRT-LLM 1.2.0rc2 nightly run (GPT-OSS-120B, B200)",
     ("inferencemax-20308883467",)),
    ("InferenceMAX's SGLang 0.5.6 nightly run (DeepSeek-R1-0528, B200 and H200)",
     ("inferencemax-20621824084",)),
    ("InferenceMAX's Dynamo runs, disaggregated (GPT-OSS-120B and DeepSeek-R1, GB200)",
     ("inferencemax-20764588467", "inferencemax-20321908209")),
)
METRIC_LABELS = {
    "output_tokens_per_s": "output tokens/s",
    "output_tokens_per_s_per_gpu": "output tokens/s per GPU",
    "tpot_s": "time per output token",
    "ttft_s": "time to first token",
    "request_latency_s": "request latency",
    "decode_tokens_per_s_per_gpu": "decode tokens/s per GPU",
    "prefill_tokens_per_s_per_gpu": "prefill tokens/s per GPU",
    "total_tokens_per_s": "prompt and output tokens/s",
}
"""Every metric the serving validation compares, as the table names it (an unknown one is an
error: a new metric needs a row)."""
ARCHITECTURES = ("volta", "turing", "ampere", "ada", "hopper", "blackwell")


@dataclass(frozen=True)
class AccuracyRow:
    """One group of a validation's points and the model's error over them."""

    label: str
    count: int
    mean_abs_error: float
    median_abs_error: float
    share_within: float
    beyond: int


def _row(label: str, rows: Sequence[Any], bound: float) -> AccuracyRow:
    summary = ErrorSummary(rows, (), bound)
    return AccuracyRow(label, len(rows), summary.mean_abs_error, summary.median_abs_error,
                       summary.share_within, summary.beyond)


def _family(source: str, families: Sequence[tuple[str, tuple[str, ...]]]) -> str:
    for label, prefixes in families:
        if source.startswith(prefixes):
            return label
    raise ValueError(f"source {source!r} belongs to no family of the accuracy tables")


def accuracy_rows(task: str, rows: Sequence[Any], points: Iterable[Any],
                  catalog: Catalog) -> list[AccuracyRow]:
    """The table of one validation's comparison ``rows`` (each with ``id``, ``source``,
    ``error``, ``out_of_sample``, and ``metric`` for serving), its ``points`` giving each
    row's model and GPU: all, fitted and not, by metric (serving), by kind of model, by
    architecture, by family of sources; empty groups left out."""
    bound = TASK_BOUNDS[task]
    by_id = {p.id: p for p in points}
    families = TRAINING_FAMILIES if task == "training" else SERVING_FAMILIES
    unit = "runs" if task == "training" else "figures"
    order = [f"all {unit}", "fitted on (in sample)", "added after the fit (out of sample)"]
    if task == "serving":
        order += list(METRIC_LABELS.values())
    order += [f"{label} models" for label in KIND_LABELS.values()]
    order += [f"on {a.capitalize()}" for a in ARCHITECTURES]
    order += [label for label, _ in families]
    groups_rows: dict[str, list[Any]] = {label: [] for label in order}
    for r in rows:
        point = by_id[r.id]
        arch = catalog.product(str(point.get("gpu"))).architecture
        groups = [f"all {unit}", "added after the fit (out of sample)" if r.out_of_sample
                  else "fitted on (in sample)",
                  f"{KIND_LABELS[model_kind(point_shape(point))]} models",
                  f"on {arch.capitalize()}", _family(r.source, families)]
        if task == "serving":
            groups.append(METRIC_LABELS[r.metric])
        for label in groups:
            groups_rows[label].append(r)
    return [_row(label, groups_rows[label], bound) for label in order if groups_rows[label]]


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def render_markdown(task: str, table: Sequence[AccuracyRow], rows: Sequence[Any]) -> str:
    """The table as README.md prints it, then every point beyond the bound, worst first,
    as '`id` +x.x%'."""
    bound = TASK_BOUNDS[task]
    head = (f"| {task} | count | mean abs. error | median | within {bound:.0%} | "
            f"beyond {bound:.0%} |")
    lines = [head, "|---|---|---|---|---|---|"]
    lines += [f"| {r.label} | {r.count:,} | {_pct(r.mean_abs_error)} | "
              f"{_pct(r.median_abs_error)} | {_pct(r.share_within)} | {r.beyond} |"
              for r in table]
    beyond = sorted((r for r in rows if abs(r.error) > bound), key=lambda r: -abs(r.error))
    lines += ["", f"Beyond {bound:.0%} ({len(beyond)}, worst first): " + ", ".join(
        f"`{r.id}` {r.error * 100:+.1f}%" for r in beyond) + "."]
    return "\n".join(lines)


@dataclass(frozen=True)
class TaskAccuracy:
    """One validation's Markdown block and how many points it compared."""

    markdown: str
    count: int


def task_tables(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY
                ) -> dict[str, TaskAccuracy]:
    """Both tasks' Markdown blocks, keyed by task (runs both validations)."""
    out = {}
    for task, validate, load in (("training", validate_training, load_training_points),
                                 ("serving", validate_inference, load_inference_points)):
        rows = validate(catalog, efficiency).rows
        out[task] = TaskAccuracy(
            render_markdown(task, accuracy_rows(task, rows, load(), catalog), rows), len(rows))
    return out


COUNT_PHRASES = {
    "training": re.compile(r"(predicted vs )([\d,]+)( published measurements)"),
    "serving": re.compile(r"(TTFT / TPOT / throughput vs )([\d,]+)( published figures)"),
}
"""Where README.md's command list quotes each validation's size."""


def sync_readme(text: str, tables: dict[str, TaskAccuracy]) -> str:
    """README.md's text with each task's block between its markers replaced and the counts
    its command list quotes set (raises ValueError if a marker or a phrase is missing)."""
    for task, acc in tables.items():
        start, end = f"<!-- accuracy:{task} -->", f"<!-- /accuracy:{task} -->"
        if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
            raise ValueError(f"README.md needs one {start} ... {end} pair")
        head, rest = text.split(start)
        _, tail = rest.split(end)
        text = f"{head}{start}\n{acc.markdown}\n{end}{tail}"
        phrase = COUNT_PHRASES[task]
        if not phrase.search(text):
            raise ValueError(f"README.md no longer quotes the {task} count: {phrase.pattern}")
        text = phrase.sub(rf"\g<1>{acc.count:,}\g<3>", text)
    return text
