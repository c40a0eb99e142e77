"""Typed records of the catalog.

Each field's metadata says which data-file key it is read from and in which unit, so the
schema, the loader's conversion and the JSON output share one list of fields (this one).
Attributes are SI: bytes, bytes/s, Hz, FLOP/s, W. Fields without a data-file key are filled in
by the loader (links between records).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import lru_cache
from typing import Any

from gpuarch.catalog.peaks import PeakKey
from gpuarch.units import Unit, to_si

__all__ = [
    "ASYNC_MMA_MAJORS",
    "BLACKWELL_TENSOR_CORES",
    "HOPPER_TENSOR_CORES",
    "Architecture",
    "Chip",
    "Feature",
    "NvlinkGeneration",
    "PcieGeneration",
    "Product",
    "SMResources",
    "Source",
    "SourceKind",
    "System",
    "Tier",
    "drives_tensor_cores_async",
    "parse_compute_capability",
]


class Tier(Enum):
    """Market segment of a product."""

    DATACENTER = "datacenter"
    WORKSTATION = "workstation"
    CONSUMER = "consumer"
    EMBEDDED = "embedded"


class SourceKind(Enum):
    """What kind of document a source is."""

    WHITEPAPER = "whitepaper"
    DATASHEET = "datasheet"
    PROGRAMMING_GUIDE = "programming-guide"
    PRODUCT_PAGE = "product-page"
    PRESS_RELEASE = "press-release"
    TUNING_GUIDE = "tuning-guide"
    PAPER = "paper"
    SPEC = "spec"


MEMORY_TYPES = frozenset(
    {
        "GDDR3", "GDDR5", "GDDR5X", "GDDR6", "GDDR6X", "GDDR7",
        "HBM2", "HBM2e", "HBM3", "HBM3e", "HBM4", "LPDDR4", "LPDDR4x", "LPDDR5", "LPDDR5X",
    }
)


def spec(
    key: str,
    kind: str,
    unit: Unit = Unit.NONE,
    doc: str = "",
    default: Any = ...,
    derived: bool = False,
) -> Any:
    """Declare a field read from data-file ``key``.

    ``kind`` is one of ``str``, ``int``, ``float``, ``bool``, ``str_list``, ``str_map``,
    ``peaks`` (a table of :class:`PeakKey` to numbers), ``record`` (a nested table), or an
    enum name resolved by the loader (``tier``, ``source_kind``). A field without ``default``
    is required in the data file. A ``derived`` field is computed by the loader, written to
    JSON under ``key``, and rejected in data files.
    """
    meta = {"key": key, "kind": kind, "unit": unit, "doc": doc, "derived": derived}
    if default is ...:
        return field(metadata=meta)
    if isinstance(default, (dict, list, tuple)):
        return field(default_factory=lambda: type(default)(), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class Source:
    """A published document that catalog values come from."""

    id: str = spec("id", "str")
    title: str = spec("title", "str")
    publisher: str = spec("publisher", "str")
    kind: SourceKind = spec("kind", "source_kind")
    year: int = spec("year", "int")
    url: str = spec("url", "str")
    version: str | None = spec("version", "str", default=None)
    note: str | None = spec("note", "str", default=None,
                            doc="caveats, e.g. that the address is an index page")
    file: str = ""  # data file that defines it (filled by the loader)


@dataclass(frozen=True, kw_only=True)
class SMResources:
    """Resources of one streaming multiprocessor (SM)."""

    fp32_lanes: int | None = spec("fp32_lanes", "int", default=None)
    fp64_lanes: int | None = spec("fp64_lanes", "int", default=None)
    int32_lanes: int | None = spec("int32_lanes", "int", default=None)
    sfu: int | None = spec("sfu", "int", default=None)
    tensor_cores: int | None = spec("tensor_cores", "int", default=None)
    tensor_core_generation: int | None = spec("tensor_core_generation", "int", default=None)
    warp_schedulers: int | None = spec("warp_schedulers", "int", default=None)
    register_file_bytes: float | None = spec("register_file_kib", "float", Unit.KIB, default=None)
    l1_shared_bytes: float | None = spec("l1_shared_kib", "float", Unit.KIB, default=None)
    max_shared_bytes: float | None = spec("max_shared_kib", "float", Unit.KIB, default=None)
    max_threads: int | None = spec("max_threads", "int", default=None)


@lru_cache(maxsize=64)  # a few dozen chips; read once per training estimate
def parse_compute_capability(text: str) -> tuple[int, int] | None:
    """``"9.0"`` -> ``(9, 0)``: a compute capability as (major, minor), None if malformed."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


ASYNC_MMA_MAJORS = (9, 10)
"""Compute capability majors whose Tensor Cores are driven by asynchronous warpgroup
instructions (wgmma on Hopper, sm_90; tcgen05 on datacenter Blackwell, sm_100 and sm_103),
where a kernel written for Ampere's synchronous ``mma`` (attention, grouped GEMMs) runs
slower than the generation's own; Ada (8.9) and GeForce/RTX Blackwell (12.x) keep Ampere's
synchronous instructions."""

HOPPER_TENSOR_CORES = 4
"""Hopper's Tensor Core generation (a chip's ``tensor_core_generation``)."""

BLACKWELL_TENSOR_CORES = 5
"""Blackwell's Tensor Core generation (a chip's ``tensor_core_generation``)."""


def drives_tensor_cores_async(compute_capability: str | None) -> bool:
    """Whether a chip of this compute capability drives its Tensor Cores asynchronously
    (``ASYNC_MMA_MAJORS``); False for a malformed or missing one."""
    parsed = parse_compute_capability(compute_capability or "")
    return parsed is not None and parsed[0] in ASYNC_MMA_MAJORS


@dataclass(frozen=True, kw_only=True)
class Chip:
    """A die (GA100, AD102, ...) and its per-SM resources and rates."""

    key: str = spec("key", "str")
    compute_capability: str = spec("compute_capability", "str")
    process: str = spec("process", "str")
    transistors_billion: float | None = spec("transistors_billion", "float", default=None)
    die_area_mm2: float | None = spec("die_area_mm2", "float", default=None)
    full_sms: int | None = spec("full_sms", "int", default=None)
    sparsity_2to4: bool = spec("sparsity_2to4", "bool")
    sm: SMResources = spec("sm", "record", default=SMResources())
    sm_ops_per_clock: Mapping[PeakKey, float] = spec("sm_ops_per_clock", "peaks", default={})
    source: str = spec("source", "str")
    field_sources: Mapping[str, str] = spec("field_sources", "str_map", default={})
    architecture: str = ""  # filled by the loader


@dataclass(frozen=True, kw_only=True)
class Product:
    """A GPU product (one GPU; per-module figures are divided per GPU in the data)."""

    key: str = spec("key", "str")
    name: str = spec("name", "str")
    aliases: tuple[str, ...] = spec("aliases", "str_list", default=())
    chip: str = spec("chip", "str")
    tier: Tier = spec("tier", "tier")
    form_factor: str = spec("form_factor", "str")
    launch_date: str = spec("launch_date", "date")
    launch_price_usd: float | None = spec("launch_price_usd", "float", Unit.USD, default=None)
    sms: int | None = spec("sms", "int", default=None)
    base_clock_hz: float | None = spec("base_clock_mhz", "float", Unit.MHZ, default=None)
    boost_clock_hz: float | None = spec("boost_clock_mhz", "float", Unit.MHZ, default=None)
    peak_clock_hz: float | None = spec("peak_clock_mhz", "float", Unit.MHZ, default=None)
    tensor_peak_clock_hz: float | None = spec(
        "tensor_peak_clock_mhz", "float", Unit.MHZ, default=None
    )
    memory_type: str = spec("memory_type", "memory_type")
    memory_bytes: float = spec("memory_gib", "float", Unit.GIB)
    memory_bus_bits: int | None = spec("memory_bus_bits", "int", default=None)
    memory_data_rate_bps: float | None = spec(
        "memory_data_rate_gbps", "float", Unit.GBPS_PIN, default=None
    )
    memory_bandwidth_bytes_s: float = spec("memory_bandwidth_gb_s", "float", Unit.GB_S)
    l2_cache_bytes: float | None = spec("l2_cache_mib", "float", Unit.MIB, default=None)
    nvlink_generation: int | None = spec("nvlink_generation", "int", default=None)
    nvlink_links: int | None = spec("nvlink_links", "int", default=None)
    nvlink_bandwidth_bytes_s: float | None = spec(
        "nvlink_bandwidth_gb_s", "float", Unit.GB_S, default=None
    )
    pcie_generation: int | None = spec("pcie_generation", "int", default=None)
    pcie_lanes: int | None = spec("pcie_lanes", "int", default=None)
    tdp_w: float | None = spec("tdp_w", "float", Unit.WATT, default=None)
    mig_max_instances: int | None = spec("mig_max_instances", "int", default=None)
    ecc: bool | None = spec("ecc", "bool", default=None)
    cpu_memory_bytes: float | None = spec("cpu_memory_gib", "float", Unit.GIB, default=None)
    c2c_bandwidth_bytes_s: float | None = spec(
        "c2c_bandwidth_gb_s", "float", Unit.GB_S, default=None
    )
    gpus_per_cpu: int | None = spec(
        "gpus_per_cpu", "int", default=None,
        doc="Superchips: GPUs that share one CPU and its NVLink-C2C link (GH200 1, GB200 2)")
    notes: str | None = spec("notes", "str", default=None)
    pci_device_ids: tuple[str, ...] = spec(
        "pci_device_ids", "str_list", default=(),
        doc="PCI device ids as 4 hex digits (\"2330\"), how NVML identifies the board")
    dense_flops: Mapping[PeakKey, float] = spec(
        "dense_tflops", "peaks", Unit.TFLOPS, default={}
    )
    sparse_flops: Mapping[PeakKey, float] = spec(
        "sparse_tflops", "peaks", Unit.TFLOPS, default={}
    )
    peak_exceptions: Mapping[str, str] = spec("peak_exceptions", "str_map", default={})
    source: str = spec("source", "str")
    field_sources: Mapping[str, str] = spec("field_sources", "str_map", default={})
    dense_from_sparse: Mapping[PeakKey, float] = spec(
        "dense_tflops_from_sparse", "peaks", Unit.TFLOPS, default={}, derived=True,
        doc="Dense peaks NVIDIA publishes only as 2:4 sparse figures, halved by the loader "
            "(never where the product documents a sparse exception).")
    dense_from_sibling: Mapping[PeakKey, float] = spec(
        "dense_tflops_from_sibling", "peaks", Unit.TFLOPS, default={}, derived=True,
        doc="For the performance model only (never shown as a published peak): a dense peak "
            "the product publishes only with sparsity, in a figure that is not twice the "
            "dense one, taken from a product of the same chip and tier that publishes it, "
            "scaled by the two products' dense peaks one precision up (``dense_sibling``).")
    dense_sibling: str = spec(
        "dense_sibling", "str", default="", derived=True,
        doc="The product whose published peaks ``dense_tflops_from_sibling`` scales.")
    architecture: str = ""  # filled by the loader

    @property
    def year(self) -> int:
        """Launch year."""
        return int(self.launch_date[:4])

    @property
    def grace_host(self) -> bool:
        """Whether the GPU reaches its CPU over NVLink-C2C rather than PCIe: a Grace
        superchip (GH200, GB200, GB300), known by its form factor or a C2C link rate."""
        return self.form_factor == "Superchip" or self.c2c_bandwidth_bytes_s is not None

    def peak(self, key: PeakKey, *, sparse: bool = False) -> float | None:
        """Peak in FLOP/s (or OP/s) for ``key``; ``None`` if unpublished.

        A dense peak NVIDIA publishes only "with sparsity" is half that figure (see
        ``dense_from_sparse``); ``dense_origin`` says which.
        """
        if sparse:
            return self.sparse_flops.get(key)
        return self.dense_flops.get(key, self.dense_from_sparse.get(key))

    def dense_peaks(self) -> Mapping[PeakKey, float]:
        """Every dense peak: published ones, then those halved from sparse figures."""
        return {**self.dense_from_sparse, **self.dense_flops}

    def dense_origin(self, key: PeakKey) -> str | None:
        """Where a dense peak comes from: ``"published"``, ``"half of sparse"`` or ``None``."""
        if key in self.dense_flops:
            return "published"
        if key in self.dense_from_sparse:
            return "half of sparse"
        return None

    def clock_for(self, key: PeakKey) -> float | None:
        """The clock (Hz) that the published peak for ``key`` assumes; ``None`` if unknown."""
        if key.is_tensor and self.tensor_peak_clock_hz is not None:
            return self.tensor_peak_clock_hz
        if self.peak_clock_hz is not None:
            return self.peak_clock_hz
        return self.boost_clock_hz

    def source_of(self, field_key: str) -> str:
        """Source id of a data-file key (``"memory_bandwidth_gb_s"``, ``"dense_tflops.fp32"``)."""
        return _source_of(self.field_sources, self.source, field_key)


@dataclass(frozen=True, kw_only=True)
class Architecture:
    """One GPU architecture generation and what it brought."""

    key: str = spec("key", "str")
    name: str = spec("name", "str")
    order: int = spec("order", "int")
    year: int = spec("year", "int")
    compute_capabilities: tuple[str, ...] = spec("compute_capabilities", "str_list")
    summary: str = spec("summary", "str")
    features: Mapping[str, str] = spec("features", "str_map", default={})
    source: str = spec("source", "str")
    field_sources: Mapping[str, str] = spec("field_sources", "str_map", default={})
    file: str = ""  # data file (filled by the loader)

    def source_of(self, field_key: str) -> str:
        """Source id of a data-file key of this architecture."""
        return _source_of(self.field_sources, self.source, field_key)


@dataclass(frozen=True, kw_only=True)
class Feature:
    """An architectural feature and what it changed for users."""

    key: str = spec("key", "str")
    name: str = spec("name", "str")
    explanation: str = spec("explanation", "str")
    source: str = spec("source", "str")
    product_evidence: tuple[str, ...] = spec(
        "product_evidence", "str_list", default=(),
        doc="rules naming the published figure that shows a product has the feature")


@dataclass(frozen=True, kw_only=True)
class NvlinkGeneration:
    """One NVLink generation."""

    generation: int = spec("generation", "int")
    architecture: str = spec("architecture", "str")
    per_link_bandwidth_bytes_s: float = spec("per_link_bandwidth_gb_s", "float", Unit.GB_S)
    max_links_per_gpu: int = spec("max_links_per_gpu", "int")
    per_gpu_bandwidth_bytes_s: float = spec("per_gpu_bandwidth_gb_s", "float", Unit.GB_S)
    source: str = spec("source", "str")
    field_sources: Mapping[str, str] = spec("field_sources", "str_map", default={})


@dataclass(frozen=True, kw_only=True)
class PcieGeneration:
    """One PCI Express generation (x16 bandwidth per direction)."""

    generation: int = spec("generation", "int")
    transfer_rate_gt_s: float = spec("transfer_rate_gt_s", "float")
    encoding: str = spec("encoding", "str")
    x16_bandwidth_bytes_s: float = spec("x16_bandwidth_gb_s", "float", Unit.GB_S)
    source: str = spec("source", "str")
    field_sources: Mapping[str, str] = spec("field_sources", "str_map", default={})


@dataclass(frozen=True, kw_only=True)
class System:
    """A reference system: GPUs per node, the fabric inside a node and the network between."""

    key: str = spec("key", "str")
    name: str = spec("name", "str")
    aliases: tuple[str, ...] = spec("aliases", "str_list", default=())
    gpu: str = spec("gpu", "str")
    gpus_per_node: int = spec("gpus_per_node", "int")
    intra_node_fabric: str = spec("intra_node_fabric", "fabric")
    intra_node_bandwidth_bytes_s: float = spec(
        "intra_node_bandwidth_gb_s", "float", Unit.GB_S
    )
    nvlink_domain_gpus: int | None = spec("nvlink_domain_gpus", "int", default=None)
    nvlink_links_per_peer: int | None = spec(
        "nvlink_links_per_peer", "int", default=None,
        doc="NVLink links joining each pair of GPUs where the node's GPUs are fully connected "
            "without NVSwitch (an HGX 4-GPU board); a group of GPUs reaches only the links to "
            "its other members")
    network: str | None = spec("network", "str", default=None)
    network_bandwidth_per_gpu_bytes_s: float | None = spec(
        "network_bandwidth_per_gpu_gbit_s", "float", Unit.GBIT_S, default=None
    )
    cpu: str | None = spec("cpu", "str", default=None)
    tdp_w: float | None = spec("tdp_w", "float", Unit.WATT, default=None)
    notes: str | None = spec("notes", "str", default=None)
    source: str = spec("source", "str")
    field_sources: Mapping[str, str] = spec("field_sources", "str_map", default={})

    def with_network(self, gbit_s_per_gpu: float, why: str) -> System:
        """These nodes on another scale-out network: ``gbit_s_per_gpu`` per GPU, ``why``
        saying whose (an assumption's flag, or a measured run's cluster)."""
        return replace(self, network=f"{why}: {gbit_s_per_gpu:g} Gb/s per GPU",
                       network_bandwidth_per_gpu_bytes_s=to_si(gbit_s_per_gpu, Unit.GBIT_S))


FABRICS = frozenset({"nvswitch", "nvlink-mesh", "nvlink-bridge", "pcie"})


def _source_of(field_sources: Mapping[str, str], default: str, field_key: str) -> str:
    if field_key in field_sources:
        return field_sources[field_key]
    table = field_key.split(".", 1)[0]
    return field_sources.get(table, default)
