"""The doctor's rules, each triggered by changing one reading of a healthy H100 report."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuarch.catalog import Catalog, load_catalog
from gpuarch.probe.doctor import (
    RULES,
    DoctorFinding,
    Severity,
    diagnose,
)
from gpuarch.probe.readings import (
    GpuReading,
    HostReading,
    LinkKind,
    MigReading,
    PcieReading,
    ProbeReport,
    TopologyLink,
    TorchReading,
    Unavailable,
)

MHZ = 1e6
GIB = 2.0**30


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def make_gpu(index: int = 0, **changes: Any) -> GpuReading:
    """A busy, healthy H100 SXM5 80GB; keyword arguments override single readings."""
    gpu = GpuReading(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        uuid=f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd",
        pci_bus_id=f"00000000:{0x18 + index:02X}:00.0",
        pci_device_id=0x2330,
        compute_capability="9.0",
        memory_total_bytes=80 * GIB,
        memory_used_bytes=40 * GIB,
        sm_clock_hz=1980 * MHZ,
        sm_clock_max_hz=1980 * MHZ,
        memory_clock_hz=2619 * MHZ,
        memory_clock_max_hz=2619 * MHZ,
        power_draw_w=450.0,
        power_limit_w=700.0,
        power_default_limit_w=700.0,
        power_max_limit_w=700.0,
        temperature_c=55.0,
        ecc_enabled=True,
        ecc_pending=True,
        persistence_mode=True,
        mig=MigReading(enabled=False, pending=False, instances=0),
        pcie=PcieReading(generation=5, max_generation=5, width=16, max_width=16),
        throttle_reasons=(),
        numa_node=0,
        product_key="h100-sxm5-80gb",
        match_note="PCI device id 0x2330",
    )
    return replace(gpu, **changes)


def make_torch(**changes: Any) -> TorchReading:
    """A CUDA build of torch that covers sm_90, with TF32 on."""
    torch = TorchReading(
        version="2.13.0",
        cuda_build="12.8",
        arch_list=("sm_80", "sm_86", "sm_90"),
        cuda_available=True,
        tf32_matmul=True,
        tf32_cudnn=True,
        float32_matmul_precision="high",
        nccl_version="2.27.3",
    )
    return replace(torch, **changes)


def healthy(**changes: Any) -> ProbeReport:
    """Two NVLink-connected H100s with every setting as it should be."""
    report = ProbeReport(
        host=HostReading(cpu="Intel Xeon Platinum 8480+", cores=112, memory_bytes=2048 * GIB,
                         os="Linux-6.8.0-x86_64-with-glibc2.39", python="3.11.9"),
        driver_version="570.124.06",
        cuda_driver_version="12.8",
        gpus=(make_gpu(0), make_gpu(1)),
        topology=(TopologyLink(0, 1, LinkKind.NVLINK, nvlinks=18),),
        torch=make_torch(),
        environment={},
    )
    return replace(report, **changes)


def with_gpu0(report: ProbeReport, **changes: Any) -> ProbeReport:
    """The report with GPU 0's readings changed."""
    return replace(report, gpus=(replace(report.gpus[0], **changes), *report.gpus[1:]))


def only(findings: list[DoctorFinding], rule: str) -> list[DoctorFinding]:
    return [f for f in findings if f.rule == rule]


def one(findings: list[DoctorFinding], rule: str) -> DoctorFinding:
    hits = only(findings, rule)
    assert len(hits) == 1, hits
    return hits[0]


# -- the registry and the healthy machine ----------------------------------------------------


def test_rules_registered_once_each() -> None:
    """All twelve rules are registered, each id once."""
    ids = [rule.id for rule in RULES]
    assert ids == [
        "torch-arch-missing", "tf32-off", "amp-advice", "pcie-only-multi-gpu",
        "pcie-link-degraded", "power-capped", "clocks-throttled", "ecc-state", "mig-state",
        "nccl-env", "persistence-off", "no-gpu",
    ]


def test_healthy_report_has_no_problems(catalog: Catalog) -> None:
    """A healthy H100 pair gives no warning or error, only the AMP advice."""
    findings = diagnose(healthy(), catalog)
    assert all(f.severity is Severity.INFO for f in findings), findings
    assert {f.rule for f in findings} == {"amp-advice"}


def test_findings_sorted_errors_first(catalog: Catalog) -> None:
    """Errors come before warnings, warnings before info."""
    report = with_gpu0(healthy(torch=make_torch(arch_list=("sm_80",))), power_limit_w=500.0)
    findings = diagnose(report, catalog)
    ranks = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
    assert [ranks[f.severity] for f in findings] == sorted(ranks[f.severity] for f in findings)
    assert findings[0].severity is Severity.ERROR
    assert findings[-1].severity is Severity.INFO


def test_unknown_readings_give_no_findings(catalog: Catalog) -> None:
    """A GPU whose readings are all unknown triggers no rule."""
    blank = make_gpu(0, compute_capability=None, sm_clock_hz=None, sm_clock_max_hz=None,
                     power_draw_w=None, power_limit_w=None, power_default_limit_w=None,
                     temperature_c=None, ecc_enabled=None, ecc_pending=None,
                     persistence_mode=None, mig=None, pcie=None, product_key=None)
    report = healthy(gpus=(blank,), topology=(), torch=None)
    assert diagnose(report, catalog) == []


# -- 1. torch-arch-missing -------------------------------------------------------------------


def test_torch_arch_missing_error(catalog: Catalog) -> None:
    """A B200 with a torch built only up to sm_90 is an error naming sm_100."""
    report = healthy(gpus=(make_gpu(0, name="NVIDIA B200", compute_capability="10.0",
                                    product_key="b200"),), topology=())
    f = one(diagnose(report, catalog), "torch-arch-missing")
    assert f.severity is Severity.ERROR
    assert "sm_100" in f.evidence and "sm_90" in f.evidence
    assert f.gpu == 0


def test_torch_arch_missing_ptx_warns(catalog: Catalog) -> None:
    """PTX for an older capability means JIT compilation: a warning, not an error."""
    report = healthy(torch=make_torch(arch_list=("sm_80", "compute_80")))
    hits = only(diagnose(report, catalog), "torch-arch-missing")
    assert [f.severity for f in hits] == [Severity.WARNING, Severity.WARNING]
    assert "compute_80" in hits[0].evidence
    assert "JIT" in hits[0].title


def test_torch_arch_same_major_cubin_is_enough(catalog: Catalog) -> None:
    """An RTX 4090 (8.9) runs sm_86 cubins, so no finding."""
    gpu = make_gpu(0, name="NVIDIA GeForce RTX 4090", compute_capability="8.9",
                   product_key="rtx-4090")
    report = healthy(gpus=(gpu,), topology=())
    assert only(diagnose(report, catalog), "torch-arch-missing") == []


def test_torch_arch_specific_cubin_needs_exact_match(catalog: Catalog) -> None:
    """An sm_90a cubin does not run on a 10.0 GPU."""
    gpu = make_gpu(0, compute_capability="10.0", product_key="b200")
    report = healthy(gpus=(gpu,), topology=(), torch=make_torch(arch_list=("sm_90a",)))
    assert one(diagnose(report, catalog), "torch-arch-missing").severity is Severity.ERROR


def test_torch_arch_cpu_build_or_empty_list_is_silent(catalog: Catalog) -> None:
    """A CPU-only torch, or an empty arch list, gives no arch finding."""
    cpu = healthy(torch=make_torch(cuda_build=None, arch_list=()))
    empty = healthy(torch=make_torch(arch_list=()))
    assert only(diagnose(cpu, catalog), "torch-arch-missing") == []
    assert only(diagnose(empty, catalog), "torch-arch-missing") == []


# -- 2. tf32-off -----------------------------------------------------------------------------


def test_tf32_off(catalog: Catalog) -> None:
    """TF32 off on Hopper warns and gives the setting that turns it on."""
    torch = make_torch(tf32_matmul=False, float32_matmul_precision="highest")
    f = one(diagnose(healthy(torch=torch), catalog), "tf32-off")
    assert f.severity is Severity.WARNING
    assert "allow_tf32 = False" in f.evidence and "'highest'" in f.evidence
    assert 'set_float32_matmul_precision("high")' in f.fix


def test_tf32_off_ignored_before_ampere(catalog: Catalog) -> None:
    """A V100 has no TF32, so TF32 off is not a finding."""
    gpu = make_gpu(0, name="Tesla V100-SXM2-32GB", compute_capability="7.0",
                   product_key="v100-sxm2-32gb")
    torch = make_torch(tf32_matmul=False, float32_matmul_precision="highest")
    report = healthy(gpus=(gpu,), topology=(), torch=torch)
    assert only(diagnose(report, catalog), "tf32-off") == []


def test_tf32_unknown_is_silent(catalog: Catalog) -> None:
    """An unknown TF32 switch gives no finding."""
    torch = make_torch(tf32_matmul=None, float32_matmul_precision=None)
    assert only(diagnose(healthy(torch=torch), catalog), "tf32-off") == []


# -- 3. amp-advice ---------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "cc", "expect"), [
    ("v100-sxm2-32gb", "7.0", "float16"),
    ("a100-sxm4-80gb", "8.0", "bfloat16"),
    ("l40s", "8.9", "bfloat16"),
    ("h100-sxm5-80gb", "9.0", "FP8"),
    ("b200", "10.0", "NVFP4"),
])
def test_amp_advice_per_architecture(catalog: Catalog, key: str, cc: str, expect: str) -> None:
    """Each architecture gets its own mixed-precision recipe."""
    report = healthy(gpus=(make_gpu(0, compute_capability=cc, product_key=key),), topology=())
    f = one(diagnose(report, catalog), "amp-advice")
    assert f.severity is Severity.INFO
    assert expect in f.fix
    assert cc in f.evidence


def test_amp_advice_names_installed_fp8_library(catalog: Catalog) -> None:
    """On Hopper the advice says which FP8 library is installed."""
    report = healthy(torch=make_torch(transformer_engine=True))
    f = one(diagnose(report, catalog), "amp-advice")
    assert "installed here: Transformer Engine" in f.fix
    assert f.gpu is None  # two GPUs share the finding


def test_amp_advice_turing_loss_scaling(catalog: Catalog) -> None:
    """Turing (found from compute capability alone) gets FP16 with a GradScaler."""
    gpu = make_gpu(0, compute_capability="7.5", product_key=None)
    f = one(diagnose(healthy(gpus=(gpu,), topology=()), catalog), "amp-advice")
    assert "GradScaler" in f.fix and "Turing" in f.title


# -- 4. pcie-only-multi-gpu ------------------------------------------------------------------


def test_pcie_only_multi_gpu(catalog: Catalog) -> None:
    """Two GPUs joined only through the host bridge warn, listing the path label."""
    report = healthy(topology=(TopologyLink(0, 1, LinkKind.PHB),))
    f = one(diagnose(report, catalog), "pcie-only-multi-gpu")
    assert f.severity is Severity.WARNING
    assert "GPU0-GPU1: PHB" in f.evidence
    assert "NVLink" in f.fix


def test_pcie_only_needs_topology(catalog: Catalog) -> None:
    """Without a topology reading there is no NVLink finding."""
    assert only(diagnose(healthy(topology=()), catalog), "pcie-only-multi-gpu") == []


# -- 5. pcie-link-degraded -------------------------------------------------------------------


def test_pcie_generation_drop_under_load(catalog: Catalog) -> None:
    """A lower link generation while busy warns."""
    report = with_gpu0(healthy(), pcie=PcieReading(4, 5, 16, 16))
    f = one(diagnose(report, catalog), "pcie-link-degraded")
    assert f.severity is Severity.WARNING
    assert "generation 4 of 5" in f.evidence
    assert f.gpu == 0


def test_pcie_generation_drop_when_idle_is_info(catalog: Catalog) -> None:
    """A lower link generation on an idle GPU is info with a re-check under load."""
    report = with_gpu0(healthy(), pcie=PcieReading(1, 5, 16, 16), power_draw_w=70.0,
                       sm_clock_hz=345 * MHZ)
    f = one(diagnose(report, catalog), "pcie-link-degraded")
    assert f.severity is Severity.INFO
    assert "generation 1 of 5" in f.evidence and "70 W" in f.evidence
    assert "nvidia-smi -q -d PCIE" in f.fix


def test_pcie_narrow_width_always_warns(catalog: Catalog) -> None:
    """A narrower link warns even on an idle GPU."""
    report = with_gpu0(healthy(), pcie=PcieReading(5, 5, 8, 16), power_draw_w=70.0)
    f = one(diagnose(report, catalog), "pcie-link-degraded")
    assert f.severity is Severity.WARNING
    assert "x8 of x16" in f.evidence
    assert "bifurcation" in f.fix


# -- 6. power-capped -------------------------------------------------------------------------


def test_power_capped(catalog: Catalog) -> None:
    """A limit below the default warns with the command restoring it."""
    report = with_gpu0(healthy(), power_limit_w=500.0)
    f = one(diagnose(report, catalog), "power-capped")
    assert f.severity is Severity.WARNING
    assert "500 W" in f.evidence and "700 W" in f.evidence
    assert "sudo nvidia-smi -i 0 -pl 700" in f.fix


def test_power_within_one_percent_is_fine(catalog: Catalog) -> None:
    """A limit within 1% of the default is not a finding."""
    report = with_gpu0(healthy(), power_limit_w=695.0)
    assert only(diagnose(report, catalog), "power-capped") == []


# -- 7. clocks-throttled ---------------------------------------------------------------------


def test_clocks_throttled(catalog: Catalog) -> None:
    """Thermal slowdown warns, naming the reason, with temperature as evidence."""
    report = with_gpu0(healthy(), temperature_c=91.0,
                       throttle_reasons=("gpu_idle", "sw_thermal_slowdown"))
    f = one(diagnose(report, catalog), "clocks-throttled")
    assert f.severity is Severity.WARNING
    assert "sw_thermal_slowdown" in f.evidence and "91 °C" in f.evidence
    assert "gpu_idle" not in f.evidence
    assert "thermal" in f.title


def test_benign_clock_reasons_ignored(catalog: Catalog) -> None:
    """Idle and application-clock reasons are not throttling."""
    report = with_gpu0(healthy(), throttle_reasons=("gpu_idle", "applications_clocks_setting"))
    assert only(diagnose(report, catalog), "clocks-throttled") == []


# -- 8. ecc-state ----------------------------------------------------------------------------


def test_ecc_disabled_on_datacenter_gpu(catalog: Catalog) -> None:
    """ECC off on an H100 warns."""
    report = with_gpu0(healthy(), ecc_enabled=False, ecc_pending=False)
    f = one(diagnose(report, catalog), "ecc-state")
    assert f.severity is Severity.WARNING
    assert "ecc.mode.current off" in f.evidence
    assert "-e 1" in f.fix


def test_ecc_pending_change_is_info(catalog: Catalog) -> None:
    """An ECC change waiting for a reset is info."""
    report = with_gpu0(healthy(), ecc_enabled=False, ecc_pending=True)
    f = one(diagnose(report, catalog), "ecc-state")
    assert f.severity is Severity.INFO
    assert "ecc.mode.pending on" in f.evidence


def test_ecc_off_on_consumer_gpu_is_fine(catalog: Catalog) -> None:
    """A GeForce card without ECC in the catalog gives no ECC finding."""
    gpu = make_gpu(0, compute_capability="8.9", product_key="rtx-4090", ecc_enabled=False,
                   ecc_pending=False)
    assert only(diagnose(healthy(gpus=(gpu,), topology=()), catalog), "ecc-state") == []


# -- 9. mig-state ----------------------------------------------------------------------------


def test_mig_enabled(catalog: Catalog) -> None:
    """MIG on is info naming the instance count and CUDA_VISIBLE_DEVICES."""
    report = with_gpu0(healthy(), mig=MigReading(enabled=True, pending=True, instances=7))
    f = one(diagnose(report, catalog), "mig-state")
    assert f.severity is Severity.INFO
    assert "7 instance" in f.evidence
    assert "CUDA_VISIBLE_DEVICES" in f.fix


def test_mig_pending(catalog: Catalog) -> None:
    """A MIG mode change waiting for a reset is info with the reset command."""
    report = with_gpu0(healthy(), mig=MigReading(enabled=False, pending=True, instances=0))
    f = one(diagnose(report, catalog), "mig-state")
    assert f.severity is Severity.INFO
    assert "mig.mode.pending on" in f.evidence
    assert "-r" in f.fix


# -- 10. nccl-env ----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "value"), [
    ("NCCL_P2P_DISABLE", "1"),
    ("NCCL_IB_DISABLE", "1"),
    ("NCCL_SHM_DISABLE", "1"),
    ("NCCL_P2P_LEVEL", "LOC"),
])
def test_nccl_env(catalog: Catalog, name: str, value: str) -> None:
    """Each transport-disabling NCCL variable warns."""
    f = one(diagnose(healthy(environment={name: value}), catalog), "nccl-env")
    assert f.severity is Severity.WARNING
    assert f"{name}={value}" in f.evidence


def test_nccl_env_harmless_values(catalog: Catalog) -> None:
    """Zero values and other P2P levels are fine."""
    env = {"NCCL_P2P_DISABLE": "0", "NCCL_IB_DISABLE": "0", "NCCL_P2P_LEVEL": "NVL"}
    assert only(diagnose(healthy(environment=env), catalog), "nccl-env") == []


# -- 11. persistence-off ---------------------------------------------------------------------


def test_persistence_off(catalog: Catalog) -> None:
    """Persistence off on a Linux H100 is info with the command."""
    report = with_gpu0(healthy(), persistence_mode=False)
    f = one(diagnose(report, catalog), "persistence-off")
    assert f.severity is Severity.INFO
    assert "persistence_mode off" in f.evidence
    assert "nvidia-smi -i 0 -pm 1" in f.fix


def test_persistence_off_ignored_on_windows(catalog: Catalog) -> None:
    """Persistence mode is a Linux setting."""
    report = with_gpu0(healthy(), persistence_mode=False)
    report = replace(report, host=replace(report.host, os="Windows-11-10.0.22631-SP0"))
    assert only(diagnose(report, catalog), "persistence-off") == []


# -- 12. no-gpu ------------------------------------------------------------------------------


def test_no_gpu(catalog: Catalog) -> None:
    """No GPUs gives info listing what the probe could not read."""
    report = healthy(gpus=(), topology=(), torch=make_torch(cuda_build=None, arch_list=()),
                     unavailable=(Unavailable("NVML", "libnvidia-ml.so.1 not found"),))
    findings = diagnose(report, catalog)
    assert [f.rule for f in findings] == ["no-gpu"]
    assert findings[0].severity is Severity.INFO
    assert "libnvidia-ml.so.1 not found" in findings[0].evidence
    assert "CPU-only" in findings[0].evidence
