"""The numerics lab: number formats, scaling recipes, emulated quantized matmuls, delayed
scaling simulation and 2:4 sparsity, on the CPU with NumPy. Knows nothing of GPU speed
beyond the catalog's peaks."""

from gpuarch.numerics.formats import FormatSpec, NumberFormat, Overflow, cast
from gpuarch.numerics.matmul import (
    Distribution,
    ErrorStats,
    MatmulResult,
    compare,
    emulate_matmul,
    make_operands,
    predicted_speedup,
)
from gpuarch.numerics.recipes import Quantized, Recipe, quantize, scale_from_amax
from gpuarch.numerics.simulate import AmaxAlgo, Pattern, SimStep, simulate_scaling
from gpuarch.numerics.sparsity import is_2to4, prune_2to4

__all__ = [
    "AmaxAlgo",
    "Distribution",
    "ErrorStats",
    "FormatSpec",
    "MatmulResult",
    "NumberFormat",
    "Overflow",
    "Pattern",
    "Quantized",
    "Recipe",
    "SimStep",
    "cast",
    "compare",
    "emulate_matmul",
    "is_2to4",
    "make_operands",
    "predicted_speedup",
    "prune_2to4",
    "quantize",
    "scale_from_amax",
    "simulate_scaling",
]
