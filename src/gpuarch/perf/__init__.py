"""How fast one operator or one collective runs on one GPU or group: roofline with
size-dependent efficiency, collectives over NVLink/NVSwitch, PCIe and networks."""

from gpuarch.perf.collectives import Collective, Fabric, Group, Link, collective_time, link_for
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
