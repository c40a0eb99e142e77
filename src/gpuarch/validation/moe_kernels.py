"""The serving model's fused MoE module against the engines' measured MoE layers.

NVIDIA's aiconfigurator times each engine's MoE module (routing, quantization, both grouped
GEMMs, activation, weighted sum) layer by layer on each GPU it supports, at many token
counts, expert shapes, precisions and tensor/expert-parallel splits. ``data/
moe-kernels-trtllm.csv`` (TensorRT-LLM 1.3.0rc20, its CUTLASS MoE backend; on Hopper
GPT-OSS's MXFP4 on its Triton backend), ``data/moe-kernels-trtllm-gen.csv`` (the same
release's TRTLLM backend, the TRT-LLM-Gen kernels: GPT-OSS's MXFP4 experts on Blackwell),
``data/moe-kernels-vllm.csv`` (vLLM 0.24.0) and ``data/moe-kernels-sglang.csv`` (SGLang
0.5.14) hold the rows of four fine-grained shapes (Qwen3-30B-A3B, Qwen3-235B-A22B,
DeepSeek-V3, GPT-OSS-120B) on H100, H200, B200 and GB200 in the formats the serving model
prices;
``data/moe-kernels-sglang-deepep.csv`` (SGLang 0.5.10's wide-EP path, DeepEP with DeepGEMM)
DeepSeek-V3's on H100 and H200 at EP 2-32; their headers name the source.
Each row here is set beside ``estimate.inference.moe_module_time`` for the same module with
that engine's kernels (``InferenceConfig.moe_kernels``; ``gpuarch validate moe-kernels
[--moe-kernels E]``; tests/test_moe_kernels.py pins where the model stands).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpuarch.catalog.loader import Catalog
from gpuarch.estimate.inference_config import MOE_KERNEL_ENGINES
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.units import Unit, to_si
from gpuarch.validation.measured import (
    ModelOverMeasured,
    aiconfigurator_devices,
    mean_abs_log_ratio,
    read_commented_csv,
)
from gpuarch.workloads.presets import preset

__all__ = ["FILES", "LARGE_TOKENS", "MOE_KERNELS_FILE", "RELEASES", "SOURCE", "SOURCES",
           "VERSIONS", "KernelRow", "compare", "load_kernel_rows", "mean_abs_log_ratio",
           "summarize"]

LARGE_TOKENS = 2048
"""From this many tokens on, a module's grouped GEMMs' efficiency sets its time; below it,
streaming the experts' weights and the module's fixed costs."""

MOE_KERNELS_FILE = Path(__file__).with_name("data") / "moe-kernels-trtllm.csv"

FILES = {"trtllm": MOE_KERNELS_FILE,
         "trtllm-gen": Path(__file__).with_name("data") / "moe-kernels-trtllm-gen.csv",
         "vllm": Path(__file__).with_name("data") / "moe-kernels-vllm.csv",
         "sglang": Path(__file__).with_name("data") / "moe-kernels-sglang.csv",
         "sglang-deepep": Path(__file__).with_name("data") / "moe-kernels-sglang-deepep.csv"}
"""Each engine's measured layers (``InferenceConfig.moe_kernels``: whose kernels)."""

VERSIONS = {"trtllm": "1.3.0rc20", "trtllm-gen": "1.3.0rc20", "vllm": "0.24.0",
            "sglang": "0.5.14", "sglang-deepep": "0.5.10"}
"""The engine release each file's layers were measured with."""

RELEASES = {k: MOE_KERNEL_ENGINES[k].replace(" (", f" {v} (", 1) if " (" in MOE_KERNEL_ENGINES[k]
            else f"{MOE_KERNEL_ENGINES[k]} {v}" for k, v in VERSIONS.items()}
"""Each engine and release, as reports name the measured layers."""

_TABLES = {"sglang-deepep": "sglang/{v}/wideep_context_moe_perf.parquet and "
                            "wideep_generation_moe_perf.parquet",
           "trtllm-gen": "trtllm/{v}/moe_perf.parquet, its TRTLLM-backend rows"}
SOURCES = {k: (f"NVIDIA aiconfigurator's collected database, {RELEASES[k]} MoE layers (PyPI "
               "aiconfigurator-core 0.12.0: aiconfigurator_core/systems/data/<gpu>/moe/"
               + _TABLES.get(k, f"{k}/{{v}}/moe_perf.parquet").format(v=v)
               + "), balanced routing") for k, v in VERSIONS.items()}
"""Where each engine's rows come from (each file's header says more)."""

SOURCE = SOURCES["trtllm"]
"""Where the TensorRT-LLM rows come from."""

SHAPES = {"qwen3-30b": "qwen3-30b-a3b", "qwen3-235b": "qwen3-235b-a22b",
          "dsv3": "deepseek-v3", "gptoss120": "gpt-oss-120b"}
"""The file's shape names and the presets with those expert shapes."""

DEVICES = aiconfigurator_devices("h100_sxm", "h200_sxm", "b200_sxm", "gb200")
"""The file's aiconfigurator systems and the catalog's keys."""

_F = QuantFormat
FORMATS: dict[str, tuple[QuantScheme, QuantFormat | None, QuantFormat | None]] = {
    "fp8": (QuantScheme(_F.FP8, _F.FP8, _F.FP8), None, None),
    "fp8_block": (QuantScheme(_F.FP8, _F.FP8, _F.FP8), None, None),
    "nvfp4": (QuantScheme(_F.FP4, _F.FP4, _F.FP8), None, None),
    "w4a16_mxfp4": (QuantScheme(_F.BF16, _F.BF16, _F.BF16), _F.MXFP4, None),
    "w4a8_mxfp4_mxfp8": (QuantScheme(_F.FP8, _F.FP8, _F.FP8), _F.MXFP4, _F.FP8),
    "bfloat16": (QuantScheme(_F.BF16, _F.BF16, _F.BF16), None, None),
}
"""Each measured format as the serving model's scheme and the routed experts' weight and
activation formats where they differ; "fp8_block" runs with ``fp8_scaling`` "block"."""


@dataclass(frozen=True)
class KernelRow(ModelOverMeasured):
    """One measured MoE layer and the model's time for it (seconds)."""

    device: str
    shape: str
    moe_dtype: str
    tp: int
    ep: int
    tokens: int
    measured_s: float
    model_s: float


@cache
def load_kernel_rows(path: Path = MOE_KERNELS_FILE) -> tuple[dict[str, str], ...]:
    """The file's rows as read (comment lines skipped)."""
    return read_commented_csv(path)


def compare(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY,
            rows: Iterable[dict[str, str]] | None = None, kernels: str = "trtllm"
            ) -> list[KernelRow]:
    """Each measured row of an engine's (default: its file's) beside the model's
    ``moe_module_time`` for the same module with that engine's kernels."""
    from gpuarch.estimate.inference_config import InferenceConfig
    from gpuarch.estimate.inference_passes import moe_module_time, moe_rank_tokens

    out = []
    for r in load_kernel_rows(FILES[kernels]) if rows is None else rows:
        shape = preset(SHAPES[r["shape"]]).shape
        product = catalog.product(DEVICES[r["device"]])
        quant, experts, expert_acts = FORMATS[r["moe_dtype"]]
        tp, ep, tokens = int(r["moe_tp_size"]), int(r["moe_ep_size"]), int(r["num_tokens"])
        gpus = max(tp, ep)
        per_rank = max(2, moe_rank_tokens(tokens, tp, ep))
        cfg = InferenceConfig(input_len=per_rank, output_len=2, batch=1, gpus=gpus, tp=tp,
                              ep=ep, quant=quant, expert_weights=experts,
                              expert_activations=expert_acts,
                              max_num_tokens=max(per_rank, 16), gpus_per_node=max(8, gpus),
                              moe_kernels=kernels,
                              fp8_scaling="block" if r["moe_dtype"] == "fp8_block" else "tensor")
        model = moe_module_time(catalog, shape, product, cfg, tokens, efficiency=efficiency)
        out.append(KernelRow(r["device"], r["shape"], r["moe_dtype"], tp, ep, tokens,
                             to_si(float(r["latency_us"]), Unit.US), model))
    return out


def summarize(rows: Iterable[KernelRow]) -> list[dict[str, object]]:
    """Per GPU, shape and format: how many layers, and the median model/measured ratio and
    mean |ln ratio| at ``LARGE_TOKENS`` tokens or more and below."""
    groups: dict[tuple[str, str, str], list[KernelRow]] = defaultdict(list)
    for r in rows:
        groups[(r.device, r.shape, r.moe_dtype)].append(r)
    out: list[dict[str, object]] = []
    for (device, shape, dtype), members in sorted(groups.items()):
        doc: dict[str, object] = {"device": device, "shape": shape, "format": dtype}
        for name, part in (("large", [r for r in members if r.tokens >= LARGE_TOKENS]),
                           ("small", [r for r in members if r.tokens < LARGE_TOKENS])):
            doc[f"{name}_layers"] = len(part)
            doc[f"{name}_median_ratio"] = statistics.median(r.ratio for r in part) \
                if part else None
            doc[f"{name}_mean_abs_log_ratio"] = mean_abs_log_ratio(part) if part else None
        out.append(doc)
    return out
