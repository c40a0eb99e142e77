"""The training step model over arrays of configurations: ``evaluate_training``.

One micro-batch on the slowest pipeline stage (its layers costed by ``training_layers``, the
LM head, loss and MTP blocks beside them), m micro-batches and the schedule's bubble
(``pipeline_schedule``), the pipeline sends, the data-parallel traffic no compute hides
(stage-correct for ZeRO 0-3, hybrid sharding and LoRA), the optimizer step (on the host
where offloaded), and what one GPU holds: weights, gradients, optimizer states and
activations. Every parallelism, batch and ZeRO field of the configuration may be a NumPy
array (the advisor costs many configurations in one call); ``training.estimate_training``
validates one configuration, calls this and explains the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from gpuarch.catalog.model import Product
from gpuarch.estimate.lora import lora_forward_flops_per_token, lora_params
from gpuarch.estimate.memory import Recompute, activation_bytes_per_layer
from gpuarch.estimate.pipeline_layout import (
    PipelineLayout,
    StageLoad,
    held_layer_passes,
    layout_held_by_rank,
)
from gpuarch.estimate.pipeline_schedule import DUALPIPE_SCHEDULES, pipeline_bubble
from gpuarch.estimate.recompute import recompute_flops_per_token
from gpuarch.estimate.training_config import (
    TrainingConfig,
)
from gpuarch.estimate.training_layers import (
    LayerCosts,
    LayerPasses,
    PassSeconds,
    average_layer,
    bf16_efficiency,
    comm_group,
    layer_groups,
    layer_times,
    nccl_time,
    one_layer_time,
)
from gpuarch.perf.collectives import Collective, Group, Link, Num
from gpuarch.perf.efficiency import Efficiency
from gpuarch.perf.num import any_of, maximum, minimum, where
from gpuarch.perf.precision import Precision
from gpuarch.perf.roofline import (
    Device,
    Elementwise,
    Gemm,
    op_time,
)
from gpuarch.units import Unit, to_si
from gpuarch.workloads.flops import forward_flops_per_token
from gpuarch.workloads.mtp import mtp_block_params, mtp_forward_flops_per_token, mtp_layer_shape
from gpuarch.workloads.params import (
    ParamCount,
    count_params,
    first_stage_params,
    latent_projection_params,
    layer_norm_params,
    mlp_params,
    qk_norm_params,
    routed_expert_params,
)
from gpuarch.workloads.shape import TransformerShape

FRAMEWORK_RESERVE_BYTES = to_si(3, Unit.GIB)
"""CUDA context, NCCL buffers, allocator fragmentation and workspaces: an assumed 3 GiB."""


def _pipeline_send_group(cfg: TrainingConfig, intra: Link, inter: Link | None) -> Group:
    """The two neighbouring stages whose send paces the pipeline (no communicator at all
    without pipelining). Stages are TP x CP x DP ranks apart (pipeline outermost in
    Megatron's rank order). A schedule that waits on its sends runs at the pace of its
    slowest boundary, so a pipeline that spans nodes pays a send over the network on every
    rank's cycle, even where most of its neighbours share a node. With the pipeline
    outermost, every pipeline of a job beyond one node spans nodes."""
    size = where(cfg.pp > 1, 2, 1)
    return Group(size, where(pipeline_spans_nodes(cfg), 1, size), intra, inter)


def waits_on_sends(cfg: TrainingConfig) -> Num:
    """Whether the schedule waits on its pipeline sends: not DualPipe's (hidden in its
    paired chunks), nor an interleaved one's that overlap the next chunk
    (``pp_comm_overlap``); non-interleaved 1F1B and ZB-1P always."""
    if cfg.pp_schedule in DUALPIPE_SCHEDULES:
        return False
    return where((cfg.vpp > 1) & cfg.pp_comm_overlap, False, True)


def pipeline_spans_nodes(cfg: TrainingConfig) -> Num:
    """Whether each pipeline's stages (TP x CP x DP ranks apart) reach beyond one node."""
    return cfg.tp * cfg.cp * cfg.dp * cfg.pp > cfg.gpus_per_node


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


class FixedCosts(NamedTuple):
    """What ``evaluate_training`` takes that its layers' costs leave alone: the LM head's
    and loss's passes, one layer-pass's activations, the parameters, gradients and optimizer
    states one GPU holds, the data-parallel traffic and the FLOPs per token
    (``fixed_costs``). None of it reads the tensor-parallel overlap (``cfg.tp_comm_overlap``,
    ``Efficiency.tp_comm_exposed`` and ``tp_comm_exposed_16_bit_dense``, read by the layers'
    costs alone), so one set serves every variant of a run that differs only there: the
    estimate's note on the userbuffers overlap prices one beside the step."""

    head_pass: Num  # the LM head's forward and gradients and the loss's, one micro-batch
    per_layer_act: Num  # one layer-pass's activation bytes (``_layer_activations``)
    bf16_act: Num  # what a layer run in BF16 adds to them
    dp_gather: Num  # data-parallel traffic per step, every pipeline rank's
    dp_reduce: Num
    states: HeldStates
    tied_sync: Num  # the tied embedding's gradient all-reduce
    model_flops: float  # per token
    hw_flops: Num  # per token


def fixed_costs(shape: TransformerShape, product: Product, device: Device, intra: Link,
                inter: Link | None, cfg: TrainingConfig, eff: Efficiency,
                host_link_bytes_s: float | None = None) -> FixedCosts:
    """``FixedCosts`` for ``evaluate_training``'s arguments of the same names."""
    tokens_mb = cfg.micro_batch * cfg.seq_len // cfg.cp
    # what an FP8 or FP4 run keeps in BF16 runs on the BF16 device at the 16-bit
    # efficiencies: the LM head always (Megatron-Core's output layer is its own
    # ColumnParallelLinear, outside Transformer Engine's autocast: docs/performance-model.md,
    # "A low-precision run's LM head")
    bf16 = _bf16_costing(device, eff, cfg, product)
    head = op_time(Gemm(tokens_mb, -(-shape.head_rows // cfg.tp), shape.hidden, name="lm_head"),
                   *bf16)[0]
    loss = op_time(Elementwise(3.0 * tokens_mb * shape.head_rows / cfg.tp * 4, name="loss"),
                   device, eff)[0]
    # forward, data gradient and (unless frozen under LoRA) weight gradient
    head_pass = (2 if cfg.lora_rank else 3) * head + 2 * loss
    layout = cfg.layout(shape)
    # memory on the most loaded stage: one layer-pass's activations, and what a layer run
    # in BF16 adds to it
    per_layer_act, bf16_act = _layer_activations(shape, cfg, layout)
    placed = _local_params(shape, cfg, layout)
    shards = _zero_shards(cfg)
    dp_gather, dp_reduce = _dp_gradient_traffic(shape, cfg, placed, shards,
                                                cfg.micro_batches, eff, intra, inter)
    states = _held_states(cfg, placed, shards, device, eff, host_link_bytes_s)
    # a word embedding tied to the output layer sits on the first stage and the last, and
    # Megatron-Core all-reduces its gradient between the two once the step's backward is
    # done (finalize_model_grads: _allreduce_word_embedding_grads, on the full main_grad):
    # nothing overlaps it. Frozen under LoRA, it has no gradient to reduce; DualPipeV puts
    # the first stage and the last on one GPU
    tied_sync: Num = 0.0
    if shape.tied_embeddings and not cfg.lora_rank and cfg.pp_schedule != "dualpipev":
        tied_sync = where(cfg.pp > 1, nccl_time(
            Collective.ALL_REDUCE, shape.vocab / cfg.tp * shape.hidden
            * cfg.param_bytes.gradients, _pipeline_send_group(cfg, intra, inter), eff), 0.0)
    model_flops, hw_flops = _flops_per_token(shape, cfg)
    return FixedCosts(head_pass, per_layer_act, bf16_act, dp_gather, dp_reduce,
                      states, tied_sync, model_flops, hw_flops)


def _bf16_costing(device: Device, eff: Efficiency, cfg: TrainingConfig,
                  product: Product) -> tuple[Device, Efficiency]:
    """The device and efficiencies of what a run keeps in BF16: the BF16 device at the
    16-bit efficiencies in an FP8 or FP4 run, the run's own otherwise."""
    if cfg.precision.low_precision:
        return device.sixteen_bit(), bf16_efficiency(eff, cfg, product.key)
    return device, eff


def evaluate_training(shape: TransformerShape, product: Product, device: Device,
                      intra: Link, inter: Link | None, cfg: TrainingConfig,
                      eff: Efficiency, parts: dict[str, Num] | None = None,
                      host_link_bytes_s: float | None = None,
                      layers: LayerCosts | None = None,
                      fixed: FixedCosts | None = None) -> TrainingCore:
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
    (the advisor costs a hybrid's layouts once for all its pipeline splits). ``fixed``: what
    the layers' costs leave alone, made by ``fixed_costs`` for this run or for one that
    differs from it only in the tensor-parallel overlap (``FixedCosts``)."""
    if fixed is None:
        fixed = fixed_costs(shape, product, device, intra, inter, cfg, eff,
                            host_link_bytes_s)
    head_pass = fixed.head_pass
    tokens_mb = cfg.micro_batch * cfg.seq_len // cfg.cp
    tp_group, cp_group, ep_group = layer_groups(cfg, intra, inter)
    pp_group = _pipeline_send_group(cfg, intra, inter)
    kinds = (layers.kinds if layers is not None and parts is None else
             layer_times(shape, cfg, device, eff, tp_group, cp_group, ep_group,
                          with_parts=parts is not None))
    # the layers and MTP blocks asked for in BF16 run as the LM head does (fixed_costs)
    bf16 = _bf16_costing(device, eff, cfg, product)
    average = average_layer(shape, kinds)
    fwd, bwd = average.fwd, average.bwd
    layer_flops = average.flops
    layout = cfg.layout(shape)
    # the layers (and MTP blocks) run in BF16 beside the low-precision recipe, costed as a
    # BF16 run's
    in_bf16 = (cfg.in_bf16, *bf16) \
        if cfg.mtp_bf16 or (layout is not None and layout.bf16_virtual) else None
    kinds16 = (layer_times(shape, *in_bf16, tp_group, cp_group, ep_group,
                            with_parts=parts is not None)
               if in_bf16 is not None and layout is not None and layout.bf16_virtual else {})

    mtp_layer, mtp_extra = _mtp_block(shape, cfg, (cfg, device, eff), in_bf16,
                                      (tp_group, cp_group, ep_group), head_pass,
                                      parts is not None)
    plan = _slowest_stage(shape, cfg, layout, average, (kinds, kinds16),
                          (mtp_layer, mtp_extra), head_pass, parts is not None)
    stage, layers_per_stage = plan.passes, plan.layers_per_stage
    if parts is not None:
        parts.update(plan.parts)
    act = 1.0 * tokens_mb * shape.hidden * cfg.precision.activation_bytes
    if cfg.sequence_parallel or cfg.pp_scatter_gather:
        act = act / cfg.tp
    # a stage waits, per micro-batch, on the send of its output (with the receipt of the
    # next stage's gradient) and on the send of its input's gradient, once per chunk; the
    # transfer then adds to every stage's cycle. Interleaved sends overlapped with the next
    # chunk (pp_comm_overlap) and DualPipe's, hidden in its paired chunks, add nothing
    waits = where(waits_on_sends(cfg), 1.0, 0.0)
    p2p = (2 * nccl_time(Collective.P2P, act, pp_group, eff) * cfg.vpp * waits
           * eff.pp_comm_exposed)
    p2p = where(cfg.pp > 1, p2p, 0.0)
    stage = stage + PassSeconds(0.0, p2p)

    per_layer_act, bf16_act = fixed.per_layer_act, fixed.bf16_act
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
    # fine-grained offloading: each layer-pass's offloaded tensors go out during its forward
    # pass and come back during its backward, the same way; one layer-pass's are in flight
    module_offload: Num = 0.0
    if cfg.offload_modules:
        module_offload = _layer_activations(shape, cfg, layout, offloaded=False)[0] \
            - per_layer_act
        if host_link_bytes_s:
            transfer = module_offload / host_link_bytes_s
            copies = layers_per_stage * (maximum(0.0, transfer - fwd.compute)
                                         + maximum(0.0, transfer - bwd.compute))
            offload = offload + copies
            stage = stage + PassSeconds(0.0, copies)

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

    dp_gather, dp_reduce = fixed.dp_gather, fixed.dp_reduce
    # the time a micro-batch's layers keep the GPU busy: their compute, and where a pass is
    # shorter than the layer-pass floor, the wait that stands in for its latency-bound chain
    # (the data-parallel collectives run on their own stream through both)
    dp_exposed = _dp_exposed(cfg, dp_gather + dp_reduce, stage.compute + stage.floor,
                             layers_per_stage, eff)

    states = fixed.states
    weights, gradients = states.weights, states.gradients
    optimizer_states, optimizer = states.optimizer_states, states.optimizer_time
    opt_offloaded = states.offloaded
    if layout is not None:
        # one value per pipeline rank so far: the step waits for the slowest rank's
        # gradient traffic and optimizer; memory is the rank holding the most
        nd = _batch_ndim(cfg)
        dp_exposed, optimizer = _slowest_rank(dp_exposed, nd), _slowest_rank(optimizer, nd)
        dp_gather, dp_reduce = _slowest_rank(dp_gather, nd), _slowest_rank(dp_reduce, nd)
        held_parts = np.broadcast_arrays(weights, gradients, optimizer_states)
        heaviest = np.argmax(sum(held_parts), axis=0)
        weights, gradients, optimizer_states = (_pick(heaviest, list(x)) for x in held_parts)

    tied_sync = fixed.tied_sync
    step = (compute_time + pipeline_comm + unpaired + host_time + floor_time + bubble
            + dp_exposed + tied_sync + optimizer + eff.step_overhead_s)

    # throughput and utilisation
    tokens_per_s = cfg.global_batch * cfg.seq_len / step
    model_flops, hw_flops = fixed.model_flops, fixed.hw_flops
    peak = device.matmul.flops
    per_gpu_flops = model_flops * tokens_per_s / cfg.gpus

    held_passes, act_bytes = _held_activations(cfg, layout, plan, m, per_layer_act,
                                               bf16_act, offloaded)
    act_bytes = act_bytes + module_offload
    # FP32 logits for the loss, and for each MTP block's on the last stage
    logits = tokens_mb * shape.head_rows / cfg.tp * 4.0 * (1 + cfg.mtp_layers)
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
        activation_layer_passes=held_passes - offloaded,
        other=FRAMEWORK_RESERVE_BYTES + logits,
        micro_batches=m,
        layer_flops=layer_flops,
        peak=peak,
        stage_head_time=plan.head_time,
        p2p_exposed=p2p,
        dp_exposed=dp_exposed,
        dp_gather=dp_gather,
        dp_reduce=dp_reduce,
        tied_sync=tied_sync,
        offload_exposed=offload,
        offloaded_elements=np.max(opt_offloaded) if layout is not None else opt_offloaded,
    )


class StagePlan(NamedTuple):
    """The slowest pipeline stage of one micro-batch, and what its layers hold."""

    passes: PassSeconds  # forward and backward of its layers, head and MTP blocks
    head_time: Num  # of which the LM head, loss and MTP projections and heads
    parts: dict[str, Num]  # its seconds by kind (only when asked for)
    layers_per_stage: Num  # the most layers a stage runs
    activation_layers: Num  # the most layers' activations a stage keeps per micro-batch
    held_1f1b: Num  # layer-passes the most loaded rank holds under 1F1B
    # with an explicit layout, each rank's (layer-passes held, of them its BF16 layers')
    held_by_rank: list[tuple[Num, Num]] | None = None


class LocalParams(NamedTuple):
    """Parameters one GPU holds (the most loaded rank's where a layout sets them apart)."""

    dense: Num
    expert: Num
    dense16: Num  # of those, kept in BF16 under a low-precision recipe
    expert16: Num
    lora_dense: Num  # the LoRA adapters beside them (0 without LoRA)
    lora_expert: Num


def _mtp_block(shape: TransformerShape, cfg: TrainingConfig,
               costing: tuple[TrainingConfig, Device, Efficiency],
               in_bf16: tuple[TrainingConfig, Device, Efficiency] | None,
               groups: tuple[Group, Group, Group], head_pass: Num,
               with_parts: bool) -> tuple[LayerPasses, Num]:
    """One MTP block's layer (of the last layer's kind, with full attention; costed in BF16
    where ``cfg.mtp_bf16``) and its extra work per micro-batch: the 2h -> h projection
    (column-parallel over TP) and its own pass through the shared head. None without MTP."""
    if not cfg.mtp_layers:
        return LayerPasses(PassSeconds(), PassSeconds(), PassSeconds(), 0.0, {}), 0.0
    own: dict[str, Num] = {}
    mtp_cfg, mtp_device, mtp_eff = in_bf16 if cfg.mtp_bf16 and in_bf16 else costing
    # (a hybrid model's: its attention and expert blocks as one layer)
    mtp_shape = mtp_layer_shape(shape) if shape.is_hybrid else shape
    f, b, r, fl, w, h = one_layer_time(mtp_shape, mtp_cfg, mtp_device, mtp_eff, *groups,
                                        shape.is_moe, 0, own if with_parts else None)
    tokens_mb = cfg.micro_batch * cfg.seq_len // cfg.cp
    projection = op_time(Gemm(tokens_mb, shape.hidden // cfg.tp, 2 * shape.hidden,
                              name="mtp_projection"), mtp_device, mtp_eff)[0]
    return LayerPasses(f, b, r, fl, own, w, h), 3 * projection + head_pass


def _slowest_stage(shape: TransformerShape, cfg: TrainingConfig, layout: PipelineLayout | None,
                   average: LayerPasses,
                   kinds: tuple[dict[Any, LayerPasses], dict[Any, LayerPasses]],
                   mtp: tuple[LayerPasses, Num], head_pass: Num, with_parts: bool
                   ) -> StagePlan:
    """The stage that sets the pipeline's pace, per micro-batch. ``kinds``: the layers by
    kind as the recipe runs them and as its BF16 layers run; ``mtp``: an MTP block's layer
    and extra work (``_mtp_block``); ``head_pass``: the LM head and loss."""
    mtp_layer, mtp_extra = mtp
    per_layer = average.passes
    parts: dict[str, Num] = {}
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
            head_time: Num = where(slower, last_head, 0.0)
            stage_mtp: Num = where(slower, cfg.mtp_layers, 0)
        else:
            stage = last
            stage_layers, head_time, stage_mtp = last_layers, last_head, cfg.mtp_layers
        if with_parts:
            for key, value in average.parts.items():
                parts[key] = stage_layers * value
            for key, value in mtp_layer.parts.items():
                parts[key] = parts.get(key, 0.0) + stage_mtp * value
        # activations are counted in layers (a hybrid model's in blocks, an MTP block two)
        mtp_slots = cfg.mtp_layers * (2 if shape.is_hybrid else 1)
        held_1f1b = held_layer_passes(
            layers_per_stage / cfg.vpp, cfg.pp, cfg.vpp, cfg.micro_batches,
            first_chunk_fewer=edge // 2, last_chunk_more=mtp_slots - edge // 2)
        return StagePlan(stage, head_time, parts, layers_per_stage,
                         maximum(layers_per_stage, last_layers + mtp_slots), held_1f1b)
    # each pipeline rank runs its own layers (dense and expert ones as such), MTP blocks
    # and head; the slowest sets the pace
    recipe, sixteen_bit = kinds

    def rank_pass(load: StageLoad) -> tuple[PassSeconds, dict[str, Num], Num]:
        by_kind = load.blocks or ((False, load.dense_layers), (True, load.expert_layers))
        sixteen = dict(load.bf16)
        counts = (*((n - sixteen.get(kind, 0), recipe.get(kind)) for kind, n in by_kind),
                  *((n, sixteen_bit.get(kind)) for kind, n in load.bf16),
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
    head_time = _pick(slowest, [extra for _, _, extra in ranks])
    parts = {key: _pick(slowest, [own.get(key, 0.0) for _, own, _ in ranks])
             for key in {k for _, own, _ in ranks for k in own}}
    # each rank's layer-passes held at its peak (and of them, its BF16 layers'), once
    held_by_rank = layout_held_by_rank(layout, cfg.pp, cfg.vpp, cfg.micro_batches)
    held_1f1b = held_by_rank[0][0]
    for n, _ in held_by_rank[1:]:
        held_1f1b = maximum(held_1f1b, n)
    return StagePlan(stage, head_time, parts, layout.max_layers, layout.max_layers,
                     held_1f1b, held_by_rank)


def _local_params(shape: TransformerShape, cfg: TrainingConfig,
                  layout: PipelineLayout | None) -> LocalParams:
    """Parameters held per GPU (the last stage also holds the LM head and the MTP blocks);
    expert weights are split over EP and replicated only across the expert-data-parallel
    group."""
    pc = count_params(shape)
    expert_params = pc.mlp_experts
    dense_block, expert_block = mtp_block_params(shape) if cfg.mtp_layers else (0, 0)
    # the depths' weights per depth: one block's shared by all of them, or one each
    share = 1 / cfg.mtp_layers if cfg.mtp_shared_weights else 1.0
    mtp_dense, mtp_expert = dense_block * share, expert_block * share
    dense_local: Num
    expert_local: Num
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
    return LocalParams(dense_local, expert_local, dense16, expert16, lora_dense, lora_expert)


def _flops_per_token(shape: TransformerShape, cfg: TrainingConfig) -> tuple[float, Num]:
    """Model FLOPs per token (forward, and backward at twice the forward) and hardware
    FLOPs (the model's plus the forward work recomputation repeats)."""
    fwd_flops = forward_flops_per_token(shape, cfg.attention_span)
    forward_total = fwd_flops.total
    if cfg.mtp_layers:  # Megatron counts the MTP blocks' work as model FLOPs too
        forward_total += cfg.mtp_layers * mtp_forward_flops_per_token(shape,
                                                                      cfg.attention_span)
    # under LoRA the adapters' FLOPs join them and the frozen weights' gradients (as many
    # FLOPs as their forward GEMMs) drop out
    forward_total += lora_forward_flops_per_token(shape, cfg.lora_rank, cfg.adapted)
    skipped = fwd_flops.total - fwd_flops.attention_core if cfg.lora_rank else 0.0
    model_flops = 3.0 * forward_total - skipped
    # hardware FLOPs: the model's, plus the forward pass of every layer fully recomputed
    hw_flops = model_flops + cfg.full_recompute_share(shape) * forward_total
    if cfg.recompute is Recompute.SELECTIVE:
        hw_flops += recompute_flops_per_token(shape, cfg.attention_span, cfg.recomputed)
    return model_flops, hw_flops


def _held_activations(cfg: TrainingConfig, layout: PipelineLayout | None, plan: StagePlan,
                      m: Num, per_layer_act: Num, bf16_act: Num, offloaded: int
                      ) -> tuple[Num, Num]:
    """The layer-passes the most loaded rank holds at its peak (offloaded ones included),
    and their activation bytes (its BF16 layers' at their own size)."""
    if cfg.pp_schedule in DUALPIPE_SCHEDULES:
        # PP + 1 stages' micro-batches (DualPipe's table); DualPipeV's stages are half a
        # GPU's layers and there are 2 x PP of them
        in_flight = where(cfg.pp > 1, cfg.pp + (
            1.0 if cfg.pp_schedule == "dualpipe" else 0.5), minimum(cfg.pp, m))
        held = plan.activation_layers * in_flight
    else:
        # 1F1B (and ZB-1P, which holds what 1F1B holds): the rank at its warm-up's end
        # holding the most layer-passes (estimate.pipeline_layout.held_layer_passes)
        held = plan.held_1f1b
    act_bytes = per_layer_act * (held - offloaded)
    if layout is not None and layout.bf16_virtual and plan.held_by_rank is not None:
        # the rank holding the most bytes, its BF16 layers' passes counted at their size
        by_rank = plan.held_by_rank
        if cfg.pp_schedule in DUALPIPE_SCHEDULES:
            by_rank = [(held, sum(layout.bf16_virtual[v] for v in range(
                r, len(layout.virtual), cfg.pp)) * in_flight) for r in range(cfg.pp)]
        per_rank = [per_layer_act * (n - offloaded) + bf16_act * n16 for n, n16 in by_rank]
        act_bytes = per_rank[0]
        for more in per_rank[1:]:
            act_bytes = maximum(act_bytes, more)
    return held, act_bytes


class HeldStates(NamedTuple):
    """What one GPU keeps of the model's state, in bytes, and its optimizer step."""

    weights: Num
    gradients: Num
    optimizer_states: Num
    optimizer_time: Num  # the optimizer step's seconds (on the host where offloaded)
    offloaded: Num  # optimizer elements updated on the host


def _layer_activations(shape: TransformerShape, cfg: TrainingConfig,
                       layout: PipelineLayout | None, offloaded: bool = True
                       ) -> tuple[Num, Num]:
    """One layer-pass's activation bytes on the GPU (the mean over the layers, where only
    some are fully recomputed; with ``offloaded``, less what fine-grained offloading moves
    to the host), and what a layer run in BF16 adds to that: its GEMMs' inputs kept in 16
    bits, not the recipe's format (0 without such layers)."""
    offload = cfg.offload_modules if offloaded else ()

    def layer_act(recompute: Recompute, quantized: bool) -> Num:
        return activation_bytes_per_layer(
            shape, cfg.micro_batch, cfg.seq_len // cfg.cp, cfg.tp, cfg.sequence_parallel,
            recompute, cfg.precision.activation_bytes, fused_attention=cfg.fused_attention,
            quantized_inputs=quantized, modules=cfg.recomputed,
            adapted=cfg.adapted if cfg.lora_rank else None, offload=offload,
            offload_min_elements=cfg.offload_min_elements)

    def mean_layer_act(quantized: bool) -> Num:
        act = layer_act(cfg.recompute, quantized)
        if cfg.recompute is Recompute.FULL and cfg.recompute_layers:
            # the layers not recomputed keep everything
            share = cfg.full_recompute_share(shape)
            act = share * act + (1 - share) * layer_act(Recompute.NONE, quantized)
        return act

    per_layer_act = mean_layer_act(cfg.precision.low_precision)
    bf16_act = (mean_layer_act(False) - per_layer_act
                if layout is not None and layout.bf16_virtual else 0.0)
    return per_layer_act, bf16_act


class ZeroShards(NamedTuple):
    """The ranks ZeRO shards a dense and an expert parameter over: DP x CP, and the expert-
    data-parallel group (TP x DP x CP / (ETP x EP)); under hybrid sharding (``replicas``
    groups of them), one replica group's share of them."""

    replicas: Num
    dense: Num
    expert: Num


def _zero_shards(cfg: TrainingConfig) -> ZeroShards:
    """``cfg``'s ``ZeroShards``."""
    replicas = cfg.dp_replicas
    return ZeroShards(replicas, cfg.dp * cfg.cp // replicas,
                      cfg.tp * cfg.dp * cfg.cp // (cfg.expert_tp * cfg.ep) // replicas)


def _dp_gradient_traffic(shape: TransformerShape, cfg: TrainingConfig, placed: LocalParams,
                         shards: ZeroShards, m: Num, eff: Efficiency, intra: Link,
                         inter: Link | None) -> tuple[Num, Num]:
    """Data-parallel traffic per step, stage-correct for ZeRO (the parameters' gathers, the
    gradients' reductions): dense weights over DP x CP, expert weights over the expert-data-
    parallel group (DP x CP / EP ranks, spaced EP apart, so across nodes once EP fills a
    node). ZeRO's group is all DP x CP ranks, or under hybrid sharding the ``dp_shard``
    nearest of them (TP apart), its replicas a further ``dp_shard`` groups apart; each
    replica group shards as one of DP x CP / replicas ranks."""
    replicas, shard, expert_shard = shards
    hybrid = any_of(cfg.dp_shard)
    dp_group = comm_group(shard, cfg.tp, cfg, intra, inter)
    replica_group = (comm_group(replicas, cfg.tp * cfg.dp * cfg.cp // replicas, cfg, intra,
                                inter) if hybrid else None)
    gather, reduce = _dp_traffic(placed.dense, dp_group, cfg, m, eff,
                                 trained=placed.lora_dense, replicas=replica_group)
    if shape.is_moe:
        ep_stride = cfg.tp * cfg.cp if not cfg.etp else cfg.etp  # as in layer_groups
        edp_group = comm_group(expert_shard, ep_stride * cfg.ep, cfg, intra, inter)
        expert_replicas = (comm_group(replicas, ep_stride * cfg.ep * expert_shard, cfg, intra,
                                      inter) if hybrid else None)
        expert_gather, expert_reduce = _dp_traffic(placed.expert, edp_group, cfg, m, eff,
                                                   trained=placed.lora_expert,
                                                   replicas=expert_replicas)
        gather, reduce = gather + expert_gather, reduce + expert_reduce
    return gather, reduce


def _dp_exposed(cfg: TrainingConfig, dp_comm: Num, window: Num, layers_per_stage: Num,
                eff: Efficiency) -> Num:
    """The part of a step's data-parallel traffic (``dp_comm`` seconds) that no compute
    hides; ``window``: the time one micro-batch's layers keep the GPU busy."""
    m = cfg.micro_batches

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

    return _by_case(where(cfg.zero < 3, OVERLAPPED,
                          where(cfg.fsdp_prefetch, PREFETCHED, GATHERED)), exposed)


def _held_states(cfg: TrainingConfig, placed: LocalParams, shards: ZeroShards, device: Device,
                 eff: Efficiency, host_link_bytes_s: float | None) -> HeldStates:
    """Weights, gradients and optimizer states per GPU, as ZeRO's stage shards them, and
    the optimizer step's time (per pipeline rank where a layout sets the ranks apart)."""
    per_param = cfg.param_bytes
    replicas, shard, expert_shard = shards

    def sharded(stage: int, dense: Num, expert: Num, kept: Num = False) -> Num:
        """Parameters per GPU for a state ZeRO shards from ``stage`` on (held whole where
        ``kept``)."""
        return where(np.logical_or(cfg.zero < stage, kept), dense + expert,
                     dense / shard + expert / expert_shard)

    # under LoRA the frozen weights keep their compute copy alone (no gradient, no master
    # copy or moments); the adapters are trained as weights are
    trained = ((placed.lora_dense, placed.lora_expert) if cfg.lora_rank
               else (placed.dense, placed.expert))
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
    weights = (sharded(3, placed.dense, placed.expert, kept)
               + (sharded(3, trained[0], trained[1], kept) if cfg.lora_rank else 0.0)) \
        * per_param.weights \
        + sharded(3, placed.dense16, placed.expert16, kept) \
        * max(0.0, Precision.BF16.bytes - per_param.weights)
    return HeldStates(weights, sharded(2, *trained) * per_param.gradients,
                      opt_params * per_param.optimizer - opt_offloaded * moment_bytes(cfg),
                      optimizer, opt_offloaded)


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
    # the mean layer's attention: a sparse-attention indexer in its share of the layers,
    # DeepSeek-V4's compressors and hyper-connections in theirs, and a layer's share of the
    # per-layer inputs' projections (Gemma 4's), AltUp's and LAuReL's weights (Gemma 3n's)
    attention = (pc.attention + pc.attention_experts + pc.hyper_connections
                 + pc.per_layer_inputs + pc.alternating_updates + pc.laurel) / shape.layers
    dense_layer = attention + norms + mlp_params(shape, shape.d_ffn)
    expert_layer: float = 0
    routed = 0
    if shape.moe_layers:
        expert_layer = attention + norms + shape.shared_experts * mlp_params(
            shape, shape.d_expert) + pc.router / shape.moe_layers \
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
    block_norms = norm * shape.block_norms
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
        dense.append(sum(n * (outside[block] + block_norms) for block, n in r.blocks)
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
