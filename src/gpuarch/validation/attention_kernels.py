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
does not price (docs/performance-model.md, "Narrow heads").
"""

from __future__ import annotations

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
    read_commented_csv,
)
from gpuarch.workloads.presets import preset

__all__ = ["CONTEXT_FILE", "HEAD_DIM_FILE", "MLA_KERNELS_FILE", "SERVING_BATCH",
           "SERVING_CONTEXT", "ContextRow", "MlaRow", "compare_context", "compare_mla",
           "load_context_rows", "load_mla_rows"]

MLA_KERNELS_FILE = Path(__file__).with_name("data") / "mla-decode-trtllm.csv"
CONTEXT_FILE = Path(__file__).with_name("data") / "context-attention-trtllm.csv"
HEAD_DIM_FILE = Path(__file__).with_name("data") / "context-attention-head-dim-trtllm.csv"

DEVICES = aiconfigurator_devices("h100_sxm", "h200_sxm", "b200_sxm", "gb200", "b300_sxm",
                                 "gb300")
"""The files' aiconfigurator systems and the catalog's keys."""

KV_FORMATS = {"bfloat16": QuantFormat.BF16, "fp8": QuantFormat.FP8}
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


def compare_mla(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY
                ) -> list[MlaRow]:
    """Each measured step beside the model's time for DeepSeek-V3's latent attention."""
    from gpuarch.estimate.inference import mla_decode_attention_time

    shape = preset("deepseek-v3").shape
    out = []
    for r in load_mla_rows():
        batch, step = int(r["batch"]), int(r["step"])
        model = mla_decode_attention_time(catalog, shape, catalog.product(DEVICES[r["device"]]),
                                          KV_FORMATS[r["kv_cache_dtype"]], batch, step,
                                          efficiency)
        out.append(MlaRow(r["device"], r["kv_cache_dtype"], batch, step,
                          to_si(float(r["latency_ms"]), Unit.MS), model))
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
    FP8 context FMHA its FP8 rate (``_Runner.context_device``)."""
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
