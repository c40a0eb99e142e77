"""Collective communication time: ring/tree all-reduce, reduce-scatter, all-gather,
all-to-all and point-to-point, inside a node (NVLink/NVSwitch or PCIe) and across nodes
(InfiniBand/RoCE), hierarchical when a group spans both.

Bandwidth-term conventions follow NCCL's bus-bandwidth model (nccl-tests PERFORMANCE.md):
an n-rank ring all-reduce moves 2(n-1)/n of the buffer through each rank's link, reduce-
scatter and all-gather (n-1)/n, all-to-all (n-1)/n. Each ring step adds a latency term.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from gpuarch.catalog.model import Product, System
from gpuarch.errors import GpuarchError
from gpuarch.perf.efficiency import Efficiency

__all__ = ["Collective", "Fabric", "Group", "Link", "Num", "collective_time", "link_for",
           "scalar"]

Num = Any
"""A float, or a NumPy array of floats: the formulas here serve one estimate and, over
arrays, the advisor's whole search space."""


class Collective(Enum):
    """Collective operations."""

    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    ALL_TO_ALL = "all_to_all"
    P2P = "p2p"

    def traffic_factor(self, n: Num) -> Num:
        """Bytes through each rank's link per byte of buffer, for ``n`` ranks (an int or an
        array of them)."""
        n = np.asarray(n, dtype=np.float64)
        if self is Collective.ALL_REDUCE:
            f = 2.0 * (n - 1) / n
        elif self is Collective.P2P:
            f = np.ones_like(n)
        else:
            f = (n - 1) / n
        return np.where(n <= 1, 0.0, f)

    def steps(self, n: Num) -> Num:
        """Latency-bound steps of a ring implementation."""
        n = np.asarray(n, dtype=np.float64)
        if self is Collective.ALL_REDUCE:
            s = 2 * (n - 1)
        elif self is Collective.P2P:
            s = np.ones_like(n)
        else:
            s = n - 1
        return np.where(n <= 1, 0.0, s)


class Fabric(Enum):
    """What carries a link."""

    NVLINK = "nvlink"
    PCIE = "pcie"
    NETWORK = "network"


@dataclass(frozen=True)
class Link:
    """Per-GPU, per-direction bandwidth of one level (bytes/s, datasheet) and its fabric."""

    fabric: Fabric
    bandwidth: float

    def effective(self, eff: Efficiency) -> float:
        factor = {Fabric.NVLINK: eff.nvlink_bus, Fabric.PCIE: eff.pcie_bus,
                  Fabric.NETWORK: eff.network_bus}[self.fabric]
        return self.bandwidth * factor


@dataclass(frozen=True)
class Group:
    """A communicator: ``size`` ranks, ``per_node`` of them in each node."""

    size: Num  # an int, or an array of them (the advisor evaluates many at once)
    per_node: Num
    intra: Link
    inter: Link | None

    @property
    def nodes(self) -> Num:
        return np.ceil(np.asarray(self.size) / self.per_node)


def link_for(product: Product, system: System | None, pcie_x16_bytes_s: float | None
             ) -> tuple[Link, Link | None]:
    """Intra-node and inter-node links for a GPU, from the system if given, else from the
    product (NVLink if it has it, else PCIe)."""
    if system is not None:
        fabric = Fabric.PCIE if system.intra_node_fabric == "pcie" else Fabric.NVLINK
        intra = Link(fabric, system.intra_node_bandwidth_bytes_s / 2)
        inter = (Link(Fabric.NETWORK, system.network_bandwidth_per_gpu_bytes_s)
                 if system.network_bandwidth_per_gpu_bytes_s else None)
        return intra, inter
    if product.nvlink_bandwidth_bytes_s:
        return Link(Fabric.NVLINK, product.nvlink_bandwidth_bytes_s / 2), None
    if pcie_x16_bytes_s:
        return Link(Fabric.PCIE, pcie_x16_bytes_s), None
    raise GpuarchError(f"{product.name}: no NVLink or PCIe bandwidth in the catalog; "
                       "give --system")


def scalar(x: Num) -> Num:
    """A 0-d result back as a float (arrays pass through)."""
    arr = np.asarray(x)
    return float(arr) if arr.ndim == 0 else arr


def collective_time(kind: Collective, size_bytes: Num, group: Group, eff: Efficiency
                    ) -> Num:
    """Seconds for one collective of a ``size_bytes`` buffer over ``group``.

    A group inside one node uses the intra-node link. A group spanning nodes runs
    hierarchically: reduce-scatter inside the node, the collective across nodes on
    1/per_node of the buffer (each GPU with its own NIC), all-gather inside the node.
    Sizes and group sizes may be arrays (one formula for the estimate and the advisor).
    """
    n = np.asarray(group.size, dtype=np.float64)
    size = np.asarray(size_bytes, dtype=np.float64)
    lat = eff.collective_latency_s
    intra_bw = group.intra.effective(eff)
    nodes = np.asarray(group.nodes, dtype=np.float64)
    result = kind.traffic_factor(n) * size / intra_bw + kind.steps(n) * lat
    spans = (nodes > 1) & (n > 1)
    if np.any(spans):
        if group.inter is None:
            raise GpuarchError("the job spans several nodes but the system has no "
                               "inter-node network in the catalog; give --system with a "
                               "network")
        inter_bw = group.inter.effective(eff)
        g = np.asarray(group.per_node, dtype=np.float64)
        if kind is Collective.P2P:
            cross = size / inter_bw + lat + 0 * n
        elif kind is Collective.ALL_TO_ALL:
            # the share of the buffer for ranks in other nodes crosses the network
            cross = ((n - g) / n * size / inter_bw + (g - 1) / n * size / intra_bw
                     + (n - 1) * lat)
        else:
            inner_kind = (Collective.REDUCE_SCATTER if kind is not Collective.ALL_GATHER
                          else Collective.ALL_GATHER)
            inner = inner_kind.traffic_factor(g) * size / intra_bw + inner_kind.steps(g) * lat
            if kind is Collective.ALL_REDUCE:
                inner = inner * 2  # reduce-scatter before, all-gather after
            cross = inner + kind.traffic_factor(nodes) * (size / g) / inter_bw \
                + kind.steps(nodes) * lat
        result = np.where(spans, cross, result)
    return scalar(np.where((n <= 1) | (size <= 0), 0.0, result))
