"""Collective communication time: ring/tree all-reduce, reduce-scatter, all-gather,
all-to-all and point-to-point, inside a node (NVLink/NVSwitch or PCIe) and across nodes
(InfiniBand/RoCE), hierarchical when a group spans both.

Bandwidth-term conventions follow NCCL's bus-bandwidth model (nccl-tests PERFORMANCE.md):
an n-rank ring all-reduce moves 2(n-1)/n of the buffer through each rank's link, reduce-
scatter and all-gather (n-1)/n, all-to-all (n-1)/n. Each ring step adds a latency term:
either one fitted per-step latency (``Efficiency.collective_latency_s``, what serving
engines' collectives outside one NVLink domain are fitted with) or NCCL's own model
(``NCCL_PROTOCOLS``, from ``data/nccl.toml``): a base latency per collective, a per-hop
latency by fabric, and the fastest of its LL, LL128 and Simple protocols, which trade
bandwidth for latency. A serving engine's tensor-parallel all-reduce inside one NVLink domain
runs the engine's own one-shot kernel where that is faster than NCCL
(``engine_all_reduce_time``, ``data/engine_all_reduce.toml``).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from gpuarch.catalog.model import Product, System
from gpuarch.errors import GpuarchError
from gpuarch.perf.efficiency import Efficiency
from gpuarch.perf.num import any_of, maximum, minimum, to_float, where
from gpuarch.units import Unit, to_si

__all__ = ["Collective", "Fabric", "Group", "Link", "Num", "OneShotAllReduce", "Protocol",
           "collective_time", "dispatch_time", "engine_all_reduce_applies",
           "engine_all_reduce_time", "exchange_latencies", "link_for", "nccl_protocols",
           "nvlink_latency_scale", "one_shot_all_reduce", "remote_nodes_per_token", "scalar"]

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
        n = to_float(n)
        if self is Collective.ALL_REDUCE:
            f = 2.0 * (n - 1) / n
        elif self is Collective.P2P:
            f = 1.0 + 0.0 * n
        else:
            f = (n - 1) / n
        return where(n <= 1, 0.0, f)

    def steps(self, n: Num) -> Num:
        """Latency-bound steps of a ring implementation."""
        n = to_float(n)
        if self is Collective.ALL_REDUCE:
            s = 2 * (n - 1)
        elif self is Collective.P2P:
            s = 1.0 + 0.0 * n
        else:
            s = n - 1
        return where(n <= 1, 0.0, s)












class Fabric(Enum):
    """What carries a link."""

    NVLINK = "nvlink"
    PCIE = "pcie"
    NETWORK = "network"

    # identity hash, consistent with identity equality and cheaper than Enum's (see PeakKey):
    # fabrics key every protocol's hop latencies
    __hash__ = object.__hash__


@dataclass(frozen=True)
class Link:
    """Per-GPU, per-direction bandwidth of one level (bytes/s, datasheet) and its fabric."""

    fabric: Fabric
    bandwidth: float
    # NVLink SHARP on an NVSwitch of Hopper or Blackwell GPUs: NCCL's nvlsEfficiency for
    # the architecture (``nvls_for``); 0 = none
    nvls_efficiency: float = 0.0
    # NCCL's latencies (base and per hop) on this link's GPUs over NCCL's own table, as
    # measured inside one NVLink domain (``nvlink_latency_scale``); 1 = the table's
    latency_scale: float = 1.0
    # GPUs joined by NVLink directly, every pair by the same number of links, with no switch
    # (an HGX H100 4-GPU board): the share of a GPU's links that reach each other GPU; 0 =
    # through NVSwitches, where any group of GPUs has the whole of ``bandwidth``
    peer_share: float = 0.0

    def reach(self, ranks: Num) -> Num:
        """The share of ``bandwidth`` that joins a GPU to the others of a group of ``ranks``
        GPUs of its node: all of it through a switch; on a fully connected mesh only the
        links to those others, ``(ranks - 1) x peer_share`` (a pair on an HGX H100 4-GPU
        board: 6 of 18 links)."""
        if not self.peer_share:
            return 1.0
        return minimum(1.0, maximum(to_float(ranks) - 1.0, 1.0) * self.peer_share)

    def effective(self, eff: Efficiency, ranks: Num | None = None) -> Num:
        """Bus bandwidth (bytes/s) of a collective on this link; over NVLink with ``ranks``
        GPUs of one node taking part, the smaller share a small group reaches
        (``Efficiency.nvlink_small_group``), or on a fully connected mesh the links to the
        group's other GPUs (``reach``) where those give less."""
        if self.fabric is Fabric.NVLINK:
            factor = eff.nvlink_bus
        else:
            factor = eff.pcie_bus if self.fabric is Fabric.PCIE else eff.network_bus
        if ranks is None or self.fabric is not Fabric.NVLINK:
            return self.bandwidth * factor
        share = 1.0 - eff.nvlink_small_group / maximum(to_float(ranks), 2.0)
        if self.peer_share:
            share = minimum(share, self.reach(ranks))
        return self.bandwidth * factor * share


@dataclass(frozen=True)
class Group:
    """A communicator: ``size`` ranks, ``per_node`` of them in each node."""

    size: Num  # an int, or an array of them (the advisor evaluates many at once)
    per_node: Num
    intra: Link
    inter: Link | None

    @property
    def nodes(self) -> Num:
        size = to_float(self.size)
        if isinstance(size, np.ndarray) or isinstance(self.per_node, np.ndarray):
            return np.ceil(size / self.per_node)
        return float(math.ceil(size / self.per_node))


def link_for(product: Product, system: System | None, pcie_x16_bytes_s: float | None,
             required: bool = True) -> tuple[Link, Link | None]:
    """Intra-node and inter-node links for a GPU, from the system if given, else from the
    product (NVLink if it has it, else PCIe). When the catalog has neither and the job
    communicates nothing (``required`` false: one GPU per model replica), an unlimited link
    stands in, which no collective uses."""
    if system is not None:
        fabric = Fabric.PCIE if system.intra_node_fabric == "pcie" else Fabric.NVLINK
        links = system.nvlink_links_per_peer
        intra = Link(fabric, system.intra_node_bandwidth_bytes_s / 2,
                     nvls_for(product, system),
                     nvlink_latency_scale(product) if fabric is Fabric.NVLINK else 1.0,
                     links / product.nvlink_links if links and product.nvlink_links
                     else 0.0)
        inter = (Link(Fabric.NETWORK, system.network_bandwidth_per_gpu_bytes_s)
                 if system.network_bandwidth_per_gpu_bytes_s else None)
        return intra, inter
    if product.nvlink_bandwidth_bytes_s:
        return Link(Fabric.NVLINK, product.nvlink_bandwidth_bytes_s / 2,
                    latency_scale=nvlink_latency_scale(product)), None
    if pcie_x16_bytes_s:
        return Link(Fabric.PCIE, pcie_x16_bytes_s), None
    if not required:
        return Link(Fabric.PCIE, math.inf), None
    raise GpuarchError(f"{product.name}: no NVLink or PCIe bandwidth in the catalog; "
                       "give --system")


@dataclass(frozen=True)
class Protocol:
    """One NCCL protocol's latency and bandwidth terms (seconds; bandwidth as a factor)."""

    name: str
    base_latency_s: float
    bandwidth_factor: float
    hop_latency_s: dict[Fabric, float]
    tree_base_latency_s: float | None = None  # all-reduce as a double binary tree
    tree_bandwidth_factor: float = 1.0
    tree_hop_latency_s: dict[Fabric, float] | None = None


NCCL_FILE = Path(__file__).with_name("data") / "nccl.toml"


@cache
def nccl_protocols(path: Path = NCCL_FILE) -> tuple[Protocol, ...]:
    """NCCL's ring protocols with their latencies (``data/nccl.toml``, which cites them)."""
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    def hops(table: dict[str, float]) -> dict[Fabric, float]:
        return {Fabric(k): to_si(v, Unit.US) for k, v in table.items()}

    return tuple(
        Protocol(p["name"], to_si(p["base_latency_us"], Unit.US), p["bandwidth_factor"],
                 hops(p["hop_latency_us"]),
                 to_si(p["tree_base_latency_us"], Unit.US) if "tree_base_latency_us" in p
                 else None,
                 p.get("tree_bandwidth_factor", 1.0),
                 hops(p["tree_hop_latency_us"]) if "tree_hop_latency_us" in p else None)
        for p in raw["protocol"])


@dataclass(frozen=True)
class Nvls:
    """NCCL's NVLink SHARP all-reduce terms (``data/nccl.toml``, which cites them)."""

    efficiency: dict[str, float]  # by architecture, lower case
    bandwidth_multiplier: float
    latency_s: float


@cache
def nvls_params(path: Path = NCCL_FILE) -> Nvls:
    """The NVLS all-reduce terms of NCCL's tuner."""
    with path.open("rb") as fh:
        raw = tomllib.load(fh)["nvls"]
    return Nvls(dict(raw["efficiency"]), float(raw["bandwidth_multiplier"]),
                to_si(raw["latency_us"], Unit.US))


@cache
def _nvlink_latency_scales(path: Path = NCCL_FILE) -> dict[str, float]:
    with path.open("rb") as fh:
        return dict(tomllib.load(fh)["nvlink_latency"]["scale"])


def nvlink_latency_scale(product: Product) -> float:
    """How much longer NCCL's collectives take to start and to step inside one NVLink domain
    of ``product``'s architecture than NCCL's latency table says, as measured
    (``data/nccl.toml`` [nvlink_latency]); 1 for an architecture not measured."""
    return _nvlink_latency_scales().get(product.architecture.lower(), 1.0)


def nvls_for(product: Product, system: System | None) -> float:
    """NCCL's NVLS efficiency for ``product`` in ``system``: its architecture's where the
    system's GPUs meet in an NVSwitch (Hopper and Blackwell), else 0."""
    if system is None or system.intra_node_fabric != "nvswitch":
        return 0.0
    return nvls_params().efficiency.get(product.architecture.lower(), 0.0)


ENGINE_ALL_REDUCE_FILE = Path(__file__).with_name("data") / "engine_all_reduce.toml"


@dataclass(frozen=True)
class OneShotAllReduce:
    """The serving engines' one-shot all-reduce kernels (``data/engine_all_reduce.toml``,
    which cites the measurements they are fitted on)."""

    latency_s: dict[str, dict[str, float]]  # by architecture (lower case), by engine
    bus: float  # the share of the per-direction NVLink rate a GPU reads its peers at
    max_ranks: int  # the most GPUs one kernel joins
    host_gpus: dict[str, int]  # GPUs of one host by product key, where a node spans hosts

    def ranks(self, product_key: str, gpus_per_node: int) -> int:
        """The most GPUs of a group the kernels join on ``product_key``'s GPUs, nodes of
        ``gpus_per_node``: one host's, at most ``max_ranks``."""
        return min(self.max_ranks, self.host_gpus.get(product_key, gpus_per_node))


@cache
def one_shot_all_reduce(path: Path = ENGINE_ALL_REDUCE_FILE) -> OneShotAllReduce:
    """The one-shot kernels' fitted terms."""
    with path.open("rb") as fh:
        raw = tomllib.load(fh)["one_shot"]
    return OneShotAllReduce(
        {arch: {engine: to_si(v, Unit.US) for engine, v in by_engine.items()}
         for arch, by_engine in raw["latency_us"].items()}, float(raw["bus"]),
        int(raw["max_ranks"]), {k: int(v) for k, v in raw["host_gpus"].items()})


def engine_all_reduce_applies(group: Group, architecture: str, system: System | None) -> bool:
    """True where a serving engine's own all-reduce kernels were measured for a group: all
    of it inside one node of ``system`` whose NVLink joins every pair of GPUs (an NVSwitch,
    or a full mesh of equal links like an HGX H100 4-GPU board), GPUs of an architecture
    ``one_shot_all_reduce`` lists. Elsewhere (over PCIe, PCIe cards joined in pairs by
    NVLink bridges, no system known, across nodes, Volta) the ring model stands."""
    every_pair = system is not None and (
        system.intra_node_fabric == "nvswitch"
        or (system.intra_node_fabric == "nvlink-mesh" and bool(system.nvlink_links_per_peer)))
    return (every_pair and group.intra.fabric is Fabric.NVLINK
            and not isinstance(group.size, np.ndarray) and group.size <= group.per_node
            and architecture.lower() in one_shot_all_reduce().latency_s)


def engine_all_reduce_time(size_bytes: Num, group: Group, eff: Efficiency, kernels: str,
                           architecture: str, nvls: bool = True, one_shot: bool = True,
                           terms: OneShotAllReduce | None = None) -> Num:
    """Seconds for one tensor-parallel all-reduce of ``size_bytes`` by a serving engine over
    ``group`` (inside one NVLink domain, ``engine_all_reduce_applies``): the faster of the
    engine's one-shot kernel (``kernels``, one of ``estimate.inference_config.
    ALL_REDUCE_KERNELS``; every GPU reads its n - 1 peers' buffers over its links at
    ``OneShotAllReduce.bus`` of the rate, after the kernel's fitted latency for the
    architecture) and NCCL as its own latency model
    prices it (``collective_time`` with NCCL's protocols, NVLink SHARP where ``nvls`` and
    the switch allow), as the engines hand large buffers to NCCL; ``kernels`` "nccl", or
    ``one_shot`` false (a group the kernels cannot join, ``OneShotAllReduce.ranks``): NCCL
    alone. Plus ``Efficiency.all_reduce_wait_s``, what a serving step's all-reduce takes
    beyond the kernel measured alone. ``terms``: the kernels' fitted terms, if not
    ``one_shot_all_reduce()``'s (a fit's trial)."""
    n = to_float(group.size)
    size = to_float(size_bytes)
    t = collective_time(Collective.ALL_REDUCE, size, group, eff, nccl_protocols(), nvls=nvls)
    if kernels != "nccl" and one_shot:
        terms = terms or one_shot_all_reduce()
        latency = terms.latency_s[architecture.lower()][kernels]
        link = group.intra
        t = minimum(t, latency + (n - 1) * size / (link.bandwidth * link.reach(n) * terms.bus))
    t = t + eff.all_reduce_wait_s
    if isinstance(size, np.ndarray):
        return scalar(np.where((n <= 1) | (size <= 0), 0.0, t))
    return 0.0 if n <= 1 or size <= 0 else float(t)


def nvls_all_reduce(transfer: Num, group: Group, nvls: bool) -> Num | None:
    """An all-reduce inside one NVSwitch node as NVLink SHARP runs it: the switch's latency
    and the ring's ``transfer`` seconds over twice the bus bandwidth times the
    architecture's efficiency. None where NVLS does not apply (not asked for, no NVLS on
    the link, or a group that spans nodes)."""
    if not nvls or not group.intra.nvls_efficiency:
        return None
    p = nvls_params()
    t = p.latency_s + transfer / (p.bandwidth_multiplier * group.intra.nvls_efficiency)
    nodes = group.nodes
    if not isinstance(nodes, np.ndarray) and not isinstance(t, np.ndarray):
        return math.inf if nodes > 1 else float(t)
    return scalar(np.where(to_float(nodes) > 1, np.inf, t))


def scalar(x: Num) -> Num:
    """A 0-d result back as a float (arrays pass through)."""
    arr = np.asarray(x)
    return float(arr) if arr.ndim == 0 else arr


def remote_nodes_per_token(copies: Num, nodes: Num, groups: int = 0,
                           groups_per_token: int = 0) -> Num:
    """Expected number of other nodes a token's ``copies`` routed copies land on, when each
    copy goes to an expert chosen uniformly over ``nodes`` equal nodes (independent picks):
    (nodes - 1) x (1 - (1 - 1/nodes)^copies). A node-deduplicating dispatcher sends the
    token over the network once per such node instead of once per copy.

    With group-limited routing (the experts in ``groups`` equal groups, a token's copies
    from at most ``groups_per_token`` of them, as DeepSeek-V3 routes) and whole groups on
    each node, the chosen groups span R = N (1 - C(G - G/N, T) / C(G, T)) of the N nodes and
    the copies land uniformly over those: R (1 - (1 - 1/R)^copies) nodes, of which
    (N - 1)/N are other nodes. Where the groups do not divide over the nodes the uniform
    count stands."""
    n = np.maximum(to_float(nodes), 1.0)
    k = to_float(copies)
    uniform = (n - 1) * (1 - (1 - 1 / n) ** k)
    if not groups or not 0 < groups_per_token < groups:
        return scalar(uniform)
    per_node = groups / n
    # C(G - G/N, T) / C(G, T): none of the token's T groups on a given node
    missed: Num = 1.0
    for i in range(groups_per_token):
        missed = missed * np.maximum(groups - per_node - i, 0.0) / (groups - i)
    reach = np.maximum(n * (1 - missed), 1.0)
    limited = reach * (1 - (1 - 1 / reach) ** k) * (n - 1) / n
    whole = (n <= groups) & (np.mod(groups, n) == 0)
    return scalar(np.where(whole, np.minimum(limited, uniform), uniform))


def collective_time(kind: Collective, size_bytes: Num, group: Group, eff: Efficiency,
                    protocols: Sequence[Protocol] | None = None,
                    dedupe_copies: Num = 0, routing_groups: tuple[int, int] = (0, 0),
                    nvls: bool = False) -> Num:
    """Seconds for one collective of a ``size_bytes`` buffer over ``group``.

    A group inside one node uses the intra-node link. A group spanning nodes runs
    hierarchically: reduce-scatter inside the node, the collective across nodes on
    1/per_node of the buffer (each GPU with its own NIC), all-gather inside the node.
    Sizes and group sizes may be arrays (one formula for the estimate and the advisor).

    Latency: with ``protocols`` (NCCL's, see ``nccl_protocols``) each protocol is costed
    with its base latency, per-hop latency by fabric and bandwidth share, an all-reduce also
    as a double binary tree (latency in log2 of the nodes), and the fastest wins, as NCCL's
    tuner picks; without, every step costs ``eff.collective_latency_s``.

    ``nvls``: an all-reduce inside one NVSwitch node of Hopper or Blackwell GPUs may also
    run as NVLink SHARP (``nvls_all_reduce``), and does where that is faster, as NCCL's tuner
    picks it.

    ``dedupe_copies`` (an all-to-all whose buffer holds that many routed copies of each
    token, e.g. an MoE dispatch at top-k): the dispatcher deduplicates, as DeepEP and
    HybridEP do: a token crosses the network once per other node its copies go to and the
    intra-node link once per other GPU (``remote_nodes_per_token``, over nodes and over
    ranks), the receiving GPU expanding it to its own experts; 0 = a plain all-to-all, every
    copy sent on its own. ``routing_groups`` (groups, groups per token) limits the nodes a
    token's copies reach under group-limited routing (``remote_nodes_per_token``).
    """
    n = to_float(group.size)
    size = to_float(size_bytes)
    if not isinstance(n, np.ndarray) and not isinstance(size, np.ndarray) and n <= 1:
        return 0.0  # a group of one exchanges nothing (as the end of this function returns)
    transfer, intra_steps, net_steps = _terms(kind, size, group, eff, dedupe_copies,
                                              routing_groups)
    if protocols is None:
        t = transfer + (intra_steps + net_steps) * eff.collective_latency_s
    else:
        intra = group.intra.fabric
        # measured NCCL on this architecture's NVLink: base and NVLink hops scaled
        scale = group.intra.latency_scale
        # arrays: skip the network term where no group spans nodes (most of a search)
        crosses = not isinstance(net_steps, np.ndarray) or bool(np.any(net_steps))
        tree = _tree_shape(group, n) if kind is Collective.ALL_REDUCE else None
        t = None
        for p in protocols:
            tp = scale * (p.base_latency_s + intra_steps * p.hop_latency_s[intra]) \
                + transfer * (1.0 / p.bandwidth_factor)
            if crosses:
                tp = tp + net_steps * p.hop_latency_s[Fabric.NETWORK]
            t = tp if t is None else minimum(t, tp)
            if tree is not None and p.tree_base_latency_s is not None \
                    and p.tree_hop_latency_s is not None:
                t = minimum(t, _tree_all_reduce(p, transfer, group, tree))
    switch = nvls_all_reduce(transfer, group, nvls) if kind is Collective.ALL_REDUCE else None
    if switch is not None:
        t = minimum(t, switch)
    if isinstance(n, np.ndarray) or isinstance(size, np.ndarray):
        return scalar(np.where((n <= 1) | (size <= 0), 0.0, t))
    return 0.0 if n <= 1 or size <= 0 else float(t)


def dispatch_time(size_bytes: Num, group: Group, eff: Efficiency,
                  latency_s: float | None = None, dedupe_copies: Num = 0,
                  routing_groups: tuple[int, int] = (0, 0)) -> Num:
    """Seconds for one MoE dispatch or combine of ``size_bytes`` per GPU (each routed copy
    of a token once) over ``group`` by a serving engine's one-shot all-to-all kernel
    (TensorRT-LLM's NVLink kernels, DeepEP's low-latency kernels): every GPU writes to all
    its peers at once, so the time is one fixed latency, a small one per peer
    (``Efficiency.moe_dispatch_latency_s``, ``moe_dispatch_peer_latency_s``) and the
    remote bytes at the link's rate, the share for other GPUs of the node over NVLink at
    ``moe_dispatch_bus`` while the share for other nodes crosses the network at the same
    time. Not NCCL's ring: no latency per step, which over a wide group (EP 32-64) made a
    dispatch 10-50 times the measured one (``gpuarch validate moe-dispatch``).
    ``latency_s`` replaces the fixed time where an engine's path has its own
    (``moe_dispatch_latency_trtllm_deepep_s``). ``dedupe_copies`` (the routed copies of
    each token in the buffer; 0 = none): the kernel crosses the network once per other node
    a token's copies go to, not once per copy (``remote_nodes_per_token``, with
    ``routing_groups`` as there), as DeepEP's normal (high-throughput) kernels do, the
    receiving node forwarding it to its GPUs over NVLink."""
    n = to_float(group.size)
    size = to_float(size_bytes)
    g = minimum(n, to_float(group.per_node))
    intra = group.intra
    intra_bw = intra.bandwidth * eff.moe_dispatch_bus * intra.reach(g) \
        if intra.fabric is Fabric.NVLINK else intra.effective(eff)
    remote_intra = (g - 1) / n * size / intra_bw
    crosses = n > g
    if any_of(crosses):
        if group.inter is None:
            raise GpuarchError("the job spans several nodes but the system has no "
                               "inter-node network in the catalog; give --system with a "
                               "network")
        share = (n - g) / n
        if any_of(to_float(dedupe_copies) > 0):
            k = maximum(to_float(dedupe_copies), 1.0)
            share = where(to_float(dedupe_copies) > 0, remote_nodes_per_token(
                k, to_float(group.nodes), *routing_groups) / k, share)
        network = share * size / group.inter.effective(eff)
        transfer = where(crosses, maximum(remote_intra, network), remote_intra)
    else:
        transfer = remote_intra
    fixed = eff.moe_dispatch_latency_s if latency_s is None else latency_s
    t = fixed + eff.moe_dispatch_peer_latency_s * (n - 1) + transfer
    if isinstance(n, np.ndarray) or isinstance(size, np.ndarray):
        return scalar(np.where((n <= 1) | (size <= 0), 0.0, t))
    return 0.0 if n <= 1 or size <= 0 else float(t)


def exchange_latencies(eff: Efficiency, trtllm_deepep: bool) -> tuple[float, float]:
    """The fixed times (dispatch, combine) of a serving engine's expert exchange: its one-shot
    kernels' (``moe_dispatch_latency_s`` each way), or, for TensorRT-LLM's DeepEP
    low-latency path where it has no multi-node NVLink (``trtllm_deepep``), that path's
    measured ones."""
    if trtllm_deepep:
        return eff.moe_dispatch_latency_trtllm_deepep_s, eff.moe_combine_latency_trtllm_deepep_s
    return eff.moe_dispatch_latency_s, eff.moe_dispatch_latency_s


def _tree_shape(group: Group, n: Num) -> tuple[Num, Num]:
    """(chain hops inside a node, tree depth across nodes) of NCCL's double binary tree
    over ``group``: the same for every protocol, so computed once."""
    nodes = to_float(group.nodes)
    per_node = minimum(n, to_float(group.per_node))
    depth: Num = (np.floor(np.log2(np.maximum(nodes, 1.0))) if isinstance(nodes, np.ndarray)
                  else float(math.floor(math.log2(max(nodes, 1.0)))))
    return per_node - 1, depth


def _tree_all_reduce(p: Protocol, transfer: Num, group: Group, tree: tuple[Num, Num]) -> Num:
    """NCCL's double binary tree all-reduce under protocol ``p``: a chain through each
    node's ranks, a tree across nodes (``tree`` from ``_tree_shape``); the bytes of the
    hierarchical ring at the tree's bandwidth share."""
    assert p.tree_base_latency_s is not None and p.tree_hop_latency_s is not None
    chain, depth = tree
    hops = p.tree_hop_latency_s
    scale = group.intra.latency_scale
    latency = scale * (p.tree_base_latency_s + 2 * chain * hops[group.intra.fabric]) \
        + 2 * depth * hops[Fabric.NETWORK]
    return latency + transfer * (1.0 / p.tree_bandwidth_factor)


def _terms(kind: Collective, size_bytes: Num, group: Group, eff: Efficiency,
           dedupe_copies: Num = 0, routing_groups: tuple[int, int] = (0, 0)
           ) -> tuple[Num, Num, Num]:
    """(seconds of transfer at the full bus bandwidth, ring steps inside a node, ring steps
    that cross the network) of one collective."""
    n = to_float(group.size)
    size = to_float(size_bytes)
    # NCCL's collectives over a group of a node's GPUs reach the group's share of the link
    # (measured); a pipeline send between two GPUs and a deduplicating dispatcher's own
    # kernels (DeepEP, HybridEP), which NCCL does not run, the full-node share (on a fully
    # connected mesh the links to the peers they reach, ``Link.reach``)
    in_node = minimum(n, to_float(group.per_node))
    full = group.intra.effective(eff)
    link_bw = full * group.intra.reach(in_node)
    intra_bw = full * group.intra.reach(2) if kind is Collective.P2P else \
        group.intra.effective(eff, in_node)
    nodes = to_float(group.nodes)
    transfer = kind.traffic_factor(n) * size / intra_bw
    deduped = kind is Collective.ALL_TO_ALL and any_of(to_float(dedupe_copies) > 0)
    if deduped:
        # each token once per other GPU its copies go to, not once per copy
        k = maximum(to_float(dedupe_copies), 1.0)
        per_rank = remote_nodes_per_token(k, n) / k * size / link_bw
        transfer = where(to_float(dedupe_copies) > 0, per_rank, transfer)
    intra_steps = kind.steps(n)
    net_steps = 0.0 * intra_steps
    spans = (nodes > 1) & (n > 1)
    if any_of(spans):
        if group.inter is None:
            raise GpuarchError("the job spans several nodes but the system has no "
                               "inter-node network in the catalog; give --system with a "
                               "network")
        inter_bw = group.inter.effective(eff)
        g = to_float(group.per_node)
        if kind is Collective.P2P:
            x_transfer, x_intra, x_net = size / inter_bw + 0 * n, 0 * n, 1 + 0 * n
        elif deduped:
            # each token crosses the network once per other node its copies go to, and the
            # intra-node link once per other GPU (sent to a local peer, or forwarded on the
            # receiving node); the dispatcher pipelines the two in chunks, network sends and
            # NVLink forwarding at once, so the slower sets the time
            x_transfer = maximum(remote_nodes_per_token(k, nodes, *routing_groups) / k
                                 * size / inter_bw, per_rank)
            x_intra, x_net = g - 1 + 0 * n, nodes - 1
        elif kind is Collective.ALL_TO_ALL:
            # the share of the buffer for ranks in other nodes crosses the network
            x_transfer = (n - g) / n * size / inter_bw + (g - 1) / n * size / intra_bw
            x_intra, x_net = g - 1 + 0 * n, n - g
        else:
            inner_kind = (Collective.REDUCE_SCATTER if kind is not Collective.ALL_GATHER
                          else Collective.ALL_GATHER)
            phases = 2 if kind is Collective.ALL_REDUCE else 1  # RS before, AG after
            x_transfer = (phases * inner_kind.traffic_factor(g) * size / intra_bw
                          + kind.traffic_factor(nodes) * (size / g) / inter_bw)
            x_intra = phases * inner_kind.steps(g) + 0 * n
            x_net = kind.steps(nodes)
        transfer = where(spans, x_transfer, transfer)
        intra_steps = where(spans, x_intra, intra_steps)
        net_steps = where(spans, x_net, net_steps)
    return transfer, intra_steps, net_steps
