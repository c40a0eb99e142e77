"""Exact parameter counts of a transformer shape, by component."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache

from gpuarch.workloads.shape import (
    CSA_RATIO,
    CompressedAttention,
    Position,
    QkNorm,
    TransformerShape,
)

__all__ = [
    "ALTUP_PROJECTION",
    "INDEXER_OPS",
    "INDEXER_SCORES",
    "LOOP_GATE_DOWN",
    "LOOP_GATE_UP",
    "LOOP_MESSAGES",
    "LOOP_OPS",
    "ParamCount",
    "altup_params",
    "attention_residual_params",
    "compressor_params",
    "compressor_projection",
    "count_params",
    "dynamic_conv_projection_params",
    "dynamic_mask_projection_params",
    "gemmless_attention_params",
    "hyper_connection_mix_weights",
    "hyper_connection_params",
    "indexer_params",
    "indexer_projections",
    "kv_conv_params",
    "latent_projection_params",
    "layer_norm_params",
    "layer_op_shares",
    "loop_message_params",
    "mamba_params",
    "per_layer_input_params",
    "qk_conv_params",
    "receptance_params",
    "routed_expert_params",
    "router_params",
    "shared_block_call_params",
    "shared_block_params",
]


@dataclass(frozen=True)
class ParamCount:
    """Parameters by component; ``active`` counts what one token passes through (MoE)."""

    embedding: int  # token (and learned position) embeddings
    lm_head: int  # output projection (0 when tied to the embedding)
    attention: int  # all layers
    mlp_dense: int  # all dense MLP blocks
    mlp_experts: int  # all routed experts, all layers
    mlp_shared: int  # shared experts, all layers
    router: int
    norms: int
    mamba: int = 0  # all Mamba-2 mixer blocks of a hybrid model
    moe_latent: int = 0  # latent experts' projections to and from the latent width
    hyper_connections: int = 0  # the residual streams' mixing weights (DeepSeek-V4's mHC)
    # per-layer input embeddings: their table (an embedding) and their projections and norms
    per_layer_table: int = 0
    per_layer_inputs: int = 0
    # block attention residuals' queries and norms (Kimi K3's)
    attention_residuals: int = 0
    # AltUp's stream projections, routers and coefficients, and LAuReL's low-rank branches
    # (Gemma 3n's)
    alternating_updates: int = 0
    laurel: int = 0
    # a mixture of attention heads' experts (JetMoE's): every expert's query and output
    # projections, all layers (the rest of the attention in ``attention``)
    attention_experts: int = 0
    # the looped layers' message gates and the queries of the messages' attention residual
    # (Inkling 2 Mini's; ``loop_gate_rank``)
    loop_messages: int = 0

    @property
    def total(self) -> int:
        return (self.embedding + self.lm_head + self.attention + self.mlp_dense
                + self.mlp_experts + self.mlp_shared + self.router + self.norms + self.mamba
                + self.moe_latent + self.hyper_connections + self.per_layer_table
                + self.per_layer_inputs + self.attention_residuals
                + self.alternating_updates + self.laurel + self.attention_experts
                + self.loop_messages)

    def active(self, shape: TransformerShape) -> int:
        """Parameters used per token: routed experts counted experts_per_token of experts;
        a shared transformer block's weights (``shared_blocks``) at each of its calls; a
        looped layer's (``loop_layers``) at each of its runs, its message gates at each run
        after the first."""
        if shape.loop_layers:
            runs = shape.unrolled_view()
            return count_params(runs).active(runs) \
                + max(shape.loop_passes - 1, 0) * self.loop_messages
        if shape.shared_blocks:
            return self.total + (shape.shared_block_calls - shape.shared_blocks) \
                * shared_block_params(shape)
        if not shape.is_moe:
            return self.total
        routed = self.mlp_experts * shape.experts_per_token // shape.experts
        # (and a mixture of attention heads' chosen experts, JetMoE's)
        attention = self.attention_experts * shape.experts_per_token \
            // shape.attention_experts if shape.attention_experts else 0
        return self.total - self.mlp_experts + routed - self.attention_experts + attention


def attention_params(s: TransformerShape) -> int:
    """One layer's attention projections (and their biases); a sparse-attention indexer's
    weights apart (``indexer_params``, in ``indexer_layers`` of the layers). A model whose
    full layers have heads of their own: a window layer's (``attention_kind`` for the
    others)."""
    h, d, heads, kv = s.hidden, s.d_head, s.heads, s.n_kv_heads
    if s.compressed is not None:
        c = s.compressed
        # wq_a and its norm, wq_b, wkv and its norm, wo_a (each group's heads to its rank),
        # wo_b and a sink logit a head; compressors and indexers apart
        return (h * c.q_lora_rank + c.q_lora_rank + c.q_lora_rank * heads * d + h * d + d
                + heads * d * c.o_lora_rank + c.o_groups * c.o_lora_rank * h
                + attention_sink_params(s))
    if s.mla is not None:
        m = s.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        # the query up-projection: queries, or (q_gate) queries and a gate a value channel
        # from the latent beside its norm
        up = 2 * m.q_lora_rank * heads * (qk + m.v_head_dim) if m.q_gate \
            else m.q_lora_rank * heads * qk
        q = (h * m.q_lora_rank + m.q_lora_rank + up if m.q_lora_rank else h * heads * qk)
        # (and rope_key_norm: a norm's weights over the shared rotary key, dots3-note's)
        kv_part = (h * m.latent_width + m.kv_lora_rank
                   + m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
                   + (m.qk_rope_head_dim if m.rope_key_norm else 0))
        # attention_bias: the down-projections' biases (q_a_proj, kv_a_proj_with_mqa) and the
        # output projection's, as Transformers' DeepSeek and Kimi Linear attentions build them
        biases = (m.q_lora_rank + m.latent_width if s.bias or s.qkv_bias else 0) \
            + (h if s.bias or s.out_bias else 0)
        # attention_gate: an output gate a channel from the hidden state (Kimi K3's g_proj);
        # head_gate: one a head (Ling 2.5's)
        gate = h * heads * m.v_head_dim if s.attention_gate else h * heads if s.head_gate else 0
        return q + kv_part + heads * m.v_head_dim * h + biases + gate + attention_sink_params(s)
    q = heads * d * (2 if s.attention_gate else 1)  # the query projection makes the gate too
    # keys and values (the keys alone where they are also the values; none in a layer
    # that reads another's, reuses_kv)
    kv_out = 0 if s.reuses_kv else kv * s.kv_width
    # a gate a head: its own projection, no bias; the query, key and value projections
    # read the attention's input width (Zamba's 2 x hidden)
    a = s.attention_in
    # (and a relative position bias's projection to relative_bias numbers a query head,
    # Inkling's r_proj, and a sink logit a head, Inkling 2's sink_proj, from the same input)
    weights = a * q + a * kv_out + heads * s.d_value * h + (h * heads if s.head_gate else 0) \
        + a * heads * (s.relative_bias + (1 if s.sink_projection else 0))
    # the query projection's biases cover the gate's channels too where it makes the gate;
    # a gate of its own has none, but one learned bias a head (gate_head_bias: Beam's)
    q_biased = heads * d if s.gate_head_bias else q
    biases = heads if s.gate_head_bias else 0
    if s.bias:
        biases += q_biased + kv_out + h
    else:
        biases += (q_biased + kv_out if s.qkv_bias else 0) + (h if s.out_bias else 0)
    return weights + biases + gemmless_attention_params(s) + qk_conv_params(s) \
        + dynamic_mask_projection_params(s) + kv_conv_params(s)


def dynamic_conv_projection_params(s: TransformerShape) -> int:
    """The full layers' projections of their key and value inputs to taps a KV head
    (``dynamic_kv_convs``: Inkling 2's), all layers; 0 without."""
    if not s.dynamic_kv_convs:
        return 0
    return s.full_layers * 2 * s.hidden * s.attention_kind(0).n_kv_heads * s.short_conv_taps


def kv_conv_params(s: TransformerShape) -> int:
    """One attention layer's short convolutions over its keys and values (``short_conv_taps``
    taps a channel, no bias: Inkling's k_sconv and v_sconv); 0 without."""
    return s.n_kv_heads * (s.d_head + s.d_value) * s.short_conv_taps


def dynamic_mask_projection_params(s: TransformerShape) -> int:
    """One layer's projection of the values to the dynamic mask's logits (Doge's dt_proj:
    every KV head's values to one logit a KV head, with a bias where the attention's
    projections have them); 0 without a dynamic mask. Its scale a KV head (A) takes part
    in no GEMM (``gemmless_attention_params``)."""
    if not s.dynamic_mask:
        return 0
    kv = s.n_kv_heads
    return kv * kv * s.d_head + (kv if s.bias or s.qkv_bias else 0)


def receptance_params(s: TransformerShape) -> int:
    """One MLP's weights beside its matrices as RWKV's channel mixing has them
    (``receptance_mlp``): the receptance (hidden x hidden) and the two token-shift mixes
    (hidden wide each); 0 without."""
    return s.hidden * s.hidden + 2 * s.hidden if s.receptance_mlp else 0


def shared_block_params(s: TransformerShape) -> int:
    """One set of a shared transformer block's weights (``shared_blocks``: Zamba's): its
    attention and the norm before it (the attention's input width), its MLP and the norm
    before it; 0 without shared blocks."""
    if not s.shared_blocks:
        return 0
    per_width = s.norm.params_per_width
    return (attention_params(s) + per_width * s.attention_in + qk_norm_params(s)
            + mlp_params(s, s.d_ffn) + s.ffn_kind.activation_params + per_width * s.hidden)


def shared_block_call_params(s: TransformerShape) -> tuple[int, int]:
    """What each call of a shared transformer block holds of its own (``shared_blocks``),
    as (beside the attention, beside the MLP): with ``adapter_attention``, the query, key
    and value adapters (the attention's input width to ``adapter_rank`` and back, each);
    the MLP's gate/up adapter (the hidden width to the rank, the rank to the gate and up
    widths) and the hidden x hidden projection of the call's output after the MLP; (0, 0)
    without shared blocks (Transformers' Zamba2Attention, Zamba2MLP, Zamba2HybridLayer)."""
    if not s.shared_blocks:
        return 0, 0
    r, a, h = s.adapter_rank, s.attention_in, s.hidden
    up = 2 * s.d_ffn if s.ffn_kind.gated else s.d_ffn
    return 3 * 2 * a * r if s.adapter_attention else 0, r * (h + up) + h * h


def router_params(s: TransformerShape) -> int:
    """The expert layers' routers' weights (their bias apart): a projection of the hidden
    state to the router's choices, or (``router_hidden`` R) ZAYA's MLP router: hidden to R
    with a bias, a norm, two R-wide layers with biases, R to the choices, and the scale of
    the previous layer's router state in all but the first."""
    r = s.router_hidden
    if not r:
        return s.moe_layers * s.hidden * s.router_width
    return s.moe_layers * (s.hidden * r + 2 * r * r + r * s.router_width + 4 * r) \
        + max(s.moe_layers - 1, 0) * r


def qk_conv_params(s: TransformerShape) -> int:
    """One attention layer's convolutions over queries and keys (``qk_conv_depthwise``):
    the depthwise taps and a bias a channel, each head's head-wide taps and a bias a channel,
    and a temperature a KV head; 0 without them."""
    c = s.qk_conv_channels
    if not c:
        return 0
    return c * (s.qk_conv_depthwise + 1) + c * (s.d_head * s.qk_conv_grouped + 1) \
        + s.n_kv_heads


def attention_sink_params(s: TransformerShape) -> int:
    """One attention layer's sink logits, one a query head (GPT-OSS's, Hy4's latent
    attention's, and DeepSeek-V4's compressed attention's), which take part in no GEMM."""
    return s.heads if s.attention_sinks or s.compressed is not None else 0


def gemmless_attention_params(s: TransformerShape) -> int:
    """One attention layer's parameters that take part in no GEMM: its sink logits
    (``attention_sink_params``), differential attention's four lambda vectors a head wide
    (DiffLlama's; its norm has no weight) and a dynamic mask's scale a KV head (Doge's A)."""
    return attention_sink_params(s) + (4 * s.d_head if s.differential_attention else 0) \
        + (s.n_kv_heads if s.dynamic_mask else 0) \
        + (s.heads * (s.d_head + s.relative_bias) if s.head_scales else 0)


INDEXER_SCORES = "indexer"
"""Name of a sparse-attention indexer's scoring operator (``perf.roofline.INDEXER``)."""

INDEXER_OPS = ("index_q", "index_k", "index_weights", INDEXER_SCORES)
"""Names of a sparse-attention indexer's operators (its three projections, as
``indexer_projections`` names them, and its scores), which run in the model's
``indexer_share`` of the layers."""


def compressor_projection(s: TransformerShape, ratio: int) -> tuple[str, int, int]:
    """A DeepSeek-V4 layer's compressor GEMM per token as (name, N, K): wkv and wgate from
    the hidden state to the head width, twice it where the windows overlap (CSA); named by
    its ratio (``compress_4``, ``compress_128``), the names ``layer_op_shares`` weights."""
    width = 2 * s.d_head * (2 if CompressedAttention.overlaps(ratio) else 1)
    return (f"compress_{ratio}", width, s.hidden)


def compressor_params(s: TransformerShape, ratio: int) -> int:
    """One DeepSeek-V4 layer's compressor at ``ratio``: wkv and wgate, a learned bias per
    position of its window (overlap doubling its width as theirs) and a norm over the head
    width; 0 for a layer that attends to its window only."""
    if not ratio:
        return 0
    _, n, k = compressor_projection(s, ratio)
    return n * k + ratio * n // 2 + s.d_head


def indexer_projections(s: TransformerShape) -> list[tuple[str, int, int]]:
    """A sparse-attention layer's indexer GEMMs per token as (name, N, K): its queries from
    the compressed query (wq_b), its one key (wk) and its per-head weights (weights_proj)
    from the hidden state (DeepSeek-V3.2-Exp inference/model.py, ``Indexer``); none without
    an indexer. The engines and the reference code run them whole on every tensor-parallel
    GPU: each needs every head's scores to pick the positions. DeepSeek-V4's indexer makes
    its keys with its own overlapping compressor (wkv and wgate, twice its head width).
    MiniMax-M3's block-sparse indexer: its queries and key from the hidden state."""
    q, k, weights = INDEXER_OPS[:3]
    b = s.block_sparse
    if b is not None:
        # MiniMax-M3's: queries and the one key from the hidden state, no weights
        return [(q, b.index_heads * b.index_head_dim, s.hidden), (k, b.index_head_dim, s.hidden)]
    c = s.compressed
    if c is not None:
        return [(q, c.index_heads * c.index_head_dim, c.q_lora_rank),
                (k, 4 * c.index_head_dim, s.hidden),
                (weights, c.index_heads, s.hidden)]
    m = s.indexer_mla
    if m is None or not m.sparse:
        return []
    return [(q, m.index_heads * m.index_head_dim, m.q_lora_rank),
            (k, m.index_head_dim, s.hidden),
            (weights, m.index_heads, s.hidden)]


def indexer_params(s: TransformerShape) -> int:
    """One layer's indexer (DeepSeek Sparse Attention): its three projections and the
    LayerNorm over its key (weight and bias); DeepSeek-V4's: its query and weight
    projections and its own compressor (wkv and wgate, a bias per window position, a
    norm); MiniMax-M3's: its two projections and their head-wide norms; 0 without one."""
    b = s.block_sparse
    if b is not None:
        # its projections and a norm over the queries' and the key's head width
        return sum(n * k for _, n, k in indexer_projections(s)) + 2 * b.index_head_dim
    c = s.compressed
    if c is not None:
        # its compressor's bias per window position (CSA_RATIO of twice its head width)
        # and norm beside the projections
        return sum(n * k for _, n, k in indexer_projections(s)) \
            + CSA_RATIO * 2 * c.index_head_dim + c.index_head_dim
    m = s.indexer_mla
    if m is None or not m.sparse:
        return 0
    return sum(n * k for _, n, k in indexer_projections(s)) + 2 * m.index_head_dim


def hyper_connection_mix_weights(s: TransformerShape) -> int:
    """The hyper-connections' projection weights, all layers (DeepSeek-V4's mHC, Hy4's iHC;
    0 without): each of a layer's two blocks projects the streams (streams x hidden) to its
    mixing logits (``hyper_connection_logits``), and the last mix, of the streams into one
    before the final norm, to one weight a stream (the GEMMs' weights; biases and scales
    apart)."""
    n = s.hyper_connections
    return (2 * s.layers * s.hyper_connection_logits + n) * n * s.hidden


def hyper_connection_params(s: TransformerShape) -> int:
    """The hyper-connections' parameters, all layers: the projections
    (``hyper_connection_mix_weights``), a bias a logit and three scales for each block (two
    where independent: Hy4's read and write scales), a bias a stream and one scale for the
    last mix; 0 without."""
    n = s.hyper_connections
    if not n:
        return 0
    scales = 2 if s.independent_hyper_connections else 3
    return hyper_connection_mix_weights(s) + 2 * s.layers * (s.hyper_connection_logits
                                                             + scales) + n + 1


ALTUP_PROJECTION = "altup_proj"
"""The name of AltUp's stream projection, a square GEMM of the hidden width
(``layer_op_shares``)."""


LOOP_GATE_DOWN = "loop_gate_down"
LOOP_GATE_UP = "loop_gate_up"
LOOP_MESSAGES = "loop_messages"
LOOP_OPS = (LOOP_GATE_DOWN, LOOP_GATE_UP, LOOP_MESSAGES)
"""The names of a looped layer's message operators (``loop_gate_rank``): its gates'
projections to the rank and back, and the messages' attention and the gates' elementwise
work (``layer_op_shares``: they run in the passes after the first)."""


def layer_op_shares(s: TransformerShape) -> dict[str, float]:
    """The operators of a layer that run only in some of the attention layers, by name, and
    the share of those layers: a sparse-attention indexer's (``INDEXER_OPS``) where not every
    layer has one, DeepSeek-V4's compressors (``compressor_projection``, one a ratio);
    AltUp's stream projection (``ALTUP_PROJECTION``), run 2 x (streams - 1) times a pass;
    the looped layers' message operators (``LOOP_OPS``), in their runs after the first.
    Estimates price one mean layer: such an operator's time counts its share."""
    shares: dict[str, float] = {}
    # (a block-sparse model's indexer runs in its sparse layers, a kind of their own)
    if s.indexer_layers and s.indexer_share != 1.0 and s.block_sparse is None:
        shares.update(dict.fromkeys(INDEXER_OPS, s.indexer_share))
    c = s.compressed
    if c is not None:
        shares.update((compressor_projection(s, ratio)[0], share)
                      for ratio, share in c.kinds() if ratio)
    if s.altup_streams:
        # AltUp's projections into the other streams and out of them run once a pass, 2 x
        # (n - 1) square GEMMs, priced as a share of every layer's one
        shares[ALTUP_PROJECTION] = 2 * (s.altup_streams - 1) / s.layers
    if s.loop_gate_rank:
        # the looped layers' message gates, in their runs after the first
        shares.update(dict.fromkeys(LOOP_OPS, s.loop_repeat_share))
    return shares


def mlp_params(s: TransformerShape, width: int, outer: int = 0) -> int:
    """One MLP (dense block or one expert) of inner width ``width`` reading and writing
    vectors of width ``outer`` (0 = the hidden size; a routed latent expert's is
    ``s.expert_width``)."""
    outer = outer or s.hidden
    weights = s.ffn_kind.matrices * outer * width
    biases = 0
    if s.bias or s.mlp_bias:
        biases = (2 if s.ffn_kind.gated else 1) * width + outer
    return weights + biases


def routed_expert_params(s: TransformerShape) -> int:
    """One routed expert (in the latent width of latent experts)."""
    return mlp_params(s, s.d_expert, s.expert_width)


def latent_projection_params(s: TransformerShape) -> int:
    """One expert block's projections to the latent width and back, and the latent's norm
    where it has one (``moe_latent_norm``); 0 without."""
    norm = s.norm.params_per_width * s.moe_latent if s.moe_latent_norm else 0
    return 2 * s.hidden * s.moe_latent + norm


def mamba_params(s: TransformerShape) -> int:
    """One recurrent mixer block. Mamba-2: the input projection (z, x, B, C and dt), the
    depthwise convolution's taps and bias, dt_bias, A_log and D per head, the gated norm
    over the inner width and the output projection (Transformers' NemotronHMamba2Mixer).
    Gated DeltaNet: the input projections (q, k, v, z, beta and a), the convolution's taps,
    dt_bias and A_log per value head, the gated norm's one head-wide weight and the output
    projection (Transformers' Qwen3NextGatedDeltaNet). Kimi Delta Attention: the q, k, v
    and beta projections and the gates' low-rank halves, their up-projections, the
    convolution's taps, dt_bias a channel and A_log a head, the gated norm's head-wide
    weight and the output projection (Transformers' KimiLinearDeltaAttention). Mamba-1: the
    input projection (x and z), the convolution's taps and bias over x, x_proj (to the
    step's rank, B and C), dt_proj and its bias, A_log a channel and state element, D a
    channel, Jamba's three norm weights and the output projection (Transformers'
    MambaMixer, JambaMambaMixer). Lightning attention: qkv_proj, the output gate, the norm
    over the inner width and out_proj (Transformers' MiniMaxLightningAttention). A short
    convolution: in_proj (B, C, x), the convolution's taps (and bias) and out_proj, with
    ``proj_bias`` both projections' biases (Transformers' Lfm2ShortConv). 0 without such
    blocks."""
    m = s.mamba
    if m is None:
        return 0
    if m.rwkv:  # the three token-shift mixes, k, v, r, out, a decay and bonus a channel
        return 3 * s.hidden + s.hidden * m.in_proj_width + m.inner * s.hidden + 2 * m.inner
    if m.short_conv:  # B, C and x in; the convolution's taps over B x; out
        proj = s.hidden * m.in_proj_width + m.inner * s.hidden
        if m.proj_bias:
            proj += m.in_proj_width + s.hidden
        return proj + m.inner * m.conv_kernel + (m.inner if m.conv_bias else 0)
    if m.selective:
        proj = s.hidden * m.in_proj_width + m.inner * s.hidden \
            + m.inner * m.x_proj_width + m.dt_rank * m.inner + m.inner
        if m.proj_bias:
            proj += m.in_proj_width + s.hidden
        conv = m.inner * m.conv_kernel + (m.inner if m.conv_bias else 0)
        return proj + conv + m.inner * m.state + m.inner \
            + (m.x_proj_width if m.dt_bc_norms else 0)
    proj = s.hidden * m.in_proj_width + m.inner * s.hidden + m.low_rank_width * m.gate_up_width
    if m.proj_bias:
        proj += m.in_proj_width + s.hidden
    conv = m.conv_width * m.conv_kernel + (m.conv_width if m.conv_bias else 0)
    if m.kda:
        return proj + conv + m.inner + m.heads + m.head_dim
    if m.gated_delta:
        return proj + conv + 2 * m.heads + m.head_dim
    if m.lightning:  # its decays are fixed (buffers): the norm over the inner width alone
        return proj + m.inner
    if m.mlstm:  # the gates' biases (always there) and the norm a head (with biases too)
        return proj + (0 if m.proj_bias else 2 * m.heads) + m.inner * (1 + m.proj_bias)
    return proj + conv + 3 * m.heads + (m.inner if m.gated_norm else 0)


def layer_norm_params(s: TransformerShape) -> int:
    """One layer's norm weights: its norms over the hidden width (two, or four with
    sandwich norms), any query-key norms, and BitNet's sub-norms over the attention's output
    (hidden wide) and the MLP's gated product (its width)."""
    sub = s.hidden + s.d_ffn if s.sub_norms else 0
    return s.norm.params_per_width * (s.layer_norms * s.hidden + sub) + qk_norm_params(s)


def qk_norm_params(s: TransformerShape) -> int:
    """One attention's query-key norm weights (0 without them; Gemma 4's norm over the
    values has no weight)."""
    qk = 0
    keys = 0 if s.reuses_kv else 1  # a layer that reads another's keys has no key norm
    if s.qk_norm is QkNorm.HEAD:
        qk = (1 + keys) * s.d_head
    elif s.qk_norm is QkNorm.FULL:
        qk = (s.heads + keys * s.n_kv_heads) * s.d_head
    return s.norm.params_per_width * qk


def embedding_norm_params(s: TransformerShape) -> int:
    """The weights of a norm after the token embedding (BLOOM's), 0 without one; it sits
    with the embedding on the first pipeline stage."""
    return s.norm.params_per_width * s.hidden if s.embedding_norm else 0


def first_stage_params(s: TransformerShape) -> int:
    """What the first pipeline stage holds beside its layers: the token embedding (and any
    position table), the norm after it and any per-layer input table (Gemma 4's and 3n's,
    looked up with the token)."""
    pc = count_params(s)
    return pc.embedding + embedding_norm_params(s) + pc.per_layer_table


@cache
def count_params(s: TransformerShape) -> ParamCount:
    """Exact parameter count (e.g. Llama-2-7B: 6,738,415,616); cached per shape (shapes are
    frozen, and the serving memory searches ask for the same one many times). Looped layers
    (``loop_layers``) count their weights once, beside their message gates."""
    if s.loop_layers:
        return dataclasses.replace(count_params(s.weight_view()),
                                   loop_messages=loop_message_params(s))
    h = s.hidden
    embedding = s.vocab * h + (s.max_positions * h if s.position is Position.LEARNED else 0)
    lm_head = (0 if s.tied_embeddings else s.head_rows * h) \
        + (s.head_rows if s.lm_head_bias else 0)
    norm = s.norm.params_per_width * h
    # a hybrid model's blocks each hold one part of a layer and one norm (two with sandwich
    # norms; its attention blocks any query-key norms), but for the attention blocks that
    # read the recurrent block's before them (parallel_mixers: Falcon-H1)
    kinds = s.attention_kinds()
    norms = (s.layers * s.block_norms - s.shared_norm_pairs) * norm \
        + sum(n * qk_norm_params(v) for _, n, v in kinds) \
        if s.is_hybrid else sum(n * layer_norm_params(v) for _, n, v in kinds)
    # shared transformer blocks (Zamba's): their weights held once a set, and each call's
    # own output projection and adapters (``shared_block_call_params``)
    blocks, calls = s.shared_blocks, s.shared_block_calls
    call_attention, call_mlp = shared_block_call_params(s)
    if blocks:
        norms = s.mamba_layers * norm + blocks * (s.norm.params_per_width * s.attention_in
                                                  + norm + qk_norm_params(s))
    norms += s.moe_layers * s.expert_layer_norms * norm
    # gated norms' low-rank gates (hidden -> rank -> hidden): before every layer's attention
    # and every expert layer's experts
    norms += (s.layers + s.moe_layers) * 2 * h * s.gated_norm_rank
    if s.residual_scales:  # a scale and a shift for each input of each residual add
        norms += s.layers * 8 * h + 2 * h
    if s.residual_gates:  # a learned gate a channel on each of a layer's two residual adds
        norms += s.layers * 2 * h
    c = s.compressed
    compressors = 0 if c is None else sum(compressor_params(s, r) for r in c.ratios)
    # a bias per expert in the learned-routing layers' routers (not the hashed), the
    # shared experts' gate and the router's scales
    router_bias = (s.moe_layers - s.hash_layers) * s.router_width if s.router_bias else 0
    if s.shared_expert_gate:
        router_bias += s.moe_layers * h
    if s.router_scales:
        router_bias += s.moe_layers * (h + s.experts)
    # a mixture of attention heads (JetMoE's): each layer's router over the attention
    # experts, and every expert's query and output projections apart from the rest of the
    # attention (whose count, attention_params, is a token's: its chosen experts' heads)
    attention_routers = s.layers * h * s.attention_experts
    attention_experts = s.layers * s.attention_experts * 2 * h * s.n_kv_heads * s.d_head
    chosen_heads = s.layers * 2 * h * s.heads * s.d_head if s.attention_experts else 0
    if s.moe_out_bias:  # a bias after the combine (JetMoE's), counted with the routers
        router_bias += s.moe_layers * h
    if s.mlp_scalar:  # the scalar on each MLP block (Inkling's: its router's, or the MLP's)
        router_bias += s.moe_layers
    # the short convolutions over each layer's attention and MLP outputs (Inkling's
    # attn_sconv and mlp_sconv), counted with the norms as the other hidden-wide weights
    norms += s.layers * 2 * h * s.short_conv_taps
    # the full layers' own norms over their keys' and values' inputs (Inkling 2's)
    if s.split_attention_inputs:
        norms += s.full_layers * 2 * norm
    return ParamCount(
        embedding=embedding,
        lm_head=lm_head,
        attention=(blocks * attention_params(s) + calls * call_attention if blocks else
                   sum(n * attention_params(v) for _, n, v in kinds))
        + s.relative_bias_params + dynamic_conv_projection_params(s)
        + s.indexer_layers * indexer_params(s) + compressors
        + (h if s.last_out_bias else 0) - chosen_heads,
        # (and each dense MLP's learned activation scalars, xIELU's: Apertus; RWKV's
        # receptance and token-shift mixes)
        mlp_dense=(blocks * (mlp_params(s, s.d_ffn) + s.ffn_kind.activation_params)
                   + calls * call_mlp if blocks else
                   sum(n * (mlp_params(s, width) + s.ffn_kind.activation_params
                            + (1 if s.mlp_scalar else 0))
                       for width, n, _ in s.mlp_kinds()))
        + s.mlp_layers * receptance_params(s),
        # (and each routed expert's own norm after it, where it has one: Ergo's)
        mlp_experts=s.moe_layers * s.experts * (routed_expert_params(s) + (
            s.norm.params_per_width * h if s.routed_expert_norms else 0)),
        mlp_shared=s.moe_layers * s.shared_experts * mlp_params(s, s.d_expert),
        router=router_params(s) + router_bias + attention_routers,
        norms=norms + norm + embedding_norm_params(s),
        mamba=s.mamba_layers * mamba_params(s),
        moe_latent=s.moe_layers * latent_projection_params(s),
        hyper_connections=hyper_connection_params(s),
        per_layer_table=s.per_layer_vocab * s.layers * s.per_layer_input,
        per_layer_inputs=per_layer_input_params(s),
        attention_residuals=attention_residual_params(s),
        alternating_updates=altup_params(s),
        laurel=s.layers * (2 * h * s.laurel_rank + norm) if s.laurel_rank else 0,
        attention_experts=attention_experts,
    )


def altup_params(s: TransformerShape) -> int:
    """AltUp's weights (Transformers' Gemma3nTextAltUp and Gemma3nTextModel; 0 without):
    the projections of the embedding into the other n - 1 streams and out of them (square
    matrices of the hidden width), and in each layer a router from the hidden width to a
    logit a stream with its norm, the prediction coefficients (n to n x n), the correction
    coefficients (n to n) and the corrected output's scale (a hidden-wide vector)."""
    n, h = s.altup_streams, s.hidden
    if not n:
        return 0
    layer = h * n + s.norm.params_per_width * h + n ** 3 + n * n + h
    return 2 * (n - 1) * h * h + s.layers * layer


def attention_residual_params(s: TransformerShape) -> int:
    """Block attention residuals' weights (Kimi K3's; Transformers-free, as TensorRT-LLM's
    modeling_kimi_linear.py and the HF reference build them): before each of a decoder
    layer's two blocks and after the last layer, a learned query (a one-output projection
    of the hidden width) and a norm over the hidden width; 0 without them."""
    if not s.attention_residual_block:
        return 0
    mixes = s.layers if s.is_hybrid else 2 * s.layers  # a hybrid's blocks, two a layer
    if s.lean_attention_residuals:
        # Inkling 2's: no norm weights, no query before the first layer's attention (a
        # window layer: its reader refuses a full first layer), one after the last layer,
        # and two more before each full layer's attention (its keys' and values' inputs)
        extra = 2 * s.full_layers if s.split_attention_inputs else 0
        return (mixes + extra) * s.hidden
    return (mixes + 1) * (1 + s.norm.params_per_width) * s.hidden


def loop_message_params(s: TransformerShape) -> int:
    """The looped layers' message weights (``loop_gate_rank``: Inkling 2 Mini's, as
    Transformers 5.25's Inkling2LoopMessageGate and Inkling2LoopMessageAttentionResidual
    build them): in each looped layer four gates, each a projection of 2 x hidden to the
    rank and two of the rank to hidden, no biases, their norms weightless; and four learned
    queries of the hidden width a looped layer for the messages; 0 without."""
    r = s.loop_gate_rank
    if not r:
        return 0
    return s.loop_layers * (4 * 4 * s.hidden * r + 4 * s.hidden)


def per_layer_input_params(s: TransformerShape) -> int:
    """Per-layer input embeddings' weights beside their table (Transformers' Gemma4TextModel
    and Gemma4TextDecoderLayer): the projection of the hidden state to every layer's input
    and its norm, then in each layer a gate to the input's width, a projection back and a
    norm over the hidden width; 0 without them."""
    d, h = s.per_layer_input, s.hidden
    if not d:
        return 0
    norm = s.norm.params_per_width
    return h * s.layers * d + norm * d + s.layers * (2 * h * d + norm * h)
