"""Questions asked of the catalog: list, describe, compare, feature matrix.

These return typed records; ``gpuarch.report`` renders them as tables or JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from gpuarch.catalog.derived import Derived, best_dense_peak, derive, host_link_bandwidth
from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Architecture, Chip, Product, Source, Tier
from gpuarch.catalog.peaks import PeakKey
from gpuarch.units import Unit, from_si

__all__ = [
    "ArchitectureDescription",
    "Comparison",
    "ComparisonRow",
    "FeatureMatrix",
    "FeatureNote",
    "ProductDescription",
    "SortKey",
    "compare",
    "describe",
    "describe_architecture",
    "feature_matrix",
    "select_products",
]


class SortKey(Enum):
    """Orders for ``gpuarch list --sort``."""

    YEAR = "year"
    NAME = "name"
    FP32 = "fp32"
    FP16 = "fp16"
    FP8 = "fp8"
    BANDWIDTH = "bandwidth"
    MEMORY = "memory"
    TDP = "tdp"


def _best16(p: Product) -> float:
    best = best_dense_peak(p, 16)
    return best[1] if best else 0.0


_SORT: dict[SortKey, Callable[[Product], float | str]] = {
    SortKey.YEAR: lambda p: p.launch_date,
    SortKey.NAME: lambda p: p.name.lower(),
    SortKey.FP32: lambda p: p.peak(PeakKey.FP32) or 0.0,
    SortKey.FP16: _best16,
    SortKey.FP8: lambda p: p.peak(PeakKey.TENSOR_FP8) or 0.0,
    SortKey.BANDWIDTH: lambda p: p.memory_bandwidth_bytes_s,
    SortKey.MEMORY: lambda p: p.memory_bytes,
    SortKey.TDP: lambda p: p.tdp_w or 0.0,
}


def select_products(
    catalog: Catalog,
    *,
    architectures: Iterable[Architecture] = (),
    tiers: Iterable[Tier] = (),
    features: Iterable[str] = (),
    sort: SortKey = SortKey.YEAR,
) -> list[Product]:
    """Products filtered by architecture, tier and feature (``Catalog.has_feature``), sorted.

    Numeric sorts put the largest first; ``year`` and ``name`` sort ascending.
    """
    arch_keys = {a.key for a in architectures}
    tier_set = set(tiers)
    wanted = set(features)
    out = [
        p for p in catalog.products
        if (not arch_keys or p.architecture in arch_keys)
        and (not tier_set or p.tier in tier_set)
        and all(catalog.has_feature(p, f) for f in wanted)
    ]
    descending = sort not in (SortKey.YEAR, SortKey.NAME)
    return sorted(out, key=_SORT[sort], reverse=descending)


@dataclass(frozen=True)
class FeatureNote:
    """A feature of an architecture, explained."""

    key: str
    name: str
    note: str
    explanation: str
    introduced_in: str
    source: str


@dataclass(frozen=True)
class ProductDescription:
    """Everything ``gpuarch show`` says about one product."""

    product: Product
    architecture: Architecture
    chip: Chip
    derived: Derived
    features: tuple[FeatureNote, ...]
    sources: tuple[Source, ...]


def _feature_notes(catalog: Catalog, arch: Architecture,
                   product: Product | None = None) -> tuple[FeatureNote, ...]:
    notes = []
    for key, note in arch.features.items():
        if product is not None and not catalog.has_feature(product, key):
            continue
        feat = catalog.features.get(key)
        first = catalog.introduced_in(key)
        notes.append(FeatureNote(
            key=key,
            name=feat.name if feat else key,
            note=note,
            explanation=feat.explanation if feat else "",
            introduced_in=first.name if first else arch.name,
            source=feat.source if feat else arch.source,
        ))
    return tuple(notes)


def _cited(catalog: Catalog, *records: Product | Chip | Architecture) -> tuple[Source, ...]:
    ids = [s for r in records for s in (r.source, *r.field_sources.values())]
    return tuple(catalog.sources[s] for s in dict.fromkeys(ids))


def describe(catalog: Catalog, product: Product) -> ProductDescription:
    """A product with its chip, the features it has explained, and its sources."""
    arch = catalog.architecture_of(product)
    chip = catalog.chip_of(product)
    return ProductDescription(product, arch, chip, derive(catalog, product),
                              _feature_notes(catalog, arch, product),
                              _cited(catalog, product, chip, arch))


@dataclass(frozen=True)
class ArchitectureDescription:
    """Everything ``gpuarch show ARCHITECTURE`` says: summary, dies, products, features."""

    architecture: Architecture
    chips: tuple[Chip, ...]
    products: tuple[str, ...]
    features: tuple[FeatureNote, ...]
    sources: tuple[Source, ...]


def describe_architecture(catalog: Catalog, arch: Architecture) -> ArchitectureDescription:
    """An architecture with its chips, its products and its features explained."""
    chips = tuple(c for c in catalog.chips.values() if c.architecture == arch.key)
    return ArchitectureDescription(
        arch, chips, tuple(p.name for p in catalog.products_of(arch)),
        _feature_notes(catalog, arch), _cited(catalog, arch, *chips))


@dataclass(frozen=True)
class ComparisonRow:
    """One quantity across the compared products, in display units, with ratios to the first."""

    label: str
    unit: str
    values: tuple[float | str | None, ...]
    ratios: tuple[float | None, ...]


@dataclass(frozen=True)
class Comparison:
    """Products side by side."""

    products: tuple[str, ...]
    product_keys: tuple[str, ...]
    rows: tuple[ComparisonRow, ...]


def _numeric_row(label: str, unit: Unit, values: Sequence[float | None],
                 unit_label: str | None = None) -> ComparisonRow:
    shown = tuple(None if v is None else from_si(v, unit) for v in values)
    first = shown[0]
    ratios = tuple(
        None if (v is None or first is None or first == 0) else v / first for v in shown
    )
    return ComparisonRow(label, unit_label if unit_label is not None else unit.label, shown,
                         ratios)


def compare(catalog: Catalog, products: Sequence[Product]) -> Comparison:
    """Side by side, with each numeric row's ratio to the first product."""
    text_rows = [
        ComparisonRow("Architecture", "", tuple(catalog.architecture_of(p).name
                                               for p in products), ()),
        ComparisonRow("Chip", "", tuple(p.chip for p in products), ()),
        ComparisonRow("Tier", "", tuple(p.tier.value for p in products), ()),
        ComparisonRow("Launch", "", tuple(p.launch_date for p in products), ()),
        ComparisonRow("Memory type", "", tuple(p.memory_type for p in products), ()),
    ]
    rows = [
        *text_rows,
        _numeric_row("SMs", Unit.NONE, [float(p.sms) if p.sms else None for p in products]),
        _numeric_row("Boost clock", Unit.MHZ, [p.boost_clock_hz or None for p in products]),
        _numeric_row("Memory", Unit.GIB, [p.memory_bytes for p in products]),
        _numeric_row("Memory bandwidth", Unit.GB_S,
                     [p.memory_bandwidth_bytes_s for p in products]),
        _numeric_row("L2 cache", Unit.MIB, [p.l2_cache_bytes for p in products]),
    ]
    for key in PeakKey:
        if any(p.peak(key) is not None for p in products):
            halved = any(p.dense_origin(key) == "half of sparse" for p in products)
            label = f"{key.label} dense" + (" (* half of sparse)" if halved else "")
            rows.append(_numeric_row(label, Unit.TFLOPS, [p.peak(key) for p in products],
                                     key.unit_label))
    for key in PeakKey:
        if any(key in p.sparse_flops for p in products):
            rows.append(_numeric_row(f"{key.label} 2:4 sparse", Unit.TFLOPS,
                                     [p.sparse_flops.get(key) for p in products],
                                     key.unit_label))
    derived = [derive(catalog, p) for p in products]
    rows += [
        _numeric_row("GPU-to-GPU link (bidir.)", Unit.GB_S,
                     [host_link_bandwidth(catalog, p) for p in products]),
        _numeric_row("Board power", Unit.WATT, [p.tdp_w for p in products]),
        _numeric_row("Ridge point, best 16-bit", Unit.NONE,
                     [d.best_16bit_flops / p.memory_bandwidth_bytes_s
                      if d.best_16bit_flops else None for d, p in zip(derived, products,
                                                                       strict=True)],
                     "FLOP/byte"),
        _numeric_row("Best 16-bit per watt", Unit.GFLOPS, [d.flops_per_watt for d in derived],
                     "GFLOPS/W"),
        _numeric_row("Launch price", Unit.USD, [p.launch_price_usd for p in products]),
    ]
    keep = tuple(r for r in rows if any(v is not None for v in r.values))
    return Comparison(tuple(p.name for p in products), tuple(p.key for p in products), keep)


@dataclass(frozen=True)
class FeatureMatrix:
    """Which architecture has which feature (cells hold the architecture's note)."""

    architectures: tuple[str, ...]
    features: tuple[str, ...]
    feature_names: tuple[str, ...]
    cells: tuple[tuple[str | None, ...], ...]  # [feature][architecture]; None = absent


def feature_matrix(catalog: Catalog) -> FeatureMatrix:
    """Feature x architecture, features in the order they first appeared."""
    registry = list(catalog.features)

    def first_seen(key: str) -> tuple[str, int, int]:
        arch = catalog.introduced_in(key)
        debut = catalog.debut(arch) if arch else "9999"
        return (debut, arch.order if arch else 99, registry.index(key))

    order = sorted(registry, key=first_seen)
    cells = tuple(tuple(a.features.get(k) for a in catalog.architectures) for k in order)
    names = tuple(catalog.features[k].name for k in order)
    return FeatureMatrix(tuple(a.name for a in catalog.architectures), tuple(order), names,
                         cells)
