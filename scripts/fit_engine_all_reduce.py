"""Fit the serving engines' one-shot all-reduce kernels on their measured all-reduces.

``perf/data/engine_all_reduce.toml`` prices a tensor-parallel all-reduce inside one NVLink
host as the faster of NCCL and the engine's one-shot kernel, latency[architecture][engine]
+ (n - 1) x bytes / (NVLink rate x bus). This script chooses one bus share for all and,
for each bus share on the grid, each architecture's and engine's latency on a 0.25 us grid,
minimising the mean |ln(model / measured)| over the rows of that architecture and engine
(src/gpuarch/validation/data/engine-allreduce.csv: NVIDIA aiconfigurator's measurements
under CUDA graphs, every size; the error of each bus share with its best latencies is
printed); then prints the best set as the data file's lines and its error per size band.

    python scripts/fit_engine_all_reduce.py
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np

from gpuarch.catalog import load_catalog
from gpuarch.perf.collectives import OneShotAllReduce, one_shot_all_reduce
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.units import Unit, from_si, to_si
from gpuarch.validation.collectives import DEVICES
from gpuarch.validation.engine_all_reduce import band_errors, compare, load_rows
from gpuarch.validation.measured import mean_abs_log_ratio

BUS = np.round(np.arange(0.40, 0.801, 0.05), 2)
LATENCY_US = np.round(np.arange(2.0, 9.001, 0.25), 2)


def main() -> None:
    catalog = load_catalog()
    shipped = one_shot_all_reduce()
    cells: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for r in load_rows():
        arch = catalog.product(DEVICES[r["device"]]).architecture.lower()
        cells[(arch, r["engine"])].append(r)
    best: tuple[float, OneShotAllReduce] | None = None
    for bus in BUS:
        latency: dict[str, dict[str, float]] = defaultdict(dict)
        for (arch, engine), rows in sorted(cells.items()):
            errors = []
            for us in LATENCY_US:
                trial = dataclasses.replace(
                    shipped, bus=float(bus),
                    latency_s={**shipped.latency_s, arch: {**shipped.latency_s[arch],
                                                          engine: to_si(float(us), Unit.US)}})
                errors.append(mean_abs_log_ratio(compare(catalog, DEFAULT_EFFICIENCY, rows,
                                                         trial)))
            latency[arch][engine] = to_si(float(LATENCY_US[int(np.argmin(errors))]), Unit.US)
        terms = dataclasses.replace(shipped, bus=float(bus), latency_s=dict(latency))
        err = mean_abs_log_ratio(compare(catalog, DEFAULT_EFFICIENCY, None, terms))
        print(f"bus {bus:.2f}: mean |ln(model/measured)| {err:.3f}")
        if best is None or err < best[0]:
            best = (err, terms)
    assert best is not None
    err, terms = best
    print(f"\nbest: bus = {terms.bus}, mean |ln| {err:.3f}")
    print("[one_shot.latency_us]")
    for arch, by_engine in terms.latency_s.items():
        cells_text = ", ".join(f"{e} = {from_si(v, Unit.US):g}" for e, v in by_engine.items())
        print(f"{arch} = {{ {cells_text} }}")
    for band, value in band_errors(compare(catalog, DEFAULT_EFFICIENCY, None, terms)).items():
        print(f"  {band}: {value:.3f}")


if __name__ == "__main__":
    main()
