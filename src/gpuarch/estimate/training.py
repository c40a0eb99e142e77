"""One training step of a transformer on a GPU cluster: time, memory, MFU, cost, energy.

Model (Model x Strategy x System, composed by pure functions):

1. ``TrainingConfig`` (the strategy, ``training_config``) is validated: DP = GPUs /
   (TP x PP x CP), every dimension must divide what it splits.
2. One micro-batch on one pipeline stage is a list of operators (``perf.roofline``) and
   collectives (``perf.collectives``): per layer the QKV, attention, projection and MLP GEMMs,
   fused attention, norms and activations, tensor-parallel all-reduces (or all-gather +
   reduce-scatter with sequence parallelism), context-parallel KV exchange and MoE all-to-all;
   backward costs twice the forward GEMMs and 2.5x the forward attention; recomputation adds
   forward work (``training_layers``). The last stage also runs the LM head.
3. The step is m micro-batches through the slowest stage plus the pipeline schedule's
   bubble (1F1B's (PP-1)/VPP stage times, or a zero-bubble or DualPipe schedule's,
   ``pipeline_schedule.pipeline_bubble``), the exposed part of the data-parallel gradient
   traffic (stage-correct for ZeRO 0-3), and the optimizer step (``training_step.
   evaluate_training``, over arrays of configurations for the advisor).
4. ``estimate_training`` validates one configuration, costs it and explains the result:
   the breakdowns, the bottleneck, the assumptions, and for a token budget the time, cost,
   energy and expected interruptions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System, spec
from gpuarch.errors import GpuarchError
from gpuarch.estimate.energy import DEFAULT_FACILITY, GPU_POWER_MODEL, Facility, energy_kwh
from gpuarch.estimate.host_link import product_host_link
from gpuarch.estimate.lora import lora_params
from gpuarch.estimate.pipeline_schedule import DUALPIPE_SCHEDULES, SCHEDULE_BUBBLES
from gpuarch.estimate.reliability import (
    INTERRUPTIONS_PER_GPU_DAY,
    RATE_SOURCE,
    CheckpointPlan,
    expected_interruptions,
    goodput,
)
from gpuarch.estimate.training_config import (
    CP_COMM_TYPES,
    EP_DISPATCHERS,
    EXPERT_LAUNCHES,
    TrainingConfig,
    named_recompute_modules,
)
from gpuarch.estimate.training_layers import (
    AUTOMODEL_DEEPEP_WAIT_US,
    SIXTEEN_BIT,
    LayerCosts,
    attention_efficiency,
    dispatcher_host_time,
    expert_efficiency,
    fused_attention,
    layer_costs,
    ranks_per_node,
)
from gpuarch.estimate.training_step import (
    FRAMEWORK_RESERVE_BYTES,
    OFFLOAD_COPY_BYTES,
    OFFLOAD_HOST_BYTES,
    FixedCosts,
    TrainingCore,
    evaluate_training,
    fixed_costs,
    moment_bytes,
    pipeline_spans_nodes,
    waits_on_sends,
)
from gpuarch.perf.collectives import Link, Num, link_for
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.fp8_attention import fp8_attention_sources, fp8_training_attention_speedup
from gpuarch.perf.precision import Precision, matmul_peak
from gpuarch.perf.roofline import (
    Device,
    attention_span,
    attention_span_share,
    fp8_backward_ignores_window,
)
from gpuarch.perf.sibling import sibling_notes
from gpuarch.units import Unit, from_si
from gpuarch.workloads.flops import attention_core_dims
from gpuarch.workloads.params import (
    count_params,
)
from gpuarch.workloads.shape import TransformerShape

__all__ = [
    "COMMUNICATION_PARTS",
    "COMPUTE_PARTS",
    "CP_COMM_TYPES",
    "EP_DISPATCHERS",
    "EXPERT_LAUNCHES",
    "FRAMEWORK_RESERVE_BYTES",
    "LayerCosts",
    "TrainingConfig",
    "TrainingCore",
    "TrainingEstimate",
    "estimate_training",
    "evaluate_training",
    "layer_costs",
    "ranks_per_node",
]

COMPUTE_PARTS = ("dense_gemms", "expert_gemms", "lora_adapters", "attention", "mamba_scan",
                 "memory_bound", "recompute", "lm_head_and_loss")
"""How ``compute_breakdown_s`` splits the step's compute seconds: the dense GEMMs (QKV,
projection, MLP, shared experts, Mamba-2 projections), the routed experts' grouped GEMMs
and router, LoRA's adapters (their GEMMs and the add of their output; 0 unless fine-tuning
with LoRA), attention (fused, or the unfused score GEMMs and softmax), a hybrid model's
Mamba-2 convolution and chunked scan (0 without), memory-bound work (norms,
residual adds, activation, precision casts, MoE permutation), the forward work
recomputation repeats, and the LM head with the loss on the last stage. Forward plus
backward for each."""

COMMUNICATION_PARTS = ("tensor_parallel", "context_parallel", "expert_parallel",
                       "pipeline_p2p", "data_parallel", "tied_embedding",
                       "activation_offload")
"""How ``communication_breakdown_s`` splits the step's exposed communication seconds
(``tied_embedding``: the all-reduce of a tied word embedding's gradient between the first
and last pipeline stages at the end of the step)."""


@dataclass(frozen=True)
class MemoryPerGpu:
    """Bytes per GPU on the most loaded pipeline stage (JSON in GiB)."""

    weights: float = spec("weights", "float", Unit.GIB)
    gradients: float = spec("gradients", "float", Unit.GIB)
    optimizer: float = spec("optimizer", "float", Unit.GIB)
    activations: float = spec("activations", "float", Unit.GIB)
    other: float = spec("other", "float", Unit.GIB)

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.other


@dataclass(frozen=True)
class TimeBreakdown:
    """Where a step's seconds go."""

    compute: float = spec("compute", "float")
    exposed_communication: float = spec("exposed_communication", "float")
    pipeline_bubble: float = spec("pipeline_bubble", "float")
    other: float = spec("other", "float")
    compute_parts: dict[str, float] = field(default_factory=dict)  # COMPUTE_PARTS
    communication_parts: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainingEstimate:
    """The result of one training-step estimate (SI inside; JSON keys carry units)."""

    model: str
    gpu: str
    system: str | None
    parallelism: dict[str, Any]
    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    model_flops_per_token: float
    model_tflops_per_gpu: float
    mfu: float
    hfu: float
    memory: MemoryPerGpu
    gpu_memory_bytes: float
    fits_in_memory: bool
    time_breakdown: TimeBreakdown
    bottleneck: str
    bottleneck_reason: str
    matmul_peak_flops: float
    assumptions: dict[str, Any]
    total: dict[str, Any] | None = field(default=None)

    def as_json(self) -> dict[str, Any]:
        """The documented JSON keys (issue #3), units in the names."""
        mem = {k: from_si(v, Unit.GIB) for k, v in (("weights", self.memory.weights),
                                          ("gradients", self.memory.gradients),
                                          ("optimizer", self.memory.optimizer),
                                          ("activations", self.memory.activations),
                                          ("other", self.memory.other))}
        mem["total"] = from_si(self.memory.total, Unit.GIB)
        out: dict[str, Any] = {
            "model": self.model,
            "gpu": self.gpu,
            "system": self.system,
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "model_flops_per_token": self.model_flops_per_token,
            "model_tflops_per_gpu": self.model_tflops_per_gpu,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "memory_per_gpu_gib": mem,
            "gpu_memory_gib": from_si(self.gpu_memory_bytes, Unit.GIB),
            "fits_in_memory": self.fits_in_memory,
            "time_breakdown_s": {
                "compute": self.time_breakdown.compute,
                "exposed_communication": self.time_breakdown.exposed_communication,
                "pipeline_bubble": self.time_breakdown.pipeline_bubble,
                "other": self.time_breakdown.other,
            },
            "compute_breakdown_s": dict(self.time_breakdown.compute_parts),
            "communication_breakdown_s": dict(self.time_breakdown.communication_parts),
            "bottleneck": self.bottleneck,
            "bottleneck_reason": self.bottleneck_reason,
            "parallelism": self.parallelism,
            "assumptions": self.assumptions,
        }
        if self.total is not None:
            out["total"] = self.total
        return out


def _tp_overlap_16_bit_note(shape: TransformerShape, product: Product, device: Device,
                            intra: Link, inter: Link | None, cfg: TrainingConfig,
                            eff: Efficiency, host_link: float | None,
                            fixed: FixedCosts) -> dict[str, Any]:
    """What the userbuffers overlap is taken to hide in a 16-bit run, and the step priced the
    other way: a dense model's with the traffic hidden (``tp_comm_exposed``:
    ``step_time_s_with_overlap_hidden``), an MoE model's with the overlap off
    (``step_time_s_without_overlap``; docs/performance-model.md, "Dense 16-bit runs and the
    TP overlap"). Both differ from the run only in the overlap, so they reuse its
    ``fixed`` costs and price its layers again."""
    if shape.is_moe:
        without = evaluate_training(shape, product, device, intra, inter,
                                    dataclasses.replace(cfg, tp_comm_overlap=False), eff,
                                    host_link_bytes_s=host_link, fixed=fixed)
        return {"step_time_s_without_overlap": float(without.step), "note": (
            f"the tensor-parallel traffic is taken as hidden by the userbuffers overlap "
            f"(--tp-comm-overlap), as the published MoE runs in 16-bit read (the MoE "
            f"Parallel Folding paper's at TP 2-4, Llama 4 Maverick and Grok-1 on H100); "
            f"without it the step is {float(without.step):.3g} s. The dense 16-bit runs "
            f"read as if it hid none of theirs, and a dense model is priced so")}
    hidden = evaluate_training(shape, product, device, intra, inter, cfg,
                               eff.with_value("tp_comm_exposed_16_bit_dense",
                                              eff.tp_comm_exposed),
                               host_link_bytes_s=host_link,
                               fixed=fixed)
    doc: dict[str, Any] = {"step_time_s_with_overlap_hidden": float(hidden.step)}
    doc["note"] = (
        f"in a dense 16-bit run the userbuffers overlap (--tp-comm-overlap) is taken to "
        f"leave {eff.tp_comm_exposed_16_bit_dense:.0%} of the tensor-parallel traffic "
        f"exposed (tp_comm_exposed_16_bit_dense): every published dense BF16 run with it on "
        f"reads so (NVIDIA's DGX Cloud Llama 3.1 70B and 405B, Nemotron-4 15B and 340B, at "
        f"TP 2-8 on H100 and GB200), while their FP8 twins and the MoE runs read right with "
        f"it hidden; no mechanism is known. Were it hidden, the step would be "
        f"{float(hidden.step):.3g} s")
    return doc


def _offload_assumption(cfg: TrainingConfig, core: TrainingCore,
                        host_link: float | None, eff: Efficiency) -> str:
    """What the estimate takes for optimizer offloading, with the host memory it needs."""
    moved = float(core.offloaded_elements)
    link = (f"copies of {OFFLOAD_COPY_BYTES} bytes an element each way at "
            f"{from_si(host_link, Unit.GB_S):.0f} GB/s (this GPU's share of its link to the "
            "CPU)" if host_link else "copies taken as hidden (the link's rate is not "
            "catalogued for this GPU)")
    return (f"{cfg.optimizer_offload:g} of the optimizer's elements ({moved / 1e9:.3g} billion "
            f"on this GPU) keep their Adam moments on the CPU and are updated there "
            f"(Megatron-Core's HybridDeviceOptimizer): {moment_bytes(cfg):g} bytes an element "
            f"off the GPU; {from_si(moved * OFFLOAD_HOST_BYTES, Unit.GIB):.1f} GiB of host "
            f"memory per GPU ({OFFLOAD_HOST_BYTES} bytes an element); each GPU's process "
            f"updates {eff.cpu_adam_elements_per_s / 1e9:g} billion elements a second on the "
            "host (on one CPU thread, as torchrun gives each of several processes on a node "
            f"and Ray an actor holding no CPU; more threads are not modelled); {link}; "
            + ("copies and updates overlapped" if cfg.optimizer_offload_overlap else
               "copy down, update and copy up one after another")
            + ", none of it hidden behind the next step's passes")


def _checkpointing(shape: TransformerShape, cfg: TrainingConfig, plan: CheckpointPlan,
                   seconds: float, step: float, host_link: float | None,
                   assumptions: dict[str, Any]) -> dict[str, float]:
    """``reliability.goodput`` for a run: its checkpoint is each trained parameter's
    weight and optimizer state at the precision's bytes (gradients are not saved; under
    LoRA only the adapters), spread evenly over the GPUs for an asynchronous save's copy to
    the host."""
    per_param = cfg.param_bytes
    trained = (lora_params(shape, cfg.lora_rank, cfg.adapted).total if cfg.lora_rank
               else count_params(shape).total)
    size = float(trained) * (per_param.weights + per_param.optimizer)
    copy = size / cfg.gpus / host_link if host_link else None
    g = goodput(plan, gpus=cfg.gpus, time_s=seconds, step_s=step, checkpoint_bytes=size,
                host_copy_s=copy)
    assumptions["checkpointing"] = (
        f"a checkpoint of {from_si(size, Unit.GB):,.0f} GB (weights and optimizer state, "
        f"{per_param.weights:g} + {per_param.optimizer:g} bytes per trained parameter) "
        f"written at {from_si(plan.write_bytes_s, Unit.GB_S):,.0f} GB/s"
        + (f", training stopped only for the copy to host memory ({g.save_s:.3g} s)"
           if plan.asynchronous else "")
        + " and read back as fast after an interruption, plus "
        f"{from_si(plan.restart_s, Unit.MINUTE):g} min to restart; "
        + ("every" if plan.interval_s is not None else "at Young's optimum interval, every")
        + f" {from_si(g.interval_s, Unit.MINUTE):.3g} min (whole steps); "
        "first-order model of the saves, the work lost since the last one and the restarts "
        "(gpuarch.estimate.reliability)")
    return {"checkpoint_bytes": size, "save_s": g.save_s, "write_s": g.write_s,
            "load_s": g.load_s, "restart_s": g.restart_s, "interval_s": g.interval_s,
            "mean_time_between_interruptions_s": g.mean_time_between_interruptions_s,
            "time_s": g.wall_s, "time_days": from_si(g.wall_s, Unit.DAY),
            "goodput": g.goodput}


def _fp8_attention_note(shape: TransformerShape, product: Product, device: Device,
                        cfg: TrainingConfig, eff: Efficiency) -> str:
    """What FP8 fused attention runs at in this estimate, and from what."""
    span = float(attention_span(fused_attention(cfg)))
    head_dim = attention_core_dims(shape)[1]
    scaling = cfg.attention_fp8_kernel
    forward, backward = (fp8_training_attention_speedup(product.key, head_dim, span, b,
                                                        scaling)
                         for b in (False, True))
    kernel = "MXFP8" if scaling == "mxfp8" else "FP8"
    if forward is not None and backward is not None:
        windowed = ""
        window_pass = fused_attention(cfg, window=shape.sliding_window,
                                      chunked=shape.attention_chunked)
        window_pass.backward = True
        if shape.sliding_window < cfg.seq_len and fp8_backward_ignores_window(window_pass):
            windowed = ("; its backward over the sliding-window layers costs the unwindowed "
                        "pass (cuDNN's FP8 backward works through every causal key block: "
                        "its GPT-OSS timings, cudnn-frontend "
                        "benchmark/sdpa_benchmark_training/results/gpt_oss/, grow with the "
                        "square of the sequence)")
        return (f"{kernel} fused attention forward {float(forward):.2f}x and backward "
                f"{float(backward):.2f}x as fast as the 16-bit kernel at this run's span "
                f"({span:,.0f} positions, head size {head_dim:g}): NVIDIA cuDNN frontend's "
                "training-attention timings on this chip ("
                + "; ".join(fp8_attention_sources(product.key, head_dim)) + ")" + windowed)
    sixteen = matmul_peak(product, Precision.BF16)
    ratio = "" if sixteen is None else " {:.2f}x as fast as the 16-bit kernel".format(
        eff.context_attention_fp8 / eff.context_attention
        * device.attention_flops / sixteen.flops)
    return (f"FP8 fused attention{ratio}: the serving kernels' FP8 prompt attention over "
            "their 16-bit one (context_attention_fp8 / context_attention at the two peaks); "
            "no training-attention timing of this chip is published")


def _dp_traffic_how(cfg: TrainingConfig) -> str:
    """How the step's data-parallel traffic meets the compute (``data_parallel_traffic_s``),
    as ``evaluate_training``'s exposed() cases price it."""
    if cfg.zero == 3:
        passes = ("forward and backward" if cfg.reshard_after_forward else
                  "forward and kept for its backward")
        return (f"ZeRO-3: the parameters gathered for every micro-batch's {passes}"
                + (", a layer ahead" if cfg.fsdp_prefetch else
                   ", layer by layer in the open"))
    return ("the parameters' all-gather runs during the first micro-batch's forward and "
            "the gradients' reduction during the last one's backward (Megatron-Core's "
            "overlap_param_gather and overlap_grad_reduce): what outlasts one micro-batch's "
            "compute is exposed, plus dp_comm_exposed of one layer's bucket, which nothing "
            "precedes or follows")


def estimate_training(
    catalog: Catalog,
    shape: TransformerShape,
    product: Product,
    cfg: TrainingConfig,
    *,
    system: System | None = None,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    tokens: float | None = None,
    price_per_gpu_hour: float | None = None,
    measured: dict[str, str] | None = None,
    checkpointing: CheckpointPlan | None = None,
    facility: Facility = DEFAULT_FACILITY,
) -> TrainingEstimate:
    """Estimate one training step of ``shape`` on ``cfg.gpus`` x ``product`` (and with
    ``tokens``, the whole run, its energy at ``facility``; with ``checkpointing`` too, its
    time with checkpoints, interruptions and restarts)."""
    if checkpointing is not None:
        if tokens is None:
            raise GpuarchError("--checkpoint-write-gb-s: prices a whole run's checkpoints "
                               "and interruptions; needs --tokens")
        checkpointing.validate()
    if not cfg.recompute_modules and (named := named_recompute_modules(shape, cfg.recompute)):
        cfg = dataclasses.replace(cfg, recompute_modules=named)
    cfg.validate(shape)
    eff = efficiency
    device = Device.of(product, cfg.precision,
                       catalog.chip_of(product).sm.tensor_core_generation)
    if cfg.fp8_attention:
        fp8_device = device.with_fp8_attention(cfg.attention_fp8_kernel)
        if fp8_device is None:
            raise GpuarchError(f"--fp8-attention: {product.name} has no FP8 Tensor Cores "
                               "(Ada, Hopper and newer do)")
        device = fp8_device
    pcie = catalog.pcie_generation(product.pcie_generation or 0)
    intra, inter = link_for(product, system, pcie.x16_bandwidth_bytes_s if pcie else None,
                            required=cfg.gpus > 1)
    if cfg.gpus > cfg.gpus_per_node and inter is None:
        raise GpuarchError(
            f"--gpus: {cfg.gpus} GPUs span several nodes of {cfg.gpus_per_node}; give "
            "--system with an inter-node network (see 'gpuarch systems')")
    # the peak whose sibling factors attention takes: FP8 attention priced from its measured
    # speedup over the 16-bit kernel keeps the 16-bit kernel's (roofline.op_time)
    base = device.measured_fp8_attention_base()
    attention_key = device.attention_key if base is None else base.key
    layer_parts: dict[str, Num] = {}
    run_eff = attention_efficiency(eff, cfg, catalog.chip_of(product).compute_capability,
                                   product.key)
    host_link = product_host_link(catalog, product)
    fixed = fixed_costs(shape, product, device, intra, inter, cfg, run_eff, host_link)
    core = evaluate_training(shape, product, device, intra, inter, cfg, run_eff, layer_parts,
                             host_link_bytes_s=host_link, fixed=fixed)
    step = float(core.step)
    breakdown = _time_breakdown(core, layer_parts)
    tokens_per_s = float(core.tokens_per_s)
    model_flops = core.model_flops_per_token
    per_gpu_flops = float(core.per_gpu_flops)
    mfu, hfu = float(core.mfu), float(core.hfu)
    peak = core.peak
    m = int(core.micro_batches)
    layer_flops = float(core.layer_flops)
    memory = MemoryPerGpu(float(core.weights), float(core.gradients),
                          float(core.optimizer_states), float(core.activations),
                          float(core.other))
    fits = memory.total <= product.memory_bytes

    bottleneck, reason = _bottleneck(breakdown, float(core.optimizer),
                                     float(core.host_overhead), float(core.layer_floor), step,
                                     cfg, mfu, float(core.step_overhead))
    per_param = cfg.param_bytes
    assumptions: dict[str, Any] = {
        "matmul_peak_tflops": from_si(peak, Unit.TFLOPS),
        "matmul_peak_source": f"{device.matmul.key.value} ({device.matmul.origin}, catalog)",
        "precision_fallback": device.matmul.fallback_reason,
        "efficiency": eff.as_dict(),
        "efficiency_origin": "assumed defaults fitted to published measurements"
        if eff is DEFAULT_EFFICIENCY else "calibrated or overridden",
        "measured_parameters": measured or {},
        "flops_convention": "Megatron/PaLM: 2 FLOP per MAC, full (non-causal) attention",
        "other_breakdown_s": {"optimizer": float(core.optimizer),
                              "host_overhead": float(core.host_overhead),
                              "layer_pass_floor": float(core.layer_floor),
                              "step_overhead": float(core.step_overhead)},
        "data_parallel_traffic_s": {
            "gather": float(core.dp_gather), "reduce": float(core.dp_reduce),
            "exposed": float(core.dp_exposed),
            "how": _dp_traffic_how(cfg)},
        "bytes_per_param": {"weights": per_param.weights,
                            "gradients": per_param.gradients,
                            "optimizer": per_param.optimizer},
        "framework_reserve_gib": from_si(FRAMEWORK_RESERVE_BYTES, Unit.GIB),
        "attention": "fused (FlashAttention-style), causal" if cfg.fused_attention else
        "unfused: full score matrix in memory (softmax and dropout as memory-bound work)",
        "attention_kernel": cfg.attention_kernel,
        "attention_efficiency": run_eff.attention,
        # that rate at this run's span of a kernel call (a sequence or packed document; one
        # GPU's chunk under context parallelism): roofline.attention_span_share
        "attention_efficiency_at_span": run_eff.attention * attention_span_share(
            fused_attention(cfg), run_eff),
        "sibling_rates": sibling_notes(product.key, (
            ("gemm", device.matmul.key), ("attention_forward", attention_key),
            ("attention_backward", attention_key)))
        if eff.sibling_rates else [],
        "intra_node_link": intra.fabric.value,
        "layer_forward_flops_per_gpu": layer_flops,
    }
    if cfg.fp8_attention:
        assumptions["fp8_attention"] = _fp8_attention_note(shape, product, device, cfg, eff)
    if cfg.tp_comm_overlap and cfg.tp > 1 and cfg.precision in SIXTEEN_BIT:
        assumptions["tp_overlap_16_bit"] = _tp_overlap_16_bit_note(
            shape, product, device, intra, inter, cfg, run_eff, host_link, fixed)
    _add_kernel_notes(assumptions, shape, product, cfg, eff, core)
    _add_schedule_notes(assumptions, shape, cfg, core, host_link, run_eff)
    total = (None if tokens is None else
             _whole_run(shape, product, cfg, tokens, tokens_per_s, hfu, step, price_per_gpu_hour,
                        checkpointing, facility, host_link, assumptions))
    return TrainingEstimate(
        model=shape.name,
        gpu=product.name,
        system=system.name if system else None,
        parallelism=_parallelism(shape, cfg, m),  # type: ignore[arg-type]
        step_time_s=step,
        tokens_per_s=tokens_per_s,
        tokens_per_s_per_gpu=tokens_per_s / cfg.gpus,
        model_flops_per_token=model_flops,
        model_tflops_per_gpu=from_si(per_gpu_flops, Unit.TFLOPS),
        mfu=mfu,
        hfu=hfu,
        memory=memory,
        gpu_memory_bytes=product.memory_bytes,
        fits_in_memory=fits,
        time_breakdown=breakdown,
        bottleneck=bottleneck,
        bottleneck_reason=reason,
        matmul_peak_flops=peak,
        assumptions=assumptions,
        total=total,
    )


def _time_breakdown(core: TrainingCore, layer_parts: dict[str, Num]) -> TimeBreakdown:
    """The step's seconds by kind: the average layer's parts (``layer_parts``, per micro-
    batch on the slowest stage) times the micro-batches, with the head and the step-level
    communication beside them."""
    m = float(core.micro_batches)
    compute_parts = {k: m * float(layer_parts.get(k, 0.0)) for k in COMPUTE_PARTS}
    compute_parts["lm_head_and_loss"] = m * float(core.stage_head_time)
    comm_parts = {k: m * float(layer_parts.get(k, 0.0)) for k in COMMUNICATION_PARTS}
    comm_parts["expert_parallel"] += float(core.unpaired_a2a)
    comm_parts["pipeline_p2p"] = float(core.micro_batches * core.p2p_exposed)
    comm_parts["data_parallel"] = float(core.dp_exposed)
    comm_parts["tied_embedding"] = float(core.tied_sync)
    comm_parts["activation_offload"] = float(core.micro_batches * core.offload_exposed)
    return TimeBreakdown(
        compute=float(core.compute),
        exposed_communication=float(core.exposed_communication),
        pipeline_bubble=float(core.pipeline_bubble),
        other=float(core.optimizer + core.host_overhead + core.layer_floor
                    + core.step_overhead),
        compute_parts=compute_parts,
        communication_parts=comm_parts,
    )

def _add_kernel_notes(assumptions: dict[str, Any], shape: TransformerShape, product: Product,
                      cfg: TrainingConfig, eff: Efficiency, core: TrainingCore) -> None:
    """What the estimate assumed of the layer-pass floor, the experts' GEMMs, a hybrid
    model's scan kernels and CUDA graphs, added to ``assumptions`` where they apply."""
    if float(core.layer_floor) > 0:
        assumptions["layer_pass_floor"] = (
            f"each layer's forward pass is charged at least "
            f"{from_si(eff.layer_pass_floor_s, Unit.MS):.2g} ms and its backward twice that "
            f"(layer_pass_floor_s), {float(core.layer_floor):.3g} s of this step: the floor "
            "MLPerf's Llama 3.1 8B runs with 2,048 tokens a GPU (TP 2-4, CP 4, 512-1,024 "
            "GB200/GB300) show; what sets it is not measured")
    if shape.is_moe:
        rate = expert_efficiency(eff, shape).moe_grouped_gemm
        why = (f"moe_grouped_gemm, fitted on the published fine-grained MoE runs, "
               f"{shape.experts} experts here; it also carries what an expert layer costs "
               "beyond the operators charged apart (the router's GEMM, the token "
               "permutations, the all-to-all): its scoring and top-k kernels, the token "
               "counts' bookkeeping" if shape.is_fine_grained_moe
               else f"moe_grouped_gemm_coarse: {shape.experts} experts, a coarse MoE whose "
               "experts' GEMMs are as large as a dense layer's")
        gemms = "grouped GEMMs" if shape.is_fine_grained_moe else "GEMMs"
        assumptions["expert_gemms"] = (
            f"routed experts' {gemms} at the dense GEMMs' rate x {rate:g} ({why})")
        if refused := cfg.moe_without_sequence_parallel(shape):
            assumptions["moe_without_sp"] = refused
        wait = dispatcher_host_time(product, cfg, eff)
        if dispatcher_host_time(product, cfg, eff, shape) > 0:  # some layer pays it
            whose = ("--dispatcher-wait-us, as given" if cfg.dispatcher_wait_s is not None
                     else "Megatron-Core's dropless dispatcher, fitted: "
                     + ("moe_layer_overhead_c2c_s, a Grace host" if product.grace_host
                        else "moe_layer_overhead_s")
                     + "; another framework's differs, e.g. NeMo AutoModel measured "
                     f"{AUTOMODEL_DEEPEP_WAIT_US:g} us "
                     "for its DeepEP path: --dispatcher-wait-us gives yours")
            which = (" whose preceding block runs outside a CUDA graph"
                     if cfg.cuda_graph_scope else "")
            assumptions["dispatcher_wait"] = (
                f"each expert layer{which} waits {from_si(wait, Unit.US):,.0f} us a forward "
                f"pass on the host for its token counts ({whose}); --moe-token-drop or "
                "--cuda-graphs remove it")
    m = shape.indexer_mla
    if m is not None and m.sparse:
        where = "" if m is shape.mla else "of a full-attention layer "
        assumptions["sparse_attention"] = (
            f"DeepSeek Sparse Attention: each query {where}attends to at most "
            f"{m.index_topk:,} "
            f"positions (priced as a window of that size), and an indexer of "
            f"{m.index_heads} heads of {m.index_head_dim} in {shape.indexer_layers} of the "
            f"{shape.attention_layers} layers scores every earlier one (an "
            "attention core without values, its backward as an attention's, in the run's "
            "precision, whole on each tensor-parallel GPU); its activations are not counted "
            "in memory")
    if shape.block_sparse is not None:
        b = shape.block_sparse
        assumptions["sparse_attention"] = (
            f"block-sparse attention: in {shape.indexer_layers} of the "
            f"{shape.attention_layers} layers each query attends to its top {b.topk_blocks} "
            f"blocks of {b.block} positions (priced as a window of {b.positions:,}), which "
            f"an indexer of {b.index_heads} heads of {b.index_head_dim} picks by scoring "
            "every earlier position (an attention core without values, its backward as an "
            "attention's, in the run's precision, whole on each tensor-parallel GPU); its "
            "activations are not counted in memory")
    if shape.compressed is not None:
        c = shape.compressed
        assumptions["compressed_attention"] = (
            f"DeepSeek-V4 compressed attention: each query attends to the last {c.window} "
            "positions and, in a layer of ratio r, to one compressed entry per r earlier "
            f"positions (at most {c.index_topk:,} in the {c.csa_layers} CSA layers, picked "
            f"by an indexer of {c.index_heads} heads of {c.index_head_dim} that scores every "
            "entry); compressors and indexer whole on each tensor-parallel GPU, in the run's "
            f"precision; {shape.hyper_connections} hyper-connection streams (their mixing "
            "GEMMs and traffic priced, their input streams kept for the backward); the "
            "compressors' and indexer's activations are not counted in memory")
    if shape.hyper_connections and shape.compressed is None:
        kind = "independent (Hy4's iHC)" if shape.independent_hyper_connections else "mHC"
        assumptions["hyper_connections"] = (
            f"{shape.hyper_connections} residual streams, {kind}: each block's mixing GEMM "
            f"({shape.hyper_connection_logits} logits from the streams) and its reads and "
            "writes of every stream priced, their input streams kept for the backward")
    if shape.mamba is not None:
        arch = product.architecture
        label = shape.mamba.label
        gated_delta = shape.mamba.gated_delta
        forward = (
            f"{label} blocks: the forward chunked scan's products at "
            f"{eff.gated_delta_scan:g} of the 16-bit peak (gated_delta_scan"
            + (f", {eff.gated_delta_blackwell:g} of the roofline's rate on Blackwell, "
               "gated_delta_blackwell" if arch == "blackwell" else "")
            + f"; at least {from_si(eff.gated_delta_chunk_step_s, Unit.US):.3g} us a chunk of "
            "a sequence, gated_delta_chunk_step_s: flash-linear-attention's kernels as "
            "FlashInfer's GDN pull requests time them on H100 and B300; "
            f"scripts/fit_gated_delta.py), its backward's at {eff.gated_delta_backward:g} "
            "(gated_delta_backward"
            + (f", {eff.gated_delta_backward_blackwell:g} of the roofline's rate on "
               "Blackwell, gated_delta_backward_blackwell" if arch == "blackwell" else "")
            + ", walking each sequence's chunks twice: flash-linear-attention's backward as "
            "QwenLM FlashQLA's tables time it on H200 and GB200); Megatron-Core's copies "
            "around the scan (transposes, contiguous copies, the L2 norm of q and k, their "
            "repeat to the value heads) as memory traffic (gdn_glue)"
            + ("; Kimi Delta Attention priced as a Gated DeltaNet of its sizes (its decay "
               "by channel, and the kernels' work for it, not priced apart: no KDA kernel "
               "timing at stated sizes is in the validation data)" if shape.mamba.kda else "")
            if gated_delta else
            f"{label} blocks: the selective scan at the roofline's rate, its bytes over the "
            "memory bandwidth or its arithmetic on the CUDA cores (no timing of its kernels "
            "is in the validation data), the small x_proj and dt_proj as GEMMs and x_proj's "
            "output all-reduced over TP"
            if shape.mamba.selective else
            f"{label} blocks: the token shift and the recurrence a channel as memory "
            "traffic and CUDA-core arithmetic at the roofline's rate (no timing of the wkv "
            "kernels is in the validation data)"
            if shape.mamba.rwkv else
            f"{label} blocks: the convolution at Mamba-2's measured kernel rates, its two "
            "gates as memory traffic (no recurrent state)"
            if shape.mamba.short_conv else
            f"{label} blocks: " + ("priced as Mamba-2's chunked scan of their sizes over "
                                   f"blocks of {shape.mamba.block} (the same algorithm with a "
                                   "fixed decay a head; no timing of the lightning kernels is "
                                   "in the validation data), "
                                   if shape.mamba.lightning else
                                   "priced as Mamba-2's chunked scan of their sizes over "
                                   f"chunks of {shape.mamba.block} (a chunked linear "
                                   "recurrence gated a head; no timing of xLSTM's kernels is "
                                   "in the validation data), "
                                   if shape.mamba.mlstm else "")
            + f"the chunked scan's products at {eff.mamba_scan:g} of the 16-bit "
            "peak (mamba_scan, TileOPs' measured forward scan on H200)")
        other = "other " if gated_delta or shape.mamba.selective or shape.mamba.rwkv \
            or shape.mamba.short_conv else ""
        assumptions["mamba_kernels"] = (
            forward
            + (f", every {other}{label} kernel at "
               f"{eff.mamba_blackwell:g} of the roofline's rate on Blackwell "
               "(mamba_blackwell)" if arch == "blackwell" else "")
            + f"; the {other}backward kernels a further "
            f"{eff.mamba_backward_for(arch):g} of their rate "
            f"({eff.mamba_backward_name(arch)}: "
            "state-spaces/mamba issue 904's measured A100, H200 and GB200 training of a "
            "Mamba-2 model; scripts/mamba_backward.py"
            + (", taken for the block's convolution and norm" if gated_delta else
               ", taken for the block's convolution" if shape.mamba.channelwise else "")
            + ")")
    graphs = cfg.cuda_graphs or bool(cfg.cuda_graph_scope)
    if cfg.cuda_graph_scope and shape.is_moe and not cfg.moe_token_drop:
        share = cfg.ungraphed_expert_share(shape)
        blocks = shape.moe_layers
        scope = f"CUDA graphs over {', '.join(cfg.cuda_graph_scope)}: "
        assumptions["cuda_graphs"] = scope + (
            "no expert layer pays the dropless dispatcher's host wait (the blocks before "
            "them all replay from graphs)" if not share else
            f"the dropless dispatcher's host wait is charged to {round(share * blocks)} of "
            f"{blocks} expert layers, those whose preceding block runs outside a graph "
            "(launched kernel by kernel, the host falls behind before the dispatcher's sync)")
    elif graphs and (not shape.is_moe or cfg.moe_token_drop):
        assumptions["cuda_graphs"] = (
            "CUDA graphs change nothing in this estimate: the model charges host time only "
            "to a dropless MoE dispatcher's wait per expert layer, which graphs hide, and "
            + ("this model has no experts" if not shape.is_moe else
               "token dropping already removes it"))

def _add_schedule_notes(assumptions: dict[str, Any], shape: TransformerShape,
                        cfg: TrainingConfig, core: TrainingCore, host_link: float | None,
                        run_eff: Efficiency) -> None:
    """What the estimate assumed of the activations held, the pipeline's schedule and sends,
    LoRA and offloading, added to ``assumptions`` where they apply."""
    passes = float(core.activation_layer_passes)
    if passes > 0:
        assumptions["activations_held"] = {
            "layer_passes": passes,
            "gib_per_layer_pass": from_si(float(core.activations) / passes, Unit.GIB),
            "how": "one layer's activations for one micro-batch, times " + (
                "the layers not offloaded" if cfg.pp == 1 else
                "the fullest stage's layers times PP + 1 micro-batches (DualPipe's table)"
                if cfg.pp_schedule == "dualpipe" else
                "the fullest stage's layers times PP + 1/2 micro-batches (DualPipeV)"
                if cfg.pp_schedule == "dualpipev" else
                "the layer-passes the most loaded pipeline rank holds at the end of its "
                "warm-up (forwards whose backward has not run: PP - rank micro-batches "
                "under 1F1B and ZB-1P, more when interleaved)")}
    if cfg.pp > 1:
        assumptions["pp_schedule"] = SCHEDULE_BUBBLES[cfg.pp_schedule]
        assumptions["pipeline_sends"] = (
            "hidden in DualPipe's paired chunks" if cfg.pp_schedule in DUALPIPE_SCHEDULES
            else "overlapped with the next chunk (pp_comm_overlap)"
            if not waits_on_sends(cfg) else
            "waited on, " + ("each chunk's" if cfg.vpp > 1 else "two a micro-batch") + ", over "
            + ("the network: the pipeline spans nodes, and a schedule that waits on its sends "
               "runs at its slowest boundary's pace" if pipeline_spans_nodes(cfg)
               else "the link inside the node"))
    if cfg.lora_rank:
        trained = lora_params(shape, cfg.lora_rank, cfg.adapted).total
        assumptions["lora"] = (
            f"LoRA rank {cfg.lora_rank} on {', '.join(cfg.adapted)}: {trained:,} trained "
            f"parameters ({trained / count_params(shape).total:.2%} of the model's); the "
            "frozen weights keep their compute copy only and skip their weight gradients, "
            "data-parallel reduction and optimizer step, and keep no GEMM input for the "
            "backward (an adapted layer's input is kept in 16 bits by its adapter); the "
            "adapters run in 16 bits as separate thin GEMMs (no dropout)")
        assumptions["flops_convention"] += (
            "; under LoRA, model FLOPs count the adapters and leave out the frozen weights' "
            "gradients (2 x forward + the attention core's backward, not 3 x forward)")
    if cfg.offload_layers:
        assumptions["activation_offload"] = (
            f"{cfg.offload_layers} layers' activations to CPU memory and back at "
            f"{from_si(host_link, Unit.GB_S):.0f} GB/s per direction (this GPU's share of "
            "its link to the CPU), exposed where a transfer outlasts a layer's pass"
            if host_link else
            f"{cfg.offload_layers} layers' activations to CPU memory and back; the link's "
            "rate is not catalogued for this GPU, so the transfers are taken as hidden")
    if cfg.offload_modules:
        names = ", ".join(cfg.offload_modules)
        assumptions["activation_offload"] = (
            f"fine-grained activation offloading of {names} (tensors of at least "
            f"{cfg.offload_min_elements:,} elements): what they keep goes to CPU memory "
            "after each layer's forward pass and comes back for its backward, "
            + (f"at {from_si(host_link, Unit.GB_S):.0f} GB/s per direction (this GPU's "
               "share of its link to the CPU), exposed where a transfer outlasts a layer's "
               "pass" if host_link else "taken as hidden (the link's rate is not catalogued "
               "for this GPU)")
            + "; one layer-pass's offloaded tensors counted in flight on the GPU")
    if cfg.optimizer_offload:
        assumptions["optimizer_offload"] = _offload_assumption(cfg, core,
                                                               host_link, run_eff)

def _whole_run(shape: TransformerShape, product: Product, cfg: TrainingConfig, tokens: float,
               tokens_per_s: float, hfu: float, step: float,
               price_per_gpu_hour: float | None, checkpointing: CheckpointPlan | None,
               facility: Facility, host_link: float | None,
               assumptions: dict[str, Any]) -> dict[str, Any]:
    """A run of ``tokens``: its time, GPU-hours, energy, cost and expected interruptions
    (and with ``checkpointing``, its time with checkpoints and restarts); what it assumed
    goes into ``assumptions``."""
    seconds = tokens / tokens_per_s
    gpu_hours = from_si(seconds, Unit.HOUR) * cfg.gpus
    days = from_si(seconds, Unit.DAY)
    energy = (float(energy_kwh(product.tdp_w, hfu, cfg.gpus, seconds, facility))
              if product.tdp_w else None)
    total: dict[str, Any] = {
        "tokens": tokens,
        "time_s": seconds,
        "time_days": days,
        "gpu_hours": gpu_hours,
        "energy_kwh": energy,
        "cost_usd": gpu_hours * price_per_gpu_hour if price_per_gpu_hour else None,
        "expected_interruptions": expected_interruptions(cfg.gpus, days),
    }
    assumptions["interruptions"] = (
        f"at the rate of {RATE_SOURCE}, {INTERRUPTIONS_PER_GPU_DAY:.2e} per GPU-day; "
        + ("the run's time with checkpoints and restarts is total.checkpointing's"
           if checkpointing is not None else
           "the time does not include restarts (gpuarch.estimate.reliability)"))
    if checkpointing is not None:
        total["checkpointing"] = _checkpointing(shape, cfg, checkpointing, seconds,
                                                step, host_link, assumptions)
    assumptions["power_model"] = (
        f"{GPU_POWER_MODEL}, {facility.describe()} (gpuarch.estimate.energy; metered "
        "MLPerf Training nodes beside it: gpuarch validate power)")
    return total

def _parallelism(shape: TransformerShape, cfg: TrainingConfig, m: int) -> Mapping[str, Any]:
    """The configuration as the estimate's ``parallelism`` reports it (None where a setting
    does not apply)."""
    return MappingProxyType({
        "gpus": cfg.gpus, "tp": cfg.tp, "pp": cfg.pp, "cp": cfg.cp, "dp": cfg.dp,
        "ep": cfg.ep, "etp": int(cfg.expert_tp) if shape.is_moe else None,
        "vpp": cfg.vpp, "sequence_parallel": cfg.sequence_parallel,
        "zero": cfg.zero, "dp_shard": cfg.dp_shard or None,
        "dp_replicas": cfg.dp_replicas if cfg.dp_shard else None,
        "outer_optimizer_sharding": cfg.outer_optimizer_sharding,
        "tp_comm_overlap": cfg.tp_comm_overlap,
        "fsdp_prefetch": cfg.fsdp_prefetch,
        "reshard_after_forward": cfg.reshard_after_forward if cfg.zero == 3 else None,
        "moe_token_drop": cfg.moe_token_drop,
        "cuda_graphs": cfg.cuda_graphs,
        "cuda_graph_scope": list(cfg.cuda_graph_scope) or None,
        "dispatcher_wait_s": cfg.dispatcher_wait_s,
        "ep_dispatcher": cfg.ep_dispatcher if shape.is_moe else None,
        "cp_comm_type": cfg.cp_comm_type if cfg.cp > 1 else None,
        "expert_launches": cfg.expert_launches if shape.is_moe else None,
        "ep_comm_overlap": cfg.ep_comm_overlap,
        "pp_comm_overlap": cfg.pp_comm_overlap if cfg.pp > 1 and cfg.vpp > 1 else None,
        "pp_scatter_gather": cfg.pp_scatter_gather if cfg.pp > 1 else None,
        "moe_imbalance": cfg.moe_imbalance if shape.is_moe else None,
        "pp_edge_layers": cfg.pp_edge_layers,
        "pp_layout": cfg.pp_layout or None,
        "pp_schedule": cfg.pp_schedule if cfg.pp > 1 else None,
        "mtp_layers": cfg.mtp_layers,
        "mtp_shared_weights": cfg.mtp_shared_weights if cfg.mtp_layers else None,
        "fused_attention": cfg.fused_attention,
        "micro_batch": cfg.micro_batch,
        "global_batch": cfg.global_batch, "micro_batches": m,
        "recompute": cfg.recompute.value,
        "recompute_modules": list(cfg.recomputed) or None,
        "recompute_layers": cfg.recompute_layers or None,
        "precision": cfg.precision.value,
        "offload_layers": cfg.offload_layers,
        "offload_modules": list(cfg.offload_modules) or None,
        "offload_min_elements": cfg.offload_min_elements if cfg.offload_modules else None,
        "optimizer_offload": cfg.optimizer_offload or None,
        "optimizer_offload_overlap": cfg.optimizer_offload_overlap,
        "fp8_params": cfg.fp8_params,
        "bf16_grads": cfg.bf16_grads, "bf16_optimizer": cfg.bf16_optimizer,
        "lora_rank": cfg.lora_rank or None,
        "lora_modules": list(cfg.adapted) or None,
        "packed_doc_len": cfg.packed_doc_len or None,
        "fp8_attention": cfg.fp8_attention,
        "fp8_attention_scaling": cfg.attention_fp8_kernel if cfg.fp8_attention else None,
        "fp8_recipe": cfg.fp8_recipe if cfg.precision is Precision.FP8 else None,
        "bf16_layers": list(cfg.bf16_layers) if any(cfg.bf16_layers) else None,
        "mtp_bf16": cfg.mtp_bf16 or None,
        "gpus_per_node": cfg.gpus_per_node})


def _bottleneck(b: TimeBreakdown, optimizer: float, host: float, floor: float, step: float,
                cfg: TrainingConfig, mfu: float, step_overhead: float) -> tuple[str, str]:
    parts = {"compute": b.compute, "communication": b.exposed_communication,
             "pipeline_bubble": b.pipeline_bubble, "host_overhead": host,
             "layer_pass_floor": floor, "optimizer": optimizer,
             "step_overhead": step_overhead}
    name = max(parts, key=lambda k: parts[k])
    share = parts[name] / step
    if name == "compute":
        reason = (f"{share:.0%} of the step is GEMM/attention/elementwise work at {mfu:.0%} "
                  "MFU; faster or more GPUs, or lower precision, shorten it")
    elif name == "communication":
        reason = (f"{share:.0%} of the step waits on exposed communication (TP x{cfg.tp}, "
                  f"CP x{cfg.cp}, DP x{cfg.dp}"
                  + (f", EP x{cfg.ep}" if cfg.ep > 1 else "")
                  + "); keep TP inside an NVLink domain or overlap")
        if cfg.ep > 1 and not cfg.ep_comm_overlap:
            reason += ("; the expert all-to-alls can overlap another micro-batch's compute "
                       "(--ep-comm-overlap)")
        if cfg.ep > 1 and cfg.ep_dispatcher != "deepep" and cfg.ep > cfg.gpus_per_node:
            reason += ", and a node-deduplicating dispatcher sends each token across the " \
                      "network once per node (--ep-dispatcher deepep)"
    elif name == "pipeline_bubble":
        if cfg.pp_schedule == "1f1b":
            reason = (f"{share:.0%} of the step is pipeline bubble ((PP-1)/VPP = "
                      f"{(cfg.pp - 1) / cfg.vpp:.1f} stage times over {cfg.micro_batches} "
                      "micro-batches); more micro-batches, interleaving or a zero-bubble "
                      "schedule (--pp-schedule zb1p) shrink it")
        else:
            reason = (f"{share:.0%} of the step is pipeline bubble ({cfg.pp_schedule}, over "
                      f"{cfg.micro_batches} micro-batches); more micro-batches shrink it")
    elif name == "host_overhead":
        reason = (f"{share:.0%} of the step is fixed host time per layer (the MoE dispatcher "
                  "syncs token counts to the CPU, then launches small kernels one by one, "
                  "each local expert's own); larger micro-batches amortise it, fewer "
                  "experts per GPU (a larger --ep) or one grouped kernel for them "
                  "(--expert-launches grouped or fused-mlp) shorten the launches; "
                  "token-drop routing "
                  "(--moe-token-drop) skips the sync, partial CUDA graphs (--cuda-graphs) "
                  "the launches before it, and a Grace host over NVLink-C2C waits far less")
    elif name == "layer_pass_floor":
        reason = (f"{share:.0%} of the step is layer passes too small to run faster than "
                  "the floor measured runs show (layer_pass_floor_s: each GPU holds so few "
                  "tokens of a layer that its chain of dependent kernels and exchanges, not "
                  "their work, sets the time); fewer GPUs per model replica (less TP or CP) "
                  "or more tokens per micro-batch give each pass more work")
    elif name == "step_overhead":
        reason = (f"{share:.0%} of the step is the fixed time a training step takes beside "
                  "its layers (step_overhead_s, fitted on published runs); more tokens per "
                  "step (a larger global batch) amortise it")
    else:
        reason = f"{share:.0%} of the step is the optimizer update"
    return name, reason
