"""Set the rate of DeepGEMM's grouped FP8 expert GEMMs from its published measurements.

``Efficiency.moe_gemm_deepgemm`` is the multiplier on GEMM efficiency that the serving model
uses for the routed experts' GEMMs on SGLang's wide-EP path (``--moe-kernels sglang-deepep``:
block-scaled FP8 experts on Hopper run as DeepGEMM's grouped GEMMs). Its value is where the
mean |ln(model/measured)| over the ten grouped GEMMs of DeepGEMM's README
(``src/gpuarch/validation/data/grouped-gemm-deepgemm.csv``, via
``validation.deepgemm.compare``) is least, scanned from 0.6 to 1.4; every other parameter as
shipped. No validation figure is used.

    python scripts/fit_deepgemm.py
"""

from __future__ import annotations

import math

from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.validation.deepgemm import compare
from gpuarch.validation.measured import mean_abs_log_ratio

PARAMETER = "moe_gemm_deepgemm"


def main() -> None:
    catalog = load_catalog()
    scores = []
    for step in range(41):
        value = round(0.6 + 0.02 * step, 2)
        rows = compare(catalog, DEFAULT_EFFICIENCY.with_overrides({PARAMETER: value}))
        layouts = {layout: math.exp(sum(math.log(r.ratio) for r in rows
                                        if r.layout == layout)
                                    / sum(r.layout == layout for r in rows))
                   for layout in ("contiguous", "masked")}
        scores.append((mean_abs_log_ratio(rows), value))
        print(f"{PARAMETER} {value:.2f}: mean |ln| {scores[-1][0]:.3f}; geometric mean "
              "model/measured " + ", ".join(f"{k} {v:.2f}" for k, v in layouts.items()))
    err, best = min(scores)
    print(f"least: {best:.2f} (mean |ln| {err:.3f}); shipped "
          f"{getattr(DEFAULT_EFFICIENCY, PARAMETER):.2f}")


if __name__ == "__main__":
    main()
