"""Fit the inference-only efficiency parameters to published inference results, honestly.

Points (src/gpuarch/validation/data/inference.toml), sorted by id, are split in two: even
positions are fitted on, odd positions held out. Only the parameters that training does not
use are fitted here (the GEMM and attention efficiencies come from the training fit). The
script prints the fitted values and the errors on both halves.

    python scripts/fit_inference_efficiency.py [--rounds 5]
"""

from __future__ import annotations

import argparse

from _fit import coordinate_fit, scale
from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.validation.inference import load_inference_points, validate_inference

PARAMS = ["decode_step_overhead_s", "prefill_overhead_s", "kv_read", "moe_gemm"]
FRACTIONS = {"kv_read", "moe_gemm"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    catalog = load_catalog()
    eff = coordinate_fit(DEFAULT_EFFICIENCY, load_inference_points(),
                         lambda e, pts: validate_inference(catalog, e, pts),
                         [scale(n, 1.0 if n in FRACTIONS else None) for n in PARAMS],
                         args.rounds, "within 35%")
    print("fitted parameters:")
    for key in PARAMS:
        print(f"  {key} = {getattr(eff, key)}")


if __name__ == "__main__":
    main()
