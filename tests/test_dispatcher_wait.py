"""The dropless MoE dispatcher's host wait: Megatron-Core's fitted default by host link, or a
framework's own measured wait (NeMo AutoModel's DeepEP path)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.estimate import TrainingConfig
from gpuarch.estimate.training import dispatcher_host_time
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY as EFF

CATALOG = load_catalog()
H100, GB200 = CATALOG.product("h100"), CATALOG.product("gb200")
RUN = TrainingConfig(gpus=8, seq_len=4096, global_batch=512, micro_batch=4, ep=8)


def test_default_is_megatrons_fitted_wait_by_host_link() -> None:
    assert dispatcher_host_time(H100, RUN, EFF) == EFF.moe_layer_overhead_s
    assert dispatcher_host_time(GB200, RUN, EFF) == EFF.moe_layer_overhead_c2c_s


def test_a_measured_wait_replaces_it_but_token_drop_and_graphs_still_skip_it() -> None:
    """AutoModel's DeepEP path: a 39 us layout kernel and a ~35 us CPU busy-wait per MoE
    layer (docs/deepep_vs_hybridep_benchmark.md, section 3.1)."""
    measured = dataclasses.replace(RUN, dispatcher_wait_s=74e-6)
    assert dispatcher_host_time(H100, measured, EFF) == 74e-6
    assert dispatcher_host_time(GB200, measured, EFF) == 74e-6
    assert dispatcher_host_time(H100, dataclasses.replace(measured, moe_token_drop=True),
                                EFF) == 0.0
    assert dispatcher_host_time(H100, dataclasses.replace(measured, cuda_graphs=True),
                                EFF) == 0.0


def test_flag_in_microseconds(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "train", "--model", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "8",
            "--ep", "8", "--seq-len", "4096", "--global-batch", "512", "--micro-batch", "4",
            "--json"]
    assert main(args) == 0
    megatron = json.loads(capsys.readouterr().out)
    assert main([*args, "--dispatcher-wait-us", "74"]) == 0
    measured = json.loads(capsys.readouterr().out)
    assert measured["parallelism"]["dispatcher_wait_s"] == pytest.approx(74e-6)
    # 48 expert layers x 16 micro-batches x (4 ms - 74 us) less host wait in the step
    saved = megatron["step_time_s"] - measured["step_time_s"]
    assert saved == pytest.approx(48 * 16 * (EFF.moe_layer_overhead_s - 74e-6), rel=0.05)
    assert main([*args, "--dispatcher-wait-us", "-5"]) == 2
    assert "--dispatcher-wait-us: expected a number of microseconds >= 0, got -5" in \
        capsys.readouterr().err
