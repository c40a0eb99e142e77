"""Predicted vs published LLM inference results.

Each published point (``data/inference.toml``) gives one or more of: output tokens/s (all
GPUs or per GPU), time to first token, time per output token. Every figure it gives is
compared with the model's prediction for the same model, GPU, parallelism, formats, lengths
and batching: static batches as static, serving benchmarks at their concurrency as
continuous batching, max-throughput runs as continuous batching at the largest batch that
fits. A point that names a prefill pool (``prefill_gpus``, with ``prefill_tp``,
``prefill_ep`` and ``prefill_max_num_tokens``) ran disaggregated: its ``gpus``, ``tp`` and
``ep`` are the decode pool's, its concurrency is the client's requests in flight through
both pools, and it is priced by ``estimate.disagg.estimate_disaggregated``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product
from gpuarch.errors import GpuarchError, suggestion
from gpuarch.estimate.disagg import PrefillPool, estimate_disaggregated
from gpuarch.estimate.engine_limits import apply_limits
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import (
    DECODE_KV_READS,
    MAX_PREFILL_TOKENS,
    MLA_CACHES,
    MOE_COMMS,
    MOE_GEMM_KERNELS,
    MOE_KERNELS,
    SCHEDULER_POLICIES,
    SCHEDULES,
    WINDOW_KV_CACHES,
    Batching,
    InferenceConfig,
    engine_settings,
)
from gpuarch.estimate.inference_memory import memory_per_gpu
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.validation.bands import engine_family
from gpuarch.validation.mlenergy import mlenergy_points
from gpuarch.validation.stats import ErrorSummary, MemoryFit, summarize
from gpuarch.validation.training import (
    SHAPE_KEYS,
    TrainingPoint,
    memory_fit,
    point_shape,
    point_system,
    read_points,
)

__all__ = [
    "INFERENCE_FILE",
    "POINT_KEYS",
    "InferenceComparison",
    "InferenceSummary",
    "load_inference_points",
    "validate_inference",
]

INFERENCE_FILE = Path(__file__).with_name("data") / "inference.toml"

# metric key in the data file -> (label, attribute of the estimate's JSON)
_METRICS = {
    "output_tokens_per_s": "output_tokens_per_s",
    "output_tokens_per_s_per_gpu": "output_tokens_per_s_per_gpu",
    "ttft_s": "ttft_s",
    "tpot_s": "tpot_s",
    "request_latency_s": "request_latency_s",
    "decode_tokens_per_s_per_gpu": "decode_tokens_per_s_per_gpu",
    "prefill_tokens_per_s_per_gpu": "prefill_tokens_per_s_per_gpu",
    "total_tokens_per_s": "total_tokens_per_s",
}
"""The figures a point may give: the estimate's JSON keys, two rates of one phase that a
disaggregated deployment publishes for its prefill or decode GPUs alone (``_phase_rates``),
and the prompt and output tokens a second together that many serving benchmarks print as
their total throughput (``_total_rate``)."""


def _total_rate(doc: dict[str, Any], cfg: InferenceConfig) -> dict[str, float]:
    """Prompt and output tokens a second together: the output rate with each request's
    prompt counted beside its answer, (input + output) / output of it (what vLLM's and
    SGLang's benchmarks print as 'Total token throughput', prompts served from a cache
    included)."""
    return {"total_tokens_per_s": doc["output_tokens_per_s"]
            * (cfg.input_len + cfg.output_len) / cfg.output_len}


def _phase_rates(doc: dict[str, Any], cfg: InferenceConfig) -> dict[str, float]:
    """A static batch's rates per GPU in one phase: decode, its sequences' tokens per step
    over the time per output token; prefill, its prompts' new tokens over the time to the
    first token (the whole batch prefilled), each replica on its own GPUs."""
    gpus = cfg.tp * cfg.pp
    return {"decode_tokens_per_s_per_gpu": doc["batch"] / doc["tpot_s"] / gpus,
            "prefill_tokens_per_s_per_gpu":
                doc["batch"] * cfg.new_prompt_tokens / doc["ttft_s"] / gpus}


ENGINE_KEYS = ("cuda_graph_batch_sizes", "cuda_graph_max_context", "executor",
               "scheduler_policy", "schedule", "window_kv_cache", "mla_cache",
               "decode_kv_reads",
               "moe_comm", "moe_kernels", "moe_gemm_kernel", "all_reduce",
               "kv_cache_fraction", "max_batch_size", "max_num_tokens",
               "fp8_context_attention", "fp8_mla_decode", "num_requests", "limits",
               "ssm_state_precision")
"""Point settings a source may set once for all its points (``engine`` on the source)."""


DISAGG_KEYS = ("prefill_gpus", "prefill_tp", "prefill_ep", "prefill_max_num_tokens")
"""A disaggregated run's prefill pool: its GPUs in all, each prefill replica's TP and EP and,
where the prefill workers' engine sets its own, the prompt tokens of one pass
(``estimate.disagg.PrefillPool``); the point's ``gpus``, ``tp``, ``ep`` and
``max_num_tokens`` are then the decode pool's."""


POINT_KEYS = frozenset({
    # what was measured and where
    "id", "source", "where", "framework", "notes", "out_of_sample", "excluded",
    "memory_exception", *_METRICS,
    # the model (a preset, or its fields) and the hardware
    "preset", "model", *SHAPE_KEYS, "gpu", "gpus", "system", "gpu_link",
    # the run: layout, formats, lengths, batching and the engine's settings
    "tp", "pp", "ep", "weight_precision", "activation_precision", "kv_precision",
    "expert_weight_precision", "expert_activation_precision", "fp8_scaling",
    "ssm_state_precision", "input_len", "output_len", "output_len_cv", "max_output_len",
    "mode", "batch", "concurrency", "schedule", "adp_balance", "moe_imbalance",
    "redundant_experts", "two_batch_overlap", "speculative_tokens", "acceptance_length",
    "gpus_per_node", *DISAGG_KEYS, *ENGINE_KEYS,
})
"""Every key an inference point may carry (its source's ``engine`` settings included);
another is a typo the loader names, which would otherwise be ignored."""


@cache
def load_inference_points(path: Path = INFERENCE_FILE) -> tuple[TrainingPoint, ...]:
    """The published inference points with their sources (same record type as training);
    a key no reader knows is an error naming it (with the nearest known key)."""
    def engine(source: Mapping[str, Any]) -> Mapping[str, Any]:
        # engine settings a source's runs share (its benchmark options), unless a point
        # says otherwise
        for key in source.get("engine", {}):
            if key not in ENGINE_KEYS:
                raise GpuarchError(f"{path.name}: source {source['id']!r}: engine: unknown "
                                   f"setting {key!r}{suggestion(key, ENGINE_KEYS)}")
        return dict(source.get("engine", {}))

    return read_points(path, POINT_KEYS, engine, mlenergy_points)


@dataclass(frozen=True)
class InferenceComparison:
    """One published figure of one point against the prediction."""

    id: str
    source: str
    model: str
    gpu: str
    gpus: int
    formats: str
    lengths: str
    batching: str
    metric: str
    published: float
    predicted: float
    out_of_sample: bool = False  # added after the parameters it tests were fitted
    # the estimate's phases and where their time goes (``validate --explain``)
    explain: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    memory: MemoryFit = field(default_factory=MemoryFit)
    # the engine that ran it (validation.bands.ENGINES' key, read from the point's framework)
    engine: str = ""

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0


InferenceSummary = ErrorSummary
"""Inference comparisons: the issue's per-figure bound is 35%."""


def _fmt(value: Any, default: Any) -> Any:
    return QuantFormat(value) if value else default


def point_config(point: TrainingPoint, gpus_per_node: int, product: Product | None = None
                 ) -> InferenceConfig:
    """The serving setup a point ran (``gpus_per_node`` the system's, where the point does
    not give its own); with ``product``, its engine limits where the point names how they
    were chosen (``limits``) and does not give them."""
    weights = _fmt(point.get("weight_precision"), QuantFormat.FP16)
    activations = _fmt(point.get("activation_precision"), weights)
    if activations.bits > weights.bits and not activations.is_16bit \
            and not QuantScheme(weights, activations).w4a8:
        activations = QuantFormat.FP16
    kv_default = QuantFormat.FP8 if activations is QuantFormat.FP8 else QuantFormat.FP16
    kv = _fmt(point.get("kv_precision"), kv_default)
    mode = point.get("mode", "static-batch")
    if mode == "static-batch":
        batching, batch = Batching.STATIC, point.get("batch")
    elif mode == "serving":
        batching, batch = Batching.CONTINUOUS, point.get("concurrency") or point.get("batch")
    else:
        batching, batch = Batching.CONTINUOUS, None
    cfg = InferenceConfig(
        input_len=int(point.get("input_len")), output_len=int(point.get("output_len")),
        batch=int(batch) if batch else None, gpus=int(point.get("gpus")),
        tp=int(point.get("tp") or 1), pp=int(point.get("pp") or 1),
        ep=int(point.get("ep") or 1), quant=QuantScheme(weights, activations, kv),
        expert_weights=_fmt(point.get("expert_weight_precision"), None),
        expert_activations=_fmt(point.get("expert_activation_precision"), None),
        batching=batching, gpus_per_node=int(point.get("gpus_per_node") or gpus_per_node),
        max_num_tokens=int(point.get("max_num_tokens") or MAX_PREFILL_TOKENS),
        kv_cache_fraction=float(point.get("kv_cache_fraction") or 0.0),
        max_batch_size=int(point.get("max_batch_size") or 0),
        # the engine's own executor loop, unless the point names another
        executor=str(point.get("executor", engine_settings(
            engine_family(str(point.get("framework") or "")))["executor"])),
        scheduler_policy=str(point.get("scheduler_policy", SCHEDULER_POLICIES[0])),
        schedule=str(point.get("schedule", SCHEDULES[0])),
        window_kv_cache=str(point.get("window_kv_cache", WINDOW_KV_CACHES[0])),
        mla_cache=str(point.get("mla_cache", MLA_CACHES[0])),
        decode_kv_reads=str(point.get("decode_kv_reads", DECODE_KV_READS[0])),
        moe_comm=str(point.get("moe_comm", MOE_COMMS[0])),
        moe_kernels=str(point.get("moe_kernels", MOE_KERNELS[0])),
        moe_gemm_kernel=str(point.get("moe_gemm_kernel", MOE_GEMM_KERNELS[0])),
        # the engine's own all-reduce kernels, unless the point names others
        all_reduce=str(point.get("all_reduce", engine_settings(
            engine_family(str(point.get("framework") or "")))["all_reduce"])),
        redundant_experts=int(point.get("redundant_experts") or 0),
        two_batch_overlap=bool(point.get("two_batch_overlap", False)),
        moe_imbalance=float(point.get("moe_imbalance") or 1.0),
        num_requests=int(point.get("num_requests") or 0),
        output_len_cv=float(point.get("output_len_cv") or 0.0),
        max_output_len=int(point.get("max_output_len") or 0),
        fp8_context_attention=bool(point.get("fp8_context_attention", False)),
        fp8_mla_decode=bool(point.get("fp8_mla_decode", True)),
        fp8_scaling=str(point.get("fp8_scaling", "tensor")),
        ssm_state_precision=str(point.get("ssm_state_precision",
                                          InferenceConfig.ssm_state_precision)),
        adp_balance=bool(point.get("adp_balance", False)),
        speculative_tokens=int(point.get("speculative_tokens") or 0),
        acceptance_length=float(point.get("acceptance_length") or 0.0),
        cuda_graph_batch_sizes=tuple(int(b) for b in point.get("cuda_graph_batch_sizes", ())),
        cuda_graph_max_context=int(point.get("cuda_graph_max_context") or 0))
    # where the engine's max_batch_size and max_num_tokens came from when the point does
    # not give them (``limits``: a key of LIMIT_SOURCES); without it, only what the point
    # gives limits the engine
    source = point.get("limits")
    if not source or product is None:
        return cfg
    return apply_limits(point_shape(point), cfg, product.memory_bytes, str(source),
                        int(point.get("max_batch_size") or 0),
                        int(point.get("max_num_tokens") or 0), f"point {point.id}: limits")


def weight_read_s(catalog: Catalog, point: TrainingPoint) -> float:
    """Seconds one GPU of a point's setup takes to read its share of the weights once at the
    datasheet bandwidth (every expert counted): the least a decode step or a prefill pass of
    it can take, whatever the engine."""
    product = catalog.product(point.get("gpu"))
    cfg = point_config(point, 8, product)
    weights = memory_per_gpu(point_shape(point), cfg, int(cfg.batch or 1), product)["weights"]
    return weights / product.memory_bandwidth_bytes_s


def compare_point(catalog: Catalog, point: TrainingPoint, efficiency: Efficiency
                  ) -> list[InferenceComparison]:
    """Predict every figure of one point (raises GpuarchError when it cannot be modelled, or
    when the data file marks it ``excluded`` with the reason: a figure that beats reading the
    weights once a step at the datasheet bandwidth in the formats the row is entered in)."""
    point.refuse_excluded()
    product = catalog.product(point.get("gpu"))
    # a row's system (the board, where it is not the GPU's reference system) and gpu_link
    # ("pcie4": cards without an NVLink bridge, which replaces the GPUs' NVLink)
    system = catalog.system_with_link(product, point_system(catalog, point, product),
                                      point.get("gpu_link"))
    shape = point_shape(point)
    cfg = point_config(point, system.gpus_per_node if system else 8, product)
    pool_keys = [k for k in DISAGG_KEYS[1:] if point.get(k) is not None]
    if pool_keys and point.get("prefill_gpus") is None:
        raise GpuarchError(f"point {point.id}: {pool_keys[0]}: it shapes the prefill pool of "
                           "a disaggregated run, and the point gives no prefill_gpus")
    if point.get("prefill_gpus") is not None:
        return _compare_disaggregated(catalog, point, product, system, shape, cfg,
                                      efficiency)
    est = estimate_inference(catalog, shape, product, cfg, system=system,
                             efficiency=efficiency)
    doc = est.as_json()
    explain = {k: doc[k] for k in ("batch", "ttft_s", "tpot_s", "prefill_parts_s",
                                   "decode_step_parts_s", "bottleneck")}
    a = doc["assumptions"]
    # the engine's limits where its benchmark chose them (``limits``)
    explain["engine_limits"] = {"source": a["engine_limits"],
                                "max_batch_size": a["max_batch_size"],
                                "max_num_tokens": a["max_prefill_tokens_per_pass"]} \
        if a.get("engine_limits") else None
    explain["offline_run"] = a.get("offline_run")
    rows = []
    for key, attr in _METRICS.items():
        published = point.get(key)
        if published and attr not in doc and key == "total_tokens_per_s":
            doc = {**doc, **_total_rate(doc, cfg)}
        elif published and attr not in doc:
            if cfg.batching is not Batching.STATIC:
                raise GpuarchError(f"point {point.id}: {key} is a static batch's rate in one "
                                   "phase; give mode = \"static-batch\"")
            doc = {**doc, **_phase_rates(doc, cfg)}
        if published:
            rows.append(_comparison(point, shape.name, product.key, cfg, cfg.gpus,
                                    f"{cfg.batching.value} {est.batch}", key,
                                    float(published), float(doc[attr]), explain, doc))
    if not rows:
        raise GpuarchError(f"point {point.id}: no published figure to compare")
    return rows


def _comparison(point: TrainingPoint, model: str, gpu: str, cfg: InferenceConfig, gpus: int,
                batching: str, metric: str, published: float, predicted: float,
                explain: dict[str, Any], doc: Mapping[str, Any]) -> InferenceComparison:
    """One figure of ``point`` beside the estimate's (``doc``, its JSON)."""
    q = cfg.quant
    return InferenceComparison(
        point.id, point.source, model, gpu, gpus,
        f"W{q.weights.value}/A{q.activations.value}/KV{q.kv_cache.value}",
        f"{cfg.input_len}/{cfg.output_len}", batching, metric, published, predicted,
        bool(point.get("out_of_sample", False)), explain, memory_fit(point, doc),
        engine_family(str(point.get("framework") or "")))


def _compare_disaggregated(catalog: Catalog, point: TrainingPoint, product: Product,
                           system: Any, shape: Any, cfg: InferenceConfig,
                           efficiency: Efficiency) -> list[InferenceComparison]:
    """A disaggregated point's figures: the run's client keeps its concurrency in flight
    through the point's prefill pool (``prefill_*``) and its decode pool (the point's GPUs,
    TP and EP; each attention-data-parallel rank a replica), so the decode replicas hold what
    the loop leaves decoding (``estimate_disaggregated`` with ``concurrency``)."""
    concurrency = point.get("concurrency")
    if point.get("mode") != "serving" or not concurrency:
        raise GpuarchError(f"point {point.id}: prefill_gpus: a disaggregated point gives "
                           "mode = \"serving\" and its concurrency")
    budget = point.get("prefill_max_num_tokens")
    if budget is not None and budget < 1:  # (the pool's 0 is "the decode side's")
        raise GpuarchError(f"point {point.id}: prefill_max_num_tokens: expected an integer "
                           f">= 1, got {budget!r}")
    pool = PrefillPool(gpus=point.get("prefill_gpus"), tp=point.get("prefill_tp", 1),
                       ep=point.get("prefill_ep", 1), max_num_tokens=budget or 0)
    try:
        pool.validate()
    except GpuarchError as exc:  # name the data file's fields, not the flags
        field_name = re.sub(r"--(prefill-[a-z-]+)",
                            lambda m: m.group(1).replace("-", "_"), str(exc))
        raise GpuarchError(f"point {point.id}: {field_name}") from None
    cfg = replace(cfg, batch=None)
    doc = estimate_disaggregated(catalog, shape, product, cfg, pool,
                                 concurrency=int(concurrency), system=system,
                                 efficiency=efficiency).as_json()
    explain = {"batch": doc["batch"], "ttft_s": doc["ttft_s"], "tpot_s": doc["tpot_s"],
               "bottleneck": doc["bottleneck"], "disaggregated": doc["disaggregated"],
               "prefill": doc["assumptions"]["prefill"],
               "closed_loop": doc["assumptions"]["closed_loop"]}
    rows = []
    for key, attr in _METRICS.items():
        published = point.get(key)
        if not published:
            continue
        if attr not in doc:
            raise GpuarchError(f"point {point.id}: {key}: a disaggregated estimate does not "
                               "give it; give output_tokens_per_s, ttft_s, tpot_s or "
                               "request_latency_s")
        rows.append(_comparison(point, shape.name, product.key, cfg, cfg.gpus + pool.gpus,
                                f"disaggregated {concurrency}", key, float(published),
                                float(doc[attr]), explain, doc))
    if not rows:
        raise GpuarchError(f"point {point.id}: no published figure to compare")
    return rows


SERVING_BOUND = 0.35
"""Issue #4's per-point bound: no serving figure beyond 35%."""


def validate_inference(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY,
                       points: Iterable[TrainingPoint] | None = None) -> InferenceSummary:
    """Compare every figure of every point that can be modelled."""
    return summarize(points if points is not None else load_inference_points(),
                     lambda p: compare_point(catalog, p, efficiency), bound=SERVING_BOUND)
