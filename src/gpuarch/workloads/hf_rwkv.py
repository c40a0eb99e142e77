"""Read the config.json of RWKV-4 (``rwkv``: RWKV-4 Pile, Raven and World models), as
Transformers 5.25 builds it (modeling_rwkv.py), RwkvConfig's defaults filling what a config
leaves out.

Each of ``num_hidden_layers`` blocks: a LayerNorm and RWKV's time mixing (``MambaShape``
kind "rwkv4": key, value and receptance from token-shifted inputs, ``attention_hidden_size``
wide, a recurrence a channel with a learned decay and first-token bonus, the receptance's
sigmoid gate, the output projection), then a LayerNorm and its channel mixing (a
squared-ReLU MLP of ``intermediate_size`` gated by a sigmoid of a hidden x hidden
receptance, both from token-shifted inputs: ``receptance_mlp``); the first block also
normalises the embedding (``embedding_norm``). Read as blocks, "M-" a layer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuarch.workloads.hf import _decoder_fields as decoder_fields
from gpuarch.workloads.hf import _get as get
from gpuarch.workloads.shape import FfnKind, MambaShape, NormKind, Position, TransformerShape

__all__ = ["RWKV_FAMILIES"]

_RWKV_DEFAULTS: dict[str, Any] = {
    "vocab_size": 50277, "context_length": 1024, "hidden_size": 4096, "num_hidden_layers": 32,
    "tie_word_embeddings": False}
"""RwkvConfig's defaults (Transformers 5.25, configuration_rwkv.py) for the keys read here."""


def _rwkv(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """RWKV-4 (see the module's notes): the time mixing ``attention_hidden_size`` wide (the
    hidden size where null), the channel mixing ``intermediate_size`` (4 x hidden where
    null); the head tied to the embedding with ``tie_word_embeddings``. The shape's heads are
    the time mixing's channels (they set how TP may split it)."""
    cfg = {**_RWKV_DEFAULTS, **cfg}
    layers = get(cfg, path, "num_hidden_layers")
    hidden = get(cfg, path, "hidden_size")
    inner = get(cfg, path, "attention_hidden_size", default=0) or hidden
    mamba = MambaShape(kind="rwkv4", heads=inner, head_dim=1, state=3, groups=1,
                       conv_kernel=2, conv_bias=False, gated_norm=False)
    fields = decoder_fields({**cfg, "num_key_value_heads": inner, "head_dim": None,
                             "max_position_embeddings": get(cfg, path, "context_length")},
                            path, label, 2 * layers, inner)
    fields.update(head_dim=1)
    return TransformerShape(
        **fields,
        ffn_hidden=get(cfg, path, "intermediate_size", default=0) or 4 * hidden,
        ffn_kind=FfnKind.RELU2,
        norm=NormKind.LAYERNORM,
        embedding_norm=True,
        position=Position.NONE,
        hybrid_pattern="M-" * layers,
        mamba=mamba,
        receptance_mlp=True,
    )


RWKV_FAMILIES = {"rwkv": _rwkv}
"""The model_types read here, and their readers."""
