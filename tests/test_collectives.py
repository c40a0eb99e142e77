"""Collective times: NCCL's protocol latency model (training) against hand-computed values
from the constants it cites, and invariants over buffer sizes and group shapes."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.perf.collectives import (
    Collective,
    Fabric,
    Group,
    Link,
    collective_time,
    nccl_protocols,
    remote_nodes_per_token,
)
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY as EFF

NVLINK = Link(Fabric.NVLINK, 450e9)  # H100 SXM: 900 GB/s total, 450 per direction
NET = Link(Fabric.NETWORK, 50e9)  # 400 Gb/s per GPU
NODE8 = Group(8, 8, NVLINK, NET)
US = 1e-6


def bus(ranks: int) -> float:
    """NVLink bus share of a collective over ``ranks`` GPUs of one node (efficiency.py:
    nvlink_bus x (1 - nvlink_small_group / ranks))."""
    return EFF.nvlink_bus * (1 - EFF.nvlink_small_group / ranks)


def test_protocol_table_is_nccls_ring_rows() -> None:
    """NCCL src/graph/tuning.cc, ring rows of baseLat and hwLat (us); LL moves half the
    bandwidth, LL128 0.92 of it."""
    by_name = {p.name: p for p in nccl_protocols()}
    assert set(by_name) == {"LL", "LL128", "Simple"}
    assert by_name["LL"].base_latency_s == pytest.approx(6.6 * US)
    assert by_name["Simple"].hop_latency_s[Fabric.NETWORK] == pytest.approx(14.0 * US)
    assert by_name["LL128"].hop_latency_s[Fabric.NVLINK] == pytest.approx(1.9 * US)
    assert by_name["LL"].bandwidth_factor == 0.5


def test_tiny_all_reduce_in_a_node_is_ll_latency() -> None:
    """8 ranks, 1 KiB: LL wins; 6.6 us base + 14 steps x 0.6 us, plus 2 x 7/8 KiB at half
    of the 8-GPU bus share of 450 GB/s."""
    size = 1024.0
    expected = 6.6 * US + 14 * 0.6 * US + 2 * 7 / 8 * size / (0.5 * bus(8) * 450e9)
    got = collective_time(Collective.ALL_REDUCE, size, NODE8, EFF, nccl_protocols())
    assert got == pytest.approx(expected, rel=1e-9)


def test_large_all_reduce_in_a_node_is_simple_bandwidth() -> None:
    """1 GiB: Simple wins; 8.4 us + 14 x 3.4 us + the ring's bytes at the full bus rate."""
    size = 2.0**30
    expected = 8.4 * US + 14 * 3.4 * US + 2 * 7 / 8 * size / (bus(8) * 450e9)
    got = collective_time(Collective.ALL_REDUCE, size, NODE8, EFF, nccl_protocols())
    assert got == pytest.approx(expected, rel=1e-9)


def test_steps_across_nodes_pay_the_network_hop() -> None:
    """A 16-rank all-reduce over two nodes of 8, tiny buffer (LL): intra-node reduce-scatter
    and all-gather (7 steps each at 0.6 us), 2 network steps at 2.7 us, one 6.6 us base."""
    group = Group(16, 8, NVLINK, NET)
    size = 64.0
    intra = 2 * (7 / 8 * size / (0.5 * bus(8) * 450e9) + 7 * 0.6 * US)
    cross = 2 * (1 / 2) * (size / 8) / (0.5 * 0.85 * 50e9) + 2 * 2.7 * US
    got = collective_time(Collective.ALL_REDUCE, size, group, EFF, nccl_protocols())
    assert got == pytest.approx(6.6 * US + intra + cross, rel=1e-9)


def test_without_protocols_every_step_costs_the_fitted_latency() -> None:
    size = 1024.0
    got = collective_time(Collective.ALL_REDUCE, size, NODE8, EFF)
    expected = 14 * EFF.collective_latency_s + 2 * 7 / 8 * size / (bus(8) * 450e9)
    assert got == pytest.approx(expected, rel=1e-9)


kinds = st.sampled_from([Collective.ALL_REDUCE, Collective.REDUCE_SCATTER,
                         Collective.ALL_GATHER, Collective.ALL_TO_ALL, Collective.P2P])


@settings(max_examples=60, deadline=None)
@given(kind=kinds, size=st.floats(1.0, 2.0**32), ranks=st.sampled_from([2, 4, 8, 16, 64]),
       factor=st.floats(1.0, 100.0))
def test_nccl_time_is_the_fastest_protocol_and_grows_with_size(
        kind: Collective, size: float, ranks: int, factor: float) -> None:
    group = Group(ranks, 8, NVLINK, NET)
    protocols = nccl_protocols()
    best = collective_time(kind, size, group, EFF, protocols)
    each = [collective_time(kind, size, group, EFF, [p]) for p in protocols]
    assert best == pytest.approx(min(each), rel=1e-12)
    assert collective_time(kind, size * factor, group, EFF, protocols) >= best
    assert best > 0


def test_small_groups_reach_less_of_the_link_and_sends_do_not_pay_it() -> None:
    """A 512 MiB all-gather inside a node: over 2 GPUs its bytes move at 1 - 0.86/2 of the
    full-node share, over 8 at 1 - 0.86/8 (NCCL measured 0.57 and 0.75 of an H100's link
    rate, validation/data/nccl-nvlink.csv); a 2-GPU point-to-point send at the full share."""
    size = 2.0**29
    simple = [p for p in nccl_protocols() if p.name == "Simple"]
    for ranks in (2, 4, 8):
        group = Group(ranks, 8, NVLINK, NET)
        got = collective_time(Collective.ALL_GATHER, size, group, EFF, simple)
        latency = 8.4 * US + (ranks - 1) * 3.4 * US
        assert got == pytest.approx(latency + (ranks - 1) / ranks * size / (bus(ranks) * 450e9),
                                    rel=1e-9)
    assert bus(2) < bus(4) < bus(8) < EFF.nvlink_bus
    pair = Group(2, 8, NVLINK, NET)
    send = collective_time(Collective.P2P, size, pair, EFF, simple)
    assert send == pytest.approx(8.4 * US + 3.4 * US + size / (EFF.nvlink_bus * 450e9), rel=1e-9)


def test_a_fully_connected_mesh_gives_a_group_only_its_links() -> None:
    """An HGX H100 4-GPU board joins every pair by 6 of each GPU's 18 NVLinks, no switch
    (catalog systems.toml, hgx-h100-4gpu): a 512 MiB all-gather over a pair moves at a
    third of the link rate times nvlink_bus (below the 0.58 a pair reaches through an
    NVSwitch), over all four at the switch's small-group share (0.79, below the mesh's
    whole); a send between two GPUs at a third; a switch (peer_share 0) is unchanged."""
    size = 2.0**29
    simple = [p for p in nccl_protocols() if p.name == "Simple"]
    mesh = dataclasses.replace(NVLINK, peer_share=6 / 18)
    assert mesh.reach(2) == pytest.approx(1 / 3) and mesh.reach(4) == 1.0
    assert NVLINK.reach(2) == 1.0
    for ranks, share in ((2, EFF.nvlink_bus / 3), (4, bus(4))):
        got = collective_time(Collective.ALL_GATHER, size, Group(ranks, 4, mesh, None), EFF,
                              simple)
        latency = 8.4 * US + (ranks - 1) * 3.4 * US
        assert got == pytest.approx(latency + (ranks - 1) / ranks * size / (share * 450e9),
                                    rel=1e-9)
    switch_pair = collective_time(Collective.ALL_GATHER, size, Group(2, 8, NVLINK, NET), EFF,
                                  simple)
    mesh_pair = collective_time(Collective.ALL_GATHER, size, Group(2, 4, mesh, None), EFF,
                                simple)
    assert mesh_pair > 1.5 * switch_pair
    send = collective_time(Collective.P2P, size, Group(2, 4, mesh, None), EFF, simple)
    assert send == pytest.approx(8.4 * US + 3.4 * US + size / (EFF.nvlink_bus * 150e9),
                                 rel=1e-9)


def test_one_rank_or_empty_buffer_costs_nothing() -> None:
    alone = Group(1, 8, NVLINK, NET)
    assert collective_time(Collective.ALL_REDUCE, 1e6, alone, EFF, nccl_protocols()) == 0.0
    assert collective_time(Collective.ALL_REDUCE, 0.0, NODE8, EFF, nccl_protocols()) == 0.0


def test_all_reduce_across_many_nodes_takes_the_tree() -> None:
    """512 ranks in 64 nodes of 8, 64 bytes: NCCL's tree with LL, 6.8 us + 2 x (7 chain hops
    x 0.6 us + floor(log2 64) = 6 network hops x 5.0 us), far below the ring's 2 x 63
    network steps; the bytes at the tree's LL share (1/3.8) of the bus."""
    group = Group(512, 8, NVLINK, NET)
    size = 64.0
    transfer = 2 * 7 / 8 * size / (bus(8) * 450e9) + 2 * 63 / 64 * (size / 8) / (0.85 * 50e9)
    expected = 6.8 * US + 2 * (7 * 0.6 * US + 6 * 5.0 * US) + transfer / 0.263
    got = collective_time(Collective.ALL_REDUCE, size, group, EFF, nccl_protocols())
    assert got == pytest.approx(expected, rel=1e-9)
    ring_only = [dataclasses.replace(p, tree_base_latency_s=None) for p in nccl_protocols()]
    assert collective_time(Collective.ALL_REDUCE, size, group, EFF, ring_only) > 4 * got


def test_tree_applies_to_all_reduce_only() -> None:
    group = Group(512, 8, NVLINK, NET)
    ring_only = [dataclasses.replace(p, tree_base_latency_s=None) for p in nccl_protocols()]
    for kind in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL):
        assert collective_time(kind, 64.0, group, EFF, nccl_protocols()) == \
            collective_time(kind, 64.0, group, EFF, ring_only)


@settings(max_examples=40, deadline=None)
@given(kind=kinds, sizes=st.lists(st.floats(0.0, 2.0**32), min_size=3, max_size=3),
       ranks=st.lists(st.sampled_from([1, 2, 8, 16, 64, 512]), min_size=3, max_size=3),
       nccl=st.booleans())
def test_arrays_give_the_scalar_answers(kind: Collective, sizes: list[float],
                                        ranks: list[int], nccl: bool) -> None:
    """The advisor evaluates many configurations as NumPy arrays; scalars take a faster
    path. Both must agree element by element."""
    import numpy as np

    protocols = nccl_protocols() if nccl else None
    together = collective_time(kind, np.array(sizes), Group(np.array(ranks), 8, NVLINK, NET),
                               EFF, protocols)
    for i, (size, n) in enumerate(zip(sizes, ranks, strict=True)):
        alone = collective_time(kind, size, Group(n, 8, NVLINK, NET), EFF, protocols)
        assert float(together[i]) == pytest.approx(alone, rel=1e-12, abs=1e-18)


def test_remote_nodes_per_token_by_hand() -> None:
    """Eight copies over four nodes: 3 x (1 - (3/4)^8) other nodes; one copy: the plain
    remote share (N - 1) / N; a single node: none."""
    assert remote_nodes_per_token(8, 4) == pytest.approx(3 * (1 - 0.75**8))
    assert remote_nodes_per_token(1, 4) == pytest.approx(3 / 4)
    assert remote_nodes_per_token(8, 1) == 0.0


def test_node_deduplicated_dispatch_by_hand() -> None:
    """EP 32 over four nodes of 8, top-8 (Qwen3-235B-A22B on DGX H100), 64 MiB dispatched
    per GPU: the network carries the buffer's share for distinct other nodes,
    3 x (1 - 0.75^8) / 8, in 3 network steps, and NVLink once per other GPU the token's
    copies go to, 31 x (1 - (31/32)^8) / 8 of it, the two pipelined (the slower counts); a
    plain all-to-all sends 24/32 over the network in 24 steps and then 7/32 over NVLink.
    Each is the fastest of NCCL's protocols. The dispatcher's own kernels move NVLink bytes
    at the full-node share, NCCL's all-to-all at its 8-GPU group's."""
    group = Group(32, 8, NVLINK, NET)
    size = 64.0 * 2**20
    net_bw, nvl_bw, group_bw = 0.85 * 50e9, EFF.nvlink_bus * 450e9, bus(8) * 450e9

    def fastest(transfer: float, net_steps: int) -> float:
        return min(p.base_latency_s + 7 * p.hop_latency_s[Fabric.NVLINK]
                   + net_steps * p.hop_latency_s[Fabric.NETWORK]
                   + transfer / p.bandwidth_factor for p in nccl_protocols())

    deduped = fastest(max(3 * (1 - 0.75**8) / 8 * size / net_bw,
                          31 * (1 - (31 / 32)**8) / 8 * size / nvl_bw), 3)
    plain = fastest(24 / 32 * size / net_bw + 7 / 32 * size / group_bw, 24)
    got = collective_time(Collective.ALL_TO_ALL, size, group, EFF, nccl_protocols(), 8)
    assert got == pytest.approx(deduped, rel=1e-9)
    assert collective_time(Collective.ALL_TO_ALL, size, group, EFF, nccl_protocols()) == \
        pytest.approx(plain, rel=1e-9)
    assert got < 0.6 * plain


def test_group_limited_routing_reaches_fewer_nodes_by_hand() -> None:
    """DeepSeek-V3 routes a token's 8 experts within 4 of 8 groups. Over 8 nodes, a group
    each, the chosen groups span 8 (1 - C(7,4)/C(8,4)) = 4 nodes and the 8 copies land on
    4 (1 - (3/4)^8) of them, 7/8 of those other nodes; over 4 nodes, two groups each,
    4 (1 - C(6,4)/C(8,4)) = 22/7 nodes are reachable. Where the groups do not divide over
    the nodes (3 nodes) the uniform count stands, as it does without groups."""
    assert remote_nodes_per_token(8, 8, 8, 4) == pytest.approx(4 * (1 - 0.75**8) * 7 / 8)
    reach = 4 * (1 - 15 / 70)
    assert remote_nodes_per_token(8, 4, 8, 4) == pytest.approx(
        reach * (1 - (1 - 1 / reach)**8) * 3 / 4)
    assert remote_nodes_per_token(8, 3, 8, 4) == pytest.approx(remote_nodes_per_token(8, 3))
    assert remote_nodes_per_token(8, 8, 8, 8) == pytest.approx(remote_nodes_per_token(8, 8))
    assert remote_nodes_per_token(8, 1, 8, 4) == 0.0


@given(copies=st.integers(1, 16), nodes=st.sampled_from([1, 2, 4, 8, 16]),
       limit=st.integers(1, 8))
def test_group_limits_never_add_network_bytes(copies: int, nodes: int, limit: int) -> None:
    """A token limited to some of 8 groups never reaches more nodes than uniform routing."""
    limited = remote_nodes_per_token(copies, nodes, 8, limit)
    assert 0.0 <= limited <= remote_nodes_per_token(copies, nodes) + 1e-12


def test_rank_deduplicated_dispatch_inside_a_node_by_hand() -> None:
    """EP 8 in one DGX H100 at top-8: DeepEP and HybridEP send a token once per other GPU
    its copies go to, 7 x (1 - (7/8)^8) of the 8 copies, where a plain all-to-all sends
    the 7/8 of them for other GPUs, all over NVLink in 7 steps (the dispatcher's kernels at
    the full-node share of the link, NCCL's all-to-all at the 8-GPU group's)."""
    size = 64.0 * 2**20
    nvl_bw, group_bw = EFF.nvlink_bus * 450e9, bus(8) * 450e9

    def fastest(transfer: float) -> float:
        return min(p.base_latency_s + 7 * p.hop_latency_s[Fabric.NVLINK]
                   + transfer / p.bandwidth_factor for p in nccl_protocols())

    got = collective_time(Collective.ALL_TO_ALL, size, NODE8, EFF, nccl_protocols(), 8)
    assert got == pytest.approx(fastest(7 * (1 - (7 / 8)**8) / 8 * size / nvl_bw), rel=1e-9)
    plain = collective_time(Collective.ALL_TO_ALL, size, NODE8, EFF, nccl_protocols())
    assert plain == pytest.approx(fastest(7 / 8 * size / group_bw), rel=1e-9)


# Table 7 of NVIDIA's "Scalable Training of Mixture-of-Experts Models with Megatron Core"
# (arXiv:2603.07685, section 4.2.2): one dispatch's latency in us, hidden 7168, sequence 4096,
# 256 experts (DeepSeek-V3, top-8, BF16), EP 8 to 64, HybridEP and NCCL all-to-all.
TABLE7_DISPATCH_US = {
    ("gb200", "hybridep"): (391, 578, 612, 675), ("gb200", "alltoall"): (735, 743, 769, 930),
    ("h100", "hybridep"): (661, 1485, 3064, 4626), ("h100", "alltoall"): (1265, 5774, 8059,
                                                                          9164)}


@pytest.mark.parametrize(("gpu", "dispatcher"), [
    ("gb200", "alltoall"), ("h100", "alltoall"), ("gb200", "hybridep"), ("h100", "hybridep")])
def test_dispatch_times_against_nvidias_measurements(gpu: str, dispatcher: str) -> None:
    """The model's MoE dispatch against Table 7 (above), within 20% at every EP size:
    NCCL's all-to-all and HybridEP, inside a GB200 NVL72 rack and across DGX H100 nodes,
    HybridEP with DeepSeek-V3's group-limited routing (8 groups, 4 per token)."""
    from gpuarch.catalog import load_catalog

    catalog = load_catalog()
    system = catalog.system("gb200 nvl72" if gpu == "gb200" else "dgx h100")
    net = Link(Fabric.NETWORK, system.network_bandwidth_per_gpu_bytes_s)
    nvl = Link(Fabric.NVLINK, system.intra_node_bandwidth_bytes_s / 2)
    size = 4096 * 8 * 7168 * 2.0
    copies, groups = (8, (8, 4)) if dispatcher == "hybridep" else (0, (0, 0))
    for ep, published in zip((8, 16, 32, 64), TABLE7_DISPATCH_US[(gpu, dispatcher)],
                             strict=True):
        group = Group(ep, min(ep, system.gpus_per_node), nvl, net)
        got = collective_time(Collective.ALL_TO_ALL, size, group, EFF, nccl_protocols(),
                              copies, groups)
        assert abs(got / (published * US) - 1) <= 0.2, (ep, got / US, published)


@given(copies=st.integers(1, 16), nodes=st.integers(1, 64))
def test_deduplication_never_adds_network_bytes(copies: int, nodes: int) -> None:
    """Once per distinct other node is never more than once per copy sent off-node:
    (N - 1)(1 - (1 - 1/N)^k) <= k (N - 1) / N, equal for a single copy."""
    deduped = remote_nodes_per_token(copies, nodes)
    plain = copies * (nodes - 1) / nodes
    assert deduped <= plain + 1e-12
    if copies == 1:
        assert deduped == pytest.approx(plain)


def test_nvls_all_reduce_is_nccls_switch_reduction() -> None:
    """On an NVSwitch system of Hopper GPUs a large all-reduce runs as NVLink SHARP: NCCL's
    25 us plus the ring's bytes over twice the bus bandwidth times nvlsEfficiency 0.85 (its
    tuning.cc); small ones stay on the ring's LL protocol; nothing changes without ``nvls``,
    across nodes, on Ampere, or over PCIe."""
    from gpuarch.catalog import load_catalog
    from gpuarch.perf.collectives import link_for, nvls_params

    catalog = load_catalog()

    def links(gpu: str) -> tuple[Link, Link | None]:
        product = catalog.product(gpu)
        return link_for(product, catalog.system_for(product), None)

    h100, net = links("h100")
    assert h100.nvls_efficiency == 0.85 and nvls_params().latency_s == pytest.approx(25e-6)
    assert links("b200")[0].nvls_efficiency == 0.74
    assert links("a100")[0].nvls_efficiency == 0.0  # Ampere: no NVLS
    group = Group(8, 8, h100, net)
    size = 64e6
    ring = collective_time(Collective.ALL_REDUCE, size, group, EFF, nccl_protocols())
    nvls = collective_time(Collective.ALL_REDUCE, size, group, EFF, nccl_protocols(),
                           nvls=True)
    transfer = 2 * 7 / 8 * size / h100.effective(EFF, 8)
    assert nvls == pytest.approx(25e-6 + transfer / (2 * 0.85), rel=1e-9)
    assert nvls < 0.7 * ring
    small = 4096.0
    assert collective_time(Collective.ALL_REDUCE, small, group, EFF, nccl_protocols(),
                           nvls=True) == collective_time(Collective.ALL_REDUCE, small, group,
                                                         EFF, nccl_protocols())
    two_nodes = Group(16, 8, h100, net)
    assert collective_time(Collective.ALL_REDUCE, size, two_nodes, EFF, nccl_protocols(),
                           nvls=True) == collective_time(Collective.ALL_REDUCE, size,
                                                         two_nodes, EFF, nccl_protocols())
    gather = collective_time(Collective.ALL_GATHER, size, group, EFF, nccl_protocols())
    assert collective_time(Collective.ALL_GATHER, size, group, EFF, nccl_protocols(),
                           nvls=True) == gather
