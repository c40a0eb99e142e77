"""A GPU's link to its host CPU: what activation offloading, optimizer offloading and a
serving engine's weights kept in host memory move over."""

from __future__ import annotations

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product

__all__ = ["host_link_bytes_s", "product_host_link"]


def host_link_bytes_s(product: Product, pcie_x16_bytes_s: float | None) -> float | None:
    """One GPU's share of its link to the CPU, one direction: half the NVLink-C2C figure
    (published as both directions together) over the GPUs sharing the CPU on a superchip;
    else the board's PCIe x16 rate. None where a superchip's C2C rate is not catalogued."""
    if product.c2c_bandwidth_bytes_s:
        return product.c2c_bandwidth_bytes_s / 2 / (product.gpus_per_cpu or 1)
    if product.grace_host:
        return None
    return pcie_x16_bytes_s


def product_host_link(catalog: Catalog, product: Product) -> float | None:
    """``host_link_bytes_s`` with the board's PCIe x16 rate looked up in ``catalog``."""
    pcie = catalog.pcie_generation(product.pcie_generation or 0)
    return host_link_bytes_s(product, pcie.x16_bandwidth_bytes_s if pcie else None)
