"""Fit the inference-only efficiency parameters to published inference results, honestly.

Points (src/gpuarch/validation/data/inference.toml), sorted by id, are split in two folds
(even and odd positions; out_of_sample points in neither). Only the parameters that training
does not use are fitted here (the GEMM and attention efficiencies come from the training
fit), on both folds together; the script prints the fitted values, their error on the points
they were fitted on, the two-fold cross-validated error (each fold predicted by a fit to the
other alone), and the out-of-sample error.

    python scripts/fit_inference_efficiency.py [--rounds 5] [--only NAME,...]

The shipped values (2026-12-07, with the engines' own all-reduce kernels): ``--only
decode_step_overhead_s,prefill_overhead_s,all_reduce_wait_s``, ``kv_read``, ``moe_gemm`` and
``pcie_bus`` held at their earlier fit (freeing them too moves the out-of-sample error by
0.1 points; docs/performance-model.md, "The engines' all-reduce kernels").
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

PARAMS = ["decode_step_overhead_s", "prefill_overhead_s", "kv_read", "moe_gemm", "pcie_bus",
          "all_reduce_wait_s"]
FRACTIONS = {"kv_read", "moe_gemm", "pcie_bus"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="", metavar="NAME,...",
                        help="fit only these parameters, the others stay at their defaults")
    args = parser.parse_args()
    only = [n for n in args.only.split(",") if n]
    unknown = sorted(set(only) - set(PARAMS))
    if unknown:
        parser.error(f"--only: unknown parameter(s) {', '.join(unknown)}; "
                     f"choose from {', '.join(PARAMS)}")
    catalog = load_catalog()
    def validate(e: Efficiency, pts: Sequence[Any]) -> ErrorSummary:
        return validate_inference(catalog, e, pts)

    moves = [scale(n, 1.0 if n in FRACTIONS else None) for n in only or PARAMS]
    eff = cross_validate(lambda e, pts: coordinate_fit(e, pts, validate, moves, args.rounds),
                         DEFAULT_EFFICIENCY, load_inference_points(), validate)
    print("fitted parameters:")
    for key in only or PARAMS:
        print(f"  {key} = {getattr(eff, key)}")


if __name__ == "__main__":
    main()
