"""``gpuarch advise train`` and ``gpuarch advise infer``: what to run a workload on."""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuarch.catalog.loader import load_catalog
from gpuarch.cli.checkpointing import add_checkpoint_flags, checkpoint_plan
from gpuarch.cli.estimate_cmds import (
    apply_engine_settings,
    declared_formats,
    model_checkpoint,
    resolve_model,
    sixteen_bit_kv,
)
from gpuarch.cli.estimate_flags import (
    SERVING_LAUNCH,
    TRAINING_LAUNCH,
    engine_choice,
    engine_flags,
    lengths_flag,
    model_flags,
    simulation_flags,
)
from gpuarch.cli.options import (
    add_facility_flags,
    at_least_one,
    check_plot_flag,
    facility_of,
    lazy_enum_value,
    name_list,
    non_negative,
    parse_quantity,
    positive_number,
)
from gpuarch.errors import GpuarchError
from gpuarch.report.launch import best_serving_launch, best_training_launch
from gpuarch.report.serialize import to_json, to_jsonable

__all__ = ["add_commands"]



def _price(text: str) -> tuple[str, float]:
    gpu, sep, usd = text.partition("=")
    try:
        value = float(usd)
    except ValueError:
        value = -1.0
    if not sep or not gpu.strip() or not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(
            f"--price: expected GPU=USD_PER_GPU_HOUR such as h100=2.5, got {text!r}")
    return gpu.strip(), value


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def _gpu_filter(catalog: Any, args: argparse.Namespace) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """--gpu names or architectures, --tier segments -> (product keys, tiers)."""
    from gpuarch.catalog.model import Tier

    tiers: list[Tier] = []
    for name in _split(args.tier) or ["datacenter"]:
        try:
            tiers.append(Tier(name.lower()))
        except ValueError:
            choices = ", ".join(t.value for t in Tier)
            raise GpuarchError(f"--tier: unknown tier {name!r} (choose from {choices})"
                               ) from None
    return _gpu_keys(catalog, "--gpu", args.gpu, tiers), tuple(tiers)


def _gpu_keys(catalog: Any, flag: str, values: list[str] | None,
              tiers: list[Any]) -> tuple[str, ...]:
    """GPU names or architectures (comma-separated, repeatable) -> product keys, each once;
    errors name ``flag``."""
    keys: list[str] = []
    for name in _split(values):
        arch = catalog.architecture_named(name)
        if arch is not None:
            found = [p.key for p in catalog.products_of(arch) if p.tier in tiers]
            if not found:
                raise GpuarchError(f"{flag}: architecture {arch.name} has no "
                                   f"{'/'.join(t.value for t in tiers)} GPU (add --tier)")
            keys += found
            continue
        try:
            keys.append(catalog.product(name).key)
        except GpuarchError as exc:
            raise GpuarchError(f"{flag}: {exc}") from None
    return tuple(dict.fromkeys(keys))


def _prices(catalog: Any, args: argparse.Namespace) -> Any:
    from gpuarch.advise.prices import load_prices

    overrides: dict[str, float] = {}
    for gpu, usd in args.price or []:
        try:
            overrides[catalog.product(gpu).key] = usd
        except GpuarchError as exc:
            raise GpuarchError(f"--price: {exc}") from None
    return load_prices(overrides=overrides, extra=args.prices)


def _progress(args: argparse.Namespace) -> Any:
    if args.json:
        return None
    from gpuarch.probe.bench import terminal_progress

    return terminal_progress()


def _answer(args: argparse.Namespace, search: Callable[[], Any],
            render: Callable[[Any, float], str],
            launch: Callable[[Any], Any] | None = None,
            after: Callable[[Any], tuple[str, Any, list[str]]] | None = None) -> int:
    """Run a search (after checking --plot, so a bad path fails at once), draw the front if
    asked, print text or JSON; with --launch, ``launch(advice)`` (a ``report.launch.Launch``
    for the best option, or a line saying why there is none) under it or as 'launch'.
    ``after(advice)`` adds a JSON key, its value and text lines (``--simulate``)."""
    check_plot_flag(args)
    start = time.perf_counter()
    advice = search()
    elapsed = time.perf_counter() - start
    if args.plot:
        from gpuarch.report.plot import plot_pareto

        plot_pareto(advice, args.plot)
    command: Any = launch(advice) if launch is not None and args.launch else None
    added = after(advice) if after is not None else None
    if args.json:
        doc = to_jsonable(advice)
        if args.launch:
            doc["launch"] = command if isinstance(command, str) else command.as_json()
        if added is not None:
            doc[added[0]] = to_jsonable(added[1])
        print(to_json(doc))
        return 0
    text = render(advice, elapsed)
    if added is not None:
        text = "\n".join([text, "", *added[2]])
    if args.launch:
        from gpuarch.report.estimate_text import launch_lines

        extra = [f"  launch        {command}"] if isinstance(command, str) \
            else ["", "option 1's command:", *launch_lines(command)]
        text = "\n".join([text, *extra])
    print(text)
    return 0


def cmd_advise_train(args: argparse.Namespace) -> int:
    from gpuarch.advise.train import Objective, TrainingSearch, advise_training
    from gpuarch.perf.precision import Precision
    from gpuarch.report.advise_text import render_training_advice

    catalog = load_catalog()
    shape = resolve_model(args)
    keys, tiers = _gpu_filter(catalog, args)
    precisions = []
    for name in _split(args.precision) or ["bf16", "fp8"]:
        try:
            precisions.append(Precision(name.lower()))
        except ValueError:
            raise GpuarchError(f"--precision: unknown precision {name!r} (choose from "
                               f"{', '.join(p.value for p in Precision)})") from None
    for flag in ("max_gpus", "seq_len", "top"):
        if getattr(args, flag) < 1:
            raise GpuarchError(f"--{flag.replace('_', '-')}: expected >= 1, got "
                               f"{getattr(args, flag)}")
    search = TrainingSearch(
        tokens=args.tokens, seq_len=args.seq_len, global_batch_tokens=args.global_batch_tokens,
        max_gpus=args.max_gpus, gpus=keys, tiers=tiers, budget_usd=args.budget_usd,
        deadline_days=args.deadline_days, max_power_kw=args.max_power_kw,
        objective=args.objective or Objective.TIME, precisions=tuple(precisions), top=args.top,
        assumed_network_gbit_s=args.network, mtp_layers=args.mtp_layers,
        lora_rank=args.lora_rank, lora_modules=args.lora_modules,
        packed_doc_len=args.packed_doc_len, pp_schedule=args.pp_schedule,
        optimizer_offload=args.optimizer_offload, offload_modules=args.offload_modules,
        checkpointing=checkpoint_plan(args),
        facility=facility_of(args), framework=args.framework or args.launch or "")
    return _answer(args, lambda: advise_training(catalog, shape, search,
                                                 _prices(catalog, args),
                                                 progress=_progress(args)),
                   render_training_advice,
                   lambda advice: best_training_launch(catalog, shape, search, advice))


def cmd_advise_infer(args: argparse.Namespace) -> int:
    from gpuarch.advise.infer import InferenceSearch, advise_inference
    from gpuarch.advise.train import Objective
    from gpuarch.estimate.mamba import default_state_precision
    from gpuarch.report.advise_text import render_inference_advice

    if args.cpu_offload_gb:
        raise GpuarchError(f"--cpu-offload-gb: {args.cpu_offload_gb:g} given, but the advisor "
                           "searches deployments whose weights fit on their GPUs; estimate "
                           "one with weights in host memory with 'gpuarch estimate infer "
                           "--cpu-offload-gb'")
    catalog = load_catalog()
    shape = resolve_model(args)
    keys, tiers = _gpu_filter(catalog, args)
    prefill_keys = _gpu_keys(catalog, "--prefill-gpu", args.prefill_gpu, list(tiers))
    checkpoint = _checkpoint(args.model, shape.is_moe)
    traffic, output_len_cv = _traffic(args)
    apply_engine_settings(args, args.engine or args.launch or "")
    search = InferenceSearch(
        input_len=args.input_len, output_len=args.output_len, rate=args.rate,
        concurrency=args.concurrency, ttft_ms=args.ttft_ms, tpot_ms=args.tpot_ms,
        ttft_p99_ms=args.ttft_p99_ms, tpot_p99_ms=args.tpot_p99_ms, traffic=traffic,
        min_throughput=args.min_throughput, max_gpus=args.max_gpus, gpus=keys, tiers=tiers,
        budget_usd_per_hour=args.budget_usd_per_hour, max_power_kw=args.max_power_kw,
        facility=facility_of(args),
        objective=args.objective or Objective.COST, top=args.top, executor=args.executor,
        schedule=args.schedule, scheduler_policy=args.scheduler_policy,
        window_kv_cache=args.window_kv_cache, decode_kv_reads=args.decode_kv_reads,
        mla_cache=args.mla_cache, moe_comm=args.moe_comm,
        moe_kernels=args.moe_kernels, moe_gemm_kernel=args.moe_gemm_kernel,
        all_reduce=args.all_reduce, moe_imbalance=args.moe_imbalance,
        redundant_experts=args.redundant_experts, two_batch_overlap=args.two_batch_overlap,
        fp8_context_attention=args.fp8_context_attention, nvls=not args.no_nvls,
        fp8_mla_decode=not args.no_fp8_mla_decode,
        adp_balance=args.adp_balance,
        cached_prefix=args.cached_prefix, output_len_cv=output_len_cv,
        disaggregated=args.disaggregated,
        prefill_gpus=prefill_keys,
        cuda_graph_batch_sizes=args.cuda_graph_batch_sizes,
        cuda_graph_max_context=args.cuda_graph_max_context,
        ssm_state_precision=args.ssm_state_precision
        or default_state_precision(shape, args.engine or args.launch or ""),
        fp8_scaling=args.fp8_scaling, engine=args.engine or args.launch or "", **checkpoint)
    after = None if traffic is None else _simulated(catalog, shape, search, traffic)
    return _answer(args, lambda: advise_inference(catalog, shape, search,
                                                  _prices(catalog, args),
                                                  progress=_progress(args)),
                   render_inference_advice,
                   lambda advice: best_serving_launch(args.launch, shape, search, advice,
                                                      args.model, model_checkpoint(args.model)),
                   after)


def _traffic(args: argparse.Namespace) -> tuple[Any, float]:
    """The replays' requests (``estimate.simulate.Traffic``; None when neither --simulate nor
    a percentile cap asks for replays), checked before the search, and the answers' spread
    the steady state takes (--lengths' where the file gives answers)."""
    from gpuarch.advise.simulated import require_rate
    from gpuarch.estimate.simulate import DEFAULT_REQUESTS, Traffic, check_requests

    lengths, output_len_cv = lengths_flag(args)
    percentile = args.ttft_p99_ms is not None or args.tpot_p99_ms is not None
    if args.simulate is None and not percentile:
        if any(v is not None for v in (args.seed, args.input_len_cv, args.arrivals,
                                       args.lengths)):
            raise GpuarchError("--seed/--input-len-cv/--arrivals/--lengths: they shape the "
                               "replays of --simulate or --ttft-p99-ms/--tpot-p99-ms, "
                               "neither given")
        return None, output_len_cv
    if args.simulate is not None:
        require_rate(args.rate)
        check_requests(args.simulate)
    traffic = Traffic(requests=DEFAULT_REQUESTS if args.simulate is None else args.simulate,
                      seed=args.seed or 0, arrivals=args.arrivals or "poisson",
                      input_len_cv=args.input_len_cv or 0.0, lengths=lengths)
    traffic.check(args.input_len, args.output_len, args.cached_prefix)
    return traffic, output_len_cv


def _simulated(catalog: Any, shape: Any, search: Any, traffic: Any
               ) -> Callable[[Any], tuple[str, Any, list[str]]]:
    """The top options' replays (``advise.simulated``) as JSON 'simulated' and a table:
    those the percentile caps kept them by, else each top option replayed (--simulate)."""
    def run(advice: Any) -> tuple[str, Any, list[str]]:
        from gpuarch.advise.simulated import simulate_options
        from gpuarch.report.advise_text import simulated_lines, tail_summary

        if not search.tail_capped:
            rows = simulate_options(catalog, shape, search, advice.top,
                                    requests=traffic.requests, traffic=traffic)
            return "simulated", rows, simulated_lines(rows, traffic.describe(search.rate))
        lines = [tail_summary(advice)] if advice.top else []
        if advice.simulated:
            lines += simulated_lines(advice.simulated, traffic.describe(search.rate), True)
        return "simulated", advice.simulated, lines
    return run


def _checkpoint(model: str, moe: bool) -> dict[str, Any]:
    """The search fields for the formats the model's checkpoint is stored in (a config.json's
    declaration, a preset's published checkpoint; none for a 16-bit one): the advisor
    searches the checkpoint as shipped too."""
    from gpuarch.perf.quant import QuantScheme

    declared = model_checkpoint(model)
    if declared is None:
        return {}
    weights, activations, kv, experts, expert_acts = declared_formats(declared, moe)
    return {"checkpoint_quant": QuantScheme(weights, activations,
                                            kv or sixteen_bit_kv(activations)),
            "checkpoint_expert_weights": experts,
            "checkpoint_expert_activations": expert_acts,
            "checkpoint_fp8_blocks": declared.fp8_blocks,
            "checkpoint_origin": declared.origin}


DEFAULT_MODEL = "llama-3.1-8b"
"""The built-in workload: pretraining a ~8B model on 1T tokens, serving it at 2k in / 256
out."""


def _common_flags(p: argparse.ArgumentParser, objective_help: str) -> None:
    model_flags(p, DEFAULT_MODEL)
    p.add_argument("--gpu", action="append", metavar="NAMES",
                   help="GPUs or architectures to search, comma-separated (h100,b200 or "
                   "hopper); default: every GPU of --tier")
    p.add_argument("--tier", action="append", metavar="TIERS",
                   help="datacenter (default), workstation, consumer, comma-separated")
    p.add_argument("--max-power-kw", type=positive_number("--max-power-kw"),
                   help="facility power cap (GPUs, node "
                   "overhead and PUE)")
    add_facility_flags(p)
    p.add_argument("--objective", type=lazy_enum_value("gpuarch.advise.train:Objective",
                                                       "--objective"), help=objective_help)
    p.add_argument("--price", type=_price, action="append", metavar="GPU=USD",
                   help="USD per GPU-hour for a GPU, over the built-in price list (repeat)")
    p.add_argument("--prices", type=Path, metavar="FILE",
                   help="a price file in the built-in list's format, added to it")
    p.add_argument("--top", type=int, default=10,
                   help="options to list (default 10, at most 1,000)")
    p.add_argument("--plot", type=Path, metavar="FILE",
                   help="draw the Pareto front (time vs cost, energy as colour) to .png/.svg")


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 common: argparse.ArgumentParser) -> None:
    """Register advise train / advise infer."""
    adv = sub.add_parser("advise", help="what to buy or rent, and how to configure it")
    adv_sub = adv.add_subparsers(dest="what", metavar="WHAT", required=True)

    p = adv_sub.add_parser("train", parents=[common],
                           help="GPU, count, parallelism and precision for a training run")
    _common_flags(p, "time (default), cost or energy")
    p.add_argument("--tokens", type=parse_quantity("--tokens"), default=1e12,
                   help="training tokens (1T, 300B, 2e12; default 1T)")
    p.add_argument("--seq-len", type=int, default=4096, help="default 4096")
    p.add_argument("--global-batch-tokens", type=parse_quantity("--global-batch-tokens"),
                   default=4 * 2**20, help="tokens per optimizer step (default 4M)")
    p.add_argument("--max-gpus", type=int, default=1024, help="default 1024")
    p.add_argument("--precision", action="append", metavar="LIST",
                   help="precisions to consider (default bf16,fp8; FP8 only where the "
                   "Tensor Cores run it)")
    p.add_argument("--network", type=positive_number("--network"), metavar="GBIT_S", dest="network",
                   help="assume this scale-out network per GPU (e.g. 400 for NDR InfiniBand) "
                   "for systems the catalog gives none (PCIe servers); "
                   "without it they are searched within one node")
    p.add_argument("--mtp-layers", type=non_negative("--mtp-layers"), default=0, metavar="N",
                   help="multi-token-prediction blocks trained with the model, on the last "
                        "pipeline stage (DeepSeek-V3 uses 1; default 0)")
    p.add_argument("--lora-rank", type=non_negative("--lora-rank"), default=0, metavar="R",
                   help="fine-tune with LoRA adapters of rank R beside frozen weights (as "
                        "estimate train --lora-rank); default 0, every weight trained")
    p.add_argument("--lora-modules", type=name_list, default=(), metavar="M,M",
                   help="with --lora-rank: linear_qkv, linear_proj, linear_fc1, linear_fc2 "
                        "(default all four)")
    p.add_argument("--packed-doc-len", type=non_negative("--packed-doc-len"), default=0,
                   metavar="L", help="sequences packed from documents of about L tokens, "
                                     "attention inside each (as estimate train)")
    p.add_argument("--optimizer-offload", type=float, default=0.0, metavar="F",
                   help="every option with a distributed optimizer (ZeRO 1-3) keeps the Adam "
                        "moments of this fraction (0-1) of its optimizer on the CPU (as "
                        "estimate train --optimizer-offload); default 0")
    p.add_argument("--offload-modules", type=name_list, default=(), metavar="M,M",
                   help="every option offloads what these modules keep to CPU memory (as "
                        "estimate train --offload-modules: attn_norm, qkv_linear, core_attn, "
                        "attn_proj, mlp_norm, expert_fc1, moe_act); default: the plans "
                        "that recompute nothing are also tried with the attention core's "
                        "and, for MoE, the experts' tensors offloaded")
    p.add_argument("--pp-schedule", default="1f1b", metavar="1f1b|zb1p|dualpipe|dualpipev",
                   help="pipeline schedule of every option with a pipeline (as estimate "
                        "train); only the layouts it can run are searched (default 1f1b)")
    p.add_argument("--budget-usd", type=positive_number("--budget-usd"), help="total cost cap")
    p.add_argument("--deadline-days", type=positive_number("--deadline-days"),
                   help="wall-clock cap")
    add_checkpoint_flags(p)
    p.add_argument("--framework", metavar="megatron|fsdp|deepspeed|maxtext|meta",
                   help="the training framework you run: each architecture's error band is "
                        "then the model's error on that family's published runs where it "
                        "has enough, and the nearest published runs prefer it (default: "
                        "--launch's, else every family's, pooled)")
    p.add_argument("--launch", type=engine_choice("--launch", TRAINING_LAUNCH),
                   metavar="megatron",
                   help="also print Megatron-LM's command for the best option")
    p.set_defaults(handler=cmd_advise_train)

    p = adv_sub.add_parser("infer", parents=[common],
                           help="GPU, parallelism, weight/KV precision and batch for serving")
    _common_flags(p, "cost per million output tokens (default), time (request latency) "
                  "or energy per million output tokens")
    p.add_argument("--input-len", type=int, default=2048, help="prompt tokens (default 2048)")
    p.add_argument("--output-len", type=int, default=256,
                   help="generated tokens (default 256)")
    load = p.add_mutually_exclusive_group()
    load.add_argument("--rate", type=positive_number("--rate"),
                      help="requests per second to sustain")
    load.add_argument("--concurrency", type=int, help="requests in flight to hold")
    p.add_argument("--ttft-ms", type=positive_number("--ttft-ms"),
                   help="time-to-first-token cap (on the steady state's mean)")
    p.add_argument("--tpot-ms", type=positive_number("--tpot-ms"),
                   help="time-per-output-token cap (on the steady state's mean)")
    p.add_argument("--ttft-p99-ms", type=positive_number("--ttft-p99-ms"), metavar="MS",
                   help="with --rate: a cap on the 99th percentile of each request's "
                        "time to first token: the ranked deployments are replayed under "
                        "random arrivals (--simulate N requests each, default 2,000) until "
                        "--top keep it")
    p.add_argument("--tpot-p99-ms", type=positive_number("--tpot-p99-ms"), metavar="MS",
                   help="with --rate: a cap on the 99th percentile of each request's time "
                        "per output token, as --ttft-p99-ms")
    p.add_argument("--min-throughput", type=positive_number("--min-throughput"),
                   help="output tokens/s over the whole deployment")
    engine_flags(p)
    p.add_argument("--max-gpus", type=int, default=64, help="default 64")
    p.add_argument("--budget-usd-per-hour", type=positive_number("--budget-usd-per-hour"),
                   help="hourly cost cap")
    p.add_argument("--disaggregated", action="store_true",
                   help="also search disaggregated deployments: a prefill pool beside each "
                   "decode pool (same formats; the decode GPU's type unless --prefill-gpu), "
                   "sized for the load and --ttft-ms (its model checked on two published "
                   "runs)")
    p.add_argument("--prefill-gpu", action="append", metavar="NAMES",
                   help="with --disaggregated: GPUs or architectures for the prefill pools, "
                   "comma-separated (e.g. h100 to prefill on H100 whatever decodes); "
                   "default: each decode GPU's own type")
    p.add_argument("--engine", metavar="trtllm|vllm|sglang|lmdeploy|nim",
                   help="the serving engine you run: each architecture's error band is then "
                        "the model's error on that engine's published runs where it has "
                        "enough, and the nearest published runs prefer it (default: "
                        "--launch's engine, else every engine's, pooled)")
    p.add_argument("--launch", type=engine_choice("--launch", SERVING_LAUNCH),
                   metavar="vllm|sglang|trtllm",
                   help="also print that engine's server command for the best option")
    p.add_argument("--simulate", type=at_least_one("--simulate"), metavar="N",
                   help="with --rate: replay each top option with N requests per replica "
                        "(10 to 200,000) arriving as a Poisson stream and print the median "
                        "and 99th percentile of its TTFT and TPOT beside the caps (the "
                        "ranking stays the steady state's means, unless --ttft-p99-ms or "
                        "--tpot-p99-ms is given)")
    simulation_flags(p)
    p.set_defaults(handler=cmd_advise_infer)
