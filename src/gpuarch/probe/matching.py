"""Matching a GPU that NVML names ("NVIDIA H100 80GB HBM3") to its catalog product.

NVML names are not catalog names, and one name can cover several products (H100 SXM5 and
H100 PCIe both have 80 GB). The match uses, in order: the PCI device id, where the catalog
lists it for exactly one product; the name through the catalog's
aliases; if that is ambiguous or unknown, the products of the same family (the first token
with a digit, "h100") filtered by compute capability and memory size (within 10%), and
finally the board power limit closest to the product's TDP. The note says how it matched.
"""

from __future__ import annotations

import re

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.lookup import PRODUCT_NOISE, tokens
from gpuarch.catalog.model import Product
from gpuarch.errors import AmbiguousNameError, UnknownNameError
from gpuarch.probe.readings import GpuReading
from gpuarch.units import Unit, from_si

__all__ = ["match_product"]

_FAMILY = re.compile(r"[a-z]*\d")
MEMORY_TOLERANCE = 0.10
"""NVML reports usable memory (an H100 80GB shows 79.6 GiB, an H200 140.4 GiB)."""


def _fits(catalog: Catalog, p: Product, gpu: GpuReading) -> bool:
    if gpu.compute_capability and catalog.chip_of(p).compute_capability != \
            gpu.compute_capability:
        return False
    if gpu.memory_total_bytes:
        return abs(gpu.memory_total_bytes - p.memory_bytes) <= MEMORY_TOLERANCE * \
            p.memory_bytes
    return True


def match_product(catalog: Catalog, gpu: GpuReading) -> tuple[Product | None, str]:
    """The catalog product for ``gpu`` and a note on how it was chosen."""
    if gpu.pci_device_id is not None:
        dev = f"{gpu.pci_device_id:04x}"
        by_id = [p for p in catalog.products if dev in p.pci_device_ids]
        if len(by_id) == 1:
            return by_id[0], f"PCI device id {dev}"
    try:
        product = catalog.product(gpu.name)
        if _fits(catalog, product, gpu):
            return product, f"name {gpu.name!r}"
        candidates = [product]
    except AmbiguousNameError as exc:
        candidates = [catalog.product(c) for c in exc.candidates]
    except UnknownNameError:
        candidates = []
    if not candidates or not any(_fits(catalog, p, gpu) for p in candidates):
        family = next((t for t in tokens(gpu.name, PRODUCT_NOISE) if _FAMILY.match(t)), None)
        candidates = [p for p in catalog.products
                      if family and family in tokens(p.key + " " + p.name, PRODUCT_NOISE)]
    fitting = [p for p in candidates if _fits(catalog, p, gpu)]
    if not fitting:
        return None, (f"no catalog product matches {gpu.name!r} (compute capability "
                      f"{gpu.compute_capability}, {_gib(gpu.memory_total_bytes)} GiB)")
    if len(fitting) == 1:
        return fitting[0], f"name family, compute capability and memory of {gpu.name!r}"
    power = gpu.power_max_limit_w or gpu.power_default_limit_w
    with_tdp = [p for p in fitting if p.tdp_w]
    if power and with_tdp:
        best = min(with_tdp, key=lambda p: abs((p.tdp_w or 0.0) - power))
        return best, (f"{len(fitting)} products fit {gpu.name!r}; chose by power limit "
                      f"{power:.0f} W vs TDP {best.tdp_w:.0f} W")
    return fitting[0], (f"{len(fitting)} products fit {gpu.name!r}: "
                        f"{', '.join(p.name for p in fitting)}; took the first")


def _gib(x: float | None) -> str:
    return "?" if x is None else f"{from_si(x, Unit.GIB):.1f}"
