"""Per-operator validation: operators timed on a real GPU beside the roofline's times.

The training and serving validations compare whole runs with published figures; this one
checks the parts. A measurement file (JSON, schema ``gpuarch-op-check``) holds operators
timed on one GPU by ``scripts/device_op_check.py``: each row names its operator (a GEMM's
M, N, K, batch and name, and for a weight-only kernel its stored bytes per weight and the
width it converts; fused attention's dimensions; an elementwise op's bytes), the
precision the model prices it in, the attention kernel family and the measured median time.
``validate_ops`` recomputes the model's time for each with the current efficiencies, so a
change to the model shows here as it does in the other validations. The package ships the
file measured on an H200 SXM on 2026-11-30 (``validation/data/ops-h200-sxm-141gb.json``);
rows whose precision is null (INT8 and 2:4 sparse GEMMs) are measured only.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product
from gpuarch.errors import GpuarchError, check_choice, is_positive_number
from gpuarch.jsonfile import read_schema_file
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.precision import Precision
from gpuarch.perf.roofline import Attention, Device, Elementwise, Gemm, Op, op_cost
from gpuarch.units import Unit, from_si, to_si

__all__ = ["ATTENTION_KERNELS", "OP_CHECK_FILE", "SCHEMA", "VERSION", "OpRow", "OpSummary",
           "load_op_check", "model_time", "op_from_spec", "op_spec", "ratio_summary",
           "validate_ops"]

SCHEMA = "gpuarch-op-check"
VERSION = 1
OP_CHECK_FILE = Path(__file__).with_name("data") / "ops-h200-sxm-141gb.json"
ATTENTION_KERNELS = ("native", "ampere")
"""How fused attention is priced: the GPU generation's own kernel (``attention``), or one
written for Ampere's synchronous Tensor Core instructions (FlashAttention-2, as torch's
flash backend is), at ``attention_ampere_kernel`` of it on a GPU that drives its Tensor
Cores asynchronously (``Efficiency.with_attention_kernel``)."""

_GEMM_KEYS = ("m", "n", "k", "batch", "name")
_MIXED_INPUT_BITS = (4, 8)
"""Weight widths a converting GEMM's row may give (``Gemm.weight_bits``: the kernel
dequantizes them, ``roofline.mixed_input_floor``)."""
_ATTENTION_KEYS = ("batch", "seq_q", "seq_kv", "heads", "kv_heads", "head_dim", "causal")


def op_spec(op: Op) -> dict[str, Any]:
    """An operator as JSON: its type and the dimensions the roofline prices."""
    if isinstance(op, Gemm):
        spec = {"type": "gemm", **{k: getattr(op, k) for k in _GEMM_KEYS}}
        # a weight-only kernel's GEMM: its stored weight width, spread and conversion
        if op.weight_element is not None:
            spec["weight_element"] = op.weight_element
        if op.spread:
            spec["spread"] = True
        if op.weight_bits is not None:
            spec["weight_bits"] = op.weight_bits
        return spec
    if isinstance(op, Attention):
        spec = {"type": "attention", **{k: getattr(op, k) for k in _ATTENTION_KEYS}}
        # a multi-head decode kernel: each KV head's cache read once per query head
        if op.kv_head_reads != 1:
            spec["kv_head_reads"] = op.kv_head_reads
        return spec
    return {"type": "elementwise", "bytes": op.bytes_moved, "flops": op.flops}


def op_from_spec(spec: dict[str, Any], where: str = "op") -> Op:
    """The operator an ``op_spec`` dictionary describes; a clear error names what is wrong."""
    kind = spec.get("type") if isinstance(spec, dict) else None
    for key, value in (spec.items() if isinstance(spec, dict) else ()):
        if key not in ("type", "name", "causal", "spread") and (
                isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value) or value < 0):
            raise GpuarchError(f"{where}: {key} must be a non-negative number, got {value!r}")
    if isinstance(spec, dict) and "name" in spec and not isinstance(spec["name"], str):
        raise GpuarchError(f"{where}: name must be text, got {spec['name']!r}")
    # the dimensions an operator is priced by: a zero one left the roofline nothing to
    # divide by
    sizes = {"gemm": ("m", "n", "k", "batch"),
             "attention": ("batch", "seq_q", "seq_kv", "heads", "kv_heads", "head_dim")}
    for key in sizes.get(str(kind), ()):
        if key in spec and spec[key] == 0:
            raise GpuarchError(f"{where}: {key} must be at least 1, got 0")
        if key in spec and spec[key] > 2**31 - 1:
            raise GpuarchError(f"{where}: {key} must be at most 2,147,483,647 (a kernel's "
                               f"32-bit size), got {spec[key]!r}")
    try:
        if kind == "gemm":
            return _gemm_from_spec(spec, where)
        if kind == "attention":
            reads = spec.get("kv_head_reads", 1)
            if reads < 1:
                raise GpuarchError(f"{where}: kv_head_reads must be at least 1 (the times a "
                                   f"decode kernel reads each KV head), got {reads!r}")
            return Attention(**{k: spec[k] for k in _ATTENTION_KEYS}, kv_head_reads=reads)
        if kind == "elementwise":
            return Elementwise(float(spec["bytes"]), float(spec.get("flops", 0.0)))
    except KeyError as exc:
        raise GpuarchError(f"{where}: a {kind} operator lacks {exc.args[0]!r}") from None
    raise GpuarchError(f"{where}: unknown operator type {kind!r} "
                       "(expected gemm, attention or elementwise)")


def _gemm_from_spec(spec: dict[str, Any], where: str) -> Gemm:
    """A GEMM from its spec, with a weight-only kernel's optional fields checked."""
    spread = spec.get("spread", False)
    if not isinstance(spread, bool):
        raise GpuarchError(f"{where}: spread must be true or false, got {spread!r}")
    bits = spec.get("weight_bits")
    if bits is not None and (not isinstance(bits, int) or bits not in _MIXED_INPUT_BITS):
        raise GpuarchError(f"{where}: weight_bits must be one of "
                           f"{', '.join(map(str, _MIXED_INPUT_BITS))}, got {bits!r}")
    element = spec.get("weight_element")
    if element is not None and element <= 0:
        raise GpuarchError(f"{where}: weight_element must be positive, got {element!r}")
    m, n, k, batch, name = (spec[key] for key in _GEMM_KEYS)
    return Gemm(m, n, k, batch, name, weight_element=element, spread=spread,
                weight_bits=bits)


@dataclass(frozen=True)
class OpRow:
    """One timed operator. ``forward_backward``: attention timed forward and backward
    together (the model adds its backward pass). ``precision`` None: measured only."""

    kind: str
    label: str
    op: Op | None
    precision: Precision | None
    attention_kernel: str
    forward_backward: bool
    measured_s: float
    note: str = ""


def model_time(row: OpRow, catalog: Catalog, product: Product,
               eff: Efficiency = DEFAULT_EFFICIENCY) -> float | None:
    """The roofline's time for ``row``'s operator on ``product`` (None: measured only)."""
    if row.op is None or row.precision is None:
        return None
    chip = catalog.chip_of(product)
    device = Device.of(product, row.precision, chip.sm.tensor_core_generation)
    # as training prices it: slower only where the Tensor Cores are driven asynchronously
    eff = eff.with_attention_kernel(row.attention_kernel, chip.compute_capability)
    seconds = op_cost(row.op, device, eff).time_s
    if row.forward_backward and isinstance(row.op, Attention):
        seconds += op_cost(dataclasses.replace(row.op, backward=True), device, eff).time_s
    return seconds


def _row(raw: Any, i: int, path: Path) -> OpRow:
    where = f"{path}: rows[{i}]"
    if not isinstance(raw, dict):
        raise GpuarchError(f"{where} is not an object")
    for key in ("kind", "label", "measured_us"):
        if key not in raw:
            raise GpuarchError(f"{where} lacks {key!r}")
    precision = raw.get("precision")
    try:
        prec = Precision(precision) if precision is not None else None
    except ValueError:
        raise GpuarchError(f"{where}: unknown precision {precision!r}") from None
    kernel = raw.get("attention_kernel", "native")
    if kernel not in ATTENTION_KERNELS:
        raise GpuarchError(f"{where}: attention_kernel {kernel!r} is not one of "
                           f"{', '.join(ATTENTION_KERNELS)}")
    measured = raw["measured_us"]
    if not is_positive_number(measured):
        raise GpuarchError(f"{where}: measured_us must be a positive number, got {measured!r}")
    op = op_from_spec(raw["op"], f"{where}.op") if raw.get("op") is not None else None
    return OpRow(str(raw["kind"]), str(raw["label"]), op, prec, kernel,
                 bool(raw.get("forward_backward", False)),
                 to_si(float(measured), Unit.US), str(raw.get("note", "")))


def load_op_check(path: Path | None = None) -> tuple[dict[str, Any], tuple[OpRow, ...]]:
    """The measurement file's header (GPU, product, torch, date) and its timed rows; rows
    that failed on the GPU (an ``error`` instead of a time) are left out."""
    path = path or OP_CHECK_FILE
    doc = read_schema_file(path, "--file", SCHEMA, VERSION, "op-check")
    raw_rows = doc.get("rows")
    if not isinstance(raw_rows, list):
        raise GpuarchError(f"--file: {path} has no 'rows' list")
    rows = tuple(_row(r, i, path) for i, r in enumerate(raw_rows)
                 if not (isinstance(r, dict) and "error" in r))
    header = {k: v for k, v in doc.items() if k not in ("rows", "summary")}
    return header, rows


def ratio_summary(ratios: list[float]) -> dict[str, float]:
    """Model-over-measured ratios of one kind of operator: how many, the mean
    |ratio - 1|, the median and the range."""
    return {"n": len(ratios), "mean_abs_error": statistics.fmean(abs(x - 1) for x in ratios),
            "median_ratio": statistics.median(ratios), "min_ratio": min(ratios),
            "max_ratio": max(ratios)}


@dataclass(frozen=True)
class OpSummary:
    """Each timed operator with the model's time, and the error by kind of operator."""

    product: str
    header: dict[str, Any]
    rows: tuple[tuple[OpRow, float | None], ...]

    def ratios(self, kind: str) -> list[float]:
        return [m / r.measured_s for r, m in self.rows if r.kind == kind and m is not None]

    @property
    def by_kind(self) -> dict[str, dict[str, float]]:
        """Per kind of operator: rows, mean |model / measured - 1|, median ratio and range."""
        return {kind: ratio_summary(self.ratios(kind))
                for kind in dict.fromkeys(r.kind for r, m in self.rows if m is not None)}

    def as_json(self) -> dict[str, Any]:
        return {"product": self.product, "measured_on": self.header,
                "rows": [{"kind": r.kind, "label": r.label,
                          "precision": r.precision.value if r.precision else None,
                          "measured_us": from_si(r.measured_s, Unit.US),
                          "model_us": from_si(m, Unit.US) if m is not None else None,
                          "model_over_measured": m / r.measured_s if m is not None else None,
                          "note": r.note}
                         for r, m in self.rows],
                "by_kind": self.by_kind}


def validate_ops(catalog: Catalog, eff: Efficiency = DEFAULT_EFFICIENCY,
                 path: Path | None = None, kinds: tuple[str, ...] = ()) -> OpSummary:
    """The measurement file's operators with the model's time for each, on the catalog
    product the file names; ``kinds`` keeps only those kinds of operator."""
    header, rows = load_op_check(path)
    key = header.get("catalog_product")
    if not isinstance(key, str):
        raise GpuarchError(f"--file: {path or OP_CHECK_FILE} names no catalog_product")
    product = catalog.product(key)
    known = sorted({r.kind for r in rows})
    for kind in kinds:
        check_choice("--kind", kind, known)
    chosen = [r for r in rows if not kinds or r.kind in kinds]
    return OpSummary(product.key, header,
                     tuple((r, model_time(r, catalog, product, eff)) for r in chosen))
