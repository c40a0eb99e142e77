"""How a GEMM's rate falls with a short reduction length K, per format: the roofline against
TensorRT-LLM's measured GEMMs.

NVIDIA's aiconfigurator times dense GEMMs with one TensorRT-LLM release on every GPU it
supports. ``data/gemm-k-trtllm.csv`` holds its M = N = 8,192 rows for every K from 128 to
16,384, in BF16, FP8 and NVFP4, on H100, H200, B200, GB200, B300 and GB300; its header names
the source. What is compared is the shape of the curve, not the plateau (which the fitted
efficiencies set): each GEMM's time per unit of K over the median time per unit of K at
K = 4,096-16,384, for the measurement and for the roofline
(``gpuarch validate gemm-kernels``). The roofline's K at which efficiency halves is
``Efficiency.gemm_half_dim`` times the format's peak over the 16-bit one
(``Device.math_over_16bit``); the comparison also prices each row with the factor held at 1,
so the two can be set side by side (tests/test_gemm_kernels.py).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpuarch.catalog.loader import Catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.precision import Precision
from gpuarch.perf.roofline import Device, Gemm, op_time
from gpuarch.validation.measured import (
    AICONFIGURATOR_SYSTEMS,
    aiconfigurator_devices,
    read_commented_csv,
)

__all__ = ["DATABASE", "GEMM_K_FILE", "PLATEAU_K", "SHORT_K", "SOURCE", "KRow", "compare",
           "gemm_device", "load_k_rows", "summarize"]

GEMM_K_FILE = Path(__file__).with_name("data") / "gemm-k-trtllm.csv"

DATABASE = ("NVIDIA aiconfigurator's collected database, TensorRT-LLM 1.3.0rc20 dense GEMMs "
            "(PyPI aiconfigurator-core 0.12.0: aiconfigurator_core/systems/data/<gpu>/gemm/"
            "trtllm/1.3.0rc20/gemm_perf.parquet)")
"""The dense GEMM timings this module's and ``gemm_ridge``'s rows are taken from."""

SOURCE = f"{DATABASE}, M = N = 8,192"
"""Where the rows come from (the file's header says more)."""

DEVICES = aiconfigurator_devices("h100_sxm", "h200_sxm", "b200_sxm", "gb200", "b300_sxm",
                                 "gb300")
"""The file's aiconfigurator systems and the catalog's keys."""

FORMATS = {"bfloat16": Precision.BF16, "fp8": Precision.FP8, "nvfp4": Precision.NVFP4}
"""The file's formats and the precision the roofline prices each at."""

PLATEAU_K = (4096, 16384)
"""K range whose median time per unit of K is a curve's plateau (1 on the relative scale)."""

SHORT_K = (256, 2048)
"""K range the summary's short-K error covers."""


@dataclass(frozen=True)
class KRow:
    """One measured GEMM's time per unit of K relative to its curve's plateau, and the
    roofline's for the same GEMM with the short-K length scaled by the format
    (``model_rel``) and not (``unscaled_rel``)."""

    device: str
    gemm_dtype: str
    k: int
    measured_rel: float
    model_rel: float
    unscaled_rel: float

    @property
    def ratio(self) -> float:
        """Model over measured, relative times: below 1 the roofline loses less to the short
        K than the measurement."""
        return self.model_rel / self.measured_rel

    @property
    def unscaled_ratio(self) -> float:
        """The same with the short-K length one length for every format."""
        return self.unscaled_rel / self.measured_rel


def gemm_device(catalog: Catalog, system: str, dtype: str) -> Device:
    """The roofline's device for one of aiconfigurator's systems (``AICONFIGURATOR_SYSTEMS``)
    and one of the database's GEMM formats (``FORMATS``)."""
    product = catalog.product(AICONFIGURATOR_SYSTEMS[system])
    generation = catalog.chip_of(product).sm.tensor_core_generation
    return Device.of(product, FORMATS[dtype], generation)


@cache
def load_k_rows(path: Path = GEMM_K_FILE) -> tuple[dict[str, str], ...]:
    """The file's rows as read (comment lines skipped)."""
    return read_commented_csv(path)


def _relative(per_k: dict[int, float]) -> dict[int, float]:
    lo, hi = PLATEAU_K
    plateau = statistics.median(v for k, v in per_k.items() if lo <= k <= hi)
    return {k: v / plateau for k, v in per_k.items()}


def compare(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY,
            rows: Iterable[dict[str, str]] | None = None) -> list[KRow]:
    """Each measured (GPU, format) curve beside the roofline's, K by K."""
    curves: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for r in load_k_rows() if rows is None else rows:
        curves[(r["device"], r["gemm_dtype"])][int(r["k"])] = float(r["latency_ms"]) / int(r["k"])
    out: list[KRow] = []
    for (device, dtype), measured in sorted(curves.items()):
        scaled = gemm_device(catalog, device, dtype)
        plain = dataclasses.replace(scaled, math_over_16bit=1.0)
        model = {k: float(op_time(Gemm(8192, 8192, k), scaled, efficiency)[0]) / k
                 for k in measured}
        unscaled = {k: float(op_time(Gemm(8192, 8192, k), plain, efficiency)[0]) / k
                    for k in measured}
        rel_m, rel_s, rel_u = _relative(measured), _relative(model), _relative(unscaled)
        out += [KRow(device, dtype, k, rel_m[k], rel_s[k], rel_u[k]) for k in sorted(measured)]
    return out


def summarize(rows: Iterable[KRow]) -> list[dict[str, object]]:
    """Per GPU and format, over K in ``SHORT_K``: how many GEMMs, the median model/measured
    ratio and the mean |ln ratio|, with the short-K length scaled by the format and not."""
    groups: dict[tuple[str, str], list[KRow]] = defaultdict(list)
    lo, hi = SHORT_K
    for r in rows:
        if lo <= r.k <= hi:
            groups[(r.device, r.gemm_dtype)].append(r)
    out: list[dict[str, object]] = []
    for (device, dtype), members in sorted(groups.items()):
        doc: dict[str, object] = {"device": device, "format": dtype, "gemms": len(members)}
        for prefix, ratios in (("", [r.ratio for r in members]),
                               ("unscaled_", [r.unscaled_ratio for r in members])):
            doc[f"{prefix}median_ratio"] = statistics.median(ratios)
            doc[f"{prefix}mean_abs_log_ratio"] = sum(abs(math.log(x)) for x in ratios) \
                / len(ratios)
        out.append(doc)
    return out
