"""Catalog commands: list, show, compare, features, evolution."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuarch.catalog.evolution import DEFAULT_METRICS, Metric, evolution
from gpuarch.catalog.loader import load_catalog
from gpuarch.catalog.model import Tier
from gpuarch.catalog.queries import (
    SortKey,
    compare,
    describe,
    describe_architecture,
    feature_matrix,
    select_products,
)
from gpuarch.cli.options import enum_list, enum_value
from gpuarch.errors import UnknownNameError, did_you_mean
from gpuarch.report.catalog_text import (
    render_architecture,
    render_comparison,
    render_description,
    render_evolution,
    render_feature_matrix,
    render_product_list,
    render_systems,
)
from gpuarch.report.serialize import to_json, to_jsonable

__all__ = ["add_commands"]


def _out(args: argparse.Namespace, result: object, text: str) -> int:
    print(to_json(result) if args.json else text)
    return 0


def _flatten(values: list[list[Tier]] | None) -> list[Tier]:
    return [v for group in values or [] for v in group]


def cmd_list(args: argparse.Namespace) -> int:
    catalog = load_catalog()
    archs = [catalog.architecture(a) for part in args.arch or [] for a in part.split(",")]
    features = [f for part in args.feature or [] for f in part.split(",")]
    for f in features:
        if f not in catalog.features:
            raise UnknownNameError("feature (--feature)", f, did_you_mean(f, catalog.features))
    products = select_products(catalog, architectures=archs, tiers=_flatten(args.tier),
                               features=features, sort=args.sort)
    return _out(args, {"products": products}, render_product_list(catalog, products))


def cmd_show(args: argparse.Namespace) -> int:
    catalog = load_catalog()
    arch = catalog.architecture_named(args.name)
    if arch is not None:  # "gpuarch show hopper" describes the architecture
        arch_view = describe_architecture(catalog, arch)
        return _out(args, arch_view, render_architecture(arch_view))
    from gpuarch.perf.kv_formats import kv_cache_formats_on

    description = describe(catalog, catalog.product(args.name))
    kv_formats = kv_cache_formats_on(catalog, description.product)
    if args.json:  # the description's keys, and which KV cache formats it keeps
        print(to_json({**to_jsonable(description), "kv_cache_formats": kv_formats}))
        return 0
    return _out(args, description, render_description(description, kv_formats))


def cmd_compare(args: argparse.Namespace) -> int:
    catalog = load_catalog()
    result = compare(catalog, [catalog.product(n) for n in args.names])
    return _out(args, result, render_comparison(result))


def cmd_systems(args: argparse.Namespace) -> int:
    catalog = load_catalog()
    systems = [catalog.system(args.name)] if args.name else list(catalog.systems)
    return _out(args, {"systems": systems}, render_systems(catalog, systems))


def cmd_features(args: argparse.Namespace) -> int:
    catalog = load_catalog()
    matrix = feature_matrix(catalog)
    if args.json:
        features = [
            {
                "key": key,
                "name": catalog.features[key].name if key in catalog.features else key,
                "explanation": catalog.features[key].explanation
                if key in catalog.features else "",
                "introduced_in": (a.name if (a := catalog.introduced_in(key)) else None),
                "architectures": {arch: cell for arch, cell in
                                  zip(matrix.architectures, cells, strict=True)
                                  if cell is not None},
            }
            for key, cells in zip(matrix.features, matrix.cells, strict=True)
        ]
        return _out(args, {"architectures": matrix.architectures, "features": features}, "")
    return _out(args, matrix, render_feature_matrix(matrix))


def cmd_evolution(args: argparse.Namespace) -> int:
    catalog = load_catalog()
    metrics = [m for group in args.metric or [] for m in group] or list(DEFAULT_METRICS)
    metrics = list(dict.fromkeys(metrics))
    computed = metrics if Metric.RIDGE in metrics else [*metrics, Metric.RIDGE]
    rows = evolution(catalog, computed, _flatten(args.tier) or None)
    if args.plot is not None:
        from gpuarch.report.plot import plot_evolution  # matplotlib only when asked

        plot_evolution(rows, metrics, args.plot)
    text = render_evolution(rows, metrics)
    if args.plot is not None:
        text += f"\n\nPlot written to {args.plot}"
    result = {"metrics": [{"key": m.key, "label": m.label, "unit": m.unit.label}
                          for m in metrics],
              "rows": [{"architecture": r.architecture, "year": r.year,
                        "flagship": r.flagship, "flagship_key": r.flagship_key,
                        "flagship_launch": r.flagship_launch, "debut": r.debut,
                        "tier": r.tier,
                        "values": {m.key: _display(r.values.get(m), m) for m in metrics},
                        "ratio_to_previous": {m.key: r.ratio_to_previous.get(m)
                                              for m in metrics}}
                       for r in rows],
              "plot": str(args.plot) if args.plot else None}
    return _out(args, result, text)


def _display(value: float | None, metric: Metric) -> float | None:
    return None if value is None else value / metric.unit.factor


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 common: argparse.ArgumentParser) -> None:
    """Register the catalog commands on ``sub``."""
    tier_list = enum_list(Tier, "--tier")

    p = sub.add_parser("list", parents=[common], help="list GPUs in the catalog")
    p.add_argument("--arch", action="append", metavar="NAME",
                   help="only these architectures (repeat or comma-separate)")
    p.add_argument("--tier", action="append", type=tier_list, metavar="TIER",
                   help="datacenter, workstation, consumer, embedded (repeat or comma-separate)")
    p.add_argument("--feature", action="append", metavar="KEY",
                   help="only GPUs with this feature, e.g. tf32, mig, fp8_transformer_engine "
                   "(repeat or comma-separate)")
    p.add_argument("--sort", type=enum_value(SortKey, "--sort"), default=SortKey.YEAR,
                   help="year (default), name, fp32, fp16, fp8, bandwidth, memory, tdp")
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("show", parents=[common],
                       help="one GPU (or architecture): peaks, features explained, sources")
    p.add_argument("name", help='a GPU name or alias ("h100", "A100 PCIe 40GB") or an '
                   'architecture ("hopper", "sm90")')
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("compare", parents=[common],
                       help="GPUs side by side, with ratios to the first")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.set_defaults(handler=cmd_compare)

    p = sub.add_parser("systems", parents=[common],
                       help="reference systems: GPUs per node, fabric, network")
    p.add_argument("name", nargs="?", help='one system, e.g. "dgx h100", "gb200 nvl72"')
    p.set_defaults(handler=cmd_systems)

    p = sub.add_parser("features", parents=[common], help="feature x architecture matrix")
    p.set_defaults(handler=cmd_features)

    p = sub.add_parser("evolution", parents=[common],
                       help="flagship GPUs by generation, ratios and an optional plot")
    p.add_argument("--metric", action="append", type=enum_list(Metric, "--metric"),
                   metavar="M", help="metrics to follow (repeat or comma-separate): "
                   + ", ".join(m.key for m in Metric) + "; default "
                   + ",".join(m.key for m in DEFAULT_METRICS))
    p.add_argument("--tier", action="append", type=tier_list, metavar="TIER",
                   help="limit flagships to these tiers (default: datacenter, or any tier "
                   "for a generation without a datacenter product)")
    p.add_argument("--plot", type=Path, metavar="FILE", help="write a .png or .svg plot")
    p.set_defaults(handler=cmd_evolution)
