"""Model commands: estimate train, roofline, validate training, inference, ops and bands.

Only the enums the parser needs are imported at start-up; the models load inside the
handlers, so catalog commands such as ``gpuarch show`` start as fast as before.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuarch.catalog.loader import load_catalog
from gpuarch.cli.checkpointing import add_checkpoint_flags, checkpoint_plan
from gpuarch.cli.options import (
    add_facility_flags,
    at_least_one,
    check_plot_flag,
    facility_of,
    lazy_enum_value,
    name_list,
    non_negative,
    number_or_word,
    parse_quantity,
    positive_number,
    size_list,
)
from gpuarch.errors import GpuarchError, check_choice
from gpuarch.report.launch import SERVING_ENGINES, TRAINING_ENGINES
from gpuarch.report.serialize import to_json

if TYPE_CHECKING:
    from gpuarch.validation.nearest import Setup
    from gpuarch.workloads.shape import TransformerShape

__all__ = ["add_commands"]

MOE_IMBALANCE_BOUND = ("(at most EP x min(experts per token, experts per rank) / experts per "
                       "token)")
"""The largest --moe-imbalance a layout allows (TransformerShape.check_expert_parallel)."""

_OVERRIDES = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab",
              "experts", "experts_per_token", "shared_experts", "moe_ffn_hidden", "moe_latent",
              "dense_layers", "sliding_window", "sliding_layers")


def names_file(name: str) -> bool:
    """Whether --model NAME is a config file (ends in .json, or is a file) rather than a
    preset's name; a name no file system takes (too long, a NUL byte) is a preset's."""
    if name.endswith(".json"):
        return True
    try:
        return Path(name).is_file()
    except (OSError, ValueError):
        return False


def resolve_model(args: argparse.Namespace) -> TransformerShape:
    """--model NAME|config.json, then the shape flags on top."""
    from gpuarch.workloads.hf import shape_from_hf_config
    from gpuarch.workloads.presets import preset

    name: str = args.model
    shape = shape_from_hf_config(Path(name)) if names_file(name) else preset(name).shape
    changes: dict[str, Any] = {k: getattr(args, k) for k in _OVERRIDES
                               if getattr(args, k) is not None}
    for key in ("ffn_kind", "qk_norm", "sandwich_norms", "attention_chunked"):
        if getattr(args, key, None) is not None:
            changes[key] = getattr(args, key)
    if changes.get("sliding_window") == 0:
        # no window left: a chunked model's layers attend to everything
        changes.setdefault("attention_chunked", False)
    if changes:
        try:
            shape = dataclasses.replace(shape, **changes)
        except GpuarchError as exc:
            raise GpuarchError(f"--{str(exc).replace('_', '-')}") from None
    return shape


def _calibrated(args: argparse.Namespace, catalog: Any, product: Any, system: Any
                ) -> tuple[Any, dict[str, str] | None]:
    """Efficiencies from --calibration FILE (and which parameters it measured)."""
    from gpuarch.perf.collectives import link_for
    from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY

    if not getattr(args, "calibration", None):
        return DEFAULT_EFFICIENCY, None
    from gpuarch.probe.calibration import apply_calibration, load_calibration

    cal = load_calibration(args.calibration)
    pcie = catalog.pcie_generation(product.pcie_generation or 0)
    intra, _ = link_for(product, system, pcie.x16_bandwidth_bytes_s if pcie else None)
    eff, notes = apply_calibration(cal, DEFAULT_EFFICIENCY, catalog, product,
                                   intra.bandwidth, intra.fabric.value)
    notes["file"] = f"{cal.path} ({cal.device_name}, {cal.created})"
    return eff, notes


def _gpu_and_system(args: argparse.Namespace, catalog: Any) -> tuple[Any, Any]:
    """--gpu and --system: the GPU (default: the system's) and the system, if given;
    --gpu-link pcie[N] replaces the GPUs' NVLink with their PCIe x16 links (the given
    system's, else the GPU's reference system's, node size and network kept)."""
    system = catalog.system(args.system) if args.system else None
    product = catalog.product(args.gpu) if args.gpu else (
        catalog.product(system.gpu) if system else None)
    if product is None:
        raise GpuarchError("--gpu: give a GPU (or --system)")
    return product, catalog.system_with_link(product, system, getattr(args, "gpu_link", None))


def _add_gpu_link(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu-link", metavar="pcie|pcieN",
                   help="the GPUs have no NVLink between them (PCIe cards without a bridge): "
                        "their collectives go over PCIe x16 at the card's generation, or at "
                        "slot generation N if lower (e.g. pcie4 for a Gen5 card in a Gen4 "
                        "slot); node size and network stay the system's")


def _gpus_per_node(args: argparse.Namespace, catalog: Any, product: Any, system: Any) -> int:
    """--gpus-per-node, else the given system's, else the GPU's reference system's (a GB200
    is 72 to an NVLink domain, not 8), else 8."""
    if args.gpus_per_node:
        return int(args.gpus_per_node)
    reference = system or catalog.system_for(product)
    return reference.gpus_per_node if reference else 8


def cmd_train(args: argparse.Namespace) -> int:
    from gpuarch.estimate.memory import Recompute
    from gpuarch.estimate.remedies import memory_remedies
    from gpuarch.estimate.training import estimate_training
    from gpuarch.estimate.training_config import TrainingConfig
    from gpuarch.estimate.training_layers import unbalanced_routing_load
    from gpuarch.perf.precision import sixteen_bit
    from gpuarch.report.estimate_text import render_training
    from gpuarch.units import Unit, to_si
    from gpuarch.validation.nearest import training_setup

    framework = training_framework(args)  # (a bad --framework is refused before costing)
    catalog = load_catalog()
    if args.measured is not None and args.as_point is None:
        raise GpuarchError("--measured: fills the figure of a point; give --as-point [ID]")
    shape = resolve_model(args)
    _check_train_model_flags(args, shape)
    product, system = _gpu_and_system(args, catalog)
    gpus_per_node = _gpus_per_node(args, catalog, product, system)
    counts = args.gpus if isinstance(args.gpus, tuple) else None
    if counts and args.launch:
        raise GpuarchError("--launch: gives one run's command; not with a list of --gpus")
    if args.plot:
        if not counts:
            raise GpuarchError("--plot: draws a scaling table; give --gpus a list (e.g. "
                               "64,128,256)")
        check_plot_flag(args)
    cfg = TrainingConfig(
        gpus=counts[0] if counts else args.gpus, seq_len=args.seq_len,
        global_batch=args.global_batch,
        micro_batch=args.micro_batch, tp=args.tp, pp=args.pp, cp=args.cp, ep=args.ep,
        etp=args.etp,
        vpp=args.vpp, sequence_parallel=args.sequence_parallel, zero=args.zero,
        dp_shard=args.dp_shard, outer_optimizer_sharding=args.outer_optimizer_sharding,
        tp_comm_overlap=args.tp_comm_overlap,
        fsdp_prefetch=args.fsdp_prefetch, reshard_after_forward=args.reshard_after_forward,
        moe_token_drop=args.moe_token_drop, cuda_graphs=args.cuda_graphs,
        cuda_graph_scope=args.cuda_graph_scope,
        dispatcher_wait_s=None if args.dispatcher_wait_us is None
        else to_si(args.dispatcher_wait_us, Unit.US),
        pp_edge_layers=args.pp_edge_layers, pp_layout=args.pp_layout,
        pp_schedule=args.pp_schedule, mtp_layers=args.mtp_layers,
        mtp_shared_weights=args.mtp_shared_weights, ep_dispatcher=args.ep_dispatcher,
        ep_comm_overlap=args.ep_comm_overlap,
        pp_comm_overlap=args.pp_comm_overlap, cp_comm_type=args.cp_comm_type,
        expert_launches=args.expert_launches,
        moe_imbalance=1.0 if args.moe_imbalance == "unbalanced" else args.moe_imbalance,
        attention_kernel=args.attention_kernel,
        recompute=args.recompute or Recompute.NONE,
        recompute_layers=args.recompute_layers,
        recompute_modules=args.recompute_modules,
        precision=args.precision or sixteen_bit(product), gpus_per_node=gpus_per_node,
        offload_layers=args.offload_layers, fp8_params=args.fp8_params,
        optimizer_offload=args.optimizer_offload,
        optimizer_offload_overlap=args.optimizer_offload_overlap,
        bf16_grads=args.bf16_grads, bf16_optimizer=args.bf16_optimizer,
        lora_rank=args.lora_rank, packed_doc_len=args.packed_doc_len,
        fp8_attention=args.fp8_attention,
        fp8_attention_scaling=args.fp8_attention_scaling, fp8_recipe=args.fp8_recipe,
        bf16_layers_start=args.bf16_layers_at_start, bf16_layers_end=args.bf16_layers_at_end,
        mtp_bf16=args.mtp_bf16,
        lora_modules=args.lora_modules)
    if system is None and max(counts or (cfg.gpus,)) > gpus_per_node:
        system = catalog.system_for(product)
    if args.as_point is not None:
        return _print_point(args, shape, product, cfg, counts,
                            lambda: estimate_training(catalog, shape, product, cfg,
                                                      system=system))
    eff, measured = _calibrated(args, catalog, product, system)
    if args.moe_imbalance == "unbalanced":
        cfg = dataclasses.replace(cfg, moe_imbalance=unbalanced_routing_load(shape, cfg.ep, eff))
    if counts:
        return _gpu_scaling(args, catalog, shape, product, system, cfg, counts, eff,
                            measured)
    est = estimate_training(catalog, shape, product, cfg, system=system,
                            tokens=args.tokens, price_per_gpu_hour=args.price_per_gpu_hour,
                            efficiency=eff, measured=measured,
                            checkpointing=checkpoint_plan(args), facility=facility_of(args))
    remedies = () if est.fits_in_memory else memory_remedies(
        catalog, shape, product, cfg, system=system, efficiency=eff)
    launch = None
    if args.launch:
        from gpuarch.report.launch import megatron_launch

        launch = megatron_launch(shape, cfg)
    return _print_estimate(args, est, "training", shape, product, measured,
                           "tokens_per_s_per_gpu", render_training, remedies,
                           training_setup(shape, product, cfg, framework), launch)


def training_framework(args: argparse.Namespace) -> str:
    """The framework family a training estimate names (``validation.bands.FRAMEWORKS``):
    --framework, else --launch's (megatron), else none ("": the pooled bands)."""
    from gpuarch.validation.bands import FRAMEWORKS

    return _named_family(args.framework, "--framework", tuple(FRAMEWORKS), args.launch)


def _named_family(given: str | None, flag: str, choices: tuple[str, ...],
                  launch: str | None) -> str:
    """The engine or framework an estimate names: ``given`` (checked against ``choices``,
    the error naming ``flag``), else --launch's, else "" (none)."""
    if given is not None:
        check_choice(flag, given, choices)
        return str(given)
    return str(launch or "")


def _print_point(args: argparse.Namespace, shape: TransformerShape, product: Any, cfg: Any,
                 counts: tuple[int, ...] | None, estimate: Callable[[], Any]) -> int:
    """estimate train --as-point: the run as a [[point]] of a measured-runs file, for
    validate training --data (docs/your-measurements.md), instead of the estimate; written
    only for a run ``estimate`` (the estimate's own call) does not refuse."""
    from gpuarch.validation.run_points import training_point

    _check_point_run(args, ((counts, "a list of --gpus"), (args.launch, "--launch"),
                            (args.calibration, "--calibration"), (args.plot, "--plot")))
    estimate()
    point = training_point(args.as_point, _preset_of(args), shape, product.key, cfg,
                           system=args.system, gpu_link=args.gpu_link,
                           unbalanced=args.moe_imbalance == "unbalanced")
    if args.measured is None:
        return _emit_points(args, [(point, "tokens_per_s_per_gpu = ...  (or step_time_s, "
                                           "tokens_per_s, tflops_per_gpu with "
                                           "tflops_convention, mfu): what you measured")])
    from gpuarch.validation.train_logs import read_training_log

    log = read_training_log(args.measured, cfg.global_batch)
    # (no framework field: a point's framework sets its TP-overlap default)
    point = {"id": point.pop("id"), "where": f"{args.measured.name}: {log.summary()}",
             **point, log.figure: round(log.value, 6)}
    return _emit_points(args, [(point, f"measured: {log.summary()}; compare with 'gpuarch "
                                       "validate training --data FILE'")])


def _measured_run(args: argparse.Namespace, weights: Any, kv: Any, moe: bool) -> Any:
    """--measured FILE... read (a tuple of ``validation.bench_results.BenchResult``, every
    run of every file, or None without it), and how the runs sent their requests set on
    ``args``: their rate, the requests held in flight (a continuous batch), or every request
    at once (an offline run of the ones that completed). For one run these flags may be
    given and must agree with the file; several runs must be of one kind and each keeps its
    own, so the flags are refused. Every run's mean lengths must match --input-len and
    --output-len, and the server settings a file saved (SGLang's) the deployment's flags:
    its formats (``weights``, ``kv``), parallelism and engine settings
    (``validation/server_settings.py``; ``moe``: the model routes to experts)."""
    if args.measured is None:
        if args.measured_kind is not None:
            raise GpuarchError("--measured-kind: keeps some runs of --measured, which is not "
                               "given")
        return None
    from gpuarch.estimate.inference_config import Batching
    from gpuarch.validation.bench_results import LENGTH_TOLERANCE, RUN_KINDS, read_bench_results
    from gpuarch.validation.server_settings import ServerFlags

    if args.as_point is None:
        raise GpuarchError("--measured: fills the figures of a point; give --as-point [ID]")

    # (a trtllm-bench report keeps no concurrency: the --batch given is the run's)
    concurrency = args.batch if isinstance(args.batch, int) and args.batch != NO_BATCH \
        else None
    # files of one name (AIPerf names every run's alike) are told apart by their path
    names = [path.name for path in args.measured]
    benches = tuple(b for path in args.measured for b in read_bench_results(
        path, concurrency, str(path) if names.count(path.name) > 1 else path.name))
    if args.measured_kind is not None:
        check_choice("--measured-kind", args.measured_kind, RUN_KINDS)
        benches = tuple(b for b in benches if b.kind == args.measured_kind)
        if not benches:
            raise GpuarchError(f"--measured-kind {args.measured_kind}: no run of the files "
                               "was sent so")
    server_flags = ServerFlags(
        schedule=args.schedule, kv=kv, weights=weights, moe=moe,
        gpus=args.gpus or args.tp * args.pp, tp=args.tp, pp=args.pp, ep=args.ep,
        max_batch_size=args.max_batch_size, two_batch_overlap=args.two_batch_overlap,
        redundant_experts=args.redundant_experts,
        deepep=args.moe_kernels == "sglang-deepep", speculative_tokens=args.speculative_tokens,
        max_num_tokens=args.max_num_tokens, executor=args.executor)
    for bench in benches:
        bench.check_server(server_flags)
        for flag, given, mean in (("--input-len", args.input_len, bench.input_len),
                                  ("--output-len", args.output_len, bench.output_len)):
            # (a length below 1 is the estimate's own error to give)
            if given >= 1 and abs(mean / given - 1) > LENGTH_TOLERANCE:
                raise GpuarchError(f"{flag} {given}: the requests of {bench.where} averaged "
                                   f"{mean:,.1f} tokens; give the run's mean (SGLang's random "
                                   "dataset draws lengths below --random-input-len and "
                                   "--random-output-len unless --random-range-ratio is 1)")
    kinds = {b.kind for b in benches}
    if len(kinds) > 1:
        raise GpuarchError("--measured: the runs mix "
                           + ", ".join(f"{b.where} {b.how_sent()}" for b in benches[:4])
                           + ("..." if len(benches) > 4 else "")
                           + "; give the runs of each kind (at a rate, at a concurrency, "
                           "all at once) to a command of their own, or keep one kind with "
                           "--measured-kind rate|concurrency|offline")
    first, given_batch = benches[0], args.batch != NO_BATCH
    if len(benches) > 1:
        for given, flag in ((args.rate is not None, "--rate"), (given_batch, "--batch"),
                            (args.batching is not None, "--batching"),
                            (bool(args.num_requests), "--num-requests")):
            if given:
                raise GpuarchError(f"{flag}: with {len(benches)} measured runs each keeps "
                                   "its own rate, concurrency or request count; leave it out")
    sent = first.how_sent()
    if args.arrivals is not None:
        for bench in benches:
            if bench.kind == "rate" and bench.arrivals != args.arrivals:
                raise GpuarchError(f"--arrivals {args.arrivals}: {bench.where} sent its "
                                   f"requests {bench.how_sent()} ({bench.arrivals} arrivals); "
                                   "leave --arrivals out to take the file's")
    if first.kind == "rate":
        if given_batch or (args.rate is not None
                           and abs(args.rate / first.rate_per_s - 1) > 0.005):
            raise GpuarchError(f"--measured: {first.where} sent its requests {sent}; give "
                               f"--rate {first.rate_per_s:g} (or leave --rate and --batch out)")
        args.rate = first.rate_per_s
        return benches
    wanted = first.max_concurrency if first.kind == "concurrency" else None
    if args.rate is not None or (given_batch and args.batch != wanted) \
            or args.batching not in (None, Batching.CONTINUOUS) \
            or (first.kind == "offline" and args.num_requests not in (0, first.completed)):
        flags = (f"--batch {wanted}" if wanted else
                 f"--batch max --num-requests {first.completed}")
        raise GpuarchError(f"--measured: {first.where} sent its requests {sent}; give {flags} "
                           "--batching continuous (or leave --batch, --rate and --batching "
                           "out)")
    args.batch, args.batching = wanted, Batching.CONTINUOUS
    if first.kind == "offline":
        args.num_requests = first.completed
    return benches


def _print_serving_point(args: argparse.Namespace, shape: TransformerShape, product: Any,
                         cfg: Any, sweep: bool, benches: Any, estimate: Callable[[], Any]
                         ) -> int:
    """estimate infer --as-point: the serving run as a [[point]] of a measured-runs file
    (with ``benches``, --measured, one point a measured run, its figures and spreads filled
    from the saved result); written only for a run ``estimate`` (the estimate's own call)
    does not refuse."""
    from gpuarch.validation.run_points import inference_point

    _check_point_run(args, ((sweep, "a list of --batch"), (args.launch, "--launch"),
                            (args.calibration, "--calibration"),
                            (args.prefill_gpus is not None, "--prefill-gpus"),
                            *((given, f"{flag} (a load run is replayed as a stream of "
                                      "requests of the run's lengths at its rate)")
                              for given, flag in ((args.arrivals == "trace", "--arrivals trace"),
                                                  (args.lengths is not None, "--lengths"))),
                            (args.slo_ttft_ms is not None or args.slo_tpot_ms is not None,
                             "--slo-ttft-ms/--slo-tpot-ms (a point holds what was measured)")))
    if not estimate().max_batch and args.rate is not None:
        raise GpuarchError(f"--as-point: {shape.name} does not fit on {product.name} with "
                           "these formats and parallelism (not even one sequence), so a "
                           "stream of its requests cannot be replayed")
    if benches is None:
        point = inference_point(args.as_point, _preset_of(args), shape, product.key, cfg,
                                system=args.system, gpu_link=args.gpu_link)
        if args.rate is None:
            hint = ("output_tokens_per_s = ...  (or output_tokens_per_s_per_gpu, ttft_s, "
                    "tpot_s, request_latency_s): what you measured")
        else:
            _as_load_run(point, args.rate, args.input_len_cv, args.arrivals)
            hint = ("ttft_mean_s = ...  tpot_p99_s = ...  (the mean, p50, p90 or p99 of "
                    "ttft, tpot or latency, in seconds): what your requests saw; compare "
                    "with 'gpuarch validate load --data FILE'")
        return _emit_points(args, [(point, hint)])
    names = _run_names(args.as_point, benches)
    written = []
    for name, bench in zip(names, benches, strict=True):
        run_cfg = cfg
        if bench.kind == "concurrency":
            run_cfg = dataclasses.replace(run_cfg, batch=bench.max_concurrency)
        elif bench.kind == "offline":
            run_cfg = dataclasses.replace(run_cfg, num_requests=bench.completed)
        if not args.output_len_cv and (bench.output_len_cv or 0) > _SPREAD_FLOOR:
            # the answers' spread the run had, as --output-len-cv gives it
            run_cfg = dataclasses.replace(run_cfg, output_len_cv=round(bench.output_len_cv, 3))
        point = inference_point(name, _preset_of(args), shape, product.key, run_cfg,
                                system=args.system, gpu_link=args.gpu_link)
        point = {"id": point.pop("id"), "where": bench.where, "framework": bench.tool, **point}
        if bench.kind == "rate":
            cv = args.input_len_cv
            if cv is None and (bench.input_len_cv or 0) > _SPREAD_FLOOR:
                cv = round(bench.input_len_cv, 3)
            _as_load_run(point, bench.rate_per_s, cv, bench.arrivals)
        figures = bench.figures()
        if not figures:
            raise GpuarchError(f"--measured: {bench.where} saved no figure a point takes "
                               "(mean, median, p90 or p99 of TTFT, TPOT or the end-to-end "
                               "latency)")
        point |= {key: round(value, 6) for key, value in figures.items()}
        command = "load" if bench.kind == "rate" else "inference"
        written.append((point, f"measured: {bench.tool}, {bench.completed:,} requests "
                               f"({bench.where}); compare with 'gpuarch validate {command} "
                               "--data FILE'"))
    return _emit_points(args, written)


def _emit_points(args: argparse.Namespace, points: list[tuple[dict[str, Any], str]]) -> int:
    """Print written points: ``[[point]]`` tables, each with its comment (what to measure,
    or where its figure came from), or with --json ``{"points": [...]}``."""
    from gpuarch.validation.run_points import point_toml

    if args.json:
        print(to_json({"points": [point for point, _ in points]}))
    else:
        print("\n".join(point_toml(point, comment) for point, comment in points), end="")
    return 0


def _as_load_run(point: dict[str, Any], rate: float, input_len_cv: float | None,
                 arrivals: str | None) -> None:
    """Turn a written serving point into a load run at ``rate``: no mode (the loader's
    default; the rate decides the batch), the rate, how the requests arrived where not the
    default Poisson stream, the prompts' spread where given."""
    from gpuarch.validation.serving_load import ARRIVALS

    del point["mode"]
    point["rate_per_s"] = rate
    if arrivals not in (None, ARRIVALS[0]):
        point["arrivals"] = arrivals
    if input_len_cv:
        point["input_len_cv"] = input_len_cv


def _run_names(base: str, benches: Any) -> list[str]:
    """Each measured run's point id: ``base`` for one run; for several, ``base`` with how
    the run sent its requests (``-r8`` at 8 requests/s, ``-c64`` at 64 in flight, ``-n1000``
    for 1,000 at once), numbered where two would be the same."""
    if len(benches) == 1:
        return [base]
    names = [base + (f"-r{b.rate_per_s:g}" if b.kind == "rate" else
                     f"-c{b.max_concurrency}" if b.kind == "concurrency" else
                     f"-n{b.completed}") for b in benches]
    repeated = {n for n in names if names.count(n) > 1}
    seen: dict[str, int] = {}
    out = []
    for n in names:
        if n in repeated:
            seen[n] = seen.get(n, 0) + 1
            n = f"{n}-{seen[n]}"
        out.append(n)
    return out


_SPREAD_FLOOR = 0.01
"""A saved run's lengths vary by more than this (standard deviation over mean) before its
spread is written to the point: fixed-length requests come back a token or two apart."""


def _preset_of(args: argparse.Namespace) -> str | None:
    """The preset --model names, or None for a config.json (its point gives the shape field
    by field)."""
    return None if names_file(args.model) else args.model


def _check_point_run(args: argparse.Namespace, excluded: Any) -> None:
    """--as-point's refusals: another kind of answer asked for, no run name."""
    for given, flag in excluded:
        if given:
            raise GpuarchError(f"--as-point: writes one run as a point; not with {flag}")
    if not args.as_point.strip():
        raise GpuarchError("--as-point: give the run a name (its point's id), or no value "
                           "for 'run'")


def _gpu_scaling(args: argparse.Namespace, catalog: Any, shape: TransformerShape,
                 product: Any, system: Any, cfg: Any, counts: tuple[int, ...], eff: Any,
                 measured: Any) -> int:
    """estimate train with a list of --gpus: the layout at each count, in a table or
    --json."""
    from gpuarch.estimate.scaling import scale_gpus
    from gpuarch.report.estimate_text import render_gpu_scaling
    from gpuarch.validation.bands import band_for

    result = scale_gpus(catalog, shape, product, cfg, counts, system=system, efficiency=eff,
                        tokens=args.tokens, price_per_gpu_hour=args.price_per_gpu_hour,
                        measured=measured, checkpointing=checkpoint_plan(args),
                        facility=facility_of(args))
    band = None if measured else band_for("training", shape, product,
                                          precision=cfg.precision.value,
                                          engine=training_framework(args))
    return _print_table(args, result, band, render_gpu_scaling, "plot_gpu_scaling")


def _print_table(args: argparse.Namespace, result: Any, band: Any,
                 render: Callable[[Any, Any], str], plot: str,
                 rows: Callable[[dict[str, Any]], None] | None = None) -> int:
    """A sweep's or scaling table's output: drawn with --plot (``report.plot``'s ``plot``),
    then --json (its document, the regime's error band under 'validation', ``rows`` adding
    to each row) or the text table."""
    if args.plot:
        from gpuarch.report import plot as plots

        getattr(plots, plot)(result, args.plot)
    if args.json:
        doc = result.as_json()
        doc["validation"] = band.as_json() if band else None
        if rows is not None:
            rows(doc)
        print(to_json(doc))
    else:
        print(render(result, band))
    return 0


def _print_estimate(args: argparse.Namespace, est: Any, task: str, shape: TransformerShape,
                    product: Any, measured: Any, metric: str,
                    render: Callable[..., str], remedies: Any = (),
                    setup: Setup | None = None, launch: Any = None,
                    simulation: Any = None) -> int:
    """Print an estimate (text or --json) with its error band under 'validation' and the
    published runs nearest ``setup`` under 'nearest_published': neither when --calibration
    replaced the fitted efficiencies they were measured with; a run that does not fit also
    gets the changes that would make it fit (``memory_remedies``); with ``launch``
    (``report.launch.Launch``), the framework's command for it under 'launch'; with
    ``simulation`` (``estimate.simulate.Simulation``), its figures under 'simulation'."""
    from gpuarch.report.estimate_text import launch_lines
    from gpuarch.validation.bands import band_for
    from gpuarch.validation.nearest import nearest

    band = None if measured else band_for(task, shape, product,
                                          precision=setup.precision if setup else None,
                                          engine=setup.engine if setup else "")
    near = [] if measured or setup is None else nearest(setup)
    if args.json:
        doc = est.as_json()
        doc["validation"] = band.as_json(getattr(est, metric), metric) if band else None
        doc["nearest_published"] = [f.as_json(d) for d, f in near]
        if not est.fits_in_memory:
            doc["memory_remedies"] = [r.as_json() for r in remedies]
        if launch is not None:
            doc["launch"] = launch.as_json()
        if simulation is not None:
            doc["simulation"] = simulation.as_json()
        print(to_json(doc))
    else:
        text = render(est, band, remedies, near)
        if simulation is not None:
            from gpuarch.report.estimate_text import simulation_lines

            text = "\n".join([text, "", *simulation_lines(simulation)])
        print(text if launch is None else "\n".join([text, "", *launch_lines(launch)]))
    return 0


def engine_flags(p: argparse.ArgumentParser) -> None:
    """The serving engine's properties, shared by estimate infer and advise infer."""
    p.add_argument("--executor", default="python", metavar="python|cpp",
                   help="the engine's executor loop: python (default: TensorRT-LLM's "
                        "PyTorch backend and engines like it spend host time per request "
                        "and expert layer each step, hidden behind the GPU's step until it "
                        "is longer; a dense model none) or cpp "
                        "(a C++ executor, e.g. TensorRT-LLM's TensorRT engines: none "
                        "modelled)")
    p.add_argument("--schedule", default="separate", metavar="separate|mixed",
                   help="continuous batching: new prompts prefilled in a pass of their own "
                        "between decode steps (separate, default; SGLang's default) or in "
                        "the same iteration as the running sequences' decode step (mixed: "
                        "TensorRT-LLM's in-flight batching, vLLM's V1 scheduler), which "
                        "adds that step to TTFT; --simulate replays the same schedule")
    p.add_argument("--scheduler-policy", default="guaranteed_no_evict",
                   metavar="guaranteed_no_evict|max_utilization",
                   help="continuous batching: admit a sequence while its whole prompt and "
                        "answer's KV cache fits (guaranteed_no_evict, TensorRT-LLM's default) "
                        "or while the tokens so far fit (max_utilization, as vLLM's paged "
                        "scheduler and NVIDIA's MLPerf runs): the batch that fits is then what "
                        "the running sequences' mean context fills")
    p.add_argument("--window-kv-cache", default="ring", metavar="ring|full",
                   help="a sliding-window layer's KV cache: ring (default: its window only, "
                        "as vLLM and SGLang keep it) or full (every position, as "
                        "TensorRT-LLM allocates unless KvCacheConfig.max_attention_window "
                        "lists the windows)")
    p.add_argument("--no-fp8-mla-decode", action="store_true",
                   help="latent attention (DeepSeek's MLA) in decode over an FP8 cache on "
                        "Blackwell computes in 16 bits, as TensorRT-LLM 1.0.0rc6's generation "
                        "kernel ran in NVIDIA aiconfigurator's tables (default: in FP8, as "
                        "its 1.2 and 1.3 kernels run)")
    p.add_argument("--decode-kv-reads", default="shared",
                   metavar="shared|per-query-head|chunked-per-query-head",
                   help="how decode attention reads a grouped-query model's KV cache: "
                        "shared (default: each KV head once a step for its query heads, as "
                        "GQA-aware kernels such as TensorRT-LLM's XQA and FlashInfer do), "
                        "per-query-head (once for every query head, as a multi-head kernel "
                        "does, the repeats from L2: TensorRT-LLM before v0.7, and up to 0.10 "
                        "for groups other than 8 query heads per KV head) or "
                        "chunked-per-query-head (only the chunked-attention layers so: "
                        "TensorRT-LLM 0.21 and later on Hopper, whose XQA refuses Llama 4's "
                        "chunked layers when max_seq_len is at least the chunk)")
    p.add_argument("--moe-comm", default="alltoall", metavar="alltoall|allgather",
                   help="expert dispatch when EP exceeds TP (data-parallel attention): "
                        "alltoall (default: each token to its top-k experts' GPUs and back, "
                        "as DeepEP or TensorRT-LLM on GB200 NVL72) or allgather (every GPU "
                        "gathers all ranks' tokens, outputs reduce-scattered: TensorRT-LLM "
                        "without multi-node NVLink)")
    p.add_argument("--moe-kernels", default="trtllm",
                   metavar="trtllm|vllm|sglang|sglang-deepep",
                   help="whose fused MoE kernels set an expert layer's fixed time per pass: "
                        "trtllm (default: TensorRT-LLM's, 26.6 us, 45 us on Blackwell, as "
                        "its measured layers put them), vllm or sglang (26.6 us on Hopper and "
                        "Blackwell alike); sglang-deepep: SGLang's wide-EP path (DeepEP), "
                        "whose block-scaled FP8 experts on Hopper run as DeepGEMM's grouped "
                        "GEMMs at their published rate")
    p.add_argument("--moe-gemm-kernel", default="native", metavar="native|ampere",
                   help="the routed experts' grouped GEMM kernels: native (default: the "
                        "GPU's own) or ampere (written for Ampere's synchronous Tensor Core "
                        "instructions, as TensorRT-LLM before 0.10 ran 16-bit experts on "
                        "Hopper: on Hopper and datacenter Blackwell 0.73 of the native "
                        "rate)")
    p.add_argument("--moe-imbalance", type=float, default=1.0, metavar="X",
                   help="routed tokens on the busiest expert-parallel rank over the mean "
                        "(default 1: balanced): its expert GEMMs, permutation and "
                        "all-to-alls carry X times the mean tokens, and the step waits for it "
                        + MOE_IMBALANCE_BOUND)
    p.add_argument("--redundant-experts", type=int, default=0, metavar="N",
                   help="redundant copies of busy experts spread over the EP ranks (EPLB: "
                        "SGLang's --ep-num-redundant-experts; default 0): experts + N slots, "
                        "which --ep must divide (DeepSeek-V3's 256 + 32 allow EP 72); each "
                        "GPU holds the weights of its share of the slots")
    p.add_argument("--two-batch-overlap", action="store_true",
                   help="run each expert layer as two micro-batches, one's all-to-all under "
                        "the other's computation (SGLang's --enable-two-batch-overlap); "
                        "needs --ep > 1 and --moe-comm alltoall")
    p.add_argument("--cached-prefix", type=int, default=0, metavar="N",
                   help="prompt tokens every request shares with one already in the KV "
                        "cache (a system prompt under prefix caching): not prefilled, their "
                        "KV cache held once per replica (default 0)")
    p.add_argument("--cpu-offload-gb", type=float, default=0.0, metavar="GIB",
                   help="GiB of each GPU's weights kept in host memory and copied over the "
                        "GPU's link to its CPU for every forward pass (vLLM's "
                        "--cpu-offload-gb; default 0)")
    p.add_argument("--output-len-cv", type=float, default=0.0, metavar="CV",
                   help="spread of the requests' output lengths (standard deviation over "
                        "mean, e.g. 1.25 for DeepSeek-R1's reasoning answers in MLPerf); "
                        "long requests stay in flight longer, so the batch holds more "
                        "context than --output-len suggests; in-flight batching only; "
                        "default 0: every request generates --output-len tokens")
    p.add_argument("--no-nvls", action="store_true",
                   help="tensor-parallel all-reduces as rings and trees only (NCCL with "
                        "NCCL_NVLS_ENABLE=0); by default an all-reduce inside an NVSwitch "
                        "node of Hopper or Blackwell GPUs runs as NVLink SHARP where NCCL's "
                        "tuner finds that faster")
    p.add_argument("--adp-balance", action="store_true",
                   help="with data-parallel attention (EP above TP) and continuous batching, "
                        "the engine holds context requests back so the ranks prefill together "
                        "(TensorRT-LLM's attention_dp_config enable_balance); by default each "
                        "rank schedules its own and a prefill pass waits for the busiest")
    p.add_argument("--fp8-context-attention", action="store_true",
                   help="prefill attention at the FP8 Tensor Core rate (TensorRT-LLM's FP8 "
                        "context FMHA, on when an FP8 or NVFP4 checkpoint's attention output "
                        "is quantized and the KV cache is FP8); default: the 16-bit rate")
    p.add_argument("--ssm-state-precision", metavar="fp32|bf16|fp16",
                   help="a hybrid model's recurrent (Mamba-2 or Gated DeltaNet) state between "
                        "steps: fp32 (default, "
                        "as SGLang's --mamba-ssm-dtype and vLLM 0.13+ keep NVIDIA's hybrids'), "
                        "bf16 or fp16 (vLLM --mamba-ssm-cache-dtype)")
    p.add_argument("--fp8-scaling", metavar="tensor|block",
                   help="how FP8 weights carry their scales: 'tensor' (one per tensor or "
                        "channel, NVIDIA ModelOpt's FP8 checkpoints) or 'block' (128 x 128 "
                        "weight blocks, DeepSeek-V3's own checkpoints; a fine-grained MoE's "
                        "block-scaled experts run slower, as TensorRT-LLM's measured layers "
                        "do); default: what the checkpoint declares, else 'tensor'")
    p.add_argument("--cuda-graph-batch-sizes", type=size_list("--cuda-graph-batch-sizes"),
                   default=(), metavar="LIST",
                   help="batch sizes the engine captures CUDA graphs at with padding on "
                        "(TensorRT-LLM's cuda_graph_config batch_sizes + enable_padding, e.g. "
                        "1,2,4,8,16,32,64,128,256,384,512,1024,2048,4096,8192): a decode step "
                        "runs the GEMMs and experts for the next size up; default: no padding")
    p.add_argument("--cuda-graph-max-context", type=int, default=0, metavar="N",
                   help="the longest context a captured CUDA graph covers: decode steps "
                        "with a sequence beyond it run eagerly, waiting on the host to "
                        "launch every kernel (vLLM before V1, 0.7 and earlier: "
                        "--max-seq-len-to-capture, 8192 by default); default: graphs cover "
                        "every context (TensorRT-LLM, vLLM V1, SGLang)")


def _gpu_counts(text: str) -> int | tuple[int, ...]:
    """--gpus for training: a count, or a comma-separated list of them (a scaling table)."""
    values = []
    for item in text.split(","):
        try:
            value = int(item.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"--gpus: expected a number or a comma-separated "
                                             f"list of them, got {item.strip()!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"--gpus: expected >= 1, got {value}")
        values.append(value)
    return values[0] if len(values) == 1 and "," not in text else tuple(values)


TRAINING_LAUNCH = TRAINING_ENGINES
SERVING_LAUNCH = SERVING_ENGINES
"""--launch's engines: report.launch's (a light module, no NumPy on --help)."""


def engine_choice(flag: str, choices: tuple[str, ...]) -> Callable[[str], str]:
    """An argparse type: one of ``choices``, else an error naming ``flag``, the choices and
    the nearest."""
    from gpuarch.errors import suggestion

    def parse(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(f"{flag}: expected one of {', '.join(choices)}, "
                                             f"got {text!r}{suggestion(text, choices)}")
        return text

    return parse


NO_BATCH = 0
"""--batch's value when it is not given (``max`` parses to None)."""

SWEEP = 0
"""In a --batch list, 'sweep': powers of two up to the largest batch that fits, then it
(``estimate.sweep.sweep_values``)."""


def _batch(text: str) -> int | tuple[int | None, ...] | None:
    """One batch (a number, or None for 'max'), or a tuple of them for a sweep: a
    comma-separated list, 'sweep' (``SWEEP``) standing for powers of two up to 'max'."""
    if "," not in text and text != "sweep":
        return _one_batch(text)
    return tuple(SWEEP if item.strip() == "sweep" else _one_batch(item.strip())
                 for item in text.split(","))


def _one_batch(text: str) -> int | None:
    if text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--batch: expected a number, 'max', 'sweep' or a "
                                         f"comma-separated list of them, got "
                                         f"{text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--batch: expected >= 1, got {value}")
    return value


def cmd_infer(args: argparse.Namespace) -> int:
    from gpuarch.estimate.inference import estimate_inference
    from gpuarch.estimate.inference_config import (
        MAX_PREFILL_TOKENS,
        Batching,
        InferenceConfig,
        fp8_scaling_of,
    )
    from gpuarch.estimate.remedies import serving_remedies
    from gpuarch.perf.kv_formats import kv_cache_run
    from gpuarch.perf.quant import (
        QuantFormat,
        QuantScheme,
        activations_run,
        in_sixteen_bit,
        sixteen_bit_format,
    )
    from gpuarch.report.estimate_text import render_inference
    from gpuarch.validation.nearest import serving_setup

    serving_engine(args)  # (a bad --engine is refused before any costing)
    catalog = load_catalog()
    shape = resolve_model(args)
    product, system = _gpu_and_system(args, catalog)
    checkpoint = _checkpoint_formats(args)
    expert_weights = args.expert_weight_precision
    # the GPU's 16-bit format: FP16 before Ampere, which has no BF16 (engines run BF16
    # checkpoints there in FP16); BF16 asked for by name stays, at the FP16 rate, noted
    sixteen = sixteen_bit_format(product)
    if checkpoint is not None:
        declared: tuple[Any, ...] = tuple(
            f if f is None else in_sixteen_bit(f, sixteen)
            for f in declared_formats(checkpoint, shape.is_moe))
        weights, default_activations, default_kv, declared_experts = declared
        default_activations = activations_run(product, default_activations)
        expert_weights = expert_weights or declared_experts
    else:
        weights = args.weight_precision or sixteen
        default_activations = activations_run(product, weights) \
            if weights is QuantFormat.FP8 or weights.is_float4 or weights.is_16bit \
            else sixteen
        default_kv = None
    activations = args.activation_precision or default_activations
    kv = args.kv_precision or default_kv or sixteen_bit_kv(activations, sixteen)
    # the format an engine keeps the KV cache in on this GPU (e.g. FP8 for an FP4 cache
    # asked of a Hopper), and why
    kv_run = kv_cache_run(catalog, product, kv)
    kv = kv_run.format
    bench = _measured_run(args, weights, kv, shape.is_moe)
    _check_load_flags(args)
    _check_model_flags(args, shape)
    lengths, output_len_cv = lengths_flag(args)
    sweep = isinstance(args.batch, tuple)
    cfg = InferenceConfig(
        input_len=args.input_len, output_len=args.output_len,
        # --rate: batch_for_rate's; a sweep: each of its batches in turn
        batch=None if args.rate is not None or sweep else args.batch,
        gpus=args.gpus or args.tp * args.pp, tp=args.tp, pp=args.pp, ep=args.ep,
        quant=QuantScheme(weights, activations, kv), expert_weights=expert_weights,
        expert_activations=args.expert_activation_precision,
        batching=args.batching or (Batching.CONTINUOUS if args.rate is not None
                                   else Batching.STATIC), chunk=args.chunk,
        max_num_tokens=MAX_PREFILL_TOKENS if args.max_num_tokens is None
        else args.max_num_tokens,
        kv_cache_fraction=args.kv_cache_fraction,
        max_batch_size=args.max_batch_size, speculative_tokens=args.speculative_tokens,
        acceptance_length=args.acceptance_length, executor=args.executor,
        schedule=args.schedule, scheduler_policy=args.scheduler_policy,
        window_kv_cache=args.window_kv_cache, decode_kv_reads=args.decode_kv_reads,
        fp8_mla_decode=not args.no_fp8_mla_decode, moe_comm=args.moe_comm,
        moe_kernels=args.moe_kernels, moe_gemm_kernel=args.moe_gemm_kernel,
        moe_imbalance=args.moe_imbalance,
        redundant_experts=args.redundant_experts, two_batch_overlap=args.two_batch_overlap,
        num_requests=args.num_requests, output_len_cv=output_len_cv,
        max_output_len=args.max_output_len,
        fp8_context_attention=args.fp8_context_attention, nvls=not args.no_nvls,
        fp8_scaling=args.fp8_scaling or fp8_scaling_of(
            checkpoint is not None and checkpoint.fp8_blocks),
        adp_balance=args.adp_balance,
        ssm_state_precision=args.ssm_state_precision or InferenceConfig.ssm_state_precision,
        cached_prefix=args.cached_prefix, cuda_graph_batch_sizes=args.cuda_graph_batch_sizes,
        cuda_graph_max_context=args.cuda_graph_max_context,
        cpu_offload_gib=args.cpu_offload_gb,
        gpus_per_node=_gpus_per_node(args, catalog, product, system),
        kv_cache_fallback=kv_run.reason)
    if args.engine_limits:
        from gpuarch.estimate.engine_limits import apply_limits

        cfg = apply_limits(shape, cfg, product.memory_bytes, args.engine_limits,
                           args.max_batch_size, args.max_num_tokens or 0)
    if args.as_point is not None:
        return _print_serving_point(args, shape, product, cfg, sweep, bench,
                                    lambda: estimate_inference(catalog, shape, product, cfg,
                                                               system=system))
    eff, measured = _calibrated(args, catalog, product, system)
    if args.launch and (sweep or args.prefill_gpus is not None):
        raise GpuarchError("--launch: gives one server's command; not with a --batch list or "
                           "the disaggregated estimate (--prefill-gpus)")
    if sweep:
        return _batch_sweep(args, catalog, shape, product, system, cfg, eff, measured,
                            checkpoint.origin if checkpoint else None)
    if args.prefill_gpus is not None:
        return _disaggregated(args, catalog, shape, product, system, cfg, eff)
    load = None
    if args.rate is not None:
        from gpuarch.estimate.load import batch_for_rate

        load = batch_for_rate(catalog, shape, product, cfg, args.rate, system=system,
                              efficiency=eff)
        cfg = dataclasses.replace(cfg, batch=load.batch)
    est = estimate_inference(catalog, shape, product, cfg, system=system, efficiency=eff,
                             measured=measured,
                             formats_origin=checkpoint.origin if checkpoint else None,
                             price_per_gpu_hour=args.price_per_gpu_hour,
                             facility=facility_of(args))
    if load is not None:
        est.assumptions["load"] = load.as_json()
    simulation = None
    if args.simulate is not None:
        from gpuarch.estimate.simulate import simulate_serving
        from gpuarch.units import Unit, optional_to_si

        # (--seed and --arrivals only where given: the library's defaults otherwise)
        given: dict[str, Any] = {
            k: v for k, v in (("seed", args.seed), ("arrivals", args.arrivals),
                              ("input_len_cv", args.input_len_cv), ("lengths", lengths),
                              ("ttft_slo_s", optional_to_si(args.slo_ttft_ms, Unit.MS)),
                              ("tpot_slo_s", optional_to_si(args.slo_tpot_ms, Unit.MS)))
            if v is not None}
        simulation = simulate_serving(catalog, shape, product, cfg, args.rate,
                                      requests=args.simulate, system=system, efficiency=eff,
                                      **given)
    remedies = () if est.fits_in_memory else serving_remedies(
        catalog, shape, product, cfg, system=system, efficiency=eff)
    launch = None
    if args.launch:
        from gpuarch.report.launch import model_reference, serving_launch

        launch = serving_launch(args.launch, shape, cfg, model_reference(args.model),
                                est.batch, checkpoint)
    return _print_estimate(args, est, "serving", shape, product, measured,
                           "output_tokens_per_s", render_inference, remedies,
                           serving_setup(shape, product, cfg, serving_engine(args)), launch,
                           simulation)


def serving_engine(args: argparse.Namespace) -> str:
    """The engine a serving estimate names (``validation.bands.ENGINES``): --engine, else
    --launch's, else none ("": the pooled bands and every engine's runs)."""
    from gpuarch.validation.bands import ENGINES

    return _named_family(args.engine, "--engine", tuple(ENGINES), args.launch)


def lengths_flag(args: argparse.Namespace) -> tuple[Any, float]:
    """--lengths FILE read (``estimate.simulate.RequestLengths``, or None without it), and
    the answers' spread the steady state takes: the file's, where it gives answers, else
    --output-len-cv."""
    if args.lengths is None:
        return None, args.output_len_cv
    from gpuarch.estimate.simulate import read_lengths

    lengths = read_lengths(args.lengths)
    if lengths.output is None:
        return lengths, args.output_len_cv
    if args.output_len_cv:
        raise GpuarchError("--output-len-cv: the answers' lengths come from --lengths; "
                           "leave it out")
    # the steady state's requests in flight as the file's answers spread
    return lengths, float(lengths.output.std() / lengths.output.mean())


def simulation_flags(p: argparse.ArgumentParser) -> None:
    """--seed, --input-len-cv, --arrivals and --lengths, which shape a --simulate replay
    (estimate infer's and advise infer's alike)."""
    p.add_argument("--seed", type=non_negative("--seed"), metavar="S",
                   help="with --simulate: the random stream's seed (default 0)")
    p.add_argument("--input-len-cv", type=float, metavar="CV",
                   help="with --simulate: prompts vary in length around --input-len, a gamma "
                        "spread of this standard deviation over mean (the uncached tokens "
                        "with --cached-prefix); a prefill pass then takes waiting prompts "
                        "while their tokens fit --max-num-tokens (default 0: one length)")
    p.add_argument("--arrivals", metavar="poisson|uniform|trace",
                   help="with --simulate: a Poisson stream (default), evenly spaced "
                        "arrivals (the steady state's view), or --lengths' arrival_s column "
                        "in order, its times scaled so that it arrives at --rate (trace)")
    p.add_argument("--lengths", metavar="FILE",
                   help="with --simulate: a CSV of requests (a header naming input_len, "
                        "output_len and/or arrival_s, then one request a row, e.g. from a "
                        "service's log); each simulated request takes a row at random (in "
                        "order with --arrivals trace), its means within 5%% of --input-len "
                        "and --output-len (the answers' spread then sets the steady state's "
                        "--output-len-cv)")


def _batch_sweep(args: argparse.Namespace, catalog: Any, shape: TransformerShape,
                 product: Any, system: Any, cfg: Any, eff: Any, measured: Any,
                 origin: str | None) -> int:
    """estimate infer with a list of batches: one estimate each, the frontier of output per
    GPU against speed per user marked, in a table or --json, drawn with --plot."""
    from gpuarch.estimate.sweep import sweep_batches
    from gpuarch.report.estimate_text import render_batch_sweep
    from gpuarch.validation.bands import band_for
    from gpuarch.validation.nearest import serving_setup

    check_plot_flag(args)
    result = sweep_batches(catalog, shape, product, cfg, args.batch, system=system,
                           efficiency=eff, measured=measured, formats_origin=origin,
                           price_per_gpu_hour=args.price_per_gpu_hour,
                           facility=facility_of(args))
    setup = serving_setup(shape, product, cfg, serving_engine(args))
    band = None if measured else band_for("serving", shape, product,
                                          precision=setup.precision, engine=setup.engine)

    def each_band(doc: dict[str, Any]) -> None:  # each batch's likely range
        for point, entry in zip(result.points, doc["sweep"], strict=True):
            entry["validation"] = band.as_json(point.estimate.output_tokens_per_s,
                                               "output_tokens_per_s") if band else None

    return _print_table(args, result, band, render_batch_sweep, "plot_batch_sweep",
                        each_band)


def _disaggregated(args: argparse.Namespace, catalog: Any, shape: TransformerShape,
                   product: Any, system: Any, cfg: Any, eff: Any) -> int:
    """estimate infer with --prefill-gpus: prefill and decode on separate pools."""
    from gpuarch.estimate.disagg import PrefillPool, estimate_disaggregated
    from gpuarch.estimate.inference_config import Batching
    from gpuarch.perf.kv_formats import kv_cache_run
    from gpuarch.report.estimate_text import render_disaggregated

    if args.num_requests:
        raise GpuarchError("--prefill-gpus and --num-requests: the disaggregated estimate "
                           "is a steady state")
    if args.batching is Batching.STATIC:
        raise GpuarchError("--prefill-gpus: decode workers batch continuously (requests "
                           "arrive from the prefill pool); drop --batching static")
    prefill_product = prefill_system = None
    if args.prefill_gpu:
        try:
            prefill_product = catalog.product(args.prefill_gpu)
        except GpuarchError as exc:
            raise GpuarchError(f"--prefill-gpu: {exc}") from None
        prefill_system = catalog.system_for(prefill_product)
        if prefill_product.key != product.key and system is None:
            system = catalog.system_for(product)  # the decode end's network
        # both pools hold the cache: the format the prefill GPU writes and sends
        run = kv_cache_run(catalog, prefill_product, cfg.quant.kv_cache)
        if run.reason:
            cfg = dataclasses.replace(
                cfg, quant=dataclasses.replace(cfg.quant, kv_cache=run.format),
                kv_cache_fallback="; ".join(filter(None, (cfg.kv_cache_fallback,
                                                          run.reason))))
    pool = PrefillPool(gpus=args.prefill_gpus, tp=args.prefill_tp or args.tp,
                       ep=args.prefill_ep or 1, product=prefill_product,
                       system=prefill_system)
    est = estimate_disaggregated(catalog, shape, product, cfg, pool, rate=args.rate,
                                 system=system, efficiency=eff)
    if args.json:
        doc = est.as_json()
        doc["validation"] = None  # no published disaggregated figures to band it with
        print(to_json(doc))
    else:
        print(render_disaggregated(est))
    return 0


def _check_train_model_flags(args: argparse.Namespace, shape: TransformerShape) -> None:
    """estimate train: the expert layers' flags are refused by name on a model without
    routed experts, and --cp-comm-type without context parallelism, rather than ignored
    (after their values are checked, so a misspelt value is named as such first)."""
    from gpuarch.estimate.training_config import CP_COMM_TYPES, EP_DISPATCHERS, EXPERT_LAUNCHES

    check_choice("--ep-dispatcher", args.ep_dispatcher, EP_DISPATCHERS)
    check_choice("--expert-launches", args.expert_launches, EXPERT_LAUNCHES)
    check_choice("--cp-comm-type", args.cp_comm_type, CP_COMM_TYPES)
    if not shape.is_moe:
        given = [flag for flag, on in (
            ("--etp", bool(args.etp)), ("--moe-token-drop", args.moe_token_drop),
            ("--dispatcher-wait-us", args.dispatcher_wait_us is not None),
            ("--ep-dispatcher", args.ep_dispatcher != "alltoall"),
            ("--expert-launches", args.expert_launches != "per-expert"),
            ("--moe-imbalance", args.moe_imbalance != 1.0),
            ("--ep-comm-overlap", args.ep_comm_overlap)) if on]
        if given:
            raise GpuarchError(f"{given[0]}: applies to a mixture-of-experts model's expert "
                               f"layers; {shape.name} has no routed experts")
    if args.cp_comm_type != "p2p" and (args.cp or 1) == 1:
        raise GpuarchError(f"--cp-comm-type: sets how context-parallel ranks exchange keys "
                           f"and values; give --cp > 1 (got {args.cp_comm_type} without it)")


def _check_model_flags(args: argparse.Namespace, shape: TransformerShape) -> None:
    """Flags that shape a kind of model this one is not (experts, latent attention,
    sliding windows, grouped KV heads) are refused by name rather than ignored."""
    moe_flags = [flag for flag, given in (
        ("--moe-imbalance", args.moe_imbalance != 1.0), ("--adp-balance", args.adp_balance),
        ("--moe-comm", args.moe_comm != "alltoall")) if given]
    if moe_flags and not shape.is_moe:
        raise GpuarchError(f"{moe_flags[0]}: applies to a mixture-of-experts model; "
                           f"{shape.name} has no routed experts")
    if args.no_fp8_mla_decode and shape.mla is None:
        raise GpuarchError(f"--no-fp8-mla-decode: sets how latent attention decodes; "
                           f"{shape.name} has no multi-head latent attention")
    if args.window_kv_cache != "ring" and not shape.windowed_layers:
        raise GpuarchError(f"--window-kv-cache: sets what sliding-window layers keep; "
                           f"{shape.name} has no sliding-window layers")
    if args.decode_kv_reads != "shared" and (shape.mla is not None
                                             or shape.n_kv_heads >= shape.heads):
        raise GpuarchError(f"--decode-kv-reads: sets how grouped-query decode reads a KV "
                           f"head shared by several query heads; {shape.name} has "
                           + ("latent attention" if shape.mla is not None
                              else "a KV head per query head"))
    if args.decode_kv_reads == "chunked-per-query-head" and not shape.attention_chunked:
        raise GpuarchError(f"--decode-kv-reads chunked-per-query-head: reads the "
                           f"chunked-attention layers' cache per query head; {shape.name} has "
                           "no chunked-attention layers (per-query-head for every layer)")


def _check_load_flags(args: argparse.Namespace) -> None:
    """--batch or --rate, one of them; --rate means a steady stream: continuous batching."""
    from gpuarch.estimate.inference_config import Batching

    if args.prefill_gpus is None and (args.prefill_tp or args.prefill_ep or args.prefill_gpu):
        raise GpuarchError("--prefill-tp/--prefill-ep/--prefill-gpu: they shape the prefill "
                           "pool of --prefill-gpus, which is not given")
    if (args.batch == NO_BATCH) == (args.rate is None):
        raise GpuarchError("--batch or --rate: give one of them (sequences decoded "
                           "together, or requests per second arriving)")
    if isinstance(args.batch, tuple) and args.prefill_gpus is not None:
        raise GpuarchError("--batch: a list of batches sweeps one deployment; the "
                           "disaggregated estimate (--prefill-gpus) takes one batch")
    if args.plot and not isinstance(args.batch, tuple):
        raise GpuarchError("--plot: draws a batch sweep; give --batch a list (e.g. "
                           "1,8,64,max) or 'sweep'")
    if args.simulate is None and any(
            v is not None for v in (args.arrivals, args.seed, args.input_len_cv, args.lengths,
                                    args.slo_ttft_ms, args.slo_tpot_ms)):
        raise GpuarchError("--arrivals/--seed/--input-len-cv/--lengths/--slo-*: they shape "
                           "the simulation of --simulate, which is not given")
    if args.rate is None:
        if args.simulate is not None:
            raise GpuarchError("--simulate: replays requests arriving at a rate; give --rate")
        return
    if args.simulate is not None and args.prefill_gpus is not None:
        raise GpuarchError("--simulate: simulates one aggregated deployment; not with the "
                           "disaggregated estimate (--prefill-gpus)")
    if args.batching is Batching.STATIC:
        raise GpuarchError("--rate: a stream of requests is served with --batching "
                           "continuous (the default with --rate), not static")
    if args.num_requests:
        raise GpuarchError("--rate and --num-requests: give one (a steady stream, or an "
                           "offline run of N requests)")


def declared_formats(declared: Any, moe: bool) -> tuple[Any, Any, Any, Any]:
    """A checkpoint's declared formats (``hf_quant.CheckpointFormats``) as QuantFormats:
    (weights, activations, KV cache or None, the routed experts' weights or None). A model
    without routed experts takes a declared expert format (MXFP4) for all of it."""
    from gpuarch.perf.quant import QuantFormat

    experts = QuantFormat(declared.expert_weights) if declared.expert_weights else None
    weights = QuantFormat(declared.weights) if moe or experts is None else experts
    kv = QuantFormat(declared.kv_cache) if declared.kv_cache else None
    return weights, QuantFormat(declared.activations), kv, experts if moe else None


def sixteen_bit_kv(activations: Any, sixteen: Any = None) -> Any:
    """The KV-cache format when none is given: the activations' where they are 16-bit, else
    ``sixteen`` (the GPU's 16-bit format; BF16 when not given)."""
    from gpuarch.perf.quant import QuantFormat

    if activations in (QuantFormat.FP16, QuantFormat.BF16):
        return activations
    return sixteen or QuantFormat.BF16


def _checkpoint_formats(args: argparse.Namespace) -> Any:
    """The formats the model's checkpoint is stored in, unless --weight-precision is given
    (then the flags alone decide)."""
    return None if args.weight_precision is not None else model_checkpoint(args.model)


def model_checkpoint(name: str) -> Any:
    """What --model's checkpoint declares (``hf_quant.CheckpointFormats``): a config.json's
    quantization_config (or ModelOpt's hf_quant_config.json beside it), a preset's published
    checkpoint's; None for a 16-bit checkpoint."""
    from gpuarch.workloads.hf_quant import checkpoint_formats
    from gpuarch.workloads.presets import preset

    if names_file(name):
        return checkpoint_formats(Path(name))
    return preset(name).checkpoint


def model_flags(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """--model and the shape overrides (required unless ``default``)."""
    p.add_argument("--model", required=default is None, default=default,
                   help="a preset (llama-3.1-70b, gpt3-175b, mixtral-8x7b, ...) or a local "
                   "Hugging Face config.json" + (f" (default {default})" if default else ""))
    for name in _OVERRIDES:
        p.add_argument(f"--{name.replace('_', '-')}", type=int, dest=name,
                       help="override the model's " + name.replace("_", " "))
    p.add_argument("--ffn-kind", type=lazy_enum_value("gpuarch.workloads.shape:FfnKind",
                                                      "--ffn-kind"),
                   help="gelu, swiglu, geglu or relu2")
    p.add_argument("--qk-norm", type=lazy_enum_value("gpuarch.workloads.shape:QkNorm",
                                                     "--qk-norm"),
                   help="query-key norms: none, head (each head's, Qwen3 and Gemma 3) or "
                        "full (the whole projection's, OLMo 2)")
    p.add_argument("--sandwich-norms", action=argparse.BooleanOptionalAction, default=None,
                   help="norms after the attention and MLP too, four a layer (Gemma 2 and "
                        "3); --no-sandwich-norms for two")
    p.add_argument("--attention-chunked", action=argparse.BooleanOptionalAction, default=None,
                   help="the window layers attend within fixed chunks of --sliding-window "
                        "positions (Llama 4), not to the last ones; --no-attention-chunked "
                        "for a sliding window")


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 common: argparse.ArgumentParser) -> None:
    """Register estimate (train and infer)."""
    est = sub.add_parser("estimate", help="estimate a training step or an LLM serving request")
    est_sub = est.add_subparsers(dest="what", metavar="WHAT", required=True)
    p = est_sub.add_parser("train", parents=[common],
                           help="one training step: time, memory, MFU, bottleneck")
    model_flags(p)
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--global-batch", type=int, required=True, help="sequences per step")
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--gpu", help="GPU name (default: the system's GPU)")
    p.add_argument("--gpus", type=_gpu_counts, required=True,
                   help="GPUs in all; a comma-separated list (e.g. 64,128,256,512) gives a "
                        "scaling table: the layout and global batch kept, data parallelism "
                        "growing")
    p.add_argument("--plot", type=Path, metavar="FILE",
                   help="with a --gpus list: draw tokens/s against GPUs beside the ideal "
                        "line, to .png or .svg")
    p.add_argument("--gpus-per-node", type=int,
                   help="GPUs that share one NVLink domain; beyond it traffic takes the "
                        "network (default: the system's, else the GPU's reference "
                        "system's, else 8; on a GB200/GB300 NVL72 rack, 4 prices its "
                        "compute trays talking over InfiniBand, as when multi-node NVLink "
                        "is not set up)")
    p.add_argument("--system", help="reference system (see 'gpuarch systems')")
    _add_gpu_link(p)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--cp", type=int, default=1)
    p.add_argument("--ep", type=int, default=1)
    p.add_argument("--etp", type=int, default=0,
                   help="expert tensor parallelism: GPUs each expert's width is split over "
                        "(default: --tp; 1 lays the expert group over the TP ranks too, as "
                        "Megatron's --expert-tensor-parallel-size 1)")
    p.add_argument("--vpp", type=int, default=1, help="interleaved virtual stages per GPU")
    p.add_argument("--sequence-parallel", action="store_true")
    p.add_argument("--tp-comm-overlap", action="store_true",
                   help="overlap tensor-parallel communication with GEMMs")
    p.add_argument("--zero", type=int, default=1, help="ZeRO / distributed-optimizer stage")
    p.add_argument("--dp-shard", type=int, default=0, metavar="N",
                   help="hybrid sharding (FSDP's HSDP, Megatron's --num-distributed-optimizer-"
                        "instances): ZeRO shards over groups of N data-parallel ranks, e.g. a "
                        "node's, and the groups' gradient shards are all-reduced across them "
                        "(default: shard over all DP x CP ranks)")
    p.add_argument("--outer-optimizer-sharding", action="store_true",
                   help="with --dp-shard and --zero 3: the optimizer state sharded over all "
                        "DP x CP ranks, weights and gradients over the group (Megatron-FSDP's "
                        "Hybrid-FSDP, --outer-dp-sharding-strategy optim)")
    p.add_argument("--fsdp-prefetch", action="store_true",
                   help="with --zero 3: parameters gathered a layer ahead and overlapped with "
                        "compute (Megatron-FSDP); without it a fixed share of the ZeRO-3 "
                        "traffic is exposed")
    p.add_argument("--no-reshard-after-forward", dest="reshard_after_forward",
                   action="store_false",
                   help="with --zero 3: each layer's gathered parameters kept from its forward "
                        "to its backward (PyTorch FSDP2's reshard_after_forward=False): one "
                        "all-gather a micro-batch instead of two, the weights held whole")
    p.add_argument("--pp-edge-layers", action="store_true",
                   help="the first and last pipeline stages hold one layer fewer, counting the "
                        "embedding and the loss as a layer each (Megatron's account_for_"
                        "embedding/loss_in_pipeline_split)")
    p.add_argument("--pp-layout", default="", metavar="LAYOUT",
                   help="what each virtual pipeline stage holds, in Megatron's notation "
                        "(--pipeline-model-parallel-layout): E embedding, t layer, m MTP "
                        "block, L loss, | between stages, X*n and (...)*n repeat; e.g. "
                        "'Et*4|(t*4|)*14tmL' for DeepSeek-V3 at PP 4 x VPP 4; for a hybrid "
                        "model, its block pattern cut by | into the stages (newer "
                        "Megatron's --hybrid-layer-pattern)")
    p.add_argument("--pp-schedule", default="1f1b", metavar="1f1b|zb1p|dualpipe|dualpipev",
                   help="pipeline schedule (default 1f1b, interleaved with --vpp > 1; "
                        "zb1p: zero-bubble ZB-H1, weight gradients deferred into the "
                        "bubble; dualpipe: DeepSeek's "
                        "bidirectional schedule, two copies of the weights, even --pp, at "
                        "least 2 x PP micro-batches; dualpipev: its V-shaped half, --vpp 2)")
    p.add_argument("--mtp-layers", type=non_negative("--mtp-layers"), default=0, metavar="N",
                   help="multi-token-prediction blocks trained with the model (Megatron "
                        "--mtp-num-layers; DeepSeek-V3 uses 1): each a layer, a projection "
                        "and a pass through the shared head, on the last stage unless "
                        "--pp-layout places it")
    p.add_argument("--mtp-shared-weights", action="store_true",
                   help="the MTP depths run one block whose weights they share (Megatron "
                        "--mtp-use-repeated-layer; Nemotron 3 Super trains two depths so)")
    p.add_argument("--moe-token-drop", action="store_true",
                   help="MoE routing with a capacity bound (overflow tokens dropped): no "
                        "per-layer host wait of the dropless dispatcher")
    p.add_argument("--dispatcher-wait-us", type=float, default=None, metavar="US",
                   help="the dropless MoE dispatcher's host wait per expert layer and forward "
                        "pass, when your framework's is measured (default: Megatron-Core's, "
                        "fitted: 4 ms on a PCIe-attached host, 1.5 ms over NVLink-C2C)")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="partial CUDA graphs over attention and the MoE router and "
                        "preprocessing (Megatron cuda_graph_impl transformer_engine): no "
                        "per-layer host wait of the dropless dispatcher (nothing else is "
                        "modelled: on a dense model the estimate is unchanged and says so)")
    p.add_argument("--cuda-graph-scope", type=name_list, default=(), metavar="M,M",
                   help="instead of --cuda-graphs, the modules graphed, comma-separated "
                        "(Megatron --cuda-graph-scope): attn, mamba, mlp, moe, moe_router, "
                        "moe_preprocess, full_iteration; the dropless dispatcher's host wait "
                        "is charged to the expert layers whose preceding block is not graphed "
                        "(e.g. mamba alone on a hybrid model: those after attention)")
    p.add_argument("--cp-comm-type", default="p2p", metavar="p2p|all_gather|a2a",
                   help="how context-parallel ranks exchange attention inputs (Megatron "
                        "--cp-comm-type): p2p (default: a ring of key/value chunks, largely "
                        "hidden behind the attention), all_gather (keys and values gathered "
                        "before the attention, not hidden) or a2a (all-to-alls of queries, "
                        "keys, values and output, not hidden; heads must divide over CP)")
    p.add_argument("--ep-dispatcher", default="alltoall", metavar="alltoall|deepep",
                   help="MoE token dispatcher: alltoall (default: every routed copy of a "
                        "token sent on its own) or deepep (DeepEP/HybridEP: a token crosses "
                        "the network once per destination node and NVLink once per "
                        "destination GPU)")
    p.add_argument("--expert-launches", default="per-expert",
                   metavar="per-expert|grouped|fused-mlp",
                   help="how the expert GEMMs are launched: per-expert (default: one GEMM "
                        "and, in FP8/FP4, one quantization per local expert, Transformer "
                        "Engine's multi-stream cuBLASLt), grouped (one grouped kernel for "
                        "all of a GPU's experts) or fused-mlp (a fused grouped MLP: the "
                        "activation and the down projection's input quantization done in the "
                        "up projection's epilogue): the host's launches are a floor on the "
                        "expert section")
    p.add_argument("--moe-imbalance", type=number_or_word("--moe-imbalance", "unbalanced"),
                   default=1.0, metavar="X|unbalanced",
                   help="routed tokens on the busiest expert-parallel rank over the mean "
                        "(default 1: balanced, as force-balanced benchmark runs route); its "
                        "expert section and all-to-alls set every rank's pace "
                        + MOE_IMBALANCE_BOUND + "; 'unbalanced': routing that nothing "
                        "balances (no load-balancing loss, expert bias or capacity), the "
                        "model's moe_unbalanced_load, fitted on MLPerf v6.0's GPT-OSS-20B "
                        "runs (listed under the estimate's assumptions)")
    p.add_argument("--ep-comm-overlap", action="store_true",
                   help="overlap the expert all-to-alls with another micro-batch's compute "
                        "(Megatron --overlap-moe-expert-parallel-comm); only what exceeds "
                        "that compute is exposed")
    p.add_argument("--no-pp-comm-overlap", dest="pp_comm_overlap", action="store_false",
                   help="an interleaved pipeline (--vpp > 1) waits on its sends between "
                        "chunks (Megatron --no-overlap-p2p-communication, or a Megatron "
                        "before 2024 without --overlap-p2p-communication); non-interleaved "
                        "1F1B always waits on them")
    p.add_argument("--attention-kernel", default="native", metavar="native|ampere|triton",
                   help="fused attention kernel: native (default: the GPU's own, e.g. "
                        "FlashAttention-3 or cuDNN on Hopper), ampere (FlashAttention-2, "
                        "written for Ampere: on Hopper and datacenter Blackwell it keeps 0.47 "
                        "of the native speed) or triton (2023's Triton flash attention: 1/1.3 "
                        "of ampere's)")
    p.add_argument("--bf16-layers-at-start", type=int, default=0, metavar="N",
                   help="with --precision fp8 or nvfp4: the model's first N layers (a hybrid's "
                        "blocks) run in BF16, weights and all (Megatron's "
                        "--first-last-layers-bf16 --num-layers-at-start-in-bf16); each "
                        "pipeline rank is costed with its own (default 0)")
    p.add_argument("--bf16-layers-at-end", type=int, default=0, metavar="N",
                   help="with --precision fp8 or nvfp4: the model's last N layers run in BF16 "
                        "(--num-layers-at-end-in-bf16; low-precision runs keep a few so for "
                        "stability, e.g. Nemotron 3 Super's release test its last 14) "
                        "(default 0)")
    p.add_argument("--mtp-bf16", action="store_true",
                   help="with --mtp-layers and --precision fp8 or nvfp4: the MTP blocks run "
                        "in BF16, weights and all (Megatron Bridge's keep_mtp_spec_in_bf16, "
                        "which its Nemotron 3 Super recipes set)")
    p.add_argument("--fp8-attention", action="store_true",
                   help="with --precision fp8 or nvfp4: fused attention in FP8 too, forward "
                        "and backward (Transformer Engine's FP8 dot-product attention); "
                        "on Blackwell at cuDNN's measured FP8 speedup of each training pass "
                        "(0.9-1.9x by head size and span), elsewhere at FP8 prompt "
                        "attention's, 1.39x the 16-bit kernel's on Hopper")
    p.add_argument("--fp8-recipe", default="tensor", metavar="tensor|mxfp8",
                   help="with --precision fp8: how the GEMM operands are scaled: tensor "
                        "(default; one scale per tensor, delayed or current scaling) or "
                        "mxfp8 (one per 32 elements); MXFP8, NVFP4 and any FP8 on Hopper cast "
                        "each GEMM input into two copies, row-wise and column-wise")
    p.add_argument("--fp8-attention-scaling", default="", metavar="tensor|mxfp8",
                   help="with --fp8-attention: the FP8 attention kernel where measured: "
                        "tensor (per-tensor scales: the current- and delayed-scaling "
                        "recipes, NVFP4 runs pinned to current scaling) or mxfp8 (an MXFP8 "
                        "recipe's own block-scaled attention, slower); default: the "
                        "--fp8-recipe's")
    p.add_argument("--recompute", type=lazy_enum_value("gpuarch.estimate.memory:Recompute",
                                                       "--recompute"),
                   help="none (default), selective or full")
    p.add_argument("--recompute-layers", type=int, default=0, metavar="N",
                   help="with --recompute full: recompute only the first N layers of each "
                        "pipeline stage's model chunk, the others keep their activations "
                        "(Megatron's --recompute-method block --recompute-num-layers N); "
                        "default every layer")
    p.add_argument("--recompute-modules", type=name_list, default=(), metavar="M,M",
                   help="with --recompute selective: the modules recomputed, comma-separated "
                        "(Megatron-Core's recompute_modules): core_attn (the default), "
                        "layernorm, mla_up_proj, mlp, moe, moe_act, shared_experts; or "
                        "torchtitan_op alone, TorchTitan's per-op policy (every second "
                        "matrix multiply of a block)")
    p.add_argument("--precision", type=lazy_enum_value("gpuarch.perf.precision:Precision",
                                                       "--precision"),
                   help="fp32, tf32, fp16, bf16 (default; fp16 on a GPU without BF16: "
                        "P100, V100, T4) or fp8")
    p.add_argument("--offload-layers", type=int, default=0, metavar="N",
                   help="activation offloading: the saved activations of N layers go to CPU "
                        "memory and come back for the backward pass (Megatron-Core's "
                        "cpu_offloading_num_layers; needs --pp 1 and no --recompute)")
    p.add_argument("--optimizer-offload", type=float, default=0.0, metavar="F",
                   help="optimizer CPU offload: the Adam moments of this fraction (0-1) of the "
                        "optimizer's elements live on the CPU and are updated there "
                        "(Megatron-Core's --optimizer-cpu-offload --optimizer-offload-fraction"
                        " F; needs --zero 1 or higher)")
    p.add_argument("--optimizer-offload-overlap", action="store_true",
                   help="with --optimizer-offload: overlap the copies with the CPU's updates "
                        "(Megatron-Core's --overlap-cpu-optimizer-d2h-h2d)")
    p.add_argument("--fp8-params", action="store_true",
                   help="with --precision fp8: keep the weights' compute copy in FP8, 1 byte "
                        "(Megatron's fp8_param_gather)")
    p.add_argument("--bf16-grads", action="store_true",
                   help="accumulate and reduce gradients in BF16, 2 bytes instead of FP32 "
                        "main gradients (Megatron's grad_reduce_in_fp32 off)")
    p.add_argument("--bf16-optimizer", action="store_true",
                   help="no FP32 master weights: BF16 weights, gradients and Adam moments, "
                        "8 bytes per parameter (PyTorch FSDP2 on a model held in BF16)")
    p.add_argument("--lora-rank", type=int, default=0, metavar="R",
                   help="LoRA fine-tuning: freeze the model's weights and train adapters of "
                        "rank R beside its linear layers (no weight gradients, reductions "
                        "or optimizer states for the frozen weights); default 0, every "
                        "weight trained")
    p.add_argument("--lora-modules", type=name_list, default=(), metavar="M,M",
                   help="with --lora-rank: the linear layers given adapters, comma-separated "
                        "(Megatron Bridge's target_modules): linear_qkv, linear_proj, "
                        "linear_fc1, linear_fc2 (default all four; in an expert layer fc1 "
                        "and fc2 are every expert's)")
    p.add_argument("--packed-doc-len", type=int, default=0, metavar="L",
                   help="each sequence is packed from documents of about L tokens and "
                        "attention stays inside each (Megatron's packed sequences, as "
                        "fine-tuning on short samples runs); default: attention over the "
                        "whole --seq-len")
    p.add_argument("--tokens", type=parse_quantity("--tokens"),
                   help="total training tokens, e.g. 2T, 300B or 2e12 (adds time, cost, "
                   "energy)")
    p.add_argument("--price-per-gpu-hour", type=positive_number("--price-per-gpu-hour"),
                   help="USD per GPU-hour")
    add_facility_flags(p)
    add_checkpoint_flags(p)
    p.add_argument("--calibration", type=Path, metavar="FILE",
                   help="measured efficiencies from 'gpuarch probe --bench --save FILE'")
    p.add_argument("--as-point", nargs="?", const="run", metavar="ID",
                   help="print this run as a [[point]] of a measured-runs file (id ID, "
                        "default 'run') instead of the estimate: add your measured figure "
                        "and compare with 'gpuarch validate training --data FILE'")
    p.add_argument("--measured", type=Path, metavar="LOG",
                   help="with --as-point: the point's figure from the run's training log "
                        "(Megatron-LM's 'elapsed time per iteration', NeMo's "
                        "'train_step_timing', torchtitan's 'tps'): the median of the logged "
                        "steps at --global-batch after the first tenth")
    p.add_argument("--framework", metavar="megatron|fsdp|deepspeed|maxtext|meta",
                   help="the training framework you run (megatron: Megatron-LM, NeMo, "
                        "Megatron Bridge; fsdp: PyTorch FSDP, e.g. llm-foundry or "
                        "TorchTitan): the error band is then the model's error on that "
                        "family's published runs (narrowest regime down to the GPU "
                        "architecture; else every family's, pooled) and the nearest "
                        "published runs prefer it (default: --launch's, else none)")
    p.add_argument("--launch", type=engine_choice("--launch", TRAINING_LAUNCH), metavar="megatron",
                   help="also print Megatron-LM's command for this run (torchrun "
                        "pretrain_gpt.py with the model, layout, batch, recomputation and "
                        "precision flags), and what it leaves to you")
    p.set_defaults(handler=cmd_train)

    p = est_sub.add_parser("infer", parents=[common],
                           help="LLM serving: TTFT, TPOT, throughput, memory, bottleneck")
    model_flags(p)
    p.add_argument("--gpu", help="GPU name (default: the system's GPU)")
    p.add_argument("--gpus", type=int, help="GPUs in all; replicas = GPUs / (TP x PP) "
                   "(default: TP x PP)")
    p.add_argument("--gpus-per-node", type=int,
                   help="GPUs that share one NVLink domain; beyond it traffic takes the "
                        "network (default: the system's, else the GPU's reference "
                        "system's, else 8; on a GB200/GB300 NVL72 rack, 4 prices its "
                        "compute trays talking over InfiniBand, as when multi-node NVLink "
                        "is not set up)")
    p.add_argument("--system", help="reference system (see 'gpuarch systems')")
    _add_gpu_link(p)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--ep", type=int, default=1)
    p.add_argument("--input-len", type=int, required=True, help="prompt tokens")
    p.add_argument("--output-len", type=int, required=True, help="generated tokens")
    p.add_argument("--batch", type=_batch, default=NO_BATCH,
                   help="sequences decoded together, or 'max' for the largest that fits "
                        "(this or --rate); a comma-separated list (e.g. 1,8,64,max) or "
                        "'sweep' (powers of two up to max) estimates each and marks the "
                        "frontier of output tokens/s per GPU against per user")
    p.add_argument("--plot", type=Path, metavar="FILE",
                   help="with a --batch list: draw tokens/s per GPU against tokens/s per "
                        "user, one point per batch, to .png or .svg")
    p.add_argument("--prefill-gpus", type=at_least_one("--prefill-gpus"), metavar="N",
                   help="disaggregated serving: N more GPUs that only prefill, their KV "
                        "caches sent to the --gpus that only decode (unvalidated)")
    p.add_argument("--prefill-tp", type=at_least_one("--prefill-tp"), metavar="T",
                   help="tensor parallelism of a prefill replica (default: --tp)")
    p.add_argument("--prefill-ep", type=at_least_one("--prefill-ep"), metavar="E",
                   help="expert parallelism of a prefill replica (MoE; default 1)")
    p.add_argument("--prefill-gpu", metavar="NAME",
                   help="the prefill pool's GPU where it differs from --gpu (e.g. prefill "
                        "on H100, decode on H200): the KV cache then crosses the network "
                        "between the two GPUs' reference systems")
    p.add_argument("--rate", type=positive_number("--rate"), metavar="R",
                   help="requests per second arriving at the whole deployment (this or "
                        "--batch): continuous batching at the batch that load settles at, "
                        "by Little's law; refused beyond what the replicas can carry")
    p.add_argument("--simulate", type=at_least_one("--simulate"), metavar="N",
                   help="with --rate: also replay N requests per replica (10 to 200,000) "
                        "arriving at random through the engine, pass by pass, and report the "
                        "mean and 50th/90th/99th percentiles of TTFT, TPOT, latency and "
                        "queueing (estimate.simulate; the first tenth warm up)")
    simulation_flags(p)
    p.add_argument("--slo-ttft-ms", type=positive_number("--slo-ttft-ms"), metavar="MS",
                   help="with --simulate: a time-to-first-token objective; the simulation "
                        "says what share of requests met every objective given and the "
                        "goodput (that share of --rate)")
    p.add_argument("--slo-tpot-ms", type=positive_number("--slo-tpot-ms"), metavar="MS",
                   help="with --simulate: a time-per-output-token objective (each request's "
                        "own TPOT), as --slo-ttft-ms")
    fmt = "gpuarch.perf.quant:QuantFormat"
    for flag, text in (
            ("--weight-precision",
             "bf16, fp16, fp8, int8, int4, fp4 (NVFP4) or mxfp4; default: what the "
             "checkpoint is stored in: a config.json's quantization_config (or ModelOpt's "
             "hf_quant_config.json beside it), a preset's published checkpoint "
             "(deepseek-v3 and kimi-k2 FP8, gpt-oss MXFP4 experts), else bf16; BF16 is "
             "FP16 on a GPU without BF16 (P100, V100, T4), as engines run it there"),
            ("--activation-precision",
             "default: the weights' format for fp8/fp4 (W8A8, W4A4) where the Tensor Cores "
             "take it, else 16-bit (weight-only), as for int8/int4; int8 gives W8A8; fp8 "
             "with int4 or fp4 weights gives W4A8"),
            ("--kv-precision", "KV cache: bf16 (default; fp16 on a GPU without BF16), "
             "fp16, fp8 (Ampere and newer), int8 or int4 (Volta and newer), fp4 (NVFP4: "
             "B200, B300 and their Grace boards); on a GPU no engine keeps the format on, "
             "the next wider one, and the estimate says why"),
            ("--expert-weight-precision",
             "MoE: the routed experts' weights where they differ from the rest (default: "
             "the checkpoint's, e.g. GPT-OSS's MXFP4 experts, else --weight-precision)"),
            ("--expert-activation-precision",
             "MoE: the activations the experts' GEMMs take (default: as "
             "--activation-precision defaults, from the expert weights)")):
        p.add_argument(flag, type=lazy_enum_value(fmt, flag), help=text)
    p.add_argument("--batching", type=lazy_enum_value(
        "gpuarch.estimate.inference:Batching", "--batching"),
        help="static (default) or continuous (in-flight, steady state)")
    p.add_argument("--chunk", type=int, default=0,
                   help="chunked prefill: tokens per chunk (default: whole prompt)")
    p.add_argument("--kv-cache-fraction", type=float, default=0.0, metavar="F",
                   help="KV cache gets the fraction F of the memory left after weights and "
                        "activations (TensorRT-LLM's kv_cache_free_gpu_mem_fraction); "
                        "default: all but a reserve of 10%% of GPU memory (vLLM's 0.9)")
    p.add_argument("--max-batch-size", type=at_least_one("--max-batch-size"), default=0,
                   metavar="N",
                   help="the engine's cap on sequences decoded together (vLLM "
                        "max_num_seqs, TensorRT-LLM max_batch_size); requests beyond it "
                        "queue; default: memory alone limits the batch")
    engine_flags(p)
    p.add_argument("--num-requests", type=at_least_one("--num-requests"), default=0,
                   metavar="N",
                   help="an offline benchmark of N requests (trtllm-bench throughput) "
                        "instead of the steady state: at one length the last wave runs "
                        "part-full, with --output-len-cv and --max-output-len the run ends "
                        "with a drain; needs --batching continuous")
    p.add_argument("--max-output-len", type=at_least_one("--max-output-len"), default=0,
                   metavar="N",
                   help="the longest answer of the run: the engine's cap (its "
                        "max_output_len or max_tokens) where answers reach it; with "
                        "--num-requests and --output-len-cv the run ends with the batch in "
                        "flight draining, the longest toward it, at a shrinking batch, which "
                        "is priced; "
                        "without it the offline waves take one length")
    p.add_argument("--speculative-tokens", type=int, default=0, metavar="K",
                   help="speculative decoding: draft tokens per step (MTP modules, an EAGLE "
                        "head; each costs one target-shaped layer and the LM head, a hybrid "
                        "model's its MTP block)")
    p.add_argument("--acceptance-length", type=float, default=0.0, metavar="A",
                   help="with --speculative-tokens: mean tokens each sequence emits per "
                        "target step (1 to K + 1; measure it on your data)")
    p.add_argument("--max-num-tokens", type=at_least_one("--max-num-tokens"), default=None,
                   help="prompt tokens per prefill pass (TensorRT-LLM max_num_tokens, vLLM "
                        "max_num_batched_tokens; default 8192); under continuous batching "
                        "the engine holds activations for a whole pass of it")
    p.add_argument("--engine-limits", default=None,
                   metavar="trtllm-bench-pytorch|trtllm-bench-pytorch-2026-07|"
                           "trtllm-bench-build",
                   help="take --max-batch-size and --max-num-tokens, where not given, as "
                        "trtllm-bench chooses them from the model, formats, GPUs and the "
                        "requests' lengths: on the PyTorch backend (throughput command) of "
                        "TensorRT-LLM 1.x, of its main branch from July 2026 (checkpoint "
                        "bytes, attention-DP ranks and MLA's cache sized apart), or for a "
                        "TensorRT engine built by 'trtllm-bench build --dataset'")
    p.add_argument("--calibration", type=Path, metavar="FILE",
                   help="measured efficiencies from 'gpuarch probe --bench --save FILE'")
    p.add_argument("--price-per-gpu-hour", type=positive_number("--price-per-gpu-hour"),
                   help="USD per GPU-hour: adds the hourly cost and the cost per million "
                        "output tokens (energy per million is always given)")
    add_facility_flags(p)
    p.add_argument("--as-point", nargs="?", const="run", metavar="ID",
                   help="print this serving run as a [[point]] of a measured-runs file (id "
                        "ID, default 'run') instead of the estimate: add your measured figure "
                        "and compare with 'gpuarch validate inference --data FILE' (with "
                        "--rate, a load run for 'gpuarch validate load --data FILE')")
    p.add_argument("--measured-kind", default=None, metavar="rate|concurrency|offline",
                   help="with --measured: keep only the runs sent at a rate, at a "
                        "concurrency, or all at once (a GuideLLM sweep saves all three in "
                        "one file)")
    p.add_argument("--measured", type=Path, nargs="+", metavar="FILE",
                   help="with --as-point: fill the point's figures from saved benchmark "
                        "results (vLLM's 'vllm bench serve --save-result' JSON, SGLang's "
                        "'bench_serving --output-file' lines, AIPerf's "
                        "profile_export_aiperf.json, trtllm-bench's --report_json, "
                        "GuideLLM's benchmarks.json): a point a run, at its rate, "
                        "concurrency or all at once, with its lengths' spread, checked "
                        "against --input-len and --output-len")
    p.add_argument("--engine", metavar="trtllm|vllm|sglang|lmdeploy|nim",
                   help="the serving engine you run: the error band is then the model's "
                        "error on that engine's published runs (narrowest regime down to the "
                        "GPU architecture; else every engine's, pooled) and the nearest "
                        "published runs prefer it (default: --launch's engine, else none)")
    p.add_argument("--launch", type=engine_choice("--launch", SERVING_LAUNCH),
                   metavar="vllm|sglang|trtllm",
                   help="also print that engine's server command for this deployment "
                        "(parallelism, batch, tokens a pass, length, formats; TensorRT-LLM's "
                        "options file too), and what it leaves to you")
    p.set_defaults(handler=cmd_infer)
