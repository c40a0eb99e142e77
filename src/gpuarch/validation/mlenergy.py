"""ML.ENERGY Leaderboard v3's vLLM serving runs (``data/mlenergy-v3-lm-arena-chat.csv``):
328 configurations of 18 models on H100 and B200, each with its measured steady-state output
rate, batch, answer lengths and GPU power. ``validation.power`` holds the power model to their
power; ``validation.inference`` the serving model to their output rate, through the points
``mlenergy_points`` builds from them for the source in ``data/inference.toml`` that names
the file (its ``mlenergy`` table: the file, the settings every run shares that the file does
not give, and which runs the one fitted figure, the prompts' mean length, was fitted on)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.units import Unit, from_si, to_si
from gpuarch.validation.measured import read_commented_csv

__all__ = ["MLENERGY_FILE", "ServingRun", "load_serving_runs", "mlenergy_points"]

MLENERGY_FILE = Path(__file__).with_name("data") / "mlenergy-v3-lm-arena-chat.csv"

FP8_SCALING = {"block": "block", "channel": "tensor"}
"""A checkpoint's FP8 scaling (the file's ``fp8_scaling``) as the serving model prices it:
128 x 128 blocks as block-scaled GEMMs; a scale per output channel as an FP8 GEMM with its
scales applied in the epilogue, as per-tensor scaling runs."""


@dataclass(frozen=True)
class ServingRun:
    """One vLLM configuration's measured steady state."""

    model_id: str
    preset: str
    gpu: str
    gpus: int
    weights: str  # the checkpoint's format: bf16 or fp8
    fp8_scaling: str  # block or channel (FP8 checkpoints), else empty
    tp: int
    ep: int
    max_num_seqs: int
    batch: float  # mean sequences in flight
    output_len: float  # mean answer, tokens
    output_len_cv: float  # the answers' spread, standard deviation over mean
    median_itl_s: float
    output_tokens_per_s: float
    power_w: float  # summed over the GPUs


@cache
def load_serving_runs(path: Path = MLENERGY_FILE) -> tuple[ServingRun, ...]:
    """The file's configurations, in its order."""
    return tuple(ServingRun(
        r["model_id"], r["preset"], r["gpu"], int(r["gpus"]), r["weights"], r["fp8_scaling"],
        int(r["tp"]), int(r["ep"]), int(r["max_num_seqs"]), float(r["avg_batch_size"]),
        float(r["avg_output_len"]), float(r["output_len_cv"]),
        to_si(float(r["median_itl_ms"]), Unit.MS),
        float(r["output_tokens_per_s"]), float(r["avg_power_w"]))
        for r in read_commented_csv(path))


_SPEC_KEYS = frozenset({"file", "id_prefix", "input_len", "kv_precision", "framework",
                        "fit_gpu", "fit_presets"})


def mlenergy_points(path: Path, source: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One serving point per configuration of the file a source's ``mlenergy`` table names
    (beside ``path``): the run's model, GPUs, layout (TP over every GPU, experts spread where
    ``ep`` > 1), formats, mean answer and its spread, ``max_num_seqs`` as the engine's batch
    cap, all prompts at once (the largest batch that fits, up to the cap), and its output
    rate. The table gives what the file does not: the prompts' mean length (``input_len``,
    not published: fitted, scripts/fit_mlenergy_prompt.py), the KV cache's format and the
    engine; the runs it was fitted on (``fit_gpu`` and ``fit_presets``) are in sample, the
    rest out of sample. Nothing here is read for a source without the table."""
    spec = source.get("mlenergy")
    if spec is None:
        return []
    for key in sorted(set(spec) - _SPEC_KEYS):
        raise GpuarchError(f"{path.name}: source {source['id']!r}: mlenergy: unknown key "
                           f"{key!r}")
    runs = load_serving_runs(path.with_name(str(spec["file"])))
    seen: Counter[str] = Counter()
    points = []
    for run in runs:
        name = re.sub(r"[^a-z0-9.]+", "-", run.model_id.split("/")[-1].lower())
        base = f"{spec['id_prefix']}-{run.gpu}-x{run.gpus}-{name}-seqs{run.max_num_seqs}"
        seen[base] += 1
        point: dict[str, Any] = {
            "id": base if seen[base] == 1 else f"{base}-run{seen[base]}",
            "source": source["id"],
            "where": (f"{run.model_id}, {run.gpus} x {run.gpu}, max_num_seqs "
                      f"{run.max_num_seqs}: output_throughput_tokens_per_sec (mean batch "
                      f"{run.batch:g}, mean answer {run.output_len:g} tokens, median "
                      f"inter-token latency {from_si(run.median_itl_s, Unit.MS):g} ms)"),
            "framework": spec["framework"], "preset": run.preset, "gpu": run.gpu,
            "gpus": run.gpus, "tp": run.tp, "ep": run.ep,
            "weight_precision": run.weights, "activation_precision": run.weights,
            "kv_precision": spec["kv_precision"], "input_len": int(spec["input_len"]),
            "output_len": round(run.output_len), "output_len_cv": run.output_len_cv,
            "mode": "max-throughput", "max_batch_size": run.max_num_seqs,
            "output_tokens_per_s": run.output_tokens_per_s,
            "out_of_sample": not (run.gpu == spec["fit_gpu"]
                                  and run.preset in spec["fit_presets"]),
        }
        if run.fp8_scaling:
            point["fp8_scaling"] = FP8_SCALING[run.fp8_scaling]
        points.append(point)
    return points
