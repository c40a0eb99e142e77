"""Fit the inference-only efficiency parameters to published inference results, honestly.

Points (src/gpuarch/validation/data/inference.toml), sorted by id, are split in two: even
positions are fitted on, odd positions held out. Only the parameters that training does not
use are fitted here (the GEMM and attention efficiencies come from the training fit). The
script prints the fitted values and the errors on both halves.

    python scripts/fit_inference_efficiency.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import math
import statistics

from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.validation.inference import load_inference_points, validate_inference

PARAMS = ["decode_step_overhead_s", "prefill_overhead_s", "kv_read", "moe_gemm"]
FRACTIONS = {"kv_read", "moe_gemm"}


def loss(eff: Efficiency, points: list, catalog) -> float:  # type: ignore[no-untyped-def]
    s = validate_inference(catalog, eff, points)
    return statistics.fmean(abs(math.log(r.predicted / r.published)) for r in s.rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    catalog = load_catalog()
    points = sorted(load_inference_points(), key=lambda p: p.id)
    fit, held = points[0::2], points[1::2]
    eff = DEFAULT_EFFICIENCY
    best = loss(eff, fit, catalog)
    step = 0.25
    for _ in range(args.rounds):
        for name in PARAMS:
            for factor in (1 + step, 1 / (1 + step)):
                while True:
                    value = getattr(eff, name) * factor
                    if name in FRACTIONS:
                        value = min(1.0, value)
                    trial = eff.with_overrides({name: value})
                    trial_loss = loss(trial, fit, catalog)
                    if trial_loss < best - 1e-6:
                        eff, best = trial, trial_loss
                    else:
                        break
        step /= 2
    for label, subset in (("fit", fit), ("held out", held), ("all", points)):
        s = validate_inference(catalog, eff, subset)
        print(f"{label:9} figures={len(s.rows):3}  mean |error| = {s.mean_abs_error:6.1%}  "
              f"median = {s.median_abs_error:6.1%}  max = {s.max_abs_error:6.1%}  "
              f"within 35%: {s.share_within:6.1%}")
    print("fitted parameters:")
    for key in PARAMS:
        print(f"  {key} = {getattr(eff, key)}")


if __name__ == "__main__":
    main()
