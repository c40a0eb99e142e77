"""Memory per GPU for training: weights, gradients, optimizer states, activations, other.

Activation sizes follow Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models" (section 4), generalised from their GPT block to GQA and SwiGLU, with
fused (FlashAttention-style) attention so no score matrix is stored, and no dropout masks.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum
from typing import cast

from gpuarch.estimate.inkling_ops import (
    loop_message_activation_bytes,
    relative_bias_activation_elements,
)
from gpuarch.estimate.recompute import DEFAULT_MODULES, TORCHTITAN_OP, torchtitan_op_split
from gpuarch.perf.num import where
from gpuarch.perf.precision import Precision
from gpuarch.workloads.shape import TransformerShape

__all__ = ["BYTES_PER_PARAM", "BytesPerParam", "Recompute", "activation_bytes_per_layer",
           "bytes_per_param"]


class Recompute(Enum):
    """Activation recomputation policy."""

    NONE = "none"  # store every activation the backward pass needs
    SELECTIVE = "selective"  # recompute the attention core (Korthikanti et al. 2022)
    FULL = "full"  # store only each layer's input; recompute the layer in backward


@dataclass(frozen=True)
class BytesPerParam:
    """Mixed-precision Adam: what each parameter costs in bytes, before any sharding."""

    weights: float = 2.0  # 16-bit compute copy
    gradients: float = 4.0  # FP32 main gradients (Megatron accumulates and reduces in FP32)
    optimizer: float = 12.0  # FP32 master weights + Adam first and second moments


BYTES_PER_PARAM = BytesPerParam()


def bytes_per_param(precision: Precision, *, fp8_params: bool = False,
                    bf16_grads: bool = False, bf16_optimizer: bool = False) -> BytesPerParam:
    """What each parameter costs when training at ``precision``. BF16 and FP8 keep FP32 main
    gradients (Megatron-LM forces FP32 gradient accumulation and reduction with BF16); FP16
    reduces FP16 gradients (Megatron-LM's default without
    --accumulate-allreduce-grads-in-fp32; loss scaling keeps them in range); FP32 and TF32
    train FP32 weights with no separate master copy (4 + 4 + 8 bytes).

    ``fp8_params``: the compute copy of the weights is kept in FP8, 1 byte (Megatron's
    fp8_param_gather; the optimizer keeps its FP32 master copy). ``bf16_grads``: gradients
    are accumulated and reduced in BF16, 2 bytes (Megatron's grad_reduce_in_fp32 off).
    ``bf16_optimizer``: no FP32 master copy; BF16 weights, gradients and Adam moments (2 + 2
    + 4 bytes: PyTorch FSDP2 with a model held in BF16 and a plain Adam).
    """
    if precision is Precision.FP16:
        base = BytesPerParam(gradients=2.0)
    elif precision in (Precision.FP32, Precision.TF32):
        return BytesPerParam(weights=4.0, gradients=4.0, optimizer=8.0)
    else:
        base = BYTES_PER_PARAM
    if bf16_optimizer:
        base = BytesPerParam(weights=2.0, gradients=2.0, optimizer=4.0)
    elif bf16_grads:
        base = BytesPerParam(weights=base.weights, gradients=2.0, optimizer=base.optimizer)
    if fp8_params:
        base = BytesPerParam(weights=1.0, gradients=base.gradients, optimizer=base.optimizer)
    return base


def activation_bytes_per_layer(s: TransformerShape, micro_batch: int, seq: int, tp: int,
                               sequence_parallel: bool, recompute: Recompute,
                               element: int = 2, *, fused_attention: bool = True,
                               quantized_inputs: bool = False,
                               modules: Collection[str] = (),
                               adapted: Collection[str] | None = None,
                               offload: Collection[str] = (),
                               offload_min_elements: float = 0.0) -> float:
    """Bytes of activations one layer keeps for the backward pass, per GPU.

    ``seq`` is the sequence length this GPU holds (after context parallelism). Unfused
    attention without selective recomputation also keeps the softmax output, the dropout
    mask and the dropout output: 5 a s^2 b bytes (Korthikanti et al. 2022, eq. 1).

    ``quantized_inputs`` (FP8 and NVFP4 training): the inputs that the GEMMs keep only for
    their weight gradients are saved as the 8-bit copies the GEMMs ran on, as Transformer
    Engine's linear layers do (transformer_engine/pytorch/module/linear.py and
    layernorm_linear.py keep the quantized input, column-wise data only): the two norm
    outputs and the down projection's input take 1 byte, and the attention output is kept
    twice, in 16 bits by the attention kernel and in 8 bits as the output projection's
    input. Without it every saved tensor takes ``element`` bytes.

    ``modules`` (with selective recomputation; ``estimate/recompute.py``, default the
    attention core) are not kept: ``layernorm`` drops the two norm outputs, ``mla_up_proj``
    keeps the latents instead of the full-head queries, keys and values (DeepSeek-V4: the
    query's latent instead of its full width, and no key-value head), ``mlp`` drops the
    dense layers' MLP inside, ``moe`` the expert layers' (routed and shared), ``moe_act``
    the routed experts' activation output, ``shared_experts`` the shared experts' inside.
    A model with both kinds of layer is the mean of them, weighted by their counts; a
    hybrid model is the mean of its blocks (``_hybrid_block_mean``). DeepSeek-V4: its
    queries and attention output at the heads' full width, one key-value head, and each
    block's hyper-connection input streams; the compressors' and indexer's activations are
    not counted.

    ``adapted`` (LoRA fine-tuning, ``estimate/lora.py``; None when every weight is
    trained): a frozen linear layer keeps no input, since its backward needs only its
    weight for the data gradient (Transformer Engine's linear layers save their input only
    if ``weight.requires_grad``); an adapted one's input is kept in 16 bits by its adapter,
    for the adapter's weight gradient. The output projection's input is the attention
    output the attention kernel keeps anyway.

    The routed experts keep their first projection's input, the dispatched tokens (top-k
    copies of each token at the experts' width, the hidden or latent one), for its weight
    gradient: Transformer Engine's GroupedLinear saves it, in the 8-bit copy the GEMM ran on
    under FP8 (not at all when the experts are frozen under LoRA); the first projection's
    output (the activation's input) is kept in 16 bits.

    ``offload`` (Megatron-Core's fine-grained activation offloading, ``offload_modules``)
    leaves out what the named modules keep, which goes to host memory after the forward
    pass and comes back for the backward (``estimate_training`` charges the copies):
    ``attn_norm`` and ``mlp_norm`` the norms' inputs (the residual streams), ``qkv_linear``
    the attention norm's output, ``core_attn`` the queries, keys and values,
    ``attn_proj`` the attention output, ``expert_fc1`` the routed experts' first input,
    ``moe_act`` their first output, ``fused_group_mlp`` everything the fused grouped MLP
    keeps (both inputs and the first output); a tensor of fewer than
    ``offload_min_elements`` elements on this GPU stays (``min_offloaded_tensor_size``).

    A model whose full layers have heads of their own (``full_attention``), or with
    KV-shared layers (``kv_shared_layers``): the mean of its kinds of layers, weighted by
    their counts.
    """
    if s.full_attention is not None or s.kv_shared_layers:
        return sum(n / s.layers * activation_bytes_per_layer(
            view, micro_batch, seq, tp, sequence_parallel, recompute, element,
            fused_attention=fused_attention, quantized_inputs=quantized_inputs,
            modules=modules, adapted=adapted, offload=offload,
            offload_min_elements=offload_min_elements)
            for _, n, view in s.attention_kinds())
    sbh = 1.0 * seq * micro_batch * s.hidden * element
    # hyper-connections (DeepSeek-V4's mHC) and AltUp (Gemma 3n): a layer's input is its
    # residual streams
    streams = max(1, s.hyper_connections, s.altup_streams)
    if recompute is Recompute.FULL:
        return streams * sbh / (tp if sequence_parallel else 1)
    off = set(offload)
    # a replicated tensor's share of it on this GPU, and a TP-split one's
    rep = tp if sequence_parallel else 1

    def kept_unless(names: set[str], nbytes: float, per_gpu_bytes_per_element: float
                    ) -> float:
        """``nbytes`` unless a named module is offloaded and the tensor, at
        ``per_gpu_bytes_per_element`` (its bytes per element times the split it gets on
        this GPU), holds at least ``offload_min_elements`` elements here."""
        if not off & names:
            return nbytes
        # (arrays where the advisor searches layouts; nothing kept by a frozen GEMM: 0)
        per = per_gpu_bytes_per_element
        return cast(float, where((per > 0) & (nbytes >= offload_min_elements * per),
                                 0.0, nbytes))

    dropped = set(modules or DEFAULT_MODULES) if recompute is Recompute.SELECTIVE else set()
    tokens = 1.0 * seq * micro_batch * element
    if TORCHTITAN_OP in dropped:
        return _torchtitan_op_bytes(s, tokens, sbh, tp, sequence_parallel)
    # the bytes of a GEMM input kept for the weight gradient, per element: of the QKV, up
    # and down projections'
    kept = 1.0 / element if quantized_inputs else 1.0
    if adapted is None:
        kept_qkv = kept_up = kept_down = kept
    else:
        kept_qkv, kept_up, kept_down = (1.0 if module in adapted else 0.0 for module in
                                        ("linear_qkv", "linear_fc1", "linear_fc2"))
    q = tokens * s.heads * s.d_head
    # a layer that reads an earlier layer's keys and values keeps none of its own
    kv = 0.0 if s.reuses_kv else tokens * s.n_kv_heads * s.kv_width
    # bytes an element of them (the latents kept instead are GEMM inputs, 8-bit under FP8)
    q_each = kv_each = float(element)
    if "mla_up_proj" in dropped and s.mla is not None:
        # the up-projections' inputs, the (normed) latents, are what is kept
        if s.mla.q_lora_rank:
            q, q_each = tokens * s.mla.q_lora_rank * kept, element * kept
        kv, kv_each = tokens * s.mla.kv_lora_rank * kept, element * kept
    elif "mla_up_proj" in dropped and s.compressed is not None:
        # DeepSeek-V4: the query's normed latent is kept; the key-value projection's input
        # is the layer's normed input, kept already
        q, q_each = tokens * s.compressed.q_lora_rank * kept, element * kept
        kv = 0.0
    # input of the output projection (= saved O); differential attention's two calls each
    # keep their own output (the combination's norm input and output not counted apart)
    attn_out = tokens * s.heads * s.d_value * s.attention_calls
    q = kept_unless({"core_attn"}, q, q_each * tp)
    kv = kept_unless({"core_attn"}, kv, kv_each * tp)
    attn_out = kept_unless({"attn_proj"}, attn_out, element * tp)
    # norm inputs (16-bit) and outputs (the QKV and up projections' inputs) of both blocks:
    # replicated unless sequence parallel
    attn_in, mlp_in = (kept_unless({name}, sbh, element * rep)
                       for name in ("attn_norm", "mlp_norm"))
    qkv_in = kept_unless({"qkv_linear"}, sbh * kept_qkv, element * kept_qkv * rep)
    replicated = attn_in + mlp_in + (0.0 if "layernorm" in dropped else qkv_in + sbh * kept_up)
    if s.hyper_connections:
        # each block keeps its input streams for the mixing's backward
        replicated += 2 * s.hyper_connections * sbh
    if s.altup_streams:
        # AltUp keeps the layer's input streams (the prediction's backward) and the
        # predictions (the correction's); LAuReL its normed output
        replicated += 2 * s.altup_streams * sbh
    if s.laurel_rank:
        replicated += sbh
    if s.loop_gate_rank:
        # a looped layer's message gates and messages in its runs after the first (their
        # share of the runs), FP32 mostly, whatever the activations' format
        replicated += seq * micro_batch * loop_message_activation_bytes(s) \
            * s.loop_repeat_share
    # an MLP keeps the up projection's output (for the activation's backward) and the
    # activation's output (the down projection's input)
    up = 2 if s.ffn_kind.gated else 1
    mlp_inner = 0.0 if "mlp" in dropped else tokens * s.mean_mlp_width * (up + kept_down)
    dense_inner = mlp_inner
    if s.is_moe:
        routed = 0.0
        if "moe" not in dropped:
            width = s.experts_per_token * tokens
            fused = {"fused_group_mlp"}
            routed = (
                # the first projection's input (the dispatched tokens), output and the
                # second's input
                kept_unless(fused | {"expert_fc1"},
                            width * (s.moe_latent or s.hidden) * kept_up, element * kept_up * tp)
                + kept_unless(fused | {"moe_act"}, width * s.d_expert * up, element * tp)
                + (0.0 if "moe_act" in dropped else kept_unless(
                    fused, width * s.d_expert * kept_down, element * kept_down * tp)))
        shared = 0.0 if dropped & {"moe", "shared_experts"} else \
            tokens * s.d_expert * s.shared_experts * (up + kept_down)
        if s.moe_latent and "moe" not in dropped:
            # latent experts: the projection back to the hidden size keeps its latent input
            # (the projection down reads the norm output, kept already)
            routed += tokens * s.moe_latent * kept
        moe_share = s.moe_layers / s.layers
        mlp_inner = moe_share * (routed + shared) + (1 - moe_share) * mlp_inner
    # With fused attention nothing quadratic in seq is stored, so recomputing the attention
    # core only costs time (the core runs again)
    sharded = q + kv + attn_out + mlp_inner
    if s.relative_bias:
        # Inkling's relative position bias: its projection and its table (the score
        # modifier's input), kept whatever is recomputed of the core
        sharded += tokens * relative_bias_activation_elements(s, s.heads)
    if s.short_conv_taps:
        # Inkling's short convolutions keep their inputs: the keys and values before theirs,
        # and the attention's and MLP's outputs (hidden-wide, replicated unless sequence
        # parallel)
        sharded += tokens * s.n_kv_heads * (s.d_head + s.d_value)
        replicated += 2 * sbh
    if quantized_inputs and adapted is None:
        sharded += attn_out * kept
    unfused = 0.0
    if not fused_attention and "core_attn" not in dropped:
        unfused = 5.0 * s.heads * seq * seq * micro_batch
    if s.is_hybrid:
        # a shared block's call (Zamba's) keeps its adapters' rank-wide inputs to their up
        # projections and its output projection's input; its attention's norm is as wide
        # as the attention's input (2 x hidden)
        wide = s.attention_in / s.hidden
        r = s.adapter_rank
        calls_own = (tokens * (3 * r if s.adapter_attention else 0),
                     tokens * (r + s.hidden * kept)) if s.shared_blocks else (0.0, 0.0)
        return _hybrid_block_mean(s, tokens, tp, sequence_parallel, kept, dropped, {
            "*": q + kv + attn_out * (1 + (kept if quantized_inputs else 0.0)) + unfused
            + calls_own[0],
            "-": dense_inner + calls_own[1], "E": (routed + shared) if s.is_moe else 0.0},
            {"*": (wide * attn_in, wide * qkv_in), "-": (mlp_in, sbh * kept),
             "E": (mlp_in, sbh * kept)})
    return replicated / (tp if sequence_parallel else 1) + (sharded + unfused) / tp


def _torchtitan_op_bytes(s: TransformerShape, tokens: float, sbh: float, tp: int,
                         sequence_parallel: bool) -> float:
    """Bytes one dense block keeps under TorchTitan's op policy (``torchtitan_op``): the
    block's input (the checkpoint's), the fused attention's output and the outputs of the
    matrix multiplies it keeps (a Llama block's q, v, gate and down projections), in the
    activations' precision (a Float8 GEMM writes a 16-bit output). Column-parallel outputs
    and the attention output are split over TP; the input and full-width outputs are
    replicated unless sequence parallel (the kept reduce-scatter's output)."""
    kept = torchtitan_op_split(s)[0]
    sharded = tokens * s.heads * s.d_value + sum(tokens * mm.n for mm in kept
                                                if mm.column_parallel)
    replicated = sbh + sum(tokens * mm.n for mm in kept if not mm.column_parallel)
    return replicated / (tp if sequence_parallel else 1) + sharded / tp


def _hybrid_block_mean(s: TransformerShape, tokens: float, tp: int, sequence_parallel: bool,
                       kept: float, dropped: set[str], inside: dict[str, float],
                       norms: dict[str, tuple[float, float]]) -> float:
    """A hybrid model's mean block: each block keeps its norm's input and (unless
    recomputed) output, replicated unless sequence parallel, and what its own part keeps,
    split over TP (``inside`` for attention, MLP and expert blocks). A Mamba-2 block keeps
    the input projection's output (z, x, B, C and dt, which the fused scan saves; it
    recomputes the convolution in its backward; Kimi Delta Attention's up-projected decay and
    gate beside), the scan's output (the gated norm's input)
    and the norm's output (the output projection's input, 8-bit under FP8). ``norms``: each
    kind's norm input and output as offloading leaves them (a Mamba-2 block's are not
    offloaded: Megatron-Core names no module of it)."""
    m = s.mamba
    if m is not None:
        sbh = tokens * s.hidden
        # Mamba-1 (mamba_ssm's mamba_inner_fn) also keeps the convolution's output, x_proj's
        # (the step's rank, B and C) and the step; its gated output stands for the norm's
        selective = 2 * m.inner + m.x_proj_width if m.selective else 0
        inside = {**inside, "M": tokens * (m.in_proj_width + m.gate_up_width + selective
                                           + m.inner * (1 + kept))}
        norms = {**norms, "M": (sbh, sbh * kept)}
    total = sum(s.hybrid_pattern.count(block) * (
        (norms[block][0] + (0.0 if "layernorm" in dropped else norms[block][1]))
        / (tp if sequence_parallel else 1) + inside[block] / tp)
        for block in set(s.hybrid_pattern))
    return total / s.layers
