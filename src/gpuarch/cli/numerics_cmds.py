"""Numerics commands: formats, matmul, recipe-sim, sparsity. NumPy loads only here."""

from __future__ import annotations

import argparse
import math
from typing import Any

from gpuarch.catalog.loader import load_catalog
from gpuarch.cli.options import (
    at_least_one,
    integer_between,
    lazy_enum_value,
    non_negative,
    positive_number,
)
from gpuarch.errors import GpuarchError
from gpuarch.report.serialize import to_json

__all__ = ["add_commands"]

_MOD = "gpuarch.numerics"
# numerics.recipes.MAX_MARGIN, repeated so that parsing imports no NumPy (a test ties them)
_margin = integer_between("--margin", -100, 100)


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def cmd_formats(args: argparse.Namespace) -> int:
    from gpuarch.numerics.formats import NumberFormat
    from gpuarch.numerics.matmul import architectures_running
    from gpuarch.report.numerics_text import render_formats

    catalog = load_catalog()
    rows = []
    for fmt in NumberFormat:
        row: dict[str, Any] = {"format": fmt.value, "bits": fmt.bits, "max": fmt.max,
                               "tensor_core_architectures": architectures_running(catalog,
                                                                                  fmt)}
        if not fmt.is_integer:
            spec = fmt.spec
            row.update({"exponent_bits": spec.exponent_bits,
                        "mantissa_bits": spec.mantissa_bits,
                        "smallest_normal": spec.smallest_normal,
                        "smallest_subnormal": spec.smallest_subnormal,
                        "epsilon": spec.epsilon, "overflow": spec.overflow.value})
        else:
            row.update({"exponent_bits": None, "mantissa_bits": None, "smallest_normal": 1.0,
                        "smallest_subnormal": None, "epsilon": 1.0,
                        "overflow": "saturate (symmetric)"})
        rows.append(row)
    print(to_json({"formats": rows}) if args.json else render_formats(rows))
    return 0


def _gpu(args: argparse.Namespace) -> Any:
    return load_catalog().product(args.gpu) if args.gpu else None


def cmd_matmul(args: argparse.Namespace) -> int:
    from gpuarch.numerics.formats import NumberFormat
    from gpuarch.numerics.matmul import (
        Distribution,
        emulate_matmul,
        make_operands,
        predicted_speedup,
    )
    from gpuarch.numerics.recipes import Recipe
    from gpuarch.report.numerics_text import render_matmul

    fmt = args.format or NumberFormat.FP8_E4M3
    recipe = args.recipe or _default_recipe(fmt)
    a, b = make_operands(args.m, args.n, args.k, args.distribution or Distribution.NORMAL,
                         args.seed)
    rows = []
    b_fmt = args.b_format
    cases = [(fmt, recipe, b_fmt), (NumberFormat.BF16, Recipe.NONE, None),
             (NumberFormat.FP32, Recipe.NONE, None)]
    for f, r, bf in dict.fromkeys(cases):
        e = emulate_matmul(a, b, f, r, margin=args.margin, b_format=bf).error
        label = f.value if bf is None or bf is f else f"{f.value} x {bf.value}"
        rows.append({"format": label, "recipe": r.value,
                     "relative_error": _num(e.relative_error), "sqnr_db": _num(e.sqnr_db),
                     "max_abs_error": _num(e.max_abs_error), "overflow": e.overflow,
                     "underflow": e.underflow})
    result: dict[str, Any] = {"m": args.m, "n": args.n, "k": args.k,
                              "distribution": (args.distribution or Distribution.NORMAL).value,
                              "seed": args.seed, "reference": "float64 matmul of the "
                              "unquantized operands; quantized products accumulate in FP32",
                              "results": rows}
    product = _gpu(args)
    if product is not None:
        value, why = predicted_speedup(product, fmt)
        result["gpu"] = product.name
        result["predicted_speedup_over_bf16"] = value
        result["speedup_basis"] = why
    print(to_json(result) if args.json else render_matmul(result))
    return 0


def _default_recipe(fmt: Any) -> Any:
    from gpuarch.numerics.formats import NumberFormat
    from gpuarch.numerics.recipes import Recipe

    if fmt.is_integer:
        return Recipe.INT_CHANNEL if fmt is NumberFormat.INT8 else Recipe.INT_GROUP
    if fmt is NumberFormat.FP4_E2M1:
        return Recipe.NVFP4
    if fmt.bits < 16:
        return Recipe.CURRENT
    return Recipe.NONE


def cmd_recipe_sim(args: argparse.Namespace) -> int:
    from gpuarch.numerics.formats import NumberFormat
    from gpuarch.numerics.simulate import AmaxAlgo, Pattern, simulate_scaling
    from gpuarch.report.numerics_text import render_sim

    fmt = args.format or NumberFormat.FP8_E4M3
    if fmt.is_integer or fmt.bits >= 16 or fmt is NumberFormat.E8M0:
        raise GpuarchError(f"--format: {fmt.value} is not a scaled narrow float format")
    steps = simulate_scaling(fmt, steps=args.steps, size=args.size, history=args.history,
                             algo=args.algo or AmaxAlgo.MAX, margin=args.margin,
                             pattern=args.pattern or Pattern.DRIFT, growth=args.growth,
                             period=args.period, seed=args.seed)
    result = {
        "format": fmt.value, "history": args.history,
        "algo": (args.algo or AmaxAlgo.MAX).value, "margin": args.margin,
        "pattern": (args.pattern or Pattern.DRIFT).value, "growth": args.growth,
        "steps": [{"step": s.step, "amax": s.amax, "delayed_scale": s.delayed_scale,
                   "delayed_overflow": s.delayed_overflow,
                   "delayed_sqnr_db": _num(s.delayed_sqnr_db),
                   "delayed_wasted_bits": _num(s.delayed_wasted_bits),
                   "current_overflow": s.current_overflow,
                   "current_sqnr_db": _num(s.current_sqnr_db)} for s in steps],
        "delayed_overflow_total": sum(s.delayed_overflow for s in steps),
        "current_overflow_total": sum(s.current_overflow for s in steps),
        "steps_with_delayed_overflow": sum(s.delayed_overflow > 0 for s in steps),
    }
    print(to_json(result) if args.json else render_sim(result))
    return 0


def cmd_sparsity(args: argparse.Namespace) -> int:
    import numpy as np

    from gpuarch.numerics.formats import NumberFormat
    from gpuarch.numerics.matmul import Distribution, compare, make_operands, predicted_speedup
    from gpuarch.numerics.sparsity import is_2to4, prune_2to4
    from gpuarch.report.numerics_text import render_sparsity

    a, b = make_operands(args.m, args.n, args.k, args.distribution or Distribution.NORMAL,
                         args.seed)
    pruned, mask = prune_2to4(b.T)  # weights pruned along K, the reduction axis
    reference = a @ b
    err = compare(a @ pruned.T, reference)
    fmt = args.format or NumberFormat.FP16
    result: dict[str, Any] = {
        "m": args.m, "n": args.n, "k": args.k, "seed": args.seed,
        "mask_valid": is_2to4(pruned), "kept_fraction": float(np.mean(mask)),
        "weight_energy_kept": float(np.linalg.norm(pruned) ** 2 / np.linalg.norm(b) ** 2),
        "relative_error": _num(err.relative_error), "sqnr_db": _num(err.sqnr_db),
        "max_abs_error": _num(err.max_abs_error),
        "note": "magnitude pruning without fine-tuning; pruned networks are normally "
                "fine-tuned to recover accuracy",
    }
    product = _gpu(args)
    if product is not None:
        dense, _ = predicted_speedup(product, fmt)
        sparse, why = predicted_speedup(product, fmt, sparse=True)
        result["gpu"] = product.name
        result["format"] = fmt.value
        result["predicted_speedup_upper_bound"] = (sparse / dense if sparse and dense
                                                   else None)
        result["speedup_basis"] = (f"{fmt.value} 2:4 sparse peak / dense peak (catalog); "
                                   "an upper bound, reached only by compute-bound GEMMs"
                                   if sparse and dense else why)
    print(to_json(result) if args.json else render_sparsity(result))
    return 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 common: argparse.ArgumentParser) -> None:
    """Register the numerics commands."""
    num = sub.add_parser("numerics", help="what number formats do to your numbers")
    num_sub = num.add_subparsers(dest="what", metavar="WHAT", required=True)
    fmt = lazy_enum_value(f"{_MOD}.formats:NumberFormat", "--format")
    dist = lazy_enum_value(f"{_MOD}.matmul:Distribution", "--distribution")

    p = num_sub.add_parser("formats", parents=[common],
                           help="bits, range, precision, and which GPUs run each format")
    p.set_defaults(handler=cmd_formats)

    def shape_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--m", type=at_least_one("--m"), default=512)
        p.add_argument("--n", type=at_least_one("--n"), default=512)
        p.add_argument("--k", type=at_least_one("--k"), default=512)
        p.add_argument("--distribution", type=dist, help="normal (default), lognormal, "
                       "outliers")
        p.add_argument("--seed", type=non_negative("--seed"), default=0)
        p.add_argument("--gpu", help="predict the speed-up on this GPU from its peaks")

    p = num_sub.add_parser("matmul", parents=[common],
                           help="error of an emulated quantized matmul vs FP64")
    shape_flags(p)
    p.add_argument("--format", type=fmt, help="fp8_e4m3 (default), fp8_e5m2, fp6_e2m3, "
                   "fp6_e3m2, fp4_e2m1, int8, int4, bf16, fp16, tf32, fp32")
    p.add_argument("--b-format", type=lazy_enum_value(f"{_MOD}.formats:NumberFormat",
                                                      "--b-format"),
                   help="a different format for B, e.g. --format fp8_e5m2 --b-format "
                   "fp8_e4m3 for the hybrid recipe's backward GEMM (gradients x weights)")
    p.add_argument("--recipe", type=lazy_enum_value(f"{_MOD}.recipes:Recipe", "--recipe"),
                   help="none, current, mx, nvfp4, int_tensor, int_channel, int_group "
                   "(default: suits the format)")
    p.add_argument("--margin", type=_margin, default=0, help="scaling margin (powers of two)")
    p.set_defaults(handler=cmd_matmul)

    p = num_sub.add_parser("recipe-sim", parents=[common],
                           help="delayed vs current scaling over training steps")
    p.add_argument("--format", type=fmt, help="fp8_e4m3 (default), fp8_e5m2, ...")
    p.add_argument("--steps", type=at_least_one("--steps"), default=50)
    p.add_argument("--size", type=at_least_one("--size"), default=4096)
    p.add_argument("--history", type=at_least_one("--history"), default=16,
                   help="amax history length")
    p.add_argument("--algo", type=lazy_enum_value(f"{_MOD}.simulate:AmaxAlgo", "--algo"),
                   help="max (default) or most_recent")
    p.add_argument("--margin", type=_margin, default=0)
    p.add_argument("--pattern", type=lazy_enum_value(f"{_MOD}.simulate:Pattern",
                                                     "--pattern"),
                   help="drift (default), spike or decay")
    p.add_argument("--growth", type=positive_number("--growth"), default=1.15,
                   help="per-step factor (drift/decay)")
    p.add_argument("--period", type=at_least_one("--period"), default=20,
                   help="steps between spikes")
    p.add_argument("--seed", type=non_negative("--seed"), default=0)
    p.set_defaults(handler=cmd_recipe_sim)

    p = num_sub.add_parser("sparsity", parents=[common],
                           help="2:4 pruning: its error and the speed-up a GPU allows")
    shape_flags(p)
    p.add_argument("--format", type=fmt, help="format for the speed-up (default fp16)")
    p.set_defaults(handler=cmd_sparsity)
