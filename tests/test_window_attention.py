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
