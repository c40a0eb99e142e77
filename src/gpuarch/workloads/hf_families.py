"""Read the config.json of a family of ``data/hf_families.toml`` (``hf_family_table``) into
a :class:`TransformerShape`: decoder families whose layers are Llama's with a few named
differences (biases, norms, MLP kind, query-key norms, window layers, experts and where
they sit, latent attention), each as Transformers 5.25 builds it; the keys a config leaves
out take the config class's defaults the table lists."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.workloads.hf import EXPERT_COUNT_KEYS
from gpuarch.workloads.hf import _decoder_fields as decoder_fields
from gpuarch.workloads.hf import _flag as flag
from gpuarch.workloads.hf import _get as get
from gpuarch.workloads.hf import _indexer as indexer
from gpuarch.workloads.hf import _mla_fields as mla_fields
from gpuarch.workloads.hf import _routing_groups as routing_groups
from gpuarch.workloads.hf_family_table import FamilyTraits, family_traits
from gpuarch.workloads.hf_layer_kinds import _FULL as _FULL_KIND
from gpuarch.workloads.hf_layer_kinds import _flags_list as flags_list
from gpuarch.workloads.hf_layer_kinds import _window_flags as window_flags
from gpuarch.workloads.shape import (
    FfnKind,
    MlaShape,
    NormKind,
    QkNorm,
    TransformerShape,
)

__all__ = ["shape_of_tabled_family"]

_FFN = {"swiglu": FfnKind.SWIGLU, "geglu": FfnKind.GEGLU, "relu2": FfnKind.RELU2,
        "gelu": FfnKind.GELU,
        "xielu": FfnKind.XIELU, "relu2_glu": FfnKind.RELU2_GLU}
_QK = {"none": QkNorm.NONE, "head": QkNorm.HEAD, "full": QkNorm.FULL}
_NORMS = {"layernorm": NormKind.LAYERNORM, "layernorm_no_affine": NormKind.LAYERNORM_NO_AFFINE,
          "rmsnorm_no_weight": NormKind.RMSNORM_NO_WEIGHT}
"""The table's norms that are not counted as RMSNorm is ("layernorm_weight" is)."""


def shape_of_tabled_family(model_type: str, cfg: dict[str, Any], path: Path, label: str
                           ) -> TransformerShape:
    """The shape of a config.json whose ``model_type`` is one of the table's families."""
    t = family_traits()[model_type]
    cfg = {**t.defaults, **_renamed(t, cfg)}  # (a key set to null stays null)
    for key in t.refuse_true:
        if flag(cfg, key, False):
            raise GpuarchError(f"{key}: true is not read for {t.name} (what it adds is not "
                               f"held by the shape; {t.source})")
    for key, wanted in t.require.items():
        if cfg.get(key, wanted) != wanted:
            raise GpuarchError(f"{key}: only {wanted!r} is read for {t.name}, got "
                               f"{cfg[key]!r} ({t.source})")
    layers = get(cfg, path, "num_hidden_layers")
    heads = get(cfg, path, "num_attention_heads")
    fields = decoder_fields(cfg, path, label, layers, heads)
    if t.never_tied:  # the LM head a matrix of its own whatever tie_word_embeddings says
        fields["tied_embeddings"] = False
    mla = MlaShape(**mla_fields(cfg, path), q_gate=t.mla_q_gate,
                   **(indexer(cfg, path, layers, t.indexer_every) if t.indexer else {})) \
        if t.mla else None
    if mla is not None:
        # a latent attention's query-key head width (its heads need not divide the hidden
        # size; GLM-4 MoE Lite's config maps head_dim to qk_rope_head_dim, not read), and no
        # key-value heads of its own (num_key_value_heads is not read: Mistral 4's config
        # class defaults it to 32 whatever the heads)
        fields["head_dim"] = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        fields["kv_heads"] = heads
    window, windowed = _windows(t, cfg, path, layers)
    experts = get(cfg, path, *(t.experts_keys or EXPERT_COUNT_KEYS), default=0) or 0
    moe: dict[str, Any] = {}
    if experts:
        moe = _experts(t, cfg, path, layers, experts)
    if moe.get("dense_layers", 0) >= layers:
        moe = {}  # no layer routes: a dense model
    if moe and not moe["dense_layers"]:  # every layer routes: no dense width needed
        width = get(cfg, path, "intermediate_size", default=moe["moe_ffn_hidden"])
    else:
        width = get(cfg, path, "intermediate_size")
        if t.dense_width_key and moe:  # the dense layers' own width, where given
            width = get(cfg, path, t.dense_width_key, default=0) or width
    qk = _QK[t.qk_norm] if not t.qk_norm_key or flag(cfg, t.qk_norm_key, False) \
        else QkNorm.NONE
    norms = 1 if t.parallel_key and flag(cfg, t.parallel_key, False) \
        else 4 if t.sandwich_key and flag(cfg, t.sandwich_key, False) else t.norms
    return TransformerShape(
        **fields,
        ffn_hidden=width,
        ffn_kind=_FFN[t.ffn],
        norm=_NORMS.get(t.norm, NormKind.RMSNORM),
        qkv_bias=_bias(t.qkv_bias, cfg),
        out_bias=_bias(t.out_bias, cfg),
        mlp_bias=_bias(t.mlp_bias, cfg),
        lm_head_bias=_bias(t.lm_head_bias, cfg),
        sandwich_norms=norms == 4,
        parallel_attention=norms == 1,
        shared_norm=norms == 1,
        qk_norm=qk,
        attention_gate=t.attention_gate,
        gate_head_bias=t.gate_head_bias,
        attention_sinks=t.sinks,
        sub_norms=t.sub_norms,
        differential_attention=t.differential_attention,
        routed_expert_norms=t.routed_expert_norms and bool(moe),
        residual_gates=t.residual_gates,
        sliding_window=window,
        sliding_layers=windowed if windowed != layers else 0,
        mla=mla,
        router_bias=t.router_bias and bool(moe),
        expert_layer_norms=t.expert_layer_norms if moe else 0,
        gated_norm_rank=(get(cfg, path, t.gated_norm_rank_key, default=0) or 0)
        if t.gated_norm_rank_key else 0,
        **_hyper_connections(t, cfg, path),
        glu_limit=_glu_limit(t, cfg, path),
        head_vocab=_head_vocab(t, cfg, path, fields["vocab"]),
        **moe,
    )


def _hyper_connections(t: FamilyTraits, cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """The residual streams of a family with hyper-connections (``hc_mult``; 0 a plain
    residual) and their kind."""
    if t.hyper_connections == "none":
        return {}
    streams = get(cfg, path, "hc_mult")
    return {"hyper_connections": streams,
            "independent_hyper_connections": bool(streams)}


def _glu_limit(t: FamilyTraits, cfg: dict[str, Any], path: Path) -> float:
    """The routed experts' SwiGLU clamp where the family has one (``glu_limit_key``); a
    value at or below zero, or null, none (as HYV4Config reads swiglu_limit)."""
    if not t.glu_limit_key:
        return 0.0
    value = cfg.get(t.glu_limit_key)
    if value is None:
        return 0.0
    if not isinstance(value, (int, float)) or isinstance(value, bool) \
            or not math.isfinite(value):
        raise GpuarchError(f"{t.glu_limit_key}: expected a number, got {value!r}")
    return max(float(value), 0.0)


def _head_vocab(t: FamilyTraits, cfg: dict[str, Any], path: Path, vocab: int) -> int:
    """The LM head's rows where the family's ``head_vocab_key`` prunes it below the
    vocabulary (Apertus 1.5's output_vocab_size); 0 where absent, null or the whole
    vocabulary (as Transformers' config takes a full-width value)."""
    if not t.head_vocab_key:
        return 0
    rows = get(cfg, path, t.head_vocab_key, default=0) or 0
    return 0 if rows == vocab else rows


def _renamed(t: FamilyTraits, cfg: dict[str, Any]) -> dict[str, Any]:
    """The config with the sizes this reader reads filled from where the family keeps them
    (``keys``: a reader's key to a dotted path, e.g. DBRX's ``attn_config.kv_n_heads``),
    each an integer."""
    out = dict(cfg)
    for key, where in t.keys.items():
        value: Any = cfg
        for part in where.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is None or out.get(key) is not None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise GpuarchError(f"{where}: expected an integer, got {value!r}")
        out[key] = value
    return out


def _bias(spec: bool | tuple[str, ...], cfg: dict[str, Any]) -> bool:
    """A bias the table gives as a constant, or as the first of its config keys set."""
    if isinstance(spec, bool):
        return spec
    for key in spec:
        if cfg.get(key) is not None:
            return flag(cfg, key, False)
    return False


def _windows(t: FamilyTraits, cfg: dict[str, Any], path: Path, layers: int
             ) -> tuple[int, int]:
    """(sliding window, layers that use it): from ``layer_types`` where the config lists
    them, else by the family's rule; (0, 0) without a window."""
    window = get(cfg, path, "sliding_window", default=0) or 0
    if t.indexer and isinstance(cfg.get("layer_types"), list):
        # a sparse-attention family's "indexed_attention" layers attend over every position
        # the indexer picks: full layers, as far as a window goes
        cfg = {**cfg, "layer_types": [_FULL_KIND if k == "indexed_attention" else k
                                      for k in cfg["layer_types"]]}
    kinds = window_flags(cfg, path, layers)
    if kinds is not None:
        windowed = sum(kinds)
    elif not window:
        return 0, 0
    elif t.windows == "all":
        windowed = layers
    elif t.windows == "pattern":
        windowed = layers - layers // _window_pattern(t, cfg, path)
    elif t.windows == "pattern_first":  # the first of every pattern's layers full
        windowed = layers - -(-layers // _window_pattern(t, cfg, path))
    elif t.windows == "prefix_pattern":
        # Cohere's MoE: the first_k_dense_replace dense layers by their own pattern (every
        # one full by default), the rest all but every pattern-th
        first = min(get(cfg, path, "first_k_dense_replace", default=0) or 0, layers)
        prefix = get(cfg, path, "prefix_dense_sliding_window_pattern", default=1)
        if prefix < 1:
            raise GpuarchError(f"prefix_dense_sliding_window_pattern: expected a positive "
                               f"integer, got {prefix}")
        rest = layers - first
        windowed = first - first // prefix + rest - rest // _window_pattern(t, cfg, path)
    elif t.windows == "no_rope":
        windowed = _nope_layers(cfg, path, layers) if flag(cfg, "use_sliding_window",
                                                           False) else 0
    elif t.windows == "after_max_window_layers":
        first = get(cfg, path, "max_window_layers", default=layers)
        windowed = max(layers - first, 0)
    else:
        windowed = 0
    return (window, windowed) if window and windowed else (0, 0)


def _window_pattern(t: FamilyTraits, cfg: dict[str, Any], path: Path) -> int:
    """Every how many layers one attends to the whole context (the rest windowed)."""
    if not t.window_pattern_key:
        return t.window_pattern
    pattern = get(cfg, path, t.window_pattern_key, default=t.window_pattern)
    if pattern < 1:
        raise GpuarchError(f"{t.window_pattern_key}: expected a positive integer, got "
                           f"{pattern}")
    return int(pattern)


def _nope_layers(cfg: dict[str, Any], path: Path, layers: int) -> int:
    """SmolLM3's layers without rotary positions (``no_rope_layers`` entries 0; else every
    ``no_rope_layer_interval``-th layer, 4 unless given), the ones its windows apply to."""
    flags = cfg.get("no_rope_layers")
    if flags is None:
        interval = get(cfg, path, "no_rope_layer_interval", default=4)
        if interval < 1:
            raise GpuarchError(f"no_rope_layer_interval: expected a positive integer, got "
                               f"{interval}")
        nope: int = layers // interval
        return nope
    if not isinstance(flags, list) or len(flags) != layers or any(f not in (0, 1)
                                                                  for f in flags):
        raise GpuarchError(f"no_rope_layers: expected {layers} entries (num_hidden_layers), "
                           f"each 0 or 1, got {str(flags)[:120]}")
    return sum(1 for f in flags if f == 0)


def _experts(t: FamilyTraits, cfg: dict[str, Any], path: Path, layers: int, experts: int
             ) -> dict[str, Any]:
    """The expert fields of the shape: the count, top-k, shared experts (a count of expert
    widths), an expert's width, routing groups and the leading dense layers."""
    width = get(cfg, path, t.expert_width_key)
    if width < 1:
        raise GpuarchError(f"{t.expert_width_key}: expected a positive integer, got {width}")
    shared = 0
    if t.shared_width_key:
        shared_width = get(cfg, path, t.shared_width_key, default=0) or 0
        if shared_width % width:
            raise GpuarchError(f"{t.shared_width_key}: expected a multiple of "
                               f"{t.expert_width_key} ({width}), got {shared_width}")
        shared = shared_width // width
    elif t.shared_keys:
        shared = get(cfg, path, *t.shared_keys, default=0) or 0
    else:
        shared = t.shared_count
    groups, per_group = routing_groups(cfg, path, experts)
    return {"experts": experts,
            "experts_per_token": get(cfg, path, *t.per_token_keys),
            "shared_experts": shared,
            "moe_ffn_hidden": width,
            "expert_groups": groups, "groups_per_token": per_group,
            "dense_layers": _dense_layers(t, cfg, path, layers)}


def _dense_layers(t: FamilyTraits, cfg: dict[str, Any], path: Path, layers: int) -> int:
    """How many layers keep a dense MLP, by the family's rule (``dense``)."""
    if t.dense == "first_k_dense_replace":
        return min(get(cfg, path, "first_k_dense_replace", default=0) or 0, layers)
    if t.dense == "num_dense_layers":
        return min(get(cfg, path, "num_dense_layers", default=0) or 0, layers)
    if t.dense == "mlp_layer_types":
        dense = flags_list(cfg, path, "mlp_layer_types", layers,
                           {"dense": True, "sparse": False})
        if dense is None:
            first = get(cfg, path, t.dense_default_key, default=t.dense_default) \
                if t.dense_default_key else t.dense_default
            return min(first, layers)
        return sum(dense)
    if t.dense == "mlp_only_layers":
        # Qwen2-MoE's placement: dense the listed layers and, with a sparse step above 1,
        # every layer whose number (from 1) is no multiple of it
        only = cfg.get("mlp_only_layers")
        if only is None:
            only = t.defaults.get("mlp_only_layers", [])
        step = get(cfg, path, "decoder_sparse_step", default=1)
        if not isinstance(only, list) or any(
                not isinstance(i, int) or isinstance(i, bool) for i in only) or step < 1:
            raise GpuarchError(f"mlp_only_layers / decoder_sparse_step: expected a list of "
                               f"layer indices and a positive integer, got {only!r} and "
                               f"{step!r}"[:200])
        return sum(1 for i in range(layers) if i in only or (i + 1) % step)
    if t.dense == "ernie":
        start = get(cfg, path, "moe_layer_start_index", default=1)
        end = get(cfg, path, "moe_layer_end_index", default=-1)
        interval = get(cfg, path, "moe_layer_interval", default=1)
        if interval < 1:
            raise GpuarchError(f"moe_layer_interval: expected a positive integer, got "
                               f"{interval}")
        end = layers - 1 if end == -1 else end
        return layers - sum(1 for i in range(layers)
                            if (i + 1) % interval == 0 and start <= i <= end)
    return 0
