"""Which GPUs a search looks at: named ones, or every GPU of the chosen tiers that has a
16-bit Tensor Core peak and a memory size, each with its reference system."""

from __future__ import annotations

from collections.abc import Iterable

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System, Tier
from gpuarch.catalog.peaks import PeakKey

__all__ = ["candidate_gpus"]


def candidate_gpus(catalog: Catalog, gpus: Iterable[str], tiers: Iterable[Tier]
                   ) -> list[tuple[Product, System | None]]:
    """``gpus`` (names) if any are given, else every product in ``tiers``."""
    names = list(gpus)
    wanted = set(tiers)
    products = ([catalog.product(g) for g in names] if names
                else [p for p in catalog.products if p.tier in wanted])
    return [(p, catalog.system_for(p)) for p in products
            if p.memory_bytes and (p.peak(PeakKey.TENSOR_BF16) or p.peak(PeakKey.TENSOR_FP16))]
