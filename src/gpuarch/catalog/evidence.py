"""Whether one product has a feature its architecture lists.

Some features vary within an architecture (MIG on A100, not on RTX 3090; FP64 Tensor Cores
on GA100 only). ``features.toml`` names, per such feature, the published figures that show a
product has it; any one suffices. Rules are parsed and checked when the catalog loads.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuarch.catalog.model import Chip, Product, SMResources
from gpuarch.catalog.peaks import PeakKey
from gpuarch.catalog.records import data_keys

__all__ = ["Rule", "parse_rule"]

Rule = Callable[[Product, Chip], bool]

_PEAKS = {p.value: p for p in PeakKey}


def parse_rule(text: str) -> Rule:
    """Turn ``"peak:tensor_fp8"`` (and the other forms in features.toml) into a test.

    Raises ``ValueError`` naming what is wrong.
    """
    kind, _, arg = text.partition(":")
    if kind == "field":
        field = data_keys(Product).get(arg)
        if field is None:
            raise ValueError(f"{arg!r} is not a product key")
        name = field.name
        return lambda p, c: bool(getattr(p, name))
    if kind == "peak":
        if arg not in _PEAKS:
            raise ValueError(f"{arg!r} is not a peak key")
        key = _PEAKS[arg]
        return lambda p, c: p.peak(key) is not None or key in p.sparse_flops
    if kind == "memory":
        return lambda p, c: p.memory_type.startswith(arg)
    if kind == "chip" and arg == "sparsity_2to4":
        return lambda p, c: c.sparsity_2to4
    if kind == "chip_sm":
        sm_field = data_keys(SMResources).get(arg)
        if sm_field is None:
            raise ValueError(f"{arg!r} is not an SM resource key")
        sm_name = sm_field.name
        return lambda p, c: bool(getattr(c.sm, sm_name))
    raise ValueError(f"unknown rule {text!r}; expected field:, peak:, memory:, "
                     "chip:sparsity_2to4 or chip_sm:")
