"""Metrics derived from a product's published figures (never stored in the data files)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, spec
from gpuarch.catalog.peaks import PeakKey
from gpuarch.units import Unit

__all__ = ["Derived", "best_dense_peak", "derive", "host_link_bandwidth"]

_INTEGER = frozenset({PeakKey.TENSOR_INT8, PeakKey.TENSOR_INT4})


def best_dense_peak(product: Product, min_bits: int, max_bits: int = 32
                    ) -> tuple[PeakKey, float] | None:
    """The fastest dense floating-point peak between ``min_bits`` and ``max_bits`` bits.

    Dense peaks published only as 2:4 sparse figures count at half (``Product.dense_peaks``).

    ``min_bits=16`` answers "how fast does mixed-precision training run at best": Tensor FP16
    or BF16 (FP32 accumulate) where there are Tensor Cores, else FP16 on CUDA cores, else
    FP32. FP64 never counts (``max_bits=32``).
    """
    best: tuple[PeakKey, float] | None = None
    for key, value in product.dense_peaks().items():
        if (key in _INTEGER or not min_bits <= key.bits <= max_bits
                or key.value.endswith("_acc16")):
            continue
        if best is None or value > best[1]:
            best = (key, value)
    return best


def host_link_bandwidth(catalog: Catalog, product: Product) -> float | None:
    """GPU-to-GPU bandwidth (bytes/s, bidirectional): NVLink if present, else PCIe x16."""
    if product.nvlink_bandwidth_bytes_s:
        return product.nvlink_bandwidth_bytes_s
    if product.pcie_generation is None:
        return None
    pcie = catalog.pcie_generation(product.pcie_generation)
    if pcie is None:
        return None
    lanes = product.pcie_lanes or 16
    return 2 * pcie.x16_bandwidth_bytes_s * lanes / 16


@dataclass(frozen=True, kw_only=True)
class Derived:
    """Ratios that say what a GPU is balanced for. SI inside; JSON keys carry units."""

    best_16bit_key: str | None = spec("best_16bit_peak", "str", default=None)
    best_16bit_flops: float | None = spec("best_16bit_tflops", "float", Unit.TFLOPS,
                                          default=None)
    ridge_point: Mapping[PeakKey, float] = spec("ridge_point_flop_per_byte", "peaks",
                                                default={})
    flops_per_watt: float | None = spec("best_16bit_gflops_per_w", "float", Unit.GFLOPS,
                                        default=None)
    memory_per_flops: float | None = spec("memory_gib_per_best_16bit_tflops", "float",
                                          Unit.GIB_PER_TFLOPS, default=None)
    link_per_flops: float | None = spec("gpu_link_gb_s_per_best_16bit_tflops", "float",
                                        Unit.GB_S_PER_TFLOPS, default=None)
    gpu_link: str | None = spec("gpu_link", "str", default=None)
    flops_per_dollar: float | None = spec("best_16bit_gflops_per_usd", "float", Unit.GFLOPS,
                                          default=None)


def derive(catalog: Catalog, product: Product) -> Derived:
    """Ridge points per precision, perf per watt, memory and interconnect per FLOP, per dollar."""
    bandwidth = product.memory_bandwidth_bytes_s
    ridge = {k: v / bandwidth for k, v in product.dense_peaks().items()} if bandwidth else {}
    best = best_dense_peak(product, 16)
    link = host_link_bandwidth(catalog, product)
    link_name = None
    if product.nvlink_bandwidth_bytes_s:
        link_name = f"NVLink {product.nvlink_generation}"
    elif link is not None:
        link_name = f"PCIe Gen{product.pcie_generation} x{product.pcie_lanes or 16}"
    if best is None:
        return Derived(ridge_point=MappingProxyType(ridge), gpu_link=link_name)
    key, flops = best
    return Derived(
        best_16bit_key=key.value,
        best_16bit_flops=flops,
        ridge_point=MappingProxyType(ridge),
        flops_per_watt=flops / product.tdp_w if product.tdp_w else None,
        memory_per_flops=product.memory_bytes / flops,
        link_per_flops=link / flops if link else None,
        gpu_link=link_name,
        flops_per_dollar=flops / product.launch_price_usd if product.launch_price_usd else None,
    )
