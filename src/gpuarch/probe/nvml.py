"""Reading GPUs through NVML, behind one gateway that turns every driver error into an
explicit "not available" and never raises.

The code talks to the ``pynvml`` API (package ``nvidia-ml-py``). Tests and ``gpuarch probe
--fake FILE`` hand it :mod:`gpuarch.probe.fake_nvml` instead, which implements the same
functions over a JSON description of a machine, so the code paths here are exercised without
a GPU.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gpuarch.probe.readings import (
    GpuReading,
    LinkKind,
    MigReading,
    PcieReading,
    TopologyLink,
    Unavailable,
)

__all__ = ["NvmlSession", "load_pynvml"]

T = TypeVar("T")

# NVML clock event ("throttle") reason bits -> names (nvml.h, nvmlClocksEventReasons).
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

# nvmlDeviceGetTopologyCommonAncestor levels -> nvidia-smi topo -m labels.
TOPOLOGY_LEVELS = {0: LinkKind.PIX, 10: LinkKind.PIX, 20: LinkKind.PXB, 30: LinkKind.PHB,
                   40: LinkKind.NODE, 50: LinkKind.SYS}


def load_pynvml() -> tuple[Any | None, str | None]:
    """The ``pynvml`` module, or ``None`` and the reason it cannot be used."""
    try:
        return importlib.import_module("pynvml"), None
    except ImportError:
        return None, ("nvidia-ml-py is not installed (pip install 'gpuarch[probe]'), so "
                      "NVML cannot be read")


def _mhz(x: Any) -> float | None:
    return None if x is None else float(x) * 1e6


def _mw(x: Any) -> float | None:
    return None if x is None else float(x) / 1000.0


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


class NvmlSession:
    """One NVML session over ``nv`` (pynvml or the fake)."""

    def __init__(self, nv: Any) -> None:
        self.nv = nv
        self.unavailable: list[Unavailable] = []
        self.started = False

    # -- the gateway ---------------------------------------------------------------------

    def read(self, what: str, fn: Callable[[], T]) -> T | None:
        """Call ``fn``; on any NVML error record ``what`` as unavailable and return None."""
        try:
            return fn()
        except Exception as exc:  # NVMLError and its subclasses, or a missing function
            reason = _text(getattr(exc, "args", [exc])[0]) if getattr(exc, "args", None) \
                else type(exc).__name__
            self.unavailable.append(Unavailable(what, str(reason)))
            return None

    def start(self) -> bool:
        """nvmlInit; False (with the reason recorded) when there is no driver."""
        try:
            self.nv.nvmlInit()
        except Exception as exc:
            self.unavailable.append(Unavailable(
                "NVML", f"no NVIDIA driver answered ({_text(exc.args[0]) if exc.args else exc})"))
            return False
        self.started = True
        return True

    def stop(self) -> None:
        if self.started:
            self.read("nvmlShutdown", lambda: self.nv.nvmlShutdown())

    # -- system --------------------------------------------------------------------------

    def driver_version(self) -> str | None:
        v = self.read("driver version", lambda: self.nv.nvmlSystemGetDriverVersion())
        return None if v is None else _text(v)

    def cuda_driver_version(self) -> str | None:
        v = self.read("CUDA driver version", lambda: self.nv.nvmlSystemGetCudaDriverVersion())
        if v is None:
            return None
        return f"{int(v) // 1000}.{int(v) % 1000 // 10}"

    def device_count(self) -> int:
        n = self.read("GPU count", lambda: self.nv.nvmlDeviceGetCount())
        return int(n or 0)

    # -- one GPU -------------------------------------------------------------------------

    def gpu(self, index: int) -> tuple[GpuReading, Any]:
        nv, r = self.nv, self.read
        h = nv.nvmlDeviceGetHandleByIndex(index)
        tag = f"GPU {index}"
        name = r(f"{tag} name", lambda: _text(nv.nvmlDeviceGetName(h))) or f"GPU {index}"
        pci = r(f"{tag} PCI info", lambda: nv.nvmlDeviceGetPciInfo(h))
        bus_id = _text(pci.busId) if pci is not None else None
        device_id = (int(pci.pciDeviceId) >> 16) if pci is not None else None
        cc = r(f"{tag} compute capability",
               lambda: nv.nvmlDeviceGetCudaComputeCapability(h))
        mem = r(f"{tag} memory", lambda: nv.nvmlDeviceGetMemoryInfo(h))
        ecc = r(f"{tag} ECC mode", lambda: nv.nvmlDeviceGetEccMode(h))
        mig_mode = r(f"{tag} MIG mode", lambda: nv.nvmlDeviceGetMigMode(h))
        mig = None
        if mig_mode is not None:
            count = self._mig_instances(h, tag) if mig_mode[0] else 0
            mig = MigReading(bool(mig_mode[0]), bool(mig_mode[1]), count)
        pcie = PcieReading(
            r(f"{tag} PCIe generation", lambda: nv.nvmlDeviceGetCurrPcieLinkGeneration(h)),
            r(f"{tag} PCIe max generation", lambda: nv.nvmlDeviceGetMaxPcieLinkGeneration(h)),
            r(f"{tag} PCIe width", lambda: nv.nvmlDeviceGetCurrPcieLinkWidth(h)),
            r(f"{tag} PCIe max width", lambda: nv.nvmlDeviceGetMaxPcieLinkWidth(h)),
        )
        mask = r(f"{tag} clock event reasons",
                 lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(h))
        reasons = tuple(label for bit, label in THROTTLE_REASONS.items()
                        if mask is not None and int(mask) & bit)
        constraints = r(f"{tag} power limit range",
                        lambda: nv.nvmlDeviceGetPowerManagementLimitConstraints(h))
        reading = GpuReading(
            index=index,
            name=name,
            uuid=r(f"{tag} UUID", lambda: _text(nv.nvmlDeviceGetUUID(h))),
            pci_bus_id=bus_id,
            pci_device_id=device_id,
            compute_capability=f"{cc[0]}.{cc[1]}" if cc is not None else None,
            memory_total_bytes=float(mem.total) if mem is not None else None,
            memory_used_bytes=float(mem.used) if mem is not None else None,
            sm_clock_hz=_mhz(r(f"{tag} SM clock", lambda: nv.nvmlDeviceGetClockInfo(
                h, nv.NVML_CLOCK_SM))),
            sm_clock_max_hz=_mhz(r(f"{tag} max SM clock", lambda: nv.nvmlDeviceGetMaxClockInfo(
                h, nv.NVML_CLOCK_SM))),
            memory_clock_hz=_mhz(r(f"{tag} memory clock", lambda: nv.nvmlDeviceGetClockInfo(
                h, nv.NVML_CLOCK_MEM))),
            memory_clock_max_hz=_mhz(r(f"{tag} max memory clock",
                                       lambda: nv.nvmlDeviceGetMaxClockInfo(
                                           h, nv.NVML_CLOCK_MEM))),
            power_draw_w=_mw(r(f"{tag} power draw", lambda: nv.nvmlDeviceGetPowerUsage(h))),
            power_limit_w=_mw(r(f"{tag} power limit",
                                lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))),
            power_default_limit_w=_mw(r(f"{tag} default power limit",
                                        lambda: nv.nvmlDeviceGetPowerManagementDefaultLimit(
                                            h))),
            power_max_limit_w=_mw(constraints[1]) if constraints is not None else None,
            temperature_c=r(f"{tag} temperature", lambda: float(nv.nvmlDeviceGetTemperature(
                h, nv.NVML_TEMPERATURE_GPU))),
            ecc_enabled=bool(ecc[0]) if ecc is not None else None,
            ecc_pending=bool(ecc[1]) if ecc is not None else None,
            persistence_mode=(None if (p := r(f"{tag} persistence mode",
                                              lambda: nv.nvmlDeviceGetPersistenceMode(h)))
                              is None else bool(p)),
            mig=mig,
            pcie=pcie,
            throttle_reasons=reasons,
            numa_node=_numa_node(bus_id),
        )
        return reading, h

    def _mig_instances(self, h: Any, tag: str) -> int:
        top = self.read(f"{tag} MIG capacity", lambda: self.nv.nvmlDeviceGetMaxMigDeviceCount(h))
        count = 0
        for i in range(int(top or 0)):
            try:
                self.nv.nvmlDeviceGetMigDeviceHandleByIndex(h, i)
                count += 1
            except Exception:  # an empty MIG slot raises NOT_FOUND: not an error
                continue
        return count

    # -- topology ------------------------------------------------------------------------

    def topology(self, gpus: list[tuple[GpuReading, Any]]) -> list[TopologyLink]:
        """Every GPU pair: NVLinks between them (and their count), else the PCIe path."""
        by_bus = {g.pci_bus_id.lower(): g.index for g, _ in gpus if g.pci_bus_id}
        nvlinks: dict[tuple[int, int], int] = {}
        max_links = int(getattr(self.nv, "NVML_NVLINK_MAX_LINKS", 18))
        for g, h in gpus:
            for link in range(max_links):
                try:
                    if not self.nv.nvmlDeviceGetNvLinkState(h, link):
                        continue
                    remote = _text(self.nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId)
                except Exception:  # no such link / NVLink not supported: no NVLink here
                    continue
                other = by_bus.get(remote.lower())
                if other is not None and other != g.index:
                    key = (min(g.index, other), max(g.index, other))
                    nvlinks[key] = nvlinks.get(key, 0) + 1
        links: list[TopologyLink] = []
        for i, (ga, ha) in enumerate(gpus):
            for gb, hb in gpus[i + 1:]:
                key = (ga.index, gb.index)
                if key in nvlinks:
                    # each link is seen from both ends
                    links.append(TopologyLink(*key, LinkKind.NVLINK, max(1, nvlinks[key] // 2)))
                    continue
                level = self.read(f"PCIe path GPU {key[0]}-{key[1]}",
                                  _bind(self.nv.nvmlDeviceGetTopologyCommonAncestor, ha, hb))
                kind = TOPOLOGY_LEVELS.get(int(level), LinkKind.SYS) if level is not None \
                    else LinkKind.SYS
                links.append(TopologyLink(*key, kind))
        return links


def _bind(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    return lambda: fn(*args)


def _numa_node(bus_id: str | None) -> int | None:
    """NUMA node of a PCI device from sysfs (Linux); None where it is not exposed."""
    if not bus_id:
        return None
    short = bus_id.lower()[-12:]  # "0000:18:00.0" from "00000000:18:00.0"
    path = Path("/sys/bus/pci/devices") / short / "numa_node"
    try:
        node = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None
