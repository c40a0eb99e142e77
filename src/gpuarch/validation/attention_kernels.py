"""The serving model's attention cores against TensorRT-LLM's measured attention kernels.

NVIDIA's aiconfigurator times TensorRT-LLM's attention kernels per GPU, batch, length and
format. Two of its tables are shipped (each file's header names the source):
``data/mla-decode-trtllm.csv``, one decode step of multi-head latent attention for
DeepSeek-V3's 128 heads, set beside ``estimate.inference.mla_decode_attention_time``; and
``data/context-attention-trtllm.csv``, one prefill pass of fused attention over 1-4 prompts
of 2k-16k tokens, set beside the roofline's ``context_attention`` core on the device the
serving model runs it on (16-bit, or FP8 context FMHA). ``Efficiency.mla_decode_attention``,
``mla_decode_attention_fp8``, ``context_attention`` and ``context_attention_fp8`` were set
where these rows fit best (tests/test_attention_kernels.py). A third,
``data/context-attention-head-dim-trtllm.csv``, holds GPT-OSS's attention shape at head dim 64
and 128 on six GPUs: the kernels run the narrow heads at a lower rate, which the roofline
does not price (docs/performance-model.md, "Narrow heads"). Two more check what was not set
on them: ``data/decode-attention-trtllm.csv``, one decode step of grouped-query and multi-head
attention (the generation kernels, XQA), beside ``estimate.inference.decode_attention_time``
(its KV reads at ``kv_read`` of the bandwidth, fitted on the validation figures); and
``data/mla-decode-trtllm-1.0.0rc6.csv``, the MLA kernel of TensorRT-LLM 1.0.0rc6, which ran
over an FP8 cache at its 16-bit rate (``InferenceConfig.fp8_mla_decode`` off).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpuarch.catalog.loader import Catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.precision import Precision
from gpuarch.perf.quant import QuantFormat
from gpuarch.perf.roofline import CONTEXT_ATTENTION, Attention, Device, op_time
from gpuarch.units import Unit, to_si
from gpuarch.validation.measured import (
    ModelOverMeasured,
    aiconfigurator_devices,
    mean_abs_log_ratio,
    read_commented_csv,
)
from gpuarch.workloads.presets import preset

__all__ = [
    "CONTEXT_FILE",
    "DECODE_FILE",
    "DECODE_MIN_MEASURED_S",
    "HEAD_DIM_FILE",
    "MLA_KERNELS_1_0_FILE",
    "MLA_KERNELS_FILE",
    "SERVING_BATCH",
    "SERVING_CONTEXT",
    "SOURCE",
    "ContextRow",
    "DecodeRow",
    "MlaRow",
    "compare_context",
    "compare_decode",
    "compare_mla",
    "load_context_rows",
    "load_decode_rows",
    "load_mla_rows",
    "narrow_over_wide",
    "summarize",
]

SOURCE = ("NVIDIA aiconfigurator's collected database, TensorRT-LLM 1.3.0rc20 attention "
          "kernels (PyPI aiconfigurator-core 0.12.0: aiconfigurator_core/systems/data/<gpu>/"
          "{mla,attention}/trtllm/1.3.0rc20/) and TensorRT-LLM 1.0.0rc6's MLA generation "
          "kernel (PyPI aiconfigurator 0.3.0: aiconfigurator/systems/data/<gpu>/trtllm/"
          "1.0.0rc6/generation_mla_perf.txt)")
"""Where the rows come from (each file's header says more)."""

MLA_KERNELS_FILE = Path(__file__).with_name("data") / "mla-decode-trtllm.csv"
MLA_KERNELS_1_0_FILE = Path(__file__).with_name("data") / "mla-decode-trtllm-1.0.0rc6.csv"
"""The same kernel as aiconfigurator timed it a year earlier (TensorRT-LLM 1.0.0rc6, B200 and
GB200): over an FP8 cache at its 16-bit rate (``InferenceConfig.fp8_mla_decode`` off)."""
CONTEXT_FILE = Path(__file__).with_name("data") / "context-attention-trtllm.csv"
DECODE_FILE = Path(__file__).with_name("data") / "decode-attention-trtllm.csv"
"""TensorRT-LLM's generation attention (grouped-query and multi-head, one with a window)."""
HEAD_DIM_FILE = Path(__file__).with_name("data") / "context-attention-head-dim-trtllm.csv"

DEVICES = aiconfigurator_devices("h100_sxm", "h200_sxm", "b200_sxm", "gb200", "b300_sxm",
                                 "gb300")
"""The files' aiconfigurator systems and the catalog's keys."""

KV_FORMATS = {"bfloat16": QuantFormat.BF16, "float16": QuantFormat.FP16,
              "fp8": QuantFormat.FP8}
"""The file's KV-cache formats."""

SERVING_BATCH = 64
SERVING_CONTEXT = 4095
"""From these many sequences and cached tokens on, a row is in the regime a serving step
spends its attention time in (the rows the efficiencies were set on)."""


@dataclass(frozen=True)
class MlaRow(ModelOverMeasured):
    """One measured MLA decode step and the model's time for it (seconds)."""

    device: str
    kv_cache_dtype: str
    batch: int
    step: int
    measured_s: float
    model_s: float

    @property
    def serving(self) -> bool:
        """In the serving regime (``SERVING_BATCH`` and ``SERVING_CONTEXT`` or more)."""
        return self.batch >= SERVING_BATCH and self.step >= SERVING_CONTEXT


@cache
def load_mla_rows(path: Path = MLA_KERNELS_FILE) -> tuple[dict[str, str], ...]:
    """The file's rows as read (comment lines skipped)."""
    return read_commented_csv(path)


def compare_mla(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY,
                path: Path = MLA_KERNELS_FILE, fp8_math: bool = True) -> list[MlaRow]:
    """Each measured step of ``path`` beside the model's time for DeepSeek-V3's latent
    attention, its math in FP8 over an FP8 cache on Blackwell if ``fp8_math``."""
    from gpuarch.estimate.inference_passes import mla_decode_attention_time

    shape = preset("deepseek-v3").shape
    out = []
    for r in load_mla_rows(path):
        batch, step = int(r["batch"]), int(r["step"])
        model = mla_decode_attention_time(catalog, shape, catalog.product(DEVICES[r["device"]]),
                                          KV_FORMATS[r["kv_cache_dtype"]], batch, step,
                                          efficiency, fp8_math)
        out.append(MlaRow(r["device"], r["kv_cache_dtype"], batch, step,
                          to_si(float(r["latency_ms"]), Unit.MS), model))
    return out


DECODE_MIN_MEASURED_S = 50e-6
"""A generation-attention row whose measured step takes at least this long holds work enough
that the kernel's fixed cost (about 15 us: over all the rows, measured = 15 us + 0.88 x the
model's time, least squares) is a small part of it; shorter ones are mostly that fixed cost,
which the serving model carries in its per-step overhead (``Efficiency.decode_step_overhead_s``),
not per operator."""


@dataclass(frozen=True)
class DecodeRow(ModelOverMeasured):
    """One measured decode step of attention and the model's time for it (seconds)."""

    device: str
    heads: int
    kv_heads: int
    head_dim: int
    window: int
    kv_cache_dtype: str
    batch: int
    step: int
    measured_s: float
    model_s: float

    @property
    def serving(self) -> bool:
        """Work enough that the kernel's fixed cost is a small part (``DECODE_MIN_MEASURED_S``
        or longer, measured)."""
        return self.measured_s >= DECODE_MIN_MEASURED_S


@cache
def load_decode_rows(path: Path = DECODE_FILE) -> tuple[dict[str, str], ...]:
    """The file's rows as read (comment lines skipped)."""
    return read_commented_csv(path)


def compare_decode(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY
                   ) -> list[DecodeRow]:
    """Each measured generation-attention step beside the model's decode attention for the
    same heads, head dim, window and cache."""
    from gpuarch.estimate.inference_passes import decode_attention_time

    base = preset("llama-3.1-8b").shape
    out = []
    for r in load_decode_rows():
        heads, kv, dim, window = (int(r[k]) for k in ("num_heads", "num_kv_heads", "head_dim",
                                                      "window"))
        # the row's attention on a dense decoder's shape (only the attention op is timed)
        shape = dataclasses.replace(base, name=f"attention {heads}/{kv}x{dim}",
                                    hidden=heads * dim, heads=heads, kv_heads=kv,
                                    head_dim=dim, sliding_window=window)
        batch, step = int(r["batch"]), int(r["step"])
        model = decode_attention_time(catalog, shape, catalog.product(DEVICES[r["device"]]),
                                      KV_FORMATS[r["kv_cache_dtype"]], batch, step, efficiency,
                                      window=window)
        out.append(DecodeRow(r["device"], heads, kv, dim, window, r["kv_cache_dtype"], batch,
                             step, to_si(float(r["latency_ms"]), Unit.MS), model))
    return out


@dataclass(frozen=True)
class ContextRow(ModelOverMeasured):
    """One measured prefill attention pass and the model's time for it (seconds)."""

    device: str
    attn_dtype: str
    batch: int
    isl: int
    heads: int
    kv_heads: int
    measured_s: float
    model_s: float
    head_dim: int = 128


@cache
def load_context_rows(path: Path = CONTEXT_FILE) -> tuple[dict[str, str], ...]:
    """The file's rows as read (comment lines skipped)."""
    return read_commented_csv(path)


def _context_device(catalog: Catalog, key: str, fp8: bool) -> Device:
    """The device the serving model runs a prompt's attention on: the 16-bit one, or with
    FP8 context FMHA its FP8 rate (``ReplicaRunner.context_device``)."""
    product = catalog.product(key)
    device = Device.of(product, Precision.BF16, catalog.chip_of(product).sm.tensor_core_generation)
    return (device.with_fp8_attention() or device) if fp8 else device


def compare_context(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY,
                    path: Path = CONTEXT_FILE) -> list[ContextRow]:
    """Each measured prefill attention pass in ``path`` (``CONTEXT_FILE`` or
    ``HEAD_DIM_FILE``) beside the roofline's ``context_attention``."""
    out = []
    for r in load_context_rows(path):
        batch, isl, heads, kv = (int(r[k]) for k in ("batch", "isl", "heads", "kv_heads"))
        fp8 = r["attn_dtype"] == "fp8"
        op = Attention(batch, isl, isl, heads, kv, int(r["head_dim"]), causal=True,
                       kv_element=KV_FORMATS[r["kv_cache_dtype"]].bytes,
                       name=CONTEXT_ATTENTION)
        model = float(op_time(op, _context_device(catalog, DEVICES[r["device"]], fp8),
                              efficiency)[0])
        out.append(ContextRow(r["device"], r["attn_dtype"], batch, isl, heads, kv,
                              to_si(float(r["latency_ms"]), Unit.MS), model,
                              int(r["head_dim"])))
    return out


def narrow_over_wide(rows: Iterable[ContextRow], value: str = "measured_s"
                     ) -> dict[str, float]:
    """Per GPU, the median over matching passes (same prompts and lengths) of head dim 64's
    attention rate (FLOPs a second) over head dim 128's, from the ``value`` times
    (``"measured_s"`` or ``"model_s"``); at the same heads and lengths head dim 64 does half
    the FLOPs of 128, so 1 means the same rate."""
    times = {(r.device, r.batch, r.isl, r.heads, r.kv_heads, r.head_dim): getattr(r, value)
             for r in rows}
    ratios: dict[str, list[float]] = defaultdict(list)
    for (device, batch, isl, heads, kv, head_dim), t in times.items():
        wide = times.get((device, batch, isl, heads, kv, 128))
        if head_dim == 64 and wide is not None:
            ratios[device].append(wide / 2 / t)
    return {device: statistics.median(v) for device, v in sorted(ratios.items())}


def _ratio_group(check: str, device: str, fmt: str, count_key: str,
                 rows: Sequence[ModelOverMeasured]) -> dict[str, object]:
    return {"check": check, "device": device, "format": fmt, count_key: len(rows),
            "median_ratio": statistics.median(r.ratio for r in rows),
            "mean_abs_log_ratio": mean_abs_log_ratio(rows)}


def summarize(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY
              ) -> list[dict[str, object]]:
    """The attention checks as groups, each tagged by ``check``: ``mla_decode`` per GPU and
    cache format over the serving-regime steps (the rows the MLA efficiencies were set on),
    ``mla_decode_1.0`` the same for TensorRT-LLM 1.0.0rc6's kernel with the model's math in
    16 bits, ``decode`` (grouped-query and multi-head attention in decode) per GPU and cache
    format over the steps with work enough (``DecodeRow.serving``), ``context`` per GPU and
    format over every prefill pass, and ``head_dim`` per GPU, head dim 64's rate over 128's,
    measured and the roofline's."""
    out: list[dict[str, object]] = []
    decode: dict[tuple[str, str], list[DecodeRow]] = defaultdict(list)
    for row in compare_decode(catalog, efficiency):
        if row.serving:
            decode[(row.device, row.kv_cache_dtype)].append(row)
    for check, path, fp8_math in (("mla_decode", MLA_KERNELS_FILE, True),
                                  ("mla_decode_1.0", MLA_KERNELS_1_0_FILE, False)):
        mla: dict[tuple[str, str], list[MlaRow]] = defaultdict(list)
        for m in compare_mla(catalog, efficiency, path, fp8_math):
            if m.serving:
                mla[(m.device, m.kv_cache_dtype)].append(m)
        out += [_ratio_group(check, d, f, "steps", v) for (d, f), v in sorted(mla.items())]
    out += [_ratio_group("decode", d, f, "steps", v) for (d, f), v in sorted(decode.items())]
    ctx: dict[tuple[str, str], list[ContextRow]] = defaultdict(list)
    for c in compare_context(catalog, efficiency):
        ctx[(c.device, c.attn_dtype)].append(c)
    out += [_ratio_group("context", d, f, "passes", v) for (d, f), v in sorted(ctx.items())]
    narrow = compare_context(catalog, efficiency, HEAD_DIM_FILE)
    measured, model = narrow_over_wide(narrow), narrow_over_wide(narrow, "model_s")
    out += [{"check": "head_dim", "device": d, "format": "bfloat16",
             "passes": sum(1 for r in narrow if r.device == d),
             "measured_narrow_over_wide": measured[d], "model_narrow_over_wide": model[d]}
            for d in measured]
    return out
