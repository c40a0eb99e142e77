"""Consistency of the catalog with itself.

Published peaks must follow from the silicon: SMs x per-SM rate x clock within 2%, unless the
product documents the exception; bandwidth must follow from bus width x data rate; a sparse
peak is twice the dense one. These checks run in the tests and in
``python -m gpuarch.catalog.check``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product

__all__ = ["TOLERANCE", "Finding", "Status", "check_catalog", "check_product"]

TOLERANCE = 0.02
"""Largest relative difference accepted between a published and a reproduced figure."""


class Status(Enum):
    """Outcome of one check."""

    OK = "ok"
    EXCEPTION = "documented exception"
    SKIPPED = "skipped"
    MISMATCH = "mismatch"


@dataclass(frozen=True)
class Finding:
    """One check on one product: what was published, what the silicon implies."""

    product: str
    check: str
    published: float | None
    expected: float | None
    status: Status
    detail: str

    @property
    def relative_error(self) -> float | None:
        if self.published is None or self.expected is None or self.published == 0:
            return None
        return self.expected / self.published - 1.0


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(abs(a), abs(b))


def check_product(catalog: Catalog, product: Product) -> list[Finding]:
    """Every consistency check for one product."""
    chip = catalog.chip_of(product)
    out: list[Finding] = []
    for key, published in product.dense_flops.items():
        name = f"peak {key.value}"
        rate = chip.sm_ops_per_clock.get(key)
        clock = product.clock_for(key)
        if not product.sms or rate is None or clock is None:
            why = ("SM count unpublished" if not product.sms else
                   "clock unpublished" if clock is None else
                   f"chip {chip.key} has no sm_ops_per_clock.{key.value}")
            out.append(Finding(product.key, name, published, None, Status.SKIPPED, why))
            continue
        expected = product.sms * rate * clock
        if _close(published, expected):
            status, detail = Status.OK, f"{product.sms} SMs x {rate:g} x {clock / 1e6:g} MHz"
        elif key.value in product.peak_exceptions:
            status, detail = Status.EXCEPTION, product.peak_exceptions[key.value]
        else:
            status = Status.MISMATCH
            detail = (f"{product.sms} SMs x {rate:g} x {clock / 1e6:g} MHz = "
                      f"{expected / 1e12:.4g} vs published {published / 1e12:.4g}")
        out.append(Finding(product.key, name, published, expected, status, detail))
    out.extend(_bandwidth(product))
    out.extend(_sparsity(catalog, product))
    return out


def _bandwidth(product: Product) -> list[Finding]:
    bus, rate = product.memory_bus_bits, product.memory_data_rate_bps
    published = product.memory_bandwidth_bytes_s
    if bus is None or rate is None:
        return [Finding(product.key, "memory bandwidth", published, None, Status.SKIPPED,
                        "bus width or data rate unpublished")]
    expected = bus * rate / 8
    ok = _close(published, expected)
    return [Finding(product.key, "memory bandwidth", published, expected,
                    Status.OK if ok else Status.MISMATCH,
                    f"{bus} bit x {rate / 1e9:g} Gbit/s / 8 = {expected / 1e9:.4g} GB/s")]


def _sparsity(catalog: Catalog, product: Product) -> list[Finding]:
    chip = catalog.chip_of(product)
    out: list[Finding] = []
    for key, sparse in product.sparse_flops.items():
        name = f"sparse {key.value}"
        if not chip.sparsity_2to4:
            out.append(Finding(product.key, name, sparse, None, Status.MISMATCH,
                               f"chip {chip.key} does not run 2:4 sparsity"))
            continue
        dense = product.dense_flops.get(key)
        if dense is None:
            out.append(Finding(product.key, name, sparse, None, Status.SKIPPED,
                               "dense figure unpublished"))
            continue
        exception = product.peak_exceptions.get(f"sparse.{key.value}")
        if _close(sparse, 2 * dense):
            status, detail = Status.OK, "sparse = 2 x dense"
        elif exception is not None:
            status, detail = Status.EXCEPTION, exception
        else:
            status, detail = Status.MISMATCH, (f"sparse {sparse / 1e12:.4g} is not 2 x dense "
                                               f"{dense / 1e12:.4g}")
        out.append(Finding(product.key, name, sparse, 2 * dense, status, detail))
    return out


def check_catalog(catalog: Catalog) -> list[Finding]:
    """Every consistency check over every product."""
    return [f for p in catalog.products for f in check_product(catalog, p)]

