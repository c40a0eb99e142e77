"""The validate commands: the model against published measurements (training, serving,
kernels, collectives, power, load, error bands), or against your own."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuarch.catalog.loader import load_catalog
from gpuarch.cli.options import at_least_one, check_plot_flag, facility_of, number_from
from gpuarch.errors import GpuarchError, check_choice
from gpuarch.report.serialize import to_json

if TYPE_CHECKING:
    from gpuarch.validation.user_data import Kind

__all__ = ["add_commands"]



def _validated(args: argparse.Namespace, kind: Kind, validate: Any) -> Any:
    """The published points (or with ``--data`` the user's file's, every one of which must
    be comparable) compared by ``validate``, then ``--match`` and ``--worst``."""
    points = None
    if args.data is not None:
        from gpuarch.validation.user_data import load_user_points
        points = load_user_points(args.data, kind)
    summary = validate(load_catalog(), points=points)
    if args.data is not None:
        from gpuarch.validation.user_data import require_all_compared
        require_all_compared(summary, args.data)
    return summary.select(args.match, args.worst)


def _plotted(args: argparse.Namespace, summary: Any, what: str, doc: dict[str, Any]
             ) -> dict[str, Any]:
    """--plot: the summary's errors drawn (``report.plot.plot_errors``); the JSON document
    names the file."""
    if args.plot is None:
        return doc
    from gpuarch.report.plot import plot_errors

    plot_errors(summary, args.plot, what)
    return {**doc, "plot": str(args.plot)}


def cmd_validate(args: argparse.Namespace) -> int:
    from gpuarch.report.validation_text import render_validation
    from gpuarch.validation.training import validate_training

    check_plot_flag(args)
    summary = _validated(args, "training", validate_training)
    doc = _plotted(args, summary, "training points", summary.as_json(
        "points", ("gpu", "source", "model", "framework"), args.explain) if args.json else {})
    print(to_json(doc) if args.json else render_validation(summary, args.explain))
    return 0


def cmd_validate_inference(args: argparse.Namespace) -> int:
    from gpuarch.report.validation_text import render_inference_validation
    from gpuarch.validation.inference import validate_inference

    check_plot_flag(args)
    summary = _validated(args, "inference", validate_inference)
    doc = _plotted(args, summary, "serving figures", summary.as_json(
        "figures", ("metric", "gpu", "source", "model", "engine"), args.explain)
        if args.json else {})
    print(to_json(doc) if args.json else render_inference_validation(summary, args.explain))
    return 0


def cmd_validate_ops(args: argparse.Namespace) -> int:
    from gpuarch.report.validation_text import render_ops_validation
    from gpuarch.validation.ops import validate_ops

    summary = validate_ops(load_catalog(), path=args.file, kinds=tuple(args.kind))
    print(to_json(summary.as_json()) if args.json else render_ops_validation(summary))
    return 0


def _print_measured_kernels(args: argparse.Namespace, source: str, count_key: str,
                            rows: list[Any], summary: list[dict[str, object]],
                            render: Callable[[list[dict[str, object]]], str]) -> int:
    """A measured-kernel validation's JSON (its source, how many rows, the groups) or text."""
    doc = {"source": source, count_key: len(rows), "groups": summary}
    print(to_json(doc) if args.json else render(summary))
    return 0


def cmd_validate_moe_kernels(args: argparse.Namespace) -> int:
    from gpuarch.report.validation_text import render_moe_kernels
    from gpuarch.validation.moe_kernels import FILES, SOURCES, compare, summarize

    # the engines whose measured MoE layers are held (not SGLang's wide-EP path)
    check_choice("--moe-kernels", args.moe_kernels, tuple(FILES))
    rows = compare(load_catalog(), kernels=args.moe_kernels)
    return _print_measured_kernels(args, SOURCES[args.moe_kernels], "layers", rows,
                                   summarize(rows),
                                   lambda s: render_moe_kernels(s, args.moe_kernels))


def cmd_validate_gemm_kernels(args: argparse.Namespace) -> int:
    from gpuarch.report.validation_text import render_gemm_kernels
    from gpuarch.validation.gemm_kernels import SOURCE, compare, summarize

    rows = compare(load_catalog())
    return _print_measured_kernels(args, SOURCE, "gemms", rows, summarize(rows),
                                   render_gemm_kernels)


def cmd_validate_load(args: argparse.Namespace) -> int:
    from gpuarch.estimate.inference_config import SCHEDULES
    from gpuarch.estimate.simulate import check_requests
    from gpuarch.report.validation_text import render_load
    from gpuarch.validation.serving_load import (
        LOAD_REQUESTS,
        PROMPT_LENGTHS,
        compare_user_runs,
        load_prompt_lengths,
        load_runs,
        select_runs,
        summarize_load,
        validate_load,
    )

    requests = LOAD_REQUESTS if args.requests is None else args.requests
    check_requests(requests, "--requests")
    if args.schedule is not None:
        check_choice("--schedule", args.schedule, SCHEDULES)
    check_plot_flag(args)
    if args.data is not None:
        from gpuarch.validation.user_data import load_user_points

        if args.prompts is not None:
            raise GpuarchError("--prompts: draws the shipped runs' prompts from MLPerf's "
                               "dataset; a file's runs take their own input_len (spread by "
                               "input_len_cv where given)")
        runs = select_runs(load_user_points(args.data, "load"), args.match)
        rows = compare_user_runs(load_catalog(), runs, args.data.name, requests=requests,
                                 schedule=args.schedule)
        prompts: dict[str, Any] = {"drawn_from": "file", "source": None}
        title = (f"Your measured runs ({args.data.name}) beside the serving simulation of the "
                 "same deployment at each run's rate, each prompt the run's input_len")
    else:
        drawn = args.prompts or PROMPT_LENGTHS[0]
        check_choice("--prompts", drawn, PROMPT_LENGTHS)
        runs = select_runs(load_runs(), args.match)
        rows = validate_load(load_catalog(), requests=requests, schedule=args.schedule,
                             prompts=drawn, runs=runs)
        prompts = {"drawn_from": drawn,
                   "source": load_prompt_lengths().source if drawn == "dataset" else None}
        title = None
    summary = summarize_load(rows)
    if args.plot is not None:
        from gpuarch.report.plot import plot_load

        plot_load(rows, args.plot)
    if args.json:
        doc = {"runs": len(runs), "requests_per_replica": requests, "prompts": prompts,
               "rows": [{**dataclasses.asdict(r), "error": r.error} for r in rows],
               "summary": summary}
        if args.data is not None:
            doc = {"data": str(args.data), **doc}
        print(to_json(doc))
    else:
        print(render_load(rows, summary, prompts, title))
    return 0


def cmd_validate_gemm_ridge(args: argparse.Namespace) -> int:
    from gpuarch.report.validation_text import render_gemm_ridge
    from gpuarch.validation.gemm_ridge import SOURCE, compare, summarize

    rows = compare(load_catalog())
    return _print_measured_kernels(args, SOURCE, "gemms", rows, summarize(rows),
                                   render_gemm_ridge)


def cmd_validate_attention_kernels(args: argparse.Namespace) -> int:
    from gpuarch.report.validation_text import render_attention_kernels
    from gpuarch.validation.attention_kernels import (
        HEAD_DIM_FILE,
        MLA_KERNELS_1_0_FILE,
        SOURCE,
        load_context_rows,
        load_decode_rows,
        load_mla_rows,
        summarize,
    )

    # the files' rows, counted as read (summarize models each of them once)
    rows: list[Any] = [*load_mla_rows(), *load_mla_rows(MLA_KERNELS_1_0_FILE),
                       *load_decode_rows(), *load_context_rows(),
                       *load_context_rows(HEAD_DIM_FILE)]
    return _print_measured_kernels(args, SOURCE, "rows", rows, summarize(load_catalog()),
                                   render_attention_kernels)


def cmd_validate_gdn_kernels(args: argparse.Namespace) -> int:
    from gpuarch.report.validation_text import render_gdn_kernels
    from gpuarch.validation.gated_delta_kernels import (
        BACKWARD_SOURCE,
        SOURCE,
        compare_gated_delta,
        compare_gated_delta_backward,
        summarize,
    )

    catalog = load_catalog()
    rows = [*compare_gated_delta(catalog), *compare_gated_delta_backward(catalog)]
    return _print_measured_kernels(args, f"{SOURCE}; backward: {BACKWARD_SOURCE}", "passes",
                                   rows, summarize(rows), render_gdn_kernels)


def _print_banded(args: argparse.Namespace, module: Any, count: str,
                  render: Callable[[Any, Any], str]) -> int:
    """A measured-collective check by size band (``validation.collectives`` or
    ``validation.engine_all_reduce``: ``compare``, ``summarize``, ``band_errors``,
    ``SOURCE``), as JSON (the rows counted under ``count``) or ``render``'s text."""
    rows = module.compare(load_catalog())
    summary, overall = module.summarize(rows), module.band_errors(rows)
    doc = {"source": module.SOURCE, count: len(rows), "mean_abs_log_ratio_by_band": overall,
           "groups": summary}
    print(to_json(doc) if args.json else render(summary, overall))
    return 0


def cmd_validate_collectives(args: argparse.Namespace) -> int:
    from gpuarch.report.validation_text import render_collectives
    from gpuarch.validation import collectives

    return _print_banded(args, collectives, "collectives", render_collectives)


def cmd_validate_engine_all_reduce(args: argparse.Namespace) -> int:
    from gpuarch.report.validation_text import render_engine_all_reduce
    from gpuarch.validation import engine_all_reduce

    return _print_banded(args, engine_all_reduce, "all_reduces", render_engine_all_reduce)


def cmd_validate_power(args: argparse.Namespace) -> int:
    from gpuarch.report.validation_text import render_power_validation
    from gpuarch.validation.measured import runs_matching, select_runs
    from gpuarch.validation.power import (
        compare_serving,
        load_power_runs,
        load_serving_power,
        load_user_power_runs,
        serving_groups,
        serving_prompt_len,
        serving_summary,
        summary,
        validate_power,
    )

    texts = [m.lower() for m in args.match]
    table, configurations = load_serving_power()
    every = load_power_runs()
    if args.data is not None:  # the user's own metered runs instead of the shipped ones
        table, configurations, every = {}, (), load_user_power_runs(args.data)
    runs = runs_matching(every, args.match)
    chosen = [c for c in configurations
              if all(t in f"{c.model_id} {c.preset} {c.gpu} {table['source']}".lower()
                     for t in texts)]
    if not runs and not chosen:
        select_runs(every, args.match)  # raises, naming --match
    catalog = load_catalog()
    overhead = facility_of(args).node_overhead
    rows = validate_power(catalog, runs=runs, node_overhead=overhead)
    serving = compare_serving(catalog, chosen)
    doc = {"runs": [{**dataclasses.asdict(r), "error": r.error} for r in rows],
           **summary(rows),
           "serving": {"source": table.get("source_title"), "url": table.get("source_url"),
                       "prompt_len": serving_prompt_len(table) if table else None,
                       "configurations": [{**dataclasses.asdict(c.row),
                                           "prompt_tokens_per_s": c.prompt_tokens_per_s,
                                           "utilisation": c.utilisation,
                                           "measured_w_per_gpu": c.measured_w,
                                           "model_w_per_gpu": c.model_w, "error": c.error}
                                          for c in serving],
                       "groups": serving_groups(serving), **serving_summary(serving)}}
    doc["node_overhead"] = overhead
    print(to_json(doc) if args.json else render_power_validation(
        rows, doc, doc["serving"], overhead))
    return 0


def cmd_validate_moe_dispatch(args: argparse.Namespace) -> int:
    from gpuarch.report.validation_text import render_moe_dispatch
    from gpuarch.validation.moe_dispatch import FITTED_SOURCES, compare, source_errors, summarize

    rows = compare(load_catalog())
    overall, summary = source_errors(rows), summarize(rows)
    doc = {"kernels": len(rows), "fitted_sources": list(FITTED_SOURCES),
           "mean_abs_log_ratio_by_source": overall, "groups": summary}
    print(to_json(doc) if args.json else render_moe_dispatch(summary, overall))
    return 0


def cmd_validate_bands(args: argparse.Namespace) -> int:
    from gpuarch.validation.bands import compute_bands, load_bands, render_bands

    bands = compute_bands(load_catalog()) if args.fresh else load_bands()
    if args.json:
        print(to_json({k: b.as_json() for k, b in bands.items()}))
    else:
        print(render_bands(bands))
    return 0


def _selection_flags(p: argparse.ArgumentParser) -> None:
    """validate's --match and --worst: which compared points to show and summarise."""
    p.add_argument("--match", action="append", default=[], metavar="TEXT",
                   help="only points whose id, source, model, GPU, serving engine "
                        "(trtllm, vllm, sglang, lmdeploy, nim) or training framework "
                        "(megatron, fsdp, deepspeed, maxtext, meta) contains TEXT (case "
                        "ignored; repeat to require several); the statistics are over them")
    p.add_argument("--worst", type=at_least_one("--worst"), metavar="N",
                   help="only the N points with the largest absolute error")
    p.add_argument("--explain", action="store_true",
                   help="where each prediction's time goes (the estimate's breakdown), "
                        "under the table or as each row's 'explain' in --json")
    p.add_argument("--plot", type=Path, metavar="FILE",
                   help="also draw each compared figure's signed error as a strip per GPU, "
                        "the bound shaded (.png or .svg; needs matplotlib)")


def _data_flag(p: argparse.ArgumentParser, what: str, each: str = "") -> None:
    """validate's --data: a file of the user's own measured runs instead of the shipped ones
    (``each``: what a point of it gives, where the shipped format needs saying)."""
    p.add_argument("--data", "--file", dest="data", type=Path, metavar="FILE",
                   help=f"compare your own measured {what} runs instead of the published "
                        "ones: a TOML file of [[point]] tables in the shipped files' format"
                        + (f", each {each}" if each else "")
                        + " (docs/your-measurements.md); every point must be comparable "
                        "(--file, as validate ops names its measurements, works too)")


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 common: argparse.ArgumentParser) -> None:
    """Register validate."""
    val = sub.add_parser("validate", help="predicted vs published measurements")
    val_sub = val.add_subparsers(dest="what", metavar="WHAT", required=True)
    p = val_sub.add_parser("training", parents=[common],
                           help="training throughput against published results")
    p.set_defaults(handler=cmd_validate)
    _selection_flags(p)
    _data_flag(p, "training")
    p = val_sub.add_parser("inference", parents=[common],
                           help="inference TTFT, TPOT and throughput against published "
                           "results")
    p.set_defaults(handler=cmd_validate_inference)
    _selection_flags(p)
    _data_flag(p, "serving")
    p = val_sub.add_parser("load", parents=[common],
                           help="serving under load: MLPerf Inference's Llama 2 70B Server runs "
                           "(TTFT and TPOT means and 99th percentiles at a scheduled Poisson "
                           "rate) against the serving simulation")
    p.add_argument("--requests", type=int, default=None, metavar="N",
                   help="requests per replica each run is replayed with (default 20,000)")
    p.add_argument("--schedule", help="replay every run on this schedule: separate or mixed "
                   "(default: each run's own, mixed for TensorRT-LLM's in-flight batching)")
    p.add_argument("--prompts", metavar="dataset|mean",
                   help="each request's prompt: drawn from the dataset's 24,576 prompt "
                        "lengths (default, as LoadGen draws them) or every one the mean (222)")
    p.add_argument("--match", action="append", default=[], metavar="TEXT",
                   help="only runs whose id, source or GPU contains TEXT (case ignored; "
                        "repeat to require several); only those are simulated")
    p.add_argument("--plot", type=Path, metavar="FILE",
                   help="also draw TTFT, TPOT and latency against the rate, measured beside "
                        "simulated, to .png or .svg (a rate sweep of one deployment as "
                        "curves)")
    p.set_defaults(handler=cmd_validate_load)
    _data_flag(p, "load-test", "a run at a rate: rate_per_s and ttft_mean_s, tpot_p99_s, ...")
    p = val_sub.add_parser("ops", parents=[common],
                           help="single operators timed on a real GPU (GEMMs, attention, "
                           "grouped experts, elementwise) against the model's per-operator "
                           "times")
    p.add_argument("--file", type=Path, metavar="FILE",
                   help="a file written by scripts/device_op_check.py (default: the shipped "
                        "H200 SXM measurements)")
    p.add_argument("--kind", action="append", default=[], metavar="KIND",
                   help="only this kind of operator (gemm, gemm_decode, fp8_gemm, "
                        "grouped_gemm, serve_grouped, attention_fwd, ...; repeat)")
    p.set_defaults(handler=cmd_validate_ops)
    # the measured-kernel checks: no options beyond the common ones but moe-kernels' engine
    for name, handler, help_text in (
            ("moe-kernels", cmd_validate_moe_kernels,
             "TensorRT-LLM's (or vLLM's, SGLang's) MoE layers as NVIDIA's aiconfigurator "
             "measured them on H100, H200, B200 and GB200 against the serving model's MoE "
             "module"),
            ("gemm-kernels", cmd_validate_gemm_kernels,
             "how TensorRT-LLM's GEMMs slow down at short K in BF16, FP8 and NVFP4 on H100, "
             "H200, B200, GB200, B300 and GB300 (NVIDIA aiconfigurator's measurements) "
             "against the roofline"),
            ("gemm-ridge", cmd_validate_gemm_ridge,
             "how TensorRT-LLM's BF16 and FP8 GEMMs on H100, H200, B200 and GB200 run near "
             "the roofline's ridge point, where their math and their weights' stream take "
             "about as long (NVIDIA aiconfigurator's measurements), against the roofline"),
            ("attention-kernels", cmd_validate_attention_kernels,
             "TensorRT-LLM's attention kernels as NVIDIA's aiconfigurator measured them (MLA "
             "and grouped-query decode, context attention, head dim 64 against 128 on six "
             "GPUs) against the model's attention cores"),
            ("gdn-kernels", cmd_validate_gdn_kernels,
             "flash-linear-attention's Gated DeltaNet prefill kernels (Qwen3-Next, Qwen3.5) "
             "as FlashInfer's pull requests timed them on H100 and B300, against the model's "
             "forward scan"),
            ("collectives", cmd_validate_collectives,
             "NCCL's all-gather, reduce-scatter, all-reduce and all-to-all over 2-8 GPUs of "
             "A100, H100, H200, B200, B300, GB200 and GB300 as NVIDIA's aiconfigurator "
             "measured them, against the collectives model"),
            ("engine-all-reduce", cmd_validate_engine_all_reduce,
             "TensorRT-LLM's, vLLM's and SGLang's tensor-parallel all-reduce kernels over 2-8 "
             "GPUs of A100, H100, H200, B200, B300, GB200 and GB300 as NVIDIA's "
             "aiconfigurator measured them, against the serving model's one-shot kernel"),
            ("moe-dispatch", cmd_validate_moe_dispatch,
             "serving engines' MoE dispatch and combine kernels (TensorRT-LLM's NVLink "
             "all-to-all over EP 2-64 of GB200, DeepEP on H100 and over InfiniBand at EP "
             "16-256) against the model's one-shot all-to-all")):
        p = val_sub.add_parser(name, parents=[common], help=help_text)
        p.set_defaults(handler=handler)
        if name == "moe-kernels":
            p.add_argument("--moe-kernels", default="trtllm",
                           metavar="trtllm|trtllm-gen|vllm|sglang|sglang-deepep",
                           help="whose measured layers: TensorRT-LLM 1.3.0rc20's CUTLASS "
                                "backend (default) or its TRTLLM backend (GPT-OSS's MXFP4 "
                                "experts on Blackwell), vLLM 0.24.0's, SGLang 0.5.14's or "
                                "SGLang 0.5.10's wide-EP path (DeepEP, DeepGEMM), each "
                                "against the model with that engine's kernels")
    p = val_sub.add_parser("power", parents=[common],
                           help="node power metered during MLPerf Training runs (Llama 2 70B "
                           "LoRA on 8 B200 and on 64 H100) and GPU power of vLLM serving 18 "
                           "models on H100 and B200 (ML.ENERGY), against the power model at "
                           "each run's measured pace")
    p.add_argument("--match", action="append", default=[], metavar="TEXT",
                   help="only training runs whose id, source or GPU, and serving "
                        "configurations whose model or GPU, contain TEXT (case ignored; "
                        "repeat to require several)")
    p.add_argument("--data", "--file", dest="data", type=Path, metavar="FILE",
                   help="compare your own metered training runs instead of the shipped ones: "
                        "a TOML file of [[run]] tables in the shipped power.toml's format, "
                        "each with its meter's readings in a CSV file beside it (columns "
                        "node, time_ms, watts; docs/your-measurements.md)")
    p.add_argument("--node-overhead", type=number_from("--node-overhead", 0, 10),
                   metavar="FRACTION",
                   help="the node's power beyond its GPUs as a fraction of theirs, for the "
                        "training rows' model (default 0.35, the energy model's)")
    p.set_defaults(handler=cmd_validate_power)
    p = val_sub.add_parser("bands", parents=[common],
                           help="the model's error bands by regime (task, model kind, "
                           "architecture): what estimates report under 'error band'")
    p.add_argument("--fresh", action="store_true",
                   help="run both validations now instead of reading the shipped table")
    p.set_defaults(handler=cmd_validate_bands)
