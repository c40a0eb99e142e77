"""Read the config.json of JetMoE (``jetmoe``: JetMoE-8B), whose attention is a mixture of
experts too (``TransformerShape.attention_experts``), as Transformers 5.25 builds it
(modeling_jetmoe.py), JetMoeConfig's defaults filling what a config leaves out.

Each layer: an RMSNorm, a mixture of attention heads (one key-value projection of
``num_key_value_heads`` heads of ``kv_channels``; ``num_local_experts`` experts, each a
query projection to that many heads and an output projection back, of which a router picks
``num_experts_per_tok`` a token; one bias of the hidden width after them), an RMSNorm and
an expert MLP (the same count of experts, each a GLU of ``intermediate_size`` on
``activation_function``, the same top-k, one bias after the combine). The attention's heads
are the chosen experts' (Transformers' ``num_attention_heads`` = kv heads x top-k), each
group of a KV head's queries spread over the experts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.workloads.hf import _decoder_fields as decoder_fields
from gpuarch.workloads.hf import _get as get
from gpuarch.workloads.hf import glu_kind
from gpuarch.workloads.shape import TransformerShape

__all__ = ["ATTENTION_EXPERT_FAMILIES"]

_JETMOE_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000, "hidden_size": 2048, "num_hidden_layers": 12,
    "num_key_value_heads": 16, "kv_channels": 128, "intermediate_size": 5632,
    "max_position_embeddings": 4096, "activation_function": "silu", "num_local_experts": 8,
    "num_experts_per_tok": 2, "tie_word_embeddings": True}
"""JetMoeConfig's defaults (Transformers 5.25, configuration_jetmoe.py) for the keys read
here."""


def _jetmoe(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """JetMoE (see the module's notes). Its partial rotary positions hold no parameters; a
    config's own ``num_attention_heads`` is ignored, as JetMoeConfig derives it."""
    cfg = {**_JETMOE_DEFAULTS, **cfg}
    experts = get(cfg, path, "num_local_experts")
    top_k = get(cfg, path, "num_experts_per_tok")
    if not 1 <= top_k <= experts:
        raise GpuarchError(f"num_experts_per_tok: expected 1 to num_local_experts "
                           f"({experts}), got {top_k}")
    kv_heads = get(cfg, path, "num_key_value_heads")
    act = cfg.get("activation_function")
    kind = glu_kind(act)
    if kind is None:
        raise GpuarchError(f"activation_function: expected SiLU or GELU (the experts' GLU), "
                           f"got {act!r}")
    fields = decoder_fields({**cfg, "num_key_value_heads": kv_heads, "head_dim": None}, path,
                            label, get(cfg, path, "num_hidden_layers"), kv_heads * top_k)
    fields.update(head_dim=get(cfg, path, "kv_channels"))
    width = get(cfg, path, "intermediate_size")
    return TransformerShape(
        **fields,
        ffn_hidden=width,
        ffn_kind=kind,
        out_bias=True,  # the attention experts' one bias after their combine
        experts=experts,
        experts_per_token=top_k,
        moe_ffn_hidden=width,
        moe_out_bias=True,
        attention_experts=experts,
    )


ATTENTION_EXPERT_FAMILIES = {"jetmoe": _jetmoe}
"""The model_types read here, and their readers."""
