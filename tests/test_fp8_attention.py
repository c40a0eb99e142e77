"""FP8 fused attention in training, priced from NVIDIA's published training-attention timings.

Golden values: NVIDIA cuDNN frontend's training SDPA benchmark (commit e99b0d0b, cuDNN 9.26,
frontend 1.27.0, 24 July 2026), causal, batch 2:
- GB200, Llama 3.1 heads (64 query, 8 KV, head 128), 8,192 positions: BF16 forward 1.336 ms,
  backward 4.090 ms; FP8 forward 1.093 ms, backward 3.802 ms
  (results/llama3.1/gb200/llama3.1_20260724_040930.csv);
- GB200, DeepSeek-V3 heads (128 and 128, head 192 / 128), 4,096 positions: BF16 0.944 /
  3.262 ms, FP8 0.640 / 2.079 ms (results/dsv3/gb200/dsv3_20260724_041401.csv);
- GB300, Llama heads, 2,048 positions: BF16 0.094 / 0.354 ms, FP8 0.071 / 0.364 ms
  (results/llama3.1/gb300/llama3.1_20260724_040919.csv).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY as EFF
from gpuarch.perf.fp8_attention import (
    fp8_attention_timings,
    fp8_training_attention_speedup,
    has_fp8_attention_timings,
)
from gpuarch.perf.precision import Precision
from gpuarch.perf.roofline import Attention, op_cost
from gpuarch.workloads.presets import preset
from tests.test_sibling_rates import _device

CATALOG = load_catalog()


def test_speedup_at_a_timed_length_is_the_published_ratio() -> None:
    assert fp8_training_attention_speedup("gb200", 128, 8192, False) == \
        pytest.approx(1.336 / 1.093, rel=1e-12)
    assert fp8_training_attention_speedup("gb200", 128, 8192, True) == \
        pytest.approx(4.090 / 3.802, rel=1e-12)
    # DeepSeek-V3's latent attention: 192 and 128 average to the roofline's head size 160
    assert fp8_training_attention_speedup("gb200", 160, 4096, True) == \
        pytest.approx(3.262 / 2.079, rel=1e-12)
    # below 1 where the published FP8 backward is the slower kernel
    below = fp8_training_attention_speedup("gb300", 128, 2048, True)
    assert below == pytest.approx(0.354 / 0.364, rel=1e-12) and below < 1


def test_between_timed_lengths_it_interpolates_in_log2_and_holds_at_the_ends() -> None:
    at = fp8_training_attention_speedup
    low, high = 1.336 / 1.093, 5.091 / 4.166  # 8,192 and 16,384 positions, forward
    span = 8192 * math.sqrt(2)  # halfway in log2
    assert at("gb200", 128, span, False) == pytest.approx((low + high) / 2, rel=1e-12)
    assert at("gb200", 128, 512, False) == pytest.approx(0.125 / 0.096, rel=1e-12)
    assert at("gb200", 128, 131072, False) == pytest.approx(22.428 / 16.482, rel=1e-12)


def test_the_ratio_of_a_chip_holds_for_its_boards_and_only_there() -> None:
    """B200 shares GB200's chip, B300 GB300's; Hopper has no published timings."""
    for board, timed in (("b200", "gb200"), ("b300", "gb300")):
        assert has_fp8_attention_timings(board)
        assert fp8_training_attention_speedup(board, 128, 4096, True) == \
            fp8_training_attention_speedup(timed, 128, 4096, True)
    for gpu in ("h100-sxm5-80gb", "h200-sxm-141gb", "not-a-gpu"):
        assert not has_fp8_attention_timings(gpu)
        assert fp8_training_attention_speedup(gpu, 128, 4096, False) is None


def test_nearest_head_size_picks_the_timing() -> None:
    """Head 64 and 128 take Llama's timings, 160 and 192 DeepSeek-V3's (query-key 192, value
    128: 160 in the roofline's convention)."""
    llama = fp8_training_attention_speedup("gb200", 128, 4096, False)
    dsv3 = fp8_training_attention_speedup("gb200", 160, 4096, False)
    assert llama != dsv3
    assert fp8_training_attention_speedup("gb200", 64, 4096, False) == llama
    assert fp8_training_attention_speedup("gb200", 192, 4096, False) == dsv3


@settings(max_examples=50, deadline=None)
@given(span=st.floats(1, 1e6), head=st.sampled_from([64, 96, 128, 160, 192, 256]),
       backward=st.booleans(), gpu=st.sampled_from(["gb200", "gb300", "b200", "b300"]),
       scaling=st.sampled_from(["tensor", "mxfp8"]))
def test_speedup_is_positive_and_within_the_published_range(
        span: float, head: int, backward: bool, gpu: str, scaling: str) -> None:
    value = float(fp8_training_attention_speedup(gpu, head, span, backward, scaling))
    ratios = [r for t in fp8_attention_timings()
              for series in (*t.forward.values(), *t.backward.values()) for r in series]
    assert min(ratios) - 1e-12 <= value <= max(ratios) + 1e-12


@pytest.mark.parametrize("gpu", ["gb200", "gb300"])
@pytest.mark.parametrize("backward", [False, True])
def test_an_fp8_training_pass_takes_the_16_bit_time_over_the_measured_speedup(
        gpu: str, backward: bool) -> None:
    """On the GPU's own 16-bit rate (GB300's sibling factor over GB200 included): the FP8
    pass's compute time is the 16-bit pass's over the published ratio at its span."""
    op = Attention(2, 8192, 8192, 64, 8, 128, causal=True, backward=backward)
    bf16 = _device(gpu, Precision.FP8)
    fp8 = bf16.with_fp8_attention()
    assert fp8 is not None
    t16, t8 = op_cost(op, bf16, EFF).time_s, op_cost(op, fp8, EFF).time_s
    expected = fp8_training_attention_speedup(gpu, 128, 8192, backward)
    assert t16 / t8 == pytest.approx(expected, rel=1e-9)


def test_a_gpu_without_timings_keeps_the_serving_kernels_ratio() -> None:
    """H100: FP8 attention at context_attention_fp8 / context_attention of the FP8 peak, i.e.
    1.39x the 16-bit pass where the FP8 peak is twice the 16-bit one."""
    shape = preset("llama-3.1-8b").shape
    cfg = TrainingConfig(gpus=8, seq_len=8192, global_batch=8, precision=Precision.FP8)
    h100 = CATALOG.product("h100-sxm5-80gb")
    plain = estimate_training(CATALOG, shape, h100, cfg)
    fp8 = estimate_training(CATALOG, shape, h100, dataclasses.replace(cfg, fp8_attention=True))
    assert fp8.assumptions["attention_efficiency"] == pytest.approx(
        EFF.attention * EFF.context_attention_fp8 / EFF.context_attention)
    assert "no training-attention timing" in fp8.assumptions["fp8_attention"]
    assert "fp8_attention" not in plain.assumptions


def test_an_estimate_on_blackwell_names_the_measured_speedup_and_its_source() -> None:
    shape = preset("llama-3.1-8b").shape
    cfg = TrainingConfig(gpus=8, seq_len=8192, global_batch=8, precision=Precision.FP8,
                         fp8_attention=True)
    b200 = CATALOG.product("b200")
    est = estimate_training(CATALOG, shape, b200, cfg)
    plain = estimate_training(CATALOG, shape, b200, dataclasses.replace(cfg,
                                                                        fp8_attention=False))
    note = est.assumptions["fp8_attention"]
    assert f"forward {1.336 / 1.093:.2f}x and backward {4.090 / 3.802:.2f}x" in note
    assert "llama3.1/gb200" in note and "dsv3" not in note
    # the 16-bit efficiency is kept: the speedup is the roofline's, pass by pass
    assert est.assumptions["attention_efficiency"] == plain.assumptions["attention_efficiency"]
    attention = est.time_breakdown.compute_parts["attention"]
    base = plain.time_breakdown.compute_parts["attention"]
    assert base / 1.3 < attention < base


@pytest.mark.parametrize(("edit", "message"), [
    ({"gpu": "gb999"}, "gpu 'gb999' is not in the catalog"),
    ({"head_dim_qk": 0}, "head_dim_qk must be a positive integer"),
    ({"fp8_bwd_ms": [1.0]}, "every time list must have one value per seq"),
    ({"seq": [4096, 2048]}, "seq must increase"),
    ({"bf16_fwd_ms": [1.0, -1.0]}, "bf16_fwd_ms must be a list of positive numbers"),
    ({"source_url": ""}, "'source_url' must be a non-empty string"),
])
def test_a_bad_timing_is_refused_naming_the_field(tmp_path: Path, edit: dict,  # type: ignore[type-arg]
                                                 message: str) -> None:
    row = {"gpu": "gb200", "head_dim_qk": 128, "head_dim_vo": 128, "source_url": "u",
           "seq": [2048, 4096], "bf16_fwd_ms": [1.0, 2.0], "bf16_bwd_ms": [1.0, 2.0],
           "fp8_fwd_ms": [1.0, 2.0], "fp8_bwd_ms": [1.0, 2.0], "mxfp8_fwd_ms": [1.0, 2.0],
           "mxfp8_bwd_ms": [1.0, 2.0], **edit}

    def value(v: object) -> str:
        return f'"{v}"' if isinstance(v, str) else str(v)

    path = tmp_path / "timings.toml"
    path.write_text("[[timing]]\n" + "".join(f"{k} = {value(v)}\n" for k, v in row.items()))
    fp8_attention_timings.cache_clear()
    try:
        with pytest.raises(GpuarchError, match=message):
            fp8_attention_timings(path)
    finally:
        fp8_attention_timings.cache_clear()


def test_fp8_attention_pays_the_casts_of_its_inputs() -> None:
    """Transformer Engine quantizes the FP8 kernel's inputs (read 16 bits, write 8): the
    query, key and value before the forward, the output and its gradient before the
    backward; Llama 3.1 8B at TP 2, 8,192 tokens: 32 query and 8 KV heads of 128."""
    from gpuarch.estimate.training_layers import _layer_ops
    from gpuarch.perf.roofline import Elementwise

    shape = preset("llama-3.1-8b").shape
    cfg = TrainingConfig(gpus=8, seq_len=8192, global_batch=8, tp=2, precision=Precision.FP8,
                         fp8_attention=True)
    ops, _ = _layer_ops(shape, cfg, moe=False)
    (cast,) = [op for op in ops if op.name == "fp8_attention_cast"]
    assert isinstance(cast, Elementwise) and cast.backward is not None
    assert cast.bytes_moved == 3 * 8192 * (32 + 2 * 8) * 128 / 2
    assert cast.backward.bytes_moved == 3 * 8192 * 2 * 32 * 128 / 2
    plain, _ = _layer_ops(shape, dataclasses.replace(cfg, fp8_attention=False), moe=False)
    assert not [op for op in plain if op.name == "fp8_attention_cast"]


def test_gb300_reports_the_16_bit_sibling_factors_its_fp8_attention_takes() -> None:
    """FP8 attention priced from GB300's own speedup over its 16-bit kernel keeps that
    kernel's sibling factor over GB200, and the estimate names it."""
    cfg = TrainingConfig(gpus=8, seq_len=8192, global_batch=8, precision=Precision.FP8,
                         fp8_attention=True)
    est = estimate_training(CATALOG, preset("llama-3.1-8b").shape, CATALOG.product("gb300"),
                            cfg)
    notes = est.assumptions["sibling_rates"]
    assert any(n.startswith("attention_forward at bf16") for n in notes)
    assert any(n.startswith("attention_backward at bf16") for n in notes)


def test_an_mxfp8_run_takes_the_block_scaled_kernel() -> None:
    """cuDNN's MXFP8 attention (GB200, DeepSeek-V3 heads, 4,096 positions: 0.679 ms forward,
    2.505 ms backward against BF16's 0.944 and 3.262) is slower than the per-tensor FP8
    kernel (0.640 and 2.079)."""
    mx = fp8_training_attention_speedup("gb200", 160, 4096, True, "mxfp8")
    assert mx == pytest.approx(3.262 / 2.505, rel=1e-12)
    assert fp8_training_attention_speedup("gb200", 160, 4096, False, "mxfp8") == \
        pytest.approx(0.944 / 0.679, rel=1e-12)
    assert mx < fp8_training_attention_speedup("gb200", 160, 4096, True, "tensor")
    op = Attention(2, 4096, 4096, 128, 128, 160, causal=True, backward=True)
    bf16 = _device("gb200", Precision.FP8)
    tensor, block = bf16.with_fp8_attention(), bf16.with_fp8_attention("mxfp8")
    assert tensor is not None and block is not None
    assert op_cost(op, block, EFF).time_s > op_cost(op, tensor, EFF).time_s
    shape = preset("llama-3.1-8b").shape
    cfg = TrainingConfig(gpus=8, seq_len=8192, global_batch=8, precision=Precision.FP8,
                         fp8_attention=True, fp8_attention_scaling="mxfp8")
    note = estimate_training(CATALOG, shape, CATALOG.product("b200"), cfg).assumptions[
        "fp8_attention"]
    assert note.startswith(f"MXFP8 fused attention forward {1.336 / 1.125:.2f}x")


@pytest.mark.parametrize(("kw", "message"), [
    ({"fp8_attention_scaling": "mxfp8"}, "--fp8-attention-scaling: needs --fp8-attention"),
    ({"fp8_attention": True, "fp8_attention_scaling": "block"},
     "--fp8-attention-scaling: expected one of tensor, mxfp8, got 'block'"),
])
def test_a_bad_fp8_attention_scaling_is_refused(kw: dict, message: str) -> None:  # type: ignore[type-arg]
    cfg = TrainingConfig(gpus=8, seq_len=8192, global_batch=8, precision=Precision.FP8, **kw)
    with pytest.raises(GpuarchError, match=message):
        estimate_training(CATALOG, preset("llama-3.1-8b").shape, CATALOG.product("b200"), cfg)
