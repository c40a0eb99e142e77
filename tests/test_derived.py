"""Derived metrics and the evolution table."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.catalog import Metric, PeakKey, Tier, derive, evolution, flagship, load_catalog
from gpuarch.catalog.derived import best_dense_peak

CATALOG = load_catalog()


def test_ridge_point_a100() -> None:
    """A100 SXM4 80GB: 312 TFLOPS / 2,039 GB/s = 153 FLOP per byte (datasheet figures)."""
    d = derive(CATALOG, CATALOG.product("a100-sxm4-80gb"))
    assert d.ridge_point[PeakKey.TENSOR_FP16] == pytest.approx(312e12 / 2039e9, rel=1e-3)
    assert d.best_16bit_flops == pytest.approx(312e12)
    assert d.flops_per_watt == pytest.approx(312e12 / 400)
    assert d.gpu_link == "NVLink 3"


def test_pcie_link_from_interconnect_table() -> None:
    """A GPU without NVLink gets its PCIe x16 bandwidth, both directions."""
    l4 = CATALOG.product("l4")
    d = derive(CATALOG, l4)
    assert d.gpu_link is not None and d.gpu_link.startswith("PCIe Gen4")
    pcie = CATALOG.pcie_generation(4)
    assert pcie is not None
    assert d.link_per_flops is not None and d.best_16bit_flops is not None
    assert d.link_per_flops * d.best_16bit_flops == pytest.approx(2 * pcie.x16_bandwidth_bytes_s)


def test_best_dense_peak_never_uses_sparse_or_fp8() -> None:
    """The 16-bit headline is a dense FP16/BF16/TF32/FP32 figure, halved if only sparse."""
    for p in CATALOG.products:
        best = best_dense_peak(p, 16)
        if best is not None:
            key, value = best
            assert 16 <= key.bits <= 32 and not key.is_integer
            assert value == p.peak(key)
            if p.dense_origin(key) == "half of sparse":
                assert value == p.sparse_flops[key] / 2


def test_evolution_ratios_chain() -> None:
    """Each ratio is this flagship's value over the previous row's."""
    rows = evolution(CATALOG, [Metric.FP32, Metric.BANDWIDTH])
    for before, now in itertools.pairwise(rows):
        for m in (Metric.FP32, Metric.BANDWIDTH):
            a, b = before.values[m], now.values[m]
            if a and b:
                assert now.ratio_to_previous[m] == pytest.approx(b / a)


def test_compute_outgrew_bandwidth() -> None:
    """From the first to the last generation, 16-bit compute grew far more than bandwidth."""
    rows = evolution(CATALOG, [Metric.FP16, Metric.BANDWIDTH])
    first, last = rows[0], rows[-1]
    compute = (last.values[Metric.FP16] or 0) / (first.values[Metric.FP16] or 1)
    memory = (last.values[Metric.BANDWIDTH] or 0) / (first.values[Metric.BANDWIDTH] or 1)
    assert compute > 10 * memory


@given(st.sets(st.sampled_from(list(Tier)), min_size=1))
def test_flagship_is_the_fastest_in_its_tiers(tiers: set[Tier]) -> None:
    """No product in the chosen tiers of an architecture beats its flagship at 16 bits."""
    for row in evolution(CATALOG, [Metric.FP16], tiers):
        arch = CATALOG.architecture(row.architecture)
        pool = [p for p in CATALOG.products_of(arch) if p.tier in tiers]
        best = flagship(pool)
        assert best is not None and best.key == row.flagship_key
        top = best_dense_peak(best, 16)
        for p in pool:
            other = best_dense_peak(p, 16)
            if other and top:
                assert other[1] <= top[1]
