"""Quantized matrix multiply, emulated: quantize both operands under a recipe, multiply with
FP32 accumulation, compare with an FP64 reference of the unquantized product."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np
from numpy.typing import NDArray

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product
from gpuarch.catalog.peaks import PeakKey
from gpuarch.errors import GpuarchError
from gpuarch.numerics.formats import NumberFormat
from gpuarch.numerics.recipes import Recipe, quantize

__all__ = ["Distribution", "ErrorStats", "MatmulResult", "compare", "emulate_matmul",
           "make_operands", "predicted_speedup"]

F64 = NDArray[np.float64]


class Distribution(Enum):
    """Synthetic operand distributions."""

    NORMAL = "normal"  # N(0, 1)
    LOGNORMAL = "lognormal"  # random sign x lognormal(0, 1): heavy right tail
    OUTLIERS = "outliers"  # N(0, 1) with 0.1% of entries x 100 (activation outliers)


MAX_ELEMENTS = 2**26
"""Largest operand or result emulated (64 Mi elements, 512 MiB as FP64): larger sizes are
refused rather than left to exhaust the machine's memory."""


def make_operands(m: int, n: int, k: int, distribution: Distribution, seed: int
                  ) -> tuple[F64, F64]:
    """A (m x k) and B (k x n), deterministic for a seed."""
    for name, rows, cols in (("--m x --k", m, k), ("--k x --n", k, n), ("--m x --n", m, n)):
        if rows * cols > MAX_ELEMENTS:
            raise GpuarchError(f"{name}: {rows} x {cols} elements is more than the "
                               f"{MAX_ELEMENTS:,} the lab emulates (512 MiB in FP64)")
    rng = np.random.default_rng(seed)

    def draw(shape: tuple[int, int]) -> F64:
        if distribution is Distribution.NORMAL:
            return rng.standard_normal(shape)
        if distribution is Distribution.LOGNORMAL:
            return rng.choice([-1.0, 1.0], size=shape) * rng.lognormal(0.0, 1.0, shape)
        x = rng.standard_normal(shape)
        mask = rng.random(shape) < 1e-3
        return np.where(mask, x * 100.0, x)

    return draw((m, k)), draw((k, n))


@dataclass(frozen=True)
class ErrorStats:
    """How far a result is from the reference."""

    relative_error: float  # ||C - R||_F / ||R||_F
    sqnr_db: float  # 20 log10(||R|| / ||C - R||)
    max_abs_error: float
    overflow: int
    underflow: int


def compare(result: F64, reference: F64, overflow: int = 0, underflow: int = 0
            ) -> ErrorStats:
    diff = result - reference
    bad = ~np.isfinite(diff)
    noise = float(np.linalg.norm(np.where(bad, 0.0, diff))) if not bad.all() else math.inf
    if bad.any():
        noise = math.inf
    signal = float(np.linalg.norm(reference))
    rel = noise / signal if signal else math.inf
    sqnr = 20 * math.log10(signal / noise) if noise and math.isfinite(noise) else (
        math.inf if noise == 0 else -math.inf)
    max_err = float(np.max(np.abs(diff))) if diff.size and not bad.any() else math.inf
    return ErrorStats(rel, sqnr, max_err, overflow, underflow)


@dataclass(frozen=True)
class MatmulResult:
    """Error of one emulated quantized matmul."""

    m: int
    n: int
    k: int
    format: NumberFormat
    recipe: Recipe
    error: ErrorStats
    b_format: NumberFormat | None = None


def emulate_matmul(a: F64, b: F64, fmt: NumberFormat, recipe: Recipe, *, margin: int = 0,
                   b_format: NumberFormat | None = None) -> MatmulResult:
    """C = dequant(Q(A)) @ dequant(Q(B)) in FP32, blocks along K for both operands.

    ``b_format`` gives B its own format: the Transformer Engine's "hybrid" FP8 recipe runs
    the backward data-gradient GEMM as gradients in E5M2 (A) times weights in E4M3 (B).
    """
    if a.shape[1] != b.shape[0]:
        raise GpuarchError(f"--k: A is {a.shape} and B is {b.shape}")
    qa = quantize(a, fmt, recipe, margin=margin)
    qb = quantize(b.T, b_format or fmt, recipe, margin=margin)  # B's reduction axis last
    c = np.matmul(qa.values.astype(np.float32), qb.values.T.astype(np.float32))
    reference = np.matmul(a, b)
    stats = compare(c.astype(np.float64), reference, qa.overflow + qb.overflow,
                    qa.underflow + qb.underflow)
    return MatmulResult(a.shape[0], b.shape[1], a.shape[1], fmt, recipe, stats, b_format)


_DENSE_KEY = {
    NumberFormat.FP32: PeakKey.FP32,
    NumberFormat.TF32: PeakKey.TENSOR_TF32,
    NumberFormat.BF16: PeakKey.TENSOR_BF16,
    NumberFormat.FP16: PeakKey.TENSOR_FP16,
    NumberFormat.FP8_E4M3: PeakKey.TENSOR_FP8,
    NumberFormat.FP8_E5M2: PeakKey.TENSOR_FP8,
    NumberFormat.FP6_E2M3: PeakKey.TENSOR_FP6,
    NumberFormat.FP6_E3M2: PeakKey.TENSOR_FP6,
    NumberFormat.FP4_E2M1: PeakKey.TENSOR_FP4,
    NumberFormat.INT8: PeakKey.TENSOR_INT8,
    NumberFormat.INT4: PeakKey.TENSOR_INT4,
}


def tensor_key(fmt: NumberFormat) -> PeakKey | None:
    """The catalog peak a format's matrix math runs at (None for E8M0, a scale format)."""
    return _DENSE_KEY.get(fmt)


def predicted_speedup(product: Product, fmt: NumberFormat, *, sparse: bool = False
                      ) -> tuple[float | None, str]:
    """Peak of ``fmt`` over dense BF16 on ``product``: an upper bound for compute-bound
    GEMMs, with the reason when it cannot be given."""
    base = product.peak(PeakKey.TENSOR_BF16) or product.peak(PeakKey.TENSOR_FP16)
    key = tensor_key(fmt)
    if base is None:
        return None, f"{product.name} publishes no 16-bit Tensor Core peak"
    if key is None:
        return None, f"{fmt.value} is a scale format, not a matrix format"
    value = product.peak(key, sparse=True) if sparse else product.peak(key)
    if value is None:
        what = "2:4 sparse " if sparse else ""
        return None, f"{product.name} publishes no {what}{key.label} peak: its Tensor Cores " \
            f"do not run {fmt.value}" + (" with sparsity" if sparse else "")
    return value / base, (f"{key.label}{' 2:4 sparse' if sparse else ''} peak / BF16 Tensor "
                          "peak (catalog); an upper bound for compute-bound GEMMs")


def architectures_running(catalog: Catalog, fmt: NumberFormat) -> list[str]:
    """Architectures with a product that publishes a Tensor Core peak for ``fmt``."""
    key = tensor_key(fmt)
    if key is None or not key.is_tensor:
        return []
    names = []
    for arch in catalog.architectures:
        if any(p.peak(key) is not None or key in p.sparse_flops
               for p in catalog.products_of(arch)):
            names.append(arch.name)
    return names
