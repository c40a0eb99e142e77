"""Fit the GPU power curve of estimate/energy.py on measured GPU power while serving.

``gpu_power_w`` gives a GPU ``low_load_share`` of its board power with its Tensor Cores all
but idle, rising linearly to the full board power at ``full_power_hfu`` of the format's dense
peak. The pair is chosen on a grid to minimise the mean |model / measured - 1| of the H100
configurations of ML.ENERGY's v3 serving measurements (validation/data/power.toml,
[serving]), each at the utilisation its measured output rate and its prompts give (the
prompts' mean length as the serving validation fits it on the same runs:
scripts/fit_mlenergy_prompt.py). Printed: the best pair,
its error on those rows, and its error on what it was not fitted on: the B200
configurations and the three metered MLPerf Training runs (node power, with the node
overhead), beside the error of the constants in the code.

    python scripts/fit_power.py
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpuarch.catalog import load_catalog
from gpuarch.catalog.loader import Catalog
from gpuarch.estimate.energy import FULL_POWER_HFU, LOW_LOAD_SHARE, NODE_OVERHEAD, gpu_power_w
from gpuarch.validation.power import ServingPowerComparison, compare_serving, validate_power

FIT_GPU = "h100-sxm5-80gb"


def _arrays(catalog: Catalog, rows: Sequence[ServingPowerComparison]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Utilisation, measured watts a GPU and board power of each configuration."""
    return (np.array([r.utilisation for r in rows]), np.array([r.measured_w for r in rows]),
            np.array([catalog.product(r.row.gpu).tdp_w for r in rows], dtype=float))


def serving_error(low: float, full: float, data: tuple[np.ndarray, np.ndarray, np.ndarray]
                  ) -> tuple[float, float]:
    """Mean |model / measured - 1| and mean signed error of the curve (low, full)."""
    util, measured, tdp = data
    ratio = gpu_power_w(tdp, util, low, full) / measured - 1
    return float(np.mean(np.abs(ratio))), float(np.mean(ratio))


def fit(catalog: Catalog) -> tuple[float, float]:
    """The (low_load_share, full_power_hfu) pair of the grid that fits the H100 rows best."""
    data = _arrays(catalog, [r for r in compare_serving(catalog) if r.row.gpu == FIT_GPU])
    best = min(((round(float(low), 3), round(float(full), 3))
                for low in np.arange(0.30, 0.901, 0.005)
                for full in np.arange(0.05, 0.801, 0.005)),
               key=lambda pair: serving_error(*pair, data)[0])
    return best


def main() -> int:
    catalog = load_catalog()
    serving = compare_serving(catalog)
    training = validate_power(catalog)
    fit_rows = [r for r in serving if r.row.gpu == FIT_GPU]
    held_rows = [r for r in serving if r.row.gpu != FIT_GPU]
    fitted, held = _arrays(catalog, fit_rows), _arrays(catalog, held_rows)
    for name, (low, full) in (("in the code", (LOW_LOAD_SHARE, FULL_POWER_HFU)),
                              ("fitted", fit(catalog))):
        print(f"{name}: low_load_share {low:.3f}, full_power_hfu {full:.3f}")
        mae, mean = serving_error(low, full, fitted)
        print(f"  fitted on {len(fit_rows)} {FIT_GPU} serving configurations: mean |error| "
              f"{mae:.1%}, mean {mean:+.1%}")
        mae, mean = serving_error(low, full, held)
        print(f"  out of sample, {len(held_rows)} B200 serving configurations: mean |error| "
              f"{mae:.1%}, mean {mean:+.1%}")
        for r in training:
            tdp = catalog.product(r.gpu).tdp_w
            model = gpu_power_w(tdp, r.hfu, low, full) * (1 + NODE_OVERHEAD) * (r.gpus // r.nodes)
            print(f"  out of sample, {r.id} (node power): {model / r.measured_w - 1:+.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
