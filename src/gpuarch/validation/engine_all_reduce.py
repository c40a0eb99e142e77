"""The serving engines' all-reduce model against their kernels as measured.

NVIDIA's aiconfigurator times the tensor-parallel all-reduce of TensorRT-LLM, vLLM and SGLang
(their own one-shot kernels, NCCL past their size limits) under CUDA graphs over 2 to 8 GPUs
of one NVLink domain, 128 to 268 million 16-bit elements, on A100, H100, H200, B200, B300,
GB200 and GB300. ``data/engine-allreduce.csv`` holds those rows (its header names the
source). Each is set beside ``perf.collectives.engine_all_reduce_time`` for the same engine's
kernels, group and buffer, without the serving step's wait (``Efficiency.
all_reduce_wait_s``), which the kernels timed alone do not have
(``gpuarch validate engine-all-reduce``; scripts/fit_engine_all_reduce.py fits the kernels'
latencies and bus share on these rows, tests/test_engine_all_reduce.py pins where the model
stands).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpuarch.catalog.loader import Catalog
from gpuarch.perf.collectives import (
    Group,
    OneShotAllReduce,
    engine_all_reduce_time,
    link_for,
    one_shot_all_reduce,
)
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.units import Unit, to_si
from gpuarch.validation.collectives import BANDS, DEVICES, ELEMENT_BYTES, band_of
from gpuarch.validation.measured import (
    ModelOverMeasured,
    band_cells,
    mean_abs_log_ratio,
    read_commented_csv,
)

__all__ = ["ENGINES", "FILE", "SOURCE", "MeasuredAllReduce", "band_errors", "compare",
           "load_rows", "summarize"]

FILE = Path(__file__).with_name("data") / "engine-allreduce.csv"

SOURCE = ("NVIDIA aiconfigurator's collected database, the serving engines' all-reduce under "
          "CUDA graphs (PyPI aiconfigurator-core 0.12.0: aiconfigurator_core/systems/data/"
          "<gpu>/comm/<engine>/<version>/custom_allreduce_perf.parquet)")

ENGINES = ("trtllm", "vllm", "sglang")
"""The engines measured, as ``InferenceConfig.all_reduce`` names their kernels."""


@dataclass(frozen=True)
class MeasuredAllReduce(ModelOverMeasured):
    """One measured all-reduce and the model's time for it (seconds)."""

    device: str
    engine: str
    version: str
    gpus: int
    elements: int
    measured_s: float
    model_s: float


@cache
def load_rows(path: Path = FILE) -> tuple[dict[str, str], ...]:
    """The file's rows as read (comment lines skipped)."""
    return read_commented_csv(path)


def compare(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY,
            rows: Iterable[dict[str, str]] | None = None,
            terms: OneShotAllReduce | None = None) -> list[MeasuredAllReduce]:
    """Each measured row beside ``engine_all_reduce_time`` for the same engine's kernels:
    the GPU's reference system's NVLink, all ranks in one node, NVLink SHARP allowed where
    NCCL takes over (on by default, as when measured), NCCL alone for a group the one-shot
    kernels cannot join (``OneShotAllReduce.ranks``), no serving wait. ``terms``: the
    kernels' terms to try in place of the fitted ones (scripts/fit_engine_all_reduce.py)."""
    alone = efficiency.with_overrides({"all_reduce_wait_s": 0.0})
    terms = terms or one_shot_all_reduce()
    out = []
    for r in load_rows() if rows is None else rows:
        product = catalog.product(DEVICES[r["device"]])
        system = catalog.system_for(product)
        intra, inter = link_for(product, system, None)
        gpus, elements = int(r["gpus"]), int(r["elements"])
        joined = gpus <= terms.ranks(product.key, system.gpus_per_node if system else gpus)
        model = engine_all_reduce_time(elements * ELEMENT_BYTES, Group(gpus, gpus, intra, inter),
                                       alone, r["engine"], product.architecture, one_shot=joined,
                                       terms=terms)
        out.append(MeasuredAllReduce(r["device"], r["engine"], r["version"], gpus, elements,
                                     to_si(float(r["latency_us"]), Unit.US), float(model)))
    return out


def summarize(rows: Iterable[MeasuredAllReduce]) -> list[dict[str, object]]:
    """Per GPU, engine and GPU count (every version together): the median model/measured
    ratio and mean |ln ratio| in each size band (``validation.collectives.BANDS``)."""
    groups: dict[tuple[str, str, int], list[MeasuredAllReduce]] = defaultdict(list)
    for r in rows:
        groups[(r.device, r.engine, r.gpus)].append(r)
    order = list(DEVICES)
    out: list[dict[str, object]] = []
    for (device, engine, gpus), members in sorted(
            groups.items(), key=lambda kv: (order.index(kv[0][0]), ENGINES.index(kv[0][1]),
                                            kv[0][2])):
        doc: dict[str, object] = {"device": device, "engine": engine, "gpus": gpus,
                                  "versions": sorted({r.version for r in members})}
        doc.update(band_cells(members, (name for name, _, _, _ in BANDS),
                              lambda r: band_of(r.elements), "sizes"))
        out.append(doc)
    return out


def band_errors(rows: Iterable[MeasuredAllReduce]) -> dict[str, float]:
    """Mean |ln(model / measured)| of each size band over every row in it, and of all."""
    rows = list(rows)
    doc = {name: mean_abs_log_ratio([r for r in rows if band_of(r.elements) == name])
           for name, _, _, _ in BANDS}
    doc["all"] = mean_abs_log_ratio(rows)
    return doc
