"""Fit the serving model's one-shot MoE all-to-all on measured dispatch and combine kernels.

``Efficiency.moe_dispatch_latency_s`` (a kernel's fixed time), ``moe_dispatch_peer_latency_s``
(what each further GPU of the group adds) and ``moe_dispatch_bus`` (the share of the
per-direction NVLink rate the kernel's remote bytes reach) are chosen on a grid to minimise the
mean |ln(model / measured)| of TensorRT-LLM's NVLink two-sided all-to-all on GB200 NVL72 (EP
2-64, 1-65,536 tokens; src/gpuarch/validation/data/moe-dispatch.csv, source trtllm-gb200).
Then, with those, ``moe_dispatch_latency_trtllm_deepep_s`` and
``moe_combine_latency_trtllm_deepep_s`` (the fixed times of TensorRT-LLM's DeepEP
low-latency path on 8-GPU boards) on a 1 us grid, each on its phase's rows of that source
(trtllm-deepep-hgx). Prints the fitted values, the fit on their rows, and all of them on
the rows not fitted (DeepEP on one H100 node and on H800 over InfiniBand).

    python scripts/fit_moe_dispatch.py
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.units import Unit, to_si
from gpuarch.validation.measured import mean_abs_log_ratio
from gpuarch.validation.moe_dispatch import (
    FITTED_SOURCE,
    FITTED_SOURCES,
    compare,
    load_dispatch_rows,
)

COARSE = (np.arange(0.50, 0.901, 0.05), np.arange(6.0, 16.01, 1.0), np.arange(0.0, 0.401, 0.05))
"""The first grid: moe_dispatch_bus, latency (us), per-peer latency (us)."""

FINE_STEPS = (0.01, 0.1, 0.005)
"""The second grid's steps, five each way around the first grid's best."""

DEEPEP_US = np.arange(10.0, 120.01, 1.0)
"""The grid of TensorRT-LLM's DeepEP fixed times (us)."""

DEEPEP_FIELDS = {"dispatch": "moe_dispatch_latency_trtllm_deepep_s",
                 "combine": "moe_combine_latency_trtllm_deepep_s"}


def main() -> None:
    catalog = load_catalog()
    rows = load_dispatch_rows()
    fitted = [r for r in rows if r["source"] == FITTED_SOURCE]
    def search(grid: tuple[np.ndarray, np.ndarray, np.ndarray]
               ) -> tuple[float, float, float, float]:
        best = (0.0, 0.0, 0.0, float("inf"))
        for bus in grid[0]:
            for latency in grid[1]:
                for peer in grid[2]:
                    if bus <= 0 or latency < 0 or peer < 0:
                        continue
                    eff = dataclasses.replace(
                        DEFAULT_EFFICIENCY, moe_dispatch_bus=float(bus),
                        moe_dispatch_latency_s=to_si(float(latency), Unit.US),
                        moe_dispatch_peer_latency_s=to_si(float(peer), Unit.US))
                    err = mean_abs_log_ratio(compare(catalog, eff, fitted))
                    if err < best[3]:
                        best = (round(float(bus), 3), round(float(latency), 2),
                                round(float(peer), 3), err)
        return best

    first = search(COARSE)
    fine = tuple(centre + step * np.arange(-5, 6)
                 for centre, step in zip(first[:3], FINE_STEPS, strict=True))
    bus, latency, peer, err = search(fine)  # type: ignore[arg-type]
    print(f"moe_dispatch_bus {bus:.2f}, moe_dispatch_latency_s {latency:.1f} us, "
          f"moe_dispatch_peer_latency_s {peer:.2f} us: mean |ln| {err:.3f} over "
          f"{len(fitted)} {FITTED_SOURCE} rows")
    eff = dataclasses.replace(DEFAULT_EFFICIENCY, moe_dispatch_bus=bus,
                              moe_dispatch_latency_s=to_si(latency, Unit.US),
                              moe_dispatch_peer_latency_s=to_si(peer, Unit.US))
    hgx = FITTED_SOURCES[1]
    for phase, name in DEEPEP_FIELDS.items():
        part = [r for r in rows if r["source"] == hgx and r["phase"] == phase]
        errors = [(mean_abs_log_ratio(compare(catalog, dataclasses.replace(
            eff, **{name: to_si(float(us), Unit.US)}), part)), float(us)) for us in DEEPEP_US]
        best_err, best_us = min(errors)
        eff = dataclasses.replace(eff, **{name: to_si(best_us, Unit.US)})
        print(f"{name} {best_us:.0f} us: mean |ln| {best_err:.3f} over {len(part)} {hgx} "
              f"{phase} rows")
    for source in sorted({r["source"] for r in rows} - set(FITTED_SOURCES)):
        part = [r for r in rows if r["source"] == source]
        print(f"  not fitted: {source}, {len(part)} rows, mean |ln| "
              f"{mean_abs_log_ratio(compare(catalog, eff, part)):.3f}")


if __name__ == "__main__":
    main()
