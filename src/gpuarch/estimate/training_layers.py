"""One transformer layer's training passes on one GPU: its forward operators (attention,
MLP or experts, norms, casts, LoRA adapters), the collectives inside it, and the seconds of its
forward, backward and recomputation for one micro-batch."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuarch.catalog.model import BLACKWELL_TENSOR_CORES, Product
from gpuarch.estimate.inkling_ops import loop_message_ops, relative_bias_ops, short_conv_ops
from gpuarch.estimate.lora import adapted_gemms
from gpuarch.estimate.mamba import mamba_ops, x_proj_reduce_bytes
from gpuarch.estimate.memory import Recompute
from gpuarch.estimate.recompute import (
    TORCHTITAN_OP,
    block_matmuls,
    torchtitan_op_split,
    up_projections,
)
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.perf.collectives import Collective, Group, Link, Num, collective_time, nccl_protocols
from gpuarch.perf.efficiency import Efficiency
from gpuarch.perf.fp8_attention import has_fp8_attention_timings
from gpuarch.perf.num import maximum, minimum, where
from gpuarch.perf.precision import Precision
from gpuarch.perf.roofline import (
    ATTENTION_OPS,
    INDEXER,
    LORA_OPS,
    Attention,
    Device,
    Elementwise,
    Gemm,
    Op,
    attention_residual_op,
    compressed_attention_ops,
    hyper_connection_ops,
    op_kind,
    op_time,
    per_layer_input_op,
    stream_ops,
    sub_norm_op,
)
from gpuarch.workloads.flops import (
    attention_core_dims,
    attention_expert_gemms,
    attention_projections,
    conv_tap_gemms,
    mlp_side_gemms,
    per_layer_input_gemms,
    router_gemms,
    stream_gemms,
)
from gpuarch.workloads.params import indexer_projections, layer_op_shares
from gpuarch.workloads.shape import TransformerShape

__all__ = [
    "EXPERT_LAUNCHES_PER_EXPERT",
    "LORA_ELEMENT",
    "PERMUTATION_PASSES",
    "RECOMPUTED_OPS",
    "ROUTED_OPS",
    "SIXTEEN_BIT",
    "UNFUSED_SOFTMAX_BYTES",
    "LayerCosts",
    "LayerPasses",
    "PassSeconds",
    "attention_efficiency",
    "average_layer",
    "bf16_efficiency",
    "comm_group",
    "cp_call_share",
    "dispatch_permutation",
    "dispatcher_host_time",
    "expert_efficiency",
    "expert_host_floor",
    "fused_attention",
    "layer_costs",
    "layer_groups",
    "layer_times",
    "lora_adapter_ops",
    "nccl_time",
    "one_layer_time",
    "quantized_copies",
    "ranks_per_node",
    "router_device",
    "sequence_parallel_tp_comm",
    "tp_overlap_exposed",
    "unbalanced_routing_load",
]

UNFUSED_SOFTMAX_BYTES = 9.0
"""DRAM bytes per attention-score element for unfused softmax and dropout: read and write
the scores (2 + 2, 16-bit), write the dropout mask (1), read and write the dropped-out
probabilities (2 + 2); Korthikanti et al. 2022, section 4.1, list the same tensors."""


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
        eff = eff.with_value("attention", eff.attention * eff.context_attention_fp8
                             / eff.context_attention)
    return eff


def expert_efficiency(eff: Efficiency, shape: TransformerShape) -> Efficiency:
    """``eff`` with the grouped expert GEMMs' multiplier ``shape``'s experts run at: the
    fitted ``moe_grouped_gemm`` for a fine-grained mixture of experts, and
    ``moe_grouped_gemm_coarse`` (the dense GEMMs' rate) for a coarse one."""
    if shape.is_moe and not shape.is_fine_grained_moe \
            and eff.moe_grouped_gemm != eff.moe_grouped_gemm_coarse:
        return eff.with_value("moe_grouped_gemm", eff.moe_grouped_gemm_coarse)
    return eff


def bf16_efficiency(eff: Efficiency, cfg: TrainingConfig, gpu: str) -> Efficiency:
    """``eff`` (``attention_efficiency``'s, for ``cfg``) for the layers ``cfg`` runs in BF16:
    their attention outside the FP8 autocast, at the 16-bit kernel's efficiency."""
    if cfg.fp8_attention and not has_fp8_attention_timings(gpu):
        return eff.with_value("attention", eff.attention * eff.context_attention
                              / eff.context_attention_fp8)
    return eff


@dataclass(frozen=True)
class PassSeconds:
    """Seconds of one micro-batch on one stage, split by kind."""

    compute: Num = 0.0
    comm: Num = 0.0
    overhead: Num = 0.0  # fixed host time (launches, the MoE dispatcher's synchronisation)
    floor: Num = 0.0  # what a short layer pass falls short of ``layer_pass_floor_s`` by

    def __add__(self, other: PassSeconds) -> PassSeconds:
        return PassSeconds(self.compute + other.compute, self.comm + other.comm,
                     self.overhead + other.overhead, self.floor + other.floor)

    def scale(self, k: Num) -> PassSeconds:
        return PassSeconds(self.compute * k, self.comm * k, self.overhead * k, self.floor * k)

    @property
    def total(self) -> Num:
        return self.compute + self.comm + self.overhead + self.floor


def nccl_time(kind: Collective, size_bytes: Num, group: Group, eff: Efficiency,
          dedupe_copies: Num = 0, routing_groups: tuple[int, int] = (0, 0)) -> Num:
    """A training collective's time: NCCL's latency model (base, per-hop latency by fabric,
    fastest protocol), which training frameworks run their collectives on."""
    return collective_time(kind, size_bytes, group, eff, nccl_protocols(), dedupe_copies,
                           routing_groups)


def ranks_per_node(size: Num, inner: Num, gpus_per_node: int) -> Num:
    """How many of a communicator's ``size`` ranks, neighbours ``inner`` ranks apart, share
    a node of ``gpus_per_node`` GPUs (Megatron's rank order fills nodes in turn)."""
    return where(inner < gpus_per_node, maximum(1, minimum(size, gpus_per_node // inner)), 1)


def comm_group(size: Num, inner: Num, cfg: TrainingConfig, intra: Link, inter: Link | None
           ) -> Group:
    """A communicator of ``size`` ranks whose neighbours are ``inner`` ranks apart."""
    return Group(size, ranks_per_node(size, inner, cfg.gpus_per_node), intra, inter)


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


def _compressed_attention_ops(s: TransformerShape, cfg: TrainingConfig, tokens: Num
                              ) -> list[Op]:
    """A DeepSeek-V4 layer's attention forward on one GPU (``roofline.
    compressed_attention_ops``), its core and indexer fused attention passes as the run's
    other attention (``fused_attention``)."""
    c = s.compressed
    assert c is not None

    def gemm(m: Num, n: Num, k: Num, name: str, batch: Num = 1) -> Gemm:
        return Gemm(m, n, k, batch=batch, name=name)

    return compressed_attention_ops(
        s, cfg.tp, tokens, gemm, fused_attention(cfg, s.heads // cfg.tp, 1, s.d_head, c.window),
        fused_attention(cfg, c.index_heads, 1, c.index_head_dim))


def _attention_ops(s: TransformerShape, cfg: TrainingConfig, tokens: Num, window: int
                   ) -> list[Op]:
    """An attention block's forward operators on one GPU: projections and core."""
    if s.compressed is not None:
        return _compressed_attention_ops(s, cfg, tokens)
    t = cfg.tp
    seq = cfg.seq_len // cfg.cp
    core_kv, d = attention_core_dims(s)
    heads = s.heads // t
    kv = maximum(1, core_kv // t)
    projections = attention_projections(s, t)
    ops: list[Op] = [Gemm(tokens, n, k, name=name) for name, n, k in projections[:-1]]
    if s.attention_experts:
        # a mixture of attention heads (JetMoE's): the keys and values and the router for
        # every token, each expert's query projection for the tokens routed to it (all the
        # experts take their share of a training micro-batch's); the output projections
        # likewise after the core
        (kv_name, kv_n, kv_k), (r_name, r_n, r_k), (q_name, q_n, q_k), out = \
            attention_expert_gemms(s, t)
        per_expert = maximum(1, tokens * s.experts_per_token // s.attention_experts)
        routed_here = tokens // t if cfg.sequence_parallel else tokens
        ops = [Gemm(tokens, kv_n, kv_k, name=kv_name), Gemm(routed_here, r_n, r_k, name=r_name),
               Gemm(per_expert, q_n, q_k, batch=s.attention_experts, name=q_name)]
        projections = [*projections[:-1], out]
    if cfg.fused_attention:
        m = s.mla
        if m is not None and m.sparse:
            # DeepSeek Sparse Attention: the indexer (its projections whole on every
            # tensor-parallel GPU, as the engines run them) scores every earlier position,
            # and the attention attends to the index_topk it picks, as a window of that size
            ops += [Gemm(tokens, n, k, name=name) for name, n, k in indexer_projections(s)]
            ops.append(dataclasses.replace(fused_attention(cfg, m.index_heads, 1,
                                                           m.index_head_dim),
                                           values=False, name=INDEXER))
            window = m.index_topk
        elif s.block_sparse is not None:
            # a block-sparse layer (MiniMax-M3; its dense layers' view has none): the same
            # indexer over every earlier position, the attention over the blocks it picks
            # (the layer kind's window, their positions)
            b = s.block_sparse
            ops += [Gemm(tokens, n, k, name=name) for name, n, k in indexer_projections(s)]
            ops.append(dataclasses.replace(fused_attention(cfg, b.index_heads, 1,
                                                           b.index_head_dim),
                                           values=False, name=INDEXER))
        # with context parallelism each GPU does 1/CP of the (load-balanced) causal work,
        # in calls over its chunk around a ring (p2p) or over the whole sequence (a2a's
        # head split, all_gather's gathered keys); packed documents are so many short
        # sequences to the kernel
        core: list[Op] = [fused_attention(cfg, heads, kv, d, window, s.chunks(window))]
    else:
        # unfused attention (Megatron-LM before FlashAttention): the full score matrix is
        # computed (masked, not skipped), softmaxed and dropped out in memory
        scores = 1.0 * cfg.micro_batch * heads * seq * cfg.seq_len
        core = [Gemm(seq, cfg.seq_len, d, batch=cfg.micro_batch * heads, name="scores"),
                Elementwise(UNFUSED_SOFTMAX_BYTES * scores, name="softmax"),
                Gemm(seq, d, cfg.seq_len, batch=cfg.micro_batch * heads, name="context")]
    # Inkling's relative position bias: its table, then the core's reads of it; Inkling
    # 2's full layers' projections to their convolutions' taps
    ops += relative_bias_ops(s, tokens, heads, window, cfg.seq_len)
    ops += [Gemm(tokens, n, k, name=name) for name, n, k in conv_tap_gemms(s, window, t)]
    # differential attention: the core twice (two calls, as Transformers' DiffLlama makes)
    ops += core * s.attention_calls
    name, n, k = projections[-1]
    if s.attention_experts:
        ops.append(Gemm(maximum(1, tokens * s.experts_per_token // s.attention_experts), n, k,
                        batch=s.attention_experts, name=name))
        return ops
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
        # the router scores each GPU's own tokens: a sequence-parallel shard under TP
        # (Megatron-Core routes before the dispatch, on the layer's sharded input)
        routed_here = tokens // t if cfg.sequence_parallel else tokens
        ops += [Gemm(routed_here, n, k, name=name) for name, n, k in router_gemms(s)]
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
    # (a shared block's gate/up adapter and output projection after it: Zamba's)
    return [Gemm(tokens, up // t, s.hidden, name="mlp_up"),
            Gemm(tokens, s.hidden, f // t, name="mlp_down"),
            *(Gemm(tokens, n, k, name=name) for name, n, k in mlp_side_gemms(s, t))
            ], tokens * f // t


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
        # Inkling's short convolutions over the keys, values and both blocks' outputs
        ops += short_conv_ops(s, t, tokens, cfg.micro_batch, element, False)
    inner: Num = 0
    fused_mlp = moe and cfg.expert_launches == "fused-mlp"
    if block == "M":
        ops += mamba_ops(s, t, tokens, element, seq)
    elif block != "*":
        ffn, inner = _ffn_ops(s, cfg, moe, tokens)
        ops += ffn
    # the norms (two a layer, four with sandwich norms, one a hybrid block, two with a norm
    # after it) and residual
    # adds (read 2, write 1; one a block), and the activation function
    norm_tokens = tokens // t if cfg.sequence_parallel else tokens
    hidden_bytes = 1.0 * norm_tokens * s.hidden * element
    norms, residuals = (s.layer_norms, 2) if not block else (s.block_norms, 1)
    ops += [Elementwise(norms * 2 * hidden_bytes, name="norms"),
            Elementwise(residuals * 3 * hidden_bytes, name="residuals")]
    if s.sub_norms:
        ops.append(sub_norm_op(tokens, s, t, element))
    ops += hyper_connection_ops(norm_tokens, s, element)
    if s.attention_residual_block:
        # block attention residuals: each mix reads the block summaries so far and writes
        # its input (one a hybrid block, two a layer)
        ops.append(attention_residual_op(norm_tokens, s, element, bool(block)))
    # a looped layer's message gates and messages (Inkling 2 Mini's), in its later runs
    ops += loop_message_ops(s, tokens, lambda m, n, k, name: Gemm(m, n, k, name=name))
    if block in ("", "-", "E"):
        ops.append(Elementwise(3.0 * inner * element, name="activation"))
    if s.per_layer_input:
        # per-layer inputs: their GEMMs, whole on each GPU, then the gate's activation and
        # product with the layer's input, the norm and the residual add
        ops += [Gemm(tokens, n, k, name=name) for name, n, k in per_layer_input_gemms(s)]
        ops.append(per_layer_input_op(tokens, s, element))
    # AltUp's and LAuReL's (Gemma 3n's) GEMMs, whole on each GPU, and stream traffic
    ops += [Gemm(tokens, n, k, name=name) for name, n, k in stream_gemms(s)]
    ops += stream_ops(tokens, s, element)
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

        # the router is a plain 16-bit (or FP32) linear outside Transformer Engine: nothing
        # cast for it (Megatron-Core's TopKRouter, router_gating_linear)
        cast = sum(cast_bytes(op) * op.batch for op in ops
                   if isinstance(op, Gemm) and op.name != "router")
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
class LayerPasses:
    """One layer's forward, backward and recompute passes for one micro-batch, the forward
    FLOPs it executes (hardware FLOPs, before recomputation) and, when asked for, its compute
    and exposed communication seconds by part (``COMPUTE_PARTS``, ``COMMUNICATION_PARTS``)."""

    fwd: PassSeconds
    bwd: PassSeconds
    rec: PassSeconds
    flops: Num
    parts: dict[str, Num]
    # compute seconds of the weight-gradient GEMMs inside ``bwd`` (what a zero-bubble
    # schedule defers: the W of ``pipeline_bubble``)
    wgrad: Num = 0.0
    # the expert all-to-all seconds that pairing this micro-batch's passes with another's
    # hid (``ep_comm_overlap``): a step's first forward and last backward have no partner
    a2a_hidden: Num = 0.0

    @property
    def passes(self) -> PassSeconds:
        return self.fwd + self.bwd + self.rec


def _mix(layers: list[tuple[Num, LayerPasses]]) -> LayerPasses:
    """The weighted mean of layers (weights adding up to 1)."""
    if len(layers) == 1:
        return layers[0][1]
    fwd, bwd, rec, flops, wgrad, hidden = PassSeconds(), PassSeconds(), PassSeconds(), 0.0, 0.0, 0.0
    parts: dict[str, Num] = {}
    for w, one in layers:
        fwd, bwd, rec = fwd + one.fwd.scale(w), bwd + one.bwd.scale(w), rec + one.rec.scale(w)
        flops = flops + one.flops * w
        wgrad = wgrad + one.wgrad * w
        hidden = hidden + one.a2a_hidden * w
        for key, value in one.parts.items():
            parts[key] = parts.get(key, 0.0) + w * value
    return LayerPasses(fwd, bwd, rec, flops, parts, wgrad, hidden)


@dataclass(frozen=True)
class LayerCosts:
    """The layers' costing of a set of configurations (``layer_times``'s kinds), which does
    not depend on their pipeline split or ZeRO stage; ``take`` picks a run of them."""

    kinds: dict[Any, LayerPasses]

    def take(self, part: slice | np.ndarray) -> LayerCosts:
        """The configurations ``part`` (a slice or an index array) picks, in their order."""
        def cut(x: Num) -> Num:
            return x[part] if isinstance(x, np.ndarray) and x.ndim else x

        def cut_pass(p: PassSeconds) -> PassSeconds:
            return PassSeconds(cut(p.compute), cut(p.comm), cut(p.overhead), cut(p.floor))

        return LayerCosts({
            kind: LayerPasses(cut_pass(one.fwd), cut_pass(one.bwd), cut_pass(one.rec),
                         cut(one.flops), {k: cut(v) for k, v in one.parts.items()},
                         cut(one.wgrad), cut(one.a2a_hidden))
            for kind, one in self.kinds.items()})


def layer_costs(shape: TransformerShape, device: Device, intra: Link, inter: Link | None,
                cfg: TrainingConfig, eff: Efficiency) -> LayerCosts:
    """``evaluate_training``'s costing of ``cfg``'s layers, for configurations along one axis
    whose pipeline splits may differ (the split does not enter it; without
    ``recompute_layers``, whose share of a chunk does)."""
    return LayerCosts(layer_times(shape, cfg, device, eff,
                                   *layer_groups(cfg, intra, inter)))


def layer_groups(cfg: TrainingConfig, intra: Link, inter: Link | None
                  ) -> tuple[Group, Group, Group]:
    """A layer's tensor-, context- and expert-parallel communicators. Expert-parallel ranks
    are ETP apart in Megatron's expert grid (TP x CP apart when ETP is TP's default, as
    before CP folded into it)."""
    ep_stride = cfg.tp * cfg.cp if not cfg.etp else cfg.etp
    return (comm_group(cfg.tp, 1, cfg, intra, inter), comm_group(cfg.cp, cfg.tp, cfg, intra, inter),
            comm_group(cfg.ep, ep_stride, cfg, intra, inter))


def layer_times(s: TransformerShape, cfg: TrainingConfig, device: Device, eff: Efficiency,
                 tp_group: Group, cp_group: Group, ep_group: Group, with_parts: bool = False
                 ) -> dict[Any, LayerPasses]:
    """Each kind of layer the model has (True: expert layer, False: dense), its sliding-
    window layers taken as spread evenly over both kinds; a hybrid model's blocks by kind
    (their ``HYBRID_BLOCKS`` letter)."""
    eff = expert_efficiency(eff, s)
    if s.is_hybrid:
        blocks: dict[Any, LayerPasses] = {}
        for block in sorted(set(s.hybrid_pattern)):
            # MLP blocks of several widths (Llama-Nemotron's NAS layers), attention blocks
            # within a window and over every position (LFM3): their mean
            widths = [(n, view, 0) for _, n, view in s.mlp_kinds()] if block == "-" \
                else [(n, s, window) for window, n, _ in s.attention_kinds()] \
                if block == "*" and s.windowed_layers else [(1, s, 0)]
            one_kind: list[tuple[Num, LayerPasses]] = []
            for n, view, window in widths:
                mine: dict[str, Num] = {}
                f, b, r, fl, w, h = one_layer_time(view, cfg, device, eff, tp_group, cp_group,
                                                    ep_group, block == "E", window,
                                                    mine if with_parts else None, block)
                one_kind.append((n, LayerPasses(f, b, r, fl, mine, w, h)))
            total = sum(n for n, _ in one_kind)
            blocks[block] = _mix([(n / total, one) for n, one in one_kind])
        return blocks
    kinds: dict[bool, list[tuple[Num, LayerPasses]]] = {}
    for moe, window, share, shared in s.layer_kinds():
        own: dict[str, Num] = {}
        # a model with KV-shared layers: each kind's own view (``layer_view``)
        view = s.layer_view(window, shared) if s.kv_shared_layers else s
        f, b, r, fl, w, h = one_layer_time(view, cfg, device, eff, tp_group, cp_group,
                                            ep_group, moe, window,
                                            own if with_parts else None)
        kinds.setdefault(moe, []).append((share, LayerPasses(f, b, r, fl, own, w, h)))
    return {moe: _mix([(w / sum(x for x, _ in items), one) for w, one in items])
            for moe, items in kinds.items()}


def average_layer(s: TransformerShape, kinds: dict[Any, LayerPasses]) -> LayerPasses:
    """The model's average layer: its expert and dense layers (a hybrid model's blocks)
    weighted by their share."""
    if s.is_hybrid:
        return _mix([(s.hybrid_pattern.count(block) / s.layers, one)
                     for block, one in kinds.items()])
    moe_share = s.moe_layers / s.layers
    return _mix([(moe_share if moe else 1 - moe_share, one) for moe, one in kinds.items()])


def dispatcher_host_time(product: Product, cfg: TrainingConfig, eff: Efficiency,
                         shape: TransformerShape | None = None) -> float:
    """Fixed time per expert layer per forward pass that a dropless MoE dispatcher waits on
    its host: the per-expert token counts go to the CPU before buffers can be sized (the
    backward reuses them). Over NVLink-C2C
    to a Grace CPU (a superchip, ``Product.grace_host``) it is ``moe_layer_overhead_c2c_s``,
    over PCIe ``moe_layer_overhead_s``; token-drop routing padded to the capacity
    (``moe_token_drop``, Megatron-Core's drop-and-pad) needs no wait, and with partial CUDA
    graphs (``cuda_graphs``) the attention, router and preprocessing kernels before the
    sync replay from one graph launch instead of many
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


AUTOMODEL_DEEPEP_WAIT_US = 74.0
"""NeMo AutoModel's own measured host wait per MoE layer on its DeepEP path, microseconds:
"layout kernel 39 us + notify_dispatch with a CPU busy-wait ~35 us per MoE layer
(measured)" (docs/deepep_vs_hybridep_benchmark.md at NVIDIA-NeMo/Automodel 1800766, section
3.1; H100). What its validation rows give as ``dispatcher_wait_us``; an estimate names it as
the example of another framework's wait."""


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
    ag = nccl_time(Collective.ALL_GATHER, activation * share, group, eff)
    ag_grad = ag if grad_share == share else \
        nccl_time(Collective.ALL_GATHER, activation * grad_share, group, eff)
    rs = nccl_time(Collective.REDUCE_SCATTER, activation, group, eff)
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


def unbalanced_routing_load(shape: TransformerShape, ep: int, eff: Efficiency) -> float:
    """``--moe-imbalance unbalanced``: the busiest expert-parallel rank's load when nothing
    balances the routing, ``Efficiency.moe_unbalanced_load`` capped by what a rank can
    receive (1 without expert parallelism)."""
    return min(eff.moe_unbalanced_load, shape.busiest_rank_bound(ep))


def router_device(device: Device, cfg: TrainingConfig, moe: bool) -> Device:
    """The device an expert layer's router GEMM runs on: the run's, but a 16-bit one in an
    FP8 or FP4 run. The router is a plain linear outside Transformer Engine's autocast
    (Megatron-Core's ``router_gating_linear``: BF16 operands through Transformer Engine's
    general GEMM, the logits in ``moe_router_dtype``, FP32 where a recipe asks), so it
    runs at the 16-bit Tensor Core rate whatever the run's precision. (With an FP32
    ``moe_router_dtype`` its backward multiplies FP32 operands, a rate not priced apart.)"""
    return device.sixteen_bit() if moe and cfg.precision.low_precision else device


def one_layer_time(s: TransformerShape, cfg: TrainingConfig, device: Device,
                    eff: Efficiency, tp_group: Group, cp_group: Group, ep_group: Group,
                    moe: bool, window: int = 0, parts: dict[str, Num] | None = None,
                    block: str = "") -> tuple[PassSeconds, PassSeconds, PassSeconds, Num, Num, Num]:
    # the heads of this kind of layer where the full layers have their own
    s = s.attention_kind(window)
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
    shares = layer_op_shares(s)
    router_on = router_device(device, cfg, moe)
    for op in ops:
        t, _, _, op_flops, _ = op_time(op, router_on if op.name == "router" else device, eff)
        share = shares.get(op.name, 1.0)
        if op.name in shares:  # an operator of some of the layers only
            t, op_flops = t * share, op_flops * share
        if moe and (op.name in ROUTED_OPS or op.name.startswith("grouped_expert_")):
            t = t * cfg.moe_imbalance  # the busiest rank's routed tokens
        fwd = fwd + t
        by_name[op.name] = by_name.get(op.name, 0.0) + t
        flops = flops + op_flops
        if op.name.startswith("grouped_expert_") or op.name == "moe_permute":
            expert_section = expert_section + t
        if isinstance(op, Attention):
            attn_fwd = attn_fwd + t
            back = op_time(dataclasses.replace(op, backward=True), device, eff)[0] * share
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
        tp_fwd = tp_bwd = (1 if one_reduction else s.tp_reductions) * nccl_time(
            Collective.ALL_REDUCE, activation, tp_group, eff)
    if block == "M" and s.mamba is not None and s.mamba.selective:  # (0 s at TP 1)
        # a Mamba-1 block's row-parallel x_proj sums the step's rank, B and C over the group
        # (and the backward their gradients, from dt_proj's and the scan's partial sums)
        x_proj = nccl_time(Collective.ALL_REDUCE,
                           x_proj_reduce_bytes(s.mamba, tokens, element), tp_group, eff)
        tp_fwd, tp_bwd = tp_fwd + x_proj, tp_bwd + x_proj
    core_kv, core_dim = attention_core_dims(s)
    # keys and values (one vector where the keys are also the values)
    kv_bytes = (1 if s.keys_are_values else 2) * cfg.micro_batch * cfg.seq_len \
        * maximum(1, core_kv // cfg.tp) * core_dim * element
    if cfg.cp_comm_type == "a2a":
        # queries, keys and values in, the core's output back: each GPU's own tokens over
        # its tensor-parallel share of the heads, the same again in the backward pass
        heads = (2 * s.heads / cfg.tp + 2 * maximum(1, core_kv // cfg.tp))
        swapped = tokens * heads * core_dim * element
        cp_ag = nccl_time(Collective.ALL_TO_ALL, swapped, cp_group, eff)
    else:
        share = eff.cp_comm_exposed if cfg.cp_comm_type == "p2p" else 1.0
        cp_ag = share * nccl_time(Collective.ALL_GATHER, kv_bytes, cp_group, eff)
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
        cp_ag = nccl_time(Collective.ALL_TO_ALL, swapped, cp_group, eff)
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
        a2a = eff.ep_comm_exposed * 2 * cfg.moe_imbalance * nccl_time(
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
    forward = PassSeconds(fwd, exposed_fwd, part * eff.layer_overhead_s + wait + host_fwd)
    backward = PassSeconds(bwd, exposed_bwd, part * eff.layer_overhead_s + host_bwd)
    # a pass takes at least the layer's floor however little it holds (the backward twice
    # the forward's)
    if eff.layer_pass_floor_s:
        forward = PassSeconds(forward.compute, forward.comm, forward.overhead,
                        maximum(0.0, part * eff.layer_pass_floor_s - forward.total))
        backward = PassSeconds(backward.compute, backward.comm, backward.overhead,
                         maximum(0.0, 2 * part * eff.layer_pass_floor_s - backward.total))
    if cfg.recompute is Recompute.FULL:
        recompute = forward.scale(cfg.full_recompute_share(s))
    else:
        recompute = _recomputed(s, cfg.recomputed, moe, by_name, attn_fwd,
                                PassSeconds(0.0, a2a, wait + host_fwd), cfg.tp)
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
    "mlp": ("mlp_up", "mlp_down", "activation"),
    "moe": ("router", "moe_latent_down", "moe_latent_up", "grouped_expert_up",
            "grouped_expert_down", "shared_up", "shared_down", "moe_permute", "activation",
            "moe_glu_clamp", "moe_expert_bias"),
    "shared_experts": ("shared_up", "shared_down"),
}
"""The forward operators (``_layer_ops``'s names) each recompute module
runs again; ``core_attn`` is the attention core, ``mla_up_proj`` the model's
``recompute.up_projections`` and ``moe_act`` the routed experts' share of the expert layer's
activation function, all below."""


def _recomputed(s: TransformerShape, modules: tuple[str, ...], moe: bool,
                by_name: dict[str, Num], attn_fwd: Num, moe_extra: PassSeconds, tp: int = 1
                ) -> PassSeconds:
    """The recompute pass of one layer under selective recomputation of ``modules``: the
    forward time of the operators they cover; recomputing a whole expert layer (``moe``)
    also repeats its dispatch and combine and its host time (``moe_extra``). The dense-layer
    module (``mlp``) does nothing in an expert layer, the expert ones nothing in a dense
    layer. TorchTitan's op policy (``torchtitan_op``) reruns the norms, the activation
    function and its recomputed matrix multiplies, each priced as its share of the fused
    operator it belongs to (the key projection's share of the QKV GEMM's width on one of
    ``tp`` GPUs, the up projection half of a gated MLP's)."""
    if TORCHTITAN_OP in modules:
        return PassSeconds(_torchtitan_op_time(s, by_name, tp), 0.0)
    names: set[str] = set()
    compute: Num = attn_fwd if "core_attn" in modules else 0.0
    for module in modules:
        if (module == "mlp" and moe) or (module in ("moe", "shared_experts") and not moe):
            continue
        names.update(up_projections(s) if module == "mla_up_proj"
                     else RECOMPUTED_OPS.get(module, ()))
    if moe and "moe_act" in modules and "moe" not in modules:
        routed = s.experts_per_token / (s.experts_per_token + s.shared_experts)
        compute = compute + routed * by_name.get("activation", 0.0) \
            + by_name.get("moe_glu_clamp", 0.0)
    # a recomputed GEMM's LoRA adapters (``lora_adapter_ops``) run again with it
    compute = compute + sum((t for name, t in by_name.items()
                             if name.split(".")[0] in names), 0.0)
    extra = moe_extra if moe and "moe" in modules else PassSeconds()
    return PassSeconds(compute, 0.0) + extra


def _torchtitan_op_time(s: TransformerShape, by_name: dict[str, Num], tp: int) -> Num:
    """Seconds of one layer's recompute pass under TorchTitan's op policy: the norms, the
    activation function and the residual adds again, and each recomputed matrix multiply
    as its share of its fused operator's time (widths on one of ``tp`` GPUs, at least one
    KV head each, as ``attention_projections`` splits them)."""
    widths = {mm.name: mm.n for mm in block_matmuls(s)}
    heads, kv = s.heads // tp, max(1, s.n_kv_heads // tp)
    widths.update(q=heads * s.d_head, k=kv * s.d_head, v=kv * s.d_value)
    fused: dict[str, int] = {}
    for mm in block_matmuls(s):
        fused[mm.operator] = fused.get(mm.operator, 0) + widths[mm.name]
    time: Num = sum((by_name.get(name, 0.0) for name in ("norms", "activation", "residuals")),
                    0.0)
    for mm in torchtitan_op_split(s)[1]:
        time = time + by_name.get(mm.operator, 0.0) * widths[mm.name] / fused[mm.operator]
    return time
