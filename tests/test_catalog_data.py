"""The built-in catalog: coverage, sources, consistency with the silicon, published goldens."""

from __future__ import annotations

import pytest

from gpuarch.catalog import (
    PeakKey,
    Status,
    Tier,
    check_product,
    load_catalog,
)
from gpuarch.catalog.lookup import PRODUCT_NOISE, compact
from gpuarch.errors import AmbiguousNameError, UnknownNameError
from gpuarch.units import Unit, to_si

CATALOG = load_catalog()

# The products issue #2 names; each must resolve to exactly one product.
REQUIRED = [
    "8800 GTX", "C1060", "C2050", "M2090", "K20X", "K40", "K80", "M40", "P100 SXM2",
    "P100 PCIe", "P4", "P40", "V100 SXM2", "V100 PCIe", "T4", "RTX 2080 Ti",
    "A100 SXM4 40GB", "A100 SXM4 80GB", "A100 PCIe 40GB", "A100 PCIe 80GB", "A30", "A10",
    "A40", "RTX 3090", "RTX A6000", "Jetson AGX Orin", "RTX 4090", "L4", "L40", "L40S",
    "RTX 6000 Ada", "H100 SXM", "H100 PCIe", "H100 NVL", "H200 SXM", "H200 NVL", "GH200",
    "B200", "GB200", "B300", "RTX 5090", "RTX PRO 6000",
]

GENERATIONS = ["tesla", "fermi", "kepler", "maxwell", "pascal", "volta", "turing", "ampere",
               "ada", "hopper", "blackwell"]


def test_coverage() -> None:
    """At least 45 products over all 11 generations and all four tiers."""
    assert len(CATALOG.products) >= 45
    keys = [a.key for a in CATALOG.architectures]
    assert keys[: len(GENERATIONS)] == GENERATIONS
    assert {p.tier for p in CATALOG.products} == set(Tier)
    for arch in CATALOG.architectures:
        assert CATALOG.products_of(arch), f"{arch.name} has no product"


@pytest.mark.parametrize("name", REQUIRED)
def test_required_products_resolve(name: str) -> None:
    """Every product the issue names is in the catalog under a name people type."""
    try:
        product = CATALOG.product(name)
    except AmbiguousNameError as exc:  # a family name: all candidates must share the family
        assert all(compact(name, PRODUCT_NOISE) in compact(c, PRODUCT_NOISE)
                   for c in exc.candidates)
        return
    assert product.key


@pytest.mark.parametrize("product", CATALOG.products, ids=lambda p: p.key)
def test_product_is_consistent_with_its_silicon(product) -> None:  # type: ignore[no-untyped-def]
    """SMs x per-SM rate x clock gives each published peak within 2% (or a documented
    exception); bus x data rate gives the bandwidth; sparse = 2 x dense."""
    bad = [f for f in check_product(CATALOG, product) if f.status is Status.MISMATCH]
    assert not bad, "\n".join(f"{f.check}: {f.detail}" for f in bad)


@pytest.mark.parametrize("product", CATALOG.products, ids=lambda p: p.key)
def test_product_values_are_sane(product) -> None:  # type: ignore[no-untyped-def]
    """Present counts and clocks are positive; sparse peaks exceed dense ones."""
    assert product.sms is None or product.sms > 0
    assert product.boost_clock_hz is None or product.boost_clock_hz > 0
    assert product.memory_bytes > 0 and product.memory_bandwidth_bytes_s > 0
    assert product.tdp_w is None or product.tdp_w > 0
    if product.base_clock_hz and product.boost_clock_hz:
        assert product.base_clock_hz <= product.boost_clock_hz
    for key, sparse in product.sparse_flops.items():
        assert key.is_tensor
        dense = product.dense_flops.get(key)
        assert dense is None or sparse > dense


def test_every_cited_source_is_defined_and_used_once() -> None:
    """Every product, chip and architecture names a defined document with a URL."""
    for p in CATALOG.products:
        assert p.source in CATALOG.sources
        assert all(s in CATALOG.sources for s in p.field_sources.values())
    for chip in CATALOG.chips.values():
        assert chip.source in CATALOG.sources
    for src in CATALOG.sources.values():
        assert src.url.startswith("https://") or src.url.startswith("http://"), src.id


def test_every_alias_resolves_to_its_own_product() -> None:
    """Aliases, keys and names are unique: each resolves to exactly the product that has it."""
    for p in CATALOG.products:
        for name in (p.key, p.name, *p.aliases):
            assert CATALOG.product(name) is p, name
            assert CATALOG.product(name.upper()) is p
            assert CATALOG.product(name.replace(" ", "-")) is p


def test_every_feature_is_explained() -> None:
    """Each feature an architecture lists has a registry entry with an explanation."""
    for arch in CATALOG.architectures:
        for key in arch.features:
            assert key in CATALOG.features
            assert len(CATALOG.features[key].explanation.split()) >= 15


def test_systems_reference_products() -> None:
    """Reference systems exist for NVSwitch, NVL72, hybrid cube mesh and PCIe."""
    fabrics = {s.intra_node_fabric for s in CATALOG.systems}
    assert {"nvswitch", "pcie"} <= fabrics
    for s in CATALOG.systems:
        CATALOG.product(s.gpu)
        assert s.gpus_per_node > 0 and s.intra_node_bandwidth_bytes_s > 0


def test_blackwell_systems_carry_their_cited_scale_out_rate() -> None:
    """One NIC per GPU on both NVL72 racks and on HGX B300: 400 Gb/s ConnectX-7 on GB200 (DGX
    GB200 user guide), 800 Gb/s ConnectX-8 on GB300 (four per 4-GPU tray in NVIDIA's NVL72
    enterprise reference architecture) and on HGX B300 (one per GPU in the HGX B300 enterprise
    reference architecture); 800 Gb/s XDR in the ConnectX-8 firmware release notes. Each rate
    names the document it comes from."""
    rates = {s.key: s for s in CATALOG.systems}
    for key, gbit in (("gb200-nvl72", 400), ("gb300-nvl72", 800), ("hgx-b300", 800)):
        system = rates[key]
        assert system.network_bandwidth_per_gpu_bytes_s == pytest.approx(
            to_si(gbit, Unit.GBIT_S))
        assert system.field_sources.get("network_bandwidth_per_gpu_gbit_s")


def test_a_sparse_only_peak_is_scaled_from_its_sibling_for_the_model_only() -> None:
    """HGX B300 publishes FP4 only with sparsity (18,000 TFLOPS per GPU, not twice the dense
    figure), so the catalog shows no dense FP4 peak for it; for the performance model the
    loader scales GB300's published dense FP4 (15,000: GB300 NVL72's 1,080 PFLOPS over 72)
    by the two products' dense FP8 peaks (4,500 and 5,000, each half a published sparse
    figure): 13,500 TFLOPS, between the 105 and 108 PFLOPS per 8-GPU board NVIDIA's HGX
    tables have printed. No other product gets one."""
    b300 = CATALOG.product("b300")
    assert b300.peak(PeakKey.TENSOR_FP4) is None
    assert b300.dense_from_sibling == {PeakKey.TENSOR_FP4: pytest.approx(13_500e12)}
    assert b300.dense_sibling == "gb300"
    assert 105e15 / 8 <= b300.dense_from_sibling[PeakKey.TENSOR_FP4] <= 108e15 / 8
    assert [p.key for p in CATALOG.products if p.dense_from_sibling] == ["b300"]


# Golden values: dense peaks as printed in NVIDIA's datasheets / whitepapers.
GOLDEN = [
    # NVIDIA A100 datasheet (2021): FP16 Tensor 312 TFLOPS dense, 624 sparse; 2,039 GB/s (80GB SXM)
    ("a100-sxm4-80gb", PeakKey.TENSOR_FP16, 312e12),
    ("a100-sxm4-80gb", PeakKey.FP64, 9.7e12),
    # NVIDIA V100 datasheet: SXM2 Tensor 125 TFLOPS, FP32 15.7 TFLOPS
    ("v100-sxm2-32gb", PeakKey.TENSOR_FP16, 125e12),
    ("v100-sxm2-32gb", PeakKey.FP32, 15.7e12),
    # H100 whitepaper / datasheet: SXM5 dense FP16/BF16 Tensor 989.4 TFLOPS, FP8 1,978.9
    ("h100-sxm5-80gb", PeakKey.TENSOR_BF16, 989.4e12),
    ("h100-sxm5-80gb", PeakKey.TENSOR_FP8, 1978.9e12),
]


@pytest.mark.parametrize(("key", "peak", "value"), GOLDEN)
def test_golden_peaks(key: str, peak: PeakKey, value: float) -> None:
    """Published dense peaks, to the digit the datasheet prints."""
    assert CATALOG.product(key).dense_flops[peak] == pytest.approx(value, rel=1e-3)


def test_golden_bandwidth_and_memory() -> None:
    """A100 80GB SXM: 2,039 GB/s and 80 GiB; H100 SXM5: 3.35 TB/s (datasheets)."""
    a100 = CATALOG.product("a100-sxm4-80gb")
    assert a100.memory_bandwidth_bytes_s == pytest.approx(2039e9, rel=1e-3)
    assert a100.memory_bytes == 80 * 2**30
    h100 = CATALOG.product("h100-sxm5-80gb")
    assert h100.memory_bandwidth_bytes_s == pytest.approx(3.35e12, rel=1e-2)


def test_family_names_pick_the_flagship_and_typos_get_suggestions() -> None:
    """'h100' is the SXM part; a typo gets 'did you mean'."""
    assert CATALOG.product("h100").key == "h100-sxm5-80gb"
    assert CATALOG.product("NVIDIA H100-SXM5-80GB").key == "h100-sxm5-80gb"
    # the names nvidia-smi prints, pasted as they are
    assert CATALOG.product("NVIDIA H100 80GB HBM3").key == "h100-sxm5-80gb"
    assert CATALOG.product("NVIDIA A100-SXM4-80GB").key == "a100-sxm4-80gb"
    assert CATALOG.product("NVIDIA H100 PCIe").key == "h100-pcie-80gb"
    with pytest.raises(UnknownNameError, match="did you mean"):
        CATALOG.product("h1000")


def test_ambiguous_name_lists_candidates() -> None:
    """A name that fits several products lists them rather than guessing."""
    with pytest.raises(AmbiguousNameError) as info:
        CATALOG.product("h200 141gb")
    assert len(info.value.candidates) >= 2


def test_features_that_vary_within_an_architecture_follow_the_product() -> None:
    """MIG and FP64 Tensor are GA100-only; RTX 3090 (GA102) still has Tensor Cores."""
    a100, rtx3090 = CATALOG.product("a100"), CATALOG.product("rtx 3090")
    assert CATALOG.has_feature(a100, "mig") and not CATALOG.has_feature(rtx3090, "mig")
    assert CATALOG.has_feature(a100, "fp64_tensor")
    assert not CATALOG.has_feature(rtx3090, "fp64_tensor")
    assert CATALOG.has_feature(rtx3090, "tensor_cores")
    assert not CATALOG.has_feature(CATALOG.product("v100"), "tf32")  # not a Volta feature


def test_dense_from_sparse_is_half_and_respects_exceptions() -> None:
    """H200's Tensor peaks are published only with sparsity: dense is half. Blackwell
    Ultra's FP4 sparse figure is not 2x dense, so no dense FP4 is taken from it."""
    h200 = CATALOG.product("h200")
    assert PeakKey.TENSOR_BF16 not in h200.dense_flops
    assert h200.dense_origin(PeakKey.TENSOR_BF16) == "half of sparse"
    assert h200.peak(PeakKey.TENSOR_BF16) == h200.sparse_flops[PeakKey.TENSOR_BF16] / 2
    b300 = CATALOG.product("b300")
    assert PeakKey.TENSOR_FP4 in b300.sparse_flops
    assert b300.peak(PeakKey.TENSOR_FP4) is None
    # published dense figures are never replaced
    h100 = CATALOG.product("h100")
    assert h100.dense_origin(PeakKey.TENSOR_BF16) == "published"
    assert not h100.dense_from_sparse
