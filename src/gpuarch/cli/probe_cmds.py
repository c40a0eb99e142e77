"""probe and doctor: read the machine, benchmark it, check its settings."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from gpuarch.catalog.loader import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.files import check_output_path, write_whole_text
from gpuarch.report.serialize import to_json, to_jsonable
from gpuarch.report.text import fmt
from gpuarch.units import Unit, from_si, to_si

__all__ = ["add_commands"]

DEMO_MACHINE = Path(__file__).resolve().parents[1] / "probe" / "data" / "dgx-h100.json"


def _size(nbytes: float) -> str:
    """A buffer size in GiB from 1 GiB up, else in MiB (bench rows: "2 GiB", "64 MiB")."""
    if nbytes >= to_si(1, Unit.GIB):
        return f"{fmt(from_si(nbytes, Unit.GIB))} GiB"
    return f"{fmt(from_si(nbytes, Unit.MIB))} MiB"


def _report(args: argparse.Namespace) -> Any:
    from gpuarch.probe.fake_nvml import FakeNvml
    from gpuarch.probe.run import run_probe

    nv = None
    if args.fake is not None:
        path = DEMO_MACHINE if str(args.fake) == "demo" else args.fake
        nv = FakeNvml.from_file(path, "--fake")
    return run_probe(load_catalog(), nv)


def _model_gemm_fraction(catalog: Any, product: Any, g: Any) -> float | None:
    """The fraction of the peak the performance model assumes for this GEMM on this GPU
    (its fitted defaults, the size curve included); None where the model prices no such
    GEMM (INT8, 2:4 sparse) and for outputs below ``CURVE_MIN_OUTPUT``, whose fill and launch
    time the model does not price (a 1,024^3 GEMM ran at 12% of an H200's peak)."""
    from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
    from gpuarch.perf.precision import Precision
    from gpuarch.perf.roofline import Device, Gemm, op_cost
    from gpuarch.probe.calibration import CURVE_MIN_OUTPUT

    if min(g.m, g.n) < CURVE_MIN_OUTPUT:
        return None
    try:
        precision = Precision(g.precision)
    except ValueError:
        return None
    generation = catalog.chip_of(product).sm.tensor_core_generation
    device = Device.of(product, precision, generation)
    cost = op_cost(Gemm(g.m, g.n, g.k), device, DEFAULT_EFFICIENCY.with_overrides(
        {"kernel_overhead_s": 0.0}))
    return cost.efficiency


def _bench_rows(report: Any, bench: Any) -> list[dict[str, Any]]:
    """Each measurement beside the catalog's peak for the first GPU (or none on CPU) and the
    fraction of that peak the performance model assumes."""
    from gpuarch.catalog.peaks import PeakKey
    from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY

    catalog = load_catalog()
    product = None
    if report.gpus and report.gpus[0].product_key and bench.device == "cuda":
        product = catalog.product(report.gpus[0].product_key)
    keys = {"fp32": PeakKey.FP32, "tf32": PeakKey.TENSOR_TF32, "fp16": PeakKey.TENSOR_FP16,
            "bf16": PeakKey.TENSOR_BF16, "fp8": PeakKey.TENSOR_FP8,
            "int8": PeakKey.TENSOR_INT8}
    rows = []
    for g in bench.gemm:
        if g.precision == "fp16_sparse":
            peak = product.peak(PeakKey.TENSOR_FP16, sparse=True) if product else None
        else:
            peak = product.peak(keys[g.precision]) if product and g.precision in keys \
                else None
        rows.append({"what": f"GEMM {g.precision}", "size": f"{g.m}x{g.n}x{g.k}",
                     "measured": from_si(g.flops_per_s, Unit.TFLOPS), "unit": "TFLOP/s",
                     "catalog_peak": from_si(peak, Unit.TFLOPS) if peak else None,
                     "fraction": g.flops_per_s / peak if peak else None,
                     "model_fraction": _model_gemm_fraction(catalog, product, g)
                     if peak else None})
    for b in bench.bandwidth:
        peak = product.memory_bandwidth_bytes_s if product and b.kind == "device_copy" \
            else None
        rows.append({"what": b.kind.replace("_", " "),
                     "size": _size(b.bytes),
                     "measured": from_si(b.bytes_per_s, Unit.GB_S), "unit": "GB/s",
                     "catalog_peak": from_si(peak, Unit.GB_S) if peak else None,
                     "fraction": b.bytes_per_s / peak if peak else None,
                     "model_fraction": DEFAULT_EFFICIENCY.memory if peak else None})
    for c in bench.collectives:
        rows.append({"what": f"{c.op} x{c.ranks} (bus)",
                     "size": _size(c.bytes),
                     "measured": from_si(c.busbw, Unit.GB_S), "unit": "GB/s", "catalog_peak": None,
                     "fraction": None, "model_fraction": None})
    return rows


def cmd_probe(args: argparse.Namespace) -> int:
    from gpuarch.report.probe_text import render_bench, render_probe

    if args.save is not None and not args.bench:
        raise GpuarchError("--save writes measurements: add --bench")
    if args.ops is not None:
        check_output_path(args.ops, "--ops")
    report = _report(args)
    doc: dict[str, Any] = {"report": to_jsonable(report)}
    text = render_probe(report)
    if args.ops is not None:
        text += _op_check(args, report, doc)
    if args.bench:
        from gpuarch.probe.bench import run_benchmarks, terminal_progress

        if report.torch is None:
            raise GpuarchError("--bench needs torch: pip install 'gpuarch[probe]' "
                               "(torch==2.13.0)")
        rank = _init_distributed()
        bench = run_benchmarks(quick=args.quick, progress=None if args.json or rank
                               else terminal_progress())
        _finish_distributed()
        if rank:  # under torchrun only rank 0 reports
            return 0
        rows = _bench_rows(report, bench)
        doc["benchmarks"] = {"device": bench.device, "rows": rows,
                             "skipped": [list(s) for s in bench.skipped]}
        text += render_bench(rows, bench.skipped)
        if args.save is not None:
            from gpuarch.probe.calibration import calibration_document

            _write_whole(args.save, json.dumps(calibration_document(report, bench), indent=2))
            text += f"\n\nCalibration written to {args.save}"
            doc["saved"] = str(args.save)
    print(to_json(doc) if args.json else text)
    return 0


def _op_check(args: argparse.Namespace, report: Any, doc: dict[str, Any]) -> str:
    """``--ops FILE``: time single operators on the matched GPU, write the op-check file and
    set each beside the model's time (what ``gpuarch validate ops --file`` prints)."""
    from gpuarch.probe.opcheck import run_op_check
    from gpuarch.report.validation_text import render_ops_validation
    from gpuarch.validation.ops import validate_ops

    if report.torch is None or not report.torch.cuda_available:
        raise GpuarchError("--ops times operators on a CUDA GPU through torch; this machine "
                           "has none it can use (`gpuarch probe` shows what NVML and torch "
                           "see)")
    key = report.gpus[0].product_key if report.gpus else None
    if not key:
        raise GpuarchError("--ops: GPU 0 matches no catalog product, so there is no model "
                           "to compare with")
    result = run_op_check(key, quick=args.quick)
    write_whole_text(args.ops.resolve(), json.dumps(result, indent=2))
    summary = validate_ops(load_catalog(), path=args.ops)
    doc["op_check"] = summary.as_json()
    return "\n\n" + render_ops_validation(summary) + f"\n\nOperator times written to {args.ops}"


def _init_distributed() -> int:
    """Under torchrun (WORLD_SIZE set), join the process group: NCCL on GPUs, else gloo.
    Returns this process's rank (0 when not distributed)."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl" if cuda else "gloo")
    return int(dist.get_rank())


def _finish_distributed() -> None:
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def _write_whole(path: Path, text: str) -> None:
    """Write a file completely or not at all."""
    check_output_path(path, "--save")
    write_whole_text(path.resolve(), text)


def cmd_doctor(args: argparse.Namespace) -> int:
    from gpuarch.probe.doctor import diagnose
    from gpuarch.report.probe_text import render_doctor

    report = _report(args)
    calibration = None
    if args.calibration is not None:
        from gpuarch.probe.calibration import load_calibration

        calibration = load_calibration(args.calibration)
        here = sorted({g.product_key for g in report.gpus if g.product_key})
        if here and calibration.product not in here:
            raise GpuarchError(f"--calibration: {args.calibration} was measured on "
                               f"{calibration.product}, this machine has {', '.join(here)}")
    findings = diagnose(report, load_catalog(), calibration)
    if args.json:
        print(to_json({"findings": findings}))
    else:
        print(render_doctor(findings))
    return 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 common: argparse.ArgumentParser) -> None:
    fake_help = ("read a machine description (JSON, see gpuarch/probe/fake_nvml.py) instead of "
                 "NVML; 'demo' is a built-in 2 x H100 example")
    p = sub.add_parser("probe", parents=[common],
                       help="what GPUs this machine has, their state and topology")
    p.add_argument("--bench", action="store_true",
                   help="run microbenchmarks (torch): GEMMs, memory, collectives")
    p.add_argument("--quick", action="store_true", help="small benchmark sizes")
    p.add_argument("--save", type=Path, metavar="FILE", help="write a calibration file")
    p.add_argument("--ops", type=Path, metavar="FILE",
                   help="time single operators (GEMMs, attention, grouped experts, ...) on "
                        "GPU 0 beside the model's per-operator times and write them to FILE "
                        "(read by 'gpuarch validate ops --file'); about a minute")
    p.add_argument("--fake", type=Path, metavar="FILE", help=fake_help)
    p.set_defaults(handler=cmd_probe)
    p = sub.add_parser("doctor", parents=[common],
                       help="check settings: torch build, TF32/AMP, PCIe, power, NCCL")
    p.add_argument("--fake", type=Path, metavar="FILE", help=fake_help)
    p.add_argument("--calibration", type=Path, metavar="FILE",
                   help="also compare this machine's measurements ('gpuarch probe --bench "
                        "--save FILE') with a reference GPU of the same product")
    p.set_defaults(handler=cmd_doctor)
