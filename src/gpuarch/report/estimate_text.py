"""Terminal renderings of model results: training estimates, rooflines, validation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuarch.estimate.disagg import DisaggEstimate
from gpuarch.estimate.inference import InferenceEstimate
from gpuarch.estimate.inference_config import EXECUTOR_NAMES, MOE_KERNEL_ENGINES
from gpuarch.estimate.scaling import GpuScaling
from gpuarch.estimate.sweep import BatchSweep
from gpuarch.estimate.training import TrainingEstimate
from gpuarch.perf.roofline import SPREAD_ROWS
from gpuarch.report.text import fmt, fmt_seconds, table
from gpuarch.units import Unit, from_si

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuarch.estimate.remedies import Remedy
    from gpuarch.estimate.simulate import Simulation
    from gpuarch.report.launch import Launch
    from gpuarch.validation.bands import Band
    from gpuarch.validation.nearest import PublishedFigure

__all__ = [
    "launch_lines",
    "render_batch_sweep",
    "render_gpu_scaling",
    "render_inference",
    "render_roofline",
    "render_training",
    "simulation_lines",
]


def _pct(x: float) -> str:
    return f"{x:.1%}"


def _signed(x: float) -> str:
    return f"{x:+.1%}"


def _band_line(band: Band | None, predicted: float, unit: str) -> list[str]:
    return [f"  error band    {band.describe(predicted, unit)}"] if band else []


def _state_size(bytes_: float) -> str:
    """A recurrent state's size, in MiB, or KiB below one MiB (a short convolution's)."""
    unit, label = (Unit.MIB, "MiB") if bytes_ >= 2**20 else (Unit.KIB, "KiB")
    return f"{fmt(from_si(bytes_, unit))} {label}"


def _mixer(assumptions: dict[str, Any]) -> str:
    """A hybrid model's recurrent mixer as an estimate's assumptions name it ("Mamba-2" or
    "Gated DeltaNet"), Mamba-2 where they do not."""
    return str(assumptions.get("recurrent_mixer") or "Mamba-2")


def _beyond_window(tokens: int, window: dict[str, Any] | None) -> str:
    """A note after the longest context memory allows where it passes the context the
    checkpoint is configured for (the memory's bound, not the model's)."""
    if not window or tokens <= window["tokens"]:
        return ""
    return f" (memory's bound; the checkpoint is configured for {window['tokens']:,})"


def _cost_line(cost: dict[str, Any]) -> list[str]:
    """A serving estimate's cost per million output tokens (with a price) and energy."""
    parts = []
    if cost.get("usd_per_million_output_tokens") is not None:
        parts.append(f"${fmt(cost['usd_per_million_output_tokens'])} per million output "
                     f"tokens (${fmt(cost['usd_per_hour'])}/hour at "
                     f"${fmt(cost['usd_per_gpu_hour'])}/GPU-hour)")
    if cost.get("kwh_per_million_output_tokens") is not None:
        parts.append(f"{fmt(cost['kwh_per_million_output_tokens'])} kWh per million output "
                     "tokens (board power at the modelled utilisation, node overhead, PUE)")
    return [f"  cost          {'; '.join(parts)}"] if parts else []


def _band_summary(band: Band | None, unit: str) -> list[str]:
    """A table's error band (a sweep's rows share one): the model's signed error on the
    regime's published figures, without a predicted value to range."""
    if band is None:
        return []
    return [f"  error band    the model's {unit} on {band.figures} published figures of "
            f"{band.label}: 10th-90th percentile {band.p10_error:+.0%} to "
            f"{band.p90_error:+.0%}, median {band.median_error:+.0%} ({band.bias})"]


def _nearest_lines(near: Sequence[tuple[float, PublishedFigure]], task: str) -> list[str]:
    """The published runs closest to the estimate's setup, one line each: the model's
    signed error there, the run, what it ran."""
    if not near:
        return []
    head = "  published     "
    lines = [f"{head}the measured runs nearest this one, and the model's error on each "
             f"(`gpuarch validate {'training' if task == 'training' else 'inference'} "
             "--match ID --explain` shows one):"]
    lines += [f"{' ' * len(head)}{f.error:+.0%}  {f.summary}" for _, f in near]
    return lines


def _remedy_lines(remedies: Sequence[Remedy], e: TrainingEstimate) -> list[str]:
    """One line per single change that makes a run that does not fit fit; when none does,
    the closest and what the model's states alone take."""
    if not remedies:
        return []
    head = "  to fit        "
    fitting = [r for r in remedies if r.fits]
    lines = [(head if i == 0 else " " * len(head)) + f"{r.change}: "
             f"{fmt(r.memory_per_gpu_gib)} GiB, step {fmt(r.step_time_s or 0.0)} s "
             f"({(r.step_time_s or 0.0) / e.step_time_s - 1:+.0%})"
             for i, r in enumerate(fitting)]
    if not fitting:
        closest = remedies[0]
        states = e.memory.weights + e.memory.gradients + e.memory.optimizer
        lines = [f"{head}no single change fits (closest: {closest.change}, "
                 f"{fmt(closest.memory_per_gpu_gib)} GiB); weights, gradients and optimizer "
                 f"states alone take {_gib(states)} GiB: more pipeline stages, data "
                 "parallelism with ZeRO, or more GPUs ('gpuarch advise train' searches them)"]
    return lines


def render_training(e: TrainingEstimate, band: Band | None = None,
                    remedies: Sequence[Remedy] = (),
                    near: Sequence[tuple[float, PublishedFigure]] = ()) -> str:
    """The estimate in text; with ``band``, the range its error band gives; with
    ``remedies`` (a run that does not fit), what single changes would make it fit; with
    ``near`` (``validation.nearest.nearest``), the published runs closest to it."""
    p = e.parallelism
    cp_kind = p.get("cp_comm_type")
    layout = (f"TP{p['tp']} PP{p['pp']} CP{p['cp']}"
              + (f"({cp_kind})" if cp_kind not in (None, "p2p") else "")
              + f" DP{p['dp']}"
              + (f" EP{p['ep']}" if p["ep"] > 1 else "")
              + (f" ETP{p['etp']}" if p.get("etp") and p["etp"] != p["tp"] else "")
              + (" token-drop" if p.get("moe_token_drop") else "")
              + (" CUDA-graphs" if p.get("cuda_graphs") else "")
              + (f" CUDA-graphs({','.join(p['cuda_graph_scope'])})"
                 if p.get("cuda_graph_scope") else "")
              + (" DeepEP" if p.get("ep_dispatcher") == "deepep" and p["ep"] > 1 else "")
              + (" grouped-GEMM" if p.get("expert_launches") == "grouped" else "")
              + (" fused-MLP" if p.get("expert_launches") == "fused-mlp" else "")
              + (" EP-overlap" if p.get("ep_comm_overlap") and p["ep"] > 1 else "")
              + (f" imbalance {p['moe_imbalance']:g}x" if (p.get("moe_imbalance") or 1) > 1
                 else "")
              + (f" VPP{p['vpp']}" if p["vpp"] > 1 else "")
              + (f" {p['pp_schedule']}" if p.get("pp_schedule") not in (None, "1f1b") else "")
              + (f" layout {p['pp_layout']}" if p.get("pp_layout") else "")
              + (f" MTP{p['mtp_layers']}" if p.get("mtp_layers") else "")
              + (" +SP" if p["sequence_parallel"] else "")
              + f", ZeRO-{p['zero']}"
              + (f" over groups of {p['dp_shard']} ({p['dp_replicas']} replicas, "
                 + ("optimizer over all: HFSDP)" if p.get("outer_optimizer_sharding")
                    else "HSDP)") if p.get("dp_shard") else "")
              + f", recompute {p['recompute']}"
              + (f" ({', '.join(p['recompute_modules'])})" if p.get("recompute_modules") else "")
              + (f" ({p['recompute_layers']} layers a chunk)" if p.get("recompute_layers")
                 else "")
              + (f", {p['offload_layers']} layers' activations offloaded"
                 if p.get("offload_layers") else "")
              + (f", offloaded: {','.join(p['offload_modules'])}"
                 if p.get("offload_modules") else "")
              + (f", {p['optimizer_offload']:g} of the optimizer on the CPU"
                 if p.get("optimizer_offload") else "")
              + f", {p['precision']}"
              + (" (FP8 weights)" if p.get("fp8_params") else "")
              + (", FP8 attention" if p.get("fp8_attention") else "")
              + _bf16_layers(p.get("bf16_layers"))
              + (", the MTP blocks in BF16" if p.get("mtp_bf16") else "")
              + (f", LoRA rank {p['lora_rank']} on {', '.join(p['lora_modules'])}"
                 if p.get("lora_rank") else "")
              + (f", documents of {p['packed_doc_len']:,} tokens packed"
                 if p.get("packed_doc_len") else "")
              + (", BF16 weights, gradients and Adam states" if p.get("bf16_optimizer") else
                 ", BF16 gradients" if p.get("bf16_grads") else "")
              + {"ampere": ", Ampere-style attention kernel",
                 "triton": ", 2023's Triton attention kernel"}.get(
                  str(e.assumptions.get("attention_kernel")), ""))
    b = e.time_breakdown
    lines = [
        f"{e.model} on {p['gpus']} x {e.gpu}" + (f" ({e.system})" if e.system else ""),
        f"  layout        {layout}",
        f"  batch         {p['global_batch']} sequences = {p['micro_batches']} micro-batches "
        f"of {p['micro_batch']} per pipeline",
        "",
        f"  step time     {fmt_seconds(e.step_time_s)}",
        f"    compute             {fmt_seconds(b.compute)}" + _parts(b.compute_parts, b.compute),
        f"    exposed comm.       {fmt_seconds(b.exposed_communication)}"
        + _parts(b.communication_parts, b.exposed_communication),
        *_dp_traffic_line(e.assumptions.get("data_parallel_traffic_s")),
        f"    pipeline bubble     {fmt_seconds(b.pipeline_bubble)}",
        f"    other               {fmt_seconds(b.other)}"
        + _other_detail(e.assumptions.get("other_breakdown_s", {})),
        f"  throughput    {fmt(e.tokens_per_s)} tokens/s, {fmt(e.tokens_per_s_per_gpu)} per GPU",
        *_band_line(band, e.tokens_per_s_per_gpu, "tokens/s per GPU"),
        *_nearest_lines(near, "training"),
        f"  utilisation   MFU {_pct(e.mfu)}, HFU {_pct(e.hfu)} of "
        f"{fmt(from_si(e.matmul_peak_flops, Unit.TFLOPS))} TFLOPS "
        f"({fmt(e.model_tflops_per_gpu)} model TFLOP/s per GPU)",
        "",
        f"  memory/GPU    {_gib(e.memory.total)} GiB of {_gib(e.gpu_memory_bytes)} GiB: "
        + ("fits" if e.fits_in_memory else "DOES NOT FIT"),
        f"    weights {_gib(e.memory.weights)}, gradients {_gib(e.memory.gradients)}, "
        f"optimizer {_gib(e.memory.optimizer)}, activations {_gib(e.memory.activations)}, "
        f"other {_gib(e.memory.other)} GiB",
        *_held_lines(e.assumptions.get("activations_held")),
        *_remedy_lines(remedies, e),
        "",
        f"  bottleneck    {e.bottleneck}: {e.bottleneck_reason}",
    ]
    if e.assumptions.get("precision_fallback"):
        lines.append(f"  note          {e.assumptions['precision_fallback']}")
    if e.assumptions.get("tp_overlap_16_bit"):
        lines.append(f"  note          {e.assumptions['tp_overlap_16_bit']['note']}")
    if e.assumptions.get("layer_pass_floor"):
        lines.append(f"  note          {e.assumptions['layer_pass_floor']}")
    if e.assumptions.get("expert_gemms"):
        lines.append(f"  note          {e.assumptions['expert_gemms']}")
    if e.assumptions.get("moe_without_sp"):
        lines.append(f"  note          {e.assumptions['moe_without_sp']}")
    if e.assumptions.get("dispatcher_wait"):
        lines.append(f"  note          {e.assumptions['dispatcher_wait']}")
    if e.assumptions.get("mamba_kernels"):
        lines.append(f"  note          {e.assumptions['mamba_kernels']}")
    if e.assumptions.get("cuda_graphs"):
        lines.append(f"  note          {e.assumptions['cuda_graphs']}")
    if e.total:
        t = e.total
        lines += ["", f"  {fmt(t['tokens'])} tokens: {fmt(t['time_days'])} days, "
                      f"{fmt(t['gpu_hours'])} GPU-hours"
                  + (f", ${fmt(t['cost_usd'])}" if t.get("cost_usd") else "")
                  + (f", {fmt(t['energy_kwh'])} kWh" if t.get("energy_kwh") else ""),
                  f"                about {fmt(t['expected_interruptions'])} unexpected "
                  "interruptions at the Llama 3 run's failure rate"
                  + (" (restarts not in the time)" if not t.get("checkpointing") else "")]
        c = t.get("checkpointing")
        if c:
            lines += [
                f"  with restarts {fmt(c['time_days'])} days, goodput {c['goodput']:.1%}: "
                f"a {fmt(from_si(c['checkpoint_bytes'], Unit.GB))} GB checkpoint every "
                f"{fmt(from_si(c['interval_s'], Unit.MINUTE))} min stops training "
                f"{fmt(c['save_s'])} s;",
                f"                an interruption every "
                f"{fmt(from_si(c['mean_time_between_interruptions_s'], Unit.HOUR))} h costs "
                f"half an interval, {fmt(from_si(c['restart_s'], Unit.MINUTE))} min to restart and "
                f"{fmt(c['load_s'])} s to load"]
    lines += _origin_lines(e.assumptions)
    return "\n".join(lines)


def _origin_lines(assumptions: dict[str, Any]) -> list[str]:
    """Where the efficiencies came from: the fitted defaults, or a calibration file's
    measurements (named, with what each was derived from)."""
    measured = dict(assumptions.get("measured_parameters") or {})
    siblings = [f"    {note}" for note in assumptions.get("sibling_rates") or ()]
    if siblings:
        siblings.insert(0, "  This GPU runs some kernels faster than the sibling the "
                           "efficiencies were fitted on (published same-kernel timings):")
    if not measured:
        return ["", "  Peaks from the catalog; efficiencies are the model's fitted defaults "
                "(--json lists them).", *siblings]
    source = measured.pop("file", "a calibration file")
    return ["", f"  Peaks from the catalog; efficiencies measured on {source}:",
            *(f"    {name}: {how}" for name, how in measured.items()),
            "  the rest are the model's fitted defaults (--json lists them).", *siblings]


def render_disaggregated(e: DisaggEstimate) -> str:
    """A disaggregated deployment in text: both pools, the KV hand-off, the steady state."""
    a = e.assumptions
    pre, dec, f = a["prefill"], a["decode"], a["formats"]
    loop = a.get("closed_loop")
    load = (f"with {loop['concurrency']:,} requests in flight (a client's closed loop: "
            f"{fmt(loop['decoding_per_replica'])} decoding a replica)" if loop else
            "at the rate given" if a["rate_given"] else "flat out")
    where = (f"{e.gpus} x {e.gpu}" if pre["gpu"] == e.gpu else
             f"{e.prefill_gpus} x {pre['gpu']} (prefill) + {e.decode_gpus} x {e.gpu} (decode)")
    return "\n".join([
        f"{e.model} on {where}, disaggregated: {e.prefill_gpus} prefill GPUs "
        f"({pre['replicas']} replica(s) of TP{pre['tp']}"
        + (f" EP{pre['ep']}" if pre["ep"] > 1 else "") + f"), {e.decode_gpus} decode GPUs "
        f"({dec['replicas']} replica(s) of TP{dec['tp']}"
        + (f" PP{dec['pp']}" if dec["pp"] > 1 else "")
        + (f" EP{dec['ep']}" if dec["ep"] > 1 else "") + ")",
        f"  formats       weights {f['weights']}, activations {f['activations']}, KV cache "
        f"{f['kv_cache']}",
        *([f"  note          {a['kv_cache_fallback']}"] if a.get("kv_cache_fallback") else []),
        "",
        f"  load          {fmt(e.requests_per_s)} requests/s {load}: prefill pool "
        f"{e.prefill_utilization:.0%} busy (carries {fmt(e.prefill_capacity_per_s)} at most), "
        f"decode pool carries {fmt(e.decode_capacity_per_s)} at batch "
        f"{e.capacity_batch or e.max_batch}; the "
        f"{e.bottleneck} pool is the limit",
        f"  TTFT          {fmt(from_si(e.ttft_s, Unit.MS))} ms   (a pass of "
        f"{pre['prompts_per_pass']} prompt(s) {fmt(from_si(pre['pass_s'], Unit.MS))} ms, "
        f"waiting {fmt(from_si(pre['wait_s'], Unit.MS))} ms, "
        + (f"KV and {_mixer(a)} state"
           if a.get("mamba_state_sent_bytes_per_gpu") else "KV")
        + " hand-off "
        f"{fmt(from_si(e.kv_transfer_s, Unit.MS))} ms over {e.kv_link}"
        + (f", then {fmt(from_si(loop['queue_s'], Unit.MS))} ms queued for a decode slot"
           if loop and loop["queue_s"] > 0 else "") + ")",
        f"  TPOT          {fmt(from_si(e.tpot_s, Unit.MS))} ms   (decode batch {e.batch} per "
        "replica, no prefill between steps)",
        f"  request       {fmt(e.request_latency_s)} s",
        f"  throughput    {fmt(e.output_tokens_per_s)} output tokens/s, "
        f"{fmt(e.output_tokens_per_s / e.gpus)} per GPU (all {e.gpus}), "
        f"{fmt(1.0 / e.tpot_s)} per user (1 / TPOT)",
        "",
        f"  memory/GPU    decode {_gib(sum(e.memory.values()))} GiB of "
        f"{_gib(e.gpu_memory_bytes)} GiB (KV cache {_gib(e.memory['kv_cache'])}; largest "
        f"batch that fits: {e.max_batch}), prefill {_gib(sum(e.prefill_memory.values()))} GiB"
        + (f" of {_gib(a['prefill_gpu_memory_bytes'])} GiB" if pre["gpu"] != e.gpu else ""),
        "",
        "  Checked on two published disaggregated runs, InferenceMAX's GPT-OSS-120B and "
        "DeepSeek-R1 on GB200 under Dynamo and TensorRT-LLM (gpuarch validate inference "
        "--match inferencemax-20764588467, inferencemax-20321908209): decode pools with "
        "attention data parallelism read their tokens up to twice as fast as measured; no "
        "error band.",
    ])


def _serving_remedy_lines(remedies: Sequence[Remedy]) -> list[str]:
    """One line per single change that makes a server that does not fit fit; when none
    does, the closest."""
    if not remedies:
        return []
    head = "  to fit        "
    fitting = [r for r in remedies if r.fits]
    if not fitting:
        r = remedies[0]
        return [f"{head}no single change fits (closest: {r.change}, "
                f"{fmt(r.memory_per_gpu_gib)} GiB); more GPUs or a smaller format of several "
                "parts at once ('gpuarch advise infer' searches them)"]
    return [(head if i == 0 else " " * len(head)) + f"{r.change}: "
            f"{fmt(r.memory_per_gpu_gib)} GiB on {r.gpus} GPU{'' if r.gpus == 1 else 's'}, "
            f"{fmt(r.output_tokens_per_s or 0.0)} output tokens/s "
            f"({fmt((r.output_tokens_per_s or 0.0) / (r.gpus or 1))} per GPU)"
            for i, r in enumerate(fitting)]



def _sparse_line(reach: str, x: dict[str, Any], topk: int, extra: str = "") -> str:
    """The line naming a sparse attention's reach (``reach``), its indexer (``x``: an
    estimate's ``sparse_attention`` or ``block_sparse_attention`` assumption) and the
    positions (``topk``) up to which its scores are skipped."""
    gpus = x["indexer_replicated_gpus"]
    return (f"  sparse attn   {reach} an indexer of {x['index_heads']} heads picks (its scores "
            f"in {x['indexer_math']}, skipped up to {topk:,} held positions"
            + (f"; the indexer whole on each of the {gpus} tensor-parallel GPUs)" if gpus > 1
               else ")") + extra)

def _serving_setup_lines(a: dict[str, Any]) -> list[str]:
    """A serving estimate's setup under its title, from its assumptions: formats, expert
    formats, whose MoE kernels, output-length spread, context, engine limits, speculative
    decoding and prefix cache (what a batch sweep shares across its batches)."""
    f = a["formats"]
    lines = [
        f"  formats       weights {f['weights']}, activations {f['activations']}, KV cache "
        f"{f['kv_cache']}; GEMMs at {fmt(a['gemm_peak_tflops'])} TFLOPS "
        f"({a['gemm_peak_source']})" + (", weights dequantized" if a["weights_dequantized"]
                                       else ""),
    ]
    floor = a.get("mixed_input_dequant")
    if floor and floor["binds_in_decode"]:
        rate = (f"{fmt(from_si(floor['weights_per_s'], Unit.TERA_PER_S))}"
                f"{Unit.TERA_PER_S.label}")
        lines.append(f"                decode GEMMs at the {floor['bits']}-bit mixed-input "
                     f"kernel's dequantization rate, {rate} weights/s (slower than the "
                     f"weights' read at fewer than {SPREAD_ROWS} rows)")
    if a.get("expert_formats"):
        x = a["expert_formats"]
        lines.append(f"  experts       weights {x['weights']}, activations {x['activations']}; "
                     f"GEMMs at {fmt(x['gemm_peak_tflops'])} TFLOPS"
                     + (", weights dequantized" if x["weights_dequantized"] else ""))
        if x.get("precision_fallback"):
            lines.append(f"  note          {x['precision_fallback']}")
    if a.get("formats_origin"):
        lines.append(f"                from {a['formats_origin']}")
    if a.get("kv_cache_fallback"):
        lines.append(f"  note          {a['kv_cache_fallback']}")
    if a.get("context_attention") not in (None, "fp8", "16-bit"):  # asked for, not applied
        lines.append(f"  note          prefill attention {a['context_attention']}")
    if a.get("fp8_scaling") == "block" and a.get("deepgemm_experts"):
        lines.append("                FP8 weights scaled per 128 x 128 block: the experts as "
                     "DeepGEMM's grouped GEMMs, at their published rate (SGLang's DeepEP "
                     "path)")
    elif a.get("fp8_scaling") == "block":
        lines.append("                FP8 weights scaled per 128 x 128 block: a fine-grained "
                     "MoE's experts at the block-scaled rate (--fp8-scaling tensor for "
                     "per-tensor scales)")
    if a.get("moe_kernels"):
        name, others = moe_kernels_named(a["moe_kernels"])
        lines.append(f"  MoE kernels   {name}: "
                     f"{fmt(from_si(a['moe_block_floor_s'], Unit.US))} us fixed per expert "
                     f"layer and pass (--moe-kernels {others} for theirs)")
    if a.get("tp_all_reduce"):
        lines.append(f"  TP all-reduce {a['tp_all_reduce']} (--all-reduce "
                     "trtllm|vllm|sglang|nccl)")
    if a.get("executor") in EXECUTOR_NAMES and a.get("decode_step_overhead_s") is not None:
        others = "|".join(e for e in EXECUTOR_NAMES if e != a["executor"])
        lines.append(f"  executor      {EXECUTOR_NAMES[a['executor']]}: "
                     f"{fmt(from_si(a['decode_step_overhead_s'], Unit.MS))} ms fixed a decode "
                     f"step (--executor {others})")
    if a.get("moe_gemm_kernel") == "ampere":
        lines.append("                expert GEMMs in kernels written for Ampere: slower on "
                     "Hopper and datacenter Blackwell (--moe-gemm-kernel native for the "
                     "GPU's own)")
    if a.get("moe_exchange"):
        x = a["moe_exchange"]
        lines.append(f"  EP exchange   {x['path']}: "
                     f"{fmt(from_si(x['dispatch_fixed_s'], Unit.US))} us a dispatch, "
                     f"{fmt(from_si(x['combine_fixed_s'], Unit.US))} us a combine fixed, "
                     f"{fmt(from_si(x['per_gpu_s'], Unit.US))} us per GPU, then the bytes "
                     "(combine in 16 bits; gpuarch validate moe-dispatch)")
        if x.get("prefill_node_dedupe"):
            lines.append("                a prefill pass sends a token across the network "
                         "once per node its experts are on (high-throughput kernels)")
        if x.get("two_batch_overlap_hidden") is not None:
            lines.append(f"                two-batch overlap: "
                         f"{x['two_batch_overlap_hidden']:.0%} of the shorter of a "
                         "micro-batch's exchange and the other's work is hidden")
    if a.get("sparse_attention"):
        x = a["sparse_attention"]
        where = f"in {x['sparse_layers']} layers " \
            if x["sparse_layers"] < x["attention_layers"] else ""
        lines.append(_sparse_line(
            f"{where}each query attends to the {x['index_topk']:,} positions", x,
            x["index_topk"],
            f"; the FP8 latent in FlashMLA's layout, "
            f"{x['latent_bytes_per_position_layer']:g} bytes a position and layer "
            "(--mla-cache)" if x.get("latent_cache") == "flashmla"
            and a["formats"]["kv_cache"] == "fp8" else ""))
    if a.get("block_sparse_attention"):
        x = a["block_sparse_attention"]
        lines.append(_sparse_line(
            f"in {x['sparse_layers']} layers each query attends to the {x['topk_blocks']} "
            f"blocks of {x['block']} positions ({x['positions']:,})", x, x["positions"]))
    if a.get("mla_decode_math") == "16-bit" and not a.get("fp8_mla_decode", True) \
            and a["formats"]["kv_cache"] == "fp8":
        lines.append("  decode attn   latent attention computed in 16 bits over the FP8 cache "
                     "(--no-fp8-mla-decode)")
    if a.get("decode_kv_reads") == "per-query-head":
        lines.append("  decode attn   each KV head's cache read once for every query head it "
                     "serves, the repeats from L2 (a multi-head decode kernel; "
                     "--decode-kv-reads shared for GQA-aware kernels)")
    elif a.get("chunked_decode_on_trtllm"):
        lines.append(f"  decode attn   each KV head's cache read once for its query heads; "
                     f"{a['chunked_decode_on_trtllm']}")
    elif a.get("decode_kv_reads") == "chunked-per-query-head":
        lines.append("  decode attn   the chunked-attention layers' cache read once for every "
                     "query head (a multi-head decode kernel, the repeats from L2), the other "
                     "layers' once a KV head")
    if a.get("output_len_cv"):
        lines.append(f"  lengths       output lengths spread {a['output_len_cv']:g} (sd / mean): "
                     f"the requests in flight average {fmt(a['mean_output_in_flight'])} "
                     f"output tokens, a decode step {fmt(a['mean_decode_context'])} of "
                     "context per sequence")
    run = a.get("offline_run")
    if run:
        lines.append(f"  offline       a run of {run['requests']:,} requests (an even share a "
                     f"replica) takes {fmt(run['run_s'])} s, {fmt(run['beyond_steady_s'])} s "
                     "of it beyond the steady rate:")
        if run["ends_with"] == "drain":
            lines.append("                the drain, the answers admitted last running to up "
                         f"to {a['max_output_len']:,} tokens at a shrinking batch, each step "
                         "paying the decode step's fixed part")
        elif run["ends_with"] == "staggered":
            lines.append("                the engine admits a few whole prompts an iteration "
                         "within its token budget, so the batch fills and empties over that "
                         "many decode steps at the start and the end")
        else:
            lines.append("                the last wave of requests runs part-full")
        if a.get("output_len_cv") and run["ends_with"] != "drain":
            lines.append("                the waves take one length: the drain of the "
                         "longest answers at the end is not priced (give --max-output-len), "
                         "so a run of a few batches reads fast")
    window = a.get("context_window")
    if window and window["exceeded"]:
        lines.append(f"  note          {window['sequence']:,} tokens a sequence run past the "
                     f"model's configured context of {window['tokens']:,}; estimated "
                     "anyway (RoPE scaling can extend a context; a learned position table "
                     "cannot)")
    if a.get("engine_limits"):
        lines.append(f"  limits        {a['max_batch_size']:,} sequences, "
                     f"{a['max_prefill_tokens_per_pass']:,} tokens a pass, as "
                     f"{a['engine_limits']} chooses them")
    if a.get("speculative"):
        sp = a["speculative"]
        lines.append(f"  speculative   {sp['draft_tokens']} draft tokens per step, "
                     f"{fmt(sp['acceptance_length'])} tokens per sequence per step "
                     f"({sp['draft']})")
    if a.get("cached_prefix"):
        lines.append(f"  prefix cache  {a['cached_prefix']:,} of the prompt's tokens cached "
                     "(shared by every request): not prefilled, and their KV cache held once "
                     "per replica")
    if a.get("cpu_offload"):
        lines.append(f"  CPU offload   {a['cpu_offload']}")
    return lines


def render_inference(e: InferenceEstimate, band: Band | None = None,
                     remedies: Sequence[Remedy] = (),
                     near: Sequence[tuple[float, PublishedFigure]] = ()) -> str:
    """The estimate in text; with ``band``, the range its error band gives; with
    ``remedies`` (a server that does not fit), what single changes would make it fit; with
    ``near`` (``validation.nearest.nearest``), the published runs closest to it."""
    a = e.assumptions
    mem = e.memory
    lines = [
        f"{e.model} on {e.gpus} x {e.gpu}: batch {e.batch} ("
        + ("--batch max, but no batch fits: shown at 1; "
           if a.get("batch_asked") == "max" and e.max_batch < 1 else "")
        + f"{a['batching']} batching"
        + (", the engine's cap" if a.get("max_batch_size") == e.batch else "")
        + (f", {a['pipeline_micro_batches']} pipeline micro-batches in flight"
           if a.get("pipeline_micro_batches", 1) > 1 else "") + "), "
        f"{a['replicas']} replica(s)" + _expert_split(a.get("parallelism", {})),
        *_serving_setup_lines(a),
    ]
    if a.get("load"):
        ld = a["load"]
        lines.append(f"  load          {fmt(ld['rate_per_s'])} requests/s: "
                     f"{fmt(ld['in_flight_per_replica'])} in flight per replica (Little's "
                     f"law), {ld['utilization']:.0%} of the {fmt(ld['capacity_per_s'])} "
                     "requests/s the replicas carry at most")
    lines += [
        "",
        f"  TTFT          {fmt(from_si(e.ttft_s, Unit.MS))} ms   "
        f"(prefill: {e.bottleneck['prefill']}-bound)",
        f"  TPOT          {fmt(from_si(e.tpot_s, Unit.MS))} ms   "
        f"(decode: {e.bottleneck['decode']}-bound"
        + (f"; a padded CUDA graph of {a['cuda_graph_padding']['decode_rows']} sequences"
           if a.get("cuda_graph_padding")
           and a["cuda_graph_padding"]["decode_rows"] != e.batch else "") + ")",
        f"  request       {fmt(e.request_latency_s)} s",
        f"  throughput    {fmt(e.output_tokens_per_s)} output tokens/s, "
        f"{fmt(e.output_tokens_per_s / e.gpus)} per GPU, "
        f"{fmt(e.output_tokens_per_s_per_user)} per user (1 / TPOT)",
        *_cost_line(e.cost),
        *_band_line(band, e.output_tokens_per_s, "output tokens/s"),
        *_nearest_lines(near, "serving"),
        "",
        f"  memory/GPU    {_gib(sum(mem.values()))} GiB of {_gib(e.gpu_memory_bytes)} GiB: "
        + ("fits" if e.fits_in_memory else "DOES NOT FIT")
        + f"; largest batch that fits: {e.max_batch}"
        + (" (each sequence at its mean context: max_utilization)"
           if a.get("scheduler_policy") == "max_utilization" else "")
        + f"; longest context at batch {e.batch}: "
        + ((f"no limit (no KV cache: {_mixer(a)} blocks only)"
            if not a["kv_bytes_per_token_per_gpu"] else "no limit (sliding-window KV cache)")
           if e.max_context is None else f"{e.max_context:,} tokens"
           + _beyond_window(e.max_context, a.get("context_window"))),
        f"    weights {_gib(mem['weights'])}, KV cache {_gib(mem['kv_cache'])} "
        f"({fmt(from_si(a['kv_bytes_per_token_per_gpu'], Unit.KIB))} KiB per token"
        + (f" and {_state_size(a['mamba_state_bytes_per_sequence_per_gpu'])} "
           f"of {_mixer(a)} state per sequence"
           if a.get("mamba_state_bytes_per_sequence_per_gpu")
           else "") + "), "
        f"activations {_gib(mem['activations'])}, reserve {_gib(mem['other'])} GiB",
        *_serving_remedy_lines(remedies),
        "",
        f"  prefill       {e.bottleneck_reason['prefill']}",
        "                one pass"
        + (f" ({fmt(a['prefill_pass_prompts'])} "
           f"prompt{'' if a['prefill_pass_prompts'] == 1 else 's'})"
           if a.get("prefill_pass_prompts") is not None else "") + ": "
        + _shares(e.prefill_parts_s, sum(e.prefill_parts_s.values())),
        f"  decode        {e.bottleneck_reason['decode']}",
        "                one step: "
        + _shares(e.decode_step_parts_s, sum(e.decode_step_parts_s.values())),
    ]
    if a.get("precision_fallback"):
        lines.append(f"  note          {a['precision_fallback']}")
    if a.get("measured_parameters") or a.get("sibling_rates"):
        lines += _origin_lines(a)
    return "\n".join(lines)


def render_batch_sweep(sweep: BatchSweep, band: Band | None = None) -> str:
    """A batch sweep as a table, one row per batch, the frontier marked; with ``band``, the
    model's error on published serving figures of this kind."""
    first = sweep.points[0].estimate
    a = first.assumptions
    continuous = a["batching"] == "continuous"
    priced = first.cost.get("usd_per_million_output_tokens") is not None
    rows = []
    for p in sweep.points:
        e = p.estimate
        rows.append([
            ("* " if p.on_frontier else "  ") + f"{p.in_flight:,}", f"{e.batch:,}",
            fmt(from_si(e.ttft_s, Unit.MS)), fmt(from_si(e.tpot_s, Unit.MS)),
            fmt(e.output_tokens_per_s_per_user), fmt(e.output_tokens_per_s / e.gpus),
            fmt(e.output_tokens_per_s), _gib(sum(e.memory.values())),
            "yes" if e.fits_in_memory else "NO", e.bottleneck["decode"]]
            + ([fmt(e.cost["usd_per_million_output_tokens"])] if priced else []))
    lines = [
        f"{first.model} on {first.gpus} x {first.gpu}: {sweep.input_len:,} in / "
        f"{sweep.output_len:,} out, {a['batching']} batching, {a['replicas']} replica(s)"
        + _expert_split(a.get("parallelism", {})) + f"; {len(sweep.points)} batch size"
        + ("s" if len(sweep.points) > 1 else ""),
        *_serving_setup_lines(a),
        "",
        table(["In flight", "Batch", "TTFT ms", "TPOT ms", "tok/s/user", "tok/s/GPU",
               "tok/s", "GiB/GPU", "Fits", "Decode bound"] + (["$/1M tok"] if priced else []),
              rows, right=[True] * 8 + [False, False] + ([True] if priced else [])),
        "",
        "  * on the frontier: no other batch gives at least as many output tokens/s per GPU "
        "and per user with more of one (or the same sooner); tok/s/user = 1 / TPOT",
    ]
    if continuous and any(p.in_flight > p.estimate.batch for p in sweep.points):
        lines.append(f"  In flight above Batch: more requests than the {first.max_batch:,} "
                     "that fit; the rest wait in a queue for a slot, in the TTFT")
    if any(not p.estimate.fits_in_memory for p in sweep.points):
        lines.append(f"  Fits NO: weights, KV cache and activations exceed the GPU's "
                     f"{_gib(first.gpu_memory_bytes)} GiB ("
                     + (f"the largest batch that fits: {first.max_batch:,})"
                        if first.max_batch >= 1 else
                        "not one sequence fits; one --batch lists the changes that would "
                        "make it fit)"))
    lines += _band_summary(band, "output tokens/s")
    return "\n".join(lines)


def render_gpu_scaling(scaling: GpuScaling, band: Band | None = None) -> str:
    """A GPU-count scaling table, one row per count (or the reason it cannot run); with
    ``band``, the model's error on published training figures of this kind."""
    base = scaling.base
    par = base.parallelism
    totals = base.total is not None
    cost = base.total is not None and base.total.get("cost_usd") is not None
    restarts = base.total is not None and base.total.get("checkpointing") is not None
    rows = []
    for p in scaling.points:
        e = p.estimate
        if e is None:
            rows.append([f"{p.gpus:,}", "-", "-", "-", "-", "-", "-", "-", "-", "no"]
                        + (["-", "-"] if totals else []) + (["-", "-"] if restarts else [])
                        + (["-"] if cost else []) + [f"cannot run: {p.error}"])
            continue
        q = e.parallelism
        eff = scaling.efficiency(p)
        row = [f"{p.gpus:,}", f"{q['dp']:,}", f"{q['micro_batches']:,}", fmt(e.step_time_s),
               fmt(e.tokens_per_s), fmt(e.tokens_per_s_per_gpu), f"{e.mfu:.1%}",
               f"{eff:.0%}" if eff is not None else "-", _gib(e.memory.total),
               "yes" if e.fits_in_memory else "NO"]
        if totals and e.total is not None:
            row += [fmt(e.total["time_days"]), fmt(e.total["gpu_hours"])]
            if restarts:
                c = e.total["checkpointing"]
                row += [fmt(c["time_days"]), f"{c['goodput']:.1%}"]
            if cost:
                row.append(fmt(e.total["cost_usd"] or 0.0))
        row.append(e.bottleneck)
        rows.append(row)
    head = ["GPUs", "DP", "Micro-batches", "Step s", "tokens/s", "tok/s/GPU", "MFU",
            "Scaling", "GiB/GPU", "Fits"] + (["Days", "GPU-hours"] if totals else []) \
        + (["Days w/ restarts", "Goodput"] if restarts else []) \
        + (["USD"] if cost else []) + ["Bottleneck"]
    layout = (f"TP{par['tp']} PP{par['pp']} CP{par['cp']} EP{par['ep']}"
              + (f" VPP{par['vpp']}" if par.get("vpp", 1) > 1 else ""))
    lines = [
        f"{base.model} on {base.gpu}: {layout}, global batch {scaling.global_batch:,} "
        f"sequences kept (strong scaling); {len(scaling.points)} GPU counts",
        "",
        table(head, rows, right=[True] * (len(head) - 1) + [False]),
        "",
        "  Micro-batches: per data-parallel rank and step. Scaling: tokens/s per GPU over "
        f"that at {scaling.base_point.gpus:,} GPUs (100% = every added GPU adds its full "
        "share)",
    ]
    lines += _band_summary(band, "tokens/s")
    return "\n".join(lines)


def launch_lines(launch: Launch) -> list[str]:
    """A framework's command for the estimate (``report.launch.Launch``), one flag a line,
    then what it leaves to the user."""
    head = "  launch        "
    pad = " " * len(head)
    lines = [f"{head}{launch.name} (flags as in {launch.checked}):"]
    lines += [f"{pad}{line}" for line in launch.lines()]
    for name, text in launch.files:
        lines.append(f"{pad}{name}:")
        lines += [f"{pad}  {line}" for line in text.splitlines()]
    lines += [f"{pad}note: {note}" for note in launch.notes]
    return lines


def simulation_lines(sim: Simulation) -> list[str]:
    """A request-level simulation's figures (``estimate.simulate``): a table of the mean and
    percentiles of what each request saw, and what the run delivered."""
    rows = [[name, *(f"{from_si(v, Unit.MS):,.1f}" for v in (p.mean, p.p50, p.p90, p.p99))]
            for name, p in (("TTFT", sim.ttft_s), ("TPOT", sim.tpot_s),
                            ("latency", sim.latency_s), ("queued", sim.queue_s))
            if p is not None]
    arrivals = {"poisson": "a Poisson stream", "uniform": "evenly spaced arrivals",
                "trace": "the trace's arrivals"}.get(sim.arrivals, sim.arrivals)
    return [f"simulated: {sim.requests:,} requests per replica as {arrivals} at "
            f"{sim.rate_per_s:g}/s in all (seed {sim.seed}; the last {sim.measured:,} "
            f"counted), the estimate's own pass times, prompts prefilled "
            + ("beside the decode steps" if sim.schedule == "mixed" else
               "in passes of their own"),
            table(["ms", "mean", "p50", "p90", "p99"], rows,
                  right=[False, True, True, True, True]),
            f"  a decode step held {sim.mean_batch:.1f} sequences on average (at most "
            f"{sim.max_batch:,}); {sim.output_tokens_per_s:,.0f} output tokens/s in all",
            *prompt_lines(sim.prompts, sim.lengths, sim.arrivals == "trace", sim.rate_per_s),
            *slo_lines(sim.slo)]


def slo_lines(slo: dict[str, Any] | None) -> list[str]:
    """What share of a simulation's requests met its objectives, and the goodput
    (``Simulation.slo``); nothing without objectives."""
    if not slo:
        return []
    caps = [f"{name} <= {from_si(slo[key], Unit.MS):g} ms"
            for name, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s")) if slo[key] is not None]
    return [f"  objectives    {' and '.join(caps)}: {slo['attained']:.1%} of the requests met "
            f"them; goodput {slo['goodput_requests_per_s']:.3g} requests/s"]


def prompt_lines(prompts: dict[str, Any] | None, lengths: dict[str, Any] | None,
                 trace: bool = False, rate: float = 0.0) -> list[str]:
    """How a simulation's prompt (and answer) lengths varied (``Simulation.prompts`` and
    ``lengths``), and with ``trace`` how its arrivals were paced to ``rate``; nothing when
    every request had the configured lengths."""
    lines = []
    if lengths:
        how = (f"in order, at its arrival times scaled from {lengths['arrival_rate_per_s']:.3g}"
               f" to {rate:g} requests/s" if trace else "at random")
        lines.append(f"  lengths       each request a row of {lengths['source']} "
                     f"({lengths['rows']:,} rows) {how}")
        answers = lengths["output_len"]
        if answers:
            lines.append(f"  answers       mean {answers['mean']:,.0f} tokens, median "
                         f"{answers['p50']:,.0f}, longest {answers['max']:,.0f} (spread "
                         f"{answers['cv']:.2f} sd / mean)")
    if prompts:
        drawn = prompts["drawn_from"]
        how = ("drawn from the given quantiles" if drawn == "quantiles" else
               "from the file" if drawn == "lengths" else
               f"spread {prompts['input_len_cv']:g} (sd / mean, gamma)")
        lines.append(f"  prompts       {how}: mean {prompts['mean']:,.0f} tokens, median "
                     f"{prompts['p50']:,.0f}, longest {prompts['max']:,.0f}")
    return lines


MOE_KERNEL_SECTIONS = {"trtllm": "TensorRT-LLM's measured MoE layers",
                       "vllm": "vLLM's and SGLang's measured MoE layers",
                       "sglang": "vLLM's and SGLang's measured MoE layers",
                       "sglang-deepep": "Wide expert parallelism as SGLang runs it",
                       "trtllm-gen": "TensorRT-LLM's TRTLLM MoE backend"}
"""The section of docs/performance-model.md on each engine's comparison."""


def moe_kernels_named(kernels: str) -> tuple[str, str]:
    """Whose MoE kernels (``MOE_KERNELS``) as a text names them ("TensorRT-LLM's"), and the
    other choices as ``--moe-kernels`` takes them ("vllm|sglang")."""
    others = "|".join(k for k in MOE_KERNEL_ENGINES if k != kernels)
    return f"{MOE_KERNEL_ENGINES[kernels]}'s", others


def render_roofline(r: dict[str, Any]) -> str:
    lines = [f"{r['gpu']}, {r['precision']}: peak {fmt(r['peak_tflops'])} TFLOPS "
             f"({r['peak_source']}), {fmt(r['memory_bandwidth_gb_s'])} GB/s, ridge point "
             f"{fmt(r['ridge_point_flop_per_byte'])} FLOP/byte"]
    if r.get("precision_fallback"):
        lines.append(f"note: {r['precision_fallback']}")
    if r["ops"]:
        rows = [[o["op"], fmt(from_si(o["flops"], Unit.GFLOPS)),
                 fmt(from_si(o["bytes"], Unit.MB)), fmt(o["arithmetic_intensity"]),
                 fmt(from_si(o["time_s"], Unit.US)),
                 fmt(o["achieved_tflops"]), o["bound"], _pct(o["efficiency"])]
                for o in r["ops"]]
        lines += ["", table(["Op", "GFLOP", "MB", "FLOP/B", "Time us", "TFLOPS", "Bound",
                             "of peak"], rows,
                            right=[False, True, True, True, True, True, False, True])]
    if r.get("plot"):
        lines.append(f"\nPlot written to {r['plot']}")
    return "\n".join(lines)


_PART_LABELS = {"dense_gemms": "dense GEMMs", "expert_gemms": "expert GEMMs",
                "lora_adapters": "LoRA adapters",
                "attention": "attention", "memory_bound": "memory-bound",
                "mamba_scan": "recurrent scan",
                "recompute": "recompute", "lm_head_and_loss": "LM head + loss",
                "tensor_parallel": "TP", "context_parallel": "CP", "expert_parallel": "EP",
                "pipeline_p2p": "PP sends", "data_parallel": "DP", "lm_head": "LM head",
                "tied_embedding": "tied embedding grads",
                "activation_offload": "activation offload",
                "overhead": "fixed overhead", "host": "host wait",
                "eager_launch": "eager launches",
                "attention_dp_wait": "attention-DP wait",
                "weight_offload": "weights from host memory"}


def _shares(parts: dict[str, float], total: float) -> str:
    """A time's parts, largest first, as shares of it (those under 0.5% left out)."""
    shown = sorted(((v, k) for k, v in parts.items() if total and v >= 0.005 * total),
                   reverse=True)
    return ", ".join(f"{_PART_LABELS.get(k, k)} {v / total:.0%}" for v, k in shown)


def _parts(parts: dict[str, float], total: float) -> str:
    """``_shares`` in parentheses after a figure, or nothing."""
    shown = _shares(parts, total)
    return f"   ({shown})" if shown else ""


def _held_lines(held: dict[str, Any] | None) -> list[str]:
    """The activations as layer-passes of one micro-batch each (the training estimate's
    ``assumptions.activations_held``)."""
    if not held:
        return []
    return [f"    activations: {fmt(held['layer_passes'])} layer-passes of "
            f"{fmt(held['gib_per_layer_pass'])} GiB (a layer's for one micro-batch) held "
            "at once"]


def _dp_traffic_line(traffic: dict[str, Any] | None) -> list[str]:
    """The step's data-parallel traffic and how much of it the compute hides, where there is
    any: how near the layout is to the edge of the overlap."""
    total = traffic["gather"] + traffic["reduce"] if traffic else 0.0
    if not traffic or not total:
        return []
    return [f"      data-parallel traffic {fmt_seconds(total)} a step (gathers "
            f"{fmt_seconds(traffic['gather'])}, reductions {fmt_seconds(traffic['reduce'])}), "
            f"{fmt_seconds(traffic['exposed'])} of it exposed"]


def _other_detail(parts: dict[str, float]) -> str:
    """What the 'other' seconds are: the optimizer step, the fixed time per step, and a
    fixed host time or the layer-pass floor where they are part of them."""
    shown = [("fixed per step", parts.get("step_overhead", 0.0)),
             ("per-layer host time", parts.get("host_overhead", 0.0)),
             ("layer-pass floor", parts.get("layer_pass_floor", 0.0))]
    if not any(seconds for _, seconds in shown):
        return "   (optimizer step)"
    return "   (" + ", ".join([f"optimizer {fmt_seconds(parts['optimizer'])}"] + [
        f"{label} {fmt_seconds(seconds)}" for label, seconds in shown if seconds]) + ")"


def _expert_split(par: dict[str, Any]) -> str:
    """How an MoE model's experts are laid out, when expert parallelism is on."""
    if par.get("ep", 1) <= 1:
        return ""
    slots = (f" ({par['expert_slots']} slots: {par['redundant_experts']} redundant "
             "experts)") if par.get("redundant_experts") else ""
    overlap = "; two-batch overlap" if par.get("two_batch_overlap") else ""
    if par.get("attention_data_parallel"):
        return (f" with data-parallel attention; experts split over EP{par['ep']}{slots} "
                f"(each replica's tokens reach every GPU's experts){overlap}")
    return (f"; experts split over {par['expert_split_gpus']} GPUs (EP{par['ep']} within "
            f"TP){slots}{overlap}")


def _gib(num_bytes: float) -> str:
    """Bytes shown in GiB."""
    return fmt(from_si(num_bytes, Unit.GIB))


def _bf16_layers(counts: list[int] | None) -> str:
    """', the first 2 and the last 4 layers in BF16' (either may be absent)."""
    if not counts:
        return ""
    parts = [f"the {end} {n} layer{'s' if n > 1 else ''}"
             for end, n in zip(("first", "last"), counts, strict=True) if n]
    return ", " + " and ".join(parts) + " in BF16"




def render_gpu_comparison(task: str, runs: Sequence[tuple[Any, Band | None]]) -> str:
    """The same training or serving run on several GPUs (``estimate ... --gpu a,b``), one
    row each, with the ratio of its throughput per GPU to the first's and, from each GPU's
    error band, the range its published runs of this kind put that figure in."""
    first = runs[0][0]
    training = task == "training"

    def per_gpu(e: Any) -> float:
        return float(e.tokens_per_s_per_gpu if training else e.output_tokens_per_s / e.gpus)

    base = per_gpu(first)
    rows = []
    for e, band in runs:
        rate = per_gpu(e)
        likely = "-"
        if band is not None:
            low, high = band.likely_range(rate)
            likely = f"{fmt(low)}-{fmt(high)}"
        if training:
            step = fmt(e.step_time_s)
            total = e.total or {}
            rows.append([e.gpu, f"{e.parallelism['gpus']:,}", step, fmt(e.tokens_per_s),
                         fmt(rate), f"{rate / base:.2f}x", likely, f"{e.mfu:.1%}",
                         _gib(e.memory.total), "yes" if e.fits_in_memory else "NO",
                         e.bottleneck]
                        + ([fmt(total["time_days"])] if first.total else [])
                        + ([fmt(total.get("cost_usd") or 0.0)]
                           if first.total and first.total.get("cost_usd") else []))
        else:
            cost = e.cost.get("usd_per_million_output_tokens")
            rows.append([e.gpu, f"{e.gpus:,}", f"{e.batch:,}", fmt(from_si(e.ttft_s, Unit.MS)),
                         fmt(from_si(e.tpot_s, Unit.MS)), fmt(e.output_tokens_per_s),
                         fmt(rate), f"{rate / base:.2f}x", likely,
                         _gib(sum(e.memory.values())), "yes" if e.fits_in_memory else "NO",
                         e.bottleneck["decode"]]
                        + ([fmt(cost) if cost is not None else "-"]
                           if first.cost.get("usd_per_million_output_tokens") is not None
                           else []))
    if training:
        par = first.parallelism
        head = ["GPU", "GPUs", "Step s", "tokens/s", "tok/s/GPU", "vs first", "likely",
                "MFU", "GiB/GPU", "Fits", "Bottleneck"] \
            + (["Days"] if first.total else []) \
            + (["USD"] if first.total and first.total.get("cost_usd") else [])
        what = (f"TP{par['tp']} PP{par['pp']} CP{par['cp']} EP{par['ep']}, "
                f"{par['precision']}, global batch {par['global_batch']:,}")
        unit = "tok/s/GPU"
    else:
        a = first.assumptions
        head = ["GPU", "GPUs", "Batch", "TTFT ms", "TPOT ms", "tok/s", "tok/s/GPU",
                "vs first", "likely", "GiB/GPU", "Fits", "Decode bound"] \
            + (["$/1M tok"] if first.cost.get("usd_per_million_output_tokens") is not None
               else [])
        par = a["parallelism"]
        what = (f"TP{par['tp']} PP{par['pp']} EP{par['ep']}, {a['batching']} batching, "
                f"weights {a['formats']['weights']}, KV {a['formats']['kv_cache']}")
        unit = "output tok/s per GPU"
    right = [False] + [True] * (len(head) - 1)
    for name in ("Fits", "Bottleneck", "Decode bound"):
        if name in head:
            right[head.index(name)] = False
    lines = [f"{first.model}: the same {'training step' if training else 'serving run'} on "
             f"{len(runs)} GPUs ({what})", "", table(head, rows, right=right), "",
             f"  vs first: {unit} over the first GPU's. likely: the {unit} the model's "
             "10th-90th percentile error on that GPU's published runs of this kind puts "
             "the measured figure in (`validate bands`; '-' where too few)"]
    if any(not e.fits_in_memory for e, _ in runs):
        lines.append("  Fits NO: a single estimate (--gpu NAME) lists the changes that would "
                     "make it fit")
    return "\n".join(lines)
