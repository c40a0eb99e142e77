"""Training's fused attention rate follows the span of a kernel call
(``Efficiency.attention_half_span``): ``attention * L / (L + attention_half_span)``.

Golden values: our H200 kernel check (src/gpuarch/validation/data/ops-h200-sxm-141gb.json),
cuDNN's fused attention forward and backward, causal, BF16, 32 heads of 128: 2,078 us at
batch 2 x 4,096 positions, 3,721 us at 1 x 8,192 and 15,060 us at 1 x 16,384, that is 0.47 /
0.52 / 0.52 of H200's 16-bit peak. NVIDIA cuDNN frontend's GB200 benchmark (Llama 3.1 heads,
benchmark/sdpa_benchmark_training/results/llama3.1/gb200/llama3.1_20260724_040930.csv)
forward: 0.125 / 0.391 / 1.336 / 5.091 ms at 2,048 / 4,096 / 8,192 / 16,384 positions.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.cli.main import main
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY as EFF
from gpuarch.perf.precision import Precision
from gpuarch.perf.roofline import Attention, attention_span_share, op_cost, op_time
from tests.test_sibling_rates import _device


def _rate(op: Attention, gpu: str = "h200") -> float:
    """FLOP/s the model gives the pass (forward, or backward at its 2.5x FLOPs)."""
    cost = op_cost(op, _device(gpu, Precision.BF16), EFF)
    return cost.flops / cost.time_s


def test_h200_cudnn_rise_from_4k_to_8k_positions() -> None:
    """Measured: 0.468 of the peak at 4,096 and 0.523 at 8,192 (forward and backward), a
    ratio of 0.895; the model's 0.89 (1,100 / 5,196 against 1,100 / 9,292 short of the
    limit). One rate for every length gave 1.0."""
    short = Attention(2, 4096, 4096, 32, 32, 128)
    long = Attention(1, 8192, 8192, 32, 32, 128)
    ratio = _rate(short) / _rate(long)
    assert ratio == pytest.approx(0.895, abs=0.02)
    flat = dataclasses.replace(EFF, attention_half_span=0.0)
    device = _device("h200", Precision.BF16)
    assert op_cost(short, device, flat).efficiency == pytest.approx(
        op_cost(long, device, flat).efficiency)


def test_gb200_cudnn_forward_rise_from_2k_to_16k_positions() -> None:
    """Measured forward rates over the 16,384-position one: 0.64 / 0.81 / 0.95 at 2,048 /
    4,096 / 8,192; the model (H200's half span) 0.69 / 0.84 / 0.94: within 0.06."""
    rates = {s: _rate(Attention(2, s, s, 64, 8, 128), "gb200") for s in (2048, 4096, 8192,
                                                                        16384)}
    for seq, measured in ((2048, 0.64), (4096, 0.81), (8192, 0.95)):
        assert rates[seq] / rates[16384] == pytest.approx(measured, abs=0.06), seq


def test_the_span_is_twice_the_keys_a_row_sees_in_one_call() -> None:
    """A causal sequence of L positions (rows see L / 2 keys on average) spans L; a
    non-causal pass of the same keys twice that; a 128-position window 2 x 128 less its
    first rows; a context-parallel chunk (share 1/4) a quarter."""
    half = EFF.attention_half_span

    def share(span: float) -> float:
        return span / (span + half)

    assert attention_span_share(Attention(1, 4096, 4096, 8, 8, 128), EFF) == \
        pytest.approx(share(4096))
    assert attention_span_share(Attention(1, 4096, 4096, 8, 8, 128, causal=False), EFF) == \
        pytest.approx(share(8192))
    windowed = attention_span_share(Attention(1, 4096, 4096, 8, 8, 128, window=128), EFF)
    assert share(240) < windowed < share(256)
    assert attention_span_share(Attention(1, 16384, 16384, 8, 8, 128, share=0.25), EFF) == \
        pytest.approx(share(4096))


def test_decode_and_serving_attention_keep_their_own_rates() -> None:
    """One query row streaming the cache, a serving prompt pass and latent attention in
    decode are priced as before: the span's rate is training's fused attention's."""
    device = _device("h200", Precision.BF16)
    flat = dataclasses.replace(EFF, attention_half_span=0.0)
    for op in (Attention(64, 1, 4096, 32, 8, 128),
               Attention(4, 2048, 2048, 32, 8, 128, name="context_attention"),
               Attention(64, 1, 4096, 128, 1, 576, name="mla_decode")):
        assert op_time(op, device, EFF)[0] == op_time(op, device, flat)[0]


@given(st.integers(1, 1 << 17), st.integers(1, 1 << 17))
def test_a_longer_span_never_runs_at_a_lower_rate(a: int, b: int) -> None:
    short, long = sorted((a, b))
    assert attention_span_share(Attention(1, short, short, 8, 8, 128), EFF) <= \
        attention_span_share(Attention(1, long, long, 8, 8, 128), EFF) < 1.0


def test_an_estimate_states_the_rate_at_its_span(capsys: pytest.CaptureFixture[str]) -> None:
    """The JSON's assumptions give the long-sequence rate and the rate at the run's span: a
    sequence of 8,192 positions, or its 4,096-position chunk on each of two context-parallel
    GPUs."""
    args = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
            "--seq-len", "8192", "--global-batch", "64", "--json"]
    half = EFF.attention_half_span
    for extra, span in (([], 8192), (["--cp", "2"], 4096)):
        assert main([*args, *extra]) == 0
        a = json.loads(capsys.readouterr().out)["assumptions"]
        assert a["attention_efficiency"] == EFF.attention
        assert a["attention_efficiency_at_span"] == pytest.approx(
            EFF.attention * span / (span + half), rel=1e-5)


def test_all_to_all_and_all_gather_context_parallelism_run_whole_sequence_calls() -> None:
    """Under context parallelism the p2p ring runs one call per GPU's chunk; the all-to-all
    exchange (a head split) and the all-gather one (each chunk's queries over the gathered
    keys) run calls over the whole sequence, at the whole sequence's rate."""
    from gpuarch.estimate import TrainingConfig
    from gpuarch.estimate.training_layers import cp_call_share

    assert cp_call_share(TrainingConfig(gpus=4, seq_len=16384, global_batch=4, cp=4)) is None
    for kind in ("a2a", "all_gather"):
        cfg = TrainingConfig(gpus=4, seq_len=16384, global_batch=4, cp=4, cp_comm_type=kind)
        assert cp_call_share(cfg) == 1.0
    chunk = Attention(1, 16384, 16384, 8, 8, 128, share=0.25)
    whole = dataclasses.replace(chunk, call_share=1.0)
    half = EFF.attention_half_span
    assert attention_span_share(whole, EFF) == pytest.approx(16384 / (16384 + half))
    assert attention_span_share(chunk, EFF) == pytest.approx(4096 / (4096 + half))
