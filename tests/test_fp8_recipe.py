"""How many low-precision copies a cast GEMM input is written into, by recipe and GPU.

Transformer Engine's cuBLASLt GEMM wrapper (transformer_engine/common/gemm/cublaslt_gemm.cu,
CanonicalizeGemmInput): "Hopper only supports TN GEMMs for FP8. 'Column-wise data' is
transpose of data", while "Blackwell supports any GEMM layout for FP8"; cuBLASLt's
documentation: FP8 kernels need "A transposed and B non-transposed (the 'TN' format)". MXFP8
and NVFP4 scale along the reduction, so the weight-gradient GEMM needs a column-wise copy
with its own scales on any GPU.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate import training_layers
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import FP8_RECIPES, TrainingConfig
from gpuarch.estimate.training_layers import (
    _layer_ops,
    one_layer_time,
    quantized_copies,
    router_device,
)
from gpuarch.perf.collectives import Fabric, Group, Link
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.perf.precision import Precision
from gpuarch.perf.roofline import Device, Elementwise, Gemm, op_time
from gpuarch.workloads.presets import preset

CATALOG = load_catalog()
LLAMA_8B = preset("llama-3.1-8b").shape
BASE = TrainingConfig(gpus=8, seq_len=4096, global_batch=8, precision=Precision.FP8)


@pytest.mark.parametrize(("precision", "recipe", "generation", "copies"), [
    (Precision.FP8, "tensor", 4, 2),    # Hopper: TN-only FP8 GEMMs, a transposed copy
    (Precision.FP8, "tensor", 5, 1),    # Blackwell: any layout
    (Precision.FP8, "mxfp8", 5, 2),     # block scales along the reduction
    (Precision.NVFP4, "tensor", 5, 2),  # NVFP4's block scales likewise
])
def test_copies_by_recipe_and_gpu(precision: Precision, recipe: str, generation: int,
                                  copies: int) -> None:
    cfg = dataclasses.replace(BASE, precision=precision, fp8_recipe=recipe
                              if precision is Precision.FP8 else "tensor")
    assert quantized_copies(cfg, generation) == copies


def test_the_cast_writes_each_input_copy_and_the_weights_once() -> None:
    """Read 2 bytes and write one byte a copy for each GEMM input (m x k), read 2 and write 1
    for the weights (k x n), every micro-batch."""
    ops, _ = _layer_ops(LLAMA_8B, BASE, moe=False, tensor_core_generation=4)
    gemms = [op for op in ops if isinstance(op, Gemm)]
    inputs = sum(op.m * op.k * op.batch for op in gemms)
    weights = sum(op.k * op.n * op.batch for op in gemms)
    (cast,) = [op for op in ops if isinstance(op, Elementwise) and op.name == "fp8_cast"]
    assert cast.bytes_moved == pytest.approx((2 + 2) * inputs + (2 + 1) * weights)
    ops1, _ = _layer_ops(LLAMA_8B, BASE, moe=False, tensor_core_generation=5)
    (cast1,) = [op for op in ops1 if isinstance(op, Elementwise) and op.name == "fp8_cast"]
    assert cast1.bytes_moved == pytest.approx((2 + 1) * inputs + (2 + 1) * weights)


def test_mxfp8_costs_more_than_per_tensor_fp8_on_blackwell_and_says_so() -> None:
    b200 = CATALOG.product("b200")
    tensor = estimate_training(CATALOG, LLAMA_8B, b200, BASE)
    mx = estimate_training(CATALOG, LLAMA_8B, b200, dataclasses.replace(BASE,
                                                                        fp8_recipe="mxfp8"))
    assert mx.step_time_s > tensor.step_time_s
    assert mx.time_breakdown.compute_parts["memory_bound"] > \
        tensor.time_breakdown.compute_parts["memory_bound"]
    assert mx.as_json()["parallelism"]["fp8_recipe"] == "mxfp8"
    assert tensor.as_json()["parallelism"]["fp8_recipe"] == FP8_RECIPES[0] == "tensor"


@pytest.mark.parametrize(("kw", "message"), [
    ({"fp8_recipe": "mxfp8", "precision": Precision.BF16},
     "--fp8-recipe: needs --precision fp8, got --precision bf16"),
    ({"fp8_recipe": "block"}, "--fp8-recipe: expected one of tensor, mxfp8, got 'block'"),
])
def test_a_bad_recipe_is_refused_naming_the_flag(kw: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(GpuarchError, match=message):
        estimate_training(CATALOG, LLAMA_8B, CATALOG.product("b200"),
                          dataclasses.replace(BASE, **kw))


def test_fp8_attention_takes_the_recipes_kernel_unless_told() -> None:
    """An MXFP8 run's FP8 attention is MXFP8's own kernel; per-tensor runs and NVFP4 (pinned
    to current scaling) take the per-tensor one; --fp8-attention-scaling overrides."""
    fp8 = dataclasses.replace(BASE, fp8_attention=True)
    assert fp8.attention_fp8_kernel == "tensor"
    assert dataclasses.replace(fp8, fp8_recipe="mxfp8").attention_fp8_kernel == "mxfp8"
    assert dataclasses.replace(fp8, precision=Precision.NVFP4).attention_fp8_kernel == "tensor"
    told = dataclasses.replace(fp8, fp8_recipe="mxfp8", fp8_attention_scaling="tensor")
    assert told.attention_fp8_kernel == "tensor"
    b200 = CATALOG.product("b200")
    mx = estimate_training(CATALOG, LLAMA_8B, b200, dataclasses.replace(fp8, fp8_recipe="mxfp8"))
    assert mx.assumptions["fp8_attention"].startswith("MXFP8 fused attention")
    assert mx.as_json()["parallelism"]["fp8_attention_scaling"] == "mxfp8"


def test_the_router_scores_its_sequence_parallel_shard_and_is_not_cast() -> None:
    """Megatron-Core's MoELayer routes the layer's input as each tensor-parallel rank holds it
    (a sequence-parallel shard: MoE with TP > 1 requires sequence parallelism), and its
    TopKRouter is a plain linear (router_gating_linear) outside Transformer Engine, so an
    FP8 run casts nothing for it: the router GEMM has tokens / TP rows, and the cast's bytes
    are those of the other GEMMs alone."""
    moe = preset("qwen3-30b-a3b").shape
    tokens = BASE.seq_len * BASE.micro_batch
    for tp, sp, rows in ((1, False, tokens), (2, True, tokens // 2), (2, False, tokens)):
        cfg = dataclasses.replace(BASE, tp=tp, sequence_parallel=sp, ep=8 // tp)
        ops, _ = _layer_ops(moe, cfg, moe=True, tensor_core_generation=4)
        (router,) = [op for op in ops if isinstance(op, Gemm) and op.name == "router"]
        assert (router.m, router.n, router.k) == (rows, moe.experts, moe.hidden)
        others = [op for op in ops if isinstance(op, Gemm) and op.name != "router"]
        inputs = sum(op.m * op.k * op.batch for op in others)
        weights = sum(op.k * op.n * op.batch for op in others)
        (cast,) = [op for op in ops if isinstance(op, Elementwise) and op.name == "fp8_cast"]
        assert cast.bytes_moved == pytest.approx((2 + 2) * inputs + (2 + 1) * weights)


@pytest.mark.parametrize("precision", [Precision.FP8, Precision.BF16])
def test_the_router_runs_at_the_16_bit_rate_whatever_the_run(
        precision: Precision, monkeypatch: pytest.MonkeyPatch) -> None:
    """Megatron-Core's router_gating_linear multiplies BF16 operands outside Transformer
    Engine's autocast, so in an FP8 run the router GEMM costs what it costs on the 16-bit
    Tensor Cores (forward, and twice that backward), and in a BF16 run what it did; a dense
    layer has no router and keeps the run's device."""
    moe = preset("qwen3-30b-a3b").shape
    cfg = dataclasses.replace(BASE, precision=precision, ep=8)
    h100 = CATALOG.product("h100-sxm5-80gb")
    device = Device.of(h100, precision, 4)
    sixteen = Device.of(h100, Precision.BF16, 4)
    assert router_device(device, cfg, moe=True).precision is Precision.BF16
    assert router_device(device, cfg, moe=False) is device
    (router,) = [op for op in _layer_ops(moe, cfg, moe=True, tensor_core_generation=4)[0]
                 if isinstance(op, Gemm) and op.name == "router"]
    link = Link(Fabric.NVLINK, 450e9)
    groups = (Group(1, 8, link, None), Group(1, 8, link, None), Group(8, 8, link, None))

    def layer() -> tuple[float, float]:
        fwd, bwd, *_ = one_layer_time(moe, cfg, device, DEFAULT_EFFICIENCY, *groups, moe=True)
        return float(fwd.compute), float(bwd.compute)

    priced = layer()
    monkeypatch.setattr(training_layers, "router_device", lambda d, c, m: d)
    at_run_rate = layer()
    extra = op_time(router, sixteen, DEFAULT_EFFICIENCY)[0] \
        - op_time(router, device, DEFAULT_EFFICIENCY)[0]
    assert (extra > 0) == (precision is Precision.FP8)
    assert priced[0] - at_run_rate[0] == pytest.approx(extra, abs=1e-12)
    assert priced[1] - at_run_rate[1] == pytest.approx(2 * extra, abs=1e-12)
