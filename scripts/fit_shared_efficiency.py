"""Fit the efficiencies the training and serving models share on both sets of points at once.

The GEMM efficiency of each Tensor Core generation, the FP8 and FP4 GEMM multipliers and
the fused attention efficiency price the same kernels in a training step and in a serving
engine's prefill and decode. Fitting them on the training points alone
(scripts/fit_training_efficiency.py) serves training and leaves serving to live with the
result; this script fits them on the fitted points of both validations together, each set's
mean absolute log error weighted equally (the serving set has twice the points), with the
parameters that only one model uses left at their defaults.

Each set is split in two folds as the other scripts do (by id, even and odd positions;
out_of_sample points in neither). The script prints, per set, the error of the joint fit on
the points it was fitted on, the two-fold cross-validated error (each fold predicted by the
parameters fitted on the other fold of both sets alone), the out-of-sample error and the
error on all points, then the fitted values.

    python scripts/fit_shared_efficiency.py [--rounds 4]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from typing import Any

from _fit import coordinate_fit, log_loss, scale, split, summary_line
from fit_training_efficiency import generation
from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.validation.inference import load_inference_points, validate_inference
from gpuarch.validation.stats import ErrorSummary
from gpuarch.validation.training import load_training_points, validate_training

SHARED = ["gemm_fp8", "gemm_fp4", "attention"]
SHARED_GENERATIONS = [3, 4, 5]  # A100, H100/H200, Blackwell: the generations both sets have
TRAINING_BOUND, SERVING_BOUND = 0.20, 0.35


class Joint:
    """The two validations as one: a point list of both kinds in, both summaries out."""

    def __init__(self) -> None:
        self.catalog = load_catalog()
        self.training_ids = {p.id for p in load_training_points()}

    def validate(self, eff: Efficiency, points: Sequence[Any]
                 ) -> tuple[ErrorSummary, ErrorSummary]:
        train = [p for p in points if p.id in self.training_ids]
        serve = [p for p in points if p.id not in self.training_ids]
        return (validate_training(self.catalog, eff, train),
                validate_inference(self.catalog, eff, serve))


def joint_loss(summaries: tuple[ErrorSummary, ErrorSummary]) -> float:
    """The two sets' mean absolute log errors, weighted equally (a set with no points
    counts zero)."""
    return statistics.fmean(log_loss(s) if s.rows else 0.0 for s in summaries)


def _line(label: str, s: ErrorSummary) -> None:
    summary_line(label, s, indent="  ")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    joint = Joint()
    moves = [*(scale(n, 1.0) for n in SHARED), *(generation(g) for g in SHARED_GENERATIONS)]

    def fit(points: Sequence[Any]) -> Efficiency:
        return coordinate_fit(DEFAULT_EFFICIENCY, points, joint.validate, moves, args.rounds,
                              loss=joint_loss)

    train_a, train_b, train_later = split(load_training_points())
    serve_a, serve_b, serve_later = split(load_inference_points())
    fold_a, fold_b = train_a + serve_a, train_b + serve_b
    fit_a, fit_b = fit(fold_a), fit(fold_b)
    both = fit(fold_a + fold_b)
    crossed = [joint.validate(fit_b, fold_a), joint.validate(fit_a, fold_b)]
    for k, (name, later, bound) in enumerate((("training", train_later, TRAINING_BOUND),
                                              ("serving", serve_later, SERVING_BOUND))):
        print(f"{name}:")
        for label, params in (("defaults", DEFAULT_EFFICIENCY), ("fitted (both)", both)):
            _line(label, joint.validate(params, fold_a + fold_b)[k])
        _line("cross-validated", ErrorSummary(
            tuple(crossed[0][k].rows) + tuple(crossed[1][k].rows), (), bound))
        for label, params in (("out of sample", both), ("oos defaults", DEFAULT_EFFICIENCY)):
            _line(label, joint.validate(params, later)[k])
        _line("all", joint.validate(both, [*fold_a, *fold_b, *later])[k])
        _line("all defaults", joint.validate(DEFAULT_EFFICIENCY,
                                             [*fold_a, *fold_b, *later])[k])
    print("fitted parameters (fold A, fold B, both):")
    for name in SHARED:
        print(f"  {name} = {getattr(fit_a, name):.3f}, {getattr(fit_b, name):.3f}, "
              f"{getattr(both, name):.3f}")
    for g in SHARED_GENERATIONS:
        print(f"  gemm_by_generation[{g}] = {fit_a.gemm_by_generation[g - 1]:.3f}, "
              f"{fit_b.gemm_by_generation[g - 1]:.3f}, {both.gemm_by_generation[g - 1]:.3f}")


if __name__ == "__main__":
    main()
