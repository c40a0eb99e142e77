"""Read the config.json of the families whose layers differ by kind: full-attention and
sliding-window layers with heads of their own (``TransformerShape.full_attention``), Gemma 4
(``gemma4`` and its text model ``gemma4_text``; Gemma 4 12B's ``gemma4_unified_text``) and
MiMo-V2-Flash (``mimo_v2_flash``), whose keys a config leaves out take Transformers' defaults
(5.25: configuration_gemma4.py, configuration_gemma4_unified.py,
configuration_mimo_v2_flash.py), as the library itself does, and whose parameter counts
agree with the models Transformers builds (scripts/params_vs_transformers.py,
docs/models.md); and Llama-Nemotron's neural-architecture-search layers (``nemotron-nas``:
each layer with or without attention and with an MLP of its own width, read as a pattern of
attention and MLP blocks with ``mlp_widths``), as NVIDIA's DeciLM modeling code builds them
(the remote code its checkpoints ship; TensorRT-LLM's and vLLM's nemotron_nas models); and
MiniMax-M3's block-sparse attention layers beside its dense ones (``minimax_m3``,
``minimax_m3_vl``: ``TransformerShape.block_sparse``), as Transformers 5.25 builds them; and
Kimi Linear's Kimi Delta Attention and latent attention layers (``kimi_linear``; Kimi K3's
text model too, as TensorRT-LLM builds it), Step-3.5/3.7-Flash's window layers with more
query heads than its full ones and a gate a head (``step3p5``, ``step3p7``), and Gemma 4
E2B/E4B's KV-shared layers and per-layer inputs, Falcon-H1's Mamba-2 mixer and attention
side by side in every layer (``falcon_h1``), and the Mamba-1 models: state-spaces' Mamba
and Falcon Mamba (``mamba``, ``falcon_mamba``) and AI21's Jamba with its attention, MLP and
expert layers (``jamba``), MiniMax-Text-01's lightning attention (``minimax``) and Liquid
AI's LFM2 short convolutions (``lfm2``, ``lfm2_moe``), as Transformers 5.25 builds them;
and rednote's dots3-note (``dots3_note``, ``dots3_note_text``), whose window layers' latent
attention has sizes of its own beside the full layers' (``FullAttention.mla``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.workloads.hf import (
    EXPERT_COUNT_KEYS,
    layer_type_list,
    mamba_head_dim,
    window_blocks,
)
from gpuarch.workloads.hf import _attention_biases as attention_biases
from gpuarch.workloads.hf import _decoder_fields as decoder_fields
from gpuarch.workloads.hf import _flag as flag
from gpuarch.workloads.hf import _get as get
from gpuarch.workloads.hf import _glu_limit as glu_limit
from gpuarch.workloads.hf import _mla_fields as mla_fields
from gpuarch.workloads.hf import _routing_groups as routing_groups
from gpuarch.workloads.hf_attention_experts import ATTENTION_EXPERT_FAMILIES
from gpuarch.workloads.hf_doge import DOGE_FAMILIES
from gpuarch.workloads.hf_inkling import INKLING_FAMILIES
from gpuarch.workloads.hf_rwkv import RWKV_FAMILIES
from gpuarch.workloads.hf_shared_blocks import SHARED_BLOCK_FAMILIES
from gpuarch.workloads.hf_xlstm import XLSTM_FAMILIES
from gpuarch.workloads.shape import (
    MAX_DIMENSION,
    BlockSparseAttention,
    FfnKind,
    FullAttention,
    MambaShape,
    MlaShape,
    Position,
    QkNorm,
    TransformerShape,
)

__all__ = ["LAYER_KIND_FAMILIES", "shape_of_family"]

_SLIDING, _FULL = "sliding_attention", "full_attention"


def _text_model(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """A multimodal config's language model (its ``text_config``), with the wrapper's
    ``tie_word_embeddings`` where the language model's leaves it out."""
    text = cfg.get("text_config")
    if not isinstance(text, dict):
        raise GpuarchError(f"{path}: text_config: expected an object, got {text!r}"[:200])
    tied = {} if "tie_word_embeddings" in text or "tie_word_embeddings" not in cfg \
        else {"tie_word_embeddings": cfg["tie_word_embeddings"]}
    return {**text, **tied}


def _flags_list(cfg: dict[str, Any], path: Path, key: str, layers: int,
                values: dict[Any, bool]) -> list[bool] | None:
    """A per-layer list of ``key`` whose entries are the keys of ``values`` (read as their
    values); None where the config gives none."""
    kinds = cfg.get(key)
    if kinds is None:
        return None
    if not isinstance(kinds, list) or len(kinds) != layers \
            or any(not isinstance(k, (str, int)) or isinstance(k, bool) or k not in values
                   for k in kinds):
        raise GpuarchError(f"{path}: {key}: expected {layers} entries (num_hidden_layers), "
                           f"each one of {', '.join(map(repr, values))}, got {kinds!r}"[:300])
    return [values[k] for k in kinds]


def _window_flags(cfg: dict[str, Any], path: Path, layers: int) -> list[bool] | None:
    """Each layer's kind from ``layer_types`` (True: "sliding_attention", False:
    "full_attention"); None where the config gives none."""
    return _flags_list(cfg, path, "layer_types", layers, {_SLIDING: True, _FULL: False})


def _dense_flags(cfg: dict[str, Any], path: Path, layers: int) -> int | None:
    """Layers with a dense MLP: ``mlp_layer_types`` ("dense" or "sparse"), else
    ``moe_layer_freq`` (0 dense, 1 experts); None where the config gives neither."""
    dense = _flags_list(cfg, path, "mlp_layer_types", layers, {"dense": True, "sparse": False})
    if dense is None:
        dense = _flags_list(cfg, path, "moe_layer_freq", layers, {0: True, 1: False})
    return None if dense is None else sum(dense)


def _shared_experts(path: Path, shared_key: str, shared: int, width_key: str, width: int
                    ) -> int:
    """A shared MLP of ``shared`` (config key ``shared_key``) read as shared experts of the
    routed width ``width`` (``width_key``): how many, or an error where it is no whole
    number of them."""
    if width < 1 or shared % width:
        raise GpuarchError(f"{path}: {shared_key}: the shared MLP is read as shared experts "
                           f"of {width_key} ({width}), so it must be a multiple of it, got "
                           f"{shared}")
    return shared // width


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
    also the values (no value projection; each layer's heads from ``per_layer_config``
    where Transformers 5.25 wrote that instead: ``_gemma4_layer_heads``). Norms: four a
    layer over the hidden width,
    each head's queries and keys (its values' norm has no weight). With
    ``enable_moe_block`` each layer runs experts (``num_experts``, ``top_k_experts`` of
    ``moe_intermediate_size``) beside its dense MLP of ``intermediate_size``, read as
    shared experts of the routed width (26B-A4B: 2,112 = 3 x 704), with a pre-norm of
    their own, a post-norm for each output and a router that scales its input and each
    expert's weight. The small models (E2B, E4B): per-layer input embeddings
    (``hidden_size_per_layer_input`` wide, a table of ``vocab_size_per_layer_input``
    tokens: ``per_layer_input``) and, in the last ``num_kv_shared_layers``, attention that
    reads the keys and values the last earlier layer of its kind cached
    (``kv_shared_layers``; with ``use_double_wide_mlp`` their MLPs twice as wide)."""
    layers = get(cfg, path, "num_hidden_layers", default=30)
    heads = get(cfg, path, "num_attention_heads", default=8)
    per_layer = get(cfg, path, "hidden_size_per_layer_input", default=256)
    shared = get(cfg, path, "num_kv_shared_layers", default=0)
    if shared and flag(cfg, "enable_moe_block", False):
        raise GpuarchError(f"{path}: num_kv_shared_layers: KV-shared layers beside experts are "
                           "not read (no published Gemma 4 has both)")
    if shared >= layers:
        raise GpuarchError(f"{path}: num_kv_shared_layers: {shared} of {layers} layers leaves "
                           "none to cache what they read")
    if cfg.get("use_bidirectional_attention") == "all":
        raise GpuarchError("use_bidirectional_attention: \"all\" makes every token attend "
                           "both ways (an encoder), which the decoder's costs do not price")
    window = _window_flags(cfg, path, layers) or [bool((i + 1) % 6) for i in range(layers)]
    window[-1] = False  # Transformers makes the last layer global whatever the list says
    windowed = sum(window)
    kv = get(cfg, path, "num_key_value_heads", default=4)
    head_dim = get(cfg, path, "head_dim", default=256)
    k_eq_v = flag(cfg, "attention_k_eq_v", False)
    global_kv = get(cfg, path, "num_global_key_value_heads", default=0) if k_eq_v else 0
    global_dim = get(cfg, path, "global_head_dim", default=512)
    if "per_layer_config" in cfg:
        (kv, head_dim), (global_kv, global_dim) = _gemma4_layer_heads(cfg, path, window, kv,
                                                                      head_dim)
    sliding = _heads(kv, head_dim, head_dim, False, False)
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
    small = _gemma_small_model(cfg, path, window, per_layer, shared)
    if shared and flag(cfg, "use_double_wide_mlp", False):
        small["kv_shared_mlp"] = 2 * width
    return TransformerShape(**fields, **_gemma_layers(cfg, width), **moe, **small)


def _gemma4_layer_heads(cfg: dict[str, Any], path: Path, window: list[bool], kv: int,
                        head_dim: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The window and the full layers' (KV heads, head size) from ``per_layer_config``, as
    Transformers 5.25 writes a Gemma 4 config in place of ``global_head_dim`` and
    ``num_global_key_value_heads`` (which it then ignores): a layer index's own
    ``num_key_value_heads`` and ``head_dim`` over the config's. Refused: any other key a
    layer overrides, and layers of one kind (``window``) with different heads."""
    overrides = cfg["per_layer_config"]
    if not isinstance(overrides, dict):
        raise GpuarchError(f"{path}: per_layer_config: expected an object, got "
                           f"{overrides!r}"[:200])
    heads = [(kv, head_dim)] * len(window)
    for key, layer in overrides.items():
        index = int(key) if isinstance(key, str) and key.isdigit() else len(window)
        if index >= len(window) or not isinstance(layer, dict) \
                or set(layer) - {"num_key_value_heads", "head_dim"}:
            raise GpuarchError(f"{path}: per_layer_config: a layer index's num_key_value_heads "
                               f"and head_dim are read, got {key!r}: {layer!r}"[:200])
        heads[index] = (get(layer, path, "num_key_value_heads", default=kv),
                        get(layer, path, "head_dim", default=head_dim))
    kinds = {kind: {h for h, w in zip(heads, window, strict=True) if w == kind}
             for kind in (True, False)}
    if any(len(found) > 1 for found in kinds.values()):
        raise GpuarchError(f"{path}: per_layer_config: layers of one kind with different heads "
                           "are not read")
    full = next(iter(kinds[False]))
    return next(iter(kinds[True]), (kv, head_dim)), full


def _gemma4_unified(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Gemma 4 12B's language model (``gemma4_unified_text``; a ``gemma4_unified`` config's
    ``text_config``, its vision and audio embedders not counted): Gemma 4's layers as
    ``_gemma4`` reads them, global layers' heads and KV sharing included, without per-layer
    input embeddings or experts (Transformers 5.25's Gemma4UnifiedTextConfig drops their
    keys and its model builds neither, whatever the config holds: the published config
    writes ``hidden_size_per_layer_input`` 0 and ``enable_moe_block`` false); where the
    config leaves them out, a window of 1,024 and a context of 262,144
    (modular_gemma4_unified.py)."""
    defaults = {"sliding_window": 1024, "max_position_embeddings": 262_144}
    return _gemma4({**defaults, **cfg, "hidden_size_per_layer_input": 0,
                    "enable_moe_block": False}, path, label)


def _gemma_small_model(cfg: dict[str, Any], path: Path, window: list[bool], per_layer: int,
                       shared: int) -> dict[str, Any]:
    """The shape fields of Gemma 4's small models and Gemma 3n: per-layer input embeddings
    of ``per_layer`` (from a table of ``vocab_size_per_layer_input`` tokens) and the last
    ``shared`` layers' KV sharing, as many of them full as ``window`` says."""
    small: dict[str, Any] = {}
    if per_layer:
        small.update(per_layer_input=per_layer,
                     per_layer_vocab=get(cfg, path, "vocab_size_per_layer_input",
                                         default=262_144))
    if shared:
        small.update(kv_shared_layers=shared,
                     kv_shared_full=window[len(window) - shared:].count(False))
    return small


def _gemma_layers(cfg: dict[str, Any], width: int) -> dict[str, Any]:
    """Gemma's layer traits: a GeGLU MLP of ``width``, four norms a layer, a query and key
    norm a head, biases on the attention's projections with ``attention_bias``."""
    return {"ffn_hidden": width, "ffn_kind": FfnKind.GEGLU,
            **attention_biases(cfg), "sandwich_norms": True, "qk_norm": QkNorm.HEAD}


def _gemma3n(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Gemma 3n's language model (a ``gemma3n`` config's ``text_config``, model_type
    ``gemma3n_text``; the vision and audio towers not counted), as Transformers 5.25.0's
    modeling_gemma3n.py builds it: Gemma 4's small models' layers (four norms a layer, a
    query and key norm a head, a GeGLU MLP, per-layer input embeddings of
    ``hidden_size_per_layer_input`` from a table of ``vocab_size_per_layer_input`` tokens,
    and in the last ``num_kv_shared_layers`` attention over the keys and values the last
    earlier layer of its kind cached), every layer's heads alike, four window layers to a
    full one where ``layer_types`` is absent; and two of its own: AltUp's
    ``altup_num_inputs`` streams (``altup_streams``) and LAuReL's low-rank branch of
    ``laurel_rank`` (``laurel_rank``). ``intermediate_size`` may list a width a layer; they
    must be one width. ``activation_sparsity_pattern`` (a top-k of the MLP's activations
    kept in its first layers) changes neither the weights nor the GEMMs' sizes, and is not
    priced."""
    layers = get(cfg, path, "num_hidden_layers", default=35)
    heads = get(cfg, path, "num_attention_heads", default=8)
    shared = get(cfg, path, "num_kv_shared_layers", default=15)
    if shared >= layers:
        raise GpuarchError(f"{path}: num_kv_shared_layers: {shared} of {layers} layers leaves "
                           "none to cache what they read")
    width: Any = cfg.get("intermediate_size", 16_384)
    if isinstance(width, list):
        if len(width) != layers or len(set(width)) != 1 or not isinstance(width[0], int) \
                or isinstance(width[0], bool):
            raise GpuarchError(f"{path}: intermediate_size: a width a layer is read only where "
                               f"all {layers} are one integer, got {str(width)[:120]}")
        width = width[0]
    width = get({"intermediate_size": width}, path, "intermediate_size")
    window = _window_flags(cfg, path, layers) or [bool((i + 1) % 5) for i in range(layers)]
    if shared and set(window[layers - shared:]) - set(window[:layers - shared]):
        raise GpuarchError(f"{path}: num_kv_shared_layers: the {shared} last layers hold a "
                           "kind of attention no earlier layer caches for them")
    windowed = sum(window)
    kv = get(cfg, path, "num_key_value_heads", default=2)
    head_dim = get(cfg, path, "head_dim", default=256)
    heads_fields = _heads(kv, head_dim, head_dim, False, False)
    fields = decoder_fields({"tie_word_embeddings": True, "vocab_size": 262_400,
                             "hidden_size": 2048, **cfg}, path, label, layers, heads)
    fields.update(_window_fields(get(cfg, path, "sliding_window", default=512), windowed,
                                 layers, heads_fields, heads_fields))
    streams = get(cfg, path, "altup_num_inputs", default=4)
    if streams < 2:
        raise GpuarchError(f"{path}: altup_num_inputs: AltUp needs 2 streams or more, got "
                           f"{streams}")
    per_layer = get(cfg, path, "hidden_size_per_layer_input", default=256)
    return TransformerShape(
        **fields, **_gemma_layers(cfg, width),
        altup_streams=streams,
        laurel_rank=get(cfg, path, "laurel_rank", default=64),
        **_gemma_small_model(cfg, path, window, per_layer, shared),
    )


def _mimo_windowed(cfg: dict[str, Any], path: Path, layers: int) -> int:
    """MiMo-V2-Flash's window layers: from ``layer_types`` (Transformers 5), else the
    published config's ``hybrid_layer_pattern`` (1 a window layer, 0 a full one), else
    Transformers' default (the first layer and every sixth full)."""
    window = _window_flags(cfg, path, layers) or _flags_list(
        cfg, path, "hybrid_layer_pattern", layers, {1: True, 0: False})
    if window is None:
        window = [not (i == 0 or not (i + 1) % 6) for i in range(layers)]
    return sum(window)


def _mimo_v2_flash(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """MiMo-V2-Flash: full-attention and sliding-window layers (``_mimo_windowed``) with the
    same query heads; keys of ``head_dim`` and narrower values of ``v_head_dim`` in both,
    ``num_key_value_heads`` KV heads in the full layers and ``swa_num_key_value_heads``
    (Transformers: twice as many) in the window layers, which alone hold attention sinks
    (``add_swa_attention_sink_bias``, ``add_full_attention_sink_bias``); biases on the
    query, key and value projections with ``attention_bias``, none on the output. The
    window is ``sliding_window_size`` + 1 positions (the query and as many before it, as
    Transformers reads it), else ``sliding_window``. Experts (``n_routed_experts``, no shared
    ones) in every layer but the dense ones (``_dense_flags``, else the first); the router's
    score-correction bias is a buffer, not counted (as DeepSeek-V3's)."""
    layers = get(cfg, path, "num_hidden_layers")
    heads = get(cfg, path, "num_attention_heads")
    swa_heads = get(cfg, path, "swa_num_attention_heads", default=heads)
    if swa_heads != heads:
        raise GpuarchError(f"swa_num_attention_heads: {swa_heads} query heads in the window "
                           f"layers against {heads} in the full ones; the shape holds one "
                           "count of query heads")
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
    fields.update(_window_fields(window, _mimo_windowed(cfg, path, layers), layers, sliding,
                                 full))
    experts = get(cfg, path, *EXPERT_COUNT_KEYS, default=0)
    moe: dict[str, Any] = {}
    if experts:
        dense = _dense_flags(cfg, path, layers)
        moe = {"experts": experts,
               "experts_per_token": get(cfg, path, "num_experts_per_tok"),
               "moe_ffn_hidden": get(cfg, path, "moe_intermediate_size"),
               "shared_experts": get(cfg, path, "n_shared_experts", default=0),
               "dense_layers": 1 if dense is None else dense}  # Transformers: the first
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
    # (the widest a shape takes, MAX_DIMENSION, bounds the multiplier; it also keeps an
    # infinite or NaN one from the arithmetic)
    if not isinstance(ffn_mult, (int, float)) or isinstance(ffn_mult, bool) \
            or not 0 < 2 * ffn_mult * hidden / 3 <= MAX_DIMENSION:
        raise GpuarchError(f"{where}.ffn_mult: expected a positive number giving a width of "
                           f"at most {MAX_DIMENSION:,}, got {ffn_mult!r}")
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
    return TransformerShape(
        **fields,
        hybrid_pattern="".join(pattern),
        ffn_hidden=max(widths),
        mlp_widths=tuple(widths) if len(set(widths)) > 1 else (),
        **attention_biases(cfg),
        mlp_bias=flag(cfg, "mlp_bias", False),
    )


# Transformers' MiniMaxM3VLTextConfig's flat names for the sparse-attention keys the
# published config nests in sparse_attention_config, and their defaults
_M3_SPARSE_KEYS = {"index_n_heads": ("sparse_num_index_heads", 4),
                   "index_head_dim": ("sparse_index_dim", 128),
                   "index_block_size": ("sparse_block_size", 128),
                   "index_topk_blocks": ("sparse_topk_blocks", 16),
                   "index_local_blocks": ("sparse_local_block", 1)}


def _m3_block_sparse(cfg: dict[str, Any], path: Path, layers: int
                     ) -> BlockSparseAttention | None:
    """MiniMax-M3's sparse layers: ``layer_types`` ("minimax_m3_sparse", Transformers 5),
    else ``sparse_attention_config``'s ``sparse_attention_freq`` (1 a sparse layer); their
    indexer from the nested keys, else the flat ones (MiniMaxM3VLTextConfig sets each flat
    key from its nested one where a config gives both), else Transformers' defaults. Refused:
    an initial block every query also keeps (``sparse_init_block``, which Transformers does
    not build), more local blocks than the top-k holds, and a sparse layer with the
    indexer's value path (``sparse_disable_index_value`` 0; every published layer has it
    off)."""
    nested = cfg.get("sparse_attention_config") or {}
    if not isinstance(nested, dict):
        raise GpuarchError(f"{path}: sparse_attention_config: expected an object, got "
                           f"{nested!r}")
    sparse = _flags_list(cfg, path, "layer_types", layers,
                         {"minimax_m3_sparse": True, "full_attention": False})
    if sparse is None:
        sparse = _flags_list(nested, path, "sparse_attention_freq", layers,
                             {1: True, 0: False})
    if sparse is None or not any(sparse) or nested.get("use_sparse_attention") is False:
        return None
    sizes = {}
    for flat, (legacy, default) in _M3_SPARSE_KEYS.items():
        sizes[flat] = get(nested, path, legacy, default=get(cfg, path, flat, default=default))
    init = get(nested, path, "sparse_init_block", default=0)
    if init:
        raise GpuarchError(f"{path}: sparse_init_block: {init} initial blocks every query "
                           "keeps are not read (Transformers builds none)")
    if sizes["index_local_blocks"] > sizes["index_topk_blocks"]:
        raise GpuarchError(f"{path}: index_local_blocks: {sizes['index_local_blocks']} local "
                           f"blocks do not fit the top {sizes['index_topk_blocks']}")
    no_value = _flags_list(nested, path, "sparse_disable_index_value", layers,
                           {1: True, 0: False})
    if no_value is not None and any(s and not v for s, v in zip(sparse, no_value,
                                                                    strict=True)):
        raise GpuarchError(f"{path}: sparse_disable_index_value: a sparse layer with the "
                           "indexer's value path is not read (every published layer has it "
                           "off)")
    count = sum(sparse)
    return BlockSparseAttention(index_heads=sizes["index_n_heads"],
                                index_head_dim=sizes["index_head_dim"],
                                block=sizes["index_block_size"],
                                topk_blocks=sizes["index_topk_blocks"],
                                layers=0 if count == layers else count)


def _minimax_m3(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """MiniMax-M3 (``minimax_m3``; the multimodal ``minimax_m3_vl``'s text_config, its
    vision tower not counted): grouped-query attention with each head's queries and keys
    normed, block-sparse in most layers (``_m3_block_sparse``); experts of
    ``intermediate_size`` (top ``num_experts_per_tok`` of ``num_local_experts``) with one
    shared MLP of ``shared_intermediate_size``, read as shared experts of the routed width;
    dense layers (``mlp_layer_types`` "dense", else ``moe_layer_freq`` 0, else the first
    ``first_k_dense_replace``) of ``dense_intermediate_size``; a clamped GLU
    (``swiglu_limit``, GPT-OSS's). The router's score-correction bias is a buffer, not
    counted; the multi-token prediction modules are a training setting here. As
    Transformers' MiniMaxM3VLTextModel builds them (5.25), whose defaults fill what a
    config leaves out."""
    if cfg.get("model_type") == "minimax_m3_vl" or "text_config" in cfg:
        cfg = _text_model(cfg, path)
    if flag(cfg, "attention_output_gate", False):
        raise GpuarchError("attention_output_gate: the attention's output gate is not read "
                           "yet (no published MiniMax-M3 sets it)")
    layers = get(cfg, path, "num_hidden_layers", default=60)
    heads = get(cfg, path, "num_attention_heads", default=64)
    defaults = {"hidden_size": 6144, "num_key_value_heads": 4, "head_dim": 128,
                "vocab_size": 200064, "max_position_embeddings": 524288}
    fields = decoder_fields({**defaults, **cfg}, path, label, layers, heads)
    experts = get(cfg, path, "num_local_experts", default=128)
    width = get(cfg, path, "intermediate_size", default=3072)
    shared = get(cfg, path, "shared_intermediate_size", default=3072)
    shared = _shared_experts(path, "shared_intermediate_size", shared, "intermediate_size",
                             width)
    dense_layers = _dense_flags(cfg, path, layers)
    if dense_layers is None:
        dense_layers = get(cfg, path, "first_k_dense_replace", default=0)
    qk = cfg.get("qk_norm_type", "per_head")
    if qk != "per_head":
        raise GpuarchError(f"{path}: qk_norm_type: {qk!r} is not read (per_head is)")
    moe = {"experts": experts, "experts_per_token": get(cfg, path, "num_experts_per_tok",
                                                        default=4),
           "moe_ffn_hidden": width, "shared_experts": shared,
           "dense_layers": dense_layers} if experts else {}
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "dense_intermediate_size", default=12288),
        qk_norm=QkNorm.HEAD if flag(cfg, "use_qk_norm", True) else QkNorm.NONE,
        glu_limit=glu_limit(cfg, path),
        block_sparse=_m3_block_sparse(cfg, path, layers),
        **moe,
    )




def _kimi_kinds(cfg: dict[str, Any], linear: dict[str, Any], path: Path, layers: int
                ) -> list[bool]:
    """Which of Kimi Linear's layers are Kimi Delta Attention (True) rather than latent
    attention: ``layer_types``, else ``linear_attn_config``'s ``kda_layers`` and
    ``full_attn_layers`` (counted from 1, together every layer once), else Transformers'
    default (every fourth layer from the fifth latent attention)."""
    kinds = _flags_list(cfg, path, "layer_types", layers,
                        {"linear_attention": True, "full_attention": False})
    if kinds is not None:
        return kinds
    kda, full = linear.get("kda_layers"), linear.get("full_attn_layers")
    if kda is None and full is None:
        return [not (i and i % 4 == 0) for i in range(layers)]
    ids = [x if isinstance(x, list) and all(isinstance(i, int) and not isinstance(i, bool)
                                            for i in x) else None for x in (kda, full)]
    if ids[0] is None or ids[1] is None \
            or sorted([*ids[0], *ids[1]]) != list(range(1, layers + 1)):
        raise GpuarchError(f"{path}: linear_attn_config: kda_layers and full_attn_layers "
                           f"must together list every layer 1..{layers} (num_hidden_layers) "
                           f"once, got {kda!r} and {full!r}"[:300])
    kda_ids = set(ids[0])
    return [i + 1 in kda_ids for i in range(layers)]


def _kimi_linear(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Kimi Linear (``kimi_linear``): each layer a token mixer, Kimi Delta Attention or
    multi-head latent attention without rotary positions (``mla_use_nope``; its rotary key
    channels stay, unrotated), then a SwiGLU MLP of ``intermediate_size`` (the first
    ``first_k_dense_replace`` layers, else ``mlp_layer_types`` "dense") or experts (top
    ``num_experts_per_token`` of ``num_experts`` of ``moe_intermediate_size``, with
    ``num_shared_experts`` shared ones of that width); an RMSNorm before each. Read as
    blocks, two a layer: the mixer (M or *) and the MLP (-) or experts (E). The Kimi Delta
    Attention layers' sizes come from ``linear_attn_config`` (``num_heads``, ``head_dim``,
    ``short_conv_kernel_size``). The router's score-correction bias is a buffer, not
    counted; the LM head is never tied to the embedding. As Transformers' KimiLinearModel
    builds them (5.25), whose defaults fill what a config leaves out. Kimi K3's language
    model (a ``kimi_k3`` config's ``kimi_linear`` text_config, which Transformers 5.25 does
    not build) adds, as TensorRT-LLM's modeling_kimi_linear.py builds it: latent experts
    (``routed_expert_hidden_size``: ``moe_latent``, with ``latent_moe_use_norm`` a norm of
    that width), an output gate a channel on the latent attention (``mla_use_output_gate``:
    ``attention_gate``, a projection of the hidden state to heads x v_head_dim), a full-rank
    Kimi Delta Attention output gate (``use_full_rank_gate``) and block attention residuals
    (``attn_res_block_size``: ``attention_residual_block``)."""
    linear = cfg.get("linear_attn_config") or {}
    if not isinstance(linear, dict):
        raise GpuarchError(f"{path}: linear_attn_config: expected an object, got "
                           f"{linear!r}"[:200])
    layers = get(cfg, path, "num_hidden_layers", default=27)
    heads = get(cfg, path, "num_attention_heads", default=32)
    defaults = {"hidden_size": 2304, "vocab_size": 163840, "max_position_embeddings": 1048576}
    # Transformers' KimiLinearForCausalLM ties no weights, whatever tie_word_embeddings says
    fields = {**decoder_fields({**defaults, **cfg}, path, label, 2 * layers, heads),
              "tied_embeddings": False}
    if not fields["head_dim"] and isinstance(heads, int) and heads > 0 \
            and fields["hidden"] % heads:
        # (a latent attention's heads need not divide the hidden size: Kimi K3's 96 of
        # 7,168; its query-key head width stands in)
        fields["head_dim"] = get(cfg, path, "qk_nope_head_dim", default=128) \
            + get(cfg, path, "qk_rope_head_dim", default=64)
    kda = _kimi_kinds(cfg, linear, path, layers)
    experts = get(cfg, path, "num_experts", "num_local_experts", default=256)
    dense = _flags_list(cfg, path, "mlp_layer_types", layers, {"dense": True, "sparse": False})
    if dense is None:
        first = get(cfg, path, "first_k_dense_replace", default=1)
        step = cfg.get("moe_layer_freq", 1)
        if step != 1:
            raise GpuarchError(f"{path}: moe_layer_freq: {step!r} is not read (every layer "
                               "past first_k_dense_replace with experts is)"[:200])
        dense = [i < first for i in range(layers)]
    if not experts:
        dense = [True] * layers
    pattern = "".join(("M" if k else "*") + ("-" if d else "E")
                      for k, d in zip(kda, dense, strict=True))
    width = get(cfg, path, "moe_intermediate_size", default=1024)
    nope = flag(cfg, "mla_use_nope", True)
    # KDA: a key head a value head, keys as wide as values
    kda_heads = get(linear, path, "num_heads",
                    default=get(cfg, path, "linear_num_heads", default=32))
    kda_dim = get(linear, path, "head_dim", default=get(cfg, path, "linear_head_dim",
                                                         default=128))
    mixer = MambaShape(
        kind="kda", heads=kda_heads, head_dim=kda_dim, state=kda_dim, groups=kda_heads,
        conv_kernel=get(linear, path, "short_conv_kernel_size",
                        default=get(cfg, path, "linear_conv_kernel_dim", default=4)),
        conv_bias=False, full_rank_gate=flag(linear, "use_full_rank_gate", False)
    ) if "M" in pattern else None
    moe = {"experts": experts,
           "experts_per_token": get(cfg, path, "num_experts_per_token", "num_experts_per_tok",
                                    default=8),
           "moe_ffn_hidden": width,
           "shared_experts": get(cfg, path, "num_shared_experts", "n_shared_experts",
                                 default=1)} if "E" in pattern else {}
    groups = get(cfg, path, "num_expert_group", "n_group", default=1) or 1
    per_token = get(cfg, path, "topk_group", default=1) or 1
    if "E" in pattern and groups > 1 and 0 < per_token < groups:
        moe.update(expert_groups=groups, groups_per_token=per_token)
    latent = get(cfg, path, "routed_expert_hidden_size", default=0) or 0
    if "E" in pattern and latent:
        # Kimi K3's latent experts: the routed experts read and write this width, projected
        # from and back to the hidden state (the shared experts see the hidden state)
        moe.update(moe_latent=latent, moe_latent_norm=flag(cfg, "latent_moe_use_norm", False))
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "intermediate_size", default=9216) if "-" in pattern else 0,
        position=Position.NONE if nope else Position.ROPE,
        qkv_bias=flag(cfg, "attention_bias", False),
        out_bias=flag(cfg, "attention_bias", False),
        # Kimi K3: a sigmoid gate a channel on the latent attention's output, and block
        # attention residuals
        attention_gate=flag(cfg, "mla_use_output_gate", False),
        attention_residual_block=get(cfg, path, "attn_res_block_size", default=0) or 0,
        mla=MlaShape(
            q_lora_rank=get(cfg, path, "q_lora_rank", default=0) or 0,
            kv_lora_rank=get(cfg, path, "kv_lora_rank", default=512),
            qk_nope_head_dim=get(cfg, path, "qk_nope_head_dim", default=128),
            qk_rope_head_dim=get(cfg, path, "qk_rope_head_dim", default=64),
            v_head_dim=get(cfg, path, "v_head_dim", default=128)) if "*" in pattern else None,
        hybrid_pattern=pattern,
        mamba=mixer,
        **moe,
    )


def _step_layer_list(cfg: dict[str, Any], key: str, layers: int, mtp: int) -> Any:
    """A Step-3.5/3.7 per-layer list, less the entries its multi-token prediction layers
    add past the decoder's (hub configs list ``layers`` + ``num_nextn_predict_layers``)."""
    value = cfg.get(key)
    if isinstance(value, list) and mtp and len(value) == layers + mtp:
        return value[:layers]
    return value


def _step_moe_layers(cfg: dict[str, Any], path: Path, layers: int, mtp: int) -> int:
    """Step-3.5/3.7's dense layers: ``mlp_layer_types``, else ``moe_layers_enum`` (the expert
    layers' indices, a comma-separated string or a list), else every layer from the fourth
    with experts (Transformers' Step3p7TextConfig)."""
    kinds = _step_layer_list(cfg, "mlp_layer_types", layers, mtp)
    if kinds is not None:
        dense = _flags_list({"mlp_layer_types": kinds}, path, "mlp_layer_types", layers,
                            {"dense": True, "sparse": False})
        assert dense is not None
        return sum(dense)
    enum = cfg.get("moe_layers_enum")
    if enum is None:
        return min(3, layers)
    items = enum.split(",") if isinstance(enum, str) else enum
    try:
        indices = {int(str(i).strip()) for i in items if str(i).strip()} \
            if isinstance(items, list) else None
    except ValueError:
        indices = None
    if indices is None or not indices <= set(range(layers + mtp)):
        raise GpuarchError(f"{path}: moe_layers_enum: expected the expert layers' indices "
                           f"(0..{layers - 1}), got {enum!r}"[:300])
    moe = {i for i in indices if i < layers}
    if moe != set(range(layers - len(moe), layers)):
        raise GpuarchError(f"{path}: moe_layers_enum: dense layers are read as the leading "
                           f"ones, got expert layers {sorted(moe)}"[:300])
    return layers - len(moe)


def _step3p7(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Step-3.5/3.7-Flash's language model (``step3p5``; ``step3p7``, flat or through its
    ``text_config``, the vision tower not counted): grouped-query attention with each head's
    queries and keys normed and a sigmoid gate a query head on its output (``g_proj``:
    ``head_gate``), in sliding-window layers (``layer_types``, ``sliding_window``) of
    ``num_sliding_attention_heads`` query heads (else ``attention_other_setting``'s
    ``num_attention_heads``, else as many as the full layers) and full layers of
    ``num_attention_heads`` (``full_attention.heads`` where they differ); dense SwiGLU layers
    of ``intermediate_size`` first (``_step_moe_layers``), then experts (top
    ``num_experts_per_tok`` of ``n_routed_experts``, ``moe_intermediate_size`` wide) with a
    shared MLP of ``share_expert_dim`` read as shared experts of that width. The router's
    score-correction bias is a buffer, not counted; the multi-token prediction layers (the
    per-layer lists' trailing entries) are a training setting here; the GLU clamps of a few
    layers (``swiglu_limits``) are not priced. As Transformers 5.25's Step3p7TextModel
    builds them, whose defaults fill what a config leaves out."""
    if "text_config" in cfg:
        cfg = _text_model(cfg, path)
    for key in ("sparse_attention_config", "index_n_heads", "index_topk_blocks"):
        if cfg.get(key):
            raise GpuarchError(f"{path}: {key}: Step's block-sparse attention is not read "
                               "yet; give the shape with flags")
    if flag(cfg, "mlp_bias", False):
        raise GpuarchError(f"{path}: mlp_bias: biases on the dense and shared MLPs but not the "
                           "experts are not read (no published Step config sets it)")
    if cfg.get("gating") not in (None, True, "per-head"):
        raise GpuarchError(f"{path}: gating: {cfg['gating']!r} is not read (the per-head "
                           "gate is)")
    layers = get(cfg, path, "num_hidden_layers", default=45)
    mtp = get(cfg, path, "num_nextn_predict_layers", "num_mtp_layers", default=0)
    full_heads = get(cfg, path, "num_attention_heads", default=64)
    kv_heads = get(cfg, path, "num_key_value_heads", "num_attention_groups", default=8)
    head_dim = get(cfg, path, "head_dim", default=128)
    other = cfg.get("attention_other_setting") or {}
    if not isinstance(other, dict):
        raise GpuarchError(f"{path}: attention_other_setting: expected an object, got "
                           f"{other!r}"[:200])
    for key, same in (("num_attention_groups", kv_heads), ("head_dim", head_dim)):
        if other.get(key, same) != same:
            raise GpuarchError(f"{path}: attention_other_setting.{key}: {other[key]!r} "
                               f"differs from the full layers' {same} (Transformers builds "
                               "the window layers with the full layers'; not read)"[:300])
    window_heads = get(cfg, path, "num_sliding_attention_heads",
                       default=get(other, path, "num_attention_heads", default=full_heads))
    kinds = _step_layer_list(cfg, "layer_types", layers, mtp)
    windowed_flags = _flags_list({"layer_types": kinds}, path, "layer_types", layers,
                                 {_SLIDING: True, _FULL: False}) if kinds is not None else None
    windowed = sum(windowed_flags) if windowed_flags else 0
    window = get(cfg, path, "sliding_window", default=0) if windowed else 0
    if windowed and not window:
        raise GpuarchError(f"{path}: sliding_window: {windowed} sliding_attention layers "
                           "need a window")
    fields = {**decoder_fields({"hidden_size": 4096, "vocab_size": 128815,
                                "max_position_embeddings": 128000, **cfg},
                               path, label, layers, window_heads if windowed else full_heads),
              "kv_heads": kv_heads, "head_dim": head_dim}
    if windowed:
        fields.update(sliding_window=window,
                      sliding_layers=windowed if windowed < layers else 0)
        if windowed < layers and window_heads != full_heads:
            fields["full_attention"] = FullAttention(kv_heads=kv_heads, head_dim=head_dim,
                                                     heads=full_heads)
    experts = get(cfg, path, "n_routed_experts", "moe_num_experts", "num_local_experts",
                  default=288)
    width = get(cfg, path, "moe_intermediate_size", default=1280)
    shared = get(cfg, path, "share_expert_dim", "share_expert_dims", default=1280)
    shared = _shared_experts(path, "share_expert_dim", shared, "moe_intermediate_size", width)
    dense = _step_moe_layers(cfg, path, layers, mtp)
    moe = {"experts": experts, "dense_layers": dense,
           "experts_per_token": get(cfg, path, "num_experts_per_tok", "moe_top_k", default=8),
           "moe_ffn_hidden": width, "shared_experts": shared} \
        if experts and dense < layers else {}
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "intermediate_size", default=11264),
        qk_norm=QkNorm.HEAD,
        head_gate=True,
        **attention_biases(cfg),
        **moe,
    )


def _laguna(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Laguna (Poolside), as Transformers 5.25.0's modeling_laguna.py builds it: grouped-query
    attention with each head's queries and keys normed and a softplus gate on its output
    (``gating``: true or "per-head", one value a head from its own projection,
    ``head_gate``; "per-element", one a channel, read as ``attention_gate``), in sliding-
    window and full layers (``layer_types``, else all full) whose query heads are
    ``num_attention_heads_per_layer``'s, read a kind of layer at a time (the window layers'
    as the shape's, the full layers' as ``full_attention.heads``); the first layers' dense
    SwiGLU MLP of ``intermediate_size`` (``mlp_layer_types``, else one), then experts (top
    ``num_experts_per_tok`` of ``num_experts``, ``moe_intermediate_size`` wide) beside a shared
    MLP of ``shared_expert_intermediate_size`` (read as shared experts of the routed width),
    the router's score-correction bias a parameter. The defaults fill what a config leaves
    out."""
    gating = cfg.get("gating", True)
    if gating not in (True, "per-head", "per-element"):
        raise GpuarchError(f"{path}: gating: expected true, \"per-head\" or \"per-element\", "
                           f"got {gating!r} (Transformers builds a gate whatever it says)")
    if flag(cfg, "moe_apply_router_weight_on_input", False):
        raise GpuarchError(f"{path}: moe_apply_router_weight_on_input: true is not read "
                           "(Transformers 5.25 refuses it too)")
    layers = get(cfg, path, "num_hidden_layers", default=40)
    default_heads = get(cfg, path, "num_attention_heads", default=48)
    per_layer = cfg.get("num_attention_heads_per_layer")
    if per_layer is None:
        per_layer = [default_heads] * layers
    if not isinstance(per_layer, list) or len(per_layer) != layers or any(
            not isinstance(h, int) or isinstance(h, bool) or h < 1 for h in per_layer):
        raise GpuarchError(f"{path}: num_attention_heads_per_layer: expected {layers} positive "
                           f"integers, got {str(per_layer)[:120]}")
    window = _window_flags(cfg, path, layers) or [False] * layers
    kinds = {w: {h for h, ww in zip(per_layer, window, strict=True) if ww == w}
             for w in (True, False)}
    if any(len(heads) > 1 for heads in kinds.values()):
        raise GpuarchError(f"{path}: num_attention_heads_per_layer: query heads are read a kind "
                           f"of layer at a time (window or full), got {str(per_layer)[:120]}")
    windowed = sum(window)
    window_heads = next(iter(kinds[True]), 0)
    full_heads = next(iter(kinds[False]), 0)
    kv = get(cfg, path, "num_key_value_heads", default=8)
    head_dim = get(cfg, path, "head_dim", default=128)
    fields = {**decoder_fields({"vocab_size": 100_352, "hidden_size": 2048,
                                "max_position_embeddings": 131_072, **cfg},
                               path, label, layers, window_heads or full_heads),
              "kv_heads": kv, "head_dim": head_dim}
    if windowed:
        fields.update(sliding_window=get(cfg, path, "sliding_window", default=512),
                      sliding_layers=windowed if windowed < layers else 0)
        if windowed < layers and window_heads != full_heads:
            fields["full_attention"] = FullAttention(kv_heads=kv, head_dim=head_dim,
                                                     heads=full_heads)
    dense_flags = _flags_list(cfg, path, "mlp_layer_types", layers,
                              {"dense": True, "sparse": False})
    if dense_flags is None:
        dense_flags = [True] + [False] * (layers - 1)
    dense = sum(dense_flags)
    if dense_flags != [True] * dense + [False] * (layers - dense):
        raise GpuarchError(f"{path}: mlp_layer_types: dense layers are read as the leading "
                           "ones")
    experts = get(cfg, path, "num_experts", default=256)
    width = get(cfg, path, "moe_intermediate_size", default=512)
    shared = get(cfg, path, "shared_expert_intermediate_size", default=512)
    shared = _shared_experts(path, "shared_expert_intermediate_size", shared,
                             "moe_intermediate_size", width)
    moe = {"experts": experts, "dense_layers": dense, "moe_ffn_hidden": width,
           "experts_per_token": get(cfg, path, "num_experts_per_tok", default=8),
           "shared_experts": shared, "router_bias": True} \
        if experts and dense < layers else {}
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "intermediate_size", default=8192),
        qk_norm=QkNorm.HEAD,
        head_gate=gating != "per-element",
        attention_gate=gating == "per-element",
        **attention_biases(cfg),
        **moe,
    )


def _bailing_hybrid(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Ling's hybrid models (``bailing_hybrid``), as Transformers 5.25.0's
    modeling_bailing_hybrid.py builds them: each layer a token mixer, a gated delta rule with
    a decay a channel (``BailingHybridDeltaAttention``: Kimi Delta Attention's structure,
    its decay and output gate each a full-rank projection of the hidden state,
    ``full_rank_decay`` and ``full_rank_gate``; ``num_attention_heads`` heads of
    ``head_dim``, a convolution of ``short_conv_kernel_size`` over q, k and v) or latent
    attention with rotary positions and a gate a head on its output (``g_proj``:
    ``head_gate``), by ``layer_types`` (else every ``layer_group_size``-th layer latent
    attention); then a SwiGLU MLP of ``intermediate_size`` (``mlp_layer_types``, else the
    first ``first_k_dense_replace``) or experts (top ``num_experts_per_tok`` of
    ``num_local_experts`` of ``moe_intermediate_size``, in ``n_group`` groups of which a
    token's come from ``topk_group``, beside ``n_shared_experts`` shared ones of that width);
    an RMSNorm before each. Read as blocks, two a layer. The LM head is never tied to the
    embedding; the router's score-correction bias is a buffer, not counted; the MTP layers
    (``num_mtp_layers``) are a training setting; the SwiGLU clamps (``swiglu_limits``) are
    not priced."""
    layers = get(cfg, path, "num_hidden_layers", default=42)
    heads = get(cfg, path, "num_attention_heads", default=32)
    delta = _flags_list(cfg, path, "layer_types", layers,
                        {"linear_attention": True, "full_attention": False})
    if delta is None:
        group = get(cfg, path, "layer_group_size", default=6)
        if group < 1:
            raise GpuarchError(f"{path}: layer_group_size: expected a positive integer (every "
                               f"that many layers one latent attention), got {group}")
        delta = [bool((i + 1) % group) for i in range(layers)]
    dense = _flags_list(cfg, path, "mlp_layer_types", layers, {"dense": True, "sparse": False})
    if dense is None:
        first = get(cfg, path, "first_k_dense_replace", default=2)
        dense = [i < first for i in range(layers)]
    experts = get(cfg, path, "num_local_experts", default=512)
    if not experts and not all(dense):
        raise GpuarchError(f"{path}: num_local_experts: 0 experts in the sparse layers "
                           "(Transformers builds their shared experts alone) is not read")
    pattern = "".join(("M" if d else "*") + ("-" if m else "E")
                      for d, m in zip(delta, dense, strict=True))
    defaults = {"hidden_size": 2560, "vocab_size": 157_184, "max_position_embeddings": 262_144,
                "head_dim": 0}
    # Transformers' BailingHybridForCausalLM ties no weights, whatever tie_word_embeddings says
    fields = {**decoder_fields({**defaults, **cfg}, path, label, 2 * layers, heads),
              "tied_embeddings": False}
    head_dim = get(cfg, path, "head_dim", default=128)  # the delta rule's head width
    nope = get(cfg, path, "qk_nope_head_dim", default=128)
    rope = get(cfg, path, "qk_rope_head_dim", default=64)
    fields["head_dim"] = nope + rope
    width = get(cfg, path, "moe_intermediate_size", default=768)
    mixer = MambaShape(
        kind="kda", heads=heads, head_dim=head_dim, state=head_dim, groups=heads,
        conv_kernel=get(cfg, path, "short_conv_kernel_size", default=4), conv_bias=False,
        full_rank_gate=True, full_rank_decay=True) if "M" in pattern else None
    moe: dict[str, Any] = {}
    if "E" in pattern:
        moe = {"experts": experts, "moe_ffn_hidden": width,
               "experts_per_token": get(cfg, path, "num_experts_per_tok", default=8),
               "shared_experts": get(cfg, path, "n_shared_experts", default=1)}
        groups = get(cfg, path, "n_group", default=8) or 1
        per_token = get(cfg, path, "topk_group", default=4) or 1
        if groups > 1 and 0 < per_token < groups:
            moe.update(expert_groups=groups, groups_per_token=per_token)
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "intermediate_size", default=6144) if "-" in pattern else 0,
        **attention_biases(cfg),
        head_gate="*" in pattern,
        mla=MlaShape(
            q_lora_rank=get(cfg, path, "q_lora_rank", default=0) or 0,
            kv_lora_rank=get(cfg, path, "kv_lora_rank", default=512),
            qk_nope_head_dim=nope, qk_rope_head_dim=rope,
            v_head_dim=get(cfg, path, "v_head_dim", default=128)) if "*" in pattern else None,
        hybrid_pattern=pattern,
        mamba=mixer,
        **moe,
    )


# Transformers' FalconH1Config defaults (configuration_falcon_h1.py, 5.25) for the keys a
# config may leave out
_FALCON_H1_DEFAULTS: dict[str, Any] = {
    "num_key_value_heads": 8, "mamba_d_ssm": 1024, "mamba_n_heads": 128,
    "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2,
    "mamba_conv_bias": True, "mamba_rms_norm": False}


def _falcon_h1(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Falcon-H1: every layer a Mamba-2 mixer and an attention side by side on one RMSNorm's
    output, their outputs summed, then a SwiGLU MLP on its own norm (Transformers'
    FalconH1DecoderLayer). Read as blocks, three a layer: the mixer and the attention as a
    pair that shares its norm (``parallel_mixers``: "M*") and the MLP ("-"). The mixer's
    inner width is ``mamba_d_ssm`` (else ``mamba_expand`` x hidden), ``mamba_n_heads``
    heads of ``mamba_d_head`` (else the width over the heads); its gated RMSNorm only with
    ``mamba_rms_norm``. The muP multipliers hold no parameters. Biases on the mixer's
    projections (``mamba_proj_bias``, ``projectors_bias``) are refused: the shape's
    ``proj_bias`` puts one on both together."""
    cfg = {**_FALCON_H1_DEFAULTS, **cfg}
    for key in ("mamba_proj_bias", "projectors_bias"):
        if flag(cfg, key, False):
            raise GpuarchError(f"{key}: true is not read (the mixer's input and output "
                               f"projection biases apart)")
    layers = get(cfg, path, "num_hidden_layers")
    heads = get(cfg, path, "num_attention_heads")
    fields = decoder_fields(cfg, path, label, 3 * layers, heads)
    hidden = fields["hidden"]
    width = get(cfg, path, "mamba_d_ssm", default=0) \
        or get(cfg, path, "mamba_expand") * hidden
    mamba = MambaShape(heads=get(cfg, path, "mamba_n_heads"),
                       head_dim=mamba_head_dim(cfg, path, width),
                       state=get(cfg, path, "mamba_d_state"),
                       groups=get(cfg, path, "mamba_n_groups"),
                       conv_kernel=get(cfg, path, "mamba_d_conv"),
                       conv_bias=flag(cfg, "mamba_conv_bias", True),
                       gated_norm=flag(cfg, "mamba_rms_norm", False))
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "intermediate_size"),
        ffn_kind=FfnKind.SWIGLU,
        **attention_biases(cfg),
        mlp_bias=flag(cfg, "mlp_bias", False),
        hybrid_pattern="M*-" * layers,
        mamba=mamba,
        parallel_mixers=True,
    )


def _mamba1_mixer(cfg: dict[str, Any], path: Path, hidden: int, prefix: str,
                  names: dict[str, str], dt_bc_norms: bool) -> MambaShape:
    """A Mamba-1 mixer from a config's keys (``prefix`` + the name ``names`` gives each of
    state, conv, expand, dt_rank, conv_bias and proj_bias; ``width``, a key for the inner
    width itself, where the config may give one): the inner width that key gives, else
    expand x ``hidden``; the step's rank ``dt_rank``, "auto" (or absent) for ceil(hidden /
    16), as Transformers' MambaConfig, FalconMambaConfig and JambaConfig derive it."""
    def key(name: str) -> str:
        return prefix + names[name]

    width = (get(cfg, path, names["width"], default=0) or 0) if "width" in names else 0
    if not width:
        expand = get(cfg, path, key("expand"), default=2)
        if expand < 1:
            raise GpuarchError(f"{path}: {key('expand')}: expected an integer >= 1, got "
                               f"{expand}")
        width = expand * hidden
    rank = cfg.get(key("dt_rank"))
    rank = -(-hidden // 16) if rank in (None, "auto") else get(cfg, path, key("dt_rank"))
    return MambaShape(kind="mamba1", heads=width, head_dim=1,
                      state=get(cfg, path, key("state"), default=16), groups=1,
                      conv_kernel=get(cfg, path, key("conv"), default=4),
                      conv_bias=flag(cfg, key("conv_bias"), True),
                      proj_bias=flag(cfg, key("proj_bias"), False),
                      gated_norm=False, dt_rank=rank, dt_bc_norms=dt_bc_norms)


_MAMBA1_NAMES = {"state": "state_size", "conv": "conv_kernel", "expand": "expand",
                 "dt_rank": "time_step_rank", "conv_bias": "use_conv_bias",
                 "proj_bias": "use_bias", "width": "intermediate_size"}
"""Where state-spaces' Mamba and Falcon Mamba keep their mixer's sizes (MambaConfig,
FalconMambaConfig)."""


def _mamba1(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """A pure Mamba-1 model (Transformers' ``mamba``: state-spaces' Mamba; ``falcon_mamba``:
    Falcon Mamba): ``num_hidden_layers`` blocks of an RMSNorm and a Mamba-1 mixer, no
    attention and no MLP. The mixer is ``intermediate_size`` wide where the config gives it
    (Falcon Mamba 7B's 8,192 beside an ``expand`` of 16 that Transformers does not apply),
    else ``expand`` x hidden. Falcon Mamba's norms of the step, B and C have no weights
    (buffers in Transformers, not parameters). The config class's defaults (5.25) fill what
    a config leaves out; the embedding is tied unless ``tie_word_embeddings`` is false.
    The shape's attention heads are the mixer's channels (they set how TP may split it)."""
    cfg = {"hidden_size": 768, "num_hidden_layers": 32, "vocab_size": 50280,
           "tie_word_embeddings": True, **cfg}
    layers = get(cfg, path, "num_hidden_layers")
    hidden = get(cfg, path, "hidden_size")
    mamba = _mamba1_mixer(cfg, path, hidden, "", _MAMBA1_NAMES, dt_bc_norms=False)
    fields = decoder_fields({**cfg, "num_key_value_heads": mamba.heads}, path, label, layers,
                            mamba.heads)
    fields.update(head_dim=1, context_window=0)
    return TransformerShape(**fields, ffn_hidden=0, ffn_kind=FfnKind.SWIGLU,
                            position=Position.NONE, hybrid_pattern="M" * layers, mamba=mamba)


_JAMBA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 65536, "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 262144, "num_experts_per_tok": 2, "num_experts": 16,
    "expert_layer_period": 2, "expert_layer_offset": 1, "attn_layer_period": 8,
    "attn_layer_offset": 4, "tie_word_embeddings": False}
"""JambaConfig's defaults (Transformers 5.25, configuration_jamba.py) for the keys read here."""

_JAMBA_NAMES = {"state": "d_state", "conv": "d_conv", "expand": "expand",
                "dt_rank": "dt_rank", "conv_bias": "conv_bias", "proj_bias": "proj_bias"}


def _jamba(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Jamba (``jamba``: AI21's Jamba v0.1, 1.5, 1.6 and 1.7, Mini and Large): each layer a
    token mixer, attention (layer i where i mod ``attn_layer_period`` is
    ``attn_layer_offset``; no positional encoding) or a Mamba-1 mixer (``mamba_*`` keys,
    with RMSNorm weights over its step, B and C), then a SwiGLU MLP of ``intermediate_size``
    or, where i mod ``expert_layer_period`` is ``expert_layer_offset``, the top
    ``num_experts_per_tok`` of ``num_experts`` experts of that width (a router without
    bias); an RMSNorm before each. Read as blocks, two a layer: the mixer (M or *) and the
    MLP (-) or experts (E). As Transformers' JambaModel builds it (5.25), whose config
    class's defaults fill what a config leaves out (``_JAMBA_DEFAULTS``)."""
    cfg = {**_JAMBA_DEFAULTS, **cfg}
    if cfg.get("num_key_value_heads") is None:
        cfg["num_key_value_heads"] = cfg["num_attention_heads"]
    layers = get(cfg, path, "num_hidden_layers")
    heads = get(cfg, path, "num_attention_heads")
    fields = decoder_fields(cfg, path, label, 2 * layers, heads)
    periods = {}
    for kind in ("attn", "expert"):
        period = get(cfg, path, f"{kind}_layer_period")
        if period < 1:
            raise GpuarchError(f"{path}: {kind}_layer_period: expected an integer >= 1, got "
                               f"{period}")
        offset = get(cfg, path, f"{kind}_layer_offset")
        if not 0 <= offset < period:
            raise GpuarchError(f"{path}: {kind}_layer_offset: expected 0 to "
                               f"{kind}_layer_period - 1 ({period - 1}), got {offset}")
        periods[kind] = (period, offset)
    experts = get(cfg, path, "num_experts")
    (a_period, a_offset), (e_period, e_offset) = periods["attn"], periods["expert"]
    pattern = "".join(("*" if i % a_period == a_offset else "M")
                      + ("E" if experts > 1 and i % e_period == e_offset else "-")
                      for i in range(layers))
    mamba = _mamba1_mixer(cfg, path, fields["hidden"], "mamba_", _JAMBA_NAMES,
                          dt_bc_norms=True) if "M" in pattern else None
    width = get(cfg, path, "intermediate_size")
    moe = {"experts": experts,
           "experts_per_token": get(cfg, path, "num_experts_per_tok"),
           "moe_ffn_hidden": width} if "E" in pattern else {}
    return TransformerShape(
        **fields,
        ffn_hidden=width,
        ffn_kind=FfnKind.SWIGLU,
        position=Position.NONE,
        hybrid_pattern=pattern,
        mamba=mamba,
        **moe,
    )


_MINIMAX_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 131072, "num_experts_per_tok": 2, "num_local_experts": 8,
    "block_size": 256, "tie_word_embeddings": False}
"""MiniMaxConfig's defaults (Transformers 5.25, configuration_minimax.py) for the keys read
here."""


def _minimax(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """MiniMax-Text-01 and MiniMax-M1 (``minimax``, as Transformers 5.25 builds it, and the
    checkpoints' own ``minimax_text_01`` / ``minimax_m1`` configs, which vLLM reads): each
    layer lightning attention (``layer_types`` "linear_attention", or ``attn_type_list`` 0)
    or grouped-query softmax attention ("full_attention", 1; partial rotary positions, no
    parameters), each with ``num_local_experts`` experts of ``intermediate_size`` (the top
    ``num_experts_per_tok``, a router without bias); an RMSNorm before each. Read as two
    blocks a layer: the mixer (M or *) and the experts (E). Lightning attention has the
    attention's heads and head size (``head_dim``, else hidden over heads), every head its
    own keys, computed in blocks of ``block_size``. Without a layer list, Transformers'
    default alternates softmax and lightning layers, softmax first. The DeepNorm factors
    (``*_alpha_factor``, ``layernorm_*_alpha``, ``postnorm``) hold no parameters. A shared
    expert (``shared_intermediate_size``) and a sliding window are refused (neither
    published checkpoint has one)."""
    cfg = {**_MINIMAX_DEFAULTS, **cfg}
    if cfg.get("num_key_value_heads") is None:
        cfg["num_key_value_heads"] = cfg["num_attention_heads"]
    for key in ("shared_intermediate_size", "sliding_window"):
        if cfg.get(key):
            raise GpuarchError(f"{path}: {key}: {cfg[key]!r} is not read (MiniMax-Text-01 "
                               f"and MiniMax-M1 have none)"[:200])
    layers = get(cfg, path, "num_hidden_layers")
    heads = get(cfg, path, "num_attention_heads")
    fields = decoder_fields(cfg, path, label, 2 * layers, heads)
    linear = _flags_list(cfg, path, "layer_types", layers,
                         {"linear_attention": True, _FULL: False})
    if linear is None:
        linear = _flags_list(cfg, path, "attn_type_list", layers, {0: True, 1: False})
    if linear is None:
        linear = [i % 2 == 1 for i in range(layers)]
    pattern = "".join(("M" if k else "*") + "E" for k in linear)
    head_dim = fields["head_dim"]
    if not head_dim:
        if fields["hidden"] % heads:
            raise GpuarchError(f"{path}: head_dim: missing, and num_attention_heads {heads} "
                               f"does not divide hidden_size {fields['hidden']}")
        head_dim = fields["hidden"] // heads
    mixer = MambaShape(kind="lightning", heads=heads, head_dim=head_dim, state=head_dim,
                       groups=heads, conv_kernel=0, conv_bias=False,
                       block=get(cfg, path, "block_size")) if "M" in pattern else None
    return TransformerShape(
        **fields,
        ffn_hidden=0,
        ffn_kind=FfnKind.SWIGLU,
        experts=get(cfg, path, "num_local_experts", "num_experts"),
        experts_per_token=get(cfg, path, "num_experts_per_tok"),
        moe_ffn_hidden=get(cfg, path, "intermediate_size"),
        hybrid_pattern=pattern,
        mamba=mixer,
    )


_LFM2_DEFAULTS: dict[str, Any] = {
    "vocab_size": 65536, "hidden_size": 2560, "intermediate_size": 12288,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 128000, "tie_word_embeddings": True, "conv_L_cache": 3,
    "block_multiple_of": 256, "block_ffn_dim_multiplier": 1.0}
"""Lfm2Config's defaults (Transformers 5.25, configuration_lfm2.py) for the keys read."""

_LFM2_MOE_DEFAULTS: dict[str, Any] = {
    "vocab_size": 65536, "hidden_size": 2048, "intermediate_size": 7168,
    "moe_intermediate_size": 1792, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "max_position_embeddings": 128000, "tie_word_embeddings": True,
    "conv_L_cache": 3, "num_dense_layers": 2, "num_experts_per_tok": 4, "num_experts": 32}
"""Lfm2MoeConfig's defaults (Transformers 5.25, configuration_lfm2_moe.py)."""


def _lfm2_width(cfg: dict[str, Any], path: Path) -> int:
    """LFM2's MLP width as Lfm2MLP derives it: with ``block_auto_adjust_ff_dim`` (the
    default), two thirds of ``intermediate_size``, times ``block_ffn_dim_multiplier`` and
    rounded up to ``block_multiple_of`` where the multiplier is set."""
    width = get(cfg, path, "intermediate_size")
    if not flag(cfg, "block_auto_adjust_ff_dim", True):
        return int(width)
    width = int(2 * width / 3)
    factor = cfg.get("block_ffn_dim_multiplier")
    if factor is not None:
        if not isinstance(factor, (int, float)) or isinstance(factor, bool) or factor <= 0:
            raise GpuarchError(f"{path}: block_ffn_dim_multiplier: expected a positive number, "
                               f"got {factor!r}"[:200])
        multiple = get(cfg, path, "block_multiple_of")
        if multiple < 1:
            raise GpuarchError(f"{path}: block_multiple_of: expected a positive integer, got "
                               f"{multiple}")
        width = int(factor * width)
        width = multiple * -(-width // multiple)
    if width < 1:
        raise GpuarchError(f"{path}: intermediate_size: {cfg['intermediate_size']} leaves no "
                           "MLP width after LFM2's adjustment")
    return int(width)


def _short_conv(cfg: dict[str, Any], path: Path, hidden: int) -> MambaShape:
    """LFM2's and LFM3's gated short convolution over the ``hidden`` width: ``conv_L_cache``
    taps, biases on it and its projections with ``conv_bias``; no recurrent state (one-
    channel heads, ``MambaShape(kind="short_conv")``)."""
    bias = flag(cfg, "conv_bias", False)
    return MambaShape(kind="short_conv", heads=hidden, head_dim=1, state=0, groups=1,
                      conv_kernel=get(cfg, path, "conv_L_cache"), conv_bias=bias,
                      proj_bias=bias, gated_norm=False)


def _lfm2_moe(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """LFM2-MoE (``_lfm2`` with experts), however the config names its family (its
    model_type, or only its ``architectures`` class)."""
    return _lfm2(cfg, path, label, moe_family=True)


def _lfm2(cfg: dict[str, Any], path: Path, label: str, moe_family: bool = False
          ) -> TransformerShape:
    """Liquid AI's LFM2 (``lfm2``) and LFM2-MoE (``lfm2_moe``): each layer a token mixer, a
    gated short convolution (``layer_types`` "conv") or grouped-query attention with a
    norm over each head's queries and keys ("full_attention"; else the indices
    ``full_attn_idxs`` lists, every layer where neither is given, as Lfm2Config defaults),
    then a SwiGLU MLP or, in LFM2-MoE past its first ``num_dense_layers``, the top
    ``num_experts_per_tok`` of ``num_experts`` experts of ``moe_intermediate_size`` (a
    router without bias; the expert bias is a buffer); an RMSNorm before each, and one after
    the last layer. Read as two blocks a layer: the mixer (M or *) and the MLP (-) or
    experts (E). The convolution: ``conv_L_cache`` taps over the hidden width, biases on it
    and on its projections with ``conv_bias``. LFM2's dense MLP width follows Lfm2MLP's
    adjustment (``_lfm2_width``); LFM2-MoE's dense layers are ``intermediate_size`` wide.
    ``block_ff_dim`` and ``tie_embedding`` are read as the config classes read them."""
    renamed = {k: v for k, v in (("intermediate_size", cfg.get("block_ff_dim")),
                                 ("tie_word_embeddings", cfg.get("tie_embedding")))
               if v is not None and cfg.get(k) is None}
    cfg = {**(_LFM2_MOE_DEFAULTS if moe_family else _LFM2_DEFAULTS), **cfg, **renamed}
    layers = get(cfg, path, "num_hidden_layers")
    heads = get(cfg, path, "num_attention_heads")
    fields = decoder_fields(cfg, path, label, 2 * layers, heads)
    conv = _flags_list(cfg, path, "layer_types", layers, {"conv": True, _FULL: False})
    if conv is None:
        idxs = cfg.get("full_attn_idxs")
        if idxs is None:
            if moe_family:
                raise GpuarchError(f"{path}: layer_types: missing (LFM2-MoE's config class "
                                   "has no default for them)")
            idxs = list(range(layers))
        if not isinstance(idxs, list) or any(
                not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < layers
                for i in idxs):
            raise GpuarchError(f"{path}: full_attn_idxs: expected layer indices from 0 to "
                               f"{layers - 1}, got {idxs!r}"[:200])
        conv = [i not in idxs for i in range(layers)]
    experts = get(cfg, path, "num_experts") if moe_family else 0
    dense = min(get(cfg, path, "num_dense_layers"), layers) if experts else layers
    pattern = "".join(("M" if c else "*") + ("-" if i < dense else "E")
                      for i, c in enumerate(conv))
    mixer = _short_conv(cfg, path, fields["hidden"]) if "M" in pattern else None
    moe = {"experts": experts, "experts_per_token": get(cfg, path, "num_experts_per_tok"),
           "moe_ffn_hidden": get(cfg, path, "moe_intermediate_size")} if "E" in pattern else {}
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "intermediate_size") if moe_family else _lfm2_width(cfg,
                                                                                     path),
        ffn_kind=FfnKind.SWIGLU,
        qk_norm=QkNorm.HEAD,
        hybrid_pattern=pattern,
        mamba=mixer,
        **moe,
    )


_LFM3_DEFAULTS: dict[str, Any] = {
    "vocab_size": 128000, "hidden_size": 2048, "intermediate_size": 7680,
    "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 4,
    "head_dim": 128, "max_position_embeddings": 128000, "tie_word_embeddings": True,
    "conv_L_cache": 7, "sliding_window": 256}
"""Lfm3Config's defaults (Transformers 5.25, configuration_lfm3.py) for the keys read."""

_LFM3_KINDS = ("conv", _SLIDING, _FULL)


def _lfm3(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Liquid AI's LFM3 (``lfm3``): LFM2's layers, each a gated short convolution or
    attention and then a SwiGLU MLP of ``intermediate_size`` (no adjustment), with three
    changes (Transformers' modular_lfm3.py): attention within ``sliding_window`` in the
    "sliding_attention" layers, over every position in the "full_attention" ones (where
    ``layer_types`` is absent the config class makes every fourth layer from the third full
    and every fourth from the fifth windowed, the rest convolutions); a sigmoid gate a head
    on the attention's output (``use_attention_gate``, a one-per-head projection of the
    layer's input) and ``attention_bias`` on its four projections; and a norm after each
    block too (``use_sandwich_norm``). The config class reads no ``block_*`` keys,
    ``full_attn_idxs`` or ``tie_embedding``."""
    cfg = {**_LFM3_DEFAULTS, **cfg}
    layers = get(cfg, path, "num_hidden_layers")
    heads = get(cfg, path, "num_attention_heads")
    fields = decoder_fields(cfg, path, label, 2 * layers, heads)
    kinds = layer_type_list(cfg, layers, _LFM3_KINDS, [
        _FULL if i % 4 == 2 else _SLIDING if i % 4 == 0 and i > 0 else "conv"
        for i in range(layers)])
    pattern = "".join(("M" if k == "conv" else "*") + "-" for k in kinds)
    mixer = _short_conv(cfg, path, fields["hidden"]) if "M" in pattern else None
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "intermediate_size"),
        ffn_kind=FfnKind.SWIGLU,
        qk_norm=QkNorm.HEAD,
        **attention_biases(cfg),
        head_gate=flag(cfg, "use_attention_gate", True) and "*" in pattern,
        sandwich_norms=flag(cfg, "use_sandwich_norm", True),
        **window_blocks(cfg, path, kinds, pattern.count("*")),
        hybrid_pattern=pattern,
        mamba=mixer,
    )


_LONGCAT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 131072, "hidden_size": 6144, "num_layers": 28, "num_attention_heads": 64,
    "max_position_embeddings": 131072, "tie_word_embeddings": False,
    "ffn_hidden_size": 12288, "q_lora_rank": 1536, "kv_lora_rank": 512,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "moe_topk": 12,
    "n_routed_experts": 512, "zero_expert_num": 256, "expert_ffn_hidden_size": 2048}
"""LongcatFlashConfig's defaults (Transformers 5.25, configuration_longcat_flash.py: the
sizes of LongCat-Flash-Chat) for the keys read."""

LONGCAT_FLASH_REAL_EXPERTS = 8.0
"""Of LongCat-Flash's 12 expert slots a token, how many go to real experts on average:
Meituan's technical report (arXiv 2509.01322, abstract) gives 18.6B-31.3B parameters active
a token, about 27B on average; at 1.06B a real expert over the 18.69B a token with none
(``tests/test_longcat_flash.py``), 27B is 8 of them (27.15B; 7 would be 26.1B, 9 28.2B).
Read for LongCat-Flash's published sizes only (LongCat-Flash-Chat's and -Thinking's)."""

_LONGCAT_NAMES = {"intermediate_size": "ffn_hidden_size",
                  "moe_intermediate_size": "expert_ffn_hidden_size",
                  "num_local_experts": "n_routed_experts", "num_experts_per_tok": "moe_topk"}
"""The standard names LongcatFlashConfig maps onto its own (its attribute_map)."""


def _longcat_flash(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Meituan's LongCat-Flash (``longcat_flash``), as Transformers' modular_longcat_flash.py
    builds it: each of ``num_layers`` decoder layers holds two latent attentions (always with
    a query LoRA; their fixed query and key scales hold no parameters), two dense SwiGLU
    MLPs of ``ffn_hidden_size`` and one expert block, in order attention, MLP beside the
    expert block (both read the first MLP's norm), attention, MLP, with the expert block's
    output added after the second MLP (its shortcut-connected MoE). The router scores
    ``n_routed_experts`` experts of ``expert_ffn_hidden_size`` and ``zero_expert_num``
    identity experts and sends each token to its top ``moe_topk`` (its score-correction
    bias a buffer; a bias of its own with ``router_bias``). Read as five blocks a layer,
    "*-E*-", the expert block sharing its MLP's norm. A config's ``num_hidden_layers``,
    where given, is twice the decoder layers, as the config class takes it."""
    cfg = {**_LONGCAT_DEFAULTS, **{own: cfg[name] for name, own in _LONGCAT_NAMES.items()
                                   if name in cfg and own not in cfg}, **cfg}
    if cfg.get("zero_expert_type", "identity") not in (None, "identity"):
        raise GpuarchError(f"{path}: zero_expert_type: only \"identity\" is read, got "
                           f"{cfg['zero_expert_type']!r}"[:200])
    if not cfg.get("q_lora_rank"):
        raise GpuarchError(f"{path}: q_lora_rank: LongCat-Flash's attention always has a "
                           f"query LoRA, got {cfg.get('q_lora_rank')!r}")
    hidden_layers = cfg.get("num_hidden_layers")
    layers = hidden_layers // 2 if isinstance(hidden_layers, int) \
        and not isinstance(hidden_layers, bool) else get(cfg, path, "num_layers")
    if layers < 1:
        raise GpuarchError(f"{path}: num_layers: expected a positive integer, got {layers}")
    heads = get(cfg, path, "num_attention_heads")
    fields = decoder_fields(cfg, path, label, 5 * layers, heads)
    mla = MlaShape(**mla_fields(cfg, path))
    fields.update(kv_heads=heads, head_dim=mla.qk_nope_head_dim + mla.qk_rope_head_dim)
    # the published model's sizes: its makers' mean of real experts a token applies
    published = layers == _LONGCAT_DEFAULTS["num_layers"] and all(
        cfg.get(key) == _LONGCAT_DEFAULTS[key] for key in _LONGCAT_DEFAULTS
        if key not in ("num_layers", "vocab_size", "max_position_embeddings",
                       "tie_word_embeddings"))
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "ffn_hidden_size"),
        ffn_kind=FfnKind.SWIGLU,
        **attention_biases(cfg),
        mla=mla,
        mean_real_experts=LONGCAT_FLASH_REAL_EXPERTS if published else 0.0,
        experts=get(cfg, path, "n_routed_experts"),
        experts_per_token=get(cfg, path, "moe_topk"),
        moe_ffn_hidden=get(cfg, path, "expert_ffn_hidden_size"),
        zero_experts=get(cfg, path, "zero_expert_num"),
        router_bias=flag(cfg, "router_bias", False),
        hybrid_pattern="*-E*-" * layers,
        shortcut_experts=True,
    )


_DOTS3_DEFAULTS: dict[str, Any] = {
    "vocab_size": 152064, "hidden_size": 5120, "intermediate_size": 13824,
    "moe_intermediate_size": 1536, "num_hidden_layers": 46, "num_attention_heads": 128,
    "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
    "kv_lora_rank": 512, "q_lora_rank": 1024, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "qk_nope_head_dim": 128, "num_experts_per_tok": 8, "max_position_embeddings": 524288,
    "tie_word_embeddings": False, "index_topk": 2048, "index_head_dim": 128,
    "index_n_heads": 64, "hidden_act": "silu", "shared_experts_intermediate_size": 1536,
    "head_dim": 256}
"""Dots3NoteTextConfig's defaults (Transformers 5.25, configuration_dots3_note.py: dots3-note
preview's sizes) for the keys read."""

_DOTS3_WINDOW: dict[str, Any] = {
    "num_attention_heads": 64, "num_key_value_heads": 64, "q_lora_rank": 1024,
    "kv_lora_rank": 1024, "head_dim": 256, "qk_nope_head_dim": 192, "v_head_dim": 128}
"""The window layers' latent attention where a config gives no ``per_layer_config``: its
``swa_*`` keys, else these defaults (Dots3NoteTextConfig's ``sliding_config``); the rotary
width ``swa_qk_rope_head_dim``, else head_dim - qk_nope_head_dim."""

_DOTS3_LATENT = ("num_attention_heads", "num_key_value_heads", "q_lora_rank", "kv_lora_rank",
                 "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "head_dim")
"""The keys a dots3-note layer's latent attention reads from its own config (the overrides
``per_layer_config`` may give)."""

_INDEXED = "indexed_attention"


def _dots3_kinds(cfg: dict[str, Any], path: Path, layers: int) -> list[str]:
    """dots3-note's layer kinds as Dots3NoteTextConfig resolves them: ``layer_types``, else
    the first two layers and every fourth from the second full (all full without
    ``use_sliding_window``), the rest sliding-window; ``use_dsa`` (true unless the config
    gives ``per_layer_config``) names the full layers "indexed_attention" (or, false,
    "full_attention")."""
    use_dsa = cfg.get("use_dsa", None if "per_layer_config" in cfg else True)
    if use_dsa is not None and not isinstance(use_dsa, bool):
        raise GpuarchError(f"{path}: use_dsa: expected true, false or null, got {use_dsa!r}"
                           [:200])
    full = _FULL if use_dsa is False else _INDEXED
    default = [full if not flag(cfg, "use_sliding_window", True) or i < 2 or i % 4 == 1
               else _SLIDING for i in range(layers)]
    try:
        kinds = layer_type_list(cfg, layers, (_SLIDING, _FULL, _INDEXED), default)
    except GpuarchError as exc:
        raise GpuarchError(f"{path}: {exc}") from None
    if use_dsa is not None:
        old, new = (_FULL, _INDEXED) if use_dsa else (_INDEXED, _FULL)
        kinds = [new if k == old else k for k in kinds]
    if _FULL in kinds and _INDEXED in kinds:
        raise GpuarchError(f"{path}: layer_types: full layers with an indexer "
                           "(\"indexed_attention\") beside full layers without one "
                           "(\"full_attention\") are not read: one kind of full layer")
    return kinds


def _dots3_latents(cfg: dict[str, Any], path: Path, kinds: list[str]
                   ) -> dict[bool, dict[str, int]]:
    """Each kind of layer's latent attention sizes (True: the window layers'), from the
    config's own keys with each layer's ``per_layer_config`` overrides (else the window
    layers' ``swa_*`` keys, ``_DOTS3_WINDOW``); refused where the layers of a kind differ."""
    base = {key: cfg.get(key) for key in _DOTS3_LATENT}
    per = cfg.get("per_layer_config")
    if per is None:
        window = {key: cfg.get(f"swa_{key}", value) for key, value in _DOTS3_WINDOW.items()}
        for key in ("head_dim", "qk_nope_head_dim"):
            try:
                get(window, path, key)
            except GpuarchError as exc:
                raise GpuarchError(f"{path}: swa_{exc}") from None
        window["qk_rope_head_dim"] = cfg.get("swa_qk_rope_head_dim",
                                             window["head_dim"] - window["qk_nope_head_dim"])
        overrides = {i: window for i, kind in enumerate(kinds) if kind == _SLIDING}
    else:
        if not isinstance(per, dict):
            raise GpuarchError(f"{path}: per_layer_config: expected an object of layer "
                               f"indices, got {per!r}"[:200])
        overrides = {}
        for key, value in per.items():
            index = int(key) if isinstance(key, str) and key.isdigit() else key
            if not isinstance(index, int) or isinstance(index, bool) \
                    or not 0 <= index < len(kinds):
                raise GpuarchError(f"{path}: per_layer_config: {key!r} is not a layer index "
                                   f"(0 to {len(kinds) - 1})")
            if not isinstance(value, dict):
                raise GpuarchError(f"{path}: per_layer_config.{key}: expected an object, got "
                                   f"{value!r}"[:200])
            unread = sorted(set(value) - set(_DOTS3_LATENT))
            if unread:
                raise GpuarchError(f"{path}: per_layer_config.{key}.{unread[0]}: only the "
                                   "latent attention's sizes are read a layer ("
                                   + ", ".join(_DOTS3_LATENT) + ")")
            overrides[index] = value
    sizes: dict[bool, set[tuple[int, ...]]] = {True: set(), False: set()}
    for i, kind in enumerate(kinds):
        windowed = kind == _SLIDING
        where = "swa_" if windowed and per is None else ""
        sizes[windowed].add(_dots3_sizes({**base, **overrides.get(i, {})}, path, where))
    out: dict[bool, dict[str, int]] = {}
    for windowed, found in sizes.items():
        if len(found) > 1:
            what = "sliding-window" if windowed else "full"
            raise GpuarchError(f"{path}: per_layer_config: latent attention's sizes are read "
                               f"a kind of layer at a time; the {what} layers differ")
        if found:
            out[windowed] = dict(zip(_DOTS3_LATENT, next(iter(found)), strict=True))
    return out


def _dots3_sizes(sizes: dict[str, Any], path: Path, where: str) -> tuple[int, ...]:
    """One dots3-note layer's latent attention sizes (``_DOTS3_LATENT``'s keys, ``where``
    prefixing their names in errors: "swa_" for the released window keys), each checked."""
    if not sizes["q_lora_rank"]:
        raise GpuarchError(f"{path}: {where}q_lora_rank: dots3-note's latent attention always "
                           "has a query LoRA (Transformers refuses it without), got "
                           f"{sizes['q_lora_rank']!r}"[:200])
    out = []
    for key in _DOTS3_LATENT:
        try:
            value = get(sizes, path, key)
        except GpuarchError as exc:
            raise GpuarchError(f"{path}: {where}{exc}") from None
        if value < 0:
            raise GpuarchError(f"{path}: {where}{key}: expected an integer >= 0, got {value}")
        out.append(value)
    heads, kv_heads = out[0], out[1]
    if kv_heads != heads:
        raise GpuarchError(f"{path}: {where}num_key_value_heads: latent attention's heads are "
                           f"their own key-value heads ({heads}), got {kv_heads}")
    return tuple(out)


def _dots3_note(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """dots3-note's language model (``dots3_note_text``; a ``dots3_note`` config, whose
    published form keeps the text model's keys at its top level, or its ``text_config``;
    the vision and audio towers not counted), as Transformers 5.25's modeling_dots3_note.py
    builds it: latent attention in every layer (always a query LoRA; ``attention_bias`` on
    its down-projections and output; an RMSNorm over the shared rotary key,
    ``rope_key_norm``; a sigmoid gate a head from a projection of its own, ``head_gate``) of
    two sizes: the sliding-window layers' (``sliding_window``, else
    ``sliding_window_size``, 512) from their ``per_layer_config`` overrides or the released
    config's ``swa_*`` keys (64 heads, KV rank 1,024 by default) and the full layers' from
    the config's own (128 heads, KV rank 512), the full layers with DeepSeek Sparse
    Attention's indexer (``index_*``) unless ``use_dsa`` is false (``_dots3_kinds``); a
    dense SwiGLU MLP in the first ``first_k_dense_replace`` layers and those
    ``moe_layer_freq`` leaves dense (or as ``mlp_layer_types`` says; counted, not placed),
    experts in the others (top ``num_experts_per_tok`` of
    ``n_routed_experts``, ``moe_intermediate_size`` wide; group-limited routing by
    ``n_group``, ``topk_group``) beside a shared MLP of ``n_shared_experts`` x
    ``shared_experts_intermediate_size`` read as shared experts of the routed width. The
    router's score-correction bias is a buffer; the MLPs carry no bias whatever
    ``mlp_bias`` says; Dots3NoteTextConfig's defaults fill what a config leaves out."""
    if "text_config" in cfg:
        cfg = _text_model(cfg, path)
    cfg = {**_DOTS3_DEFAULTS, **cfg}
    if cfg.get("num_key_value_heads") is None:  # as many as the query heads
        cfg["num_key_value_heads"] = cfg.get("num_attention_heads")
    if "moe_shared_expert_intermediate_size" in cfg:  # the released config's name wins
        cfg["shared_experts_intermediate_size"] = cfg["moe_shared_expert_intermediate_size"]
    if cfg.get("hidden_act") != "silu":
        raise GpuarchError(f"{path}: hidden_act: only \"silu\" is read (a SwiGLU MLP), got "
                           f"{cfg.get('hidden_act')!r}"[:200])
    layers = get(cfg, path, "num_hidden_layers")
    if layers < 1:
        raise GpuarchError(f"{path}: num_hidden_layers: expected an integer >= 1, got {layers}")
    kinds = _dots3_kinds(cfg, path, layers)
    latents = _dots3_latents(cfg, path, kinds)
    windowed = kinds.count(_SLIDING)
    indexed = _INDEXED in kinds

    def latent(sizes: dict[str, int], indexer: bool) -> MlaShape:
        index = {"index_heads": get(cfg, path, "index_n_heads"),
                 "index_head_dim": get(cfg, path, "index_head_dim"),
                 "index_topk": get(cfg, path, "index_topk")} if indexer else {}
        return MlaShape(q_lora_rank=sizes["q_lora_rank"], kv_lora_rank=sizes["kv_lora_rank"],
                        qk_nope_head_dim=sizes["qk_nope_head_dim"],
                        qk_rope_head_dim=sizes["qk_rope_head_dim"],
                        v_head_dim=sizes["v_head_dim"], rope_key_norm=True, **index)

    own = latents[bool(windowed)]  # the window layers' where there are any
    mla = latent(own, indexed and not windowed)
    heads = own["num_attention_heads"]
    fields = decoder_fields(cfg, path, label, layers, heads)
    fields.update(kv_heads=heads, head_dim=mla.qk_nope_head_dim + mla.qk_rope_head_dim)
    if windowed:
        window = get(cfg, path, "sliding_window", "sliding_window_size", default=512)
        fields.update(sliding_window=window,
                      sliding_layers=windowed if windowed < layers else 0)
    if windowed and windowed < layers:
        full = latents[False]
        full_mla = latent(full, indexed)
        if full_mla != mla or full["num_attention_heads"] != heads:
            full_heads = full["num_attention_heads"]
            fields["full_attention"] = FullAttention(
                kv_heads=full_heads, heads=full_heads, mla=full_mla,
                head_dim=full_mla.qk_nope_head_dim + full_mla.qk_rope_head_dim)
    dense_flags = _flags_list(cfg, path, "mlp_layer_types", layers,
                              {"dense": True, "sparse": False})
    if dense_flags is None:
        first = get(cfg, path, "first_k_dense_replace", default=1)
        freq = cfg.get("moe_layer_freq", 1)
        if isinstance(freq, list):
            dense_flags = _flags_list({"moe_layer_freq": freq}, path, "moe_layer_freq",
                                      layers, {0: True, 1: False})
            dense_flags = [d or i < first for i, d in enumerate(dense_flags or [])]
        else:
            step = get({"moe_layer_freq": freq}, path, "moe_layer_freq")
            dense_flags = [i < first or i % step != 0 for i in range(layers)]
    dense = sum(dense_flags)  # counted, not placed (as the DeepSeek-style readers count)
    experts = get(cfg, path, "n_routed_experts", "num_local_experts")
    moe: dict[str, Any] = {}
    if experts and dense < layers:
        shared_count = get(cfg, path, "n_shared_experts")
        if shared_count < 1:
            raise GpuarchError(f"{path}: n_shared_experts: dots3-note has at least one shared "
                               f"expert (Transformers refuses fewer), got {shared_count}")
        width = get(cfg, path, "moe_intermediate_size")
        shared_width = get(cfg, path, "shared_experts_intermediate_size")
        groups, per_token = routing_groups(cfg, path, experts)
        moe = {"experts": experts, "dense_layers": dense, "moe_ffn_hidden": width,
               "experts_per_token": get(cfg, path, "num_experts_per_tok"),
               "shared_experts": _shared_experts(
                   path, "shared_experts_intermediate_size", shared_count * shared_width,
                   "moe_intermediate_size", width),
               "expert_groups": groups, "groups_per_token": per_token}
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "intermediate_size"),
        ffn_kind=FfnKind.SWIGLU,
        **attention_biases(cfg),
        mla=mla,
        head_gate=True,
        **moe,
    )


LAYER_KIND_FAMILIES = {"gemma4_text": _gemma4, "gemma4_unified_text": _gemma4_unified,
                       "gemma3n_text": _gemma3n,
                       "mimo_v2_flash": _mimo_v2_flash,
                       "nemotron-nas": _nemotron_nas, "minimax_m3": _minimax_m3,
                       "minimax_m3_vl": _minimax_m3, "kimi_linear": _kimi_linear,
                       "step3p7": _step3p7, "step3p5": _step3p7, "falcon_h1": _falcon_h1,
                       "laguna": _laguna, "bailing_hybrid": _bailing_hybrid,
                       "mamba": _mamba1, "falcon_mamba": _mamba1, "jamba": _jamba,
                       "minimax": _minimax, "minimax_text_01": _minimax,
                       "minimax_m1": _minimax, "lfm2": _lfm2, "lfm2_moe": _lfm2_moe,
                       "lfm3": _lfm3, "longcat_flash": _longcat_flash,
                       "dots3_note": _dots3_note, "dots3_note_text": _dots3_note,
                       **SHARED_BLOCK_FAMILIES, **ATTENTION_EXPERT_FAMILIES, **XLSTM_FAMILIES,
                       **RWKV_FAMILIES, **DOGE_FAMILIES, **INKLING_FAMILIES}
"""The model_types read here, and their readers."""


def shape_of_family(model_type: str, cfg: dict[str, Any], path: Path, label: str
                    ) -> TransformerShape:
    """The shape of a config.json of one of ``LAYER_KIND_FAMILIES``."""
    return LAYER_KIND_FAMILIES[model_type](cfg, path, label)
