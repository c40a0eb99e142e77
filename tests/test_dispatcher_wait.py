"""The dropless MoE dispatcher's host wait: Megatron-Core's fitted default by host link, or a
framework's own measured wait (NeMo AutoModel's DeepEP path)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.estimate import TrainingConfig
from gpuarch.estimate.training_config import CUDA_GRAPH_SCOPES
from gpuarch.estimate.training_layers import dispatcher_host_time
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY as EFF
from gpuarch.workloads.presets import preset

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


NANO = preset("nemotron-3-nano-30b-a3b").shape
QWEN3 = preset("qwen3-30b-a3b").shape


def scoped(*modules: str) -> TrainingConfig:
    return dataclasses.replace(RUN, cuda_graph_scope=modules)


def test_a_scope_charges_the_wait_to_expert_blocks_after_an_ungraphed_block() -> None:
    """Nemotron 3 Nano's pattern (the model card's hybrid_override_pattern) puts 17 of its
    23 expert blocks after a Mamba-2 block and 6 after attention (each '*E', counted by hand);
    Megatron Bridge's H100 recipe graphs the Mamba blocks alone."""
    assert NANO.hybrid_pattern.count("E") == 23 and NANO.hybrid_pattern.count("*E") == 6
    assert scoped("mamba").ungraphed_expert_share(NANO) == pytest.approx(6 / 23)
    assert scoped("attn").ungraphed_expert_share(NANO) == pytest.approx(17 / 23)
    assert scoped("attn", "mamba").ungraphed_expert_share(NANO) == 0.0
    assert scoped("moe_router", "moe_preprocess").ungraphed_expert_share(NANO) == 1.0
    assert scoped("full_iteration").ungraphed_expert_share(NANO) == 0.0
    assert scoped("moe").ungraphed_expert_share(NANO) == 0.0
    assert RUN.ungraphed_expert_share(NANO) == 1.0
    assert dataclasses.replace(RUN, cuda_graphs=True).ungraphed_expert_share(NANO) == 0.0
    # a transformer's expert layers each follow attention
    assert scoped("attn").ungraphed_expert_share(QWEN3) == 0.0
    assert scoped("moe_router", "moe_preprocess").ungraphed_expert_share(QWEN3) == 1.0
    assert scoped("mamba").ungraphed_expert_share(QWEN3) == 1.0
    wait = dispatcher_host_time(H100, scoped("mamba"), EFF, NANO)
    assert wait == pytest.approx(6 / 23 * EFF.moe_layer_overhead_s)
    assert dispatcher_host_time(H100, scoped("mamba"), EFF) == EFF.moe_layer_overhead_s


@given(st.sets(st.sampled_from(CUDA_GRAPH_SCOPES)), st.sets(st.sampled_from(CUDA_GRAPH_SCOPES)))
def test_graphing_more_never_charges_more(first: set[str], more: set[str]) -> None:
    for shape in (NANO, QWEN3):
        share = scoped(*sorted(first)).ungraphed_expert_share(shape)
        assert 0.0 <= share <= 1.0
        assert scoped(*sorted(first | more)).ungraphed_expert_share(shape) <= share


def test_scope_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """Nano on 16 H100 without recomputation: graphing the Mamba blocks removes the wait
    of the 17 expert blocks after them, in each of a GPU's 64 micro-batches."""
    args = ["estimate", "train", "--model", "nemotron-3-nano-30b-a3b", "--gpu", "h100",
            "--gpus", "16", "--ep", "8", "--seq-len", "8192", "--global-batch", "1024",
            "--json"]
    assert main(args) == 0
    eager = json.loads(capsys.readouterr().out)
    assert main([*args, "--cuda-graph-scope", "mamba"]) == 0
    graphed = json.loads(capsys.readouterr().out)
    assert graphed["parallelism"]["cuda_graph_scope"] == ["mamba"]
    assert eager["parallelism"]["cuda_graph_scope"] is None
    saved = eager["step_time_s"] - graphed["step_time_s"]
    assert saved == pytest.approx(17 * 64 * EFF.moe_layer_overhead_s, rel=0.01)
    assert "charged to 6 of 23 expert layers" in graphed["assumptions"]["cuda_graphs"]
    assert main([*args, "--cuda-graph-scope", "mamba,atn"]) == 2
    err = capsys.readouterr().err
    assert "--cuda-graph-scope: expected one of attn, mamba" in err
    assert "got 'atn'; did you mean 'attn'?" in err
    assert main([*args, "--cuda-graph-scope", "mamba", "--cuda-graphs"]) == 2
    assert "not both" in capsys.readouterr().err
