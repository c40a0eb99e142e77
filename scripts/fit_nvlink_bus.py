"""Fit the NVLink bus efficiency of the collectives model on measured NCCL collectives.

``Efficiency.nvlink_bus`` (the share of the per-direction NVLink rate a collective reaches
when the group fills the node) and ``Efficiency.nvlink_small_group`` (how much less a small
group reaches: ``nvlink_bus x (1 - nvlink_small_group / ranks)``) are chosen on a grid to
minimise the mean |ln(model / measured)| of the all-gathers and reduce-scatters of 8 MiB and
more that NVIDIA's aiconfigurator measured on NVSwitch systems
(src/gpuarch/validation/data/nccl-nvlink.csv): the ring collectives that training's data-
and tensor-parallel traffic runs, at the sizes where bandwidth, not latency, sets the time.
Prints the best pair overall and per GPU family, and the fit's quality per family.

Then NCCL's latency scale per architecture (``perf/data/nccl.toml`` [nvlink_latency]: the
factor on NCCL's table of base and NVLink-hop latencies) on the collectives below 8 MiB of
each family, all four kinds, where latency sets or shares the time.

    python scripts/fit_nvlink_bus.py [--devices h100_sxm,h200_sxm,...]
"""

from __future__ import annotations

import argparse
import dataclasses
from collections import defaultdict

import numpy as np

import gpuarch.perf.collectives as collectives
from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.validation.collectives import (
    DEVICES,
    band_of,
    compare,
    load_collective_rows,
    mean_abs_log_ratio,
)

LATENCY_SCALES = np.round(np.arange(0.6, 3.001, 0.1), 1)
FITTED = ("all_gather", "reduce_scatter")
BUS = np.round(np.arange(0.60, 0.951, 0.01), 2)
SMALL = np.round(np.arange(0.0, 1.001, 0.02), 2)


def architecture(device: str) -> str:
    """The catalog's architecture (lower case) of one of the source's devices."""
    return load_catalog().product(DEVICES[device]).architecture.lower()


def fit(rows: list[dict[str, str]]) -> tuple[float, float, float]:
    """(nvlink_bus, nvlink_small_group, mean |ln ratio|) that fit ``rows`` best."""
    catalog = load_catalog()
    best = (0.0, 0.0, float("inf"))
    for bus in BUS:
        for small in SMALL:
            eff = dataclasses.replace(DEFAULT_EFFICIENCY, nvlink_bus=float(bus),
                                      nvlink_small_group=float(small))
            err = mean_abs_log_ratio(compare(catalog, eff, rows))
            if err < best[2]:
                best = (float(bus), float(small), err)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", default=",".join(DEVICES),
                    help="the source's device names to fit on (default: all)")
    args = ap.parse_args()
    devices = set(args.devices.split(","))
    rows = [r for r in load_collective_rows() if r["device"] in devices
            and r["collective"] in FITTED and band_of(int(r["elements"])) == "bandwidth"]
    bus, small, err = fit(rows)
    print(f"all ({len(rows)} collectives): nvlink_bus {bus:.2f}, nvlink_small_group "
          f"{small:.2f}, mean |ln(model/measured)| {err:.3f}")
    by_family: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        by_family[architecture(r["device"])].append(r)
    eff = dataclasses.replace(DEFAULT_EFFICIENCY, nvlink_bus=bus, nvlink_small_group=small)
    catalog = load_catalog()
    for family, members in by_family.items():
        own = fit(members)
        shared = mean_abs_log_ratio(compare(catalog, eff, members))
        print(f"{family} ({len(members)}): with the pair above {shared:.3f}; own best "
              f"nvlink_bus {own[0]:.2f}, nvlink_small_group {own[1]:.2f} ({own[2]:.3f})")
    main_latency(devices)


def fit_latency(rows: list[dict[str, str]], architecture: str) -> tuple[float, float]:
    """(latency scale, mean |ln ratio|) that fit ``rows`` best, the other architectures'
    scales as shipped."""
    shipped = collectives._nvlink_latency_scales()
    catalog = load_catalog()
    best = (1.0, float("inf"))
    try:
        for trial in LATENCY_SCALES:
            scales = {**shipped, architecture: float(trial)}
            collectives._nvlink_latency_scales = lambda scales=scales: scales  # type: ignore
            err = mean_abs_log_ratio(compare(catalog, rows=rows))
            if err < best[1]:
                best = (float(trial), err)
    finally:
        collectives._nvlink_latency_scales = lambda: shipped  # type: ignore
    return best


def main_latency(devices: set[str]) -> None:
    by_family: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in load_collective_rows():
        if r["device"] in devices and band_of(int(r["elements"])) != "bandwidth":
            by_family[architecture(r["device"])].append(r)
    catalog = load_catalog()
    for family, members in by_family.items():
        scale, err = fit_latency(members, family)
        shipped = mean_abs_log_ratio(compare(catalog, rows=members))
        print(f"{family} ({len(members)} below 8 MiB): latency scale {scale:.1f}, mean |ln| "
              f"{err:.3f} (as shipped {shipped:.3f})")


if __name__ == "__main__":
    main()
