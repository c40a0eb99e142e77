"""Read the config.json of the families whose layers differ by kind: full-attention and
sliding-window layers with heads of their own (``TransformerShape.full_attention``), Gemma 4
(``gemma4`` and its text model ``gemma4_text``) and MiMo-V2-Flash (``mimo_v2_flash``), whose
keys a config leaves out take Transformers' defaults (5.25: configuration_gemma4.py,
configuration_mimo_v2_flash.py), as the library itself does, and whose parameter counts
agree with the models Transformers builds (scripts/params_vs_transformers.py,
docs/models.md); and Llama-Nemotron's neural-architecture-search layers (``nemotron-nas``:
each layer with or without attention and with an MLP of its own width, read as a pattern of
attention and MLP blocks with ``mlp_widths``), as NVIDIA's DeciLM modeling code builds them
(the remote code its checkpoints ship; TensorRT-LLM's and vLLM's nemotron_nas models).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.workloads.hf import EXPERT_COUNT_KEYS
from gpuarch.workloads.hf import _decoder_fields as decoder_fields
from gpuarch.workloads.hf import _flag as flag
from gpuarch.workloads.hf import _get as get
from gpuarch.workloads.shape import FfnKind, FullAttention, QkNorm, TransformerShape

__all__ = ["LAYER_KIND_FAMILIES", "shape_of_family"]

_SLIDING, _FULL = "sliding_attention", "full_attention"


def _layer_types(cfg: dict[str, Any], path: Path, key: str, layers: int) -> list[str] | None:
    """The config's list of "sliding_attention" and "full_attention", one a layer; None
    where it gives none."""
    kinds = cfg.get(key)
    if kinds is None:
        return None
    if not isinstance(kinds, list) or len(kinds) != layers \
            or any(k not in (_SLIDING, _FULL) for k in kinds):
        raise GpuarchError(f"{path}: {key}: expected {layers} entries (num_hidden_layers), "
                           f"each \"{_SLIDING}\" or \"{_FULL}\", got {kinds!r}")
    return list(kinds)


def _heads(kv_heads: int, head_dim: int, v_head_dim: int, keys_are_values: bool,
           sinks: bool) -> dict[str, Any]:
    return {"kv_heads": kv_heads, "head_dim": head_dim,
            "v_head_dim": 0 if v_head_dim == head_dim else v_head_dim,
            "keys_are_values": keys_are_values, "attention_sinks": sinks}


def _window_fields(window: int, windowed: int, layers: int, sliding: dict[str, Any],
                   full: dict[str, Any]) -> dict[str, Any]:
    """The shape's attention fields: the window layers' heads as its own and the full
    layers' as ``full_attention`` where they differ; a model of one kind of layer has that
    kind's heads and no second."""
    if not windowed:
        return dict(full)
    if windowed == layers:
        return {**sliding, "sliding_window": window}
    own = None if full == sliding else FullAttention(
        kv_heads=full["kv_heads"], head_dim=full["head_dim"], v_head_dim=full["v_head_dim"],
        keys_are_values=full["keys_are_values"], sinks=full["attention_sinks"])
    return {**sliding, "sliding_window": window, "sliding_layers": windowed,
            "full_attention": own}


def _gemma4(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Gemma 4's language model (a ``gemma4`` config's ``text_config``; the vision and
    audio towers not counted). Layers alternate sliding-window and global attention
    (``layer_types``, else five window layers to one global, the last one global); a
    global layer's heads are ``global_head_dim`` wide (512 unless given) and, with
    ``attention_k_eq_v``, there are ``num_global_key_value_heads`` of them whose keys are
    also the values (no value projection). Norms: four a layer over the hidden width,
    each head's queries and keys (its values' norm has no weight). With
    ``enable_moe_block`` each layer runs experts (``num_experts``, ``top_k_experts`` of
    ``moe_intermediate_size``) beside its dense MLP of ``intermediate_size``, read as
    shared experts of the routed width (26B-A4B: 2,112 = 3 x 704), with a pre-norm of
    their own, a post-norm for each output and a router that scales its input and each
    expert's weight. The small models' per-layer input embeddings and shared KV caches
    are refused."""
    layers = get(cfg, path, "num_hidden_layers", default=30)
    heads = get(cfg, path, "num_attention_heads", default=8)
    per_layer = get(cfg, path, "hidden_size_per_layer_input", default=256)
    shared = get(cfg, path, "num_kv_shared_layers", default=0)
    if per_layer or shared:
        raise GpuarchError(
            f"hidden_size_per_layer_input {per_layer} / num_kv_shared_layers {shared}: "
            "Gemma 4's per-layer input embeddings and layers that reuse another's KV cache "
            "(its E2B and E4B models) are not read yet; both must be 0")
    if cfg.get("use_bidirectional_attention") == "all":
        raise GpuarchError("use_bidirectional_attention: \"all\" makes every token attend "
                           "both ways (an encoder), which the decoder's costs do not price")
    if "per_layer_config" in cfg:
        raise GpuarchError("per_layer_config: a layer-by-layer override of the heads is not "
                           "read; give global_head_dim and num_global_key_value_heads")
    kinds = _layer_types(cfg, path, "layer_types", layers) or [
        _SLIDING if (i + 1) % 6 else _FULL for i in range(layers)]
    kinds[-1] = _FULL  # Transformers makes the last layer global whatever the list says
    windowed = kinds.count(_SLIDING)
    kv = get(cfg, path, "num_key_value_heads", default=4)
    head_dim = get(cfg, path, "head_dim", default=256)
    k_eq_v = flag(cfg, "attention_k_eq_v", False)
    global_kv = get(cfg, path, "num_global_key_value_heads", default=0) if k_eq_v else 0
    sliding = _heads(kv, head_dim, head_dim, False, False)
    global_dim = get(cfg, path, "global_head_dim", default=512)
    full = _heads(global_kv or kv, global_dim, global_dim, k_eq_v, False)
    fields = decoder_fields({"tie_word_embeddings": True, "vocab_size": 262_144,
                             "hidden_size": 2304, **cfg}, path, label, layers, heads)
    fields.update(_window_fields(get(cfg, path, "sliding_window", default=512), windowed,
                                 layers, sliding, full))
    moe: dict[str, Any] = {}
    width = get(cfg, path, "intermediate_size", default=9216)
    if flag(cfg, "enable_moe_block", False):
        experts = get(cfg, path, "num_experts")
        routed = get(cfg, path, "moe_intermediate_size")
        if routed < 1 or width % routed:
            raise GpuarchError(f"intermediate_size: the dense MLP beside the experts is read "
                               f"as shared experts of moe_intermediate_size ({routed}), so "
                               f"it must be a multiple of it, got {width}")
        moe = {"experts": experts, "experts_per_token": get(cfg, path, "top_k_experts"),
               "moe_ffn_hidden": routed, "shared_experts": width // routed,
               "expert_layer_norms": 3, "router_scales": True}
    attention_bias = flag(cfg, "attention_bias", False)
    return TransformerShape(
        **fields,
        ffn_hidden=width,
        ffn_kind=FfnKind.GEGLU,
        qkv_bias=attention_bias,
        out_bias=attention_bias,
        sandwich_norms=True,
        qk_norm=QkNorm.HEAD,
        **moe,
    )


def _mimo_pattern(cfg: dict[str, Any], path: Path, layers: int) -> list[str]:
    """MiMo-V2-Flash's layer kinds: ``layer_types`` (Transformers 5), else the published
    config's ``hybrid_layer_pattern`` (1 a window layer, 0 a full one), else Transformers'
    default (the first layer and every sixth full)."""
    kinds = _layer_types(cfg, path, "layer_types", layers)
    if kinds is not None:
        return kinds
    pattern = cfg.get("hybrid_layer_pattern")
    if pattern is None:
        return [_FULL if i == 0 or not (i + 1) % 6 else _SLIDING for i in range(layers)]
    if not isinstance(pattern, list) or len(pattern) != layers \
            or any(p not in (0, 1) or isinstance(p, bool) for p in pattern):
        raise GpuarchError(f"{path}: hybrid_layer_pattern: expected {layers} entries "
                           f"(num_hidden_layers), each 0 (full) or 1 (sliding window), got "
                           f"{pattern!r}")
    return [_SLIDING if p else _FULL for p in pattern]


def _mimo_dense_layers(cfg: dict[str, Any], path: Path, layers: int) -> int:
    """Layers with a dense MLP: ``mlp_layer_types`` ("dense" or "sparse"), else
    ``moe_layer_freq`` (0 dense, 1 experts), else the first alone (Transformers' default)."""
    kinds = cfg.get("mlp_layer_types")
    if kinds is not None:
        if not isinstance(kinds, list) or len(kinds) != layers \
                or any(k not in ("dense", "sparse") for k in kinds):
            raise GpuarchError(f"{path}: mlp_layer_types: expected {layers} entries, each "
                               f"\"dense\" or \"sparse\", got {kinds!r}")
        return kinds.count("dense")
    freq = cfg.get("moe_layer_freq")
    if freq is None:
        return 1
    if not isinstance(freq, list) or len(freq) != layers \
            or any(f not in (0, 1) or isinstance(f, bool) for f in freq):
        raise GpuarchError(f"{path}: moe_layer_freq: expected {layers} entries, each 0 "
                           f"(dense) or 1 (experts), got {freq!r}")
    return freq.count(0)


def _mimo_v2_flash(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """MiMo-V2-Flash: full-attention and sliding-window layers (``_mimo_pattern``) with the
    same query heads; keys of ``head_dim`` and narrower values of ``v_head_dim`` in both,
    ``num_key_value_heads`` KV heads in the full layers and ``swa_num_key_value_heads``
    (Transformers: twice as many) in the window layers, which alone hold attention sinks
    (``add_swa_attention_sink_bias``, ``add_full_attention_sink_bias``); biases on the
    query, key and value projections with ``attention_bias``, none on the output. The
    window is ``sliding_window_size`` + 1 positions (the query and as many before it, as
    Transformers reads it), else ``sliding_window``. Experts (``n_routed_experts``, no shared
    ones) in every layer but the dense ones (``_mimo_dense_layers``); the router's
    score-correction bias is a buffer, not counted (as DeepSeek-V3's)."""
    layers = get(cfg, path, "num_hidden_layers")
    heads = get(cfg, path, "num_attention_heads")
    swa_heads = get(cfg, path, "swa_num_attention_heads", default=heads)
    if swa_heads != heads:
        raise GpuarchError(f"swa_num_attention_heads: {swa_heads} query heads in the window "
                           f"layers against {heads} in the full ones; the shape holds one "
                           "count of query heads")
    kinds = _mimo_pattern(cfg, path, layers)
    kv = get(cfg, path, "num_key_value_heads")
    head_dim = get(cfg, path, "head_dim", default=192)
    v_head_dim = get(cfg, path, "v_head_dim", default=128)
    sliding = _heads(get(cfg, path, "swa_num_key_value_heads", default=2 * kv),
                     get(cfg, path, "swa_head_dim", default=head_dim),
                     get(cfg, path, "swa_v_head_dim", default=v_head_dim), False,
                     flag(cfg, "add_swa_attention_sink_bias", True))
    full = _heads(kv, head_dim, v_head_dim, False,
                  flag(cfg, "add_full_attention_sink_bias", False))
    size = get(cfg, path, "sliding_window_size", default=0)
    window = size + 1 if size else get(cfg, path, "sliding_window", default=129)
    fields = decoder_fields(cfg, path, label, layers, heads)
    fields.update(_window_fields(window, kinds.count(_SLIDING), layers, sliding, full))
    experts = get(cfg, path, *EXPERT_COUNT_KEYS, default=0)
    moe: dict[str, Any] = {}
    if experts:
        dense = _mimo_dense_layers(cfg, path, layers)
        moe = {"experts": experts,
               "experts_per_token": get(cfg, path, "num_experts_per_tok"),
               "moe_ffn_hidden": get(cfg, path, "moe_intermediate_size"),
               "shared_experts": get(cfg, path, "n_shared_experts", default=0),
               "dense_layers": dense}
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "intermediate_size"),
        qkv_bias=flag(cfg, "attention_bias", False),
        **moe,
    )


def _nas_width(ffn_mult: Any, hidden: int, where: str) -> int:
    """A NAS layer's MLP width from its ``ffn_mult``: 2/3 of ffn_mult x hidden (a gated
    MLP's), truncated and rounded up to a multiple of 256 (DeciLM's
    ``_ffn_mult_to_intermediate_size``)."""
    if not isinstance(ffn_mult, (int, float)) or isinstance(ffn_mult, bool) \
            or not 0 < ffn_mult <= 1024:
        raise GpuarchError(f"{where}.ffn_mult: expected a positive number, got {ffn_mult!r}")
    width = int(2 * ffn_mult * hidden / 3)
    return -(-width // 256) * 256


_NAS_UNREAD = ("replace_with_linear", "window_length", "num_sink_tokens", "sparsify",
               "unshifted_sink", "use_prefill_window_in_sink_attention")
"""Block-config keys that change a NAS layer beyond what the shape holds (a linear layer in
place of the attention or MLP, a windowed or sink attention, sparsity); a config that sets
one is refused with the key named (Llama-3.3-Nemotron-Super-49B sets none)."""


def _nas_part(block: Any, part: str, where: str) -> dict[str, Any]:
    """One part ("attention" or "ffn") of a NAS layer's block config, refused where it sets
    a key the shape does not hold (``_NAS_UNREAD``)."""
    conf = block.get(part, {}) if isinstance(block, dict) else None
    if not isinstance(conf, dict):
        raise GpuarchError(f"{where}.{part}: expected an object, got {conf!r}")
    for key in _NAS_UNREAD:
        if conf.get(key):
            raise GpuarchError(f"{where}.{part}.{key}: {conf[key]!r} is not read yet (the "
                               "shape holds attention of the model's heads or none, and "
                               "gated MLPs of any width or none)")
    return conf


def _nas_flag(conf: dict[str, Any], key: str, where: str) -> bool:
    try:
        return flag(conf, key, False)
    except GpuarchError as exc:
        raise GpuarchError(f"{where}.{exc}") from None


def _nemotron_nas(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Llama-Nemotron's NAS models (Llama-3.3-Nemotron-Super-49B, ``DeciLMForCausalLM``):
    Llama's layers, each as its ``block_configs`` entry says: an attention of
    ``num_attention_heads`` / ``n_heads_in_group`` KV heads or none (``no_op``), and a SwiGLU
    MLP of the width its ``ffn_mult`` gives (``_nas_width``) or none. Each present part has
    its own pre-norm and residual, so the model reads as a hybrid pattern of attention (*)
    and MLP (-) blocks, the MLPs' widths in ``mlp_widths``; biases as Llama's
    (``attention_bias`` on all four attention projections, ``mlp_bias``)."""
    layers = get(cfg, path, "num_hidden_layers")
    heads = get(cfg, path, "num_attention_heads")
    hidden = get(cfg, path, "hidden_size")
    blocks = cfg.get("block_configs")
    if not isinstance(blocks, list) or len(blocks) != layers:
        raise GpuarchError(f"{path}: block_configs: expected {layers} entries "
                           f"(num_hidden_layers), one a layer, got {blocks!r}"[:300])
    pattern: list[str] = []
    widths: list[int] = []
    kv: set[int] = set()
    for i, block in enumerate(blocks):
        where = f"block_configs[{i}]"
        attention, ffn = (_nas_part(block, part, where) for part in ("attention", "ffn"))
        if not _nas_flag(attention, "no_op", f"{where}.attention"):
            group = attention.get("n_heads_in_group")
            if not isinstance(group, int) or isinstance(group, bool) or group < 1 \
                    or heads % group:
                raise GpuarchError(f"{where}.attention.n_heads_in_group: expected a divisor "
                                   f"of num_attention_heads ({heads}), got {group!r}")
            kv.add(heads // group)
            pattern.append("*")
        if not _nas_flag(ffn, "no_op", f"{where}.ffn"):
            widths.append(_nas_width(ffn.get("ffn_mult"), hidden, f"{where}.ffn"))
            pattern.append("-")
    if len(kv) > 1:
        raise GpuarchError(f"{path}: block_configs: the attention layers' n_heads_in_group "
                           f"give {sorted(kv)} KV heads; the shape holds one count")
    if "*" not in pattern or "-" not in pattern:
        raise GpuarchError(f"{path}: block_configs: no attention or no MLP in any layer")
    fields = decoder_fields(cfg, path, label, layers, heads)
    fields.update(layers=len(pattern), kv_heads=kv.pop())
    attention_bias = flag(cfg, "attention_bias", False)
    return TransformerShape(
        **fields,
        hybrid_pattern="".join(pattern),
        ffn_hidden=max(widths),
        mlp_widths=tuple(widths) if len(set(widths)) > 1 else (),
        qkv_bias=attention_bias,
        out_bias=attention_bias,
        mlp_bias=flag(cfg, "mlp_bias", False),
    )


LAYER_KIND_FAMILIES = {"gemma4_text": _gemma4, "mimo_v2_flash": _mimo_v2_flash,
                       "nemotron-nas": _nemotron_nas}
"""The model_types read here, and their readers."""


def shape_of_family(model_type: str, cfg: dict[str, Any], path: Path, label: str
                    ) -> TransformerShape:
    """The shape of a config.json of one of ``LAYER_KIND_FAMILIES``."""
    return LAYER_KIND_FAMILIES[model_type](cfg, path, label)
