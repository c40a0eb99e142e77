"""Calibration files: what the probe measured, in a versioned JSON schema that the
training and inference models read with ``--calibration FILE``.

Schema (version 1)::

    {"schema": "gpuarch-calibration", "version": 1, "created": "2026-11-29T18:00:00Z",
     "device": {"name": "NVIDIA H100 80GB HBM3", "product": "h100-sxm5-80gb",
                "driver": "550.54.15", "gpus": 8, "torch": "2.13.0"},
     "gemm": [{"precision": "bf16", "m": 8192, "n": 8192, "k": 8192, "tflops": 790.0}],
     "bandwidth": [{"kind": "device_copy", "gb_s": 4300.0}],
     "collectives": [{"op": "all_reduce", "bytes": 67108864, "ranks": 8, "busbw_gb_s": 360.0}]}

Applying a calibration to a product this project has measured itself (a shipped reference,
``reference_calibration``: the H200 SXM so far) scales the fitted efficiencies by the
machine's measured rates over the reference's, so a healthy GPU keeps the fitted values and
a slower one is estimated that much slower. For other products it replaces the model's
efficiencies with measured ones: the
best measured BF16 (else FP16) GEMM rate over the catalog's peak becomes the GEMM efficiency
of that GPU's Tensor Core generation, FP8 over its peak the FP8 multiplier, the device-copy
bandwidth over the datasheet the memory efficiency, and the largest all-reduce bus bandwidth
over the link's per-direction rate the NVLink (or PCIe) bus efficiency. Where GEMMs with
large outputs were measured at two or more reduction lengths K, the top efficiency and the
K at which it halves are fitted to them instead (``CURVE_MIN_OUTPUT``). The estimate lists
which parameters came from measurement.
"""

from __future__ import annotations

import datetime as _dt
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product
from gpuarch.catalog.peaks import PeakKey
from gpuarch.errors import GpuarchError, check_choice, is_positive_number
from gpuarch.jsonfile import read_schema_file
from gpuarch.perf.efficiency import Efficiency
from gpuarch.perf.precision import sixteen_bit
from gpuarch.perf.sibling import sibling_notes
from gpuarch.probe.bench import GEMM_PRECISIONS
from gpuarch.units import Unit, from_si, to_si

__all__ = ["CURVE_MIN_OUTPUT", "REFERENCE_DIR", "SCHEMA", "VERSION", "Calibration",
           "apply_calibration", "calibration_document", "copy_ratio", "gemm_ratio",
           "load_calibration", "reference_calibration"]

SCHEMA = "gpuarch-calibration"
VERSION = 1

CURVE_MIN_OUTPUT = 4096
"""Smallest M and N of a measured GEMM that the size curve is fitted to. The curve models
the reduction length K; a smaller output (a 1,024^3 GEMM has 64 tiles of 128 x 128 for an
H200's 132 SMs) leaves SMs idle and is dominated by fill and drain, which K does not
explain: on the H200 in docs/measured/h200-2026-11-30 it ran at 14% of peak against 70% at
4,096^3 and would drag the curve's top efficiency down to 0.56 from the 0.72 measured."""

_PEAKS = {"bf16": PeakKey.TENSOR_BF16, "fp16": PeakKey.TENSOR_FP16, "fp8": PeakKey.TENSOR_FP8,
          "tf32": PeakKey.TENSOR_TF32, "fp32": PeakKey.FP32, "int8": PeakKey.TENSOR_INT8}


@dataclass(frozen=True)
class Calibration:
    """A validated calibration file."""

    path: str
    created: str
    device_name: str
    product: str | None
    gemm: tuple[dict[str, Any], ...]
    bandwidth: tuple[dict[str, Any], ...]
    collectives: tuple[dict[str, Any], ...]


def calibration_document(report: Any, bench: Any) -> dict[str, Any]:
    """A calibration document from a probe report and its benchmark results."""
    gpu = report.gpus[0] if report.gpus else None
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "created": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": {"name": gpu.name if gpu else bench.device,
                   "product": gpu.product_key if gpu else None,
                   "driver": report.driver_version, "gpus": len(report.gpus),
                   "torch": report.torch.version if report.torch else None},
        "gemm": [{"precision": g.precision, "m": g.m, "n": g.n, "k": g.k,
                  "tflops": from_si(g.flops_per_s, Unit.TFLOPS)} for g in bench.gemm],
        "bandwidth": [{"kind": b.kind, "gb_s": from_si(b.bytes_per_s, Unit.GB_S)}
                      for b in bench.bandwidth],
        "collectives": [{"op": c.op, "bytes": c.bytes, "ranks": c.ranks,
                         "busbw_gb_s": from_si(c.busbw, Unit.GB_S)} for c in bench.collectives],
    }


def _need(doc: dict[str, Any], key: str, kind: type, path: Path) -> Any:
    if key not in doc:
        raise GpuarchError(f"{path}: missing key {key!r}")
    if not isinstance(doc[key], kind):
        raise GpuarchError(f"{path}: {key!r} must be a {kind.__name__}, got {doc[key]!r}")
    return doc[key]


_MEASURED = ("tflops", "gb_s", "busbw_gb_s")
"""A calibration row's measured rates: each a number above zero."""
_COUNTS = ("m", "n", "k", "bytes", "ranks")
"""A calibration row's sizes: each a whole number above zero where given."""


def _check_row(path: Path, where: str, row: dict[str, Any]) -> None:
    """Raise GpuarchError naming the row and key of a calibration file whose value the
    models cannot use: a rate that is not a number above zero, a size that is not a whole
    number above zero, a GEMM precision the probe does not measure (nearest named)."""
    for key in _MEASURED:
        value = row.get(key)
        if key in row and not is_positive_number(value):
            raise GpuarchError(f"{path}: {where}: {key} = {value!r}: expected a measured "
                               "rate above zero")
    for key in _COUNTS:
        value = row.get(key)
        if key in row and not (isinstance(value, int) and not isinstance(value, bool)
                               and value > 0):
            raise GpuarchError(f"{path}: {where}: {key} = {value!r}: expected a whole number "
                               "above zero")
    if "precision" in row:
        check_choice(f"{path}: {where}: precision", row["precision"], GEMM_PRECISIONS)
    for key in ("kind", "op"):
        if key in row and not isinstance(row[key], str):
            raise GpuarchError(f"{path}: {where}: {key} = {row[key]!r}: expected text")


def load_calibration(path: Path) -> Calibration:
    """Read and validate a calibration file (errors name the file and the key)."""
    doc = read_schema_file(path, "--calibration", SCHEMA, VERSION, "calibration")
    device = _need(doc, "device", dict, path)
    for section, keys in (("gemm", ("precision", "tflops")), ("bandwidth", ("kind", "gb_s")),
                          ("collectives", ("op", "busbw_gb_s"))):
        for i, row in enumerate(_need(doc, section, list, path)):
            for key in keys:
                if not isinstance(row, dict) or key not in row:
                    raise GpuarchError(f"{path}: {section}[{i}] lacks {key!r}")
            _check_row(path, f"{section}[{i}]", row)
    return Calibration(str(path), str(doc.get("created", "")), str(device.get("name", "")),
                       device.get("product"), tuple(doc["gemm"]), tuple(doc["bandwidth"]),
                       tuple(doc["collectives"]))


def _fit_curve(rates: dict[tuple[int, int, int], float], product: Product, generation: int,
               eff: Efficiency, precision: str = "bf16") -> tuple[float, float]:
    """Base efficiency and the K at which it halves, fitted (least squares in log) to the
    measured rates (TFLOP/s by M, N, K) at several GEMM sizes, through the roofline's own
    size model."""

    from gpuarch.perf.precision import Precision
    from gpuarch.perf.roofline import Device, Gemm, op_cost

    device = Device.of(product, Precision(precision), generation)
    best: tuple[float, float, float] | None = None
    for half in (0.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0):
        trial = eff.with_overrides({"gemm_half_dim": half, "kernel_overhead_s": 0.0,
                                    "gemm_by_generation": [1.0] * len(eff.gemm_by_generation)})
        logs = []
        for (m, n, k), tflops in rates.items():
            op = Gemm(int(m), int(n), int(k))
            modelled = op.flops / op_cost(op, device, trial).time_s
            logs.append(math.log(to_si(tflops, Unit.TFLOPS) / modelled))
        mean = sum(logs) / len(logs)
        spread = sum((x - mean) ** 2 for x in logs)
        if best is None or spread < best[0]:
            best = (spread, math.exp(mean), half)
    assert best is not None  # the loop runs at least once
    return best[1], best[2]


REFERENCE_DIR = Path(__file__).with_name("data")
"""Where reference calibrations live: ``reference-<product key>.json``, the probe's
benchmarks on a healthy GPU of that product, measured by this project (each names its run in
docs/measured/)."""


def reference_calibration(product_key: str) -> Calibration | None:
    """The shipped reference measurements of ``product_key``, if this project has any."""
    path = REFERENCE_DIR / f"reference-{product_key}.json"
    return load_calibration(path) if path.exists() else None


def _large(rows: tuple[dict[str, Any], ...], precision: str) -> dict[tuple[int, int, int],
                                                                      float]:
    """Measured rates of ``precision`` GEMMs with outputs of CURVE_MIN_OUTPUT or more."""
    return {(g["m"], g["n"], g["k"]): float(g["tflops"]) for g in rows
            if g["precision"] == precision and "k" in g
            and min(g.get("m", 0), g.get("n", 0)) >= CURVE_MIN_OUTPUT}


def gemm_ratio(cal: Calibration, ref: Calibration, precision: str) -> float | None:
    """Median over the large GEMMs both measured of this machine's rate over the
    reference's; None when they share none."""
    mine, theirs = _large(cal.gemm, precision), _large(ref.gemm, precision)
    common = sorted(set(mine) & set(theirs))
    if not common:
        return None
    return statistics.median(mine[k] / theirs[k] for k in common)


def copy_ratio(cal: Calibration, ref: Calibration) -> float | None:
    """This machine's best device-copy rate over the reference's (None: one lacks it)."""
    mine = [float(b["gb_s"]) for b in cal.bandwidth if b["kind"] == "device_copy"]
    theirs = [float(b["gb_s"]) for b in ref.bandwidth if b["kind"] == "device_copy"]
    return max(mine) / max(theirs) if mine and theirs else None


def _relative(cal: Calibration, ref: Calibration, eff: Efficiency, generation: int | None,
              product: Product) -> tuple[dict[str, Any], dict[str, str]]:
    """The fitted efficiencies scaled by how this machine measured against a reference GPU
    of the same product: the defaults were fitted to published runs on healthy GPUs, so a
    machine that measures like the reference keeps them, and one that is slower (power
    capped, throttled, a slower variant) is estimated that much slower."""
    changes: dict[str, Any] = {}
    notes: dict[str, str] = {}
    against = f"a reference {ref.device_name} ({Path(ref.path).name}, {ref.created[:10]})"
    own = sixteen_bit(product).value
    sixteen = gemm_ratio(cal, ref, own)
    if sixteen is not None and generation:
        gens = list(eff.gemm_by_generation)
        gens[generation - 1] = min(1.0, gens[generation - 1] * sixteen)
        changes["gemm_by_generation"] = gens
        notes["gemm_by_generation"] = (f"scaled by {sixteen:.3f}: large {own} GEMMs measured "
                                       f"at {sixteen:.0%} of {against}")
        eight = gemm_ratio(cal, ref, "fp8")
        if eight is not None:
            changes["gemm_fp8"] = min(1.5, eff.gemm_fp8 * eight / sixteen)
            notes["gemm_fp8"] = (f"scaled by {eight / sixteen:.3f}: FP8 GEMMs at {eight:.0%} "
                                 f"of the reference's, {own} at {sixteen:.0%}")
    ratio = copy_ratio(cal, ref)
    if ratio is not None:
        changes["memory"] = min(1.0, eff.memory * ratio)
        notes["memory"] = (f"scaled by {ratio:.3f}: device copy measured at {ratio:.0%} of "
                           f"{against}")
    return changes, notes


def apply_calibration(cal: Calibration, eff: Efficiency, catalog: Catalog, product: Product,
                      link_bytes_s: float | None = None, link_fabric: str = "nvlink",
                      use_reference: bool = True) -> tuple[Efficiency, dict[str, str]]:
    """Efficiencies from a machine's measurements, and what each was derived from.

    Where this project ships reference measurements of the same product
    (``reference_calibration``) and ``use_reference`` is on, the fitted efficiencies are
    scaled by the machine's measured rates over the reference's (``_relative``): the fitted
    values are effective ones (they carry what the model does not itemise), and replacing
    them with kernel rates made an H200's 110 published serving figures 14.3% -> 16.2% off.
    Otherwise the measured fractions of the peaks replace the efficiencies. Refuses a
    calibration measured on another product: the fractions only carry over to the GPU they
    were measured on.
    """
    if cal.product and cal.product != product.key:
        raise GpuarchError(f"--calibration: {cal.path} was measured on {cal.product}, not "
                           f"{product.key}")
    generation = catalog.chip_of(product).sm.tensor_core_generation
    ref = reference_calibration(product.key) if use_reference else None
    if ref is not None:
        changes, notes = _relative(cal, ref, eff, generation, product)
        changes.update(_collective_changes(cal, link_bytes_s, link_fabric, notes, eff))
        return eff.with_overrides(changes), notes
    changes = {}
    notes = {}

    def best(precision: str) -> float | None:
        rates = [to_si(g["tflops"], Unit.TFLOPS) for g in cal.gemm if g["precision"] == precision]
        return max(rates) if rates else None

    # the GPU's own 16-bit format first (FP16 where it lacks BF16: a BF16 GEMM measured
    # there ran a slower path than the Tensor Cores' and has no peak to divide by)
    order = (sixteen_bit(product).value, "fp16", "bf16")
    sixteen = next(((p, r) for p in order if (r := best(p)) and product.peak(_PEAKS[p])), None)
    if sixteen and generation:
        precision, rate = sixteen
        peak = product.peak(_PEAKS[precision])
        if peak:
            gens = list(eff.gemm_by_generation)
            gens[generation - 1] = min(1.0, rate / peak)
            changes["gemm_by_generation"] = gens
            notes["gemm_by_generation"] = (
                f"measured {precision} GEMM {from_si(rate, Unit.TFLOPS):.0f} "
                f"TFLOP/s of {from_si(peak, Unit.TFLOPS):.0f} peak")
            sizes = _large(cal.gemm, precision)
            if len({k for _, _, k in sizes}) >= 2:
                base, half = _fit_curve(sizes, product, generation, eff, precision)
                gens[generation - 1] = min(1.0, base)
                notes["gemm_by_generation"] = (
                    f"{min(1.0, base):.3f}, the size curve's top, fitted to measured "
                    f"{precision} GEMMs (best {from_si(rate, Unit.TFLOPS):.0f} TFLOP/s of "
                    f"{from_si(peak, Unit.TFLOPS):.0f} peak)")
                changes["gemm_half_dim"] = half
                notes["gemm_half_dim"] = (f"{half:g}, size curve fitted to {len(sizes)} "
                                          f"measured {precision} GEMM sizes")
            if eff.sibling_rates and sibling_notes(product.key):
                changes["sibling_rates"] = 0.0
                notes["sibling_rates"] = ("off: this GPU's own measured GEMM rates replace "
                                          "the fitted ones a sibling's published rates would "
                                          "scale")
            fp8, fp8_peak = best("fp8"), product.peak(PeakKey.TENSOR_FP8)
            if fp8 and fp8_peak:
                changes["gemm_fp8"] = min(1.5, (fp8 / fp8_peak) / (rate / peak))
                notes["gemm_fp8"] = f"measured FP8 GEMM {from_si(fp8, Unit.TFLOPS):.0f} TFLOP/s"
    copies = [to_si(b["gb_s"], Unit.GB_S) for b in cal.bandwidth if b["kind"] == "device_copy"]
    if copies:
        changes["memory"] = min(1.0, max(copies) / product.memory_bandwidth_bytes_s)
        notes["memory"] = f"measured device copy {from_si(max(copies), Unit.GB_S):.0f} GB/s"
    changes.update(_collective_changes(cal, link_bytes_s, link_fabric, notes, eff))
    return eff.with_overrides(changes), notes


def _collective_changes(cal: Calibration, link_bytes_s: float | None, link_fabric: str,
                        notes: dict[str, str], eff: Efficiency) -> dict[str, float]:
    """The NVLink (or PCIe) bus efficiency from the largest measured all-reduce bus
    bandwidth over the link's per-direction rate (no reference GPU measured collectives).
    Over NVLink the measurement is of a group of ``ranks`` GPUs, which reaches
    ``1 - nvlink_small_group / ranks`` of the full-node share the parameter holds."""
    reduces = [(to_si(c["busbw_gb_s"], Unit.GB_S), int(c.get("ranks", 0) or 0))
               for c in cal.collectives if c["op"] == "all_reduce"]
    if not (reduces and link_bytes_s):
        return {}
    busbw, ranks = max(reduces)
    key = "pcie_bus" if link_fabric == "pcie" else "nvlink_bus"
    notes[key] = f"measured all-reduce bus bandwidth {from_si(busbw, Unit.GB_S):.0f} GB/s"
    share = busbw / link_bytes_s
    if key == "nvlink_bus" and ranks >= 2:
        share = share / (1.0 - eff.nvlink_small_group / ranks)
        notes[key] += f" over {ranks} GPUs"
    return {key: min(1.0, share)}
