"""Read a local Hugging Face ``config.json`` (offline) into a :class:`TransformerShape`.

Supported families (by ``model_type``): bloom, llama, llama4 / llama4_text, mistral, mixtral,
qwen2, qwen2_moe, qwen3, qwen3_moe, gemma, gemma2, gemma3 (its text model) / gemma3_text,
deepseek_v3 / deepseek_v2, deepseek_v32 and glm_moe_dsa (DeepSeek-V3.2 and GLM-5: DeepSeek
Sparse Attention's indexer, in every layer or, in later GLM-5 releases, in some),
deepseek_v4 (DeepSeek-V4 Flash and Pro: compressed attention, hyper-connections), kimi_k2,
gpt_oss, glm4_moe (GLM-4.5 to 4.7), minimax_m2 (MiniMax-M2 and its point releases), phi3
(Phi-3, Phi-4),
olmo2, granite, gpt2, opt, mpt, gpt_bigcode, gpt_neo, nemotron, nemotron_h (hybrid Mamba-2,
no position encoding),
granitemoehybrid (IBM Granite 4.0: Mamba-2 or attention layers, each with a shared MLP and,
in the MoE models, experts), bamba (IBM's Bamba: Mamba-2 or attention layers, each with an
MLP), mamba2 (pure Mamba-2: Mamba-Codestral), qwen3_next and
qwen3_5_text / qwen3_5_moe_text (Qwen3-Next and Qwen3.5: Gated DeltaNet or gated attention
layers, each with an MLP or experts; the multimodal qwen3_5 / qwen3_5_moe checkpoints through
their text_config), gemma4 / gemma4_text, gemma4_unified_text and mimo_v2_flash (Gemma 4,
Gemma 4 12B's text model and MiMo-V2-Flash,
whose full-attention layers have heads of their own) and nemotron-nas (Llama-Nemotron's NAS
layers) and olmo_hybrid (OLMo Hybrid: Qwen3-Next's layout with OLMo 3's attention) and
lara_mini (Lara 4 Mini: Gated DeltaNet, window and full attention, experts) and zaya
(ZAYA: queries and keys convolved over time, an MLP router) and
minimax_m3 / minimax_m3_vl (MiniMax-M3's block-sparse attention) and
kimi_linear (Kimi Linear: Kimi Delta Attention or latent attention layers, each with an MLP
or experts; Kimi K3's kimi_k3 through its text_config) and step3p5 / step3p7
(Step-3.5/3.7-Flash: window layers with more query heads than the full ones, a gate a
head) and falcon_h1 (Falcon-H1: Mamba-2 and attention side by side) and mamba /
falcon_mamba / jamba (Mamba-1 mixers: state-spaces' Mamba, Falcon Mamba, AI21's Jamba with
attention and experts beside them), minimax (lightning attention) and lfm2 / lfm2_moe / lfm3
(short convolutions; LFM3's with window attention) and longcat_flash (LongCat-Flash: two
latent attentions and two MLPs a layer beside a shortcut expert block with identity experts:
``hf_layer_kinds.py``), zamba / zamba2, jetmoe, xlstm, rwkv, doge, inkling_text /
inkling_mm_model, inkling2_text / inkling2 and inkling2_loop_text / inkling2_loop (modules
of their own, registered there:
``hf_shared_blocks``, ``hf_attention_experts``, ``hf_xlstm``, ``hf_rwkv``, ``hf_doge``,
``hf_inkling``), the families of one table of
what their layers hold (``data/hf_families.toml``, read by ``hf_families.py``: Seed-OSS,
SmolLM3, ERNIE 4.5, Helium, Ministral, InternLM3, Jais 2, OLMo 3, EXAONE 4.0 and K-EXAONE, GLM-4 and
GLM-4.7-Flash, Arcee and Arcee Trinity, StarCoder2, Cohere, Cohere North (its
cohere_compass checkpoints through their text_config), OLMoE, Phi-3.5-MoE, Granite
MoE, Hunyuan 1 and 3, Solar Open, dots.llm1, Phi-2, StableLM, Apertus, DBRX, Mistral 4, CWM,
Mellum 2, Kolibri-1, A.X K1, Flint, Beam, CodeGen, Persimmon, XGLM, nanochat),
and the
families whose attention and MLP run side by side
(``parallel_attention``): gptj, gpt_neox (unless ``use_parallel_residual`` is false) and
falcon (unless ``parallel_attn`` is false; ALiBi where ``alibi`` is set).
The text models of qwen2_vl, qwen2_5_vl and qwen3_vl / qwen3_vl_moe read as qwen2 and
qwen3 / qwen3_moe, mimo (MiMo-7B) as qwen2, minimax_m3_vl_text (MiniMax-M3's) as minimax_m3,
and emu3_text_model (Emu3's) as Llama with Emu3's defaults. A config whose model_type is none
of these but whose ``architectures`` names a supported family's model class (as vLLM picks its
model class) is read as that family.
A multimodal checkpoint whose ``text_config`` names one of these families (Mistral 3,
LLaVA-style wrappers, Qwen-VL) is read as that language model; its vision tower is not
counted.
Unknown families are refused with the type named, rather than guessed. Sliding-window
attention is read from ``layer_types`` (layers marked ``sliding_attention``) where the config
lists them, else from ``sliding_window`` for every layer unless ``use_sliding_window`` is
false.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError, check_number
from gpuarch.jsonfile import read_json_object
from gpuarch.workloads.shape import (
    MAX_DIMENSION,
    CompressedAttention,
    FfnKind,
    MambaShape,
    MlaShape,
    NormKind,
    Position,
    QkNorm,
    TransformerShape,
)

__all__ = ["EXPERT_COUNT_KEYS", "read_json_object", "shape_from_hf_config",
           "supported_model_types"]

EXPERT_COUNT_KEYS = ("num_local_experts", "n_routed_experts", "num_experts")
"""The keys a config.json names its routed experts' count by (Mixtral and GPT-OSS,
DeepSeek-style, Qwen-style), the first one set read."""

_LLAMA_LIKE = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
               "deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "gpt_oss", "glm4_moe",
               "glm_moe_dsa", "minimax_m2", "phi3", "olmo2", "granite"}
_GEMMA = {"gemma", "gemma2", "gemma3", "gemma3_text"}
# multi-head latent attention families; deepseek_v32 and glm_moe_dsa with DeepSeek Sparse
# Attention's indexer
_MLA = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "glm_moe_dsa", "kimi_k2"}
_SPARSE_MLA = {"deepseek_v32", "glm_moe_dsa"}
_LLAMA4 = {"llama4", "llama4_text"}
_GATED_DELTA = {"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"}  # Gated DeltaNet hybrids
# the families read by readers of their own; with the table's (data/hf_families.toml, read
# by hf_families.py, loaded only when a config is read) they are supported_model_types()
_OWN_READERS = frozenset(_LLAMA_LIKE | _LLAMA4 | _GEMMA | _GATED_DELTA
                         | {"gpt2", "nemotron", "nemotron_h", "granitemoehybrid", "bamba",
                            "mamba2", "gptj", "gpt_neox", "falcon", "bloom", "deepseek_v4",
                            "gpt_bigcode", "gpt_neo", "opt", "mpt", "olmo_hybrid",
                            "lara_mini", "emu3_text_model", "zaya", "gpt_neox_japanese"})
# model_types whose language model is a supported family's, read as that family: the text
# models of Qwen2-VL, Qwen2.5-VL and Qwen3-VL (dense and MoE; their multimodal rotary
# positions carry no parameters; the older Qwen2-VL configs put the text fields at the top
# level), MiMo-7B (Qwen2's layers; its multi-token prediction layer, a training setting
# here, --mtp-layers, is not counted) and MiniMax-M3 VL's text model (MiniMaxM3VLTextModel,
# the layers and defaults minimax_m3 is read with)
_ALIASES = {"qwen2_vl": "qwen2", "qwen2_vl_text": "qwen2", "qwen2_5_vl": "qwen2",
            "qwen2_5_vl_text": "qwen2", "qwen3_vl_text": "qwen3",
            "qwen3_vl_moe_text": "qwen3_moe", "mimo": "qwen2",
            "minimax_m3_vl_text": "minimax_m3"}
# a config whose model_type is none of these but whose ``architectures`` names a supported
# family's model class is read as that family, as vLLM picks its model class by
# ``architectures`` (e.g. a re-quantized DeepSeek-V4 published with model_type
# "deepseek_ref" and architectures ["DeepseekV4ForCausalLM"])
_ARCHITECTURES = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral", "Qwen2ForCausalLM": "qwen2",
    "Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe", "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3", "DeepseekV32ForCausalLM": "deepseek_v32",
    "DeepseekV4ForCausalLM": "deepseek_v4", "GptOssForCausalLM": "gpt_oss",
    "Glm4MoeForCausalLM": "glm4_moe", "MiniMaxM2ForCausalLM": "minimax_m2",
    "Phi3ForCausalLM": "phi3", "Olmo2ForCausalLM": "olmo2", "GraniteForCausalLM": "granite",
    "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3_text",
    "NemotronHForCausalLM": "nemotron_h", "MiMoForCausalLM": "qwen2",
    "Gemma4ForCausalLM": "gemma4_text", "MiMoV2FlashForCausalLM": "mimo_v2_flash",
    "DeciLMForCausalLM": "nemotron-nas", "MiniMaxM3ForCausalLM": "minimax_m3",
    "FalconH1ForCausalLM": "falcon_h1", "MambaForCausalLM": "mamba",
    "FalconMambaForCausalLM": "falcon_mamba", "JambaForCausalLM": "jamba",
    "MiniMaxForCausalLM": "minimax", "MiniMaxText01ForCausalLM": "minimax_text_01",
    "MiniMaxM1ForCausalLM": "minimax_m1", "BambaForCausalLM": "bamba",
    "GPTBigCodeForCausalLM": "gpt_bigcode", "GPTNeoForCausalLM": "gpt_neo",
    "OPTForCausalLM": "opt", "MptForCausalLM": "mpt", "Lfm2ForCausalLM": "lfm2",
    "Lfm2MoeForCausalLM": "lfm2_moe", "OlmoHybridForCausalLM": "olmo_hybrid",
    "LaraMiniForCausalLM": "lara_mini", "Lfm3ForCausalLM": "lfm3",
    "Gemma4UnifiedForCausalLM": "gemma4_unified_text", "MiniMaxM3VLForCausalLM": "minimax_m3",
    "Emu3ForCausalLM": "emu3_text_model"}


def _table() -> dict[str, Any]:
    """The family table's rows by model_type (imported and parsed on first use, not when this
    module is: a preset's estimate never reads it)."""
    from gpuarch.workloads.hf_family_table import family_traits
    return family_traits()


def _layer_kinds() -> dict[str, Any]:
    """The families ``hf_layer_kinds`` reads, by model_type (imported on first use: that
    module reads configs with this one's helpers)."""
    from gpuarch.workloads.hf_layer_kinds import LAYER_KIND_FAMILIES
    return LAYER_KIND_FAMILIES


@cache
def supported_model_types() -> frozenset[str]:
    """Every model_type read: the own readers', hf_layer_kinds' and the table's."""
    return _OWN_READERS | frozenset(_layer_kinds()) | frozenset(_table())



def __getattr__(name: str) -> Any:
    """``SUPPORTED_MODEL_TYPES`` (``supported_model_types()``), worked out on first use."""
    if name == "SUPPORTED_MODEL_TYPES":
        return supported_model_types()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _get(cfg: dict[str, Any], path: Path, *keys: str, default: Any = ...) -> Any:
    """The first of ``keys`` that ``cfg`` sets: an integer (every size a config.json gives),
    a bool for ``tie_word_embeddings``; else ``default``, or an error when there is none."""
    for key in keys:
        if key in cfg and cfg[key] is not None:
            value = cfg[key]
            wanted = bool if key == "tie_word_embeddings" else int
            if not isinstance(value, wanted) or (wanted is int and isinstance(value, bool)):
                what = "true or false" if wanted is bool else "an integer"
                raise GpuarchError(f"{key}: expected {what}, got {value!r}")
            if wanted is int and value > MAX_DIMENSION:
                raise GpuarchError(f"{key}: expected at most {MAX_DIMENSION:,}, got {value}")
            return value
    if default is ...:
        raise GpuarchError(f"missing {' / '.join(keys)}")
    return default


def glu_kind(act: object) -> FfnKind | None:
    """The gated MLP a config's activation name gives its gate: SwiGLU for SiLU, GeGLU for
    GELU (Transformers' ACT2FN names); None for any other (the caller refuses it)."""
    if act in ("silu", "swish"):
        return FfnKind.SWIGLU
    if act in ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return FfnKind.GEGLU
    return None


def _flag(cfg: dict[str, Any], key: str, default: bool) -> bool:
    """A true-or-false key of ``cfg``; ``default`` where it is absent or null."""
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise GpuarchError(f"{key}: expected true or false, got {value!r}")
    return value


def _attention_biases(cfg: dict[str, Any]) -> dict[str, Any]:
    """The shape's ``qkv_bias`` and ``out_bias`` for a family whose ``attention_bias`` puts a
    bias on all four attention projections (absent: none)."""
    bias = _flag(cfg, "attention_bias", False)
    return {"qkv_bias": bias, "out_bias": bias}


def shape_from_hf_config(path: Path, name: str | None = None) -> TransformerShape:
    """Parse ``path`` (a config.json); raises :class:`GpuarchError` naming the file."""
    cfg = read_json_object(path)
    model_type = cfg.get("model_type")
    inner = cfg.get("text_config")
    inner_type = _family(inner.get("model_type")) if isinstance(inner, dict) else None
    if isinstance(model_type, str) and model_type not in supported_model_types() \
            and inner_type is not None and isinstance(inner, dict):
        # a multimodal wrapper (Mistral 3, LLaVA, Qwen-VL style) around a language model of
        # a supported family: the language model is read, the vision tower not counted.
        # Whether the LM head shares the embedding is the wrapper's setting where the
        # language model's config leaves it out (Qwen3-VL's checkpoints)
        label = name or _label(cfg, path, model_type)
        tied = {} if "tie_word_embeddings" in inner or "tie_word_embeddings" not in cfg \
            else {"tie_word_embeddings": cfg["tie_word_embeddings"]}
        cfg, model_type = {**inner, **tied, "_name_or_path": label}, inner_type
    else:
        model_type = _family(model_type) or _family_by_architecture(cfg) or model_type
    if isinstance(model_type, str) and model_type not in supported_model_types():
        inner_name = inner.get("model_type") if isinstance(inner, dict) else None
        named = model_type if model_type in _NOT_YET else inner_name \
            if isinstance(inner_name, str) and inner_name in _NOT_YET else None
        if named is not None:
            which = repr(model_type) if named == model_type \
                else f"{model_type!r} (its text_config's {named!r})"
            raise GpuarchError(f"{path}: model_type {which} is not read yet: "
                               f"{_NOT_YET[named]}, which the model's shape does not hold "
                               "(docs/models.md); give the shape with flags")
    if isinstance(model_type, str) and model_type not in supported_model_types() \
            and not isinstance(inner, dict):
        # a multimodal checkpoint's wrapper type whose language model is read, without the
        # text_config that holds it
        text = next((t for t in (f"{model_type}_text", f"{model_type}_text_model")
                     if t in supported_model_types() or t in _ALIASES), None)
        if text is not None:
            raise GpuarchError(f"{path}: model_type {model_type!r} is a multimodal checkpoint "
                               f"whose language model ({text!r}) is read from its "
                               "text_config, which this config lacks")
    if not isinstance(model_type, str) or model_type not in supported_model_types():
        read = sorted(supported_model_types() | set(_ALIASES))
        close = _spelled_alike(model_type, read)
        raise GpuarchError(
            f"{path}: model_type {model_type!r} is not supported"
            + (f"{close} Supported: " if close else "; supported: ")
            + f"{', '.join(read)} (or give the shape with flags)")
    label = name or _label(cfg, path, model_type)
    try:
        return _state_formats(_shape_of(model_type, cfg, path, label), cfg, model_type)
    except GpuarchError as exc:
        # name the file once (some readers name it themselves)
        message = str(exc)
        raise GpuarchError(message if message.startswith(f"{path}: ")
                           else f"{path}: {message}") from None


_TORCH_FORMATS = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
"""config.json's names for a recurrent state's format (torch dtypes), as the shape's."""


def _state_formats(shape: TransformerShape, cfg: dict[str, Any], model_type: str
                   ) -> TransformerShape:
    """``shape`` with its recurrent state's formats as the config names them:
    ``mamba_ssm_cache_dtype`` (Nemotron-H; Transformers' NemotronHConfig defaults it to
    "float32", as Nemotron 3's checkpoints also write it) and ``mamba_ssm_dtype`` (Qwen3.5's
    checkpoints write "float32"); "auto" or absent, none."""
    if shape.mamba is None:
        return shape
    cache = _state_format(cfg, "mamba_ssm_cache_dtype",
                          "float32" if model_type == "nemotron_h" else "auto")
    state = _state_format(cfg, "mamba_ssm_dtype", "auto")
    if not cache and not state:
        return shape
    return replace(shape, mamba=replace(shape.mamba, ssm_cache_dtype=cache, ssm_dtype=state))


def _state_format(cfg: dict[str, Any], key: str, default: str) -> str:
    """The format config key ``key`` names (``_TORCH_FORMATS``), "" for "auto"."""
    value = cfg.get(key, default)
    if value is None or value == "auto":
        return ""
    if not isinstance(value, str) or value not in _TORCH_FORMATS:
        raise GpuarchError(f"{key}: expected one of {', '.join(_TORCH_FORMATS)} or "
                           f"\"auto\", got {value!r}")
    return _TORCH_FORMATS[value]


def _shape_of(model_type: str, cfg: dict[str, Any], path: Path, label: str
              ) -> TransformerShape:
    """The shape a supported family's reader makes of ``cfg`` (the families' sets are
    disjoint, so the order of the look-ups does not matter)."""
    if model_type in _layer_kinds():
        from gpuarch.workloads.hf_layer_kinds import shape_of_family
        return shape_of_family(model_type, cfg, path, label)
    if model_type in _table():
        from gpuarch.workloads.hf_families import shape_of_tabled_family
        return shape_of_tabled_family(model_type, cfg, path, label)
    if model_type in _GEMMA:
        return _gemma(cfg, path, label, model_type)
    if model_type in _LLAMA4:
        return _llama4(cfg.get("text_config", cfg) if model_type == "llama4" else cfg,
                       path, label)
    reader = _readers().get(model_type)
    return reader(cfg, path, label) if reader else _llama_like(cfg, path, label, model_type)


@cache
def _readers() -> dict[str, Callable[[dict[str, Any], Path, str], TransformerShape]]:
    """The families read by a function of their own, by model_type."""
    return {"gpt2": _gpt2, "gptj": _gptj, "bloom": _bloom, "gpt_neox": _gpt_neox,
            "falcon": _falcon, "gpt_neox_japanese": _gpt_neox_japanese,
            "nemotron_h": _nemotron_h, "granitemoehybrid": _granite_hybrid,
            "bamba": _bamba, "mamba2": _mamba2, "deepseek_v4": _deepseek_v4,
            "olmo_hybrid": _olmo_hybrid, "lara_mini": _lara_mini, "emu3_text_model": _emu3,
            "zaya": _zaya,
            **_GPT_ERA,
            **dict.fromkeys(_GATED_DELTA, _gated_delta_hybrid)}


# what ``attention_bias`` and ``mlp_bias`` add, family by family, as Transformers 5.25 builds
# the models (checked by scripts/params_vs_transformers.py): biases on the query, key, value
# and output projections (_OUT_BIAS; the rest of the llama-like families the QKV ones only,
# Qwen2's always), none at all (_NO_BIAS_KEY: their attention takes no bias), and the MLP's
# (_MLP_BIAS_KEY)
_OUT_BIAS = {"llama", "granite", "olmo2", "qwen3", "qwen3_moe"}
_NO_BIAS_KEY = {"mistral", "mixtral", "phi3", "minimax_m2"}
_MLP_BIAS_KEY = {"llama", "granite"}

# families seen in published checkpoints whose layers the shape cannot hold yet, and why
_NOT_YET = {
    "kolibri1_1": "Kolibri-1.1's weightless pooled-key indexer and KV-shared layers beside "
                  "experts",
    "qwen4_exp": "Qwen4-Exp's low-rank hyper-connections, n-gram per-layer embeddings and "
                 "pooled-key indexed attention",
    "qwen4_exp_text": "Qwen4-Exp's low-rank hyper-connections, n-gram per-layer embeddings "
                      "and pooled-key indexed attention",
}


def _spelled_alike(model_type: Any, read: list[str]) -> str:
    """``"; did you mean 'x'?"`` where ``model_type`` is a family read here spelled with
    other case or separators ("Qwen3MoE", "deepseek-v3"); else "" (a merely similar name is
    another family, not a typo: olmo3 is not olmo2)."""
    if not isinstance(model_type, str):
        return ""
    key = "".join(c for c in model_type.lower() if c.isalnum())
    for name in read:
        if "".join(c for c in name if c.isalnum()) == key:
            return f"; did you mean {name!r}?"
    return ""


def _family(model_type: Any) -> str | None:
    """The supported family a ``model_type`` is read as (itself, or what it is an alias
    of); None for any other value."""
    if not isinstance(model_type, str):
        return None
    family = _ALIASES.get(model_type, model_type)
    return family if family in supported_model_types() else None


def _family_by_architecture(cfg: dict[str, Any]) -> str | None:
    """The supported family the config's ``architectures`` names, where its model_type
    names none."""
    classes = cfg.get("architectures")
    if not isinstance(classes, list):
        return None
    tabled = {t.architecture: t.model_type for t in _table().values()}
    for cls in classes:
        if isinstance(cls, str) and (cls in _ARCHITECTURES or cls in tabled):
            return _ARCHITECTURES.get(cls) or tabled[cls]
    return None


def _label(cfg: dict[str, Any], path: Path, model_type: Any) -> str:
    """The model's name: the config's ``_name_or_path`` unless it names no model (empty, or
    a directory such as "./", as a config saved from a local directory has it), else the
    file's (``_file_label``), else its model_type."""
    saved = str(cfg.get("_name_or_path") or "")
    if not saved.strip("./\\ "):
        saved = ""
    return saved or _file_label(path) or str(model_type)


def _file_label(path: Path) -> str:
    """A name for the model of ``path``: its directory's, for a checkpoint's config.json;
    else the file's own name, less ``.json`` and a ``config`` suffix
    (``Qwen--Qwen3-8B_config.json`` -> ``Qwen--Qwen3-8B``)."""
    if path.name == "config.json":
        return path.parent.name
    stem = path.name.removesuffix(".json")
    for suffix in ("_config", "-config", ".config"):
        if stem.endswith(suffix) and len(stem) > len(suffix):
            return stem.removesuffix(suffix)
    return stem


def _gpt2_style_fields(cfg: dict[str, Any], path: Path, label: str) -> dict[str, Any]:
    """The fields GPT-2's config names (``n_embd``, ``n_layer``, ``n_head``, ``n_inner``,
    GPT-J's too): a GELU MLP of ``n_inner`` (4 x hidden where not given), LayerNorm."""
    hidden = _get(cfg, path, "n_embd", "hidden_size", "n_embed")
    return {"name": label, "layers": _get(cfg, path, "n_layer", "num_hidden_layers"),
            "hidden": hidden, "heads": _get(cfg, path, "n_head", "num_attention_heads"),
            "vocab": _get(cfg, path, "vocab_size"),
            "ffn_hidden": _get(cfg, path, "n_inner", default=None) or 4 * hidden,
            "ffn_kind": FfnKind.GELU, "norm": NormKind.LAYERNORM}


def _gpt2(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    return TransformerShape(
        **_gpt2_style_fields(cfg, path, label),
        position=Position.LEARNED,
        max_positions=_get(cfg, path, "n_positions", "max_position_embeddings"),
        bias=True,
        tied_embeddings=bool(_get(cfg, path, "tie_word_embeddings", default=True)),
    )


def _bloom(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """BLOOM: GPT-2's layers with ALiBi instead of a position table (no position
    parameters), a LayerNorm right after the token embedding, biases on every projection,
    tied embeddings (BLOOM 176B: 176,247,271,424 parameters, its model card)."""
    return TransformerShape(
        **_gpt2_style_fields(cfg, path, label),
        position=Position.ALIBI,
        bias=True,
        tied_embeddings=bool(_get(cfg, path, "tie_word_embeddings", default=True)),
        embedding_norm=True,
        context_window=_get(cfg, path, "seq_length", default=0) or 0,
    )


def _gptj(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """GPT-J: attention and MLP side by side on one LayerNorm's output, rotary positions,
    untied embeddings; its MLP and LM head carry biases, its attention none (GPT-J 6B:
    6,050,882,784 parameters, what Transformers builds from its config)."""
    return TransformerShape(
        **_gpt2_style_fields(cfg, path, label),
        tied_embeddings=bool(_get(cfg, path, "tie_word_embeddings", default=False)),
        parallel_attention=True,
        shared_norm=True,
        mlp_bias=True,
        lm_head_bias=True,
        context_window=_get(cfg, path, "n_positions", "max_position_embeddings",
                            default=0) or 0,
    )


def _gpt_bigcode(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """GPTBigCode (StarCoder, SantaCoder): GPT-2's layers, with one key-value head where
    ``multi_query`` (Transformers' default) is set; biases everywhere, a learned position
    table, tied embeddings. GPTBigCodeConfig's defaults fill what a config leaves out."""
    cfg = {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12,
           "n_head": 12, **cfg}
    fields = _gpt2_style_fields(cfg, path, label)
    return TransformerShape(
        **fields,
        kv_heads=1 if _flag(cfg, "multi_query", True) else fields["heads"],
        position=Position.LEARNED,
        max_positions=_get(cfg, path, "n_positions", "max_position_embeddings"),
        bias=True,
        tied_embeddings=bool(_get(cfg, path, "tie_word_embeddings", default=True)),
    )


def _gpt_neo(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """GPT-Neo (EleutherAI): GPT-2's layers with queries, keys and values without biases
    (the output projection and the MLP keep theirs), a learned position table, and local
    layers attending within ``window_size`` as ``attention_types`` expands them (Transformers'
    GPTNeoConfig: [[kinds, repeats], ...]). GPTNeoConfig's defaults fill what a config
    leaves out."""
    cfg = {"vocab_size": 50257, "max_position_embeddings": 2048, "hidden_size": 2048,
           "num_layers": 24, "num_heads": 16, "window_size": 256,
           "attention_types": [[["global", "local"], 12]], **cfg}
    layers = _get(cfg, path, "num_layers")
    kinds = cfg.get("attention_types")
    expanded: list[Any] = []
    if isinstance(kinds, list):
        for item in kinds:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list)
                    and isinstance(item[1], int) and not isinstance(item[1], bool)):
                expanded = []
                break
            expanded += item[0] * item[1]
    if len(expanded) != layers or any(k not in ("global", "local") for k in expanded):
        raise GpuarchError(f"attention_types: expected [[kinds, repeats], ...] expanding to "
                           f"{layers} \"global\" or \"local\" layers (num_layers), got "
                           f"{kinds!r}"[:200])
    hidden = _get(cfg, path, "hidden_size")
    local = expanded.count("local")
    return TransformerShape(
        name=label, layers=layers, hidden=hidden, heads=_get(cfg, path, "num_heads"),
        vocab=_get(cfg, path, "vocab_size"),
        ffn_hidden=_get(cfg, path, "intermediate_size", default=None) or 4 * hidden,
        ffn_kind=FfnKind.GELU, norm=NormKind.LAYERNORM,
        position=Position.LEARNED,
        max_positions=_get(cfg, path, "max_position_embeddings"),
        out_bias=True, mlp_bias=True,
        tied_embeddings=bool(_get(cfg, path, "tie_word_embeddings", default=True)),
        sliding_window=_get(cfg, path, "window_size") if local else 0,
        sliding_layers=local if 0 < local < layers else 0,
    )


_OPT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 50272, "hidden_size": 768, "num_hidden_layers": 12, "ffn_dim": 3072,
    "max_position_embeddings": 2048, "num_attention_heads": 12, "tie_word_embeddings": True}
"""OPTConfig's defaults (Transformers 5.25, configuration_opt.py) for the keys read."""


def _opt(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Meta's OPT: LayerNorms before attention and MLP (and after the last layer), biases on
    every projection unless ``enable_bias`` is false, a ReLU MLP of ``ffn_dim``, a learned
    position table of ``max_position_embeddings`` + 2 rows (OPT offsets positions by 2),
    tied embeddings (Transformers' modeling_opt.py). OPT-350m's post-norm layers
    (``do_layer_norm_before`` false), its projections between a narrower embedding and the
    hidden state (``word_embed_proj_dim``) and norms without weights are refused."""
    cfg = {**_OPT_DEFAULTS, **cfg}
    hidden = _get(cfg, path, "hidden_size")
    if _get(cfg, path, "word_embed_proj_dim", default=hidden) != hidden:
        raise GpuarchError(f"word_embed_proj_dim: {cfg['word_embed_proj_dim']} is not read "
                           f"(the projections to and from the hidden size {hidden})")
    for key in ("do_layer_norm_before", "layer_norm_elementwise_affine"):
        if not _flag(cfg, key, True):
            raise GpuarchError(f"{key}: false is not read (OPT-350m's post-norm layers and "
                               f"norms without weights)")
    activation = cfg.get("activation_function", "relu")
    kinds = {"relu": FfnKind.RELU, "gelu": FfnKind.GELU, "gelu_new": FfnKind.GELU}
    if activation not in kinds:
        raise GpuarchError(f"activation_function: expected one of {', '.join(kinds)}, got "
                           f"{activation!r}"[:200])
    return TransformerShape(
        **_decoder_fields(cfg, path, label, _get(cfg, path, "num_hidden_layers"),
                          _get(cfg, path, "num_attention_heads")),
        ffn_hidden=_get(cfg, path, "ffn_dim"),
        ffn_kind=kinds[activation],
        norm=NormKind.LAYERNORM,
        position=Position.LEARNED,
        max_positions=_get(cfg, path, "max_position_embeddings") + 2,
        bias=_flag(cfg, "enable_bias", True),
    )


_MPT_DEFAULTS: dict[str, Any] = {
    "d_model": 2048, "n_heads": 16, "n_layers": 24, "max_seq_len": 2048, "vocab_size": 50368}
"""MptConfig's defaults (Transformers 5.25, configuration_mpt.py) for the keys read."""


def _mpt(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """MosaicML's MPT (``mpt``: MPT-7B, MPT-30B) as Transformers' port builds it: ALiBi, no
    biases, LayerNorms without bias (a weight a channel), multi-head attention, a GELU MLP of
    4 x ``d_model``, tied embeddings. The llm-foundry settings the port does not build are
    refused where a config sets them otherwise (``expansion_ratio`` other than 4, biases,
    grouped-query or multi-query attention, a learned position table instead of ALiBi)."""
    cfg = {**_MPT_DEFAULTS, **cfg}
    attn = cfg.get("attn_config") or {}
    if not isinstance(attn, dict):
        raise GpuarchError(f"attn_config: expected an object, got {attn!r}"[:200])
    refused = {"expansion_ratio": (cfg.get("expansion_ratio", 4), 4),
               "no_bias": (cfg.get("no_bias", True), True),
               "attn_config.attn_type": (attn.get("attn_type", "multihead_attention"),
                                         "multihead_attention"),
               "attn_config.alibi": (attn.get("alibi", True), True)}
    for key, (value, wanted) in refused.items():
        if value != wanted:
            raise GpuarchError(f"{key}: only {wanted!r} is read (what Transformers' MPT "
                               f"builds), got {value!r}"[:200])
    hidden = _get(cfg, path, "d_model")
    return TransformerShape(
        name=label, layers=_get(cfg, path, "n_layers"), hidden=hidden,
        heads=_get(cfg, path, "n_heads"), vocab=_get(cfg, path, "vocab_size"),
        ffn_hidden=4 * hidden, ffn_kind=FfnKind.GELU, norm=NormKind.RMSNORM,
        position=Position.ALIBI, tied_embeddings=True,
        context_window=_get(cfg, path, "max_seq_len"),
    )


_GPT_ERA = {"gpt_bigcode": _gpt_bigcode, "gpt_neo": _gpt_neo, "opt": _opt, "mpt": _mpt}
"""GPT-2-era families and their readers."""


def _gpt_neox(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """GPT-NeoX (Pythia, GPT-NeoX-20B): biases on every projection (the attention's unless
    ``attention_bias`` is false, the MLP's always), two LayerNorms a layer, rotary
    positions, untied embeddings, attention and MLP side by side unless
    ``use_parallel_residual`` is false."""
    heads = _get(cfg, path, "num_attention_heads")
    attention_bias = _flag(cfg, "attention_bias", True)
    return TransformerShape(
        **_decoder_fields(cfg, path, label, _get(cfg, path, "num_hidden_layers"), heads),
        ffn_hidden=_get(cfg, path, "intermediate_size"),
        ffn_kind=FfnKind.GELU,
        norm=NormKind.LAYERNORM,
        bias=attention_bias,
        mlp_bias=not attention_bias,
        parallel_attention=_flag(cfg, "use_parallel_residual", True),
    )


_NEOX_JAPANESE_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000, "hidden_size": 2560, "num_hidden_layers": 32,
    "num_attention_heads": 32, "intermediate_multiple_size": 4, "hidden_act": "gelu",
    "max_position_embeddings": 2048, "tie_word_embeddings": True}
"""GPTNeoXJapaneseConfig's defaults (Transformers 5.25, configuration_gpt_neox_japanese.py:
gpt-neox-japanese-2.7b's sizes) for the keys read."""


def _gpt_neox_japanese(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """GPT-NeoX Japanese (ABEJA's gpt-neox-japanese-2.7b), as Transformers 5.25's
    modeling_gpt_neox_japanese.py builds it: multi-head attention without biases but for
    the last layer's output projection (``dense_bias``: ``last_out_bias``), partial rotary
    positions, two LayerNorms a layer in sequence, an MLP without biases of
    ``intermediate_multiple_size`` x the hidden size, and the LM head tied to the embedding
    unless ``tie_word_embeddings`` is false; GPTNeoXJapaneseConfig's defaults fill what a
    config leaves out."""
    cfg = {**_NEOX_JAPANESE_DEFAULTS, **cfg}
    act = cfg.get("hidden_act")
    if not isinstance(act, str) or not act.startswith("gelu"):
        raise GpuarchError(f"hidden_act: only a GELU MLP is read, got {act!r}"[:200])
    hidden = _get(cfg, path, "hidden_size")
    multiple = _get(cfg, path, "intermediate_multiple_size")
    if multiple < 1:
        raise GpuarchError(f"intermediate_multiple_size: expected an integer >= 1, got "
                           f"{multiple}")
    heads = _get(cfg, path, "num_attention_heads")
    return TransformerShape(
        **_decoder_fields(cfg, path, label, _get(cfg, path, "num_hidden_layers"), heads),
        ffn_hidden=hidden * multiple,
        ffn_kind=FfnKind.GELU,
        norm=NormKind.LAYERNORM,
        last_out_bias=True,
    )


def _falcon(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Falcon: multi-query attention (7B) or, in the new decoder architecture (40B, 180B),
    ``num_kv_heads`` groups; attention and MLP side by side unless ``parallel_attn`` is
    false; a GELU MLP of ``ffn_hidden_size`` (4 x hidden where not given); rotary positions,
    or ALiBi where ``alibi`` is set (Falcon-RW); tied embeddings unless the config says
    otherwise; one LayerNorm a parallel layer or two (``num_ln_in_parallel_attn``)."""
    heads = _get(cfg, path, "num_attention_heads", "n_head")
    hidden = _get(cfg, path, "hidden_size", "n_embd")
    new = _flag(cfg, "new_decoder_architecture", False)
    if new:
        kv_heads = _get(cfg, path, "num_kv_heads", default=heads)
    else:
        kv_heads = 1 if _flag(cfg, "multi_query", True) else heads
    parallel = _flag(cfg, "parallel_attn", True)
    norms = cfg.get("num_ln_in_parallel_attn")
    if norms not in (None, 1, 2) or isinstance(norms, bool):
        raise GpuarchError(f"num_ln_in_parallel_attn: expected 1 or 2, got {norms!r}")
    return TransformerShape(
        name=label,
        layers=_get(cfg, path, "num_hidden_layers", "n_layer"),
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        vocab=_get(cfg, path, "vocab_size"),
        ffn_hidden=_get(cfg, path, "ffn_hidden_size", default=None) or 4 * hidden,
        ffn_kind=FfnKind.GELU,
        norm=NormKind.LAYERNORM,
        position=Position.ALIBI if _flag(cfg, "alibi", False) else Position.ROPE,
        bias=_flag(cfg, "bias", False),
        tied_embeddings=bool(_get(cfg, path, "tie_word_embeddings", default=True)),
        parallel_attention=parallel,
        # a parallel layer reads one LayerNorm (Falcon-7B, Falcon2-11B), or its attention and
        # MLP one each (ln_attn, ln_mlp: 40B, 180B): num_ln_in_parallel_attn, 2 by default
        # in the new architecture, as Transformers' FalconDecoderLayer builds them
        shared_norm=parallel and (norms == 1 if norms is not None else not new),
        context_window=_get(cfg, path, "max_position_embeddings", default=0) or 0,
    )


def _llama_like(cfg: dict[str, Any], path: Path, label: str, model_type: str
                ) -> TransformerShape:
    heads = _get(cfg, path, "num_attention_heads")
    experts = _get(cfg, path, *EXPERT_COUNT_KEYS,
                   default=0)
    layers = _get(cfg, path, "num_hidden_layers")
    mla = None
    if model_type in _MLA and cfg.get("kv_lora_rank"):
        mla = MlaShape(**_mla_fields(cfg, path),
                       **(_indexer(cfg, path, layers) if model_type in _SPARSE_MLA else {}))
    if model_type == "minimax_m2":
        _check_minimax_m2(cfg)
    window, windowed = _sliding_window(cfg, path, layers)
    groups, groups_per_token = _routing_groups(cfg, path, experts)
    ffn_kind = FfnKind.RELU2 if model_type == "nemotron" else FfnKind.SWIGLU
    norm = NormKind.LAYERNORM if model_type == "nemotron" else NormKind.RMSNORM
    attention_bias = _flag(cfg, "attention_bias", model_type == "gpt_oss") \
        and model_type not in _NO_BIAS_KEY
    fields = _decoder_fields(cfg, path, label, layers, heads)
    if mla is not None:  # latent attention has no key-value heads: num_key_value_heads unread
        fields["kv_heads"] = heads
    return TransformerShape(
        **fields,
        ffn_hidden=_get(cfg, path, "intermediate_size"),
        ffn_kind=ffn_kind,
        norm=norm,
        # GPT-OSS: the attention's biases with attention_bias (its checkpoints' true), the
        # experts' always
        bias=model_type == "gpt_oss" and attention_bias,
        qkv_bias=model_type != "gpt_oss" and (
            _flag(cfg, "qkv_bias", True) if model_type.startswith("qwen2") else attention_bias),
        out_bias=attention_bias and (model_type in _OUT_BIAS or mla is not None),
        mlp_bias=(model_type in _MLP_BIAS_KEY and _flag(cfg, "mlp_bias", False))
        or (model_type == "gpt_oss" and not attention_bias),
        experts=experts,
        experts_per_token=_get(cfg, path, "num_experts_per_tok", default=0) if experts else 0,
        shared_experts=_shared_experts(cfg, path) if experts else 0,
        expert_groups=groups, groups_per_token=groups_per_token,
        moe_ffn_hidden=_get(cfg, path, "moe_intermediate_size", default=0) or 0,
        dense_layers=_dense_layers(cfg, path, layers) if experts else 0,
        sliding_window=window,
        sliding_layers=windowed if windowed != layers else 0,
        glu_limit=_glu_limit(cfg, path),
        mla=mla,
        qk_norm=_qk_norm(cfg, model_type),
        # GPT-OSS's router carries a bias and its attention a sink logit a head
        router_bias=model_type == "gpt_oss" and bool(experts),
        attention_sinks=model_type == "gpt_oss",
        shared_expert_gate=model_type == "qwen2_moe" and _shared_expert_gate(cfg, experts),
    )


_EMU3_DEFAULTS: dict[str, Any] = {
    "vocab_size": 184622, "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 9216, "tie_word_embeddings": False}
"""Emu3TextConfig's defaults (Transformers 5.25, configuration_emu3.py: Emu3-Chat's sizes)
for the keys read."""


def _emu3(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Emu3's language model (``emu3_text_model``; an ``emu3`` config's text_config, its
    VQ-VAE image tokenizer not counted): Llama's layers, as Transformers' modular_emu3.py
    builds them from LlamaModel and LlamaDecoderLayer (its added dropout holds no
    parameters), ``attention_bias`` and ``mlp_bias`` read as Llama's; Emu3TextConfig's
    defaults fill what a config leaves out."""
    return _llama_like({**_EMU3_DEFAULTS, **cfg}, path, label, "llama")


def _mla_fields(cfg: dict[str, Any], path: Path) -> dict[str, Any]:
    """Multi-head latent attention's sizes under DeepSeek-V3's keys (no query LoRA where
    ``q_lora_rank`` is 0 or null)."""
    return {"q_lora_rank": _get(cfg, path, "q_lora_rank", default=0) or 0,
            "kv_lora_rank": _get(cfg, path, "kv_lora_rank"),
            "qk_nope_head_dim": _get(cfg, path, "qk_nope_head_dim"),
            "qk_rope_head_dim": _get(cfg, path, "qk_rope_head_dim"),
            "v_head_dim": _get(cfg, path, "v_head_dim")}


def _shared_expert_gate(cfg: dict[str, Any], experts: int) -> bool:
    """Whether a Qwen-style expert layer has a shared expert, which passes a sigmoid gate
    of its own (``shared_expert_gate``: every Qwen2-MoE, Qwen3-Next and Qwen3.5 layer with a
    shared expert of ``shared_expert_intermediate_size`` builds one)."""
    return bool(experts) and bool(cfg.get("shared_expert_intermediate_size"))


def _deepseek_v4(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """DeepSeek-V4 (Flash, Pro): compressed attention over one key-value head, hyper-
    connections, every layer an expert layer. ``compress_ratios`` lists one ratio a layer
    and may list the MTP layers' after them (the released configs do: num_hidden_layers +
    num_nextn_predict_layers entries), which are not counted, as Transformers'
    DeepseekV4Config keeps the first num_hidden_layers."""
    layers = _get(cfg, path, "num_hidden_layers")
    heads = _get(cfg, path, "num_attention_heads")
    ratios = cfg.get("compress_ratios")
    if ratios is None and cfg.get("layer_types") is not None:
        ratios = _v4_ratios_from_layer_types(cfg)
    if ratios is None:
        raise GpuarchError("missing compress_ratios (or layer_types)")
    if not isinstance(ratios, list) or any(
            not isinstance(r, int) or isinstance(r, bool) for r in ratios):
        raise GpuarchError(f"compress_ratios: expected a list of integers, one a layer; got "
                           f"{ratios!r}")
    if isinstance(layers, int) and len(ratios) < layers:
        raise GpuarchError(f"compress_ratios: {len(ratios)} ratios, but num_hidden_layers is "
                           f"{layers}")
    experts = _get(cfg, path, "n_routed_experts")
    moe = _get(cfg, path, "moe_intermediate_size")
    compressed = CompressedAttention(
        q_lora_rank=_get(cfg, path, "q_lora_rank"),
        rope_head_dim=_get(cfg, path, "qk_rope_head_dim"),
        o_groups=_get(cfg, path, "o_groups"),
        o_lora_rank=_get(cfg, path, "o_lora_rank"),
        window=_get(cfg, path, "sliding_window"),
        ratios=tuple(ratios[:layers]),
        index_heads=_get(cfg, path, "index_n_heads"),
        index_head_dim=_get(cfg, path, "index_head_dim"),
        index_topk=_get(cfg, path, "index_topk"))
    return TransformerShape(
        **_decoder_fields(cfg, path, label, layers, heads),
        ffn_hidden=moe,
        experts=experts,
        experts_per_token=_get(cfg, path, "num_experts_per_tok"),
        shared_experts=_get(cfg, path, "n_shared_experts", default=0) or 0,
        moe_ffn_hidden=moe,
        glu_limit=_glu_limit(cfg, path),
        compressed=compressed,
        hyper_connections=_get(cfg, path, "hc_mult", default=0) or 0,
        hash_layers=_v4_hash_layers(cfg, path),
        router_bias=True,
    )


# DeepSeek-V4's attention kinds as Transformers 5 names them (DeepseekV4Config's
# layer_types) and the compression each takes unless ``compress_rates`` says otherwise
_V4_LAYER_RATES = {"sliding_attention": 0, "compressed_sparse_attention": 4,
                   "heavily_compressed_attention": 128}


def _v4_ratios_from_layer_types(cfg: dict[str, Any]) -> list[int]:
    """A DeepSeek-V4 config saved by Transformers 5 (``layer_types`` and ``compress_rates``
    in place of the release's ``compress_ratios``) as one compression ratio a layer."""
    kinds = cfg["layer_types"]
    rates = {**_V4_LAYER_RATES, **(cfg.get("compress_rates") or {})}
    if not isinstance(kinds, list) or any(k not in rates for k in kinds):
        raise GpuarchError(f"layer_types: expected a list of {', '.join(sorted(rates))}, one "
                           f"a layer; got {kinds!r}")
    return [rates[k] for k in kinds]


def _v4_hash_layers(cfg: dict[str, Any], path: Path) -> int:
    """DeepSeek-V4's hash-routed layers: ``num_hash_layers``, or the "hash_moe" entries of
    a Transformers 5 config's ``mlp_layer_types``."""
    count: int = _get(cfg, path, "num_hash_layers", default=0) or 0
    kinds = cfg.get("mlp_layer_types")
    if not count and isinstance(kinds, list):
        count = sum(1 for k in kinds if k == "hash_moe")
    return count


def _indexer(cfg: dict[str, Any], path: Path, layers: int, every: int = 0
             ) -> dict[str, Any]:
    """DeepSeek Sparse Attention's indexer (DeepSeek-V3.2's and GLM-5's config.json:
    index_n_heads, index_head_dim, index_topk), and how many of the ``layers`` have one of
    their own where later GLM-5 releases let the others reuse an earlier layer's choice:
    ``indexer_types`` ("full" or "shared" a layer), else ``index_topk_pattern`` ("F" or
    "S" a layer), else ``index_topk_freq`` with ``index_skip_topk_offset`` (a layer has one
    where max(layer - offset + 1, 0) is a multiple of the frequency; offset 2 unless given),
    as Transformers' GlmMoeDsaConfig reads them; where it sets none and ``every`` is given,
    the first layer and every ``every``-th from the second (HYV4Config's default, the same
    rule at offset 2)."""
    out = {"index_heads": _get(cfg, path, "index_n_heads"),
           "index_head_dim": _get(cfg, path, "index_head_dim"),
           "index_topk": _get(cfg, path, "index_topk")}
    kinds = _indexer_kinds(cfg, path, layers)
    if kinds is None and every and layers > 0:
        kinds = _every_kth_indexer(layers, every, 2)
    if kinds is not None and not all(kinds):
        out["index_layers"] = sum(kinds)
    return out


def _indexer_kinds(cfg: dict[str, Any], path: Path, layers: int) -> list[bool] | None:
    """Whether each layer runs an indexer of its own, from whichever of GLM's three keys the
    config sets (``_indexer``); None where it sets none."""
    kinds: list[bool] | None = None
    key = ""
    if cfg.get("indexer_types") is not None:
        key, raw = "indexer_types", cfg["indexer_types"]
        if not isinstance(raw, list) or any(k not in ("full", "shared") for k in raw):
            raise GpuarchError(f"indexer_types: expected a list of 'full' or 'shared', one a "
                               f"layer; got {raw!r}")
        kinds = [k == "full" for k in raw]
    elif cfg.get("index_topk_pattern") is not None:
        key, raw = "index_topk_pattern", cfg["index_topk_pattern"]
        if not isinstance(raw, str) or set(raw) - {"F", "S"}:
            raise GpuarchError(f"index_topk_pattern: expected a string of 'F' (an indexer) and "
                               f"'S' (shared), one a layer; got {raw!r}")
        kinds = [c == "F" for c in raw]
    elif cfg.get("index_topk_freq") is not None:
        key = "index_topk_freq"
        freq = _get(cfg, path, "index_topk_freq")
        offset = _get(cfg, path, "index_skip_topk_offset", default=2)
        if freq < 1:
            raise GpuarchError(f"index_topk_freq: expected a positive integer, got {freq!r}")
        kinds = _every_kth_indexer(layers, freq, offset)
    if kinds is None or layers < 1:
        return None  # no layers: the shape refuses num_hidden_layers itself
    if len(kinds) != layers:
        raise GpuarchError(f"{key}: {len(kinds)} layers, but num_hidden_layers is {layers}")
    if not kinds[0]:
        raise GpuarchError(f"{key}: the first layer shares an indexer with none before it")
    return kinds


def _every_kth_indexer(layers: int, freq: int, offset: int) -> list[bool]:
    """Which of ``layers`` run an indexer of their own under GlmMoeDsaConfig's
    ``index_topk_freq`` rule: where max(layer - offset + 1, 0) is a multiple of ``freq``
    (offset 2: the first layer and every ``freq``-th from the second, HYV4Config's default
    ``indexer_types``)."""
    return [max(i - offset + 1, 0) % freq == 0 for i in range(layers)]


def _check_minimax_m2(cfg: dict[str, Any]) -> None:
    """Refuse what a minimax_m2 config could say that the shape does not hold: layers of
    MiniMax-01's linear (lightning) attention (``attn_type_list`` entries 0; MiniMax-M2's
    are all 1, softmax attention) and query-key norms other than over the whole projection
    (``qk_norm_type`` "per_layer", the released checkpoints' and what Transformers'
    MiniMaxM2Attention builds)."""
    kinds = cfg.get("attn_type_list")
    if kinds is not None and (not isinstance(kinds, list) or any(k != 1 for k in kinds)):
        found = sorted({repr(k) for k in kinds}) if isinstance(kinds, list) else [repr(kinds)]
        raise GpuarchError("attn_type_list: only softmax-attention layers (1) are modelled, "
                           "not linear (lightning) attention layers (0); the list holds "
                           + ", ".join(found))
    norm = cfg.get("qk_norm_type", "per_layer")
    if norm != "per_layer":
        raise GpuarchError(f"qk_norm_type: expected 'per_layer' (a norm over the whole query "
                           f"and key projections), got {norm!r}")


def _qk_norm(cfg: dict[str, Any], model_type: str) -> QkNorm:
    """Query-key norms: Qwen3's (dense and MoE) and GLM-4.5's where ``use_qk_norm`` is set
    normalise each head's queries and keys; OLMo 2 and MiniMax-M2 normalise the whole query
    and key projections (q_norm over heads x head size, k_norm over KV heads x head size;
    OLMo 2's two norms a layer sit after the attention and MLP rather than before, the same
    count). MiniMax-M2's configs set ``use_qk_norm``, which Transformers' model (its
    attention is FlexOlmo's, norms always built) does not read; neither is it read here."""
    if model_type in ("olmo2", "minimax_m2"):
        return QkNorm.FULL
    if model_type in ("qwen3", "qwen3_moe") or (model_type == "glm4_moe"
                                                 and _flag(cfg, "use_qk_norm", False)):
        return QkNorm.HEAD
    return QkNorm.NONE


# Transformers' defaults for the keys a Gemma config.json may leave out: Gemma2Config
# (configuration_gemma2.py @008e5743) and Gemma3TextConfig (configuration_gemma3.py
# @d98ac17c), whose values the multimodal Gemma 3 checkpoints' sparse text_config relies on
_GEMMA_DEFAULTS: dict[str, dict[str, int]] = {
    "gemma2": {"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216,
               "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
               "head_dim": 256, "max_position_embeddings": 8192, "sliding_window": 4096},
    "gemma3_text": {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
                    "num_hidden_layers": 26, "num_attention_heads": 8,
                    "num_key_value_heads": 4, "head_dim": 256,
                    "max_position_embeddings": 131072, "sliding_window": 4096,
                    "sliding_window_pattern": 6},
}


def _gemma(cfg: dict[str, Any], path: Path, label: str, model_type: str) -> TransformerShape:
    """Gemma 1-3: a GELU-gated MLP (GeGLU) and tied embeddings unless the config says
    otherwise. Gemma 2 and 3 add a norm after the attention and after the MLP (four a
    layer) and alternate sliding-window and global layers: from ``layer_types`` where the
    config lists them, else Gemma 2's even-numbered layers (``not layer_idx % 2``) and Gemma
    3's all but every ``sliding_window_pattern``-th (``(layer_idx + 1) % pattern``, 6 unless
    given); Gemma 3 also normalises each head's queries and keys. A ``gemma3`` config is the
    multimodal checkpoint: its ``text_config`` is read, the vision tower is not counted.
    Keys a config leaves out take Transformers' defaults, as the library itself does.
    Attention-logit soft-capping (Gemma 2) costs a pass the model does not itemise."""
    if model_type == "gemma3":
        cfg = cfg.get("text_config", {})
        if not isinstance(cfg, dict):
            raise GpuarchError("text_config: expected an object")
        model_type = "gemma3_text"
    if model_type in _GEMMA_DEFAULTS:
        cfg = {**_GEMMA_DEFAULTS[model_type],
               **{k: v for k, v in cfg.items() if v is not None}}
    layers = _get(cfg, path, "num_hidden_layers")
    heads = _get(cfg, path, "num_attention_heads")
    window, windowed = 0, 0
    if model_type != "gemma":
        window = _get(cfg, path, "sliding_window")
        kinds = cfg.get("layer_types")
        if isinstance(kinds, list):
            windowed = sum(1 for kind in kinds if kind == "sliding_attention")
        elif model_type == "gemma2":
            windowed = (layers + 1) // 2
        else:
            pattern = _get(cfg, path, "sliding_window_pattern")
            if pattern < 1:
                raise GpuarchError(f"sliding_window_pattern: expected a positive integer, "
                                   f"got {pattern}")
            windowed = layers - layers // pattern
        if not windowed or window < 1:
            window, windowed = 0, 0
    fields = _decoder_fields(cfg, path, label, layers, heads)
    fields["tied_embeddings"] = bool(_get(cfg, path, "tie_word_embeddings", default=True))
    return TransformerShape(
        **fields,
        ffn_hidden=_get(cfg, path, "intermediate_size"),
        ffn_kind=FfnKind.GEGLU,
        qkv_bias=_flag(cfg, "attention_bias", False),
        out_bias=_flag(cfg, "attention_bias", False),
        sandwich_norms=model_type != "gemma",
        qk_norm=QkNorm.HEAD if model_type == "gemma3_text" else QkNorm.NONE,
        sliding_window=window,
        sliding_layers=windowed if windowed != layers else 0,
    )


# Transformers' NemotronHConfig defaults for the Mamba-2 keys (configuration_nemotron_h.py
# @13923c63), with the older key names the library still reads
_MAMBA_CONFIG_KEYS = {"heads": (("mamba_num_heads",), 128), "head_dim": (("mamba_head_dim",), 64),
               "state": (("ssm_state_size",), 128),
               "groups": (("n_groups", "mamba_n_groups"), 8),
               "conv_kernel": (("conv_kernel", "mamba_d_conv"), 4)}


# the block kinds of Transformers' NemotronHConfig.layers_block_type (@13923c63), with the
# names its checkpoints still carry ("mamba", "attention": remap_legacy_layer_types)
_NEMOTRON_H_BLOCKS = {"linear_attention": "M", "mamba": "M", "full_attention": "*",
                      "attention": "*", "moe": "E", "mlp": "-"}


def _nemotron_h_pattern(cfg: dict[str, Any], path: Path) -> str:
    """The blocks as one character each: from ``layers_block_type`` (Transformers' current
    key, which Nemotron 3 Ultra's config.json uses; its length is the layer count, as the
    library takes it) or else ``hybrid_override_pattern``, whose length must agree with
    ``num_hidden_layers``."""
    kinds = cfg.get("layers_block_type", cfg.get("layer_types"))
    if kinds is not None:
        if not isinstance(kinds, list) or not kinds \
                or any(k not in _NEMOTRON_H_BLOCKS for k in kinds):
            bad = [k for k in kinds if k not in _NEMOTRON_H_BLOCKS] \
                if isinstance(kinds, list) else kinds
            raise GpuarchError(f"layers_block_type: expected a list of "
                               f"{', '.join(sorted(_NEMOTRON_H_BLOCKS))}, got {bad!r}")
        return "".join(_NEMOTRON_H_BLOCKS[k] for k in kinds)
    pattern = cfg.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or not pattern:
        raise GpuarchError(f"hybrid_override_pattern: expected a string of M, *, - and E, "
                           f"got {pattern!r}")
    layers = _get(cfg, path, "num_hidden_layers", default=len(pattern))
    if layers != len(pattern):
        raise GpuarchError(f"num_hidden_layers: {layers}, but hybrid_override_pattern has "
                           f"{len(pattern)} blocks")
    return pattern


def _nemotron_h(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Nemotron-H and Nemotron 3 (hybrid Mamba-2 and attention, with MLP or expert blocks):
    ``hybrid_override_pattern`` places one block per character (M Mamba-2, * attention,
    - MLP, E experts), each with one RMSNorm; MLPs and experts have an up and a down
    projection with squared ReLU; a shared expert of ``moe_shared_expert_intermediate_size``
    (a whole number of expert widths); untied embeddings unless the config says otherwise
    (Transformers' modeling_nemotron_h.py @008d9e95); latent experts of
    ``moe_latent_size`` (Nemotron 3 Super and Ultra). The blocks may be listed by name in
    ``layers_block_type`` instead (Nemotron 3 Ultra). Its MTP block
    (``num_nextn_predict_layers``) is a training setting (``--mtp-layers``), not part of
    the shape."""
    pattern = _nemotron_h_pattern(cfg, path)
    layers = len(pattern)
    heads = _get(cfg, path, "num_attention_heads")
    fields = _decoder_fields(cfg, path, label, layers, heads)
    fields["head_dim"] = _get(cfg, path, "head_dim", "attention_head_dim", default=0) or 0
    mamba = None
    if "M" in pattern:
        values = {name: _get(cfg, path, *keys, default=default)
                  for name, (keys, default) in _MAMBA_CONFIG_KEYS.items()}
        mamba = MambaShape(**values,
                           conv_bias=_flag(cfg, "use_conv_bias", _flag(cfg, "mamba_conv_bias",
                                                                       True)),
                           proj_bias=_flag(cfg, "use_bias", False))
    experts = _get(cfg, path, "n_routed_experts", default=0) if "E" in pattern else 0
    shared = 0
    width = 0
    if experts:
        width = _get(cfg, path, "moe_intermediate_size")
        shared_width = _get(cfg, path, "moe_shared_expert_intermediate_size", default=0)
        if width < 1 or shared_width % width:
            raise GpuarchError(f"moe_shared_expert_intermediate_size: expected a multiple of "
                               f"moe_intermediate_size ({width}), got {shared_width}")
        shared = shared_width // width
    groups, per_token = _routing_groups(cfg, path, experts)
    return TransformerShape(
        **fields,
        # the MLP blocks' width (required where the pattern has any)
        ffn_hidden=_get(cfg, path, "intermediate_size") if "-" in pattern else 0,
        ffn_kind=FfnKind.RELU2,
        position=Position.NONE,
        bias=_flag(cfg, "mlp_bias", False),
        experts=experts,
        experts_per_token=_get(cfg, path, "num_experts_per_tok") if experts else 0,
        shared_experts=shared,
        expert_groups=groups, groups_per_token=per_token,
        moe_ffn_hidden=width,
        moe_latent=(_get(cfg, path, "moe_latent_size", default=0) or 0) if experts else 0,
        # the router's e_score_correction_bias, one per expert (NemotronHTopkRouter)
        router_bias=bool(experts),
        hybrid_pattern=pattern,
        mamba=mamba,
    )


def _granite_hybrid(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """IBM Granite 4.0 (``granitemoehybrid``): each of ``num_hidden_layers`` layers is a
    mixer, Mamba-2 or attention as ``layer_types`` says, and a SwiGLU MLP of
    ``shared_intermediate_size``, beside which the MoE models route to ``num_experts_per_tok``
    of ``num_local_experts`` experts of ``intermediate_size`` (a router without bias); an
    RMSNorm before each (Transformers' modeling_granitemoehybrid.py). Read as blocks, two a
    layer: the mixer (M or *) and an expert block whose shared MLP is a whole number of
    expert widths (E), or an MLP block (-) without experts. No position encoding where
    ``position_embedding_type`` is "nope" (the H models), RoPE otherwise. The muP multipliers
    (embedding, residual, attention, logits) hold no parameters and are not costed."""
    layers = _get(cfg, path, "num_hidden_layers")
    kinds = cfg.get("layer_types", cfg.get("layers_block_type"))
    if isinstance(kinds, list):  # Transformers 5's names for them
        kinds = [{"linear_attention": "mamba", "full_attention": "attention"}.get(k, k)
                 for k in kinds]
    if not isinstance(kinds, list) or len(kinds) != layers \
            or any(k not in ("mamba", "attention") for k in kinds):
        raise GpuarchError(f"layer_types: expected {layers} entries (num_hidden_layers), "
                           f"each \"mamba\" or \"attention\" (\"linear_attention\" or "
                           f"\"full_attention\"), got {kinds!r}")
    experts = _get(cfg, path, "num_local_experts", default=0) or 0
    shared_width = _get(cfg, path, "shared_intermediate_size")
    width = _get(cfg, path, "intermediate_size") if experts else 0
    if experts and (width < 1 or shared_width % width):
        raise GpuarchError(f"shared_intermediate_size: expected a multiple of "
                           f"intermediate_size ({width}), got {shared_width}")
    pattern = "".join(("M" if kind == "mamba" else "*") + ("E" if experts else "-")
                      for kind in kinds)
    heads = _get(cfg, path, "num_attention_heads")
    fields = _decoder_fields(cfg, path, label, 2 * layers, heads)
    mamba = None
    if "M" in pattern:
        mamba = _mamba_mixer(cfg, path, fields["hidden"], (
            "mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups",
            "mamba_d_conv", "mamba_conv_bias", "mamba_proj_bias", "mamba_expand"))
    nope = cfg.get("position_embedding_type") == "nope"
    return TransformerShape(
        **fields,
        ffn_hidden=0 if experts else shared_width,
        ffn_kind=FfnKind.SWIGLU,
        position=Position.NONE if nope else Position.ROPE,
        experts=experts,
        experts_per_token=_get(cfg, path, "num_experts_per_tok") if experts else 0,
        shared_experts=shared_width // width if experts else 0,
        moe_ffn_hidden=width,
        hybrid_pattern=pattern,
        mamba=mamba,
    )


_BAMBA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 128000, "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 262144, "mamba_n_heads": 128, "mamba_n_groups": 1,
    "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2}
"""BambaConfig's defaults (Transformers 5.25, configuration_bamba.py) for the keys read."""


def _bamba(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """IBM's Bamba (``bamba``): each layer a mixer, grouped-query attention at the indices
    ``attn_layer_indices`` lists and a Mamba-2 mixer elsewhere, then a SwiGLU MLP of
    ``intermediate_size``; an RMSNorm before each (Transformers' modeling_bamba.py). Read as
    blocks, two a layer: the mixer (M or *) and the MLP (-). The mixer's head size is
    ``mamba_d_head``, or with "auto" ``mamba_expand`` x hidden over ``mamba_n_heads``; its
    projections carry biases with ``mamba_proj_bias``; the attention's four projections
    with ``attention_bias``, the MLP's with ``mlp_bias``. Its partial rotary positions hold
    no parameters. BambaConfig's defaults fill what a config leaves out."""
    cfg = {**_BAMBA_DEFAULTS, **cfg}
    if cfg.get("num_key_value_heads") is None:
        cfg["num_key_value_heads"] = cfg["num_attention_heads"]
    layers = _get(cfg, path, "num_hidden_layers")
    hidden = _get(cfg, path, "hidden_size")
    attention = cfg.get("attn_layer_indices") or []
    if not isinstance(attention, list) or any(
            not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < layers
            for i in attention):
        raise GpuarchError(f"attn_layer_indices: expected layer indices from 0 to {layers - 1}"
                           f", got {attention!r}"[:200])
    pattern = "".join(("*" if i in attention else "M") + "-" for i in range(layers))
    heads = _get(cfg, path, "num_attention_heads")
    fields = _decoder_fields(cfg, path, label, 2 * layers, heads)
    mamba = None
    if "M" in pattern:
        width = _get(cfg, path, "mamba_expand") * hidden
        cfg = {**cfg, "mamba_d_head": mamba_head_dim(cfg, path, width)}
        mamba = _mamba_mixer(cfg, path, hidden, (
            "mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups",
            "mamba_d_conv", "mamba_conv_bias", "mamba_proj_bias", "mamba_expand"))
    return TransformerShape(
        **fields,
        ffn_hidden=_get(cfg, path, "intermediate_size"),
        ffn_kind=FfnKind.SWIGLU,
        **_attention_biases(cfg),
        mlp_bias=_flag(cfg, "mlp_bias", False),
        hybrid_pattern=pattern,
        mamba=mamba,
    )


def _gated_delta_hybrid(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Qwen3-Next (``qwen3_next``) and Qwen3.5's language models (``qwen3_5_text``, dense;
    ``qwen3_5_moe_text``; the multimodal ``qwen3_5`` and ``qwen3_5_moe`` checkpoints through
    their ``text_config``): each of ``num_hidden_layers`` layers is a token mixer, a Gated
    DeltaNet or a gated attention as ``layer_types`` says (else every
    ``full_attention_interval``-th, default 4, is attention, as Transformers' configs
    default), and a SwiGLU MLP or an expert block (Qwen2-MoE's placement keys; a shared
    expert of ``shared_expert_intermediate_size`` behind its one-output gate); an
    RMSNorm before each (Transformers' modular_qwen3_next.py and modular_qwen3_5.py). Read
    as blocks, two a layer: the mixer (M or *) and the MLP (-) or experts (E). The attention
    normalises each head's queries and keys and gates its output (the query projection
    twice as wide; Qwen3.5's configs say so in ``attn_output_gate``, Qwen3-Next always
    gates); its RoPE covers a quarter of each head (``partial_rotary_factor``), which holds
    no parameters. Lightning-style or other linear attentions are not
    these."""
    layers = _get(cfg, path, "num_hidden_layers")
    kinds = cfg.get("layer_types")
    if kinds is None:
        interval = _get(cfg, path, "full_attention_interval", default=4)
        kinds = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                 for i in range(layers)]
    if not isinstance(kinds, list) or len(kinds) != layers \
            or any(k not in ("linear_attention", "full_attention") for k in kinds):
        raise GpuarchError(f"layer_types: expected {layers} entries (num_hidden_layers), "
                           f"each \"linear_attention\" or \"full_attention\", got "
                           f"{str(kinds)[:120]}")
    experts = _get(cfg, path, "num_experts", "num_local_experts", default=0) or 0
    only = cfg.get("mlp_only_layers") or []
    step = cfg.get("decoder_sparse_step") or 1
    if not isinstance(step, int) or step < 1 or not isinstance(only, list):
        raise GpuarchError(f"decoder_sparse_step / mlp_only_layers: expected a positive "
                           f"integer and a list, got {step!r} and {only!r}")
    moe = [bool(experts) and i not in only and (i + 1) % step == 0 for i in range(layers)]
    pattern = "".join(("M" if kind == "linear_attention" else "*") + ("E" if m else "-")
                      for kind, m in zip(kinds, moe, strict=True))
    heads = _get(cfg, path, "num_attention_heads")
    fields = _decoder_fields(cfg, path, label, 2 * layers, heads)
    mamba = _gated_delta_mixer(cfg, path) if "M" in pattern else None
    return TransformerShape(
        **fields,
        ffn_hidden=_get(cfg, path, "intermediate_size") if "-" in pattern else 0,
        ffn_kind=FfnKind.SWIGLU,
        qkv_bias=_flag(cfg, "attention_bias", False),
        out_bias=_flag(cfg, "attention_bias", False),
        qk_norm=QkNorm.HEAD,
        attention_gate=_flag(cfg, "attn_output_gate", True),  # Qwen3.5 names it; Qwen3-Next always
        experts=experts,
        experts_per_token=_get(cfg, path, "num_experts_per_tok") if experts else 0,
        shared_experts=_shared_experts(cfg, path) if experts else 0,
        moe_ffn_hidden=(_get(cfg, path, "moe_intermediate_size") if experts else 0),
        shared_expert_gate=_shared_expert_gate(cfg, experts),
        hybrid_pattern=pattern,
        mamba=mamba,
    )


_OLMO_HYBRID_DEFAULTS: dict[str, Any] = {
    "vocab_size": 100352, "hidden_size": 3840, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 30, "max_position_embeddings": 65536,
    "tie_word_embeddings": False, "attention_bias": False, "linear_conv_kernel_dim": 4}
"""OlmoHybridConfig's defaults (Transformers 5.25, configuration_olmo_hybrid.py) for the
keys read; the linear attention's heads and widths default from the others."""


def _olmo_hybrid(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """OLMo Hybrid (Ai2's ``olmo_hybrid``, Olmo-Hybrid-7B): Qwen3-Next's layout without
    experts, as Transformers' modular_olmo_hybrid.py builds it. A Gated DeltaNet layer's
    separate query, key, value, gate, alpha and beta projections hold what Qwen3-Next's fused
    ones do; an attention layer is OLMo 3's (no output gate; query and key norms over the
    whole projections; ``attention_bias`` on all four projections). Where ``layer_types`` is
    absent every fourth layer is attention (the last one where none would be); the linear
    attention's heads default to ``num_attention_heads``, its key width to 0.75 x hidden over
    them and its value width to twice that, as OlmoHybridConfig derives them."""
    cfg = {**_OLMO_HYBRID_DEFAULTS, **cfg}
    heads = _get(cfg, path, "num_attention_heads")
    layers = _get(cfg, path, "num_hidden_layers")
    if cfg.get("layer_types") is None:
        kinds = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(layers)]
        if kinds and "full_attention" not in kinds:
            kinds[-1] = "full_attention"
        cfg["layer_types"] = kinds
    if cfg["layer_types"] and isinstance(cfg["layer_types"], list) and (
            "linear_attention" not in cfg["layer_types"]
            or "full_attention" not in cfg["layer_types"]):
        raise GpuarchError("layer_types: OLMo Hybrid needs both \"linear_attention\" and "
                           "\"full_attention\" layers (as OlmoHybridConfig checks)")
    for key in ("linear_num_key_heads", "linear_num_value_heads"):
        if cfg.get(key) is None:
            cfg[key] = heads
    if cfg.get("linear_key_head_dim") is None:
        cfg["linear_key_head_dim"] = int(
            0.75 * _get(cfg, path, "hidden_size") / _get(cfg, path, "linear_num_key_heads"))
    if cfg.get("linear_value_head_dim") is None:
        cfg["linear_value_head_dim"] = 2 * _get(cfg, path, "linear_key_head_dim")
    cfg = {k: v for k, v in cfg.items() if k not in ("num_experts", "num_local_experts")}
    shape = _gated_delta_hybrid({**cfg, "attn_output_gate": False}, path, label)
    return replace(shape, qk_norm=QkNorm.FULL)


_LARA_MINI_DEFAULTS: dict[str, Any] = {
    "vocab_size": 151936, "hidden_size": 1024, "num_hidden_layers": 34,
    "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128,
    "max_position_embeddings": 131072, "tie_word_embeddings": True, "sliding_window": 512,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_num_key_heads": 8, "linear_num_value_heads": 16, "num_experts": 128,
    "num_experts_per_tok": 4, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512}
"""LaraMiniConfig's defaults (Transformers 5.25, configuration_lara_mini.py, over
Qwen3NextConfig's) for the keys read."""

_LARA_KINDS = ("linear_attention", "sliding_attention", "full_attention")
_LARA_PATTERN = ("linear_attention", "sliding_attention", "linear_attention",
                 "full_attention", "sliding_attention")
"""Lara Mini's layer kinds, and the five its config class repeats where ``layer_types`` is
absent."""


def _lara_mini(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Lara 4 Mini (``lara_mini``): each layer a Gated DeltaNet (Qwen3.5's), attention within
    ``sliding_window`` or attention over every position (Qwen3's: a query and key norm a
    head, no gate, ``attention_bias`` on its four projections; the full layers without
    rotary positions, which hold no parameters), then an expert block in every layer:
    ``num_experts`` experts of ``moe_intermediate_size`` and a shared SwiGLU MLP of
    ``shared_expert_intermediate_size`` added without a gate (Flint's block), as
    Transformers' modular_lara_mini.py builds it.
    Where ``layer_types`` is absent the config class repeats linear, window, linear, full,
    window. Read as blocks, two a layer: the mixer (M or *) and the experts (E)."""
    cfg = {**_LARA_MINI_DEFAULTS, **cfg}
    layers = _get(cfg, path, "num_hidden_layers")
    kinds = layer_type_list(cfg, layers, _LARA_KINDS,
                            [_LARA_PATTERN[i % len(_LARA_PATTERN)] for i in range(layers)])
    pattern = "".join(("M" if k == "linear_attention" else "*") + "E" for k in kinds)
    heads = _get(cfg, path, "num_attention_heads")
    mamba = _gated_delta_mixer(cfg, path) if "M" in pattern else None
    experts = _get(cfg, path, "num_experts", "num_local_experts")
    return TransformerShape(
        **_decoder_fields(cfg, path, label, 2 * layers, heads),
        ffn_hidden=0,
        ffn_kind=FfnKind.SWIGLU,
        **_attention_biases(cfg),
        qk_norm=QkNorm.HEAD,
        experts=experts,
        experts_per_token=_get(cfg, path, "num_experts_per_tok"),
        shared_experts=_shared_experts(cfg, path),
        moe_ffn_hidden=_get(cfg, path, "moe_intermediate_size"),
        **window_blocks(cfg, path, kinds, pattern.count("*")),
        hybrid_pattern=pattern,
        mamba=mamba,
    )


def layer_type_list(cfg: dict[str, Any], layers: int, allowed: tuple[str, ...],
                    default: list[str]) -> list[str]:
    """A config's ``layer_types``, one of ``allowed`` for each of its ``layers``, else
    ``default`` (the config class's) where it gives none."""
    kinds = cfg.get("layer_types")
    if kinds is None:
        return default
    if not isinstance(kinds, list) or len(kinds) != layers or any(
            not isinstance(k, str) or k not in allowed for k in kinds):
        raise GpuarchError(f"layer_types: expected {layers} entries (num_hidden_layers), each "
                           f"one of {', '.join(map(repr, allowed))}, got {str(kinds)[:120]}")
    return kinds


def window_blocks(cfg: dict[str, Any], path: Path, kinds: list[str], attention: int
                  ) -> dict[str, Any]:
    """A hybrid pattern's window fields from its layers' kinds: ``sliding_window`` for the
    "sliding_attention" layers (refused where they have none) and, where some of its
    ``attention`` blocks attend over every position, how many are windowed."""
    windowed = kinds.count("sliding_attention")
    window = (_get(cfg, path, "sliding_window", default=0) or 0) if windowed else 0
    if windowed and not window:
        raise GpuarchError("sliding_window: the \"sliding_attention\" layers need a window, "
                           "got none")
    return {"sliding_window": window, "sliding_layers": windowed if windowed < attention else 0}


_ZAYA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262272, "hidden_size": 2048, "num_hidden_layers": 40,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
    "max_position_embeddings": 131072, "tie_word_embeddings": True,
    "moe_intermediate_size": 2048, "num_experts_per_tok": 1, "num_experts": 16,
    "router_hidden_size": 256, "cca_time0": 2, "cca_time1": 2}
"""ZayaConfig's defaults (Transformers 5.25, configuration_zaya.py: ZAYA1-8B's sizes) for the
keys read."""

_ZAYA_KINDS = {"hybrid": "full_attention", "hybrid_sliding": "sliding_attention"}
"""ZAYA's layer kinds: attention over every position, or within ``sliding_window``."""


def _zaya(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Zyphra's ZAYA (``zaya``, ZAYA1-8B), as Transformers' modeling_zaya.py builds it: every
    layer grouped-query attention with its queries and keys mixed by two causal
    convolutions over time (compressed convolutional attention: ``cca_time0`` depthwise
    taps, then ``cca_time1`` taps within each head; a temperature a KV head; half of each
    value head the previous token's projection; ``qk_conv_depthwise`` / ``qk_conv_grouped``
    on the shape), within ``sliding_window`` in the "hybrid_sliding" layers; then the top
    one of ``num_experts`` SwiGLU experts of ``moe_intermediate_size`` or a skip expert
    that adds nothing (an identity-less choice of the router's: ``zero_experts`` 1), chosen
    by an MLP router of ``router_hidden_size``; learned scales and shifts on every residual
    add (``residual_scales``); ``attention_bias`` on the four projections, ``lm_head_bias``
    on the head, tied unless ``tie_word_embeddings`` is false. Refused: a top-k above 1
    (ZayaConfig's own check) and the legacy Megatron-style config (``cca``, ``ffn_hidden_size``
    keys), which Transformers 5.25 builds as default-sized layers whatever it says."""
    legacy = sorted(k for k in ("cca", "ffn_hidden_size", "zaya_mlp_expansion") if k in cfg)
    if legacy:
        raise GpuarchError(f"{legacy[0]}: the legacy ZAYA config (Megatron-style keys) is "
                           "not read; Transformers 5.25 reads only ZayaConfig's keys")
    cfg = {**_ZAYA_DEFAULTS, **cfg}
    if _get(cfg, path, "num_experts_per_tok") != 1:
        raise GpuarchError(f"num_experts_per_tok: ZAYA routes each token to one expert, got "
                           f"{cfg['num_experts_per_tok']!r}")
    layers = _get(cfg, path, "num_hidden_layers")
    kinds = layer_type_list(cfg, layers, tuple(_ZAYA_KINDS), ["hybrid"] * layers)
    windows = window_blocks(cfg, path, [_ZAYA_KINDS[k] for k in kinds], layers)
    heads = _get(cfg, path, "num_attention_heads")
    experts = _get(cfg, path, "num_experts")
    return TransformerShape(
        **_decoder_fields(cfg, path, label, layers, heads),
        ffn_hidden=_get(cfg, path, "moe_intermediate_size"),
        ffn_kind=FfnKind.SWIGLU,
        **_attention_biases(cfg),
        lm_head_bias=_flag(cfg, "lm_head_bias", False),
        experts=experts,
        experts_per_token=1,
        moe_ffn_hidden=_get(cfg, path, "moe_intermediate_size"),
        zero_experts=1,
        router_hidden=_get(cfg, path, "router_hidden_size"),
        residual_scales=True,
        qk_conv_depthwise=_get(cfg, path, "cca_time0"),
        qk_conv_grouped=_get(cfg, path, "cca_time1"),
        **windows,
    )


def _gated_delta_mixer(cfg: dict[str, Any], path: Path) -> MambaShape:
    """A Gated DeltaNet mixer under Qwen3-Next's keys (``linear_*``: its value heads and
    their width, the query-key heads and their width, a convolution of 4 taps unless given),
    without biases, as Qwen3-Next, Qwen3.5, OLMo Hybrid and Lara 4 Mini build it."""
    return MambaShape(kind="gated_delta",
                      heads=_get(cfg, path, "linear_num_value_heads"),
                      head_dim=_get(cfg, path, "linear_value_head_dim"),
                      state=_get(cfg, path, "linear_key_head_dim"),
                      groups=_get(cfg, path, "linear_num_key_heads"),
                      conv_kernel=_get(cfg, path, "linear_conv_kernel_dim", default=4),
                      conv_bias=False, proj_bias=False)


def _mamba2(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """A pure Mamba-2 model (Transformers' ``mamba2``: Mamba-Codestral and the conversions of
    state-spaces' Mamba-2): ``num_hidden_layers`` blocks of an RMSNorm and a Mamba-2 mixer of
    ``num_heads`` heads of ``head_dim`` (``expand`` x ``hidden_size`` wide), no attention and
    no MLP. The shape's attention heads are the mixer's (they set how TP may split it)."""
    layers = _get(cfg, path, "num_hidden_layers")
    heads = _get(cfg, path, "num_heads")
    fields = _decoder_fields(cfg, path, label, layers, heads)
    mamba = _mamba_mixer(cfg, path, fields["hidden"], (
        "num_heads", "head_dim", "state_size", "n_groups", "conv_kernel", "use_conv_bias",
        "use_bias", "expand"))
    fields.update(kv_heads=heads, head_dim=mamba.head_dim, context_window=0)
    return TransformerShape(**fields, ffn_hidden=0, ffn_kind=FfnKind.SWIGLU,
                            position=Position.NONE, hybrid_pattern="M" * layers, mamba=mamba)


def mamba_head_dim(cfg: dict[str, Any], path: Path, width: int) -> int:
    """A Mamba-2 mixer's head size from ``mamba_d_head``, or where it is absent or "auto"
    (Bamba's and Falcon-H1's config classes) the mixer's ``width`` over ``mamba_n_heads``;
    either way the heads must make up the width."""
    ssm_heads = _get(cfg, path, "mamba_n_heads")
    if cfg.get("mamba_d_head") in (None, "auto"):
        if ssm_heads < 1 or width % ssm_heads:
            raise GpuarchError(f"mamba_n_heads: {ssm_heads} must divide the mixer's width "
                               f"{width}")
        return int(width // ssm_heads)
    head_dim: int = _get(cfg, path, "mamba_d_head")
    if ssm_heads * head_dim != width:
        raise GpuarchError(f"mamba_n_heads x mamba_d_head: expected the mixer's width {width}, "
                           f"got {ssm_heads * head_dim}")
    return head_dim


def _mamba_mixer(cfg: dict[str, Any], path: Path, hidden: int, keys: tuple[str, ...]
                 ) -> MambaShape:
    """A Mamba-2 mixer from the config's ``keys`` for its heads, head width, state, groups
    (default 1), convolution (default 4), the convolution's bias (default on), the
    projections' bias (default off) and the expansion (default 2), which must give
    heads x head width = expansion x ``hidden``."""
    heads, head_dim, state, groups, conv, conv_bias, proj_bias, expand = keys
    mamba = MambaShape(heads=_get(cfg, path, heads), head_dim=_get(cfg, path, head_dim),
                       state=_get(cfg, path, state),
                       groups=_get(cfg, path, groups, default=1),
                       conv_kernel=_get(cfg, path, conv, default=4),
                       conv_bias=_flag(cfg, conv_bias, True),
                       proj_bias=_flag(cfg, proj_bias, False))
    factor = _get(cfg, path, expand, default=2)
    if mamba.heads * mamba.head_dim != factor * hidden:
        raise GpuarchError(f"{heads} x {head_dim}: expected {expand} x hidden_size "
                           f"({factor * hidden}), got {mamba.heads * mamba.head_dim}")
    return mamba


def _shared_experts(cfg: dict[str, Any], path: Path) -> int:
    """Shared experts as a count of routed-expert widths: DeepSeek-style configs give the
    count (``n_shared_experts``); Qwen2-MoE gives one shared expert's width
    (``shared_expert_intermediate_size``), which must be a whole number of routed widths
    (its one-output gate: ``shared_expert_gate``)."""
    width = cfg.get("shared_expert_intermediate_size")
    if not width:
        count: int = _get(cfg, path, "n_shared_experts", default=0) or 0
        return count
    routed = _get(cfg, path, "moe_intermediate_size")
    if routed < 1:
        raise GpuarchError(f"{path}: moe_intermediate_size: expected an integer >= 1, got "
                           f"{routed}")
    if not isinstance(width, int) or width % routed:
        raise GpuarchError(f"{path}: shared_expert_intermediate_size: expected a multiple of "
                           f"moe_intermediate_size ({routed}), got {width!r}")
    shared: int = width // routed
    return shared


def _dense_layers(cfg: dict[str, Any], path: Path, layers: int) -> int:
    """Layers with a dense MLP instead of experts: DeepSeek-style ``first_k_dense_replace``,
    or Qwen2-MoE's ``mlp_only_layers`` and ``decoder_sparse_step`` (experts on every
    step-th layer not listed)."""
    first = _get(cfg, path, "first_k_dense_replace", default=0) or 0
    step = cfg.get("decoder_sparse_step") or 1
    only = cfg.get("mlp_only_layers") or []
    if not isinstance(step, int) or step < 1 or not isinstance(only, list):
        raise GpuarchError(f"{path}: decoder_sparse_step / mlp_only_layers: expected a "
                           f"positive integer and a list, got {step!r} and {only!r}")
    if step == 1 and not only:
        dense: int = first
        return dense
    return sum(1 for i in range(layers) if i in only or (i + 1) % step or i < first)


def _glu_limit(cfg: dict[str, Any], path: Path) -> float:
    """GPT-OSS's ``swiglu_limit`` (its GLU's clamp), 0 when the config has none."""
    value = cfg.get("swiglu_limit") or 0.0
    check_number(f"{path}: swiglu_limit", value, 0)
    return float(value)


def _routing_groups(cfg: dict[str, Any], path: Path, experts: int) -> tuple[int, int]:
    """DeepSeek-V3-style group-limited routing (``n_group``, ``topk_group``) as (groups,
    groups per token), when it limits anything: one group, or every group allowed, is plain
    top-k routing, (0, 0)."""
    groups = _get(cfg, path, "n_group", default=0) or 0
    per_token = _get(cfg, path, "topk_group", default=0) or 0
    if not experts or groups <= 1 or not 0 < per_token < groups:
        return 0, 0
    return groups, per_token


def _decoder_fields(cfg: dict[str, Any], path: Path, label: str, layers: int, heads: int
                    ) -> dict[str, Any]:
    """The fields every decoder family's config.json names the same way."""
    return {"name": label, "layers": layers, "hidden": _get(cfg, path, "hidden_size"),
            "heads": heads,
            "kv_heads": _get(cfg, path, "num_key_value_heads", default=heads),
            "head_dim": _get(cfg, path, "head_dim", default=0) or 0,
            "vocab": _get(cfg, path, "vocab_size"),
            "tied_embeddings": bool(_get(cfg, path, "tie_word_embeddings", default=False)),
            "context_window": _get(cfg, path, "max_position_embeddings", default=0) or 0}


def _llama4(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Llama 4 (the text model of a ``llama4`` config, or a ``llama4_text`` one): experts on
    every ``interleave_moe_layer_step``-th layer (top-k of ``num_local_experts`` plus one
    shared expert of ``intermediate_size``), dense layers of ``intermediate_size_mlp``;
    layers with RoPE attend within ``attention_chunk_size``-token chunks (the window layers,
    ``attention_chunked``). Layers are counted by kind, not placed."""
    if not isinstance(cfg, dict):
        raise GpuarchError("text_config: expected an object")
    layers = _get(cfg, path, "num_hidden_layers")
    heads = _get(cfg, path, "num_attention_heads")
    experts = _get(cfg, path, "num_local_experts", default=0) or 0
    step = _get(cfg, path, "interleave_moe_layer_step", default=1) or 0
    moe_layers = cfg.get("moe_layers")
    if isinstance(moe_layers, list):
        expert_layers = len(moe_layers)
    else:
        expert_layers = layers // step if step else 0
    if not experts or not expert_layers:
        experts, expert_layers = 0, 0
    chunk = _get(cfg, path, "attention_chunk_size", default=0) or 0
    rope = cfg.get("no_rope_layers")
    if isinstance(rope, list) and rope:
        chunked = sum(1 for flag in rope if flag)
    else:
        interval = _get(cfg, path, "no_rope_layer_interval", default=4) or 0
        chunked = layers - layers // interval if interval else layers
    if not isinstance(chunk, int) or chunk < 0:
        raise GpuarchError(f"attention_chunk_size: expected a positive integer, got {chunk!r}")
    width = _get(cfg, path, "intermediate_size")
    return TransformerShape(
        **_decoder_fields(cfg, path, label, layers, heads),
        ffn_hidden=_get(cfg, path, "intermediate_size_mlp", default=width),
        qkv_bias=_flag(cfg, "attention_bias", False),
        out_bias=_flag(cfg, "attention_bias", False),
        experts=experts,
        experts_per_token=_get(cfg, path, "num_experts_per_tok", default=1) if experts else 0,
        shared_experts=1 if experts else 0,
        moe_ffn_hidden=width if experts else 0,
        dense_layers=layers - expert_layers if experts else 0,
        sliding_window=chunk if chunked else 0,
        sliding_layers=chunked if chunk and chunked != layers else 0,
        attention_chunked=bool(chunk and chunked),
    )


def _sliding_window(cfg: dict[str, Any], path: Path, layers: int) -> tuple[int, int]:
    """(window, how many layers use it); (0, 0) without one."""
    window = cfg.get("sliding_window")
    if not window or cfg.get("use_sliding_window") is False:
        return 0, 0
    if not isinstance(window, int) or window < 1:
        raise GpuarchError(f"sliding_window: expected a positive integer, got {window!r}")
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list):
        windowed = sum(1 for kind in kinds if kind == "sliding_attention")
        return (window, windowed) if windowed else (0, 0)
    return window, layers
