"""Per-operator roofline: time = max(FLOPs / achievable compute, bytes / achievable bandwidth).

Operators are GEMMs (with size-dependent efficiency: wave quantisation and thin-dimension
penalty), fused attention (FlashAttention-style: no score matrix in memory) and memory-bound
elementwise work. Costs are for one GPU.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from gpuarch.catalog.model import Product
from gpuarch.catalog.peaks import PeakKey
from gpuarch.errors import GpuarchError
from gpuarch.perf.efficiency import Efficiency
from gpuarch.perf.fp8_attention import (
    fp8_training_attention_speedup,
    has_fp8_attention_timings,
)
from gpuarch.perf.num import ceil, maximum, minimum, where
from gpuarch.perf.precision import MatmulPeak, Precision, matmul_peak
from gpuarch.perf.sibling import sibling_factor
from gpuarch.units import Unit, from_si
from gpuarch.workloads.flops import attention_projections
from gpuarch.workloads.params import INDEXER_SCORES, compressor_projection, indexer_projections
from gpuarch.workloads.shape import CSA_RATIO, TransformerShape

__all__ = [
    "ATTENTION_OPS",
    "CONTEXT_ATTENTION",
    "INDEXER",
    "LORA_OPS",
    "MLA_DECODE",
    "Attention",
    "Bound",
    "Device",
    "Elementwise",
    "Gemm",
    "Op",
    "OpCost",
    "attention_residual_op",
    "attention_span",
    "attention_span_share",
    "compressed_attention_ops",
    "hyper_connection_ops",
    "moe_permute",
    "op_cost",
    "op_kind",
    "op_time",
    "per_layer_input_op",
    "roofline_summary",
    "sub_norm_op",
    "transformer_ops",
]

Num = Any  # a float, or a NumPy array of floats








class Bound(Enum):
    """What limits an operator."""

    COMPUTE = "compute"
    MEMORY = "memory"


@dataclass  # built by the dozen per estimate: a frozen one costs 3x to build
class Gemm:
    """C[m, n] = A[m, k] @ B[k, n], ``batch`` times."""

    m: Num  # ints, or arrays of them (one GEMM per configuration the advisor evaluates)
    n: Num
    k: Num
    batch: Num = 1
    name: str = "gemm"
    weight_element: float | None = None  # bytes per element of B, if not the activations'
    # bytes per element of A and C, if not the device precision's (a 16-bit GEMM beside
    # FP8 ones: LoRA's adapters)
    element: float | None = None
    # a weight-only kernel that spreads a GEMM of fewer than SPREAD_ROWS rows over every SM
    # (a GEMV grid over N, or split-K), so no wave of output tiles runs part-empty
    spread: bool = False
    # bits per weight of B where the kernel converts it (a weight-only kernel's, or W4A8's
    # without mixed-input MMA), which bound how fast it dequantizes a few rows' weights
    # (mixed_input_floor); None for a GEMM that takes its weights as stored
    weight_bits: int | None = None

    @property
    def flops(self) -> Num:
        return 2.0 * self.m * self.n * self.k * self.batch

    def bytes(self, element: float) -> Num:
        element = self.element if self.element is not None else element
        weight = self.weight_element if self.weight_element is not None else element
        return 1.0 * (self.batch * (element * (self.m * self.k + self.m * self.n)
                                   + weight * self.k * self.n))


CONTEXT_ATTENTION = "context_attention"
"""Name of a serving engine's fused attention over a prompt (a prefill pass): priced at
``Efficiency.context_attention`` (``context_attention_fp8`` at the FP8 rate)."""

MLA_DECODE = "mla_decode"
"""Name of an absorbed multi-head latent attention core in decode (one latent KV "head"
shared by every query head): priced at ``Efficiency.mla_decode_attention``."""

INDEXER = INDEXER_SCORES
"""Name of a sparse-attention layer's indexer scores (DeepSeek Sparse Attention's lightning
indexer: QK^T of its heads against one shared FP8 key per position, no values; its
``Attention`` has ``values`` False): priced as the engine's fused prompt attention
(``Efficiency.context_attention``, at the FP8 rate where the GPU has one) over a prompt, and
by the bytes it streams in decode, as a decode attention is."""


@dataclass  # built by the dozen per estimate: a frozen one costs 3x to build
class Attention:
    """Fused attention core (QK^T, softmax, AV) for ``batch`` sequences."""

    batch: Num
    seq_q: Num
    seq_kv: Num
    heads: Num
    kv_heads: Num
    head_dim: Num
    causal: bool = True
    backward: bool = False
    name: str = "attention"
    kv_element: float | None = None  # bytes per KV-cache element, if not the activations'
    share: Num = 1.0  # fraction of the work on this GPU (context parallelism splits it)
    window: Num = 0  # sliding window: each query sees at most this many positions; 0 = all
    # the window (> 0) is a chunk (Llama 4's attention_chunk_size): each query sees the
    # positions of its own ``window``-position chunk up to itself, not the last ``window``
    chunked: bool = False
    kv_head_reads: Num = 1
    """Times a decode kernel reads each KV head's cache in one step: 1 (a GQA-aware kernel
    reads it once for all its query heads), or the query heads per KV head (a multi-head
    kernel, one thread block per query head: the repeats are served from L2 at
    ``Efficiency.multihead_decode_read_bytes_s``)."""
    values: bool = True
    """False for a scoring kernel that computes QK^T and writes the scores (FP32, each
    written and read once by the top-k that follows) without a softmax-weighted sum of
    values: DeepSeek Sparse Attention's indexer (``INDEXER``); its cache holds keys only."""
    compressed: tuple[tuple[Num, int, int], ...] = ()
    """DeepSeek-V4's compressed keys, beside the window's (``window`` > 0; with compressed
    keys given, a window of 0 means none, not every position): for each kind of layer the
    op stands for, (share of those layers, ratio, top-k): each query also attends to one
    entry per ``ratio`` earlier positions, at most top-k of them (0: all). A CSA layer's
    indexer is an op with no window and one kind, (1, 4, 0): it scores every entry."""
    call_share: Num | None = None
    """The share of the sequence one kernel call spans where ``share`` splits the work:
    ``share`` itself (None) for a ring that runs one call per GPU's chunk; 1 where each GPU
    runs whole-sequence calls on its part (context parallelism by all-to-all, a head
    split, or by all-gather, each chunk's queries over every earlier key)."""

    @property
    def forward_flops(self) -> Num:
        """QK^T and AV. Causal: the queries are the last ``seq_q`` of ``seq_kv`` positions,
        each attending to the positions before it (half the square when they coincide), or
        to at most ``window`` of them (those of its own chunk if ``chunked``)."""
        return (4.0 if self.values else 2.0) * self.batch * self.heads * self.seq_q \
            * self._keys * self.head_dim * self.share

    @property
    def _keys(self) -> Num:
        """Mean keys a query attends to: ``mean_keys`` under a causal mask, else all; with
        ``compressed`` keys the window's (if any) and theirs."""
        if self.compressed:
            keys: Num = mean_keys(self.seq_q, self.seq_kv, self.window) if self.window \
                else 0.0
            for share, ratio, topk in self.compressed:
                keys = keys + share * mean_keys(self.seq_q, self.seq_kv, topk * ratio) / ratio
            return keys
        return mean_keys(self.seq_q, self.seq_kv, self.window, self.chunked) if self.causal \
            else self.seq_kv

    def bytes(self, element: float) -> Num:
        if self.values:
            q_and_o = element * 2 * self.batch * self.seq_q * self.heads * self.head_dim \
                * self.share
        else:
            # the queries in, and one FP32 score a key out, read back by the top-k
            rows = self.batch * self.seq_q * self.share
            q_and_o = element * rows * self.heads * self.head_dim + 2 * 4.0 * rows * self._keys
        traffic = q_and_o + self.kv_bytes(element)
        return 2 * traffic if self.backward else traffic

    def kv_bytes(self, element: float) -> Num:
        """The KV cache's bytes read once: every held position's keys and values (from the
        first query's chunk on if ``chunked``)."""
        kv_el = self.kv_element if self.kv_element is not None else element
        if self.compressed:
            held: Num = minimum(self.seq_kv, self.window) if self.window else 0.0
            for share, ratio, topk in self.compressed:
                entries = self.seq_kv / ratio
                held = held + share * (minimum(entries, topk) if topk else entries)
        elif self.chunked:
            held = chunk_span(self.seq_q, self.seq_kv, self.window)
        elif isinstance(self.window, np.ndarray) or isinstance(self.seq_kv, np.ndarray):
            held = np.where(np.asarray(self.window) > 0, np.minimum(self.seq_kv, self.window),
                            self.seq_kv)
        else:
            held = min(self.seq_kv, self.window) if self.window > 0 else self.seq_kv
        return kv_el * (2 if self.values else 1) * self.batch * held * self.kv_heads \
            * self.head_dim


def mean_keys(seq_q: Num, seq_kv: Num, window: Num = 0, chunked: bool = False) -> Num:
    """Mean positions a causal query attends to, for the last ``seq_q`` of ``seq_kv``
    positions (continuous approximation): the query at position p sees min(p, window) keys,
    so the mean is (F(seq_kv) - F(seq_kv - seq_q)) / seq_q with F the integral of
    min(x, window); without a window that is seq_kv - seq_q / 2. ``chunked``: the query
    sees p mod window keys (its own chunk's), whose integral is whole chunks' window^2 / 2
    each and the last part's (p mod window)^2 / 2."""
    if chunked:
        def chunk_integral(p: Num) -> Num:
            done = np.floor(np.asarray(p, dtype=float) / window) * window
            return done * window / 2 + (p - done) ** 2 / 2

        keys = (chunk_integral(seq_kv) - chunk_integral(np.asarray(seq_kv) - seq_q)) / seq_q
        return float(keys) if np.ndim(keys) == 0 else keys
    if not any(isinstance(x, np.ndarray) for x in (seq_q, seq_kv, window)):
        return _mean_keys_one(float(seq_q), float(seq_kv), float(window))
    w = np.asarray(window, dtype=float)
    start = np.asarray(seq_kv, dtype=float) - seq_q

    def integral(p: Num) -> Num:
        capped = np.where(w > 0, np.minimum(p, w), p)
        return np.where((w > 0) & (p > capped), capped**2 / 2 + (p - capped) * capped,
                        p**2 / 2)

    keys = (integral(np.asarray(seq_kv, dtype=float)) - integral(start)) / seq_q
    return float(keys) if np.ndim(keys) == 0 else keys


def chunk_span(seq_q: Num, seq_kv: Num, chunk: Num) -> Num:
    """Positions a pass of the last ``seq_q`` of ``seq_kv`` causal queries reads in a
    chunked-attention layer: from the start of the first query's chunk to the end."""
    first = np.floor((np.asarray(seq_kv, dtype=float) - seq_q) / chunk) * chunk
    held = seq_kv - first
    return float(held) if np.ndim(held) == 0 else held


def _mean_keys_one(seq_q: float, seq_kv: float, window: float) -> float:
    """``mean_keys`` for one query span, in plain floats (the same arithmetic)."""
    def integral(p: float) -> float:
        if window > 0:
            capped = min(p, window)
            if p > capped:
                return capped**2 / 2 + (p - capped) * capped
        return p**2 / 2

    return (integral(seq_kv) - integral(seq_kv - seq_q)) / seq_q


@dataclass  # built by the dozen per estimate: a frozen one costs 3x to build
class Elementwise:
    """Memory-bound work: ``bytes`` moved, ``flops`` done on the CUDA cores (norms,
    activations, optimizer). A fused kernel of small matrix products (Mamba-2's chunked
    scan) gives them as ``matmul_flops``, run on the 16-bit Tensor Cores at
    ``Efficiency.mamba_scan`` of their peak, and its backward kernels as ``backward`` where
    known (training takes twice the forward's time otherwise). ``mamba_kernel``: one of a
    Mamba-2 block's kernels of training and prefill, which reach ``Efficiency.mamba_blackwell``
    of the roofline's rate on Blackwell; ``mamba_backward``: one of its backward kernels,
    which reach ``Efficiency.mamba_backward_for`` its architecture of that rate.
    ``gated_delta``: the chunked scan of a Gated DeltaNet block, whose products run at
    ``Efficiency.gated_delta_scan`` of the peak and which reaches
    ``Efficiency.gated_delta_blackwell`` of the roofline's rate on Blackwell instead, and
    which takes at least ``chain_steps`` (its longest sequence's chunks, which the state
    pass walks one after another) x ``Efficiency.gated_delta_chunk_step_s``; with
    ``mamba_backward`` too, that scan's backward, at ``Efficiency.gated_delta_backward`` of
    the peak and ``gated_delta_backward_blackwell`` on Blackwell, not Mamba-2's backward
    rates."""

    bytes_moved: Num
    flops: Num = 0.0
    name: str = "elementwise"
    matmul_flops: Num | None = None
    backward: Elementwise | None = None
    mamba_kernel: bool = False
    mamba_backward: bool = False
    gated_delta: bool = False
    chain_steps: Num = 0.0


Op = Gemm | Attention | Elementwise


ATTENTION_OPS = ("scores", "context", "softmax")
"""Names of unfused attention's operators (score GEMM, softmax, context GEMM)."""

MAMBA_SCAN_OPS = ("mamba_conv", "mamba_scan")
"""Names of a Mamba-2 block's sequence-mixing operators (the depthwise convolution and the
chunked scan), which the breakdowns show apart as attention's are."""

LORA_OPS = ("lora_a", "lora_b", "lora_add")
"""Endings of a LoRA adapter's operators' names (its down and up GEMMs, the add of its
output to the frozen layer's), which follow the frozen GEMM's name and a dot (e.g.
``grouped_expert_up.lora_a``)."""


def op_kind(op: Op) -> str:
    """Which part of a layer's time an operator counts towards, as the training and serving
    breakdowns split it: "attention" (fused, or unfused attention's operators),
    "expert_gemms" (routed experts' GEMMs, whatever their prefix, and the router),
    "lora_adapters" (LoRA's adapter GEMMs and the add of their output, ``LORA_OPS``),
    "dense_gemms" (every other GEMM), "mamba_scan" (a Mamba-2 block's convolution and
    chunked scan, ``MAMBA_SCAN_OPS``) or "memory_bound"."""
    if isinstance(op, Attention) or op.name in ATTENTION_OPS:
        return "attention"
    if op.name in MAMBA_SCAN_OPS:
        return "mamba_scan"
    if op.name.endswith(LORA_OPS):
        return "lora_adapters"
    if isinstance(op, Gemm):
        expert = op.name == "router" or op.name.startswith(("expert_", "grouped_expert_"))
        return "expert_gemms" if expert else "dense_gemms"
    return "memory_bound"


def moe_permute(routed: Num, hidden: Num, element: float,
                out_element: float | None = None) -> Elementwise:
    """Token permutation into expert order and back for the ``routed`` copies a GPU's experts
    take: each copy of a token's hidden state is read and written on the way in (``element``
    bytes each, as the expert GEMMs take it) and on the way out (``out_element`` bytes, the
    expert output's format; default the same)."""
    out = element if out_element is None else out_element
    return Elementwise(2.0 * routed * hidden * (element + out), name="moe_permute")


def hyper_connection_ops(tokens: Num, shape: TransformerShape,
                         element: float = 2.0) -> list[Op]:
    """A layer's hyper-connections (DeepSeek-V4's mHC, Hy4's iHC; none without) beyond the
    residual adds a layer's norms-and-residuals pass counts: for each of its two blocks the
    projection of the streams to their mixing logits (a thin GEMM over streams x hidden), the
    mix of the streams into the block's input (read all, write one) and of its output back
    into them (read it and all, write all), in place of a residual add (read two, write
    one)."""
    n = shape.hyper_connections
    if not n:
        return []
    mix = Gemm(tokens, shape.hyper_connection_logits, n * shape.hidden, name="hc_mix")
    passes = 2 * ((n + 1) + (2 * n + 1) - 3)
    return [mix, mix, Elementwise(passes * tokens * shape.hidden * element,
                                  name="hyper_connections")]


def sub_norm_op(tokens: Num, shape: TransformerShape, tp: int, element: float = 2.0
                ) -> Elementwise:
    """A layer's norms inside attention and MLP (BitNet's ``sub_norms``): each reads and
    writes one GPU's share of ``tp`` of the attention's output (hidden wide) and of the
    MLP's gated product (its width)."""
    return Elementwise(2.0 * tokens * (shape.hidden + shape.d_ffn) / tp * element,
                       name="sub_norms")


def attention_residual_op(tokens: Num, shape: TransformerShape, element: float = 2.0,
                          block: bool = False) -> Elementwise:
    """A layer's block attention residuals (Kimi K3's; ``attention_residual_block``): each
    mix, one before each of a layer's two blocks (one a hybrid ``block``), reads the block
    summaries so far and the running sum (``TransformerShape.attention_residual_reads`` on
    average) and writes the block's input; its scores (a norm and a dot product a summary)
    are arithmetic this memory traffic hides."""
    mixes = 1 if block else 2
    return Elementwise(mixes * (shape.attention_residual_reads + 1) * tokens * shape.hidden
                       * element, name="attention_residuals")


def per_layer_input_op(tokens: Num, shape: TransformerShape, element: float = 2.0
                       ) -> Elementwise:
    """A layer's per-layer input work beside its GEMMs (Gemma 4's PLE;
    ``workloads.flops.per_layer_input_gemms``): the gate's activation and its product with
    the layer's input (reads two ``per_layer_input``-wide vectors, writes them twice), then
    the norm over the hidden width (read, write) and the residual add (read two, write
    one)."""
    return Elementwise(tokens * (4 * shape.per_layer_input + 5 * shape.hidden) * element,
                       name="ple_elementwise")


def stream_ops(tokens: Num, shape: TransformerShape, element: float = 2.0) -> list[Op]:
    """A layer's AltUp and LAuReL work beside their GEMMs (Gemma 3n;
    ``workloads.flops.stream_gemms``; none without), as memory traffic over the hidden
    width: AltUp's prediction (read the n streams, write n), its routers' norms (read the
    active stream twice), the correction (read n and the layer's output, write n), the
    corrected stream's scale (read, write) and the per-layer input's add into the other
    streams (read n - 1 and it, write n - 1): 6n + 4 vectors; LAuReL's norm (read, write)
    and its add beside the attention (read two, write one)."""
    n, h = shape.altup_streams, shape.hidden
    passes = (6 * n + 4 if n else 0) + (5 if shape.laurel_rank else 0)
    return [Elementwise(passes * tokens * h * element, name="streams")] if passes else []


def compressed_attention_ops(shape: TransformerShape, tp: int, tokens: Num,
                             gemm: Callable[..., Gemm], core: Attention, indexer: Attention
                             ) -> list[Op]:
    """A DeepSeek-V4 layer's attention on one of ``tp`` GPUs, the mean of its kinds of
    layer: the query's projections and the key-value head (``attention_projections``), the
    compressors and the CSA layers' indexer whole on every GPU (each needs every entry),
    the indexer's scores over the entries (``indexer``, a scoring core of its heads made by
    the caller), the core over the window and each kind's compressed entries (``core``,
    made by the caller with the window), and the grouped output projection, its groups side
    by side. ``gemm(m, n, k, name, batch=1)`` makes each GEMM in the caller's formats. The
    compressors' and indexer's operators count their layers' share, which the caller
    applies by name (``workloads.params.layer_op_shares``)."""
    c = shape.compressed
    assert c is not None
    projections = attention_projections(shape, tp)
    ops: list[Op] = [gemm(tokens, n, k, name) for name, n, k in projections[:3]]
    ops += [gemm(tokens, n, k, name) for name, n, k in
            (compressor_projection(shape, ratio) for ratio, _ in c.kinds() if ratio)]
    if c.csa_layers:
        ops += [gemm(tokens, n, k, name) for name, n, k in indexer_projections(shape)]
        ops.append(dataclasses.replace(indexer, values=False, name=INDEXER,
                                       compressed=((1.0, CSA_RATIO, 0),)))
    ops.append(dataclasses.replace(core, compressed=tuple(
        (share, ratio, c.index_topk if c.overlaps(ratio) else 0)
        for ratio, share in c.kinds() if ratio)))
    (name, n, k), out = projections[3], projections[4]
    groups = c.o_groups // tp
    return [*ops, gemm(tokens, n // groups, k, name, batch=groups),
            gemm(tokens, out[1], out[2], out[0])]


@dataclass(frozen=True)
class Device:
    """One GPU as the roofline sees it: compute peak for the chosen precision, bandwidth."""

    product: Product
    precision: Precision
    matmul: MatmulPeak
    vector_flops: float  # FP32 (or best CUDA-core) peak, for elementwise work
    bandwidth: float  # bytes/s, datasheet
    attention_flops: float  # fused attention runs in 16 bits even in FP8 training
    tensor_core_generation: int | None
    attention_key: PeakKey | None = None  # the peak attention_flops is
    math_over_16bit: float = 1.0
    """How many times the 16-bit matrix peak ``matmul`` is (FP8 2, NVFP4 4-6; at least 1).
    The reduction length at which GEMM efficiency halves scales with it: a tile's fixed
    cost (pipeline fill, epilogue) stays while its K loop runs that much faster."""
    fp8_attention_scaling: str = "tensor"
    """Training's FP8 fused attention kernel (``FP8_ATTENTION_SCALINGS``): "tensor", one
    scale per tensor (current or delayed scaling), or "mxfp8", a scale per 32-element block
    (an MXFP8 recipe's own attention)."""

    @classmethod
    def of(cls, product: Product, precision: Precision,
           tensor_core_generation: int | None = None) -> Device:
        peak = matmul_peak(product, precision)
        if peak is None:
            raise GpuarchError(
                f"--precision: {product.name} publishes no peak usable for "
                f"{precision.value} matrix math (the catalog leaves unpublished figures "
                "empty)")
        vector = product.peak(PeakKey.FP32) or product.peak(PeakKey.FP16) or peak.flops
        attention, attention_key = peak.flops, peak.key
        if precision.low_precision:
            sixteen = matmul_peak(product, Precision.BF16)
            if sixteen:
                attention, attention_key = sixteen.flops, sixteen.key
        return cls(product, precision, peak, vector, product.memory_bandwidth_bytes_s,
                   attention, tensor_core_generation, attention_key,
                   max(1.0, peak.flops / attention))


    def sixteen_bit(self) -> Device:
        """This GPU at its BF16 Tensor Core rate (itself where it runs BF16): what a
        low-precision run keeps in 16 bits runs on it (the LM head, the router's GEMM, the
        layers asked for in BF16)."""
        if self.precision is Precision.BF16:
            return self
        return Device.of(self.product, Precision.BF16, self.tensor_core_generation)

    def with_fp8_attention(self, scaling: str = "tensor") -> Device | None:
        """This device with fused attention at the FP8 Tensor Core rate (FP8 context FMHA,
        FP8 MLA kernels; in training the ``scaling`` kernel); None where the GPU has no FP8
        Tensor Cores."""
        fp8 = matmul_peak(self.product, Precision.FP8)
        if fp8 is None or fp8.fallback_reason:
            return None
        return dataclasses.replace(self, attention_flops=fp8.flops, attention_key=fp8.key,
                                   fp8_attention_scaling=scaling)

    def measured_fp8_attention_base(self) -> MatmulPeak | None:
        """The 16-bit peak this device's FP8 training attention is priced from, at the
        chip's measured FP8 speedup over the 16-bit kernel (perf/fp8_attention.py), where
        its attention runs in FP8 and that chip's timings are published; None otherwise."""
        if self.attention_key is not PeakKey.TENSOR_FP8 \
                or not has_fp8_attention_timings(self.product.key):
            return None
        return matmul_peak(self.product, Precision.BF16)


@dataclass(frozen=True)
class OpCost:
    """Cost of one operator on one GPU."""

    name: str
    flops: float
    bytes: float
    time_s: float
    bound: Bound
    efficiency: float  # achieved FLOP/s over the matmul peak (compute-bound ops)

    @property
    def achieved_flops(self) -> float:
        return self.flops / self.time_s if self.time_s > 0 else 0.0


SPREAD_ROWS = 16
"""Rows (tokens) below which a weight-only GEMM (16-bit activations, quantized weights) runs
spread over every SM rather than in waves of 128 x 128 output tiles (``Gemm.spread``):
TensorRT-LLM's weight-only plugins profile their CUDA-core batched GEMV for m < 16
(``weightOnlyGroupwiseQuantMatmulPlugin.cpp``, 'stop to profile Cuda kernel for m >= 16'),
a grid of m x N/8 blocks each looping over all of K (``weightOnlyBatchedGemv/kernel.h``);
LMDeploy's TurboMind W4A16 kernels choose a split of K (up to 8) to fill the SMs at small M
(``src/turbomind/kernels/gemm/gemm.cu``, ``EstimateSplits``)."""


def _gemm_efficiency(op: Gemm, device: Device, eff: Efficiency) -> Num:
    base = eff.gemm_for(device.tensor_core_generation)
    if op.name.startswith("expert_"):
        base *= eff.moe_gemm
    elif op.name.startswith("grouped_expert_"):
        base *= eff.moe_grouped_gemm
    if device.matmul.key is PeakKey.TENSOR_FP8:
        base *= eff.gemm_fp8  # FP8, or NVFP4 on a GPU without FP4 Tensor Cores
    elif device.matmul.key is PeakKey.TENSOR_FP4:
        base *= eff.gemm_fp4
    if eff.sibling_rates:
        base *= sibling_factor(device.product.key, "gemm", device.matmul.key)
    m, n, k, batch = op.m, op.n, op.k, op.batch
    half_k = eff.gemm_half_dim * device.math_over_16bit
    sms = device.product.sms
    if not isinstance(m, np.ndarray) and not isinstance(n, np.ndarray) \
            and not isinstance(k, np.ndarray) and not isinstance(batch, np.ndarray):
        # one GEMM: the arithmetic below in plain floats (NumPy's per-call cost is most of
        # an estimate's otherwise; tests/test_advisor.py holds the two paths together)
        min_tile, tile = eff.gemm_min_tile, eff.gemm_tile
        padded = m / (math.ceil(m / min_tile) * min_tile) \
            * n / (math.ceil(n / min_tile) * min_tile) \
            * min(1.0, k / (k + half_k) * (1 + half_k / 4096))
        if not sms:
            return base * padded
        if op.spread and m < SPREAD_ROWS:
            return base * padded
        count = math.ceil(m / tile) * math.ceil(n / tile) * batch
        return base * padded * (count / (math.ceil(count / sms) * sms))
    thin: Num = 1.0
    for d in (m, n):
        thin = thin * d / (ceil(d / eff.gemm_min_tile) * eff.gemm_min_tile)
    short_k = k / (k + half_k) * (1 + half_k / 4096)
    thin = thin * np.minimum(1.0, short_k)
    waves: Num = 1.0
    if sms:
        tiles = ceil(m / eff.gemm_tile) * ceil(n / eff.gemm_tile) * batch
        waves = tiles / (ceil(tiles / sms) * sms)
        if op.spread:
            waves = where(m < SPREAD_ROWS, 1.0, waves)
    return base * thin * waves


def op_time(op: Op, device: Device, eff: Efficiency) -> tuple[Num, Num, Num, Num, Num]:
    """(time, compute time, memory time, FLOPs, bytes) of ``op``; dimensions may be arrays,
    so one formula serves a single estimate and the advisor's whole search space."""
    bw = device.bandwidth * eff.memory
    element = device.precision.activation_bytes
    if isinstance(op, Elementwise):
        t_mem = op.bytes_moved / bw
        t_cmp = op.flops / device.vector_flops
        flops = op.flops
        gdn_backward = op.gated_delta and op.mamba_backward
        if op.matmul_flops is not None:
            sixteen = device.matmul.flops / device.math_over_16bit
            rate = eff.gated_delta_backward if gdn_backward else \
                eff.gated_delta_scan if op.gated_delta else eff.mamba_scan
            t_cmp = maximum(t_cmp, op.matmul_flops / (sixteen * rate))
            flops = flops + op.matmul_flops
        t = maximum(t_mem, t_cmp)
        if op.mamba_kernel and device.product.architecture == "blackwell":
            t = t / (eff.gated_delta_backward_blackwell if gdn_backward
                     else eff.gated_delta_blackwell if op.gated_delta else eff.mamba_blackwell)
        if op.gated_delta:
            t = maximum(t, op.chain_steps * eff.gated_delta_chunk_step_s)
        if op.mamba_backward and not gdn_backward:
            t = t / eff.mamba_backward_for(device.product.architecture)
        return (t + eff.kernel_overhead_s, t_cmp, t_mem, flops, op.bytes_moved)
    peak = device.matmul.flops
    decode = False
    if isinstance(op, Gemm):
        flops, moved = op.flops, op.bytes(device.precision.bytes)
        work = flops
        e = _gemm_efficiency(op, device, eff)
    else:
        factor = eff.attention_backward_flops_factor if op.backward else 1.0
        flops, moved = op.forward_flops * factor, op.bytes(element)
        mla_decode = op.name == MLA_DECODE
        fp8 = device.attention_key is PeakKey.TENSOR_FP8
        decode = bool(np.all(op.seq_q == 1)) if isinstance(op.seq_q, np.ndarray) \
            else op.seq_q == 1
        base = device.measured_fp8_attention_base() \
            if fp8 and op.name == "attention" and not decode else None
        # the pass as the kernel runs it: training's FP8 backward over a sliding window
        # costs the unwindowed pass (fp8_backward_ignores_window)
        priced = dataclasses.replace(op, window=0) \
            if base is not None and fp8_backward_ignores_window(op) else op
        work = priced.forward_flops * factor
        if mla_decode:
            e = eff.mla_decode_attention_fp8 if fp8 else eff.mla_decode_attention
        elif op.name == CONTEXT_ATTENTION or (op.name == INDEXER and not decode):
            e = eff.context_attention_fp8 if fp8 else eff.context_attention
        elif decode:
            e = eff.attention
        else:
            e = eff.attention * attention_span_share(priced, eff)
        sibling_key = device.attention_key
        if base is not None:
            # training's FP8 fused attention: the 16-bit pass's rate times the measured FP8
            # speedup of that pass on this chip (perf/fp8_attention.py)
            speedup = fp8_training_attention_speedup(device.product.key, op.head_dim,
                                                     attention_span(priced), op.backward,
                                                     device.fp8_attention_scaling)
            if speedup is not None:  # the chip's timings exist (the base's condition)
                e = e * speedup * base.flops / device.attention_flops
                sibling_key = base.key
        if eff.sibling_rates and not mla_decode:
            e *= sibling_factor(device.product.key, "attention_backward" if op.backward
                                else "attention_forward", sibling_key)
        peak = device.attention_flops
        if decode:  # one query row streams the KV cache
            bw = device.bandwidth * eff.kv_read
    t_cmp = work / (peak * e)
    if isinstance(op, Attention) and op.name == CONTEXT_ATTENTION:
        t_cmp = t_cmp + eff.context_attention_row_s * op.batch * op.seq_q * op.heads * op.share
    elif isinstance(op, Attention) and op.name == "attention" and not decode:
        t_cmp = maximum(t_cmp, window_attention_floor(op, eff))
    t_mem = moved / bw
    if isinstance(op, Gemm) and op.weight_bits is not None:
        t_mem = maximum(t_mem, mixed_input_floor(op, eff))
    reads = op.kv_head_reads if decode and isinstance(op, Attention) else 1
    if isinstance(op, Attention) and (np.any(reads > 1) if isinstance(reads, np.ndarray)
                                      else reads > 1):
        # a multi-head kernel reads each KV head once per query head, the repeats from L2
        repeated = op.kv_bytes(element) * reads
        t_mem = where(reads > 1,
                      maximum(t_mem, repeated / eff.multihead_decode_read_bytes_s), t_mem)
    if isinstance(op, Gemm):
        t = ridge_time(t_cmp, t_mem, eff.gemm_overlap)
    else:
        t = maximum(t_cmp, t_mem)
    return t + eff.kernel_overhead_s, t_cmp, t_mem, flops, moved


def ridge_time(compute: Num, memory: Num, p: float) -> Num:
    """A GEMM's time from its compute and memory times: (compute^p + memory^p)^(1/p), the
    larger of the two where p is infinite (``Efficiency.gemm_overlap``)."""
    if math.isinf(p):
        return maximum(compute, memory)
    if isinstance(compute, np.ndarray) or isinstance(memory, np.ndarray):
        hi = np.maximum(compute, memory)
        share = np.minimum(compute, memory) / np.where(hi > 0.0, hi, 1.0)
        return hi * (1.0 + share ** p) ** (1.0 / p)
    hi_f, lo_f = (compute, memory) if compute >= memory else (memory, compute)
    if hi_f <= 0.0:
        return hi_f
    return hi_f * (1.0 + (lo_f / hi_f) ** p) ** (1.0 / p)


def mixed_input_floor(op: Gemm, eff: Efficiency) -> Num:
    """Least time of a GEMM whose kernel converts its weights (``Gemm.weight_bits``), at
    fewer than SPREAD_ROWS rows (0 otherwise): its weights at the most such a kernel
    dequantizes a second at that width
    (``Efficiency.mixed_input_4bit_weights_s``, ``mixed_input_8bit_weights_s``), however
    fast the GPU's memory would deliver them."""
    rate = eff.mixed_input_weights_s(op.weight_bits)
    if rate <= 0.0:
        return 0.0
    return where(op.m < SPREAD_ROWS, 1.0 * op.k * op.n * op.batch / rate, 0.0)


def attention_span_share(op: Attention, eff: Efficiency) -> Num:
    """The share of its long-sequence rate (``Efficiency.attention``) a fused attention
    pass reaches, ``L / (L + attention_half_span)``, with ``L`` twice the keys a query row
    sees in one kernel call: a causal sequence (or packed document) of ``L`` positions,
    whose rows see ``L / 2`` keys on average, is the calibration's case; a sliding window
    gives its rows the window's keys, a non-causal pass all of ``seq_kv``, and under context
    parallelism (``share``) each call of the ring covers one GPU's chunk (``call_share``:
    whole-sequence calls under an all-to-all or all-gather exchange)."""
    span = attention_span(op)
    return span / (span + eff.attention_half_span)


def attention_span(op: Attention) -> Num:
    """Twice the keys a query row of ``op`` sees in one kernel call (its causal sequence or
    packed document's length; a window's rows 2 x the window; all of ``seq_kv`` twice when
    not causal), over one GPU's chunk where a context-parallel ring splits the calls."""
    return 2.0 * op._keys * (op.share if op.call_share is None else op.call_share)


def fp8_backward_ignores_window(op: Attention) -> bool:
    """Whether ``op``, a training attention pass run by cuDNN's FP8 (or MXFP8) fused
    attention, costs what the same pass costs without its sliding window: the backward
    over a window does. NVIDIA's cuDNN frontend benchmark of GPT-OSS's windowed layers
    (128-token window, 128 heads of 64, causal, batch 2; cuDNN 9.22 to 9.27, April-August
    2026, on GB200 and GB300: benchmark/sdpa_benchmark_training/results/gpt_oss/) times
    the FP8 and MXFP8 backward growing with the square of the sequence (GB200 MXFP8, cuDNN
    9.27: 0.64, 2.07, 7.38, 27.7 and 107.5 ms from 2,048 to 32,768 positions) where the
    16-bit backward and every forward grow with it linearly (16-bit backward 0.24 to 3.6
    ms): the FP8
    backward kernel works through every causal key block, not those inside the window.
    Priced as the unwindowed pass the model gives 1.2x (4,096) to 1.6x (32,768) less than
    those timings (the rest is head size 64, which the timings of head size 128 the speedups
    come from do not carry). Not for chunked attention (Llama 4's chunks), which the
    benchmark does not time."""
    if not op.backward or op.chunked or op.compressed:
        return False
    return bool(np.any(np.asarray(op.window) > 0))


def window_attention_floor(op: Attention, eff: Efficiency) -> Num:
    """Least time of a fused attention pass over a sliding window (0 without one): its
    query rows and heads at ``window_attention_row_s`` (forward) or
    ``window_attention_row_backward_s`` (backward)."""
    row_s = eff.window_attention_row_backward_s if op.backward else eff.window_attention_row_s
    return where(op.window > 0, row_s * op.batch * op.seq_q * op.heads * op.share, 0.0)


def op_cost(op: Op, device: Device, eff: Efficiency) -> OpCost:
    """Roofline time of ``op`` on ``device`` (scalar dimensions), plus the fixed per-kernel
    overhead, with what bounds it."""
    t, t_cmp, t_mem, flops, moved = (float(x) for x in op_time(op, device, eff))
    if isinstance(op, Elementwise):
        return OpCost(op.name, flops, moved, t,
                      Bound.MEMORY if t_mem >= t_cmp else Bound.COMPUTE, 0.0)
    peak = device.attention_flops if isinstance(op, Attention) else device.matmul.flops
    bound = Bound.COMPUTE if t_cmp >= t_mem else Bound.MEMORY
    return OpCost(op.name, flops, moved, t, bound, flops / t / peak)


def roofline_summary(device: Device, ops: list[Op], eff: Efficiency) -> dict[str, Any]:
    """A GPU's roofline (peak, bandwidth, ridge point) with each operator's cost placed on
    it: what ``gpuarch roofline`` prints and the report draws."""
    costs = [op_cost(op, device, eff) for op in ops]
    return {
        "gpu": device.product.name,
        "precision": device.precision.value,
        "peak_tflops": from_si(device.matmul.flops, Unit.TFLOPS),
        "peak_source": f"{device.matmul.key.value} ({device.matmul.origin})",
        "precision_fallback": device.matmul.fallback_reason,
        "memory_bandwidth_gb_s": from_si(device.bandwidth, Unit.GB_S),
        "ridge_point_flop_per_byte": device.matmul.flops / device.bandwidth,
        "ops": [{"op": c.name, "flops": c.flops, "bytes": c.bytes, "time_s": c.time_s,
                 "achieved_tflops": from_si(c.achieved_flops, Unit.TFLOPS),
                 "bound": c.bound.value,
                 "efficiency": c.efficiency,
                 "arithmetic_intensity": c.flops / c.bytes if c.bytes else None}
                for c in costs],
    }


def transformer_ops(hidden: int, heads: int, kv_heads: int, ffn: int, gated: bool,
                    seq_len: int, train_tokens: int, decode_batch: int, context: int
                    ) -> list[Op]:
    """One layer's main operators twice over: a training/prefill pass of ``train_tokens``
    tokens (large GEMMs, compute-bound) and a decode step of ``decode_batch`` tokens at
    ``context`` positions (thin GEMMs and a KV-cache read, memory-bound)."""
    d = hidden // heads
    qkv = (heads + 2 * kv_heads) * d
    up = (2 if gated else 1) * ffn
    ops: list[Op] = []
    for label, m, seqs, q_len, ctx in (("train", train_tokens, train_tokens // seq_len,
                                        seq_len, seq_len),
                                       ("decode", decode_batch, decode_batch, 1, context)):
        ops += [Gemm(m, qkv, hidden, name=f"{label} qkv"),
                Attention(seqs, q_len, ctx, heads, kv_heads, d, causal=True,
                          name=f"{label} attention"),
                Gemm(m, up, hidden, name=f"{label} mlp up"),
                Gemm(m, hidden, ffn, name=f"{label} mlp down")]
    return ops
