"""``gpuarch report``: the catalog, the advice and a roofline as one self-contained HTML page."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path
from typing import Any

from gpuarch.catalog.loader import load_catalog
from gpuarch.cli.advise_cmds import DEFAULT_MODEL
from gpuarch.cli.estimate_cmds import resolve_model
from gpuarch.cli.estimate_flags import model_flags
from gpuarch.cli.options import (
    add_facility_flags,
    facility_of,
    parse_quantity,
    positive_number,
)

__all__ = ["add_commands"]


def cmd_report(args: argparse.Namespace) -> int:
    from gpuarch import __version__
    from gpuarch.advise.infer import InferenceSearch, advise_inference
    from gpuarch.advise.prices import load_prices
    from gpuarch.advise.train import Objective, TrainingSearch, advise_training
    from gpuarch.catalog.evolution import DEFAULT_METRICS, evolution
    from gpuarch.catalog.queries import feature_matrix
    from gpuarch.errors import GpuarchError
    from gpuarch.estimate.mamba import default_state_precision
    from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
    from gpuarch.perf.precision import Precision
    from gpuarch.perf.roofline import Device, roofline_summary, transformer_ops
    from gpuarch.report.html import ReportInputs, check_report_path, write_report
    from gpuarch.validation.inference import validate_inference
    from gpuarch.validation.ops import validate_ops
    from gpuarch.validation.power import power_accuracy
    from gpuarch.validation.training import validate_training

    check_report_path(args.out)
    if args.max_gpus < 1:
        raise GpuarchError(f"--max-gpus: expected >= 1, got {args.max_gpus}")
    catalog = load_catalog()
    shape = resolve_model(args)
    prices = load_prices()
    facility = facility_of(args)
    train_search = TrainingSearch(tokens=args.tokens, max_gpus=args.max_gpus,
                                  objective=Objective.TIME,
                                  assumed_network_gbit_s=args.network, facility=facility)
    training = advise_training(catalog, shape, train_search, prices)
    serve_search = InferenceSearch(input_len=args.input_len, output_len=args.output_len,
                                   facility=facility,
                                   ssm_state_precision=default_state_precision(shape))
    serving = advise_inference(catalog, shape, serve_search, prices)
    pick = catalog.product(training.top[0].gpu if training.top else "h100")
    precision = Precision(training.top[0].precision) if training.top else Precision.BF16
    device = Device.of(pick, precision, catalog.chip_of(pick).sm.tensor_core_generation)
    ops = transformer_ops(shape.hidden, shape.heads, shape.n_kv_heads,
                          shape.d_expert if shape.is_moe else shape.d_ffn,
                          shape.ffn_kind.gated, 4096, 4 * 4096, 32,
                          args.input_len + args.output_len)
    inputs = ReportInputs(
        title=f"gpuarch report: {shape.name}",
        generated=f"Generated {datetime.date.today().isoformat()} by gpuarch {__version__}",
        evolution_rows=evolution(catalog, DEFAULT_METRICS),
        evolution_metrics=DEFAULT_METRICS, features=feature_matrix(catalog),
        training=training, serving=serving,
        roofline=roofline_summary(device, ops, DEFAULT_EFFICIENCY),
        ops=validate_ops(catalog),
        accuracy={"training": validate_training(catalog),
                  "serving": validate_inference(catalog), "power": power_accuracy(catalog)},
        launches=_launches(catalog, shape, args.model, train_search, training, serve_search,
                           serving))
    write_report(inputs, args.out)
    print(f"wrote {args.out}")
    return 0


def _launches(catalog: Any, shape: Any, model: str, train_search: Any, training: Any,
              serve_search: Any, serving: Any) -> dict[str, Any]:
    """The commands that run each pick: Megatron-LM's for training, TensorRT-LLM's server
    for serving (the engine the serving model's defaults describe: its Python executor and
    MoE kernels); none for a disaggregated pick or when nothing qualified."""
    from gpuarch.cli.estimate_cmds import model_checkpoint
    from gpuarch.report.launch import Launch, best_serving_launch, best_training_launch

    picks = {"training": best_training_launch(catalog, shape, train_search, training),
             "serving": best_serving_launch("trtllm", shape, serve_search, serving, model,
                                            model_checkpoint(model))}
    return {k: v for k, v in picks.items() if isinstance(v, Launch)}


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 common: argparse.ArgumentParser) -> None:
    """Register report."""
    p = sub.add_parser("report", help="one self-contained HTML page: advice, roofline, "
                       "architecture evolution, feature matrix, accuracy")
    p.add_argument("--out", type=Path, required=True, metavar="FILE.html")
    model_flags(p, DEFAULT_MODEL)
    p.add_argument("--tokens", type=parse_quantity("--tokens"), default=1e12,
                   help="training tokens (default 1T)")
    p.add_argument("--max-gpus", type=int, default=1024, help="default 1024")
    p.add_argument("--network", type=positive_number("--network"), metavar="GBIT_S",
                   help="assumed scale-out network where the catalog gives none")
    p.add_argument("--input-len", type=int, default=2048, help="prompt tokens (default 2048)")
    p.add_argument("--output-len", type=int, default=256,
                   help="generated tokens (default 256)")
    add_facility_flags(p)
    p.set_defaults(handler=cmd_report)
