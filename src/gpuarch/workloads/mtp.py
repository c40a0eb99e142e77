"""Multi-token prediction (MTP) blocks, as DeepSeek-V3 trains with one (report arXiv:2412.19437,
section 2.2): each block normalises the previous depth's hidden state and the embedding of
the next token (two RMSNorms), concatenates them, projects 2h -> h, runs one transformer
layer, and predicts through the main model's output head (after its own final norm), sharing
the head and the embedding with the main model. Megatron-Core's ``--mtp-num-layers`` builds
the same block; its layer is of the model's last layer's kind (an expert layer in an MoE
model), with full attention. A hybrid model's MTP block is an attention block and an expert
block (an MLP block without experts), Nemotron 3 Super's ``*E`` (Megatron-Core's MTP layer
pattern); its depths may share one block's weights (``--mtp-use-repeated-layer``).
"""

from __future__ import annotations

import dataclasses

from gpuarch.workloads.flops import forward_flops_per_token
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import TransformerShape

__all__ = ["mtp_block_params", "mtp_forward_flops_per_token", "mtp_layer_shape"]


def mtp_layer_shape(s: TransformerShape) -> TransformerShape:
    """A one-layer model whose layer is the MTP block's: an expert layer in an MoE model,
    full attention (the full layers' heads where they have their own; a hybrid model's
    attention and expert blocks as one layer); with
    DeepSeek-V4's compressed attention, a layer of the window only, learned routing (its
    config.json's last compress_ratios entry, 0; vLLM builds the MTP layer so). A model of
    shared transformer blocks (Zamba's) or of RWKV's channel mixing: a plain layer of its
    attention and MLP sizes (its own weights, the hidden input, no adapters or receptance);
    one of looped layers (Inkling 2 Mini's) a layer run once, without message gates."""
    c = s.compressed
    return dataclasses.replace(s.attention_kind(0), name=f"{s.name} MTP layer", layers=1,
                               dense_layers=0,
                               sliding_window=0, sliding_layers=0, attention_chunked=False,
                               hybrid_pattern="", mlp_widths=(),
                               mamba=None, hash_layers=0, shared_blocks=0,
                               attention_input=0, adapter_rank=0, adapter_attention=False,
                               receptance_mlp=False, loop_layers=0, loop_passes=0,
                               loop_start=0, loop_window_layers=0, loop_gate_rank=0,
                               compressed=None if c is None
                               else dataclasses.replace(c, ratios=(0,)))


def mtp_block_params(s: TransformerShape) -> tuple[int, int]:
    """(Parameters outside the routed experts, routed-expert parameters) of one MTP block:
    the 2h -> h projection, its two input norms, the layer and the final norm before the
    shared head. The shared embedding and head are the main model's, not counted again."""
    pc = count_params(mtp_layer_shape(s))
    norm = s.norm.params_per_width * s.hidden
    projection = 2 * s.hidden * s.hidden + 2 * norm
    return pc.total - pc.embedding - pc.lm_head - pc.mlp_experts + projection, pc.mlp_experts


def mtp_forward_flops_per_token(s: TransformerShape, seq_len: int, *,
                                causal: bool = False) -> float:
    """Forward FLOPs per token of one MTP block: its projection, its layer and its pass
    through the shared head (attention counted as the main model's, ``causal`` halving it)."""
    layer = forward_flops_per_token(mtp_layer_shape(s), seq_len, causal=causal)
    return layer.total + 2.0 * 2 * s.hidden * s.hidden
