"""One training step of a transformer on a GPU cluster: time, memory, MFU, cost, energy.

Model (Model x Strategy x System, composed by pure functions):

1. ``TrainingConfig`` (the strategy) is validated: DP = GPUs / (TP x PP x CP), every
   dimension must divide what it splits.
2. One micro-batch on one pipeline stage is a list of operators (``perf.roofline``) and
   collectives (``perf.collectives``): per layer the QKV, attention, projection and MLP GEMMs,
   fused attention, norms and activations, tensor-parallel all-reduces (or all-gather +
   reduce-scatter with sequence parallelism), context-parallel KV exchange and MoE all-to-all;
   backward costs twice the forward GEMMs and 2.5x the forward attention; recomputation adds
   forward work. The last stage also runs the LM head.
3. The step is m micro-batches through the slowest stage plus the pipeline schedule's
   bubble (1F1B's (PP-1)/VPP stage times, or a zero-bubble or DualPipe schedule's,
   ``pipeline_bubble``), the exposed part of the data-parallel gradient traffic (stage-
   correct for ZeRO 0-3), and the optimizer step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import BLACKWELL_TENSOR_CORES, Product, System, spec
from gpuarch.errors import GpuarchError, check_choice, check_count
from gpuarch.estimate.energy import DEFAULT_FACILITY, GPU_POWER_MODEL, Facility, energy_kwh
from gpuarch.estimate.host_link import product_host_link
from gpuarch.estimate.lora import (
    DEFAULT_LORA_MODULES,
    adapted_gemms,
    check_lora_modules,
    lora_forward_flops_per_token,
    lora_params,
)
from gpuarch.estimate.mamba import mamba_ops
from gpuarch.estimate.memory import (
    BytesPerParam,
    Recompute,
    activation_bytes_per_layer,
    bytes_per_param,
)
from gpuarch.estimate.pipeline_layout import (
    PipelineLayout,
    StageLoad,
    even_layout,
    held_layer_passes,
    hybrid_layout,
    layout_held_by_rank,
    parse_pp_layout,
)
from gpuarch.estimate.recompute import (
    DEFAULT_MODULES,
    TORCHTITAN_OP,
    block_matmuls,
    check_recompute_modules,
    recompute_flops_per_token,
    torchtitan_op_split,
)
from gpuarch.estimate.reliability import (
    INTERRUPTIONS_PER_GPU_DAY,
    RATE_SOURCE,
    CheckpointPlan,
    expected_interruptions,
    goodput,
)
from gpuarch.perf.collectives import (
    Collective,
    Group,
    Link,
    Num,
    collective_time,
    link_for,
    nccl_protocols,
)
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.fp8_attention import (
    FP8_ATTENTION_SCALINGS,
    fp8_attention_sources,
    fp8_training_attention_speedup,
    has_fp8_attention_timings,
)
from gpuarch.perf.num import any_of, ceil, maximum, minimum, where
from gpuarch.perf.precision import Precision, matmul_peak
from gpuarch.perf.roofline import (
    ATTENTION_OPS,
    LORA_OPS,
    Attention,
    Device,
    Elementwise,
    Gemm,
    Op,
    attention_span,
    attention_span_share,
    fp8_backward_ignores_window,
    op_kind,
    op_time,
)
from gpuarch.perf.sibling import sibling_notes
from gpuarch.units import Unit, from_si, to_si
from gpuarch.workloads.flops import (
    attention_core_dims,
    attention_projections,
    forward_flops_per_token,
)
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
from gpuarch.workloads.shape import MAX_DIMENSION, TransformerShape

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

UNFUSED_SOFTMAX_BYTES = 9.0
"""DRAM bytes per attention-score element for unfused softmax and dropout: read and write
the scores (2 + 2, 16-bit), write the dropout mask (1), read and write the dropped-out
probabilities (2 + 2); Korthikanti et al. 2022, section 4.1, list the same tensors."""

EP_DISPATCHERS = ("alltoall", "deepep")
"""MoE token dispatchers: every routed copy sent on its own, or deduplicated by node."""

CP_COMM_TYPES = ("p2p", "all_gather", "a2a")
"""How context-parallel ranks exchange attention inputs (Megatron-Core's ``--cp-comm-type``,
Transformer Engine's ``cp_comm_type``): "p2p" passes key/value chunks around a ring while
each chunk's attention runs (the exchange largely hidden, ``Efficiency.cp_comm_exposed``);
"all_gather" gathers every rank's keys and values before the attention core, which waits
for them; "a2a" (DeepSpeed-Ulysses style) swaps the sequence split for a head split with an
all-to-all of the queries, keys and values before the core and of its output after it, in
the forward pass and again for their gradients in the backward, none of it overlapped."""


def cp_call_share(cfg: TrainingConfig) -> float | None:
    """The share of the sequence one fused attention call spans under ``cfg``'s context
    parallelism (``Attention.call_share``): None, the GPU's share, for the p2p ring's calls
    over one chunk (and without context parallelism, where that share is 1); 1 for "a2a"
    and "all_gather", whose calls span the whole sequence."""
    return None if cfg.cp_comm_type == "p2p" else 1.0


def fused_attention(cfg: TrainingConfig, heads: Num = 1, kv_heads: Num = 1, head_dim: Num = 1,
                    window: Num = 0, chunked: bool = False) -> Attention:
    """One GPU's fused attention core of a layer's forward pass under ``cfg``: its
    micro-batch's sequences (packed documents as so many short ones), 1/CP of the causal
    work, in kernel calls over a chunk or the whole sequence (``cp_call_share``)."""
    span = cfg.attention_span
    return Attention(cfg.micro_batch * cfg.seq_len / span, span, span, heads, kv_heads,
                     head_dim, causal=True, share=1 / cfg.cp, window=window, chunked=chunked,
                     call_share=cp_call_share(cfg))


CUDA_GRAPH_SCOPES = ("attn", "mamba", "mlp", "moe", "moe_router", "moe_preprocess",
                     "full_iteration")
"""Megatron-Core's ``--cuda-graph-scope`` modules. What the model draws from a scope is
where a dropless MoE dispatcher's host wait goes (``TrainingConfig.ungraphed_expert_share``):
an expert block pays it only when the block before it (attention, or in a hybrid model the
Mamba-2, attention or MLP block) is launched kernel by kernel; ``moe`` (an expert layer
graphed whole, which needs padded, fixed-size expert inputs) and ``full_iteration`` leave no
wait anywhere; ``moe_router`` and ``moe_preprocess`` alone leave it, as the runs that graph
only those read (docs/performance-model.md, "CUDA graph scopes")."""

EXPERT_LAUNCHES = ("per-expert", "grouped", "fused-mlp")
"""How a GPU's expert GEMMs are launched: one GEMM (and, in low precision, one quantization)
per local expert, as Transformer Engine's grouped linear layers do by default (multi-stream
cuBLASLt); one grouped kernel for all of them (CUTLASS or cuBLASLt grouped GEMM with the
shapes on the device); or a fused grouped MLP, whose up projection applies the activation
and, in FP8/FP4, quantizes the down projection's input in its epilogue, so neither makes a
pass through memory of its own (cuDNN frontend's CuTe DSL grouped GEMM + GLU kernels,
Megatron Bridge's ``cutedsl_fused_grouped_mlp``; NVIDIA's timings of them against
Transformer Engine's unfused grouped GEMM, activation and MXFP8 quantization on GB200:
1.25x faster for the SwiGLU forward, 2.0x for its backward, cuDNN frontend
benchmark/cutedsl_fusion_kernels/results)."""

FRAMEWORK_RESERVE_BYTES = to_si(3, Unit.GIB)
"""CUDA context, NCCL buffers, allocator fragmentation and workspaces: an assumed 3 GiB."""


SCHEDULE_BUBBLES = {
    "1f1b": "1F1B (interleaved over VPP chunks): a bubble of (PP-1)(F+B)/VPP, F and B a "
            "stage's forward and backward per micro-batch",
    "zb1p": "zero-bubble ZB-H1 (Qi et al., ICLR 2024): the weight gradients W deferred into "
            "the bubble, (PP-1)(F+B-2W), W each trained GEMM's forward time again; 1F1B's "
            "memory",
    "dualpipe": "DualPipe (DeepSeek-V3 report, Table 2): (PP/2-1)(F&B+B-3W), F&B taken as "
                "F+B (the pair overlaps communication, not compute); two copies of the "
                "parameters, their gradients and optimizer states; PP+1 micro-batches' "
                "activations",
    "dualpipev": "DualPipeV (DeepSeek's DualPipe README): DualPipe's bubble over 2 x PP "
                 "chunks of half a GPU's layers; one copy of the parameters; PP+1 chunks' "
                 "activations",
}
"""The pipeline schedules (``TrainingConfig.pp_schedule``) and the bubble each leaves, as an
estimate's ``assumptions.pp_schedule`` states it (F, B: a stage's forward and whole
backward per micro-batch, W its weight-gradient GEMMs; ``pipeline_bubble`` computes them)."""

PP_SCHEDULES = tuple(SCHEDULE_BUBBLES)
"""The schedules' names, 1F1B (the default) first."""


def schedule_chunks(schedule: str) -> int:
    """Model chunks per GPU a non-1F1B schedule runs (its --vpp): DualPipeV's V shape puts
    two on each GPU, ZB-1P and DualPipe one."""
    return 2 if schedule == "dualpipev" else 1


DUALPIPE_SCHEDULES = ("dualpipe", "dualpipev")
"""DeepSeek's bidirectional schedules (DualPipe and its V-shaped half): they hold their own
count of micro-batches in flight, and pair chunks so that their sends hide behind compute."""

ATTENTION_KERNELS = ("native", "ampere", "triton")
"""Fused attention kernels: the GPU generation's own, one written for Ampere's synchronous
Tensor Core instructions (FlashAttention-2), or 2023's flash attention in Triton (slower
than FlashAttention-2 everywhere: ``Efficiency.attention_triton_kernel``)."""


def attention_efficiency(eff: Efficiency, cfg: TrainingConfig, compute_capability: str,
                         gpu: str) -> Efficiency:
    """``eff`` with the attention efficiency the configured kernel reaches on a GPU of this
    compute capability. FP8 attention (``fp8_attention``) on a GPU (catalog key ``gpu``)
    whose chip has published FP8 training-attention timings runs each pass at its 16-bit
    rate times the measured speedup (the roofline's, perf/fp8_attention.py), so the 16-bit
    efficiency is kept here; elsewhere it runs at the FP8 peak times the share of it that
    the serving kernels' FP8 prompt attention reaches against the 16-bit kernel's share of
    its own peak (``context_attention_fp8`` over ``context_attention``: 1.39x faster where
    the FP8 peak is twice the 16-bit one), which no training kernel timing checks."""
    eff = eff.with_attention_kernel(cfg.attention_kernel, compute_capability)
    if cfg.fp8_attention and not has_fp8_attention_timings(gpu):
        eff = dataclasses.replace(eff, attention=eff.attention * eff.context_attention_fp8
                                  / eff.context_attention)
    return eff


def expert_efficiency(eff: Efficiency, shape: TransformerShape) -> Efficiency:
    """``eff`` with the grouped expert GEMMs' multiplier ``shape``'s experts run at: the
    fitted ``moe_grouped_gemm`` for a fine-grained mixture of experts, and
    ``moe_grouped_gemm_coarse`` (the dense GEMMs' rate) for a coarse one."""
    if shape.is_moe and not shape.is_fine_grained_moe \
            and eff.moe_grouped_gemm != eff.moe_grouped_gemm_coarse:
        return dataclasses.replace(eff, moe_grouped_gemm=eff.moe_grouped_gemm_coarse)
    return eff


def bf16_efficiency(eff: Efficiency, cfg: TrainingConfig, gpu: str) -> Efficiency:
    """``eff`` (``attention_efficiency``'s, for ``cfg``) for the layers ``cfg`` runs in BF16:
    their attention outside the FP8 autocast, at the 16-bit kernel's efficiency."""
    if cfg.fp8_attention and not has_fp8_attention_timings(gpu):
        return dataclasses.replace(eff, attention=eff.attention * eff.context_attention
                                   / eff.context_attention_fp8)
    return eff


@dataclass(frozen=True, kw_only=True)
class TrainingConfig:
    """How the job runs: parallelism, batch, precision, recomputation."""

    gpus: int
    seq_len: int
    global_batch: int  # sequences per step
    micro_batch: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    # expert tensor parallelism (Megatron --expert-tensor-parallel-size): GPUs each expert's
    # width is split over; 0 = TP (Megatron's default). With fewer than TP, the expert group
    # (EP x ETP) is laid over the tensor-parallel ranks too.
    etp: int = 0
    vpp: int = 1
    sequence_parallel: bool = False
    zero: int = 1
    # hybrid sharding (PyTorch FSDP's HYBRID_SHARD and FSDP2's HSDP, Megatron's
    # --num-distributed-optimizer-instances): ZeRO shards over groups of this many ranks of
    # the DP x CP group, each group a replica of the others whose gradient shards are
    # all-reduced across the groups; 0 = one group of all DP x CP ranks
    dp_shard: int = 0
    # with dp_shard and ZeRO-3: the optimizer state sharded over all DP x CP ranks, the
    # weights and gradients over the group (Megatron-FSDP's Hybrid-FSDP,
    # --outer-dp-sharding-strategy optim); the replicas' gradient reduce-scatter and weight
    # gather once a step move what their all-reduce would
    outer_optimizer_sharding: bool = False
    tp_comm_overlap: bool = False  # Megatron --tp-comm-overlap (userbuffers)
    # ZeRO-3 gathers prefetched a layer ahead (Megatron-FSDP): the per-micro-batch traffic
    # hides behind that micro-batch's compute; off = the exposed fraction of all of it
    fsdp_prefetch: bool = False
    # ZeRO-3 only: False keeps each layer's gathered parameters from its forward to its
    # backward (PyTorch FSDP2's fully_shard(reshard_after_forward=False)): one all-gather a
    # micro-batch instead of two, and the parameters held whole between the passes
    reshard_after_forward: bool = True
    # MoE routing with a capacity bound (tokens over it dropped): buffer sizes are known
    # ahead, so the dropless dispatcher's per-layer wait for the host is not paid
    moe_token_drop: bool = False
    # partial CUDA graphs (Megatron's cuda_graph_impl "transformer_engine" over the scopes
    # attn, moe_router and moe_preprocess): the host no longer launches the kernels before a
    # dropless dispatcher's sync one by one, so the forward does not wait on it
    cuda_graphs: bool = False
    # the CUDA graph scope when it is not that standard one (CUDA_GRAPH_SCOPES; e.g. a
    # hybrid model's ("mamba",)): the wait is charged to the expert blocks whose preceding
    # block the scope leaves out (ungraphed_expert_share); empty = cuda_graphs decides
    cuda_graph_scope: tuple[str, ...] = ()
    # the dropless dispatcher's host wait per expert layer and forward pass, when the
    # framework's own is measured (seconds; None = Megatron-Core's, fitted:
    # Efficiency.moe_layer_overhead_s or moe_layer_overhead_c2c_s by the host's link)
    dispatcher_wait_s: float | None = None
    # MoE token dispatcher: "alltoall" sends every routed copy of a token on its own
    # (Megatron's alltoall dispatcher); "deepep" deduplicates, a token crossing the network
    # once per destination node and NVLink once per destination GPU (the flex dispatcher
    # with DeepEP or HybridEP)
    ep_dispatcher: str = "alltoall"
    # how context-parallel ranks exchange attention inputs (CP_COMM_TYPES)
    cp_comm_type: str = "p2p"
    # the grouped expert GEMMs launched per local expert (TE's multi-stream cuBLASLt, the
    # default) or as one grouped kernel: the host's launch floor counts one expert then
    expert_launches: str = "per-expert"
    # the expert all-to-alls overlap another micro-batch's compute (Megatron
    # --overlap-moe-expert-parallel-comm, Megatron Bridge's moe_a2a_overlap)
    ep_comm_overlap: bool = False
    # routed tokens on the busiest expert-parallel rank over the mean (1 = balanced, as
    # force-balanced benchmark runs route; real routing is uneven): every rank waits for
    # the busiest at the combine, so its expert section and all-to-alls set the pace
    moe_imbalance: float = 1.0
    # an interleaved pipeline sends activations between chunks while the next chunk
    # computes (Megatron's overlap_p2p_comm: on by default since 2024, and in NeMo and
    # Megatron Bridge recipes; before, the --overlap-p2p-communication flag was off unless
    # set). Non-interleaved 1F1B waits on its sends either way (Megatron runs overlap only
    # the interleaved schedule); DualPipe's paired chunks overlap them by design
    pp_comm_overlap: bool = True
    # each tensor-parallel rank sends only its 1/TP share of a stage's activations and the
    # receiving ranks all-gather them over NVLink (Megatron-LM's scatter/gather optimisation,
    # SC21 section 4.1, default in its pre-Megatron-Core pipeline code); with sequence
    # parallelism the activations are split that way anyway
    pp_scatter_gather: bool = False
    # the embedding and the loss count as a layer each in the pipeline split: the first and
    # last stages hold one transformer layer fewer (Megatron's account_for_embedding_ and
    # account_for_loss_in_pipeline_split)
    pp_edge_layers: bool = False
    # an explicit pipeline layout in Megatron-Core's notation (--pipeline-model-parallel-
    # layout, e.g. "Et*4|(t*4|)*14tmL"; estimate/pipeline_layout.py): what each virtual stage
    # holds; "" = the even split above
    pp_layout: str = ""
    # the pipeline schedule (PP_SCHEDULES): "1f1b" (interleaved with vpp > 1), the zero-
    # bubble "zb1p", DeepSeek's "dualpipe" or its V-shaped half "dualpipev" (vpp 2)
    pp_schedule: str = "1f1b"
    # multi-token-prediction blocks trained beside the model (Megatron --mtp-num-layers;
    # DeepSeek-V3 trains with one): each a layer, a projection and a pass through the shared
    # head, on the last pipeline stage unless ``pp_layout`` places it
    mtp_layers: int = 0
    # the MTP depths run one block, its weights shared (Megatron-Core's
    # --mtp-use-repeated-layer, as Nemotron 3 Super trains its two): parameters, gradients
    # and optimizer state held once, the compute of every depth
    mtp_shared_weights: bool = False
    fused_attention: bool = True  # FlashAttention-style; False = scores materialised
    # the fused attention kernel: "native" (the GPU generation's own: FlashAttention-2 on
    # Ampere and Ada, FlashAttention-3 or cuDNN on Hopper and datacenter Blackwell),
    # "ampere" (written for Ampere: on Hopper and datacenter Blackwell it keeps
    # Efficiency.attention_ampere_kernel of the native speed) or "triton" (2023's Triton
    # flash attention: Efficiency.attention_triton_kernel of "ampere"); see ATTENTION_KERNELS
    attention_kernel: str = "native"
    # fused attention in FP8, forward and backward (Transformer Engine's FP8 dot-product
    # attention, NVTE_FP8_DPA; MLPerf's FP8_DPA): at the FP8 peak (attention_efficiency)
    fp8_attention: bool = False
    # its kernel where measured (perf/fp8_attention.py FP8_ATTENTION_SCALINGS): "tensor",
    # per-tensor scales, or "mxfp8", an MXFP8 recipe's own block-scaled attention; "" (the
    # default) the recipe's: mxfp8 under fp8_recipe "mxfp8", else tensor (NVFP4 runs pin
    # attention to current scaling)
    fp8_attention_scaling: str = ""
    # with --precision fp8, how the GEMM operands are scaled (FP8_RECIPES): "tensor", one
    # scale per tensor (delayed or current scaling), or "mxfp8", one per 32 elements
    fp8_recipe: str = "tensor"
    recompute: Recompute = Recompute.NONE
    # with selective recomputation, the modules recomputed (Megatron-Core's
    # recompute_modules; estimate/recompute.py); () = the attention core
    recompute_modules: tuple[str, ...] = ()
    # with full recomputation, only the first this many layers of each pipeline stage's
    # model chunk are recomputed, the others keep their activations (Megatron's
    # --recompute-method block --recompute-num-layers N); 0 = every layer
    recompute_layers: int = 0
    precision: Precision = Precision.BF16
    # under a low-precision recipe, how many of the model's first and of its last layers
    # (a hybrid's blocks) run in BF16, weights and all (Megatron-Core's
    # --first-last-layers-bf16 with --num-layers-at-start-in-bf16 / -at-end-in-bf16)
    bf16_layers_start: int = 0
    bf16_layers_end: int = 0
    # the MTP blocks too (Megatron Bridge's keep_mtp_spec_in_bf16, as its Nemotron 3 Super
    # recipes set it)
    mtp_bf16: bool = False
    gpus_per_node: int = 8
    # what the framework keeps per parameter (``bytes_per_param``): FP8 weights (Megatron
    # fp8_param_gather), BF16 gradients (grad_reduce_in_fp32 off), or BF16 weights,
    # gradients and Adam moments with no FP32 master copy (PyTorch FSDP2 on a BF16 model)
    fp8_params: bool = False
    bf16_grads: bool = False
    bf16_optimizer: bool = False
    # activation offloading: the saved activations of this many layers go to CPU memory
    # after their forward pass and come back for the backward (Megatron-Core's
    # cpu_offloading_num_layers, activations only)
    offload_layers: int = 0
    # optimizer CPU offload (Megatron-Core's --optimizer-cpu-offload with
    # --optimizer-offload-fraction; the distributed optimizer): the Adam moments of this
    # share of the optimizer's elements on the CPU, updated there
    optimizer_offload: float = 0.0
    optimizer_offload_overlap: bool = False  # --overlap-cpu-optimizer-d2h-h2d
    # LoRA fine-tuning (estimate/lora.py): the model's weights frozen, adapters of this rank
    # trained beside the linear layers ``lora_modules`` names (() = all four, Megatron
    # Bridge's default); 0 = every weight trained
    lora_rank: int = 0
    lora_modules: tuple[str, ...] = ()
    # sequences packed from documents of about this many tokens, attention staying inside
    # each (Megatron's packed sequences, THD layout with cu_seqlens: fine-tuning sets such
    # as SQuAD); 0 = attention over the whole sequence, as pre-training runs
    packed_doc_len: int = 0

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def dp_replicas(self) -> Any:
        """Groups the DP x CP ranks form under hybrid sharding (``dp_shard``), each holding
        one sharded copy of the weights and optimizer states; 1 without it (an array of
        them where ``dp_shard`` is one: the advisor's hybrid variants, 0 where not hybrid)."""
        return where(self.dp_shard > 0, self.dp * self.cp // maximum(self.dp_shard, 1), 1)

    @property
    def param_bytes(self) -> BytesPerParam:
        """Bytes each parameter costs for weights, gradients and optimizer states."""
        return bytes_per_param(self.precision, fp8_params=self.fp8_params,
                               bf16_grads=self.bf16_grads,
                               bf16_optimizer=self.bf16_optimizer)

    @property
    def edge_layers(self) -> Any:
        """Layer slots the embedding and the loss take in the pipeline split: two with
        ``pp_edge_layers`` and more than one stage, else none."""
        return where(self.pp > 1, 2, 0) if self.pp_edge_layers else 0

    @property
    def expert_tp(self) -> Any:
        """GPUs each expert's width is split over (``etp``, or TP by default)."""
        return self.etp or self.tp

    @property
    def bf16_layers(self) -> tuple[int, int]:
        """How many of the first and of the last layers run in BF16."""
        return (self.bf16_layers_start, self.bf16_layers_end)

    @property
    def in_bf16(self) -> TrainingConfig:
        """This run as its BF16 layers run: outside the low-precision autocast, so with
        BF16 GEMMs, inputs, weights and attention."""
        return dataclasses.replace(self, precision=Precision.BF16, fp8_attention=False,
                                   fp8_params=False, bf16_layers_start=0, bf16_layers_end=0,
                                   mtp_bf16=False)

    @property
    def attention_fp8_kernel(self) -> str:
        """The FP8 attention kernel this run takes (``FP8_ATTENTION_SCALINGS``, named as the
        recipes are): the one asked for, else its recipe's (per-tensor for NVFP4, whose
        recipe field stays "tensor")."""
        return self.fp8_attention_scaling or self.fp8_recipe

    def ungraphed_expert_share(self, shape: TransformerShape) -> float:
        """The share of ``shape``'s expert blocks whose preceding block runs outside a CUDA
        graph, so that the host, launching it kernel by kernel, falls behind before the
        dropless dispatcher's sync (CUDA_GRAPH_SCOPES): 1 without graphs, 0 with
        ``cuda_graphs`` (attention graphed before every expert layer) or a scope holding the
        blocks before them all. In a hybrid model each expert block's own predecessor in
        ``hybrid_pattern`` decides (the first block has none graphed before it)."""
        scope = set(self.cuda_graph_scope)
        if self.cuda_graphs or scope & {"moe", "full_iteration"}:
            return 0.0
        graphed = {block for block, module in (("*", "attn"), ("M", "mamba"), ("-", "mlp"))
                   if module in scope}
        if not shape.is_hybrid:
            return 0.0 if "*" in graphed else 1.0
        pattern = shape.hybrid_pattern
        before = [pattern[i - 1] if i else "" for i, block in enumerate(pattern)
                  if block == "E"]
        return sum(block not in graphed for block in before) / len(before) if before else 1.0

    def layout(self, shape: TransformerShape) -> PipelineLayout | None:
        """The parsed ``pp_layout`` checked against ``shape`` and the run (for a hybrid
        model, ``hybrid_layout``: its pattern cut by the layout's '|', or split evenly over
        PP > 1 stages), or None. With BF16 layers (``bf16_layers``) the even split is
        written out (``even_layout``) so that each rank is costed with its own."""
        mixed = self.bf16_layers != (0, 0)
        # (the advisor's arrays hold one PP for a hybrid: its chunks are split by PP)
        if shape.is_hybrid and (self.pp_layout or np.max(self.pp) > 1 or mixed):
            return hybrid_layout(shape.hybrid_pattern, pp=self.pp, vpp=self.vpp,
                                 mtp_layers=self.mtp_layers, segments=self.pp_layout,
                                 bf16=self.bf16_layers)
        if not self.pp_layout and not mixed:
            return None
        text = self.pp_layout or even_layout(shape.layers, pp=self.pp, vpp=self.vpp,
                                             mtp_layers=self.mtp_layers,
                                             edge_layers=self.pp_edge_layers)
        return parse_pp_layout(text, pp=self.pp, vpp=self.vpp, layers=shape.layers,
                               dense_layers=shape.layers - shape.moe_layers,
                               mtp_layers=self.mtp_layers, bf16=self.bf16_layers)

    @property
    def attention_span(self) -> int:
        """Tokens a sequence's attention spans: a packed document's, or the sequence's."""
        return min(self.packed_doc_len, self.seq_len) if self.packed_doc_len else self.seq_len

    @property
    def adapted(self) -> tuple[str, ...]:
        """The linear layers that carry LoRA adapters (none without ``lora_rank``)."""
        if not self.lora_rank:
            return ()
        return self.lora_modules or DEFAULT_LORA_MODULES

    @property
    def recomputed(self) -> tuple[str, ...]:
        """The modules the recompute pass runs again under selective recomputation."""
        if self.recompute is not Recompute.SELECTIVE:
            return ()
        return self.recompute_modules or DEFAULT_MODULES

    def full_recompute_share(self, shape: TransformerShape) -> Any:
        """The share of each stage's layers that full recomputation recomputes: all of them,
        or ``recompute_layers`` of each model chunk's (layers + edge slots) / (PP x VPP),
        rounded up as the even split rounds (with an explicit layout, the same mean chunk);
        0 without full recomputation."""
        if self.recompute is not Recompute.FULL:
            return 0.0
        if not self.recompute_layers:
            return 1.0
        chunk = ceil((shape.layers + self.edge_layers) / (self.pp * self.vpp))
        return minimum(1.0, self.recompute_layers / chunk)

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per step (gradient accumulation steps)."""
        return self.global_batch // (self.dp * self.micro_batch)

    def _validate_dp_shard(self, shape: TransformerShape) -> None:
        """``dp_shard`` must split the DP x CP ranks (and a MoE model's expert-data-parallel
        ranks) into equal groups, under a ZeRO stage that shards something."""
        if self.outer_optimizer_sharding and (not self.dp_shard or self.zero != 3):
            raise GpuarchError("--outer-optimizer-sharding: shards the optimizer over the "
                               "replicas of hybrid sharding; needs --dp-shard and --zero 3, got "
                               f"--dp-shard {self.dp_shard} --zero {self.zero}")
        if not self.dp_shard:
            return
        if not isinstance(self.dp_shard, int) or isinstance(self.dp_shard, bool) \
                or self.dp_shard < 1:
            raise GpuarchError(f"--dp-shard: expected a whole number of GPUs >= 1, got "
                               f"{self.dp_shard!r}")
        if self.zero < 1:
            raise GpuarchError("--dp-shard: hybrid sharding needs a ZeRO stage that shards "
                               "(--zero 1, 2 or 3), got --zero 0")
        ranks = self.dp * self.cp
        if ranks % self.dp_shard:
            raise GpuarchError(
                f"--dp-shard: {self.dp_shard} does not divide the {ranks} data-parallel ranks "
                f"(DP {self.dp} x CP {self.cp}); give a divisor of {ranks}")
        if shape.is_moe:
            expert_ranks = self.tp * ranks // (self.expert_tp * self.ep)
            if expert_ranks % self.dp_replicas:
                raise GpuarchError(
                    f"--dp-shard: {self.dp_replicas} replicas (DP x CP {ranks} / "
                    f"{self.dp_shard}) do not divide the {expert_ranks} expert-data-parallel "
                    f"ranks (TP x DP x CP / (ETP x EP)); give a larger --dp-shard")

    def validate(self, shape: TransformerShape) -> None:
        """Raise an error naming the flag when the combination does not divide."""
        for name in ("gpus", "seq_len", "global_batch", "micro_batch", "tp", "pp", "cp", "ep",
                     "vpp", "gpus_per_node"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise GpuarchError(f"--{name.replace('_', '-')}: expected an integer >= 1, "
                                   f"got {value!r}")
        if self.seq_len > MAX_DIMENSION:
            raise GpuarchError(f"--seq-len: expected at most {MAX_DIMENSION:,} tokens (past "
                               f"any model's context), got {self.seq_len}")
        if self.recompute_modules:
            if self.recompute is not Recompute.SELECTIVE:
                raise GpuarchError("--recompute-modules: needs --recompute selective, got "
                                   f"--recompute {self.recompute.value}")
            check_recompute_modules(self.recompute_modules, shape)
        check_count("--recompute-layers", self.recompute_layers)
        check_count("--lora-rank", self.lora_rank)
        for flag, n in (("--bf16-layers-at-start", self.bf16_layers_start),
                        ("--bf16-layers-at-end", self.bf16_layers_end)):
            check_count(flag, n)
            if n and not self.precision.low_precision:
                raise GpuarchError(f"{flag}: layers run in BF16 beside a low-precision "
                                   "recipe; needs --precision fp8 or nvfp4, got --precision "
                                   f"{self.precision.value}")
        if sum(self.bf16_layers) > shape.layers:
            raise GpuarchError(
                f"--bf16-layers-at-start/--bf16-layers-at-end: {self.bf16_layers_start} + "
                f"{self.bf16_layers_end} layers in BF16, but the model has {shape.layers}")
        if self.fp8_attention and not self.precision.low_precision:
            raise GpuarchError("--fp8-attention: needs --precision fp8 or nvfp4 (FP8 "
                               "attention runs inside the FP8 autocast), got --precision "
                               f"{self.precision.value}")
        if self.fp8_attention_scaling:
            check_choice("--fp8-attention-scaling", self.fp8_attention_scaling,
                         FP8_ATTENTION_SCALINGS)
        check_choice("--fp8-recipe", self.fp8_recipe, FP8_RECIPES)
        if self.fp8_recipe != FP8_RECIPES[0] and self.precision is not Precision.FP8:
            raise GpuarchError("--fp8-recipe: needs --precision fp8, got --precision "
                               f"{self.precision.value}")
        if self.fp8_attention_scaling and not self.fp8_attention:
            raise GpuarchError("--fp8-attention-scaling: needs --fp8-attention")
        check_count("--packed-doc-len", self.packed_doc_len)
        if self.packed_doc_len > self.seq_len:
            raise GpuarchError(f"--packed-doc-len: expected at most --seq-len "
                               f"({self.seq_len:,}), got {self.packed_doc_len:,}")
        if self.lora_rank > shape.hidden:
            raise GpuarchError(f"--lora-rank: expected at most the hidden size "
                               f"({shape.hidden:,}), got {self.lora_rank}")
        if self.lora_modules:
            if not self.lora_rank:
                raise GpuarchError("--lora-modules: needs --lora-rank (the adapters' rank)")
            check_lora_modules(self.lora_modules)
        if self.dispatcher_wait_s is not None and not (
                isinstance(self.dispatcher_wait_s, int | float) and self.dispatcher_wait_s >= 0):
            got = (f"{from_si(self.dispatcher_wait_s, Unit.US):g}"
                   if isinstance(self.dispatcher_wait_s, int | float)
                   else repr(self.dispatcher_wait_s))
            raise GpuarchError("--dispatcher-wait-us: expected a number of microseconds >= 0, "
                               f"got {got}")
        if self.recompute_layers and self.recompute is not Recompute.FULL:
            raise GpuarchError("--recompute-layers: needs --recompute full, got --recompute "
                               f"{self.recompute.value}")
        if self.zero not in (0, 1, 2, 3):
            raise GpuarchError(f"--zero: expected 0, 1, 2 or 3, got {self.zero!r}")
        check_choice("--ep-dispatcher", self.ep_dispatcher, EP_DISPATCHERS)
        for module in self.cuda_graph_scope:
            check_choice("--cuda-graph-scope", module, CUDA_GRAPH_SCOPES)
        if self.cuda_graph_scope and self.cuda_graphs:
            raise GpuarchError("--cuda-graph-scope: give it or --cuda-graphs (the scope attn, "
                               "moe_router, moe_preprocess), not both")
        check_choice("--cp-comm-type", self.cp_comm_type, CP_COMM_TYPES)
        if self.cp_comm_type == "a2a" and self.cp > 1:
            # the all-to-all hands each rank whole heads: every tensor-parallel rank's query
            # and key/value heads (at least one, replicated where TP exceeds them) must split
            # evenly over the CP ranks
            core_kv, _ = attention_core_dims(shape)
            for label, count in (("heads", shape.heads), ("KV heads", core_kv)):
                local = max(1, count // self.tp)
                if local % self.cp:
                    raise GpuarchError(
                        f"--cp-comm-type a2a: the {label} on each tensor-parallel rank "
                        f"({count} / TP {self.tp}: {local}) do not divide over CP {self.cp};"
                        " use --cp-comm-type p2p or all_gather")
        check_choice("--expert-launches", self.expert_launches, EXPERT_LAUNCHES)
        check_choice("--attention-kernel", self.attention_kernel, ATTENTION_KERNELS)
        if self.fsdp_prefetch and self.zero != 3:
            raise GpuarchError(f"--fsdp-prefetch: needs --zero 3, got --zero {self.zero}")
        if not self.reshard_after_forward and self.zero != 3:
            raise GpuarchError("--no-reshard-after-forward: needs --zero 3, got --zero "
                               f"{self.zero}")
        model_parallel = self.tp * self.pp * self.cp
        if self.gpus % model_parallel:
            raise GpuarchError(
                f"--gpus: {self.gpus} is not divisible by TP x PP x CP = {self.tp} x {self.pp}"
                f" x {self.cp} = {model_parallel}")
        self._validate_dp_shard(shape)
        if self.global_batch % (self.dp * self.micro_batch):
            raise GpuarchError(
                f"--global-batch: {self.global_batch} is not divisible by DP x micro-batch = "
                f"{self.dp} x {self.micro_batch}")
        if not isinstance(self.mtp_layers, int) or not 0 <= self.mtp_layers <= shape.layers:
            raise GpuarchError(f"--mtp-layers: expected an integer from 0 to {shape.layers} "
                               f"(the model's layers), got {self.mtp_layers!r}")
        if self.mtp_shared_weights and not self.mtp_layers:
            raise GpuarchError("--mtp-shared-weights: needs --mtp-layers > 0")
        if self.mtp_bf16 and not (self.mtp_layers and self.precision.low_precision):
            raise GpuarchError("--mtp-bf16: needs --mtp-layers > 0 and --precision fp8 or "
                               f"nvfp4, got --mtp-layers {self.mtp_layers} and --precision "
                               f"{self.precision.value}")
        if self.pp_layout:
            if self.pp_edge_layers:
                raise GpuarchError("--pp-edge-layers: not with --pp-layout, which places the "
                                   "embedding and the loss itself")
            self.layout(shape)
        slots = shape.layers + self.edge_layers
        if slots < self.pp * self.vpp and not self.pp_layout:
            raise GpuarchError(f"--pp/--vpp: {shape.layers} layers cannot fill "
                               f"PP x VPP = {self.pp * self.vpp} stages"
                               + ("" if self.pp_edge_layers else
                                  " (--pp-edge-layers counts the embedding and the loss as "
                                  "a layer each)"))
        if self.vpp > 1 and self.pp == 1:
            raise GpuarchError("--vpp: interleaved stages need --pp > 1")
        self._check_schedule()
        if shape.heads % self.tp:
            raise GpuarchError(f"--tp: {self.tp} does not divide the {shape.heads} heads")
        if shape.d_ffn % self.tp:
            # a column-parallel MLP splits its hidden units evenly (Megatron-Core's and the
            # serving engines' linear layers refuse a width the TP size does not divide)
            raise GpuarchError(f"--tp: {self.tp} does not divide the MLP's {shape.d_ffn} "
                               "hidden units (--ffn-hidden)")
        if self.seq_len % self.cp:
            raise GpuarchError(f"--cp: {self.cp} does not divide --seq-len {self.seq_len}")
        if self.sequence_parallel and self.tp == 1:
            raise GpuarchError("--sequence-parallel needs --tp > 1")
        if self.fp8_params and self.precision is not Precision.FP8:
            raise GpuarchError(f"--fp8-params: needs --precision fp8, got --precision "
                               f"{self.precision.value}")
        if (self.bf16_grads or self.bf16_optimizer) and self.precision in (
                Precision.FP32, Precision.TF32):
            flag = "--bf16-optimizer" if self.bf16_optimizer else "--bf16-grads"
            raise GpuarchError(f"{flag}: needs a 16-bit or lower --precision, got "
                               f"{self.precision.value}")
        f = self.optimizer_offload
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 <= f <= 1:
            raise GpuarchError(f"--optimizer-offload: expected a fraction from 0 to 1, got "
                               f"{f!r}")
        if f and self.zero < 1:
            raise GpuarchError("--optimizer-offload: needs the distributed optimizer (--zero 1 "
                               f"or higher), got --zero {self.zero}")
        if self.optimizer_offload_overlap and not f:
            raise GpuarchError("--optimizer-offload-overlap: needs --optimizer-offload")
        if not isinstance(self.offload_layers, int) or self.offload_layers < 0:
            raise GpuarchError(f"--offload-layers: expected an integer >= 0, got "
                               f"{self.offload_layers!r}")
        if self.offload_layers:
            # Megatron-Core's own conditions for activation offloading
            if self.offload_layers >= shape.layers:
                raise GpuarchError(f"--offload-layers: {self.offload_layers} must be fewer "
                                   f"than the model's {shape.layers} layers")
            if self.pp > 1:
                raise GpuarchError(f"--offload-layers: activation offloading needs --pp 1, "
                                   f"got --pp {self.pp}")
            if self.recompute is not Recompute.NONE:
                raise GpuarchError("--offload-layers: activation offloading cannot be "
                                   f"combined with --recompute {self.recompute.value}")
        if not isinstance(self.etp, int) or self.etp < 0 or (self.etp and self.tp % self.etp):
            raise GpuarchError(f"--etp: expected a divisor of --tp {self.tp} (or 0 for TP), "
                               f"got {self.etp!r}")
        shape.check_expert_parallel(self.ep, self.moe_imbalance)
        if self.ep > 1 and (self.tp * self.dp * self.cp) % (self.ep * self.expert_tp):
            if self.etp:
                raise GpuarchError(
                    f"--ep: EP x ETP = {self.ep * self.expert_tp} must divide TP x DP x "
                    f"CP = {self.tp * self.dp * self.cp}")
            raise GpuarchError(f"--ep: {self.ep} must divide DP x CP = "
                               f"{self.dp * self.cp} (or give --etp 1 to lay experts "
                               "over the tensor-parallel ranks too)")
        if shape.is_hybrid:
            self._check_hybrid(shape)

    def _check_hybrid(self, shape: TransformerShape) -> None:
        """What a hybrid Mamba-2 model's blocks are not costed under: LoRA adapters,
        embedding and loss slots in the pipeline split (``--pp-edge-layers``; Megatron-Core
        splits a hybrid's blocks alone, ``hybrid_layout``, which checks the stages); and a TP
        (with context parallelism, TP x CP, over which the Mamba-2 blocks split their heads)
        that does not split the Mamba-2 heads and B/C groups evenly."""
        if self.lora_rank:
            raise GpuarchError(
                f"--lora-rank: {shape.name} is a hybrid Mamba-2 model, whose training is "
                f"modelled only with --lora-rank 0 so far; got {self.lora_rank}")
        if self.pp_edge_layers:
            raise GpuarchError(
                f"--pp-edge-layers: {shape.name} is a hybrid Mamba-2 model, whose pipeline "
                "stages hold its blocks alone (Megatron-Core's hybrid split; --pp-layout "
                "takes the pattern cut by '|' into stages)")
        if not self.pp_layout and np.max(self.pp) > 1:  # (validate checks a layout given)
            self.layout(shape)
        flag, what = ("--tp", str(self.tp)) if self.cp == 1 else \
            ("--cp", f"TP x CP = {self.tp} x {self.cp}")
        shape.check_mamba_split(self.tp * self.cp, flag, what)

    def _check_schedule(self) -> None:
        """The pipeline schedule's own conditions (DeepSeek's DualPipe asserts an even
        number of ranks and of micro-batches, at least twice the ranks; DualPipeV at least
        twice the ranks)."""
        check_choice("--pp-schedule", self.pp_schedule, PP_SCHEDULES)
        if self.pp_schedule == "1f1b":
            return
        flag = f"--pp-schedule {self.pp_schedule}"
        if self.pp == 1:
            raise GpuarchError(f"{flag}: a pipeline schedule needs --pp > 1")
        chunks = schedule_chunks(self.pp_schedule)
        if self.vpp != chunks:
            raise GpuarchError(f"{flag}: needs --vpp {chunks} ("
                               + ("its V shape puts two model chunks on each GPU"
                                  if chunks == 2 else "one model chunk per GPU; "
                                  "interleaving is 1f1b's") + f"), got --vpp {self.vpp}")
        if self.pp_schedule == "zb1p":
            return
        if self.pp_schedule == "dualpipe" and self.pp % 2:
            raise GpuarchError(f"{flag}: needs an even --pp (micro-batches enter from both "
                               f"ends and meet in the middle), got --pp {self.pp}")
        m = self.micro_batches
        if m < 2 * self.pp or (self.pp_schedule == "dualpipe" and m % 2):
            even = " and even" if self.pp_schedule == "dualpipe" else ""
            raise GpuarchError(
                f"{flag}: needs at least 2 x PP = {2 * self.pp}{even} micro-batches per "
                f"pipeline, got {m} (--global-batch / (DP x --micro-batch) = "
                f"{self.global_batch} / ({self.dp} x {self.micro_batch}))")


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


@dataclass(frozen=True)
class _Pass:
    """Seconds of one micro-batch on one stage, split by kind."""

    compute: Num = 0.0
    comm: Num = 0.0
    overhead: Num = 0.0  # fixed host time (launches, the MoE dispatcher's synchronisation)
    floor: Num = 0.0  # what a short layer pass falls short of ``layer_pass_floor_s`` by

    def __add__(self, other: _Pass) -> _Pass:
        return _Pass(self.compute + other.compute, self.comm + other.comm,
                     self.overhead + other.overhead, self.floor + other.floor)

    def scale(self, k: Num) -> _Pass:
        return _Pass(self.compute * k, self.comm * k, self.overhead * k, self.floor * k)

    @property
    def total(self) -> Num:
        return self.compute + self.comm + self.overhead + self.floor



def _nccl(kind: Collective, size_bytes: Num, group: Group, eff: Efficiency,
          dedupe_copies: Num = 0, routing_groups: tuple[int, int] = (0, 0)) -> Num:
    """A training collective's time: NCCL's latency model (base, per-hop latency by fabric,
    fastest protocol), which training frameworks run their collectives on."""
    return collective_time(kind, size_bytes, group, eff, nccl_protocols(), dedupe_copies,
                           routing_groups)

def ranks_per_node(size: Num, inner: Num, gpus_per_node: int) -> Num:
    """How many of a communicator's ``size`` ranks, neighbours ``inner`` ranks apart, share
    a node of ``gpus_per_node`` GPUs (Megatron's rank order fills nodes in turn)."""
    return where(inner < gpus_per_node, maximum(1, minimum(size, gpus_per_node // inner)), 1)


def _group(size: Num, inner: Num, cfg: TrainingConfig, intra: Link, inter: Link | None
           ) -> Group:
    """A communicator of ``size`` ranks whose neighbours are ``inner`` ranks apart."""
    return Group(size, ranks_per_node(size, inner, cfg.gpus_per_node), intra, inter)


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


def _local_experts(s: TransformerShape, cfg: TrainingConfig) -> Num:
    """Routed experts each GPU holds (at least one)."""
    return maximum(1, s.experts // cfg.ep)


PERMUTATION_PASSES = {"alltoall": (1, 3), "deepep": (1, 1)}
"""Passes over a hidden-size row per routed token copy (each a read and a write) that an
expert layer's forward makes in HBM to put tokens in expert order and back, by dispatcher, as
(one local expert, several): Megatron-Core's all-to-all dispatcher writes each copy once
before the all-to-all (fused permute) and reads it once after (fused unpermute), and with
several local experts sorts the received chunks by expert and back (``sort_chunks_by_idxs``,
one pass each way); the DeepEP and HybridEP dispatchers deliver each token once per
destination GPU and permute it locally once on the way in and once on the way out, with no
sort (megatron/core/transformer/moe/token_dispatcher.py; Transformer Engine's permutation
kernels read a source row once and write it to each routed position; NVIDIA's "Optimizing
DeepSeek-V3 Training Performance on NVIDIA GB200 NVL72", Megatron-LM
docs/discussions/deepseek-v3-gb200-optimization, sections 2.2 and 2.5). The all-to-all's own
traffic is the expert-parallel communication, charged apart."""


def dispatch_permutation(routed: Num, hidden: Num, element: float, dispatcher: str,
                         local_experts: Num) -> Elementwise:
    """HBM traffic of an expert layer's token permutations for ``routed`` copies of
    ``hidden``-wide rows of ``element`` bytes (``PERMUTATION_PASSES``)."""
    one, several = PERMUTATION_PASSES[dispatcher]
    passes = where(local_experts > 1, several, one)
    return Elementwise(2.0 * passes * routed * hidden * element, name="moe_permute")


def _attention_ops(s: TransformerShape, cfg: TrainingConfig, tokens: Num, window: int
                   ) -> list[Op]:
    """An attention block's forward operators on one GPU: projections and core."""
    t = cfg.tp
    seq = cfg.seq_len // cfg.cp
    core_kv, d = attention_core_dims(s)
    heads = s.heads // t
    kv = maximum(1, core_kv // t)
    projections = attention_projections(s, t)
    ops: list[Op] = [Gemm(tokens, n, k, name=name) for name, n, k in projections[:-1]]
    if cfg.fused_attention:
        # with context parallelism each GPU does 1/CP of the (load-balanced) causal work,
        # in calls over its chunk around a ring (p2p) or over the whole sequence (a2a's
        # head split, all_gather's gathered keys); packed documents are so many short
        # sequences to the kernel
        ops.append(fused_attention(cfg, heads, kv, d, window, s.chunks(window)))
    else:
        # unfused attention (Megatron-LM before FlashAttention): the full score matrix is
        # computed (masked, not skipped), softmaxed and dropped out in memory
        scores = 1.0 * cfg.micro_batch * heads * seq * cfg.seq_len
        ops += [Gemm(seq, cfg.seq_len, d, batch=cfg.micro_batch * heads, name="scores"),
                Elementwise(UNFUSED_SOFTMAX_BYTES * scores, name="softmax"),
                Gemm(seq, d, cfg.seq_len, batch=cfg.micro_batch * heads, name="context")]
    name, n, k = projections[-1]
    ops.append(Gemm(tokens, n, k, name=name))
    return ops


def _ffn_ops(s: TransformerShape, cfg: TrainingConfig, moe: bool, tokens: Num
             ) -> tuple[list[Op], Num]:
    """A dense MLP's or an expert block's forward operators on one GPU, and the elements
    its activation function reads (0 where a fused grouped MLP applies it)."""
    t = cfg.tp
    element = cfg.precision.activation_bytes
    ops: list[Op] = []
    if moe:
        # an expert's width is split over ETP GPUs, which share the tokens of ETP of the TP
        # group's sequence-parallel shards (all of them when ETP = TP)
        e = cfg.expert_tp
        routed = tokens * e // t * s.experts_per_token
        width = s.d_expert
        local_experts = _local_experts(s, cfg)
        per_expert = maximum(1, routed * cfg.ep // s.experts)
        up = 2 * width if s.ffn_kind.gated else width
        outer = s.expert_width  # what the routed experts read and write
        ops.append(Gemm(tokens, s.experts, s.hidden, name="router"))
        if s.moe_latent:
            # latent experts: each rank projects its own (sequence-parallel) tokens to the
            # latent width before dispatch and back after the combine, weights duplicated
            # over TP (Megatron-Core's fc1_latent_proj / fc2_latent_proj)
            ops += [Gemm(tokens // t, s.moe_latent, s.hidden, name="moe_latent_down"),
                    Gemm(tokens // t, s.hidden, s.moe_latent, name="moe_latent_up")]
        ops += [
            Gemm(per_expert, up // e, outer, batch=local_experts,
                 name="grouped_expert_up"),
            Gemm(per_expert, outer, width // e, batch=local_experts,
                 name="grouped_expert_down"),
        ]
        if s.shared_experts:
            shared = width * s.shared_experts
            ops += [Gemm(tokens, (2 * shared if s.ffn_kind.gated else shared) // t,
                         s.hidden, name="shared_up"),
                    Gemm(tokens, s.hidden, shared // t, name="shared_down")]
        ops.append(dispatch_permutation(routed, outer, element, cfg.ep_dispatcher,
                                        local_experts))
        # a fused grouped MLP applies the routed experts' activation in its epilogue
        if cfg.expert_launches == "fused-mlp":
            return ops, 0
        return ops + _unfused_expert_extras(s, routed, up // e, element), routed * width // e
    f = s.d_ffn
    up = 2 * f if s.ffn_kind.gated else f
    return [Gemm(tokens, up // t, s.hidden, name="mlp_up"),
            Gemm(tokens, s.hidden, f // t, name="mlp_down")], tokens * f // t


FP8_RECIPES = FP8_ATTENTION_SCALINGS
"""How an FP8 run scales its GEMM operands (Transformer Engine's recipes), named as the
attention kernel each takes by default (``TrainingConfig.attention_fp8_kernel``): "tensor",
one scale per tensor (DelayedScaling, Float8CurrentScaling), or "mxfp8", one per 32 elements
along the reduction (MXFP8BlockScaling)."""


def quantized_copies(cfg: TrainingConfig, tensor_core_generation: int | None) -> int:
    """FP8/FP4 copies written when a GEMM operand is cast in training: two, the row-wise one
    the GEMM takes and the column-wise (transposed) one its gradient GEMM takes, where the
    format's scales run along the reduction (MXFP8, NVFP4) or the GPU runs FP8 GEMMs only
    with both operands K-major (Hopper and Ada: cuBLASLt's "TN" requirement, for which
    Transformer Engine keeps a transposed copy); one for per-tensor FP8 on Blackwell, whose
    FP8 GEMMs take any layout (Transformer Engine's nvte_is_non_tn_fp8_gemm_supported)."""
    if cfg.precision is Precision.NVFP4 or cfg.fp8_recipe == "mxfp8":
        return 2
    return 1 if (tensor_core_generation or 0) >= BLACKWELL_TENSOR_CORES else 2


def _layer_ops(s: TransformerShape, cfg: TrainingConfig, moe: bool, window: int = 0,
               block: str = "", tensor_core_generation: int | None = None
               ) -> tuple[list[Op], float]:
    """Forward operators of one layer (an expert layer if ``moe``, else a dense one; with
    sliding-window attention if ``window``) on one GPU, and the tokens each GPU holds. A
    hybrid model's ``block`` (``HYBRID_BLOCKS``: "M" Mamba-2, "*" attention, "-" MLP, "E"
    experts) is one part of a layer with one norm and one residual add."""
    t = cfg.tp
    seq = cfg.seq_len // cfg.cp
    tokens = cfg.micro_batch * seq
    element = cfg.precision.activation_bytes
    ops: list[Op] = []
    if block in ("", "*"):
        ops += _attention_ops(s, cfg, tokens, window)
    inner: Num = 0
    fused_mlp = moe and cfg.expert_launches == "fused-mlp"
    if block == "M":
        ops += mamba_ops(s, t, tokens, element, seq)
    elif block != "*":
        ffn, inner = _ffn_ops(s, cfg, moe, tokens)
        ops += ffn
    # the norms (two a layer, four with sandwich norms, one a hybrid block) and residual
    # adds (read 2, write 1; one a block), and the activation function
    norm_tokens = tokens // t if cfg.sequence_parallel else tokens
    hidden_bytes = 1.0 * norm_tokens * s.hidden * element
    norms, residuals = (s.layer_norms, 2) if not block else (1, 1)
    ops += [Elementwise(norms * 2 * hidden_bytes, name="norms"),
            Elementwise(residuals * 3 * hidden_bytes, name="residuals")]
    if block in ("", "-", "E"):
        ops.append(Elementwise(3.0 * inner * element, name="activation"))
    if cfg.precision.low_precision:
        # each GEMM operand is cast (read 16-bit, write the narrow format: once, or row-wise
        # and column-wise, quantized_copies) before the GEMM, but a fused grouped MLP's up
        # projection writes the down projection's input in it, and frozen weights held in
        # FP8 (LoRA with fp8_params) are never cast again
        frozen_fp8 = bool(cfg.lora_rank) and cfg.fp8_params

        copies = quantized_copies(cfg, tensor_core_generation)
        narrow = cfg.precision.bytes

        def cast_bytes(op: Gemm) -> Num:
            inputs = 0 if fused_mlp and op.name == "grouped_expert_down" else op.m * op.k
            weights = 0 if frozen_fp8 else op.k * op.n
            return (2.0 + copies * narrow) * inputs + (2.0 + narrow) * weights

        cast = sum(cast_bytes(op) * op.batch for op in ops if isinstance(op, Gemm))
        ops.append(Elementwise(cast, name=f"{cfg.precision.value}_cast"))
    if cfg.fp8_attention and block in ("", "*"):
        # Transformer Engine's FP8 attention quantizes the kernel's inputs (read 16 bits,
        # write 8): the query, key and value before the forward, the output and its
        # gradient before the backward
        kv, d = attention_core_dims(s)
        per_token = (Precision.BF16.bytes + Precision.FP8.bytes) * tokens * d / t
        ops.append(Elementwise(per_token * (s.heads + 2 * kv), name="fp8_attention_cast",
                               backward=Elementwise(per_token * 2 * s.heads,
                                                    name="fp8_attention_cast")))
    if cfg.lora_rank:
        ops += lora_adapter_ops(ops, cfg.lora_rank, adapted_gemms(s, cfg.adapted))
    return ops, 1.0 * tokens


LORA_ELEMENT = Precision.BF16.bytes
"""Bytes per element of LoRA's adapters and their inputs and outputs: they run in 16 bits
whatever the frozen layers' precision (Transformer Engine's FP8 autocast covers its own
modules; the adapters are plain 16-bit layers beside them)."""


def lora_adapter_ops(ops: list[Op], rank: int, adapted: frozenset[str]) -> list[Op]:
    """The forward operators of the LoRA adapters beside the GEMMs of ``ops`` named in
    ``adapted``: for a frozen C[m, n] = A[m, k] W[k, n] on this GPU (its tensor-parallel
    shard, or a routed expert's batch) the down GEMM (k -> rank), the up GEMM (rank -> n)
    and the add of their output to C (read two, write one). They are thin and memory-bound:
    the input read again and the output written twice cost more than their FLOPs."""
    out: list[Op] = []
    for op in ops:
        if not (isinstance(op, Gemm) and op.name in adapted):
            continue
        # named after the frozen GEMM (a routed expert's keep its prefix, so the busiest
        # rank takes longer there too, and a recomputed module repeats its adapters)
        down, up, add = (f"{op.name}.{part}" for part in LORA_OPS)
        out += [Gemm(op.m, rank, op.k, batch=op.batch, name=down,
                     weight_element=LORA_ELEMENT, element=LORA_ELEMENT),
                Gemm(op.m, op.n, rank, batch=op.batch, name=up,
                     weight_element=LORA_ELEMENT, element=LORA_ELEMENT),
                Elementwise(3.0 * op.m * op.n * op.batch * LORA_ELEMENT, name=add)]
    return out


ROUTED_OPS = ("moe_permute", "activation", "moe_glu_clamp", "moe_expert_bias")
"""An expert layer's memory-bound operators over its routed tokens (besides the grouped
GEMMs), which take longer on the busiest expert-parallel rank (``moe_imbalance``)."""


def _unfused_expert_extras(s: TransformerShape, routed: Num, up: Num, element: float
                           ) -> list[Op]:
    """What Megatron-Core's unfused expert layer does beyond the grouped GEMMs and the
    activation for GPT-OSS-style experts (megatron/core/fusions/fused_bias_geglu.py and
    transformer/moe/experts.py): a clamped GLU splits the up projection's output, clamps
    both halves and concatenates them again before the fused activation (one read and
    write of it); expert biases on the down projection are added per local expert with the
    routing weight, concatenated and cast (``TEGroupedMLP._apply_bias``: three read-and-write
    passes over the output rows). A fused grouped MLP does both in its kernels."""
    ops: list[Op] = []
    if s.glu_limit:
        ops.append(Elementwise(2.0 * routed * up * element, name="moe_glu_clamp"))
    if s.bias:
        ops.append(Elementwise(3 * 2.0 * routed * s.expert_width * element,
                               name="moe_expert_bias"))
    return ops


@dataclass(frozen=True)
class _Layer:
    """One layer's forward, backward and recompute passes for one micro-batch, the forward
    FLOPs it executes (hardware FLOPs, before recomputation) and, when asked for, its compute
    and exposed communication seconds by part (``COMPUTE_PARTS``, ``COMMUNICATION_PARTS``)."""

    fwd: _Pass
    bwd: _Pass
    rec: _Pass
    flops: Num
    parts: dict[str, Num]
    # compute seconds of the weight-gradient GEMMs inside ``bwd`` (what a zero-bubble
    # schedule defers: the W of ``pipeline_bubble``)
    wgrad: Num = 0.0
    # the expert all-to-all seconds that pairing this micro-batch's passes with another's
    # hid (``ep_comm_overlap``): a step's first forward and last backward have no partner
    a2a_hidden: Num = 0.0

    @property
    def passes(self) -> _Pass:
        return self.fwd + self.bwd + self.rec


def _mix(layers: list[tuple[Num, _Layer]]) -> _Layer:
    """The weighted mean of layers (weights adding up to 1)."""
    if len(layers) == 1:
        return layers[0][1]
    fwd, bwd, rec, flops, wgrad, hidden = _Pass(), _Pass(), _Pass(), 0.0, 0.0, 0.0
    parts: dict[str, Num] = {}
    for w, one in layers:
        fwd, bwd, rec = fwd + one.fwd.scale(w), bwd + one.bwd.scale(w), rec + one.rec.scale(w)
        flops = flops + one.flops * w
        wgrad = wgrad + one.wgrad * w
        hidden = hidden + one.a2a_hidden * w
        for key, value in one.parts.items():
            parts[key] = parts.get(key, 0.0) + w * value
    return _Layer(fwd, bwd, rec, flops, parts, wgrad, hidden)


@dataclass(frozen=True)
class LayerCosts:
    """The layers' costing of a set of configurations (``_layer_times``'s kinds), which does
    not depend on their pipeline split or ZeRO stage; ``take`` picks a run of them."""

    kinds: dict[Any, _Layer]

    def take(self, part: slice | np.ndarray) -> LayerCosts:
        """The configurations ``part`` (a slice or an index array) picks, in their order."""
        def cut(x: Num) -> Num:
            return x[part] if isinstance(x, np.ndarray) and x.ndim else x

        def cut_pass(p: _Pass) -> _Pass:
            return _Pass(cut(p.compute), cut(p.comm), cut(p.overhead), cut(p.floor))

        return LayerCosts({
            kind: _Layer(cut_pass(one.fwd), cut_pass(one.bwd), cut_pass(one.rec),
                         cut(one.flops), {k: cut(v) for k, v in one.parts.items()},
                         cut(one.wgrad), cut(one.a2a_hidden))
            for kind, one in self.kinds.items()})


def layer_costs(shape: TransformerShape, device: Device, intra: Link, inter: Link | None,
                cfg: TrainingConfig, eff: Efficiency) -> LayerCosts:
    """``evaluate_training``'s costing of ``cfg``'s layers, for configurations along one axis
    whose pipeline splits may differ (the split does not enter it; without
    ``recompute_layers``, whose share of a chunk does)."""
    return LayerCosts(_layer_times(shape, cfg, device, eff,
                                   *_layer_groups(cfg, intra, inter)))


def _layer_groups(cfg: TrainingConfig, intra: Link, inter: Link | None
                  ) -> tuple[Group, Group, Group]:
    """A layer's tensor-, context- and expert-parallel communicators. Expert-parallel ranks
    are ETP apart in Megatron's expert grid (TP x CP apart when ETP is TP's default, as
    before CP folded into it)."""
    ep_stride = cfg.tp * cfg.cp if not cfg.etp else cfg.etp
    return (_group(cfg.tp, 1, cfg, intra, inter), _group(cfg.cp, cfg.tp, cfg, intra, inter),
            _group(cfg.ep, ep_stride, cfg, intra, inter))


def _layer_times(s: TransformerShape, cfg: TrainingConfig, device: Device, eff: Efficiency,
                 tp_group: Group, cp_group: Group, ep_group: Group, with_parts: bool = False
                 ) -> dict[Any, _Layer]:
    """Each kind of layer the model has (True: expert layer, False: dense), its sliding-
    window layers taken as spread evenly over both kinds; a hybrid model's blocks by kind
    (their ``HYBRID_BLOCKS`` letter)."""
    eff = expert_efficiency(eff, s)
    if s.is_hybrid:
        blocks: dict[Any, _Layer] = {}
        for block in sorted(set(s.hybrid_pattern)):
            mine: dict[str, Num] = {}
            f, b, r, fl, w, h = _one_layer_time(s, cfg, device, eff, tp_group, cp_group,
                                                ep_group, block == "E", 0,
                                                mine if with_parts else None, block)
            blocks[block] = _Layer(f, b, r, fl, mine, w, h)
        return blocks
    kinds: dict[bool, list[tuple[Num, _Layer]]] = {}
    for moe, window, share in s.layer_kinds():
        own: dict[str, Num] = {}
        f, b, r, fl, w, h = _one_layer_time(s, cfg, device, eff, tp_group, cp_group,
                                            ep_group, moe, window,
                                            own if with_parts else None)
        kinds.setdefault(moe, []).append((share, _Layer(f, b, r, fl, own, w, h)))
    return {moe: _mix([(w / sum(x for x, _ in items), one) for w, one in items])
            for moe, items in kinds.items()}


def _average_layer(s: TransformerShape, kinds: dict[Any, _Layer]) -> _Layer:
    """The model's average layer: its expert and dense layers (a hybrid model's blocks)
    weighted by their share."""
    if s.is_hybrid:
        return _mix([(s.hybrid_pattern.count(block) / s.layers, one)
                     for block, one in kinds.items()])
    moe_share = s.moe_layers / s.layers
    return _mix([(moe_share if moe else 1 - moe_share, one) for moe, one in kinds.items()])


def schedule_runs(schedule: str, pp: np.ndarray, vpp: np.ndarray, micro_batches: np.ndarray
                  ) -> np.ndarray:
    """Which of the advisor's layouts (arrays) can run a pipeline schedule: the conditions
    ``TrainingConfig._check_schedule`` refuses with a message, here as a mask (a test holds
    the two together); a layout without a pipeline runs without one, whatever the
    schedule."""
    if schedule == "1f1b":
        return np.ones_like(pp, dtype=bool)
    runs = (vpp == schedule_chunks(schedule))
    if schedule != "zb1p":
        runs &= micro_batches >= 2 * pp
    if schedule == "dualpipe":
        runs &= (pp % 2 == 0) & (micro_batches % 2 == 0)
    plain = np.logical_and(pp == 1, vpp == 1)
    return np.asarray(np.logical_or(plain, np.logical_and(pp > 1, runs)))


def pipeline_bubble(schedule: str, pp: Num, vpp: Num, stage_s: Num, forward_s: Num,
                    wgrad_s: Num) -> Num:
    """Seconds a step's pipeline leaves each GPU idle under ``schedule`` (PP_SCHEDULES),
    for a stage's time per micro-batch ``stage_s`` (forward, backward, recomputation and
    their exposed communication), its forward part and its weight-gradient GEMMs (W). The
    full backward B is the rest of the stage's time."""
    if schedule == "1f1b":
        return (pp - 1) / vpp * stage_s
    if schedule == "zb1p":
        return (pp - 1) * maximum(0.0, stage_s - 2 * wgrad_s)
    backward_s = stage_s - forward_s
    pair = maximum(0.0, stage_s + backward_s - 3 * wgrad_s)
    if schedule == "dualpipe":
        return maximum(0.0, pp / 2 - 1) * pair  # nothing without a pipeline (PP 1)
    # dualpipev: 2 x PP stages of half a GPU's layers each
    return (pp - 1) * pair / 2


def dispatcher_host_time(product: Product, cfg: TrainingConfig, eff: Efficiency,
                         shape: TransformerShape | None = None) -> float:
    """Fixed time per expert layer per forward pass that a dropless MoE dispatcher waits on
    its host: the per-expert token counts go to the CPU before buffers can be sized (the
    backward reuses them). Over NVLink-C2C
    to a Grace CPU (a superchip, ``Product.grace_host``) it is ``moe_layer_overhead_c2c_s``,
    over PCIe ``moe_layer_overhead_s``; token-drop routing (``moe_token_drop``) needs no
    wait, and with partial CUDA graphs (``cuda_graphs``) the attention, router and
    preprocessing kernels before the sync replay from one graph launch instead of many
    (docs/performance-model.md: the 10% that NVIDIA measured them to gain on DeepSeek-V3
    on GB200 is what this wait costs there). Those fitted waits are Megatron-Core's; a
    framework whose own wait is measured gives it as ``dispatcher_wait_s``. Given the
    ``shape``, the wait is averaged over its expert blocks, those after a graphed block
    paying none (``TrainingConfig.ungraphed_expert_share``, for a ``cuda_graph_scope``)."""
    if cfg.moe_token_drop or cfg.cuda_graphs:
        return 0.0
    if cfg.dispatcher_wait_s is not None:
        wait = cfg.dispatcher_wait_s
    else:
        wait = eff.moe_layer_overhead_c2c_s if product.grace_host else eff.moe_layer_overhead_s
    return wait if shape is None else wait * cfg.ungraphed_expert_share(shape)


EXPERT_LAUNCHES_PER_EXPERT = {"forward": (2, 2), "backward": (4, 2)}
"""Kernels launched per local expert in each pass of an expert layer, as (GEMMs,
quantizations in FP8/FP4): Transformer Engine's grouped linear layers issue one cuBLASLt
GEMM per expert on several streams (NVIDIA's Megatron Core MoE report, arXiv:2603.07685,
section 4.3.2, implementation (i)): FC1 and FC2 forward, their data and weight gradients
backward; in low precision each expert's inputs to FC1 and FC2 (forward) and its output
gradients (backward) are quantized one expert at a time."""


def expert_host_floor(local_experts: Num, low_precision: bool, eff: Efficiency
                      ) -> tuple[Num, Num]:
    """Host seconds to launch the per-expert kernels of one expert layer, forward and
    backward: the expert section (between dispatch and combine, which CUDA graphs cannot
    capture) takes at least this long, however fast the GPU runs its small GEMMs."""
    low = 1 if low_precision else 0
    forward, backward = (eff.moe_expert_launch_s * local_experts * (gemms + low * quants)
                         for gemms, quants in EXPERT_LAUNCHES_PER_EXPERT.values())
    return forward, backward


def sequence_parallel_tp_comm(activation: Num, precision: Precision, group: Group,
                              eff: Efficiency, column_gemms: tuple[Num, ...]
                              ) -> tuple[Num, Num]:
    """Exposed tensor-parallel seconds of one layer's forward and backward pass under
    sequence parallelism without userbuffers overlap, for ``activation`` bytes of hidden
    states per GPU (in the precision's activation format, 16 bits for FP8 and NVFP4
    training) and the forward times of the column-parallel GEMMs of each block that gathers
    its input: attention and MLP, or one entry for both where they share the gathered input
    and one reduce-scatter (parallel attention).

    Each block all-gathers its input before the column-parallel GEMM and reduce-scatters
    the row-parallel GEMM's output (16-bit) in the forward. In the backward the row-parallel
    GEMM first all-gathers the output gradient, while the column-parallel GEMM all-gathers its
    saved input shard again (asynchronously, behind its data-gradient GEMM) and
    reduce-scatters the data gradient (asynchronously, behind its weight-gradient GEMM, which
    takes as long as the forward GEMM): only what outlasts those GEMMs is exposed
    (Megatron-Core tensor_parallel/layers.py,
    LinearWithGradAccumulationAndAsyncCommunication.backward; Transformer Engine's modules
    likewise). With FP8 or NVFP4, Transformer Engine gathers the quantized tensor, not the
    16-bit one (transformer_engine/pytorch/distributed.py, gather_along_first_dim:
    _all_gather_fp8, _all_gather_nvfp4; since TE 1.x for FP8): one byte an element for FP8,
    whose transpose is made after the gather, and NVFP4's 4.5 bits, the input's row-wise copy
    in the forward and its column-wise copy in the backward, both copies of the output
    gradient. Reduce-scatters stay 16-bit."""
    share = precision.bytes / precision.activation_bytes if precision.low_precision else 1.0
    grad_share = share * (2 if precision is Precision.NVFP4 else 1)
    ag = _nccl(Collective.ALL_GATHER, activation * share, group, eff)
    ag_grad = ag if grad_share == share else \
        _nccl(Collective.ALL_GATHER, activation * grad_share, group, eff)
    rs = _nccl(Collective.REDUCE_SCATTER, activation, group, eff)
    blocks = len(column_gemms)
    forward = blocks * (ag + rs)
    backward = blocks * ag_grad
    for gemm in column_gemms:
        backward = backward + maximum(0.0, ag - gemm) + maximum(0.0, rs - gemm)
    return forward, backward


SIXTEEN_BIT = (Precision.BF16, Precision.FP16)


def tp_overlap_exposed(shape: TransformerShape, cfg: TrainingConfig, eff: Efficiency) -> float:
    """The share of the tensor-parallel traffic the userbuffers overlap (--tp-comm-overlap)
    leaves exposed: ``tp_comm_exposed``, but ``tp_comm_exposed_16_bit_dense`` for a dense
    model in BF16 or FP16, which the published runs show the overlap does not hide."""
    if cfg.precision in SIXTEEN_BIT and not shape.is_moe:
        return eff.tp_comm_exposed_16_bit_dense
    return eff.tp_comm_exposed


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


MOE_ROUTINGS = ("balanced", "unbalanced")
"""How a run's routing is balanced, as the validation rows record it: balanced (an
auxiliary loss, an expert bias or forced balancing keeps every expert-parallel rank near
the mean; ``moe_imbalance`` says otherwise) or unbalanced (nothing does:
``Efficiency.moe_unbalanced_load``)."""


def unbalanced_routing_load(shape: TransformerShape, ep: int, eff: Efficiency) -> float:
    """``--moe-imbalance unbalanced``: the busiest expert-parallel rank's load when nothing
    balances the routing, ``Efficiency.moe_unbalanced_load`` capped by what a rank can
    receive (1 without expert parallelism)."""
    return min(eff.moe_unbalanced_load, shape.busiest_rank_bound(ep))


def _one_layer_time(s: TransformerShape, cfg: TrainingConfig, device: Device,
                    eff: Efficiency, tp_group: Group, cp_group: Group, ep_group: Group,
                    moe: bool, window: int = 0, parts: dict[str, Num] | None = None,
                    block: str = "") -> tuple[_Pass, _Pass, _Pass, Num, Num, Num]:
    ops, tokens = _layer_ops(s, cfg, moe, window, block, device.tensor_core_generation)
    element = cfg.precision.activation_bytes
    fwd: Num = 0.0
    bwd: Num = 0.0
    attn_fwd: Num = 0.0
    flops: Num = 0.0
    wgrad: Num = 0.0  # the weight-gradient GEMMs' seconds (as long as their forward)
    expert_section: Num = 0.0  # forward GPU time between dispatch and combine
    by_name: dict[str, Num] = {}  # forward time of each operator
    frozen = bool(cfg.lora_rank)  # the model's weights are not trained
    for op in ops:
        t, _, _, op_flops, _ = op_time(op, device, eff)
        if moe and (op.name in ROUTED_OPS or op.name.startswith("grouped_expert_")):
            t = t * cfg.moe_imbalance  # the busiest rank's routed tokens
        fwd = fwd + t
        by_name[op.name] = by_name.get(op.name, 0.0) + t
        flops = flops + op_flops
        if op.name.startswith("grouped_expert_") or op.name == "moe_permute":
            expert_section = expert_section + t
        if isinstance(op, Attention):
            attn_fwd = attn_fwd + t
            back = op_time(dataclasses.replace(op, backward=True), device, eff)[0]
        else:
            # a GEMM's data and weight gradients (a frozen one's data gradient alone, under
            # LoRA); an elementwise op's backward
            weighted = isinstance(op, Gemm) and op.name not in ATTENTION_OPS
            trained = weighted and (not frozen or op.name.endswith(LORA_OPS))
            back = t if weighted and not trained else 2 * t
            if isinstance(op, Elementwise) and op.backward is not None:
                back = op_time(op.backward, device, eff)[0]
            if trained:
                wgrad = wgrad + t
            if op.name in ATTENTION_OPS:
                attn_fwd = attn_fwd + t
        bwd = bwd + back
        if parts is not None:
            key = op_kind(op)
            parts[key] = parts.get(key, 0.0) + t + back
    activation = tokens * s.hidden * element
    # two all-reduces per layer (attention, MLP) each way, one with parallel attention or
    # in a hybrid block (nothing when TP = 1); with sequence parallelism and no userbuffers
    # overlap, the all-gathers and reduce-scatters as they run (sequence_parallel_tp_comm)
    tp_share = tp_overlap_exposed(s, cfg, eff) if cfg.tp_comm_overlap else 1.0
    one_reduction = s.parallel_attention or bool(block)
    if cfg.sequence_parallel and not cfg.tp_comm_overlap:
        column = sum(by_name.get(name, 0.0) for name, _, _ in
                     attention_projections(s, cfg.tp)[:-1])
        mlp_column = by_name.get("mlp_up", 0.0) + by_name.get("shared_up", 0.0) \
            + by_name.get("mamba_in_proj", 0.0)
        columns = (column + mlp_column,) if one_reduction else (column, mlp_column)
        tp_fwd, tp_bwd = sequence_parallel_tp_comm(activation, cfg.precision, tp_group,
                                                   eff, columns)
    else:
        tp_fwd = tp_bwd = (1 if one_reduction else s.tp_reductions) * _nccl(
            Collective.ALL_REDUCE, activation, tp_group, eff)
    core_kv, core_dim = attention_core_dims(s)
    kv_bytes = 2 * cfg.micro_batch * cfg.seq_len * maximum(1, core_kv // cfg.tp) \
        * core_dim * element
    if cfg.cp_comm_type == "a2a":
        # queries, keys and values in, the core's output back: each GPU's own tokens over
        # its tensor-parallel share of the heads, the same again in the backward pass
        heads = (2 * s.heads / cfg.tp + 2 * maximum(1, core_kv // cfg.tp))
        swapped = tokens * heads * core_dim * element
        cp_ag = _nccl(Collective.ALL_TO_ALL, swapped, cp_group, eff)
    else:
        share = eff.cp_comm_exposed if cfg.cp_comm_type == "p2p" else 1.0
        cp_ag = share * _nccl(Collective.ALL_GATHER, kv_bytes, cp_group, eff)
    if block in ("-", "E"):
        cp_ag = 0.0  # a hybrid model's MLP and expert blocks exchange nothing over CP
    elif block == "M":
        # Megatron-Core's MambaContextParallel: the input projection's output (z, x, B, C,
        # dt) goes all-to-all from sequence shards to head shards before the convolution
        # and scan, and the scan's output comes back: each GPU's own tokens, each way, again
        # in the backward pass
        m = s.mamba
        assert m is not None
        swapped = tokens * (m.in_proj_width // cfg.tp + m.inner // cfg.tp) * element
        cp_ag = _nccl(Collective.ALL_TO_ALL, swapped, cp_group, eff)
    exposed = tp_share * tp_fwd + cp_ag
    exposed_fwd = exposed
    exposed_bwd = tp_share * tp_bwd + cp_ag
    a2a: Num = 0.0
    hidden: Num = 0.0  # the all-to-all seconds a forward-backward pair hides (both passes)
    if moe:
        dispatched = tokens * s.experts_per_token * s.expert_width * element / cfg.tp
        copies = s.experts_per_token if cfg.ep_dispatcher == "deepep" else 0
        groups = (s.expert_groups, s.groups_per_token)
        # dispatch and combine
        a2a = eff.ep_comm_exposed * 2 * cfg.moe_imbalance * _nccl(
            Collective.ALL_TO_ALL, dispatched, ep_group, eff, copies, groups)
        if cfg.ep_comm_overlap:
            # one micro-batch's forward runs beside another's backward, each pair's
            # all-to-alls hidden behind the pair's compute; only the excess is exposed
            full = a2a
            a2a = maximum(0.0, a2a - (fwd + bwd) / 2)
            hidden = 2 * (full - a2a)
        exposed_fwd, exposed_bwd = exposed_fwd + a2a, exposed_bwd + a2a
    # the dropless dispatcher's host wait falls in the forward pass (and a recomputed one):
    # the backward's all-to-alls and grouped GEMMs reuse the split sizes the forward copied
    # to the CPU, so the host runs ahead there as in a dense layer
    wait = dispatcher_host_time(device.product, cfg, eff, s) if moe else 0.0
    # many small experts per GPU: the expert section waits on the host's launches
    host_fwd: Num = 0.0
    host_bwd: Num = 0.0
    if moe:
        launched = _local_experts(s, cfg) if cfg.expert_launches == "per-expert" else 1
        floor_fwd, floor_bwd = expert_host_floor(launched, cfg.precision.low_precision, eff)
        host_fwd = maximum(0.0, floor_fwd - expert_section)
        host_bwd = maximum(0.0, floor_bwd - 2 * expert_section)
    # a hybrid block holds one of a layer's two parts: half its fixed time and floor (so
    # attention and MLP blocks in pairs cost what the layers they make up do)
    part = 0.5 if block else 1.0
    forward = _Pass(fwd, exposed_fwd, part * eff.layer_overhead_s + wait + host_fwd)
    backward = _Pass(bwd, exposed_bwd, part * eff.layer_overhead_s + host_bwd)
    # a pass takes at least the layer's floor however little it holds (the backward twice
    # the forward's)
    if eff.layer_pass_floor_s:
        forward = _Pass(forward.compute, forward.comm, forward.overhead,
                        maximum(0.0, part * eff.layer_pass_floor_s - forward.total))
        backward = _Pass(backward.compute, backward.comm, backward.overhead,
                         maximum(0.0, 2 * part * eff.layer_pass_floor_s - backward.total))
    if cfg.recompute is Recompute.FULL:
        recompute = forward.scale(cfg.full_recompute_share(s))
    else:
        recompute = _recomputed(s, cfg.recomputed, moe, by_name, attn_fwd,
                                _Pass(0.0, a2a, wait + host_fwd), cfg.tp)
    if parts is not None:
        # the forward's communication runs again when the whole layer is recomputed
        passes = 2 + cfg.full_recompute_share(s)
        moe_passes = 3 if "moe" in cfg.recomputed else passes
        parts["recompute"] = recompute.compute
        parts["tensor_parallel"] = tp_share * ((passes - 1) * tp_fwd + tp_bwd)
        parts["context_parallel"] = passes * cp_ag
        parts["expert_parallel"] = moe_passes * a2a if moe else 0.0
    return forward, backward, recompute, flops, wgrad, hidden


RECOMPUTED_OPS = {
    "layernorm": ("norms",),
    "mla_up_proj": ("q_up", "kv_up"),
    "mlp": ("mlp_up", "mlp_down", "activation"),
    "moe": ("router", "moe_latent_down", "moe_latent_up", "grouped_expert_up",
            "grouped_expert_down", "shared_up", "shared_down", "moe_permute", "activation",
            "moe_glu_clamp", "moe_expert_bias"),
    "shared_experts": ("shared_up", "shared_down"),
}
"""The forward operators (estimate/training.py's ``_layer_ops`` names) each recompute module
runs again; ``core_attn`` is the attention core and ``moe_act`` the routed experts' share of
the expert layer's activation function, both below."""


def _recomputed(s: TransformerShape, modules: tuple[str, ...], moe: bool,
                by_name: dict[str, Num], attn_fwd: Num, moe_extra: _Pass, tp: int = 1
                ) -> _Pass:
    """The recompute pass of one layer under selective recomputation of ``modules``: the
    forward time of the operators they cover; recomputing a whole expert layer (``moe``)
    also repeats its dispatch and combine and its host time (``moe_extra``). The dense-layer
    module (``mlp``) does nothing in an expert layer, the expert ones nothing in a dense
    layer. TorchTitan's op policy (``torchtitan_op``) reruns the norms, the activation
    function and its recomputed matrix multiplies, each priced as its share of the fused
    operator it belongs to (the key projection's share of the QKV GEMM's width on one of
    ``tp`` GPUs, the up projection half of a gated MLP's)."""
    if TORCHTITAN_OP in modules:
        return _Pass(_torchtitan_op_time(s, by_name, tp), 0.0)
    names: set[str] = set()
    compute: Num = attn_fwd if "core_attn" in modules else 0.0
    for module in modules:
        if (module == "mlp" and moe) or (module in ("moe", "shared_experts") and not moe):
            continue
        names.update(RECOMPUTED_OPS.get(module, ()))
    if moe and "moe_act" in modules and "moe" not in modules:
        routed = s.experts_per_token / (s.experts_per_token + s.shared_experts)
        compute = compute + routed * by_name.get("activation", 0.0) \
            + by_name.get("moe_glu_clamp", 0.0)
    # a recomputed GEMM's LoRA adapters (``lora_adapter_ops``) run again with it
    compute = compute + sum((t for name, t in by_name.items()
                             if name.split(".")[0] in names), 0.0)
    extra = moe_extra if moe and "moe" in modules else _Pass()
    return _Pass(compute, 0.0) + extra


def _torchtitan_op_time(s: TransformerShape, by_name: dict[str, Num], tp: int) -> Num:
    """Seconds of one layer's recompute pass under TorchTitan's op policy: the norms, the
    activation function and the residual adds again, and each recomputed matrix multiply
    as its share of its fused operator's time (widths on one of ``tp`` GPUs, at least one
    KV head each, as ``attention_projections`` splits them)."""
    widths = {mm.name: mm.n for mm in block_matmuls(s)}
    heads, kv = s.heads // tp, max(1, s.n_kv_heads // tp)
    widths.update(q=heads * s.d_head, k=kv * s.d_head, v=kv * s.d_head)
    fused: dict[str, int] = {}
    for mm in block_matmuls(s):
        fused[mm.operator] = fused.get(mm.operator, 0) + widths[mm.name]
    time: Num = sum((by_name.get(name, 0.0) for name in ("norms", "activation", "residuals")),
                    0.0)
    for mm in torchtitan_op_split(s)[1]:
        time = time + by_name.get(mm.operator, 0.0) * widths[mm.name] / fused[mm.operator]
    return time


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
            memo[(frozen_too, kind)] = _nccl(kind, size, group, eff)
        return memo[(frozen_too, kind)]

    def across(grad_bytes: Num) -> Num:
        """The replicas' all-reduce of one rank's gradient shard."""
        if replicas is None:
            return 0.0
        return _nccl(Collective.ALL_REDUCE, grad_bytes / group.size, replicas, eff)

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
    ep_stride = cfg.tp * cfg.cp if not cfg.etp else cfg.etp  # as in _layer_groups
    # LM head and loss on the last stage (vocabulary split over TP)
    tokens_mb = cfg.micro_batch * cfg.seq_len // cfg.cp
    tp_group, cp_group, ep_group = _layer_groups(cfg, intra, inter)
    # ZeRO's group: all DP x CP ranks, or under hybrid sharding the dp_shard nearest of them
    # (TP apart), its replicas a further dp_shard groups apart
    replicas = cfg.dp_replicas
    dp_group = _group(cfg.dp * cfg.cp // replicas, cfg.tp, cfg, intra, inter)
    hybrid = any_of(cfg.dp_shard)
    replica_group = (_group(replicas, cfg.tp * cfg.dp * cfg.cp // replicas, cfg, intra, inter)
                     if hybrid else None)
    pp_group = _pipeline_send_group(cfg, intra, inter)
    kinds = (layers.kinds if layers is not None and parts is None else
             _layer_times(shape, cfg, device, eff, tp_group, cp_group, ep_group,
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
    average = _average_layer(shape, kinds)
    fwd, bwd = average.fwd, average.bwd
    per_layer, layer_flops = average.passes, average.flops

    # an MTP block: a layer of the last layer's kind with full attention, the 2h -> h
    # projection (column-parallel over TP) and its own pass through the shared head
    layout = cfg.layout(shape)
    # the layers (and MTP blocks) run in BF16 beside the low-precision recipe, costed as a
    # BF16 run's
    in_bf16 = (cfg.in_bf16, *bf16) \
        if cfg.mtp_bf16 or (layout is not None and layout.bf16_virtual) else None
    kinds16 = (_layer_times(shape, *in_bf16, tp_group, cp_group, ep_group,
                            with_parts=parts is not None)
               if in_bf16 is not None and layout is not None and layout.bf16_virtual else {})

    mtp_layer = _Layer(_Pass(), _Pass(), _Pass(), 0.0, {})
    mtp_extra: Num = 0.0
    if cfg.mtp_layers:
        own: dict[str, Num] = {}
        mtp_cfg, mtp_device, mtp_eff = in_bf16 if cfg.mtp_bf16 and in_bf16 else (cfg, device,
                                                                                 eff)
        # (a hybrid model's: its attention and expert blocks as one layer)
        mtp_shape = mtp_layer_shape(shape) if shape.is_hybrid else shape
        f, b, r, fl, w, h = _one_layer_time(mtp_shape, mtp_cfg, mtp_device, mtp_eff, tp_group,
                                            cp_group, ep_group, shape.is_moe, 0,
                                            own if parts is not None else None)
        mtp_layer = _Layer(f, b, r, fl, own, w, h)
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
                + _Pass(last_head, 0.0))
        if cfg.pp_edge_layers:
            # the last stage runs one layer fewer plus the head; the middle stages all layers
            slower = last.total >= stage.total
            stage = _Pass(*(where(slower, a, b) for a, b in
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
        def rank_pass(load: StageLoad) -> tuple[_Pass, dict[str, Num], Num]:
            by_kind = load.blocks or ((False, load.dense_layers), (True, load.expert_layers))
            sixteen = dict(load.bf16)
            counts = (*((n - sixteen.get(kind, 0), kinds.get(kind)) for kind, n in by_kind),
                      *((n, kinds16.get(kind)) for kind, n in load.bf16),
                      (load.mtp, mtp_layer))
            extra = load.loss * head_pass + load.mtp * mtp_extra
            total = _Pass()
            own_parts: dict[str, Num] = {}
            for n, one in counts:
                if n and one is not None:
                    total = total + one.passes.scale(n)
                    for key, value in one.parts.items():
                        own_parts[key] = own_parts.get(key, 0.0) + n * value
            return total + _Pass(extra, 0.0), own_parts, extra

        ranks = [rank_pass(load) for load in layout.ranks]
        # each configuration's slowest rank (the first of equals)
        slowest = np.argmax(np.stack(np.broadcast_arrays(*(p.total for p, _, _ in ranks))),
                            axis=0)
        stage = _Pass(*(_pick(slowest, [getattr(p, name) for p, _, _ in ranks])
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
    p2p = (2 * _nccl(Collective.P2P, act, pp_group, eff) * cfg.vpp * waits
           * eff.pp_comm_exposed)
    p2p = where(cfg.pp > 1, p2p, 0.0)
    stage = stage + _Pass(0.0, p2p)

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
        stage = stage + _Pass(0.0, offload)

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
        edp_group = _group(expert_shard, ep_stride * cfg.ep, cfg, intra, inter)
        expert_replicas = (_group(replicas, ep_stride * cfg.ep * expert_shard, cfg, intra,
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
        tied_sync = where(cfg.pp > 1, _nccl(
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
