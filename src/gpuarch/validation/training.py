"""Predicted vs published training throughput.

Each published point (``data/training.toml``) is turned into a throughput in tokens per
second per GPU, whatever the source printed: tokens/s directly, a step time, or TFLOP/s,
MFU or HFU converted back with the FLOP convention the source states (Megatron's HFU formula
counts the recompute pass; MFU counts model FLOPs only). The model's prediction for the same
model, GPU and layout is compared with it.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System
from gpuarch.errors import GpuarchError, check_choice, suggestion
from gpuarch.estimate.activation_offload import DEFAULT_MIN_ELEMENTS
from gpuarch.estimate.memory import Recompute
from gpuarch.estimate.pipeline_schedule import PP_SCHEDULES
from gpuarch.estimate.training import TrainingEstimate, estimate_training
from gpuarch.estimate.training_config import (
    CP_COMM_TYPES,
    EP_DISPATCHERS,
    EXPERT_LAUNCHES,
    MOE_ROUTINGS,
    TrainingConfig,
)
from gpuarch.estimate.training_layers import unbalanced_routing_load
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.precision import Precision
from gpuarch.units import Unit, to_si
from gpuarch.validation.bands import framework_family
from gpuarch.validation.stats import ErrorSummary, MemoryFit, summarize
from gpuarch.workloads.flops import forward_flops_per_token
from gpuarch.workloads.mtp import mtp_forward_flops_per_token
from gpuarch.workloads.presets import preset, shape_from_mapping
from gpuarch.workloads.shape import FfnKind, NormKind, Position, TransformerShape

__all__ = [
    "POINT_KEYS",
    "SHAPE_KEYS",
    "TRAINING_FILE",
    "PointEstimate",
    "TrainingComparison",
    "TrainingPoint",
    "ValidationSummary",
    "check_point_keys",
    "estimate_point",
    "load_training_points",
    "sources_by_id",
    "validate_training",
]

TRAINING_FILE = Path(__file__).with_name("data") / "training.toml"

SHAPE_KEYS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "ffn_kind",
              "vocab", "experts", "experts_per_token", "shared_experts", "moe_ffn_hidden",
              "moe_latent", "dense_layers", "norm", "position", "max_positions", "bias",
              "tied_embeddings", "parallel_attention", "sliding_window", "sliding_layers")
"""The model fields a point may give instead of (or beside) a preset."""
_SHAPE_ENUMS = {"ffn_kind": FfnKind, "norm": NormKind, "position": Position}


@dataclass(frozen=True)
class TrainingPoint:
    """One published measurement with the layout it was measured at."""

    id: str
    source: str
    source_title: str
    source_url: str
    where: str
    raw: Mapping[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    def refuse_excluded(self) -> None:
        """Raise GpuarchError with the data file's reason where it marks the point
        ``excluded``: its figures cannot be compared as entered."""
        if self.get("excluded"):
            raise GpuarchError(f"excluded: {self.get('excluded')}")


def sources_by_id(raw: Mapping[str, Any], path: Path) -> dict[str, Mapping[str, Any]]:
    """A validation file's sources by id; an id used twice, by a source or by a point, is an
    error naming it (a second entry would silently replace the first), and so is a source no
    point cites (a leftover, which the file's readers would take for a citation)."""
    for kind in ("source", "point"):
        seen: set[str] = set()
        for entry in raw.get(kind, []):
            if entry["id"] in seen:
                raise GpuarchError(f"{path.name}: {kind} id {entry['id']!r} is used twice")
            seen.add(entry["id"])
    cited = {point.get("source") for point in raw.get("point", [])}
    for source in raw.get("source", []):
        if source["id"] not in cited:
            raise GpuarchError(f"{path.name}: source {source['id']!r} is cited by no point")
    return {s["id"]: s for s in raw.get("source", [])}


POINT_KEYS = frozenset({
    # what was measured and where
    "id", "source", "where", "framework", "notes", "out_of_sample", "excluded",
    "memory_exception", "tokens_per_s_per_gpu", "tokens_per_s", "step_time_s",
    "tflops_per_gpu", "tflops_convention", "mfu", "hfu",
    # the model (a preset, or its fields: SHAPE_KEYS) and the hardware
    "preset", "model", *SHAPE_KEYS, "gpu", "gpus", "system", "gpu_link",
    "network_bandwidth_per_gpu_gbit_s",
    # the run
    "seq_len", "global_batch", "micro_batch", "tp", "pp", "cp", "dp", "ep", "etp", "vpp",
    "sequence_parallel", "zero", "dp_shard", "outer_optimizer_sharding", "fsdp_prefetch",
    "reshard_after_forward",
    "tp_comm_overlap",
    "cp_comm_type",
    "ep_dispatcher", "ep_comm_overlap", "expert_launches", "moe_routing", "moe_token_drop",
    "dispatcher_wait_us", "cuda_graphs", "cuda_graph_scope", "pp_comm_overlap",
    "pp_edge_layers", "pp_layout", "pp_schedule", "mtp_layers", "mtp_shared_weights",
    "mtp_bf16", "fused_attention",
    "attention_kernel", "recompute", "recompute_modules", "recompute_layers",
    "offload_layers", "offload_modules", "offload_min_elements", "precision", "fp8_params",
    "bf16_grads", "bf16_optimizer", "fp8_attention", "fp8_attention_scaling", "fp8_recipe",
    "bf16_layers_start", "bf16_layers_end", "lora_rank", "lora_modules", "packed_doc_len",
    "moe_imbalance", "gpus_per_node", "optimizer_offload", "optimizer_offload_overlap",
})
"""Every key a training point may carry; another is a typo the loader names (it would be
silently ignored and the run modelled without it)."""


def check_point_keys(path: Path, entry: Mapping[str, Any], known: frozenset[str]) -> None:
    """Raise GpuarchError naming a key of a data file's point that no reader knows, with
    the nearest known key."""
    for key in sorted(set(entry) - known):
        raise GpuarchError(f"{path.name}: point {entry.get('id')!r}: unknown key "
                           f"{key!r}{suggestion(key, known)}")


def read_points(path: Path, known: frozenset[str],
                source_defaults: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
                source_points: Callable[[Path, Mapping[str, Any]], list[dict[str, Any]]]
                | None = None) -> tuple[TrainingPoint, ...]:
    """A validation file's points with their sources resolved: an unknown source or a key
    outside ``known`` is an error naming it (with the nearest known key). With
    ``source_defaults``, what it gives for a point's source fills the keys the point leaves
    out (settings a source's runs share); with ``source_points``, the points it builds for a
    source (from a table of runs the source names) follow the file's own."""
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    if source_points is not None:
        built = [p for src in raw.get("source", []) for p in source_points(path, src)]
        raw = {**raw, "point": [*raw.get("point", []), *built]}
    sources = sources_by_id(raw, path)
    points = []
    for entry in raw.get("point", []):
        src = sources.get(entry.get("source"))
        if src is None:
            raise GpuarchError(f"{path.name}: point {entry.get('id')!r}: unknown source "
                               f"{entry.get('source')!r}")
        if source_defaults is not None:
            entry = {**source_defaults(src), **entry}
        check_point_keys(path, entry, known)
        points.append(TrainingPoint(entry["id"], src["id"], src["title"], src["url"],
                                    entry.get("where", ""), entry))
    return tuple(points)


@cache
def load_training_points(path: Path = TRAINING_FILE) -> tuple[TrainingPoint, ...]:
    """The published points, with their sources resolved; a key no reader knows is an error
    naming it (with the nearest known key)."""
    return read_points(path, POINT_KEYS)


def point_system(catalog: Catalog, point: TrainingPoint, product: Product) -> System | None:
    """The system a point ran on: its ``system`` key (a board other than the GPU's
    reference system, e.g. an HGX 4-GPU board), else the GPU's reference system."""
    key = point.get("system")
    if not key:
        return catalog.system_for(product)
    system = catalog.system(key)
    if system.gpu != product.key:
        raise GpuarchError(f"point {point.id}: system {key!r} holds {system.gpu}, not "
                           f"{product.key}")
    return system


def point_shape(point: TrainingPoint) -> TransformerShape:
    """The model a point trained: its explicit shape if given (named by its ``model`` key,
    else its preset or id), else its preset with the fields the point gives replacing the
    preset's (a benchmark's own vocabulary, say; named by its ``model`` key where the
    fields make another model, a fine-grained twin of the preset, say)."""
    given = {k: point.get(k) for k in SHAPE_KEYS if point.get(k) is not None}
    if {"layers", "hidden", "heads", "vocab"} <= set(given):
        if given.get("ffn_kind") == "gelu" and "ffn_hidden" not in given:
            given["ffn_hidden"] = 4 * given["hidden"]
        name = point.get("model") or point.get("preset") or point.id
        return shape_from_mapping({"name": name, **given},
                                  f"point {point.id}")
    if point.get("preset"):
        base = preset(point.get("preset")).shape
        if not given:
            return base
        try:
            for key, kind in _SHAPE_ENUMS.items():
                if key in given:
                    given[key] = kind(given[key])
            if point.get("model"):
                given["name"] = point.get("model")
            return dataclasses.replace(base, **given)
        except (GpuarchError, ValueError) as exc:
            raise GpuarchError(f"point {point.id}: {exc}") from None
    raise GpuarchError(f"point {point.id}: neither a complete shape nor a preset")


# Frameworks whose published performance recipes turn on tensor-parallel communication
# overlap (userbuffers); the 2019-2022 Megatron-LM papers predate it.
_TP_OVERLAP_FRAMEWORKS = ("nemo", "megatron bridge", "megatron-core")
# Papers whose Megatron-LM predates FlashAttention (2022) and Megatron-Core: attention ran
# unfused, and each pipeline send was split over the tensor-parallel ranks (scatter/gather,
# SC21 section 4.1, on by default). A later row whose script left the fused kernel off says
# so itself (fused_attention = false).
_EARLY_MEGATRON_SOURCES = ("megatron-2019", "megatron-sc21", "korthikanti-2022")


def point_config(point: TrainingPoint, system: System | None) -> TrainingConfig:
    """The layout a point ran at."""
    framework = str(point.get("framework", "")).lower()
    gpus = int(point.get("gpus"))
    tp = int(point.get("tp") or 1)
    sp = bool(point.get("sequence_parallel", False))
    return TrainingConfig(
        gpus=gpus,
        seq_len=int(point.get("seq_len")),
        global_batch=int(point.get("global_batch") or 0),
        micro_batch=int(point.get("micro_batch") or 1),
        tp=tp,
        pp=int(point.get("pp") or 1),
        cp=int(point.get("cp") or 1),
        ep=int(point.get("ep") or 1),
        etp=int(point.get("etp") or 0),
        vpp=int(point.get("vpp") or 1),
        sequence_parallel=sp,
        zero=int(point.get("zero", 1)),
        dp_shard=int(point.get("dp_shard") or 0),
        outer_optimizer_sharding=bool(point.get("outer_optimizer_sharding", False)),
        # the frameworks' default, where the run has the sequence parallelism it needs (or
        # no tensor parallelism, where it does nothing)
        tp_comm_overlap=bool(point.get("tp_comm_overlap", any(
            f in framework for f in _TP_OVERLAP_FRAMEWORKS) and (sp or tp == 1))),
        fsdp_prefetch=bool(point.get("fsdp_prefetch", False)),
        reshard_after_forward=bool(point.get("reshard_after_forward", True)),
        moe_token_drop=bool(point.get("moe_token_drop", False)),
        cuda_graphs=bool(point.get("cuda_graphs", False)),
        cuda_graph_scope=tuple(point.get("cuda_graph_scope", ())),
        dispatcher_wait_s=None if point.get("dispatcher_wait_us") is None
        else to_si(float(point.get("dispatcher_wait_us")), Unit.US),
        ep_dispatcher=str(point.get("ep_dispatcher", EP_DISPATCHERS[0])),
        cp_comm_type=str(point.get("cp_comm_type", CP_COMM_TYPES[0])),
        expert_launches=str(point.get("expert_launches", EXPERT_LAUNCHES[0])),
        ep_comm_overlap=bool(point.get("ep_comm_overlap", False)),
        pp_comm_overlap=bool(point.get("pp_comm_overlap", True)),
        pp_scatter_gather=point.source in _EARLY_MEGATRON_SOURCES,
        pp_edge_layers=bool(point.get("pp_edge_layers", False)),
        pp_layout=str(point.get("pp_layout", "")),
        pp_schedule=str(point.get("pp_schedule", PP_SCHEDULES[0])),
        mtp_layers=int(point.get("mtp_layers", 0)),
        mtp_shared_weights=bool(point.get("mtp_shared_weights", False)),
        fused_attention=bool(point.get("fused_attention",
                                       point.source not in _EARLY_MEGATRON_SOURCES)),
        attention_kernel=str(point.get("attention_kernel", "native")),
        recompute=Recompute(point.get("recompute", "none")),
        recompute_modules=tuple(point.get("recompute_modules", ())),
        recompute_layers=int(point.get("recompute_layers", 0)),
        precision=Precision(point.get("precision", "bf16")),
        gpus_per_node=int(point.get("gpus_per_node")
                          or (system.gpus_per_node if system else 8)),
        offload_layers=int(point.get("offload_layers", 0)),
        offload_modules=tuple(point.get("offload_modules", ())),
        offload_min_elements=int(point.get("offload_min_elements", DEFAULT_MIN_ELEMENTS)),
        fp8_params=bool(point.get("fp8_params", False)),
        bf16_grads=bool(point.get("bf16_grads", False)),
        bf16_optimizer=bool(point.get("bf16_optimizer", False)),
        lora_rank=int(point.get("lora_rank", 0)),
        lora_modules=tuple(point.get("lora_modules", ())),
        packed_doc_len=int(point.get("packed_doc_len", 0)),
        fp8_attention=bool(point.get("fp8_attention", False)),
        fp8_attention_scaling=str(point.get("fp8_attention_scaling", "")),
        fp8_recipe=str(point.get("fp8_recipe", "tensor")),
        bf16_layers_start=int(point.get("bf16_layers_start", 0)),
        bf16_layers_end=int(point.get("bf16_layers_end", 0)),
        mtp_bf16=bool(point.get("mtp_bf16", False)),
        moe_imbalance=float(point.get("moe_imbalance") or 1.0),
        optimizer_offload=float(point.get("optimizer_offload") or 0.0),
        optimizer_offload_overlap=bool(point.get("optimizer_offload_overlap", False)),
    )


def published_tokens_per_s_per_gpu(point: TrainingPoint, shape: TransformerShape,
                                   peak: float) -> tuple[float, str]:
    """The point's throughput in tokens/s per GPU, and which printed figure it came from."""
    gpus = point.get("gpus")
    seq = point.get("seq_len")
    if point.get("tokens_per_s_per_gpu"):
        return float(point.get("tokens_per_s_per_gpu")), "tokens/s per GPU"
    if point.get("tokens_per_s"):
        return float(point.get("tokens_per_s")) / gpus, "tokens/s"
    if point.get("step_time_s") and point.get("global_batch"):
        tokens = point.get("global_batch") * seq
        return tokens / point.get("step_time_s") / gpus, "step time"
    fwd = forward_flops_per_token(shape, seq)
    model = 3.0 * fwd.total
    recompute = point.get("recompute", "none")
    megatron_hfu = (4.0 if recompute == "full" else 3.0) * (fwd.total - fwd.lm_head) \
        + 3.0 * fwd.lm_head
    if point.get("tflops_per_gpu"):
        convention = point.get("tflops_convention")
        if convention == "megatron-hfu":
            per_token = megatron_hfu
        elif convention == "megatron-causal":
            # Megatron-LM's count since it halves the causal attention core (its
            # num_floating_point_operations): the model's FLOPs with each query seeing half
            # the sequence on average, and the MTP blocks the run trains (that count adds
            # them; the Megatron Core MoE report's DeepSeek-V3 rows print 259.9-260.4
            # GFLOP a token, this 260.6 with its one block, 250.5 without)
            per_token = 3.0 * (forward_flops_per_token(shape, seq, causal=True).total
                               + int(point.get("mtp_layers", 0))
                               * mtp_forward_flops_per_token(shape, seq, causal=True))
        else:
            per_token = model
        return to_si(point.get("tflops_per_gpu"), Unit.TFLOPS) / per_token, \
            f"TFLOP/s per GPU ({point.get('tflops_convention') or 'unspecified'})"
    if point.get("mfu"):
        return point.get("mfu") * peak / model, "MFU"
    if point.get("hfu"):
        return point.get("hfu") * peak / megatron_hfu, "HFU"
    raise GpuarchError(f"point {point.id}: no throughput figure")


@dataclass(frozen=True)
class TrainingComparison:
    """One point: published vs predicted tokens/s per GPU."""

    id: str
    source: str
    where: str
    model: str
    gpu: str
    gpus: int
    layout: str
    precision: str
    published_from: str
    published: float
    predicted: float
    out_of_sample: bool = False  # added after the parameters it tests were fitted
    # the prediction's step time and where it goes (``validate --explain``)
    explain: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    memory: MemoryFit = field(default_factory=MemoryFit)
    # the training framework's family (``framework_family`` of the point's framework text)
    framework: str = ""

    @property
    def error(self) -> float:
        """Signed relative error of the prediction."""
        return self.predicted / self.published - 1.0


ValidationSummary = ErrorSummary
"""Training comparisons: the issue's per-point bound is 20%."""


def memory_fit(point: TrainingPoint, doc: Mapping[str, Any]) -> MemoryFit:
    """An estimate's memory per GPU (its JSON) against the GPU's, with the point's account
    of why a run that ran does not fit, if it has one."""
    return MemoryFit(doc["memory_per_gpu_gib"]["total"], doc["gpu_memory_gib"],
                     bool(doc["fits_in_memory"]), str(point.get("memory_exception", "")))


@dataclass(frozen=True)
class PointEstimate:
    """A point's run as the model sees it: the model trained, the GPU, the layout and the
    estimate at that layout."""

    shape: TransformerShape
    product: Product
    config: TrainingConfig
    estimate: TrainingEstimate


def estimate_point(catalog: Catalog, point: TrainingPoint, efficiency: Efficiency
                   ) -> PointEstimate:
    """The model's estimate of a point's run at its layout (raises GpuarchError when it
    cannot be modelled: no global batch, a system that does not hold the GPU, an unknown
    routing)."""
    if not point.get("global_batch"):
        raise GpuarchError("the source does not publish the global batch, which sets the "
                           "micro-batches per step")
    product = catalog.product(point.get("gpu"))
    # a row's gpu_link ("pcie4": cards without an NVLink bridge) replaces the GPUs' NVLink
    system = catalog.system_with_link(product, point_system(catalog, point, product),
                                      point.get("gpu_link"))
    network = point.get("network_bandwidth_per_gpu_gbit_s")
    if network is not None and system is not None:
        # a cluster's own scale-out network on a reference system's nodes (its source cited
        # in the row's notes), as advise --network assumes one
        system = system.with_network(network, "the run's cluster")
    shape = point_shape(point)
    cfg = point_config(point, system)
    routing = point.get("moe_routing", MOE_ROUTINGS[0])
    check_choice(f"point {point.id}: moe_routing", routing, MOE_ROUTINGS)
    if routing == MOE_ROUTINGS[1]:  # unbalanced
        if point.get("moe_imbalance") is not None:
            raise GpuarchError(f"point {point.id}: moe_routing = 'unbalanced' computes the "
                               "busiest rank's load; give it or moe_imbalance, not both")
        cfg = dataclasses.replace(cfg, moe_imbalance=unbalanced_routing_load(
            shape, cfg.ep, efficiency))
    est = estimate_training(catalog, shape, product, cfg, system=system,
                            efficiency=efficiency)
    return PointEstimate(shape, product, cfg, est)


def compare_point(catalog: Catalog, point: TrainingPoint, efficiency: Efficiency
                  ) -> TrainingComparison:
    """Predict one point (raises GpuarchError when it cannot be modelled, or when the data
    file marks it ``excluded`` with the reason: its source's own figures disagree, or the
    measured run is not stationary)."""
    point.refuse_excluded()
    run = estimate_point(catalog, point, efficiency)
    shape, product, cfg, est = run.shape, run.product, run.config, run.estimate
    published, origin = published_tokens_per_s_per_gpu(point, shape, est.matmul_peak_flops)
    layout = f"TP{cfg.tp} PP{cfg.pp} CP{cfg.cp} DP{cfg.dp}" + (
        f" EP{cfg.ep}" if cfg.ep > 1 else "") + (f" VPP{cfg.vpp}" if cfg.vpp > 1 else "") + (
        " laid out" if cfg.pp_layout else "") + (f" MTP{cfg.mtp_layers}" if cfg.mtp_layers else "")
    if any(cfg.bf16_layers):
        layout += " BF16 first {} last {}".format(*cfg.bf16_layers)
    if cfg.pp_schedule != PP_SCHEDULES[0]:
        layout += f" {cfg.pp_schedule}"
    if cfg.moe_imbalance > 1:
        layout += f" busiest {cfg.moe_imbalance:g}x"
    doc = est.as_json()
    explain = {k: doc[k] for k in ("step_time_s", "time_breakdown_s", "compute_breakdown_s",
                                   "communication_breakdown_s", "bottleneck")}
    return TrainingComparison(point.id, point.source, point.where, shape.name, product.key,
                              cfg.gpus, layout, cfg.precision.value, origin, published,
                              est.tokens_per_s_per_gpu,
                              bool(point.get("out_of_sample", False)), explain,
                              memory_fit(point, doc),
                              framework_family(str(point.get("framework") or "")))


TRAINING_BOUND = 0.20
"""Issue #3's per-point bound: no training run beyond 20%."""


def validate_training(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY,
                      points: Iterable[TrainingPoint] | None = None) -> ValidationSummary:
    """Compare every point that can be modelled; the rest are listed with the reason."""
    return summarize(points if points is not None else load_training_points(),
                     lambda p: [compare_point(catalog, p, efficiency)], bound=TRAINING_BOUND)
