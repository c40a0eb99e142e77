"""How fast one operator or one collective runs on one GPU or group: roofline with
size-dependent efficiency, collectives over NVLink/NVSwitch, PCIe and networks.

The names below are loaded on first use, so that importing a light submodule
(``gpuarch.perf.kv_formats`` for ``gpuarch show``) does not load NumPy with the roofline
and the collectives: a cold ``gpuarch show`` stays a catalog lookup."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuarch.perf.collectives import (
        Collective,
        Fabric,
        Group,
        Link,
        collective_time,
        link_for,
    )
    from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
    from gpuarch.perf.precision import MatmulPeak, Precision, matmul_peak
    from gpuarch.perf.roofline import (
        Attention,
        Bound,
        Device,
        Elementwise,
        Gemm,
        Op,
        OpCost,
        op_cost,
    )

_HOMES = {
    "Collective": "collectives", "Fabric": "collectives", "Group": "collectives",
    "Link": "collectives", "collective_time": "collectives", "link_for": "collectives",
    "DEFAULT_EFFICIENCY": "efficiency", "Efficiency": "efficiency",
    "MatmulPeak": "precision", "Precision": "precision", "matmul_peak": "precision",
    "Attention": "roofline", "Bound": "roofline", "Device": "roofline",
    "Elementwise": "roofline", "Gemm": "roofline", "Op": "roofline", "OpCost": "roofline",
    "op_cost": "roofline",
}

__all__ = [
    "DEFAULT_EFFICIENCY",
    "Attention",
    "Bound",
    "Collective",
    "Device",
    "Efficiency",
    "Elementwise",
    "Fabric",
    "Gemm",
    "Group",
    "Link",
    "MatmulPeak",
    "Op",
    "OpCost",
    "Precision",
    "collective_time",
    "link_for",
    "matmul_peak",
    "op_cost",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'gpuarch.perf' has no attribute {name!r}")
    value = getattr(import_module(f"gpuarch.perf.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value
