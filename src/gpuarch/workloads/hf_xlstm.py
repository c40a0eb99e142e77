"""Read the config.json of xLSTM (``xlstm``: NX-AI's xLSTM-7B), as Transformers 5.25 builds
it (modeling_xlstm.py without the external ``xlstm`` package), xLSTMConfig's defaults
filling what a config leaves out.

Each of ``num_hidden_layers`` (or ``num_blocks``) blocks: an RMSNorm and an mLSTM layer
(``MambaShape`` kind "mlstm": ``num_heads`` heads, q and k ``qk_dim_factor`` x hidden wide,
v and the output gate ``v_dim_factor`` x hidden, an input and a forget gate a head with
biases, a layer norm a head, the output projection), then an RMSNorm and a SwiGLU MLP of
``ffn_proj_factor`` x hidden rounded up to ``ffn_round_up_to_multiple_of``. Read as blocks,
"M-" a layer. ``weight_mode`` "fused" holds the same weights as "single"; the LM head is
never tied to the embedding (xLSTMForCausalLM declares no tie)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError, check_number
from gpuarch.workloads.hf import _decoder_fields as decoder_fields
from gpuarch.workloads.hf import _flag as flag
from gpuarch.workloads.hf import _get as get
from gpuarch.workloads.shape import FfnKind, MambaShape, Position, TransformerShape

__all__ = ["XLSTM_FAMILIES"]

_XLSTM_DEFAULTS: dict[str, Any] = {
    "vocab_size": 50304, "hidden_size": 4096, "num_hidden_layers": 32, "num_heads": 8,
    "use_bias": False, "tie_word_embeddings": False, "qk_dim_factor": 0.5,
    "v_dim_factor": 1.0, "chunk_size": 64, "ffn_proj_factor": 2.667,
    "ffn_round_up_to_multiple_of": 64, "weight_mode": "single"}
"""xLSTMConfig's defaults (Transformers 5.25, configuration_xlstm.py: xLSTM-7B's sizes) for
the keys read here."""


def _factor(cfg: dict[str, Any], path: Path, key: str) -> float:
    value = cfg[key]
    check_number(f"{path}: {key}", value, 0)
    if not value:
        raise GpuarchError(f"{path}: {key}: expected a number > 0, got {value!r}")
    return float(value)


def _xlstm(cfg: dict[str, Any], path: Path, label: str) -> TransformerShape:
    """xLSTM (see the module's notes). ``use_bias`` is refused: it puts biases on the blocks'
    norms but not on the final one, which the shape's one norm kind cannot hold."""
    cfg = {**_XLSTM_DEFAULTS, **cfg}
    if flag(cfg, "use_bias", False):
        raise GpuarchError("use_bias: true is not read (biases on the blocks' norms but not "
                           "the final norm's)")
    if cfg.get("weight_mode") not in ("single", "fused"):
        raise GpuarchError(f"weight_mode: expected \"single\" or \"fused\", got "
                           f"{cfg.get('weight_mode')!r}")
    # xLSTMConfig keeps hidden_size (4,096 unless given) for the blocks and embedding_dim
    # for the embedding, each the other where it is null; and builds num_blocks blocks
    # where given, else num_hidden_layers
    hidden = get(cfg, path, "hidden_size", "embedding_dim")
    embedding = get(cfg, path, "embedding_dim", default=0) or hidden
    if embedding != hidden:
        raise GpuarchError(f"embedding_dim: {embedding} must equal hidden_size ({hidden}), "
                           "the width the blocks read")
    layers = get(cfg, path, "num_blocks", "num_hidden_layers")
    heads = get(cfg, path, "num_heads")
    if heads < 1:
        raise GpuarchError(f"num_heads: expected an integer >= 1, got {heads}")
    qk = int(hidden * _factor(cfg, path, "qk_dim_factor"))
    v = int(hidden * _factor(cfg, path, "v_dim_factor"))
    if qk % heads or v % heads or not qk or not v:
        raise GpuarchError(f"num_heads: {heads} must divide the keys' width ({qk}: "
                           f"qk_dim_factor x hidden_size) and the values' ({v}: v_dim_factor "
                           "x hidden_size)")
    multiple = get(cfg, path, "ffn_round_up_to_multiple_of")
    if multiple < 1:
        raise GpuarchError(f"ffn_round_up_to_multiple_of: expected an integer >= 1, got "
                           f"{multiple}")
    # xLSTMFeedForward's width: ffn_proj_factor x hidden rounded up to the multiple
    ffn = int((hidden * _factor(cfg, path, "ffn_proj_factor") + multiple - 1) // multiple
              * multiple)
    mamba = MambaShape(kind="mlstm", heads=heads, head_dim=v // heads, state=qk // heads,
                       groups=heads, conv_kernel=0, conv_bias=False,
                       block=get(cfg, path, "chunk_size"))
    fields = decoder_fields({**cfg, "hidden_size": hidden, "num_key_value_heads": heads,
                             "head_dim": None, "max_position_embeddings": 0}, path, label,
                            2 * layers, heads)
    # (xLSTMForCausalLM declares no tie: its head is its own whatever tie_word_embeddings
    # says)
    fields.update(head_dim=mamba.head_dim, tied_embeddings=False)
    return TransformerShape(**fields, ffn_hidden=ffn, ffn_kind=FfnKind.SWIGLU,
                            position=Position.NONE, hybrid_pattern="M-" * layers, mamba=mamba)


XLSTM_FAMILIES = {"xlstm": _xlstm}
"""The model_types read here, and their readers."""
