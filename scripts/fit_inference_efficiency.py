"""Fit the inference-only efficiency parameters to published inference results, honestly.

Points (src/gpuarch/validation/data/inference.toml), sorted by id, are split in two folds
(even and odd positions; out_of_sample points in neither). Only the parameters that training
does not use are fitted here (the GEMM and attention efficiencies come from the training
fit), on both folds together; the script prints the fitted values, their error on the points
they were fitted on, the two-fold cross-validated error (each fold predicted by a fit to the
other alone), and the out-of-sample error.

    python scripts/fit_inference_efficiency.py [--rounds 5]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from _fit import coordinate_fit, cross_validate, scale
from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.validation.inference import load_inference_points, validate_inference
from gpuarch.validation.stats import ErrorSummary

PARAMS = ["decode_step_overhead_s", "prefill_overhead_s", "kv_read", "moe_gemm", "pcie_bus"]
FRACTIONS = {"kv_read", "moe_gemm", "pcie_bus"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    catalog = load_catalog()
    def validate(e: Efficiency, pts: Sequence[Any]) -> ErrorSummary:
        return validate_inference(catalog, e, pts)

    moves = [scale(n, 1.0 if n in FRACTIONS else None) for n in PARAMS]
    eff = cross_validate(lambda e, pts: coordinate_fit(e, pts, validate, moves, args.rounds),
                         DEFAULT_EFFICIENCY, load_inference_points(), validate)
    print("fitted parameters:")
    for key in PARAMS:
        print(f"  {key} = {getattr(eff, key)}")


if __name__ == "__main__":
    main()
