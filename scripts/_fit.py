"""The fitting both fit_*_efficiency scripts share: an even/odd split of the points by id
(points marked out_of_sample stay out of both halves), a coordinate search over named moves
or a grid over a few parameters minimising the mean absolute log error on the fit half, and
the error on every group, so the held-out and out-of-sample errors are the ones to quote."""

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
    """(fit half, held-out half, out of sample): points marked ``out_of_sample`` in the data
    (added after the parameters they test were fitted) are in neither half; the rest, sorted
    by id, alternate."""
    ordered = sorted(points, key=lambda p: p.id)
    later = [p for p in ordered if p.get("out_of_sample", False)]
    rest = [p for p in ordered if not p.get("out_of_sample", False)]
    return rest[0::2], rest[1::2], later


def report(eff: Efficiency, points: Sequence[Any], validate: Validate, bound_label: str
           ) -> None:
    """The error on the fit half, the held-out half, the out-of-sample points and all."""
    fit, held, later = split(points)
    for label, subset in (("fit", fit), ("held out", held), ("out of sample", later),
                          ("all", list(points))):
        if not subset:
            continue
        s = validate(eff, subset)
        print(f"{label:13} n={len(s.rows):3}  mean |error| = {s.mean_abs_error:6.1%}  "
              f"median = {s.median_abs_error:6.1%}  max = {s.max_abs_error:6.1%}  "
              f"{bound_label}: {s.share_within:6.1%}")


def grid_fit(eff: Efficiency, points: Sequence[Any], validate: Validate,
             grid: dict[str, list[float]], bound_label: str) -> Efficiency:
    """Try every combination of the listed values on the fit half and keep the best (for a
    few correlated parameters, where a coordinate search stops in a local minimum)."""
    fit = split(points)[0]
    best, best_loss = eff, log_loss(validate(eff, fit))
    for values in itertools.product(*grid.values()):
        trial = eff.with_overrides(dict(zip(grid, values, strict=True)))
        trial_loss = log_loss(validate(trial, fit))
        if trial_loss < best_loss - 1e-9:
            best, best_loss = trial, trial_loss
    report(best, points, validate, bound_label)
    return best


def coordinate_fit(eff: Efficiency, points: Sequence[Any], validate: Validate,
                   moves: Sequence[Move], rounds: int, bound_label: str) -> Efficiency:
    """Fit on the even half, print the error on the fit half, the held-out half and all."""
    fit = split(points)[0]
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
    report(eff, points, validate, bound_label)
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
