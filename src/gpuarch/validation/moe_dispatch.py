"""Serving engines' MoE dispatch and combine kernels, measured, against the model's.

A serving engine with expert parallelism moves each routed copy of a token to the GPU of its
expert and the experts' outputs back with its own one-shot all-to-all kernels (TensorRT-LLM's
NVLink kernels, DeepEP's low-latency kernels), not NCCL's ring collectives.
``data/moe-dispatch.csv`` holds such kernels as measured (its header names the sources):
TensorRT-LLM's NVLink two-sided all-to-all over EP 2-64 of a GB200 NVL72 rack, DeepEP's
low-latency kernels on one H100 node, DeepEP's published H800 timings over InfiniBand at EP
16-256, and TensorRT-LLM's DeepEP low-latency path on 8-GPU H100, H200, B200 and B300 boards.
Each row is set beside ``perf.collectives.dispatch_time`` for the same bytes over the same
group, with the fixed time of its path (``gpuarch validate moe-dispatch``;
tests/test_moe_dispatch.py pins where the model stands, scripts/fit_moe_dispatch.py fits the
one-shot kernels' terms on the GB200 rows and TensorRT-LLM's DeepEP fixed times on its rows).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpuarch.catalog.loader import Catalog
from gpuarch.perf.collectives import Group, dispatch_time, exchange_latencies, link_for
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.units import Unit, to_si
from gpuarch.validation.measured import (
    ModelOverMeasured,
    band_cells,
    band_named,
    mean_abs_log_ratio,
    read_commented_csv,
)

__all__ = [
    "DISPATCH_FILE",
    "FITTED_SOURCE",
    "TOKEN_BANDS",
    "MeasuredDispatch",
    "compare",
    "load_dispatch_rows",
    "summarize",
    "token_band",
]

DISPATCH_FILE = Path(__file__).with_name("data") / "moe-dispatch.csv"

FITTED_SOURCE = "trtllm-gb200"
"""The source whose rows ``Efficiency.moe_dispatch_latency_s``,
``moe_dispatch_peer_latency_s`` and ``moe_dispatch_bus`` were fitted on."""

FITTED_SOURCES = (FITTED_SOURCE, "trtllm-deepep-hgx")
"""Every source something was fitted on (``trtllm-deepep-hgx``: TensorRT-LLM's DeepEP fixed
times, ``moe_dispatch_latency_trtllm_deepep_s`` and ``moe_combine_latency_trtllm_deepep_s``);
the others are checks."""

TOKEN_BANDS = (("decode", 1, 256, "1-255"), ("middle", 256, 4096, "256-4,095"),
               ("prefill", 4096, 10**9, "4,096+"))
"""Tokens per GPU: a decode step's few (latency), a prefill pass's thousands (bandwidth)."""


def token_band(tokens: int) -> str:
    """The band (``TOKEN_BANDS``) ``tokens`` per GPU fall in."""
    return band_named(TOKEN_BANDS, tokens)


@dataclass(frozen=True)
class MeasuredDispatch(ModelOverMeasured):
    """One measured dispatch or combine and the model's time for it (seconds)."""

    source: str
    device: str
    kernel: str
    phase: str
    dtype: str
    ep: int
    tokens: int
    measured_s: float
    model_s: float


def kernel_latency(kernel: str, phase: str, efficiency: Efficiency) -> float:
    """The fixed time of a row's kernel path (``perf.collectives.exchange_latencies``)."""
    dispatch, combine = exchange_latencies(efficiency, kernel == "trtllm-deepep-low-latency")
    return dispatch if phase == "dispatch" else combine


@cache
def load_dispatch_rows(path: Path = DISPATCH_FILE) -> tuple[dict[str, str], ...]:
    """The file's rows as read (comment lines skipped)."""
    return read_commented_csv(path)


def compare(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY,
            rows: Iterable[dict[str, str]] | None = None) -> list[MeasuredDispatch]:
    """Each measured row beside ``dispatch_time`` for its bytes (tokens x top-k x hidden x
    bytes per element) over an expert-parallel group of its size on the GPU's reference
    system (its NVLink domain, and its network between domains), at its path's fixed time
    (``kernel_latency``)."""
    out = []
    for r in load_dispatch_rows() if rows is None else rows:
        product = catalog.product(r["device"])
        intra, inter = link_for(product, catalog.system_for(product), None)
        ep, tokens = int(r["ep"]), int(r["tokens"])
        size = tokens * int(r["topk"]) * int(r["hidden"]) * float(r["bytes"])
        model = dispatch_time(size, Group(ep, min(ep, int(r["per_node"])), intra, inter),
                              efficiency, kernel_latency(r["kernel"], r["phase"], efficiency))
        out.append(MeasuredDispatch(r["source"], r["device"], r["kernel"], r["phase"],
                                    r["dtype"], ep, tokens,
                                    to_si(float(r["measured_us"]), Unit.US), float(model)))
    return out


def summarize(rows: Iterable[MeasuredDispatch]) -> list[dict[str, object]]:
    """Per source, phase and group size: the median model/measured ratio and the mean
    |ln ratio| in each token band (``TOKEN_BANDS``)."""
    groups: dict[tuple[str, str, int], list[MeasuredDispatch]] = defaultdict(list)
    for r in rows:
        groups[(r.source, r.phase, r.ep)].append(r)
    out: list[dict[str, object]] = []
    for (source, phase, ep), members in sorted(groups.items(),
                                               key=lambda kv: (kv[0][0], kv[0][1] != "dispatch",
                                                               kv[0][2])):
        doc: dict[str, object] = {"source": source, "phase": phase, "ep": ep,
                                  "fitted": source in FITTED_SOURCES}
        doc.update(band_cells(members, (name for name, _, _, _ in TOKEN_BANDS),
                              lambda r: token_band(r.tokens), "rows"))
        out.append(doc)
    return out


def source_errors(rows: Iterable[MeasuredDispatch]) -> dict[str, float]:
    """Mean |ln(model / measured)| of each source, the fitted ones first."""
    rows = list(rows)
    sources = sorted({r.source for r in rows}, key=lambda s: (s not in FITTED_SOURCES, s))
    return {s: mean_abs_log_ratio([r for r in rows if r.source == s]) for s in sources}
