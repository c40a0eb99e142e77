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

from _fit import Move, coordinate_fit, scale
from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.validation.training import load_training_points, validate_training

SCALARS = ["gemm_fp8", "attention", "layer_overhead_s", "dp_comm_exposed", "tp_comm_exposed",
           "pp_comm_exposed", "gemm_half_dim", "memory", "kernel_overhead_s",
           "moe_grouped_gemm", "moe_layer_overhead_s"]
FRACTIONS = {"gemm_fp8", "attention", "dp_comm_exposed", "tp_comm_exposed", "pp_comm_exposed",
             "memory", "moe_grouped_gemm"}
GENERATIONS = [1, 3, 4, 5]  # Tensor Core generations with points (V100, A100, H100, B200)


def generation(g: int) -> Move:
    """Scale the GEMM efficiency of Tensor Core generation ``g`` (capped at 0.85)."""
    def move(eff: Efficiency, factor: float) -> Efficiency:
        gens = list(eff.gemm_by_generation)
        gens[g - 1] = min(0.85, gens[g - 1] * factor)
        return eff.with_overrides({"gemm_by_generation": gens})

    return move


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--only", default="", metavar="NAME,...",
                        help="fit only these parameters, the others stay at their defaults "
                             "(e.g. the MoE terms after adding MoE points)")
    args = parser.parse_args()
    catalog = load_catalog()
    only = [n for n in args.only.split(",") if n]
    unknown = sorted(set(only) - set(SCALARS))
    if unknown:
        parser.error(f"--only: unknown parameter(s) {', '.join(unknown)}; "
                     f"choose from {', '.join(SCALARS)}")
    moves = [*(scale(n, 1.0 if n in FRACTIONS else None) for n in only or SCALARS),
             *(generation(g) for g in ([] if only else GENERATIONS))]
    eff = coordinate_fit(DEFAULT_EFFICIENCY, load_training_points(),
                         lambda e, pts: validate_training(catalog, e, pts), moves,
                         args.rounds, "within 20%")
    print("fitted parameters:")
    for key, value in eff.as_dict().items():
        print(f"  {key} = {value}")


if __name__ == "__main__":
    main()
