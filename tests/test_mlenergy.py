"""ML.ENERGY Leaderboard v3's vLLM serving runs (validation/mlenergy.py): the shipped rows
and the serving points built from them for `gpuarch validate inference`."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuarch.errors import GpuarchError
from gpuarch.validation.inference import load_inference_points
from gpuarch.validation.mlenergy import MLENERGY_FILE, load_serving_runs, mlenergy_points
from gpuarch.workloads.presets import preset

SOURCE = "mlenergy-v3-lm-arena-chat"
RUNS = load_serving_runs()
POINTS = [p for p in load_inference_points() if p.source == SOURCE]


def test_rows_are_the_leaderboards() -> None:
    # public/data/tasks/lm-arena-chat.json @0ea52b6a: Qwen/Qwen3-14B on one H100 at
    # max_num_seqs 128: avg_batch_size 127.71311475409836, avg_output_len 613.51953125,
    # median_itl_ms 26.163955219089985, output_throughput_tokens_per_sec 4474.350660704568;
    # Qwen3-235B-A22B-Instruct-2507-FP8 on 4 H100: expert_parallel 4
    assert len(RUNS) == 328
    assert sum(r.gpu == "h100-sxm5-80gb" for r in RUNS) == 177
    assert sum(r.gpu == "b200" for r in RUNS) == 151
    (row,) = [r for r in RUNS if r.model_id == "Qwen/Qwen3-14B"
              and r.gpu == "h100-sxm5-80gb" and r.max_num_seqs == 128]
    assert (row.batch, row.output_len, row.output_tokens_per_s) == (127.713, 613.52, 4474.35)
    assert row.median_itl_s == pytest.approx(0.026164)
    moe = next(r for r in RUNS if r.model_id.endswith("235B-A22B-Instruct-2507-FP8")
               and r.gpus == 4)
    assert (moe.tp, moe.ep, moe.fp8_scaling) == (4, 4, "block")


def test_rows_are_consistent() -> None:
    """Every server ran tensor parallel over its GPUs (the benchmark's launcher), expert
    parallel over them or not at all, FP8 checkpoints say how they are scaled, the answers'
    spread is a spread, and the mean batch never exceeds its cap."""
    for r in RUNS:
        assert r.tp == r.gpus and r.ep in (1, r.gpus)
        assert (r.weights == "fp8") == bool(r.fp8_scaling)
        assert 0.8 < r.output_len_cv < 1.35
        assert 0.85 * r.max_num_seqs <= r.batch <= r.max_num_seqs
        assert r.median_itl_s < r.batch / r.output_tokens_per_s * 1.01
        preset(r.preset)  # an unknown preset raises


def test_points_carry_each_run() -> None:
    by_key = {}
    for p in POINTS:
        by_key.setdefault((p.get("preset"), p.get("gpu"), p.get("gpus"), p.get("weight_precision"),
                           p.get("max_batch_size")), []).append(p)
    assert len(POINTS) == 328 and len({p.id for p in POINTS}) == 328
    for run in RUNS:
        group = by_key[(run.preset, run.gpu, run.gpus, run.weights, run.max_num_seqs)]
        assert run.output_tokens_per_s in [p.get("output_tokens_per_s") for p in group]
    p = next(p for p in POINTS if p.id == "mlenergy3-h100-sxm5-80gb-x1-qwen3-14b-seqs128")
    assert p.get("mode") == "max-throughput" and p.get("tp") == 1
    assert (p.get("output_len"), p.get("output_len_cv")) == (614, 0.9)
    # the source's engine settings reach every point
    assert p.get("schedule") == "mixed" and p.get("scheduler_policy") == "max_utilization"
    assert p.get("moe_kernels") == "vllm" and p.get("max_num_tokens") == 8192


def test_the_prompt_length_is_fitted_on_the_dense_h100_runs_only() -> None:
    """The one figure fitted on these rows is in sample on 88 runs, the dense models on H100;
    every MoE, hybrid and B200 run is out of sample."""
    fitted = [p for p in POINTS if not p.get("out_of_sample")]
    assert len(fitted) == 88
    assert {p.get("gpu") for p in fitted} == {"h100-sxm5-80gb"}
    assert not any(preset(str(p.get("preset"))).shape.is_moe for p in fitted)
    assert len({p.get("input_len") for p in POINTS}) == 1


def test_a_misspelt_table_key_is_named(tmp_path: Path) -> None:
    source = {"id": "x", "mlenergy": {"file": MLENERGY_FILE.name, "id_prefix": "x",
                                       "input_len": 400, "inputlen": 1}}
    with pytest.raises(GpuarchError, match="unknown key 'inputlen'"):
        mlenergy_points(MLENERGY_FILE, source)
    assert mlenergy_points(MLENERGY_FILE, {"id": "y"}) == []


def test_where_a_larger_batch_drew_less_power() -> None:
    """docs/performance-model.md, "vLLM as ML.ENERGY ran it": in 21 sweeps a larger batch drew
    at least 10% less GPU power than a smaller one of the same sweep had (the GPU waiting on
    the host), 17 of them small models on one B200; Llama 3.1 8B on one B200 drew 667 W at 16
    sequences and 449 W at 128."""
    sweeps: dict[tuple[str, str, int, str], list] = {}
    for r in RUNS:
        sweeps.setdefault((r.model_id, r.gpu, r.gpus, r.weights), []).append(r)
    drops = []
    for runs in sweeps.values():
        peak = 0.0
        for r in sorted(runs, key=lambda r: r.max_num_seqs):
            if r.power_w / r.gpus < 0.9 * peak:
                drops.append(r)
            peak = max(peak, r.power_w / r.gpus)
    assert len(drops) == 21
    assert sum(r.gpu == "b200" and r.gpus == 1 for r in drops) == 17
    llama = {r.max_num_seqs: r.power_w for r in RUNS
             if r.model_id == "meta-llama/Llama-3.1-8B-Instruct" and r.gpu == "b200"}
    assert round(llama[16]) == 667 and round(llama[128]) == 449
