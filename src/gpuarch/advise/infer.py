"""Serving advice: search GPU type x tensor/pipeline parallelism x weight and KV precision x
batch for a request mix, size the fleet for a rate or a concurrency, filter by latency SLAs,
GPU count, hourly budget and power, rank by latency, cost or energy per million output
tokens, keep the Pareto front and explain the choice.

For each GPU, weight/KV format and TP x PP split, the whole batch axis is one call of
``estimate.inference.evaluate_inference``: the estimate's own formulas over a NumPy array of
batch sizes (a property test checks it against ``estimate_inference`` one batch at a time).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gpuarch.advise.candidates import candidate_gpus
from gpuarch.advise.disagg_options import DecodeUnit, PoolSet, disaggregated_option, prefill_pools
from gpuarch.advise.prices import PriceBook
from gpuarch.advise.serving_options import (
    CHECKPOINT_SCHEME,
    Candidate,
    InferenceOption,
    Point,
    PrefillPlan,
    deployment,
    in_gpu_formats,
    native,
)
from gpuarch.advise.train import MAX_TOP, Objective, pareto_mask
from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import BLACKWELL_TENSOR_CORES, Product, System, Tier
from gpuarch.errors import GpuarchError, check_choice, check_count, check_number
from gpuarch.estimate.energy import DEFAULT_FACILITY, Facility, seconds_per_token_at_peak
from gpuarch.estimate.inference import InferenceCore, evaluate_inference
from gpuarch.estimate.inference_config import (
    Batching,
    InferenceConfig,
    check_cached_prefix,
    check_engine_choices,
    check_output_len_cv,
    fp8_scaling_of,
    moe_block_floor_s,
)
from gpuarch.estimate.inference_memory import max_batch_that_fits
from gpuarch.estimate.inference_passes import decode_rows, mixed_input_dequant, with_expert_options
from gpuarch.estimate.simulate import Traffic
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.quant import QuantFormat, QuantScheme, activations_run, gemm_peak
from gpuarch.perf.roofline import SPREAD_ROWS
from gpuarch.units import Unit, from_si
from gpuarch.validation.bands import ENGINES, bands_by_architecture
from gpuarch.validation.nearest import nearest, setup_for
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import TransformerShape

__all__ = [
    "InferenceAdvice", "InferenceOption", "InferenceSearch", "PrefillPlan", "advise_inference",
]

_SCHEMES: tuple[tuple[str, QuantScheme], ...] = (
    ("bf16", QuantScheme(QuantFormat.BF16, QuantFormat.BF16, QuantFormat.BF16)),
    ("fp8", QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)),
    ("fp8-w/bf16-kv", QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.BF16)),
    ("int8-w", QuantScheme(QuantFormat.INT8, QuantFormat.BF16, QuantFormat.BF16)),
    ("int4-w", QuantScheme(QuantFormat.INT4, QuantFormat.BF16, QuantFormat.BF16)),
    ("w4a8", QuantScheme(QuantFormat.INT4, QuantFormat.FP8, QuantFormat.FP8)),
    ("fp4", QuantScheme(QuantFormat.FP4, QuantFormat.FP4, QuantFormat.FP8)),
)
"""Weight/activation/KV formats searched; FP8 and FP4 only where the Tensor Cores run them
natively (a dequantizing fallback is never worth recommending); W4A8 (INT4 weights with
group scales, FP8 activations and KV cache, AWQ-style) where FP8 is native."""

@dataclass(frozen=True)
class InferenceSearch:
    """The request mix, the load, the SLAs and the constraints."""

    input_len: int
    output_len: int
    rate: float | None = None  # requests per second to sustain
    concurrency: int | None = None  # requests in flight to hold
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    min_throughput: float | None = None  # output tokens/s over the whole deployment
    max_gpus: int = 64
    gpus: tuple[str, ...] = ()
    tiers: tuple[Tier, ...] = (Tier.DATACENTER,)
    budget_usd_per_hour: float | None = None
    max_power_kw: float | None = None
    objective: Objective = Objective.COST
    top: int = 10
    # the node and data centre around the GPUs: energy and the power cap
    facility: Facility = DEFAULT_FACILITY
    executor: str = "python"  # the engine's executor loop (InferenceConfig.executor)
    schedule: str = "separate"  # how new prompts meet decode steps (InferenceConfig.schedule)
    scheduler_policy: str = "guaranteed_no_evict"  # InferenceConfig.scheduler_policy
    window_kv_cache: str = "ring"  # sliding-window layers' KV (InferenceConfig.window_kv_cache)
    mla_cache: str = "tensor"  # a sparse-attention FP8 latent's layout (InferenceConfig's)
    decode_kv_reads: str = "shared"  # GQA decode reads (InferenceConfig.decode_kv_reads)
    moe_comm: str = "alltoall"  # expert dispatch with attention DP (InferenceConfig.moe_comm)
    moe_kernels: str = "trtllm"  # whose fused MoE kernels (InferenceConfig.moe_kernels)
    moe_gemm_kernel: str = "native"  # the experts' grouped GEMMs (InferenceConfig's)
    all_reduce: str = "trtllm"  # whose tensor-parallel all-reduce (InferenceConfig.all_reduce)
    # expert-parallel options, applied to every split with EP > 1 (InferenceConfig's
    # moe_imbalance, redundant_experts, two_batch_overlap; with_expert_options)
    moe_imbalance: float = 1.0
    redundant_experts: int = 0
    two_batch_overlap: bool = False
    fp8_context_attention: bool = False  # InferenceConfig.fp8_context_attention
    nvls: bool = True  # NVLink SHARP tensor-parallel all-reduces (InferenceConfig.nvls)
    fp8_mla_decode: bool = True  # MLA decode in FP8 on Blackwell (InferenceConfig.fp8_mla_decode)
    adp_balance: bool = False  # context passes lined up across ranks (InferenceConfig)
    cached_prefix: int = 0  # InferenceConfig.cached_prefix
    output_len_cv: float = 0.0  # InferenceConfig.output_len_cv
    # also search disaggregated deployments: a prefill pool beside each decode pool
    disaggregated: bool = False
    # with disaggregated: the prefill pools' GPUs (catalog keys; default: the decode GPU's)
    prefill_gpus: tuple[str, ...] = ()
    cuda_graph_batch_sizes: tuple[int, ...] = ()  # InferenceConfig.cuda_graph_batch_sizes
    cuda_graph_max_context: int = 0  # InferenceConfig.cuda_graph_max_context
    # a hybrid model's recurrent state format (InferenceConfig.ssm_state_precision)
    ssm_state_precision: str = InferenceConfig.ssm_state_precision
    # how FP8 weights carry their scales in every searched FP8 scheme ("tensor" or
    # "block"); None: the checkpoint's own scheme per its config, per tensor otherwise
    fp8_scaling: str | None = None
    # the formats the model's checkpoint declares (a config.json's quantization_config),
    # searched as one more scheme, with its routed experts' weights where they differ
    checkpoint_quant: QuantScheme | None = None
    checkpoint_expert_weights: QuantFormat | None = None
    checkpoint_expert_activations: QuantFormat | None = None  # where the checkpoint gives them
    checkpoint_fp8_blocks: bool = False  # its FP8 weights scaled per 128 x 128 block
    checkpoint_origin: str | None = None  # where they were read
    # caps (ms) on the 99th percentile of each request's TTFT and TPOT under a rate: the
    # ranked deployments are replayed under ``traffic`` (default ``Traffic()``) until
    # ``top`` keep them (``advise.simulated.tail_checked``)
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    traffic: Traffic | None = None
    # the serving engine the user runs (validation.bands.ENGINES' key): the error bands and
    # the nearest published runs are that engine's first; "" every engine's
    engine: str = ""

    @property
    def tail_capped(self) -> bool:
        """Whether a 99th-percentile cap is given (the ranking then replays)."""
        return self.ttft_p99_ms is not None or self.tpot_p99_ms is not None

    @property
    def ttft_cap_ms(self) -> float | None:
        """The cap on the steady state's TTFT: --ttft-ms, or --ttft-p99-ms where lower (a
        deployment whose steady state already misses a percentile cap is not replayed)."""
        return _lowest(self.ttft_ms, self.ttft_p99_ms)

    @property
    def tpot_cap_ms(self) -> float | None:
        """The cap on the steady state's TPOT, as ``ttft_cap_ms``."""
        return _lowest(self.tpot_ms, self.tpot_p99_ms)

    def validate(self) -> None:
        """Usage errors name the flag."""
        # checked here: the search skips configurations whose own validation fails
        check_engine_choices(self)
        check_number("--moe-imbalance", self.moe_imbalance, 1,
                     "the busiest rank's load over the mean, a number")
        check_count("--redundant-experts", self.redundant_experts)
        if self.prefill_gpus and not self.disaggregated:
            raise GpuarchError("--prefill-gpu: it sets the prefill pools of disaggregated "
                               "deployments; add --disaggregated")
        if any(not isinstance(b, int) or b < 1 for b in self.cuda_graph_batch_sizes):
            raise GpuarchError(f"--cuda-graph-batch-sizes: expected batch sizes >= 1, got "
                               f"{self.cuda_graph_batch_sizes}")
        check_count("--cuda-graph-max-context", self.cuda_graph_max_context, zero_unset=True)
        if self.engine:
            check_choice("--engine", self.engine, tuple(ENGINES))
        for name in ("input_len", "output_len", "max_gpus", "top"):
            if getattr(self, name) < 1:
                raise GpuarchError(f"--{name.replace('_', '-')}: expected >= 1, got "
                                   f"{getattr(self, name)}")
        if self.top > MAX_TOP:
            raise GpuarchError(f"--top: expected an integer from 1 to {MAX_TOP:,}, got "
                               f"{self.top}")
        if self.rate is not None and self.concurrency is not None:
            raise GpuarchError("--rate and --concurrency: give one, not both")
        check_cached_prefix(self.cached_prefix, self.input_len)
        check_output_len_cv(self.output_len_cv)
        if self.checkpoint_quant is not None:
            self.checkpoint_quant.validate()
        if self.tail_capped:
            flag = "--ttft-p99-ms" if self.ttft_p99_ms is not None else "--tpot-p99-ms"
            if self.rate is None:
                raise GpuarchError(f"{flag}: a percentile is checked by replaying requests "
                                   "arriving at a rate; give --rate (not --concurrency)")
            if self.disaggregated:
                raise GpuarchError(f"{flag}: the replay simulates aggregated deployments; "
                                   "not with --disaggregated")
        for name in ("rate", "concurrency", "ttft_ms", "tpot_ms", "ttft_p99_ms",
                     "tpot_p99_ms", "min_throughput", "budget_usd_per_hour", "max_power_kw"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise GpuarchError(f"--{name.replace('_', '-')}: expected > 0, got {value}")


@dataclass(frozen=True)
class InferenceAdvice:
    """The ranked deployments, the Pareto front and what was assumed."""

    model: str
    input_len: int
    output_len: int
    objective: str
    top: tuple[InferenceOption, ...]
    pareto: tuple[InferenceOption, ...]
    evaluated: int
    feasible: int
    skipped: tuple[tuple[str, str], ...]
    assumptions: dict[str, Any] = field(default_factory=dict)
    per_gpu: tuple[InferenceOption, ...] = ()  # the best deployment on each GPU, best first
    # aggregated deployments each constraint ruled out, by the first they miss: "memory"
    # (the batch does not fit), "gpus", "ttft", "tpot", "throughput", "budget", "power"
    rejected: dict[str, int] = field(default_factory=dict)
    # over the aggregated deployments whose batch fits, the lowest TTFT and TPOT (ms), to
    # say how far a missed latency cap is from being met (and, under percentile caps, the
    # lowest 99th percentiles replayed)
    best_fitting: dict[str, float] = field(default_factory=dict)
    # under percentile caps: the top deployments' replays (advise.simulated.SimulatedOption)
    simulated: tuple[Any, ...] = ()


WIDE_EP = (2, 4, 8, 16, 32, 64)
"""Expert-parallel group sizes the advisor tries for a MoE model (with data-parallel
attention): inside a node up to its GPUs, beyond it where the system has a network."""


WIDE_SLOT_EP = 8
"""With redundant expert slots the search also tries every EP that divides the slots and is
a multiple of this (whole 8-GPU nodes or boards), up to one such step past ``WIDE_EP``'s
widest (72): DeepSeek-V3's 256 + 32 slots add EP 24, 48 and 72 (SGLang's deployments ran
72 and 48)."""


def expert_parallel_sizes(shape: TransformerShape, redundant: int = 0) -> list[int]:
    """The EP sizes the serving search tries for ``shape`` with ``redundant`` expert slots:
    ``WIDE_EP``'s that divide the slots, and with redundant slots the multiples of
    ``WIDE_SLOT_EP`` that do, up to WIDE_EP's widest plus one node of 8; none for a dense
    model."""
    if not shape.is_moe:
        return []
    slots = shape.experts + redundant
    sizes = {ep for ep in WIDE_EP if slots % ep == 0}
    if redundant:
        sizes |= {ep for ep in range(WIDE_SLOT_EP, WIDE_EP[-1] + WIDE_SLOT_EP + 1, WIDE_SLOT_EP)
                  if slots % ep == 0}
    return sorted(sizes)


def _batches(limit: int, concurrency: int | None) -> list[int]:
    out = [b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if b <= limit]
    if limit not in out:
        out.append(limit)
    if concurrency is not None and concurrency <= limit and concurrency not in out:
        out.append(concurrency)
    return sorted(out)


def _replicas(search: InferenceSearch, sequences: int, per_replica_tps: float) -> int:
    """Serving units needed: for the rate, or to hold the concurrency (``sequences`` in
    flight per unit), else one."""
    if search.rate is not None:
        return max(1, math.ceil(search.rate * search.output_len / per_replica_tps - 1e-9))
    if search.concurrency is not None:
        return max(1, math.ceil(search.concurrency / sequences))
    return 1


def advise_inference(
    catalog: Catalog,
    shape: TransformerShape,
    search: InferenceSearch,
    prices: PriceBook,
    *,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    progress: Callable[[int, int, str], None] | None = None,
) -> InferenceAdvice:
    """Search, filter, rank and explain."""
    search.validate()
    candidates = candidate_gpus(catalog, search.gpus, search.tiers)
    if not candidates:
        raise GpuarchError("--gpu: no GPU to search (check the names or --tier)")
    tally = _ServingTally()
    active = count_params(shape).active(shape)
    schemes = _SCHEMES + (((CHECKPOINT_SCHEME, search.checkpoint_quant),)
                          if search.checkpoint_quant is not None else ())
    # disaggregated on other GPU types: the prefill GPUs (none: each decode GPU's own)
    prefill_candidates = candidate_gpus(catalog, search.prefill_gpus, search.tiers) \
        if search.prefill_gpus else []
    for n, (product, system) in enumerate(candidates, 1):
        if progress:
            progress(n, len(candidates), product.name)
        price = prices.price(product.key)
        if price is None and search.objective is Objective.COST:
            tally.skipped.append((product.key, "no price in the price book (give --price)"))
            continue
        gpn = system.gpus_per_node if system else 8
        groups = _serving_units(shape, search, system)
        peak_scheme: dict[str, float] = {}
        # disaggregated: the prefill pools per format and prefill GPU, with the hand-offs
        # and sizings met
        pools: dict[tuple[str, str], PoolSet] = {}
        for searched, as_searched in schemes:
            label, scheme = in_gpu_formats(catalog, product, searched, as_searched)
            if label != CHECKPOINT_SCHEME and not native(product, scheme):
                continue
            experts = search.checkpoint_expert_weights \
                if label == CHECKPOINT_SCHEME and shape.is_moe else None
            expert_acts = activations_run(product, search.checkpoint_expert_activations) \
                if experts is not None and search.checkpoint_expert_activations else None
            for tp, pp, ep in groups:
                cfg = _unit_config(search, scheme, experts, label, (tp, pp, ep), gpn,
                                   expert_acts)
                try:
                    cfg.validate(shape)
                except GpuarchError:
                    continue  # an invalid split for this model
                limit = max_batch_that_fits(shape, cfg, product)
                if limit < 1:
                    continue  # the weights alone do not fit
                batches = np.array(_batches(limit, search.concurrency))
                try:
                    core = evaluate_inference(catalog, shape, product, cfg, batches,
                                              system=system, efficiency=efficiency)
                except GpuarchError as exc:  # e.g. no GPU-to-GPU bandwidth in the catalog
                    why = f"not evaluated ({exc})"
                    if (product.key, why) not in tally.skipped:
                        tally.skipped.append((product.key, why))
                    continue
                tally.evaluated += len(batches)
                if label not in peak_scheme:
                    peak_scheme[label] = gemm_peak(product, scheme).peak.flops
                where = Candidate(product, system, price, label, scheme, experts,
                                   seconds_per_token_at_peak(active, peak_scheme[label]),
                                   expert_acts)
                if search.disaggregated:
                    for prefill_product, prefill_system in prefill_candidates or [
                            (product, system)]:
                        key = (label, prefill_product.key)
                        if key not in pools:
                            pools[key] = prefill_pools(
                                catalog, shape, search, cfg, where, prefill_product,
                                prefill_system, prices, efficiency)
                _add_batches(catalog, shape, search, efficiency, tally, where, cfg,
                             (tp, pp, ep), batches, core,
                             [pools[k] for k in pools if k[0] == label])
    return _ranked_inference(catalog, shape, search, prices, efficiency, tally)


@dataclass
class _ServingTally:
    """What a serving search has met so far, over every GPU."""

    rows: list[InferenceOption] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    evaluated: int = 0
    missed: list[str] = field(default_factory=list)  # each deployment's first missed cap
    # over the batches that fit, the lowest TTFT and TPOT, seconds
    lowest_s: dict[str, float] = field(default_factory=lambda: {
        "ttft_ms": math.inf, "tpot_ms": math.inf})


def _serving_units(shape: TransformerShape, search: InferenceSearch, system: System | None
                   ) -> list[tuple[int, int, int]]:
    """The (TP, PP, EP) serving units searched on a GPU of ``system``: tensor parallelism
    inside a node, pipeline stages only after tensor parallelism fills it (common practice)
    and where a network joins nodes; for a MoE model, expert parallelism with data-parallel
    attention, wide groups too (an NVL72 rack's NVLink domain, or across nodes over the
    network), their exchange at the one-shot kernels' measured cost
    (perf.collectives.dispatch_time)."""
    gpn = system.gpus_per_node if system else 8
    widest = min(8, gpn)
    networked = system is not None and bool(system.network_bandwidth_per_gpu_bytes_s)
    groups = [(tp, pp, 1) for tp in (1, 2, 4, 8) for pp in (1, 2, 4)
              if tp <= gpn and tp * pp <= search.max_gpus
              and shape.splits_heads(tp) and shape.layers % pp == 0
              and (pp == 1 or (tp == widest and networked and not shape.one_stage))]
    groups += [(1, 1, ep) for ep in expert_parallel_sizes(shape, search.redundant_experts)
               if (ep <= gpn or networked) and ep <= search.max_gpus]
    return groups


def _unit_config(search: InferenceSearch, scheme: QuantScheme, experts: QuantFormat | None,
                 label: str, unit: tuple[int, int, int], gpn: int,
                 expert_acts: QuantFormat | None = None) -> InferenceConfig:
    """One serving unit's configuration under continuous batching, the search's engine
    settings and expert options (its batch left to the search)."""
    tp, pp, ep = unit
    cfg = InferenceConfig(
        input_len=search.input_len, output_len=search.output_len, batch=None,
        gpus=max(tp * pp, ep), tp=tp, pp=pp, ep=ep, quant=scheme, expert_weights=experts,
        expert_activations=expert_acts,
        batching=Batching.CONTINUOUS, gpus_per_node=gpn,
        executor=search.executor, schedule=search.schedule,
        scheduler_policy=search.scheduler_policy,
        window_kv_cache=search.window_kv_cache, mla_cache=search.mla_cache,
        decode_kv_reads=search.decode_kv_reads,
        moe_comm=search.moe_comm, moe_kernels=search.moe_kernels,
        moe_gemm_kernel=search.moe_gemm_kernel, all_reduce=search.all_reduce,
        fp8_context_attention=search.fp8_context_attention,
        fp8_scaling=_fp8_scaling(search, label),
        nvls=search.nvls, adp_balance=search.adp_balance,
        fp8_mla_decode=search.fp8_mla_decode,
        cached_prefix=search.cached_prefix,
        output_len_cv=search.output_len_cv,
        cuda_graph_batch_sizes=search.cuda_graph_batch_sizes,
        cuda_graph_max_context=search.cuda_graph_max_context,
        ssm_state_precision=search.ssm_state_precision)
    return with_expert_options(cfg, search.moe_imbalance, search.redundant_experts,
                               search.two_batch_overlap)


def _add_batches(catalog: Catalog, shape: TransformerShape, search: InferenceSearch,
                 efficiency: Efficiency, tally: _ServingTally, where: Candidate,
                 cfg: InferenceConfig, unit: tuple[int, int, int], batches: np.ndarray,
                 core: InferenceCore, pools: list[PoolSet]) -> None:
    """Each batch of a costed serving unit (``core``: ``evaluate_inference`` over
    ``batches``) as an aggregated deployment, and with ``search.disaggregated`` beside each
    of its format's prefill ``pools``, into ``tally``."""
    limiters = core.decode_limiter()
    width = cfg.replicas  # attention replicas in the unit (1 unless EP > TP)
    for i, batch in enumerate(batches):
        point = Point(
            fits=bool(core.memory_total[i] <= where.product.memory_bytes),
            ttft_s=float(core.ttft[i]), tpot_s=float(core.tpot[i]),
            latency_s=float(core.latency[i]),
            tokens_per_s=float(core.per_replica[i]) * width,
            memory_bytes=float(core.memory_total[i]),
            decode_limiter=str(limiters[i]))
        if point.fits:
            tally.lowest_s["ttft_ms"] = min(tally.lowest_s["ttft_ms"], point.ttft_s)
            tally.lowest_s["tpot_ms"] = min(tally.lowest_s["tpot_ms"], point.tpot_s)
        option = _option(where, search, unit, int(batch), point, tally.missed)
        if option is not None:
            tally.rows.append(option)
        if search.disaggregated and point.fits and search.output_len > 1:
            decode = DecodeUnit(unit, int(batch), width, float(core.step.total[i]), point)
            for pool in pools:
                for n_curve in range(len(pool.curves)):
                    option = disaggregated_option(catalog, shape, where, search, cfg,
                                                  decode, pool, n_curve, efficiency)
                    tally.evaluated += 1
                    if option is not None:
                        tally.rows.append(option)


def _search_assumptions(shape: TransformerShape, search: InferenceSearch, prices: PriceBook,
                        efficiency: Efficiency) -> dict[str, Any]:
    """What every deployment of a serving search assumed."""
    return {"prices": prices.describe(),
            "node_overhead": search.facility.node_overhead, "pue": search.facility.pue,
            "batching": "continuous (in-flight), steady state",
            "executor": search.executor, "schedule": search.schedule,
            "scheduler_policy": search.scheduler_policy,
            "window_kv_cache": search.window_kv_cache,
            "mla_cache": search.mla_cache,
            "decode_kv_reads": search.decode_kv_reads,
            "moe_comm": search.moe_comm,
            "moe_kernels": search.moe_kernels if shape.is_moe else None,
            "moe_gemm_kernel": search.moe_gemm_kernel if shape.is_moe else None,
            # the fixed time those kernels take per expert layer and pass, by
            # architecture (InferenceConfig.moe_kernels)
            "moe_block_floor_s": {
                "before_blackwell": moe_block_floor_s(
                    BLACKWELL_TENSOR_CORES - 1, search.moe_kernels, efficiency),
                "blackwell": moe_block_floor_s(
                    BLACKWELL_TENSOR_CORES, search.moe_kernels, efficiency)}
            if shape.is_moe else None,
            # the expert-parallel options every split with EP > 1 took
            "moe_imbalance": search.moe_imbalance if shape.is_moe else None,
            "redundant_experts": search.redundant_experts or None,
            "two_batch_overlap": search.two_batch_overlap or None,
            "nvls": search.nvls,
            "fp8_mla_decode": search.fp8_mla_decode if shape.mla is not None else None,
            "adp_balance": search.adp_balance,
            "fleet": ("replicas = ceil(rate x output tokens / replica throughput)"
                      if search.rate else "replicas = ceil(concurrency / batch)"
                      if search.concurrency else "one replica"),
            "model": "estimate.inference.evaluate_inference over arrays of batch "
                     "sizes",
            "checkpoint_formats": search.checkpoint_origin,
            "disaggregated": (
                "also searched: a prefill pool in the same formats (TP or EP "
                "replicas, on "
                + (", ".join(search.prefill_gpus) if search.prefill_gpus
                   else "the decode GPU's type")
                + ") beside each decode pool, sized for the load within the TTFT "
                "cap; estimate.disagg's model, checked on two published disaggregated "
                "runs (GPT-OSS-120B and DeepSeek-R1 on GB200), where decode pools with "
                "attention data parallelism ran up to twice the modelled time a token"
                if search.disaggregated else None),
            "cached_prefix": search.cached_prefix or None,
            "output_len_cv": search.output_len_cv or None}


def _ranked_inference(catalog: Catalog, shape: TransformerShape, search: InferenceSearch,
                      prices: PriceBook, efficiency: Efficiency, tally: _ServingTally
                      ) -> InferenceAdvice:
    """The search's deployments ranked by its objective (replayed against percentile caps
    where given), the Pareto front, the best on each GPU, each explained."""
    rows, skipped, evaluated = tally.rows, tally.skipped, tally.evaluated
    assumptions = _search_assumptions(shape, search, prices, efficiency)
    rejected = {name: tally.missed.count(name) for name in dict.fromkeys(tally.missed)}
    best_fitting = {name: from_si(value, Unit.MS) for name, value in tally.lowest_s.items()
                    if math.isfinite(value)}
    if not rows:
        if search.tail_capped:
            from gpuarch.advise.simulated import tail_assumptions

            assumptions["tail"] = tail_assumptions(search)
        return InferenceAdvice(shape.name, search.input_len, search.output_len,
                               search.objective.value, (), (), evaluated, 0, tuple(skipped),
                               assumptions, rejected=rejected, best_fitting=best_fitting)
    feasible = len(rows)
    if search.rate is not None or search.concurrency is not None:
        rows = _smallest_batches(rows)
    metric = {"time": [r.request_latency_s for r in rows],
              "cost": [_inf(r.usd_per_million_tokens) for r in rows],
              "energy": [_inf(r.kwh_per_million_tokens) for r in rows]}
    # ties (same GPUs for the same load cost the same) go to the lower latency
    order = np.lexsort((np.array(metric["time"]), np.array(metric[search.objective.value])))
    replays: tuple[Any, ...] = ()
    if search.tail_capped:
        # advise.simulated imports this module
        from gpuarch.advise.simulated import tail_checked

        tail = tail_checked(catalog, shape, search, rows, [int(i) for i in order],
                            efficiency=efficiency)
        rejected.update(tail.rejected)
        best_fitting.update(tail.lowest_p99_ms)
        assumptions["tail"] = tail.describe(search)
        if not tail.kept:
            return InferenceAdvice(shape.name, search.input_len, search.output_len,
                                   search.objective.value, (), (), evaluated, feasible,
                                   tuple(skipped), assumptions, rejected=rejected,
                                   best_fitting=best_fitting)
        rows = [rows[i] for i in tail.kept]
        metric = {name: [values[i] for i in tail.kept] for name, values in metric.items()}
        order = np.arange(len(rows))
        replays = tail.replays
    front = set(np.nonzero(pareto_mask(np.array(
        [metric["time"], metric["cost"], metric["energy"]]).T))[0].tolist())
    rows = [replace(r, pareto=i in front) for i, r in enumerate(rows)]
    top = [rows[int(i)] for i in order[: search.top]]
    rivals: dict[str, InferenceOption] = {}
    for i in order:
        rivals.setdefault(rows[int(i)].gpu, rows[int(i)])
    first = top[0]
    hybrid = shape.is_hybrid
    # what a host-bound decode step waits on: the executor's work per request and expert
    # layer (MoE), or launching every kernel of a step run without a CUDA graph
    host = frozenset(("executor",) * shape.is_moe + ("eager",) * bool(
        search.cuda_graph_max_context or search.cuda_graph_batch_sizes))
    top = [replace(o, reason=_reason(catalog, o, first, rivals, search.objective, hybrid,
                                     host, efficiency)) for o in top]
    per_gpu = tuple(replace(o, reason=_reason(catalog, o, first, rivals, search.objective,
                                              hybrid, host, efficiency))
                    for o in rivals.values())
    assumptions["error_bands"] = bands_by_architecture(
        "serving", shape, (catalog.product(g) for g in rivals), engine=search.engine)
    best = first  # one serving unit of the best deployment
    assumptions["nearest_published"] = [f.as_json(d) for d, f in nearest(setup_for(
        "serving", shape, catalog.product(best.gpu), best.gpus // best.replicas,
        best.expert_weights or best.weights, tp=best.tp, pp=best.pp, ep=best.ep,
        input_len=search.input_len, output_len=search.output_len, engine=search.engine))]
    pareto = [replace(o, reason=_reason(catalog, o, first, rivals, search.objective, hybrid,
                                        host, efficiency))
              for o in sorted((rows[i] for i in front), key=lambda r: r.request_latency_s)]
    return InferenceAdvice(shape.name, search.input_len, search.output_len,
                           search.objective.value, tuple(top), tuple(pareto), evaluated,
                           feasible, tuple(skipped), assumptions, per_gpu, rejected,
                           best_fitting, replays)


def _fp8_scaling(search: InferenceSearch, label: str) -> str:
    """How a searched scheme's FP8 weights carry their scales: as --fp8-scaling says where
    given, else per block for the checkpoint as shipped when it declares weight blocks,
    else per tensor."""
    if search.fp8_scaling is not None:
        return search.fp8_scaling
    return fp8_scaling_of(label == CHECKPOINT_SCHEME and search.checkpoint_fp8_blocks)


def option_config(search: InferenceSearch, o: InferenceOption) -> InferenceConfig:
    """The serving configuration of an aggregated option (all its replicas): what its
    estimate ran, what a launch command spells out."""
    if o.prefill is not None:
        raise GpuarchError("a disaggregated option has two pools, not one configuration")
    quant = QuantScheme(QuantFormat(o.weights), QuantFormat(o.activations),
                        QuantFormat(o.kv_cache))
    return with_expert_options(InferenceConfig(
        input_len=search.input_len, output_len=search.output_len, batch=o.batch,
        gpus=o.gpus, tp=o.tp, pp=o.pp, ep=o.ep, quant=quant,
        expert_weights=QuantFormat(o.expert_weights) if o.expert_weights else None,
        expert_activations=QuantFormat(o.expert_activations) if o.expert_activations
        else None,
        batching=Batching.CONTINUOUS, executor=search.executor, schedule=search.schedule,
        scheduler_policy=search.scheduler_policy,
        window_kv_cache=search.window_kv_cache, mla_cache=search.mla_cache,
        decode_kv_reads=search.decode_kv_reads,
        moe_comm=search.moe_comm,
        moe_kernels=search.moe_kernels, moe_gemm_kernel=search.moe_gemm_kernel,
        all_reduce=search.all_reduce,
        fp8_context_attention=search.fp8_context_attention,
        fp8_scaling=_fp8_scaling(search, o.scheme),
        nvls=search.nvls, adp_balance=search.adp_balance, cached_prefix=search.cached_prefix,
        fp8_mla_decode=search.fp8_mla_decode,
        output_len_cv=search.output_len_cv,
        cuda_graph_batch_sizes=search.cuda_graph_batch_sizes,
        cuda_graph_max_context=search.cuda_graph_max_context,
        ssm_state_precision=search.ssm_state_precision), search.moe_imbalance,
        search.redundant_experts, search.two_batch_overlap)


def _lowest(*caps: float | None) -> float | None:
    given = [c for c in caps if c is not None]
    return min(given) if given else None


def _smallest_batches(rows: list[InferenceOption]) -> list[InferenceOption]:
    """Under a given load a larger batch setting that needs no fewer GPUs only adds
    latency: keep, per GPU, split, formats and fleet size, the smallest batch."""
    keep: dict[tuple[Any, ...], int] = {}
    for i, r in enumerate(rows):
        pool = (r.prefill.replicas, r.prefill.tp, r.prefill.ep) if r.prefill else None
        key = (r.gpu, r.tp, r.pp, r.ep, r.scheme, r.replicas, pool)
        if key not in keep or r.batch < rows[keep[key]].batch:
            keep[key] = i
    return [rows[i] for i in sorted(keep.values())]


def _inf(x: float | None) -> float:
    return math.inf if x is None else x


def _option(where: Candidate, search: InferenceSearch, split: tuple[int, int, int],
            batch: int, est: Point, why: list[str] | None = None) -> InferenceOption | None:
    """The aggregated deployment for one estimate (``split`` = TP, PP, EP of a unit), or
    None when it misses a constraint (named in ``why`` when given: "memory" for a batch
    that does not fit, else as ``deployment`` names them)."""
    if not est.fits or est.tokens_per_s <= 0:
        if why is not None:
            why.append("memory")
        return None
    tp, pp, ep = split
    unit = max(tp * pp, ep)
    replicas = _replicas(search, batch * unit // (tp * pp), est.tokens_per_s)
    # tokens the deployment delivers: the offered load when a rate is given (the replicas
    # have capacity to spare), Little's law for a concurrency, else one saturated replica
    tps = replicas * est.tokens_per_s
    if search.rate is not None:
        tps = min(tps, search.rate * search.output_len)
    elif search.concurrency is not None:
        tps = min(tps, search.concurrency * search.output_len / est.latency_s)
    return deployment(where, search, split, batch, est, replicas * unit, replicas, tps,
                      why=why)


def _tb_s(product: Product) -> float:
    return from_si(product.memory_bandwidth_bytes_s or 0, Unit.TB_S)


def _metric(o: InferenceOption, objective: Objective) -> float | None:
    return {"time": o.request_latency_s, "cost": o.usd_per_million_tokens,
            "energy": o.kwh_per_million_tokens}[objective.value]


def _reason(catalog: Catalog, o: InferenceOption, best: InferenceOption,
            rivals: dict[str, InferenceOption], objective: Objective,
            hybrid: bool = False, host: frozenset[str] = frozenset(("executor",)),
            efficiency: Efficiency = DEFAULT_EFFICIENCY) -> str:
    """One line grounded in the hardware: what limits decode, the resource that sets it on
    this GPU, and for the best option how the best deployment on another GPU compares
    (``host``: what a host-bound step can wait on, of "executor" and "eager")."""
    product = catalog.product(o.gpu)
    limit = o.bottleneck.get("decode", "memory")
    bw = _tb_s(product)
    quant = QuantScheme(QuantFormat(o.weights), QuantFormat(o.activations),
                        QuantFormat(o.kv_cache))
    dequant = mixed_input_dequant(product, quant, decode_rows(o.batch, o.pp), efficiency)
    pool = ""
    if o.prefill is not None:
        p = o.prefill
        pool = (f"disaggregated: {p.gpus} {p.gpu_name + ' ' if p.gpu_name else ''}prefill "
                f"GPUs ({p.label}) {p.busy:.0%} busy, "
                f"{p.prompts_per_pass} prompt{'s' if p.prompts_per_pass > 1 else ''} a "
                f"pass, KV cache{' and recurrent state' if hybrid else ''} handed over "
                f"{p.kv_link} in {p.kv_transfer_ms:.2g} ms; ")
    if limit == "memory" and dequant and dequant["binds_in_decode"]:
        text = (f"decode waits on dequantizing {o.weights} weights at batch {o.batch}: "
                f"the mixed-input kernel converts "
                f"{from_si(dequant['weights_per_s'], Unit.TERA_PER_S):.2g}"
                f"{Unit.TERA_PER_S.label} weights/s, slower "
                f"than {bw:.2f} TB/s delivers them below {SPREAD_ROWS} rows")
    elif limit == "memory":
        experts = f" ({o.expert_weights} experts)" if o.expert_weights else ""
        text = (f"decode is bandwidth-bound: {o.weights} weights{experts} and a {o.kv_cache} "
                f"KV cache streamed at {bw:.2f} TB/s, batch {o.batch} per read")
    elif limit == "compute":
        text = (f"decode is compute-bound at batch {o.batch}: the {o.scheme} Tensor Core rate "
                f"of {product.name} sets the pace")
    elif limit == "host" and host == {"eager"}:
        text = (f"decode is host-bound at batch {o.batch}: steps run without a CUDA graph "
                f"wait on the host launching every kernel; graphs that cover the context "
                f"or the batch run faster")
    elif limit == "host" and host == {"executor", "eager"}:
        text = (f"decode is host-bound at batch {o.batch}: the host's work (the executor's "
                f"per request and expert layer, and launching every kernel of a step run "
                f"without a CUDA graph) outlasts the GPU's step")
    elif limit == "host":
        text = (f"decode is host-bound at batch {o.batch}: the executor's per-request work "
                f"(per expert layer) outlasts the GPU's step; more replicas "
                f"with fewer requests each, or a C++ executor, run faster")
    elif limit == "overhead":
        text = (f"decode is step-overhead-bound at batch {o.batch}: the fixed cost of each "
                f"decode step (kernel launches, scheduling) outweighs the math and memory "
                f"time; lowest latency, most GPUs per token")
    else:
        text = (f"decode is communication-bound at TP{o.tp} x PP{o.pp}"
                + (f" x EP{o.ep}" if o.ep > 1 else "")
                + ": the per-layer collectives over the GPU links outweigh the math")
    text = pool + text
    if o == best:
        others = [r for k, r in rivals.items() if k != o.gpu]
        mine, theirs = _metric(o, objective), _metric(others[0], objective) if others else None
        if others and mine and theirs:
            rival = others[0]
            rp = catalog.product(rival.gpu)
            what = {"time": "latency", "cost": "cost per token",
                    "energy": "energy per token"}[objective.value]
            text += (f"; the best {rp.name} deployment ({rival.gpus} GPUs, "
                     f"{rival.formats}, "
                     f"{_tb_s(rp):.2f} TB/s vs {bw:.2f}) has "
                     f"{theirs / mine:.2f}x the {what}")
    elif o.gpu != best.gpu:
        bp = catalog.product(best.gpu)
        text += (f"; #1's {bp.name} streams at "
                 f"{_tb_s(bp):.2f} TB/s")
    return text
