"""Name resolution: case, separators and brand words never matter; ambiguity is explicit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.catalog.lookup import PRODUCT_NOISE, Resolver, compact
from gpuarch.errors import AmbiguousNameError, GpuarchError, UnknownNameError


def _resolver() -> Resolver[str]:
    r: Resolver[str] = Resolver("GPU", PRODUCT_NOISE)
    r.add("H100 SXM5 80GB", "h100-sxm", ["h100-sxm5-80gb", "h100", "h100 sxm"])
    r.add("H100 PCIe 80GB", "h100-pcie", ["h100-pcie-80gb", "h100 pcie"])
    r.add("A100 PCIe 40GB", "a100-pcie-40", ["a100-pcie-40gb"])
    r.add("A100 PCIe 80GB", "a100-pcie-80", ["a100-pcie-80gb"])
    return r


NAMES = ["H100 SXM5 80GB", "h100-sxm5-80gb", "h100", "h100 sxm", "H100 PCIe 80GB", "h100 pcie"]


@given(name=st.sampled_from(NAMES), seps=st.sampled_from([" ", "-", "_", "  ", " - "]),
       upper=st.booleans(), brand=st.sampled_from(["", "NVIDIA ", "nvidia-"]))
def test_case_separators_and_brand_are_ignored(name: str, seps: str, upper: bool,
                                               brand: str) -> None:
    """Any spelling of a registered name resolves to the same item."""
    r = _resolver()
    expected = r.resolve(name)
    variant = brand + name.replace(" ", seps).replace("-", seps)
    assert r.resolve(variant.upper() if upper else variant) == expected


def test_partial_names_resolve_when_unique() -> None:
    """Token subsets and leading tokens run together find a unique product."""
    r = _resolver()
    assert r.resolve("A100 40GB") == "a100-pcie-40"
    assert r.resolve("H100SXM5") == "h100-sxm"


def test_ambiguous_and_unknown() -> None:
    """Several matches list the candidates; none gives close suggestions."""
    r = _resolver()
    with pytest.raises(AmbiguousNameError, match="'A100 PCIe 40GB' or 'A100 PCIe 80GB'"):
        r.resolve("a100 pcie")
    with pytest.raises(UnknownNameError, match="did you mean 'h100'"):
        r.resolve("h10")
    with pytest.raises(UnknownNameError):
        r.resolve("  ")


def test_a_name_claimed_twice_is_an_error() -> None:
    """Two products may not share a name or alias."""
    r = _resolver()
    with pytest.raises(GpuarchError, match="claimed by both"):
        r.add("Other", "x", ["H100-SXM"])


@given(st.text(min_size=1, max_size=30))
def test_compact_is_idempotent(text: str) -> None:
    """compact() of a compact name changes nothing."""
    once = compact(text, PRODUCT_NOISE)
    assert compact(once, PRODUCT_NOISE) in (once, "")
