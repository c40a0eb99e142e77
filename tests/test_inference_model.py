"""The inference model: hand-computed KV-cache sizes, memory accounting, invariants."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.catalog.model import Product
from gpuarch.catalog.peaks import PeakKey
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceEstimate, estimate_inference
from gpuarch.estimate.inference_batching import admission_starts, drain_shares
from gpuarch.estimate.inference_config import (
    DECODE_KV_READS,
    RESERVE_FRACTION,
    Batching,
    InferenceConfig,
)
from gpuarch.estimate.inference_memory import kv_bytes_per_token, memory_parts
from gpuarch.estimate.inference_passes import OP_PARTS, ReplicaRunner
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.perf.quant import QuantFormat, QuantScheme, gemm_peak
from gpuarch.workloads import TransformerShape, count_params, preset

CATALOG = load_catalog()
H100 = CATALOG.product("h100")
A100 = CATALOG.product("a100")
LLAMA_8B = preset("llama-3.1-8b").shape
LLAMA2_70B = preset("llama-2-70b").shape

BF16 = QuantScheme()
FP8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)


@pytest.mark.parametrize(
    ("model", "tp", "element", "expected"),
    [
        # 2 (K, V) x 8 KV heads x 128 head dim x 32 layers x 2 bytes = 131,072 bytes
        ("llama-3.1-8b", 1, 2.0, 2 * 8 * 128 * 32 * 2),
        # Llama-2-7B has no GQA: 2 x 32 x 128 x 32 x 2 = 524,288 bytes
        ("llama-2-7b", 1, 2.0, 2 * 32 * 128 * 32 * 2),
        # Llama-2-70B: 2 x 8 x 128 x 80 x 2 = 327,680 bytes; FP8 halves it
        ("llama-2-70b", 1, 2.0, 327_680),
        ("llama-2-70b", 1, 1.0, 163_840),
        # TP8 leaves one KV head per GPU: 2 x 1 x 128 x 80 x 2 = 40,960 bytes
        ("llama-2-70b", 8, 2.0, 40_960),
        # more TP ranks than KV heads replicate them: still one head per GPU
        ("mistral-7b", 16, 2.0, 2 * 1 * 128 * 32 * 2),
        # DeepSeek-V3 MLA caches the 512-dim latent plus the 64-dim rotary key: (512 + 64)
        # x 61 layers x 2 bytes = 70,272 bytes
        ("deepseek-v3", 1, 2.0, (512 + 64) * 61 * 2),
    ],
)
def test_kv_bytes_per_token(model: str, tp: int, element: float, expected: int) -> None:
    """KV-cache bytes per token, computed by hand for GQA, MHA and MLA models."""
    assert kv_bytes_per_token(preset(model).shape, element, tp) == expected


def test_memory_accounting_by_hand() -> None:
    """Llama-2-70B, TP4, FP8 weights and KV, batch 16 x (2048 + 512) tokens; its embedding
    table and LM head (32,000 x 8,192 each) stay 16-bit."""
    cfg = InferenceConfig(input_len=2048, output_len=512, batch=16, gpus=4, tp=4, quant=FP8)
    mem = memory_parts(LLAMA2_70B, cfg, 16, H100)
    ends = 2 * 32_000 * 8_192
    assert mem["weights"] == pytest.approx(
        ((count_params(LLAMA2_70B).total - ends) * 1.0 + ends * 2.0) / 4)
    assert mem["kv_cache"] == pytest.approx(16 * 2560 * (2 * 2 * 128 * 80 * 1.0))
    assert mem["other"] == pytest.approx(RESERVE_FRACTION * 80 * 2**30)


def _est(shape=LLAMA_8B, product=H100, **kw):  # type: ignore[no-untyped-def]
    base = {"input_len": 1024, "output_len": 256, "batch": 8}
    return estimate_inference(CATALOG, shape, product, InferenceConfig(**{**base, **kw}))


@pytest.mark.parametrize("batch", [1, 64])
def test_the_lm_head_runs_in_16_bits_whatever_the_weights(batch: int) -> None:
    """A quantized checkpoint keeps its LM head 16-bit (EMBEDDING_BYTES): the LM head's share
    of a decode step is the same with BF16, FP8, INT4 or NVFP4 weights, while the layers'
    GEMMs get faster."""
    h200 = CATALOG.product("h200")
    b200 = CATALOG.product("b200")
    schemes = [BF16, FP8, QuantScheme(QuantFormat.INT4, QuantFormat.BF16, QuantFormat.BF16)]
    heads = {_est(product=h200, batch=batch, quant=q).decode_step_parts_s["lm_head"]
             for q in schemes}
    assert len(heads) == 1
    fp8 = _est(product=h200, batch=batch, quant=FP8).assumptions["bytes_per_element"]
    assert (fp8["weights"], fp8["embeddings_and_lm_head"]) == (1.0, 2.0)
    fp4 = QuantScheme(QuantFormat.FP4, QuantFormat.FP4, QuantFormat.FP8)
    on_b200 = [_est(product=b200, batch=batch, quant=q).decode_step_parts_s
               for q in (BF16, fp4)]
    assert on_b200[0]["lm_head"] == on_b200[1]["lm_head"]
    assert on_b200[1]["dense_gemms"] < on_b200[0]["dense_gemms"]


def test_max_batch_is_the_largest_that_fits() -> None:
    """--batch max picks the largest batch whose memory fits; one more does not."""
    e = _est(batch=None)
    assert e.batch == e.max_batch > 1 and e.fits_in_memory
    over = _est(batch=e.max_batch + 1)
    assert not over.fits_in_memory


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 128), st.sampled_from([BF16, FP8]))
def test_bigger_batches_trade_latency_for_throughput(batch: int, quant: QuantScheme) -> None:
    """Doubling the batch never lowers throughput nor shortens the time per token."""
    a, b = _est(batch=batch, quant=quant), _est(batch=2 * batch, quant=quant)
    assert b.output_tokens_per_s >= a.output_tokens_per_s
    assert b.tpot_s >= a.tpot_s and b.ttft_s >= a.ttft_s


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([128, 512, 2048, 8192]))
def test_longer_prompts_take_longer(length: int) -> None:
    """TTFT and per-token time grow with the prompt (more prefill, more KV to read)."""
    a, b = _est(input_len=length), _est(input_len=2 * length)
    assert b.ttft_s > a.ttft_s and b.tpot_s >= a.tpot_s


def test_decode_at_batch_one_is_memory_bound_and_quantization_helps() -> None:
    """Batch 1 decode reads all weights per token: FP8 and INT4 weights cut TPOT."""
    bf16 = _est(batch=1)
    fp8 = _est(batch=1, quant=FP8)
    int4 = _est(batch=1, quant=QuantScheme(QuantFormat.INT4, QuantFormat.BF16,
                                           QuantFormat.BF16))
    assert bf16.bottleneck["decode"] == "memory"
    assert int4.tpot_s < fp8.tpot_s < bf16.tpot_s
    assert bf16.bottleneck["prefill"] == "compute"


def test_weight_only_gemms_of_few_rows_fill_every_sm() -> None:
    """A weight-only GEMM of fewer than 16 rows runs spread over every SM (TensorRT-LLM's
    batched GEMV, a block per 8 output columns; TurboMind's split-K): an INT4 decode step at
    batch 1 on an RTX 4090 reads its weights at the modelled bandwidth instead of waiting
    on waves of 128 x 128 tiles one row tall (LMDeploy's 4090 rows: 206 tokens/s published,
    131 with the waves). At 16 rows and beyond, and for 16-bit or W8A8 GEMMs, the waves
    stay."""
    from gpuarch.perf.precision import Precision
    from gpuarch.perf.roofline import SPREAD_ROWS, Device, Gemm, op_time

    device = Device.of(CATALOG.product("rtx-4090"), Precision.FP16, 4)
    eff = DEFAULT_EFFICIENCY
    weight = QuantFormat.INT4.bytes
    for m in (1, 8, SPREAD_ROWS - 1):
        spread = Gemm(m, 4096, 4096, weight_element=weight, spread=True)
        _, t_cmp, t_mem, _, _ = op_time(spread, device, eff)
        waves = op_time(Gemm(m, 4096, 4096, weight_element=weight), device, eff)
        assert t_cmp < waves[1]  # 32 tiles on 128 SMs: a quarter of a wave
        assert t_mem == waves[2]
    big = (Gemm(SPREAD_ROWS, 4096, 4096, weight_element=weight, spread=s) for s in (1, 0))
    assert op_time(next(big), device, eff)[1] == op_time(next(big), device, eff)[1]
    # a whole decode step: the dense GEMMs are the weights' read at the modelled bandwidth
    shape = preset("llama-2-7b").shape
    cfg = InferenceConfig(input_len=1, output_len=512, batch=1, executor="cpp",
                          quant=QuantScheme(QuantFormat.INT4, QuantFormat.FP16,
                                            QuantFormat.FP16))
    e = estimate_inference(CATALOG, shape, CATALOG.product("rtx-4090"), cfg)
    head = shape.hidden // shape.heads  # Llama 2 7B: 32 heads of 128, no grouping
    per_layer = (shape.hidden * (shape.heads + 2 * shape.n_kv_heads) * head
                 + shape.heads * head * shape.hidden + 3 * shape.hidden * shape.d_ffn)
    read_s = per_layer * shape.layers * weight / (1.008e12 * eff.memory)
    # (2.2% over it: the 16-row tile's math, a fifth to two fifths of the read, adds its
    # share near the ridge, Efficiency.gemm_overlap)
    assert e.decode_step_parts_s["dense_gemms"] == pytest.approx(read_s, rel=0.03)


def test_a_few_rows_of_4bit_weights_dequantize_no_faster_than_the_kernel_does() -> None:
    """humming pull request #2 times Marlin's W4A16 GEMM at M = 1 (8,192 x 8,192) on an
    H100 at 5.81 TFLOPS beside PyTorch's 16-bit GEMV at 2.68 in the same run: 2.17x, where
    the bytes would allow 4x. The model reads a 16-bit GEMV there at 2.68 TB/s (0.80 of
    3.35), so it must time that INT4 GEMM at 5.81 TFLOPS, not at the weights' bytes over
    the bandwidth; on an RTX A6000 (768 GB/s of GDDR6, where Marlin reaches its ideal
    speedup) memory still sets the time, and from 16 rows on the floor is gone."""
    from gpuarch.perf.precision import Precision
    from gpuarch.perf.roofline import SPREAD_ROWS, Device, Gemm, op_time

    eff = DEFAULT_EFFICIENCY
    h100 = Device.of(CATALOG.product("h100"), Precision.BF16, 2)
    int4, int8 = QuantFormat.INT4.bytes, QuantFormat.INT8.bytes
    n = k = 8192

    def gemm(m: int, weight: float, bits: int) -> Gemm:
        return Gemm(m, n, k, weight_element=weight, spread=True, weight_bits=bits)

    sixteen = op_time(Gemm(1, n, k), h100, eff)
    assert 2 * n * k / sixteen[2] / 1e12 == pytest.approx(2.68, rel=0.001)
    t, _, t_mem, flops, _ = op_time(gemm(1, int4, 4), h100, eff)
    assert t_mem == pytest.approx(n * k / 2.905e12, rel=1e-9) and t >= t_mem
    assert t_mem > n * k * int4 / (3.35e12 * eff.memory)  # the bytes alone: 13.3 us
    assert flops / t_mem / 1e12 == pytest.approx(5.81, rel=0.001)
    assert flops / op_time(gemm(1, int8, 8), h100, eff)[2] / 1e12 == pytest.approx(4.29,
                                                                                  rel=0.001)
    # from 16 rows, and for a GEMM that is not a weight-only kernel's, the bytes again
    for op in (gemm(SPREAD_ROWS, int4, 4), Gemm(1, n, k, weight_element=int4)):
        assert op_time(op, h100, eff)[2] == pytest.approx(
            op.bytes(2.0) / (h100.bandwidth * eff.memory), rel=1e-9)
    # GDDR6 delivers the weights slower than the kernel dequantizes them
    a6000 = Device.of(CATALOG.product("rtx-a6000"), Precision.BF16, 2)
    op = gemm(1, int4, 4)
    assert a6000.bandwidth == pytest.approx(768e9, rel=0.001)
    assert op_time(op, a6000, eff)[2] == pytest.approx(
        op.bytes(2.0) / (a6000.bandwidth * eff.memory), rel=1e-9)
    # off at 0
    off = eff.with_overrides({"mixed_input_4bit_weights_s": 0})
    assert op_time(op, h100, off)[2] == pytest.approx(
        op.bytes(2.0) / (h100.bandwidth * eff.memory), rel=1e-9)


def test_an_estimate_says_when_the_dequantization_rate_sets_its_decode(
        capsys: pytest.CaptureFixture[str]) -> None:
    """INT4 weight-only decode at batch 1 on an H100 runs at the kernel's rate, and the
    estimate says so (assumptions and a line under the formats); at batch 32, on an A6000,
    or with 16-bit weights it does not. W4A8 on Hopper converts its weights too."""
    from gpuarch.cli.main import main

    shape = preset("llama-3.1-8b").shape
    int4 = QuantScheme(QuantFormat.INT4, QuantFormat.BF16, QuantFormat.BF16)

    def floor(gpu: str, batch: int, quant: QuantScheme | None = int4) -> object:
        cfg = InferenceConfig(input_len=1024, output_len=1024, batch=batch,
                              **({"quant": quant} if quant else {}))
        e = estimate_inference(CATALOG, shape, CATALOG.product(gpu), cfg)
        return e.assumptions["mixed_input_dequant"]

    assert floor("h100", 1) == {"weights_per_s": 2.905e12, "bits": 4, "binds_in_decode": True}
    assert floor("h100", 32)["binds_in_decode"] is False  # type: ignore[index]
    assert floor("rtx-a6000", 1)["binds_in_decode"] is False  # type: ignore[index]
    assert floor("h100", 1, None) is None
    # W4A8 converts its INT4 weights to FP8 in the kernel on Hopper: the same bound; on
    # Blackwell FP4 weights meet FP8 activations in the Tensor Cores as stored: none
    w4a8 = QuantScheme(QuantFormat.INT4, QuantFormat.FP8, QuantFormat.FP8)
    assert floor("h100", 1, w4a8)["binds_in_decode"] is True  # type: ignore[index]
    assert floor("b200", 1, QuantScheme(QuantFormat.FP4, QuantFormat.FP8,
                                        QuantFormat.FP8)) is None
    args = ["estimate", "infer", "--model", "llama-3.1-8b", "--input-len", "1024",
            "--output-len", "1024", "--batch", "1", "--weight-precision", "int4"]
    assert main([*args, "--gpu", "h100"]) == 0
    out = capsys.readouterr().out
    assert "dequantization rate, 2.9e12 weights/s" in out
    assert "the mixed-input kernel's dequantization of a few rows' weights dominates" in out
    assert main([*args, "--gpu", "rtx-a6000"]) == 0
    out = capsys.readouterr().out
    assert "dequantization rate" not in out and "reading weights and KV cache" in out


def test_the_advisor_says_when_a_deployment_waits_on_dequantization() -> None:
    """The advisor's line for an INT4 deployment at batch 1 on an H100 names the kernel's
    conversion, as the estimate does; the same format on an L40S (GDDR6, 0.86 TB/s) and FP8
    on the H100 are bandwidth-bound."""
    from gpuarch.advise import load_prices
    from gpuarch.advise.infer import InferenceSearch, advise_inference

    search = InferenceSearch(input_len=2048, output_len=256, concurrency=1,
                             gpus=("h100", "l40s"), top=30)
    advice = advise_inference(CATALOG, preset("llama-3.1-8b").shape, search, load_prices())
    seen = set()
    for o in advice.top:
        if o.batch != 1 or o.tp * o.pp != 1:
            continue
        dequant = o.reason is not None and o.reason.startswith("decode waits on dequantizing")
        if o.gpu.startswith("h100") and o.weights == "int4":
            assert dequant, o.reason
            seen.add("h100-int4")
        elif o.weights in ("int4", "fp8"):
            assert not dequant and "bandwidth-bound" in (o.reason or ""), o.reason
            seen.add(f"{o.gpu}-{o.weights}")
    assert "h100-int4" in seen and len(seen) >= 3


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 64), n=st.sampled_from([1024, 4096, 14336]),
       k=st.sampled_from([1024, 4096, 8192]), bits=st.sampled_from([4, 8]),
       gpu=st.sampled_from(["h100", "h200", "a100", "rtx-a6000", "l40s", "b200"]),
       rate=st.floats(1e11, 1e13))
def test_the_dequantization_floor_never_shortens_a_gemm(m: int, n: int, k: int, bits: int,
                                                        gpu: str, rate: float) -> None:
    """Bounding a weight-only GEMM by its kernel's dequantization rate only lengthens it, and
    a slower kernel never makes it shorter."""
    from gpuarch.perf.precision import Precision
    from gpuarch.perf.roofline import Device, Gemm, op_time

    device = Device.of(CATALOG.product(gpu), Precision.BF16, 2)
    weight = (QuantFormat.INT4 if bits == 4 else QuantFormat.INT8).bytes
    name = f"mixed_input_{bits}bit_weights_s"
    op = Gemm(m, n, k, weight_element=weight, spread=True, weight_bits=bits)
    off = op_time(op, device, DEFAULT_EFFICIENCY.with_overrides({name: 0}))[0]
    fast = op_time(op, device, DEFAULT_EFFICIENCY.with_overrides({name: rate}))[0]
    slow = op_time(op, device, DEFAULT_EFFICIENCY.with_overrides({name: rate / 2}))[0]
    assert off <= fast <= slow


@pytest.mark.parametrize(("batch", "scheme", "published"), [
    (1, QuantFormat.FP8, 1.51), (8, QuantFormat.FP8, 1.40),
    (1, QuantFormat.INT8, 1.47), (8, QuantFormat.INT8, 1.32)])
def test_w8a8_speedup_at_small_batch_matches_tensorrt_llms(batch: int, scheme: QuantFormat,
                                                           published: float) -> None:
    """TensorRT-LLM's quantization blog (docs/source/blogs/quantization-in-TRT-LLM.md,
    'Performance'): LLaMA-v2-7B on one H100, 1,024 prompt and 128 output tokens, FP8 and
    INT8 SmoothQuant over FP16 at batch 1 and 8: 1.51x, 1.40x, 1.47x, 1.32x. The model gives
    1.56, 1.42, 1.56 and 1.45: W8A8 at a few rows gains what its bytes allow in that engine,
    so vLLM 0.7.2's smaller FP8 gains on Neural Magic's cards (1.33-1.54x) are its kernels',
    not a ceiling like the weight-only one's."""
    shape = preset("llama-2-7b").shape
    h100 = CATALOG.product("h100")

    def latency(quant: QuantScheme | None) -> float:
        cfg = InferenceConfig(input_len=1024, output_len=128, batch=batch, executor="cpp",
                              **({"quant": quant} if quant else {}))
        return estimate_inference(CATALOG, shape, h100, cfg).request_latency_s

    fp16 = QuantScheme(QuantFormat.FP16, QuantFormat.FP16, QuantFormat.FP16)
    w8a8 = QuantScheme(scheme, scheme, QuantFormat.FP16)
    assert latency(fp16) / latency(w8a8) == pytest.approx(published, rel=0.11)


def test_fp8_falls_back_on_a100_with_a_reason() -> None:
    """A100 has no FP8 Tensor Cores: FP8 weights are dequantized, the reason is stated."""
    e = _est(product=A100, quant=FP8)
    assert e.assumptions["weights_dequantized"]
    assert "publishes no FP8 Tensor Core peak" in e.assumptions["precision_fallback"]


@pytest.mark.parametrize(
    ("gpu", "weights", "peak_key", "dequantized"),
    [
        # Blackwell's Tensor Cores take FP4 and FP8 operands together, at the FP8 rate
        ("b200", QuantFormat.FP4, "tensor_fp8", False),
        # INT4 weights, or FP4 on Hopper, are converted to FP8 inside the GEMM
        ("b200", QuantFormat.INT4, "tensor_fp8", True),
        ("h100", QuantFormat.FP4, "tensor_fp8", True),
        ("h100", QuantFormat.INT4, "tensor_fp8", True),
        # no FP8 Tensor Cores: the 16-bit rate, with the reason
        ("a100", QuantFormat.INT4, "tensor_bf16", True),
    ],
)
def test_w4a8_runs_at_the_fp8_rate_with_4bit_weights(gpu: str, weights: QuantFormat,
                                                     peak_key: str, dequantized: bool) -> None:
    """W4A8 (TensorRT-LLM's W4A8 AWQ, and its MXFP4 x MXFP8 MoE on Blackwell): GEMMs at the
    FP8 peak where there is one, weights streamed at 4 bits (bytes per weight of the 4-bit
    format, not FP8's). At batch 1 that beats W8A8 unless the 4-bit weights are converted
    in the kernel slower than the GPU reads FP8 ones (Efficiency.mixed_input_4bit_weights_s:
    INT4 on a B200, whose 8 TB/s outruns the conversion; not on an H100)."""
    product = CATALOG.product(gpu)
    w4a8 = QuantScheme(weights, QuantFormat.FP8, QuantFormat.FP8)
    e = _est(product=product, quant=w4a8, batch=1)
    assert e.assumptions["gemm_peak_source"].startswith(peak_key)
    assert e.assumptions["weights_dequantized"] is dequantized
    assert e.assumptions["bytes_per_element"]["weights"] == weights.bytes < 1.0
    if gpu == "a100":
        assert "publishes no FP8 Tensor Core peak" in e.assumptions["precision_fallback"]
    else:
        w8a8 = _est(product=product, quant=FP8, batch=1)
        assert e.memory["weights"] < w8a8.memory["weights"]
        fp8_read = product.memory_bandwidth_bytes_s * DEFAULT_EFFICIENCY.memory  # weights/s
        if dequantized and fp8_read > DEFAULT_EFFICIENCY.mixed_input_4bit_weights_s:
            assert e.tpot_s > w8a8.tpot_s  # the conversion, not the read, sets the pace
        else:
            assert e.tpot_s < w8a8.tpot_s  # batch 1 streams the weights: 4 bits read faster


def test_fp4_runs_natively_on_blackwell_only() -> None:
    """NVFP4 uses B200's FP4 Tensor Cores; on H100 it is weight-only dequantized."""
    fp4 = QuantScheme(QuantFormat.FP4, QuantFormat.FP4, QuantFormat.FP8)
    b200 = _est(product=CATALOG.product("b200"), quant=fp4)
    assert b200.assumptions["gemm_peak_source"].startswith("tensor_fp4")
    assert _est(quant=fp4).assumptions["weights_dequantized"]


@pytest.mark.parametrize("fmt", [QuantFormat.FP4, QuantFormat.MXFP4])
def test_both_4bit_float_formats_run_natively_on_blackwell_only(fmt: QuantFormat) -> None:
    """NVFP4 and MXFP4 both use B200's FP4 Tensor Cores (and meet FP8 activations there
    without conversion, W4A8); on H100 they are dequantized. They differ only in their
    scales: one 8-bit scale per 16 weights (NVFP4, 4.5 bits) or per 32 (MXFP4, 4.25)."""
    assert QuantFormat.FP4.bytes == (4 + 8 / 16) / 8
    assert QuantFormat.MXFP4.bytes == (4 + 8 / 32) / 8
    b200 = CATALOG.product("b200")
    native = gemm_peak(b200, QuantScheme(fmt, fmt, QuantFormat.FP8))
    assert native.peak.key.value == "tensor_fp4" and not native.dequantize
    w4a8 = gemm_peak(b200, QuantScheme(fmt, QuantFormat.FP8, QuantFormat.FP8))
    assert w4a8.peak.key.value == "tensor_fp8" and not w4a8.dequantize
    hopper = gemm_peak(H100, QuantScheme(fmt, fmt, QuantFormat.FP8))
    assert hopper.dequantize and hopper.peak.fallback_reason


def test_continuous_batching_stretches_decode_with_prefills() -> None:
    """In steady-state continuous batching, the batch's prefills slow every decode step."""
    static = _est(batch=32)
    continuous = _est(batch=32, batching=Batching.CONTINUOUS)
    assert continuous.tpot_s > static.tpot_s
    assert continuous.ttft_s < static.ttft_s


def test_moe_decode_reads_only_touched_experts() -> None:
    """Mixtral at batch 1 reads 2 of 8 experts per layer, so it decodes faster than a
    dense model of its total size would."""
    mixtral = preset("mixtral-8x7b").shape
    e = _est(shape=mixtral, batch=1, gpus=2, tp=2)
    dense_time = count_params(mixtral).total * 2 / 2 / H100.memory_bandwidth_bytes_s
    assert e.tpot_s < dense_time


@pytest.mark.parametrize(("tokens", "published_us"), [(4096, 719.9), (8192, 1301.6)])
def test_fine_grained_moe_block_against_published_kernel(tokens: int, published_us: float
                                                         ) -> None:
    """FlashInfer pull request #5332 (https://github.com/flashinfer-ai/flashinfer/pull/5332,
    description, per-tensor FP8 table, CUTLASS column, "Qwen" rows) times its port of
    TensorRT-LLM's CUTLASS fused MoE at the Qwen3.6-35B-A3B shape (256 experts, top-8,
    hidden 2,048, expert FFN 512) on SM90; the same author's #5099 names the GPU, H100 NVL,
    for these shapes. Without ``moe_gemm_fine`` the published block is slower than the
    model's whole expert layer apart from attention and the dense projections (expert GEMMs,
    MoE floor and every memory-bound operator: permutation, activation, norms); with it the
    block lies between the expert GEMMs plus floor and that upper bound. Compared without
    the H100 NVL board's sustained fraction (``sibling_rates`` off, as for a calibration of
    the card: the factor is from sustained MLPerf runs, this is a kernel's timed loop at an
    unstated power setting); with it the lower end at 8,192 tokens is 1,400 us, 7.5% above
    the published 1,302: the two H100 NVL sources disagree by that much."""
    shape = dataclasses.replace(preset("qwen3-30b-a3b").shape, name="qwen3.6-35b-a3b-like",
                                experts=256, moe_ffn_hidden=512)
    fp8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)
    cfg = InferenceConfig(input_len=tokens, output_len=2, batch=1, gpus=1, quant=fp8,
                          max_num_tokens=tokens)
    nvl = CATALOG.product("h100-nvl-94gb")

    def bracket(factor: float) -> tuple[float, float]:
        eff = DEFAULT_EFFICIENCY.with_overrides({"moe_gemm_fine": factor, "sibling_rates": 0})
        runner = ReplicaRunner(CATALOG, shape, nvl, cfg, None, eff)
        runner.parts = {}
        runner.layer(tokens, 1, tokens, tokens, runner.experts_touched(tokens), moe=True,
                     prefill=True)
        parts = {k: v * 1e6 for k, v in runner.parts.items()}
        low = parts["expert_gemms"] + parts["overhead"]
        return low, low + parts["memory_bound"]

    assert bracket(1.0)[1] < published_us
    low, high = bracket(DEFAULT_EFFICIENCY.moe_gemm_fine)
    assert low < published_us < high


def test_fine_grained_factor_applies_to_reduced_precision_experts_only() -> None:
    """moe_gemm_fine slows a fine-grained MoE's FP8 expert GEMMs, not its BF16 ones (the
    op check's BF16 grouped GEMMs ran faster than moe_gemm alone), nor Mixtral's."""
    qwen = preset("qwen3-30b-a3b").shape
    fp8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)
    bf16 = QuantScheme(QuantFormat.BF16, QuantFormat.BF16, QuantFormat.BF16)

    def expert_time(shape: object, quant: QuantScheme, factor: float) -> float:
        eff = DEFAULT_EFFICIENCY.with_overrides({"moe_gemm_fine": factor})
        cfg = InferenceConfig(input_len=4096, output_len=2, batch=4, gpus=2, tp=2,
                              quant=quant)
        e = estimate_inference(CATALOG, shape, H100, cfg, efficiency=eff)
        return float(e.prefill_parts_s["expert_gemms"])

    assert expert_time(qwen, fp8, 0.5) > expert_time(qwen, fp8, 1.0)
    assert expert_time(qwen, bf16, 0.5) == expert_time(qwen, bf16, 1.0)
    mixtral = preset("mixtral-8x7b").shape
    assert expert_time(mixtral, fp8, 0.5) == expert_time(mixtral, fp8, 1.0)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"gpus": 6, "tp": 4}, r"--gpus: 6 is not divisible by TP x PP = 4 x 1"),
        ({"tp": 3, "gpus": 3}, r"--tp: 3 does not divide the 32 heads"),
        ({"ep": 2, "gpus": 2}, r"--ep: expert parallelism needs a mixture-of-experts model"),
        ({"quant": QuantScheme(QuantFormat.BF16, QuantFormat.FP8)},
         r"--activation-precision: fp8 is narrower than --weight-precision bf16"),
        ({"quant": QuantScheme(QuantFormat.INT8, QuantFormat.FP8)},
         r"--activation-precision fp8 needs --weight-precision fp8"),
        ({"quant": QuantScheme(QuantFormat.INT4, QuantFormat.INT8)},
         r"--activation-precision int8 needs --weight-precision int8"),
        ({"batch": 0}, r"--batch: expected an integer >= 1 or 'max'"),
        ({"max_num_tokens": 0}, r"--max-num-tokens: expected an integer >= 1, got 0"),
        # past int64 a disaggregated estimate's arrays overflowed
        ({"max_batch_size": 10**20, "batching": Batching.CONTINUOUS},
         r"--max-batch-size: expected at most 2,147,483,647 \(an engine holds it as a 32-bit"),
        ({"batch": 2**31}, r"--batch: expected at most 2,147,483,647"),
    ],
)
def test_invalid_configs(kw: dict, message: str) -> None:  # type: ignore[type-arg]
    """Invalid combinations fail with the flag named."""
    with pytest.raises(GpuarchError, match=message):
        _est(**kw)


def test_tp_must_divide_the_mlp_and_a_small_vocabulary_is_padded() -> None:
    """As in training: a TP size that does not divide the MLP's hidden units is refused
    naming --ffn-hidden (the engines' merged column-parallel layers refuse it), and a
    vocabulary of fewer columns than TP ranks is padded to one a rank instead of dividing
    by a zero-wide LM head."""
    with pytest.raises(GpuarchError, match=r"--tp: 4 does not divide the MLP's 14,?334 "
                                           r"hidden units \(--ffn-hidden\)"):
        _est(dataclasses.replace(LLAMA_8B, ffn_hidden=14334), gpus=4, tp=4)
    tiny_vocab = _est(dataclasses.replace(LLAMA_8B, vocab=3), gpus=4, tp=4)
    assert 0 < tiny_vocab.tpot_s < _est(gpus=4, tp=4).tpot_s


def test_result_keys() -> None:
    """The JSON keys other tools script against (issue #4)."""
    doc = _est().as_json()
    for key in ("ttft_s", "tpot_s", "request_latency_s", "batch", "output_tokens_per_s",
                "output_tokens_per_s_per_gpu", "memory_per_gpu_gib", "fits_in_memory",
                "max_batch", "bottleneck", "assumptions"):
        assert key in doc
    assert set(doc["memory_per_gpu_gib"]) == {"weights", "kv_cache", "activations", "other",
                                               "total"}


def test_inference_validation_data_is_cited() -> None:
    """At least 20 published points, two GPU generations, two precisions, each cited."""
    from gpuarch.validation.inference import load_inference_points

    points = load_inference_points()
    assert len(points) >= 20
    chips = {CATALOG.chip_of(CATALOG.product(p.get("gpu"))).architecture for p in points}
    assert len(chips) >= 2
    assert len({p.get("weight_precision") for p in points}) >= 2
    for p in points:
        assert p.source_url.startswith("https://") and p.where


def test_inference_validation_does_not_regress() -> None:
    """gpuarch validate inference: bounds pin the current fit so a change that worsens it
    fails. The goal (issue #4) is 15% mean and none beyond 35%; see
    docs/performance-model.md for where the model stands. (NVLink SHARP all-reduces for
    tensor parallelism on NVSwitch systems, and the shared refit after them, took the mean
    from 16.9% to 15.7%, the fitted figures from 10.2% to 10.0% and the v0.17 table from
    7.2% to 7.4%; the attention-DP prefill wait then took it to 14.8%; activations held for
    the engine's token budget, gathered under attention data-parallel, with trtllm-bench's
    own limits for the runs it chose them for, to 14.7%, Maverick from 19.3% to 17.3%; the
    fused MoE block's measured floor per expert layer, nothing refitted, to 14.0%, beyond
    35% 41 -> 35, Maverick 16.8%. Eight MLPerf Offline rows, nothing refitted, with
    pipeline stages serving one micro-batch each: 14.2% over 433, 14.0% over the 430 not
    on B300, whose NVFP4 runs at its FP8 rate for want of a dense FP4 peak; the five
    others 6.2%. Four MLPerf DeepSeek-R1 rows: +12% and +23% on v6.0/v6.1 software, +104%
    and +108% on v5.1's: 14.6% over 437; with their outputs' spread (output_len_cv 1.25,
    in-flight batching holding long answers longer) -32% to +26%: 14.3%. HGX B300's FP4 at
    GB300's dense FP4 rate scaled by their FP8 peaks (13.5 PFLOPS, not its FP8 rate): the
    three B300 MLPerf rows from -42..-47% to +7%, +14% and -11%, all 437 14.1%, beyond 35%
    38 -> 35. Three MLPerf v6.0 DeepSeek-R1 runs on 8 B300, entered after that as a test of
    it, read -35% to -40%, like the v6 software's GB200/GB300 runs (-30%, -31%); with the
    runs' attention-DP balancing (adp_balance) on every MLPerf DeepSeek-R1 row: 14.2% over
    440, 91.4% within 35%. Two more MLPerf v6.0 runs on 8 B300, nothing refitted: GPT-OSS
    120B +0.7%, Llama 3.1 8B +21.6%: 14.2% over 442. FP8 context attention on the seven
    MLPerf Llama rows whose configs enable it (use_fp8_context_fmha): 405B -11%/+10%/-6% ->
    -2.5%/+15%/+0.9%, 8B +25%: 14.2%, median 8.9%. Fine-grained MoE expert GEMMs at 0.7 of
    moe_gemm (moe_gemm_fine, set from FlashInfer's published CUTLASS MoE timings, not
    fitted): 13.5% over 442, median 9.3%, 93.0% within 35% (38 -> 31 beyond); fine-grained
    on Hopper 21.0% -> 17.0%, on Blackwell 23.7% -> 23.1%; the B300 GPT-OSS 120B MLPerf row
    +0.7% -> -10.8%. NVLink's bus share measured per group size (nvlink_bus 0.81 x (1 - 0.86
    / ranks), fitted on NCCL's measured collectives; 0.80 for any group before), nothing
    refitted: 13.6%, median 9.4%, 93.2% within 35% (31 -> 30 beyond); with NCCL's latencies
    scaled as measured per architecture and the pair refitted with them (0.82 x (1 - 0.84 /
    ranks)): 13.6%, median 9.3%, 93.0% within 35% (31 beyond: Qwen3-235B FP8 on 8 H200 at
    500/2000 +34.9% -> +35.2%). The short-K penalty scaled by the format's peak over the
    16-bit one, nothing refitted: 13.4%, 29 beyond; NVFP4 experts at 0.7 of the fine-grained
    rate (moe_gemm_nvfp4, set from TensorRT-LLM's measured MoE layers): 13.2%, median 8.9%,
    94.1% within 35% (26 beyond); the four non-B300 MLPerf DeepSeek-R1 rows 26.7% -> 24.2%
    on average, CoreWeave's GB200 run -31.6% -> -35.6%. DeepSeek's latent attention in
    decode at its measured kernel's rate (mla_decode_attention 0.65 of the 16-bit peak,
    0.5 of the FP8 peak over an FP8 cache on Blackwell, set from aiconfigurator's MLA
    generation timings; 0.329 of the 16-bit peak before): 13.1%, median 8.5%, 93.9% within
    35% (27 beyond): the v6 MLPerf DeepSeek-R1 runs -31..-42% -> +1..+8%, the v5.1 ones and
    the mid-2025 DeepSeek-R1 guide's, older software, faster than published. A prompt's
    attention at TensorRT-LLM's measured context-attention rate (context_attention 0.45 of
    the 16-bit peak, 0.28 of the FP8 peak with FP8 context FMHA, from aiconfigurator's
    timings; the shared training-fitted attention 0.329 before): 12.9%, median 8.4%, 94.3%
    within 35% (25 beyond). GPT-J's rows with its GELU MLP (a gated one before, 31% more
    weights), nothing refitted: 12.8%, median 8.3%. A prompt's attention as its math at 0.59
    of the 16-bit peak (0.41 of the FP8 one) plus 0.55 ns per query row and head, set from
    the same timings (mean |ln| over them 0.232 -> 0.059), nothing refitted: 12.8% (12.83 ->
    12.79), median 8.7%, 25 beyond 35%: long prompts faster, short ones' attention slower;
    with the five serving parameters refitted either way the cross-validated error is
    10.9% for both. Blackwell's own MoE block floor (45 us, TensorRT-LLM's measured B200 and
    GB200 layers; 26.6 us before) and the NVFP4 expert factor re-set by its rule at that
    floor (0.70 -> 0.82), both from the kernels, nothing refitted: 12.86% (12.79 before),
    median 8.7%, 25 beyond 35%; Qwen3-30B-A3B NVFP4 on B200 and GB200 4-6 points closer,
    the v5.1 MLPerf DeepSeek-R1 runs further off (+88.7% the worse), the B300 GPT-OSS 120B
    row -12.7% -> -13.8%. TensorRT-LLM release 1.2's overview, 130 figures on B200, B300,
    GB200, GB300 and H200 taking the options of the 03e27c7 rows, nothing refitted: 19.5% on
    them (the beta B300 and GB300 columns 21.5%), all 572 figures 14.4%, median 9.9%, 91.3%
    within 35% (50 beyond). Qwen3-235B-A22B-FP4's rows with the 8-bit KV cache (and FP8
    context FMHA) that the published figures now require (15 cells beyond any 16-bit engine):
    its 39 figures 30.4% -> 11.3%, none beyond 35% (21 before), all 572 13.1%, median 9.4%,
    94.9% within 35% (29 beyond); the 442 before release 1.2 12.4%, 19 beyond. MLPerf
    Inference v4.0 and v4.1 Offline runs of Llama 2 70B and Mixtral 8x7B on Hopper, 32
    figures, nothing refitted: v4.1's 18 5.2%, v4.0's 14 23.6% (the same DGX H100 ran 12%
    faster a round later at the same batch and layout; 4-GPU boards and PCIe cards +33..+57%),
    all 604 13.1%, median 9.3%, 94.5% within 35% (33 beyond). Five more MLPerf runs of v5.0
    and v6.0 (-11.0% to +13.2%): 609, 13.0%, 33 beyond. Quanta's v4.0 H100 PCIe server
    without NVLink bridges, over its PCIe Gen4 links (gpu_link pcie4): -2.0%; 610, 13.0%.
    73 more MLPerf Offline runs, partners' v5.0 (34) and v5.1 (15), v6.0 partners' and v6.1
    (24), nothing refitted: 683, 12.8%, median 8.5%, 94.4% within 35% (38 beyond: the PCIe
    H100 and H100 NVL cards +59..+70%, the 96 GB GH200 +27%, Google's GB200 NVL72 DeepSeek-R1
    +78%). GPT-OSS's W4A8 MXFP4 x MXFP8 experts on Blackwell at their measured layers' rate
    (moe_gemm_mxfp4_fp8 1.93, set from TensorRT-LLM's MoE layers, nothing refitted): the 67
    GPT-OSS figures on B200, B300, GB200 and GB300 18.2% -> 13.6% (signed -15.6% -> -7.2%),
    all 683 12.4%, median 8.2%, 38 beyond 35% either way. DeepSeek-R1's own block-scaled
    FP8 checkpoint on H200 with its experts at the block-scaled rate (moe_gemm_fp8_block
    0.75, set from TensorRT-LLM's measured layers, nothing refitted): its 1,000/1,000 and
    1,024/1,024 rows +57% and +49% -> +40% and +33%, all 683 12.3%, 37 beyond 35%. The
    Python executor's host time per request in proportion to the expert layers (0.816 us
    each, the same measurement over GPT-OSS-120B's 36; 29.4 us per request for every model
    before, dense ones included), nothing refitted: 11.7%, median 8.0%, 95.6% within 35%
    (30 beyond). The MoE all-to-all as the one-shot kernels it is (a fixed 11 us, not a
    ring's 10 us per peer, fitted on TensorRT-LLM's measured GB200 kernels; on 8-GPU boards
    TensorRT-LLM's DeepEP path, 67 and 38 us, measured) with its combine in 16 bits: 11.8%,
    median 8.0%, 95.6% within 35% (30 beyond). The rest of TensorRT-LLM 0.9's tables, 64
    figures (69 cells, five excluded as beating a read of the weights), nothing refitted:
    17.4%, median 9.8%, 8 beyond 35% (Mistral 7B on H100 and H200 +45..+115%); all 751
    12.3%, median 8.1%, 94.9% within 35% (38 beyond), the 687 before them unchanged. Its
    GPT-J 6B and Falcon 180B cells, given by architecture with parallel attention (48), the
    H200 launch blog's three missing rows and the H100-vs-A100 blog's two first tokens at
    batch 1, nothing refitted: 804, 13.1%, median 8.4%, 94.4% within 35% (45 beyond: Falcon's
    long outputs on Hopper +105..+155%, as Mistral's; v0.5's Llama-2-70B at 128/2048 +171%).
    The other 297 cells of TensorRT-LLM 0.17's table (seven more lengths, the GH200 column;
    Mistral with every position attended, as the doc's engines ran it), nothing refitted:
    9.0% on them; all 1,101 12.0%, median 7.9%, 95.5% within 35% (49 beyond). The H200
    launch blog's TensorRT-LLM 0.5 with its multi-head decode kernel reading Llama-2-70B's
    KV cache once per query head (decode_kv_reads "per-query-head"), nothing refitted: its
    four Llama-2-70B rows +17..+171% -> -6.6..+5.8%; all 1,101 11.8%, median 7.8%, 95.6%
    within 35% (48 beyond). The multi-head kernel's repeated reads from L2 at a fitted
    4.5 TB/s (multihead_decode_read_bytes_s; DRAM reads the cache once), and TensorRT-LLM
    0.9's Mistral, Mixtral and Falcon cells with that kernel (its XQA takes groups of 8 or
    1 only): those 49 throughput figures 0.268 -> 0.098 mean |ln|; all 1,101 10.9%, median
    7.5%, 96.5% within 35% (38 beyond). The embedding table and LM head in 16 bits in a
    quantized model (Model Optimizer leaves the LM head unquantized), and v0.17's KV cache
    at trtllm-bench's 0.9 of the memory the weights leave, nothing refitted: 10.5%, median
    7.3%, 96.8% within 35% (35 beyond). The 03e27c7 and release 1.2 DeepSeek rows with the
    attention-DP balancing their docs' llm_options set (attention_dp_config enable_balance):
    the long-prompt rows -17..-29% -> -4..-11%, the short ones 6-9 points faster (H200's and
    GB300's 1024/1024 cross 35%); all 1,101 10.4%, median 7.2%, 96.6% within (37 beyond).)"""
    from gpuarch.validation.inference import validate_inference

    s = validate_inference(CATALOG)
    # ML.ENERGY v3's vLLM 0.11.1 runs (328 output rates, docs/performance-model.md, "vLLM
    # as ML.ENERGY ran it") are held to their own bounds and left out of the rest: the
    # dense models' 88 H100 runs the prompts' mean length was fitted on 7.0%, the 89 MoE
    # and hybrid H100 runs 25.2% (vLLM's block-FP8 experts slower than the model; 25.3%
    # before an expert-parallel step waited for its busiest rank, 22.2% before the engines'
    # all-reduce kernels made their TP 2-8 steps shorter), the 151 B200 runs 45.6% (vLLM
    # 0.11.1 on B200 below what the GPU allows from 16 sequences up, an H100's rate or less
    # in places; 42.3% before the all-reduce kernels, 43.2% before that)
    ml = [r for r in s.rows if r.source == "mlenergy-v3-lm-arena-chat"]
    fitted = [abs(r.error) for r in ml if not r.out_of_sample]
    h100 = [abs(r.error) for r in ml if r.out_of_sample and r.gpu == "h100-sxm5-80gb"]
    b200 = [abs(r.error) for r in ml if r.gpu == "b200"]
    assert (len(fitted), len(h100), len(b200)) == (88, 89, 151)
    assert sum(fitted) / 88 <= 0.075 and sum(h100) / 89 <= 0.253 and sum(b200) / 151 <= 0.457
    s = dataclasses.replace(s, rows=tuple(r for r in s.rows
                                          if r.source != "mlenergy-v3-lm-arena-chat"))
    # hybrid Mamba-2 serving (Nemotron 3 Nano's 12 vLLM and SGLang figures and Nemotron 3
    # Super's SGLang one, entered out of sample when hybrid serving was first compared) is
    # held to its own bound: the vLLM 0.16 sweep within 17% but at one point, the SGLang
    # cookbooks' +22%, +69% and +74%, the vLLM recipe's +50% (docs/performance-model.md,
    # "Hybrid Mamba-2 models in serving"); the bounds below are the rest's, unchanged
    from gpuarch.validation.inference import load_inference_points
    hybrid_ids = {p.id for p in load_inference_points()
                  if "nemotron-3-" in str(p.get("preset", ""))}
    hybrid = [abs(r.error) for r in s.rows if r.id in hybrid_ids]
    assert len(hybrid) == 13 and sum(hybrid) / len(hybrid) <= 0.241  # 24.0% since varying
    # answers free their slots one by one (the SGLang rows' uniform lengths entered); 35.5%
    # before, 36.5% before that
    # Llama 4 Scout's 38 figures of TensorRT-LLM 1.0's overview (out of sample, entered when
    # the preset came) are held to their own bound too: 17.9%, too fast on H100 (+19..+43%
    # but its prompt-heavy rows), on most H200 rows and on Blackwell's decode-heavy rows
    # (GB200's 1000/1000 +70%, a cell below the same table's B200 one); 20.0% since
    # TensorRT-LLM's PyTorch backend took its measured fixed time a step (0.58 ms, not the
    # fitted 1.51 ms), the fast rows faster
    scout = [abs(r.error) for r in s.rows if "llama-4-scout" in r.id]
    assert len(scout) == 38 and sum(scout) / len(scout) <= 0.201
    # Neural Magic's single-stream vLLM 0.7.2 tables of its INT8, INT4 and FP8 checkpoints
    # (144 request latencies of four cards, out of sample, the first INT8 and datacenter INT4
    # figures) are held to theirs: 15.4% (14.7% before the engines' all-reduce kernels made
    # the TP 2 rows' steps shorter), the quantized checkpoints on A100 and H100 slower
    # than the model (INT4 weight-only on H100 -14..-27%, -37..-47% before a few rows'
    # dequantization rate bounded a weight-only GEMM, 17.0% then), the 10,240-token prompts
    # slower on A100 (18.2% over the first three cards' 108 before the eager decode steps,
    # 16.8% since; the Qwen-7B card's 36, entered after them, 17.7%)
    nm = [abs(r.error) for r in s.rows if r.id.startswith("nm-vllm072-")]
    assert len(nm) == 144 and sum(nm) / len(nm) <= 0.155
    # the SGLang cookbook's MiniMax-M2.5 runs (9, out of sample, entered with the preset):
    # its B200 rows slower than its own H100 ones (a Blackwell MoE path the model does not
    # price), the H100 rows +9/+18/+20% (SGLang's prefill steps between decode steps, not
    # all priced); docs/performance-model.md, "MiniMax-M2.5 in SGLang's cookbook"
    # Qwen3-Next's three (out of sample, entered with the Gated DeltaNet models): the SGLang
    # cookbook's 0.5.6 runs on 8 B200 +63% at one request and +488% at 100 (+24% and +433%
    # before the engines' all-reduce kernels; its measured 50.9 ms TPOT against the model's
    # 9.6 then), the vLLM recipe's 4 B200 run +80% (+62% before)
    # (docs/performance-model.md, "Gated DeltaNet hybrids")
    qwen3_next = [r.error for r in s.rows if r.source in ("sglang-cookbook-qwen3-next",
                                                            "vllm-recipe-qwen3-next")]
    assert len(qwen3_next) == 3 and all(0.2 < e < 4.9 for e in qwen3_next)
    # at eight requests on H200 (SGLang's fused-MoE-config pull request #10404, TP 2/4/8,
    # out of sample) the same model read -2% to -6% until the engines' all-reduce kernels
    # (2026-12-07), +11%, +20% and +29% since: the ring's 20-25 us an all-reduce had stood in
    # for what its 64-wide expert slices at TP 8 cost ("The engines' all-reduce kernels")
    sglang_pr = [r.error for r in s.rows if r.source == "sglang-pr-10404"]
    assert len(sglang_pr) == 3 and all(0.1 < e < 0.3 for e in sglang_pr)
    assert sglang_pr == sorted(sglang_pr)  # TP 2, 4, 8: the wider, the faster the model
    minimax = [abs(r.error) for r in s.rows if r.source == "sglang-cookbook-minimax-m2.5"]
    assert len(minimax) == 9 and sum(minimax) / len(minimax) <= 0.876  # 87.5% since the
    # engines' all-reduce kernels (TEP 8 at a few requests), 58.0% before
    # the GPU MODE hackathon's vLLM 0.19.0 baseline of Qwen3.5-35B-A3B on 8 H200 (2, out of
    # sample, the first Qwen3.5 serving figures; prompt and output tokens a second): +20% at
    # one request, +38% at two since the engines' all-reduce kernels, -12.0% and +2.6%
    # before (docs/performance-model.md, "Gated DeltaNet hybrids", "The engines' all-reduce
    # kernels")
    gpumode = [r.error for r in s.rows if r.source == "gpumode-paris-2026-vllm-baseline"]
    assert len(gpumode) == 2 and all(0.15 < e < 0.4 for e in gpumode)
    # the rest of LMDeploy's A100 table, entered after the fit: 17.1% over its 180 figures
    # (14.4% before the engines' all-reduce kernels: its TP 4 decode, NCCL's all-reduce
    # since TurboMind's own takes 8 ranks only, now 5-22% fast), the eleven runs the model
    # finds too large to hold at once reading worst (docs/performance-model.md, "LMDeploy's
    # whole A100 table")
    lmdeploy = [r.error for r in s.rows if r.source == "lmdeploy-a100-fp16-v0.1.0a1"]
    assert len(lmdeploy) == 180 and sum(map(abs, lmdeploy)) / 180 <= 0.172
    # NIM's Llama 3.3 70B levels 150-250, saturated, entered after the fit: 11.2% over the
    # page's 27 figures ("NIM's saturated levels")
    nim = [r.error for r in s.rows if r.source == "nim-benchmarking-perf"]
    assert len(nim) == 27 and sum(map(abs, nim)) / 27 <= 0.115
    # InferenceMAX's nightly run of 2026-01-02 (vLLM 0.13.0, GPT-OSS-120B on H100, H200 and
    # B200 at TP 1-8), entered after the fit: 10.8% over its 300 figures since the engines'
    # all-reduce kernels (21.1% before, the model's decode step too slow the wider the TP;
    # docs/performance-model.md, "InferenceMAX's vLLM 0.13 runs")
    imax = [r.error for r in s.rows if r.source == "inferencemax-20667906037"]
    assert len(imax) == 300 and sum(map(abs, imax)) / 300 <= 0.109
    # InferenceMAX's TensorRT-LLM 1.2.0rc2 run (GPT-OSS-120B on B200 at TP 1-8, the TRTLLM MoE
    # backend; 44 results, 88 figures, entered 2026-12-07 after the fit): 33.4%, every
    # figure slower in the model than measured, the more so at few requests (a decode step of
    # 2.2-2.7 ms at TP 8 and 4-8 requests, the model's fixed costs alone about that) and 15-30%
    # at TP 1 (docs/performance-model.md, "InferenceMAX's TensorRT-LLM 1.2.0rc2 run"); 26.2%
    # with the TRTLLM backend's own measured MoE floor (17 us, not 26.6 us); 7.3% with the
    # PyTorch backend's measured fixed time a step (0.58 ms, not 1.51 ms): 62 of the 88 still
    # slower, a median -3.7% on rates, -11% at 64 requests
    trt = [r for r in s.rows if r.source == "inferencemax-20308883467"]
    assert len(trt) == 88 and sum(abs(r.error) for r in trt) / 88 <= 0.074
    from gpuarch.validation.stats import rate_error
    assert sum(rate_error(r) < 0 for r in trt) >= 60
    assert -0.06 < statistics.median(rate_error(r) for r in trt) < 0.0
    # InferenceMAX's SGLang 0.5.6 run (DeepSeek-R1-0528 on B200, FP8 and NVFP4, and H200, FP8;
    # 49 results, 98 figures, entered 2026-12-07 after the fit, less the 14 results whose
    # requests stalled some 70 s for a first token): 9.8%, B200 7.4%, H200 15.5%, the H200's
    # four-request decode step some 3-4 ms longer than modelled (docs/performance-model.md,
    # "InferenceMAX's SGLang 0.5.6 DeepSeek-R1 run")
    sgl = [r for r in s.rows if r.source == "inferencemax-20621824084"]
    assert len(sgl) == 98 and sum(abs(r.error) for r in sgl) / 98 <= 0.099
    b200 = [abs(r.error) for r in sgl if r.gpu == "b200"]
    assert len(b200) == 68 and sum(b200) / 68 <= 0.075
    # InferenceMAX's Dynamo run of GPT-OSS-120B on GB200, disaggregated (34 results, 68
    # figures, entered 2026-12-07 after the fit; the first disaggregated rows): 15.3%, its
    # tensor-parallel decode pools 10.0%, its attention-data-parallel ones 21.9% (the model's
    # GB200 prefill of GPT-OSS faster than the run's saturated prefill GPUs;
    # docs/performance-model.md, "Disaggregated serving, measured"); 14.9% and 9.5% since
    # the client's concurrency is a closed loop through both pools (2026-12-08)
    dis = [r for r in s.rows if r.source == "inferencemax-20764588467"]
    assert len(dis) == 68 and sum(abs(r.error) for r in dis) / 68 <= 0.149
    assert all(r.batching.startswith("disaggregated ") for r in dis)
    tp_pools = [abs(r.error) for r in dis if "dep" not in r.id]
    assert len(tp_pools) == 38 and sum(tp_pools) / 38 <= 0.095
    # InferenceMAX's Dynamo run of DeepSeek-R1 (NVFP4) on GB200, disaggregated (45 results,
    # 90 figures, entered 2026-12-08 after the fit; 21 with MTP at the acceptance their own
    # chunked streaming gives): 29.0%; decode workers of TP 8 18.5% (without MTP 15.6%:
    # throughput +20%, TPOT -10% at the signed median), attention-data-parallel decode pools
    # (DEP 8, 16, 32) 42%, their time per token 41-63% short (a DEP 32 step at 7 sequences a
    # rank 8.7 ms modelled, 15.4 ms measured; docs/performance-model.md, "Disaggregated
    # serving measured again: DeepSeek-R1 on GB200")
    r1 = [r for r in s.rows if r.source == "inferencemax-20321908209"]
    assert len(r1) == 90 and sum(abs(r.error) for r in r1) / 90 <= 0.291
    tp8 = [abs(r.error) for r in r1 if "-d1xdep" not in r.id]
    assert len(tp8) == 50 and sum(tp8) / 50 <= 0.185
    plain = [abs(r.error) for r in r1 if "-d1xdep" not in r.id and "mtp" not in r.id]
    assert len(plain) == 28 and sum(plain) / 28 <= 0.157
    dep_tpot = [r.error for r in r1 if "-d1xdep" in r.id and r.metric == "tpot_s"]
    assert len(dep_tpot) == 20 and all(-0.65 < e < -0.40 for e in dep_tpot)
    # varying answers free their slots one by one (80.2% as entered)
    s = dataclasses.replace(s, rows=tuple(r for r in s.rows if r.id not in hybrid_ids
                                          and not (r.source in ("lmdeploy-a100-fp16-v0.1.0a1",
                                                                "nim-benchmarking-perf")
                                                   and r.out_of_sample)
                                          and "llama-4-scout" not in r.id
                                          and not r.id.startswith("nm-vllm072-")
                                          and r.source != "sglang-cookbook-minimax-m2.5"
                                          and r.source != "gpumode-paris-2026-vllm-baseline"
                                          and r.source != "inferencemax-20667906037"
                                          and r.source != "inferencemax-20308883467"
                                          and r.source != "inferencemax-20621824084"
                                          and r.source != "inferencemax-20764588467"
                                          and r.source != "inferencemax-20321908209"
                                          and r.source not in ("sglang-cookbook-qwen3-next",
                                                               "vllm-recipe-qwen3-next")))
    assert len(s.rows) >= 1101
    # 10.18% since TensorRT-LLM's PyTorch backend took its measured fixed time a step
    # (0.58 ms, not the fitted 1.51 ms: its large-batch overview rows a little fast);
    assert s.mean_abs_error <= 0.1020  # 9.92% since the engines' all-reduce kernels (the
    # in-sample LMDeploy TP 4 rows, TensorRT-LLM's min-latency DeepSeek-R1 on B200, SGLang's
    # Qwen3-Next at TP 2-8 and Gemma 4 at TP 2 now fast); 9.73%; 9.74% since an
    # expert-parallel decode step waits for its busiest rank (10.02% before); 10.02% since a
    # stream's prefill passes hold the
    # prompts that arrive during a step and a pass (10.09% before: whole-budget passes once
    # a cycle); 10.13% over 1,101 figures since a weight-only GEMM
    # of few rows spreads over every SM (10.15% before, since the HGX H100 4-GPU
    # board's pair links; 10.21% before, since H100 PCIe and NVL
    # sustain their boards' measured fraction of the peak; 10.32% before, since an offline
    # run's prompts are admitted a few an iteration; 10.42% before that; 10.48% before the 03e27c7
    # and release 1.2 DeepSeek rows took their docs' attention-DP balancing, 10.86% before
    # the 16-bit LM head and v0.17's KV share of free memory, 11.78% before the multi-head
    # kernel's L2 reads, 11.97% before v0.5's per-query-head reads; 13.06% over 804, 12.25%
    # over 751, 11.78% over the 687 before the rest of TensorRT-LLM 0.9's tables)
    # 7.22% since a GEMM near the ridge carries its memory stream's share (gemm_overlap;
    # 10.13% -> 10.10% mean, 97.18% -> 97.64% within), 7.14% before, 7.22% before the
    # staggered admission
    # 7.27% since a stream's prefill passes hold the prompts arriving during a step and a
    # pass (pipelined engines' micro-batches each theirs); 7.47% since TensorRT-LLM's PyTorch
    # backend took its measured step
    assert s.median_abs_error <= 0.0750
    assert s.by("metric")["tpot_s"] <= 0.077  # 7.6% since the engines' all-reduce kernels
    # (LMDeploy's TP 4 decode fast), within 7% before
    assert s.share_within >= 0.971  # 97.18% (97.09% before the weight-only spread, 97.00%
    # before the 4-GPU board, 96.82%
    # before the boards' factor, 96.64%
    # before the staggered admission, 96.82% before the balancing)
    # MLPerf DeepSeek-R1 on v6 software (GB200, GB300 and three B300 runs) within 10% since
    # the latent attention in decode runs at its measured kernel's rate (-31..-42% before;
    # within 7% until Blackwell's MoE floor and NVFP4 factor, -0.7..+9.3% since), and the
    # eight of other submitters entered after (GigaComputing, Nebius x5, QCT, on B200, B300
    # and GB300: -5.7..+5.6%; -8.4..+11.1% since the all-to-all is its measured kernels,
    # whose combine returns 16 bits, TensorRT-LLM's DeepEP path on the 8-GPU boards); v5.1's
    # two runs, older software, +69% and +89% (+12%
    # and +18% before; +70% and +103% with the measured all-to-all), and Google's v6.0
    # GB200 NVL72 run, as slow as those, +78% (+91%)
    r1_v6 = {r.id: r.error for r in s.rows if r.source.startswith("mlperf-inference-v6")
             and r.model == "deepseek-v3"}
    google = r1_v6.pop("mlperf-inf60-gb200-deepseek-r1-fp4-google")
    # (B200 Nebius -13.5% since a GEMM near the ridge carries its memory stream's share,
    # gemm_overlap, and the NVFP4 experts' rate set again with it; within 12% before)
    # (B200 Nebius -14.2% since the drain's steps are costed at the batch still running)
    # (all twelve -10.7..+11.5%, 4.0% on average, since they are entered with their configs'
    # max_util admission; 9.5% on average under no-evict admission, the B200 runs -14%)
    # (B300 Cisco -12.7% since waiting prompts are admitted as varying answers free their
    # slots, a few a pass, not in whole budgets: -10.8% before; the twelve's mean 3.97%,
    # 3.93% before)
    assert len(r1_v6) == 12 and max(map(abs, r1_v6.values())) <= 0.13
    assert sum(map(abs, r1_v6.values())) / len(r1_v6) <= 0.045
    r1_v51 = [r.error for r in s.rows if r.source == "mlperf-inference-v5.1"
              and r.model == "deepseek-v3"]
    # (+59%, +79% and +69% since gemm_overlap; +69%, +89% and +78% before; +54%, +72% and
    # +62% since the drain's steps are costed at the batch still running; +66%, +87% and
    # +76% under their configs' max_util admission, which holds bigger batches)
    assert len(r1_v51) == 2 and all(0.5 < e < 1.05 for e in [*r1_v51, google])
    # the PCIe-card and 96 GB GH200 runs, which the model reads far too fast where they are
    # compute-bound (docs/performance-model.md, "MLPerf Inference: the partners' runs")
    power_limited = ("h100-nvl-94gb", "h100-pcie-80gb", "gh200-96gb")
    mlperf_llama = [abs(r.error) for r in s.rows if r.source.startswith("mlperf-inference-v")
                    and r.source[-3:] not in ("4.0", "4.1") and r.gpu not in power_limited
                    and r.gpu != "b300" and r.model.startswith("llama")]
    # five, then five more (NVIDIA's v5.0 Llama 2 70B on one B200 and one GH200, 405B on 8
    # H200 and 8 B200; Cisco's v6.0 Llama 3.1 8B on four H200 NVL): 6.9% -> 8.1%; then the
    # partners' v5.0, v5.1 and v6.0 runs on H100, H200, H200 NVL, GH200, B200 and GB200: 59
    # at 6.4%, none beyond 16%; 6.6% since the LM head and embedding table are 16-bit; 7.0%
    # since a decode GEMM near the ridge carries its memory stream's share (gemm_overlap: the
    # group, already low, -5.2% -> -5.7% on average); 7.5%, at most 16.6%, since a
    # stream's prefill passes hold only the prompts that arrive during a step and a pass
    # (signed -5.4% -> -6.8%: these later rounds' engines run bigger passes than that,
    # while v4.0's and v4.1's rows come closer, below)
    assert len(mlperf_llama) == 59 and sum(mlperf_llama) / len(mlperf_llama) <= 0.076
    assert max(mlperf_llama) <= 0.17
    slow = [r.error for r in s.rows if r.gpu in power_limited and r.source.startswith("mlperf")
            and r.source[-3:] != "4.0"]
    # +27..+70%; +27..+86% since H100 NVL's SM count, which NVIDIA does not publish, left
    # the catalog (its GEMMs no longer priced with wave quantization); +25..+51% since the
    # PCIe and NVL boards' Tensor Core math runs at their measured fraction of the peak
    # (perf/data/sibling_rates.toml, [[board]])
    # (+22..+49% since a decode GEMM near the ridge carries its memory stream's share,
    # gemm_overlap)
    assert len(slow) == 4 and all(0.2 < e < 0.55 for e in slow)
    # the v4.1 round on Hopper (Llama 2 70B, Mixtral 8x7B) within 6% on average, v4.0's older
    # software 24%
    v41 = [abs(r.error) for r in s.rows if r.source == "mlperf-inference-v4.1"]
    # 4.3%, at most 9.8%, since Dell's XE8640 runs on the HGX 4-GPU board's pair links
    # (+20.0% -> +3.9%; 5.2% and 20.0% before)
    # (4.8% since a decode GEMM near the ridge carries its memory stream's share,
    # gemm_overlap; 3.5% since a stream's prefill passes hold the prompts that arrive
    # during a step and a pass)
    assert len(v41) == 18 and sum(v41) / 18 <= 0.036 and max(v41) <= 0.10
    v40 = [abs(r.error) for r in s.rows if r.source == "mlperf-inference-v4.0"]
    # 22.2% with Quanta's unbridged cards; 22.5% without H100 NVL's unpublished SM count;
    # 17.4% since the 4-GPU boards' pair links (Dell XE9640 +41.6% -> +22.4%, Fujitsu
    # +56.4% -> +35.0%); 12.4% since a stream's prefill passes hold the prompts that
    # arrive during a step and a pass (the DGX H100's +15..+22% -> +3..+10%)
    assert len(v40) == 15 and sum(v40) / 15 <= 0.13  # 13.0% since the engines' all-reduce
    # kernels
    b300: dict[str, list[float]] = {}
    for r in s.rows:
        if r.gpu == "b300" and r.model != "deepseek-v3" \
                and r.source.startswith("mlperf-inference-"):
            b300.setdefault(r.model, []).append(abs(r.error))
    b300_big = b300["llama-2-70b"] + b300["llama-3.1-405b"]
    # +7%, +14%, -2.5% first; now Cisco's, Dell's, GigaComputing's, ASUSTeK's (v6.0) and
    # Cisco's and Supermicro's v6.1 runs: -6.3..+10.3%
    assert len(b300_big) == 7 and max(b300_big) <= 0.15
    # Cisco's v6.0 GPT-OSS -13.8% (-10.8% before the prompt's attention had its per-row
    # time; -12.7% before Blackwell's MoE block floor), then GigaComputing's (v6.0) and
    # Cisco's, CoreWeave's and Inventec's (v6.1), -9.5..-14.8%; +3.1..+9.5% since the W4A8
    # MXFP4 experts run at their measured layers' rate; Llama 3.1 8B ASUSTeK +14.7%,
    # GigaComputing +26.2%
    assert len(b300["gpt-oss-120b"]) == 5 and max(b300["gpt-oss-120b"]) <= 0.10
    assert len(b300["llama-3.1-8b"]) == 2 and max(b300["llama-3.1-8b"]) <= 0.27
    # DeepSeek-R1's block-scaled FP8 checkpoint on H200 (fp8_scaling "block"): the six rows
    # carry it, and the short-output ones read +40% and +33% (+57% and +49% per-tensor);
    # +48.6% and +40.7% since they take the attention-DP balancing their docs' options set
    # (adp_balance), which shortens the prefill wait
    block = {r.id: r.error for r in s.rows if r.gpu == "h200-sxm-141gb"
             and r.model == "deepseek-v3" and "fp8" in r.formats}
    assert len(block) == 6
    # (adp_balance), which shortens the prefill wait; +37.3% and +29.5% since the run's
    # prompts are admitted a few an iteration, so 375 slots fill over 374 iterations
    # +38.9% and +31.0% since TensorRT-LLM's PyTorch backend took its measured step
    assert block["trtllm-03e27c7-h200-deepseek-v3-fp8-dep8-1000-1000"] < 0.39
    assert block["trtllm12-h200-deepseek-v3-fp8-dep8-1024-1024"] < 0.311
    in_sample = [abs(r.error) for r in s.rows if not r.out_of_sample]
    # 172 since SGLang's two-batch-overlap decode (the figure tbo_exchange_hidden is fitted
    # on) joined the 171 the serving fit used
    assert len(in_sample) == 172 and sum(in_sample) / len(in_sample) <= 0.1  # 8.8%
    v017 = [r for r in s.rows if r.source == "trtllm-perf-overview-v0.17"]
    fitted = [abs(r.error) for r in v017 if not r.out_of_sample]
    assert len(fitted) == 76 and sum(fitted) / len(fitted) <= 0.069  # 6.82% since a
    # decode GEMM near the ridge carries its memory stream's share (gemm_overlap), 6.55%
    # before (7.4% before the table's KV cache took trtllm-bench's 0.9 of free memory, not
    # the 10% reserve)
    # every other cell of the v0.17 table (seven more lengths and the GH200 column, entered
    # after the fit): 9.0%, median 6.8%, four beyond 35%; 8.2%, one beyond, with the KV
    # share; Mistral 7B at 20000/2000 within 12% with every position attended (+98..+172%
    # with its 4,096-token window)
    later_cells = [abs(r.error) for r in v017 if r.out_of_sample]
    assert len(later_cells) == 297 and sum(later_cells) / len(later_cells) <= 0.081  # 8.04%
    assert sum(e > 0.35 for e in later_cells) <= 2  # A100's Llama-3.1-70B FP16 at TP 2,
    # 128/2048 and 500/2000, +38% and +35% since the engines' all-reduce kernels (+33%, +31%)
    v10 = [abs(r.error) for r in s.rows if r.source == "trtllm-perf-overview-v1.0"]
    # every cell of v1.0's table with a preset: 30 entered first, 134 with the rest of the
    # table after every parameter was fitted (22.4% on those alone)
    # (Llama 4 Scout's cells, entered with its preset, are held to their own bound above;
    # Maverick's B200 FP4 column, 8 cells entered 2026-12-04, took the 164 from 11.1% to 11.0%)
    assert len(v10) == 172 and sum(v10) / len(v10) <= 0.111  # 11.1% since a decode GEMM
    # near the ridge carries its memory stream's share (gemm_overlap), 10.8% before (11.0%
    # before the staggered admission, 11.5% before the
    # host's time followed the expert layers)
    # the later perf overview, all out of sample: DeepSeek-R1, GPT-OSS, Llama 3.3, Qwen3
    # and (with its preset, added later) Llama 4 Maverick
    later = [abs(r.error) for r in s.rows if r.source == "trtllm-perf-overview-03e27c7"
             and "maverick" not in r.id]
    assert len(later) == 86 and all(r.out_of_sample for r in s.rows
                                     if r.source == "trtllm-perf-overview-03e27c7")
    # 15.5%; its NVFP4 DeepSeek and Qwen3-235B rows, slow, 1-3 points slower at moe_gemm_nvfp4
    # 14.5% with attention at its kernels' rates, 14.4% with its per-row time
    # 12.6% with Qwen3-235B-A22B-FP4's 8-bit cache
    # 12.4% with the W4A8 MXFP4 experts at their measured layers' rate, 12.1% with the
    # block-scaled FP8 ones; 11.7% with the host's time per expert layer; 12.0% with the
    # all-to-all as its measured kernels (GB200's long-output DEP4 rows, fast, faster);
    # 12.04% with the PyTorch backend's measured step
    assert sum(later) / len(later) <= 0.121
    maverick = [abs(r.error) for r in s.rows if "maverick" in r.id]
    # 17.2%; 17.5% at moe_gemm_nvfp4 (its B200 NVFP4 rows, slow, slower); 17.7% with the
    # prompt's attention at its kernel's rate (its long-prompt Hopper rows, fast, faster);
    # 18.0% with Blackwell's MoE floor and the NVFP4 factor re-set (its B200 rows, slow,
    # slower); 13.0% with its chunked layers' attention counted by chunk (the long rows,
    # slow, faster); 12.2% over 39 with v1.0's B200 FP4 column (9.0% on its 8 cells)
    assert len(maverick) == 39 and sum(maverick) / len(maverick) <= 0.125
    # release 1.2's overview, all out of sample
    r12 = [r for r in s.rows if r.source == "trtllm-perf-overview-1.2"]
    assert len(r12) == 130 and all(r.out_of_sample for r in r12)
    # 15.3% (19.5% at 16 bits); 13.2% with the W4A8 MXFP4 experts at their layers' rate;
    # 11.8% with the host's time per expert layer; 12.1% with the measured all-to-all
    assert sum(abs(r.error) for r in r12) / len(r12) <= 0.122
    # GPT-OSS on Blackwell (TensorRT-LLM's W4A8 MXFP4 x MXFP8 experts): 18.2% when they ran
    # at the fine-grained FP8 rate, slow by 15.6% on average; 13.6% at their layers' rate;
    # 11.0% with the host's time per expert layer (GPT-OSS-20B's 24 less than 120B's 36)
    oss = [r.error for r in s.rows if r.model.startswith("gpt-oss")
           and r.gpu in ("b200", "b300", "gb200", "gb300")]
    # (signed -0.1..0 until TensorRT-LLM's PyTorch backend took its measured step: +1.3%)
    assert len(oss) == 67 and sum(map(abs, oss)) / len(oss) <= 0.111
    assert -0.02 < sum(oss) / len(oss) < 0.03


def test_host_time_follows_the_expert_layers() -> None:
    """The single-GPU MoE rows at 1,000-1,024 in and out, where the Python executor's host
    sets the step (thousands of requests in flight): GPT-OSS-20B (24 expert layers) and
    Qwen3-30B-A3B (48) of the TensorRT-LLM overviews 03e27c7, 1.0 and 1.2. At 29.4 us per
    request for both they read -43..-53% (GPT-OSS-20B on Blackwell) and +22..+59% (Qwen3
    on GB200/GB300): one model too slow, the other too fast, at one cost per request. At
    0.816 us per request and expert layer all 17 are within 35%; with an x86 host's loop
    1.19x faster (host_time_x86_speedup) Qwen3 on B200/B300 reads -4..-16% (-16..-27% at
    the Grace cost), on Grace -5..+25%. What is left is GPT-OSS-20B: on GB200 and GB300 its
    published throughputs cap the host below the 19.6 us a request its 24 layers are
    charged there; on B200 and B300 the x86 host's 16.5 us is under the cap, and the rows
    read 13-25% slow for the GPU's step."""
    from gpuarch.validation.inference import validate_inference

    rows = [r for r in validate_inference(CATALOG).rows
            if r.gpus == 1 and r.lengths in ("1000/1000", "1024/1024")
            and r.model in ("gpt-oss-20b", "qwen3-30b-a3b")]
    assert len(rows) == 17
    assert max(abs(r.error) for r in rows) <= 0.35
    blackwell_oss = [r for r in rows if r.model == "gpt-oss-20b"
                     and r.gpu in ("b200", "b300", "gb200", "gb300")]
    assert len(blackwell_oss) == 6 and all(-0.35 < r.error < -0.1 for r in blackwell_oss)
    # a host that spends h per request caps one GPU at 1 / h tokens a second: each of the
    # Grace-hosted figures bounds h below what the model charges there
    per_request = DEFAULT_EFFICIENCY.host_time_per_request_expert_layer_s * 24
    grace = [r for r in blackwell_oss if CATALOG.product(r.gpu).grace_host]
    assert len(grace) == 3 and all(1 / r.published < per_request for r in grace)
    qwen = [r.error for r in rows if r.model == "qwen3-30b-a3b"
            and not CATALOG.product(r.gpu).grace_host]
    assert qwen and all(-0.2 < e < 0.0 for e in qwen)


def test_every_published_serving_run_fits_or_says_why() -> None:
    """Each published run ran, so the model must find its batch fits in the GPU's memory, or
    the data file must say why not; an account the model no longer needs fails as stale."""
    from gpuarch.validation.inference import validate_inference

    runs = {r.id: r.memory for r in validate_inference(CATALOG).rows}
    assert len(runs) >= 395
    assert not [i for i, m in runs.items() if not m.fits and not m.exception]
    assert not [i for i, m in runs.items() if m.fits and m.exception]
    # two TensorRT-LLM blog runs and eleven of LMDeploy's A100 table, whose engine hands out
    # its cache as sessions need it (docs/performance-model.md)
    assert sum(not m.fits for m in runs.values()) <= 13


def test_queueing_when_concurrency_exceeds_what_fits() -> None:
    """Serving more concurrent requests than fit adds queueing to TTFT (Little's law)."""
    fits = _est(batch=None, batching=Batching.CONTINUOUS)
    over = _est(batch=fits.max_batch * 2, batching=Batching.CONTINUOUS)
    assert over.batch == fits.max_batch
    assert over.assumptions["queueing_s"] > 0
    assert over.ttft_s > fits.ttft_s + over.assumptions["queueing_s"] * 0.99


def test_engine_batch_cap() -> None:
    """--max-batch-size caps the sequences decoded together: --batch max takes the smaller of
    the cap and what fits, requests beyond the cap queue (Little's law), memory's largest
    batch is still reported, and a static batch above the cap is refused."""
    fits = _est(batch=None, batching=Batching.CONTINUOUS)
    cap = fits.max_batch // 4
    capped = _est(batch=None, batching=Batching.CONTINUOUS, max_batch_size=cap)
    assert capped.batch == cap and capped.max_batch == fits.max_batch
    assert capped.assumptions["max_batch_size"] == cap
    assert capped.output_tokens_per_s < fits.output_tokens_per_s
    loaded = _est(batch=fits.max_batch, batching=Batching.CONTINUOUS, max_batch_size=cap)
    assert loaded.batch == cap and loaded.assumptions["queueing_s"] > 0
    roomy = _est(batch=None, batching=Batching.CONTINUOUS, max_batch_size=fits.max_batch * 2)
    assert roomy.batch == fits.batch
    with pytest.raises(GpuarchError, match=r"--batch: 64 exceeds --max-batch-size 32"):
        _est(batch=64, max_batch_size=32)
    with pytest.raises(GpuarchError, match=r"--max-batch-size: expected an integer >= 1"):
        _est(batch=8, max_batch_size=-1)


def test_speculative_decoding() -> None:
    """Speculative decoding: a step verifies k + 1 tokens per sequence after k one-layer
    draft passes, and emits the acceptance length A on average, so TPOT = step / A; more
    accepted tokens never slow it, drafts that are never accepted (A = 1) do, and the draft
    adds one average layer of weights."""
    base = _est(batch=1, output_len=256)
    tpots = [_est(batch=1, output_len=256, speculative_tokens=3, acceptance_length=a).tpot_s
             for a in (1.0, 2.0, 3.0, 4.0)]
    assert tpots == sorted(tpots, reverse=True)
    assert tpots[0] > base.tpot_s > tpots[-1]
    full = _est(batch=1, output_len=256, speculative_tokens=3, acceptance_length=4.0)
    step = sum(full.decode_step_breakdown_s.values())
    assert full.tpot_s == pytest.approx(step / 4.0, rel=1e-12)
    assert full.assumptions["speculative"]["draft_tokens"] == 3
    pc = count_params(LLAMA_8B)
    layer = (pc.total - pc.embedding - pc.lm_head) * 2.0 / LLAMA_8B.layers
    assert full.memory["weights"] - base.memory["weights"] == pytest.approx(layer, rel=1e-9)
    continuous = _est(batch=64, batching=Batching.CONTINUOUS, speculative_tokens=2,
                      acceptance_length=2.5)
    plain = _est(batch=64, batching=Batching.CONTINUOUS)
    assert continuous.output_tokens_per_s > plain.output_tokens_per_s


@pytest.mark.parametrize(
    ("kw", "message"),
    [({"speculative_tokens": 2, "acceptance_length": 3.5},
      r"--acceptance-length: expected the mean tokens per step, between 1 and 3"),
     ({"speculative_tokens": 2}, r"--acceptance-length: needed with --speculative-tokens 2"),
     ({"acceptance_length": 2.0}, r"--acceptance-length: needs --speculative-tokens"),
     ({"speculative_tokens": -1}, r"--speculative-tokens: expected an integer >= 0")],
)
def test_speculative_decoding_errors(kw: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(GpuarchError, match=message):
        _est(**kw)


def test_speculative_array_path_matches_the_estimate() -> None:
    """The advisor's array form gives the scalar estimate's numbers with speculation too."""
    from gpuarch.estimate.inference import evaluate_inference

    cfg = InferenceConfig(input_len=1024, output_len=256, batching=Batching.CONTINUOUS,
                          speculative_tokens=3, acceptance_length=2.2)
    batches = [1, 7, 64]
    core = evaluate_inference(CATALOG, LLAMA_8B, H100, cfg, np.array(batches))
    for i, b in enumerate(batches):
        est = estimate_inference(CATALOG, LLAMA_8B, H100,
                                 InferenceConfig(**{**cfg.__dict__, "batch": b}))
        assert float(core.tpot[i]) == pytest.approx(est.tpot_s, rel=1e-9)
        assert float(core.ttft[i]) == pytest.approx(est.ttft_s, rel=1e-9)


def test_mla_decode_streams_the_latent_cache() -> None:
    """Decoding DeepSeek-V3 (weights absorbed) reads the 576-wide latent per cached token
    and layer, not per-head keys and values: each extra position of context costs its
    cached bytes over the KV-read bandwidth, on every layer."""
    from gpuarch.estimate.inference_passes import ReplicaRunner

    shape = preset("deepseek-v3").shape
    h200 = CATALOG.product("h200")
    cfg = InferenceConfig(input_len=1024, output_len=1, gpus=8, tp=8, ep=8)
    runner = ReplicaRunner(CATALOG, shape, h200, cfg, CATALOG.system("hgx h200"),
                           DEFAULT_EFFICIENCY)
    short, long = (runner.layer(1.0, 1.0, 1, ctx, 8.0).memory for ctx in (16_384, 32_768))
    latent_bytes = (512 + 64) * 2.0  # BF16 cache, one layer
    per_position = latent_bytes / (h200.memory_bandwidth_bytes_s * DEFAULT_EFFICIENCY.kv_read)
    assert float(long - short) == pytest.approx(16_384 * per_position, rel=1e-6)


def test_sliding_window_layers_cap_the_kv_cache() -> None:
    """GPT-OSS keeps 128 positions in its 18 windowed layers and every position in the other
    18: at 8,192 tokens a sequence holds (18 x 8,192 + 18 x 128) positions' keys and values,
    2 x 8 heads x 64 dims x 2 bytes each; below the window all 36 layers hold everything."""
    from gpuarch.estimate.inference_memory import kv_bytes_per_sequence

    shape = preset("gpt-oss-120b").shape
    per_layer_position = 2 * 8 * 64 * 2
    assert kv_bytes_per_sequence(shape, 2.0, 8192) == (18 * 8192 + 18 * 128) \
        * per_layer_position
    assert kv_bytes_per_sequence(shape, 2.0, 100) == 36 * 100 * per_layer_position
    # a dense-attention model: every layer, every position
    assert kv_bytes_per_sequence(LLAMA_8B, 2.0, 1000) == 1000 * kv_bytes_per_token(LLAMA_8B,
                                                                                   2.0)


def test_expert_weights_split_over_the_wider_of_tp_and_ep() -> None:
    """Experts are divided over max(TP, EP) GPUs: EP inside a TP group does not split them
    twice, and an EP group spanning data-parallel replicas (TP 1, EP 8) holds 1/8 of the
    experts per GPU with the attention weights whole."""
    mixtral = preset("mixtral-8x7b").shape
    pc = count_params(mixtral)
    experts, dense = pc.mlp_experts, pc.total - pc.mlp_experts

    def weights(**kw: int) -> float:
        cfg = InferenceConfig(input_len=128, output_len=128, **kw)
        return float(memory_parts(mixtral, cfg, 1, H100)["weights"])

    assert weights(gpus=8, tp=8) == pytest.approx(weights(gpus=8, tp=8, ep=8))
    assert weights(gpus=8, tp=8, ep=2) == pytest.approx((dense + experts) * 2 / 8)
    assert weights(gpus=8, tp=1, ep=8) == pytest.approx(dense * 2 + experts * 2 / 8)


def test_expert_formats_by_hand() -> None:
    """Mixtral-8x7B at TP 2 with FP8 attention and 16-bit experts (how TensorRT-LLM 0.9's
    FP8 engines ran it): weight bytes = the 1,605,636,096 non-expert parameters at 1 byte,
    but the embedding table and LM head (2 x 32,000 x 4,096 = 262,144,000) at 2, plus the
    32 x 8 x 3 x 4,096 x 14,336 = 45,097,156,608 expert parameters at 2, over 2 GPUs; the
    experts' GEMMs run at the 16-bit rate, the rest at FP8."""
    mixtral = preset("mixtral-8x7b").shape
    pc = count_params(mixtral)
    assert pc.mlp_experts == 45_097_156_608
    assert pc.total - pc.mlp_experts == 1_605_636_096
    cfg = InferenceConfig(input_len=128, output_len=128, gpus=2, tp=2, quant=FP8,
                          expert_weights=QuantFormat.FP16)
    assert cfg.expert_quant == QuantScheme(QuantFormat.FP16, QuantFormat.FP16, QuantFormat.FP8)
    assert memory_parts(mixtral, cfg, 1, H100)["weights"] == pytest.approx(
        ((1_605_636_096 - 262_144_000) * 1 + (262_144_000 + 45_097_156_608) * 2) / 2)
    est = estimate_inference(CATALOG, mixtral, H100, dataclasses.replace(cfg, batch=64))
    x = est.assumptions["expert_formats"]
    assert (x["weights"], x["activations"]) == ("fp16", "fp16")
    assert x["gemm_peak_tflops"] == pytest.approx(est.assumptions["gemm_peak_tflops"] / 2,
                                                  rel=1e-3)  # the datasheet rounds


@pytest.mark.parametrize(
    ("quant", "expert_weights", "activations"),
    [
        (FP8, QuantFormat.FP16, QuantFormat.FP16),  # 16-bit experts run in 16 bits
        (BF16, QuantFormat.FP4, QuantFormat.BF16),  # weight-only experts (GPT-OSS, Hopper)
        (FP8, QuantFormat.FP4, QuantFormat.FP8),  # W4A8 experts
        (QuantScheme(QuantFormat.FP4, QuantFormat.FP4, QuantFormat.FP8), QuantFormat.FP8,
         QuantFormat.FP8),  # activations narrower than the experts' weights: match them
        (FP8, None, QuantFormat.FP8),  # nothing given: the model's
    ],
)
def test_expert_activations_follow_the_expert_weights(quant: QuantScheme,
                                                       expert_weights: QuantFormat | None,
                                                       activations: QuantFormat) -> None:
    cfg = InferenceConfig(input_len=8, output_len=8, quant=quant, expert_weights=expert_weights)
    assert cfg.expert_quant.activations is activations
    assert cfg.expert_quant.weights is (expert_weights or quant.weights)
    cfg.expert_quant.validate("expert-")


def test_expert_formats_order_a_memory_bound_decode() -> None:
    """A memory-bound MoE decode step: FP8 everywhere < FP8 with 16-bit experts < 16 bits
    everywhere; naming the model's own format for the experts changes nothing."""
    mixtral = preset("mixtral-8x7b").shape
    fp16 = QuantScheme(QuantFormat.FP16, QuantFormat.FP16, QuantFormat.FP8)

    def tpot(quant: QuantScheme, experts: QuantFormat | None = None) -> float:
        return _est(mixtral, batch=16, gpus=2, tp=2, quant=quant,
                    expert_weights=experts).tpot_s

    assert tpot(FP8) < tpot(FP8, QuantFormat.FP16) < tpot(fp16)
    assert tpot(FP8, QuantFormat.FP8) == tpot(FP8)


@pytest.mark.parametrize(
    ("shape", "kw", "message"),
    [
        (LLAMA_8B, {"expert_weights": QuantFormat.FP8},
         r"--expert-weight-precision: llama-3.1-8b has no routed experts"),
        (LLAMA_8B, {"expert_activations": QuantFormat.FP8},
         r"--expert-activation-precision: llama-3.1-8b has no routed experts"),
        (preset("mixtral-8x7b").shape,
         {"expert_weights": QuantFormat.INT4, "expert_activations": QuantFormat.INT8},
         r"--expert-activation-precision int8 needs --expert-weight-precision int8"),
    ],
)
def test_expert_format_errors_name_the_flag(shape, kw, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GpuarchError, match=message):
        InferenceConfig(input_len=8, output_len=8, **kw).validate(shape)


@pytest.mark.parametrize("moe_comm", ["alltoall", "allgather"])
def test_a_gpu_permutes_only_the_copies_its_experts_take(moe_comm: str) -> None:
    """With EP 8 over 8 data-parallel replicas each GPU's experts take, on average, as many
    routed copies as its own tokens make, so its permutation and activation traffic (the
    memory-bound part of a decode step) equals one GPU's holding every expert for the same
    batch, whichever dispatch gathers the tokens; and a step dominated by that exchange
    says so."""
    qwen = preset("qwen3-30b-a3b").shape

    def step(**kw: object) -> dict[str, float]:
        return _est(qwen, batch=64, output_len=64, **kw).decode_step_parts_s

    one = step()
    spread = step(gpus=8, ep=8, moe_comm=moe_comm)
    assert spread["memory_bound"] == pytest.approx(one["memory_bound"], rel=1e-9)
    assert spread["expert_parallel"] > 0 and one.get("expert_parallel", 0.0) == 0.0
    big = estimate_inference(CATALOG, preset("qwen3-235b-a22b").shape, CATALOG.product("h200"),
                             InferenceConfig(input_len=1000, output_len=1000, batch=64, gpus=8,
                                             ep=8, moe_comm="allgather", quant=FP8))
    assert big.bottleneck["decode"] == "communication"
    assert "expert-parallel token exchange" in big.bottleneck_reason["decode"]
    assert "tensor-parallel" not in big.bottleneck_reason["decode"]


def test_a_smaller_prefill_budget_takes_more_passes() -> None:
    """--max-num-tokens bounds the prompt tokens per prefill pass: an offline run of 640
    requests has its prompts waiting, and 64 prompts of 1,024 tokens need 32 passes of a
    2,048-token budget instead of 8, each reading the weights, so the continuous-batching
    throughput falls. A stream's passes hold the prompts that arrive during a decode step
    and a pass (here one), which neither budget bounds. A static batch's prefill
    activations shrink."""
    run = {"batch": 64, "input_len": 1024, "output_len": 128,
           "batching": Batching.CONTINUOUS}
    wide = _est(**run, num_requests=640)
    narrow = _est(**run, num_requests=640, max_num_tokens=2048)
    assert narrow.output_tokens_per_s < wide.output_tokens_per_s
    assert _est(**run, max_num_tokens=2048).output_tokens_per_s == \
        pytest.approx(_est(**run).output_tokens_per_s, rel=1e-12)
    assert narrow.assumptions["max_prefill_tokens_per_pass"] == 2048
    static_wide = _est(batch=64, input_len=1024, output_len=128)
    static_narrow = _est(batch=64, input_len=1024, output_len=128, max_num_tokens=2048)
    assert static_narrow.memory["activations"] < static_wide.memory["activations"]


@settings(max_examples=30, deadline=None)
@given(input_len=st.integers(16, 4096), output_len=st.integers(2, 1024),
       batch=st.integers(1, 512), budget=st.sampled_from([2048, 8192]))
def test_a_streams_prefill_pass_holds_what_arrives_during_a_step_and_a_pass(
        input_len: int, output_len: int, batch: int, budget: int) -> None:
    """Under continuous batching the cycle is output_len decode steps plus batch / n
    passes of n prompts (exactly), and n is what arrives during a decode step and the pass
    before it at the cycle's rate (batch / cycle a second), within one prompt (rounded up,
    or where the rounding makes the pass swing between two sizes, the last one costed): at
    least one, at most what a pass's budget takes and what is in flight."""
    e = _est(input_len=input_len, output_len=output_len, batch=batch,
             batching=Batching.CONTINUOUS, max_num_tokens=budget)
    n = e.assumptions["prefill_pass_prompts"]
    step = sum(e.decode_step_parts_s.values())
    one = sum(e.prefill_parts_s.values())
    cycle = e.tpot_s * output_len
    assert cycle == pytest.approx(output_len * step + e.batch / n * one, rel=1e-9)
    most = min(e.batch, max(1, budget // input_len))
    assert 1 <= n <= most
    arriving = e.batch / cycle * (step + one)
    assert n == most or n == 1 or n - 1 < arriving * (1 + 1e-9)
    assert n == most or arriving * (1 - 1e-9) < n + 1


def test_in_flight_batching_holds_activations_for_its_token_budget() -> None:
    """Continuous batching reserves prefill activations for a whole pass of max_num_tokens
    (TensorRT-LLM profiles its peak with dummy context requests filling it, vLLM with a
    pass of max_num_batched_tokens), whatever the prompt: Llama-3.1-8B at 4,096 tokens
    holds 4,096 x (4 x 4,096 + 3 x 14,336) x 2 bytes = 486,539,264 bytes, plus 8 sequences'
    FP32 logits of 128,256 = 4,104,192 bytes."""
    for input_len in (128, 1024, 6000):
        e = _est(input_len=input_len, batching=Batching.CONTINUOUS, max_num_tokens=4096)
        assert e.memory["activations"] == pytest.approx(486_539_264 + 4_104_192)


def test_attention_data_parallel_gathers_every_rank_into_the_expert_buffers() -> None:
    """With attention data-parallel and all-gather dispatch the experts see every rank's
    tokens, and their buffers are sized for all routed rows (TensorRT-LLM sizes its MoE
    modules for max_num_tokens x the data-parallel size): Qwen3-235B-A22B, 2,048 tokens, 8
    experts of 1,536 per token, over 8 ranks: 2,048 x (4 x 4,096 + 3 x 1,536 x 8 x 8) x 2
    bytes. All-to-all dispatch brings a rank about its own tokens' worth of routed copies,
    and tensor-parallel attention with EP 8 leaves the expert width whole and gathers
    nothing: 2,048 x (4 x 4,096 + 3 x 1,536 x 8) x 2 bytes. Logits: 8 sequences x 151,936 x
    4 bytes, over TP."""
    qwen = preset("qwen3-235b-a22b").shape
    h200 = CATALOG.product("h200")
    base = {"input_len": 1000, "output_len": 1000, "batch": 8, "gpus": 8, "ep": 8,
            "batching": Batching.CONTINUOUS, "max_num_tokens": 2048, "quant": FP8}
    gather = estimate_inference(CATALOG, qwen, h200,
                                InferenceConfig(**base, tp=1, moe_comm="allgather"))
    a2a = estimate_inference(CATALOG, qwen, h200, InferenceConfig(**base, tp=1))
    tp8 = estimate_inference(CATALOG, qwen, h200, InferenceConfig(**base, tp=8))
    one_rank = 2048 * (4 * 4096 + 3 * 1536 * 8) * 2
    assert gather.memory["activations"] == pytest.approx(
        2048 * (4 * 4096 + 3 * 1536 * 8 * 8) * 2 + 8 * 151_936 * 4)
    assert a2a.memory["activations"] == pytest.approx(one_rank + 8 * 151_936 * 4)
    assert tp8.memory["activations"] == pytest.approx(one_rank + 8 * 151_936 * 4 / 8)


def test_a_sequence_past_the_configured_context_is_estimated_and_said() -> None:
    """Llama-2-7B is configured for 4,096 positions: 6,000 + 1,000 tokens run past them, so
    the estimate says so (JSON and a text note) and still runs; 3,000 + 1,000 fit."""
    from gpuarch.report.estimate_text import render_inference

    llama2 = preset("llama-2-7b").shape
    over = _est(shape=llama2, input_len=6000, output_len=1000, batch=1)
    assert over.assumptions["context_window"] == {"tokens": 4096, "sequence": 7000,
                                                  "exceeded": True}
    assert "7,000 tokens a sequence run past the model's configured context of 4,096" \
        in render_inference(over)
    within = _est(shape=llama2, input_len=3000, output_len=1000, batch=1)
    assert within.assumptions["context_window"]["exceeded"] is False
    assert "configured context" not in render_inference(within)


def test_a_longest_context_past_the_configured_one_is_called_memorys_bound() -> None:
    """Llama-3.1-8B on one H100 at batch 1 has room for far more KV cache than its 131,072
    configured positions: the text says the longest context that fits is the memory's bound,
    not the model's; Llama-3.1-70B over four GPUs at batch 64 fits fewer tokens than that, and
    no note follows."""
    from gpuarch.report.estimate_text import render_inference

    wide = _est(shape=preset("llama-3.1-8b").shape, input_len=1024, output_len=256, batch=1)
    assert wide.max_context is not None and wide.max_context > 131_072
    assert (f"longest context at batch 1: {wide.max_context:,} tokens (memory's bound; the "
            "checkpoint is configured for 131,072)") in render_inference(wide)
    tight = estimate_inference(CATALOG, preset("llama-3.1-70b").shape, H100,
                               InferenceConfig(input_len=1024, output_len=256, batch=64,
                                               gpus=4, tp=4))
    assert tight.max_context is not None and tight.max_context < 131_072
    assert "memory's bound" not in render_inference(tight)


def test_batch_max_that_nothing_fits_says_so() -> None:
    """--batch max asks for the largest batch that fits; where none does (Llama-3.1-70B in
    BF16 on one H100) the estimate is shown at one sequence and the text says why, and the
    JSON keeps the batch as asked; a batch asked by number reads as before."""
    from gpuarch.report.estimate_text import render_inference

    shape = preset("llama-3.1-70b").shape
    none = _est(shape=shape, input_len=2048, output_len=512, batch=None)
    assert none.max_batch == 0 and none.batch == 1 and not none.fits_in_memory
    assert none.assumptions["batch_asked"] == "max"
    assert "batch 1 (--batch max, but no batch fits: shown at 1; static batching)" \
        in render_inference(none)
    one = _est(shape=shape, input_len=2048, output_len=512, batch=1)
    assert one.assumptions["batch_asked"] == 1
    assert "no batch fits" not in render_inference(one)


def test_one_gpu_needs_no_interconnect_in_the_catalog() -> None:
    """The RTX 4090's catalog entry has no NVLink or sourced PCIe rate: serving on one of
    them communicates nothing and must work; splitting a model over two must say what is
    missing."""
    rtx = CATALOG.product("rtx-4090")
    assert not rtx.nvlink_bandwidth_bytes_s and not rtx.pcie_generation
    one = estimate_inference(CATALOG, preset("llama-2-7b").shape, rtx,
                             InferenceConfig(input_len=1, output_len=64, batch=1))
    assert one.tpot_s > 0
    with pytest.raises(GpuarchError, match="no NVLink or PCIe bandwidth"):
        estimate_inference(CATALOG, preset("llama-2-7b").shape, rtx,
                           InferenceConfig(input_len=1, output_len=64, batch=1, gpus=2,
                                           tp=2))


def test_longest_context_is_the_edge_of_what_fits() -> None:
    """At the reported context the memory fits; one prompt token more does not."""
    from dataclasses import replace

    from gpuarch.estimate.inference_memory import max_context_that_fits, memory_parts

    cfg = InferenceConfig(input_len=2048, output_len=512, batch=8, gpus=2, tp=2)
    e = estimate_inference(CATALOG, preset("llama-3.1-70b").shape, H100, cfg)
    assert e.max_context == max_context_that_fits(preset("llama-3.1-70b").shape, cfg, H100, 8)
    assert e.as_json()["max_context"] == e.max_context
    prompt = e.max_context - 512

    def used(p: int) -> float:
        return sum(memory_parts(preset("llama-3.1-70b").shape, replace(cfg, input_len=p), 8,
                           H100).values())

    assert used(prompt) <= H100.memory_bytes < used(prompt + 1)
    # by hand: what is left after weights, activations and reserve holds 8 sequences of
    # 160 KiB per token (80 layers x 8 KV heads x 128 x 2 x 2 bytes / TP 2)
    kv = 8 * e.max_context * 163_840
    free = H100.memory_bytes - (used(prompt) - kv)
    assert 0 <= free / (8 * 163_840) - e.max_context < 1


def test_per_query_head_decode_reads_each_kv_head_once_per_query_head() -> None:
    """--decode-kv-reads per-query-head (TensorRT-LLM's masked multi-head decode kernel, one
    thread block per query head): Llama-2-70B's decode attention streams its KV cache 8 times
    (64 query heads over 8 KV heads), the repeats from L2, so at 4,096 positions, where the
    cache is nearly all of the op's bytes, the op takes 8 x the DRAM rate it reads the cache
    at once (datasheet bandwidth x kv_read) over the multi-head kernel's rate as long; on a
    GPU whose DRAM is slower than that (L40S, 864 GB/s) Mistral 7B's groups of 4 cost nothing
    more. The prompt's pass, the weights' reads and the memory held are unchanged. A model
    whose KV heads are its query heads (Llama-2-13B) or whose decode reads one latent
    (DeepSeek-V3) reads the same either way and reports no setting; a bad value names the
    flag."""
    h200 = CATALOG.product("h200")
    fp8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)
    base = {"input_len": 4096, "output_len": 128, "batch": 32, "quant": fp8}

    def pair(name: str, gpus: int = 1, gpu: Product = h200
             ) -> tuple[InferenceEstimate, InferenceEstimate]:
        shape = preset(name).shape
        return tuple(estimate_inference(CATALOG, shape, gpu, InferenceConfig(  # type: ignore
            **base, gpus=gpus, tp=gpus, decode_kv_reads=r))
            for r in ("shared", "per-query-head"))

    shared, per_head = pair("llama-2-70b")
    ratio = per_head.decode_step_parts_s["attention"] / shared.decode_step_parts_s["attention"]
    eff = DEFAULT_EFFICIENCY
    expected = 8 * h200.memory_bandwidth_bytes_s * eff.kv_read \
        / eff.multihead_decode_read_bytes_s
    assert 4 < expected < 8
    assert ratio == pytest.approx(expected, rel=0.01)
    l40s_shared, l40s_per_head = pair("mistral-7b", gpu=CATALOG.product("l40s"))
    assert l40s_per_head.decode_step_parts_s == l40s_shared.decode_step_parts_s
    assert per_head.prefill_parts_s == shared.prefill_parts_s
    assert per_head.ttft_s == shared.ttft_s
    assert per_head.decode_step_parts_s["dense_gemms"] == \
        shared.decode_step_parts_s["dense_gemms"]
    assert per_head.memory == shared.memory
    assert per_head.output_tokens_per_s < shared.output_tokens_per_s
    assert (shared.assumptions["decode_kv_reads"], per_head.assumptions["decode_kv_reads"]) \
        == ("shared", "per-query-head")
    for name, gpus in (("llama-2-13b", 1), ("deepseek-v3", 8)):
        a, b = pair(name, gpus)
        assert a.decode_step_parts_s == b.decode_step_parts_s, name
        assert a.assumptions["decode_kv_reads"] is None, name
    with pytest.raises(GpuarchError, match="--decode-kv-reads: expected one of shared, "
                                           "per-query-head, chunked-per-query-head, got "
                                           "'per-head'"):
        estimate_inference(CATALOG, LLAMA_8B, h200, InferenceConfig(
            **base, decode_kv_reads="per-head"))


def test_chunked_layers_alone_decode_per_query_head() -> None:
    """--decode-kv-reads chunked-per-query-head (TensorRT-LLM 0.21 and later on Hopper: XQA
    refuses a layer with chunked attention, which then decodes on the masked multi-head
    kernel, while the layers without chunks stay on XQA): Llama 4 Scout's 36 chunked layers
    read their current chunk once per query head (40 over 8 KV heads), its 12 NoPE layers the
    whole context once a KV head, so decode attention lies strictly between every layer read
    shared and every layer read per query head. A model whose every windowed layer is chunked
    reads exactly as per-query-head; one whose windows slide (GPT-OSS-20B) or that has none
    reads as shared and reports no setting. The prompt's pass, the weights' reads and the
    memory held do not move."""
    h200 = CATALOG.product("h200")
    base = {"input_len": 20000, "output_len": 2000, "batch": 16, "quant": FP8, "gpus": 4,
            "tp": 4}
    scout = preset("llama-4-scout").shape

    def run(shape: TransformerShape) -> dict[str, InferenceEstimate]:
        ep = {"ep": 4} if shape.is_moe else {}
        return {r: estimate_inference(CATALOG, shape, h200, InferenceConfig(
            **base, **ep, decode_kv_reads=r)) for r in DECODE_KV_READS}

    est = run(scout)
    attn = {r: e.decode_step_parts_s["attention"] for r, e in est.items()}
    assert attn["shared"] < attn["chunked-per-query-head"] < attn["per-query-head"]
    chunked = est["chunked-per-query-head"]
    assert chunked.prefill_parts_s == est["shared"].prefill_parts_s
    assert chunked.memory == est["shared"].memory
    assert chunked.decode_step_parts_s["expert_gemms"] == \
        est["shared"].decode_step_parts_s["expert_gemms"]
    assert chunked.assumptions["decode_kv_reads"] == "chunked-per-query-head"
    # every windowed layer chunked: the same as reading every layer per query head
    all_chunked = run(dataclasses.replace(scout, sliding_layers=scout.layers))
    assert all_chunked["chunked-per-query-head"].decode_step_parts_s \
        == all_chunked["per-query-head"].decode_step_parts_s
    # sliding windows (not chunks) or none: the same as shared, and no setting reported
    for name in ("gpt-oss-20b", "llama-3.1-8b"):
        other = run(preset(name).shape)
        assert other["chunked-per-query-head"].decode_step_parts_s \
            == other["shared"].decode_step_parts_s, name
        assert other["chunked-per-query-head"].assumptions["decode_kv_reads"] is None, name


def test_a_chunked_model_on_hopper_says_what_tensorrt_llm_would_run() -> None:
    """Read once a KV head, a chunked-attention model's estimate says when TensorRT-LLM (0.21
    and later) would decode its chunked layers on the multi-head kernel instead: a GPU before
    Blackwell and a longest sequence (input plus output) of at least the chunk. Not below the
    chunk, not on Blackwell, not when the estimate already reads those layers per query head,
    nor for a model without chunks."""
    scout = preset("llama-4-scout").shape
    base = {"batch": 8, "quant": FP8, "gpus": 4, "tp": 4, "ep": 4}

    def hint(shape: TransformerShape, gpu: str, input_len: int, output_len: int,
             reads: str = "shared") -> str | None:
        e = estimate_inference(CATALOG, shape, CATALOG.product(gpu), InferenceConfig(
            **base, input_len=input_len, output_len=output_len, decode_kv_reads=reads))
        return e.assumptions["chunked_decode_on_trtllm"]

    text = hint(scout, "h100", 20000, 2000)
    assert text is not None and "22,000" in text and "8,192" in text
    assert "chunked-per-query-head" in text
    assert hint(scout, "h200", 6192, 2000) is not None  # exactly the chunk
    assert hint(scout, "h200", 6191, 2000) is None
    assert hint(scout, "b200", 20000, 2000) is None
    assert hint(scout, "h100", 20000, 2000, "chunked-per-query-head") is None
    assert hint(preset("gpt-oss-120b").shape, "h100", 20000, 2000) is None


def test_repeated_kv_reads_price_only_single_query_decode() -> None:
    """The multi-head kernel's repeated reads apply to a decode op of one query row a
    sequence; several rows a sequence (drafted tokens verified together, which TensorRT-LLM
    runs on XQA whatever the group) or a prompt's pass are priced as if read once."""
    from gpuarch.perf.precision import Precision
    from gpuarch.perf.roofline import Attention, Device, op_time

    device = Device.of(CATALOG.product("h200"), Precision.BF16, 4)
    for q_len, repeats in ((1, True), (3, False), (512, False)):
        once, eight = (op_time(Attention(32, q_len, 4096 + q_len, 64, 8, 128,
                                         kv_head_reads=r), device, DEFAULT_EFFICIENCY)[0]
                       for r in (1, 8))
        assert (eight > once) is repeats, q_len


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(["llama-3.1-8b", "llama-2-70b", "mistral-7b", "llama-2-13b",
                              "mixtral-8x7b", "gpt-oss-20b"]),
       tp=st.sampled_from([1, 2, 8]), batch=st.integers(1, 256),
       input_len=st.sampled_from([128, 2048]), output_len=st.sampled_from([16, 1024]),
       continuous=st.booleans())
def test_per_query_head_reads_never_speed_decode(model: str, tp: int, batch: int,
                                                 input_len: int, output_len: int,
                                                 continuous: bool) -> None:
    """Reading the KV cache once per query head in decode never shortens a decode step nor
    raises throughput and never changes how a prompt is prefilled (under continuous
    batching a first token's pass may hold more prompts, as more arrive during a longer
    decode step, never fewer; a pass that gathers one more prompt saves a pass's weight
    reads and fixed time over the cycle, so the throughput is compared where the passes
    hold the same prompts: found by this test, llama-3.1-8b on 2 H200 at 112 sequences,
    7 prompts a pass then 8, +1.5%); on H200, whose DRAM reads the
    cache faster than a multi-head kernel streams two reads of it, it lengthens decode
    attention wherever query heads share a KV head (at any TP: a GPU's query heads still
    share its KV heads) and changes nothing for a multi-head model."""
    shape = preset(model).shape
    h200 = CATALOG.product("h200")
    base = {"input_len": input_len, "output_len": output_len, "batch": batch, "gpus": tp,
            "tp": tp, "quant": FP8, "ep": tp if shape.is_moe else 1,
            "batching": Batching.CONTINUOUS if continuous else Batching.STATIC}
    shared, per_head = (estimate_inference(CATALOG, shape, h200, InferenceConfig(
        **base, decode_kv_reads=r)) for r in ("shared", "per-query-head"))
    assert per_head.decode_step_parts_s["attention"] >= shared.decode_step_parts_s["attention"]
    gathered = [e.assumptions.get("prefill_pass_prompts") for e in (shared, per_head)]
    if gathered[0] == gathered[1]:
        assert per_head.output_tokens_per_s <= shared.output_tokens_per_s * (1 + 1e-12)
    else:
        assert gathered[1] > gathered[0]
    if continuous:
        assert all(per_head.prefill_parts_s[k] >= v * (1 - 1e-12)
                   for k, v in shared.prefill_parts_s.items())
    else:
        assert per_head.prefill_parts_s == shared.prefill_parts_s
    if shape.n_kv_heads == shape.heads:
        assert per_head.decode_step_parts_s == shared.decode_step_parts_s
    else:
        assert per_head.decode_step_parts_s["attention"] > \
            shared.decode_step_parts_s["attention"]

def test_full_window_kv_cache_keeps_every_position() -> None:
    """--window-kv-cache full (TensorRT-LLM's default allocation) keeps every position in
    the windowed layers too: GPT-OSS's 8,192-token sequence holds 36 x 8,192 positions, the
    largest batch shrinks and the throughput falls, while a model without windows and the
    attention each windowed layer reads are unchanged; a bad value is a usage error naming
    the flag."""
    from gpuarch.estimate.inference_memory import kv_bytes_per_sequence

    shape = preset("gpt-oss-120b").shape
    assert kv_bytes_per_sequence(shape, 2.0, 8192, 1, "full") == 36 * 8192 * 2 * 8 * 64 * 2
    assert kv_bytes_per_sequence(LLAMA_8B, 2.0, 1000, 1, "full") == \
        kv_bytes_per_sequence(LLAMA_8B, 2.0, 1000)
    h200 = CATALOG.product("h200")
    shape = preset("gpt-oss-20b").shape  # 16-bit weights fit one H200
    base = {"input_len": 1024, "output_len": 8192, "batching": Batching.CONTINUOUS}
    ring = estimate_inference(CATALOG, shape, h200, InferenceConfig(**base))
    full = estimate_inference(CATALOG, shape, h200, InferenceConfig(**base,
                                                                    window_kv_cache="full"))
    assert full.max_batch < ring.max_batch and full.output_tokens_per_s < ring.output_tokens_per_s
    assert full.assumptions["window_kv_cache"] == "full"
    same = {"batch": 64, **base}
    a = estimate_inference(CATALOG, shape, h200, InferenceConfig(**same))
    b = estimate_inference(CATALOG, shape, h200, InferenceConfig(**same,
                                                                 window_kv_cache="full"))
    assert a.decode_step_parts_s == b.decode_step_parts_s
    dense = [estimate_inference(CATALOG, LLAMA_8B, H100, InferenceConfig(
        input_len=1024, output_len=256, window_kv_cache=w)) for w in ("ring", "full")]
    assert dense[0].max_batch == dense[1].max_batch
    assert dense[0].assumptions["window_kv_cache"] is None
    with pytest.raises(GpuarchError, match="--window-kv-cache: expected one of ring, full"):
        estimate_inference(CATALOG, shape, h200, InferenceConfig(**base,
                                                                 window_kv_cache="cyclic"))


def test_sliding_window_everywhere_sets_no_context_limit() -> None:
    e = estimate_inference(CATALOG, preset("mistral-7b").shape, H100,
                           InferenceConfig(input_len=2048, output_len=512, batch=8))
    assert e.max_context is None
    # 4,096 sequences of 4,097 tokens at 128 KiB each are 2 TiB: no context fits
    huge = estimate_inference(CATALOG, LLAMA_8B, H100,
                              InferenceConfig(input_len=1, output_len=4096, batch=4096))
    assert huge.max_context == 0 and not huge.fits_in_memory


def test_kv_cache_fraction_follows_tensorrt_llm_policy() -> None:
    """--kv-cache-fraction f: the KV cache may use f of what weights and activations leave
    (TensorRT-LLM's kv_cache_free_gpu_mem_fraction); the rest is the reserve. The largest
    batch is the edge of that; 0 keeps the 10%-of-memory reserve."""
    from dataclasses import replace

    from gpuarch.estimate.inference_memory import memory_parts

    shape = preset("llama-3.1-70b").shape
    base = InferenceConfig(input_len=1000, output_len=1000, batch=None, quant=FP8,
                           batching=Batching.CONTINUOUS)
    cfg = replace(base, kv_cache_fraction=0.9)
    e = estimate_inference(CATALOG, shape, H100, cfg)
    plain = estimate_inference(CATALOG, shape, H100, base)
    assert e.max_batch > plain.max_batch  # 10% of what is left is less than 10% of 80 GB

    def parts(batch: int) -> dict[str, float]:
        return {k: float(v) for k, v in memory_parts(shape, cfg, batch, H100).items()}

    edge, over = parts(e.max_batch), parts(e.max_batch + 1)
    left = H100.memory_bytes - edge["weights"] - edge["activations"]
    assert edge["other"] == pytest.approx(0.1 * left)
    assert edge["kv_cache"] <= 0.9 * left
    assert over["kv_cache"] > 0.9 * (H100.memory_bytes - over["weights"] - over["activations"])
    assert e.fits_in_memory and e.assumptions["kv_cache_fraction"] == 0.9
    with pytest.raises(GpuarchError, match="--kv-cache-fraction"):
        estimate_inference(CATALOG, shape, H100, replace(base, kv_cache_fraction=1.5))


def test_python_executor_is_host_bound_at_large_batch() -> None:
    """A Python executor spends 0.816 us of host time per request in flight per expert layer
    per step (TensorRT-LLM PR #10273: 45.11 ms per iteration at 1,536 requests per rank on
    GPT-OSS-120B, whose 36 layers all hold experts), hidden behind the GPU's step until it is
    longer: at batch 1 nothing changes; at a batch of thousands of Qwen3-30B-A3B FP8
    sequences (48 expert layers) on an H100 the step is the host's time, which names the
    bottleneck (an x86 host's: the Grace-measured cost over host_time_x86_speedup; on a
    GB200, Grace, the cost itself); a C++ executor has none, and neither has a dense
    model. vLLM's loop is taken for the comparisons, as it carries the same fixed time a step
    as the C++ executor; TensorRT-LLM's PyTorch backend (the default) differs from it by its
    measured fixed time alone."""
    per_layer = DEFAULT_EFFICIENCY.host_time_per_request_expert_layer_s
    assert per_layer == pytest.approx(45.11e-3 / 1536 / 36, rel=2e-3)
    qwen = preset("qwen3-30b-a3b").shape
    assert qwen.moe_layers == 48
    one_py = _est(shape=qwen, batch=1, quant=FP8, executor="vllm")
    one_cpp = _est(shape=qwen, batch=1, quant=FP8, executor="cpp")
    assert one_py.tpot_s == one_cpp.tpot_s
    one_trt = _est(shape=qwen, batch=1, quant=FP8)
    eff = DEFAULT_EFFICIENCY
    assert one_py.tpot_s - one_trt.tpot_s == pytest.approx(
        eff.decode_step_overhead_s - eff.decode_step_overhead_pytorch_s)
    big = {"shape": qwen, "batch": 3000, "quant": FP8, "input_len": 128, "output_len": 128,
           "batching": Batching.CONTINUOUS}
    py, cpp = _est(**big, executor="vllm"), _est(**big, executor="cpp")
    assert py.batch == cpp.batch == 3000
    host = per_layer * 48 * 3000 / DEFAULT_EFFICIENCY.host_time_x86_speedup
    assert DEFAULT_EFFICIENCY.host_time_x86_speedup > 1
    grace = _est(**big, product=CATALOG.product("gb200"))
    assert sum(grace.decode_step_breakdown_s.values()) == pytest.approx(per_layer * 48 * 3000,
                                                                      rel=1e-9)
    step_py = sum(py.decode_step_breakdown_s.values())
    step_cpp = sum(cpp.decode_step_breakdown_s.values())
    assert step_cpp < host
    assert step_py == pytest.approx(host, rel=1e-9)
    assert py.decode_step_breakdown_s["host"] > 0 == cpp.decode_step_breakdown_s["host"]
    assert py.bottleneck["decode"] == "host" and "host work" in py.bottleneck_reason["decode"]
    assert py.assumptions["executor"] == "vllm"
    assert py.assumptions["executor_host"] == {
        "cpu": "x86", "s_per_request_expert_layer": pytest.approx(host / 48 / 3000)}
    assert grace.assumptions["executor_host"]["cpu"] == "grace"
    x86_us = 1e6 * DEFAULT_EFFICIENCY.host_time_per_request_expert_layer_s \
        / DEFAULT_EFFICIENCY.host_time_x86_speedup  # 0.816 us / 1.19
    assert f"(an x86 host: {x86_us:.2f} us a request" in py.bottleneck_reason["decode"]
    assert f"{x86_us:.2f}" == "0.69"
    assert "(a Grace host: 0.82 us a request" in grace.bottleneck_reason["decode"]
    assert cpp.assumptions["executor_host"] is None
    # a dense model at the same batch: no host floor, the GPU's step as with a C++ loop
    dense = {**big, "shape": LLAMA_8B}
    assert _est(**dense, executor="vllm").tpot_s == _est(**dense, executor="cpp").tpot_s
    with pytest.raises(GpuarchError, match=r"--executor: expected one of python, cpp, vllm, "
                                           r"sglang, got 'pyton'; did you mean 'python'"):
        _est(executor="pyton")


@given(batch=st.integers(1, 4096))
@settings(max_examples=30, deadline=None)
def test_python_executor_never_beats_cpp(batch: int) -> None:
    """The host's time only ever lengthens a step: per-token time is never shorter with a
    Python executor than with a C++ one of the same fixed time a step (vLLM's loop), and equal
    whenever the GPU's step is the longer."""
    kw = {"batch": batch, "quant": FP8, "input_len": 256, "output_len": 256,
          "batching": Batching.CONTINUOUS}
    py, cpp = _est(**kw, executor="vllm"), _est(**kw, executor="cpp")
    assert py.tpot_s >= cpp.tpot_s * (1 - 1e-12)
    if py.decode_step_breakdown_s["host"] == 0:
        assert py.tpot_s == pytest.approx(cpp.tpot_s)


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(["llama-3.1-8b", "mixtral-8x7b", "gpt-oss-20b", "deepseek-v3"]),
       tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2]),
       batch=st.integers(1, 512), continuous=st.booleans(),
       executor=st.sampled_from(["python", "cpp", "vllm"]), draft=st.sampled_from([0, 2]),
       chunk=st.sampled_from([0, 512]))
def test_phase_parts_add_up(model: str, tp: int, pp: int, batch: int, continuous: bool,
                            executor: str, draft: int, chunk: int) -> None:
    """prefill_parts_s and decode_step_parts_s split one prefill pass and one decode step by
    kind without remainder, whatever the model, parallelism, batching, executor,
    speculation or chunking; each part is non-negative and only the kinds a setup has are
    non-zero."""
    shape = preset(model).shape
    ep = 8 if shape.is_moe and shape.experts % 8 == 0 else 1
    e = estimate_inference(CATALOG, shape, CATALOG.product("h200"), InferenceConfig(
        input_len=1024, output_len=256, batch=batch, gpus=max(tp, ep) * pp, tp=tp, pp=pp,
        ep=ep, quant=FP8, executor=executor, chunk=chunk,
        speculative_tokens=draft, acceptance_length=1.5 if draft else 0.0,
        batching=Batching.CONTINUOUS if continuous else Batching.STATIC))
    doc = e.as_json()
    for parts, phase in (("prefill_parts_s", "prefill_breakdown_s"),
                         ("decode_step_parts_s", "decode_step_breakdown_s")):
        assert set(doc[parts]) == set(OP_PARTS)
        assert min(doc[parts].values()) >= 0
        assert sum(doc[parts].values()) == pytest.approx(sum(doc[phase].values()), rel=1e-9)
        assert doc[parts]["dense_gemms"] > 0 and doc[parts]["attention"] > 0
        assert (doc[parts]["expert_gemms"] > 0) is shape.is_moe
        assert (doc[parts]["tensor_parallel"] > 0) is (tp > 1)
        assert (doc[parts]["pipeline_p2p"] > 0) is (pp > 1)
        assert (doc[parts]["expert_parallel"] > 0) is (ep > 1)
    assert doc["decode_step_parts_s"]["host"] == doc["decode_step_breakdown_s"]["host"]


def test_decode_parts_follow_the_context() -> None:
    """Attention (the KV-cache reads) takes a growing share of a decode step as the context
    grows; the dense GEMMs (the weight reads) a shrinking one."""
    short = _est(input_len=512, batch=64).decode_step_parts_s
    long = _est(input_len=16384, batch=64).decode_step_parts_s
    assert long["attention"] > 4 * short["attention"]
    assert long["dense_gemms"] == pytest.approx(short["dense_gemms"], rel=1e-6)
    assert long["attention"] / sum(long.values()) > short["attention"] / sum(short.values())


def test_allgather_dispatch_moves_every_token_to_every_gpu() -> None:
    """--moe-comm allgather (TensorRT-LLM with attention DP and no multi-node NVLink): each
    GPU gathers all ranks' tokens and reduce-scatters 16-bit outputs, so a top-1 model
    (Llama 4 Maverick, EP 8) moves about 8 / 1 times the all-to-all's bytes (and twice that
    on the way back) and its prefill's expert traffic grows accordingly, while a top-8 model
    at EP 4 moves less; without data-parallel attention (EP within TP) the setting changes
    nothing. A bad value names the flag."""
    h200 = CATALOG.product("h200")
    fp8 = FP8

    def step(model: str, ep: int, comm: str, tp: int = 1) -> float:
        e = estimate_inference(CATALOG, preset(model).shape, h200, InferenceConfig(
            input_len=1024, output_len=1024, batch=512, gpus=max(tp, ep), tp=tp, ep=ep,
            quant=fp8, moe_comm=comm))
        return e.prefill_parts_s["expert_parallel"]  # 8,192 tokens a pass: bandwidth-bound

    assert step("llama-4-maverick", 8, "allgather") > 4 * step("llama-4-maverick", 8,
                                                                 "alltoall")
    assert step("qwen3-235b-a22b", 4, "allgather") < step("qwen3-235b-a22b", 4, "alltoall")
    assert step("qwen3-235b-a22b", 4, "allgather", tp=4) == \
        step("qwen3-235b-a22b", 4, "alltoall", tp=4)
    with pytest.raises(GpuarchError, match="--moe-comm: expected one of alltoall, allgather"):
        step("qwen3-235b-a22b", 4, "broadcast")


def test_offline_runs_end_with_a_part_full_wave() -> None:
    """--num-requests N: fixed-length requests pass through the batch in waves; a whole
    number of full waves runs at one rate, that of the steady cycle with its prompts in
    whole-budget passes (they wait from the start), above a stream's, whose passes hold
    the prompts that arrive during a step and a pass; a last part-full wave lowers it, and
    fewer requests than slots shrink the batch to them. Split over replicas (data-parallel
    attention ranks count as replicas), each holds its share. Static batching refuses it.
    (With chunked prefill the waves start together: the staggered start below is not
    modelled for it.)"""
    base = {"input_len": 1000, "output_len": 1000, "batching": Batching.CONTINUOUS,
            "chunk": 1000}
    steady = _est(**base, batch=None)
    b = steady.batch
    rate = steady.output_tokens_per_s
    whole = _est(**base, batch=None, num_requests=3 * b)
    assert whole.output_tokens_per_s > rate
    assert _est(**base, batch=None, num_requests=5 * b).output_tokens_per_s == \
        pytest.approx(whole.output_tokens_per_s, rel=1e-9)
    tail = _est(**base, batch=None, num_requests=3 * b + b // 3)
    assert tail.output_tokens_per_s < whole.output_tokens_per_s
    few = _est(**base, batch=None, num_requests=b // 4)
    assert few.batch == b // 4 and few.output_tokens_per_s < tail.output_tokens_per_s
    assert few.assumptions["num_requests"] == b // 4
    # a client concurrency above the run's requests sends them all at once: nothing waits
    # for a slot (the run is the one at a concurrency of its requests)
    burst = _est(**base, batch=b // 2, num_requests=b // 4)
    assert burst.ttft_s == pytest.approx(few.ttft_s, rel=1e-12)
    assert burst.output_tokens_per_s == pytest.approx(few.output_tokens_per_s, rel=1e-12)
    two = estimate_inference(CATALOG, LLAMA_8B, H100, InferenceConfig(
        **base, gpus=2, num_requests=b // 2))
    assert two.batch == math.ceil((b // 2) / 2)  # each of the two replicas holds half
    with pytest.raises(GpuarchError, match="--num-requests: an offline run"):
        _est(batch=8, num_requests=100)
    with pytest.raises(GpuarchError, match="--num-requests: expected an integer >= 1"):
        _est(**base, batch=8, num_requests=-1)


def test_offline_runs_admit_whole_prompts_a_few_an_iteration() -> None:
    """Without chunked prefill an engine admits whole prompts within its token budget after
    the running sequences' tokens (TensorRT-LLM's micro-batch scheduler): with 2,048 tokens
    and prompts of 1,024, two in the first iteration, then one an iteration, so 226 slots
    fill over 225 iterations. Where a prompt cannot fit beside the running sequences, with
    pipeline stages, with chunked prefill, or where admission outlasts an answer, the rule
    does not apply. A run that fits in one batch then takes the stagger's length of decode
    steps more than one whose prompts all start together, each at about a one-sequence
    step (a dense model's decode step is a fixed part plus a part per sequence: the start's
    and the end's small batches do the same sequence-steps in more steps)."""
    base = {"input_len": 1024, "output_len": 1024, "batching": Batching.CONTINUOUS,
            "max_num_tokens": 2048}
    starts = admission_starts(InferenceConfig(**base, batch=226), 226, 1024)
    assert starts is not None
    assert list(starts[:4]) == [0, 0, 1, 2] and starts[-1] == 224 and len(starts) == 226
    for cfg, answer in ((InferenceConfig(**{**base, "max_num_tokens": 1124}), 1024),
                        (InferenceConfig(**base, chunk=512), 1024),
                        (InferenceConfig(**base, gpus=2, pp=2), 1024),
                        (InferenceConfig(**base), 100)):
        assert admission_starts(cfg, 226, answer) is None
    b = _est(**base, batch=None).batch
    assert b == 226

    def run(**kw: object) -> dict[str, object]:
        doc = _est(**base, batch=None, num_requests=b, **kw).as_json()["assumptions"]
        return doc["offline_run"]

    staggered, together = run(), run(chunk=1024)  # a 1,024-token chunk: whole prompts
    assert staggered["ends_with"] == "staggered" and together["ends_with"] == "last wave"
    one = sum(_est(**base, batch=1).as_json()["decode_step_parts_s"].values())
    assert staggered["run_s"] - together["run_s"] == pytest.approx(224 * one, rel=0.1)
    assert together["beyond_steady_s"] == pytest.approx(0.0, abs=1e-9)


def test_offline_runs_with_varying_answers_end_with_a_drain() -> None:
    """--num-requests with --output-len-cv and --max-output-len: while requests wait the run
    goes at the steady rate (the estimate's batch over its TPOT; answers of varying length
    free their slots one by one, so the waiting prompts are admitted a few a pass as they
    free, as a stream's arrive, not in whole budgets), then the batch in flight drains, a
    step lasting while any of them still runs. The drain is a fixed time: more requests add
    only their work at the steady rate. A higher cap lengthens it by a step's fixed part a
    token, less than a full step.
    Fewer requests than slots start together and drain from the start. Without the cap the
    waves take one length, as before."""
    base = {"input_len": 1000, "output_len": 1000, "batching": Batching.CONTINUOUS,
            "output_len_cv": 1.0}
    b = _est(**base, batch=None).batch
    offline = _est(**base, batch=None, num_requests=3 * b, max_output_len=8000)
    rate = offline.batch / offline.tpot_s
    steady = _est(**base, batch=None)  # a stream's: the same small passes
    assert offline.batch == b
    assert steady.output_tokens_per_s == pytest.approx(rate, rel=1e-9)

    def seconds(requests: int, cap: int = 8000) -> float:
        e = _est(**base, batch=None, num_requests=requests, max_output_len=cap)
        assert e.assumptions["max_output_len"] == cap
        return requests * 1000 / e.output_tokens_per_s

    short, long = seconds(3 * b), seconds(30 * b)
    assert long - short == pytest.approx(27 * b * 1000 / rate, rel=1e-9)
    assert short > 3 * b * 1000 / rate  # the drain costs time beyond the steady rate's
    # the estimate reports the run's length and what the drain adds to it
    run = _est(**base, batch=None, num_requests=3 * b,
               max_output_len=8000).assumptions["offline_run"]
    assert run["ends_with"] == "drain" and run["run_s"] == pytest.approx(short, rel=1e-9)
    assert run["beyond_steady_s"] == pytest.approx(short - 3 * b * 1000 / rate, rel=1e-6)
    slope = (seconds(3 * b, cap=16000) - short) / 8000
    assert 0 < slope < steady.tpot_s
    few = seconds(b // 4)
    assert few / (b // 4) > short / (3 * b)  # a run within one batch is all drain
    # without the cap, whole waves (started together: chunked prefill) at the steady rate
    waves = _est(**base, batch=None, num_requests=3 * b, chunk=1000)
    assert waves.output_tokens_per_s == pytest.approx(rate, rel=1e-9)
    assert waves.assumptions["offline_run"]["ends_with"] == "last wave"
    assert waves.assumptions["offline_run"]["beyond_steady_s"] == pytest.approx(0, abs=1e-6)
    with pytest.raises(GpuarchError, match="--max-output-len: prices the end of an offline"):
        _est(**{**base, "output_len_cv": 0.0}, batch=None, num_requests=3 * b,
             max_output_len=8000)
    with pytest.raises(GpuarchError, match="--max-output-len: 500 is below the mean output"):
        _est(**base, batch=None, num_requests=3 * b, max_output_len=500)


@pytest.mark.parametrize(("mean", "cv"), [(1000.0, 1.0), (1000.0, 0.5), (300.0, 1.25)])
def test_a_drains_shares_are_the_answers_survival_and_residual(mean: float,
                                                               cv: float) -> None:
    """drain_shares: a batch started together keeps the answers longer than k tokens
    running, so its tokens a sequence are the mean answer; a batch caught in flight holds
    length-biased answers half done on average, mean x (1 + cv^2) / 2 tokens left (the
    renewal residual); both within 1.5% of those (65,536 gamma draws, far below the cap
    here), both shares falling from near 1 (the shortest answers leave at once) to 0 at the
    cap."""
    widths, whole = drain_shares(mean, cv, 20000, residual=False)
    _, left = drain_shares(mean, cv, 20000, residual=True)
    assert widths.sum() == pytest.approx(20000)
    assert float(np.dot(widths, whole)) == pytest.approx(mean, rel=0.015)
    assert float(np.dot(widths, left)) == pytest.approx(mean * (1 + cv ** 2) / 2, rel=0.015)
    for shares in (whole, left):
        assert shares[0] > 0.9 and shares[-1] == 0.0
        assert np.all(np.diff(shares) <= 0)


def test_a_moe_drain_costs_more_than_a_line_from_one_sequence_to_the_batch() -> None:
    """The drain's steps are costed at the batch still running: a MoE layer touches every
    expert until few sequences are left, so a Mixtral 8x7B drain (two H100s, TP 2, answers
    of 1,000 +- 100%, capped at 8,000) takes longer beyond the steady rate than the line
    from the one-sequence step to the full batch's gave (the one-sequence step times the
    cap's steps beyond the mean residual: 60 s; the drain priced slice by slice, each slice
    for as long as any sequence is still running in it: 69 s; 93 s while the drain was
    taken to run to the cap whatever the batch)."""
    mixtral = preset("mixtral-8x7b").shape
    base = {"input_len": 1000, "output_len": 1000, "batching": Batching.CONTINUOUS,
            "output_len_cv": 1.0, "gpus": 2, "tp": 2}
    b = estimate_inference(CATALOG, mixtral, H100, InferenceConfig(**base)).batch
    run = estimate_inference(CATALOG, mixtral, H100, InferenceConfig(
        **base, num_requests=5 * b, max_output_len=8000)).assumptions["offline_run"]
    one = estimate_inference(CATALOG, mixtral, H100, InferenceConfig(
        input_len=1000, output_len=1000, batch=1, gpus=2, tp=2)).tpot_s
    line = one * (8000 - 1000)  # the mean residual at a spread of 1: 1,000 tokens
    assert run["ends_with"] == "drain"
    assert run["beyond_steady_s"] > 1.1 * line


def test_fp8_context_attention_speeds_long_prefill_only_where_it_applies() -> None:
    """--fp8-context-attention runs prefill attention at the FP8 rate where the activations
    are FP8 or FP4 and the KV cache FP8 (TensorRT-LLM's FP8 context FMHA): a 32k-token prompt
    prefills faster (its attention 0.28 x 2 / 0.45 = 1.24x the 16-bit rate, as the measured
    kernels on H200 run 1.37x), decode is unchanged; with a 16-bit KV cache it does nothing;
    on a GPU without FP8 Tensor Cores, asked for where it would apply, it is an error naming
    the flag."""
    h200 = CATALOG.product("h200")
    shape = preset("llama-3.3-70b").shape

    def est(quant: QuantScheme, flag: bool, product=h200):  # type: ignore[no-untyped-def]
        return estimate_inference(CATALOG, shape, product, InferenceConfig(
            input_len=32768, output_len=1024, batch=4, gpus=2, tp=2, quant=quant,
            fp8_context_attention=flag))

    plain, fast = est(FP8, False), est(FP8, True)
    assert fast.ttft_s < 0.95 * plain.ttft_s
    assert fast.decode_step_parts_s == plain.decode_step_parts_s
    assert fast.assumptions["context_attention"] == "fp8"
    sixteen_kv = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.BF16)
    assert est(sixteen_kv, True).ttft_s == est(sixteen_kv, False).ttft_s
    assert est(sixteen_kv, False).assumptions["context_attention"] == "16-bit"
    # asked for where it does not apply: the estimate says why it did nothing
    assert est(sixteen_kv, True).assumptions["context_attention"].startswith(
        "16-bit (--fp8-context-attention applies with FP8 or FP4 activations and an FP8 KV")
    with pytest.raises(GpuarchError, match=r"--fp8-context-attention: .* no FP8 Tensor Cores"):
        est(FP8, True, A100)


def test_a_cached_prefix_is_neither_prefilled_nor_stored_per_sequence() -> None:
    """Prefix caching: the cached tokens' prefill is skipped (attention still sees them)
    and their KV cache is held once per replica. Hand count for Llama-3.1-8B in BF16:
    32 layers x 2 (K, V) x 8 KV heads x 128 x 2 bytes = 131,072 bytes a token; 10 sequences
    of 2,048 + 256 tokens sharing a 1,024-token prefix hold 10 x 2,304 - 9 x 1,024 = 13,824
    tokens' worth."""
    cfg = InferenceConfig(input_len=2048, output_len=256, batch=10, cached_prefix=1024)
    assert memory_parts(LLAMA_8B, cfg, 10, H100)["kv_cache"] == 13_824 * 131_072
    one = dataclasses.replace(cfg, batch=1)
    ttft = {c: estimate_inference(CATALOG, LLAMA_8B, H100,
                                  dataclasses.replace(one, cached_prefix=c)).ttft_s
            for c in (0, 512, 1024, 2047)}
    assert ttft[0] > ttft[512] > ttft[1024] > ttft[2047]
    # 1,024 new tokens attending to 2,048 positions cost more than a 1,024-token prompt
    short = estimate_inference(CATALOG, LLAMA_8B, H100,
                               dataclasses.replace(one, input_len=1024, cached_prefix=0))
    assert ttft[1024] > short.ttft_s
    bigger = [estimate_inference(CATALOG, LLAMA_8B, H100, dataclasses.replace(
        cfg, batch=None, cached_prefix=c)).max_batch for c in (0, 1024, 2000)]
    assert bigger == sorted(bigger) and bigger[0] < bigger[-1]
    for bad in (2048, -1):
        with pytest.raises(GpuarchError, match="--cached-prefix: expected tokens from 0"):
            estimate_inference(CATALOG, LLAMA_8B, H100,
                               dataclasses.replace(cfg, cached_prefix=bad))


def test_a_cached_prefix_is_not_shared_by_sliding_window_layers() -> None:
    """A ring-buffer window layer moves past the prefix, so only the full-attention layers
    share it; with every position kept (window_kv_cache 'full') all layers do."""
    gpt_oss = preset("gpt-oss-20b").shape
    per_token = kv_bytes_per_token(gpt_oss, 2.0)
    cfg = InferenceConfig(input_len=4096, output_len=256, batch=4)
    for policy, sharing in (("ring", 1 - gpt_oss.windowed_layers / gpt_oss.layers),
                            ("full", 1.0)):
        base = dataclasses.replace(cfg, window_kv_cache=policy)
        saved = memory_parts(gpt_oss, base, 4, H100)["kv_cache"] - memory_parts(
            gpt_oss, dataclasses.replace(base, cached_prefix=1000), 4, H100)["kv_cache"]
        assert saved == pytest.approx(3 * 1000 * sharing * per_token)


def _bisect(fits: Callable[[int], bool], hi: int) -> int | None:
    """Plain bisection: the reference for ``_largest``."""
    if not fits(1):
        return 0
    if fits(hi):
        return None
    lo = 1
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


@settings(max_examples=300, deadline=None)
@given(hi=st.integers(2, 2**24),
       pieces=st.lists(st.tuples(st.integers(1, 2**24), st.floats(0.0, 1e9)), max_size=4),
       start=st.floats(-1e9, 1e12), slope=st.floats(0.0, 1e9), step=st.floats(0.0, 1e12))
def test_the_memory_search_finds_what_bisection_finds(
        hi: int, pieces: list[tuple[int, float]], start: float, slope: float,
        step: float) -> None:
    """``_largest`` (false position with halving) returns plain bisection's answer for any
    non-increasing margin: straight, with kinks (windows, caps), with a step, or flat."""
    from gpuarch.estimate.inference_memory import _largest

    def margin(n: int) -> float:
        m = start - slope * n - (step if n > hi // 3 else 0.0)
        for at, extra in pieces:
            m -= extra * max(0, n - at)
        return m

    assert _largest(margin, hi) == _bisect(lambda n: margin(n) >= 0, hi)


@settings(max_examples=80, deadline=None)
@given(model=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b",
                              "gpt-oss-20b", "deepseek-v3"]),
       gpu=st.sampled_from(["h100", "a100", "b200", "l40s"]), tp=st.sampled_from([1, 2, 8]),
       input_len=st.integers(1, 40_000), output_len=st.integers(1, 8_000),
       kv=st.sampled_from([QuantFormat.BF16, QuantFormat.FP8]),
       fraction=st.sampled_from([0.0, 0.5, 0.9]), chunk=st.sampled_from([0, 512]),
       prefix=st.integers(0, 30_000), static=st.booleans(),
       window=st.sampled_from(["ring", "full"]))
def test_max_batch_and_context_are_bisections_answers(
        model: str, gpu: str, tp: int, input_len: int, output_len: int, kv: QuantFormat,
        fraction: float, chunk: int, prefix: int, static: bool, window: str) -> None:
    """On real configurations the largest batch and context are what bisection over the
    'fits' test finds (the search was changed for speed, not for its answers)."""
    from gpuarch.estimate.inference_config import MAX_BATCH_SEARCH
    from gpuarch.estimate.inference_memory import (
        MAX_CONTEXT_SEARCH,
        _margin,
        max_batch_that_fits,
        max_context_that_fits,
    )

    cfg = InferenceConfig(
        input_len=input_len, output_len=output_len, gpus=tp, tp=tp,
        quant=QuantScheme(QuantFormat.BF16, QuantFormat.BF16, kv), kv_cache_fraction=fraction,
        chunk=chunk, cached_prefix=min(prefix, input_len - 1), window_kv_cache=window,
        batching=Batching.STATIC if static else Batching.CONTINUOUS)
    shape, product = preset(model).shape, CATALOG.product(gpu)
    margin = _margin(shape, cfg, product)
    batch = _bisect(lambda b: margin(b, input_len) >= 0, MAX_BATCH_SEARCH)
    assert max_batch_that_fits(shape, cfg, product) == (
        MAX_BATCH_SEARCH if batch is None else batch)
    for b in (1, 7, 300):
        prompt = _bisect(lambda p, b=b: margin(b, p) >= 0, MAX_CONTEXT_SEARCH)
        assert max_context_that_fits(shape, cfg, product, b) == (
            prompt + output_len if prompt else prompt)


def test_padded_cuda_graphs_run_a_decode_step_at_the_next_captured_size() -> None:
    """TensorRT-LLM's trtllm-bench options in the perf overviews capture CUDA graphs at
    1, 2, 4, ..., 384, 512, 1024, ..., 8192 sequences with padding on: 1,584 sequences run as
    2,048 (their GEMM and expert rows), 300 as 384, 512 as 512; with graphs up to 256 only,
    300 run eagerly as 300. A compute-bound
    step costs the padded rows' GEMMs; attention (real sequences only) and the KV cache do
    not change, nor does a step at a captured size."""
    sizes = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192)
    shape = preset("qwen3-30b-a3b").shape
    fp4 = QuantScheme(QuantFormat.FP4, QuantFormat.FP4, QuantFormat.FP8)
    b200 = CATALOG.product("b200")

    def step(batch: int, padded: bool, captured: tuple[int, ...] = sizes) -> InferenceEstimate:
        cfg = InferenceConfig(input_len=1000, output_len=1000, batch=batch, quant=fp4,
                              batching=Batching.CONTINUOUS, executor="cpp",
                              cuda_graph_batch_sizes=captured if padded else ())
        return estimate_inference(CATALOG, shape, b200, cfg)

    plain, padded = step(1584, False), step(1584, True)
    assert padded.assumptions["cuda_graph_padding"] == {"batch_sizes": list(sizes),
                                                        "decode_rows": 2048}
    assert plain.assumptions["cuda_graph_padding"] is None
    assert padded.tpot_s > plain.tpot_s
    assert padded.prefill_parts_s == plain.prefill_parts_s
    assert padded.memory == plain.memory
    # 300 sequences run as 384: the GEMM rows are the plain engine's at 384 sequences, the
    # attention the 300 real sequences'
    small, at_384, unpadded = step(300, True), step(384, False), step(300, False)
    for part in ("dense_gemms", "expert_gemms", "lm_head"):
        assert small.decode_step_parts_s[part] == pytest.approx(
            at_384.decode_step_parts_s[part], rel=1e-12)
    assert small.decode_step_parts_s["attention"] == unpadded.decode_step_parts_s["attention"]
    assert step(512, True).tpot_s == step(512, False).tpot_s
    # more sequences than the largest captured size: an eager step, unpadded, which lasts
    # at least the host's launches for the 48 layers (tests/test_eager_decode.py)
    eager = step(300, True, captured=sizes[:9]).decode_step_parts_s
    for part in ("dense_gemms", "expert_gemms", "lm_head", "attention"):
        assert eager[part] == unpadded.decode_step_parts_s[part]
    launch = 48 * DEFAULT_EFFICIENCY.eager_decode_host_s_per_layer
    assert sum(eager.values()) == pytest.approx(
        max(sum(unpadded.decode_step_parts_s.values()), launch), rel=1e-12)


def test_a_sources_engine_settings_reach_its_points(capsys: pytest.CaptureFixture[str]) -> None:
    """The perf overviews' benchmark options (padded CUDA graphs at the listed sizes) are set
    once on the source and reach every point of it, not the other sources'; the command
    line takes the same list and refuses a bad one naming the flag."""
    import json

    from gpuarch.cli.main import main
    from gpuarch.validation.inference import load_inference_points, point_config

    sizes = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192)
    for p in load_inference_points():
        padded = p.source in ("trtllm-perf-overview-v1.0", "trtllm-perf-overview-03e27c7",
                              "trtllm-perf-overview-1.2")
        assert point_config(p, 8).cuda_graph_batch_sizes == (sizes if padded else ())
    argv = ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len",
            "512", "--output-len", "64", "--batch", "300", "--batching", "continuous"]
    assert main([*argv, "--cuda-graph-batch-sizes", "512,128,256,128", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["assumptions"]["cuda_graph_padding"] == {"batch_sizes": [128, 256, 512],
                                                        "decode_rows": 512}
    assert main([*argv, "--cuda-graph-batch-sizes", "128,256,512"]) == 0
    assert "a padded CUDA graph of 512 sequences" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--cuda-graph-batch-sizes", "1,0"])
    assert exc.value.code == 2
    assert "argument --cuda-graph-batch-sizes: expected" in capsys.readouterr().err


def test_a_sources_engine_table_takes_only_point_settings(tmp_path: Path) -> None:
    """A misspelt setting in a source's engine table is an error naming it, not a silent
    no-op."""
    from gpuarch.validation.inference import load_inference_points

    path = tmp_path / "points.toml"
    path.write_text('[[source]]\nid = "s"\ntitle = "t"\nurl = "https://x"\n'
                    'engine = { cuda_graph_batch_size = [1, 2] }\n\n'
                    '[[point]]\nid = "p"\nsource = "s"\n')
    with pytest.raises(GpuarchError, match="engine: unknown setting "
                                           "'cuda_graph_batch_size'; did you mean"):
        load_inference_points(path)


def test_an_unknown_point_key_is_named(tmp_path: Path) -> None:
    """A misspelt key on a point would be ignored and the run modelled without it: the
    loader names it, with the key meant."""
    from gpuarch.validation.inference import load_inference_points

    path = tmp_path / "points.toml"
    path.write_text('[[source]]\nid = "s"\ntitle = "t"\nurl = "https://x"\n\n'
                    '[[point]]\nid = "p"\nsource = "s"\nkv_precison = "fp8"\n')
    with pytest.raises(GpuarchError, match="point 'p': unknown key 'kv_precison'; "
                                           "did you mean 'kv_precision'"):
        load_inference_points(path)


def test_nvls_shortens_tensor_parallel_decode_only_on_nvswitch_hopper_and_blackwell() -> None:
    """Llama-3.1-70B at TP 8 and a large decode batch: on H100 (NVSwitch, NVLS) the
    all-reduces run as NVLink SHARP and the step is shorter than with rings and trees only
    (--no-nvls); the weights and KV cache reads are the same. On A100 (no NVLS) the switch
    changes nothing. The assumptions say which ran (NCCL's algorithms where the engine's
    one-shot kernel is slower)."""
    shape = preset("llama-3.1-70b").shape
    kw = {"tp": 8, "gpus": 8, "batch": 256, "input_len": 1024, "output_len": 1024}
    on, off = _est(shape, **kw), _est(shape, **kw, nvls=False)
    assert on.tpot_s < 0.95 * off.tpot_s
    assert on.memory == off.memory
    kernel = "TensorRT-LLM's one-shot kernel, or NCCL's {} where faster"
    assert on.assumptions["tp_all_reduce"] == kernel.format("ring, tree or NVLink SHARP")
    assert off.assumptions["tp_all_reduce"] == kernel.format("ring or tree")
    a100 = CATALOG.product("a100")
    assert _est(shape, a100, **kw).tpot_s == _est(shape, a100, **kw, nvls=False).tpot_s
    assert _est(shape, a100, **kw).assumptions["tp_all_reduce"] == kernel.format("ring or tree")
    assert _est(LLAMA_8B).assumptions["tp_all_reduce"] is None  # TP 1: no all-reduce


def _adp(balance: float | None = None, **kw):  # type: ignore[no-untyped-def]
    """Qwen3-235B on 8 H200 with data-parallel attention and EP 8, in-flight batching, with
    the baseline balance ratio replaced by ``balance`` if given."""
    eff = DEFAULT_EFFICIENCY if balance is None else \
        dataclasses.replace(DEFAULT_EFFICIENCY, adp_prefill_balance=balance)
    base = {"input_len": 1000, "output_len": 1000, "batch": 256, "gpus": 8, "tp": 1,
            "ep": 8, "quant": FP8, "batching": Batching.CONTINUOUS}
    return estimate_inference(CATALOG, preset("qwen3-235b-a22b").shape,
                              CATALOG.product("h200"), InferenceConfig(**{**base, **kw}),
                              efficiency=eff)


def test_attention_dp_prefill_waits_for_the_busiest_rank() -> None:
    """With data-parallel attention under in-flight batching each rank schedules its own
    context requests, so a prefill pass's per-rank work (all but the gathered expert block)
    is charged over the balance ratio TensorRT-LLM's ADP Balance blog measured (54.11%
    baseline, 87.70% with its balanced scheduler): at ratio b the wait is (1/b - 1) times
    that work, the gathered expert work and every decode step are untouched, and at ratio 1
    nothing is added."""
    assert DEFAULT_EFFICIENCY.adp_prefill_balance == 0.5411
    assert DEFAULT_EFFICIENCY.adp_prefill_balance_lined_up == 0.8770
    even, half, quarter = _adp(1.0), _adp(0.5), _adp(0.25)
    assert even.prefill_parts_s["attention_dp_wait"] == 0.0
    per_rank = half.prefill_parts_s["attention_dp_wait"]  # (1/0.5 - 1) x the work
    assert per_rank > 0.05 * sum(even.prefill_parts_s.values())
    assert quarter.prefill_parts_s["attention_dp_wait"] == pytest.approx(3 * per_rank)
    for key in ("expert_gemms", "expert_parallel", "dense_gemms", "attention"):
        assert half.prefill_parts_s[key] == pytest.approx(even.prefill_parts_s[key])
    assert sum(half.prefill_parts_s.values()) == \
        pytest.approx(sum(even.prefill_parts_s.values()) + per_rank)
    assert half.decode_step_parts_s == even.decode_step_parts_s
    assert half.output_tokens_per_s < even.output_tokens_per_s
    # the default ratio, and the lined-up one with --adp-balance
    base, lined = _adp(), _adp(adp_balance=True)
    assert base.prefill_parts_s["attention_dp_wait"] == \
        pytest.approx(per_rank * (1 / 0.5411 - 1))
    assert lined.prefill_parts_s["attention_dp_wait"] == \
        pytest.approx(per_rank * (1 / 0.8770 - 1))
    assert base.assumptions["attention_dp_prefill"] == \
        "waits for the busiest rank: per-rank work x1.85"
    assert lined.output_tokens_per_s > base.output_tokens_per_s


@pytest.mark.parametrize("kw", [
    {"batching": Batching.STATIC},  # every rank prefills its batch at once
    {"tp": 8},  # EP within TP: one replica, no data-parallel attention
])
def test_no_attention_dp_wait_without_independent_ranks(kw: dict[str, object]) -> None:
    """Static batches, and EP no wider than TP, charge no attention-DP wait."""
    est = _adp(**kw)
    assert est.prefill_parts_s["attention_dp_wait"] == 0.0
    assert est.assumptions["attention_dp_prefill"] is None


def test_a_dense_model_has_no_attention_dp_wait() -> None:
    """A dense model's replicas share nothing, so none waits for another."""
    est = _est(gpus=8, tp=1, batch=64, batching=Batching.CONTINUOUS)
    assert est.prefill_parts_s["attention_dp_wait"] == 0.0


def test_speculative_decode_steps_wait_for_no_rank() -> None:
    """A decode step that verifies drafted tokens runs several queries per sequence, but it
    is no prefill pass: no attention-DP wait however many drafts."""
    est = _adp(speculative_tokens=3, acceptance_length=2.5)
    assert est.decode_step_parts_s["attention_dp_wait"] == 0.0
    assert est.prefill_parts_s["attention_dp_wait"] > 0.0


def test_moe_imbalance_loads_the_busiest_rank_not_the_weights() -> None:
    """--moe-imbalance X in serving: the busiest expert-parallel rank's expert GEMMs,
    permutation and all-to-alls carry X times the mean tokens, so prefill (compute-bound
    expert GEMMs) and the all-to-all grow, while the weights a decode step streams, and the
    memory per GPU, do not change; a dense model has nothing to imbalance; below 1 is
    refused naming the flag."""
    qwen = preset("qwen3-235b-a22b").shape
    h200 = CATALOG.product("h200")
    base = {"input_len": 2048, "output_len": 128, "batch": 64, "gpus": 8, "tp": 1, "ep": 8}

    def est(x: float) -> InferenceEstimate:
        return estimate_inference(CATALOG, qwen, h200,
                                  InferenceConfig(**base, moe_imbalance=x))

    even, uneven = est(1.0), est(2.0)
    assert uneven.ttft_s > even.ttft_s and uneven.tpot_s >= even.tpot_s
    pre_even, pre_uneven = even.prefill_breakdown_s, uneven.prefill_breakdown_s
    assert pre_uneven["compute"] > 1.5 * pre_even["compute"]
    assert pre_uneven["communication"] == pytest.approx(2.0 * pre_even["communication"],
                                                        rel=0.05)
    assert uneven.as_json()["memory_per_gpu_gib"] == even.as_json()["memory_per_gpu_gib"]
    assert uneven.assumptions["moe_imbalance"] == 2.0
    with pytest.raises(GpuarchError, match="--moe-imbalance: expected"):
        InferenceConfig(**base, moe_imbalance=0.9).validate(qwen)
    # 128 experts over EP 8 is 16 per rank, more than the 8 per token: at most every token's
    # eight copies on one rank, 8x the mean; DeepSeek-V3 at EP 64 holds 4 experts per rank,
    # so a token sends at most 4 of its 8 copies there: 64 x 4 / 8 = 32x.
    InferenceConfig(**base, moe_imbalance=8.0).validate(qwen)
    with pytest.raises(GpuarchError, match=r"--moe-imbalance: 8\.1 exceeds 8"):
        InferenceConfig(**base, moe_imbalance=8.1).validate(qwen)
    dsv3 = preset("deepseek-v3").shape
    with pytest.raises(GpuarchError, match="--moe-imbalance: 33 exceeds 32"):
        dsv3.check_expert_parallel(64, 33.0)
    dsv3.check_expert_parallel(64, 32.0)


@pytest.mark.parametrize("batching,chunk,requests", [(Batching.CONTINUOUS, 0, 1000),
                                                     (Batching.CONTINUOUS, 512, 0),
                                                     (Batching.STATIC, 0, 0)])
def test_costing_a_prefill_pass_once_changes_nothing(monkeypatch: pytest.MonkeyPatch,
                                                     batching: Batching, chunk: int,
                                                     requests: int) -> None:
    """The runner costs a prefill pass for given single values once and reuses it (a
    continuous-batching estimate prices the same pass for the steady state and for a new
    prompt's first token): every figure and every part by kind is what costing each pass
    afresh gives."""
    shape = preset("llama-3.1-70b").shape
    cfg = InferenceConfig(input_len=2048, output_len=512, batch=64, gpus=2, tp=2,
                          quant=QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8),
                          batching=batching, chunk=chunk, num_requests=requests)

    def run() -> dict[str, object]:
        return estimate_inference(CATALOG, shape, CATALOG.product("h100"), cfg,
                                  system=CATALOG.system("dgx h100")).as_json()

    reused = run()
    monkeypatch.setattr(ReplicaRunner, "forward", lambda self, seqs, q_len, ctx, rows=None,
                        prefill=False: self._forward(seqs, q_len, ctx,
                                                     seqs if rows is None else rows, prefill))
    afresh = run()
    for key in ("ttft_s", "tpot_s", "output_tokens_per_s", "request_latency_s"):
        assert reused[key] == afresh[key], key
    for phase in ("prefill_parts_s", "decode_step_parts_s"):
        parts, fresh = reused[phase], afresh[phase]
        assert isinstance(parts, dict) and isinstance(fresh, dict)
        assert parts.keys() == fresh.keys()
        for kind, seconds in fresh.items():
            assert parts[kind] == pytest.approx(seconds, rel=1e-12, abs=1e-18), (phase, kind)


def test_a_prompt_of_many_chunks_is_costed_at_evenly_spaced_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A prompt that needs more than CHUNK_PASSES_COSTED passes (300 chunks of 1,000 tokens)
    is costed at that many evenly spaced chunks, each weighted by the chunks it stands for:
    within 0.1% of costing every chunk, with the same parts; and a prompt of 2^24 one-token
    passes (each costed one by one, minutes) is estimated at once."""
    import gpuarch.estimate.inference_passes as inference

    kw = {"input_len": 300_000, "output_len": 16, "batch": 1, "max_num_tokens": 1000}
    calls: list[float] = []
    forward, costed = inference.ReplicaRunner.forward, inference.CHUNK_PASSES_COSTED

    def counted(self, seqs, q_len, ctx, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(ctx)
        return forward(self, seqs, q_len, ctx, *args, **kwargs)

    monkeypatch.setattr(inference.ReplicaRunner, "forward", counted)
    sampled = _est(**kw)
    sampled_contexts = len(set(calls))
    monkeypatch.setattr(inference, "CHUNK_PASSES_COSTED", 10**6)
    calls.clear()
    exact = _est(**kw)
    # (a decode step's forward, at its own context, is counted too)
    assert sampled_contexts <= costed + 2 < 300 <= len(set(calls))
    assert sampled.ttft_s == pytest.approx(exact.ttft_s, rel=1e-3)
    for name in ("prefill_breakdown_s", "prefill_parts_s"):
        got, want = sampled.as_json()[name], exact.as_json()[name]
        assert set(got) == set(want)
        for key, seconds in want.items():
            assert got[key] == pytest.approx(seconds, rel=1e-3, abs=1e-9), (name, key)
    monkeypatch.undo()
    huge = _est(input_len=2**24, output_len=1, batch=1, max_num_tokens=1)
    assert math.isfinite(huge.ttft_s) and huge.ttft_s > exact.ttft_s


@pytest.mark.parametrize("tp", [1, 4])
def test_parallel_attention_reduces_once_a_layer(tp: int) -> None:
    """A layer whose attention and MLP run side by side (Falcon, GPT-J) all-reduces its
    summed output once, not after each block: the tensor-parallel seconds of a prefill pass
    and of a decode step halve at TP 4, everything else stays; at TP 1 nothing moves."""
    base = preset("llama-2-70b").shape
    side = dataclasses.replace(base, parallel_attention=True)
    gpu = CATALOG.product("h100")
    cfg = InferenceConfig(input_len=1024, output_len=128, batch=16, gpus=tp, tp=tp,
                          quant=QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8))
    a = estimate_inference(CATALOG, base, gpu, cfg)
    b = estimate_inference(CATALOG, side, gpu, cfg)
    for parts in ("prefill_parts_s", "decode_step_parts_s"):
        pa, pb = getattr(a, parts), getattr(b, parts)
        assert pb["tensor_parallel"] == pytest.approx(pa["tensor_parallel"] / 2)
        assert (pa["tensor_parallel"] > 0) is (tp > 1)
        assert {k: v for k, v in pa.items() if k != "tensor_parallel"} == pytest.approx(
            {k: v for k, v in pb.items() if k != "tensor_parallel"})


def test_a_changed_product_is_costed_afresh() -> None:
    """The GEMM peak and device an estimate looks up are memoised by the product object
    (``_gemm_device``): a copy of H100 with half its dense FP8 peak and half its bandwidth
    (a hypothetical part, as a user's edited catalog entry would be) must not reuse H100's,
    and H100 itself must give the same answer before and after."""
    fp8 = PeakKey.TENSOR_FP8
    slower = dataclasses.replace(
        H100, dense_flops={**H100.dense_flops, fp8: H100.dense_flops[fp8] / 2},
        memory_bandwidth_bytes_s=H100.memory_bandwidth_bytes_s / 2)
    cfg = InferenceConfig(input_len=2048, output_len=256, batch=32, quant=FP8)
    before = estimate_inference(CATALOG, LLAMA_8B, H100, cfg)
    halved = estimate_inference(CATALOG, LLAMA_8B, slower, cfg)
    after = estimate_inference(CATALOG, LLAMA_8B, H100, cfg)
    assert halved.assumptions["gemm_peak_tflops"] == pytest.approx(
        before.assumptions["gemm_peak_tflops"] / 2)
    # prefill is mostly FP8 GEMMs and decode mostly weight and KV reads: both much slower
    # (not quite 2x: fixed per-step and per-layer times, attention at the unchanged BF16 peak)
    assert halved.ttft_s > 1.5 * before.ttft_s
    assert halved.tpot_s > 1.5 * before.tpot_s
    assert after.as_json() == before.as_json()


def test_the_efficiency_report_is_a_fresh_copy() -> None:
    """``Efficiency.as_dict`` reads the frozen parameters once; what it returns belongs to
    the caller: changing one report leaves the next alone."""
    first = DEFAULT_EFFICIENCY.as_dict()
    listed = next(k for k, v in first.items() if isinstance(v, list))
    first[listed].append(-1.0)  # type: ignore[union-attr]
    first["gemm"] = -1.0
    second = DEFAULT_EFFICIENCY.as_dict()
    assert second["gemm"] == DEFAULT_EFFICIENCY.gemm
    assert second[listed] == list(getattr(DEFAULT_EFFICIENCY, listed))


def test_the_hgx_h100_4gpu_board_pays_for_its_pair_links() -> None:
    """On the HGX H100 4-GPU board (no NVSwitch; each pair joined by 6 of 18 NVLinks) a TP2
    replica's all-reduces cross only the pair's links: its decode step's tensor-parallel
    seconds are larger than in DGX H100 (NVSwitch), the rest of the step the same."""
    cfg = InferenceConfig(input_len=222, output_len=292, batch=512, gpus=2, tp=2, quant=FP8)
    board = CATALOG.system("hgx h100 4-gpu")
    assert board.nvlink_links_per_peer == 6 and board.gpus_per_node == 4
    mesh = estimate_inference(CATALOG, LLAMA2_70B, H100, cfg, system=board)
    switch = estimate_inference(CATALOG, LLAMA2_70B, H100, cfg,
                                system=CATALOG.system("dgx h100"))
    tp_mesh = mesh.decode_step_parts_s["tensor_parallel"]
    tp_switch = switch.decode_step_parts_s["tensor_parallel"]
    assert tp_mesh > 1.3 * tp_switch
    assert mesh.decode_step_parts_s["dense_gemms"] == pytest.approx(
        switch.decode_step_parts_s["dense_gemms"])
    assert mesh.tpot_s > switch.tpot_s


def test_sandwich_norms_add_two_norm_passes_to_serving() -> None:
    """Four norms a layer (Gemma 2 and 3) cost serving two more passes over the hidden
    states in prefill and decode; the GEMMs and attention are the same."""
    gemma = preset("gemma-2-9b").shape
    plain = dataclasses.replace(gemma, sandwich_norms=False)
    four, two = _est(gemma), _est(plain)
    for phase in ("prefill_parts_s", "decode_step_parts_s"):
        a, b = getattr(four, phase), getattr(two, phase)
        assert a["memory_bound"] > b["memory_bound"], phase
        assert a["dense_gemms"] == b["dense_gemms"] and a["attention"] == b["attention"]
    assert four.tpot_s > two.tpot_s and four.ttft_s > two.ttft_s


def test_max_utilization_holds_each_sequence_at_its_mean_context() -> None:
    """--scheduler-policy max_utilization: a running sequence holds the KV of its prompt and
    half its answer (the mean so far; hand-computed here for Llama-2-70B FP8 on an H100,
    80 layers x 8 KV heads x 128 x 2 (K and V) x 1 byte = 163,840 bytes a token), so more
    sequences fit than when each holds its whole prompt and answer (guaranteed_no_evict,
    the default); a static batch holds every sequence to its end under either."""
    from dataclasses import replace

    fp8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)
    base = InferenceConfig(input_len=222, output_len=292, batch=None, quant=fp8, tp=2,
                           gpus=2, batching=Batching.CONTINUOUS, kv_cache_fraction=0.9)
    paged = replace(base, scheduler_policy="max_utilization")
    per_token = 80 * 8 * 128 * 2 * 1 / 2  # the TP 2 shard's
    whole = float(memory_parts(LLAMA2_70B, base, 100, H100)["kv_cache"])
    held = float(memory_parts(LLAMA2_70B, paged, 100, H100)["kv_cache"])
    assert whole == pytest.approx(100 * (222 + 292) * per_token)
    assert held == pytest.approx(100 * (222 + round(293 / 2)) * per_token)
    e = estimate_inference(CATALOG, LLAMA2_70B, H100, base)
    p = estimate_inference(CATALOG, LLAMA2_70B, H100, paged)
    assert p.max_batch > e.max_batch
    assert p.max_batch == pytest.approx(e.max_batch * (222 + 292) / (222 + 146.5), rel=0.02)
    assert p.assumptions["scheduler_policy"] == "max_utilization"
    static = replace(base, batching=Batching.STATIC, batch=64)
    assert float(memory_parts(LLAMA2_70B, static, 64, H100)["kv_cache"]) == pytest.approx(float(
        memory_parts(LLAMA2_70B, replace(static, scheduler_policy="max_utilization"), 64,
                H100)["kv_cache"]))
    with pytest.raises(GpuarchError, match="--scheduler-policy: expected one of"):
        estimate_inference(CATALOG, LLAMA2_70B, H100, replace(base, scheduler_policy="fifo"))


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(["llama-3.1-8b", "llama-2-70b", "mixtral-8x7b", "qwen3-30b-a3b"]),
       input_len=st.integers(16, 8192), output_len=st.integers(1, 4096),
       quant=st.sampled_from([BF16, FP8]), cv=st.sampled_from([0.0, 0.5, 1.0]))
def test_max_utilization_never_fits_fewer_sequences(model: str, input_len: int,
                                                    output_len: int, quant: QuantScheme,
                                                    cv: float) -> None:
    """Holding a sequence at its mean context instead of its whole length never lowers the
    batch that fits, nor raises the KV cache of a given batch."""
    from dataclasses import replace

    shape = preset(model).shape
    cfg = InferenceConfig(input_len=input_len, output_len=output_len, batch=None,
                          quant=quant, batching=Batching.CONTINUOUS, output_len_cv=cv,
                          gpus=2, tp=2)
    paged = replace(cfg, scheduler_policy="max_utilization")
    from gpuarch.estimate.inference_memory import max_batch_that_fits

    assert max_batch_that_fits(shape, paged, H100) >= max_batch_that_fits(shape, cfg, H100)
    assert float(memory_parts(shape, paged, 8, H100)["kv_cache"]) \
        <= float(memory_parts(shape, cfg, 8, H100)["kv_cache"])


def test_ampere_style_expert_gemms_are_slower_only_where_tensor_cores_run_async() -> None:
    """``moe_gemm_kernel="ampere"`` (TensorRT-LLM 0.9's SM80 grouped GEMMs on Hopper): a
    compute-bound Mixtral prefill's expert GEMMs take longer on H100 and B200, by no more than
    1 / ``moe_gemm_ampere_kernel``; on A100 (the kernels' own generation) and L40S (Ada keeps
    the synchronous instructions) nothing changes, nor for a dense model; a bad name is
    refused by field."""
    mixtral = preset("mixtral-8x7b").shape
    run = {"input_len": 4096, "output_len": 2, "batch": 4, "gpus": 2, "tp": 2}

    def expert_s(product, shape=mixtral, kernel="native"):  # type: ignore[no-untyped-def]
        e = _est(shape=shape, product=product, moe_gemm_kernel=kernel, **run)
        return e.prefill_parts_s["expert_gemms"] + e.prefill_parts_s["dense_gemms"]

    for key in ("h100", "b200"):
        native, ampere = expert_s(CATALOG.product(key)), expert_s(CATALOG.product(key),
                                                                  kernel="ampere")
        assert native < ampere <= native / DEFAULT_EFFICIENCY.moe_gemm_ampere_kernel * 1.0001
    for key in ("a100", "l40s"):
        product = CATALOG.product(key)
        assert expert_s(product, kernel="ampere") == expert_s(product)
    assert expert_s(H100, LLAMA_8B, "ampere") == expert_s(H100, LLAMA_8B)
    with pytest.raises(GpuarchError, match=r"--moe-gemm-kernel.*'amper'"):
        _est(moe_gemm_kernel="amper")
