"""Terminal renderings of catalog results."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from gpuarch.catalog.derived import best_dense_peak
from gpuarch.catalog.evolution import EvolutionRow, Metric
from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product
from gpuarch.catalog.peaks import PeakKey
from gpuarch.catalog.queries import Comparison, FeatureMatrix, ProductDescription
from gpuarch.report.text import fmt, table
from gpuarch.units import Unit, from_si

__all__ = [
    "render_comparison",
    "render_description",
    "render_evolution",
    "render_feature_matrix",
    "render_product_list",
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


def render_description(d: ProductDescription) -> str:
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
    lines += ["", f"Architecture: {arch.name} ({arch.year})"]
    lines += textwrap.wrap(arch.summary, 92, initial_indent="  ", subsequent_indent="  ")
    new = [f for f in d.features if f.introduced_in == arch.name]
    older = [f for f in d.features if f.introduced_in != arch.name]
    if new:
        lines += ["", f"New in {arch.name}:"]
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
    if p.notes:
        lines += ["", "Notes:"]
        lines += textwrap.wrap(p.notes, 92, initial_indent="  ", subsequent_indent="  ")
    lines += ["", "Sources:"]
    for s in d.sources:
        lines.append(f"  [{s.id}] {s.title} ({s.publisher}, {s.year}) {s.url}")
        if s.note:
            lines += textwrap.wrap(f"note: {s.note}", 90, initial_indent="      ",
                                   subsequent_indent="      ")
    return "\n".join(lines)


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
