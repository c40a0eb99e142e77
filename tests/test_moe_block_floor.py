"""A serving engine's fused MoE block: its fixed floor per layer (Blackwell's own), the
block's time against vLLM's published kernel benchmark, and the floors against TensorRT-LLM's
measured MoE layers."""

from __future__ import annotations

import math

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.report.estimate_text import render_inference
from gpuarch.report.text import fmt
from gpuarch.units import Unit, from_si
from gpuarch.validation.measured import mean_abs_log_ratio
from gpuarch.validation.moe_kernels import FILES, compare, load_kernel_rows
from gpuarch.workloads import preset

CATALOG = load_catalog()
H100 = CATALOG.product("h100")
QWEN3_30B = preset("qwen3-30b-a3b").shape
FP8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)


def _moe_block_us(batch: int) -> float:
    """One layer's MoE block in a decode step of Qwen3-30B-A3B in FP8 on one H100: the
    expert GEMMs and router, plus the block's fixed floor, in microseconds."""
    est = estimate_inference(CATALOG, QWEN3_30B, H100,
                             InferenceConfig(input_len=128, output_len=2, batch=batch,
                                             quant=FP8))
    per_layer = est.decode_step_parts_s["expert_gemms"] / QWEN3_30B.moe_layers
    return from_si(per_layer + DEFAULT_EFFICIENCY.moe_block_floor_s, Unit.US)


@pytest.mark.parametrize("batch, measured_us", [(1, 40.44), (8, 118.64), (64, 237.26)])
def test_moe_block_against_vllms_kernel_benchmark(batch: int, measured_us: float) -> None:
    """vLLM pull request #24700, "Benchmarks on H100": benchmark_moe.py --model
    Qwen/Qwen3-30B-A3B -tp 1 --dtype fp8_w8a8, kernel time at batch 1, 8 and 64 with the
    PR's configs: 40.44, 118.64 and 237.26 us (the whole fused_moe call: routing, sorting,
    both GEMMs, activation, sum). The model's block (the experts' weights that the batch
    touches at the memory efficiency, plus the floor) is within 10% of each."""
    assert _moe_block_us(batch) == pytest.approx(measured_us, rel=0.10)


def test_floor_is_charged_once_per_expert_layer_as_overhead() -> None:
    """The decode step's fixed overhead is the step's own (TensorRT-LLM's PyTorch backend's
    measured one by default, the fitted one for vLLM's loop) plus the floor of each of the 48
    expert layers; a dense model gets none."""
    eff = DEFAULT_EFFICIENCY
    for executor, step in (("python", eff.decode_step_overhead_pytorch_s),
                           ("vllm", eff.decode_step_overhead_s)):
        moe = estimate_inference(CATALOG, QWEN3_30B, H100, InferenceConfig(
            input_len=128, output_len=2, batch=1, quant=FP8, executor=executor))
        assert moe.decode_step_parts_s["overhead"] == pytest.approx(
            step + 48 * eff.moe_block_floor_s)
        dense = estimate_inference(CATALOG, preset("llama-3.1-8b").shape, H100,
                                   InferenceConfig(input_len=128, output_len=2, batch=1,
                                                   executor=executor))
        assert dense.decode_step_parts_s["overhead"] == pytest.approx(step)


def test_blackwell_blocks_carry_their_engines_floor() -> None:
    """On a Blackwell GPU TensorRT-LLM's kernels (the default) charge each expert layer
    ``moe_block_floor_blackwell_s`` (their measured B200 and GB200 layers), vLLM's the
    Hopper-measured ``moe_block_floor_s`` (theirs, SGLang's too); on Hopper all charge the
    latter, and the estimate says whose kernels it took and their floor (JSON and text)."""
    eff = DEFAULT_EFFICIENCY
    assert eff.moe_block_floor_blackwell_s > eff.moe_block_floor_s

    def overhead(gpu: str, kernels: str) -> float:
        est = estimate_inference(CATALOG, QWEN3_30B, CATALOG.product(gpu), InferenceConfig(
            input_len=128, output_len=2, batch=1, quant=FP8, moe_kernels=kernels))
        assert est.assumptions["moe_kernels"] == kernels
        floor = est.assumptions["moe_block_floor_s"]
        name = {"trtllm": "TensorRT-LLM's", "vllm": "vLLM's", "sglang": "SGLang's",
                "trtllm-gen": "TensorRT-LLM (TRTLLM MoE backend)'s"}[kernels]
        assert f"MoE kernels   {name}: {fmt(from_si(floor, Unit.US))} us fixed per expert layer" \
            in render_inference(est)
        assert est.decode_step_parts_s["overhead"] == pytest.approx(
            eff.decode_step_overhead_pytorch_s + 48 * floor)
        return float(floor)

    assert overhead("b200", "trtllm") == eff.moe_block_floor_blackwell_s
    # TensorRT-LLM's TRTLLM MoE backend (the TRT-LLM-Gen kernels vLLM and SGLang run through
    # FlashInfer on Blackwell) at its own measured floor there, below theirs
    assert overhead("b200", "trtllm-gen") == eff.moe_block_floor_trtllm_gen_s
    assert eff.moe_block_floor_trtllm_gen_s < eff.moe_block_floor_s
    for gpu, kernels in (("b200", "vllm"), ("b200", "sglang"), ("h100", "vllm"),
                         ("h100", "trtllm"), ("h100", "trtllm-gen")):
        assert overhead(gpu, kernels) == eff.moe_block_floor_s
    dense = estimate_inference(CATALOG, preset("llama-3.1-8b").shape, CATALOG.product("b200"),
                               InferenceConfig(input_len=128, output_len=2, batch=1))
    assert dense.assumptions["moe_block_floor_s"] is None
    assert "MoE kernels" not in render_inference(dense)


BLACKWELL, HOPPER = ("b200_sxm", "gb200"), ("h100_sxm", "h200_sxm")


def _kernel_error(name: str, floor_s: float, devices: tuple[str, ...],
                  kernels: str = "trtllm") -> float:
    rows = [r for r in load_kernel_rows(FILES[kernels]) if r["device"] in devices]
    return mean_abs_log_ratio(compare(CATALOG, DEFAULT_EFFICIENCY.with_overrides(
        {name: floor_s}), rows, kernels))


def test_floors_sit_where_the_engines_measured_layers_put_them() -> None:
    """The engines' MoE layers as aiconfigurator measured them (scripts/fit_moe_floor.py):
    TensorRT-LLM's on B200 and GB200 are closer at the shipped Blackwell floor than at 26.6 us
    or 15 us either side of it, and on H100 and H200 within 0.01 of the best of 20-45 us at the
    vLLM-measured 26.6 us; vLLM's on B200 and GB200, which that floor prices, are closer at it
    than at 15 us or at TensorRT-LLM's Blackwell floor."""
    name, shipped = "moe_block_floor_blackwell_s", DEFAULT_EFFICIENCY.moe_block_floor_blackwell_s
    at_shipped = _kernel_error(name, shipped, BLACKWELL)
    for other in (26.6e-6, shipped - 15e-6, shipped + 15e-6):
        assert at_shipped < _kernel_error(name, other, BLACKWELL), other
    floor = DEFAULT_EFFICIENCY.moe_block_floor_s
    errors = [_kernel_error("moe_block_floor_s", f, HOPPER) for f in (20e-6, 33e-6, 45e-6)]
    assert _kernel_error("moe_block_floor_s", floor, HOPPER) < min(errors) + 0.01
    vllm = _kernel_error("moe_block_floor_s", floor, BLACKWELL, "vllm")
    for other in (15e-6, shipped):
        assert vllm < _kernel_error("moe_block_floor_s", other, BLACKWELL, "vllm"), other


def test_trtllm_gen_floor_sits_where_its_own_small_layers_put_it() -> None:
    """TensorRT-LLM's TRTLLM-backend layers (GPT-OSS-120B's W4A8 MXFP4 x MXFP8 experts on B200
    and GB200, data/moe-kernels-trtllm-gen.csv) of 16 tokens or fewer, where the fixed time is
    most of a layer: the shipped floor (17 us, scripts/fit_moe_floor.py) within 0.06 mean
    |ln| of them, closer than vLLM's floor for the same kernels (26.6 us, 0.20) or 10 us;
    at 8 tokens or fewer within 0.03. At one token on B200 the model is within 5%."""
    name, shipped = "moe_block_floor_trtllm_gen_s", DEFAULT_EFFICIENCY.moe_block_floor_trtllm_gen_s
    rows = [r for r in load_kernel_rows(FILES["trtllm-gen"])
            if r["moe_dtype"] == "w4a8_mxfp4_mxfp8" and int(r["num_tokens"]) <= 16]
    assert len(rows) == 22

    def error(floor_s: float, most: int = 16) -> float:
        return mean_abs_log_ratio(compare(CATALOG, DEFAULT_EFFICIENCY.with_overrides(
            {name: floor_s}), [r for r in rows if int(r["num_tokens"]) <= most], "trtllm-gen"))

    assert error(shipped) < 0.06
    assert error(shipped, 8) < 0.03
    assert error(shipped) < error(26.6e-6) - 0.1 and error(shipped) < error(10e-6) - 0.1
    one = compare(CATALOG, rows=[r for r in rows if r["device"] == "b200_sxm"
                                 and r["moe_ep_size"] == "1" and r["num_tokens"] == "1"],
                  kernels="trtllm-gen")
    assert len(one) == 1 and one[0].measured_s == pytest.approx(25.29e-6, abs=0.005e-6)
    assert abs(math.log(one[0].ratio)) < 0.05


def test_disaggregated_pools_each_carry_their_gpus_floor() -> None:
    """Prefill on H100 and decode on B200 with TensorRT-LLM's kernels: each pool's expert
    layers take the floor of its own GPU (estimate.inference.moe_block_floor_s), and the
    estimate says so; with vLLM's both take the Hopper-measured one."""
    from gpuarch.estimate.disagg import PrefillPool, estimate_disaggregated
    from gpuarch.estimate.inference_config import Batching

    eff = DEFAULT_EFFICIENCY
    for kernels, decode_floor in (("trtllm", eff.moe_block_floor_blackwell_s),
                                  ("vllm", eff.moe_block_floor_s)):
        est = estimate_disaggregated(
            CATALOG, QWEN3_30B, CATALOG.product("b200"),
            InferenceConfig(input_len=1024, output_len=64, batch=8, quant=FP8,
                            batching=Batching.CONTINUOUS, moe_kernels=kernels),
            PrefillPool(gpus=1, product=CATALOG.product("h100"),
                        system=CATALOG.system("dgx h100")),
            system=CATALOG.system("dgx b200"))
        assert est.assumptions["moe_kernels"] == kernels
        assert est.assumptions["moe_block_floor_s"] == {"prefill": eff.moe_block_floor_s,
                                                         "decode": decode_floor}


def test_trtllm_gen_kernels_are_tensorrt_llms_on_the_launch_line() -> None:
    """--moe-kernels trtllm-gen is TensorRT-LLM's (its all-to-all path, its launch), with its
    TRTLLM MoE backend written into the server's options; vLLM's launch says it was not."""
    from gpuarch.estimate.inference_config import engine_of
    from gpuarch.report.launch import serving_launch

    assert engine_of("trtllm-gen") == "trtllm"
    shape = preset("gpt-oss-120b").shape
    cfg = InferenceConfig(input_len=1024, output_len=1024, batch=64, moe_kernels="trtllm-gen")
    trt = serving_launch("trtllm", shape, cfg, "openai/gpt-oss-120b", 64)
    assert any("moe_config:\n  backend: TRTLLM" in text for _, text in trt.files)
    default = serving_launch("trtllm", shape, InferenceConfig(input_len=1024, output_len=1024,
                                                              batch=64),
                             "openai/gpt-oss-120b", 64)
    assert not any("backend: TRTLLM" in text for _, text in default.files)
    vllm = serving_launch("vllm", shape, cfg, "openai/gpt-oss-120b", 64)
    assert any("trtllm-gen's MoE kernels" in note for note in vllm.notes)
