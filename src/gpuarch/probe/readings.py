"""What the probe reads from a machine: typed records, SI units, ``None`` = not available.

Each field names the ``nvidia-smi --query-gpu`` property it corresponds to, so a reader can
check a value by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "GpuReading",
    "HostReading",
    "LinkKind",
    "MigReading",
    "PcieReading",
    "ProbeReport",
    "TopologyLink",
    "TorchReading",
    "Unavailable",
]


@dataclass(frozen=True)
class Unavailable:
    """Something the probe could not read, and why (shown to the user, never a traceback)."""

    what: str
    reason: str


@dataclass(frozen=True)
class PcieReading:
    """PCIe link of one GPU (nvidia-smi: pcie.link.gen.current/max, pcie.link.width.*)."""

    generation: int | None
    max_generation: int | None
    width: int | None
    max_width: int | None


@dataclass(frozen=True)
class MigReading:
    """MIG state (nvidia-smi: mig.mode.current / mig.mode.pending) and instance count."""

    enabled: bool
    pending: bool | None
    instances: int


@dataclass(frozen=True)
class GpuReading:
    """One GPU as NVML reports it."""

    index: int
    name: str  # name
    uuid: str | None  # uuid
    pci_bus_id: str | None  # pci.bus_id
    pci_device_id: int | None  # pci.device_id >> 16 (the 16-bit device id)
    compute_capability: str | None  # compute_cap
    memory_total_bytes: float | None  # memory.total
    memory_used_bytes: float | None  # memory.used
    sm_clock_hz: float | None  # clocks.sm
    sm_clock_max_hz: float | None  # clocks.max.sm
    memory_clock_hz: float | None  # clocks.mem
    memory_clock_max_hz: float | None  # clocks.max.mem
    power_draw_w: float | None  # power.draw
    power_limit_w: float | None  # power.limit (enforced)
    power_default_limit_w: float | None  # power.default_limit
    power_max_limit_w: float | None  # power.max_limit
    temperature_c: float | None  # temperature.gpu
    ecc_enabled: bool | None  # ecc.mode.current
    ecc_pending: bool | None  # ecc.mode.pending
    persistence_mode: bool | None  # persistence_mode
    mig: MigReading | None
    pcie: PcieReading | None
    throttle_reasons: tuple[str, ...] = ()  # clocks_event_reasons.* that are active
    numa_node: int | None = None
    product_key: str | None = None  # matched catalog product (filled by the probe)
    match_note: str | None = None  # how (or why not) it was matched


class LinkKind(Enum):
    """How two GPUs reach each other, in nvidia-smi topo -m terms."""

    NVLINK = "NV"  # NV# : # NVLinks
    PIX = "PIX"  # at most one PCIe bridge
    PXB = "PXB"  # several PCIe bridges, no host bridge
    PHB = "PHB"  # through a PCIe host bridge (CPU)
    NODE = "NODE"  # across host bridges within one NUMA node
    SYS = "SYS"  # across NUMA nodes (the SMP interconnect: QPI/UPI/Infinity Fabric)
    SELF = "X"


@dataclass(frozen=True)
class TopologyLink:
    """The path between two GPUs."""

    a: int
    b: int
    kind: LinkKind
    nvlinks: int = 0  # number of NVLinks between them

    @property
    def label(self) -> str:
        return f"NV{self.nvlinks}" if self.kind is LinkKind.NVLINK else self.kind.value


@dataclass(frozen=True)
class HostReading:
    """The host: CPU, memory, OS, Python."""

    cpu: str | None
    cores: int | None
    memory_bytes: float | None
    os: str
    python: str


@dataclass(frozen=True)
class TorchReading:
    """The installed torch build and its GPU-relevant switches."""

    version: str
    cuda_build: str | None  # torch.version.cuda (None = CPU build)
    arch_list: tuple[str, ...]  # torch.cuda.get_arch_list(), e.g. ('sm_80', 'sm_90')
    cuda_available: bool
    tf32_matmul: bool | None  # torch.backends.cuda.matmul.allow_tf32
    tf32_cudnn: bool | None  # torch.backends.cudnn.allow_tf32
    float32_matmul_precision: str | None  # torch.get_float32_matmul_precision()
    nccl_version: str | None = None
    transformer_engine: bool = False  # import transformer_engine succeeds
    torchao: bool = False


@dataclass(frozen=True)
class ProbeReport:
    """Everything one probe run found, and everything it could not find."""

    host: HostReading
    driver_version: str | None
    cuda_driver_version: str | None
    gpus: tuple[GpuReading, ...]
    topology: tuple[TopologyLink, ...]
    torch: TorchReading | None
    environment: dict[str, str] = field(default_factory=dict)  # NCCL_* and CUDA_* variables
    unavailable: tuple[Unavailable, ...] = ()
