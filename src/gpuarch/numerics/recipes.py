"""Scaling recipes: how a tensor is brought into a narrow format's range before the cast.

- ``CURRENT``: one FP32 scale per tensor from the tensor's own amax (Transformer Engine's
  current scaling): scale = format max / amax / 2^margin.
- ``DELAYED``: the same, but the scale comes from an amax *history* of earlier steps
  (Transformer Engine's delayed scaling: history length, ``max`` or ``most_recent``,
  margin); see :mod:`gpuarch.numerics.simulate`.
- ``MX``: OCP Microscaling v1.0: blocks of 32 along the reduction axis share a power-of-two
  E8M0 scale 2^(floor(log2(block amax)) - emax of the element format); elements that still
  exceed the element format's max saturate (with E4M3, a block amax between 448 and 512
  times the scale is clamped: the spec's rule trades the top of the range for never
  underflowing the block).
- ``NVFP4``: blocks of 16 share an E4M3 scale (block amax / 6, relative to a per-tensor FP32
  scale amax / (448 x 6)); FP4 E2M1 elements, saturating.
- ``INT_TENSOR`` / ``INT_CHANNEL``: symmetric integer quantization, one scale per tensor or
  per output channel (row of the operand along its non-reduction axis).
- ``INT_GROUP``: symmetric integer quantization per group of 128 along the reduction axis
  (AWQ/GPTQ-style weight-only INT4).
- ``NONE``: a plain cast (FP32, TF32, BF16, FP16, or an unscaled narrow cast).

Every function works on the last axis as the reduction (block) axis and returns the
dequantized values in float64 with counts of overflow and underflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np
from numpy.typing import NDArray

from gpuarch.errors import GpuarchError
from gpuarch.numerics.formats import NumberFormat

__all__ = ["MAX_MARGIN", "Quantized", "Recipe", "check_margin", "overflow_threshold", "quantize",
           "scale_from_amax"]

F64 = NDArray[np.float64]

MX_BLOCK = 32
NVFP4_BLOCK = 16
INT_GROUP = 128


class Recipe(Enum):
    """How a tensor is scaled before it is cast."""

    NONE = "none"
    CURRENT = "current"
    DELAYED = "delayed"
    MX = "mx"
    NVFP4 = "nvfp4"
    INT_TENSOR = "int_tensor"
    INT_CHANNEL = "int_channel"
    INT_GROUP = "int_group"


@dataclass(frozen=True)
class Quantized:
    """A tensor after quantize-dequantize, and what happened on the way."""

    values: F64
    overflow: int  # elements whose scaled magnitude exceeded the format's max
    underflow: int  # non-zero elements that became zero


MAX_MARGIN = 100
"""The largest scaling margin (either sign) the lab takes, in powers of two: every format it
emulates spans well under 2^100 between its smallest and largest values, so a larger
margin only flushes or overflows everything, and 2^margin must stay within FP64."""


def check_margin(margin: object) -> None:
    """Raise a usage error naming --margin unless it is an integer within +-MAX_MARGIN."""
    if isinstance(margin, bool) or not isinstance(margin, int) \
            or not -MAX_MARGIN <= margin <= MAX_MARGIN:
        raise GpuarchError(f"--margin: expected an integer from {-MAX_MARGIN} to "
                           f"{MAX_MARGIN} (powers of two), got {margin!r}")


def scale_from_amax(amax: float | F64, fmt: NumberFormat, margin: int = 0) -> F64:
    """Transformer Engine's rule: scale = max / amax / 2^margin (1 where amax is 0)."""
    a = np.asarray(amax, dtype=np.float64)
    with np.errstate(divide="ignore"):
        s = fmt.max / a / 2.0**margin
    return np.where((a > 0) & np.isfinite(s), s, 1.0)


def overflow_threshold(fmt: NumberFormat) -> float:
    """The magnitude above which a value no longer rounds to the format's max: max plus
    half a step at the top (E4M3: 464; an integer format: max + 0.5)."""
    if fmt.is_integer:
        return fmt.max + 0.5
    spec = fmt.spec
    return spec.max + 2.0 ** (spec.emax - spec.mantissa_bits) / 2


def _counts(x: F64, scaled: F64, y: F64, fmt: NumberFormat) -> tuple[int, int]:
    over = int(np.count_nonzero(np.abs(scaled) >= overflow_threshold(fmt)))
    under = int(np.count_nonzero((x != 0) & (y == 0)))
    return over, under


def _scaled_cast(x: F64, scale: F64, fmt: NumberFormat, saturate: bool) -> Quantized:
    scaled = x * scale
    q = fmt.cast(scaled, saturate=saturate)
    y = q / scale
    over, under = _counts(x, scaled, y, fmt)
    return Quantized(y, over, under)


def _blocks(x: F64, size: int, what: str) -> F64:
    if x.shape[-1] % size:
        raise GpuarchError(f"{what}: the reduction dimension ({x.shape[-1]}) must be a "
                           f"multiple of the block size {size}")
    return x.reshape(*x.shape[:-1], x.shape[-1] // size, size)


def _emax(fmt: NumberFormat) -> int:
    """Exponent of the element format's largest power of two (E4M3: 8, E2M1: 2)."""
    return int(np.floor(np.log2(fmt.max)))


def quantize(x_in: NDArray[np.floating] | F64, fmt: NumberFormat, recipe: Recipe, *,
             margin: int = 0, scale: float | None = None) -> Quantized:
    """Quantize-dequantize ``x`` (reduction along the last axis) under ``recipe``.

    ``scale`` is used by ``DELAYED`` (the scale from the amax history).
    """
    check_margin(margin)
    x = np.asarray(x_in, dtype=np.float64)
    if recipe is Recipe.NONE:
        y = fmt.cast(x)
        over, under = _counts(x, x, y, fmt)
        return Quantized(y, over, under)
    if recipe in (Recipe.INT_TENSOR, Recipe.INT_CHANNEL, Recipe.INT_GROUP) \
            and not fmt.is_integer:
        raise GpuarchError(f"--recipe {recipe.value} needs an integer --format (int8, int4)")
    if fmt.is_integer and recipe not in (Recipe.INT_TENSOR, Recipe.INT_CHANNEL,
                                         Recipe.INT_GROUP):
        raise GpuarchError(f"--format {fmt.value} needs --recipe int_tensor, int_channel or "
                           "int_group")
    amax_all = float(np.max(np.abs(x))) if x.size else 0.0
    if recipe is Recipe.CURRENT:
        return _scaled_cast(x, scale_from_amax(amax_all, fmt, margin), fmt, saturate=False)
    if recipe is Recipe.DELAYED:
        if scale is None:
            raise GpuarchError("delayed scaling needs the scale from the amax history")
        return _scaled_cast(x, np.asarray(scale, dtype=np.float64), fmt, saturate=False)
    if recipe is Recipe.INT_TENSOR:
        return _scaled_cast(x, scale_from_amax(amax_all, fmt), fmt, saturate=True)
    if recipe is Recipe.INT_CHANNEL:
        amax = np.max(np.abs(x), axis=-1, keepdims=True)
        return _scaled_cast(x, scale_from_amax(amax, fmt), fmt, saturate=True)
    if recipe is Recipe.INT_GROUP:
        b = _blocks(x, INT_GROUP, "--recipe int_group")
        amax = np.max(np.abs(b), axis=-1, keepdims=True)
        q = _scaled_cast(b, scale_from_amax(amax, fmt), fmt, saturate=True)
        return Quantized(q.values.reshape(x.shape), q.overflow, q.underflow)
    if recipe is Recipe.MX:
        return _mx(x, fmt)
    return _nvfp4(x, fmt)


def _mx(x: F64, fmt: NumberFormat) -> Quantized:
    """OCP MX v1.0 section 6.3: X = 2^(floor(log2(amax)) - emax_elem), elements x / X cast
    with saturation; a zero block gets X = 1."""
    if fmt not in (NumberFormat.FP8_E4M3, NumberFormat.FP8_E5M2, NumberFormat.FP6_E2M3,
                   NumberFormat.FP6_E3M2, NumberFormat.FP4_E2M1):
        raise GpuarchError(f"--recipe mx: no MX element format {fmt.value}")
    b = _blocks(x, MX_BLOCK, "--recipe mx")
    amax = np.max(np.abs(b), axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        exp = np.floor(np.log2(amax)) - _emax(fmt)
    exp = np.where(amax > 0, np.clip(exp, -127, 127), 0.0)
    shared = np.exp2(exp)  # exactly representable in E8M0
    q = _scaled_cast(b, 1.0 / shared, fmt, saturate=True)
    return Quantized(q.values.reshape(x.shape), q.overflow, q.underflow)


def _nvfp4(x: F64, fmt: NumberFormat) -> Quantized:
    """NVFP4: FP4 E2M1 elements in blocks of 16 with an E4M3 block scale, under a per-tensor
    FP32 scale chosen so the largest block scale is E4M3's max (448)."""
    if fmt is not NumberFormat.FP4_E2M1:
        raise GpuarchError("--recipe nvfp4 needs --format fp4_e2m1")
    e4m3 = NumberFormat.FP8_E4M3
    b = _blocks(x, NVFP4_BLOCK, "--recipe nvfp4")
    amax_tensor = float(np.max(np.abs(x))) if x.size else 0.0
    global_scale = amax_tensor / (e4m3.max * fmt.max) if amax_tensor > 0 else 1.0
    amax = np.max(np.abs(b), axis=-1, keepdims=True)
    block = e4m3.cast(np.clip(amax / fmt.max / global_scale, 0, e4m3.max))
    decode = np.where(block > 0, block * global_scale, 1.0)
    q = _scaled_cast(b, 1.0 / decode, fmt, saturate=True)
    return Quantized(q.values.reshape(x.shape), q.overflow, q.underflow)
