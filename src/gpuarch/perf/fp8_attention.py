"""How much faster FP8 fused attention runs in training than the same GPU's 16-bit kernel.

Transformer Engine's FP8 dot-product attention runs cuDNN's FP8 fused attention forward and
backward. NVIDIA's cuDNN frontend publishes training-attention timings of both kernels on the
same GPU, shapes and software (``data/fp8_training_attention.toml``); the ratio of the two
times of a pass, at its span and for the nearest head size, is what FP8 buys that
pass there. The ratio of two kernels on one chip is taken for every board of the chip. Where
no timing exists the model keeps the serving kernels' ratio (``Efficiency.
context_attention_fp8`` over ``context_attention``).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from gpuarch.catalog.loader import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.perf.num import Num

__all__ = ["FP8_ATTENTION_FILE", "FP8_ATTENTION_SCALINGS", "FP8AttentionTiming",
           "fp8_attention_sources", "fp8_attention_timings", "fp8_training_attention_speedup",
           "has_fp8_attention_timings"]

FP8_ATTENTION_FILE = Path(__file__).with_name("data") / "fp8_training_attention.toml"

FP8_ATTENTION_SCALINGS = ("tensor", "mxfp8")
"""FP8 attention kernels a training run can take: "tensor", one scale per tensor (the current-
and delayed-scaling recipes, and what NVFP4 runs pin attention to with
``NVTE_DPA_FP8_RECIPE=Float8CurrentScaling``), or "mxfp8", MXFP8's scale per 32 elements (an
MXFP8 recipe's own attention)."""

_SERIES = ("bf16_fwd_ms", "bf16_bwd_ms", "fp8_fwd_ms", "fp8_bwd_ms", "mxfp8_fwd_ms",
           "mxfp8_bwd_ms")


@dataclass(frozen=True)
class FP8AttentionTiming:
    """One published set of 16-bit and FP8 training-attention timings on one GPU."""

    gpu: str
    chip: str
    head_dim: float  # the mean of the query-key and value head sizes (Attention.head_dim's)
    seq: tuple[float, ...]
    # 16-bit time over FP8 time, per sequence length, by kernel (FP8_ATTENTION_SCALINGS)
    forward: dict[str, tuple[float, ...]]
    backward: dict[str, tuple[float, ...]]
    source_url: str

    def speedup(self, span: Num, backward: bool, scaling: str = "tensor") -> Num:
        """The ratio at ``span`` positions for the ``scaling`` kernel, interpolated in log2
        of the span between the timed lengths and held at the ends."""
        ratios = (self.backward if backward else self.forward)[scaling]
        return np.interp(np.log2(np.maximum(span, 1.0)), np.log2(self.seq), ratios)


def _timing(row: dict[str, Any], where: str, chips: dict[str, str]) -> FP8AttentionTiming:
    for key in ("gpu", "source_url"):
        if not isinstance(row.get(key), str) or not row[key]:
            raise GpuarchError(f"{where}: {key!r} must be a non-empty string")
    if row["gpu"] not in chips:
        raise GpuarchError(f"{where}: gpu {row['gpu']!r} is not in the catalog")
    heads: list[int] = []
    for key in ("head_dim_qk", "head_dim_vo"):
        value = row.get(key)
        if not isinstance(value, int) or value < 1:
            raise GpuarchError(f"{where}: {key} must be a positive integer")
        heads.append(value)
    lists: dict[str, list[float]] = {}
    for name in ("seq", *_SERIES):
        values = row.get(name)
        if not isinstance(values, list) or not values or any(
                not isinstance(x, (int, float)) or x <= 0 for x in values):
            raise GpuarchError(f"{where}: {name} must be a list of positive numbers")
        lists[name] = [float(x) for x in values]
    seq = lists["seq"]
    series = [lists[name] for name in _SERIES]
    if any(len(values) != len(seq) for values in series):
        raise GpuarchError(f"{where}: every time list must have one value per seq")
    if any(b <= a for a, b in pairwise(seq)):
        raise GpuarchError(f"{where}: seq must increase")
    bf16_fwd, bf16_bwd, fp8_fwd, fp8_bwd, mx_fwd, mx_bwd = series

    def ratio(sixteen: list[float], eight: list[float]) -> tuple[float, ...]:
        return tuple(a / b for a, b in zip(sixteen, eight, strict=True))

    return FP8AttentionTiming(
        row["gpu"], chips[row["gpu"]], (heads[0] + heads[1]) / 2, tuple(seq),
        {"tensor": ratio(bf16_fwd, fp8_fwd), "mxfp8": ratio(bf16_fwd, mx_fwd)},
        {"tensor": ratio(bf16_bwd, fp8_bwd), "mxfp8": ratio(bf16_bwd, mx_bwd)},
        row["source_url"])


@lru_cache(maxsize=4)
def fp8_attention_timings(path: Path = FP8_ATTENTION_FILE) -> tuple[FP8AttentionTiming, ...]:
    """Every published timing set in ``path``, checked."""
    with path.open("rb") as fh:
        rows = tomllib.load(fh).get("timing")
    if not isinstance(rows, list) or not rows:
        raise GpuarchError(f"{path}: no [[timing]] tables")
    catalog = load_catalog()
    chips = {p.key: catalog.chip_of(p).key for p in catalog.products}
    return tuple(_timing(row, f"{path}: timing[{i}]", chips) for i, row in enumerate(rows))


@lru_cache(maxsize=256)
def _for_gpu(gpu: str) -> tuple[FP8AttentionTiming, ...]:
    """The timings of ``gpu``'s chip (any of its boards'); none for a GPU not in the
    catalog."""
    catalog = load_catalog()
    try:
        chip = catalog.chip_of(catalog.product(gpu)).key
    except GpuarchError:
        return ()
    return tuple(t for t in fp8_attention_timings() if t.chip == chip)


def has_fp8_attention_timings(gpu: str) -> bool:
    """Whether published FP8 training-attention timings exist for ``gpu``'s chip."""
    return bool(_for_gpu(gpu))


def fp8_attention_sources(gpu: str, head_dim: float) -> tuple[str, ...]:
    """The published timings ``gpu``'s FP8 training attention at ``head_dim`` is priced from
    (those of the nearest timed head size; none without timings)."""
    timings = _for_gpu(gpu)
    if not timings:
        return ()
    nearest = min(sorted({t.head_dim for t in timings}), key=lambda h: abs(h - head_dim))
    return tuple(dict.fromkeys(t.source_url for t in timings if t.head_dim == nearest))


def fp8_training_attention_speedup(gpu: str, head_dim: Num, span: Num, backward: bool,
                                   scaling: str = "tensor") -> Num | None:
    """How many times faster the ``scaling`` FP8 fused attention kernel
    (``FP8_ATTENTION_SCALINGS``) runs a training pass (forward, or ``backward``) of ``span``
    positions than the 16-bit kernel on ``gpu`` (a catalog key):
    the timings of its chip at the nearest head size (the mean of the query-key and value
    sizes, as ``Attention.head_dim`` takes a latent attention's: DeepSeek-V3's 192 and 128
    are 160), the mean over the chip's boards timed at it; None where the chip has none."""
    timings = _for_gpu(gpu)
    if not timings:
        return None
    heads = sorted({t.head_dim for t in timings})
    per_head = [np.mean([t.speedup(span, backward, scaling) for t in timings
                         if t.head_dim == h],
                        axis=0) for h in heads]
    if len(heads) == 1:
        return per_head[0]
    # the nearest timed head size (ties to the smaller)
    distance = np.abs(np.subtract.outer(np.asarray(head_dim, dtype=float), heads))
    nearest = np.argmin(distance, axis=-1)
    return np.choose(nearest, np.broadcast_arrays(*per_head))
