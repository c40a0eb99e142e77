"""The batch and token limits an engine picks for itself when a benchmark does not set them.

TensorRT-LLM's ``trtllm-bench`` chooses ``max_batch_size`` and ``max_num_tokens`` from the
model, the quantization, the parallel mapping, the dataset's mean lengths and the GPU's
memory when neither is given (``tensorrt_llm/bench/build/tuning.py``, ``calc_engine_setting``
and ``finetune_setting``; ``tensorrt_llm/bench/build/build.py``,
``get_benchmark_engine_settings``). The published ``trtllm-bench throughput`` tables ran
with these limits, and they decide how much prefill activation memory the engine holds and
how many sequences it decodes together, so reproducing those runs needs them:

- the weights' size: parameters x bytes per element of the checkpoint's quantization (FP8 and
  FP8 block-scaled 1, NVFP4 0.5, unquantized 2; other quantizations are not tuned and keep
  the engine's defaults);
- the KV cache: (GPUs x device memory - weights) x a KV fraction (0.95 at ``trtllm-bench
  build``; the throughput command's ``kv_cache_free_gpu_mem_fraction``, 0.90 by default, on
  the PyTorch backend), at 2 x attention layers x max(TP, KV heads) x head size x KV bytes
  per token, holds so many requests of the mean input + output length;
- those requests (at most 4,096) over the pipeline stages are the raw batch, and the raw
  batch x (1 + input / output) (at most 32,768) the raw token budget; both are rounded up,
  optimistically: the batch to a multiple of 32 (at least 64) below 256, of 128 below 1,024,
  else of 256; the tokens to a multiple of 256 (at least 2,048) below 4,096, of 512 below
  8,192, else of 1,024;
- on the PyTorch backend without chunked prefill the token budget is raised to hold the
  longest prompt plus a decode token for every sequence of the batch
  (``tensorrt_llm/bench/benchmark/utils/general.py``, ``get_settings``).

Later TensorRT-LLM (the ``trtllm-bench-pytorch-2026-07`` source: its main branch from July
2026, ``tensorrt_llm/bench/tuning/heuristics.py``) sizes three things apart: the weights as
the checkpoint's bytes (each tensor at its own width: a prequantized checkpoint's linear
layers in its format, scales included, the rest in 16 bits; pull request #13498, merged
2026-04-27, which found the element count had taken NVFP4 models for half their size); with
attention data parallelism each rank's own KV cache and batch (one GPU's memory less the
weights over the tensor-parallel ranks, the same PR); and MLA's compressed cache, one entry of
kv_lora_rank + qk_rope_head_dim a layer and token (pull request #16707, merged 2026-07-22,
which found the old rule had capped DeepSeek-V3.2 at 64 sequences where 242 fit). The
rounding is the same. The Mamba state that trtllm-bench also sets aside for hybrid models
(since July 2025, pull request #5371, which also turns the optimistic rounding off for them)
is not modelled on any path; their KV counts their attention blocks alone.

The device memory is the catalog's (trtllm-bench reads NVML's total, a little less). The
parameter count is the checkpoint's tensor elements (safetensors metadata): the model's
parameters where the engine quantizes at build time, but on the PyTorch backend
a prequantized NVFP4 checkpoint stores two 4-bit weights per byte and one FP8 scale per
block of 16 as separate elements, so its linear layers count 1/2 + 1/16 per weight (and the
0.5 bytes per element then makes the heuristic's model size about a quarter byte per
weight). Per-token KV is counted from the config's KV heads and head size as for ordinary
attention, also for MLA models (trtllm-bench does not special-case them), which makes its
request count for DeepSeek-V3/R1 far lower than what their compressed cache holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gpuarch.errors import GpuarchError, suggestion
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.units import Unit, from_si
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import TransformerShape

if TYPE_CHECKING:
    from gpuarch.estimate.inference_config import InferenceConfig

__all__ = ["LIMIT_SOURCES", "TRTLLM_BENCH_PATHS", "EngineLimits", "apply_limits",
           "round_limits", "trtllm_bench_limits"]

TRTLLM_BENCH_PATHS = {"build": 0.95, "pytorch": 0.90, "pytorch-2026-07": 0.90}
"""trtllm-bench's ways of choosing limits, with the KV fraction each sizes them at:
``build`` (TensorRT engines: ``trtllm-bench build --dataset``, the heuristic's default 0.95),
``pytorch`` (the PyTorch backend's ``throughput`` command: its
``--kv_cache_free_gpu_mem_fraction``, 0.90 unless given; TensorRT-LLM 1.x releases) and
``pytorch-2026-07`` (the same command on TensorRT-LLM's main branch from July 2026, which
sizes the checkpoint's bytes, attention-data-parallel ranks and MLA's cache apart; see the
module's notes)."""

LATEST_PATH = "pytorch-2026-07"
"""The path whose heuristic sizes checkpoints, attention-DP ranks and MLA apart."""

LIMIT_SOURCES = {f"trtllm-bench-{path}": path for path in TRTLLM_BENCH_PATHS}
"""Names for where an engine's limits come from (``--engine-limits``, a validation point's
``limits``): "trtllm-bench-pytorch" (the PyTorch backend's throughput command, TensorRT-LLM
1.x), "trtllm-bench-build" (a TensorRT engine built by ``trtllm-bench build --dataset``),
"trtllm-bench-pytorch-2026-07" (the throughput command of TensorRT-LLM's main branch from
July 2026)."""

MAX_REQUESTS = 4096
"""trtllm-bench's cap on the requests the KV cache is taken to hold (decoder buffers)."""

MAX_TOKENS = 32768
"""trtllm-bench's cap on the raw token budget (activation buffers)."""

# bytes per element of the quantizations trtllm-bench tunes for (its BYTES_PER_ELEM, for
# weights and KV cache alike); weights of other formats (INT4/INT8 weight-only, MXFP4, W4A8,
# mixed expert formats) keep the engine's defaults
_TUNED_BYTES = {QuantFormat.FP16: 2.0, QuantFormat.BF16: 2.0, QuantFormat.FP8: 1.0,
                QuantFormat.FP4: 0.5}


# (below this, round up to a multiple of this): trtllm-bench's steps for the batch (at
# least 64) and the token budget (at least 2,048)
_BATCH_STEPS = ((256, 32), (1024, 128), (math.inf, 256))
_TOKEN_STEPS = ((4096, 256), (8192, 512), (math.inf, 1024))


@dataclass(frozen=True)
class EngineLimits:
    """The most sequences decoded together and prompt tokens per pass."""

    max_batch_size: int
    max_num_tokens: int


def round_limits(requests: float, input_len: int, output_len: int, pp: int = 1
                 ) -> EngineLimits:
    """trtllm-bench's optimistic rounding of the requests its KV cache holds into a batch
    and a token limit (``finetune_setting``)."""
    raw_batch = min(requests, MAX_REQUESTS) / pp
    raw_tokens = min(raw_batch * (1 + input_len / output_len), MAX_TOKENS)
    return EngineLimits(_round_up(raw_batch, 64, _BATCH_STEPS),
                        _round_up(raw_tokens, 2048, _TOKEN_STEPS))


def _round_up(raw: float, floor: int, steps: tuple[tuple[float, int], ...]) -> int:
    """``raw`` rounded up to the step of the first band it lies below, at least ``floor``."""
    step = next(step for below, step in steps if raw < below)
    return max(floor, step * math.ceil(raw / step))


def _tuned_bytes(quant: QuantScheme, expert_quant: QuantScheme) -> float | None:
    """Bytes per weight element for a checkpoint trtllm-bench tunes, else None."""
    if (expert_quant.weights, expert_quant.activations) != (quant.weights,
                                                            quant.activations):
        return None  # experts quantized apart from the rest: a mixed-precision checkpoint
    w, a = quant.weights, quant.activations
    if w not in _TUNED_BYTES or (w.is_16bit != a.is_16bit) or (not w.is_16bit and w is not a):
        return None
    return _TUNED_BYTES[w]


def _checkpoint_elements(shape: TransformerShape, weights: QuantFormat, path: str) -> float:
    """The tensor elements trtllm-bench counts in the checkpoint (see the module's notes)."""
    pc = count_params(shape)
    if path != "pytorch" or weights is not QuantFormat.FP4:
        return float(pc.total)
    linear = pc.attention + pc.attention_experts + pc.mlp_dense + pc.mlp_experts \
        + pc.mlp_shared
    return pc.total - linear + linear * (1 / 2 + 1 / 16)


def _checkpoint_bytes(shape: TransformerShape, weights: QuantFormat) -> float:
    """A checkpoint's bytes, each tensor at its own width (the 2026-07 heuristic): the
    linear layers in ``weights`` (block scales included), the rest in 16 bits."""
    pc = count_params(shape)
    linear = pc.attention + pc.attention_experts + pc.mlp_dense + pc.mlp_experts \
        + pc.mlp_shared
    return (pc.total - linear) * QuantFormat.BF16.bytes + linear * weights.bytes


def _kv_bytes_per_token(shape: TransformerShape, tp: int, kv_bytes: float, path: str) -> float:
    """The KV bytes a token costs in trtllm-bench's estimate: keys and values of
    max(TP, KV heads) heads of the config's head size in every attention layer (a hybrid's
    attention blocks alone, as trtllm-bench counts them since July 2025), also for MLA on
    the 1.x paths; MLA's one compressed entry a layer on the 2026-07 one."""
    if path == LATEST_PATH and shape.mla is not None:
        return sum(n * view.mla.latent_width for _, n, view in shape.attention_kinds()
                   if view.mla is not None) * kv_bytes
    return 2 * shape.attention_layers * max(tp, shape.n_kv_heads) * shape.d_head * kv_bytes


def trtllm_bench_limits(shape: TransformerShape, quant: QuantScheme, gpus: int, pp: int,
                        input_len: int, output_len: int, device_bytes: float,
                        path: str = "pytorch", chunked_prefill: bool = False,
                        expert_quant: QuantScheme | None = None,
                        attention_dp: bool = False) -> EngineLimits | None:
    """The limits trtllm-bench picks for ``shape`` on ``gpus`` GPUs of ``device_bytes``
    each (``pp`` pipeline stages, the rest tensor-parallel as trtllm-bench's ``--tp``, with
    or without attention data-parallel: ``attention_dp``, which only the 2026-07 path sizes
    apart) for requests of ``input_len`` + ``output_len`` tokens; ``path`` is a key of
    TRTLLM_BENCH_PATHS. None where the quantization is one trtllm-bench does not tune (the
    engine's defaults apply)."""
    if path not in TRTLLM_BENCH_PATHS:
        raise GpuarchError(f"engine limits: unknown trtllm-bench path {path!r} (expected "
                           f"one of {', '.join(TRTLLM_BENCH_PATHS)})")
    weight_bytes = _tuned_bytes(quant, expert_quant or quant)
    if weight_bytes is None:
        return None
    tp = gpus // pp
    kv_bytes = _TUNED_BYTES.get(quant.kv_cache, 2.0)  # the same table, 2 for the rest
    # in bytes (trtllm-bench's GiB cancel out of the request count)
    per_token = _kv_bytes_per_token(shape, tp, kv_bytes, path)
    if path == LATEST_PATH:
        weights = _checkpoint_bytes(shape, quant.weights)
        memory = gpus * device_bytes
        if attention_dp:  # one rank: its GPU, the weights over the tensor-parallel ranks
            weights, memory = weights / tp, pp * device_bytes
    else:
        weights = _checkpoint_elements(shape, quant.weights, path) * weight_bytes
        memory = gpus * device_bytes
    cache = (memory - weights) * TRTLLM_BENCH_PATHS[path]
    requests = cache / (per_token * (input_len + output_len))
    if requests < 1:
        raise GpuarchError(f"engine limits: {shape.name} leaves no room for a request's KV "
                           f"cache on {gpus} GPUs of {from_si(device_bytes, Unit.GIB):.0f} GiB")
    limits = round_limits(requests, input_len, output_len, pp)
    if path != "build" and not chunked_prefill:
        return EngineLimits(limits.max_batch_size,
                            max(limits.max_num_tokens, input_len + limits.max_batch_size))
    return limits


def apply_limits(shape: TransformerShape, cfg: InferenceConfig, device_bytes: float,
                 source: str, max_batch_size: int = 0, max_num_tokens: int = 0,
                 field: str = "--engine-limits") -> InferenceConfig:
    """``cfg`` with the max_batch_size and max_num_tokens that ``source`` (a key of
    LIMIT_SOURCES) picks for it, but where they are given (non-zero) here; ``cfg`` itself
    where the quantization is one trtllm-bench does not tune. A configured prefill chunk
    counts as chunked prefill. ``field`` names the setting in an error."""
    if source not in LIMIT_SOURCES:
        raise GpuarchError(f"{field}: unknown {source!r}"
                           f"{suggestion(source, list(LIMIT_SOURCES))} (expected one of "
                           f"{', '.join(LIMIT_SOURCES)})")
    limits = trtllm_bench_limits(shape, cfg.quant, cfg.gpus, cfg.pp, cfg.input_len,
                                 cfg.output_len, device_bytes, LIMIT_SOURCES[source],
                                 chunked_prefill=cfg.chunk > 0,
                                 expert_quant=cfg.expert_quant,
                                 attention_dp=cfg.exchanges_tokens)
    if limits is None:
        return cfg
    return replace(cfg, max_batch_size=max_batch_size or limits.max_batch_size,
                   max_num_tokens=max_num_tokens or limits.max_num_tokens,
                   limits_source=source)
