"""Achievable fractions of datasheet peaks: few, named, documented, overridable.

Peaks live in the catalog; these fractions say how much of a peak real kernels reach. The
defaults marked "fitted" were fitted with ``scripts/fit_training_efficiency.py`` to the
published training measurements in ``validation/data/training.toml`` (and the serving ones
with ``scripts/fit_inference_efficiency.py``); docs/performance-model.md gives their error
on the points they were fitted on and the two-fold cross-validated error. A calibration file
measured by the probe replaces them. Every estimate lists the values it used.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any

from gpuarch.catalog.model import drives_tensor_cores_async
from gpuarch.errors import GpuarchError, suggestion

__all__ = ["DEFAULT_EFFICIENCY", "Efficiency"]


@dataclass(frozen=True, kw_only=True)
class Efficiency:
    """Efficiency parameters of the performance model (dimensionless unless named)."""

    gemm: float = 0.75
    """Fraction of the dense peak that large, well-shaped GEMMs sustain on CUDA cores (and
    on Tensor Core generations without an entry in ``gemm_by_generation``). Assumed."""

    gemm_by_generation: tuple[float, ...] = (0.83, 0.70, 0.80, 0.737, 0.640)
    """The same per Tensor Core generation (1 = Volta ... 5 = Blackwell). Later generations
    reach a smaller fraction of a much larger peak: clocks fall under sustained Tensor load
    at the board power limit, and operand delivery limits the largest tiles. Fitted: Volta
    and Ampere on the training points, Hopper and Blackwell jointly on the training and
    serving points (scripts/fit_shared_efficiency.py)."""

    gemm_fp8: float = 0.803
    """Multiplier on the GEMM efficiency for GEMMs run at the FP8 Tensor Core peak, in
    training and in serving, which reach a smaller fraction of their doubled peak (scaling,
    narrower accumulation tiles). Fitted jointly on the training and serving measurements
    (scripts/fit_shared_efficiency.py; the two folds agree, 0.853 each)."""

    gemm_fp4: float = 0.633
    """Multiplier on the GEMM efficiency for GEMMs run at the dense FP4 Tensor Core peak
    (NVFP4 training and serving: block scaling; in training also the recipe's Hadamard
    transforms and the GEMMs it keeps in 16 bits). Fitted jointly on the training and
    serving measurements: the two GB200 NVFP4 rows of Megatron Bridge's 26.02 table (the
    GB300 row is out of sample) and the serving NVFP4 figures in sample."""

    gemm_half_dim: float = 210.0
    """The reduction length K at which efficiency has fallen to half, for 16-bit math: factor
    K / (K + gemm_half_dim) (short K leaves the Tensor Core pipeline poorly filled: narrow
    tensor-parallel shards). Fitted. In a faster format the K at which it halves is this
    times the format's peak over the 16-bit one (``Device.math_over_16bit``: FP8 2, NVFP4
    4-6), since a tile's fill and epilogue stay while its K loop shrinks; checked against
    the H200's measured FP8 GEMMs and TensorRT-LLM's GEMMs on six GPUs (``gpuarch validate
    gemm-kernels``; docs/performance-model.md)."""

    gemm_overlap: float = 3.0
    """How a GEMM's math and its operands' memory stream combine: its time is
    (compute^p + memory^p)^(1/p) with this p, the larger of the two far from the ridge point
    and 2^(1/p) times it where they are equal (1.26 at p = 3): near the ridge a GEMM's
    pipeline does not hide the weights' stream wholly behind the math (the decode GEMMs of a
    batch of one or two hundred sequences, FP8 on Hopper). ``math.inf`` is the plain roofline's
    maximum. Set from NVIDIA aiconfigurator's measured GEMMs, not from end-to-end results:
    3 gives the least error over TensorRT-LLM's BF16 and FP8 GEMMs of 0.1 ms and longer on
    H100, H200, B200 and GB200 (``gpuarch validate gemm-ridge``; docs/performance-model.md,
    "Near the ridge")."""

    gemm_min_tile: int = 16
    """Smallest output tile edge: M and N are padded up to a multiple of it, so a decode
    GEMM with M = 1 row does a 16-row tile's work (the m16 shape of the mma instruction that
    small-batch kernels use)."""

    gemm_tile: int = 128
    """Output tile edge used for wave quantisation (a partial last wave of tiles over the
    SMs is paid in full). Typical cuBLAS/CUTLASS tile on Ampere and Hopper."""

    attention: float = 0.457
    """Fraction of the Tensor Core peak the GPU generation's own FlashAttention-style fused
    attention reaches in training over long sequences (FlashAttention-2 reports 50-73% on
    A100 in the forward pass); shorter ones run at less (``attention_half_span``: 0.36 at
    4,096 positions, 0.40 at 8,192). Fitted on the in-sample training points (``python
    scripts/fit_training_efficiency.py --only attention``: 0.457; each fold alone 0.445 and
    0.471); 0.329 while it stood for every length alike. An effective value, below what
    cuDNN's kernel reaches alone (0.52 of H200's peak forward and backward at 8,192
    positions, where this gives 0.40; docs/performance-model.md)."""

    attention_half_span: float = 1100.0
    """Sequence length (the positions one fused attention kernel call spans: a packed
    document, or around a context-parallel p2p ring one GPU's chunk of the sequence) at which
    training's fused attention runs at half its long-sequence rate (``attention``): at
    ``L`` positions the rate is ``attention * L / (L + attention_half_span)``. Each query
    row carries a fixed cost (loading it, the softmax bookkeeping, storing its output)
    beside its share of the math, which grows with the keys it sees, so short sequences run
    at a lower share of the peak. Set from timings of cuDNN's fused attention, forward and
    backward, causal, BF16, head dim 128: our H200 kernel check
    (validation/data/ops-h200-sxm-141gb.json, 32 heads) reads 0.47 / 0.52 / 0.52 of the
    peak at 4,096 / 8,192 / 16,384 positions, which L / (L + 1,100) follows (0.79 / 0.88 /
    0.94 of its limit: 0.89 of the 8,192 rate at 4,096, measured 0.90); NVIDIA cuDNN
    frontend's benchmark on GB200 (Llama 3.1 heads, batch 2, cuDNN 9.26,
    benchmark/sdpa_benchmark_training/results/llama3.1/gb200/llama3.1_20260724_040930.csv)
    reads 0.38 / 0.49 / 0.57 / 0.57 at 2,048 to 16,384, a steeper rise (about 1,600; the
    forward alone, 0.44 / 0.56 / 0.66 / 0.69, about 1,500). The model takes H200's: the
    end-to-end runs outside llm-foundry's tables read 0.13 points worse with it than with
    one rate for every length, 0.15 with GB200's (docs/performance-model.md). Not fitted.
    A sequence spans twice the keys its rows see (``roofline.attention_span_share``: a
    window's rows see the window). Training's fused attention only (serving's prompt
    attention has ``context_attention_row_s``; decode streams its cache)."""

    attention_ampere_kernel: float = 0.35 / 0.75
    """The fraction of the native fused attention's speed that a kernel written for Ampere's
    synchronous Tensor Core instructions keeps where the Tensor Cores are driven
    asynchronously (wgmma on Hopper, tcgen05 on datacenter Blackwell): FlashAttention-2 and
    2023's Triton flash attention run there without them. FlashAttention-2 reaches 35% of
    H100's peak, FlashAttention-3 up to 75% (Shah et al. 2024, FlashAttention-3, abstract):
    0.35 / 0.75. Applied with ``attention_kernel = "ampere"`` (and ``"triton"``). Not
    fitted."""

    attention_triton_kernel: float = 1 / 1.3
    """The fraction of a FlashAttention-2-class kernel's speed that the flash attention
    written in Triton in 2022-2023 keeps (what MosaicML's llm-foundry ran MPT with, its
    ``attn_impl: triton``): the FlashAttention-2 paper measured FlashAttention-2 "1.3-2.5x
    faster than FlashAttention in Triton" on A100 (Dao 2023, arXiv:2307.08691, section 4.1:
    1.3-1.5x in the forward pass, about 2x in the backward). The model takes the low end,
    1 / 1.3: MPT's published long-sequence runs, where attention is most of the step, bear
    out no more (1 / 1.5 reads them 10-20% slow). Applied with ``attention_kernel =
    "triton"``, on top of ``attention_ampere_kernel`` where that applies. Not fitted."""

    window_attention_row_s: float = 2.0e-10
    """Least time of a fused attention forward over a sliding window, per query row and head
    (seconds): a narrow window leaves each row too little math to hide the kernel's fixed
    work per row (loading the query, the softmax bookkeeping, storing the output), so the
    pass takes at least this long whatever ``attention`` says of its math. cuDNN's
    GPT-OSS-style benchmark (head dim 64, a 128-token window, BF16) measured 0.207-0.210 ms
    for 2 x 128 heads x 4,096 rows on GB200 with cuDNN 9.22-9.27 (0.194 on GB300), 2.0e-10 s
    a row and head, linear in the rows to 32K: 160-190 TFLOP/s on the window's FLOPs, 0.065-0.076
    of GB200's 16-bit peak against ``attention``'s 0.33: NVIDIA cudnn-frontend
    benchmark/sdpa_benchmark_training/results/gpt_oss/gb200 (eight runs, April-August 2026).
    Binds only where a row's math is short (a window of a few hundred keys at head dim 64);
    not measured on other GPUs, applied to all. Not fitted. Training's attention only (not
    serving's context attention, which has ``context_attention_row_s``, nor decode)."""

    window_attention_row_backward_s: float = 4.3e-10
    """The same for the backward pass: 0.455-0.465 ms for the same shape at 4,096 and
    0.89-0.91 ms at 8,192 on GB200 (0.44 and 0.86 on GB300), 4.3e-10 s a row and head."""

    mamba_scan: float = 0.06
    """Fraction of the 16-bit Tensor Core peak that Mamba-2's chunked-scan kernels
    (mamba_ssm's Triton SSD kernels) reach on their small per-chunk matrix products
    (``estimate.mamba.mamba_scan_flops``). TileOPs' nightly benchmark on H200 (commit
    283f414, 2026-06-16; tile-ai/TileOPs.github.io @cac0905a docs/benchmarks/index.md,
    Mamba2Fwd 'full-2.7b-long-ctx') times its own forward scan at 18.51 ms and rates it
    1.01x mamba_ssm's ``_mamba_chunk_scan_combined`` (18.69 ms) on 4 x 32,768 tokens of 128
    heads of 64, state 128, one group, chunks of 256, BF16: 8.45 MFLOP a token by this
    count, 59.3 TFLOP/s, 0.060 of H200's 989 TFLOPS. Its backward is not benchmarked; taken
    at the same rate. Not fitted (the training rows of hybrid models are out of sample)."""

    gated_delta_scan: float = 0.091
    """Fraction of the 16-bit Tensor Core peak that a Gated DeltaNet block's forward chunked
    scan (flash-linear-attention's Triton ``chunk_gated_delta_rule``, which vLLM, SGLang and
    Megatron-Core run) reaches on its products (``estimate.mamba.gated_delta_scan_flops``),
    the rest of the roofline as Mamba-2's scan. Set where the model gives the FLA times
    FlashInfer's GDN pull requests print for Qwen3.5's heads on H100
    (``validation.gated_delta_kernels``; ``python scripts/fit_gated_delta.py``). Its backward
    has its own measured rate (``gated_delta_backward``)."""

    gated_delta_backward: float = 0.079
    """Fraction of the 16-bit Tensor Core peak that a Gated DeltaNet block's chunked scan
    backward (flash-linear-attention's ``chunk_gated_delta_rule`` backward: the states
    recomputed, then the gradients; ``estimate.mamba.gated_delta_scan_flops``) reaches on its
    products, the rest of the roofline as the forward's (its bytes at ``memory`` of the
    bandwidth), walking each sequence's chunks twice (``estimate.mamba.GDN_BACKWARD_CHAINS``
    x ``gated_delta_chunk_step_s``). Set where the model gives the FLA backward times QwenLM
    FlashQLA's H200 benchmark prints (the rows of ``WIDE_LANES`` lanes or more,
    ``validation.gated_delta_kernels``; ``python scripts/fit_gated_delta.py``). Until
    2026-12-06 the backward took Mamba-2's rates (``mamba_scan``, ``mamba_backward_*``),
    2.8-2.9 times FLA's measured time there."""

    gated_delta_backward_blackwell: float = 0.43
    """The rate that backward reaches on Blackwell over the roofline's, set the same way from
    FlashQLA's GB200 rows: FLA's Triton backward runs there in about the time it takes on
    H200 (head for head), so at a smaller share of the larger peak and bandwidth."""

    gated_delta_blackwell: float = 0.59
    """The rate the Gated DeltaNet forward scan reaches on Blackwell over the roofline's
    (as ``mamba_blackwell`` for Mamba-2's kernels, which the block's other kernels keep):
    set from the same tables' B300 rows."""

    gated_delta_chunk_step_s: float = 2.05e-6
    """Seconds a Gated DeltaNet forward scan takes at least per chunk of its longest
    sequence (``estimate.mamba.GDN_CHUNK`` tokens): FLA's state pass walks a sequence's
    chunks one after another, one thread block per slice of a head, so a pass of few
    sequences and heads (a long prompt on a TP8 slice) is bound by that chain, not by the
    GPU's throughput. Set from the same tables' narrow rows (one or two sequences of 8 value
    heads, H100 and B300 alike)."""

    mamba_blackwell: float = 0.5
    """The rate a Mamba-2 block's kernels of training and prefill (mamba_ssm's Triton SSD
    scan, causal_conv1d, the gated RMSNorm: ``Elementwise.mamba_kernel``) reach on
    Blackwell, over the rate the roofline gives them there (their bytes at ``memory`` of the
    bandwidth, the scan's products at ``mamba_scan`` of the peak, as on other GPUs): the
    kernels, tuned on Hopper, do not gain Blackwell's bandwidth and Tensor Core throughput.
    Set from state-spaces/mamba issue 904 (2026-04-06, mamba_ssm 2.3.1): a Mamba-2 model of
    48 layers, width 2,048 (1.4B), batch 4 x 4,096 tokens in BF16 on one GPU trains at
    360.4 TFLOP/s on GB200 against 239.2 on H200, 1.51x, where the model gave 2.05x with
    the kernels at the roofline's rate and 1.51x at this one, the backward kernels then at
    the forward's rate. The backward rates (``mamba_backward_*``), set later from the same
    issue's absolute figures, keep the ratio; this value now says how Blackwell's forward
    kernels (prefill's too) compare with Hopper's, which no measurement isolates. Beside
    it, vLLM's tuned Triton decode state update (PR 43083) moves its state at 50-58% of a
    Blackwell GPU's bandwidth against 72-77% of H100's. Not fitted to the validation
    rows (hybrid training and serving stay out of sample)."""

    mamba_backward_ampere: float = 0.795
    """The rate a Mamba-2 block's backward kernels of training (mamba_ssm's Triton SSD scan
    backward, causal_conv1d's backward, the gated RMSNorm's backward: ``Elementwise.
    mamba_backward``) reach over the rate the roofline gives them (their bytes at
    ``memory`` of the bandwidth, the scan's products at ``mamba_scan`` of the peak, and on
    Blackwell ``mamba_blackwell`` besides), on Ampere and every GPU that is neither Hopper nor
    Blackwell. The forward kernels keep the roofline's rate: ``mamba_scan`` is the measured
    forward scan's (TileOPs, H200), and prefill runs only those. Set, with the Hopper and
    Blackwell values, so that the model gives state-spaces/mamba issue 904's measured
    training throughput of a pure Mamba-2 model on one A100, H200 and GB200
    (``python scripts/mamba_backward.py``; tests/test_mamba_blackwell.py). Not fitted to the
    validation rows (hybrid training stays out of sample)."""

    mamba_backward_hopper: float = 0.493
    """The same on Hopper (issue 904's H200 run)."""

    mamba_backward_blackwell: float = 0.554
    """The same on Blackwell (issue 904's GB200 run), on top of ``mamba_blackwell``."""

    attention_backward_flops_factor: float = 2.5
    """Backward attention FLOPs over forward: five matrix multiplies against two, since the
    fused kernel recomputes QK^T (Dao 2023, FlashAttention-2, section 3.2)."""

    memory: float = 0.80
    """Fraction of DRAM bandwidth that memory-bound kernels (norms, activations, optimizer
    step, weight streaming in decode) sustain. Assumed."""

    kv_read: float = 0.79
    """Fraction of DRAM bandwidth that decode attention sustains reading the KV cache
    (paged, many short rows). Fitted on inference measurements; TensorRT-LLM's generation
    attention as aiconfigurator measured it agrees (``gpuarch validate attention-kernels``:
    steps of 50 us or more, median model/measured 0.92-1.09 by GPU and cache)."""

    multihead_decode_read_bytes_s: float = 4.5e12
    """Bytes per second at which a multi-head decode kernel streams the KV cache summed
    over the query heads it runs (``--decode-kv-reads per-query-head``: one thread block per
    query head and sequence, so a KV head shared by g query heads is read g times). Only the
    first read need reach DRAM, the repeats come from L2, so the op takes the longer of the
    cache read once at the DRAM rate (``kv_read``) and read g times at this rate. Fitted
    (``python scripts/fit_multihead_decode.py``) on the 49 throughput figures whose engine
    ran such a kernel on a grouped-query model: TensorRT-LLM 0.9's Mistral 7B, Mixtral 8x7B
    (groups of 4) and Falcon 180B (groups of 29) on A100, L40S, H100 and H200 (its XQA
    kernel takes only groups of 8 or 1) and the H200 launch blog's Llama-2-70B (0.5). 4.5e12
    minimizes their mean |ln| (0.098; 3.5e12 0.118, 6e12 0.137; 0.267 with every read
    shared), each GPU's figures best between 4.0e12 and 4.75e12 but L40S's, flat from 3e12
    to 6e12 (its DRAM binds first). A rate, not a datasheet figure: NVIDIA publishes no L2
    bandwidth for these chips, and one value serves every GPU."""

    moe_gemm: float = 0.72
    """Multiplier on GEMM efficiency for the expert GEMMs of mixture-of-experts layers in
    serving engines (fused MoE kernels over unevenly routed groups). Fitted on the serving
    measurements, whose MoE rows in the fit are Mixtral's (8 large experts, top-2);
    fine-grained MoE runs slower (``moe_gemm_fine``)."""

    moe_gemm_fine: float = 0.7
    """A further multiplier on ``moe_gemm`` for fine-grained mixture-of-experts models (more
    than 16 routed experts: Qwen3 MoE, DeepSeek-V3, GPT-OSS, Llama 4) whose experts run in
    reduced precision (FP8, FP4, or 4-bit weights dequantized) in serving: their fused MoE
    kernels run many small grouped GEMMs at a fraction of what Mixtral's few large experts
    reach. Not fitted: set from published kernel timings, FlashInfer's port of
    TensorRT-LLM's CUTLASS fused MoE (pull request #5332; 256 experts, top-8, hidden 2,048,
    expert FFN 512, per-tensor FP8, on SM90: H100 NVL, as the same author's pull request
    #5099 states for the same shapes): 719.9 and 1,301.6 us a layer at 4,096 and 8,192
    tokens, which the model's MoE block on H100 NVL matches with 0.65 and 0.7; with 1, the
    layer's expert GEMMs, MoE floor and all its memory-bound work together come to less
    (622 and 1,146 us; tests/test_inference_model.py). In 16 bits the factor is not applied:
    on the lent H200, torch's BF16 grouped GEMM at Qwen3-30B-A3B's expert shapes with 512
    tokens an expert ran 1.3x faster than the model's ``moe_gemm`` cost (``gpuarch validate
    ops --kind serve_grouped``), while its FP8 grouped GEMM took twice its BF16 time. One
    factor is a compromise: TensorRT-LLM's own MoE layers as NVIDIA's aiconfigurator measured
    them (``gpuarch validate moe-kernels``) run per-tensor FP8 on Hopper faster than this
    prices them and block-scaled FP8 and Blackwell's NVFP4 slower (NVFP4 gets a further
    factor, ``moe_gemm_nvfp4``); the factor applies on every architecture, as ``moe_gemm``
    does (docs/performance-model.md)."""

    moe_gemm_nvfp4: float = 0.88
    """A further multiplier on ``moe_gemm`` x ``moe_gemm_fine`` where a fine-grained
    mixture-of-experts model's routed experts run in NVFP4 (4-bit weights and activations):
    TensorRT-LLM's NVFP4 MoE layers as NVIDIA's aiconfigurator measured them on B200 and
    GB200 (``gpuarch validate moe-kernels``; Qwen3-30B-A3B, Qwen3-235B-A22B and DeepSeek-V3,
    160 layers at 2,048-16,384 tokens) run no faster than its FP8 ones at Qwen3-30B-A3B's
    width and barely at the others, where the model's FP4 rate made them much faster. Set
    where the mean absolute log ratio of model to measured over those layers is least (0.88,
    median ratio 0.95, since the GEMMs near the ridge carry their memory stream's share,
    ``gemm_overlap``; 0.82 before, within 0.78-0.84, flat; median ratio 0.86 -> 0.94),
    with Blackwell's own MoE block floor (``moe_block_floor_blackwell_s``; at the Hopper
    floor it was 0.70); not fitted on the
    validation figures. Serving only (docs/performance-model.md)."""

    moe_gemm_mxfp4_fp8: float = 2.08
    """A further multiplier on ``moe_gemm`` x ``moe_gemm_fine`` where a fine-grained
    mixture-of-experts model's routed experts run MXFP4 weights against FP8 activations
    (TensorRT-LLM's W4A8 MXFP4 x MXFP8 MoE on Blackwell, which it picks for GPT-OSS's MXFP4
    checkpoints): TensorRT-LLM's layers of that format as NVIDIA's aiconfigurator measured
    them on B200 and GB200 (``gpuarch validate moe-kernels``; GPT-OSS-120B's experts at EP
    1-16, 32 layers at 2,048-16,384 tokens) run about twice the rate ``moe_gemm`` x
    ``moe_gemm_fine`` gives (median model/measured 1.29 at 1), near the dense GEMMs' own
    rate. Set as ``moe_gemm_nvfp4`` is, where the mean absolute log ratio of model to
    measured over those layers is least (2.08, median ratio 0.99, since ``gemm_overlap``;
    1.93 before); SGLang's measured layers of the same format put it at 2.14 (1.81
    before). Not fitted on the validation figures (``python scripts/fit_moe_formats.py``).
    Serving only. Since those layers are compared with the backend TensorRT-LLM runs them on
    (its TRTLLM backend, ``moe_block_floor_trtllm_gen_s``: 17 us, not CUTLASS's 45 us;
    2026-12-07) the same rule gives 1.46 (mean |ln| 0.356, 0.390 at 2.08), pulled down by the
    layers at EP 4-16, whose times stay flat from 1,024 to 8,192 tokens (136-146 us at EP 16)
    while their GEMM work grows eightfold: not a GEMM rate. The 8 layers at EP 1 alone put it
    at 2.4 (0.053; 0.106 at 2.08). Left at 2.08 until a rule tells the two apart."""

    moe_gemm_deepgemm: float = 1.06
    """The multiplier on GEMM efficiency, in place of ``moe_gemm`` and the fine-grained and
    format factors, for the routed experts' GEMMs where they run as DeepGEMM's grouped FP8
    GEMMs (block-scaled FP8 on Hopper under ``--moe-kernels sglang-deepep``, SGLang's wide-EP
    path): set from the ten grouped GEMMs DeepGEMM's README published for DeepSeek-V3's
    expert shapes on H800, 815-1,297 TFLOPS (``python scripts/fit_deepgemm.py``: mean
    |ln(model/measured)| 0.034; contiguous layout 1.02, masked 1.00; 1.02 before
    ``gemm_overlap``). About the dense GEMM rate: 2.0-2.7 times the block-scaled rate
    TensorRT-LLM's CUTLASS layers reach (``moe_gemm_fp8_block``). Serving only; no
    validation figure used."""

    moe_gemm_fp8_block: float = 0.82
    """A further multiplier on ``moe_gemm`` x ``moe_gemm_fine`` where a fine-grained
    mixture-of-experts model's routed experts run FP8 with 128 x 128 weight blocks
    (``InferenceConfig.fp8_scaling`` "block": DeepSeek-V3's and Kimi K2's own checkpoints,
    DeepGEMM's kernels): TensorRT-LLM's block-scaled FP8 MoE layers as NVIDIA's
    aiconfigurator measured them on H100 and H200 (``gpuarch validate moe-kernels``; 144
    layers of Qwen3-30B-A3B, Qwen3-235B-A22B and DeepSeek-V3 at 2,048-16,384 tokens) run
    slower than the per-tensor FP8 rate ``moe_gemm_fine`` was set from (median
    model/measured 0.81 at 1). Set as ``moe_gemm_nvfp4`` is, where the mean absolute log
    ratio over those layers is least (0.82, median 0.96, since ``gemm_overlap``; 0.75
    before); SGLang's 312 block-scaled layers on Hopper and Blackwell put it at 0.81. Not
    fitted on the validation figures (``python scripts/fit_moe_formats.py``). Serving only."""

    moe_gemm_ampere_kernel: float = 0.73
    """A further multiplier on the routed experts' GEMM efficiency where their grouped GEMMs
    are kernels written for Ampere's synchronous Tensor Core instructions on a GPU that
    drives its Tensor Cores asynchronously (Hopper, datacenter Blackwell:
    ``catalog.model.ASYNC_MMA_MAJORS``; ``InferenceConfig.moe_gemm_kernel`` "ampere"):
    TensorRT-LLM before 0.10 sent 16-bit expert GEMMs on SM90 to its SM80 CUTLASS grouped
    kernels (``moe_gemm_kernels_template.h`` at commit 250d9c29, the Hopper branch marked
    to wait for CUTLASS's Hopper specialisations; the SM90 launcher first appears with 0.10's
    FP8 Mixtral). Set from a published comparison on H100 of the same two kinds of CUTLASS
    grouped GEMM at one MoE shape (tgale96/grouped_gemm pull request #37, 128 experts,
    K 2,048, N 1,536): SM80 kernels 116.9, 109.2 and 113.2 TFLOPS against the SM90
    cooperative kernel's 160.5, 151.5 and 154.3 (0.73, 0.72, 0.73); NVIDIA/cutlass issue
    #1280 reports the SM80 grouped GEMM about 30% slower than a loop of cuBLAS's Hopper GEMMs
    on H100. Not fitted. Serving only."""

    mla_decode_attention: float = 0.65
    """Fraction of the 16-bit peak that absorbed multi-head latent attention (DeepSeek's MLA
    in decode: every query head against one shared latent KV "head") sustains in serving.
    Set from TensorRT-LLM's MLA generation kernel as NVIDIA's aiconfigurator measured it
    (``validation/data/mla-decode-trtllm.csv``: 128 heads, 64-1,024 sequences of 4k-32k
    tokens on H100, H200, B200 and GB200, where this fraction and
    ``mla_decode_attention_fp8`` bring the roofline closest, mean |ln ratio| 0.105; 0.60-0.70
    within 0.01 of it), not fitted on the validation figures. The fused prefill/training
    ``attention`` (0.329) priced it before, 1.6-3x too slow. Hopper runs it in 16-bit math
    over an FP8 cache too."""

    mla_decode_attention_fp8: float = 0.5
    """The same over an FP8 KV cache on Blackwell, whose MLA generation kernels run their math
    in FP8: a fraction of the FP8 peak (0.45-0.50 within 0.01 of the least error)."""

    context_attention: float = 0.59
    """Fraction of the 16-bit peak a serving engine's fused attention over a prompt (a
    prefill pass: causal, the prompt attending to itself) sustains on its math, beside a
    fixed time per query row and head (``context_attention_row_s``). Set with it from
    TensorRT-LLM's context attention as NVIDIA's aiconfigurator measured it
    (``validation/data/context-attention-trtllm.csv``: 32 or 64 query heads over 4 or 8 KV
    heads of 128, 1-4 prompts of 2,048-16,384 tokens on H100, H200, B200 and GB200), where
    the three bring the roofline closest (mean |ln ratio| 0.059 over the 384 passes, against
    0.232 for the best constant fraction, 0.45 and 0.28; ``python
    scripts/fit_context_attention.py``), not fitted on the validation figures. Training's
    fused attention (forward and backward, cuDNN) keeps ``attention``. Serving only
    (docs/performance-model.md, "A prompt's attention: math and a cost per row")."""

    context_attention_fp8: float = 0.41
    """The same at the FP8 rate (FP8 context FMHA over an FP8 cache,
    ``InferenceConfig.fp8_context_attention``): a fraction of the FP8 peak."""

    context_attention_row_s: float = 5.5e-10
    """Fixed time of that fused attention per query row and head (seconds), beside its math
    at ``context_attention``: what each row of each head costs whatever its length (loading
    its query, the softmax's final rescale, writing its output), so short prompts run at a
    smaller fraction of the peak than long ones (2,048 tokens at about half of 16,384's rate
    on B200) and narrow heads, with half the math per row, lose more of it (head dim 64 at
    0.76-0.88 of head dim 128's rate, measured 0.63-0.82, on shapes the fit did not see)."""

    moe_block_floor_s: float = 26.6e-6
    """Fixed time of a serving engine's fused MoE block per expert layer and forward pass,
    beyond streaming its weights and doing its math: the routing (top-k), the sorting of
    tokens by expert, the two grouped GEMMs' fill and drain, the activation and the weighted
    sum run as a chain of dependent kernels. Measured: vLLM pull request #24700's
    benchmark_moe.py on H100 (Qwen3-30B-A3B, FP8, 128 experts, top-8, fused_moe under a CUDA
    graph) gives 40.4, 56.2, 78.1, 118.6, 164.6, 237.3 us at batch 1, 2, 4, 8, 16, 64, when
    8, 15, 28, 50, 81, 126 experts are active: 26.6 us plus 1.7 us per active expert, the
    slope being the expert's 4.7 MB at about 80% of the H100's bandwidth, as the model already
    charges it; the same floor shows in vLLM pull request #44830 (H100, Qwen3-Next-80B FP8,
    29.5 us at batch 1 for 7.9 MB of weights) and SGLang pull request #11730 (H200,
    Qwen3-235B-A22B FP8 TP 8, 31.7 us at batch 1 for 18.9 MB). Charged for vLLM's kernels on
    every GPU (SGLang's too) and for TensorRT-LLM's before Blackwell
    (``InferenceConfig.moe_kernels``;
    TensorRT-LLM's on Blackwell have their own, ``moe_block_floor_blackwell_s``); serving only
    (training's MoE terms are fitted on its own measurements). Not fitted. The engines' MoE
    layers as NVIDIA's aiconfigurator measured them (``validation/data/moe-kernels-*.csv``;
    ``python scripts/fit_moe_floor.py``, as of 2026-12-07) agree where a floor explains
    them: TensorRT-LLM's on H100 and H200 are least at 30 us, their mean |ln(model/measured)|
    0.212 there and at 26.6 us; vLLM 0.24.0's on B200 and GB200 least near 26.6 us (0.327
    there, 0.326 at 24 us, 0.370 at 45 us); vLLM's on H100 and H200 want ever more (0.500 at
    26.6 us, 0.447 at 60 us) for want of anything else
    to absorb FlashInfer's CUTLASS FP8 path there, 3-5 times slower than the model at 1,024
    tokens and fewer, which is no fixed cost."""

    moe_block_floor_blackwell_s: float = 45e-6
    """The same fixed time for TensorRT-LLM's fused MoE blocks on Blackwell GPUs (Tensor Core
    generation 5), which take longer to run their chain of kernels there: set from
    TensorRT-LLM 1.3.0rc20's CUTLASS MoE layers as NVIDIA's aiconfigurator measured them on
    B200 and GB200 (672 layers of Qwen3-30B-A3B, Qwen3-235B-A22B and DeepSeek-V3 at
    16-16,384 tokens, BF16, FP8 and NVFP4), where their mean |ln(model/measured)| is least:
    0.200 at 45 us (40-48 us within 0.003), against 0.254 at 26.6 us; the BF16 layers alone
    put it at 36 us (``python scripts/fit_moe_floor.py``). Until 2026-12-07 the fit also took
    the 112 GPT-OSS MXFP4 layers of the same table (0.246 at 45 us over 784), which TensorRT-
    LLM runs on its TRTLLM backend (``moe_block_floor_trtllm_gen_s``). vLLM's kernels on the
    same GPUs (FlashInfer's TRT-LLM-Gen MoE) are least near ``moe_block_floor_s`` (24 us,
    0.326; 0.327 at 26.6 us), so ``InferenceConfig.moe_kernels`` = "vllm" charges that. Not
    fitted on the validation figures; serving only."""

    moe_block_floor_trtllm_gen_s: float = 17e-6
    """The same fixed time for TensorRT-LLM's TRTLLM MoE backend on Blackwell (the
    TRT-LLM-Gen kernels, ``InferenceConfig.moe_kernels`` "trtllm-gen", which TensorRT-LLM
    serves GPT-OSS's MXFP4 experts with there): set from that backend's own layers as NVIDIA's
    aiconfigurator measured them in TensorRT-LLM 1.3.0rc20 (``validation/data/
    moe-kernels-trtllm-gen.csv``: GPT-OSS-120B's experts, W4A8 MXFP4 x MXFP8, on B200 and
    GB200), where the mean |ln(model/measured)| of its 22 layers of 16 tokens or fewer is
    least: 0.055 at 17 us (18 us the same; 0.201 at 26.6 us, vLLM's and SGLang's floor for the
    same kernels behind FlashInfer), the 14 of 8 tokens or fewer within 2% on each GPU
    (``python scripts/fit_moe_floor.py``). At one token TensorRT-LLM's layer takes 25.3 us on
    B200, 4 experts' 53 MB of weights included. Not fitted on the validation figures; serving
    only."""

    moe_grouped_gemm: float = 0.60
    """The same for training's grouped expert GEMMs (Megatron-Core/Transformer Engine grouped
    GEMM over evenly balanced tokens, thousands per expert). Fitted on every published MoE
    training run (scripts/fit_training_efficiency.py --grid moe; 0.40 when it was fitted on
    the 25.09-25.11 rows alone); it also carries what an expert layer costs beyond the
    operators the model charges apart (the router's GEMM, the token permutations, the
    all-to-all): its scoring and top-k kernels and the token counts' bookkeeping. The grouped
    GEMM kernels alone reach 56-66% of the H100's BF16 peak at 2,048-4,096 tokens per
    expert (TransformerEngine pull request #2045). Every MoE run it was fitted on is
    fine-grained (more than 16 routed experts); coarse ones take
    ``moe_grouped_gemm_coarse``."""

    moe_grouped_gemm_coarse: float = 1.0
    """The same for a coarse mixture of experts (16 routed experts or fewer: Mixtral,
    Grok-1, DBRX; ``TransformerShape.is_fine_grained_moe`` false): an expert-parallel rank
    holds one or two experts whose GEMMs are as large as a dense layer's (Grok-1's 6,144 x
    32,768 on EP 8: one expert a rank, a plain GEMM), so they run at the dense GEMMs' rate.
    Not fitted: 1 by construction. The validation's only coarse MoE training runs, NVIDIA
    DGX Cloud's Grok-1 314B on NeMo 25.04, read 20-28% slow at ``moe_grouped_gemm`` and
    within +2.4/+5.3% on H100 at 1 (+13% to +20% on GB200, as that release's other GB200
    runs read fast); they prompted the rule and are counted in sample. Checked after it was
    set on the MoE Parallel Folding paper (arXiv:2504.14960): its twelve Mixtral-8x22B runs
    on H100 read 6.6% at 1 and 29.0% (all slow) at ``moe_grouped_gemm``, while its
    fine-grained twin of the same weights (64 experts of 2,048) reads 3.4% at
    ``moe_grouped_gemm``."""

    nvlink_bus: float = 0.82
    """NCCL bus bandwidth over NVLink/NVSwitch as a fraction of the per-direction link rate,
    for a group that fills the node (the limit as the group grows; a small group reaches
    less, ``nvlink_small_group``). Fitted with it on the collectives NCCL ran on NVSwitch
    systems as NVIDIA's aiconfigurator measured them (``gpuarch validate collectives``;
    scripts/fit_nvlink_bus.py, with NCCL's latencies scaled as measured per architecture,
    perf/data/nccl.toml): the 266 all-gathers and reduce-scatters of 8 MiB to 512 MiB over
    2, 4 and 8 GPUs of A100, H100, H200, B200, B300, GB200 and GB300, mean
    |ln(model/measured)| 0.079 (0.318 with the earlier assumed 0.80 for every group size,
    when the model ran 2-GPU collectives 1.6x too fast). Per family the best pair differs
    little: Ampere 0.74/0.70, Hopper 0.84/0.80, Blackwell 0.81/0.84."""

    nvlink_small_group: float = 0.84
    """How much less of ``nvlink_bus`` a collective over few GPUs of one NVSwitch node
    reaches: ``nvlink_bus x (1 - nvlink_small_group / ranks)``, 0.58 of it over 2 GPUs, 0.79
    over 4, 0.90 over 8 (measured bus bandwidths at 512 MiB: Hopper all-gathers 0.57, 0.70,
    0.75 of the link rate over 2, 4, 8 GPUs; Blackwell 0.49, 0.63, 0.69). Fitted with
    ``nvlink_bus``. A pipeline send between two GPUs and a deduplicating dispatcher's own
    kernels (DeepEP, HybridEP) are not NCCL group collectives and take ``nvlink_bus`` as
    is."""

    pcie_bus: float = 0.53
    """The same over PCIe (GPUs without NVLink, e.g. L40S servers, whose all-reduces cross
    PCIe switches or the host). Fitted on the serving measurements of L40S at TP 2-8."""

    network_bus: float = 0.85
    """The same over InfiniBand/RoCE between nodes, per GPU NIC. Assumed."""

    collective_latency_s: float = 10e-6
    """Latency per ring step of a serving engine's collectives where its own kernels were not
    measured (a tensor-parallel all-reduce over PCIe, across nodes or on Volta; the
    all-gather and reduce-scatter of ``--moe-comm allgather``, pipeline sends; the one-shot
    MoE all-to-all has its own, ``moe_dispatch_latency_s``, and an all-reduce inside one
    NVLink domain the engines' one-shot kernels, ``perf.collectives.engine_all_reduce_time``).
    Assumed, and confirmed by the inference fit (which, freed, settled at 8 us). Training
    collectives use NCCL's own latency model instead (perf/data/nccl.toml), whose per-step
    latencies are smaller."""

    all_reduce_wait_s: float = 5.0e-6
    """What one tensor-parallel all-reduce of a serving step takes beyond the engine's kernel
    timed alone (``perf.collectives.engine_all_reduce_time``; the kernels' own latencies,
    2.5-7.5 us for small buffers, are fitted on NVIDIA aiconfigurator's measurements, perf/
    data/engine_all_reduce.toml): in an engine every GPU waits at the kernel's barrier for
    the slowest of its group, whose work before it (GEMMs, attention over contexts of
    different lengths) finishes at different times. Fitted on the serving measurements
    with the per-step and per-prefill overheads (``python scripts/fit_inference_efficiency.py
    --only decode_step_overhead_s,prefill_overhead_s,all_reduce_wait_s``: 5.04 us)."""

    moe_dispatch_latency_s: float = 11.0e-6
    """Fixed time of one MoE dispatch or combine by a serving engine's one-shot all-to-all
    kernel (``perf.collectives.dispatch_time``), every peer written at once. Fitted with
    ``moe_dispatch_peer_latency_s`` and ``moe_dispatch_bus`` on TensorRT-LLM's NVLink
    two-sided all-to-all as NVIDIA's aiconfigurator measured it on GB200 (720 dispatches and
    combines of 1-65,536 tokens of DeepSeek-V3's 7,168-wide state, top-8, in BF16, FP8 and
    NVFP4, over EP 2 to 64 of one NVL72 rack; ``python scripts/fit_moe_dispatch.py``, mean
    |ln(model/measured)| 0.148): about 11 us at one token over 2 GPUs or 64. Checked, not
    fitted, on DeepEP's low-latency kernels on one H100 node (0.131) and on H800 over
    InfiniBand at EP 16-256 (0.043) (``gpuarch validate moe-dispatch``). Serving only;
    training's dispatchers keep NCCL's latency model."""

    moe_dispatch_peer_latency_s: float = 0.08e-6
    """The part of that fixed time each further GPU of the group adds (fitted with it)."""

    moe_dispatch_latency_trtllm_deepep_s: float = 67e-6
    """The fixed time of a dispatch where TensorRT-LLM's kernels have no multi-node NVLink to
    run their own all-to-all on (an 8-GPU HGX board) and exchange through its DeepEP
    low-latency path instead: 67 us, in place of ``moe_dispatch_latency_s``. Fitted (with the
    rest of ``dispatch_time`` as it is) on that path as NVIDIA's aiconfigurator measured it
    in TensorRT-LLM 1.3.0rc11 on H100, H200, B200 and B300 at EP 8 (140 dispatches of 1-256
    tokens in BF16, FP8 and NVFP4; mean |ln(model/measured)| 0.081; ``python
    scripts/fit_moe_dispatch.py``): 70-77 us at any token count up to 256, where DeepEP's
    own kernels in SGLang take 13-37 us on H100."""

    moe_combine_latency_trtllm_deepep_s: float = 38e-6
    """The same for the combine on that path (56 combines in BF16, mean |ln| 0.168)."""

    moe_dispatch_bus: float = 0.62
    """The share of the per-direction NVLink rate that a serving engine's one-shot MoE
    dispatch or combine reaches for the bytes it sends to the other GPUs of its NVLink
    domain (fitted with ``moe_dispatch_latency_s`` on the same rows); the share for other
    nodes crosses the network at ``network_bus``."""

    tbo_exchange_hidden: float = 0.473
    """Under two-batch overlap (``InferenceConfig.two_batch_overlap``: each expert layer runs
    its batch as two micro-batches), the share of the shorter of one micro-batch's expert
    all-to-all and the other micro-batch's work in the layer that is hidden; the rest of the
    exchange stays on the critical path (its kernels' sending and receiving hold the SMs;
    only the time in flight overlaps). Fitted on one figure, SGLang's decode of DeepSeek-V3
    on 72 H100s with the overlap (LMSYS blog, 2025-05-05; ``python scripts/fit_tbo.py``:
    0.473 since ``gemm_overlap`` and the experts' rates set again with it, 0.426 before,
    with the experts at DeepGEMM's rate, ``moe_gemm_deepgemm``); checked on the same
    decode without it (+15.6%, the share plays no part) and a prefill with it (-1.7%).
    Serving only."""

    tp_comm_exposed: float = 0.0
    """Fraction of tensor-parallel communication not hidden behind compute when TP
    communication overlap is on (Megatron --tp-comm-overlap); without it all of it is
    exposed, but for the backward's asynchronous gather and reduce-scatter under sequence
    parallelism (estimate.training.sequence_parallel_tp_comm). Fitted."""

    tp_comm_exposed_16_bit_dense: float = 1.0
    """``tp_comm_exposed`` for a dense model (no experts) trained in BF16 or FP16: the share
    of its tensor-parallel traffic the userbuffers overlap leaves exposed. Every published
    dense 16-bit run with the overlap on reads as if it hid none of it (NVIDIA's DGX Cloud
    recipes: Llama 3.1 70B on 64-2,048 H100 at TP 4, Llama 3.1 405B at TP 8 on H100 and TP 4
    on GB200, Nemotron-4 340B at TP 8 and 15B at TP 2 on H100; ten runs, 16.0% fast with the
    traffic hidden, 2.9% with it exposed), while the FP8 twins of the same layouts read
    right with it hidden (``tp_comm_exposed``) and so do the MoE runs in 16-bit (38 runs at
    TP 2-4, 7.3% hidden, 7.9% exposed). Set by a scan over 0-1 on those ten runs, which
    become in sample (``python scripts/fit_training_efficiency.py --only
    tp_comm_exposed_16_bit_dense``: 1.0, the bound); no mechanism is known
    (docs/performance-model.md, "Dense 16-bit runs and the TP overlap")."""

    cp_comm_exposed: float = 0.5
    """Fraction of context-parallel KV exchange not hidden behind the ring attention's
    compute. Assumed."""

    ep_comm_exposed: float = 1.0
    """Fraction of expert-parallel all-to-all not hidden (dispatch and combine sit between
    dependent GEMMs). Assumed."""

    pp_comm_exposed: float = 1.0
    """Fraction of the pipeline sends a schedule waits on (non-interleaved 1F1B always;
    interleaved without ``pp_comm_overlap``) that shows in the step. Assumed: the transfer
    sits between a stage's passes. (0.0, fitted, while every schedule's sends were charged
    alike: the interleaved runs that overlap them set it.)"""

    dp_comm_exposed: float = 0.594
    """Data-parallel traffic the step cannot hide, in units of one layer's bucket: the
    gradient reduction and parameter gather run during one micro-batch's backward and
    forward (what outlasts that compute is exposed besides), but the first layer's gather
    has nothing before it and the last one's reduction nothing after, so this share of a
    layer's traffic is exposed too (per micro-batch under ZeRO-3 with prefetch; under
    ZeRO-3 without it, the share of all of it). Fitted with ``step_overhead_s`` on the
    in-sample points (0.64 when it stood for all the exposed traffic)."""

    step_overhead_s: float = 0.0281
    """Fixed time per training step beside its layers, its exposed communication and its
    optimizer update: what a framework's step pays to start and finish (the loop around the
    captured passes, the loss and gradient-norm reductions and their host syncs, the
    optimizer's launches, the gradient buffers' reset), none of it measured one by one.
    Fitted on the in-sample points together with the overlap of data-parallel traffic by
    its physics (``dp_comm_exposed``): 28.1 ms; it matters only where a step is short (one
    or two micro-batches per GPU, as in MLPerf's Llama 3.1 8B runs at scale), 1-3% of a
    one-second step. Training only (docs/performance-model.md, "Data-parallel overlap by its
    physics, and a fixed time per step")."""

    cpu_adam_elements_per_s: float = 6.4e8
    """Elements one GPU's process updates per second in Adam on the host when the optimizer
    is offloaded (``--optimizer-offload``): PyTorch's fused CPU AdamW in Megatron-Core's
    HybridDeviceOptimizer, on the one thread a rank gets by default (torchrun sets
    OMP_NUM_THREADS=1 when it starts several processes on a node; Ray does so for an actor
    that holds no CPU, as NeMo-RL's Megatron workers are). Per process, not a host's rate
    shared by its GPUs: two measurements agree on it per GPU, eight GPUs to a node and one.
    Fitted on Megatron Bridge's step with the whole optimizer offloaded, 4,189 ms against
    996 ms without, for Qwen3-30B-A3B at TP 2, PP 2, EP 4 on two nodes of H100
    (NVIDIA-NeMo/Megatron-Bridge skills/perf-techniques/cpu-offloading/card.yaml
    @b00deab6): the 3.19 s added, less the copies and plus the GPU's own update saved. Its
    25%, 50% and 75% steps and the overlapped one test it, and out of sample NeMo-RL's
    single-H100 Qwen3-0.6B run (NVIDIA-NeMo/RL pull request 3628: 0.752 s a step, 1.187 s
    at half offloaded, 1.216 s overlapped, 1.678 s at all of it overlapped), whose added
    0.926 s the model gives as 0.925 s (tests/test_optimizer_offload.py). Neither names
    its host CPU; more threads per process, or a faster host, are not modelled."""

    kernel_overhead_s: float = 0.0
    """Fixed time per modelled kernel (launch, dispatch, tail), charged per operator. The
    training fit drives it to zero, the per-layer overhead below absorbing it; kept as a
    parameter for calibration and for inference, where launches dominate decode."""

    layer_overhead_s: float = 0.0
    """Fixed time per transformer layer per pass for the many small kernels a framework
    runs besides the modelled ones (rotary embeddings, casts, reshapes, bias and dropout,
    bookkeeping). The training fit drives it to zero once unfused attention is modelled;
    kept for calibration. Fitted."""

    layer_pass_floor_s: float = 5.7e-4
    """The least time one layer's forward pass takes in training however little work it
    holds (its backward at least twice this). Binds only where a GPU's share of a layer is
    small: on the validation's runs, the four Llama 3.1 8B MLPerf Training runs on 512-1,024
    GB200/GB300 (2,048 tokens a GPU under TP 2-4 and CP 4, one micro-batch a step, modelled
    forward passes of 0.2-0.35 ms), whose step times imply 0.55-0.65 ms each, and the
    512-GPU GPT-OSS-20B run, which implies 0.97 ms; no other point moves. Fitted to those four
    (0.57 ms: ``python scripts/fit_training_efficiency.py --only layer_pass_floor_s``). What
    sets it is not measured: not the host's launches (those runs capture their layers in
    CUDA graphs); perhaps the chain of dependent, latency-bound steps a small pass is made
    of (sequence-parallel gathers and scatters, context-parallel exchanges, the kernels
    between them), which the modelled kernels and collectives do not fill. Training only."""

    moe_layer_overhead_s: float = 4e-3
    """Fixed time per expert layer per forward pass (and per recomputed forward) for the host
    side of a dropless token dispatcher, host attached over PCIe: the router's per-expert
    token counts are copied to the CPU before the all-to-all and the grouped GEMM can be
    sized (Megatron-Core's alltoall dispatcher waits at its "before_ep_alltoall" sync point,
    megatron/core/transformer/moe/token_dispatcher.py), so the GPU waits while the host
    launches the layer's many small kernels (permutation, top-k, casts, splits). The
    backward pass reuses the split sizes already on the CPU and waits on nothing. Not
    charged for token-drop routing padded to the capacity (``moe_token_drop``; without the
    padding Megatron-Core's dispatcher syncs too, before its first permutation). Charged in
    training only; serving engines capture these in CUDA graphs or fused MoE kernels (their
    fixed costs are the decode and prefill overheads). Fitted."""

    moe_layer_overhead_c2c_s: float = 1.5e-3
    """The same host wait where the GPU reaches its CPU over NVLink-C2C (Grace: GB200,
    GB300, GH200) rather than PCIe. Megatron Bridge's 25.09 and 25.11 tables run the same
    Qwen3-30B-A3B layouts token-drop and dropless: on 8 GB200 dropless is as fast (23,766 vs
    22,775 tokens/s per GPU), on 8 B200 half as fast (9,299 vs 18,066). Set so that partial
    CUDA graphs gain what NVIDIA measured on DeepSeek-V3 on 256 GB200 (+8.6%; the model
    +9.0%, tests/test_training_model.py); fitted at 2 ms before the grouped-GEMM multiplier
    was refitted on every MoE row."""

    moe_expert_launch_s: float = 15e-6
    """Host time per kernel launched for one local expert in training's expert layers
    (``EXPERT_LAUNCHES_PER_EXPERT`` in estimate/training_layers.py: each expert's GEMMs and, in
    FP8/FP4, its quantizations). The expert section of a layer takes the longer of its
    GPU time and these launches, so a GPU holding many small experts runs at the host's
    pace: NVIDIA's Megatron Core MoE report (arXiv:2603.07685) finds fine-grained MoE in
    reduced precision host-bound, "GPU kernels separated by microseconds of host-side
    latency" (section 4.3.1), each launch costing "several microseconds" (4.3.6), and the
    expert GEMMs outside what CUDA graphs capture. Fitted with the other MoE terms
    (fit_training_efficiency.py, MOE_GRID)."""

    moe_unbalanced_load: float = 1.89
    """Routed tokens on the busiest expert-parallel rank over the mean when nothing balances
    the routing: dropless, no load-balancing loss, no expert bias, not forced (training's
    ``--moe-imbalance unbalanced``; the validation rows marked ``moe_routing =
    "unbalanced"``). Capped by what one rank can receive, 1 without expert parallelism.
    Nothing measures it for the runs it is charged on (their logs print no per-expert
    load), so it is fitted on NVIDIA's own MLPerf Training v6.0 GPT-OSS-20B runs with
    expert parallelism (72 GB300, 72 GB200, 512 GB300; ``moe_router_load_balancing_type
    'none'``, ``moe_aux_loss_coeff 0``); UltraEP (arXiv:2606.04101) measured the inter-rank
    imbalance of real routing with no system-level balancing at 1.30-4.01 across the MoE
    models it trained and served on rack-scale nodes. Charged in training only."""

    decode_step_overhead_s: float = 1.51e-3
    """Fixed time per decode step (scheduler, sampling, launch of the step's graph), for
    the whole model. Fitted on inference measurements (1.58 ms until the engines' own
    all-reduce kernels were modelled, 2026-12-07). Charged for vLLM's and SGLang's engine
    loops and C++ executors; TensorRT-LLM's PyTorch backend has its own measured one,
    ``decode_step_overhead_pytorch_s``."""

    decode_step_overhead_pytorch_s: float = 0.58e-3
    """The same for TensorRT-LLM's PyTorch backend (``InferenceConfig.executor`` "python", the
    default), whose executor loop runs the scheduler, the launch of the step and the sampler's
    post-processing on one Python thread one step ahead of the GPU (its overlap scheduler):
    TensorRT-LLM issue #13957 (2026-05-10, NVIDIA) measures what of that host work the GPU
    still waits on, "~580 us/iter of host overhead as GPU idle", from Nsight Systems traces of
    Llama-3.1-8B-Instruct FP8 on B200 at 64 concurrent requests (ISL = OSL = 1,000), where the
    backend delivers 13,806 output tokens/s against vLLM 0.20.1's 15,638 (a step 0.55 ms
    longer). Taken as published, not fitted; the sampler's own kernels are not priced apart
    (argmax or top-k over the vocabulary, tens of microseconds a step at such batches)."""

    host_time_per_request_expert_layer_s: float = 0.816e-6
    """Host time of a Python executor loop per request in flight, per expert layer the
    replica's pipeline stage holds, per decode iteration (TensorRT-LLM's PyTorch backend),
    which an overlap scheduler hides behind the GPU's step until it outlasts it. A dense
    model is charged none. The size is one measurement's: TensorRT-LLM pull request #10273
    gives 45.11 ms of ``host_step_time`` per iteration at 1,536 requests per rank for
    GPT-OSS-120B (36 expert layers) on GB200 (attention data parallel 2, ISL = OSL = 1,000),
    45.11 ms / 1,536 / 36 = 0.816 us. That figure is the host's wall time from one loop
    iteration to the next (``profile_step`` in tensorrt_llm/_torch/pyexecutor/py_executor.py),
    waits on the GPU included: an upper bound on the host's own cost, not a measurement of
    it. The scaling with expert layers is read from the published throughputs, not from a
    known mechanism: GPT-OSS-20B (24 expert layers) on one GPU caps the cost per request at
    16.4-19.3 us, GPT-OSS-120B (36) runs at 29.4 us, Qwen3-30B-A3B (48) needs 33-57 us,
    and dense models show no such floor (docs/performance-model.md, "The executor's host
    time"). Not fitted. Measured on a Grace host; an x86 host's is this over
    ``host_time_x86_speedup``."""

    host_time_x86_speedup: float = 1.19
    """How many times faster an x86 host (Intel Xeon, AMD EPYC: every GPU here that is not on
    a Grace superchip, ``Product.grace_host``) runs the Python executor loop than the Grace
    CPU ``host_time_per_request_expert_layer_s`` was measured on. Read from published pairs
    of the same run on a B200 or B300 (x86 hosts) and a GB200 or GB300 (Grace) in
    TensorRT-LLM's performance overviews, where the model's decode step waits on the host on
    both sides: the median ratio of their throughputs per GPU (``python
    scripts/host_pairs.py``). Microbenchmarks bracket it: a bare CPython call 1.08x slower on
    GB200 than on an H100 host (PyTorch issue #187862), the host time of an eager
    ``torch.nn.Linear`` 37.1 us on GB200 against 13.5 us on a DGX H100 (Xeon 8480C), 2.75x
    (TransformerEngine issue #2053). Not fitted on the model's errors. 1.20 from 2026-12-04
    until TensorRT-LLM's PyTorch backend took its measured fixed time a step (2026-12-07),
    which makes a 17th pair host-bound on both sides (median 1.193)."""

    eager_decode_host_s_per_layer: float = 2.57e-4
    """Host time per decoder layer of a decode step run eagerly (no CUDA graph replayed:
    the host launches every kernel, so the step lasts at least this times the stage's
    layers). Used only for such steps: those of a sequence beyond the context a captured
    graph covers (``InferenceConfig.cuda_graph_max_context``: vLLM before V1 runs any
    decode step whose longest sequence exceeds ``max_seq_len_to_capture``, 8,192 tokens
    by default, eagerly) and those of more sequences than the largest captured batch
    (``cuda_graph_batch_sizes``). From SGLang pull request #1401's Llama-3-8B decode at
    batch 1 with its FlashInfer backend and ``--disable-cuda-graph``: 8.23 ms a step over
    32 layers (7.35 ms with graphs, so the eager step waits on the host). Its Triton
    backend's step, 9.28 ms (0.29 ms a layer), launches Python-side Triton kernels; the
    FlashInfer one, compiled kernels as vLLM's FlashAttention backend launches, is taken.
    One machine's host; an MoE layer launches more kernels than a dense one and is charged
    the same (a lower bound). Not fitted."""

    adp_prefill_balance: float = 0.5411
    """Mean balance ratio (average over largest tokens per rank in the attention module,
    per iteration) of TensorRT-LLM's baseline scheduling with attention data parallelism
    and in-flight batching: 54.11% on 8 GB200 serving DeepSeek-V3 with attention DP 8 and
    EP 8 (the TensorRT-LLM team's "ADP Balance Strategy" tech blog, table "Performance
    Summary", baseline row). Each rank schedules its own context requests, so an iteration
    where some ranks prefill and others only decode lasts as long as the busiest rank: the
    per-rank work of a prefill pass (everything but the gathered expert block) is charged
    over this ratio. Not fitted: the published ratio as is (the serving figures would take
    a somewhat larger penalty, docs/performance-model.md)."""

    adp_prefill_balance_lined_up: float = 0.8770
    """The same with the blog's balanced scheduler (context requests held back up to
    ``timeout_iters`` and ``batching_wait_iters`` iterations so the ranks prefill together;
    TensorRT-LLM's attention_dp_config enable_balance): 87.70%, for 1.33x the baseline's
    throughput (same table, "ADP Balance (Full Strategy)" row). Used with ``--adp-balance``
    and for a disaggregated prefill pool, whose ranks all run context passes."""

    prefill_overhead_s: float = 1.99e-3
    """Fixed time per prefill (scheduling and launch; tokenisation outside the engine is
    not included). Fitted on inference measurements (2.6 ms until the engines' own
    all-reduce kernels were modelled, 2026-12-07)."""

    mixed_input_4bit_weights_s: float = 2.905e12
    """Most 4-bit weights a second that a mixed-input GEMM (one whose kernel converts its weights:
    weight-only W4A16, or W4A8 where the Tensor Cores do not take the 4-bit operand) of
    fewer than ``roofline.SPREAD_ROWS`` rows dequantizes, however fast the GPU's memory
    delivers them: its time is at least the GEMM's weights over this. Inclusion AI's humming
    pull request #2 times Marlin's W4A16 kernel on an H100 at M = 1 (N = K = 8,192, one
    scale a channel) at 5.81 TFLOPS, 2.905e12 weights a second, beside PyTorch's 16-bit GEMV
    at 2.68 TFLOPS in the same run (2.68 TB/s, this model's 16-bit streaming rate on H100,
    0.80 of 3.35 TB/s): 2.17x, not the 4x the bytes allow (the PR's first run, 4.98 and 2.30
    TFLOPS, the same 2.17x). Not a fraction of the bandwidth: Marlin reaches its ideal 3.87x
    on an A10's GDDR6 (IST-DASLab/marlin README), and the ceiling binds only where memory
    would outrun it (H100, H200, A100's 1.63 TB/s in part; no GDDR GPU). Dense layers only
    (fused MoE kernels are their own; ``moe_gemm``). One kernel on one GPU, applied to every
    kernel that converts 4-bit weights (vLLM's Machete on Hopper, Marlin elsewhere,
    TensorRT-LLM's and LMDeploy's GEMVs; W4A8 too, assumed: its INT4-to-FP8 conversion is
    the same work a weight, and no one-row time of it is stored). A second kernel on a
    second GPU agrees: torch's tinygemm INT4 kernel on an H200 converts 3.1-3.5e12 weights a
    second at one row, a third of what that GPU's memory delivers (our op check,
    docs/measured/h200-2026-12-04; tests/test_validate_ops.py). Not fitted; 0 turns it
    off."""

    mixed_input_8bit_weights_s: float = 2.145e12
    """The same at 8 bits a weight: the same run's Marlin W8A16, 4.29 TFLOPS at M = 1, 1.60x
    PyTorch's 16-bit GEMV (the first run's 3.46 TFLOPS, 1.50x)."""

    dequant_overhead: float = 0.25
    """Extra compute time, as a fraction of the GEMM's, for dequantizing weights inside
    weight-only quantized GEMMs (AWQ/GPTQ/Marlin-style kernels) when they are
    compute-bound. Assumed: the published points (INT4 at batch 1, memory-bound) do not
    constrain it."""

    sibling_rates: float = 1.0
    """1: multiply a GPU's GEMM and attention efficiencies by how much more of the same peak
    it sustains than the sibling they were fitted on, where NVIDIA publishes the same
    kernels timed on both (perf/sibling.py, data/sibling_rates.toml: GB300 over GB200).
    0: not (a calibration measured on the GPU itself replaces the efficiencies). Not
    fitted: the published timings as they are."""

    def with_overrides(self, values: dict[str, Any]) -> Efficiency:
        """A copy with some parameters replaced; unknown names are an error naming them."""
        names = {f.name for f in fields(self)}
        for key, value in values.items():
            if key not in names:
                raise GpuarchError(f"efficiency: unknown parameter {key!r}"
                                   f"{suggestion(key, names)}")
            items = value if isinstance(value, (list, tuple)) else [value]
            for item in items:
                if not isinstance(item, (int, float)) or isinstance(item, bool) or item < 0:
                    raise GpuarchError(f"efficiency.{key}: expected numbers >= 0, "
                                       f"got {value!r}")
            if key == "sibling_rates" and value not in (0, 1):
                raise GpuarchError(f"efficiency.sibling_rates: expected 0 (off) or 1 (on), "
                                   f"got {value!r}")
            if isinstance(value, list):
                values = {**values, key: tuple(value)}
        return replace(self, **values)

    def with_value(self, name: str, value: float) -> Efficiency:
        """A copy with one parameter replaced (no checks: for the models' own variants; a
        user's values go through ``with_overrides``). Cached: building an ``Efficiency``
        costs about a twentieth of an estimate, and the models ask for the same few
        variants of the same parameters estimate after estimate."""
        return _with_value(self, name, value)

    def with_attention_kernel(self, kernel: str, compute_capability: str | None
                              ) -> Efficiency:
        """This efficiency with fused attention run by ``kernel``: "native" (the GPU
        generation's own) as it is; "ampere" (written for Ampere's synchronous Tensor Core
        instructions, FlashAttention-2's class) at ``attention_ampere_kernel`` of it on a
        chip that drives its Tensor Cores asynchronously
        (``catalog.model.drives_tensor_cores_async``), as it is on any other; "triton"
        (2023's flash attention in Triton) at ``attention_triton_kernel`` of the "ampere"
        kernel's speed."""
        share = 1.0
        if kernel in ("ampere", "triton") and drives_tensor_cores_async(compute_capability):
            share = self.attention_ampere_kernel
        if kernel == "triton":
            share *= self.attention_triton_kernel
        return self if share == 1.0 else self.with_value("attention", self.attention * share)

    def mixed_input_weights_s(self, bits: int | None) -> float:
        """The dequantization rate of a mixed-input kernel at ``bits`` a weight
        (``mixed_input_4bit_weights_s`` or ``mixed_input_8bit_weights_s``); 0, no bound, at
        any other width or where the parameter is 0."""
        return {4: self.mixed_input_4bit_weights_s,
                8: self.mixed_input_8bit_weights_s}.get(bits or 0, 0.0)

    @staticmethod
    def mamba_backward_name(architecture: str) -> str:
        """The backward-rate parameter an architecture takes: ``mamba_backward_hopper`` or
        ``_blackwell`` on those, else ``mamba_backward_ampere``."""
        own = architecture if architecture in ("hopper", "blackwell") else "ampere"
        return f"mamba_backward_{own}"

    def mamba_backward_for(self, architecture: str) -> float:
        """The value of ``mamba_backward_name(architecture)``."""
        value: float = getattr(self, self.mamba_backward_name(architecture))
        return value

    def gemm_for(self, tensor_core_generation: int | None) -> float:
        """GEMM efficiency for a chip's Tensor Core generation (``gemm`` without one)."""
        g = tensor_core_generation
        if g and 1 <= g <= len(self.gemm_by_generation):
            return self.gemm_by_generation[g - 1]
        return self.gemm

    def as_dict(self) -> dict[str, float | list[float]]:
        """Every parameter by name, the per-generation tuples as lists (a new dict each
        call; the values are read once per set of parameters, ``_parameter_items``)."""
        return {name: list(value) if isinstance(value, tuple) else value
                for name, value in _parameter_items(self)}


@lru_cache(maxsize=64)
def _with_value(eff: Efficiency, name: str, value: float) -> Efficiency:
    """``Efficiency.with_value``, memoised."""
    changes: dict[str, Any] = {name: value}
    return replace(eff, **changes)


@lru_cache(maxsize=64)
def _parameter_items(eff: Efficiency) -> tuple[tuple[str, float | tuple[float, ...]], ...]:
    """``eff``'s fields as (name, float or tuple), for ``Efficiency.as_dict``
    (each estimate reports them; the parameters are frozen, so they are read once)."""
    items: list[tuple[str, float | tuple[float, ...]]] = []
    for f in fields(eff):
        value = getattr(eff, f.name)
        items.append((f.name, tuple(value) if isinstance(value, tuple) else float(value)))
    return tuple(items)


DEFAULT_EFFICIENCY = Efficiency()
