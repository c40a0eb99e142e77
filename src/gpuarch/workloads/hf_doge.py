"""Read the config.json of Doge (``doge``: SmallDoge's Doge models), as Transformers 5.25
builds it (modeling_doge.py), DogeConfig's defaults filling what a config leaves out.

Each layer: an RMSNorm, grouped-query attention with a norm over each head's queries and
keys and a dynamic mask (``TransformerShape.dynamic_mask``: a projection of the values to a
logit a KV head and a learned scale a KV head, keeping each query's ``keep_window_size``
highest-scoring positions; priced as the dense masked attention Transformers computes), a
learned scale a channel on the residual (``input_residual``), an RMSNorm, a GLU MLP and
another residual scale (``post_attention_residual``; both read as ``residual_gates``: two
hidden-wide vectors a layer). ``attention_bias`` puts biases on q, k, v, the output and the
mask's projection; ``sliding_window`` limits every layer. Doge's cross-domain mixture of
experts (``is_moe``: product-key routing over single-neuron experts) is refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.workloads.hf import _decoder_fields as decoder_fields
from gpuarch.workloads.hf import _flag as flag
from gpuarch.workloads.hf import _get as get
from gpuarch.workloads.hf import glu_kind
from gpuarch.workloads.shape import QkNorm, TransformerShape

__all__ = ["DOGE_FAMILIES"]

_DOGE_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32768, "hidden_size": 1024, "intermediate_size": 2048,
    "num_hidden_layers": 32, "hidden_act": "silu", "tie_word_embeddings": False,
    "max_position_embeddings": 2048, "num_attention_heads": 8}
"""DogeConfig's defaults (Transformers 5.25, configuration_doge.py) for the keys read here."""


def _doge(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """Doge (see the module's notes)."""
    cfg = {**_DOGE_DEFAULTS, **cfg}
    if flag(cfg, "is_moe", False):
        raise GpuarchError("is_moe: true is not read (Doge's cross-domain mixture of experts: "
                           "product-key routing over single-neuron experts beside the MLP)")
    act = cfg.get("hidden_act")
    kind = glu_kind(act)
    if kind is None:
        raise GpuarchError(f"hidden_act: expected SiLU or GELU (the MLP's gate), got {act!r}")
    layers = get(cfg, path, "num_hidden_layers")
    fields = decoder_fields(cfg, path, label, layers, get(cfg, path, "num_attention_heads"))
    bias = flag(cfg, "attention_bias", False)
    window = get(cfg, path, "sliding_window", default=0) or 0
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "intermediate_size"),
        ffn_kind=kind,
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=flag(cfg, "mlp_bias", False),
        qk_norm=QkNorm.HEAD,
        sliding_window=window,
        residual_gates=True,
        dynamic_mask=True,
    )


DOGE_FAMILIES = {"doge": _doge}
"""The model_types read here, and their readers."""
