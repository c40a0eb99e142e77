"""Terminal renderings of catalog results."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from gpuarch.catalog.derived import best_dense_peak
from gpuarch.catalog.evolution import EvolutionRow, Metric
from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, Source, System
from gpuarch.catalog.peaks import PeakKey
from gpuarch.catalog.queries import (
    ArchitectureDescription,
    Comparison,
    FeatureMatrix,
    FeatureNote,
    ProductDescription,
)
from gpuarch.report.text import fmt, table
from gpuarch.units import Unit, from_si

__all__ = [
    "render_architecture",
    "render_comparison",
    "render_description",
    "render_evolution",
    "render_feature_matrix",
    "render_product_list",
    "render_systems",
]


def _tf(value: float | None) -> str:
    return fmt(None if value is None else from_si(value, Unit.TFLOPS))


def render_product_list(catalog: Catalog, products: Sequence[Product]) -> str:
    rows = []
    for p in products:
        best = best_dense_peak(p, 16)
        rows.append([
            p.name, catalog.architecture_of(p).name, p.launch_date[:4], p.tier.value,
            fmt(from_si(p.memory_bytes, Unit.GIB)),
            fmt(from_si(p.memory_bandwidth_bytes_s, Unit.GB_S)),
            _tf(p.peak(PeakKey.FP32)),
            _tf(best[1] if best else None),
            _tf(p.peak(PeakKey.TENSOR_FP8)),
            fmt(p.tdp_w),
        ])
    headers = ["GPU", "Architecture", "Year", "Tier", "Mem GiB", "BW GB/s", "FP32 TF",
               "16-bit TF", "FP8 TF", "TDP W"]
    footer = (f"\n{len(products)} GPUs. TF = dense TFLOPS; 16-bit = best dense FP16/BF16 "
              "(Tensor Cores where present). Sparse peaks are never shown here.")
    return table(headers, rows, right=[False] * 4 + [True] * 6) + footer


def render_description(d: ProductDescription,
                       kv_formats: Sequence[Mapping[str, Any]] = ()) -> str:
    """``gpuarch show``'s text; ``kv_formats``: ``perf.kv_formats.kv_cache_formats_on``'s
    rows, listed after the peaks."""
    p, arch, chip = d.product, d.architecture, d.chip
    lines = [f"{p.name}  ({arch.name}, {chip.key}, compute capability "
             f"{chip.compute_capability}, {p.tier.value}, {p.form_factor}, launched "
             f"{p.launch_date})"]
    facts = [
        ("SMs", fmt(float(p.sms)) if p.sms else "unpublished"),
        ("Boost clock", f"{fmt(from_si(p.boost_clock_hz, Unit.MHZ))} MHz"
         if p.boost_clock_hz else "unpublished"),
        ("Memory", f"{fmt(from_si(p.memory_bytes, Unit.GIB))} GiB {p.memory_type}, "
         f"{fmt(from_si(p.memory_bandwidth_bytes_s, Unit.GB_S))} GB/s"),
        ("L2 cache", f"{fmt(from_si(p.l2_cache_bytes, Unit.MIB))} MiB"
         if p.l2_cache_bytes else "-"),
        ("GPU link", d.derived.gpu_link or "-"),
        ("Board power", f"{fmt(p.tdp_w)} W" if p.tdp_w else "unpublished"),
        ("MIG", f"up to {p.mig_max_instances} instances" if p.mig_max_instances else "no"),
        ("Launch price", f"${p.launch_price_usd:,.0f}" if p.launch_price_usd else "-"),
    ]
    lines += [f"  {k:<13} {v}" for k, v in facts]
    peak_rows = []
    for key in PeakKey:
        dense, sparse = p.peak(key), p.sparse_flops.get(key)
        if dense is None and sparse is None:
            continue
        ridge = d.derived.ridge_point.get(key)
        star = "*" if p.dense_origin(key) == "half of sparse" else ""
        peak_rows.append([key.label, _tf(dense) + star, _tf(sparse), fmt(ridge),
                          key.unit_label])
    if peak_rows:
        lines += ["", textwrap.indent(table(
            ["Peak", "Dense", "2:4 sparse", "Ridge FLOP/B", "Unit"], peak_rows,
            right=[False, True, True, True, False]), "  ")]
        if p.dense_from_sparse:
            lines.append("  * NVIDIA publishes this peak only with 2:4 sparsity; dense is half.")
        for key, value in p.dense_from_sibling.items():
            lines += textwrap.wrap(
                f"- {key.label}: no single dense figure is published; the performance model "
                f"takes {_tf(value)} TFLOPS, {p.dense_sibling}'s published dense peak scaled "
                "by the two products' dense peaks one precision up (the same chip).",
                92, initial_indent="  ", subsequent_indent="    ")
    if kv_formats:
        lines += ["", "KV cache formats below 16 bits (what serving engines store here):"]
        for row in kv_formats:
            asked, kept = str(row["format"]).upper(), str(row["kept_as"]).upper()
            text = (f"{asked:<5} stored ({row['engines']})" if asked == kept else
                    f"{asked:<5} kept as {kept}: {row['why']}")
            lines += textwrap.wrap(text, 92, initial_indent="  ", subsequent_indent="        ")
    lines += ["", f"Architecture: {arch.name} ({arch.year})"]
    lines += textwrap.wrap(arch.summary, 92, initial_indent="  ", subsequent_indent="  ")
    lines += _feature_lines(arch.name, d.features)
    if p.notes:
        lines += ["", "Notes:"]
        lines += textwrap.wrap(p.notes, 92, initial_indent="  ", subsequent_indent="  ")
    lines += _source_lines(d.sources)
    return "\n".join(lines)


def _feature_lines(arch_name: str, features: Sequence[FeatureNote]) -> list[str]:
    new = [f for f in features if f.introduced_in == arch_name]
    older = [f for f in features if f.introduced_in != arch_name]
    lines: list[str] = []
    if new:
        lines += ["", f"New in {arch_name}:"]
        for f in new:
            lines.append(f"  - {f.name}" + (f": {f.note}" if f.note else ""))
            lines += textwrap.wrap(f.explanation, 90, initial_indent="      ",
                                   subsequent_indent="      ")
    if older:
        lines += ["", "Also has (generation that introduced it; this generation's version):"]
        for f in older:
            lines += textwrap.wrap(f"- {f.name} ({f.introduced_in})"
                                   + (f": {f.note}" if f.note else ""), 92,
                                   initial_indent="  ", subsequent_indent="      ")
        lines.append("  (gpuarch features --json explains every feature)")
    return lines


def _source_lines(sources: Sequence[Source]) -> list[str]:
    lines = ["", "Sources:"]
    for s in sources:
        lines.append(f"  [{s.id}] {s.title} ({s.publisher}, {s.year}) {s.url}")
        if s.note:
            lines += textwrap.wrap(f"note: {s.note}", 90, initial_indent="      ",
                                   subsequent_indent="      ")
    return lines


def render_architecture(d: ArchitectureDescription) -> str:
    a = d.architecture
    lines = [f"{a.name}  (generation {a.order}, {a.year}, compute capability "
             f"{', '.join(a.compute_capabilities)})"]
    lines += textwrap.wrap(a.summary, 92, initial_indent="  ", subsequent_indent="  ")
    rows = []
    for c in d.chips:
        sm = c.sm
        rows.append([c.key, c.compute_capability, c.process,
                     fmt(c.transistors_billion), fmt(float(c.full_sms) if c.full_sms else None),
                     fmt(float(sm.fp32_lanes) if sm.fp32_lanes else None),
                     fmt(float(sm.fp64_lanes) if sm.fp64_lanes is not None else None),
                     f"{sm.tensor_cores} (gen {sm.tensor_core_generation})"
                     if sm.tensor_cores else "-",
                     fmt(float(sm.warp_schedulers) if sm.warp_schedulers else None),
                     "yes" if c.sparsity_2to4 else "no"])
    if rows:
        lines += ["", textwrap.indent(table(
            ["Chip", "CC", "Process", "Transistors (bn)", "SMs (full)", "FP32/SM", "FP64/SM",
             "Tensor Cores/SM", "Schedulers/SM", "2:4 sparse"], rows,
            right=[False, False, False, True, True, True, True, False, True, False]), "  ")]
    lines += ["", "Products: " + ", ".join(d.products)]
    lines += _feature_lines(a.name, d.features)
    lines += _source_lines(d.sources)
    return "\n".join(lines)


def render_systems(catalog: Catalog, systems: Sequence[System]) -> str:
    rows = []
    for s in systems:
        rows.append([
            s.name, catalog.product(s.gpu).name, str(s.gpus_per_node), s.intra_node_fabric,
            fmt(from_si(s.intra_node_bandwidth_bytes_s, Unit.GB_S)),
            fmt(float(s.nvlink_domain_gpus) if s.nvlink_domain_gpus else None),
            s.network or "-",
            fmt(None if s.network_bandwidth_per_gpu_bytes_s is None
                else from_si(s.network_bandwidth_per_gpu_bytes_s, Unit.GBIT_S)),
        ])
    return table(["System", "GPU", "GPUs/node", "Fabric", "GPU link GB/s (bidir.)",
                  "NVLink domain", "Network", "Gbit/s per GPU"], rows,
                 right=[False, False, True, False, True, True, False, True])


def render_comparison(c: Comparison) -> str:
    headers = ["", "Unit", *c.products]
    if len(c.products) > 1:
        headers += [f"{name} / {c.products[0]}" for name in c.products[1:]]
    rows = []
    for r in c.rows:
        cells = [r.label, r.unit, *(fmt(v) for v in r.values)]
        if len(c.products) > 1:
            ratios = [fmt(x, ratio=True) for x in r.ratios[1:]] if r.ratios else []
            cells += ratios or [""] * (len(c.products) - 1)
        rows.append(cells)
    right = [False, False] + [True] * (len(headers) - 2)
    return table(headers, rows, right=right)


def render_feature_matrix(m: FeatureMatrix) -> str:
    short = [a[:12] for a in m.architectures]
    rows = [[name, *("x" if cell is not None else "." for cell in cells)]
            for name, cells in zip(m.feature_names, m.cells, strict=True)]
    return table(["Feature", *short], rows) + "\n\nx = has it, . = does not."


def render_evolution(rows: Sequence[EvolutionRow], metrics: Sequence[Metric]) -> str:
    headers = ["Architecture", "Year", "Flagship"]
    for m in metrics:
        unit = m.unit.label or ("FLOP/B" if m is Metric.RIDGE else "")
        headers += [f"{m.key} {unit}".strip(), "x prev"]
    out = []
    for r in rows:
        cells = [r.architecture, str(r.year), r.flagship]
        for m in metrics:
            value = r.values.get(m)
            cells += [fmt(None if value is None else from_si(value, m.unit)),
                      fmt(r.ratio_to_previous.get(m), ratio=True)]
        out.append(cells)
    legend = "\n".join(f"  {m.key}: {m.label}" for m in metrics)
    return (table(headers, out, right=[False, True, False] + [True] * (2 * len(metrics)))
            + "\n\nFlagship = fastest dense FP16/BF16 (else FP32) peak in the tiers shown "
            "(default: datacenter, else any tier). "
            "x prev = ratio to the previous generation's flagship.\n" + legend)
