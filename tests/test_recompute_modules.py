"""Selective recomputation by module (Megatron-Core's recompute_modules): what each module
saves in memory, what it costs in time and hardware FLOPs, and the errors for bad names."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate import Recompute, TrainingConfig, estimate_training
from gpuarch.estimate.memory import activation_bytes_per_layer
from gpuarch.estimate.recompute import (
    RECOMPUTE_MODULES,
    check_recompute_modules,
    recompute_flops_per_token,
)
from gpuarch.perf import Precision
from gpuarch.workloads import preset

CATALOG = load_catalog()
QWEN3_30B = preset("qwen3-30b-a3b").shape
LLAMA3_8B = preset("llama-3-8b").shape
DEEPSEEK = preset("deepseek-v3").shape
GB200 = CATALOG.product("gb200")

# Megatron Bridge's Qwen3-30B-A3B layout on 8 GB200 (EP 8, MBS 4, FP8)
QWEN_RUN = TrainingConfig(gpus=8, seq_len=4096, global_batch=512, micro_batch=4, ep=8,
                          precision=Precision.FP8, recompute=Recompute.SELECTIVE,
                          gpus_per_node=72)


def _bytes(modules: tuple[str, ...], shape=QWEN3_30B, recompute=Recompute.SELECTIVE
           ) -> float:  # type: ignore[no-untyped-def]
    return activation_bytes_per_layer(shape, 1, 4096, 1, False, recompute, 2,
                                      modules=modules)


def test_module_savings_by_hand() -> None:
    """Qwen3-30B-A3B (h 2,048, 32 query heads and 4 KV heads of 128, 128 experts of 768,
    top-8, SwiGLU), one 4,096-token sequence, TP 1, 16-bit. Per token, in bytes: norm inputs
    2 x 2h = 8,192 and outputs another 8,192; Q 8,192, K and V 2,048, attention output
    8,192; routed experts 8 x 768 x (2 up + 1 activation output) x 2 = 36,864 and their
    first projection's input, the 8 dispatched copies of the token, 8 x 2,048 x 2 = 32,768.
    Total 104,448 per token = 427,819,008 bytes. layernorm drops the norm outputs (8,192),
    moe_act the activation outputs (8 x 768 x 2 = 12,288): 83,968 per token = 343,932,928
    bytes; moe drops the whole routed part: 34,816 per token = 142,606,336 bytes."""
    assert _bytes((), recompute=Recompute.NONE) == 427_819_008
    assert _bytes(("core_attn",)) == 427_819_008  # fused attention: time only
    assert _bytes(("moe_act", "layernorm")) == 343_932_928
    assert _bytes(("moe",)) == 142_606_336


def test_mlp_module_drops_a_dense_mlp_by_hand() -> None:
    """Llama-3-8B (h 4,096, SwiGLU 14,336), 4,096 tokens, TP 1, 16-bit: the MLP keeps
    14,336 x (2 + 1) x 2 = 86,016 bytes per token, which 'mlp' drops: 352,321,536 bytes."""
    assert _bytes((), LLAMA3_8B) - _bytes(("mlp",), LLAMA3_8B) == 352_321_536


def test_default_is_the_attention_core() -> None:
    plain = estimate_training(CATALOG, QWEN3_30B, GB200, QWEN_RUN)
    named = estimate_training(CATALOG, QWEN3_30B, GB200,
                              dataclasses.replace(QWEN_RUN, recompute_modules=("core_attn",)))
    assert plain.step_time_s == named.step_time_s
    assert plain.memory == named.memory
    assert plain.hfu == named.hfu
    assert plain.parallelism["recompute_modules"] == ["core_attn"]


def test_hardware_flops_count_the_recomputed_matrix_work() -> None:
    """'mlp' on a dense model runs every MLP forward twice: the hardware FLOPs gain
    2 x layers x 3 x h x ffn per token (32 x 3 x 4,096 x 14,336 x 2 = 11.3 GFLOP for
    Llama-3-8B); norms and activation functions count none."""
    assert recompute_flops_per_token(LLAMA3_8B, 4096, ("mlp",)) == 2 * 32 * 3 * 4096 * 14336
    assert recompute_flops_per_token(QWEN3_30B, 4096, ("layernorm", "moe_act")) == 0.0
    assert recompute_flops_per_token(DEEPSEEK, 4096, ("mla_up_proj",)) > 0.0


subsets = st.sets(st.sampled_from(["core_attn", "layernorm", "moe", "moe_act"]), min_size=1)


@settings(max_examples=15, deadline=None)
@given(subsets, subsets)
def test_more_modules_never_raise_memory_nor_shorten_the_step(a: set[str], b: set[str]
                                                               ) -> None:
    small = tuple(sorted(a))
    large = tuple(sorted(a | b))
    one = estimate_training(CATALOG, QWEN3_30B, GB200,
                            dataclasses.replace(QWEN_RUN, recompute_modules=small))
    more = estimate_training(CATALOG, QWEN3_30B, GB200,
                             dataclasses.replace(QWEN_RUN, recompute_modules=large))
    assert more.memory.activations <= one.memory.activations
    assert more.step_time_s >= one.step_time_s
    # the recomputed matrix work never shrinks (HFU itself is a rate: a module with no
    # matrix work, such as the norms, lengthens the step and so lowers it)
    assert (recompute_flops_per_token(QWEN3_30B, 4096, large)
            >= recompute_flops_per_token(QWEN3_30B, 4096, small))


def test_the_whole_expert_layer_repeats_its_all_to_all() -> None:
    act = estimate_training(CATALOG, QWEN3_30B, GB200,
                            dataclasses.replace(QWEN_RUN, recompute_modules=("moe_act",)))
    moe = estimate_training(CATALOG, QWEN3_30B, GB200,
                            dataclasses.replace(QWEN_RUN, recompute_modules=("moe",)))
    ep = "expert_parallel"
    assert moe.time_breakdown.communication_parts[ep] == pytest.approx(
        act.time_breakdown.communication_parts[ep] * 3 / 2)


@pytest.mark.parametrize("modules, shape, message", [
    (("moe_ac",), QWEN3_30B, "did you mean 'moe_act'"),
    (("moe_act",), LLAMA3_8B, "has no expert layers"),
    (("mla_up_proj",), LLAMA3_8B, "has no multi-head latent attention"),
    (("mlp",), QWEN3_30B, "has no dense MLP layers"),
    (("shared_experts",), QWEN3_30B, "has no shared experts"),
    ((), QWEN3_30B, "at least one"),
])
def test_bad_modules_name_the_flag(modules: tuple[str, ...], shape, message: str  # type: ignore[no-untyped-def]
                                   ) -> None:
    with pytest.raises(GpuarchError, match="--recompute-modules") as err:
        check_recompute_modules(modules, shape)
    assert message in str(err.value)


def test_every_module_applies_to_some_preset() -> None:
    for name in RECOMPUTE_MODULES:
        shape = LLAMA3_8B if name in ("mlp", "torchtitan_op") else DEEPSEEK
        assert check_recompute_modules([name, name], shape) == (name,)


def test_modules_need_selective(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "train", "--model", "qwen3-30b-a3b", "--seq-len", "4096",
            "--global-batch", "512", "--micro-batch", "4", "--gpu", "gb200", "--gpus", "8",
            "--ep", "8", "--precision", "fp8", "--recompute-modules", "moe_act"]
    assert main(args) == 2
    assert "needs --recompute selective" in capsys.readouterr().err
    assert main([*args, "--recompute", "selective", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["parallelism"]["recompute_modules"] == ["moe_act"]
    assert main([*args, "--recompute", "selective"]) == 0
    assert "recompute selective (moe_act)" in capsys.readouterr().out


# Llama-3.1-70B on 64 H100, TP 4 x PP 4 with sequence parallelism: 20 layers a stage
LLAMA3_70B = preset("llama-3.1-70b").shape
H100 = CATALOG.product("h100")
BLOCK_RUN = TrainingConfig(gpus=64, seq_len=8192, global_batch=128, tp=4, pp=4,
                           sequence_parallel=True, recompute=Recompute.FULL)


def _block(n: int):  # type: ignore[no-untyped-def]
    return estimate_training(CATALOG, LLAMA3_70B, H100,
                             dataclasses.replace(BLOCK_RUN, recompute_layers=n),
                             system=CATALOG.system_for(H100))


def test_block_recompute_of_half_a_stage() -> None:
    """10 of a stage's 20 layers recomputed: half the layers keep only their input, half
    keep everything, so the activations are the mean of full and no recomputation, and the
    hardware FLOPs are 3.5 forward passes instead of 4."""
    none = estimate_training(CATALOG, LLAMA3_70B, H100,
                             dataclasses.replace(BLOCK_RUN, recompute=Recompute.NONE),
                             system=CATALOG.system_for(H100))
    full, half = _block(0), _block(10)
    assert half.memory.activations == pytest.approx(
        (full.memory.activations + none.memory.activations) / 2)
    assert half.hfu / half.mfu == pytest.approx(3.5 / 3, rel=1e-3)
    assert full.hfu / full.mfu == pytest.approx(4 / 3, rel=1e-3)
    assert none.step_time_s < half.step_time_s < full.step_time_s
    assert _block(20).step_time_s == full.step_time_s  # all 20: the same as every layer


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 20), st.integers(0, 20))
def test_more_recomputed_layers_never_raise_memory_nor_shorten_the_step(a: int, b: int
                                                                        ) -> None:
    fewer, more = _block(a), _block(min(20, a + b))
    assert more.memory.activations <= fewer.memory.activations
    assert more.step_time_s >= fewer.step_time_s


def test_recompute_layers_needs_full(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "train", "--model", "llama-3.1-70b", "--gpu", "h100", "--gpus", "64",
            "--tp", "4", "--pp", "4", "--seq-len", "8192", "--global-batch", "128",
            "--recompute-layers", "5"]
    assert main([*args, "--recompute", "selective"]) == 2
    assert "--recompute-layers: needs --recompute full" in capsys.readouterr().err
    assert main([*args, "--recompute", "full"]) == 0
    assert "recompute full (5 layers a chunk)" in capsys.readouterr().out
