"""Read the config.json of Zyphra's Zamba (``zamba``) and Zamba2 (``zamba2``): Mamba blocks
with a shared transformer block called after every few of them (``TransformerShape.
shared_blocks``), as Transformers 5.25 builds them (modeling_zamba.py, modeling_zamba2.py),
whose config classes' defaults fill what a config leaves out.

Each layer of ``layers_block_type`` is a Mamba block ("mamba", or "linear_attention" as
Transformers 5 renames it) or a hybrid one ("hybrid"): a call of the shared block (an
attention over the layer's input beside the token embedding, 2 x hidden wide, with its norm
as wide; then an MLP with its norm, no residual in between), the call's own hidden x hidden
projection, added to the Mamba block's input, then the Mamba block. Read as blocks: "M" for
a Mamba layer, "*-M" for a hybrid one. Zamba's one block is called by every hybrid layer;
Zamba2's ``num_mem_blocks`` blocks in turn, each call with LoRA adapters of its own
(``adapter_rank``) on the MLP's gate and up projections and, with
``use_shared_attention_adapter``, on the query, key and value projections.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.workloads.hf import _decoder_fields as decoder_fields
from gpuarch.workloads.hf import _flag as flag
from gpuarch.workloads.hf import _get as get
from gpuarch.workloads.hf import glu_kind
from gpuarch.workloads.shape import FfnKind, MambaShape, Position, TransformerShape

__all__ = ["SHARED_BLOCK_FAMILIES"]

_MAMBA, _HYBRID = ("mamba", "linear_attention"), "hybrid"

_ZAMBA2_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000, "max_position_embeddings": 4096, "hidden_size": 2560,
    "num_hidden_layers": 54, "mamba_d_state": 64, "mamba_d_conv": 4, "mamba_expand": 2,
    "mamba_ngroups": 1, "n_mamba_heads": 8, "use_conv_bias": True, "add_bias_linear": False,
    "hidden_act": "gelu", "num_attention_heads": 32, "num_mem_blocks": 1,
    "use_shared_attention_adapter": False, "adapter_rank": 128, "use_mem_rope": False,
    "use_long_context": False, "tie_word_embeddings": True}
"""Zamba2Config's defaults (Transformers 5.25, configuration_zamba2.py: Zamba2-2.7B's sizes)
for the keys read here."""

_ZAMBA2_LAYERS = (["M"] + (["M"] * 5 + ["H"]) * 7 + ["M"] * 4 + ["H"] + ["M"] * 3 + ["H"]
                  + ["M"] * 2)
"""Zamba2Config's layers where a config gives none (its 54 layers, nine of them hybrid)."""

_ZAMBA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000, "tie_word_embeddings": True, "hidden_size": 3712,
    "intermediate_size": 14848, "num_hidden_layers": 76, "num_attention_heads": 16,
    "num_key_value_heads": 16, "n_mamba_heads": 2, "hidden_act": "gelu",
    "max_position_embeddings": 4096, "attn_layer_period": 6, "attn_layer_offset": 4,
    "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": "auto",
    "mamba_conv_bias": True, "mamba_proj_bias": False}
"""ZambaConfig's defaults (Transformers 5.25, configuration_zamba.py: Zamba-7B-v1's sizes)
for the keys read here."""


def _ffn_kind(cfg: dict[str, Any]) -> FfnKind:
    """The shared MLP's gated activation: ``hidden_act`` on the gate (GELU in the published
    models; SiLU gives SwiGLU)."""
    act = cfg.get("hidden_act")
    kind = glu_kind(act)
    if kind is None:
        raise GpuarchError(f"hidden_act: expected a GELU or SiLU (the shared MLP's gate), got "
                           f"{act!r}")
    return kind


def _check_tied(cfg: dict[str, Any], path: Path) -> None:
    """Refuse an untied config: Transformers 5.25 ties the shared blocks' calls only when it
    ties the embedding (``get_expanded_tied_weights_keys`` returns no tie at all without
    ``tie_word_embeddings``), so it would build a copy of the block for every call; vLLM
    shares the blocks and ties the head whatever the config says. The published Zamba and
    Zamba2 configs tie."""
    if not get(cfg, path, "tie_word_embeddings"):
        raise GpuarchError("tie_word_embeddings: false is not read (Transformers 5.25 then "
                           "ties neither the LM head nor the shared blocks, building a copy of "
                           "the block for every call; vLLM ties both; the published configs "
                           "tie them)")


def _pattern(cfg: dict[str, Any], layers: int, default: list[str] | None) -> str:
    """The blocks of ``layers_block_type`` (or ``layer_types``, its other name): "M" a Mamba
    layer, "*-M" a hybrid one; ``default`` (the config class's, "M" and "H") where the
    config gives none."""
    kinds = cfg.get("layers_block_type", cfg.get("layer_types"))
    if kinds is None:
        if default is None or len(default) != layers:
            raise GpuarchError(f"layers_block_type: needed for {layers} layers "
                               "(num_hidden_layers), whose config class's own list does not "
                               "have that many")
        return "".join("M" if k == "M" else "*-M" for k in default)
    if not isinstance(kinds, list) or len(kinds) != layers or any(
            not isinstance(k, str) or k not in (*_MAMBA, _HYBRID) for k in kinds):
        raise GpuarchError(f"layers_block_type: expected {layers} entries (num_hidden_layers), "
                           f"each \"mamba\", \"linear_attention\" or \"hybrid\", got "
                           f"{str(kinds)[:120]}")
    if _HYBRID not in kinds:
        raise GpuarchError("layers_block_type: no \"hybrid\" layer (a call of the shared "
                           "transformer block)")
    return "".join("*-M" if k == _HYBRID else "M" for k in kinds)


def _zamba2(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Zamba2 (``zamba2``: Zyphra's Zamba2-1.2B, 2.7B and 7B): Mamba-2 layers (``mamba_*``
    keys, ``n_mamba_heads`` heads of expand x hidden over them, a gated norm over the
    mixer's width) and hybrid ones calling ``num_mem_blocks`` shared blocks in turn; the
    attention's heads are 2 x hidden over ``num_attention_heads`` wide (Zamba2Config sets
    ``attention_head_dim`` so whatever the config says), rotary only with
    ``use_mem_rope``; ``add_bias_linear`` puts biases on the mixers' projections and the
    MLPs' (Transformers' Zamba2MambaMixer and Zamba2MLP). vLLM builds the attention with
    as many KV heads as query heads, whatever ``num_key_value_heads`` says; Transformers,
    read here, with that many. More ``num_mem_blocks`` than hybrid layers gives each its
    own block, as Transformers ties them."""
    cfg = {**_ZAMBA2_DEFAULTS, **cfg}
    _check_tied(cfg, path)
    layers = get(cfg, path, "num_hidden_layers")
    hidden = get(cfg, path, "hidden_size")
    heads = get(cfg, path, "num_attention_heads")
    if heads < 1 or 2 * hidden < heads:
        raise GpuarchError(f"num_attention_heads: expected 1 to 2 x hidden_size "
                           f"({2 * hidden}), got {heads}")
    pattern = _pattern(cfg, layers, _ZAMBA2_LAYERS)
    calls = pattern.count("*")
    blocks = get(cfg, path, "num_mem_blocks")
    if blocks < 1:
        raise GpuarchError(f"num_mem_blocks: expected an integer >= 1, got {blocks}")
    width = get(cfg, path, "mamba_expand") * hidden
    ssm_heads = get(cfg, path, "n_mamba_heads")
    if ssm_heads < 1 or width % ssm_heads:
        raise GpuarchError(f"n_mamba_heads: {ssm_heads} must divide the mixer's width "
                           f"(mamba_expand x hidden_size = {width})")
    mamba = MambaShape(heads=ssm_heads, head_dim=width // ssm_heads,
                       state=get(cfg, path, "mamba_d_state"),
                       groups=get(cfg, path, "mamba_ngroups"),
                       conv_kernel=get(cfg, path, "mamba_d_conv"),
                       conv_bias=flag(cfg, "use_conv_bias", True),
                       proj_bias=flag(cfg, "add_bias_linear", False))
    if mamba.groups < 1 or width % mamba.groups:
        raise GpuarchError(f"mamba_ngroups: {mamba.groups} must divide the mixer's width "
                           f"({width}) for its gated norm")
    rank = get(cfg, path, "adapter_rank")
    if rank < 1:
        raise GpuarchError(f"adapter_rank: expected an integer >= 1 (every call's MLP "
                           f"adapter has it), got {rank}")
    fields = decoder_fields({**cfg, "head_dim": None}, path, label, len(pattern), heads)
    fields.update(head_dim=2 * hidden // heads)
    if flag(cfg, "use_long_context", False):
        fields.update(context_window=16384)  # as Zamba2Config extends it
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "intermediate_size", default=0) or 4 * hidden,
        ffn_kind=_ffn_kind(cfg),
        position=Position.ROPE if flag(cfg, "use_mem_rope", False) else Position.NONE,
        mlp_bias=mamba.proj_bias,
        hybrid_pattern=pattern,
        mamba=mamba,
        shared_blocks=min(blocks, calls),
        attention_input=2 * hidden,
        adapter_rank=rank,
        adapter_attention=flag(cfg, "use_shared_attention_adapter", False),
    )


def _zamba(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Zamba (``zamba``: Zyphra's Zamba-7B-v1): Mamba layers and hybrid ones that all call one
    shared block, no adapters and no rotary positions. Its mixer is Mamba-1 split into
    ``n_mamba_heads`` heads, each with its own step, B and C projections from its channels
    (Transformers' ZambaMambaMixer): as many weights and multiply-adds as one Mamba-1 mixer
    of the whole width, read as one; the step's rank ``mamba_dt_rank`` ("auto": ceil(hidden /
    16)). The attention reads ``attention_hidden_size`` (2 x hidden) with heads of
    ``attention_head_dim`` (2 x hidden over the heads); the hybrid layers where
    ``layers_block_type`` gives none are Transformers' (the third, then every
    ``attn_layer_period``-th from ``attn_layer_offset``)."""
    cfg = {**_ZAMBA_DEFAULTS, **cfg}
    _check_tied(cfg, path)
    layers = get(cfg, path, "num_hidden_layers")
    hidden = get(cfg, path, "hidden_size")
    heads = get(cfg, path, "num_attention_heads")
    if heads < 1:
        raise GpuarchError(f"num_attention_heads: expected an integer >= 1, got {heads}")
    period = get(cfg, path, "attn_layer_period")
    offset = get(cfg, path, "attn_layer_offset")
    if period < 1:
        raise GpuarchError(f"attn_layer_period: expected an integer >= 1, got {period}")
    default = ["M", "M", "H"] + ["H" if i % period == offset else "M"
                                 for i in range(max(layers - 3, 0))]
    pattern = _pattern(cfg, layers, default if layers >= 3 else None)
    width = get(cfg, path, "mamba_expand") * hidden
    ssm_heads = get(cfg, path, "n_mamba_heads")
    if ssm_heads < 1 or width % ssm_heads:
        raise GpuarchError(f"n_mamba_heads: {ssm_heads} must divide the mixer's width "
                           f"(mamba_expand x hidden_size = {width})")
    rank = cfg.get("mamba_dt_rank")
    rank = -(-hidden // 16) if rank in (None, "auto") else get(cfg, path, "mamba_dt_rank")
    mamba = MambaShape(kind="mamba1", heads=width, head_dim=1,
                       state=get(cfg, path, "mamba_d_state"), groups=1,
                       conv_kernel=get(cfg, path, "mamba_d_conv"),
                       conv_bias=flag(cfg, "mamba_conv_bias", True),
                       proj_bias=flag(cfg, "mamba_proj_bias", False),
                       gated_norm=False, dt_rank=rank)
    attention = get(cfg, path, "attention_hidden_size", default=0) or 2 * hidden
    head_dim = get(cfg, path, "attention_head_dim", "head_dim", default=0) \
        or 2 * hidden // heads
    fields = decoder_fields({**cfg, "head_dim": None}, path, label, len(pattern), heads)
    fields.update(head_dim=head_dim)
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "intermediate_size"),
        ffn_kind=_ffn_kind(cfg),
        position=Position.NONE,
        hybrid_pattern=pattern,
        mamba=mamba,
        shared_blocks=1,
        attention_input=attention,
    )


SHARED_BLOCK_FAMILIES = {"zamba": _zamba, "zamba2": _zamba2}
"""The model_types read here, and their readers."""
