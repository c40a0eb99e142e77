"""Terminal renderings of probe, benchmark and doctor results."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuarch.probe.readings import ProbeReport
from gpuarch.report.text import fmt, table
from gpuarch.units import Unit, from_si

__all__ = ["render_bench", "render_doctor", "render_probe"]


def _yn(x: bool | None) -> str:
    return "-" if x is None else ("on" if x else "off")


def render_probe(r: ProbeReport) -> str:
    h = r.host
    lines = [f"Host: {h.cpu or 'unknown CPU'}, {h.cores or '?'} cores, "
             f"{fmt(from_si(h.memory_bytes or 0, Unit.GIB))} GiB, {h.os}, Python {h.python}"]
    if r.torch:
        t = r.torch
        lines.append(f"torch {t.version} ({'CUDA ' + t.cuda_build if t.cuda_build else 'CPU build'}"
                     f"; archs {' '.join(t.arch_list) or '-'}; TF32 matmul {_yn(t.tf32_matmul)})")
    if r.driver_version:
        lines.append(f"Driver {r.driver_version}, CUDA {r.cuda_driver_version or '?'}")
    if r.gpus:
        rows = []
        for g in r.gpus:
            pcie = g.pcie
            link = (f"Gen{pcie.generation}x{pcie.width} (max Gen{pcie.max_generation}"
                    f"x{pcie.max_width})" if pcie and pcie.generation else "-")
            rows.append([str(g.index), g.name, g.product_key or "?",
                         g.compute_capability or "-",
                         fmt(from_si(g.memory_total_bytes or 0, Unit.GIB)),
                         f"{fmt(from_si(g.sm_clock_hz or 0, Unit.MHZ))}/"
                         f"{fmt(from_si(g.sm_clock_max_hz or 0, Unit.MHZ))}",
                         f"{fmt(g.power_limit_w)}/{fmt(g.power_default_limit_w)}",
                         fmt(g.temperature_c), _yn(g.ecc_enabled),
                         "-" if g.mig is None else (f"on ({g.mig.instances})" if g.mig.enabled
                                                   else "off"),
                         link, ",".join(g.throttle_reasons) or "-"])
        lines += ["", table(["GPU", "Name", "Catalog", "CC", "GiB", "SM MHz now/max",
                             "Power W limit/default", "C", "ECC", "MIG", "PCIe",
                             "Clock events"], rows)]
        n = len(r.gpus)
        if n > 1:
            cell = {(t.a, t.b): t.label for t in r.topology}
            cell.update({(t.b, t.a): t.label for t in r.topology})
            matrix = [[f"GPU{i}", *("X" if i == j else cell.get((i, j), "?")
                                    for j in range(n)),
                       str(r.gpus[i].numa_node) if r.gpus[i].numa_node is not None else "-"]
                      for i in range(n)]
            lines += ["", table(["", *(f"GPU{j}" for j in range(n)), "NUMA"], matrix),
                      "NV# = that many NVLinks; PIX/PXB = PCIe switch(es); PHB = host "
                      "bridge; NODE/SYS = across host bridges / CPU sockets"]
        lines += ["", "Catalog matches:"] + [f"  GPU{g.index}: {g.match_note}" for g in r.gpus]
    else:
        lines.append("No GPU found.")
    if r.unavailable:
        lines += ["", "Could not read:"] + [f"  - {u.what}: {u.reason}" for u in r.unavailable]
    return "\n".join(lines)


def render_bench(rows: Sequence[dict[str, Any]], skipped: Sequence[tuple[str, str]]) -> str:
    out = [[r["what"], r["size"], fmt(r["measured"]), r["unit"],
            fmt(r["catalog_peak"]) if r["catalog_peak"] else "-",
            f"{r['fraction']:.0%}" if r["fraction"] else "-",
            f"{r['model_fraction']:.0%}" if r.get("model_fraction") else "-"] for r in rows]
    lines = ["", table(["Benchmark", "Size", "Measured", "Unit", "Catalog peak", "Fraction",
                        "Model"], out, right=[False, False, True, False, True, True, True])]
    if any(r.get("model_fraction") for r in rows):
        lines += ["Model: the fraction of the peak the performance model assumes for the same "
                  "work (fitted defaults);",
                  "well below it, this machine runs slower than estimates assume: measure with "
                  "--save FILE and estimate with --calibration FILE."]
    if skipped:
        lines += ["", "Not measured:"] + [f"  - {w}: {why}" for w, why in skipped]
    return "\n".join(lines)


def render_doctor(findings: Sequence[Any]) -> str:
    if not findings:
        return "No findings."
    lines = []
    for f in findings:
        where = f" (GPU {f.gpu})" if f.gpu is not None else ""
        lines += [f"[{f.severity.value.upper()}] {f.rule}{where}: {f.title}",
                  f"    evidence: {f.evidence}", f"    fix: {f.fix}"]
    return "\n".join(lines)
