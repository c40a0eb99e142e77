"""The fitting both fit_*_efficiency scripts share: an even/odd split of the points by id,
a coordinate search over named moves minimising the mean absolute log error on the fit
half, and the error on both halves, so the held-out error is the one to quote."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from gpuarch.perf.efficiency import Efficiency
from gpuarch.validation.stats import ErrorSummary

Validate = Callable[[Efficiency, Sequence[Any]], ErrorSummary]
Move = Callable[[Efficiency, float], Efficiency]  # a parameter scaled by a factor


def log_loss(summary: ErrorSummary) -> float:
    return statistics.fmean(abs(math.log(r.predicted / r.published)) for r in summary.rows)


def coordinate_fit(eff: Efficiency, points: Sequence[Any], validate: Validate,
                   moves: Sequence[Move], rounds: int, bound_label: str) -> Efficiency:
    """Fit on the even half, print the error on the fit half, the held-out half and all."""
    points = sorted(points, key=lambda p: p.id)
    fit, held = points[0::2], points[1::2]
    best = log_loss(validate(eff, fit))
    step = 0.25
    for _ in range(rounds):
        for move in moves:
            for factor in (1 + step, 1 / (1 + step)):
                while True:
                    trial = move(eff, factor)
                    trial_loss = log_loss(validate(trial, fit))
                    if trial_loss < best - 1e-6:
                        eff, best = trial, trial_loss
                    else:
                        break
        step /= 2
    for label, subset in (("fit", fit), ("held out", held), ("all", points)):
        s = validate(eff, subset)
        print(f"{label:9} n={len(s.rows):3}  mean |error| = {s.mean_abs_error:6.1%}  "
              f"median = {s.median_abs_error:6.1%}  max = {s.max_abs_error:6.1%}  "
              f"{bound_label}: {s.share_within:6.1%}")
    return eff


SEED = 1e-4
"""Where a parameter at zero starts when a move raises it (scaling alone cannot leave zero;
the parameters that can be zero are times in seconds or fractions, for which 1e-4 is small)."""


def scale(name: str, cap: float | None = None) -> Move:
    """Scale one scalar parameter, optionally capped (fractions stay at most 1)."""
    def move(eff: Efficiency, factor: float) -> Efficiency:
        current = getattr(eff, name)
        value = current * factor if current or factor < 1 else SEED
        return eff.with_overrides({name: min(cap, value) if cap is not None else value})

    return move
