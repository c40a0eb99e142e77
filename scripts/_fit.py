"""The fitting both fit_*_efficiency scripts share: two-fold cross-validation over an
even/odd split of the points by id (points marked out_of_sample stay out of both folds), a
coordinate search over named moves or a grid over a few parameters minimising the mean
absolute log error, and the error on every group.

The parameters shipped are fitted on both folds together. The error to quote for points the
parameters were not fitted on is the cross-validated one: each fold predicted by the
parameters fitted on the other fold alone (every search starts from the same defaults), and
the out-of-sample points, which no fit sees."""

from __future__ import annotations

import itertools
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


def split(points: Sequence[Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """(fold A, fold B, out of sample): points marked ``out_of_sample`` in the data (added
    after the parameters they test were fitted) are in neither fold; the rest, sorted by id,
    alternate."""
    ordered = sorted(points, key=lambda p: p.id)
    later = [p for p in ordered if p.get("out_of_sample", False)]
    rest = [p for p in ordered if not p.get("out_of_sample", False)]
    return rest[0::2], rest[1::2], later


def summary_line(label: str, s: ErrorSummary, indent: str = "") -> None:
    """Print one group's error statistics on a line."""
    print(f"{indent}{label:15} n={len(s.rows):3}  mean |error| = {s.mean_abs_error:6.1%}  "
          f"median = {s.median_abs_error:6.1%}  max = {s.max_abs_error:6.1%}  "
          f"within {s.bound:.0%}: {s.share_within:6.1%}")


Fitter = Callable[[Efficiency, Sequence[Any]], Efficiency]


def cross_validate(fitter: Fitter, eff: Efficiency, points: Sequence[Any],
                   validate: Validate) -> Efficiency:
    """Fit each fold alone and both together (each search from ``eff``); print the error of
    the joint fit on the points it was fitted on, the cross-validated error (each fold
    predicted by the other fold's fit), the out-of-sample error and the error on all points;
    return the joint fit."""
    fold_a, fold_b, later = split(points)
    fit_a, fit_b = fitter(eff, fold_a), fitter(eff, fold_b)
    joint = fitter(eff, fold_a + fold_b)
    crossed = validate(fit_b, fold_a).rows + validate(fit_a, fold_b).rows
    fitted = validate(joint, fold_a + fold_b)
    summary_line("fitted (both)", fitted)
    summary_line("cross-validated", ErrorSummary(tuple(crossed), (), fitted.bound))
    if later:
        summary_line("out of sample", validate(joint, later))
    summary_line("all", validate(joint, list(points)))
    return joint


def grid_fit(eff: Efficiency, points: Sequence[Any], validate: Validate,
             grid: dict[str, list[float]]) -> Efficiency:
    """Try every combination of the listed values on ``points`` and keep the best (for a few
    correlated parameters, where a coordinate search stops in a local minimum)."""
    best, best_loss = eff, log_loss(validate(eff, points))
    for values in itertools.product(*grid.values()):
        trial = eff.with_overrides(dict(zip(grid, values, strict=True)))
        trial_loss = log_loss(validate(trial, points))
        if trial_loss < best_loss - 1e-9:
            best, best_loss = trial, trial_loss
    return best


def coordinate_fit(eff: Efficiency, points: Sequence[Any], validate: Validate,
                   moves: Sequence[Move], rounds: int,
                   loss: Callable[[ErrorSummary], float] = log_loss) -> Efficiency:
    """A coordinate search over ``moves`` minimising ``loss`` (the mean absolute log error
    unless given) on ``points``."""
    fit = list(points)
    best = loss(validate(eff, fit))
    step = 0.25
    for _ in range(rounds):
        for move in moves:
            for factor in (1 + step, 1 / (1 + step)):
                while True:
                    trial = move(eff, factor)
                    trial_loss = loss(validate(trial, fit))
                    if trial_loss < best - 1e-6:
                        eff, best = trial, trial_loss
                    else:
                        break
        step /= 2
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
