"""How a GEMM's math and its operands' memory stream overlap near the roofline's ridge point:
the roofline against TensorRT-LLM's measured GEMMs across M.

NVIDIA's aiconfigurator times dense GEMMs with one TensorRT-LLM release on every GPU it
supports. ``data/gemm-m-trtllm.csv`` holds its rows with N and K each 4,096, 8,192 or 16,384
and M from 1 to 32,768, in BF16 and FP8, on H100, H200, B200 and GB200, which set the
exponent, and held out, L40S (BF16, FP8) and A100 (BF16, TensorRT-LLM 1.0.0); its header names
the source. A GEMM of few rows is its weights' stream, one of many rows its math; between them,
where the two take about as long, the measured GEMMs run slower than either (the pipeline
does not hide one wholly behind the other). The roofline prices a GEMM as
(compute^p + memory^p)^(1/p) (``Efficiency.gemm_overlap``); this module sets each measured
GEMM beside that time for any p, the plain maximum included (p infinite).

What is compared is the shape across M, not the level (which the fitted efficiencies set):
each GEMM's model/measured ratio over its group's (GPU and format) median ratio. Only GEMMs
of ``MIN_MEASURED_S`` and longer are counted: shorter ones carry fixed costs (the launch, the
separate quantizing kernel of the FP8 path) that the roofline does not price
(``gpuarch validate gemm-ridge``; tests/test_gemm_ridge.py).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuarch.catalog.loader import Catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.roofline import Device, Gemm, op_time, ridge_time
from gpuarch.units import Unit, to_si
from gpuarch.validation.gemm_kernels import DATABASE, gemm_device
from gpuarch.validation.gemm_kernels import FORMATS as KERNEL_FORMATS
from gpuarch.validation.measured import aiconfigurator_devices, read_commented_csv

__all__ = ["GEMM_M_FILE", "HELD_OUT", "MIN_MEASURED_S", "OVERLAPS", "RIDGE_BAND", "SOURCE", "MRow",
           "compare", "load_m_rows", "overlap_errors", "summarize"]

GEMM_M_FILE = Path(__file__).with_name("data") / "gemm-m-trtllm.csv"

SOURCE = f"{DATABASE}, N and K 4,096-16,384, M 1-32,768 (A100's from TensorRT-LLM 1.0.0)"
"""Where the rows come from (the file's header says more)."""

DEVICES = aiconfigurator_devices("h100_sxm", "h200_sxm", "b200_sxm", "gb200", "a100_sxm",
                                 "l40s")
"""The file's aiconfigurator systems and the catalog's keys."""

HELD_OUT = ("a100_sxm", "l40s")
"""Systems whose GEMMs did not set the exponent: a check on GPUs it was not chosen on."""

FORMATS = {name: KERNEL_FORMATS[name] for name in ("bfloat16", "fp8")}
"""The file's formats and the precision the roofline prices each at."""

MIN_MEASURED_S = 100e-6
"""Shortest measured GEMM counted (seconds)."""

RIDGE_BAND = (0.5, 2.0)
"""Compute time over memory time of the GEMMs the summary calls "at the ridge"."""

OVERLAPS = (2.0, 2.5, 3.0, 4.0, 6.0, math.inf)
"""The exponents the summary scores (``math.inf``: the plain maximum)."""


@dataclass(frozen=True)
class MRow:
    """One measured GEMM (seconds) with the roofline's compute and memory times for it."""

    device: str
    gemm_dtype: str
    m: int
    n: int
    k: int
    measured_s: float
    compute_s: float
    memory_s: float

    @property
    def intensity(self) -> float:
        """Compute time over memory time: above 1 the roofline calls the GEMM compute-bound."""
        return self.compute_s / self.memory_s

    def model_s(self, overlap: float) -> float:
        """The roofline's time with exponent ``overlap``."""
        return float(ridge_time(self.compute_s, self.memory_s, overlap))


def load_m_rows(path: Path = GEMM_M_FILE) -> tuple[dict[str, str], ...]:
    """The file's rows as read (comment lines skipped)."""
    return read_commented_csv(path)


def compare(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY,
            rows: Iterable[dict[str, str]] | None = None) -> list[MRow]:
    """Each measured GEMM of at least ``MIN_MEASURED_S`` with the roofline's two times."""
    devices: dict[tuple[str, str], Device] = {}
    out: list[MRow] = []
    for r in load_m_rows() if rows is None else rows:
        measured = to_si(float(r["latency_ms"]), Unit.MS)
        if measured < MIN_MEASURED_S:
            continue
        key = (r["device"], r["gemm_dtype"])
        if key not in devices:
            devices[key] = gemm_device(catalog, *key)
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        _, compute, memory, _, _ = op_time(Gemm(m, n, k), devices[key], efficiency)
        out.append(MRow(key[0], key[1], m, n, k, measured, float(compute), float(memory)))
    return out


def _groups(rows: Iterable[MRow]) -> dict[tuple[str, str], list[MRow]]:
    groups: dict[tuple[str, str], list[MRow]] = defaultdict(list)
    for r in rows:
        groups[(r.device, r.gemm_dtype)].append(r)
    return dict(sorted(groups.items()))


def _relative(members: Sequence[MRow], overlap: float) -> list[float]:
    """Each GEMM's model/measured ratio over the group's median ratio."""
    ratios = [r.model_s(overlap) / r.measured_s for r in members]
    median = statistics.median(ratios)
    return [x / median for x in ratios]


def overlap_errors(rows: Iterable[MRow], overlap: float) -> float:
    """Mean |ln| of the level-free ratio over every GEMM (each group's own median out)."""
    logs = [abs(math.log(x)) for members in _groups(rows).values()
            for x in _relative(members, overlap)]
    return sum(logs) / len(logs)


def summarize(rows: Sequence[MRow],
              overlap: float = DEFAULT_EFFICIENCY.gemm_overlap) -> list[dict[str, object]]:
    """Per GPU and format: how many GEMMs, how many at the ridge, and with the exponent
    ``overlap`` and with the plain maximum the mean |ln| of the level-free ratio over all of
    them and its median at the ridge (below 1: the roofline faster there than its own level
    elsewhere says); two last entries score every exponent of ``OVERLAPS`` over the groups
    that set it ("all") and over the ``HELD_OUT`` ones ("held out")."""
    lo, hi = RIDGE_BAND
    out: list[dict[str, object]] = []
    for (device, dtype), members in _groups(rows).items():
        ridge = [i for i, r in enumerate(members) if lo <= r.intensity <= hi]
        doc: dict[str, object] = {"device": device, "format": dtype, "gemms": len(members),
                                  "ridge_gemms": len(ridge)}
        for prefix, p in (("", overlap), ("max_", math.inf)):
            rel = _relative(members, p)
            doc[f"{prefix}mean_abs_log_ratio"] = sum(abs(math.log(x)) for x in rel) / len(rel)
            doc[f"{prefix}ridge_median_ratio"] = statistics.median(rel[i] for i in ridge) \
                if ridge else None
        out.append(doc)
    for name, part in (("all", [r for r in rows if r.device not in HELD_OUT]),
                       ("held out", [r for r in rows if r.device in HELD_OUT])):
        if part:
            out.append({"device": name, "format": "all", "gemms": len(part),
                        "overlap": overlap,
                        "by_overlap": {("max" if math.isinf(p) else f"{p:g}"):
                                       overlap_errors(part, p) for p in OVERLAPS}})
    return out
