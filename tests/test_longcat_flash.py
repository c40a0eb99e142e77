"""Meituan's LongCat-Flash (``longcat_flash``): two latent attentions and two dense MLPs a
layer beside a shortcut-connected expert block whose router also picks identity ("zero")
experts. Counts are pinned to the models Hugging Face Transformers 5.25.0 builds on the meta
device (``scripts/params_vs_transformers.py``); the router and norms are also counted by
hand, and the active parameters against the published range."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference import InferenceConfig, estimate_inference
from gpuarch.estimate.inference_config import routed_slots
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.workloads.hf_layer_kinds import LONGCAT_FLASH_REAL_EXPERTS
from gpuarch.workloads.params import count_params, routed_expert_params
from tests.hf_configs import read_config as _read

CATALOG = load_catalog()

SMALL = {"model_type": "longcat_flash", "hidden_size": 512, "num_layers": 2,
         "num_attention_heads": 8, "vocab_size": 1000, "ffn_hidden_size": 1024,
         "expert_ffn_hidden_size": 128, "n_routed_experts": 16, "zero_expert_num": 8,
         "moe_topk": 4, "q_lora_rank": 128, "kv_lora_rank": 64, "qk_nope_head_dim": 32,
         "qk_rope_head_dim": 16, "v_head_dim": 32}


@pytest.mark.parametrize(("cfg", "total"), [
    # LongcatFlashConfig's defaults, LongCat-Flash-Chat's sizes ("560B")
    ({"model_type": "longcat_flash"}, 560_664_958_976),
    (SMALL, 14_914_816),
    ({**SMALL, "num_layers": 3, "attention_bias": True, "router_bias": True,
      "tie_word_embeddings": True, "zero_expert_num": 0}, 21_340_048),
    # num_hidden_layers, where given, is twice the decoder layers
    ({**SMALL, "num_hidden_layers": 8, "num_layers": 5}, 28_805_120),
])
def test_counts_equal_what_transformers_builds(tmp_path: Path, cfg: dict[str, Any],
                                               total: int) -> None:
    assert count_params(_read(tmp_path, cfg)).total == total


def test_the_standard_names_read_as_its_own(tmp_path: Path) -> None:
    """LongcatFlashConfig maps intermediate_size, moe_intermediate_size, num_local_experts and
    num_experts_per_tok onto its own keys (Transformers builds 8,615,168 here)."""
    own = {k: v for k, v in SMALL.items() if k not in (
        "ffn_hidden_size", "expert_ffn_hidden_size", "n_routed_experts", "moe_topk")}
    cfg = {**own, "intermediate_size": 768, "moe_intermediate_size": 64,
           "num_local_experts": 8, "num_experts_per_tok": 2}
    assert count_params(_read(tmp_path, cfg)).total == 8_615_168


def test_router_and_norms_by_hand(tmp_path: Path) -> None:
    """The router scores 512 experts and 256 identity experts (6144 x 768 a layer); a
    layer's five blocks hold four norms, the expert block reading the first MLP's."""
    s = _read(tmp_path, {"model_type": "longcat_flash"})
    assert s.hybrid_pattern == "*-E*-" * 28 and s.shortcut_experts
    assert (s.experts, s.zero_experts, s.router_width, s.experts_per_token) == (512, 256, 768,
                                                                                 12)
    pc = count_params(s)
    assert pc.router == 28 * 6144 * 768
    # four a layer and the final norm (the latent attentions' LoRA norms are the attention's)
    assert pc.norms == (28 * 4 + 1) * 6144


def test_active_parameters_against_the_published_range(tmp_path: Path) -> None:
    """Meituan publishes 560B in all and 18.6B to 31.3B activated a token as the router
    sends it to 0 to 12 real experts (the LongCat-Flash technical report, arXiv 2509.01322;
    Transformers' model page): without the embedding table the model counts 31.38B with 12
    real experts and 18.69B with none."""
    s = _read(tmp_path, {"model_type": "longcat_flash"})
    pc = count_params(s)
    active = pc.active(s) - pc.embedding
    assert 31.3e9 <= active < 31.4e9
    experts = 28 * 12 * routed_expert_params(s)
    assert 18.6e9 <= active - experts < 18.7e9


def test_real_experts_on_average(tmp_path: Path) -> None:
    """Meituan's average, about 27B active a token, is 8 of the 12 slots to real experts
    (18.69B + 8 x 1.06B = 27.15B; 7 would give 26.1B, 9 28.2B): read for the published
    sizes only; a config of other sizes (a small one) leaves it unpublished."""
    s = _read(tmp_path, {"model_type": "longcat_flash"})
    assert s.mean_real_experts == LONGCAT_FLASH_REAL_EXPERTS == 8.0
    pc = count_params(s)
    without = pc.active(s) - pc.embedding - 28 * 12 * routed_expert_params(s)
    assert 26.5e9 < without + 28 * 8 * routed_expert_params(s) < 27.5e9
    assert _read(tmp_path, SMALL).mean_real_experts == 0.0
    # read whatever the file calls its layers
    assert _read(tmp_path, {"model_type": "longcat_flash",
                            "num_hidden_layers": 56}).mean_real_experts == 8.0


def test_engines_that_skip_identity_slots_run_fewer(tmp_path: Path) -> None:
    """SGLang's kernels drop the identity slots (their expert id -1) before the experts run:
    a token's routed copies are the 8 real experts on average; vLLM's map them onto expert
    0 with zero weight, so all 12 run (4 of them as expert 0's rows), and the decode step is
    longer than with SGLang's."""
    s = _read(tmp_path, {"model_type": "longcat_flash"})
    h200 = CATALOG.product("h200-sxm-141gb")
    fp8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.BF16)
    steps = {}
    for kernels, slots in (("sglang", 8.0), ("sglang-deepep", 8.0), ("vllm", 12.0),
                           ("trtllm", 12.0)):
        cfg = InferenceConfig(gpus=8, tp=8, input_len=2048, output_len=512, batch=32,
                              quant=fp8, moe_kernels=kernels)
        assert routed_slots(s, cfg) == slots
        served = estimate_inference(CATALOG, s, h200, cfg)
        note = served.assumptions["identity_experts"]
        assert (note["priced_per_token"], note["skipped_by_kernels"]) == (slots, slots == 8.0)
        assert note["on_expert_0_per_token"] == slots - 8.0
        steps[kernels] = served.tpot_s
    assert steps["sglang"] < steps["vllm"]
    # vLLM's identity slots are expert 0's rows: under expert parallelism one rank runs
    # them for every token of the group, so its prefill, unlike SGLang's, is slower with
    # EP8 than with the experts split over TP8
    ttft = {}
    for kernels in ("sglang", "vllm"):
        for ep in (1, 8):
            cfg = InferenceConfig(gpus=8, tp=8, ep=ep, input_len=2048, output_len=512,
                                  batch=64, quant=fp8, moe_kernels=kernels)
            ttft[kernels, ep] = estimate_inference(CATALOG, s, h200, cfg).ttft_s
    assert ttft["sglang", 8] < ttft["sglang", 1]
    assert ttft["vllm", 8] > ttft["vllm", 1] > ttft["sglang", 1]
    # without a published mean every engine prices every slot
    unknown = dataclasses.replace(s, mean_real_experts=0.0)
    cfg = InferenceConfig(gpus=8, tp=8, input_len=2048, output_len=512, batch=32,
                          quant=fp8, moe_kernels="sglang")
    assert routed_slots(unknown, cfg) == 12.0
    assert estimate_inference(CATALOG, unknown, h200, cfg).tpot_s > steps["sglang"]


@pytest.mark.parametrize(("extra", "message"), [
    ({"zero_expert_type": "copy"}, "zero_expert_type: only \"identity\" is read"),
    ({"q_lora_rank": None}, "q_lora_rank: LongCat-Flash's attention always has a query LoRA"),
    ({"num_layers": 0}, "num_layers"),
])
def test_refusals_name_the_key(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        _read(tmp_path, {**SMALL, **extra})


def test_shape_checks(tmp_path: Path) -> None:
    s = _read(tmp_path, SMALL)
    with pytest.raises(GpuarchError, match="zero_experts need experts > 0"):
        dataclasses.replace(s, experts=0, experts_per_token=0, moe_ffn_hidden=0,
                            hybrid_pattern="*-*-*-*-*-*-"[:10], zero_experts=8)
    with pytest.raises(GpuarchError, match="shortcut_experts: the hybrid_pattern has no MLP"):
        dataclasses.replace(s, hybrid_pattern="*E-*-" * 2)
    with pytest.raises(GpuarchError, match="mean_real_experts: 5 real experts a token needs "
                                           "identity experts"):
        dataclasses.replace(s, mean_real_experts=5.0)  # above the top 4
    with pytest.raises(GpuarchError, match="mean_real_experts: 2 real experts"):
        dataclasses.replace(s, mean_real_experts=2.0, zero_experts=0)
    with pytest.raises(GpuarchError, match="mean_real_experts: expected a number"):
        dataclasses.replace(s, mean_real_experts=float("nan"))


def test_estimates_run(tmp_path: Path) -> None:
    s = _read(tmp_path, {"model_type": "longcat_flash"})
    h200 = CATALOG.product("h200-sxm-141gb")
    fp8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.BF16)
    served = estimate_inference(CATALOG, s, h200, InferenceConfig(
        gpus=8, tp=8, ep=8, input_len=2048, output_len=512, batch=32, quant=fp8))
    assert served.fits_in_memory and served.tpot_s > 0
    small = _read(tmp_path, SMALL)
    trained = estimate_training(CATALOG, small, CATALOG.product("h100-sxm5-80gb"),
                                TrainingConfig(gpus=8, seq_len=4096, global_batch=64, ep=8))
    assert trained.step_time_s > 0
