"""The table of decoder families one reader takes (``data/hf_families.toml``): what each
family's layers hold, as Transformers builds them, keyed by config.json ``model_type``.
Loaded and checked here (every key known, every value of its kind); read into a shape by
``hf_families.py``."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError

__all__ = ["FAMILIES_FILE", "FamilyTraits", "family_traits"]

FAMILIES_FILE = Path(__file__).with_name("data") / "hf_families.toml"

_CHOICES = {
    "ffn": ("swiglu", "geglu", "relu2", "gelu", "xielu", "relu2_glu"),
    "norm": ("rmsnorm", "layernorm", "layernorm_weight", "layernorm_no_affine",
             "rmsnorm_no_weight"),
    "qk_norm": ("none", "head", "full"),
    "windows": ("layer_types", "all", "pattern", "pattern_first", "prefix_pattern",
                "no_rope", "after_max_window_layers"),
    "dense": ("none", "first_k_dense_replace", "num_dense_layers", "mlp_layer_types",
              "mlp_only_layers", "ernie"),
    "hyper_connections": ("none", "independent"),
}
_BIAS_KEYS = ("qkv_bias", "out_bias", "mlp_bias", "lm_head_bias")
_KEY_LISTS = ("experts_keys", "per_token_keys", "shared_keys", "refuse_true")
_FLAGS = ("attention_gate", "gate_head_bias", "sinks", "router_bias", "mla", "indexer",
          "mla_q_gate", "sub_norms", "differential_attention", "routed_expert_norms",
          "residual_gates", "never_tied")


@dataclass(frozen=True)
class FamilyTraits:
    """One family's row of the table (its keys are described in the file's header)."""

    model_type: str
    name: str
    source: str
    architecture: str = ""
    qkv_bias: bool | tuple[str, ...] = False
    out_bias: bool | tuple[str, ...] = False
    mlp_bias: bool | tuple[str, ...] = False
    lm_head_bias: bool | tuple[str, ...] = False
    defaults: dict[str, Any] = field(default_factory=dict)
    ffn: str = "swiglu"
    norm: str = "rmsnorm"
    norms: int = 2
    parallel_key: str = ""
    sandwich_key: str = ""
    qk_norm: str = "none"
    qk_norm_key: str = ""
    windows: str = "layer_types"
    window_pattern: int = 0
    window_pattern_key: str = ""
    attention_gate: bool = False
    gate_head_bias: bool = False
    sinks: bool = False
    sub_norms: bool = False
    differential_attention: bool = False
    routed_expert_norms: bool = False
    residual_gates: bool = False
    never_tied: bool = False
    experts_keys: tuple[str, ...] = ()  # () = hf.EXPERT_COUNT_KEYS
    per_token_keys: tuple[str, ...] = ("num_experts_per_tok",)
    shared_keys: tuple[str, ...] = ()
    shared_width_key: str = ""
    shared_count: int = 0
    expert_width_key: str = "moe_intermediate_size"
    dense: str = "none"
    dense_width_key: str = ""
    dense_default: int = 0
    dense_default_key: str = ""
    router_bias: bool = False
    expert_layer_norms: int = 0
    mla: bool = False
    indexer: bool = False
    mla_q_gate: bool = False
    indexer_every: int = 0
    hyper_connections: str = "none"
    glu_limit_key: str = ""
    gated_norm_rank_key: str = ""
    head_vocab_key: str = ""
    refuse_true: tuple[str, ...] = ()
    require: dict[str, Any] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)


def _traits(model_type: str, row: Any) -> FamilyTraits:
    where = f"{FAMILIES_FILE.name} [{model_type}]"
    if not isinstance(row, dict):
        raise GpuarchError(f"{where}: expected a table")
    known = {f for f in FamilyTraits.__dataclass_fields__ if f != "model_type"}
    unknown = sorted(set(row) - known)
    if unknown:
        raise GpuarchError(f"{where}: unknown keys {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for key, value in row.items():
        if key in _BIAS_KEYS:
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                value = tuple(value)
            elif not isinstance(value, bool):
                raise GpuarchError(f"{where}: {key}: expected true, false or a list of "
                                   f"config keys, got {value!r}")
        elif key in _KEY_LISTS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise GpuarchError(f"{where}: {key}: expected a list of config keys, got "
                                   f"{value!r}")
            value = tuple(value)
        elif key in _CHOICES and value not in _CHOICES[key]:
            raise GpuarchError(f"{where}: {key}: expected one of {', '.join(_CHOICES[key])}, "
                               f"got {value!r}")
        elif key in _FLAGS and not isinstance(value, bool):
            raise GpuarchError(f"{where}: {key}: expected true or false, got {value!r}")
        elif key.endswith("_key") and not (isinstance(value, str) and value):
            raise GpuarchError(f"{where}: {key}: expected a config key, got {value!r}")
        elif key in ("expert_layer_norms", "indexer_every") and (
                not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise GpuarchError(f"{where}: {key}: expected a whole number, got {value!r}")
        elif key == "norms" and value not in (1, 2, 4):
            raise GpuarchError(f"{where}: norms: expected 1, 2 or 4, got {value!r}")
        elif key in ("defaults", "require") and not isinstance(value, dict):
            raise GpuarchError(f"{where}: {key}: expected a table, got {value!r}")
        elif key == "keys" and (not isinstance(value, dict) or not all(
                isinstance(v, str) and v for v in value.values())):
            raise GpuarchError(f"{where}: keys: expected a table of config key paths, got "
                               f"{value!r}")
        values[key] = value
    for required in ("name", "source"):
        if not isinstance(values.get(required), str) or not values[required]:
            raise GpuarchError(f"{where}: {required}: expected a non-empty string")
    traits = FamilyTraits(model_type=model_type, **values)
    if traits.gate_head_bias and not traits.attention_gate:
        raise GpuarchError(f"{where}: gate_head_bias needs attention_gate")
    if (traits.indexer or traits.mla_q_gate) and not traits.mla:
        raise GpuarchError(f"{where}: indexer and mla_q_gate need mla")
    if traits.indexer_every and not traits.indexer:
        raise GpuarchError(f"{where}: indexer_every needs indexer")
    if traits.windows in ("pattern", "pattern_first", "prefix_pattern") \
            and traits.window_pattern < 1:
        raise GpuarchError(f"{where}: windows \"{traits.windows}\" needs window_pattern >= 1")
    return traits


@cache
def family_traits() -> dict[str, FamilyTraits]:
    """Every family of the table by its config.json ``model_type``."""
    with FAMILIES_FILE.open("rb") as fh:
        raw = tomllib.load(fh)
    return {model_type: _traits(model_type, row) for model_type, row in raw.items()}
