"""Tensor-parallel traffic under sequence parallelism without userbuffers overlap
(estimate.training.sequence_parallel_tp_comm): quantized all-gathers, 16-bit
reduce-scatters, and the backward's asynchronous collectives hidden behind the
column-parallel GEMMs, against hand-assembled collective times."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.estimate.training_layers import sequence_parallel_tp_comm
from gpuarch.perf.collectives import (
    Collective,
    Fabric,
    Group,
    Link,
    collective_time,
    nccl_protocols,
)
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY as EFF
from gpuarch.perf.precision import Precision
from gpuarch.workloads import preset

TP4 = Group(4, 4, Link(Fabric.NVLINK, 900e9), Link(Fabric.NETWORK, 50e9))
ACT = 4096 * 16384 * 2.0  # a 405B layer's 16-bit hidden states for 4,096 tokens


def _t(kind: Collective, size: float) -> float:
    return float(collective_time(kind, size, TP4, EFF, nccl_protocols()))


@pytest.mark.parametrize(("precision", "input_share", "grad_share"), [
    (Precision.BF16, 1.0, 1.0),
    (Precision.FP8, 0.5, 0.5),  # one byte an element, row-wise; transposed after the gather
    (Precision.NVFP4, (0.5 + 1 / 16) / 2, 2 * (0.5 + 1 / 16) / 2),  # both gradient copies
])
def test_gathers_move_the_quantized_bytes_and_reduce_scatters_16_bits(
        precision: Precision, input_share: float, grad_share: float) -> None:
    """Forward: per block, the input's all-gather (quantized) and the output's
    reduce-scatter (16-bit). Backward with no GEMM to hide behind: the output gradient's
    gather, the input gathered again and the data gradient's reduce-scatter, per block."""
    ag = _t(Collective.ALL_GATHER, ACT * input_share)
    rs = _t(Collective.REDUCE_SCATTER, ACT)
    ag_grad = _t(Collective.ALL_GATHER, ACT * grad_share)
    fwd, bwd = sequence_parallel_tp_comm(ACT, precision, TP4, EFF, (0.0, 0.0))
    assert float(fwd) == pytest.approx(2 * (ag + rs))
    assert float(bwd) == pytest.approx(2 * ag_grad + 2 * (ag + rs))


def test_the_backward_hides_behind_long_enough_gemms() -> None:
    """Column-parallel GEMMs at least as long as the gather and the reduce-scatter leave
    only the output gradients' gathers exposed."""
    fwd, bwd = sequence_parallel_tp_comm(ACT, Precision.FP8, TP4, EFF, (1.0, 1.0))
    assert float(bwd) == pytest.approx(2 * _t(Collective.ALL_GATHER, ACT * 0.5))
    assert float(bwd) < float(fwd)


@given(st.floats(0.0, 0.01), st.floats(0.0, 0.01))
def test_longer_gemms_never_expose_more(a: float, b: float) -> None:
    """The backward's exposed seconds fall (weakly) as the GEMMs they hide behind grow."""
    low, high = sorted((a, b))
    _, exposed_short = sequence_parallel_tp_comm(ACT, Precision.BF16, TP4, EFF, (low, low))
    _, exposed_long = sequence_parallel_tp_comm(ACT, Precision.BF16, TP4, EFF, (high, high))
    assert float(exposed_long) <= float(exposed_short) + 1e-15


def test_fp8_training_without_overlap_exposes_less_tensor_parallel_time() -> None:
    """Llama 3.1 405B at TP 4 with sequence parallelism and no userbuffers overlap on GB200:
    FP8's quantized gathers leave less tensor-parallel time exposed than BF16's, and
    userbuffers overlap less still."""
    catalog = load_catalog()
    gpu = catalog.product("gb200")
    system = catalog.system_for(gpu)
    shape = preset("llama-3.1-405b").shape

    def tp_seconds(precision: Precision, overlap: bool) -> float:
        cfg = TrainingConfig(gpus=128, seq_len=8192, global_batch=64, micro_batch=1, tp=4,
                             pp=8, vpp=8, sequence_parallel=True, tp_comm_overlap=overlap,
                             precision=precision, gpus_per_node=system.gpus_per_node)
        est = estimate_training(catalog, shape, gpu, cfg, system=system)
        return float(est.time_breakdown.communication_parts["tensor_parallel"])

    assert 0 < tp_seconds(Precision.FP8, False) < tp_seconds(Precision.BF16, False)
    assert tp_seconds(Precision.FP8, True) < tp_seconds(Precision.FP8, False)


def test_a_parallel_block_gathers_and_scatters_once() -> None:
    """With parallel attention one gathered input feeds both blocks' column GEMMs and their
    summed outputs are reduce-scattered once: the forward is one block's traffic, and the
    backward's gather and reduce-scatter hide behind both column GEMMs together."""
    ag = _t(Collective.ALL_GATHER, ACT)
    rs = _t(Collective.REDUCE_SCATTER, ACT)
    fwd, bwd = sequence_parallel_tp_comm(ACT, Precision.BF16, TP4, EFF, (0.0,))
    assert float(fwd) == pytest.approx(ag + rs)
    assert float(bwd) == pytest.approx(ag + ag + rs)


@pytest.mark.parametrize("sequence_parallel", [False, True])
def test_parallel_attention_halves_the_tensor_parallel_traffic(
        sequence_parallel: bool) -> None:
    """Falcon-style parallel attention at TP 8: one all-reduce a layer each way instead of
    two (or, with sequence parallelism, one gather and one reduce-scatter a layer), so the
    exposed tensor-parallel time is half or less; at TP 1 nothing changes."""
    import dataclasses

    catalog = load_catalog()
    gpu = catalog.product("h100")
    system = catalog.system_for(gpu)
    base = preset("llama-2-70b").shape
    side = dataclasses.replace(base, parallel_attention=True)

    def tp_seconds(shape: object, tp: int) -> tuple[float, float]:
        cfg = TrainingConfig(gpus=64, seq_len=4096, global_batch=64, micro_batch=1, tp=tp,
                             pp=1, sequence_parallel=sequence_parallel and tp > 1,
                             gpus_per_node=system.gpus_per_node)
        est = estimate_training(catalog, shape, gpu, cfg, system=system)  # type: ignore[arg-type]
        return (float(est.time_breakdown.communication_parts["tensor_parallel"]),
                est.step_time_s)

    two, one = tp_seconds(base, 8)[0], tp_seconds(side, 8)[0]
    assert one > 0
    if sequence_parallel:
        assert one <= two / 2 * (1 + 1e-9)
    else:
        assert one == pytest.approx(two / 2)
    assert tp_seconds(side, 1) == tp_seconds(base, 1)
