"""TorchTitan's per-op selective checkpointing (``--recompute-modules torchtitan_op``): which
matrix multiplies it recomputes, what a block keeps, what the recompute pass costs, and the
errors where it does not apply."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate import Recompute, TrainingConfig, estimate_training
from gpuarch.estimate.memory import activation_bytes_per_layer
from gpuarch.estimate.recompute import (
    TORCHTITAN_OP,
    block_matmuls,
    check_recompute_modules,
    recompute_flops_per_token,
    torchtitan_op_split,
)
from gpuarch.workloads import preset

CATALOG = load_catalog()
LLAMA3_8B = preset("llama-3-8b").shape  # h 4,096, 32 heads, 8 KV heads of 128, SwiGLU 14,336
GPT3 = preset("gpt-3-175b").shape  # GELU MLP: up and down only
A100 = CATALOG.product("a100-sxm4-80gb")
SYSTEM = CATALOG.system_for(A100)

# TorchTitan's Llama 3 8B run on one DGX A100: FSDP over 8 GPUs, one 8,192-token sequence each
RUN = TrainingConfig(gpus=8, seq_len=8192, global_batch=8, zero=3)


def _run(recompute: Recompute, modules: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    cfg = dataclasses.replace(RUN, recompute=recompute, recompute_modules=modules)
    return estimate_training(CATALOG, LLAMA3_8B, A100, cfg, system=SYSTEM)


def test_every_second_matmul_of_a_llama_block_is_recomputed() -> None:
    """TorchTitan's Llama block calls wq, wk, wv, wo, then w1 (gate), w3 (up), w2 (down);
    the policy counts aten.mm calls and recomputes the even ones: k, o and up."""
    assert [mm.name for mm in block_matmuls(LLAMA3_8B)] == [
        "q", "k", "v", "o", "gate", "up", "down"]
    kept, again = torchtitan_op_split(LLAMA3_8B)
    assert [mm.name for mm in kept] == ["q", "v", "gate", "down"]
    assert [mm.name for mm in again] == ["k", "o", "up"]
    # a plain MLP has one matmul fewer, so the down projection is the recomputed one
    assert [mm.name for mm in torchtitan_op_split(GPT3)[1]] == ["k", "o", "down"]


def test_recomputed_flops_by_hand() -> None:
    """k (1,024 x 4,096), o (4,096 x 4,096) and up (14,336 x 4,096) in each of 32 layers,
    2 FLOPs a multiply-add: 2 x 32 x 79,691,776 = 5,100,273,664 FLOPs per token."""
    assert recompute_flops_per_token(LLAMA3_8B, 8192, (TORCHTITAN_OP,)) == 5_100_273_664


def test_kept_bytes_by_hand() -> None:
    """One 8,192-token sequence in 16 bits keeps, per token, the block input (4,096), the
    attention output (4,096) and the q (4,096), v (1,024), gate (14,336) and down (4,096)
    outputs: 31,744 elements x 2 bytes x 8,192 = 520,093,696 bytes. At TP 2 with sequence
    parallelism everything is halved (the input and the down projection's reduce-scattered
    output by sequence, the rest by width)."""
    def kept(tp: int, sp: bool) -> float:
        return activation_bytes_per_layer(LLAMA3_8B, 1, 8192, tp, sp, Recompute.SELECTIVE,
                                          2, modules=(TORCHTITAN_OP,))
    assert kept(1, False) == 520_093_696
    assert kept(2, True) == 520_093_696 / 2
    # without sequence parallelism the full-width tensors are held whole on each GPU
    assert kept(2, False) == 8192 * 2 * (4096 + 4096 + (4096 + 4096 + 1024 + 14336) / 2)


def test_recompute_pass_prices_the_recomputed_share_of_the_gemms() -> None:
    """The recompute pass is the recomputed matmuls' share of the block's forward GEMMs
    (79.7 of 218.1 M weights: 0.365; the forward is a third of the GEMMs' forward and
    backward) plus the norms, activation function and residual adds again."""
    est = _run(Recompute.SELECTIVE, (TORCHTITAN_OP,))
    parts = est.time_breakdown.compute_parts
    again = sum(mm.n * mm.k for mm in torchtitan_op_split(LLAMA3_8B)[1])
    share = again / sum(mm.n * mm.k for mm in block_matmuls(LLAMA3_8B))
    assert share == pytest.approx(0.3654, abs=1e-4)
    gemm_forward = parts["dense_gemms"] / 3
    assert 0.95 * share * gemm_forward < parts["recompute"]
    assert parts["recompute"] < 1.05 * share * gemm_forward + parts["memory_bound"]


def test_between_no_recompute_and_full() -> None:
    none = _run(Recompute.NONE)
    op = _run(Recompute.SELECTIVE, (TORCHTITAN_OP,))
    full = _run(Recompute.FULL)
    assert none.step_time_s < op.step_time_s < full.step_time_s
    assert full.memory.activations < op.memory.activations < none.memory.activations
    assert none.hfu < op.hfu < full.hfu


@pytest.mark.parametrize("modules, model, message", [
    ((TORCHTITAN_OP, "layernorm"), "llama-3-8b", "give it alone, not with layernorm"),
    ((TORCHTITAN_OP,), "qwen3-30b-a3b", "has expert layers"),
    ((TORCHTITAN_OP,), "deepseek-v3", "has expert layers"),
    ((TORCHTITAN_OP,), "nemotron-3-nano-30b-a3b", "has hybrid recurrent blocks"),
])
def test_where_it_does_not_apply(modules: tuple[str, ...], model: str, message: str) -> None:
    with pytest.raises(GpuarchError, match="--recompute-modules") as err:
        check_recompute_modules(modules, preset(model).shape)
    assert message in str(err.value)


def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "train", "--model", "llama-3-8b", "--seq-len", "8192",
            "--global-batch", "8", "--gpu", "a100-sxm4-80gb", "--gpus", "8", "--zero", "3",
            "--recompute", "selective", "--recompute-modules", "torchtitan_op", "--json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["parallelism"]["recompute_modules"] == ["torchtitan_op"]
    assert main([*args[:-1], "--launch", "megatron"]) == 0
    out = capsys.readouterr().out
    assert "--recompute-granularity selective" in out and "--recompute-modules" not in out
    assert "has no Megatron equivalent" in out
    assert main([*args[:3], "qwen3-30b-a3b", *args[4:]]) == 2
    err = capsys.readouterr().err
    assert "'torchtitan_op' is modelled for dense transformer blocks" in err
    assert "Traceback" not in err
