"""The estimate commands' handlers: `estimate train` and `estimate infer` (their flags are
registered in ``estimate_flags``), with the model resolution, measured-run comparison and
printing they share with `advise` and `report`.

Only the enums the parser needs are imported at start-up; the models load inside the
handlers, so catalog commands such as ``gpuarch show`` start as fast as before.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from gpuarch.catalog.loader import load_catalog
from gpuarch.cli.checkpointing import checkpoint_plan
from gpuarch.cli.estimate_flags import (
    MODEL_OVERRIDES,
    NO_BATCH,
    add_infer_parser,
    add_train_parser,
    lengths_flag,
)
from gpuarch.cli.options import (
    check_plot_flag,
    facility_of,
)
from gpuarch.errors import GpuarchError, check_choice
from gpuarch.report.serialize import to_json

if TYPE_CHECKING:
    from gpuarch.validation.nearest import Setup
    from gpuarch.workloads.shape import TransformerShape

__all__ = ["add_commands"]


def model_config(name: str) -> Path | None:
    """The config.json --model NAME reads, or None for a preset's name: NAME itself where it
    ends in .json or is a file, NAME/config.json where NAME is a checkpoint's directory
    holding one; a name no file system takes (too long, a NUL byte) is a preset's."""
    if name.endswith(".json"):
        return Path(name)
    path = Path(name)
    try:
        is_file, is_dir = path.is_file(), path.is_dir()
        config = is_dir and (path / "config.json").is_file()
    except (OSError, ValueError):
        return None
    if is_file:
        return path
    if config:
        return path / "config.json"
    if is_dir:  # no config.json in it: a preset's name that happens to be a directory here
        from gpuarch.workloads.presets import load_presets

        if load_presets().names.exact(name) is None:
            raise GpuarchError(f"--model: {name} is a directory with no config.json (give a "
                               "checkpoint's directory, its config.json, or a preset's name)")
    return None


def names_file(name: str) -> bool:
    """Whether --model NAME is a config file or a checkpoint's directory rather than a
    preset's name (``model_config``)."""
    return model_config(name) is not None


def resolve_model(args: argparse.Namespace) -> TransformerShape:
    """--model NAME|config.json, then the shape flags on top."""
    from gpuarch.workloads.hf import shape_from_hf_config
    from gpuarch.workloads.presets import preset

    name: str = args.model
    config = model_config(name)
    shape = shape_from_hf_config(config) if config is not None else preset(name).shape
    changes: dict[str, Any] = {k: getattr(args, k) for k in MODEL_OVERRIDES
                               if getattr(args, k) is not None}
    for key in ("ffn_kind", "qk_norm", "sandwich_norms", "attention_chunked"):
        if getattr(args, key, None) is not None:
            changes[key] = getattr(args, key)
    if changes.get("sliding_window") == 0:
        # no window left: a chunked model's layers attend to everything, and where the full
        # layers have heads of their own every layer takes theirs
        changes.setdefault("attention_chunked", False)
        changes.setdefault("sliding_layers", 0)
        shape = shape.attention_kind(0)
    if shape.loop_repeats:
        # a looped model's --layers and --sliding-layers count its own layers, each once;
        # the shape counts every run of a looped one
        if "layers" in changes:
            changes["layers"] += shape.loop_repeats
        if changes.get("sliding_layers"):
            changes["sliding_layers"] += shape.loop_repeats_windowed
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


def _gpus_per_node(args: argparse.Namespace, catalog: Any, product: Any, system: Any) -> int:
    """--gpus-per-node, else the given system's, else the GPU's reference system's (a GB200
    is 72 to an NVLink domain, not 8), else 8."""
    if args.gpus_per_node:
        return int(args.gpus_per_node)
    reference = system or catalog.system_for(product)
    return reference.gpus_per_node if reference else 8


def cmd_train(args: argparse.Namespace) -> int:
    from gpuarch.estimate.activation_offload import DEFAULT_MIN_ELEMENTS
    from gpuarch.estimate.memory import Recompute
    from gpuarch.estimate.remedies import memory_remedies
    from gpuarch.estimate.training import estimate_training
    from gpuarch.estimate.training_config import TrainingConfig, framework_settings
    from gpuarch.estimate.training_layers import unbalanced_routing_load
    from gpuarch.perf.precision import sixteen_bit
    from gpuarch.report.estimate_text import render_training
    from gpuarch.units import Unit, to_si
    from gpuarch.validation.nearest import training_setup

    framework = training_framework(args)  # (a bad --framework is refused before costing)
    if (names := gpu_list(args.gpu)) is not None:
        return _compare_gpus(args, names, cmd_train, "training")
    catalog = load_catalog()
    if args.measured is not None and args.as_point is None:
        raise GpuarchError("--measured: fills the figure of a point; give --as-point [ID]")
    shape = resolve_model(args)
    _check_train_model_flags(args, shape)
    product, system = _gpu_and_system(args, catalog)
    gpus_per_node = _gpus_per_node(args, catalog, product, system)
    _fill_unset(args, framework_settings(framework))  # e.g. FSDP's ZeRO-3 under --zero
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
        vpp=args.vpp, sequence_parallel=args.sequence_parallel,
        zero=args.zero,
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
        offload_layers=args.offload_layers, offload_modules=args.offload_modules,
        offload_min_elements=(DEFAULT_MIN_ELEMENTS if args.offload_min_elements is None
                              else args.offload_min_elements),
        fp8_params=args.fp8_params,
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

    disaggregated = args.prefill_gpus is not None
    _check_point_run(args, ((sweep, "a list of --batch"), (args.launch, "--launch"),
                            (args.calibration, "--calibration"),
                            (disaggregated and args.rate is not None,
                             "--prefill-gpus and --rate (a disaggregated point is a run at "
                             "its concurrency, not a load run)"),
                            (disaggregated and benches is not None,
                             "--prefill-gpus and --measured"),
                            (disaggregated and args.prefill_gpu is not None,
                             "--prefill-gpu (a point's pools share its gpu)"),
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
        prefill = None
        if disaggregated:
            cfg = _disaggregated_point_config(args, shape, product, cfg)
            prefill = _prefill_pool(args)
        point = inference_point(args.as_point, _preset_of(args), shape, product.key, cfg,
                                system=args.system, gpu_link=args.gpu_link,
                                prefill=prefill, concurrency=args.concurrency)
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


def _disaggregated_point_config(args: argparse.Namespace, shape: TransformerShape,
                                product: Any, cfg: Any) -> Any:
    """The decode pool's configuration of a disaggregated run written as a point at the
    client's --concurrency, checked by the disaggregated estimate itself (a pool it refuses
    is not written)."""
    from gpuarch.catalog.loader import load_catalog
    from gpuarch.estimate.disagg import estimate_disaggregated
    from gpuarch.estimate.inference_config import Batching

    if args.concurrency is None:
        raise GpuarchError("--as-point: a disaggregated run is written at its client's "
                           "concurrency; give --concurrency, the requests it kept in flight")
    _refuse_disaggregated(args)
    cfg = dataclasses.replace(cfg, batching=Batching.CONTINUOUS)
    catalog = load_catalog()
    estimate_disaggregated(catalog, shape, product, cfg, _prefill_pool(args),
                           concurrency=args.concurrency,
                           system=catalog.system(args.system) if args.system else None)
    return cfg


def _refuse_disaggregated(args: argparse.Namespace) -> None:
    """What the disaggregated estimate does not take: an offline run, a static batch."""
    from gpuarch.estimate.inference_config import Batching

    if args.num_requests:
        raise GpuarchError("--prefill-gpus and --num-requests: the disaggregated estimate "
                           "is a steady state")
    if args.batching is Batching.STATIC:
        raise GpuarchError("--prefill-gpus: decode workers batch continuously (requests "
                           "arrive from the prefill pool); drop --batching static")


def _prefill_pool(args: argparse.Namespace, product: Any = None, system: Any = None) -> Any:
    """The prefill pool --prefill-gpus, --prefill-tp (default --tp) and --prefill-ep
    (default 1) name, on ``product`` in ``system`` where another GPU type prefills."""
    from gpuarch.estimate.disagg import PrefillPool

    return PrefillPool(gpus=args.prefill_gpus, tp=args.prefill_tp or args.tp,
                       ep=args.prefill_ep or 1, product=product, system=system,
                       max_num_tokens=args.prefill_max_num_tokens or 0)


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
    captured = getattr(args, "captured", None)
    if args.json or captured is not None:
        doc = est.as_json()
        doc["validation"] = band.as_json(getattr(est, metric), metric) if band else None
        doc["nearest_published"] = [f.as_json(d) for d, f in near]
        if not est.fits_in_memory:
            doc["memory_remedies"] = [r.as_json() for r in remedies]
        if launch is not None:
            doc["launch"] = launch.as_json()
        if simulation is not None:
            doc["simulation"] = simulation.as_json()
        if captured is not None:  # one GPU of a --gpu list (_compare_gpus)
            captured.append(ComparedRun(est, band, doc))
            return 0
        print(to_json(doc))
    else:
        text = render(est, band, remedies, near)
        if simulation is not None:
            from gpuarch.report.estimate_text import simulation_lines

            text = "\n".join([text, "", *simulation_lines(simulation)])
        print(text if launch is None else "\n".join([text, "", *launch_lines(launch)]))
    return 0


def cmd_infer(args: argparse.Namespace) -> int:
    from gpuarch.estimate.inference import estimate_inference
    from gpuarch.estimate.inference_config import (
        MAX_PREFILL_TOKENS,
        Batching,
        InferenceConfig,
        fp8_scaling_of,
    )
    from gpuarch.estimate.mamba import default_state_precision
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

    # (a bad --engine is refused before any costing); a --mla-cache of one's own is checked
    # against the model below, an engine's applies where it has a bearing
    if not hasattr(args, "mla_cache_given"):  # (each GPU of a --gpu list comes back here)
        args.mla_cache_given = args.mla_cache is not None
    apply_engine_settings(args, serving_engine(args))
    if (names := gpu_list(args.gpu)) is not None:
        return _compare_gpus(args, names, cmd_infer, "serving")
    catalog = load_catalog()
    shape = resolve_model(args)
    product, system = _gpu_and_system(args, catalog)
    checkpoint = _checkpoint_formats(args)
    expert_weights = args.expert_weight_precision
    expert_activations = args.expert_activation_precision
    # the GPU's 16-bit format: FP16 before Ampere, which has no BF16 (engines run BF16
    # checkpoints there in FP16); BF16 asked for by name stays, at the FP16 rate, noted
    sixteen = sixteen_bit_format(product)
    if checkpoint is not None:
        declared: tuple[Any, ...] = tuple(
            f if f is None else in_sixteen_bit(f, sixteen)
            for f in declared_formats(checkpoint, shape.is_moe))
        weights, default_activations, default_kv, declared_experts, declared_acts = declared
        default_activations = activations_run(product, default_activations)
        if expert_weights is None and expert_activations is None and declared_acts:
            # the experts' own activations as the checkpoint stores them (NVFP4 experts
            # beside 16-bit attention: W4A4), as the GPU runs them
            expert_activations = activations_run(product, declared_acts)
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
        batch=None if args.rate is not None or args.concurrency is not None or sweep
        else args.batch,
        gpus=args.gpus or args.tp * args.pp, tp=args.tp, pp=args.pp, ep=args.ep,
        quant=QuantScheme(weights, activations, kv), expert_weights=expert_weights,
        expert_activations=expert_activations,
        batching=args.batching or (Batching.CONTINUOUS if args.rate is not None
                                   else Batching.STATIC), chunk=args.chunk,
        max_num_tokens=MAX_PREFILL_TOKENS if args.max_num_tokens is None
        else args.max_num_tokens,
        kv_cache_fraction=args.kv_cache_fraction,
        max_batch_size=args.max_batch_size, speculative_tokens=args.speculative_tokens,
        acceptance_length=args.acceptance_length, executor=args.executor,
        schedule=args.schedule, scheduler_policy=args.scheduler_policy,
        window_kv_cache=args.window_kv_cache, decode_kv_reads=args.decode_kv_reads,
        mla_cache=args.mla_cache,
        fp8_mla_decode=not args.no_fp8_mla_decode, moe_comm=args.moe_comm,
        moe_kernels=args.moe_kernels, moe_gemm_kernel=args.moe_gemm_kernel,
        all_reduce=args.all_reduce, moe_imbalance=args.moe_imbalance,
        redundant_experts=args.redundant_experts, two_batch_overlap=args.two_batch_overlap,
        num_requests=args.num_requests, output_len_cv=output_len_cv,
        max_output_len=args.max_output_len,
        fp8_context_attention=args.fp8_context_attention, nvls=not args.no_nvls,
        fp8_scaling=args.fp8_scaling or fp8_scaling_of(
            checkpoint is not None and checkpoint.fp8_blocks),
        adp_balance=args.adp_balance,
        ssm_state_precision=args.ssm_state_precision
        or default_state_precision(shape, serving_engine(args), sixteen.value),
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


class ComparedRun(NamedTuple):
    """One GPU's estimate of a --gpu list: the estimate, its error band, its JSON document
    (what a single --json prints)."""

    estimate: Any
    band: Any
    doc: dict[str, Any]


def gpu_list(text: str | None) -> list[str] | None:
    """The GPUs of a comma-separated --gpu (None for one GPU or none)."""
    if text is None or "," not in text:
        return None
    names = [name.strip() for name in text.split(",")]
    if any(not name for name in names):
        raise GpuarchError(f"--gpu: an empty name in the list {text!r}")
    return names


_ONE_RUN_FLAGS = (
    ("system", "--system", "each GPU is costed in its own reference system"),
    ("calibration", "--calibration", "a calibration measures one GPU"),
    ("as_point", "--as-point", "a point is one run"),
    ("measured", "--measured", "a measured run is one GPU's"),
    ("launch", "--launch", "a command is one run's"),
    ("plot", "--plot", "it draws a batch sweep or a scaling table"),
    ("simulate", "--simulate", "it replays one deployment"),
    ("prefill_gpus", "--prefill-gpus", "it prices one disaggregated deployment"),
)
"""What a --gpu list does not combine with, and why: (attribute, flag, reason)."""


def _compare_gpus(args: argparse.Namespace, names: list[str],
                  handler: Callable[[argparse.Namespace], int], task: str) -> int:
    """estimate train|infer with a --gpu list: the same run on each GPU, in one table (or
    --json: each GPU's estimate document as one estimate prints it)."""
    from gpuarch.report.estimate_text import render_gpu_comparison

    for attribute, flag, why in _ONE_RUN_FLAGS:
        if getattr(args, attribute, None) not in (None, False, ()):
            raise GpuarchError(f"--gpu: a list compares one run on each GPU; not with {flag} "
                               f"({why})")
    many = ("--batch", getattr(args, "batch", None)), ("--gpus", getattr(args, "gpus", None))
    for flag, value in many:
        if isinstance(value, tuple):
            raise GpuarchError(f"--gpu: a list compares one run on each GPU; not with a "
                               f"{flag} list")
    runs: list[ComparedRun] = []
    for name in names:
        handler(argparse.Namespace(**{**vars(args), "gpu": name, "captured": runs}))
    if args.json:
        print(to_json({"task": task, "gpus": names, "estimates": [r.doc for r in runs]}))
    else:
        print(render_gpu_comparison(task, [(r.estimate, r.band) for r in runs]))
    return 0


def apply_engine_settings(args: argparse.Namespace, engine: str) -> None:
    """Fill --executor, --moe-kernels and --all-reduce, where not given, with what ``engine``
    runs (``estimate.inference_config.engine_settings``: vLLM's or SGLang's own MoE and
    all-reduce kernels, LMDeploy's C++ executor, else the defaults)."""
    from gpuarch.estimate.inference_config import engine_settings

    _fill_unset(args, engine_settings(engine))


def _fill_unset(args: argparse.Namespace, settings: dict[str, Any]) -> None:
    """Set each of ``settings`` (flag attribute -> value) that the command line left unset
    (None): what a named engine or framework runs, under the user's own flags."""
    for name, value in settings.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def serving_engine(args: argparse.Namespace) -> str:
    """The engine a serving estimate names (``validation.bands.ENGINES``): --engine, else
    --launch's, else none ("": the pooled bands and every engine's runs)."""
    from gpuarch.validation.bands import ENGINES

    return _named_family(args.engine, "--engine", tuple(ENGINES), args.launch)


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
    from gpuarch.estimate.disagg import estimate_disaggregated
    from gpuarch.perf.kv_formats import kv_cache_run
    from gpuarch.report.estimate_text import render_disaggregated

    _refuse_disaggregated(args)
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
    pool = _prefill_pool(args, prefill_product, prefill_system)
    est = estimate_disaggregated(catalog, shape, product, cfg, pool, rate=args.rate,
                                 concurrency=args.concurrency, system=system,
                                 efficiency=eff)
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
    if getattr(args, "mla_cache_given", False) and (shape.indexer_mla is None
                                                     or not shape.indexer_mla.sparse):
        raise GpuarchError(f"--mla-cache: sets how a sparse-attention model's FP8 latent is "
                           f"laid out; {shape.name} has no DeepSeek Sparse Attention")
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

    if args.prefill_gpus is None:
        given = [flag for flag, value in (
            ("--prefill-tp", args.prefill_tp), ("--prefill-ep", args.prefill_ep),
            ("--prefill-max-num-tokens", args.prefill_max_num_tokens),
            ("--prefill-gpu", args.prefill_gpu)) if value]
        if given:
            raise GpuarchError(f"{given[0]}: it shapes the prefill pool of --prefill-gpus, "
                               "which is not given")
    if args.concurrency is not None and args.prefill_gpus is None:
        raise GpuarchError("--concurrency: a client's requests in flight through a "
                           "disaggregated deployment (--prefill-gpus); an aggregated "
                           "engine's are its batch: give --batch")
    loads = [flag for flag, given in (("--batch", args.batch != NO_BATCH),
                                      ("--rate", args.rate is not None),
                                      ("--concurrency", args.concurrency is not None))
             if given]
    if len(loads) > 1:
        raise GpuarchError(f"{' or '.join(loads)}: give one of them")
    if not loads:
        raise GpuarchError("--batch or --rate: give one of them (sequences decoded "
                           "together, or requests per second arriving)"
                           + ("; or --concurrency, requests a client keeps in flight"
                              if args.prefill_gpus is not None else ""))
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


def declared_formats(declared: Any, moe: bool) -> tuple[Any, Any, Any, Any, Any]:
    """A checkpoint's declared formats (``hf_quant.CheckpointFormats``) as QuantFormats:
    (weights, activations, KV cache or None, the routed experts' weights or None, their
    activations or None). A model without routed experts takes a declared expert format
    (MXFP4) for all of it."""
    from gpuarch.perf.quant import QuantFormat

    experts = QuantFormat(declared.expert_weights) if declared.expert_weights else None
    acts = QuantFormat(declared.expert_activations) if declared.expert_activations else None
    weights = QuantFormat(declared.weights) if moe or experts is None else experts
    activations = QuantFormat(declared.activations) if moe or acts is None else acts
    kv = QuantFormat(declared.kv_cache) if declared.kv_cache else None
    return weights, activations, kv, experts if moe else None, acts if moe else None


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

    config = model_config(name)
    if config is not None:
        return checkpoint_formats(config)
    return preset(name).checkpoint


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 common: argparse.ArgumentParser) -> None:
    """Register estimate (train and infer)."""
    est = sub.add_parser("estimate", help="estimate a training step or an LLM serving request")
    est_sub = est.add_subparsers(dest="what", metavar="WHAT", required=True)
    add_train_parser(est_sub, common).set_defaults(handler=cmd_train)
    add_infer_parser(est_sub, common).set_defaults(handler=cmd_infer)
