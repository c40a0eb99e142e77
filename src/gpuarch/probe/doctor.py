"""``gpuarch doctor``: read a probe report and point out settings that cost performance.

Every rule looks at readings the probe actually made; a reading of ``None`` means the probe
could not tell, and a rule whose evidence is missing stays silent rather than guessing.
The rules, in the order they run:

``torch-arch-missing`` (error, or warning when PTX can be JIT-compiled)
    torch is a CUDA build but ships no kernels for a GPU's compute capability.
``tf32-off`` (warning)
    Ampere or newer, and FP32 matrix multiplications are kept off the Tensor Cores.
``amp-advice`` (info)
    Which mixed-precision recipe fits each architecture present (FP16, BF16, FP8, MXFP8/NVFP4).
``pcie-only-multi-gpu`` (warning)
    Several GPUs, and the topology shows no NVLink between any two of them.
``pcie-link-degraded`` (warning, or info for a generation drop on an idle GPU)
    The PCIe link runs below the generation or width the GPU and slot allow.
``power-capped`` (warning)
    The enforced power limit is more than 1% below the default one.
``clocks-throttled`` (warning)
    The driver reports active clock-reduction reasons (thermal, power, HW slowdown, ...).
``ecc-state`` (warning or info)
    ECC is off on a datacenter GPU that has it, or an ECC mode change waits for a reset.
``mig-state`` (info)
    MIG is on (processes see only their instance), or a MIG mode change waits for a reset.
``nccl-env`` (warning)
    NCCL environment variables that switch off fast transports.
``persistence-off`` (info)
    Persistence mode is off on a Linux datacenter GPU.
``no-gpu`` (info)
    The probe found no GPU; lists what it could not read and why.

:func:`diagnose` runs them all and returns the findings with errors first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import (
    Architecture,
    Chip,
    Product,
    Tier,
    parse_compute_capability,
)
from gpuarch.errors import GpuarchError
from gpuarch.probe.readings import GpuReading, LinkKind, ProbeReport

if TYPE_CHECKING:
    from gpuarch.probe.calibration import Calibration

__all__ = [
    "RULES",
    "SLOWER_THAN_REFERENCE",
    "DoctorFinding",
    "DoctorRule",
    "Severity",
    "compare_with_reference",
    "diagnose",
]


class Severity(Enum):
    """How urgent a finding is."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True)
class DoctorFinding:
    """One thing the doctor noticed, the readings behind it, and what to do about it."""

    rule: str
    severity: Severity
    title: str
    evidence: str
    fix: str
    gpu: int | None = None


RuleCheck = Callable[[ProbeReport, Catalog], list[DoctorFinding]]


@dataclass(frozen=True)
class DoctorRule:
    """A named check over a whole probe report."""

    id: str
    summary: str
    check: RuleCheck


# -- what the catalog knows about a GPU ------------------------------------------------------


@dataclass(frozen=True)
class _Hardware:
    """The catalog records a GPU reading maps to; any of them may be unknown."""

    product: Product | None
    architecture: Architecture | None
    chip: Chip | None


def _hardware(catalog: Catalog, gpu: GpuReading) -> _Hardware:
    """Catalog product, architecture and chip of ``gpu``.

    The product comes from the probe's ``product_key``. Without one, the architecture still
    follows exactly from the compute capability (each capability belongs to one architecture).
    """
    product: Product | None = None
    if gpu.product_key:
        try:
            product = catalog.product(gpu.product_key)
        except GpuarchError:
            product = None
    if product is not None:
        return _Hardware(product, catalog.architecture_of(product), catalog.chip_of(product))
    arch = None
    if gpu.compute_capability:
        arch = catalog.architecture_named(f"sm{gpu.compute_capability.replace('.', '')}")
    return _Hardware(None, arch, None)


def _has_feature(catalog: Catalog, hw: _Hardware, feature: str) -> bool:
    if hw.product is not None:
        return catalog.has_feature(hw.product, feature)
    return hw.architecture is not None and feature in hw.architecture.features


def _gpu_label(gpu: GpuReading) -> str:
    return f"GPU {gpu.index} ({gpu.name})"


def _watts(value: float) -> str:
    return f"{value:.0f} W"


def _mhz(value: float) -> str:
    return f"{value / 1e6:.0f} MHz"


def _looks_idle(gpu: GpuReading) -> bool | None:
    """True if the GPU looks idle, False if it looks busy, None if the readings can't say.

    Idle means: the driver reports the idle clock reason, power draw is under 30% of the
    enforced limit, or the SM clock is under half its maximum.
    """
    if any(_reason_key(r) in _IDLE_REASONS for r in gpu.throttle_reasons):
        return True
    verdicts: list[bool] = []
    if gpu.power_draw_w is not None and gpu.power_limit_w:
        verdicts.append(gpu.power_draw_w < 0.3 * gpu.power_limit_w)
    if gpu.sm_clock_hz is not None and gpu.sm_clock_max_hz:
        verdicts.append(gpu.sm_clock_hz < 0.5 * gpu.sm_clock_max_hz)
    if not verdicts:
        return None
    return any(verdicts)


# -- rule 1: torch-arch-missing --------------------------------------------------------------

_ARCH_ENTRY = re.compile(r"^(sm|compute)_(\d+)([a-z]?)$")


def _parse_arch_entry(entry: str) -> tuple[str, int, int, str] | None:
    """``"sm_90a"`` -> ``("sm", 9, 0, "a")``; the last digit is the minor version."""
    match = _ARCH_ENTRY.match(entry.strip().lower())
    if not match or len(match.group(2)) < 2:
        return None
    digits = match.group(2)
    return match.group(1), int(digits[:-1]), int(digits[-1]), match.group(3)


def _runs_binary(entry: tuple[str, int, int, str], cc: tuple[int, int]) -> bool:
    """Whether compiled machine code (SASS) for ``entry`` loads on a GPU of capability ``cc``.

    Plain and family (``f``) cubins run on the same major version at an equal or higher
    minor; architecture-specific (``a``) cubins run only on their exact capability.
    """
    _, major, minor, suffix = entry
    if suffix == "a":
        return (major, minor) == cc
    return major == cc[0] and minor <= cc[1]


def _jits_ptx(entry: tuple[str, int, int, str], cc: tuple[int, int]) -> bool:
    """Whether PTX for ``entry`` can be JIT-compiled for a GPU of capability ``cc``."""
    _, major, minor, suffix = entry
    if suffix == "a":
        return (major, minor) == cc
    return (major, minor) <= cc


def _torch_arch_missing(report: ProbeReport, catalog: Catalog) -> list[DoctorFinding]:
    torch = report.torch
    if torch is None or torch.cuda_build is None or not torch.arch_list:
        return []
    entries = [(raw, parsed) for raw in torch.arch_list
               if (parsed := _parse_arch_entry(raw)) is not None]
    out: list[DoctorFinding] = []
    for gpu in report.gpus:
        cc = parse_compute_capability(gpu.compute_capability) if gpu.compute_capability else None
        if cc is None:
            continue
        sm = f"sm_{cc[0]}{cc[1]}"
        if any(p[0] == "sm" and _runs_binary(p, cc) for _, p in entries):
            continue
        arch_list = ", ".join(torch.arch_list)
        evidence = (f"{_gpu_label(gpu)} has compute capability {gpu.compute_capability} "
                    f"({sm}); torch {torch.version} (CUDA {torch.cuda_build}) was built for "
                    f"{arch_list}")
        ptx = [raw for raw, p in entries if p[0] == "compute" and _jits_ptx(p, cc)]
        install = (f"Install a torch wheel whose arch list covers {sm} (a build against a "
                   "CUDA toolkit new enough for this GPU, e.g. "
                   "`pip install torch --index-url https://download.pytorch.org/whl/cu128`), "
                   f"or build torch from source with TORCH_CUDA_ARCH_LIST=\"{cc[0]}.{cc[1]}\". "
                   "Check with `python -c \"import torch; print(torch.cuda.get_arch_list())\"`.")
        if ptx:
            out.append(DoctorFinding(
                rule="torch-arch-missing",
                severity=Severity.WARNING,
                title=f"torch has no {sm} kernels; they are JIT-compiled from PTX at first use",
                evidence=f"{evidence}; usable PTX: {', '.join(ptx)}",
                fix=("It will run, but the driver compiles every kernel from PTX the first "
                     "time it is used (slow start-up, a JIT cache to keep warm) and the code "
                     "is not tuned for this GPU. " + install),
                gpu=gpu.index,
            ))
        else:
            out.append(DoctorFinding(
                rule="torch-arch-missing",
                severity=Severity.ERROR,
                title=f"torch ships no kernels that can run on {sm}",
                evidence=evidence,
                fix=("CUDA kernels will fail with 'no kernel image is available for execution "
                     "on the device'. " + install),
                gpu=gpu.index,
            ))
    return out


# -- rule 2: tf32-off ------------------------------------------------------------------------

_AMPERE_ORDER = 8


def _tf32_off(report: ProbeReport, catalog: Catalog) -> list[DoctorFinding]:
    torch = report.torch
    if torch is None or torch.tf32_matmul is not False:
        return []
    if torch.float32_matmul_precision not in (None, "highest"):
        return []
    gpus = [g for g in report.gpus
            if (a := _hardware(catalog, g).architecture) is not None
            and a.order >= _AMPERE_ORDER]
    if not gpus:
        return []
    precision = torch.float32_matmul_precision or "unknown"
    evidence = (f"{', '.join(_gpu_label(g) for g in gpus)}: Ampere or newer; "
                f"torch.backends.cuda.matmul.allow_tf32 = False, "
                f"float32_matmul_precision = {precision!r}")
    if torch.tf32_cudnn is False:
        evidence += "; torch.backends.cudnn.allow_tf32 = False"
    return [DoctorFinding(
        rule="tf32-off",
        severity=Severity.WARNING,
        title="FP32 matrix multiplications bypass the Tensor Cores (TF32 is off)",
        evidence=evidence,
        fix=("Enable TF32 at the start of the program: "
             "`torch.set_float32_matmul_precision(\"high\")` (or "
             "`torch.backends.cuda.matmul.allow_tf32 = True`; for convolutions "
             "`torch.backends.cudnn.allow_tf32 = True`). TF32 keeps FP32's range but rounds "
             "inputs to a 10-bit mantissa; leave it off for FP32 work that needs the full "
             "23-bit mantissa, such as ill-conditioned solvers or reference checks."),
        gpu=gpus[0].index if len(gpus) == 1 else None,
    )]


# -- rule 3: amp-advice ----------------------------------------------------------------------

_VOLTA, _TURING, _AMPERE, _ADA, _HOPPER, _BLACKWELL = 6, 7, 8, 9, 10, 11


def _fp8_libraries(report: ProbeReport) -> str:
    torch = report.torch
    if torch is None:
        return "torch was not found, so neither library was checked"
    found = [name for name, ok in (("Transformer Engine", torch.transformer_engine),
                                   ("torchao", torch.torchao)) if ok]
    if found:
        return f"installed here: {' and '.join(found)}"
    return "neither Transformer Engine nor torchao is installed here"


def _amp_text(report: ProbeReport, catalog: Catalog, hw: _Hardware,
              arch: Architecture) -> tuple[str, str]:
    """Title and advice for one architecture."""
    order = arch.order
    if order < _VOLTA:
        return (f"{arch.name}: no Tensor Cores, mixed precision gains little",
                "Keep FP32 math. FP16 storage can still halve activation memory, but without "
                "Tensor Cores autocast brings little or no speed-up.")
    if order < _AMPERE:
        return (f"{arch.name}: use FP16 autocast with loss scaling",
                "Use `torch.autocast(\"cuda\", dtype=torch.float16)` with "
                "`torch.amp.GradScaler(\"cuda\")` for training; the Tensor Cores here take FP16 "
                "but not BF16, and FP16's narrow range needs the loss scaling.")
    if order < _HOPPER:
        text = ("Use `torch.autocast(\"cuda\", dtype=torch.bfloat16)`; BF16 has FP32's "
                "range, so no GradScaler is needed.")
        if order >= _ADA and _has_feature(catalog, hw, "fp8_transformer_engine"):
            text += (" These Tensor Cores also run FP8 (Transformer Engine supports it), "
                     "worth trying for large transformer layers; " + _fp8_libraries(report)
                     + ".")
        return f"{arch.name}: use BF16 autocast", text
    text = ("Use `torch.autocast(\"cuda\", dtype=torch.bfloat16)` as the baseline. For large "
            "matrix multiplications FP8 doubles Tensor Core throughput over BF16, through "
            "Transformer Engine (`te.fp8_autocast`) or torchao's float8 training; "
            + _fp8_libraries(report) + ".")
    title = f"{arch.name}: use BF16 autocast, and FP8 where accuracy allows"
    if order >= _BLACKWELL:
        text += (" The block-scaled formats MXFP8 and NVFP4 are native here too (Transformer "
                 "Engine recipes for training, NVFP4 mainly for inference).")
        title = f"{arch.name}: BF16 autocast, FP8, and MXFP8/NVFP4 where accuracy allows"
    return title, text


def _amp_advice(report: ProbeReport, catalog: Catalog) -> list[DoctorFinding]:
    groups: dict[str, list[tuple[GpuReading, _Hardware]]] = {}
    archs: dict[str, Architecture] = {}
    for gpu in report.gpus:
        hw = _hardware(catalog, gpu)
        if hw.architecture is None:
            continue
        groups.setdefault(hw.architecture.key, []).append((gpu, hw))
        archs[hw.architecture.key] = hw.architecture
    out: list[DoctorFinding] = []
    for key, members in groups.items():
        arch = archs[key]
        title, fix = _amp_text(report, catalog, members[0][1], arch)
        gens = {hw.chip.sm.tensor_core_generation for _, hw in members if hw.chip is not None}
        gen_note = ""
        if len(gens) == 1 and (gen := gens.pop()) is not None:
            gen_note = f", Tensor Core generation {gen}"
        labels = ", ".join(f"{_gpu_label(g)} cc {g.compute_capability or '?'}"
                           for g, _ in members)
        out.append(DoctorFinding(
            rule="amp-advice",
            severity=Severity.INFO,
            title=title,
            evidence=f"{labels}: architecture {arch.name}{gen_note}",
            fix=fix,
            gpu=members[0][0].index if len(members) == 1 else None,
        ))
    return out


# -- rule 4: pcie-only-multi-gpu -------------------------------------------------------------


def _pcie_only_multi_gpu(report: ProbeReport, catalog: Catalog) -> list[DoctorFinding]:
    if len(report.gpus) < 2:
        return []
    pairs = [link for link in report.topology
             if link.a != link.b and link.kind is not LinkKind.SELF]
    if not pairs or any(link.kind is LinkKind.NVLINK for link in pairs):
        return []
    listed = ", ".join(f"GPU{link.a}-GPU{link.b}: {link.label}" for link in pairs)
    return [DoctorFinding(
        rule="pcie-only-multi-gpu",
        severity=Severity.WARNING,
        title=f"{len(report.gpus)} GPUs with no NVLink between any pair",
        evidence=f"topology: {listed}",
        fix=("GPU-to-GPU traffic goes over PCIe (and through the CPU for PHB/NODE/SYS "
             "paths), at several times less bandwidth than NVLink. Keep tensor parallelism on "
             "NVLink/NVSwitch systems, or within NVLink-connected GPUs; here prefer data "
             "parallelism (DDP/FSDP) with gradient all-reduce overlapped with the backward "
             "pass, and pipeline parallelism over tensor parallelism."),
    )]


# -- rule 5: pcie-link-degraded --------------------------------------------------------------


def _pcie_link_degraded(report: ProbeReport, catalog: Catalog) -> list[DoctorFinding]:
    out: list[DoctorFinding] = []
    for gpu in report.gpus:
        pcie = gpu.pcie
        if pcie is None:
            continue
        slow_gen = (pcie.generation is not None and pcie.max_generation is not None
                    and pcie.generation < pcie.max_generation)
        narrow = (pcie.width is not None and pcie.max_width is not None
                  and pcie.width < pcie.max_width)
        if not (slow_gen or narrow):
            continue
        parts: list[str] = []
        if slow_gen:
            parts.append(f"link generation {pcie.generation} of {pcie.max_generation}")
        if narrow:
            parts.append(f"width x{pcie.width} of x{pcie.max_width}")
        load: list[str] = []
        if gpu.power_draw_w is not None and gpu.power_limit_w is not None:
            load.append(f"power {_watts(gpu.power_draw_w)} of {_watts(gpu.power_limit_w)}")
        if gpu.sm_clock_hz is not None and gpu.sm_clock_max_hz is not None:
            load.append(f"SM clock {_mhz(gpu.sm_clock_hz)} of {_mhz(gpu.sm_clock_max_hz)}")
        idle = _looks_idle(gpu)
        evidence = f"{_gpu_label(gpu)}: {', '.join(parts)}"
        if load:
            evidence += f" ({', '.join(load)})"
        recheck = ("Re-check while a job is running: `nvidia-smi -q -d PCIE -i "
                   f"{gpu.index}` should then show the maximum generation.")
        fixes: list[str] = []
        if narrow:
            fixes.append("A narrower link than the card supports does not recover under load: "
                         "re-seat the card, make sure the slot is wired for the full width, "
                         "and check the BIOS lane bifurcation settings and risers.")
        if slow_gen:
            if idle:
                fixes.append("GPUs lower the link generation when idle to save power, and "
                             "this one looks idle. " + recheck)
            elif idle is None:
                fixes.append("An idle GPU may lower its link generation to save power, and the "
                             "readings cannot tell whether this one was busy. " + recheck
                             + " If it stays low, check the BIOS PCIe speed setting, "
                             "risers/retimers and the slot.")
            else:
                fixes.append("Under load the link should run at full generation; check the "
                             "BIOS PCIe speed setting, risers/retimers and the slot. " + recheck)
        severity = Severity.WARNING if narrow or (slow_gen and not idle) else Severity.INFO
        title = ("PCIe link narrower than supported" if narrow else
                 "PCIe link below its maximum generation (GPU idle)" if severity is Severity.INFO
                 else "PCIe link below its maximum generation")
        out.append(DoctorFinding(
            rule="pcie-link-degraded",
            severity=severity,
            title=title,
            evidence=evidence,
            fix=" ".join(fixes),
            gpu=gpu.index,
        ))
    return out


# -- rule 6: power-capped --------------------------------------------------------------------


def _power_capped(report: ProbeReport, catalog: Catalog) -> list[DoctorFinding]:
    out: list[DoctorFinding] = []
    for gpu in report.gpus:
        limit, default = gpu.power_limit_w, gpu.power_default_limit_w
        if limit is None or default is None or not limit < 0.99 * default:
            continue
        out.append(DoctorFinding(
            rule="power-capped",
            severity=Severity.WARNING,
            title=f"Power limit lowered to {limit / default:.0%} of the default",
            evidence=(f"{_gpu_label(gpu)}: power.limit {_watts(limit)}, "
                      f"power.default_limit {_watts(default)}"),
            fix=(f"Restore it with `sudo nvidia-smi -i {gpu.index} -pl {default:.0f}` where "
                 "you are allowed to (not usually inside containers or cloud VMs). Leave it "
                 "if an administrator set it on purpose, e.g. for the rack's power or cooling "
                 "budget."),
            gpu=gpu.index,
        ))
    return out


# -- rule 7: clocks-throttled ----------------------------------------------------------------

_IDLE_REASONS = frozenset({"gpu_idle", "idle"})
_BENIGN_REASONS = _IDLE_REASONS | {"applications_clocks_setting"}
_REASONS: dict[str, tuple[str, str]] = {
    "sw_power_cap": ("power cap",
                     "clocks held down to stay within the power limit; normal under full "
                     "load at the default limit, a loss if the limit was lowered"),
    "hw_slowdown": ("HW slowdown",
                    "hardware cut clocks sharply, from overheating or a power-supply brake "
                    "signal"),
    "hw_thermal_slowdown": ("HW thermal slowdown",
                            "hardware cut clocks because the GPU is too hot; check cooling"),
    "hw_power_brake_slowdown": ("HW power brake",
                                "the system asserted the power-brake signal; check the power "
                                "supply and cabling"),
    "sw_thermal_slowdown": ("thermal (software)",
                            "the driver lowered clocks because GPU or memory temperature is "
                            "above its operating limit; check airflow and fans"),
    "sync_boost": ("sync boost",
                   "clocks held to match other GPUs in a sync-boost group"),
    "display_clock_setting": ("display clock setting",
                              "clocks limited by the display clock configuration"),
}


def _reason_key(reason: str) -> str:
    """Normalise ``"clocks_event_reasons.sw_power_cap"`` or ``"SW Power Cap"`` to a key."""
    tail = reason.strip().lower().rsplit(".", 1)[-1]
    return re.sub(r"[\s\-]+", "_", tail)


def _clocks_throttled(report: ProbeReport, catalog: Catalog) -> list[DoctorFinding]:
    out: list[DoctorFinding] = []
    for gpu in report.gpus:
        active = [r for r in gpu.throttle_reasons if _reason_key(r) not in _BENIGN_REASONS]
        if not active:
            continue
        names: list[str] = []
        explanations: list[str] = []
        for raw in active:
            name, why = _REASONS.get(_reason_key(raw), (raw, "reported by the driver"))
            names.append(name)
            explanations.append(f"{name} ({raw}): {why}.")
        readings: list[str] = []
        if gpu.temperature_c is not None:
            readings.append(f"temperature {gpu.temperature_c:.0f} °C")
        if gpu.power_draw_w is not None:
            limit = f" of {_watts(gpu.power_limit_w)}" if gpu.power_limit_w is not None else ""
            readings.append(f"power {_watts(gpu.power_draw_w)}{limit}")
        if gpu.sm_clock_hz is not None and gpu.sm_clock_max_hz is not None:
            readings.append(f"SM clock {_mhz(gpu.sm_clock_hz)} of {_mhz(gpu.sm_clock_max_hz)}")
        evidence = f"{_gpu_label(gpu)}: active reasons {', '.join(active)}"
        if readings:
            evidence += f"; {', '.join(readings)}"
        out.append(DoctorFinding(
            rule="clocks-throttled",
            severity=Severity.WARNING,
            title=f"Clocks reduced: {', '.join(names)}",
            evidence=evidence,
            fix=" ".join(explanations) + (f" Watch it with `nvidia-smi -q -d PERFORMANCE,"
                                          f"TEMPERATURE,POWER -i {gpu.index}`."),
            gpu=gpu.index,
        ))
    return out


# -- rule 8: ecc-state -----------------------------------------------------------------------


def _ecc_state(report: ProbeReport, catalog: Catalog) -> list[DoctorFinding]:
    out: list[DoctorFinding] = []
    for gpu in report.gpus:
        current, pending = gpu.ecc_enabled, gpu.ecc_pending
        if current is not None and pending is not None and pending != current:
            change = "enabled" if pending else "disabled"
            out.append(DoctorFinding(
                rule="ecc-state",
                severity=Severity.INFO,
                title=f"ECC will be {change} after the next GPU reset or reboot",
                evidence=(f"{_gpu_label(gpu)}: ecc.mode.current "
                          f"{'on' if current else 'off'}, ecc.mode.pending "
                          f"{'on' if pending else 'off'}"),
                fix=(f"Reboot, or reset the idle GPU with `sudo nvidia-smi -i {gpu.index} -r`, "
                     "for the change to take effect."),
                gpu=gpu.index,
            ))
            continue
        if current is not False:
            continue
        product = _hardware(catalog, gpu).product
        if product is None or product.tier is not Tier.DATACENTER or product.ecc is not True:
            continue
        out.append(DoctorFinding(
            rule="ecc-state",
            severity=Severity.WARNING,
            title="ECC is disabled on a datacenter GPU that supports it",
            evidence=(f"{_gpu_label(gpu)} ({product.name}, tier datacenter, catalog ecc = "
                      "true): ecc.mode.current off"),
            fix=(f"Turn it on with `sudo nvidia-smi -i {gpu.index} -e 1` and reboot or reset "
                 "the GPU; without ECC, memory bit flips silently corrupt results. Keep it off "
                 "only if you accept that risk for the memory capacity or bandwidth ECC costs "
                 "on this card."),
            gpu=gpu.index,
        ))
    return out


# -- rule 9: mig-state -----------------------------------------------------------------------


def _mig_state(report: ProbeReport, catalog: Catalog) -> list[DoctorFinding]:
    out: list[DoctorFinding] = []
    for gpu in report.gpus:
        mig = gpu.mig
        if mig is None:
            continue
        state = (f"{_gpu_label(gpu)}: mig.mode.current {'on' if mig.enabled else 'off'}, "
                 f"mig.mode.pending "
                 f"{'unknown' if mig.pending is None else 'on' if mig.pending else 'off'}, "
                 f"{mig.instances} instance(s)")
        if mig.pending is not None and mig.pending != mig.enabled:
            out.append(DoctorFinding(
                rule="mig-state",
                severity=Severity.INFO,
                title=f"MIG will be {'enabled' if mig.pending else 'disabled'} after a GPU reset",
                evidence=state,
                fix=(f"Stop the processes using the GPU and reset it with `sudo nvidia-smi -i "
                     f"{gpu.index} -r` (or reboot) to apply the MIG mode change."),
                gpu=gpu.index,
            ))
        elif mig.enabled:
            if mig.instances:
                detail = (f"The GPU is split into {mig.instances} instance(s); a CUDA process "
                          "sees only the one instance it is given, with its share of SMs and "
                          "memory. List them with `nvidia-smi -L` and select one with "
                          "CUDA_VISIBLE_DEVICES=MIG-<uuid>.")
            else:
                detail = ("MIG is on but no instances exist, so CUDA cannot use this GPU: "
                          f"create them with `sudo nvidia-smi mig -i {gpu.index} -cgi "
                          "<profiles> -C`, or turn MIG off with "
                          f"`sudo nvidia-smi -i {gpu.index} -mig 0`.")
            out.append(DoctorFinding(
                rule="mig-state",
                severity=Severity.INFO,
                title=f"MIG is enabled with {mig.instances} instance(s)",
                evidence=state,
                fix=detail + " Turn MIG off when one job needs the whole GPU.",
                gpu=gpu.index,
            ))
    return out


# -- rule 10: nccl-env -----------------------------------------------------------------------

_NCCL_FLAGS: dict[str, str] = {
    "NCCL_P2P_DISABLE": ("turns off direct GPU-to-GPU transfers over NVLink or PCIe; "
                         "intra-node traffic is staged through host memory instead, at a "
                         "fraction of the bandwidth"),
    "NCCL_IB_DISABLE": ("turns off the InfiniBand/RoCE transport; traffic between nodes "
                        "falls back to TCP sockets, many times slower and using CPU"),
    "NCCL_SHM_DISABLE": ("turns off the shared-memory transport between processes on one "
                         "node; where P2P is unavailable, NCCL then goes through the network "
                         "stack"),
}


def _flag_set(value: str) -> bool:
    try:
        return int(value.strip()) != 0
    except ValueError:
        return False


def _nccl_env(report: ProbeReport, catalog: Catalog) -> list[DoctorFinding]:
    env = report.environment
    out: list[DoctorFinding] = []
    caveat = (" Unset it unless it was set deliberately to work around a known problem on "
              "this system (a hang, or a transport that is broken here); confirm bandwidth "
              "with NCCL_DEBUG=INFO and nccl-tests' all_reduce_perf.")
    for name, what in _NCCL_FLAGS.items():
        value = env.get(name)
        if value is None or not _flag_set(value):
            continue
        out.append(DoctorFinding(
            rule="nccl-env",
            severity=Severity.WARNING,
            title=f"{name} disables a fast NCCL transport",
            evidence=f"{name}={value}",
            fix=f"{name} {what}." + caveat,
        ))
    level = env.get("NCCL_P2P_LEVEL")
    if level is not None and level.strip().upper() in ("LOC", "0"):
        out.append(DoctorFinding(
            rule="nccl-env",
            severity=Severity.WARNING,
            title="NCCL_P2P_LEVEL=LOC forbids peer-to-peer transfers",
            evidence=f"NCCL_P2P_LEVEL={level}",
            fix=("LOC allows P2P only within a GPU, so in effect it disables P2P between "
                 "GPUs, like NCCL_P2P_DISABLE=1: traffic is staged through host memory." + caveat),
        ))
    return out


# -- rule 11: persistence-off ----------------------------------------------------------------


def _persistence_off(report: ProbeReport, catalog: Catalog) -> list[DoctorFinding]:
    if not report.host.os.lower().startswith("linux"):
        return []
    out: list[DoctorFinding] = []
    for gpu in report.gpus:
        if gpu.persistence_mode is not False:
            continue
        product = _hardware(catalog, gpu).product
        if product is None or product.tier is not Tier.DATACENTER:
            continue
        out.append(DoctorFinding(
            rule="persistence-off",
            severity=Severity.INFO,
            title="Persistence mode is off: each CUDA start re-initialises the GPU",
            evidence=(f"{_gpu_label(gpu)} ({product.name}, datacenter) on {report.host.os}: "
                      "persistence_mode off"),
            fix=(f"Enable it with `sudo nvidia-smi -i {gpu.index} -pm 1`, or better run the "
                 "nvidia-persistenced daemon so it survives reboots; the driver then stays "
                 "loaded between jobs and the first CUDA call returns faster."),
            gpu=gpu.index,
        ))
    return out


# -- rule 12: no-gpu -------------------------------------------------------------------------


def _no_gpu(report: ProbeReport, catalog: Catalog) -> list[DoctorFinding]:
    if report.gpus:
        return []
    reasons = [f"{u.what}: {u.reason}" for u in report.unavailable]
    if report.torch is not None and report.torch.cuda_build is None:
        reasons.append(f"torch {report.torch.version} is a CPU-only build")
    evidence = "; ".join(reasons) if reasons else "the probe recorded no reason"
    return [DoctorFinding(
        rule="no-gpu",
        severity=Severity.INFO,
        title="No NVIDIA GPU found",
        evidence=evidence,
        fix=("Check that `nvidia-smi` lists the GPU; if it does not, install or load the "
             "NVIDIA driver (and, in a container, start it with GPU access, e.g. "
             "`docker run --gpus all`). Install nvidia-ml-py for the probe's NVML readings."),
    )]


# -- running them ----------------------------------------------------------------------------

RULES: tuple[DoctorRule, ...] = (
    DoctorRule("torch-arch-missing", "torch has no kernels for a GPU's compute capability",
               _torch_arch_missing),
    DoctorRule("tf32-off", "TF32 off for FP32 matmuls on Ampere or newer", _tf32_off),
    DoctorRule("amp-advice", "mixed-precision recipe for each architecture", _amp_advice),
    DoctorRule("pcie-only-multi-gpu", "several GPUs without NVLink", _pcie_only_multi_gpu),
    DoctorRule("pcie-link-degraded", "PCIe link below its generation or width",
               _pcie_link_degraded),
    DoctorRule("power-capped", "power limit below the default", _power_capped),
    DoctorRule("clocks-throttled", "active clock-reduction reasons", _clocks_throttled),
    DoctorRule("ecc-state", "ECC off on a datacenter GPU, or a pending ECC change", _ecc_state),
    DoctorRule("mig-state", "MIG enabled or a pending MIG change", _mig_state),
    DoctorRule("nccl-env", "NCCL variables that disable fast transports", _nccl_env),
    DoctorRule("persistence-off", "persistence mode off on Linux datacenter GPUs",
               _persistence_off),
    DoctorRule("no-gpu", "no GPU found", _no_gpu),
)
"""Every rule, in the order :func:`diagnose` runs them."""


SLOWER_THAN_REFERENCE = 0.85
"""A machine whose large GEMMs or device copy measure below this fraction of the reference
GPU's is reported: three probe runs on one healthy H200 in an afternoon spread 7% (BF16
8192^3 at 663-714 TFLOP/s, docs/measured/h200-2026-11-30), so a smaller shortfall is noise."""


def compare_with_reference(cal: Calibration) -> list[DoctorFinding]:
    """Findings from a calibration file (``gpuarch probe --bench --save FILE``): how this
    machine's large-GEMM and copy rates compare with this project's reference measurements
    of the same product, where it has any."""
    from gpuarch.probe.calibration import copy_ratio, gemm_ratio, reference_calibration

    if not cal.product:
        return []
    ref = reference_calibration(cal.product)
    if ref is None:
        return [DoctorFinding(
            rule="slower-than-reference", severity=Severity.INFO,
            title=f"No reference measurements of {cal.product} to compare with",
            evidence=f"{cal.path}: {cal.device_name}, {cal.created}",
            fix=("Compare the Fraction and Model columns of `gpuarch probe --bench`: the "
                 "model's assumed fraction of each peak is what estimates take for granted."))]
    ratios = {f"large {p} GEMMs": gemm_ratio(cal, ref, p) for p in ("bf16", "fp8")}
    ratios["device copy"] = copy_ratio(cal, ref)
    slow = {k: r for k, r in ratios.items() if r is not None and r < SLOWER_THAN_REFERENCE}
    if not slow:
        return []
    listed = ", ".join(f"{k} at {r:.0%}" for k, r in slow.items())
    return [DoctorFinding(
        rule="slower-than-reference", severity=Severity.WARNING,
        title=f"Slower than a reference {ref.device_name}: {listed}",
        evidence=(f"{cal.path} ({cal.created}) against {ref.path} ({ref.created}), the "
                  "same benchmarks and sizes"),
        fix=("Look for a lowered power limit, active clock-reduction reasons or a hot GPU "
             "(`gpuarch doctor` without --calibration lists those rules' findings; `nvidia-smi "
             "-q -d POWER,CLOCK,TEMPERATURE`), and for other work on the GPU while the probe "
             "ran; then run `gpuarch probe --bench --save FILE` again on an idle GPU. "
             "Estimates given `--calibration FILE` are slowed by the measured ratios."))]


def diagnose(report: ProbeReport, catalog: Catalog, calibration: Calibration | None = None
             ) -> list[DoctorFinding]:
    """Run every rule on ``report`` (and, given a calibration file, compare its measurements
    with the reference GPU's); findings sorted errors first, then warnings, then info.

    Within one severity, findings keep the rule order and then the GPU order.
    """
    findings = [f for rule in RULES for f in rule.check(report, catalog)]
    if calibration is not None:
        findings += compare_with_reference(calibration)
    return sorted(findings, key=lambda f: _RANK[f.severity])
