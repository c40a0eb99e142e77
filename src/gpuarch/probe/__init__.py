"""The live probe: NVML inventory and topology (behind a gateway with a fake for tests),
catalog matching, torch microbenchmarks, calibration files and the doctor's rules. Nothing
here runs unless asked, and nothing raises for a missing GPU, driver or torch."""

from gpuarch.probe.calibration import (
    Calibration,
    apply_calibration,
    calibration_document,
    load_calibration,
)
from gpuarch.probe.doctor import DoctorFinding, Severity, diagnose
from gpuarch.probe.fake_nvml import FakeNvml
from gpuarch.probe.matching import match_product
from gpuarch.probe.readings import (
    GpuReading,
    HostReading,
    LinkKind,
    ProbeReport,
    TopologyLink,
    TorchReading,
    Unavailable,
)
from gpuarch.probe.run import run_probe

__all__ = [
    "Calibration",
    "DoctorFinding",
    "FakeNvml",
    "GpuReading",
    "HostReading",
    "LinkKind",
    "ProbeReport",
    "Severity",
    "TopologyLink",
    "TorchReading",
    "Unavailable",
    "apply_calibration",
    "calibration_document",
    "diagnose",
    "load_calibration",
    "match_product",
    "run_probe",
]
