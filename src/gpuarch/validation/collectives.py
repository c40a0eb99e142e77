"""The collectives model against NCCL collectives measured inside one NVLink domain.

NVIDIA's aiconfigurator times NCCL's all-gather, reduce-scatter, all-reduce and all-to-all
over 2, 4 and 8 GPUs of one NVSwitch domain, 256 to 268 million 16-bit elements, on each GPU
it supports. ``data/nccl-nvlink.csv`` holds those rows for A100, H100, H200, B200, B300,
GB200 and GB300 (its header names the source). Each row is set beside
``perf.collectives.collective_time`` for the same collective, with NCCL's protocols and, for
an all-reduce, NVLink SHARP where the GPU has it (NCCL's defaults, as measured)
(``gpuarch validate collectives``; tests/test_collectives_measured.py pins where the model
stands, scripts/fit_nvlink_bus.py fits the NVLink bus efficiency on these rows).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpuarch.catalog.loader import Catalog
from gpuarch.perf.collectives import Collective, Group, collective_time, link_for, nccl_protocols
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.units import Unit, to_si
from gpuarch.validation.measured import (
    ModelOverMeasured,
    band_cells,
    band_named,
    mean_abs_log_ratio,
    read_commented_csv,
)

__all__ = ["BANDS", "COLLECTIVES", "DEVICES", "NCCL_FILE", "SOURCE", "MeasuredCollective",
           "band_errors", "band_of", "compare", "load_collective_rows", "mean_abs_log_ratio",
           "summarize"]

NCCL_FILE = Path(__file__).with_name("data") / "nccl-nvlink.csv"

SOURCE = ("NVIDIA aiconfigurator's collected database, NCCL collectives (PyPI "
          "aiconfigurator-core 0.12.0: aiconfigurator_core/systems/data/<gpu>/comm/nccl/"
          "<version>/nccl_perf.parquet)")

DEVICES = {"a100_sxm": "a100-sxm4-80gb", "h100_sxm": "h100-sxm5-80gb",
           "h200_sxm": "h200-sxm-141gb", "b200_sxm": "b200", "b300_sxm": "b300",
           "gb200": "gb200", "gb300": "gb300"}
"""The source's device names as catalog products."""

COLLECTIVES = {"all_gather": Collective.ALL_GATHER, "reduce_scatter": Collective.REDUCE_SCATTER,
               "all_reduce": Collective.ALL_REDUCE, "alltoall": Collective.ALL_TO_ALL}

ELEMENT_BYTES = 2.0
"""Bytes of one of the source's elements (16-bit)."""

BANDS = (("latency", 0, 2**16, "<128 KiB"), ("middle", 2**16, 2**22, "128 KiB-8 MiB"),
         ("bandwidth", 2**22, math.inf, ">=8 MiB"))
"""Size bands: name, buffer size in elements from and below, and the buffer in bytes as
printed. Below 128 KiB a collective's time is its latency, from 8 MiB on its bandwidth;
between, both."""


def band_of(elements: int) -> str:
    """The size band (``BANDS``) a buffer of ``elements`` 16-bit elements falls in."""
    return band_named(BANDS, elements)


@dataclass(frozen=True)
class MeasuredCollective(ModelOverMeasured):
    """One measured collective and the model's time for it (seconds)."""

    device: str
    collective: str
    gpus: int
    elements: int
    measured_s: float
    model_s: float


@cache
def load_collective_rows(path: Path = NCCL_FILE) -> tuple[dict[str, str], ...]:
    """The file's rows as read (comment lines skipped)."""
    return read_commented_csv(path)


def compare(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY,
            rows: Iterable[dict[str, str]] | None = None) -> list[MeasuredCollective]:
    """Each measured row beside the model's ``collective_time`` for the same collective:
    the GPU's reference system's NVLink, all ranks in one node, NCCL's protocols, NVLink
    SHARP allowed for an all-reduce (it is on by default, as it was when measured)."""
    protocols = nccl_protocols()
    out = []
    for r in load_collective_rows() if rows is None else rows:
        product = catalog.product(DEVICES[r["device"]])
        intra, inter = link_for(product, catalog.system_for(product), None)
        gpus, elements = int(r["gpus"]), int(r["elements"])
        kind = COLLECTIVES[r["collective"]]
        model = collective_time(kind, elements * ELEMENT_BYTES, Group(gpus, gpus, intra, inter),
                                efficiency, protocols, nvls=kind is Collective.ALL_REDUCE)
        out.append(MeasuredCollective(r["device"], r["collective"], gpus, elements,
                                      to_si(float(r["latency_us"]), Unit.US), float(model)))
    return out


def summarize(rows: Iterable[MeasuredCollective]) -> list[dict[str, object]]:
    """Per GPU, collective and GPU count: the median model/measured ratio and mean |ln ratio|
    in each size band (``BANDS``)."""
    groups: dict[tuple[str, str, int], list[MeasuredCollective]] = defaultdict(list)
    for r in rows:
        groups[(r.device, r.collective, r.gpus)].append(r)
    order = list(DEVICES)
    out: list[dict[str, object]] = []
    for (device, collective, gpus), members in sorted(
            groups.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1], kv[0][2])):
        doc: dict[str, object] = {"device": device, "collective": collective, "gpus": gpus}
        doc.update(band_cells(members, (name for name, _, _, _ in BANDS),
                              lambda r: band_of(r.elements), "sizes"))
        out.append(doc)
    return out


def band_errors(rows: Iterable[MeasuredCollective]) -> dict[str, float]:
    """Mean |ln(model / measured)| of each size band (``BANDS``) over every row in it."""
    rows = list(rows)
    return {name: mean_abs_log_ratio([r for r in rows if band_of(r.elements) == name])
            for name, _, _, _ in BANDS}
