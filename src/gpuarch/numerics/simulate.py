"""Delayed vs current scaling over training steps, with a drifting or spiking tensor.

Delayed scaling (Transformer Engine) casts step t's tensor with a scale computed from the
amaxes of earlier steps (the history: ``max`` of the window or the ``most_recent``), then
records step t's amax. When the tensor grows faster than the history follows, values
overflow; when it shrinks, range is wasted (fewer bits used). Current scaling uses the
tensor's own amax and never overflows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np

from gpuarch.errors import GpuarchError
from gpuarch.numerics.formats import NumberFormat
from gpuarch.numerics.matmul import MAX_ELEMENTS, compare
from gpuarch.numerics.recipes import Recipe, check_margin, quantize, scale_from_amax

__all__ = ["MAX_STEPS", "AmaxAlgo", "Pattern", "SimStep", "simulate_scaling"]


MAX_STEPS = 100_000
"""The most steps one simulation runs (each draws and casts a whole tensor)."""

MAX_LEVEL_EXPONENT = 900
"""How far from 1 a drifting or decaying tensor may get, in powers of two: its last step's
magnitude, growth^(steps - 1), must stay within FP64 (2^1023), samples included."""


class AmaxAlgo(Enum):
    """How delayed scaling turns the history into one amax."""

    MAX = "max"
    MOST_RECENT = "most_recent"


class Pattern(Enum):
    """How the tensor's magnitude evolves over steps."""

    DRIFT = "drift"  # grows steadily (x growth per step)
    SPIKE = "spike"  # steady, with a 50x spike every `period` steps
    DECAY = "decay"  # shrinks steadily


@dataclass(frozen=True)
class SimStep:
    """One step: the tensor's amax, and both recipes' outcomes."""

    step: int
    amax: float
    delayed_scale: float
    delayed_overflow: int
    delayed_sqnr_db: float
    delayed_wasted_bits: float  # log2(max / (amax x scale)): unused range at the top
    current_overflow: int
    current_sqnr_db: float


def simulate_scaling(fmt: NumberFormat, *, steps: int = 50, size: int = 4096,
                     history: int = 16, algo: AmaxAlgo = AmaxAlgo.MAX, margin: int = 0,
                     pattern: Pattern = Pattern.DRIFT, growth: float = 1.15, period: int = 20,
                     seed: int = 0) -> list[SimStep]:
    """Run both recipes over ``steps`` steps of a synthetic tensor; deterministic per seed."""
    if size > MAX_ELEMENTS:
        raise GpuarchError(f"--size: {size:,} elements is more than the {MAX_ELEMENTS:,} the "
                           "lab emulates (512 MiB in FP64)")
    if steps > MAX_STEPS:
        raise GpuarchError(f"--steps: {steps:,} is more than the {MAX_STEPS:,} one "
                           "simulation runs")
    check_margin(margin)
    if pattern is not Pattern.SPIKE and growth > 0 \
            and (steps - 1) * abs(math.log2(growth)) > MAX_LEVEL_EXPONENT:
        moved = (steps - 1) * math.log2(growth) * (1 if pattern is Pattern.DRIFT else -1)
        raise GpuarchError(f"--growth: {growth:g} per step over {steps:,} steps scales the "
                           f"tensor by 2^{moved:.0f}, beyond the 2^+-{MAX_LEVEL_EXPONENT} "
                           "FP64 leaves room for; give a growth nearer 1 or fewer --steps")
    rng = np.random.default_rng(seed)
    past: list[float] = []
    out: list[SimStep] = []
    for t in range(steps):
        if pattern is Pattern.DRIFT:
            level = growth**t
        elif pattern is Pattern.DECAY:
            level = growth**-t
        else:
            level = 50.0 if t and t % period == 0 else 1.0
        x = rng.standard_normal(size) * level
        amax = float(np.max(np.abs(x)))
        if past:
            window = past[-history:]
            hist = max(window) if algo is AmaxAlgo.MAX else window[-1]
        else:
            hist = amax  # first step: no history yet, TE initialises from the tensor
        scale = float(scale_from_amax(hist, fmt, margin))
        delayed = quantize(x, fmt, Recipe.DELAYED, scale=scale)
        current = quantize(x, fmt, Recipe.CURRENT, margin=margin)
        d = compare(delayed.values, x)
        c = compare(current.values, x)
        used = amax * scale
        wasted = math.log2(fmt.max / used) if used > 0 else math.inf
        out.append(SimStep(t, amax, scale, delayed.overflow, d.sqnr_db, max(0.0, wasted),
                           current.overflow, c.sqnr_db))
        past.append(amax)
    return out
