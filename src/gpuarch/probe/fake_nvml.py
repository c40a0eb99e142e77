"""A fake ``pynvml`` over a JSON description of a machine, for tests and ``--fake FILE``.

It implements the functions :mod:`gpuarch.probe.nvml` calls, with pynvml's names, units
(milliwatts, MHz, bytes) and error behaviour (an ``NVMLError`` for what a device does not
support), so the real reading code runs against it. Machine description::

    {"driver": "550.54.15", "cuda_driver": 12040,
     "gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0", "bus_id": "00000000:18:00.0",
               "device_id": 8960, "cc": [9, 0], "memory_total": 85520809984,
               "memory_used": 0, "clocks": {"sm": 1980, "mem": 2619},
               "max_clocks": {"sm": 1980, "mem": 2619}, "power_mw": 70000,
               "power_limit_mw": 700000, "power_default_mw": 700000,
               "power_range_mw": [200000, 700000], "temperature": 30, "ecc": [1, 1],
               "persistence": 1, "mig": [0, 0], "mig_instances": 0,
               "pcie": {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16},
               "clock_event_reasons": 1, "nvlinks": ["00000000:2A:00.0", ...]}],
     "common_ancestor": {"0-1": 30}}

A missing key makes the matching call raise NVMLError (not supported); ``"no_driver": true``
makes nvmlInit fail.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gpuarch.jsonfile import read_json

__all__ = ["FakeNvml", "NVMLError", "check_machine"]


class NVMLError(Exception):
    """Stands for pynvml.NVMLError."""


_GPU_KINDS: dict[str, str] = {
    "name": "text", "uuid": "text", "bus_id": "text", "device_id": "count",
    "cc": "counts", "memory_total": "count", "memory_used": "count", "clocks": "counts",
    "max_clocks": "counts", "power_mw": "count", "power_limit_mw": "count",
    "power_default_mw": "count", "power_range_mw": "counts", "temperature": "count",
    "ecc": "counts", "persistence": "count", "mig": "counts", "mig_instances": "count",
    "pcie": "counts", "clock_event_reasons": "count", "nvlinks": "texts",
}
"""What each GPU key of a machine description holds, as pynvml returns it: a whole number
of at least zero (``count``), text, or a list (or for clocks and PCIe an object) of them."""


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _fits(kind: str, value: Any) -> bool:
    items = list(value.values()) if isinstance(value, dict) else value
    if kind == "count":
        return _is_count(value)
    if kind == "text":
        return isinstance(value, str)
    if kind == "counts":
        return isinstance(value, list | dict) and all(_is_count(v) for v in items)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def check_machine(machine: Any, where: str) -> None:
    """Raise GpuarchError at the first value of a machine description that NVML would
    never return (``_GPU_KINDS``; ``gpus`` a list of objects, ``cuda_driver`` a count)."""
    from gpuarch.errors import GpuarchError

    if not isinstance(machine, dict):
        raise GpuarchError(f"{where}: expected a JSON object describing the machine")
    gpus = machine.get("gpus", [])
    if not isinstance(gpus, list) or not all(isinstance(g, dict) for g in gpus):
        raise GpuarchError(f"{where}: gpus: expected a list of objects, one per GPU")
    if "cuda_driver" in machine and not _is_count(machine["cuda_driver"]):
        raise GpuarchError(f"{where}: cuda_driver = {machine['cuda_driver']!r}: expected a "
                           "whole number (12040 for CUDA 12.4)")
    for i, gpu in enumerate(gpus):
        for key, value in gpu.items():
            kind = _GPU_KINDS.get(key)
            if kind is not None and not _fits(kind, value):
                what = {"count": "a whole number >= 0", "text": "text",
                        "counts": "whole numbers >= 0", "texts": "a list of texts"}[kind]
                raise GpuarchError(f"{where}: gpus[{i}].{key} = {value!r}: expected {what}")


class FakeNvml:
    """The subset of the pynvml module the probe uses, over a machine description."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    NVML_NVLINK_MAX_LINKS = 18
    NVMLError = NVMLError

    def __init__(self, machine: dict[str, Any]) -> None:
        self.machine = machine
        self.gpus: list[dict[str, Any]] = list(machine.get("gpus", []))

    @classmethod
    def from_file(cls, path: Path, flag: str | None = None) -> FakeNvml:
        """A recorded machine from a JSON file (errors name ``flag`` when one gave it); a
        value of a kind NVML never returns is refused naming its GPU and key."""
        machine = read_json(path, flag)
        check_machine(machine, f"{flag}: {path.name}" if flag else path.name)
        return cls(machine)

    def _get(self, h: int, key: str) -> Any:
        gpu = self.gpus[h]
        if key not in gpu:
            raise NVMLError(f"Not Supported ({key})")
        return gpu[key]

    # -- system --------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        if self.machine.get("no_driver"):
            raise NVMLError("Driver Not Loaded")

    def nvmlShutdown(self) -> None:
        return None

    def nvmlSystemGetDriverVersion(self) -> str:
        if "driver" not in self.machine:
            raise NVMLError("Not Supported")
        return str(self.machine["driver"])

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        if "cuda_driver" not in self.machine:
            raise NVMLError("Not Supported")
        return int(self.machine["cuda_driver"])

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if not 0 <= i < len(self.gpus):
            raise NVMLError("Invalid Argument")
        return i

    # -- device --------------------------------------------------------------------------
    def nvmlDeviceGetName(self, h: int) -> str:
        return str(self._get(h, "name"))

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return str(self._get(h, "uuid"))

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=self._get(h, "bus_id"),
                               pciDeviceId=(int(self._get(h, "device_id")) << 16) | 0x10DE)

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        major, minor = self._get(h, "cc")
        return int(major), int(minor)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return SimpleNamespace(total=self._get(h, "memory_total"),
                               used=self.gpus[h].get("memory_used", 0))

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return int(self._get(h, "clocks")["sm" if kind == self.NVML_CLOCK_SM else "mem"])

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        return int(self._get(h, "max_clocks")["sm" if kind == self.NVML_CLOCK_SM else "mem"])

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return int(self._get(h, "power_mw"))

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return int(self._get(h, "power_limit_mw"))

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: int) -> int:
        return int(self._get(h, "power_default_mw"))

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h: int) -> tuple[int, int]:
        low, high = self._get(h, "power_range_mw")
        return int(low), int(high)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return int(self._get(h, "temperature"))

    def nvmlDeviceGetEccMode(self, h: int) -> tuple[int, int]:
        current, pending = self._get(h, "ecc")
        return int(current), int(pending)

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return int(self._get(h, "persistence"))

    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]:
        current, pending = self._get(h, "mig")
        return int(current), int(pending)

    def nvmlDeviceGetMaxMigDeviceCount(self, h: int) -> int:
        return 7 if "mig" in self.gpus[h] else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: int, i: int) -> int:
        if i >= int(self.gpus[h].get("mig_instances", 0)):
            raise NVMLError("Not Found")
        return 1000 * (h + 1) + i

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return int(self._get(h, "pcie")["gen"])

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return int(self._get(h, "pcie")["max_gen"])

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return int(self._get(h, "pcie")["width"])

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return int(self._get(h, "pcie")["max_width"])

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return int(self._get(h, "clock_event_reasons"))

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        links = self.gpus[h].get("nvlinks", [])
        if link >= len(links):
            raise NVMLError("Invalid Argument")
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> Any:
        return SimpleNamespace(busId=self.gpus[h]["nvlinks"][link])

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        table = self.machine.get("common_ancestor", {})
        key = f"{min(a, b)}-{max(a, b)}"
        if key not in table:
            raise NVMLError("Not Supported")
        return int(table[key])
