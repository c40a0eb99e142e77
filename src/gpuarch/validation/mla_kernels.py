"""The serving model's absorbed latent attention in decode against TensorRT-LLM's measured MLA
generation kernel.

NVIDIA's aiconfigurator times one decode step of TensorRT-LLM's multi-head latent attention
kernel per GPU, batch, context length and KV-cache format. ``data/mla-decode-trtllm.csv``
holds its rows for DeepSeek-V3's 128 heads on H100, H200, B200 and GB200 (its header names
the source); each is set beside ``estimate.inference.mla_decode_attention_time`` for the same
step. ``Efficiency.mla_decode_attention`` and ``mla_decode_attention_fp8`` were set where
these rows at 64 sequences and more and 4,095 cached tokens and more (the serving regime)
fit best (tests/test_mla_kernels.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpuarch.catalog.loader import Catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.quant import QuantFormat
from gpuarch.units import Unit, to_si
from gpuarch.validation.measured import ModelOverMeasured, read_commented_csv
from gpuarch.workloads.presets import preset

__all__ = ["MLA_KERNELS_FILE", "SERVING_BATCH", "SERVING_CONTEXT", "MlaRow", "compare",
           "load_mla_rows"]

MLA_KERNELS_FILE = Path(__file__).with_name("data") / "mla-decode-trtllm.csv"

DEVICES = {"h100_sxm": "h100-sxm5-80gb", "h200_sxm": "h200-sxm-141gb", "b200_sxm": "b200",
           "gb200": "gb200"}
"""aiconfigurator's system names and the catalog's keys."""

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


def compare(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY) -> list[MlaRow]:
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
