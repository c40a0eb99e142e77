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
   traffic (stage-correct for ZeRO 0-3), and the optimizer step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System, spec
from gpuarch.errors import GpuarchError
from gpuarch.estimate.energy import DEFAULT_FACILITY, GPU_POWER_MODEL, Facility, energy_kwh
from gpuarch.estimate.host_link import product_host_link
from gpuarch.estimate.lora import lora_forward_flops_per_token, lora_params
from gpuarch.estimate.memory import Recompute, activation_bytes_per_layer
from gpuarch.estimate.pipeline_layout import (
    PipelineLayout,
    StageLoad,
    held_layer_passes,
    layout_held_by_rank,
)
from gpuarch.estimate.pipeline_schedule import DUALPIPE_SCHEDULES, SCHEDULE_BUBBLES, pipeline_bubble
from gpuarch.estimate.recompute import recompute_flops_per_token
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
)
from gpuarch.estimate.training_layers import (
    SIXTEEN_BIT,
    LayerCosts,
    LayerPasses,
    PassSeconds,
    attention_efficiency,
    average_layer,
    bf16_efficiency,
    comm_group,
    expert_efficiency,
    fused_attention,
    layer_costs,
    layer_groups,
    layer_times,
    nccl_time,
    one_layer_time,
    ranks_per_node,
)
from gpuarch.perf.collectives import Collective, Group, Link, Num, link_for
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.fp8_attention import fp8_attention_sources, fp8_training_attention_speedup
from gpuarch.perf.num import any_of, maximum, minimum, where
from gpuarch.perf.precision import Precision, matmul_peak
from gpuarch.perf.roofline import (
    Device,
    Elementwise,
    Gemm,
    attention_span,
    attention_span_share,
    fp8_backward_ignores_window,
    op_time,
)
from gpuarch.perf.sibling import sibling_notes
from gpuarch.units import Unit, from_si, to_si
from gpuarch.workloads.flops import attention_core_dims, forward_flops_per_token
from gpuarch.workloads.mtp import mtp_block_params, mtp_forward_flops_per_token, mtp_layer_shape
from gpuarch.workloads.params import (
    ParamCount,
    attention_params,
    count_params,
    first_stage_params,
    latent_projection_params,
    layer_norm_params,
    mlp_params,
    qk_norm_params,
    routed_expert_params,
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


FRAMEWORK_RESERVE_BYTES = to_si(3, Unit.GIB)
"""CUDA context, NCCL buffers, allocator fragmentation and workspaces: an assumed 3 GiB."""


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


def _pipeline_send_group(cfg: TrainingConfig, intra: Link, inter: Link | None) -> Group:
    """The two neighbouring stages whose send paces the pipeline (no communicator at all
    without pipelining). Stages are TP x CP x DP ranks apart (pipeline outermost in
    Megatron's rank order). A schedule that waits on its sends runs at the pace of its
    slowest boundary, so a pipeline that spans nodes pays a send over the network on every
    rank's cycle, even where most of its neighbours share a node. With the pipeline
    outermost, every pipeline of a job beyond one node spans nodes."""
    size = where(cfg.pp > 1, 2, 1)
    return Group(size, where(_pipeline_spans_nodes(cfg), 1, size), intra, inter)


def _waits_on_sends(cfg: TrainingConfig) -> Num:
    """Whether the schedule waits on its pipeline sends: not DualPipe's (hidden in its
    paired chunks), nor an interleaved one's that overlap the next chunk
    (``pp_comm_overlap``); non-interleaved 1F1B and ZB-1P always."""
    if cfg.pp_schedule in DUALPIPE_SCHEDULES:
        return False
    return where((cfg.vpp > 1) & cfg.pp_comm_overlap, False, True)


def _pipeline_spans_nodes(cfg: TrainingConfig) -> Num:
    """Whether each pipeline's stages (TP x CP x DP ranks apart) reach beyond one node."""
    return cfg.tp * cfg.cp * cfg.dp * cfg.pp > cfg.gpus_per_node


def _tp_overlap_16_bit_note(shape: TransformerShape, product: Product, device: Device,
                            intra: Link, inter: Link | None, cfg: TrainingConfig,
                            eff: Efficiency, host_link: float | None) -> dict[str, Any]:
    """What the userbuffers overlap is taken to hide in a 16-bit run, and the step priced the
    other way: a dense model's with the traffic hidden (``tp_comm_exposed``:
    ``step_time_s_with_overlap_hidden``), an MoE model's with the overlap off
    (``step_time_s_without_overlap``; docs/performance-model.md, "Dense 16-bit runs and the
    TP overlap")."""
    if shape.is_moe:
        without = evaluate_training(shape, product, device, intra, inter,
                                    dataclasses.replace(cfg, tp_comm_overlap=False), eff,
                                    host_link_bytes_s=host_link)
        return {"step_time_s_without_overlap": float(without.step), "note": (
            f"the tensor-parallel traffic is taken as hidden by the userbuffers overlap "
            f"(--tp-comm-overlap), as the published MoE runs in 16-bit read (the MoE "
            f"Parallel Folding paper's at TP 2-4, Llama 4 Maverick and Grok-1 on H100); "
            f"without it the step is {float(without.step):.3g} s. The dense 16-bit runs "
            f"read as if it hid none of theirs, and a dense model is priced so")}
    hidden = evaluate_training(shape, product, device, intra, inter, cfg,
                               dataclasses.replace(eff, tp_comm_exposed_16_bit_dense=(
                                   eff.tp_comm_exposed)), host_link_bytes_s=host_link)
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


def _dp_traffic(params: Num, group: Group, cfg: TrainingConfig, m: Num, eff: Efficiency,
                trained: Num = 0.0, replicas: Group | None = None) -> tuple[Num, Num]:
    """Seconds of data-parallel traffic per step for ``params`` replicated over ``group``,
    by each configuration's ZeRO stage (``cfg.zero`` a stage or an array of them; the
    stages share their collectives, each costed once). Under LoRA ``params`` are frozen and
    ``trained`` the adapters beside them: only the adapters' gradients are reduced and their
    updated weights gathered; ZeRO-3 gathers the frozen weights too. Under hybrid sharding
    ``group`` is one replica's shard group and ``replicas`` the ranks holding the same
    shard in the others: each reduce-scatter in the group is followed by an all-reduce of
    the rank's gradient shard across them once a step, at the last micro-batch's backward
    (Megatron's partial distributed optimizer; Megatron-FSDP's HSDP, whose ZeRO-3
    reduce-scatters run every micro-batch inside the group). PyTorch FSDP's HYBRID_SHARD
    all-reduces after every backward unless told not to; that is not modelled.

    Returned as (gather, reduce): the parameters' all-gathers, which run beside a forward
    pass, and the gradients' reductions, which run beside a backward pass (ZeRO-3's
    per-micro-batch gathers, never overlapped that way, count as gathers)."""
    per_param = cfg.param_bytes
    memo: dict[tuple[bool, Collective], Num] = {}

    def run(kind: Collective, size: Num, frozen_too: bool = False) -> Num:
        if (frozen_too, kind) not in memo:
            memo[(frozen_too, kind)] = nccl_time(kind, size, group, eff)
        return memo[(frozen_too, kind)]

    def across(grad_bytes: Num) -> Num:
        """The replicas' all-reduce of one rank's gradient shard."""
        if replicas is None:
            return 0.0
        return nccl_time(Collective.ALL_REDUCE, grad_bytes / group.size, replicas, eff)

    def traffic(stage: int, part: int) -> Num:
        if cfg.lora_rank:
            grad_bytes = trained * per_param.gradients
            # ZeRO-3's gather under LoRA moves the frozen weights too
            weight_bytes = (params + trained if stage == 3 else trained) * per_param.weights
        else:
            grad_bytes = params * per_param.gradients
            weight_bytes = params * per_param.weights
        gathered = bool(cfg.lora_rank) and stage == 3
        if stage == 0:
            return 0.0 if part == GATHER else run(Collective.ALL_REDUCE, grad_bytes)
        if stage in (1, 2):
            return (run(Collective.ALL_GATHER, weight_bytes) if part == GATHER else
                    run(Collective.REDUCE_SCATTER, grad_bytes) + across(grad_bytes))
        # ZeRO-3: parameters gathered for forward and backward of every micro-batch, or
        # for its forward alone where they are kept for the backward
        if part == GATHER:
            gathers = where(cfg.reshard_after_forward, 2, 1)
            return m * gathers * run(Collective.ALL_GATHER, weight_bytes, gathered)
        return m * run(Collective.REDUCE_SCATTER, grad_bytes) + across(grad_bytes)

    return (_by_case(cfg.zero, lambda stage: traffic(stage, GATHER)),
            _by_case(cfg.zero, lambda stage: traffic(stage, REDUCE)))


GATHER, REDUCE = range(2)
"""The two parts of a step's data-parallel traffic (``_dp_traffic``)."""


OVERLAPPED, PREFETCHED, GATHERED = range(3)
"""How a configuration's data-parallel traffic meets its compute: overlapped with the
first and last micro-batches (ZeRO 0-2), prefetched a layer ahead (ZeRO-3 with
``fsdp_prefetch``), or gathered layer by layer in the open (ZeRO-3)."""


def _by_case(case: Num, value: Callable[[int], Num]) -> Num:
    """``value(c)`` for each configuration's integer case ``c`` (one, or an array of them:
    only the cases present are computed)."""
    if not isinstance(case, np.ndarray):
        return value(int(case))
    out: Num = 0.0
    for c in np.unique(case).tolist():
        out = np.where(case == c, value(int(c)), out)
    return out


@dataclass(frozen=True)
class TrainingCore:
    """The model's numbers for one configuration, or for arrays of them (the advisor):
    every field is a float or an array of the configurations' values."""

    step: Num
    compute: Num
    exposed_communication: Num
    pipeline_bubble: Num
    unpaired_a2a: Num  # the expert all-to-alls of the step's unpaired passes (overlap on)
    optimizer: Num
    host_overhead: Num
    layer_floor: Num  # what short layer passes fall short of layer_pass_floor_s by, per step
    step_overhead: Num  # the fixed time per step beside the layers (step_overhead_s)
    tokens_per_s: Num
    model_flops_per_token: float
    per_gpu_flops: Num
    mfu: Num
    hfu: Num
    weights: Num
    gradients: Num
    optimizer_states: Num
    activations: Num
    other: Num
    micro_batches: Num
    layer_flops: Num
    peak: float
    # the slowest stage's LM head, loss and MTP projections and heads per micro-batch,
    # forward and backward (0 when that stage runs none)
    stage_head_time: Num = 0.0
    p2p_exposed: Num = 0.0  # pipeline sends per micro-batch
    dp_exposed: Num = 0.0  # exposed data-parallel traffic per step
    # the data-parallel traffic per step, the parameters' gathers and the gradients'
    # reductions (the most any pipeline rank moves)
    dp_gather: Num = 0.0
    dp_reduce: Num = 0.0
    tied_sync: Num = 0.0  # the tied word embedding's gradient all-reduce per step
    offload_exposed: Num = 0.0  # activation offloading not hidden, per micro-batch
    offloaded_elements: Num = 0.0  # optimizer elements updated on the host (the most a rank)
    # layers' activations, one micro-batch each, the most loaded pipeline rank holds at once
    activation_layer_passes: Num = 0.0

    @property
    def memory_total(self) -> Num:
        return (self.weights + self.gradients + self.optimizer_states + self.activations
                + self.other)


def evaluate_training(shape: TransformerShape, product: Product, device: Device,
                      intra: Link, inter: Link | None, cfg: TrainingConfig,
                      eff: Efficiency, parts: dict[str, Num] | None = None,
                      host_link_bytes_s: float | None = None,
                      layers: LayerCosts | None = None) -> TrainingCore:
    """The step model. ``cfg``'s parallelism, batch and micro-batch fields, its ZeRO stage,
    ZeRO-3 prefetch and hybrid-sharding group (``dp_shard``, 0 where none) may be NumPy
    arrays (one configuration per element: the advisor costs a layout chunk's ZeRO variants
    in one call); precision, recomputation, sequence
    parallelism and the overlap switches are scalars. No validation here: the caller
    (``estimate_training``, or the advisor with its masks) has done it. With ``parts``, the
    average layer's seconds by kind are left there (``_layer_time``).
    ``host_link_bytes_s``: the GPU's own share of its link to the CPU, one direction, for
    activation and optimizer offloading (None: the transfers are taken as hidden).
    ``layers``: the layers' costing for ``cfg``'s configurations, made by ``layer_costs``
    (the advisor costs a hybrid's layouts once for all its pipeline splits)."""
    ep_stride = cfg.tp * cfg.cp if not cfg.etp else cfg.etp  # as in layer_groups
    # LM head and loss on the last stage (vocabulary split over TP)
    tokens_mb = cfg.micro_batch * cfg.seq_len // cfg.cp
    tp_group, cp_group, ep_group = layer_groups(cfg, intra, inter)
    # ZeRO's group: all DP x CP ranks, or under hybrid sharding the dp_shard nearest of them
    # (TP apart), its replicas a further dp_shard groups apart
    replicas = cfg.dp_replicas
    dp_group = comm_group(cfg.dp * cfg.cp // replicas, cfg.tp, cfg, intra, inter)
    hybrid = any_of(cfg.dp_shard)
    replica_group = (comm_group(replicas, cfg.tp * cfg.dp * cfg.cp // replicas, cfg, intra, inter)
                     if hybrid else None)
    pp_group = _pipeline_send_group(cfg, intra, inter)
    kinds = (layers.kinds if layers is not None and parts is None else
             layer_times(shape, cfg, device, eff, tp_group, cp_group, ep_group,
                          with_parts=parts is not None))
    # what an FP8 or FP4 run keeps in BF16 runs on the BF16 device at the 16-bit
    # efficiencies: the LM head always (Megatron-Core's output layer is its own
    # ColumnParallelLinear, outside Transformer Engine's autocast: docs/performance-model.md,
    # "A low-precision run's LM head"), and the layers and MTP blocks asked for (below)
    bf16 = ((Device.of(product, Precision.BF16, device.tensor_core_generation),
             bf16_efficiency(eff, cfg, product.key))
            if cfg.precision.low_precision else (device, eff))
    head = op_time(Gemm(tokens_mb, -(-shape.vocab // cfg.tp), shape.hidden, name="lm_head"),
                   *bf16)[0]
    loss = op_time(Elementwise(3.0 * tokens_mb * shape.vocab / cfg.tp * 4, name="loss"),
                   device, eff)[0]
    # forward, data gradient and (unless frozen under LoRA) weight gradient
    head_pass = (2 if cfg.lora_rank else 3) * head + 2 * loss
    average = average_layer(shape, kinds)
    fwd, bwd = average.fwd, average.bwd
    per_layer, layer_flops = average.passes, average.flops

    # an MTP block: a layer of the last layer's kind with full attention, the 2h -> h
    # projection (column-parallel over TP) and its own pass through the shared head
    layout = cfg.layout(shape)
    # the layers (and MTP blocks) run in BF16 beside the low-precision recipe, costed as a
    # BF16 run's
    in_bf16 = (cfg.in_bf16, *bf16) \
        if cfg.mtp_bf16 or (layout is not None and layout.bf16_virtual) else None
    kinds16 = (layer_times(shape, *in_bf16, tp_group, cp_group, ep_group,
                            with_parts=parts is not None)
               if in_bf16 is not None and layout is not None and layout.bf16_virtual else {})

    mtp_layer = LayerPasses(PassSeconds(), PassSeconds(), PassSeconds(), 0.0, {})
    mtp_extra: Num = 0.0
    if cfg.mtp_layers:
        own: dict[str, Num] = {}
        mtp_cfg, mtp_device, mtp_eff = in_bf16 if cfg.mtp_bf16 and in_bf16 else (cfg, device,
                                                                                 eff)
        # (a hybrid model's: its attention and expert blocks as one layer)
        mtp_shape = mtp_layer_shape(shape) if shape.is_hybrid else shape
        f, b, r, fl, w, h = one_layer_time(mtp_shape, mtp_cfg, mtp_device, mtp_eff, tp_group,
                                            cp_group, ep_group, shape.is_moe, 0,
                                            own if parts is not None else None)
        mtp_layer = LayerPasses(f, b, r, fl, own, w, h)
        projection = op_time(Gemm(tokens_mb, shape.hidden // cfg.tp, 2 * shape.hidden,
                                  name="mtp_projection"), mtp_device, mtp_eff)[0]
        mtp_extra = 3 * projection + head_pass
    stage_parts: dict[str, Num] = {}
    if layout is None:
        # the slowest stage: layers that do not divide evenly go to some stages one more
        # each; with edge layers the embedding and the loss take a layer's slot on the first
        # and last stage (those hold one layer fewer); MTP blocks run on the last
        edge = cfg.edge_layers
        layers_per_stage = -(-(shape.layers + edge) // (cfg.pp * cfg.vpp)) * cfg.vpp
        stage = per_layer.scale(layers_per_stage)
        last_layers = layers_per_stage - edge // 2
        last_head = head_pass + cfg.mtp_layers * mtp_extra
        last = (per_layer.scale(last_layers) + mtp_layer.passes.scale(cfg.mtp_layers)
                + PassSeconds(last_head, 0.0))
        if cfg.pp_edge_layers:
            # the last stage runs one layer fewer plus the head; the middle stages all layers
            slower = last.total >= stage.total
            stage = PassSeconds(*(where(slower, a, b) for a, b in
                            ((last.compute, stage.compute), (last.comm, stage.comm),
                             (last.overhead, stage.overhead), (last.floor, stage.floor))))
            stage_layers: Num = where(slower, last_layers, layers_per_stage)
            stage_head_time: Num = where(slower, last_head, 0.0)
            stage_mtp: Num = where(slower, cfg.mtp_layers, 0)
        else:
            stage = last
            stage_layers, stage_head_time, stage_mtp = last_layers, last_head, cfg.mtp_layers
        if parts is not None:
            for key, value in average.parts.items():
                stage_parts[key] = stage_layers * value
            for key, value in mtp_layer.parts.items():
                stage_parts[key] = stage_parts.get(key, 0.0) + stage_mtp * value
        # activations are counted in layers (a hybrid model's in blocks, an MTP block two)
        mtp_slots = cfg.mtp_layers * (2 if shape.is_hybrid else 1)
        activation_layers = maximum(layers_per_stage, last_layers + mtp_slots)
        held_1f1b = held_layer_passes(
            layers_per_stage / cfg.vpp, cfg.pp, cfg.vpp, cfg.micro_batches,
            first_chunk_fewer=edge // 2, last_chunk_more=mtp_slots - edge // 2)
    else:
        # each pipeline rank runs its own layers (dense and expert ones as such), MTP blocks
        # and head; the slowest sets the pace
        def rank_pass(load: StageLoad) -> tuple[PassSeconds, dict[str, Num], Num]:
            by_kind = load.blocks or ((False, load.dense_layers), (True, load.expert_layers))
            sixteen = dict(load.bf16)
            counts = (*((n - sixteen.get(kind, 0), kinds.get(kind)) for kind, n in by_kind),
                      *((n, kinds16.get(kind)) for kind, n in load.bf16),
                      (load.mtp, mtp_layer))
            extra = load.loss * head_pass + load.mtp * mtp_extra
            total = PassSeconds()
            own_parts: dict[str, Num] = {}
            for n, one in counts:
                if n and one is not None:
                    total = total + one.passes.scale(n)
                    for key, value in one.parts.items():
                        own_parts[key] = own_parts.get(key, 0.0) + n * value
            return total + PassSeconds(extra, 0.0), own_parts, extra

        ranks = [rank_pass(load) for load in layout.ranks]
        # each configuration's slowest rank (the first of equals)
        slowest = np.argmax(np.stack(np.broadcast_arrays(*(p.total for p, _, _ in ranks))),
                            axis=0)
        stage = PassSeconds(*(_pick(slowest, [getattr(p, name) for p, _, _ in ranks])
                        for name in ("compute", "comm", "overhead", "floor")))
        stage_head_time = _pick(slowest, [extra for _, _, extra in ranks])
        stage_parts = {key: _pick(slowest, [own.get(key, 0.0) for _, own, _ in ranks])
                       for key in {k for _, own, _ in ranks for k in own}}
        layers_per_stage = activation_layers = layout.max_layers
        # each rank's layer-passes held at its peak (and of them, its BF16 layers'), once
        held_by_rank = layout_held_by_rank(layout, cfg.pp, cfg.vpp, cfg.micro_batches)
        held_1f1b = held_by_rank[0][0]
        for n, _ in held_by_rank[1:]:
            held_1f1b = maximum(held_1f1b, n)
    if parts is not None:
        parts.update(stage_parts)
    act = 1.0 * tokens_mb * shape.hidden * cfg.precision.activation_bytes
    if cfg.sequence_parallel or cfg.pp_scatter_gather:
        act = act / cfg.tp
    # a stage waits, per micro-batch, on the send of its output (with the receipt of the
    # next stage's gradient) and on the send of its input's gradient, once per chunk; the
    # transfer then adds to every stage's cycle. Interleaved sends overlapped with the next
    # chunk (pp_comm_overlap) and DualPipe's, hidden in its paired chunks, add nothing
    waits = where(_waits_on_sends(cfg), 1.0, 0.0)
    p2p = (2 * nccl_time(Collective.P2P, act, pp_group, eff) * cfg.vpp * waits
           * eff.pp_comm_exposed)
    p2p = where(cfg.pp > 1, p2p, 0.0)
    stage = stage + PassSeconds(0.0, p2p)

    # memory on the most loaded stage
    def layer_act(recompute: Recompute, quantized: bool = cfg.precision.low_precision) -> Num:
        return activation_bytes_per_layer(
            shape, cfg.micro_batch, cfg.seq_len // cfg.cp, cfg.tp, cfg.sequence_parallel,
            recompute, cfg.precision.activation_bytes, fused_attention=cfg.fused_attention,
            quantized_inputs=quantized, modules=cfg.recomputed,
            adapted=cfg.adapted if cfg.lora_rank else None)

    def mean_layer_act(quantized: bool = cfg.precision.low_precision) -> Num:
        act = layer_act(cfg.recompute, quantized)
        if cfg.recompute is Recompute.FULL and cfg.recompute_layers:
            # the layers not recomputed keep everything
            share = cfg.full_recompute_share(shape)
            act = share * act + (1 - share) * layer_act(Recompute.NONE, quantized)
        return act

    per_layer_act = mean_layer_act()
    # a layer run in BF16 keeps its GEMMs' inputs in 16 bits, not the recipe's format: what
    # that adds per layer-pass held
    bf16_act = (mean_layer_act(False) - per_layer_act
                if layout is not None and layout.bf16_virtual else 0.0)
    # offloaded layers (PP = 1) leave one layer's activations in flight on the GPU; each
    # goes out during its forward pass and comes back during its backward, behind the
    # layers computed meanwhile: only a transfer longer than a layer's pass is exposed
    offloaded = max(0, cfg.offload_layers - 1)
    offload: Num = 0.0
    if cfg.offload_layers and host_link_bytes_s:
        transfer = per_layer_act / host_link_bytes_s
        offload = cfg.offload_layers * (maximum(0.0, transfer - fwd.compute)
                                        + maximum(0.0, transfer - bwd.compute))
        stage = stage + PassSeconds(0.0, offload)

    m = cfg.micro_batches
    stage_time = stage.total
    compute_time = m * stage.compute
    pipeline_comm = m * stage.comm
    host_time = m * stage.overhead
    floor_time = m * stage.floor
    # with the expert all-to-alls overlapped (ep_comm_overlap) a pass hides them only beside
    # a partner pass of another micro-batch: the step's first forward and last backward have
    # none, and neither have the passes that fill and drain a pipeline, so one micro-batch's
    # hidden all-to-alls are exposed a step and the bubble's stage times keep theirs
    unpaired = average.a2a_hidden * layers_per_stage
    # the schedule's bubble, from a stage's forward share and its weight-gradient GEMMs
    # (the average layer's shares of the stage's time)
    forward = average.fwd.total / average.passes.total * stage_time + unpaired / 2
    wgrad = average.wgrad / average.passes.compute * stage.compute
    bubble = pipeline_bubble(cfg.pp_schedule, cfg.pp, cfg.vpp, stage_time + unpaired,
                             forward, wgrad)

    # parameters held per GPU (the last stage also holds the LM head and the MTP blocks);
    # expert weights are split over EP and replicated only across the expert-data-parallel
    # group
    pc = count_params(shape)
    expert_params = pc.mlp_experts
    dense_block, expert_block = mtp_block_params(shape) if cfg.mtp_layers else (0, 0)
    # the depths' weights per depth: one block's shared by all of them, or one each
    share = 1 / cfg.mtp_layers if cfg.mtp_shared_weights else 1.0
    mtp_dense, mtp_expert = dense_block * share, expert_block * share
    if layout is None:
        # latent experts' projections are duplicated over TP
        dense_body = pc.total - pc.embedding - pc.lm_head - expert_params - pc.moe_latent
        dense_local = dense_body / (cfg.tp * cfg.pp) + pc.moe_latent / cfg.pp \
            + _edge_params_local(shape, None, cfg) + cfg.mtp_layers * mtp_dense / cfg.tp
        expert_local = (expert_params / cfg.pp + cfg.mtp_layers * mtp_expert) \
            / (cfg.expert_tp * cfg.ep)
    else:
        dense_local, expert_local = _rank_local_params(shape, layout, cfg, mtp_dense,
                                                       mtp_expert)
    # the parameters of the layers run in BF16 (per rank), whose weights are kept in BF16
    # whatever the recipe keeps the others' in
    dense16, expert16 = (_rank_local_params(shape, layout.bf16_part(), cfg, 0.0, 0.0)
                         if layout is not None and layout.bf16_virtual else (0.0, 0.0))
    # the embedding and the output layer keep BF16 weights under FP8 (or FP4) ones:
    # Megatron-Core builds them outside Transformer Engine, whose modules alone hold the
    # narrow copy (fp8_param_gather)
    dense16 = dense16 + _edge_params_local(shape, layout, cfg)
    if cfg.mtp_bf16:
        # the MTP blocks' on the rank holding them (the last)
        on_rank = 1.0 if layout is None else _over_ranks(
            np.array([r.mtp > 0 for r in layout.ranks], dtype=float), _batch_ndim(cfg))
        dense16 = dense16 + on_rank * cfg.mtp_layers * mtp_dense / cfg.tp
        expert16 = expert16 + on_rank * cfg.mtp_layers * mtp_expert / (cfg.expert_tp * cfg.ep)
    # LoRA: the adapters are what is trained, split as the layers they sit beside (the
    # stage's mean share of them with an explicit layout)
    adapters = lora_params(shape, cfg.lora_rank, cfg.adapted)
    lora_dense = adapters.dense / (cfg.tp * cfg.pp)
    lora_expert = adapters.experts / (cfg.pp * cfg.expert_tp * cfg.ep)
    if cfg.pp_schedule == "dualpipe":
        # each GPU holds two stages (i and PP-1-i): two copies of the parameters, whose
        # gradients are reduced and whose optimizer states are kept as every stage's are
        # (the advisor's layouts without a pipeline run as they are)
        copies = where(cfg.pp > 1, 2, 1)
        dense_local, expert_local = copies * dense_local, copies * expert_local
        dense16, expert16 = copies * dense16, copies * expert16
        lora_dense, lora_expert = copies * lora_dense, copies * lora_expert

    # data-parallel gradient traffic, stage-correct for ZeRO: dense weights over DP x CP,
    # expert weights over the expert-data-parallel group (DP x CP / EP ranks, spaced EP
    # apart, so across nodes once EP fills a node)
    # (under hybrid sharding each replica group shards as one of DP x CP / replicas ranks)
    shard = cfg.dp * cfg.cp // replicas
    expert_shard = cfg.tp * cfg.dp * cfg.cp // (cfg.expert_tp * cfg.ep) // replicas
    dp_gather, dp_reduce = _dp_traffic(dense_local, dp_group, cfg, m, eff,
                                       trained=lora_dense, replicas=replica_group)
    if shape.is_moe:
        edp_group = comm_group(expert_shard, ep_stride * cfg.ep, cfg, intra, inter)
        expert_replicas = (comm_group(replicas, ep_stride * cfg.ep * expert_shard, cfg, intra,
                                  inter) if hybrid else None)
        expert_gather, expert_reduce = _dp_traffic(expert_local, edp_group, cfg, m, eff,
                                                   trained=lora_expert,
                                                   replicas=expert_replicas)
        dp_gather, dp_reduce = dp_gather + expert_gather, dp_reduce + expert_reduce
    dp_comm = dp_gather + dp_reduce
    # the time a micro-batch's layers keep the GPU busy: their compute, and where a pass is
    # shorter than the layer-pass floor, the wait that stands in for its latency-bound chain
    # (the data-parallel collectives run on their own stream through both)
    window = stage.compute + stage.floor

    def exposed(case: int) -> Num:
        if case == PREFETCHED:
            # what one micro-batch's compute cannot cover, plus the first layer's gather and
            # the last layer's reduction, which nothing precedes or follows
            per_mb = dp_comm / m
            return m * (maximum(0.0, per_mb - window)
                        + eff.dp_comm_exposed * per_mb / layers_per_stage)
        if case == OVERLAPPED:
            # the gradients' reduction runs bucket by bucket during the last micro-batch's
            # backward and the parameters' gather during the first one's forward
            # (Megatron-Core's overlap_grad_reduce and overlap_param_gather; DDP's bucketed
            # all-reduce likewise during the backward): what outlasts one micro-batch's
            # compute is exposed, plus a share of one layer's bucket, which nothing precedes
            # or follows. (Each part behind its own pass alone, the gather beside the
            # forward's share and the reduction beside the backward's, was tried on
            # 2026-12-04 and reads the multi-node runs of one micro-batch a rank 6-8 points
            # slower, no better on the whole: docs/performance-model.md.)
            return maximum(0.0, dp_comm - window) \
                + eff.dp_comm_exposed * dp_comm / layers_per_stage
        return dp_comm * eff.dp_comm_exposed  # ZeRO-3 gathering layer by layer unprefetched

    dp_exposed = _by_case(where(cfg.zero < 3, OVERLAPPED,
                                where(cfg.fsdp_prefetch, PREFETCHED, GATHERED)), exposed)

    per_param = cfg.param_bytes

    def sharded(stage: int, dense: Num, expert: Num, kept: Num = False) -> Num:
        """Parameters per GPU for a state ZeRO shards from ``stage`` on (held whole where
        ``kept``)."""
        return where(np.logical_or(cfg.zero < stage, kept), dense + expert,
                     dense / shard + expert / expert_shard)

    # under LoRA the frozen weights keep their compute copy alone (no gradient, no master
    # copy or moments); the adapters are trained as weights are
    trained = ((lora_dense, lora_expert) if cfg.lora_rank else (dense_local, expert_local))
    opt_params = sharded(1, *trained)
    if cfg.outer_optimizer_sharding:
        # Hybrid-FSDP: the optimizer state sharded over the replicas too (every DP x CP rank)
        opt_params = opt_params / replicas
    # optimizer offload: these elements' Adam runs on the host (a distributed optimizer's
    # only: the advisor's ZeRO-0 variants keep theirs)
    opt_offloaded = where(cfg.zero >= 1, cfg.optimizer_offload, 0.0) * opt_params
    optimizer = op_time(Elementwise((opt_params - opt_offloaded) * 30.0, name="adam"),
                        device, eff)[0]
    if cfg.optimizer_offload:
        optimizer = _offloaded_step(opt_offloaded, optimizer, cfg, eff,
                                    host_link_bytes_s)
    # ZeRO-3 without resharding after the forward holds every layer's gathered parameters
    # until its backward: at the forward's end the weights are whole, as below stage 3
    kept = np.logical_not(cfg.reshard_after_forward)
    weights = (sharded(3, dense_local, expert_local, kept)
               + (sharded(3, trained[0], trained[1], kept) if cfg.lora_rank else 0.0)) \
        * per_param.weights \
        + sharded(3, dense16, expert16, kept) * max(0.0, Precision.BF16.bytes - per_param.weights)
    gradients = sharded(2, *trained) * per_param.gradients
    optimizer_states = opt_params * per_param.optimizer - opt_offloaded * moment_bytes(cfg)
    if layout is not None:
        # one value per pipeline rank so far: the step waits for the slowest rank's
        # gradient traffic and optimizer; memory is the rank holding the most
        nd = _batch_ndim(cfg)
        dp_exposed, optimizer = _slowest_rank(dp_exposed, nd), _slowest_rank(optimizer, nd)
        dp_gather, dp_reduce = _slowest_rank(dp_gather, nd), _slowest_rank(dp_reduce, nd)
        held_parts = np.broadcast_arrays(weights, gradients, optimizer_states)
        heaviest = np.argmax(sum(held_parts), axis=0)
        weights, gradients, optimizer_states = (_pick(heaviest, list(x)) for x in held_parts)

    # a word embedding tied to the output layer sits on the first stage and the last, and
    # Megatron-Core all-reduces its gradient between the two once the step's backward is
    # done (finalize_model_grads: _allreduce_word_embedding_grads, on the full main_grad):
    # nothing overlaps it. Frozen under LoRA, it has no gradient to reduce; DualPipeV puts
    # the first stage and the last on one GPU
    tied_sync: Num = 0.0
    if shape.tied_embeddings and not cfg.lora_rank and cfg.pp_schedule != "dualpipev":
        tied_sync = where(cfg.pp > 1, nccl_time(
            Collective.ALL_REDUCE, shape.vocab / cfg.tp * shape.hidden * per_param.gradients,
            pp_group, eff), 0.0)

    step = (compute_time + pipeline_comm + unpaired + host_time + floor_time + bubble
            + dp_exposed + tied_sync + optimizer + eff.step_overhead_s)

    # throughput and utilisation
    tokens_per_s = cfg.global_batch * cfg.seq_len / step
    fwd_flops = forward_flops_per_token(shape, cfg.attention_span)
    forward_total = fwd_flops.total
    if cfg.mtp_layers:  # Megatron counts the MTP blocks' work as model FLOPs too
        forward_total += cfg.mtp_layers * mtp_forward_flops_per_token(shape,
                                                                      cfg.attention_span)
    # forward, and backward at twice the forward; under LoRA the adapters' FLOPs join them
    # and the frozen weights' gradients (as many FLOPs as their forward GEMMs) drop out
    forward_total += lora_forward_flops_per_token(shape, cfg.lora_rank, cfg.adapted)
    skipped = fwd_flops.total - fwd_flops.attention_core if cfg.lora_rank else 0.0
    model_flops = 3.0 * forward_total - skipped
    # hardware FLOPs: the model's, plus the forward pass of every layer fully recomputed
    hw_flops = model_flops + cfg.full_recompute_share(shape) * forward_total
    if cfg.recompute is Recompute.SELECTIVE:
        hw_flops += recompute_flops_per_token(shape, cfg.attention_span, cfg.recomputed)
    peak = device.matmul.flops
    per_gpu_flops = model_flops * tokens_per_s / cfg.gpus

    if cfg.pp_schedule in DUALPIPE_SCHEDULES:
        # PP + 1 stages' micro-batches (DualPipe's table); DualPipeV's stages are half a
        # GPU's layers and there are 2 x PP of them
        in_flight = where(cfg.pp > 1, cfg.pp + (
            1.0 if cfg.pp_schedule == "dualpipe" else 0.5), minimum(cfg.pp, m))
        held = activation_layers * in_flight
    else:
        # 1F1B (and ZB-1P, which holds what 1F1B holds): the rank at its warm-up's end
        # holding the most layer-passes (estimate.pipeline_layout.held_layer_passes)
        held = held_1f1b
    act_bytes = per_layer_act * (held - offloaded)
    if layout is not None and layout.bf16_virtual:
        # the rank holding the most bytes, its BF16 layers' passes counted at their size
        by_rank = held_by_rank
        if cfg.pp_schedule in DUALPIPE_SCHEDULES:
            by_rank = [(held, sum(layout.bf16_virtual[v] for v in range(
                r, len(layout.virtual), cfg.pp)) * in_flight) for r in range(cfg.pp)]
        per_rank = [per_layer_act * (n - offloaded) + bf16_act * n16 for n, n16 in by_rank]
        act_bytes = per_rank[0]
        for more in per_rank[1:]:
            act_bytes = maximum(act_bytes, more)
    # FP32 logits for the loss, and for each MTP block's on the last stage
    logits = tokens_mb * shape.vocab / cfg.tp * 4.0 * (1 + cfg.mtp_layers)
    return TrainingCore(
        step=step,
        compute=compute_time,
        exposed_communication=pipeline_comm + unpaired + dp_exposed + tied_sync,
        unpaired_a2a=unpaired,
        pipeline_bubble=bubble,
        optimizer=optimizer,
        host_overhead=host_time,
        layer_floor=floor_time,
        step_overhead=eff.step_overhead_s,
        tokens_per_s=tokens_per_s,
        model_flops_per_token=model_flops,
        per_gpu_flops=per_gpu_flops,
        mfu=per_gpu_flops / peak,
        hfu=hw_flops * tokens_per_s / cfg.gpus / peak,
        weights=weights,
        gradients=gradients,
        optimizer_states=optimizer_states,
        # offloading runs at PP 1: one micro-batch, its layers but the offloaded ones
        activations=act_bytes,
        activation_layer_passes=held - offloaded,
        other=FRAMEWORK_RESERVE_BYTES + logits,
        micro_batches=m,
        layer_flops=layer_flops,
        peak=peak,
        stage_head_time=stage_head_time,
        p2p_exposed=p2p,
        dp_exposed=dp_exposed,
        dp_gather=dp_gather,
        dp_reduce=dp_reduce,
        tied_sync=tied_sync,
        offload_exposed=offload,
        offloaded_elements=np.max(opt_offloaded) if layout is not None else opt_offloaded,
    )


def _pick(index: Any, values: list[Num]) -> Num:
    """Each configuration's value from the pipeline rank ``index`` names (an array of
    ranks, one per configuration, or one rank): ``values`` holds one value or array per
    rank."""
    shape = np.broadcast_shapes(np.shape(index), *(np.shape(v) for v in values))
    stacked = np.stack([np.broadcast_to(v, shape) for v in values])
    out = np.take_along_axis(stacked, np.broadcast_to(index, shape)[np.newaxis], axis=0)[0]
    return out if out.ndim else out.item()


def _batch_ndim(cfg: TrainingConfig) -> int:
    """The axes of ``cfg``'s configurations (none for one configuration)."""
    return len(np.broadcast_shapes(*(np.shape(getattr(cfg, name)) for name in
                                     ("gpus", "tp", "pp", "cp", "ep", "vpp", "micro_batch",
                                      "global_batch", "zero", "fsdp_prefetch"))))


def _over_ranks(values: Any, ndim: int) -> Any:
    """A per-rank array laid along a first axis, before ``ndim`` configuration axes."""
    return np.reshape(values, (-1,) + (1,) * ndim)


def _slowest_rank(values: Num, ndim: int) -> Num:
    """The largest rank's value for each configuration (values without a rank axis, the
    same on every rank, as they are)."""
    return np.max(values, axis=0) if np.ndim(values) > ndim else values


def _edge_params_local(shape: TransformerShape, layout: PipelineLayout | None,
                       cfg: TrainingConfig) -> Any:
    """The embedding's and the output layer's parameters on each GPU (split over TP): the
    first rank's embedding and the last rank's head (the heaviest rank's, the last, without a
    layout), one value per rank along a first axis with a layout."""
    pc = count_params(shape)
    if layout is None:
        return where(cfg.pp > 1, _head_params(pc, False) / cfg.tp,
                     (pc.embedding + pc.lm_head) / cfg.tp)
    edges = np.array([r.embedding * pc.embedding + r.loss * _head_params(pc, r.embedding)
                      for r in layout.ranks], dtype=float)
    return _over_ranks(edges, _batch_ndim(cfg)) / cfg.tp


def _head_params(pc: ParamCount, with_embedding: Any) -> int:
    """The output layer's parameters on the rank holding it: its own, or a tied head's copy of
    the embedding where the rank does not hold the embedding already."""
    return pc.lm_head or (0 if with_embedding else pc.embedding)


def _rank_local_params(shape: TransformerShape, layout: PipelineLayout, cfg: TrainingConfig,
                       mtp_dense: float, mtp_expert: float) -> tuple[Any, Any]:
    """``_rank_params`` on each GPU of a pipeline rank, after TP and EP split them, one value
    per rank along a first axis and the configurations' after it."""
    nd = _batch_ndim(cfg)
    dense, expert = (_over_ranks(x, nd) for x in _rank_params(shape, layout, mtp_dense,
                                                               mtp_expert))
    # latent experts' projections are whole on every tensor-parallel rank
    latent = latent_projection_params(shape) * _over_ranks(np.array(
        [dict(r.blocks).get("E", 0) if r.blocks else r.expert_layers
         for r in layout.ranks]), nd)
    return (dense - latent) / cfg.tp + latent, expert / (cfg.expert_tp * cfg.ep)


def _rank_params(shape: TransformerShape, layout: PipelineLayout, mtp_dense: float,
                 mtp_expert: float) -> tuple[Any, Any]:
    """Parameters outside the routed experts, and routed-expert parameters, that each
    pipeline rank of ``layout`` holds (before TP and EP split them): its layers, MTP blocks,
    the embedding on the first rank, the LM head and final norm on the last."""
    if shape.is_hybrid:
        return _hybrid_rank_params(shape, layout, mtp_dense, mtp_expert)
    pc = count_params(shape)
    first_stage = first_stage_params(shape)
    final_norm = shape.norm.params_per_width * shape.hidden
    norms = layer_norm_params(shape)
    attention = attention_params(shape)
    dense_layer = attention + norms + mlp_params(shape, shape.d_ffn)
    expert_layer, routed = 0, 0
    if shape.moe_layers:
        expert_layer = attention + norms + shape.shared_experts * mlp_params(
            shape, shape.d_expert) + shape.hidden * shape.experts \
            + latent_projection_params(shape)
        routed = shape.experts * routed_expert_params(shape)
    dense, experts = [], []
    for r in layout.ranks:
        head = _head_params(pc, r.embedding)
        dense.append(r.dense_layers * dense_layer + r.expert_layers * expert_layer
                     + r.mtp * mtp_dense + r.embedding * first_stage
                     + r.loss * (head + final_norm))
        experts.append(r.expert_layers * routed + r.mtp * mtp_expert)
    return np.array(dense), np.array(experts)


def _hybrid_rank_params(shape: TransformerShape, layout: PipelineLayout, mtp_dense: float,
                        mtp_expert: float) -> tuple[Any, Any]:
    """``_rank_params`` for a hybrid model: each rank's blocks by kind, each with its one
    norm (an attention block its query-key norms too, an expert block its router, shared
    experts and latent projections outside the routed experts)."""
    pc = count_params(shape)
    first_stage = first_stage_params(shape)
    norm = shape.norm.params_per_width * shape.hidden
    # one block of each kind, from the model's count by component
    counts = {b: shape.hybrid_pattern.count(b) or 1 for b in "M*-E"}
    outside = {"M": pc.mamba // counts["M"],
               "*": (pc.attention + shape.attention_layers * qk_norm_params(shape))
               // counts["*"],
               "-": pc.mlp_dense // counts["-"],
               "E": (pc.mlp_shared + pc.router + pc.moe_latent) // counts["E"]}
    routed = pc.mlp_experts // counts["E"]
    dense, experts = [], []
    for r in layout.ranks:
        head = _head_params(pc, r.embedding)
        dense.append(sum(n * (outside[block] + norm) for block, n in r.blocks)
                     + r.mtp * mtp_dense + r.embedding * first_stage
                     + r.loss * (head + norm))
        experts.append(dict(r.blocks).get("E", 0) * routed + r.mtp * mtp_expert)
    return np.array(dense), np.array(experts)


OFFLOAD_COPY_BYTES = 4
"""Bytes a copy moves per offloaded element, each way: Megatron-Core's HybridDeviceOptimizer
copies the gradients down and the updated parameters up in FP32 (casting on the GPU)."""

OFFLOAD_HOST_BYTES = 16
"""Host memory per offloaded element: its FP32 master copy, both FP32 Adam moments and the
pinned FP32 gradient the GPU copies down (HybridDeviceOptimizer)."""


def moment_bytes(cfg: TrainingConfig) -> float:
    """Bytes of Adam's two moments per element, which optimizer offload moves off the GPU:
    FP32 each, BF16 each under ``--bf16-optimizer``. Megatron Bridge measured 15.3 GB freed
    per GPU with the whole optimizer offloaded for Qwen3-30B-A3B at TP 2, PP 2, EP 4 on 16
    H100 (docs/training/cpu-offloading.md), what the two FP32 moments of the model's
    optimizer elements on that layout take (15.3 GB), not those plus the master copy."""
    return 4.0 if cfg.bf16_optimizer else 8.0


def _offloaded_step(offloaded: Num, gpu_part: Num, cfg: TrainingConfig, eff: Efficiency,
                    host_link: float | None) -> Num:
    """Seconds of an optimizer step with ``offloaded`` elements updated on the host: the
    gradients copied down, the CPU's Adam (at one rank's rate: each GPU's process runs its
    own, on the threads it is given) and the parameters copied up, one after another beside
    the GPU's own part, or, with the copies overlapped (``optimizer_offload_overlap``: one
    CPU optimizer per tensor), the longest of the four. A link whose rate is not catalogued
    leaves the copies out."""
    copy = offloaded * OFFLOAD_COPY_BYTES / host_link if host_link else 0.0 * offloaded
    cpu = offloaded / eff.cpu_adam_elements_per_s
    if cfg.optimizer_offload_overlap:
        return maximum(maximum(gpu_part, cpu), copy)
    return gpu_part + 2 * copy + cpu


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
    core = evaluate_training(shape, product, device, intra, inter, cfg, run_eff, layer_parts,
                             host_link_bytes_s=host_link)
    step = float(core.step)
    per_step = float(core.micro_batches)
    compute_parts = {k: per_step * float(layer_parts.get(k, 0.0)) for k in COMPUTE_PARTS}
    compute_parts["lm_head_and_loss"] = per_step * float(core.stage_head_time)
    comm_parts = {k: per_step * float(layer_parts.get(k, 0.0)) for k in COMMUNICATION_PARTS}
    comm_parts["expert_parallel"] += float(core.unpaired_a2a)
    comm_parts["pipeline_p2p"] = float(core.micro_batches * core.p2p_exposed)
    comm_parts["data_parallel"] = float(core.dp_exposed)
    comm_parts["tied_embedding"] = float(core.tied_sync)
    comm_parts["activation_offload"] = float(core.micro_batches * core.offload_exposed)
    breakdown = TimeBreakdown(
        compute=float(core.compute),
        exposed_communication=float(core.exposed_communication),
        pipeline_bubble=float(core.pipeline_bubble),
        other=float(core.optimizer + core.host_overhead + core.layer_floor
                    + core.step_overhead),
        compute_parts=compute_parts,
        communication_parts=comm_parts,
    )
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
            shape, product, device, intra, inter, cfg, run_eff, host_link)
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
               f"{shape.experts} experts here; it also carries the router, permutation and "
               "dispatch work the model does not charge apart" if shape.is_fine_grained_moe
               else f"moe_grouped_gemm_coarse: {shape.experts} experts, a coarse MoE whose "
               "experts' GEMMs are as large as a dense layer's")
        gemms = "grouped GEMMs" if shape.is_fine_grained_moe else "GEMMs"
        assumptions["expert_gemms"] = (
            f"routed experts' {gemms} at the dense GEMMs' rate x {rate:g} ({why})")
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
            "scripts/fit_gated_delta.py), its backward's at Mamba-2's "
            f"{eff.mamba_scan:g} (mamba_scan: no measurement of the gated delta rule's "
            "backward was found)"
            if gated_delta else
            f"{label} blocks: the chunked scan's products at {eff.mamba_scan:g} of the 16-bit "
            "peak (mamba_scan, TileOPs' measured forward scan on H200)")
        assumptions["mamba_kernels"] = (
            forward
            + (f", every {'other ' if gated_delta else ''}{label} kernel at "
               f"{eff.mamba_blackwell:g} of the roofline's rate on Blackwell "
               "(mamba_blackwell)" if arch == "blackwell" else "")
            + f"; the backward kernels a further {eff.mamba_backward_for(arch):g} of their "
            "rate "
            f"({eff.mamba_backward_name(arch)}: "
            "state-spaces/mamba issue 904's measured A100, H200 and GB200 training of a "
            "Mamba-2 model; scripts/mamba_backward.py"
            + (", taken for the gated delta rule's" if gated_delta else "") + ")")
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
            if not _waits_on_sends(cfg) else
            "waited on, " + ("each chunk's" if cfg.vpp > 1 else "two a micro-batch") + ", over "
            + ("the network: the pipeline spans nodes, and a schedule that waits on its sends "
               "runs at its slowest boundary's pace" if _pipeline_spans_nodes(cfg)
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
    if cfg.optimizer_offload:
        assumptions["optimizer_offload"] = _offload_assumption(cfg, core,
                                                               host_link, run_eff)
    total: dict[str, Any] | None = None
    if tokens is not None:
        seconds = tokens / tokens_per_s
        gpu_hours = from_si(seconds, Unit.HOUR) * cfg.gpus
        days = from_si(seconds, Unit.DAY)
        energy = (float(energy_kwh(product.tdp_w, hfu, cfg.gpus, seconds, facility))
                  if product.tdp_w else None)
        total = {
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
    return TrainingEstimate(
        model=shape.name,
        gpu=product.name,
        system=system.name if system else None,
        parallelism=MappingProxyType({
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
            "gpus_per_node": cfg.gpus_per_node}),  # type: ignore[arg-type]
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
