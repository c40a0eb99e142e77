"""What to change when a training run does not fit: each lever estimated with the model, and
each suggestion reproducible by running the estimate with the flags it names."""

from __future__ import annotations

import dataclasses
import json
import shlex

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.estimate import Recompute, TrainingConfig, estimate_training
from gpuarch.estimate.remedies import memory_remedies
from gpuarch.perf import Precision
from gpuarch.workloads import preset

CATALOG = load_catalog()
GB200 = CATALOG.product("gb200")
QWEN3_235B = preset("qwen3-235b-a22b").shape

# NVIDIA's MoE report's Qwen3-235B-A22B MXFP8 layout on 256 GB200 without the recomputation
# it ran with: 198 GiB of 186
QWEN_ARGS = ["estimate", "train", "--model", "qwen3-235b-a22b", "--gpu", "gb200", "--gpus",
             "256", "--pp", "4", "--vpp", "6", "--ep", "64", "--seq-len", "4096",
             "--global-batch", "3072", "--micro-batch", "3", "--precision", "fp8",
             "--ep-dispatcher", "deepep"]
QWEN_RUN = TrainingConfig(gpus=256, seq_len=4096, global_batch=3072, micro_batch=3, pp=4,
                          vpp=6, ep=64, ep_dispatcher="deepep", precision=Precision.FP8,
                          gpus_per_node=72)


def _json(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_each_suggestion_is_what_its_flags_estimate(capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    doc = _json(QWEN_ARGS, capsys)
    assert not doc["fits_in_memory"]
    remedies = doc["memory_remedies"]
    assert remedies and remedies[0]["fits"]
    # offloading what the experts keep comes first: on GB200's NVLink-C2C the copies hide
    # behind the layers' passes, so it fits at no cost in time (the recomputation the run
    # used, layernorm and moe_act, reads 213 GiB since the experts' first-projection
    # inputs are counted)
    assert remedies[0]["change"] == "--offload-modules expert_fc1,moe_act"
    assert remedies[0]["step_time_s"] == pytest.approx(doc["step_time_s"], rel=1e-6)
    for r in remedies:
        again = _json(QWEN_ARGS + shlex.split(r["change"]), capsys)
        assert again["memory_per_gpu_gib"]["total"] == pytest.approx(
            r["memory_per_gpu_gib"], rel=1e-3)
        assert again["step_time_s"] == pytest.approx(r["step_time_s"], rel=1e-3)
        assert again["fits_in_memory"] == r["fits"]
        assert again["memory_per_gpu_gib"]["total"] < doc["memory_per_gpu_gib"]["total"]
    fitting = [r["step_time_s"] for r in remedies if r["fits"]]
    assert fitting == sorted(fitting)


H100 = CATALOG.product("h100")
LLAMA3_70B = preset("llama-3.1-70b").shape
# Llama-3.1-70B on 64 H100 at TP 8 x PP 4 without sequence parallelism: 141 GiB of 80
LLAMA_RUN = TrainingConfig(gpus=64, seq_len=8192, global_batch=64, micro_batch=2, tp=8,
                           pp=4)


@pytest.mark.parametrize("shape, product, cfg", [
    (QWEN3_235B, GB200, QWEN_RUN), (LLAMA3_70B, H100, LLAMA_RUN)])
def test_block_recompute_is_the_fewest_layers_that_fit(shape, product, cfg  # type: ignore[no-untyped-def]
                                                       ) -> None:
    system = CATALOG.system_for(product)
    remedies = memory_remedies(CATALOG, shape, product, cfg, system=system, most=10)
    block = [r for r in remedies if "--recompute-layers" in r.change]
    assert len(block) == 1 and block[0].fits
    n = int(block[0].change.split()[-1])

    def at(layers: int):  # type: ignore[no-untyped-def]
        return estimate_training(CATALOG, shape, product, dataclasses.replace(
            cfg, recompute=Recompute.FULL, recompute_layers=layers), system=system)

    assert at(n).fits_in_memory and at(n).step_time_s == pytest.approx(block[0].step_time_s)
    assert n == 1 or not at(n - 1).fits_in_memory


def test_a_run_that_fits_gets_none(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
            "--seq-len", "4096", "--global-batch", "64"]
    assert "memory_remedies" not in _json(args, capsys)
    assert main(args) == 0
    assert "to fit" not in capsys.readouterr().out


def test_no_single_change_says_what_the_states_take(capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    """Llama-3.1-70B on one node at TP 8: the weights, FP32 gradients and Adam states
    alone (148 GiB a GPU) exceed an H100's 80 GiB whatever the activations do."""
    args = ["estimate", "train", "--model", "llama-3.1-70b", "--gpu", "h100", "--gpus", "8",
            "--tp", "8", "--seq-len", "8192", "--global-batch", "64", "--micro-batch", "2"]
    doc = _json(args, capsys)
    assert doc["memory_remedies"] and not any(r["fits"] for r in doc["memory_remedies"])
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "no single change fits" in out and "states alone take 148 GiB" in out


def test_an_moe_run_without_expert_parallelism_is_offered_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Mixtral-8x7B on 16 H100 without EP keeps every expert's weights, FP32 gradients and
    Adam states on each GPU (325 GiB of 80); splitting the eight experts over the
    data-parallel ranks is the lever that shrinks them most (--ep 8: the largest EP dividing
    both the 16 ranks and the 8 experts), and the suggestion is what its flags estimate."""
    args = ["estimate", "train", "--model", "mixtral-8x7b", "--gpu", "h100", "--gpus", "16",
            "--seq-len", "4096", "--global-batch", "64"]
    doc = _json(args, capsys)
    changes = {r["change"]: r for r in doc["memory_remedies"]}
    assert "--ep 8" in changes
    closest = min(doc["memory_remedies"], key=lambda r: r["memory_per_gpu_gib"])
    assert closest["change"] == "--ep 8"
    again = _json([*args, "--ep", "8"], capsys)
    assert again["memory_per_gpu_gib"]["total"] == pytest.approx(
        changes["--ep 8"]["memory_per_gpu_gib"], rel=1e-3)
    # a dense model, or an MoE run already split over experts, is not offered it
    dense = _json(["estimate", "train", "--model", "llama-3.1-70b", "--gpu", "h100", "--gpus",
                   "8", "--tp", "8", "--seq-len", "8192", "--global-batch", "64",
                   "--micro-batch", "2"], capsys)
    assert not any(r["change"].startswith("--ep") for r in dense["memory_remedies"])
    split = _json([*args, "--ep", "2"], capsys)
    assert not any(r["change"].startswith("--ep")
                   for r in split.get("memory_remedies", []))


SERVE_70B = ["estimate", "infer", "--model", "llama-3.1-70b", "--gpu", "h100",
             "--input-len", "2048", "--output-len", "256", "--batch", "8"]
SERVE_8B_A100 = ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "a100",
                 "--input-len", "8192", "--output-len", "256", "--batch", "64"]


# Llama 3.1 70B in BF16 as eight one-GPU replicas on eight H100: 147 GiB of 80
SERVE_70B_8 = [*SERVE_70B, "--gpus", "8"]


@pytest.mark.parametrize("args", [SERVE_70B, SERVE_8B_A100, SERVE_70B_8])
def test_each_serving_suggestion_is_what_its_flags_estimate(
        args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(args, capsys)
    assert not doc["fits_in_memory"]
    remedies = doc["memory_remedies"]
    assert remedies and remedies[0]["fits"]
    for r in remedies:
        again = _json(args + shlex.split(r["change"]), capsys)
        assert again["memory_per_gpu_gib"]["total"] == pytest.approx(
            r["memory_per_gpu_gib"], rel=1e-3)
        assert again["output_tokens_per_s"] == pytest.approx(r["output_tokens_per_s"],
                                                             rel=1e-3)
        assert again["fits_in_memory"] == r["fits"]
    per_gpu = [r["output_tokens_per_s"] / r["gpus"] for r in remedies if r["fits"]]
    assert per_gpu == sorted(per_gpu, reverse=True)


def test_serving_levers_respect_the_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    """An A100 has no FP8 Tensor Cores: FP8 weights are not offered there (the KV cache may
    still be stored in FP8); a static batch larger than fits is offered the largest that
    does (54 sequences of 8,448 tokens for Llama-3.1-8B in 16 bits)."""
    changes = [r["change"] for r in _json(SERVE_8B_A100, capsys)["memory_remedies"]]
    assert not any("fp8 --activation-precision" in c for c in changes)
    assert "--kv-precision fp8" in changes and "--batch 54" in changes
    assert main(SERVE_70B) == 0
    assert "to fit        --weight-precision int4" in capsys.readouterr().out


def test_the_same_gpus_are_offered_as_fewer_wider_replicas(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Eight H100 serving Llama 3.1 70B in BF16 one GPU a replica do not fit: the eight
    are offered as four replicas of TP 2, the narrowest that fits (77.7 GiB), rather than
    sixteen GPUs at that width; a run already one replica wide is offered a wider one on
    more GPUs, named by its flags."""
    changes = [r["change"] for r in _json(SERVE_70B_8, capsys)["memory_remedies"]]
    assert "--tp 2" in changes and "--tp 2 --gpus 16" not in changes
    assert not any(c.startswith("--tp 4") for c in changes)
    one = [*SERVE_70B, "--gpus", "2", "--tp", "2", "--input-len", "32768"]
    remedies = _json(one, capsys)["memory_remedies"]
    wider = [r for r in remedies if r["change"].startswith("--tp")]
    # one replica: only a wider one on more GPUs, which the flags name, so that appending
    # them to the command runs it
    assert [r["change"] for r in wider] == ["--tp 4 --gpus 4"]
    again = _json(one + shlex.split(wider[0]["change"]), capsys)
    assert again["output_tokens_per_s"] == pytest.approx(wider[0]["output_tokens_per_s"],
                                                         rel=1e-3)


def test_suggestions_replace_the_flags_they_change(capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    """From selective recomputation of the attention core alone, the suggestions that
    leave selective recomputation also drop the modules, so appending a suggestion's flags
    to the command runs what it says."""
    args = [*QWEN_ARGS, "--recompute", "selective", "--recompute-modules", "core_attn"]
    doc = _json(args, capsys)
    full = [r for r in doc["memory_remedies"] if r["change"].startswith("--recompute full")]
    assert full and all("--recompute-modules ''" in r["change"] for r in full)
    for r in doc["memory_remedies"]:
        again = _json(args + shlex.split(r["change"]), capsys)
        assert again["step_time_s"] == pytest.approx(r["step_time_s"], rel=1e-3)
