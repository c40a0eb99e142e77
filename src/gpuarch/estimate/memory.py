"""Memory per GPU for training: weights, gradients, optimizer states, activations, other.

Activation sizes follow Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models" (section 4), generalised from their GPT block to GQA and SwiGLU, with
fused (FlashAttention-style) attention so no score matrix is stored, and no dropout masks.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gpuarch.perf.precision import Precision
from gpuarch.workloads.shape import FfnKind, TransformerShape

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


def bytes_per_param(precision: Precision) -> BytesPerParam:
    """What each parameter costs when training at ``precision``. BF16 and FP8 keep FP32 main
    gradients (Megatron-LM forces FP32 gradient accumulation and reduction with BF16); FP16
    reduces FP16 gradients (Megatron-LM's default without
    --accumulate-allreduce-grads-in-fp32; loss scaling keeps them in range); FP32 and TF32
    train FP32 weights with no separate master copy (4 + 4 + 8 bytes)."""
    if precision is Precision.FP16:
        return BytesPerParam(gradients=2.0)
    if precision in (Precision.FP32, Precision.TF32):
        return BytesPerParam(weights=4.0, gradients=4.0, optimizer=8.0)
    return BYTES_PER_PARAM


def activation_bytes_per_layer(s: TransformerShape, micro_batch: int, seq: int, tp: int,
                               sequence_parallel: bool, recompute: Recompute,
                               element: int = 2, *, fused_attention: bool = True) -> float:
    """Bytes of activations one layer keeps for the backward pass, per GPU.

    ``seq`` is the sequence length this GPU holds (after context parallelism). Unfused
    attention without selective recomputation also keeps the softmax output, the dropout
    mask and the dropout output: 5 a s^2 b bytes (Korthikanti et al. 2022, eq. 1).
    """
    sbh = 1.0 * seq * micro_batch * s.hidden * element
    if recompute is Recompute.FULL:
        return sbh / (tp if sequence_parallel else 1)
    tokens = 1.0 * seq * micro_batch * element
    q = tokens * s.heads * s.d_head
    kv = 2 * tokens * s.n_kv_heads * s.d_head
    attn_out = tokens * s.heads * s.d_head  # input of the output projection (= saved O)
    # norm inputs and norm outputs of both blocks: replicated unless sequence parallel
    replicated = 4 * sbh
    width = s.d_expert * (s.experts_per_token + s.shared_experts) if s.is_moe else s.d_ffn
    mlp_inner = tokens * width * (3 if s.ffn_kind is FfnKind.SWIGLU else 2)
    # With fused attention nothing quadratic in seq is stored, so NONE and SELECTIVE keep
    # the same tensors; SELECTIVE only costs time (the attention core runs again).
    sharded = q + kv + attn_out + mlp_inner
    if not fused_attention and recompute is Recompute.NONE:
        sharded += 5.0 * s.heads * seq * seq * micro_batch
    return replicated / (tp if sequence_parallel else 1) + sharded / tp
