"""Scaling recipes (hand-worked MX and NVFP4 blocks), emulated matmuls, delayed scaling,
2:4 sparsity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.numerics import (
    AmaxAlgo,
    Distribution,
    Pattern,
    Recipe,
    emulate_matmul,
    is_2to4,
    make_operands,
    predicted_speedup,
    prune_2to4,
    quantize,
    simulate_scaling,
)
from gpuarch.numerics import (
    NumberFormat as F,
)


def test_mx_block_by_hand() -> None:
    """OCP MX: a block with amax 300 gets X = 2^(floor(log2 300) - 8) = 1 for E4M3, so 300
    rounds to 288 and 1.0 stays; a block with amax 1000 gets X = 2 and 1000/2 = 500
    saturates to 448, i.e. 896."""
    block = np.ones(32)
    block[0] = 300.0
    q = quantize(block[None, :], F.FP8_E4M3, Recipe.MX)
    assert q.values[0, 0] == 288.0 and q.values[0, 1] == 1.0
    block[0] = 1000.0
    q = quantize(block[None, :], F.FP8_E4M3, Recipe.MX)
    assert q.values[0, 0] == 896.0 and q.overflow == 1
    assert q.values[0, 1] == 1.0  # 1/2 = 0.5 is exact in E4M3


def test_nvfp4_block_by_hand() -> None:
    """NVFP4: tensor amax 2688 = 448 x 6 gives a global scale of 1; a block with amax 6 gets
    the E4M3 block scale 1, so elements are plain FP4: 6, 3, 1.5 stay and 0.7 becomes 0.5; a
    block with amax 3 gets scale 0.5 and keeps 3 exactly."""
    x = np.zeros((1, 32))
    x[0, :4] = [6.0, 3.0, 1.5, 0.7]
    x[0, 16:18] = [3.0, 0.9]
    x[0, 31] = 0.0
    x[0, 15] = 2688.0 / 448.0  # = 6, keeps block 0's amax at 6
    x[0, 30] = 3.0
    x_full = np.concatenate([x, np.full((1, 16), 0.0), np.array([[2688.0] + [0.0] * 15])],
                            axis=1)
    q = quantize(x_full, F.FP4_E2M1, Recipe.NVFP4).values[0]
    assert list(q[:4]) == [6.0, 3.0, 1.5, 0.5]
    assert q[16] == 3.0 and q[17] == 1.0  # 0.9 / 0.5 = 1.8 -> 2 -> 1.0
    assert q[48] == 2688.0


def test_int_recipes() -> None:
    """INT8 per tensor: 127 steps for the amax; per channel each row uses its own amax;
    INT4 groups of 128 each use theirs."""
    x = np.array([[1.0, -0.5, 0.25, 127.0], [0.01, 0.02, -0.04, 0.03]])
    per_tensor = quantize(x, F.INT8, Recipe.INT_TENSOR).values
    per_channel = quantize(x, F.INT8, Recipe.INT_CHANNEL).values
    assert per_tensor[1].tolist() == [0.0, 0.0, 0.0, 0.0]  # below one step of 1.0
    assert np.allclose(per_channel[1], x[1], atol=0.04 / 127)
    with pytest.raises(GpuarchError, match="multiple of the block size 128"):
        quantize(x, F.INT4, Recipe.INT_GROUP)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([F.FP8_E4M3, F.FP8_E5M2, F.FP6_E2M3, F.FP4_E2M1]),
       st.floats(1e-6, 1e6), st.integers(0, 3))
def test_current_scaling_never_overflows(fmt: F, level: float, seed: int) -> None:
    """Scaling by the tensor's own amax keeps every element in range."""
    x = np.random.default_rng(seed).standard_normal((4, 64)) * level
    q = quantize(x, fmt, Recipe.CURRENT)
    assert q.overflow == 0 and np.all(np.isfinite(q.values))


@settings(max_examples=20, deadline=None)
@given(st.sampled_from([(F.FP8_E4M3, Recipe.CURRENT), (F.FP8_E5M2, Recipe.CURRENT),
                        (F.FP8_E4M3, Recipe.MX), (F.FP4_E2M1, Recipe.MX),
                        (F.INT8, Recipe.INT_CHANNEL), (F.BF16, Recipe.NONE)]),
       st.integers(0, 5))
def test_quantize_dequantize_is_idempotent(case: tuple[F, Recipe], seed: int) -> None:
    """Quantizing an already quantized tensor changes nothing. (NVFP4 is left out on
    purpose: its per-tensor scale follows the tensor's amax, which quantization moves, and
    the E4M3 block scales are re-rounded under the new one, so a second pass can shift
    values; that is the recipe, not an error.)"""
    fmt, recipe = case
    x = np.random.default_rng(seed).standard_normal((2, 64))
    once = quantize(x, fmt, recipe).values
    assert np.allclose(quantize(once, fmt, recipe).values, once, rtol=0, atol=0)


def test_error_falls_as_bits_rise() -> None:
    """FP32 < TF32 < BF16 error on the same matmul; E4M3 beats E5M2 in range; on
    outlier-heavy data MXFP8's per-block scales keep the small values per-tensor FP8 flushes
    to zero."""
    a, b = make_operands(64, 64, 256, Distribution.NORMAL, seed=1)
    err = {fmt: emulate_matmul(a, b, fmt, Recipe.NONE).error.relative_error
           for fmt in (F.FP32, F.TF32, F.BF16)}
    assert err[F.FP32] < err[F.TF32] < err[F.BF16]
    e4 = emulate_matmul(a, b, F.FP8_E4M3, Recipe.CURRENT).error
    e5 = emulate_matmul(a, b, F.FP8_E5M2, Recipe.CURRENT).error
    assert e4.relative_error < e5.relative_error and e4.sqnr_db > e5.sqnr_db
    a, b = make_operands(64, 64, 256, Distribution.OUTLIERS, seed=1)
    tensor = emulate_matmul(a, b, F.FP8_E4M3, Recipe.CURRENT).error
    mx = emulate_matmul(a, b, F.FP8_E4M3, Recipe.MX).error
    assert mx.underflow < tensor.underflow


def test_emulation_is_deterministic() -> None:
    """Same seed, same numbers."""
    runs = [emulate_matmul(*make_operands(32, 32, 64, Distribution.LOGNORMAL, seed=7),
                           F.FP8_E4M3, Recipe.CURRENT).error for _ in range(2)]
    assert runs[0] == runs[1]


def test_delayed_scaling_overflows_on_growth_and_current_does_not() -> None:
    """A tensor growing 1.3x per step outruns an amax history: delayed scaling overflows,
    current scaling never does; a decaying tensor wastes range under delayed scaling."""
    steps = simulate_scaling(F.FP8_E4M3, steps=20, size=1024, pattern=Pattern.DRIFT,
                             growth=1.3, history=8, algo=AmaxAlgo.MAX)
    assert sum(s.delayed_overflow for s in steps) > 0
    assert all(s.current_overflow == 0 for s in steps)
    decay = simulate_scaling(F.FP8_E4M3, steps=20, size=1024, pattern=Pattern.DECAY,
                             growth=1.3, history=8)
    assert decay[-1].delayed_wasted_bits > 2


def test_sparsity() -> None:
    """Magnitude pruning keeps the two largest of every four; the mask is valid."""
    w = np.array([[0.1, -3.0, 2.0, 0.5, 4.0, 1.0, -1.5, 0.0]])
    pruned, mask = prune_2to4(w)
    assert pruned.tolist() == [[0.0, -3.0, 2.0, 0.0, 4.0, 0.0, -1.5, 0.0]]
    assert is_2to4(pruned) and not is_2to4(w)
    assert mask.sum() == 4


def test_predicted_speedups_from_the_catalog() -> None:
    """FP8 over BF16 is 2x on H100 (dense peaks); A100 has no FP8 Tensor Cores; 2:4 sparse
    FP16 on A100 is 2x (an upper bound)."""
    cat = load_catalog()
    value, _ = predicted_speedup(cat.product("h100"), F.FP8_E4M3)
    assert value == pytest.approx(2.0, rel=1e-3)
    value, why = predicted_speedup(cat.product("a100"), F.FP8_E4M3)
    assert value is None and "do not run fp8_e4m3" in why
    value, _ = predicted_speedup(cat.product("a100"), F.FP16, sparse=True)
    assert value == pytest.approx(2.0)


def test_hybrid_backward_gemm() -> None:
    """Hybrid FP8: E5M2 gradients x E4M3 weights sits between all-E4M3 and all-E5M2."""
    a, b = make_operands(64, 64, 256, Distribution.NORMAL, seed=2)
    e4 = emulate_matmul(a, b, F.FP8_E4M3, Recipe.CURRENT).error.relative_error
    e5 = emulate_matmul(a, b, F.FP8_E5M2, Recipe.CURRENT).error.relative_error
    hybrid = emulate_matmul(a, b, F.FP8_E5M2, Recipe.CURRENT,
                            b_format=F.FP8_E4M3).error.relative_error
    assert e4 < hybrid < e5
