"""Read the config.json of Thinking Machines' Inkling (``inkling_text``, and the language
model of an ``inkling_mm_model`` checkpoint, its ``text_config``; the vision and audio
towers not counted), as Transformers 5.25 builds it (modeling_inkling.py), InklingTextConfig's
defaults filling what a config leaves out.

Each layer: an RMSNorm, grouped-query attention without rotary positions, then a short
convolution over its output and the residual add; an RMSNorm, the MLP, a short convolution
over its output and the residual add. The attention's queries and keys are normed a head;
its keys and values each pass a short convolution (``TransformerShape.short_conv_taps``:
depthwise, causal, ``conv_kernel_size`` taps, no bias, added to the input); a projection of
the hidden state to ``d_rel`` numbers a query head mixes a learned bank of ``d_rel`` x extent
profiles into a bias a backward distance (``relative_bias``, ``relative_extent``: extent
``rel_extent`` in the full layers, the window in the window layers). The window layers
(``layer_types`` "hybrid_sliding"; by default all but every sixth) have heads of their own
(``swa_num_attention_heads``, ``swa_num_key_value_heads``, ``swa_head_dim``); the full
layers' are ``full_attention``. The MLP: the first ``dense_mlp_idx`` layers (or the
"dense" ones of ``mlp_layer_types``) a SwiGLU MLP of ``intermediate_size`` with a learned
scalar on its output (``mlp_scalar``); the others ``n_routed_experts`` experts of
``moe_intermediate_size``, ``num_experts_per_tok`` a token, beside ``n_shared_experts``
shared ones that the router scores too (``shared_expert_sink``) and a scalar on the
router's weights. The embedding has a norm after it; the LM head is its own (never tied).
A checkpoint's ``dense_intermediate_size`` is the dense MLP's width, its
``intermediate_size`` then the experts' (as InklingTextConfig reads them). The
multi-token-prediction layers (``mtp_config``) are not built by Transformers and not
counted (``--mtp-layers`` prices them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.workloads.hf import _decoder_fields as decoder_fields
from gpuarch.workloads.hf import _flag as flag
from gpuarch.workloads.hf import _get as get
from gpuarch.workloads.shape import FfnKind, FullAttention, Position, QkNorm, TransformerShape

__all__ = ["INKLING_FAMILIES"]

_INKLING_DEFAULTS: dict[str, Any] = {
    "vocab_size": 201024, "hidden_size": 6144, "num_hidden_layers": 66,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
    "swa_num_attention_heads": 64, "swa_num_key_value_heads": 16, "swa_head_dim": 128,
    "sliding_window_size": 512, "d_rel": 16, "rel_extent": 1024,
    "max_position_embeddings": 131072, "conv_kernel_size": 4, "intermediate_size": 24576,
    "hidden_act": "silu", "moe_intermediate_size": 3072, "n_routed_experts": 256,
    "num_experts_per_tok": 6, "n_shared_experts": 2, "tie_word_embeddings": False}
"""InklingTextConfig's defaults (Transformers 5.25, configuration_inkling.py) for the keys read
here."""

# keys a checkpoint may spell as SGLang's config does (InklingTextConfig.attribute_map)
_ALIASES = {"sconv_kernel_size": "conv_kernel_size", "sliding_window": "sliding_window_size",
            "num_local_experts": "n_routed_experts",
            "model_max_length": "max_position_embeddings"}

# keys SGLang's Inkling config reads that Transformers 5.25 builds the model without: a
# checkpoint that sets them otherwise than Transformers builds is refused by name
_FIXED = {"use_sconv": True, "q_bias": False, "o_bias": False, "use_global_scale": True}


Reader = Callable[[dict[str, Any], Path, str], TransformerShape]


def _with_defaults(cfg: dict[str, Any], defaults: dict[str, Any], aliases: dict[str, str],
                   model: str) -> dict[str, Any]:
    """``cfg`` over its config class's ``defaults``, each of ``aliases`` (a checkpoint's
    spelling) read as the key it names; refused where ``model``'s activation is not SiLU or
    its head is tied (Transformers 5.25 never ties it)."""
    cfg = {**defaults, **cfg}
    for alias, key in aliases.items():
        if alias in cfg and cfg[alias] is not None:
            cfg[key] = cfg[alias]
    act = cfg.get("hidden_act")
    if act not in ("silu", "swish"):
        raise GpuarchError(f"hidden_act: expected silu ({model}'s SwiGLU), got {act!r}")
    if cfg.get("tie_word_embeddings"):
        raise GpuarchError(f"tie_word_embeddings: true is not read (Transformers 5.25 never "
                           f"ties {model}'s LM head to its embedding)")
    return cfg


def _attention_fields(cfg: dict[str, Any], path: Path, label: str, layers: int,
                      windowed: int) -> dict[str, Any]:
    """The shape's fields of the decoder and its attention, ``windowed`` of the ``layers``
    attending within the window: the window layers' heads the shape's own (``swa_*``), the
    full layers' as ``full_attention`` where they differ; a model of one kind of layer has
    that kind's heads. Both Inkling versions' positions too: no rotary ones, the relative
    bias (``d_rel``, ``rel_extent``), the short convolutions (``conv_kernel_size``) and the
    norm after the embedding."""
    swa = (get(cfg, path, "swa_num_attention_heads"), get(cfg, path, "swa_num_key_value_heads"),
           get(cfg, path, "swa_head_dim"))
    full = (get(cfg, path, "num_attention_heads"), get(cfg, path, "num_key_value_heads"),
            get(cfg, path, "head_dim"))
    for name, (heads, kv, _) in (("num_attention_heads", full),
                                 ("swa_num_attention_heads", swa)):
        if kv and heads % kv:
            raise GpuarchError(f"{name}: {heads} query heads do not divide into the "
                               f"{kv} key-value heads")
    own = swa if windowed else full
    fields = decoder_fields(cfg, path, label, layers, own[0])
    fields.update(kv_heads=own[1], head_dim=own[2], position=Position.NONE,
                  embedding_norm=True, relative_bias=get(cfg, path, "d_rel"),
                  relative_extent=get(cfg, path, "rel_extent"),
                  short_conv_taps=get(cfg, path, "conv_kernel_size"))
    window = get(cfg, path, "sliding_window_size")
    if 0 < windowed < layers:
        fields.update(sliding_window=window, sliding_layers=windowed)
        if full != own:
            fields["full_attention"] = FullAttention(
                kv_heads=full[1], head_dim=full[2], heads=0 if full[0] == own[0] else full[0])
    elif windowed:
        fields["sliding_window"] = window
    return fields


def _layer_flags(cfg: dict[str, Any], path: Path, key: str, layers: int,
                 values: dict[str, bool]) -> list[bool] | None:
    """A per-layer list of ``key`` (each entry one of ``values``' keys, read as its value);
    None where the config gives none."""
    kinds = cfg.get(key)
    if kinds is None:
        return None
    if not isinstance(kinds, list) or len(kinds) != layers \
            or any(not isinstance(k, str) or k not in values for k in kinds):
        raise GpuarchError(f"{path}: {key}: expected {layers} entries (num_hidden_layers), "
                           f"each one of {', '.join(map(repr, values))}, got {kinds!r}"[:300])
    return [values[k] for k in kinds]


def _window_layers(cfg: dict[str, Any], path: Path, layers: int) -> int:
    """How many layers attend within the window: ``layer_types``' "hybrid_sliding" ones,
    else ``local_layer_ids``' (indices), else every layer but each sixth (index 5, 11,
    ...), as InklingTextConfig derives them."""
    flags = _layer_flags(cfg, path, "layer_types", layers,
                         {"hybrid_sliding": True, "hybrid": False})
    if flags is not None:
        return sum(flags)
    ids = cfg.get("local_layer_ids")
    if ids is None:
        return sum(1 for i in range(layers) if (i + 1) % 6)
    if not isinstance(ids, list) or any(isinstance(i, bool) or not isinstance(i, int)
                                        for i in ids):
        raise GpuarchError(f"{path}: local_layer_ids: expected a list of layer indices, got "
                           f"{ids!r}"[:300])
    return len({i for i in ids if 0 <= i < layers})


def _dense_layers(cfg: dict[str, Any], path: Path, layers: int) -> int:
    """How many layers have a dense MLP: ``mlp_layer_types``' "dense" ones, else the first
    ``dense_mlp_idx`` (none by default)."""
    flags = _layer_flags(cfg, path, "mlp_layer_types", layers,
                         {"dense": True, "sparse": False})
    if flags is not None:
        return sum(flags)
    return min(layers, get(cfg, path, "dense_mlp_idx", default=0) or 0)


def _inkling(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Inkling's language model (see the module's notes)."""
    cfg = _with_defaults(cfg, _INKLING_DEFAULTS, _ALIASES, "Inkling")
    for key, built in _FIXED.items():
        if key in cfg and cfg[key] is not None and flag(cfg, key, built) != built:
            raise GpuarchError(f"{key}: {str(not built).lower()} is not read (Transformers "
                               f"5.25 builds Inkling as with {key} {str(built).lower()})")
    layers = get(cfg, path, "num_hidden_layers")
    dense_width = get(cfg, path, "intermediate_size")
    expert_width = get(cfg, path, "moe_intermediate_size")
    if cfg.get("dense_intermediate_size") is not None:
        # a checkpoint's spelling: intermediate_size is then the experts' width
        expert_width, dense_width = dense_width, get(cfg, path, "dense_intermediate_size")
    fields = _attention_fields(cfg, path, label, layers, _window_layers(cfg, path, layers))
    experts = get(cfg, path, "n_routed_experts")
    dense = _dense_layers(cfg, path, layers)
    moe: dict[str, Any] = {}
    if experts and dense < layers:
        shared = get(cfg, path, "n_shared_experts")
        if not shared:
            raise GpuarchError("n_shared_experts: 0 is not read (Transformers 5.25's Inkling "
                               "router treats the last n_shared_experts of its scores as the "
                               "shared experts', and has none to take)")
        moe = {"experts": experts, "experts_per_token": get(cfg, path, "num_experts_per_tok"),
               "shared_experts": shared, "moe_ffn_hidden": expert_width,
               "dense_layers": dense,
               "shared_expert_sink": True}
    return TransformerShape(
        **fields,
        ffn_hidden=dense_width,
        ffn_kind=FfnKind.SWIGLU,
        qk_norm=QkNorm.HEAD,
        mlp_scalar=True,
        **moe,
    )


_INKLING2_DEFAULTS: dict[str, Any] = {
    "vocab_size": 201024, "unpadded_vocab_size": 200058, "hidden_size": 4608,
    "num_hidden_layers": 48, "num_attention_heads": 48, "num_key_value_heads": 8,
    "head_dim": 128, "swa_num_attention_heads": 48, "swa_num_key_value_heads": 8,
    "swa_head_dim": 128, "sliding_window_size": 1024, "d_rel": 16, "rel_extent": 1024,
    "max_position_embeddings": 1048576, "conv_kernel_size": 4, "hidden_act": "silu",
    "moe_intermediate_size": 2304, "n_routed_experts": 384, "num_experts_per_tok": 8,
    "n_layers_per_attn_res_block": 6, "tie_word_embeddings": False}
"""Inkling2TextConfig's defaults (Transformers 5.25, configuration_inkling2.py) for the keys
read here."""

# Inkling2TextConfig.attribute_map: a checkpoint's intermediate_size is the experts' width
_INKLING2_ALIASES = {"sconv_kernel_size": "conv_kernel_size",
                     "sliding_window": "sliding_window_size",
                     "num_local_experts": "n_routed_experts",
                     "model_max_length": "max_position_embeddings",
                     "intermediate_size": "moe_intermediate_size"}


def _inkling2(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Inkling 2's language model (Transformers 5.25's modeling_inkling2.py), Inkling's
    relative position bias and short convolutions with more: every layer's queries and
    relative states scaled a channel and L2-clipped (``head_scales``; its keys clipped, its
    values normed without weights), an output gate from the layer input
    (``attention_gate``), attention sinks from a projection of it (``sink_projection``),
    block attention residuals before every block (``attention_residual_block``:
    ``n_layers_per_attn_res_block``; weightless norms, none before the first layer's
    attention: ``lean_attention_residuals``), and in the full layers taps projected for the
    key and value convolutions (``dynamic_kv_convs``) and three attention inputs of their
    own, each normed (``split_attention_inputs``). Every layer's MLP is ``n_routed_experts``
    experts (no shared ones) of a softcapped SwiGLU (priced as SwiGLU); the LM head has
    ``unpadded_vocab_size`` rows."""
    cfg = _with_defaults(cfg, _INKLING2_DEFAULTS, _INKLING2_ALIASES, "Inkling 2")
    layers = get(cfg, path, "num_hidden_layers")
    kinds = _layer_flags(cfg, path, "layer_types", layers,
                         {"hybrid_sliding": True, "hybrid": False})
    if kinds is None:
        kinds = [bool((i + 1) % 6) for i in range(layers)]
    if kinds and not kinds[0]:
        raise GpuarchError("layer_types: a full-attention first layer is not read (Inkling "
                           "2's block attention residuals are counted for a window layer "
                           "first, as its configs have it)")
    windowed = sum(kinds)
    fields = _attention_fields(cfg, path, label, layers, windowed)
    head = get(cfg, path, "unpadded_vocab_size")
    vocab = fields["vocab"]
    if head > vocab:
        raise GpuarchError(f"unpadded_vocab_size: {head:,} exceeds vocab_size ({vocab:,})")
    width = get(cfg, path, "moe_intermediate_size")
    return TransformerShape(
        **fields,
        ffn_hidden=width,
        ffn_kind=FfnKind.SWIGLU,
        head_vocab=head if head < vocab else 0,
        attention_gate=True,
        head_scales=True,
        sink_projection=True,
        dynamic_kv_convs=windowed < layers,
        attention_residual_block=get(cfg, path, "n_layers_per_attn_res_block"),
        lean_attention_residuals=True,
        split_attention_inputs=windowed < layers,
        experts=get(cfg, path, "n_routed_experts"),
        experts_per_token=get(cfg, path, "num_experts_per_tok"),
        moe_ffn_hidden=width,
    )


_INKLING2_LOOP_DEFAULTS: dict[str, Any] = {
    **_INKLING2_DEFAULTS, "hidden_size": 2304, "num_hidden_layers": 24,
    "num_attention_heads": 24, "swa_num_attention_heads": 24, "moe_intermediate_size": 1152,
    "n_routed_experts": 128, "loop_layer_index_start": 6, "loop_layer_index_end": 18,
    "loop_num_passes": 3, "loop_gate_rank": 64}
"""Inkling2LoopTextConfig's defaults (Transformers 5.25, configuration_inkling2_loop.py) for
the keys read here."""

# a checkpoint's loop_config spelling (Inkling2LoopTextConfig.__post_init__)
_LOOP_CONFIG_KEYS = {"core_start": "loop_layer_index_start",
                     "core_end": "loop_layer_index_end",
                     "num_passes": "loop_num_passes", "gate_rank": "loop_gate_rank"}


def _inkling2_loop(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Inkling 2 Mini's language model (Transformers 5.25's modeling_inkling2_loop.py):
    Inkling 2's layers, those from ``loop_layer_index_start`` to before
    ``loop_layer_index_end`` run ``loop_num_passes`` times a token (``loop_layers``: each
    pass its own KV cache and convolution state, its block attention residuals starting
    again from the loop's input), and in each pass after the first every looped layer's
    query, key, value and MLP inputs gated with messages from the last pass
    (``loop_gate_rank``; a checkpoint's ``loop_config`` read as Transformers reads it). The
    loop's ends must fall on block boundaries (``n_layers_per_attn_res_block``), after the
    first layer, as Inkling2LoopTextConfig requires."""
    cfg = {**_INKLING2_LOOP_DEFAULTS, **cfg}
    loop = cfg.get("loop_config")
    if loop is not None:
        if not isinstance(loop, dict):
            raise GpuarchError(f"{path}: loop_config: expected an object, got {loop!r}"[:200])
        cfg.update((key, loop[name]) for name, key in _LOOP_CONFIG_KEYS.items()
                   if loop.get(name) is not None)
    shape = _inkling2(cfg, path, label)
    start, end = (get(cfg, path, key)
                  for key in ("loop_layer_index_start", "loop_layer_index_end"))
    passes = get(cfg, path, "loop_num_passes")
    if passes < 1:
        raise GpuarchError(f"loop_num_passes: expected at least 1, got {passes}")
    block = shape.attention_residual_block
    for key, index in (("loop_layer_index_start", start), ("loop_layer_index_end", end)):
        if index % block:
            raise GpuarchError(f"{key}: {index} is not a multiple of "
                               f"n_layers_per_attn_res_block ({block}), as Inkling 2 Mini's "
                               "loop must be")
    if start <= 0:
        raise GpuarchError(f"loop_layer_index_start: expected a layer after the first (a "
                           f"positive multiple of {block}), got {start}")
    layers = shape.layers
    if not start <= end <= layers:
        raise GpuarchError(f"loop_layer_index_end: expected {start} (loop_layer_index_start) "
                           f"to {layers} (num_hidden_layers), got {end}")
    if end == start:  # no looped layers: Inkling 2's layers and no messages
        return shape
    kinds = _layer_flags(cfg, path, "layer_types", layers,
                         {"hybrid_sliding": True, "hybrid": False}) \
        or [bool((i + 1) % 6) for i in range(layers)]
    looped, windowed = end - start, sum(kinds[start:end])
    repeats = passes - 1
    return replace(
        shape, layers=layers + repeats * looped,
        sliding_layers=shape.sliding_layers + repeats * windowed if shape.sliding_layers
        else 0,
        loop_layers=looped, loop_passes=passes, loop_start=start,
        loop_window_layers=windowed if shape.sliding_window else 0,
        loop_gate_rank=get(cfg, path, "loop_gate_rank"))


def _text_model(reader: Reader) -> Reader:
    """A multimodal checkpoint's reader: ``reader`` over its ``text_config`` (whatever
    model_type that names; the towers and a top-level ``mtp_config`` not counted)."""
    def read(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
        text = cfg.get("text_config")
        if not isinstance(text, dict):
            raise GpuarchError(f"{path}: text_config: expected an object, got {text!r}"[:200])
        return reader(text, path, label)
    return read


INKLING_FAMILIES = {"inkling_text": _inkling, "inkling_mm_model": _text_model(_inkling),
                    "inkling2_text": _inkling2, "inkling2": _text_model(_inkling2),
                    "inkling2_loop_text": _inkling2_loop,
                    "inkling2_loop": _text_model(_inkling2_loop)}
"""The model_types read here, and their readers."""
