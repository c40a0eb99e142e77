"""How the generations moved: one flagship per architecture, by year, and the ratios between.

The flagship of an architecture (within the chosen tiers) is the product with the fastest
dense 16/32-bit peak, ties broken by memory bandwidth. Without chosen tiers, datacenter
products are preferred and other tiers are used only for a generation that has none (G80 and
GT200, whose compute boards were workstation cards). Ratios are generation over generation,
flagship to flagship.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from gpuarch.catalog.derived import best_dense_peak
from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, Tier
from gpuarch.catalog.peaks import PeakKey
from gpuarch.units import Unit

__all__ = ["EvolutionRow", "Metric", "evolution", "flagship"]


def _peak(*keys: PeakKey) -> Callable[[Product], float | None]:
    def get(p: Product) -> float | None:
        values = [v for k in keys if (v := p.peak(k)) is not None]
        return max(values) if values else None
    return get


def _best16(p: Product) -> float | None:
    best = best_dense_peak(p, 16)
    return best[1] if best else None


def _ridge(p: Product) -> float | None:
    best = _best16(p)
    return best / p.memory_bandwidth_bytes_s if best else None


def _per_watt(p: Product) -> float | None:
    best = _best16(p)
    return best / p.tdp_w if best and p.tdp_w else None


class Metric(Enum):
    """A quantity to follow across generations: (label, display unit, getter)."""

    FP64 = ("fp64", "FP64 (dense, best of CUDA/Tensor)", Unit.TFLOPS,
            _peak(PeakKey.FP64, PeakKey.TENSOR_FP64))
    FP32 = ("fp32", "FP32 on CUDA cores", Unit.TFLOPS, _peak(PeakKey.FP32))
    FP16 = ("fp16", "Best dense FP16/BF16 peak (else TF32/FP32)", Unit.TFLOPS, _best16)
    FP8 = ("fp8", "FP8 Tensor (dense)", Unit.TFLOPS, _peak(PeakKey.TENSOR_FP8))
    FP4 = ("fp4", "FP4 Tensor (dense)", Unit.TFLOPS, _peak(PeakKey.TENSOR_FP4))
    INT8 = ("int8", "INT8 Tensor (dense)", Unit.TFLOPS, _peak(PeakKey.TENSOR_INT8))
    BANDWIDTH = ("bandwidth", "Memory bandwidth", Unit.TB_S,
                 lambda p: p.memory_bandwidth_bytes_s)
    MEMORY = ("memory", "Memory capacity", Unit.GIB, lambda p: p.memory_bytes)
    NVLINK = ("nvlink", "NVLink bandwidth (bidirectional)", Unit.GB_S,
              lambda p: p.nvlink_bandwidth_bytes_s)
    TDP = ("tdp", "Board power", Unit.WATT, lambda p: p.tdp_w)
    RIDGE = ("ridge", "Ridge point, 16-bit peak / bandwidth (FLOP/byte)", Unit.NONE, _ridge)
    PERF_PER_WATT = ("perf_per_watt", "16-bit peak per watt", Unit.GFLOPS, _per_watt)

    @property
    def key(self) -> str:
        return str(self.value[0])

    @property
    def label(self) -> str:
        return str(self.value[1])

    @property
    def unit(self) -> Unit:
        unit: Unit = self.value[2]
        return unit

    def of(self, product: Product) -> float | None:
        """The metric for ``product`` in SI, ``None`` where unpublished."""
        getter: Callable[[Product], float | None] = self.value[3]
        return getter(product)

    @classmethod
    def parse(cls, text: str) -> Metric:
        for m in cls:
            if m.key == text:
                return m
        raise ValueError(text)


DEFAULT_METRICS = (Metric.FP32, Metric.FP16, Metric.BANDWIDTH, Metric.RIDGE)


@dataclass(frozen=True)
class EvolutionRow:
    """One architecture's flagship and its metrics, with ratios to the previous row."""

    architecture: str
    year: int  # the architecture's year
    debut: str  # launch date of the architecture's first product (the plot's x axis)
    flagship: str
    flagship_key: str
    flagship_launch: str
    tier: Tier
    values: Mapping[Metric, float | None]
    ratio_to_previous: Mapping[Metric, float | None]


def flagship(products: Iterable[Product]) -> Product | None:
    """The product with the fastest dense 16/32-bit peak (then the most bandwidth)."""
    ranked = sorted(products, key=lambda p: (_best16(p) or 0.0, p.memory_bandwidth_bytes_s))
    return ranked[-1] if ranked else None


def evolution(
    catalog: Catalog,
    metrics: Iterable[Metric] = DEFAULT_METRICS,
    tiers: Iterable[Tier] | None = None,
) -> list[EvolutionRow]:
    """One row per architecture with a product in ``tiers``.

    ``tiers=None`` prefers datacenter products and falls back to any tier for a generation
    without one.
    """
    wanted = tuple(metrics)
    tier_set = frozenset(tiers) if tiers else frozenset({Tier.DATACENTER})
    rows: list[EvolutionRow] = []
    previous: Mapping[Metric, float | None] | None = None
    for arch in catalog.architectures:
        products = catalog.products_of(arch)
        best = flagship(p for p in products if p.tier in tier_set)
        if best is None and not tiers:
            best = flagship(products)
        if best is None:
            continue
        values = {m: m.of(best) for m in wanted}
        ratios: dict[Metric, float | None] = {}
        for m in wanted:
            now, before = values[m], (previous or {}).get(m)
            ratios[m] = now / before if now and before else None
        rows.append(EvolutionRow(arch.name, arch.year, catalog.debut(arch), best.name, best.key,
                                 best.launch_date,
                                 best.tier, MappingProxyType(values),
                                 MappingProxyType(ratios)))
        previous = values
    return rows
