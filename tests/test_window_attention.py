"""Sliding-window attention's floor per query row and head (``window_attention_row_s``).

Golden values: NVIDIA cudnn-frontend's SDPA training benchmark for GPT-OSS-style attention
(benchmark/sdpa_benchmark_training/results/gpt_oss/gb200/, e.g. gpt_oss_20260724_040709.csv,
commit e99b0d0b): BF16, batch 2, 128 query and 128 KV heads of 64, a 128-token window with
the causal (top-left) mask, cuDNN 9.26 on GB200: forward 0.209 ms and backward 0.461 ms at
4,096 tokens, 0.412 and 0.903 ms at 8,192.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.perf.precision import Precision
from gpuarch.perf.roofline import Attention, Device, op_cost, op_time, window_attention_floor
from tests.test_sibling_rates import _device


def _gb200() -> Device:
    return _device("gb200", Precision.BF16)


@pytest.mark.parametrize("seq, fwd_ms, bwd_ms", [(4096, 0.209, 0.461), (8192, 0.412, 0.903)])
def test_window_128_attention_takes_what_cudnn_measured_on_gb200(
        seq: int, fwd_ms: float, bwd_ms: float) -> None:
    op = Attention(2, seq, seq, 128, 128, 64, causal=True, window=128)
    device = _gb200()
    fwd = op_cost(op, device, DEFAULT_EFFICIENCY).time_s
    bwd = op_cost(dataclasses.replace(op, backward=True), device, DEFAULT_EFFICIENCY).time_s
    assert fwd == pytest.approx(fwd_ms * 1e-3, rel=0.06)
    assert bwd == pytest.approx(bwd_ms * 1e-3, rel=0.06)
    # the window's math alone, at the rate a 256-position span reaches
    # (attention_half_span, set on full-length sequences), comes to three quarters of it:
    # the short span's own cost per row, the floor the rest
    without = dataclasses.replace(DEFAULT_EFFICIENCY, window_attention_row_s=0.0)
    assert 0.6 * fwd < op_cost(op, device, without).time_s < 0.9 * fwd


def test_the_floor_leaves_attention_without_a_window_or_with_a_wide_one_alone() -> None:
    device = _gb200()
    without = dataclasses.replace(DEFAULT_EFFICIENCY, window_attention_row_s=0.0,
                                  window_attention_row_backward_s=0.0)
    for window in (0, 4096):
        for backward in (False, True):
            op = Attention(1, 8192, 8192, 64, 8, 128, causal=True, window=window,
                           backward=backward)
            assert op_cost(op, device, DEFAULT_EFFICIENCY).time_s == \
                op_cost(op, device, without).time_s


def test_serving_attention_keeps_its_own_costs() -> None:
    device = _gb200()
    for name in ("context_attention", "mla_decode"):
        op = Attention(2, 4096, 4096, 128, 128, 64, causal=True, window=128, name=name)
        moved = dataclasses.replace(DEFAULT_EFFICIENCY, window_attention_row_s=1.0)
        assert op_time(op, device, moved)[0] == op_time(op, device, DEFAULT_EFFICIENCY)[0]


def test_array_windows_floor_only_the_windowed_entries() -> None:
    op = Attention(2, 4096, 4096, 128, 128, 64, causal=True, window=np.array([0, 128]))
    floor = window_attention_floor(op, DEFAULT_EFFICIENCY)
    assert floor[0] == 0.0
    assert floor[1] == pytest.approx(DEFAULT_EFFICIENCY.window_attention_row_s * 2 * 4096 * 128)
    times = op_time(op, _gb200(), DEFAULT_EFFICIENCY)[0]
    assert times[1] > times[0] / 4  # the windowed entry is not priced at its 32x fewer FLOPs


def test_decode_over_a_window_keeps_its_kv_cache_read() -> None:
    """One query row per sequence streams its window of the KV cache; the training kernel's
    floor per row does not apply to the decode kernels."""
    op = Attention(4096, 1, 8192, 64, 8, 64, causal=True, window=128)
    device = _gb200()
    none = dataclasses.replace(DEFAULT_EFFICIENCY, window_attention_row_s=1e-6)
    assert op_time(op, device, none)[0] == op_time(op, device, DEFAULT_EFFICIENCY)[0]


# cudnn-frontend's same benchmark, MXFP8 and per-tensor FP8 passes on GB200 (cuDNN 9.27,
# gpt_oss_20260813_110803.csv, commit 20dc1089): the backward grows with the square of the
# sequence while the 16-bit backward grows with it linearly
GB200_FP8_WINDOW_BACKWARD_MS = {"mxfp8": {4096: 2.070, 8192: 7.381},
                                "tensor": {4096: 1.771, 8192: 6.287}}


@pytest.mark.parametrize("scaling", ["mxfp8", "tensor"])
@pytest.mark.parametrize("seq", [4096, 8192])
def test_fp8_backward_over_a_window_costs_the_unwindowed_pass(scaling: str, seq: int) -> None:
    """cuDNN's FP8 attention backward does not skip the key blocks outside a sliding window
    (roofline.fp8_backward_ignores_window): on GB200 it is priced as the same pass without
    the window, which comes within 1.1-1.35x under the measured times (the rest is head
    size 64, slower than the head size 128 the FP8 speedups were timed at), where the
    windowed pass would be 4-8x under them."""
    fp8 = _gb200().with_fp8_attention(scaling)
    assert fp8 is not None
    op = Attention(2, seq, seq, 128, 128, 64, causal=True, window=128, backward=True)
    windowed = op_time(op, fp8, DEFAULT_EFFICIENCY)[0]
    full = op_time(dataclasses.replace(op, window=0), fp8, DEFAULT_EFFICIENCY)[0]
    assert windowed == pytest.approx(full)
    measured = GB200_FP8_WINDOW_BACKWARD_MS[scaling][seq] * 1e-3
    assert 1.05 < measured / windowed < 1.35
    # the FLOPs an estimate counts stay the window's
    assert op_time(op, fp8, DEFAULT_EFFICIENCY)[3] < op_time(
        dataclasses.replace(op, window=0), fp8, DEFAULT_EFFICIENCY)[3] / 10


def test_fp8_forward_and_16bit_backward_keep_the_window() -> None:
    """Only the FP8 backward loses the window: the FP8 forward (0.20 ms at 4,096 in the same
    file, as the 16-bit forward's 0.21) and the 16-bit backward are priced windowed, and a
    chunked layer (Llama 4's chunks, which the benchmark does not time) keeps its chunks."""
    bf16, fp8 = _gb200(), _gb200().with_fp8_attention("mxfp8")
    assert fp8 is not None
    op = Attention(2, 4096, 4096, 128, 128, 64, causal=True, window=128)
    for device, backward in ((fp8, False), (bf16, True), (bf16, False)):
        windowed = dataclasses.replace(op, backward=backward)
        assert op_time(windowed, device, DEFAULT_EFFICIENCY)[0] < 0.5 * op_time(
            dataclasses.replace(windowed, window=0), device, DEFAULT_EFFICIENCY)[0]
    chunked = dataclasses.replace(op, window=1024, chunked=True, backward=True)
    assert op_time(chunked, fp8, DEFAULT_EFFICIENCY)[0] < 0.5 * op_time(
        dataclasses.replace(chunked, window=0, chunked=False), fp8, DEFAULT_EFFICIENCY)[0]


def test_array_windows_lose_the_window_only_in_the_fp8_backward() -> None:
    """The advisor's arrays: an FP8 backward over [no window, 128] prices both entries as
    the unwindowed pass, and the 16-bit backward keeps the windowed entry's floor."""
    fp8 = _gb200().with_fp8_attention("mxfp8")
    assert fp8 is not None
    op = Attention(2, 4096, 4096, 128, 128, 64, causal=True, window=np.array([0, 128]),
                   backward=True)
    times = op_time(op, fp8, DEFAULT_EFFICIENCY)[0]
    assert times[1] == pytest.approx(times[0])
    assert op_time(op, _gb200(), DEFAULT_EFFICIENCY)[0][1] < times[0] / 2
