"""Fit the training model's efficiency parameters to the published points, honestly.

The points (src/gpuarch/validation/data/training.toml), sorted by id, are split in two:
even positions are fitted on, odd positions are held out. A coordinate search over the few
named parameters minimises the mean absolute log error on the fit half; the script prints
the fitted values and the error on both halves (and on all points) so the held-out error is
the one to quote.

    python scripts/fit_training_efficiency.py [--rounds 6]
"""

from __future__ import annotations

import argparse
import math
import statistics

from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.validation.training import load_training_points, validate_training

SCALARS = ["gemm_fp8", "attention", "layer_overhead_s", "dp_comm_exposed", "tp_comm_exposed",
           "pp_comm_exposed", "gemm_half_dim", "memory", "kernel_overhead_s"]
GENERATIONS = [1, 3, 4, 5]  # Tensor Core generations with points (V100, A100, H100, B200)


def loss(eff: Efficiency, points: list, catalog) -> float:  # type: ignore[no-untyped-def]
    summary = validate_training(catalog, eff, points)
    return statistics.fmean(abs(math.log(r.predicted / r.published)) for r in summary.rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    catalog = load_catalog()
    points = sorted(load_training_points(), key=lambda p: p.id)
    fit, held = points[0::2], points[1::2]
    eff = DEFAULT_EFFICIENCY
    best = loss(eff, fit, catalog)
    step = 0.25
    for _ in range(args.rounds):
        for name in [*SCALARS, *(f"gen{g}" for g in GENERATIONS)]:
            for factor in (1 + step, 1 / (1 + step)):
                while True:
                    if name.startswith("gen"):
                        g = int(name[3:])
                        gens = list(eff.gemm_by_generation)
                        gens[g - 1] = min(0.85, gens[g - 1] * factor)
                        trial = eff.with_overrides({"gemm_by_generation": gens})
                    else:
                        value = getattr(eff, name) * factor
                        if name in ("gemm_fp8", "attention", "dp_comm_exposed",
                                    "tp_comm_exposed", "pp_comm_exposed", "memory"):
                            value = min(1.0, value)
                        trial = eff.with_overrides({name: value})
                    trial_loss = loss(trial, fit, catalog)
                    if trial_loss < best - 1e-6:
                        eff, best = trial, trial_loss
                    else:
                        break
        step /= 2
    for label, subset in (("fit", fit), ("held out", held), ("all", points)):
        s = validate_training(catalog, eff, subset)
        print(f"{label:9} points={len(s.rows):3}  mean |error| = {s.mean_abs_error:6.1%}  "
              f"median = {s.median_abs_error:6.1%}  max = {s.max_abs_error:6.1%}  "
              f"within 20%: {s.share_within:6.1%}")
    print("fitted parameters:")
    for key, value in eff.as_dict().items():
        print(f"  {key} = {value}")


if __name__ == "__main__":
    main()
