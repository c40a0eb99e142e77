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
        Collective as Collective,
    )
    from gpuarch.perf.collectives import (
        Fabric as Fabric,
    )
    from gpuarch.perf.collectives import (
        Group as Group,
    )
    from gpuarch.perf.collectives import (
        Link as Link,
    )
    from gpuarch.perf.collectives import (
        collective_time as collective_time,
    )
    from gpuarch.perf.collectives import (
        link_for as link_for,
    )
    from gpuarch.perf.efficiency import (
        DEFAULT_EFFICIENCY as DEFAULT_EFFICIENCY,
    )
    from gpuarch.perf.efficiency import (
        Efficiency as Efficiency,
    )
    from gpuarch.perf.precision import (
        MatmulPeak as MatmulPeak,
    )
    from gpuarch.perf.precision import (
        Precision as Precision,
    )
    from gpuarch.perf.precision import (
        matmul_peak as matmul_peak,
    )
    from gpuarch.perf.roofline import (
        Attention as Attention,
    )
    from gpuarch.perf.roofline import (
        Bound as Bound,
    )
    from gpuarch.perf.roofline import (
        Device as Device,
    )
    from gpuarch.perf.roofline import (
        Elementwise as Elementwise,
    )
    from gpuarch.perf.roofline import (
        Gemm as Gemm,
    )
    from gpuarch.perf.roofline import (
        Op as Op,
    )
    from gpuarch.perf.roofline import (
        OpCost as OpCost,
    )
    from gpuarch.perf.roofline import (
        op_cost as op_cost,
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

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'gpuarch.perf' has no attribute {name!r}")
    value = getattr(import_module(f"gpuarch.perf.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value
