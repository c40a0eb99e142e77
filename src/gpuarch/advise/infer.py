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
from gpuarch.advise.prefill_pools import (
    PrefillCurve,
    PrefillSizing,
    prefill_curves,
    size_prefill,
)
from gpuarch.advise.prices import PriceBook
from gpuarch.advise.train import Objective, pareto_mask
from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System, Tier
from gpuarch.errors import GpuarchError, check_choice
from gpuarch.estimate.disagg import PrefillPool, kv_transfer
from gpuarch.estimate.energy import NODE_OVERHEAD, PUE, energy_kwh, facility_power_w
from gpuarch.estimate.inference import (
    EXECUTORS,
    MOE_COMMS,
    WINDOW_KV_CACHES,
    Batching,
    InferenceConfig,
    check_cached_prefix,
    evaluate_inference,
    max_batch_that_fits,
)
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.quant import QuantFormat, QuantScheme, gemm_peak
from gpuarch.units import Unit, from_si, to_si
from gpuarch.validation.bands import bands_by_architecture
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

CHECKPOINT_SCHEME = "checkpoint"
"""The label of the formats a ``config.json``'s checkpoint declares (``InferenceSearch.
checkpoint_quant``), searched besides the others on every GPU: the checkpoint as shipped,
dequantized where the GPU lacks its format."""


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
    executor: str = "python"  # the engine's executor loop (InferenceConfig.executor)
    window_kv_cache: str = "ring"  # sliding-window layers' KV (InferenceConfig.window_kv_cache)
    moe_comm: str = "alltoall"  # expert dispatch with attention DP (InferenceConfig.moe_comm)
    fp8_context_attention: bool = False  # InferenceConfig.fp8_context_attention
    cached_prefix: int = 0  # InferenceConfig.cached_prefix
    # also search disaggregated deployments: a prefill pool beside each decode pool
    disaggregated: bool = False
    # with disaggregated: the prefill pools' GPUs (catalog keys; default: the decode GPU's)
    prefill_gpus: tuple[str, ...] = ()
    cuda_graph_batch_sizes: tuple[int, ...] = ()  # InferenceConfig.cuda_graph_batch_sizes
    # the formats the model's checkpoint declares (a config.json's quantization_config),
    # searched as one more scheme, with its routed experts' weights where they differ
    checkpoint_quant: QuantScheme | None = None
    checkpoint_expert_weights: QuantFormat | None = None
    checkpoint_origin: str | None = None  # where they were read

    def validate(self) -> None:
        """Usage errors name the flag."""
        # checked here: the search skips configurations whose own validation fails
        check_choice("--executor", self.executor, EXECUTORS)
        check_choice("--window-kv-cache", self.window_kv_cache, WINDOW_KV_CACHES)
        check_choice("--moe-comm", self.moe_comm, MOE_COMMS)
        if self.prefill_gpus and not self.disaggregated:
            raise GpuarchError("--prefill-gpu: it sets the prefill pools of disaggregated "
                               "deployments; add --disaggregated")
        if any(not isinstance(b, int) or b < 1 for b in self.cuda_graph_batch_sizes):
            raise GpuarchError(f"--cuda-graph-batch-sizes: expected batch sizes >= 1, got "
                               f"{self.cuda_graph_batch_sizes}")
        for name in ("input_len", "output_len", "max_gpus", "top"):
            if getattr(self, name) < 1:
                raise GpuarchError(f"--{name.replace('_', '-')}: expected >= 1, got "
                                   f"{getattr(self, name)}")
        if self.rate is not None and self.concurrency is not None:
            raise GpuarchError("--rate and --concurrency: give one, not both")
        check_cached_prefix(self.cached_prefix, self.input_len)
        if self.checkpoint_quant is not None:
            self.checkpoint_quant.validate()
        for name in ("rate", "concurrency", "ttft_ms", "tpot_ms", "min_throughput",
                     "budget_usd_per_hour", "max_power_kw"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise GpuarchError(f"--{name.replace('_', '-')}: expected > 0, got {value}")


@dataclass(frozen=True)
class PrefillPlan:
    """The prefill pool of a disaggregated deployment (``estimate.disagg``): ``replicas``
    of TP x EP GPUs prefill every prompt and hand its KV cache to the decode pool."""

    gpus: int
    replicas: int
    tp: int
    ep: int
    busy: float  # utilization of a prefill replica at the deployment's load
    prompts_per_pass: int
    kv_transfer_ms: float
    kv_link: str
    gpu: str = ""  # the prefill GPU's key where it differs from the decode GPU's
    gpu_name: str = ""
    usd_per_gpu_hour: float | None = None  # where it differs

    @property
    def label(self) -> str:
        """'2x TP4', '1x EP8', '2x TP4 h100-sxm5-80gb' on another GPU type."""
        split = f"EP{self.ep}" if self.ep > 1 else f"TP{self.tp}"
        return f"{self.replicas}x {split}" + (f" {self.gpu}" if self.gpu else "")


@dataclass(frozen=True)
class InferenceOption:
    """One deployment that meets the SLAs: replicas of a serving unit at one batch. A unit
    is a TP x PP group, or for an MoE model EP GPUs with data-parallel attention (TP 1),
    each GPU serving ``batch`` sequences of its own against experts split EP ways."""

    gpu: str
    gpu_name: str
    gpus: int
    replicas: int
    tp: int
    pp: int
    batch: int
    scheme: str
    weights: str
    kv_cache: str
    ttft_ms: float
    tpot_ms: float
    request_latency_s: float
    output_tokens_per_s: float  # the whole deployment
    memory_per_gpu_gib: float
    usd_per_hour: float | None
    usd_per_million_tokens: float | None
    kwh_per_million_tokens: float | None
    power_kw: float | None
    price_usd_per_gpu_hour: float | None
    bottleneck: dict[str, str] = field(default_factory=dict)
    pareto: bool = False
    reason: str | None = None
    ep: int = 1  # expert-parallel GPUs of a unit (attention data-parallel when > TP)
    activations: str = "bf16"
    expert_weights: str | None = None  # the routed experts', where they differ
    # disaggregated: the prefill pool (the other fields describe the decode pool, except
    # ``gpus``, ``usd_per_hour`` and ``power_kw``, which count both); None: aggregated
    prefill: PrefillPlan | None = None
    mode: str = "aggregated"  # or "disaggregated"

    @property
    def formats(self) -> str:
        """Weights (with the activations when they are neither 16-bit nor the weights' own
        format, as in W4A8), the routed experts' weights where they differ, and KV cache:
        'Wfp8/KV fp8', 'Wint4 Afp8/KV fp8', 'Wbf16 experts Wmxfp4/KV bf16'."""
        acts = "" if self.activations in ("bf16", "fp16", self.weights) \
            else f" A{self.activations}"
        experts = f" experts W{self.expert_weights}" if self.expert_weights else ""
        return f"W{self.weights}{acts}{experts}/KV {self.kv_cache}"


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


@dataclass(frozen=True)
class _Point:
    """One batch size's numbers from the estimate's array evaluation."""

    fits: bool
    ttft_s: float
    tpot_s: float
    latency_s: float
    tokens_per_s: float  # one serving unit
    memory_bytes: float
    decode_limiter: str


@dataclass(frozen=True)
class _Candidate:
    """The GPU and formats being searched, and what every option on them shares."""

    product: Product
    system: System | None
    price: float | None
    label: str
    scheme: QuantScheme
    expert_weights: QuantFormat | None
    seconds_per_token_at_peak: float  # 2 x active parameters over the scheme's peak


def _native(product: Product, scheme: QuantScheme) -> bool:
    if scheme.weight_only or scheme.activations.is_16bit:
        return True
    try:
        return gemm_peak(product, scheme).peak.fallback_reason is None
    except GpuarchError:
        return False


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
    rows: list[InferenceOption] = []
    skipped: list[tuple[str, str]] = []
    evaluated = 0
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
            skipped.append((product.key, "no price in the price book (give --price)"))
            continue
        gpn = system.gpus_per_node if system else 8
        widest = min(8, gpn)
        # pipeline stages only after tensor parallelism fills the node (common practice)
        groups = [(tp, pp, 1) for tp in (1, 2, 4, 8) for pp in (1, 2, 4)
                  if tp <= gpn and tp * pp <= search.max_gpus
                  and shape.heads % tp == 0 and shape.layers % pp == 0
                  and (pp == 1 or (tp == widest and system is not None
                                   and system.network_bandwidth_per_gpu_bytes_s))]
        # MoE: expert parallelism with data-parallel attention inside one node
        groups += [(1, 1, ep) for ep in (2, 4, 8)
                   if shape.is_moe and ep <= gpn and ep <= search.max_gpus
                   and shape.experts % ep == 0]
        peak_scheme: dict[str, float] = {}
        # disaggregated: the prefill pools per format and prefill GPU, with the hand-offs
        # and sizings met
        pools: dict[tuple[str, str], _Pools] = {}
        for label, scheme in schemes:
            if label != CHECKPOINT_SCHEME and not _native(product, scheme):
                continue
            experts = search.checkpoint_expert_weights \
                if label == CHECKPOINT_SCHEME and shape.is_moe else None
            for tp, pp, ep in groups:
                unit = max(tp * pp, ep)  # GPUs of one serving unit
                cfg = InferenceConfig(
                    input_len=search.input_len, output_len=search.output_len, batch=None,
                    gpus=unit, tp=tp, pp=pp, ep=ep, quant=scheme, expert_weights=experts,
                    batching=Batching.CONTINUOUS, gpus_per_node=gpn,
                    executor=search.executor, window_kv_cache=search.window_kv_cache,
                    moe_comm=search.moe_comm,
                    fp8_context_attention=search.fp8_context_attention,
                    cached_prefix=search.cached_prefix,
                    cuda_graph_batch_sizes=search.cuda_graph_batch_sizes)
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
                    if (product.key, why) not in skipped:
                        skipped.append((product.key, why))
                    continue
                evaluated += len(batches)
                if label not in peak_scheme:
                    peak_scheme[label] = gemm_peak(product, scheme).peak.flops
                where = _Candidate(product, system, price, label, scheme, experts,
                                   2 * active / peak_scheme[label])
                limiters = core.decode_limiter()
                width = cfg.replicas  # attention replicas in the unit (1 unless EP > TP)
                if search.disaggregated:
                    for prefill_product, prefill_system in prefill_candidates or [
                            (product, system)]:
                        key = (label, prefill_product.key)
                        if key not in pools:
                            pools[key] = _prefill_pools(
                                catalog, shape, search, cfg, where, prefill_product,
                                prefill_system, prices, efficiency)
                for i, batch in enumerate(batches):
                    point = _Point(
                        fits=bool(core.memory_total[i] <= product.memory_bytes),
                        ttft_s=float(core.ttft[i]), tpot_s=float(core.tpot[i]),
                        latency_s=float(core.latency[i]),
                        tokens_per_s=float(core.per_replica[i]) * width,
                        memory_bytes=float(core.memory_total[i]),
                        decode_limiter=str(limiters[i]))
                    option = _option(where, search, (tp, pp, ep), int(batch), point)
                    if option is not None:
                        rows.append(option)
                    if search.disaggregated and point.fits and search.output_len > 1:
                        decode = _DecodeUnit((tp, pp, ep), int(batch), width,
                                             float(core.step.total[i]), point)
                        for key in [k for k in pools if k[0] == label]:
                            for n_curve in range(len(pools[key].curves)):
                                option = _disaggregated(catalog, shape, where, search, cfg,
                                                        decode, pools[key], n_curve,
                                                        efficiency)
                                evaluated += 1
                                if option is not None:
                                    rows.append(option)
    assumptions = {"prices": prices.describe(), "node_overhead": NODE_OVERHEAD, "pue": PUE,
                   "batching": "continuous (in-flight), steady state",
                   "executor": search.executor,
                   "window_kv_cache": search.window_kv_cache,
                   "moe_comm": search.moe_comm,
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
                       "cap; estimate.disagg's model, unvalidated"
                       if search.disaggregated else None),
                   "cached_prefix": search.cached_prefix or None}
    if not rows:
        return InferenceAdvice(shape.name, search.input_len, search.output_len,
                               search.objective.value, (), (), evaluated, 0, tuple(skipped),
                               assumptions)
    feasible = len(rows)
    if search.rate is not None or search.concurrency is not None:
        rows = _smallest_batches(rows)
    metric = {"time": [r.request_latency_s for r in rows],
              "cost": [_inf(r.usd_per_million_tokens) for r in rows],
              "energy": [_inf(r.kwh_per_million_tokens) for r in rows]}
    # ties (same GPUs for the same load cost the same) go to the lower latency
    order = np.lexsort((np.array(metric["time"]), np.array(metric[search.objective.value])))
    front = set(np.nonzero(pareto_mask(np.array(
        [metric["time"], metric["cost"], metric["energy"]]).T))[0].tolist())
    rows = [replace(r, pareto=i in front) for i, r in enumerate(rows)]
    top = [rows[int(i)] for i in order[: search.top]]
    rivals: dict[str, InferenceOption] = {}
    for i in order:
        rivals.setdefault(rows[int(i)].gpu, rows[int(i)])
    first = top[0]
    top = [replace(o, reason=_reason(catalog, o, first, rivals, search.objective))
           for o in top]
    per_gpu = tuple(replace(o, reason=_reason(catalog, o, first, rivals, search.objective))
                    for o in rivals.values())
    assumptions["error_bands"] = bands_by_architecture(
        "serving", shape, (catalog.product(g) for g in rivals))
    pareto = [replace(o, reason=_reason(catalog, o, first, rivals, search.objective))
              for o in sorted((rows[i] for i in front), key=lambda r: r.request_latency_s)]
    return InferenceAdvice(shape.name, search.input_len, search.output_len,
                           search.objective.value, tuple(top), tuple(pareto), evaluated,
                           feasible, tuple(skipped), assumptions, per_gpu)


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


def _option(where: _Candidate, search: InferenceSearch, split: tuple[int, int, int],
            batch: int, est: _Point) -> InferenceOption | None:
    """The aggregated deployment for one estimate (``split`` = TP, PP, EP of a unit), or
    None when it misses a constraint."""
    if not est.fits or est.tokens_per_s <= 0:
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
    return _deployment(where, search, split, batch, est, replicas * unit, replicas, tps)


@dataclass
class _Pools:
    """The prefill pools of one GPU and format, and the KV hand-offs (by prefill GPUs, TP
    and decode GPUs) and sizings (by pool, load, GPUs left, decode GPUs) worked out so far."""

    where: _Candidate  # the prefill GPU, its price and formats
    curves: list[PrefillCurve]
    transfers: dict[tuple[int, int, int], tuple[float, str] | None] = field(
        default_factory=dict)
    sizings: dict[tuple[int, float, int, int], PrefillSizing | None] = field(
        default_factory=dict)


def _prefill_pools(catalog: Catalog, shape: TransformerShape, search: InferenceSearch,
                   cfg: InferenceConfig, where: _Candidate, product: Product,
                   system: System | None, prices: PriceBook,
                   efficiency: Efficiency) -> _Pools:
    """The prefill pools on ``product`` for decode pools searched at ``where`` (its formats):
    TP 1-8 within ``product``'s node, and EP 2-8 for an MoE model. None (no curves) where the
    GPU lacks the formats natively or, ranking by cost, has no price."""
    if product.key == where.product.key:
        pool_where = where
    else:
        price = prices.price(product.key)
        if (where.label != CHECKPOINT_SCHEME and not _native(product, where.scheme)) or (
                price is None and search.objective is Objective.COST):
            return _Pools(where, [])
        active = count_params(shape).active(shape)
        pool_where = replace(where, product=product, system=system, price=price,
                             seconds_per_token_at_peak=2 * active / gemm_peak(
                                 product, where.scheme).peak.flops)
    gpn = system.gpus_per_node if system else 8
    splits = [(tp, 1) for tp in (1, 2, 4, 8)
              if tp <= gpn and tp <= search.max_gpus and shape.heads % tp == 0]
    splits += [(1, ep) for ep in (2, 4, 8) if shape.is_moe and ep <= gpn
               and ep <= search.max_gpus and shape.experts % ep == 0]
    curves = prefill_curves(catalog, shape, product, replace(cfg, gpus_per_node=gpn), splits,
                            system, efficiency)
    return _Pools(pool_where, curves)


@dataclass(frozen=True)
class _DecodeUnit:
    """A decode pool's unit at one batch: its split, sequences per attention replica, the
    attention replicas in it, and its decode step alone (no prefills between steps)."""

    split: tuple[int, int, int]
    batch: int
    width: int
    step_s: float
    point: _Point  # the aggregated estimate at this batch (memory, decode limiter)

    @property
    def gpus(self) -> int:
        tp, pp, ep = self.split
        return max(tp * pp, ep)


def _disaggregated(catalog: Catalog, shape: TransformerShape, where: _Candidate,
                   search: InferenceSearch, cfg: InferenceConfig, decode: _DecodeUnit,
                   pools: _Pools, n_curve: int,
                   efficiency: Efficiency) -> InferenceOption | None:
    """The disaggregated deployment of ``decode`` units fed by replicas of the prefill pool
    ``pools.curves[n_curve]``: as many decode units as the load needs (one, flat out,
    without a load), and the fewest prefill replicas that carry its prompts within the TTFT
    cap (``size_prefill``); None when none do or a constraint fails. The numbers are
    ``estimate_disaggregated``'s for the same pools and load."""
    curve = pools.curves[n_curve]
    other = pools.where.product.key != where.product.key  # prefill on another GPU type
    out = search.output_len
    per_unit = decode.width * decode.batch / ((out - 1) * decode.step_s)  # requests/s
    if search.rate is not None:
        units = max(1, math.ceil(search.rate / per_unit - 1e-9))
        load = search.rate
    elif search.concurrency is not None:
        units = max(1, math.ceil(search.concurrency / (decode.width * decode.batch)))
        # the prompts' rate if the first token came at once: an upper bound on the load,
        # so the prefill pool is sized (and its TTFT taken) on the safe side
        load = min(units * per_unit, search.concurrency / ((out - 1) * decode.step_s))
    else:
        units, load = 1, per_unit
    decode_gpus = units * decode.gpus
    room = (search.max_gpus - decode_gpus) // curve.unit
    if room < 1:
        return None

    def transfer(replicas: int) -> tuple[float, str] | None:
        key = (replicas * curve.unit, curve.tp, decode_gpus)
        transfers = pools.transfers
        if key not in transfers:
            try:
                seconds, _, link = kv_transfer(
                    catalog, shape, where.product, replace(cfg, gpus=decode_gpus),
                    PrefillPool(replicas * curve.unit, curve.tp, curve.ep,
                                product=pools.where.product if other else None,
                                system=pools.where.system if other else None),
                    where.system, efficiency)
                transfers[key] = (seconds, link)
            except GpuarchError:
                transfers[key] = None  # across nodes without a network
        return transfers[key]

    cap = to_si(search.ttft_ms, Unit.MS) if search.ttft_ms is not None else None
    key = (n_curve, load, room, decode_gpus)  # under a rate, the same for every batch
    if key not in pools.sizings:
        pools.sizings[key] = size_prefill(curve, load, max_replicas=room, ttft_cap_s=cap,
                                          transfer=transfer)
    sized = pools.sizings[key]
    if sized is None:
        return None
    latency = sized.ttft_s + (out - 1) * decode.step_s
    if search.concurrency is not None:
        load = min(load, search.concurrency / latency)  # Little's law
    est = replace(decode.point, ttft_s=sized.ttft_s, tpot_s=decode.step_s, latency_s=latency,
                  memory_bytes=max(decode.point.memory_bytes, sized.memory_bytes))
    plan = PrefillPlan(gpus=sized.replicas * curve.unit, replicas=sized.replicas,
                       tp=curve.tp, ep=curve.ep, busy=sized.busy,
                       prompts_per_pass=sized.prompts_per_pass,
                       kv_transfer_ms=from_si(sized.kv_transfer_s, Unit.MS),
                       kv_link=sized.kv_link,
                       gpu=pools.where.product.key if other else "",
                       gpu_name=pools.where.product.name if other else "",
                       usd_per_gpu_hour=pools.where.price if other else None)
    return _deployment(where, search, decode.split, decode.batch, est,
                       decode_gpus + plan.gpus, units, load * out, plan, pools.where)


def _deployment(where: _Candidate, search: InferenceSearch, split: tuple[int, int, int],
                batch: int, est: _Point, gpus: int, replicas: int, tps: float,
                prefill: PrefillPlan | None = None,
                prefill_where: _Candidate | None = None) -> InferenceOption | None:
    """The option for ``gpus`` in all delivering ``tps`` output tokens/s with ``est``'s
    latencies, or None when it misses a constraint. A disaggregated deployment's two pools
    (``prefill`` on ``prefill_where``'s GPU) are priced and powered each on its own GPU;
    each pool's utilisation counts the tokens it processes (prompts, outputs)."""
    product = where.product
    tp, pp, ep = split
    if gpus > search.max_gpus:
        return None
    if search.ttft_ms is not None and from_si(est.ttft_s, Unit.MS) > search.ttft_ms:
        return None
    if search.tpot_ms is not None and from_si(est.tpot_s, Unit.MS) > search.tpot_ms:
        return None
    if search.min_throughput is not None and tps < search.min_throughput:
        return None
    # (GPU, price, GPUs, tokens/s processed, seconds per token at the scheme's peak) a pool
    prompts_per_s = tps * search.input_len / search.output_len
    pools = [(product, where.price, gpus, tps + prompts_per_s,
              where.seconds_per_token_at_peak)]
    if prefill is not None and prefill_where is not None:
        pools = [(product, where.price, gpus - prefill.gpus, tps,
                  where.seconds_per_token_at_peak),
                 (prefill_where.product, prefill_where.price, prefill.gpus, prompts_per_s,
                  prefill_where.seconds_per_token_at_peak)]
    prices = [price for _, price, _, _, _ in pools]
    per_hour = None if None in prices else sum(
        n * float(price) for _, price, n, _, _ in pools if price is not None)
    if search.budget_usd_per_hour is not None and (per_hour is None
                                                   or per_hour > search.budget_usd_per_hour):
        return None
    known = all(p.tdp_w for p, _, _, _, _ in pools)
    power = from_si(sum(facility_power_w(p.tdp_w, n) for p, _, n, _, _ in pools if p.tdp_w),
                    Unit.KW) if known else None
    if search.max_power_kw is not None and (power is None or power > search.max_power_kw):
        return None
    seconds_per_million = 1e6 / tps
    kwh = None
    if known:
        # utilisation: the 2 x active-parameter FLOPs of the tokens a pool processes, against
        # its GPUs' peak for the scheme
        kwh = sum(float(energy_kwh(p.tdp_w, min(1.0, tokens * spt / n), n,
                                   seconds_per_million))
                  for p, _, n, tokens, spt in pools if p.tdp_w)
    price = where.price
    scheme = where.scheme
    return InferenceOption(
        gpu=product.key, gpu_name=product.name, gpus=gpus, replicas=replicas, tp=tp, pp=pp,
        ep=ep, batch=batch, scheme=where.label, weights=scheme.weights.value,
        activations=scheme.activations.value, kv_cache=scheme.kv_cache.value,
        expert_weights=where.expert_weights.value if where.expert_weights else None,
        ttft_ms=from_si(est.ttft_s, Unit.MS),
        tpot_ms=from_si(est.tpot_s, Unit.MS),
        request_latency_s=est.latency_s, output_tokens_per_s=tps,
        memory_per_gpu_gib=from_si(est.memory_bytes, Unit.GIB), usd_per_hour=per_hour,
        usd_per_million_tokens=(per_hour * seconds_per_million / 3600
                                if per_hour is not None else None),
        kwh_per_million_tokens=kwh, power_kw=power, price_usd_per_gpu_hour=price,
        bottleneck={"decode": est.decode_limiter}, prefill=prefill,
        mode="aggregated" if prefill is None else "disaggregated")


def _tb_s(product: Product) -> float:
    return from_si(product.memory_bandwidth_bytes_s or 0, Unit.TB_S)


def _metric(o: InferenceOption, objective: Objective) -> float | None:
    return {"time": o.request_latency_s, "cost": o.usd_per_million_tokens,
            "energy": o.kwh_per_million_tokens}[objective.value]


def _reason(catalog: Catalog, o: InferenceOption, best: InferenceOption,
            rivals: dict[str, InferenceOption], objective: Objective) -> str:
    """One line grounded in the hardware: what limits decode, the resource that sets it on
    this GPU, and for the best option how the best deployment on another GPU compares."""
    product = catalog.product(o.gpu)
    limit = o.bottleneck.get("decode", "memory")
    bw = _tb_s(product)
    pool = ""
    if o.prefill is not None:
        p = o.prefill
        pool = (f"disaggregated: {p.gpus} {p.gpu_name + ' ' if p.gpu_name else ''}prefill "
                f"GPUs ({p.label}) {p.busy:.0%} busy, "
                f"{p.prompts_per_pass} prompt{'s' if p.prompts_per_pass > 1 else ''} a "
                f"pass, KV cache handed over "
                f"{p.kv_link} in {p.kv_transfer_ms:.2g} ms; ")
    if limit == "memory":
        text = (f"decode is bandwidth-bound: {o.weights} weights and a {o.kv_cache} KV cache "
                f"streamed at {bw:.2f} TB/s, batch {o.batch} per read")
    elif limit == "compute":
        text = (f"decode is compute-bound at batch {o.batch}: the {o.scheme} Tensor Core rate "
                f"of {product.name} sets the pace")
    elif limit == "host":
        text = (f"decode is host-bound at batch {o.batch}: the executor's per-request work "
                f"(scheduling, sampling, bookkeeping) outlasts the GPU's step; more replicas "
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
