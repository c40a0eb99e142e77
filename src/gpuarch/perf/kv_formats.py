"""The KV cache format a serving estimate stores on a GPU: the one asked for where an engine
keeps it on that GPU's compute capability, else the nearest wider one that is, with the
reason (``data/kv_cache_formats.toml`` holds the rules and their sources).

A KV cache format is storage, not a Tensor Core rate: FP8 keys and values on an A100 are
converted back to 16 bits inside the attention kernel (TensorRT-LLM's FP8 KV cache starts
at Ampere), and INT8 or INT4 ones on a V100 (LMDeploy's TurboMind), so each format is kept
from the first architecture whose kernels read it; NVFP4 only on datacenter Blackwell."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, parse_compute_capability
from gpuarch.errors import GpuarchError
from gpuarch.perf.precision import lacks_bf16
from gpuarch.perf.quant import QuantFormat, sixteen_bit_format

__all__ = ["KV_FORMATS_FILE", "KvCacheRun", "KvFormatRule", "kv_cache_formats_on", "kv_cache_run",
           "kv_format_rules"]

KV_FORMATS_FILE = Path(__file__).with_name("data") / "kv_cache_formats.toml"

_SIXTEEN = "16-bit"


@dataclass(frozen=True)
class KvFormatRule:
    """Where one KV cache format below 16 bits is stored (a ``[[format]]`` table)."""

    format: QuantFormat
    falls_back_to: str  # a format's value, or "16-bit" (the GPU's own 16-bit format)
    engines: str
    where_not: str
    source_url: str
    min_capability: tuple[int, int] | None = None
    capabilities: tuple[tuple[int, int], ...] = ()

    def stored_on(self, capability: tuple[int, int]) -> bool:
        """Whether an engine keeps this format on a GPU of ``capability``."""
        if self.capabilities:
            return capability in self.capabilities
        return self.min_capability is not None and capability >= self.min_capability


@dataclass(frozen=True)
class KvCacheRun:
    """The format the KV cache is stored in on a GPU, and why it is not the one asked for
    (None where it is)."""

    format: QuantFormat
    reason: str | None = None
    why: str | None = None  # the rules' part of ``reason``, without the GPU and formats


def _capability(text: Any, where: str) -> tuple[int, int]:
    parsed = parse_compute_capability(text) if isinstance(text, str) else None
    if parsed is None:
        raise GpuarchError(f"{where}: expected a compute capability such as \"8.0\", "
                           f"got {text!r}")
    return parsed


def _rule(row: dict[str, Any], where: str) -> KvFormatRule:
    known = {"format", "min_compute_capability", "compute_capabilities", "falls_back_to",
             "engines", "where_not", "source_title", "source_url"}
    unknown = sorted(set(row) - known)
    if unknown:
        raise GpuarchError(f"{where}: unknown key(s) {', '.join(unknown)}")
    for key in ("format", "falls_back_to", "engines", "where_not", "source_title",
                "source_url"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise GpuarchError(f"{where}: {key} must be a non-empty string")
    try:
        fmt = QuantFormat(row["format"])
    except ValueError:
        raise GpuarchError(f"{where}: format {row['format']!r} is not one of "
                           f"{', '.join(f.value for f in QuantFormat)}") from None
    if fmt.is_16bit:
        raise GpuarchError(f"{where}: {fmt.value} is 16-bit; every GPU stores it, so it "
                           "takes no row")
    if ("min_compute_capability" in row) == ("compute_capabilities" in row):
        raise GpuarchError(f"{where}: give exactly one of min_compute_capability and "
                           "compute_capabilities")
    listed = row.get("compute_capabilities", [])
    if "compute_capabilities" in row and (not isinstance(listed, list) or not listed):
        raise GpuarchError(f"{where}: compute_capabilities must be a non-empty list")
    return KvFormatRule(
        fmt, row["falls_back_to"], row["engines"], row["where_not"], row["source_url"],
        _capability(row["min_compute_capability"], f"{where}: min_compute_capability")
        if "min_compute_capability" in row else None,
        tuple(_capability(c, f"{where}: compute_capabilities") for c in listed))


@lru_cache(maxsize=4)
def kv_format_rules(path: Path = KV_FORMATS_FILE) -> dict[QuantFormat, KvFormatRule]:
    """Every KV cache format below 16 bits that an engine stores, by format; checked: each
    fallback names a format with a rule (or "16-bit") and the chain ends."""
    with path.open("rb") as fh:
        rows = tomllib.load(fh).get("format", [])
    rules: dict[QuantFormat, KvFormatRule] = {}
    for i, row in enumerate(rows):
        rule = _rule(row, f"{path.name}: format[{i}]")
        if rule.format in rules:
            raise GpuarchError(f"{path.name}: format[{i}]: {rule.format.value} is given twice")
        rules[rule.format] = rule
    for rule in rules.values():
        seen = {rule.format}
        step = rule.falls_back_to
        while step != _SIXTEEN:
            nxt = next((r for f, r in rules.items() if f.value == step), None)
            if nxt is None:
                raise GpuarchError(f"{path.name}: {rule.format.value}: falls_back_to {step!r} "
                                   f"is neither a format with a row nor {_SIXTEEN!r}")
            if nxt.format in seen:
                raise GpuarchError(f"{path.name}: {rule.format.value}: the fallbacks loop")
            seen.add(nxt.format)
            step = nxt.falls_back_to
    return rules


# answers by the identity of the catalog and product asked about (both kept beside the
# answer and checked with ``is``, so a changed copy of a product is worked out afresh)
_RUNS: dict[tuple[int, int, QuantFormat], tuple[Catalog, Product, KvCacheRun]] = {}


def kv_cache_run(catalog: Catalog, product: Product, fmt: QuantFormat) -> KvCacheRun:
    """The format ``product`` keeps a KV cache asked for in ``fmt`` in: ``fmt`` where an
    engine stores it there, else the first format down its fallbacks that one does (BF16
    is FP16 on a GPU without BF16), with the reason. MXFP4, which no engine stores as a KV
    cache, is an error that names ``--kv-precision``."""
    key = (id(catalog), id(product), fmt)
    hit = _RUNS.get(key)
    if hit is not None and hit[0] is catalog and hit[1] is product:
        return hit[2]
    run = _kv_cache_run(catalog, product, fmt)
    if len(_RUNS) >= 256:
        _RUNS.clear()
    _RUNS[key] = (catalog, product, run)
    return run


def _kv_cache_run(catalog: Catalog, product: Product, fmt: QuantFormat) -> KvCacheRun:
    if fmt.is_16bit:
        if fmt is QuantFormat.BF16 and lacks_bf16(product):
            return KvCacheRun(QuantFormat.FP16, f"{product.name} has no BF16 (it came with "
                              "Ampere); the KV cache is kept in FP16, the same two bytes")
        return KvCacheRun(fmt)
    rules = kv_format_rules()
    if fmt not in rules:
        kept = ", ".join(f.value for f in QuantFormat if f.is_16bit or f in rules)
        raise GpuarchError(f"--kv-precision: no engine stores a KV cache in {fmt.value}; "
                           f"choose one of {kept}")
    cc = catalog.chip_of(product).compute_capability
    capability = parse_compute_capability(cc)

    def stored(f: QuantFormat) -> bool:
        return f not in rules or (capability is not None and rules[f].stored_on(capability))

    if stored(fmt):
        return KvCacheRun(fmt)
    reasons, step = [], fmt
    while not stored(step):
        if rules[step].where_not not in reasons:
            reasons.append(rules[step].where_not)
        nxt = rules[step].falls_back_to
        step = sixteen_bit_format(product) if nxt == _SIXTEEN else QuantFormat(nxt)
    why = "; ".join(reasons)
    return KvCacheRun(step, (f"{product.name} (compute capability {cc}): "
                             f"{why}; the KV cache is kept in "
                             f"{step.value.upper()}, not {fmt.value.upper()}"), why)


def kv_cache_formats_on(catalog: Catalog, product: Product) -> list[dict[str, str | None]]:
    """For each KV cache format below 16 bits, in the order of the rules: the format asked
    for, the one ``product`` keeps it in (``kv_cache_run``), why where they differ (the whole
    reason, and the rules' part of it alone), who
    stores the asked format and the source saying so (what ``gpuarch show`` lists)."""
    out: list[dict[str, str | None]] = []
    for fmt, rule in kv_format_rules().items():
        run = kv_cache_run(catalog, product, fmt)
        out.append({"format": fmt.value, "kept_as": run.format.value, "reason": run.reason,
                    "why": run.why, "engines": rule.engines, "source": rule.source_url})
    return out
