"""FLOPs per token of a transformer, in the conventions published MFU figures use.

Matrix multiplies cost 2 FLOP per multiply-accumulate. The attention core (QK^T and AV)
costs 4 x seq x heads x head_dim per layer per token when counted in full, as Megatron-LM
(Narayanan et al. 2021, eq. 3) and PaLM (Chowdhery et al. 2022, appendix B) count it;
``causal=True`` halves it, as FlashAttention's causal kernels actually compute. Sliding-window
layers (Mistral 7B v0.1, GPT-OSS) see at most the window: min(seq, window) positions per
query counted in full, the causal mean otherwise.
DeepSeek Sparse Attention (DeepSeek-V3.2) counts each query's attention over at most its
``index_topk`` chosen positions (as a window of that size would), plus its indexer's scores
over every earlier position (2 x index heads x index head dim a key: QK^T only), and the
indexer's projections with the attention's.
DeepSeek-V4's compressed attention counts each query's keys as its kernels attend to them:
the window's (at most ``window`` earlier positions) plus, in a compressed layer of ratio r,
one entry per r earlier positions (at most ``index_topk`` of them in CSA layers), at 2 x
head_dim FLOPs a key and head for the scores and as much for the values (keys and values
are one vector); the CSA layers' indexer scores every earlier entry (2 x index heads x index
head dim a key), and the compressors' and indexers' projections count with the attention's.
Its hyper-connections' mixing projections count 2 FLOP a weight (``ForwardFlops.mixing``).
Training is forward + backward = 3 x forward; recomputation adds forward work on top
(hardware FLOPs, HFU), never model FLOPs (MFU).

A hybrid model's Mamba-2 blocks count as Megatron-LM counts them (``hybrid_flops`` in
megatron/training/training.py @001b00c2): the input and output projections at 2 FLOP per
weight, and the selective scan at 7 x inner width x state per token; the convolution, the
gated norm and the per-head scalars count nothing, as norms count nothing elsewhere.
Megatron takes the inner width as twice the hidden size (Mamba's default expansion); this
counts the model's own, heads x head_dim: the same for Nemotron-H 8B (8,192 over a 4,096
hidden), but 4,096 where Megatron counts 5,376 for Nemotron 3 Nano (2,688 hidden).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gpuarch.workloads.params import (
    ALTUP_PROJECTION,
    LOOP_GATE_DOWN,
    LOOP_GATE_UP,
    attention_params,
    attention_sink_params,
    count_params,
    dynamic_conv_projection_params,
    gemmless_attention_params,
    hyper_connection_mix_weights,
    indexer_params,
    latent_projection_params,
    mlp_params,
    routed_expert_params,
    router_params,
    shared_block_call_params,
)
from gpuarch.workloads.shape import TransformerShape

__all__ = [
    "ForwardFlops",
    "attention_core_dims",
    "attention_expert_gemms",
    "attention_projections",
    "compressed_keys",
    "conv_tap_gemms",
    "forward_flops_per_token",
    "loop_gate_gemms",
    "loop_message_flops_per_token",
    "mamba_forward_flops_per_token",
    "mlp_side_gemms",
    "per_layer_input_gemms",
    "router_gemms",
    "stream_flops_per_token",
    "stream_gemms",
    "training_flops_per_token",
]


@dataclass(frozen=True)
class ForwardFlops:
    """Forward FLOPs per token by component, at one sequence length."""

    attention_proj: float  # QKV and output projections, all layers
    attention_core: float  # QK^T and AV, all layers
    mlp: float  # dense MLPs plus the experts a token is routed to (and shared experts)
    router: float
    lm_head: float
    mamba: float = 0.0  # a hybrid model's Mamba-2 blocks: projections and scan
    # the residual streams' work beside the blocks: hyper-connections' mixing projections
    # (DeepSeek-V4's mHC), AltUp's and LAuReL's (Gemma 3n: ``stream_flops_per_token``)
    mixing: float = 0.0
    per_layer_inputs: float = 0.0  # per-layer input embeddings' projections (Gemma 4 PLE)

    @property
    def total(self) -> float:
        return (self.attention_proj + self.attention_core + self.mlp + self.router
                + self.lm_head + self.mamba + self.mixing + self.per_layer_inputs)


def _core_dims(s: TransformerShape) -> tuple[int, int]:
    if s.mla is not None:
        return (s.mla.qk_nope_head_dim + s.mla.qk_rope_head_dim, s.mla.v_head_dim)
    return (s.d_head, s.d_value)


def attention_core_dims(s: TransformerShape) -> tuple[int, int]:
    """(KV heads, head dim) the attention core runs with, for a roofline: multi-head latent
    attention decompresses its latent to full heads in training and prefill, and its query/key
    (192) and value (128) widths are averaged (the FLOPs are 2 x seq x heads x (qk + v)), as
    are grouped-query attention's where its values are narrower (MiMo-V2-Flash). A model
    whose full layers have heads of their own: its window layers' (``attention_kind``)."""
    qk, v = _core_dims(s)
    if s.mla is not None:
        return s.heads, (qk + v) // 2
    return s.n_kv_heads, (qk + v) // 2


def attention_projections(s: TransformerShape, tp: Any = 1) -> list[tuple[str, Any, Any]]:
    """The attention block's weight GEMMs per token as (name, N, K) on one of ``tp`` tensor-
    parallel GPUs (heads split; at least one KV head each; a window layer's where the full
    layers have heads of their own, ``attention_kind``); ``tp`` may be a NumPy array
    (the advisor's layouts), and then so are the widths. MLA: the low-rank down-projections
    of queries and keys/values are replicated, their up-projections split by heads.
    DeepSeek-V4's compressed attention: the query's down-projection and the one key-value
    head's replicated, the query's up-projection split by heads and the grouped output
    projection by groups (``o_group``: its groups on the GPU side by side, each from its
    heads to the output rank), then the output projection from them. A shared block's
    attention (Zamba's) reads ``attention_in`` wide, with Zamba2's query, key and value
    adapters before the output projection."""
    heads = s.heads // tp
    if s.compressed is not None:
        c = s.compressed
        groups = c.o_groups // tp
        return [("q_down", c.q_lora_rank, s.hidden), ("q_up", heads * s.d_head, c.q_lora_rank),
                ("kv_down", s.d_head, s.hidden),
                ("o_group", groups * c.o_lora_rank, s.heads * s.d_head // c.o_groups),
                ("attn_out", s.hidden, groups * c.o_lora_rank)]
    if s.mla is not None:
        m = s.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        out: list[tuple[str, int, int]] = []
        if m.q_gate:  # queries and the output's gate from the latent beside its norm
            out += [("q_down", m.q_lora_rank, s.hidden),
                    ("q_up", heads * (qk + m.v_head_dim), 2 * m.q_lora_rank)]
        elif m.q_lora_rank:
            out += [("q_down", m.q_lora_rank, s.hidden), ("q_up", heads * qk, m.q_lora_rank)]
        else:
            out.append(("q", heads * qk, s.hidden))
        gate = [("attn_gate", heads * m.v_head_dim, s.hidden)] if s.attention_gate else \
            [("attn_gate", heads, s.hidden)] if s.head_gate else []
        return [*out, ("kv_down", m.latent_width, s.hidden),
                ("kv_up", heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank),
                *gate, ("attn_out", s.hidden, heads * m.v_head_dim)]
    kv = s.kv_heads_per_gpu(tp)
    q = heads * (2 if s.attention_gate else 1)  # a gated attention's queries and gates
    # a gate a head (head_gate) read from the same input: counted with the QKV GEMM
    gates = heads if s.head_gate else 0
    # keys and values (keys alone where they are also the values; none where the layer
    # reads another's: reuses_kv)
    kv_out = 0 if s.reuses_kv else kv * s.kv_width
    # convolved queries and keys (ZAYA's): each head's output channels from its own channels
    # over qk_conv_grouped steps, as many multiply-adds as a GEMM of that depth (the
    # depthwise convolution before it, a few taps a channel, left out)
    conv = [("qk_conv", (heads + kv) * s.d_head, s.d_head * s.qk_conv_grouped)] \
        if s.qk_conv_depthwise else []
    # a shared block's query, key and value adapters (Zamba2's): down to the rank (split
    # by rank, as vLLM's Zamba2LoRA splits it and gathers the result) and up to the heads
    r = s.adapter_rank
    adapters = [("qkv_adapter_down", 3 * -(-r // tp), s.attention_in),
                ("qkv_adapter_up", 3 * heads * s.d_head, r)] if s.adapter_attention else []
    # a dynamic mask's logits from every KV head's values (Doge's dt_proj: small, priced
    # whole on every GPU, as it reads all the heads')
    mask = [("dt_proj", s.n_kv_heads, s.n_kv_heads * s.d_head)] if s.dynamic_mask else []
    # Inkling's relative position bias: its projection to relative_bias numbers a query
    # head rides in the fused projection (SGLang's qkvr), as does Inkling 2's sink logit a
    # head
    rel = heads * (s.relative_bias + (1 if s.sink_projection else 0))
    return [("qkv", q * s.d_head + gates + kv_out + rel, s.attention_in), *conv, *adapters,
            *mask,
            ("attn_out", s.hidden, heads * s.d_value)]


def conv_tap_gemms(s: TransformerShape, window: int, tp: Any = 1
                   ) -> list[tuple[str, Any, Any]]:
    """A full layer's projections of its key and value inputs to its convolutions' taps
    (``dynamic_kv_convs``: Inkling 2's) as (name, N, K) on one of ``tp`` tensor-parallel
    GPUs (its share of the KV heads, at least one); none in a window layer (``window``) or
    without them."""
    if window or not s.dynamic_kv_convs:
        return []
    full = s.attention_kind(0)
    return [("conv_taps", 2 * full.kv_heads_per_gpu(tp) * s.short_conv_taps, s.hidden)]


def loop_gate_gemms(s: TransformerShape) -> list[tuple[str, int, int]]:
    """A looped layer's message-gate GEMMs per token in a pass after the first
    (``loop_gate_rank``: Inkling 2 Mini's), as (name, N, K), whole on every tensor-parallel
    GPU: for each of the query's, key's, value's and MLP's gates the projection of the two
    normed inputs (2 x hidden) to the rank, and the rank's back to the forget and the
    message gates (2 x hidden); none without message gates."""
    r, h = s.loop_gate_rank, s.hidden
    if not r:
        return []
    return [(LOOP_GATE_DOWN, r, 2 * h)] * 4 + [(LOOP_GATE_UP, 2 * h, r)] * 4


def loop_message_flops_per_token(s: TransformerShape) -> float:
    """Forward FLOPs per token of the looped layers' messages, all runs after the first
    (``loop_gate_rank``; 0 without): each run's gate GEMMs (``loop_gate_gemms``) and its
    messages' attention, four learned queries over the last pass's states
    (``loop_message_sources``), scores and weighted sum."""
    gates = sum(n * k for _, n, k in loop_gate_gemms(s))
    if not gates:
        return 0.0
    attention = 2 * 4 * s.loop_message_sources * s.hidden
    return 2.0 * s.loop_repeats * (gates + attention)


def attention_expert_gemms(s: TransformerShape, tp: Any = 1) -> list[tuple[str, Any, Any]]:
    """A mixture of attention heads' GEMMs (``attention_experts``: JetMoE's) as (name, N, K)
    on one of ``tp`` tensor-parallel GPUs: the keys' and values' projection (one for all
    experts, its heads split), the router (whole on every GPU, named "router" as the expert
    layers' are), and one expert's query and output projections (its ``kv_heads`` heads
    split), which run for the tokens routed to it; none without attention experts. A
    token's share of them is ``attention_projections``' dense equivalent."""
    if not s.attention_experts:
        return []
    heads = s.n_kv_heads // tp * s.d_head
    return [("kv", s.kv_heads_per_gpu(tp) * s.kv_width, s.hidden),
            ("router", s.attention_experts, s.hidden),
            ("attn_expert_q", heads, s.hidden), ("attn_expert_out", s.hidden, heads)]


def mlp_side_gemms(s: TransformerShape, tp: Any = 1) -> list[tuple[str, Any, Any]]:
    """The GEMMs per token an MLP block runs beside its own two or three, as (name, N, K) on
    one of ``tp`` tensor-parallel GPUs: a shared transformer block's (``shared_blocks``:
    Zamba's) gate/up projection's adapter (the hidden width to ``adapter_rank``, split by
    rank, then to the gate and up widths, split as they are) and the call's output
    projection (hidden x hidden, whole on every GPU: vLLM's ReplicatedLinear); RWKV's
    receptance (``receptance_mlp``: hidden x hidden, split by its outputs); none
    otherwise."""
    if not (s.shared_blocks or s.receptance_mlp):
        return []
    r, h = s.adapter_rank, s.hidden
    if s.receptance_mlp:  # RWKV's receptance, split by its outputs as the MLP's are
        return [("receptance", h // tp, h)]
    up = 2 * s.d_ffn if s.ffn_kind.gated else s.d_ffn
    adapter = [("mlp_adapter_down", -(-r // tp), h), ("mlp_adapter_up", up // tp, r)] \
        if r else []
    return [*adapter, ("block_out", h, h)]


def router_gemms(s: TransformerShape) -> list[tuple[str, int, int]]:
    """An expert layer's router GEMMs per token as (name, N, K), all named "router" (they
    run where the router does): one from the hidden state to the choices, or ZAYA's MLP
    router's four (``router_hidden``)."""
    r = s.router_hidden
    if not r:
        return [("router", s.router_width, s.hidden)]
    return [("router", r, s.hidden), ("router", r, r), ("router", r, r),
            ("router", s.router_width, r)]


def per_layer_input_gemms(s: TransformerShape) -> list[tuple[str, int, int]]:
    """A layer's per-layer input GEMMs per token as (name, N, K), whole on every tensor-
    parallel GPU (Gemma 4's PLE, ``per_layer_input`` d): the layer's share of the projection
    of the hidden state to every layer's input and its gate (d each, from the hidden
    state), and the projection back to the hidden width; none without them."""
    d = s.per_layer_input
    if not d:
        return []
    return [("ple_in", 2 * d, s.hidden), ("ple_out", s.hidden, d)]


def _window_keys(seq_len: float, window: int, causal: bool) -> float:
    """Mean positions a query of a sliding-window layer sees: the whole window (capped by
    the sequence) when counted in full; with causal masking the early queries see fewer,
    w - w^2 / (2 seq) on average once the sequence exceeds the window (seq / 2 before)."""
    if not causal:
        return float(min(seq_len, window))
    if seq_len <= window:
        return seq_len / 2
    return window - window * window / (2 * seq_len)


def _chunk_keys(seq_len: int, chunk: int, causal: bool) -> float:
    """Mean positions a query of a chunked-attention layer sees (Llama 4's
    attention_chunk_size): its own chunk's, all of them when counted in full, with causal
    masking half of each whole chunk's and of the last part's."""
    whole, rest = divmod(seq_len, chunk)
    span = (whole * chunk * chunk + rest * rest) / seq_len
    return span / 2 if causal else span


def compressed_keys(seq_len: int, ratio: int, topk: int, causal: bool) -> float:
    """Mean compressed entries a query of a DeepSeek-V4 layer of ``ratio`` attends to (or
    its indexer scores, ``topk`` 0): one per ``ratio`` earlier positions, at most ``topk``;
    all of the sequence's when counted in full, the causal mean otherwise."""
    if not ratio:
        return 0.0
    if topk:
        return _window_keys(seq_len, topk * ratio, causal) / ratio
    return (seq_len / 2 if causal else seq_len) / ratio


def _compressed_core(s: TransformerShape, seq_len: int, causal: bool) -> float:
    """A DeepSeek-V4 model's attention-core FLOPs per token, all layers: the window's keys
    and each layer's compressed ones, and the CSA layers' indexer scores."""
    c = s.compressed
    assert c is not None
    window = _window_keys(seq_len, c.window, causal)
    core = 0.0
    for ratio in c.ratios:
        topk = c.index_topk if c.overlaps(ratio) else 0
        core += 4.0 * s.heads * s.d_head * (window + compressed_keys(seq_len, ratio, topk,
                                                                     causal))
        if topk:
            core += 2.0 * c.index_heads * c.index_head_dim * compressed_keys(
                seq_len, ratio, 0, causal)
    return core


@lru_cache(maxsize=256)
def forward_flops_per_token(s: TransformerShape, seq_len: int, *, causal: bool = False
                            ) -> ForwardFlops:
    """Forward FLOPs per token for sequences of ``seq_len`` tokens (cached: a training
    estimate asks for the same shape and length several times). Looped layers
    (``loop_layers``): every run of a layer, and the messages' work with the streams'
    (``mixing``)."""
    if s.loop_layers:
        runs = forward_flops_per_token(s.unrolled_view(), seq_len, causal=causal)
        return dataclasses.replace(runs, mixing=runs.mixing + loop_message_flops_per_token(s))
    pc = count_params(s)
    per_token_mlp = sum(n * mlp_params(s, width) for width, n, _ in s.mlp_kinds()) \
        + s.moe_layers * (
        s.experts_per_token * routed_expert_params(s)
        + s.shared_experts * mlp_params(s, s.d_expert) + latent_projection_params(s))
    if s.compressed is not None:
        return ForwardFlops(
            attention_proj=2.0 * (pc.attention
                                  - s.attention_layers * attention_sink_params(s)),
            attention_core=_compressed_core(s, seq_len, causal),
            mlp=2.0 * per_token_mlp,
            router=2.0 * router_params(s),  # the router bias apart
            lm_head=2.0 * s.head_rows * s.hidden,
            mixing=2.0 * hyper_connection_mix_weights(s),
        )
    # the query-key and value widths of the window layers and of the full ones
    window_dims = sum(_core_dims(s))
    full_dims = sum(_core_dims(s.attention_kind(0)))
    windowed = s.windowed_layers
    full_keys = seq_len / 2 if causal else seq_len
    if s.attention_chunked:
        window_keys = _chunk_keys(seq_len, s.sliding_window, causal)
    else:
        window_keys = _window_keys(seq_len, s.sliding_window, causal) if windowed else 0.0
    b = s.block_sparse
    if b is not None:
        # block-sparse attention (MiniMax-M3): its sparse layers attend to at most their
        # blocks' positions (as a window of that many), and their indexer scores every
        # earlier position with its heads (QK^T only)
        windowed, window_keys = s.indexer_layers, _window_keys(seq_len, b.positions, causal)
        indexer_core = 2.0 * b.index_heads * b.index_head_dim * full_keys * s.indexer_layers
    elif s.mla is not None and s.mla.sparse:
        # DeepSeek Sparse Attention: every query attends to at most index_topk positions
        # (the keys a window of that size would give), and the indexer scores every earlier
        # position with its heads (QK^T only: no values)
        m = s.mla
        windowed, window_keys = s.attention_layers, _window_keys(seq_len, m.index_topk,
                                                                 causal)
        indexer_core = 2.0 * m.index_heads * m.index_head_dim * full_keys * s.indexer_layers
    elif s.indexer_mla is not None and s.indexer_mla.sparse:
        # the full layers' own sparse latent attention (dots3-note): their queries attend to
        # at most index_topk positions, which their indexer picks from every earlier one;
        # the window layers to their window
        m = s.indexer_mla
        indexer_core = 2.0 * m.index_heads * m.index_head_dim * full_keys * s.indexer_layers
        full_keys = _window_keys(seq_len, m.index_topk, causal)
    else:
        indexer_core = 0.0
    # (differential attention runs each layer's softmax attention twice)
    core = 2.0 * s.attention_calls * (
        (s.attention_layers - windowed) * s.full_heads * full_keys * full_dims
        + windowed * s.heads * window_keys * window_dims) + indexer_core
    if s.relative_bias:
        # Inkling's relative-bias table: a logit a head and distance, each a product of
        # relative_bias numbers with the bank's column (the window layers' extent their
        # window)
        core += 2.0 * s.relative_bias * (
            (s.attention_layers - windowed) * s.full_heads * s.relative_extent
            + windowed * s.heads * s.sliding_window)
    call_attention, call_mlp = shared_block_call_params(s)
    calls = s.shared_block_calls
    # (and the full layers' projections to their convolutions' taps, Inkling 2's)
    projections = sum(n * (attention_params(v) - gemmless_attention_params(v))
                      for _, n, v in s.attention_kinds()) + calls * call_attention \
        + dynamic_conv_projection_params(s)
    return ForwardFlops(
        attention_proj=2.0 * (projections + s.indexer_layers * indexer_params(s)),
        attention_core=float(core),
        mlp=2.0 * (per_token_mlp + calls * call_mlp
                   + (s.mlp_layers * s.hidden * s.hidden if s.receptance_mlp else 0)),
        router=2.0 * pc.router,
        lm_head=2.0 * s.head_rows * s.hidden,
        mamba=s.mamba_layers * mamba_forward_flops_per_token(s),
        # the projection to every layer's input, each layer's gate and projection back
        per_layer_inputs=2.0 * 3 * s.layers * s.hidden * s.per_layer_input,
        mixing=stream_flops_per_token(s),
    )


def stream_flops_per_token(s: TransformerShape) -> float:
    """Forward FLOPs per token of AltUp and LAuReL (Gemma 3n; 0 without): the 2 (n - 1)
    square projections into and out of the other streams; in each layer the two routings
    (the hidden width to a logit a stream), the coefficients they make (n to n x n and n to
    n), the prediction (each stream a mix of all n) and the correction (each stream its
    coefficient times the layer's change), as Transformers' Gemma3nTextAltUp computes them;
    and LAuReL's projection to its rank and back."""
    n, h, r = s.altup_streams, s.hidden, s.laurel_rank
    altup = 0.0
    if n:
        layer = 2 * h * n + n ** 3 + n * n + n * n * h + n * h
        altup = 2.0 * (2 * (n - 1) * h * h + s.layers * layer)
    return altup + 2.0 * s.layers * 2 * h * r


def stream_gemms(s: TransformerShape) -> list[tuple[str, int, int]]:
    """A layer's AltUp and LAuReL GEMMs per token as (name, N, K), whole on every
    tensor-parallel GPU (none without): AltUp's stream projection (its share of a layer,
    ``workloads.params.layer_op_shares``), its two routers (predict and correct), and
    LAuReL's projection to its rank and back. The coefficients' tiny GEMMs and the streams'
    mixing are memory traffic (``perf.roofline.stream_ops``)."""
    n, h, r = s.altup_streams, s.hidden, s.laurel_rank
    out: list[tuple[str, int, int]] = []
    if n:
        out += [(ALTUP_PROJECTION, h, h), ("altup_router", n, h), ("altup_router", n, h)]
    if r:
        out += [("laurel_in", r, h), ("laurel_out", h, r)]
    return out


MAMBA_SCAN_FLOPS_PER_STATE = 7.0
"""Forward FLOPs of the selective scan per token, inner channel and state element, as
Megatron-LM's ``hybrid_flops`` counts them (megatron/training/training.py @001b00c2; its
comment says the count predates the SSD kernels of Mamba-2)."""


def mamba_forward_flops_per_token(s: TransformerShape) -> float:
    """One recurrent block's forward FLOPs per token, as Megatron-LM counts them
    (megatron/training/training.py @001b00c2). Mamba-2 (``mamba_layer_flops``): the input
    projection (to z, x, B, C and dt) and the output projection at 2 FLOP per weight, and
    the scan (``MAMBA_SCAN_FLOPS_PER_STATE``). Gated DeltaNet (``gdn_layer_flops``): the
    input projection (q, k, v, z, beta, a), the convolution's taps over q, k and v, four
    products of each value head's state (K K^T, V K^T, the state's update and S Q; Megatron
    writes the state as v_head_dim^2, here key width x value width, equal in every released
    model) and the output projection, all at 2 FLOP a multiply-add. Kimi Delta Attention
    (which Megatron-LM does not count) as a Gated DeltaNet of its sizes, its input
    projection its own (q, k, v, beta and the gates' low-rank halves) and its gates'
    up-projections beside. Mamba-1 (the selective scan Megatron-LM's count was written
    for): its input, x_proj, dt_proj and output projections at 2 FLOP per weight, and the
    scan. Lightning attention (which Megatron-LM does not count) as linear attention: its
    projections and two products of each head's state a token. A short convolution: its
    projections and the convolution's taps. 0 without such blocks."""
    m = s.mamba
    if m is None:
        return 0.0
    if m.rwkv:  # its projections (the recurrence a channel is elementwise: not counted)
        return 2.0 * s.hidden * (m.in_proj_width + m.inner)
    if m.short_conv:  # its projections and the convolution's taps
        return 2.0 * (s.hidden * (m.in_proj_width + m.inner) + m.conv_kernel * m.inner)
    if m.selective:
        return 2.0 * (s.hidden * (m.in_proj_width + m.inner)
                      + m.inner * (m.x_proj_width + m.dt_rank)) \
            + MAMBA_SCAN_FLOPS_PER_STATE * m.inner * m.state
    projections = 2.0 * (s.hidden * (m.in_proj_width + m.inner)
                         + m.low_rank_width * m.gate_up_width)
    if m.gated_delta:
        return projections + 2.0 * (m.conv_kernel * m.conv_width
                                    + 4 * m.heads * m.head_dim * m.state)
    if m.lightning or m.mlstm:  # the state's update (K^T V) and the output (Q S), a head
        return projections + 2.0 * 2 * m.heads * m.head_dim * m.state
    return projections + MAMBA_SCAN_FLOPS_PER_STATE * m.inner * m.state


def training_flops_per_token(s: TransformerShape, seq_len: int, *, causal: bool = False
                             ) -> float:
    """Model FLOPs per trained token: forward + backward, no recomputation."""
    return 3.0 * forward_flops_per_token(s, seq_len, causal=causal).total
