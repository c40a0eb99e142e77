"""An LLM serving request: time to first token, time per output token, throughput, memory.

Model:

- **Prefill** runs the prompt's tokens through every layer (GEMMs with M = tokens, causal
  fused attention), in chunks of ``chunk`` tokens when chunked prefill is on, each chunk
  attending to the prompt before it; compute-bound for all but short prompts.
- **Decode** runs one token per sequence per step: each GPU reads its shard of the weights
  once per step (for MoE only the experts the batch's tokens touch) and the KV cache of
  every sequence at the current context length, once, plus two tensor-parallel all-reduces
  per layer, which are latency-bound at small batch, and a fixed per-step overhead. A
  Python executor loop (``executor="python"``, the default: TensorRT-LLM's PyTorch backend
  and engines like it) also spends host time per request in flight each step, hidden behind
  the GPU's step by its overlap scheduler until it is the longer of the two. The
  context grows from the prompt to prompt + output; the KV term is linear in it, so the step
  at the mean context gives the mean step time exactly.
- **Static batch**: TTFT = prefill of the whole batch; request latency = TTFT + (O - 1)
  decode steps. **Continuous batching** (steady state): every O decode steps, ``batch`` new
  prompts are prefilled between them (batched into passes), so decode steps are stretched by
  the prefill work; a new prompt's TTFT is its pass plus the M/D/1 wait for the prefill
  server at that load, plus half a decode step.
- **Memory**: weights at their format (sharded by TP x PP, experts by EP), KV cache at its
  format for prompt + output tokens, peak prefill activations and logits, and a reserve.

This module composes the estimate; the parts live beside it: the serving configuration and
its checks (``inference_config``), memory and what fits (``inference_memory``), one pass's
operators and seconds (``inference_passes``), and how requests are batched through a
replica (``inference_batching``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import BLACKWELL_TENSOR_CORES, Product, System
from gpuarch.errors import GpuarchError
from gpuarch.estimate.energy import (
    DEFAULT_FACILITY,
    GPU_POWER_MODEL,
    Facility,
    seconds_per_token_at_peak,
    serving_energy_kwh,
)
from gpuarch.estimate.inference_batching import (
    ANSWER_DRAWS,
    DRAIN_POINTS,
    InferenceCore,
    admission_starts,
    drain_shares,
    evaluate_core,
    gamma_lengths,
    offline_run,
)
from gpuarch.estimate.inference_config import (
    DECODE_KV_READS,
    EMBEDDING_BYTES,
    EXECUTORS,
    FP8_SCALINGS,
    HYBRID_PREFIX_NOTE,
    IDENTITY_SKIPPING_KERNELS,
    MAX_PREFILL_LOAD,
    MOE_COMMS,
    MOE_GEMM_KERNELS,
    MOE_KERNEL_ENGINES,
    MOE_KERNELS,
    PYTHON_EXECUTORS,
    RESERVE_FRACTION,
    SCHEDULER_POLICIES,
    SCHEDULES,
    STREAM_PASS_ROUNDS,
    WINDOW_KV_CACHES,
    Batching,
    InferenceConfig,
    check_cached_prefix,
    engine_of,
    fp8_scaling_of,
    moe_block_floor_s,
    real_slots,
    routed_slots,
    server_layout,
)
from gpuarch.estimate.inference_memory import (
    compressed_kv_bytes,
    engine_slots,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    largest_batch,
    mamba_state_per_sequence,
    max_batch_that_fits,
    max_context_that_fits,
    memory_parts,
    memory_per_gpu,
    mla_entry_bytes,
)
from gpuarch.estimate.inference_passes import (
    OP_PARTS,
    PhaseSeconds,
    ReplicaRunner,
    context_note,
    decode_attention_time,
    decode_rows,
    exchange_note,
    mixed_input_dequant,
    mla_decode_attention_time,
    moe_module_time,
    moe_rank_tokens,
    stage_lanes,
    with_expert_options,
)
from gpuarch.perf.collectives import Num
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.kv_formats import kv_cache_run
from gpuarch.perf.quant import QuantFormat
from gpuarch.perf.roofline import SPREAD_ROWS
from gpuarch.perf.sibling import sibling_notes
from gpuarch.units import Unit, from_si
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import TransformerShape

__all__ = [
    "ANSWER_DRAWS",
    "DECODE_KV_READS",
    "DRAIN_POINTS",
    "EXECUTORS",
    "FP8_SCALINGS",
    "MAX_PREFILL_LOAD",
    "MOE_COMMS",
    "MOE_GEMM_KERNELS",
    "MOE_KERNELS",
    "MOE_KERNEL_ENGINES",
    "OP_PARTS",
    "RESERVE_FRACTION",
    "SCHEDULER_POLICIES",
    "SCHEDULES",
    "STREAM_PASS_ROUNDS",
    "WINDOW_KV_CACHES",
    "Batching",
    "InferenceConfig",
    "InferenceCore",
    "InferenceEstimate",
    "PassTimes",
    "admission_starts",
    "check_cached_prefix",
    "decode_attention_time",
    "drain_shares",
    "engine_of",
    "engine_slots",
    "estimate_inference",
    "evaluate_inference",
    "fp8_scaling_of",
    "gamma_lengths",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "max_batch_that_fits",
    "max_context_that_fits",
    "memory_per_gpu",
    "mla_decode_attention_time",
    "moe_block_floor_s",
    "moe_module_time",
    "moe_rank_tokens",
    "pass_times",
    "server_layout",
    "with_expert_options",
]


@dataclass(frozen=True)
class InferenceEstimate:
    """The result of one inference estimate (SI inside; ``as_json`` uses the issue's keys)."""

    model: str
    gpu: str
    batch: int
    max_batch: int
    max_context: int | None  # longest prompt + output per sequence that fits at ``batch``
    ttft_s: float
    tpot_s: float
    request_latency_s: float
    output_tokens_per_s: float
    gpus: int
    memory: dict[str, float]  # bytes per GPU
    gpu_memory_bytes: float
    fits_in_memory: bool
    bottleneck: dict[str, str]  # phase -> limiter
    bottleneck_reason: dict[str, str]
    prefill_breakdown_s: dict[str, float]
    decode_step_breakdown_s: dict[str, float]
    assumptions: dict[str, Any]
    prefill_parts_s: dict[str, float] = field(default_factory=dict)  # OP_PARTS
    decode_step_parts_s: dict[str, float] = field(default_factory=dict)
    # energy (and with a price, cost) per million output tokens (``serving_cost``)
    cost: dict[str, Any] = field(default_factory=dict)

    @property
    def output_tokens_per_s_per_user(self) -> float:
        """How fast one request's output streams once it has begun: 1 / TPOT (under
        continuous batching the TPOT includes the prefill passes run between steps)."""
        return 1.0 / self.tpot_s

    def as_json(self) -> dict[str, Any]:
        mem = {k: from_si(v, Unit.GIB) for k, v in self.memory.items()}
        mem["total"] = from_si(sum(self.memory.values()), Unit.GIB)
        return {
            "model": self.model,
            "gpu": self.gpu,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "request_latency_s": self.request_latency_s,
            "batch": self.batch,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s / self.gpus,
            "output_tokens_per_s_per_user": self.output_tokens_per_s_per_user,
            "memory_per_gpu_gib": mem,
            "gpu_memory_gib": from_si(self.gpu_memory_bytes, Unit.GIB),
            "fits_in_memory": self.fits_in_memory,
            "max_batch": self.max_batch,
            "max_context": self.max_context,
            "bottleneck": self.bottleneck,
            "bottleneck_reason": self.bottleneck_reason,
            "prefill_breakdown_s": self.prefill_breakdown_s,
            "decode_step_breakdown_s": self.decode_step_breakdown_s,
            "prefill_parts_s": self.prefill_parts_s,
            "decode_step_parts_s": self.decode_step_parts_s,
            "cost": self.cost,
            "assumptions": self.assumptions,
        }


def _check_kv_cache(catalog: Catalog, product: Product, cfg: InferenceConfig) -> None:
    """Refuse a KV cache format no engine stores on ``product``: the caller resolves it
    first (``perf.kv_formats.kv_cache_run``, as the CLI and the advisor do), so that the
    memory sizing, the estimate and its stated reason agree."""
    run = kv_cache_run(catalog, product, cfg.quant.kv_cache)
    if run.format is not cfg.quant.kv_cache:
        raise GpuarchError(f"--kv-precision: {run.reason}; give "
                           f"{run.format.value} (perf.kv_formats.kv_cache_run resolves it)")


def _checked_runner(catalog: Catalog, shape: TransformerShape, product: Product,
                    cfg: InferenceConfig, system: System | None, efficiency: Efficiency
                    ) -> ReplicaRunner:
    """``cfg`` validated for ``shape`` (its KV cache format resolved for ``product``, a
    replica beyond a node given a system), and the runner that costs its passes."""
    cfg.validate(shape)
    _check_kv_cache(catalog, product, cfg)
    if cfg.tp * cfg.pp > cfg.gpus_per_node and system is None:
        raise GpuarchError(f"--tp/--pp: a replica of {cfg.tp * cfg.pp} GPUs spans nodes; "
                           "give --system with an inter-node network")
    return ReplicaRunner(catalog, shape, product, cfg, system, efficiency)


def evaluate_inference(catalog: Catalog, shape: TransformerShape, product: Product,
                       cfg: InferenceConfig, batches: Num, *, system: System | None = None,
                       efficiency: Efficiency = DEFAULT_EFFICIENCY) -> InferenceCore:
    """``estimate_inference``'s numbers for an array of batch sizes at once (``cfg.batch``
    is ignored); the advisor's search evaluates a whole batch axis per call."""
    runner = _checked_runner(catalog, shape, product, cfg, system, efficiency)
    return evaluate_core(runner, cfg, product, largest_batch(shape, cfg, product),
                     np.asarray(batches))


@dataclass(frozen=True)
class PassTimes:
    """What one replica's passes take, as a request-level simulation replays them: a
    prefill pass of ``n`` prompts ``prefill_s[n - 1]`` (n up to ``prompts_per_pass``) and a
    decode step of ``b`` sequences at the mean decode context ``decode_s[b - 1]`` (b up to
    ``max_batch``, what fits and the engine's cap)."""

    prefill_s: np.ndarray
    decode_s: np.ndarray
    prompts_per_pass: int
    max_batch: int
    tokens_per_step: float
    # for prompts whose lengths vary: one prefill pass's token budget (max_num_tokens) and
    # the seconds of a pass of ``prefill_tokens`` new tokens in all (a grid to interpolate
    # on, ``prefill_for_tokens``); empty when every prompt has the configured length
    token_budget: int = 0
    prefill_tokens: np.ndarray = field(default_factory=lambda: np.empty(0))
    prefill_tokens_s: np.ndarray = field(default_factory=lambda: np.empty(0))

    def prefill_for_tokens(self, tokens: float) -> float:
        """Seconds of a prefill pass of ``tokens`` new prompt tokens in all (linear between
        the grid's points, which are geometrically spaced)."""
        if not self.prefill_tokens.size:
            raise ValueError("pass_times was built without a token grid (max_prompt_tokens)")
        return float(np.interp(tokens, self.prefill_tokens, self.prefill_tokens_s))


TOKEN_GRID_POINTS = 512
"""Points of the prefill-seconds-by-tokens grid, geometrically spaced from one token to the
longest pass (``pass_times(max_prompt_tokens=...)``), about 2% apart for a pass of 10,000
tokens, besides the passes of whole prompts of the configured length (exact there);
between points a pass's time is linear, which misses the teeth of wave quantization by a
few percent."""


def pass_times(catalog: Catalog, shape: TransformerShape, product: Product,
               cfg: InferenceConfig, *, system: System | None = None,
               efficiency: Efficiency = DEFAULT_EFFICIENCY,
               max_prompt_tokens: int = 0) -> PassTimes:
    """The estimate's own pass costs for ``cfg`` (continuous batching), for every pass size
    a replica can run: the prefill pass of up to ``max_num_tokens`` // new prompt tokens
    whole prompts (chunked as configured) and the decode step of up to the batch that fits
    (``max_batch_size`` where set). With ``max_prompt_tokens`` (the longest new prompt of
    prompts whose lengths vary), also a pass's seconds by its tokens, up to the larger of
    that and the budget (``ReplicaRunner.prefill_tokens``)."""
    runner = _checked_runner(catalog, shape, product, cfg, system, efficiency)
    limit = engine_slots(shape, cfg, product)
    prompts = np.arange(1, max(1, min(cfg.prompts_per_pass, limit)) + 1, dtype=float)
    batches = np.arange(1, max(1, limit) + 1, dtype=float)
    prefill = np.broadcast_to(runner.prefill(prompts).total, prompts.shape)
    decode = np.broadcast_to(runner.decode_step(batches, cfg.mean_decode_context).total,
                             batches.shape)
    grid = np.empty(0)
    grid_s = np.empty(0)
    if max_prompt_tokens:
        top = max(max_prompt_tokens, cfg.max_num_tokens)
        # geometric points, and the whole-prompt passes themselves (exact there)
        grid = np.unique(np.concatenate([np.round(np.geomspace(1, top, TOKEN_GRID_POINTS)),
                                         prompts * cfg.new_prompt_tokens]))
        grid_s = np.array(runner.prefill_tokens(grid), dtype=float)
    return PassTimes(np.array(prefill, dtype=float), np.array(decode, dtype=float),
                     len(prompts), limit, cfg.tokens_per_step, cfg.max_num_tokens, grid,
                     grid_s)


def _cpu_offload_note(cfg: InferenceConfig, runner: ReplicaRunner) -> str:
    """What the estimate takes for weights kept in host memory (``cpu_offload_gib``)."""
    head = (f"{cfg.cpu_offload_gib:g} GiB of each GPU's weights in host memory, copied to "
            "the GPU before the modules that hold them run, in every prefill pass and decode "
            "step (vLLM's --cpu-offload-gb)")
    if not runner.host_link:
        return head + ("; the GPU's link to its CPU has no catalogued rate, so the copies are "
                       "not counted")
    return (head + f": {from_si(runner.offload_s, Unit.MS):.3g} ms a pass per pipeline stage "
            f"at {from_si(runner.host_link, Unit.GB_S):.0f} GB/s (this GPU's share of its "
            "link to the CPU), not overlapped with the pass")


_REASONS = {
    "compute": "Tensor Core math dominates (large GEMMs); a faster or lower-precision "
               "Tensor Core rate shortens it",
    "memory": "reading weights and KV cache from DRAM dominates; quantizing weights/KV, more "
              "batch per weight read, or more bandwidth shortens it",
    "communication": "tensor-parallel all-reduces (latency-bound at small batch) dominate; "
                     "fewer GPUs per replica or NVLink shortens it",
    "communication:expert_parallel": "the expert-parallel token exchange (all-to-all, or "
                                     "all-gather and reduce-scatter) dominates; a smaller EP "
                                     "group, an all-to-all dispatch or a faster fabric "
                                     "shortens it",
    "communication:pipeline_p2p": "pipeline sends between stages dominate; fewer stages or "
                                  "a faster link shortens it",
    "communication:weight_offload": "copying the weights kept in host memory to the GPU "
                                    "every pass dominates; less offloaded (more GPUs, "
                                    "lower-precision weights) or a faster host link "
                                    "shortens it",
    "overhead": "fixed per-step framework and launch time dominates; larger batches amortise "
                "it",
    "host": "the executor's host work per request in flight and expert layer (a Python "
            "loop) sets the pace; fewer requests per replica, more replicas or a C++ "
            "executor shorten it",
    "eager_launch": "decode steps run without a CUDA graph wait on the host launching "
                    "every kernel; graphs that cover the context (vLLM before V1: "
                    "--max-seq-len-to-capture) or the batch shorten them",
    "dequant": "the mixed-input kernel's dequantization of a few rows' weights dominates "
               f"(slower than the memory delivers them); {SPREAD_ROWS} or more rows a step (a "
               "larger batch) or a format the Tensor Cores take as stored shortens it",
}


def _chunked_decode_hint(catalog: Catalog, shape: TransformerShape, product: Product,
                         cfg: InferenceConfig) -> str | None:
    """What TensorRT-LLM would do with a chunked-attention model's decode where the estimate
    reads every layer once a KV head: from 0.21 on a GPU before Blackwell its XQA kernel
    refuses the chunked layers, so they run on the multi-head kernel whenever the model's
    max_seq_len (the longest input plus output) is at least the chunk (DECODE_KV_READS);
    None where that does not arise."""
    if not shape.attention_chunked or cfg.decode_kv_reads != "shared" \
            or shape.n_kv_heads >= shape.heads:
        return None
    if (catalog.chip_of(product).sm.tensor_core_generation or 0) >= BLACKWELL_TENSOR_CORES:
        return None
    longest = cfg.input_len + max(cfg.output_len, cfg.max_output_len)
    if longest < shape.sliding_window:
        return None
    return (f"TensorRT-LLM 0.21 and later decode this model's chunked layers on its "
            f"multi-head kernel on this GPU at a max_seq_len of {longest:,} (at least the "
            f"{shape.sliding_window:,}-token chunk): --decode-kv-reads "
            "chunked-per-query-head prices that")


def estimate_inference(
    catalog: Catalog,
    shape: TransformerShape,
    product: Product,
    cfg: InferenceConfig,
    *,
    system: System | None = None,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    measured: dict[str, str] | None = None,
    formats_origin: str | None = None,
    price_per_gpu_hour: float | None = None,
    facility: Facility = DEFAULT_FACILITY,
) -> InferenceEstimate:
    """Estimate serving ``shape`` on ``cfg.gpus`` x ``product`` (``formats_origin``: where
    the formats came from when not from the caller, e.g. the checkpoint's config.json;
    ``price_per_gpu_hour``: USD, for the cost per million output tokens; ``facility``: the
    node and data centre around the GPUs, for the energy per million)."""
    runner = _checked_runner(catalog, shape, product, cfg, system, efficiency)
    max_batch = largest_batch(shape, cfg, product)
    requested = cfg.batch if cfg.batch is not None else max(1, max_batch)
    if cfg.batch is None and cfg.max_batch_size:
        requested = min(requested, cfg.max_batch_size)
    phase_parts: dict[str, dict[str, float]] = {}
    core = evaluate_core(runner, cfg, product, max_batch, requested, phase_parts)
    batch = int(core.batch)
    memory = {k: float(v) for k, v in memory_parts(shape, cfg, batch, product).items()}
    fits = sum(memory.values()) <= product.memory_bytes and max_batch >= 1
    ttft, tpot, latency = float(core.ttft), float(core.tpot), float(core.latency)
    per_replica = float(core.per_replica)
    prefill, step = core.prefill, core.step

    throughput = per_replica * cfg.replicas

    phases = {"prefill": prefill, "decode": step}
    bottleneck = {k: v.limiter() for k, v in phases.items()}
    rows = decode_rows(batch, cfg.micro_batches, cfg.speculative_tokens)
    dequant = mixed_input_dequant(product, cfg.quant, rows, runner.eff, runner.peak.dequantize)
    # the share of decode steps run eagerly, for the micro-batch the step ran (evaluate_core)
    eager_share = float(runner.eager_share(batch / stage_lanes(batch, cfg.micro_batches)))
    reasons = _bottleneck_reasons(runner, phases, bottleneck, phase_parts, dequant,
                                  eager_share)
    assumptions = _serving_assumptions(
        catalog, shape, product, cfg, runner, efficiency, core=core, dequant=dequant,
        eager_share=eager_share, requested=requested, throughput=throughput,
        measured=measured, formats_origin=formats_origin)
    cost = serving_cost(product, cfg, throughput,
                        seconds_per_token_at_peak(count_params(shape).active(shape),
                                                  runner.peak.peak.flops),
                        price_per_gpu_hour, facility)
    return InferenceEstimate(
        model=shape.name, gpu=product.name, batch=batch, max_batch=max_batch,
        max_context=max_context_that_fits(shape, cfg, product, max(1, batch)),
        ttft_s=ttft, tpot_s=tpot, request_latency_s=latency,
        output_tokens_per_s=throughput, gpus=cfg.gpus, memory=memory,
        gpu_memory_bytes=product.memory_bytes, fits_in_memory=fits,
        bottleneck=bottleneck, bottleneck_reason=reasons,
        prefill_breakdown_s={k: float(v) for k, v in prefill.as_dict().items()},
        decode_step_breakdown_s={k: float(v) for k, v in step.as_dict().items()},
        prefill_parts_s={k: phase_parts["prefill"].get(k, 0.0) for k in OP_PARTS},
        decode_step_parts_s={k: phase_parts["decode"].get(k, 0.0) for k in OP_PARTS},
        cost=cost, assumptions=assumptions)


def _bottleneck_reasons(runner: ReplicaRunner, phases: dict[str, PhaseSeconds],
                        bottleneck: dict[str, str], phase_parts: dict[str, dict[str, float]],
                        dequant: dict[str, Any] | None, eager_share: float) -> dict[str, str]:
    """Each phase's bottleneck (``bottleneck``, its limiter) in words: its share of the
    phase's time and why (the exchange that takes most of a communication-bound one, whose
    host a host-bound one waits on)."""
    def share(phase: str, v: PhaseSeconds) -> str:
        part = bottleneck[phase]
        if part == "host":  # the host's time is the whole step; the GPU's part is hidden
            host_ms, gpu_ms = (from_si(float(x), Unit.MS) for x in (v.total, v.total - v.host))
            return f"the host's {host_ms:.3g} ms per step outlast the GPU's {gpu_ms:.3g} ms"
        return f"{float(v.as_dict()[part] / v.total):.0%} of the {phase} time"

    def why(phase: str) -> str:
        part = bottleneck[phase]
        if part == "communication":  # name the exchange that takes most of it
            parts = phase_parts[phase]
            kind = max(("tensor_parallel", "expert_parallel", "pipeline_p2p",
                        "weight_offload"), key=lambda k: parts.get(k, 0.0))
            return _REASONS.get(f"communication:{kind}", _REASONS[part])
        if part == "host" and phase_parts[phase].get("eager_launch", 0.0) \
                > phase_parts[phase].get("host", 0.0):
            per_us = from_si(runner.eff.eager_decode_host_s_per_layer, Unit.US)
            return (f"{_REASONS['eager_launch']} ({per_us:.3g} us a layer; "
                    f"{eager_share:.0%} of the steps eager)")
        if part == "memory" and phase == "decode" and dequant and dequant["binds_in_decode"]:
            return _REASONS["dequant"]
        if part == "host":  # whose host, at what cost (host_time_x86_speedup)
            per_us = from_si(runner.host_s_per_request_layer, Unit.US)
            host = "a Grace" if runner.host_cpu == "grace" else "an x86"
            return f"{_REASONS[part]} ({host} host: {per_us:.2g} us a request and expert layer)"
        return _REASONS[part]

    return {k: f"{share(k, v)}: {why(k)}" for k, v in phases.items()}


def _serving_assumptions(catalog: Catalog, shape: TransformerShape, product: Product,
                         cfg: InferenceConfig, runner: ReplicaRunner, efficiency: Efficiency,
                         *, core: InferenceCore, dequant: dict[str, Any] | None, eager_share: float,
                         requested: int, throughput: float, measured: dict[str, str] | None,
                         formats_origin: str | None) -> dict[str, Any]:
    """What a serving estimate assumed: peaks and formats, memory accounting, the engine's
    settings, the kernels and host costs that applied, and the batch's steady state."""
    batch = int(core.batch)
    tpot = float(core.tpot)
    index = shape.indexer_mla  # the latent attention that holds a sparse indexer, if any
    return {
        "gemm_peak_tflops": from_si(runner.peak.peak.flops, Unit.TFLOPS),
        "gemm_peak_source": f"{runner.peak.peak.key.value} ({runner.peak.peak.origin}, "
                            "catalog)",
        "weights_dequantized": runner.peak.dequantize,
        "precision_fallback": runner.peak.peak.fallback_reason,
        "formats": {"weights": cfg.quant.weights.value,
                    "activations": cfg.quant.activations.value,
                    "kv_cache": cfg.quant.kv_cache.value},
        "expert_formats": {
            "weights": cfg.expert_quant.weights.value,
            "activations": cfg.expert_quant.activations.value,
            "bytes_per_weight": cfg.expert_quant.weights.bytes,
            "gemm_peak_tflops": from_si(runner.expert_peak.peak.flops, Unit.TFLOPS),
            "weights_dequantized": runner.expert_peak.dequantize,
            "precision_fallback": runner.expert_peak.peak.fallback_reason}
        if shape.is_moe and cfg.expert_quant != cfg.quant else None,
        "formats_origin": formats_origin,
        "fp8_scaling": cfg.fp8_scaling
        if QuantFormat.FP8 in (cfg.quant.weights, cfg.expert_quant.weights) else None,
        "bytes_per_element": {"weights": cfg.quant.weights.bytes,
                              "embeddings_and_lm_head": max(cfg.quant.weights.bytes,
                                                            EMBEDDING_BYTES),
                              "kv_cache": cfg.quant.kv_cache.bytes},
        "kv_cache_fallback": cfg.kv_cache_fallback,
        "kv_bytes_per_token_per_gpu": kv_bytes_per_token(shape, cfg.quant.kv_cache.bytes,
                                                         cfg.tp, cfg.mla_cache) / cfg.pp,
        # a hybrid model's Mamba-2 convolution and recurrent state, held in the KV cache's
        # memory, per sequence whatever its length (0 without Mamba-2 blocks)
        "mamba_state_bytes_per_sequence_per_gpu": mamba_state_per_sequence(shape, cfg)
        / cfg.pp,
        "ssm_state_precision": cfg.ssm_state_precision if shape.mamba is not None else None,
        # a hybrid model's recurrent mixer: "Mamba-2" or "Gated DeltaNet"; what else keeps a
        # state a sequence (Inkling's short convolutions, ZAYA's over queries and keys);
        # None without
        "recurrent_mixer": shape.mamba.label if shape.mamba is not None
        else "short convolution" if shape.short_conv_taps
        else "query and key convolution" if shape.qk_conv_depthwise else None,
        "batching": cfg.batching.value,
        # the batch as asked: a number, or "max" (the largest that fits)
        "batch_asked": "max" if cfg.batch is None else cfg.batch,
        # how new prompts meet the decode steps (continuous batching; SCHEDULES)
        "schedule": cfg.schedule if cfg.batching is Batching.CONTINUOUS else None,
        # what the batch that fits holds each sequence at (SCHEDULER_POLICIES)
        "scheduler_policy": cfg.scheduler_policy if cfg.batching is Batching.CONTINUOUS
        else None,
        "prefill_chunk_tokens": cfg.chunk,
        "replicas": cfg.replicas,
        "parallelism": {"tp": cfg.tp, "pp": cfg.pp, "ep": cfg.ep,
                        "expert_split_gpus": max(cfg.tp, cfg.ep) if shape.is_moe else 1,
                        "attention_data_parallel": shape.is_moe and cfg.exchanges_tokens,
                        "redundant_experts": cfg.redundant_experts or None,
                        "expert_slots": shape.experts + cfg.redundant_experts
                        if shape.is_moe else None,
                        "two_batch_overlap": cfg.two_batch_overlap},
        "reserve_fraction": RESERVE_FRACTION if not cfg.kv_cache_fraction else None,
        "kv_cache_fraction": cfg.kv_cache_fraction or None,
        "max_prefill_tokens_per_pass": cfg.max_num_tokens,
        # the prompts in a new request's prefill pass: a static batch's micro-batch; under
        # continuous batching those that arrive during a decode step and the pass before
        # it (the steady cycle is made of such passes, but for an offline run of
        # num_requests, whose cycle fills whole budgets)
        "prefill_pass_prompts": round(float(core.pass_prompts), 2),
        "max_batch_size": cfg.max_batch_size or None,
        "pipeline_micro_batches": cfg.micro_batches,
        "engine_limits": cfg.limits_source or None,
        "executor": cfg.executor,
        # the executor's fixed time a decode step (TensorRT-LLM's PyTorch backend its
        # measured one, the others the fitted one)
        "decode_step_overhead_s": runner.step_overhead_s,
        # a Python executor's host time per request in flight and expert layer, on this
        # GPU's host: measured on Grace, an x86 host's shorter (host_time_x86_speedup)
        "executor_host": {
            "cpu": runner.host_cpu, "s_per_request_expert_layer": runner.host_s_per_request_layer}
        if cfg.executor in PYTHON_EXECUTORS and shape.is_moe else None,
        "cuda_graph_padding": {
            "batch_sizes": sorted(cfg.cuda_graph_batch_sizes),
            "decode_rows": int(runner.graph_rows(int(core.batch)))}
        if cfg.cuda_graph_batch_sizes else None,
        # decode steps run without a captured graph (past cuda_graph_max_context, or more
        # sequences than the largest captured batch) wait on the host's launches
        "eager_decode": {
            "graph_max_context": cfg.cuda_graph_max_context or None,
            "share_of_steps": eager_share,
            "host_s_per_layer": efficiency.eager_decode_host_s_per_layer,
            "host_s_per_step": runner.eager_launch_s}
        if cfg.cuda_graph_max_context or cfg.cuda_graph_batch_sizes else None,
        # a mixed-input kernel's dequantization rate, the floor of its GEMMs of few rows
        # (roofline.mixed_input_floor), and whether it is slower than the weights' read in
        # this decode step
        "mixed_input_dequant": dequant,
        "window_kv_cache": cfg.window_kv_cache if shape.windowed_layers else None,
        "decode_kv_reads": cfg.decode_kv_reads
        if shape.mla is None and shape.n_kv_heads < shape.heads
        and (shape.attention_chunked or cfg.decode_kv_reads != "chunked-per-query-head")
        else None,
        # a chunked model's decode read once a KV head on a GPU whose TensorRT-LLM (0.21 and
        # later) would run its chunked layers on the multi-head kernel at this length
        "chunked_decode_on_trtllm": _chunked_decode_hint(catalog, shape, product, cfg),
        # latent attention in decode: the precision its math runs in (FP8 over an FP8 cache
        # on Blackwell unless fp8_mla_decode is off)
        "mla_decode_math": ("fp8" if runner.mla_decode_device is not runner.device
                            else "16-bit") if shape.mla is not None else None,
        "fp8_mla_decode": cfg.fp8_mla_decode if shape.mla is not None else None,
        # DeepSeek Sparse Attention: the positions a query attends to, the indexer's heads
        # (run whole on every tensor-parallel GPU) and the precision of its scores, which
        # are skipped where no more positions are held than it chooses
        "sparse_attention": {
            "index_topk": index.index_topk, "index_heads": index.index_heads,
            "index_head_dim": index.index_head_dim,
            "index_key_bytes_per_position_layer": index.index_key_bytes,
            "indexer_layers": shape.indexer_layers,
            # the layers whose queries attend to the indexer's picks: every attention layer,
            # or the full ones where the window layers have latent attention of their own
            "sparse_layers": shape.indexer_kind_layers,
            "attention_layers": shape.attention_layers,
            "indexer_replicated_gpus": cfg.tp,
            "indexer_math": "fp8" if runner.indexer_device is not runner.device
            else "16-bit",
            # the latent's layout in the cache (MLA_CACHES) and its bytes a position, layer
            "latent_cache": cfg.mla_cache,
            "latent_bytes_per_position_layer": mla_entry_bytes(
                shape.attention_kind(0), cfg.quant.kv_cache.bytes, cfg.mla_cache)}
        if index is not None and index.sparse else None,
        # block-sparse attention (MiniMax-M3): the positions a sparse layer's query attends
        # to, its indexer's heads and key, and the precision its scores run in
        "block_sparse_attention": {
            "positions": shape.block_sparse.positions,
            "topk_blocks": shape.block_sparse.topk_blocks,
            "block": shape.block_sparse.block,
            "index_heads": shape.block_sparse.index_heads,
            "index_head_dim": shape.block_sparse.index_head_dim,
            "index_key_bytes_per_position_layer": shape.block_sparse.index_key_bytes(
                cfg.quant.kv_cache.bytes),
            "sparse_layers": shape.indexer_layers,
            "indexer_replicated_gpus": cfg.tp,
            "indexer_math": "16-bit"}
        if shape.block_sparse is not None else None,
        # DeepSeek-V4's compressed attention: what a query attends to in each kind of layer,
        # the cache's layout and the indexer's
        "compressed_attention": _compressed_note(shape, cfg)
        if shape.compressed is not None else None,
        # hyper-connections beside other attention (Hy4's): the residual streams and the
        # logits each block's mixing GEMM makes
        "hyper_connections": {"streams": shape.hyper_connections,
                              "independent": shape.independent_hyper_connections,
                              "logits_per_block": shape.hyper_connection_logits}
        if shape.hyper_connections and shape.compressed is None else None,
        "moe_comm": cfg.moe_comm if shape.is_moe and cfg.exchanges_tokens else None,
        "moe_exchange": exchange_note(runner) if shape.is_moe and cfg.exchanges_tokens
        and cfg.moe_comm == "alltoall" else None,
        "moe_kernels": cfg.moe_kernels if shape.is_moe else None,
        # identity experts among the router's choices (LongCat-Flash's): the slots a token
        # fills with real experts' work, all of them unless the kernels skip identity slots
        "identity_experts": {
            "slots_per_token": shape.experts_per_token,
            "real_experts_per_token_published": shape.mean_real_experts or None,
            "priced_per_token": routed_slots(shape, cfg),
            "skipped_by_kernels": cfg.moe_kernels in IDENTITY_SKIPPING_KERNELS,
            # slots the kernels run as expert 0's rows (vLLM's remapping), on its rank
            "on_expert_0_per_token": routed_slots(shape, cfg) - real_slots(shape)}
        if shape.zero_experts else None,
        "moe_gemm_kernel": cfg.moe_gemm_kernel if shape.is_moe else None,
        # the routed experts as DeepGEMM's grouped GEMMs (SGLang's wide-EP path on Hopper)
        "deepgemm_experts": True if runner.deepgemm else None,
        "moe_block_floor_s": runner.moe_floor if shape.is_moe else None,
        "moe_imbalance": cfg.moe_imbalance if shape.is_moe and cfg.ep > 1 else None,
        "tp_all_reduce": _tp_all_reduce_note(runner, cfg),
        "attention_dp_prefill": (f"waits for the busiest rank: per-rank work x"
                                 f"{runner.prefill_skew:.2f}")
        if runner.prefill_skew != 1.0 else None,
        "context_window": context_note(shape, cfg),
        "num_requests": cfg.num_requests or None,
        "max_output_len": cfg.max_output_len or None,
        "offline_run": offline_run(cfg, batch, tpot, throughput) if cfg.num_requests
        else None,
        "cached_prefix": cfg.cached_prefix or None,
        "cpu_offload": _cpu_offload_note(cfg, runner) if cfg.cpu_offload_gib else None,
        "hybrid_prefix_reuse": HYBRID_PREFIX_NOTE if shape.is_hybrid and cfg.cached_prefix
        else None,
        "context_attention": "fp8" if runner.context_device is not runner.device
        else "16-bit (--fp8-context-attention applies with FP8 or FP4 activations and an "
        "FP8 KV cache)" if cfg.fp8_context_attention else "16-bit",
        "speculative": {"draft_tokens": cfg.speculative_tokens,
                        "acceptance_length": cfg.acceptance_length,
                        "draft": ("the MTP block (an attention and an MLP or expert block) "
                                  "and the LM head per draft token" if shape.is_hybrid else
                                  "one target-shaped layer and the LM head per draft token")}
        if cfg.speculative_tokens else None,
        "efficiency": efficiency.as_dict(),
        "sibling_rates": sibling_notes(product.key, (
            ("gemm", runner.peak.peak.key), ("gemm", runner.expert_peak.peak.key),
            ("attention_forward", runner.device.attention_key),
            ("attention_forward", runner.context_device.attention_key)))
        if efficiency.sibling_rates else [],
        "efficiency_origin": "assumed defaults fitted to published measurements"
        if efficiency is DEFAULT_EFFICIENCY else "calibrated or overridden",
        "measured_parameters": measured or {},
        "mean_decode_context": cfg.mean_decode_context,
        "output_len_cv": cfg.output_len_cv,
        "mean_output_in_flight": cfg.output_in_flight,
        "requests_in_flight": requested,
        "queueing_s": float(core.queue),
    }


def _tp_all_reduce_note(runner: Any, cfg: InferenceConfig) -> str | None:
    """How the tensor-parallel all-reduces ran (None at TP 1): NCCL's algorithms (NVLink SHARP
    where the switch has it and it is faster), and inside one measured NVLink domain the
    engine's one-shot kernel where that is faster (``InferenceConfig.all_reduce``)."""
    if cfg.tp <= 1:
        return None
    nvls = bool(runner.tp_group.intra.nvls_efficiency and cfg.nvls)
    if not runner.engine_all_reduce:
        return "NVLink SHARP where faster" if nvls else "ring or tree"
    algorithms = "ring, tree or NVLink SHARP" if nvls else "ring or tree"
    if cfg.all_reduce == "nccl" or not runner.one_shot_all_reduce:
        return f"NCCL's {algorithms}, the fastest"
    return f"{MOE_KERNEL_ENGINES[cfg.all_reduce]}'s one-shot kernel, or NCCL's {algorithms} " \
        "where faster"


def serving_cost(product: Product, cfg: InferenceConfig, output_tokens_per_s: float,
                 seconds_per_token_at_peak: float, price_per_gpu_hour: float | None,
                 facility: Facility = DEFAULT_FACILITY) -> dict[str, Any]:
    """Energy and cost of a deployment's output, as the advisor prices its options: the
    GPUs' energy per million output tokens at the utilisation the prompt and output tokens
    they process imply (``energy.serving_energy_kwh``; None without a board power), and with
    ``price_per_gpu_hour`` the hourly cost and the cost per million output tokens."""
    seconds = 1e6 / output_tokens_per_s  # to produce a million output tokens
    processed = output_tokens_per_s * (1 + cfg.input_len / cfg.output_len)
    out: dict[str, Any] = {
        "kwh_per_million_output_tokens": serving_energy_kwh(
            product.tdp_w, cfg.gpus, processed, seconds_per_token_at_peak, seconds, facility)
        if product.tdp_w else None,
        "power_model": f"{GPU_POWER_MODEL} at the utilisation the processed tokens' 2 x "
                       f"active-parameter FLOPs give at the format's peak, "
                       f"{facility.describe()} (gpuarch.estimate.energy; measured serving "
                       "power beside it: gpuarch validate power)"}
    if price_per_gpu_hour is not None:
        per_hour = cfg.gpus * price_per_gpu_hour
        out.update(usd_per_gpu_hour=price_per_gpu_hour, usd_per_hour=per_hour,
                   usd_per_million_output_tokens=per_hour * from_si(seconds, Unit.HOUR))
    return out


def _compressed_note(shape: TransformerShape, cfg: InferenceConfig) -> dict[str, Any]:
    """What a DeepSeek-V4 estimate assumed of its compressed attention."""
    c = shape.compressed
    assert c is not None
    grows, window = compressed_kv_bytes(shape, cfg.quant.kv_cache.bytes)
    return {
        "window": c.window,
        "layers_by_ratio": {str(r): c.layers_of(r) for r, _ in c.kinds()},
        "index_topk": c.index_topk, "index_heads": c.index_heads,
        "index_head_dim": c.index_head_dim,
        "entry_bytes": c.entry_bytes(cfg.quant.kv_cache.bytes, shape.d_head),
        "index_key_bytes": c.index_key_bytes,
        "kv_bytes_per_position": grows, "window_bytes_per_position": window,
        "indexer_replicated_gpus": cfg.tp,
        "hyper_connections": shape.hyper_connections,
        "not_counted": "the compressors' buffers of windows not yet closed",
    }
