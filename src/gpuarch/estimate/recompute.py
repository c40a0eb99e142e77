"""Selective recomputation by module: which parts of a layer a run recomputes.

Megatron-Core's ``recompute_modules`` (with ``recompute_granularity = "selective"``; its
TransformerConfig documents the choices) names the submodules whose activations are not kept
for the backward pass but recomputed from their inputs: ``core_attn`` (the default), the
norms (``layernorm``), multi-head latent attention's up-projections (``mla_up_proj``; in
DeepSeek-V4's attention the query's up-projection and the key-value projection), the
dense layers' MLP (``mlp``), the whole expert layer (``moe``), the routed experts'
activation function (``moe_act``) and the shared experts (``shared_experts``). Megatron
runs ``layernorm``, ``moe_act`` and ``mla_up_proj`` as output-discarding checkpoints (the
module's output is freed once the next module has used it and recomputed before the
backward needs it) and the others as ordinary checkpoints (only the module's input is
kept). What each saves is in ``estimate/memory.py`` (``activation_bytes_per_layer``), what
each costs in ``estimate/training_layers.py`` (the recompute pass of a layer).

One more policy is not Megatron's: ``torchtitan_op``, TorchTitan's per-op selective
checkpointing (``--activation_checkpoint.selective_ac_option op``). It wraps each block in
PyTorch's selective checkpoint with a policy that keeps the outputs of the compute ops on
its save list (matrix multiplies, the fused attention, reduce-scatters) but recomputes every
second ``aten.mm`` of the block, counted in the order the forward runs them, along with
everything not on the list (norms, rotary embedding, activation function, residual adds):
``_apply_op_sac`` / ``_get_custom_policy`` in torchtitan's ``parallelize`` code, where the
comment reads that it saves all compute ops' outputs except every second mm. A Llama block
runs q, k, v, o, gate (w1), up (w3), down (w2): k, o and up are recomputed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuarch.errors import GpuarchError, check_names
from gpuarch.workloads.flops import attention_projections, forward_flops_per_token
from gpuarch.workloads.params import count_params, mlp_params, routed_expert_params
from gpuarch.workloads.shape import TransformerShape

__all__ = ["DEFAULT_MODULES", "RECOMPUTE_MODULES", "TORCHTITAN_OP", "BlockMatmul",
           "block_matmuls", "check_recompute_modules", "recompute_flops_per_token",
           "selective_modules", "torchtitan_op_split", "up_projections"]

RECOMPUTE_MODULES: dict[str, str] = {
    "core_attn": "the attention core (QK^T, softmax, AV); what --recompute selective "
                 "recomputes when no module is named",
    "layernorm": "both norms (their outputs are discarded and recomputed)",
    "mla_up_proj": "multi-head latent attention's query and key/value up-projections "
                   "(their outputs are discarded; the latents are kept); DeepSeek-V4's "
                   "query up-projection and key-value projection",
    "mlp": "the dense layers' MLP (only its input is kept)",
    "moe": "the whole expert layer: router, dispatch and combine, experts",
    "moe_act": "the routed experts' activation function (its output is discarded)",
    "shared_experts": "the shared experts (only their input is kept)",
    "torchtitan_op": "TorchTitan's per-op policy (selective_ac_option 'op'): every second "
                     "matrix multiply of a block (a Llama block's k, o and up projections) "
                     "with the norms and activation function; given alone, dense blocks only",
}
"""Megatron-Core's recompute_modules and what each recomputes, and TorchTitan's op policy."""

TORCHTITAN_OP = "torchtitan_op"
"""TorchTitan's per-op selective checkpointing, a whole policy rather than a module."""


@dataclass(frozen=True)
class BlockMatmul:
    """One matrix multiply of a dense block, per token: ``n`` outputs from ``k`` inputs
    (whole model width, before tensor parallelism), the fused operator of
    ``estimate/training_layers.py`` it is part of (``qkv``, ``attn_out``, ``mlp_up``,
    ``mlp_down``), and whether its output is split over tensor-parallel GPUs by width
    (column-parallel) or is a full-width partial sum (row-parallel)."""

    name: str
    operator: str
    n: int
    k: int
    column_parallel: bool

DEFAULT_MODULES: tuple[str, ...] = ("core_attn",)
"""What ``--recompute selective`` recomputes when no module is named (Megatron's default)."""

_NEEDS_MOE = ("moe", "moe_act", "shared_experts")


def block_matmuls(s: TransformerShape) -> tuple[BlockMatmul, ...]:
    """A dense block's matrix multiplies in the order TorchTitan's Llama forward runs them:
    the query, key and value projections (three ``nn.Linear``), the output projection, then
    a gated MLP's gate (w1), up (w3) and down (w2) projections (``w2(silu(w1(x)) * w3(x))``),
    or a plain MLP's up and down (no value projection where keys are also the values)."""
    q, kv = s.heads * s.d_head, s.n_kv_heads * s.d_head
    h, f = s.hidden, s.d_ffn
    mms = [BlockMatmul("q", "qkv", q, h, True), BlockMatmul("k", "qkv", kv, h, True)]
    if not s.keys_are_values:
        mms.append(BlockMatmul("v", "qkv", s.n_kv_heads * s.d_value, h, True))
    mms.append(BlockMatmul("o", "attn_out", h, s.heads * s.d_value, False))
    if s.ffn_kind.gated:
        mms += [BlockMatmul("gate", "mlp_up", f, h, True),
                BlockMatmul("up", "mlp_up", f, h, True)]
    else:
        mms.append(BlockMatmul("up", "mlp_up", f, h, True))
    mms.append(BlockMatmul("down", "mlp_down", h, f, False))
    return tuple(mms)


def torchtitan_op_split(s: TransformerShape) -> tuple[tuple[BlockMatmul, ...],
                                                      tuple[BlockMatmul, ...]]:
    """The block's matrix multiplies TorchTitan's op policy keeps (the 1st, 3rd, ...) and
    those it recomputes (the 2nd, 4th, ...)."""
    mms = block_matmuls(s)
    return mms[0::2], mms[1::2]


def selective_modules(shape: TransformerShape) -> tuple[str, ...]:
    """What selective recomputation recomputes when no module is named: the attention core
    (Megatron-Core's default), except in DeepSeek-V4's compressed attention, whose core
    Megatron-Core cannot recompute; there ``mla_up_proj``, as its recipes recompute."""
    return ("mla_up_proj",) if shape.compressed is not None else DEFAULT_MODULES


def up_projections(shape: TransformerShape) -> tuple[str, ...]:
    """The attention projections (``attention_projections``' names) that ``mla_up_proj``
    recomputes: multi-head latent attention's query and key/value up-projections (the
    latents are kept); in DeepSeek-V4's attention, which Megatron-Core builds with the same
    checkpoint (``DSv4HybridAttention``, ``recompute_up_proj``), the query's up-projection
    and the one key-value head's projection from the hidden state (the normed query latent
    and the layer's normed input are kept). None without either attention."""
    if shape.compressed is not None:
        return ("q_up", "kv_down")
    if shape.mla is not None:
        return ("q_up", "kv_up")
    return ()


def check_recompute_modules(modules: Iterable[str], shape: TransformerShape | None = None
                            ) -> tuple[str, ...]:
    """The modules as a tuple without repeats, or an error naming ``--recompute-modules``
    for a name Megatron does not know (with the closest one) or one the model has nothing
    for (expert modules without experts, ``mla_up_proj`` without latent attention, ``mlp``
    in a model whose every layer is an expert layer)."""
    out = check_names("--recompute-modules", modules, RECOMPUTE_MODULES)
    if not out:
        raise GpuarchError("--recompute-modules: expected at least one of "
                           f"{', '.join(RECOMPUTE_MODULES)}")
    if TORCHTITAN_OP in out and len(out) > 1:
        raise GpuarchError(f"--recompute-modules: {TORCHTITAN_OP!r} is a whole policy "
                           f"(TorchTitan's per-op checkpointing); give it alone, not with "
                           f"{', '.join(n for n in out if n != TORCHTITAN_OP)}")
    if shape is not None and TORCHTITAN_OP in out:
        kind = ("hybrid recurrent blocks" if shape.is_hybrid else "expert layers"
                if shape.is_moe else "multi-head latent attention" if shape.mla is not None
                else "")
        if kind:
            raise GpuarchError(f"--recompute-modules: {TORCHTITAN_OP!r} is modelled for "
                               f"dense transformer blocks; {shape.name} has {kind}")
    if shape is not None and shape.compressed is not None and "core_attn" in out:
        # Megatron-Core's DSv4HybridAttention asserts "Checkpoint core attention is not
        # supported in DSv4 Hybrid Attention"
        raise GpuarchError(f"--recompute-modules: 'core_attn' cannot be recomputed in "
                           f"{shape.name}'s compressed attention (Megatron-Core's "
                           "DeepSeek-V4 attention refuses it); its recipes recompute "
                           "'mla_up_proj'")
    if shape is not None:
        for name in out:
            reason = ""
            if name in _NEEDS_MOE and not shape.is_moe:
                reason = "has no expert layers"
            elif name == "shared_experts" and not shape.shared_experts:
                reason = "has no shared experts"
            elif name == "mla_up_proj" and not up_projections(shape):
                reason = "has no multi-head latent attention"
            elif name == "mlp" and shape.is_moe and shape.moe_layers == shape.layers:
                reason = "has no dense MLP layers (every layer is an expert layer: 'moe')"
            if reason:
                raise GpuarchError(f"--recompute-modules: {name!r} recomputes nothing here: "
                                   f"{shape.name} {reason}")
    return out


def recompute_flops_per_token(shape: TransformerShape, seq_len: int,
                              modules: Iterable[str]) -> float:
    """Forward FLOPs per token the recomputed modules run again (matrix work only: norms and
    activation functions are memory-bound and count none), for the hardware-FLOPs count."""
    chosen = set(modules)
    fwd = forward_flops_per_token(shape, seq_len)
    flops = fwd.attention_core if "core_attn" in chosen else 0.0
    if "mlp" in chosen:
        flops += 2.0 * sum(n * mlp_params(shape, width) for width, n, _ in shape.mlp_kinds())
    if shape.is_moe:
        expert = 2.0 * shape.moe_layers * mlp_params(shape, shape.d_expert)
        if "moe" in chosen:
            pc = count_params(shape.unrolled_view())  # (a looped layer's at each run)
            flops += (2.0 * shape.moe_layers * shape.experts_per_token
                      * routed_expert_params(shape) + expert * shape.shared_experts
                      + 2.0 * (pc.router + pc.moe_latent))
        elif "shared_experts" in chosen:
            flops += expert * shape.shared_experts
    if TORCHTITAN_OP in chosen:
        flops += 2.0 * shape.layers * sum(mm.n * mm.k for mm in torchtitan_op_split(shape)[1])
    if "mla_up_proj" in chosen:
        ups = up_projections(shape)
        flops += 2.0 * shape.layers * sum(n * k for name, n, k in attention_projections(shape)
                                          if name in ups)
    return float(flops)
