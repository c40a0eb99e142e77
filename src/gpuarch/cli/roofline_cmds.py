"""The roofline command: a GPU's roofline with operators placed on it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from gpuarch.catalog.loader import load_catalog
from gpuarch.cli.options import lazy_enum_value
from gpuarch.errors import GpuarchError
from gpuarch.report.serialize import to_json

if TYPE_CHECKING:
    from gpuarch.perf.roofline import Op

__all__ = ["add_commands"]



def parse_op(text: str) -> Op:
    """``gemm:M,N,K``, ``attention:B,S,H,D`` or ``elementwise:BYTES``."""
    from gpuarch.perf.roofline import Attention, Elementwise, Gemm

    kind, _, rest = text.partition(":")
    try:
        numbers = [int(float(x)) for x in rest.split(",") if x.strip()]
    except (ValueError, OverflowError):
        raise GpuarchError(f"--op: {text!r}: expected finite numbers after ':'") from None
    if any(x < 1 for x in numbers):
        raise GpuarchError(f"--op: {text!r}: sizes must be at least 1")
    if kind == "gemm" and len(numbers) == 3:
        m, n, k = numbers
        return Gemm(m, n, k, name=text)
    if kind == "attention" and len(numbers) == 4:
        b, s, h, d = numbers
        return Attention(b, s, s, h, h, d, causal=True, name=text)
    if kind == "elementwise" and len(numbers) == 1:
        return Elementwise(float(numbers[0]), name=text)
    raise GpuarchError(f"--op: {text!r}: expected gemm:M,N,K, attention:B,S,H,D or "
                       "elementwise:BYTES")


def cmd_roofline(args: argparse.Namespace) -> int:
    from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
    from gpuarch.perf.precision import sixteen_bit
    from gpuarch.perf.roofline import Device, roofline_summary
    from gpuarch.report.estimate_text import render_roofline

    catalog = load_catalog()
    product = catalog.product(args.gpu)
    precision = args.precision or sixteen_bit(product)
    device = Device.of(product, precision,
                       catalog.chip_of(product).sm.tensor_core_generation)
    ops = [parse_op(o) for o in args.op or []]
    result = roofline_summary(device, ops, DEFAULT_EFFICIENCY)
    result = {
        **result,
        "plot": str(args.plot) if args.plot else None,
    }
    if args.plot is not None:
        from gpuarch.report.plot import plot_roofline

        plot_roofline(result, args.plot)
    print(to_json(result) if args.json else render_roofline(result))
    return 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 common: argparse.ArgumentParser) -> None:
    """Register roofline."""
    p = sub.add_parser("roofline", parents=[common],
                       help="a GPU's roofline with operators placed on it")
    p.add_argument("--gpu", required=True)
    p.add_argument("--precision", type=lazy_enum_value("gpuarch.perf.precision:Precision",
                                                       "--precision"),
                   help="bf16 (default; fp16 on a GPU without BF16), fp16, fp8, tf32 or "
                        "fp32")
    p.add_argument("--op", action="append", metavar="SPEC",
                   help="gemm:M,N,K | attention:B,S,H,D | elementwise:BYTES (repeat)")
    p.add_argument("--plot", type=Path, metavar="FILE", help="write a .png or .svg plot")
    p.set_defaults(handler=cmd_roofline)
