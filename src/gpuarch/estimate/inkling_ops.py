"""What Inkling's attention adds to a layer's work (``TransformerShape.relative_bias`` and
``short_conv_taps``), for serving and training alike.

The relative position bias is computed as SGLang's Inkling attention computes it
(python/sglang/srt/models/inkling_common/attn.py, ``RelLogitsProj``, read at
sgl-project/sglang@099e2f31): the projection of the hidden state to ``relative_bias``
numbers a query head rides in the fused query/key/value projection (``qkvr``); an einsum of
them with the layer's bank makes a table of one 16-bit logit a token, head and distance
(``extent`` of them: the window in a window layer), written to memory; the attention
kernel's score modifier (FlashAttention 4's ``score_mod``) then reads one entry of it for
each score within the extent. So the table is priced as a GEMM of depth ``relative_bias``
(M = tokens x heads, N = extent) and one 16-bit read an entry the queries reach.

The short convolutions (``sconv``: depthwise, causal, a few taps, no bias, added to their
input) run as memory-bound kernels: each reads its input and writes its output once (the
keys' and values' on the GPU's share of the KV heads, the attention's and MLP's outputs
hidden-wide on every GPU, after the reduction, as SGLang runs them without its
``--enable-scattered-sconv``); a decode step also reads and writes each sequence's last
taps - 1 inputs, the state it keeps (16-bit, in the engine's Mamba pool).

Inkling 2 Mini's looped layers (``TransformerShape.loop_gate_rank``) are priced as
Transformers 5.25 runs their messages (modeling_inkling2_loop.py; no serving engine's
implementation was at hand): in each run after the first, the messages' attention over the
last pass's states and four gates, each a GEMM to the rank (in the run's format) and one
back to a forget and a message gate (FP32 weights and outputs, priced at the run's rate),
their norms, tanh and mix in FP32 memory traffic."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuarch.perf.num import Num, minimum
from gpuarch.perf.roofline import Elementwise, Gemm, Op
from gpuarch.workloads.flops import loop_gate_gemms
from gpuarch.workloads.params import LOOP_GATE_UP, LOOP_MESSAGES
from gpuarch.workloads.shape import TransformerShape

__all__ = [
    "LOOP_MESSAGE_ELEMENT",
    "RELATIVE_BIAS_ELEMENT",
    "SHORT_CONV_STATE_ELEMENT",
    "loop_message_activation_bytes",
    "loop_message_ops",
    "relative_bias_activation_elements",
    "relative_bias_ops",
    "short_conv_channels",
    "short_conv_ops",
    "short_conv_state_bytes",
]

RELATIVE_BIAS_ELEMENT = 2.0
"""Bytes an entry of the relative-bias table: BF16, the einsum's output in SGLang."""

SHORT_CONV_STATE_ELEMENT = 2.0
"""Bytes a short convolution's kept input takes between serving steps: 16-bit, as the
engines keep a convolution's inputs in their Mamba state pools."""


def relative_bias_ops(s: TransformerShape, tokens: Num, heads: Num, window: int,
                      keys: Num) -> list[Op]:
    """The relative position bias's work in one attention layer of ``window`` (0: a full
    layer) on a GPU holding ``heads`` query heads, for ``tokens`` queries that each see
    ``keys`` positions: the table's GEMM (written) and the score modifier's reads of it;
    none without the bias."""
    extent = s.relative_extent_of(window)
    if not extent:
        return []
    rows = tokens * heads
    return [Gemm(rows, extent, s.relative_bias, name="relative_bias_table",
                 element=RELATIVE_BIAS_ELEMENT, weight_element=RELATIVE_BIAS_ELEMENT),
            Elementwise(rows * minimum(keys, extent) * RELATIVE_BIAS_ELEMENT,
                        name="relative_bias")]


def relative_bias_table_bytes(s: TransformerShape, tp: Any) -> Any:
    """Bytes a token's rows of the relative-bias table take on one of ``tp`` GPUs in the
    layer kind whose table is widest (its heads on the GPU x its extent, 16-bit): what a
    serving pass holds at once beside its other activations, one layer's table at a time;
    0 without the bias."""
    if not s.relative_bias:
        return 0.0
    return max(view.heads // tp * s.relative_extent_of(window)
               for window, _, view in s.attention_kinds()) * RELATIVE_BIAS_ELEMENT


def relative_bias_activation_elements(s: TransformerShape, heads: Num) -> float:
    """Elements a token keeps for the backward pass of one layer's relative position bias
    on a GPU of ``heads`` query heads: its projection (``relative_bias`` a head, the
    table GEMM's input) and its row of the table (the layers' mean extent, the score
    modifier's input); 0 without the bias."""
    if not s.relative_bias:
        return 0.0
    mean_extent = s.relative_bias_params / s.relative_bias / s.attention_layers
    return float(heads * (s.relative_bias + mean_extent))


def short_conv_channels(s: TransformerShape, tp: Any) -> tuple[Any, int]:
    """The channels one of ``tp`` tensor-parallel GPUs convolves in a layer: (its share of
    the keys' and values', the two block outputs' 2 x hidden); (0, 0) without short
    convolutions."""
    if not s.short_conv_taps:
        return 0, 0
    return s.kv_heads_per_gpu(tp) * (s.d_head + s.d_value), 2 * s.hidden


def short_conv_ops(s: TransformerShape, tp: Any, tokens: Num, seqs: Num, element: float,
                   decode: bool) -> list[Op]:
    """One layer's short convolutions on one of ``tp`` tensor-parallel GPUs for ``tokens``
    tokens of ``seqs`` sequences: each reads its input and writes its output (``element``
    bytes each); a serving step (``decode``, or a prefill that starts from a kept state:
    both keep it) reads and writes every sequence's kept inputs too. None without them."""
    kv, out = short_conv_channels(s, tp)
    if not s.short_conv_taps:
        return []
    channels = kv + out
    io = 2.0 * tokens * channels * element
    state = 2.0 * seqs * channels * (s.short_conv_taps - 1) * SHORT_CONV_STATE_ELEMENT \
        if decode else 0.0
    return [Elementwise(io + state, name="short_conv")]


def short_conv_state_bytes(s: TransformerShape, tp: Any) -> Any:
    """Bytes one sequence keeps a layer on one of ``tp`` GPUs between serving steps for its
    short convolutions: the last taps - 1 inputs of each channel; 0 without them."""
    if not s.short_conv_taps:
        return 0.0
    kv, out = short_conv_channels(s, tp)
    return (kv + out) * (s.short_conv_taps - 1) * SHORT_CONV_STATE_ELEMENT


LOOP_MESSAGE_ELEMENT = 4.0
"""Bytes an element of a looped layer's messages and gates take: FP32, as Transformers 5.25's
Inkling2LoopMessageGate and Inkling2LoopMessageAttentionResidual compute them."""


def _loop_gate_bytes(s: TransformerShape) -> float:
    """Bytes a token's four message gates move beside their GEMMs in a run: each gate's norm
    reads its two inputs and writes their concatenation (16-bit, the GEMM's input); its mix
    reads the forget and message gates' pre-activations and the two inputs again and writes
    its output (FP32). The window layers' two more input norms (their query, key and value
    inputs each normed apart once gated) are counted by their share of the looped layers."""
    h, e = s.hidden, LOOP_MESSAGE_ELEMENT
    gate = 2 * h * e + 2 * h * 2.0 + 2 * h * e + 2 * h * e + h * e
    window = s.loop_window_layers / s.loop_layers if s.loop_layers else 0.0
    return 4 * gate + window * 2 * h * (e + 2.0)


def loop_message_ops(s: TransformerShape, tokens: Num,
                     gemm: Callable[[Num, int, int, str], Gemm]) -> list[Op]:
    """A looped layer's message work for ``tokens`` tokens in a run after the first
    (``loop_gate_rank``; none without), whole on every tensor-parallel GPU: the gates'
    GEMMs (``workloads.flops.loop_gate_gemms``; ``gemm(m, n, k, name)`` makes one in the
    caller's formats, the projections back to the hidden width then given FP32 weights and
    outputs), the messages' attention residual (read the last pass's states, norm them and
    read them again, write four messages) and the gates' elementwise work
    (``_loop_gate_bytes``). The caller weights them by the runs' share
    (``workloads.params.layer_op_shares``)."""
    if not s.loop_gate_rank:
        return []
    ops: list[Op] = [
        Gemm(tokens, n, k, name=name, weight_element=LOOP_MESSAGE_ELEMENT,
             element=LOOP_MESSAGE_ELEMENT) if name == LOOP_GATE_UP
        else gemm(tokens, n, k, name) for name, n, k in loop_gate_gemms(s)]
    messages = (3 * s.loop_message_sources + 4) * s.hidden * LOOP_MESSAGE_ELEMENT
    ops.append(Elementwise(tokens * (messages + _loop_gate_bytes(s)), name=LOOP_MESSAGES))
    return ops


def loop_message_activation_bytes(s: TransformerShape) -> float:
    """Bytes a token keeps for the backward pass of one looped layer's messages in a run
    after the first (``loop_gate_rank``; 0 without): each gate's 16-bit concatenated input,
    its rank-wide FP32 projection and its two FP32 gates; the four messages and the normed
    states they were drawn from (FP32)."""
    if not s.loop_gate_rank:
        return 0.0
    h, e = s.hidden, LOOP_MESSAGE_ELEMENT
    gates = 4 * (2 * h * 2.0 + s.loop_gate_rank * e + 2 * h * e)
    return gates + (4 + s.loop_message_sources) * h * e
