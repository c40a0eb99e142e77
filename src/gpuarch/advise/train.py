"""Training advice: search GPU type x count x parallelism x precision, rank by time, cost
and energy, keep the Pareto front, explain the choice.

The search evaluates ``estimate.training_step.evaluate_training`` -- the estimate's own step
model -- over NumPy arrays: for each GPU and each combination of the categorical choices
(precision, recomputation, ZeRO stage, sequence parallelism), all integer layouts (GPUs,
TP, PP, CP, EP, virtual stages, micro-batch) are one array, filtered by the same divisibility
rules ``TrainingConfig.validate`` applies, in chunks so memory stays bounded.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from gpuarch.advise.candidates import candidate_gpus
from gpuarch.advise.prices import PriceBook
from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System, Tier
from gpuarch.errors import GpuarchError, check_choice
from gpuarch.estimate.activation_offload import ATTENTION_MODULES, expert_modules, offload_tag
from gpuarch.estimate.energy import DEFAULT_FACILITY, Facility, energy_kwh, facility_power_w
from gpuarch.estimate.host_link import product_host_link
from gpuarch.estimate.lora import DEFAULT_LORA_MODULES, lora_params
from gpuarch.estimate.memory import Recompute
from gpuarch.estimate.pipeline_layout import even_segments
from gpuarch.estimate.pipeline_schedule import PP_SCHEDULES, schedule_runs
from gpuarch.estimate.reliability import CheckpointPlan, expected_interruptions, expected_wall_time
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig, named_recompute_modules
from gpuarch.estimate.training_layers import LayerCosts, layer_costs, ranks_per_node
from gpuarch.estimate.training_step import evaluate_training
from gpuarch.perf.collectives import Link, link_for
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.precision import Precision, matmul_peak, sixteen_bit
from gpuarch.perf.roofline import Device
from gpuarch.units import Unit, from_si, from_si_array, to_si
from gpuarch.validation.bands import FRAMEWORKS, bands_by_architecture
from gpuarch.validation.nearest import nearest, setup_for
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import MAX_DIMENSION, TransformerShape

__all__ = ["Objective", "TrainingAdvice", "TrainingOption", "TrainingSearch", "advise_training",
           "pareto_mask"]

CHUNK = 200_000
"""Configurations evaluated per array (bounds memory however large the space)."""

MOE_DISPATCHER = "deepep"
ZERO_STAGES = ((0, False), (1, False), (2, False), (3, False), (3, True))
"""The ZeRO variants every layout is costed under, as (stage, ZeRO-3 prefetch): stages 0-3,
and ZeRO-3 with each layer's parameters gathered a layer ahead (Megatron-FSDP)."""
HYBRID_STAGES = ((3, True),)
"""The variants costed under hybrid sharding (HSDP) where a layout has it
(``_hybrid_groups``): ZeRO-3 inside each node's data-parallel ranks, the nodes' groups
replicas of each other, with each layer's parameters gathered a layer ahead, as PyTorch
FSDP2 and Megatron-FSDP do by default (the unprefetched variant too made the default
search about a fifth slower; ``estimate train --dp-shard`` costs either)."""
"""The expert dispatcher every option assumes: one that sends a token once per destination
node and GPU (DeepEP, HybridEP; Megatron's flex dispatcher), which the current Megatron
Bridge MoE recipes use and which never moves more than the plain all-to-all. (It changes
nothing for dense models.)"""


class Objective(Enum):
    """What to minimise."""

    TIME = "time"
    COST = "cost"
    ENERGY = "energy"


MAX_TOP = 1000
"""The most configurations a search lists (--top): each is explained in full."""

MAX_SEARCH_GPUS = 131_072
"""The most GPUs a training search may go up to: it costs every power of two and every
whole-node count up to the limit (8,192 takes about 40 s on a 2-core machine)."""


TP_COMM_VARIANTS = ((False, False), (True, False), (True, True))
"""The (sequence parallelism, TP overlap) pairs searched: Megatron's userbuffers overlap
runs only with sequence parallelism (Megatron-LM's arguments check refuses it otherwise)."""


@dataclass(frozen=True)
class TrainingSearch:
    """The space and the constraints of a search."""

    tokens: float
    seq_len: int = 4096
    global_batch_tokens: float = 4 * 2**20  # ~4M tokens per step
    max_gpus: int = 1024
    gpus: tuple[str, ...] = ()  # product keys; empty = every datacenter GPU with a system
    tiers: tuple[Tier, ...] = (Tier.DATACENTER,)
    budget_usd: float | None = None
    deadline_days: float | None = None
    max_power_kw: float | None = None
    objective: Objective = Objective.TIME
    precisions: tuple[Precision, ...] = (Precision.BF16, Precision.FP8)
    top: int = 10
    assumed_network_gbit_s: float | None = None  # per GPU, where the catalog gives none
    mtp_layers: int = 0  # multi-token-prediction blocks, on the last pipeline stage
    # LoRA fine-tuning (TrainingConfig.lora_rank, lora_modules): 0 = every weight trained
    lora_rank: int = 0
    lora_modules: tuple[str, ...] = ()
    packed_doc_len: int = 0  # attention inside packed documents of this length (0: none)
    # how the run checkpoints (estimate.reliability): each option's time then includes its
    # saves, the work its interruptions lose and its restarts; None = failure-free time
    checkpointing: CheckpointPlan | None = None
    # optimizer CPU offload of every option with a distributed optimizer (ZeRO 1-3;
    # TrainingConfig.optimizer_offload): 0 = none
    optimizer_offload: float = 0.0
    # fine-grained activation offloading of every option (TrainingConfig.offload_modules,
    # Megatron-Core's module names): () = the search's own variants (_offload_variants)
    offload_modules: tuple[str, ...] = ()
    # the pipeline schedule of every option with a pipeline (PP_SCHEDULES); the layouts
    # searched are those it can run
    pp_schedule: str = "1f1b"
    # the node and data centre around the GPUs: energy and the power cap
    facility: Facility = DEFAULT_FACILITY
    # the training framework's family the user runs (validation.bands.FRAMEWORKS' key): the
    # error bands and the nearest published runs are that family's first; "" every one's
    framework: str = ""


@dataclass(frozen=True)
class TrainingOption:
    """One configuration that satisfies the constraints."""

    gpu: str
    gpu_name: str
    system: str | None
    gpus: int
    tp: int
    pp: int
    cp: int
    ep: int
    vpp: int
    micro_batch: int
    global_batch: int
    zero: int
    recompute: str
    sequence_parallel: bool
    tp_comm_overlap: bool
    precision: str
    step_time_s: float
    tokens_per_s: float
    mfu: float
    memory_per_gpu_gib: float
    time_days: float
    cost_usd: float | None
    energy_mwh: float | None
    power_kw: float | None
    price_usd_per_gpu_hour: float | None
    pareto: bool = False
    bottleneck: str | None = None
    reason: str | None = None
    # unexpected interruptions at the Llama 3 pre-training rate (estimate.reliability)
    expected_interruptions: float = 0.0
    fsdp_prefetch: bool = False  # ZeRO-3 gathers prefetched a layer ahead (Megatron-FSDP)
    # hybrid sharding (TrainingConfig.dp_shard): ZeRO-3 inside groups of this many DP x CP
    # ranks (a node's), the groups replicas of each other; 0 = over all of them
    dp_shard: int = 0
    # fine-grained activation offloading (TrainingConfig.offload_modules): () = none
    offload_modules: tuple[str, ...] = ()

    @property
    def recompute_label(self) -> str:
        """The recomputation, with '+off:' and what goes to host memory where activations
        are offloaded (``activation_offload.offload_tag``: moe, attn, or the modules)."""
        return self.recompute + (f"+off:{offload_tag(self.offload_modules)}"
                                 if self.offload_modules else "")

    @property
    def zero_label(self) -> str:
        """The ZeRO stage, '3+pf' when ZeRO-3 prefetches each layer's parameters, and
        '/N' when it shards inside groups of N ranks (hybrid sharding)."""
        label = f"{self.zero}+pf" if self.fsdp_prefetch else str(self.zero)
        return f"{label}/{self.dp_shard}" if self.dp_shard else label


@dataclass(frozen=True)
class TrainingAdvice:
    """The ranked options, the Pareto front, what was searched and what was assumed."""

    model: str
    tokens: float
    objective: str
    top: tuple[TrainingOption, ...]
    pareto: tuple[TrainingOption, ...]
    evaluated: int
    feasible: int
    skipped: tuple[tuple[str, str], ...]
    assumptions: dict[str, Any] = field(default_factory=dict)
    per_gpu: tuple[TrainingOption, ...] = ()  # the best option on each GPU, best first
    # configurations each constraint ruled out (one can fail several): "memory" (does not
    # fit in the GPU's memory), "deadline", "budget", "power"; only those that ruled any out
    rejected: dict[str, int] = field(default_factory=dict)
    # the configuration closest to fitting, for an answer that none fits: its GPU and the
    # memory per GPU it needs against the GPU's (GiB)
    least_memory: dict[str, Any] = field(default_factory=dict)
    # over the configurations that fit in memory, each constraint's best value on its own
    # ("days", "usd", "power_kw"), to say how far a missed constraint is from being met
    best_fitting: dict[str, float] = field(default_factory=dict)


def keeps_fp8_weights(precision: Precision) -> bool:
    """Whether an option keeps its weights in FP8: FP8 options do, as Megatron Bridge's FP8
    recipes set fp8_param_gather."""
    return precision is Precision.FP8


def _pow2(limit: int) -> list[int]:
    return [2**i for i in range(0, 32) if 2**i <= limit]


def _layouts(shape: TransformerShape, search: TrainingSearch, gpn: int, multi_node: bool
             ) -> dict[str, np.ndarray]:
    """All integer layouts for one GPU type, as parallel arrays, already valid."""
    # powers of two, and whole nodes (3 nodes of 8 is a common allocation too)
    counts = sorted({g for g in _pow2(search.max_gpus) + list(range(gpn, search.max_gpus + 1,
                                                                      gpn))
                     if multi_node or g <= gpn})
    # a hybrid Mamba-2 model's pipelines split its blocks evenly (Megatron-Core's split
    # without '|' segments; interleaved, its pattern cut into PP x VPP equal '|' segments),
    # and its Mamba-2 heads and groups split evenly over TP x CP (checked on the grid below)
    tps = [t for t in _pow2(gpn) if shape.splits_heads(t)]
    # (shared transformer blocks, Zamba's, and looped layers: no pipeline, see
    # TransformerShape.check_pipeline)
    pps = [p for p in _pow2(64) if p <= shape.layers and (
        not shape.is_hybrid or len(shape.hybrid_pattern) % p == 0)
        and (p == 1 or not shape.one_stage)]
    # (Inkling's relative bias and short convolutions: no context parallelism)
    cps = [c for c in (1, 2, 4, 8) if search.seq_len % c == 0 and
           (c == 1 or search.seq_len >= 16384)
           and (c == 1 or not (shape.relative_bias or shape.short_conv_taps))]
    eps = [e for e in _pow2(64) if (not shape.is_moe and e == 1) or
           (shape.is_moe and shape.experts % e == 0)]
    vpps = [1, 2, 4]
    mbs = [1, 2, 4, 8]
    grid = np.array(list(itertools.product(counts, tps, pps, cps, eps, vpps, mbs)),
                    dtype=np.int64)
    gpus, tp, pp, cp, ep, vpp, mb = grid.T
    mp = tp * pp * cp
    target = max(1, round(search.global_batch_tokens / search.seq_len))
    dp = gpus // mp
    ok = (gpus % mp == 0) & (dp >= 1)
    if shape.mamba is not None:
        ok &= (shape.mamba.heads % (tp * cp) == 0) & (shape.mamba.groups % (tp * cp) == 0)
    # the global batch: the multiple of DP x micro-batch nearest the target, kept within
    # -20% / +25% of it (a batch far from the target changes the training recipe)
    unit = np.maximum(dp * mb, 1)
    gb = np.maximum(unit, np.round(target / unit).astype(np.int64) * unit)
    ok &= (gb >= 0.8 * target) & (gb <= 1.25 * target)
    ok &= shape.layers >= pp * vpp
    ok &= (vpp == 1) | (pp > 1)
    if shape.is_hybrid:
        ok &= len(shape.hybrid_pattern) % (pp * vpp) == 0
    ok &= ((dp * cp) % ep == 0)
    ok &= schedule_runs(search.pp_schedule, pp, vpp, gb // unit)
    keep = np.flatnonzero(ok)
    if shape.is_hybrid:  # one pipeline split after another (_chunks)
        keep = keep[np.lexsort((vpp[keep], pp[keep]))]
    return {"gpus": gpus[keep], "tp": tp[keep], "pp": pp[keep], "cp": cp[keep],
            "ep": ep[keep], "vpp": vpp[keep], "mb": mb[keep], "gb": gb[keep]}


def _chunks(layouts: dict[str, np.ndarray], *, by_pp: bool, size: int = CHUNK
            ) -> Iterator[tuple[slice, dict[str, np.ndarray]]]:
    """The layouts in chunks of at most ``size``; with ``by_pp``, each chunk of one PP and
    VPP (a hybrid model's pipeline ranks are costed from one split of its blocks; its
    layouts come sorted by them)."""
    pp, vpp = layouts["pp"], layouts["vpp"]
    cuts = [0, *(np.flatnonzero((pp[1:] != pp[:-1]) | (vpp[1:] != vpp[:-1])) + 1
                 if by_pp else []), len(pp)]
    for first, end in itertools.pairwise(cuts):
        for start in range(first, end, size):
            part = slice(start, min(start + size, end))
            yield part, {k: v[part] for k, v in layouts.items()}


def advise_training(
    catalog: Catalog,
    shape: TransformerShape,
    search: TrainingSearch,
    prices: PriceBook,
    *,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    progress: Callable[[int, int, str], None] | None = None,
) -> TrainingAdvice:
    """Search, filter, rank and explain."""
    _check_search(shape, search)
    tally = _Tally()
    # what a checkpoint holds: each trained parameter's weight and optimizer state
    trained_params = float(lora_params(shape, search.lora_rank, search.lora_modules
                                       or DEFAULT_LORA_MODULES).total
                           if search.lora_rank else count_params(shape).total)
    candidates = candidate_gpus(catalog, search.gpus, search.tiers)
    if not candidates:
        raise GpuarchError("--gpu: no GPU to search (check the names or --tier)")
    stages = len(ZERO_STAGES) + len(HYBRID_STAGES)
    # ZeRO innermost: its stages share a layout chunk's layer costing
    variants = list(itertools.product(search.precisions, list(Recompute), TP_COMM_VARIANTS))
    combos = len(variants) * stages
    total = len(candidates) * combos
    done = 0
    for product, system in candidates:
        price = prices.price(product.key)
        searched = _searchable(catalog, product, system, search, price, tally)
        if searched is None:
            done += combos
            if progress:
                progress(done, total, product.name)
            continue
        system, intra, inter = searched
        host_link = product_host_link(catalog, product)
        plan = search.checkpointing
        if plan is not None and plan.asynchronous and not host_link:
            tally.skipped.append((product.key, "--checkpoint-async: no catalogued link to "
                                               "the host to time the copy a save stops "
                                               "training for"))
            continue
        gpn = system.gpus_per_node if system else 8
        layouts = _layouts(shape, search, gpn, multi_node=inter is not None)
        gen = catalog.chip_of(product).sm.tensor_core_generation
        runs = _precisions_run(product, search, tally)
        for wanted, recompute, (sp, overlap) in variants:
            done += stages
            if progress:
                progress(done, total, product.name)
            if wanted not in runs:
                continue
            precision = runs[wanted]
            device = Device.of(product, precision, gen)
            lay = layouts
            if sp:  # it (and the TP overlap) acts on tensor-parallel communication only
                keep = lay["tp"] > 1
                lay = {k: v[keep] for k, v in lay.items()}
            elif shape.is_moe:
                # Megatron-Core trains an MoE layer at TP > 1 only with sequence parallelism
                # (MoELayer.forward refuses it otherwise): those layouts take the SP variant
                keep = lay["tp"] == 1
                lay = {k: v[keep] for k, v in lay.items()}
            common: dict[str, Any] = {
                "seq_len": search.seq_len, "sequence_parallel": sp,
                "tp_comm_overlap": overlap, "recompute": recompute,
                "recompute_modules": named_recompute_modules(shape, recompute),
                "precision": precision,
                "gpus_per_node": gpn, "fp8_params": keeps_fp8_weights(precision),
                "ep_dispatcher": MOE_DISPATCHER, "mtp_layers": search.mtp_layers,
                "pp_schedule": search.pp_schedule,
                "optimizer_offload": search.optimizer_offload, **_fine_tuning(search)}
            offloads = _offload_variants(shape, search, recompute, host_link)
            # a hybrid's layouts come in a chunk per pipeline split; their layers cost the
            # same whatever the split, so they are costed once for all of them
            shared = (layer_costs(shape, device, intra, inter,
                                  TrainingConfig(**_layout_fields(lay), **common), efficiency)
                if shape.is_hybrid and 0 < len(lay["gpus"]) <= CHUNK else None)
            for span, chunk in _chunks(lay, by_pp=shape.is_hybrid, size=CHUNK // stages):
                # the chunk's layouts under every ZeRO variant, one call for the stages over
                # all of them and one for hybrid sharding over those it applies to
                # (_hybrid_groups); flat, variant by variant, the layouts in their order
                # within each; one shortlist over them all
                # (their layers' costing depends on neither the ZeRO variant nor the
                # offloading, which moves only activation memory and the host copies: made
                # once)
                layers = shared.take(span) if shared else layer_costs(
                    shape, device, intra, inter, layout_config(shape, chunk, common),
                    efficiency)
                group = _hybrid_groups(shape, chunk, gpn)
                inside = np.flatnonzero(group)
                for offload in offloads:
                    with_offload = {**common, "offload_modules": offload}
                    blocks = [_cost_variants(shape, product, device, intra, inter, efficiency,
                                             host_link, with_offload, chunk, ZERO_STAGES,
                                             layers)]
                    if len(inside):
                        blocks.append(_cost_variants(
                            shape, product, device, intra, inter, efficiency, host_link,
                            with_offload, {k: v[inside] for k, v in chunk.items()},
                            HYBRID_STAGES, layers.take(inside), shards=group[inside],
                            first=len(ZERO_STAGES)))
                    flat = {k: np.concatenate([b[0][k] for b in blocks])
                            for k in blocks[0][0]}
                    run = _RunPricing(product, price, search, host_link, trained_params,
                                      blocks[0][1].param_bytes)
                    row = run.keep(flat, tally)
                    if row is None:
                        continue
                    n = len(row["gpus"])
                    tally.rows.append({
                        "key": np.array([product.key] * n, dtype=object),
                        **{k: row[k] for k in ("gpus", "tp", "pp", "cp", "ep", "vpp", "mb",
                                               "gb", "zero", "prefetch", "shard")},
                        "recompute": np.array([recompute.value] * n, dtype=object),
                        "sp": np.full(n, sp),
                        "offload": np.array([",".join(offload)] * n, dtype=object),
                        "overlap": np.full(n, overlap),
                        "precision": np.array([precision.value] * n, dtype=object),
                        **{k: row[k] for k in ("step", "tps", "mfu", "mem", "time", "cost",
                                               "energy", "power")},
                        "price": np.full(n, np.nan if price is None else price),
                    })
    return _ranked(catalog, shape, search, prices, efficiency, tally)


@dataclass
class _Tally:
    """What a training search has met so far, over every GPU."""

    rows: list[dict[str, np.ndarray]] = field(default_factory=list)  # the shortlisted options
    evaluated: int = 0
    feasible: int = 0
    # the options each constraint ruled out, by the first they miss
    rejected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("memory", "interruptions", "deadline", "budget", "power"), 0))
    least: tuple[float, str, float, float] | None = None  # (share of memory, GPU, need, have)
    # over what fits memory: the least time, cost and power any option reached
    best_seen: dict[str, float] = field(default_factory=lambda: {
        "days": np.inf, "usd": np.inf, "power_kw": np.inf})
    assumed_network: list[str] = field(default_factory=list)
    single_node: list[str] = field(default_factory=list)
    systems: dict[str, System | None] = field(default_factory=dict)  # each GPU's system
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _check_search(shape: TransformerShape, search: TrainingSearch) -> None:
    """Usage errors of a training search, named by their flags."""
    if not 1 <= search.max_gpus <= MAX_SEARCH_GPUS:
        raise GpuarchError(f"--max-gpus: expected an integer from 1 to {MAX_SEARCH_GPUS:,}, "
                           f"got {search.max_gpus}")
    if not 1 <= search.top <= MAX_TOP:
        raise GpuarchError(f"--top: expected an integer from 1 to {MAX_TOP:,}, got "
                           f"{search.top}")
    if not 1 <= search.seq_len <= MAX_DIMENSION:
        raise GpuarchError(f"--seq-len: expected an integer from 1 to {MAX_DIMENSION:,}, got "
                           f"{search.seq_len}")
    if not 0 <= search.mtp_layers <= shape.layers:
        raise GpuarchError(f"--mtp-layers: expected an integer from 0 to {shape.layers} (the "
                           f"model's layers), got {search.mtp_layers}")
    # the fine-tuning settings are every option's: checked once, as a scalar estimate would
    TrainingConfig(gpus=1, seq_len=search.seq_len, global_batch=1,
                   lora_rank=search.lora_rank, lora_modules=search.lora_modules,
                   packed_doc_len=search.packed_doc_len, mtp_layers=search.mtp_layers,
                   optimizer_offload=search.optimizer_offload,
                   offload_modules=search.offload_modules).validate(shape)
    check_choice("--pp-schedule", search.pp_schedule, PP_SCHEDULES)
    if search.framework:
        check_choice("--framework", search.framework, tuple(FRAMEWORKS))


def _searchable(catalog: Catalog, product: Product, system: System | None,
                search: TrainingSearch, price: float | None, tally: _Tally
                ) -> tuple[System | None, Link, Link | None] | None:
    """A GPU's system (with the assumed network where it has none and --network gives
    one) and links, or None where it cannot be searched (said in ``tally.skipped``)."""
    if price is None and search.objective is Objective.COST:
        tally.skipped.append((product.key, "no price in the price book (give --price)"))
        return None
    pcie = catalog.pcie_generation(product.pcie_generation or 0)
    try:
        intra, inter = link_for(product, system, pcie.x16_bandwidth_bytes_s if pcie else None)
    except GpuarchError:
        tally.skipped.append((product.key, "no GPU-to-GPU bandwidth in the catalog"))
        return None
    if inter is None and system is not None and search.assumed_network_gbit_s:
        gbit = search.assumed_network_gbit_s
        system = system.with_network(gbit, "assumed (--network)")
        intra, inter = link_for(product, system, None)
        tally.assumed_network.append(product.key)
    elif inter is None:
        tally.single_node.append(product.key)
    tally.systems[product.key] = system
    return system, intra, inter


def _precisions_run(product: Product, search: TrainingSearch, tally: _Tally
                    ) -> dict[Precision, Precision]:
    """Each searched precision and what the GPU runs it as: BF16 is FP16 on a GPU without
    it (before Ampere), as frameworks run it there; a precision the Tensor Cores do not run
    (FP8 before Hopper) is not searched (said in ``tally.skipped`` where none is left)."""
    runs = {p: sixteen_bit(product) if p is Precision.BF16 else p
            for p in search.precisions}
    runs = {p: own for p, own in runs.items()
            if (peak := matmul_peak(product, own)) is not None
            and peak.fallback_reason is None
            and (own is p or own not in search.precisions)}
    if not runs:
        tally.skipped.append((product.key, "runs none of the precisions searched ("
                              + ", ".join(p.value for p in search.precisions)
                              + ") on its Tensor Cores"))
    return runs


@dataclass(frozen=True)
class _RunPricing:
    """How a chunk of costed options on one GPU become runs: time, cost, energy and power
    for the search's tokens, checkpoints and restarts included where planned."""

    product: Product
    price: float | None
    search: TrainingSearch
    host_link: float | None
    trained_params: float
    param_bytes: Any  # the chunk's bytes per parameter (TrainingConfig.param_bytes)

    def keep(self, flat: dict[str, np.ndarray], tally: _Tally
             ) -> dict[str, np.ndarray] | None:
        """The options of ``flat`` (``_cost_variants``' columns) that fit and meet every
        constraint, shortlisted, with their time, cost, energy and power; what they miss is
        counted in ``tally``. None where none is left."""
        product, price, search = self.product, self.price, self.search
        step, tokens_per_s, hfu, memory = (flat[k] for k in ("step", "tps", "hfu", "mem"))
        tally.evaluated += len(step)
        fits = memory <= product.memory_bytes
        tally.rejected["memory"] += int(np.count_nonzero(~fits))
        need = float(np.min(memory))
        if tally.least is None or need / product.memory_bytes < tally.least[0]:
            tally.least = (need / product.memory_bytes, product.key, need,
                           float(product.memory_bytes))
        seconds = search.tokens / tokens_per_s
        gpu_hours = from_si_array(seconds, Unit.HOUR) * flat["gpus"]
        cost = (gpu_hours * price if price is not None else np.full_like(seconds, np.nan))
        energy = (energy_kwh(product.tdp_w, hfu, flat["gpus"], seconds, search.facility)
                  if product.tdp_w else np.full_like(seconds, np.nan))
        power_w = (facility_power_w(product.tdp_w, flat["gpus"], search.facility)
                   if product.tdp_w else np.full_like(seconds, np.nan))
        plan = search.checkpointing
        if plan is not None:
            # the run's wall time with saves, lost work and restarts (GPU-hours and cost
            # with it: the GPUs are held throughout; energy stays the training's own)
            size = self.trained_params * (self.param_bytes.weights
                                          + self.param_bytes.optimizer)
            write = size / plan.write_bytes_s
            save = (size / flat["gpus"] / self.host_link
                    if plan.asynchronous and self.host_link else write)
            seconds = expected_wall_time(plan, flat["gpus"], seconds, step, save,
                                         write).wall_s
            gpu_hours = from_si_array(seconds, Unit.HOUR) * flat["gpus"]
            cost = (gpu_hours * price if price is not None
                    else np.full_like(seconds, np.nan))
            finishes = np.isfinite(seconds)
            tally.rejected["interruptions"] += int(np.count_nonzero(fits & ~finishes))
            fits = fits & finishes
        if fits.any():
            for name, values in (("days", seconds), ("usd", cost), ("power_kw", power_w)):
                tally.best_seen[name] = min(tally.best_seen[name], float(np.nanmin(
                    np.where(fits, values, np.inf), initial=np.inf)))
        ok = fits
        for name, meets in _constraints(search, seconds, cost, power_w):
            tally.rejected[name] += int(np.count_nonzero(~meets))
            ok &= meets
        sel = np.nonzero(ok)[0]
        if not len(sel):
            return None
        tally.feasible += len(sel)
        kept_rows = {
            **{k: flat[k][sel] for k in ("gpus", "tp", "pp", "cp", "ep", "vpp", "mb", "gb")},
            **{k: flat[k][sel] for k in ("zero", "prefetch", "shard", "step", "tps", "mfu",
                                         "mem")},
            "time": np.asarray(seconds)[sel],
            "cost": np.asarray(cost)[sel],
            "energy": np.asarray(energy)[sel],
            "power": np.asarray(power_w)[sel]}
        # the same GPU at the same price, so what one shortlist keeps is what shortlisting
        # each stage alone would need (copies: the stages with a row)
        idx = _shortlist(kept_rows["time"], kept_rows["cost"], kept_rows["energy"], search,
                         kept_rows["gpus"], copies=len(np.unique(flat["variant"][sel])))
        return {k: v[idx] for k, v in kept_rows.items()}


def _ranked(catalog: Catalog, shape: TransformerShape, search: TrainingSearch,
            prices: PriceBook, efficiency: Efficiency, tally: _Tally) -> TrainingAdvice:
    """The search's options ranked by its objective, the Pareto front, the best on each GPU,
    each explained, and what was assumed."""
    ruled_out = {name: n for name, n in tally.rejected.items() if n}
    units = {"days": Unit.DAY, "power_kw": Unit.KW}  # cost is in USD already
    best_fitting = {name: from_si(value, units[name]) if name in units else value
                    for name, value in tally.best_seen.items() if np.isfinite(value)}
    least = tally.least
    closest = ({"gpu": least[1], "needed_gib": from_si(least[2], Unit.GIB),
                "available_gib": from_si(least[3], Unit.GIB)} if least is not None else {})
    systems = tally.systems
    if not tally.rows:
        return TrainingAdvice(shape.name, search.tokens, search.objective.value, (), (),
                              tally.evaluated, 0, tuple(tally.skipped),
                              _assumptions(prices, search, tally.assumed_network,
                                           tally.single_node),
                              rejected=ruled_out, least_memory=closest,
                              best_fitting=best_fitting)
    table = {k: np.concatenate([r[k] for r in tally.rows]) for k in tally.rows[0]}
    table = _distinct(table)
    metric = {"time": table["time"], "cost": table["cost"], "energy": table["energy"]}
    score = np.nan_to_num(metric[search.objective.value], nan=np.inf)
    order = np.lexsort((table["time"], score))  # ties go to the faster plan
    front = set(np.nonzero(pareto_mask(np.stack(
        [table["time"], np.nan_to_num(table["cost"], nan=np.inf),
         np.nan_to_num(table["energy"], nan=np.inf)], axis=1)))[0].tolist())
    top = [_option(catalog, table, int(i), int(i) in front, systems) for i in order[: search.top]]
    pareto_opts = [_option(catalog, table, int(i), True, systems)
                   for i in sorted(front, key=lambda i: table["time"][i])]
    # the best option on each other GPU, for the comparison in the reasons
    rivals: dict[str, TrainingOption] = {}
    for i in order:
        key = str(table["key"][i])
        if key not in rivals:
            rivals[key] = _option(catalog, table, int(i), int(i) in front, systems)
    first = top[0]
    top = [_explain(catalog, shape, search, o, first, rivals, efficiency, systems) for o in top]
    per_gpu = [_explain(catalog, shape, search, o, first, rivals, efficiency, systems)
               for o in rivals.values()]
    pareto_opts = [_explain(catalog, shape, search, o, first, rivals, efficiency, systems)
                   for o in pareto_opts]
    assumptions = _assumptions(prices, search, tally.assumed_network, tally.single_node)
    if search.checkpointing is not None:
        plan = search.checkpointing
        assumptions["checkpointing"] = (
            "each option's time (and GPU-hours and cost with it) includes its checkpoints, "
            f"written at {from_si(plan.write_bytes_s, Unit.GB_S):,.0f} GB/s"
            + (" behind a copy to host memory" if plan.asynchronous else "")
            + ", the work lost to its interruptions at the Llama 3 run's rate and "
            f"{from_si(plan.restart_s, Unit.MINUTE):g} min plus the load per restart, at "
            + ("Young's optimum interval" if plan.interval_s is None
               else f"a checkpoint every {from_si(plan.interval_s, Unit.MINUTE):g} min")
            + " (gpuarch.estimate.reliability); energy is the training's alone")
    assumptions["error_bands"] = bands_by_architecture(
        "training", shape, (catalog.product(g) for g in rivals), engine=search.framework)
    best = top[0]
    assumptions["nearest_published"] = [f.as_json(d) for d, f in nearest(setup_for(
        "training", shape, catalog.product(best.gpu), best.gpus, best.precision, tp=best.tp,
        pp=best.pp, cp=best.cp, ep=best.ep, seq_len=search.seq_len,
        engine=search.framework))]
    return TrainingAdvice(shape.name, search.tokens, search.objective.value, tuple(top),
                          tuple(pareto_opts), tally.evaluated, tally.feasible,
                          tuple(tally.skipped), assumptions, tuple(per_gpu), ruled_out,
                          closest, best_fitting)


def _constraints(search: TrainingSearch, seconds: np.ndarray, cost: np.ndarray,
                 power_w: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Each constraint the search was given, by name, and which configurations meet it (a
    missing price or power figure meets none)."""
    out = []
    if search.deadline_days is not None:
        out.append(("deadline", seconds <= to_si(search.deadline_days, Unit.DAY)))
    if search.budget_usd is not None:
        out.append(("budget", np.nan_to_num(cost, nan=np.inf) <= search.budget_usd))
    if search.max_power_kw is not None:
        out.append(("power", np.nan_to_num(power_w, nan=np.inf)
                    <= to_si(search.max_power_kw, Unit.KW)))
    return out


def _assumptions(prices: PriceBook, search: TrainingSearch, assumed: list[str],
                 single: list[str]) -> dict[str, Any]:
    network: dict[str, Any] = {}
    if assumed:
        network["assumed_gbit_s_per_gpu"] = search.assumed_network_gbit_s
        network["assumed_for"] = assumed
    if single:
        network["one_node_only"] = single
    return {"network": network, "prices": prices.describe(),
            "node_overhead": search.facility.node_overhead, "pue": search.facility.pue,
            "mtp_layers": search.mtp_layers,
            "lora_rank": search.lora_rank or None,
            "lora_modules": (list(search.lora_modules or DEFAULT_LORA_MODULES)
                             if search.lora_rank else None),
            "packed_doc_len": search.packed_doc_len or None,
            "optimizer_offload": search.optimizer_offload or None,
            "offload_modules": list(search.offload_modules) or None,
            "pp_schedule": search.pp_schedule,
            "energy": "GPU board power at the modelled utilisation, plus node overhead, "
                      "times PUE (gpuarch.estimate.energy)",
            "model": "estimate.training_step.evaluate_training over arrays of configurations"}


def _shortlist(seconds: np.ndarray, cost: np.ndarray, energy: np.ndarray,
               search: TrainingSearch, gpus: np.ndarray, copies: int = 1) -> np.ndarray:
    """Of one chunk's feasible rows, the indices of those that can still make the answer: the
    best few by the objective and the chunk's Pareto front (the front of the union of the
    chunks' fronts is the whole front). Keeps the kept table small however large the space.
    A chunk is one GPU at one price, so among rows with the same GPU count cost rises with
    time; the rows another of their count beats on time and energy go before the full
    three-objective pass (``dominated_at_same_count``). ``copies``: how many variants of
    each layout the rows hold (the ZeRO stages), which can tie (at DP 1 every stage is the
    same plan): the best few are that many times as many rows, so as many distinct plans
    stay as for one variant."""
    points = np.stack([seconds, np.nan_to_num(cost, nan=np.inf),
                       np.nan_to_num(energy, nan=np.inf)], axis=1)
    column = {"time": 0, "cost": 1, "energy": 2}[search.objective.value]
    n = len(seconds)
    # spare rows for ties the final pass collapses
    k = min(n, copies * (4 * search.top + 8))
    best = np.argpartition(points[:, column], k - 1)[:k] if k < n else np.arange(k)
    rest = np.nonzero(~dominated_at_same_count(points[:, 0], points[:, 2], gpus))[0]
    front: np.ndarray = rest[pareto_mask(points[rest])]
    kept: np.ndarray = np.union1d(best, front)
    return kept


def dominated_at_same_count(time: np.ndarray, energy: np.ndarray, count: np.ndarray
                            ) -> np.ndarray:
    """Rows that a row with the same GPU count beats: no slower and strictly less energy.
    With cost rising with time among such rows (one GPU, one price), such a row dominates
    on all three objectives, so none of these is on the Pareto front; rows with equal
    energy are left to the full pass. Rows with a non-finite time or energy are never
    marked."""
    n = len(time)
    out = np.zeros(n, dtype=bool)
    finite = np.nonzero(np.isfinite(time) & np.isfinite(energy))[0]
    if len(finite) < 2:
        return out
    t, e, c = time[finite], energy[finite], count[finite]
    # by count, then time (two sorts: lexsort over three float keys is several times slower)
    order = np.argsort(t)
    order = order[np.argsort(c[order], kind="stable")]
    t, e, c = t[order], e[order], c[order]
    new_group = c[1:] != c[:-1]
    group = np.cumsum(np.r_[False, new_group])
    # each later count group shifted below every earlier one, so a running minimum sees
    # only its own group's rows (rounding keeps order within a group, so a shifted
    # comparison is strict only where the energies are)
    gap = 2.0 * float(e.max() - e.min()) + 1.0
    shifted = e - group * gap
    running = np.minimum.accumulate(shifted)
    # rows of one count and one time are in no set order: each takes the running minimum
    # at the end of its run, which covers every row of its count no slower than it
    new_run = np.r_[True, new_group | (t[1:] != t[:-1])]
    starts = np.nonzero(new_run)[0]
    ends = np.r_[starts[1:], len(t)] - 1
    through = running[ends][np.cumsum(new_run) - 1]
    out[finite[order[through < shifted]]] = True
    return out


def pareto_mask(points: np.ndarray, block: int = 256) -> np.ndarray:
    """Rows of ``points`` (n x m, smaller is better) that no other row dominates.

    Rows are visited in lexicographic order, so a row's dominators come before it; each
    block is checked against the front so far, then against itself, with array operations.
    """
    n = len(points)
    if n > 4 * block:
        # cheap pre-pass: drop the rows some anchor dominates (the anchors are the
        # two-objective fronts of the first column with each other, exact and O(n log n)),
        # then run the full check on the survivors only
        anchors = _anchor_rows(points)
        if len(anchors) > 32:
            anchors = anchors[np.linspace(0, len(anchors) - 1, 32).round().astype(int)]
        cols = points.T
        dominated = np.zeros(n, dtype=bool)
        for a in anchors:
            le = np.ones(n, dtype=bool)
            lt = np.zeros(n, dtype=bool)
            for c, value in enumerate(a):
                le &= value <= cols[c]
                lt |= value < cols[c]
            dominated |= le & lt
        survivors = np.nonzero(~dominated)[0]
        mask = np.zeros(n, dtype=bool)
        mask[survivors[_pareto_blocked(points[survivors], block)]] = True
        return mask
    return _pareto_blocked(points, block)


def _anchor_rows(points: np.ndarray) -> np.ndarray:
    """Rows on the front of column 0 against each other column (running minimum)."""
    rows = []
    for c in range(1, points.shape[1]):
        order = np.lexsort((points[:, c], points[:, 0]))
        col = points[order, c]
        best_before = np.concatenate([[np.inf], np.minimum.accumulate(col)[:-1]])
        rows.append(points[order[col < best_before]])
    return np.unique(np.concatenate(rows), axis=0)


def _pareto_blocked(points: np.ndarray, block: int) -> np.ndarray:
    n = len(points)
    order = np.lexsort(points.T[::-1])
    ranked = points[order]
    keep = np.zeros(n, dtype=bool)
    front = np.empty((0, points.shape[1]))
    for start in range(0, n, block):
        blk = ranked[start:start + block]
        dominated = np.zeros(len(blk), dtype=bool)
        if len(front):
            le = (front[None, :, :] <= blk[:, None, :]).all(axis=2)
            lt = (front[None, :, :] < blk[:, None, :]).any(axis=2)
            dominated = np.any(le & lt, axis=1)
        rest = np.nonzero(~dominated)[0]
        if len(rest) > 1:
            sub = blk[rest]
            le = (sub[None, :, :] <= sub[:, None, :]).all(axis=2)
            lt = (sub[None, :, :] < sub[:, None, :]).any(axis=2)
            dominated[rest] = np.any(le & lt, axis=1)
        keep[start:start + len(blk)] = ~dominated
        front = np.vstack([front, blk[~dominated]])
    mask = np.zeros(n, dtype=bool)
    mask[order[keep]] = True
    return mask


def _distinct(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One row per distinct (GPU, time, cost, energy): variants that change nothing the
    objectives see (ZeRO 1 vs 2 often; activation offloading whose copies hide) collapse to
    the one that offloads no activations, then to the one needing the least memory."""
    rounded = [np.round(np.nan_to_num(t[k], nan=-1.0), 9 - int(np.log10(max(
        1e-300, float(np.nanmax(np.abs(t[k]))) if np.isfinite(t[k]).any() else 1.0))))
        for k in ("time", "cost", "energy")]
    keys = np.array([f"{a}|{b!r}|{c!r}|{d!r}" for a, b, c, d in zip(t["key"], *rounded,
                                                                    strict=True)])
    order = np.lexsort((t["mem"], t["offload"] != "", keys))
    _, first = np.unique(keys[order], return_index=True)
    keep = np.sort(order[first])
    return {k: v[keep] for k, v in t.items()}


def _num(x: Any) -> float | None:
    v = float(x)
    return None if np.isnan(v) else v


def _kw(watts: Any) -> float | None:
    v = _num(watts)
    return None if v is None else from_si(v, Unit.KW)


def _option(catalog: Catalog, t: dict[str, np.ndarray], i: int, pareto: bool,
            systems: dict[str, System | None]) -> TrainingOption:
    product = catalog.product(str(t["key"][i]))
    system = systems.get(product.key)
    energy = _num(t["energy"][i])
    return TrainingOption(
        gpu=product.key, gpu_name=product.name, system=system.name if system else None,
        gpus=int(t["gpus"][i]), tp=int(t["tp"][i]), pp=int(t["pp"][i]), cp=int(t["cp"][i]),
        ep=int(t["ep"][i]), vpp=int(t["vpp"][i]), micro_batch=int(t["mb"][i]),
        global_batch=int(t["gb"][i]), zero=int(t["zero"][i]),
        recompute=str(t["recompute"][i]), sequence_parallel=bool(t["sp"][i]),
        tp_comm_overlap=bool(t["overlap"][i]), fsdp_prefetch=bool(t["prefetch"][i]),
        dp_shard=int(t["shard"][i]),
        offload_modules=tuple(m for m in str(t["offload"][i]).split(",") if m),
        precision=str(t["precision"][i]), step_time_s=float(t["step"][i]),
        tokens_per_s=float(t["tps"][i]), mfu=float(t["mfu"][i]),
        memory_per_gpu_gib=from_si(t["mem"][i], Unit.GIB),
        time_days=from_si(t["time"][i], Unit.DAY),
        cost_usd=_num(t["cost"][i]), energy_mwh=None if energy is None else energy / 1000,
        power_kw=_kw(t["power"][i]), price_usd_per_gpu_hour=_num(t["price"][i]),
        pareto=pareto, expected_interruptions=expected_interruptions(
            int(t["gpus"][i]), from_si(t["time"][i], Unit.DAY)))


def _hardware(catalog: Catalog, o: TrainingOption, system: System | None) -> str:
    """The resources that matter for a training option, from the catalog."""
    product = catalog.product(o.gpu)
    peak = matmul_peak(product, Precision(o.precision))
    parts = [f"{from_si(peak.flops, Unit.TFLOPS):,.0f} dense {o.precision.upper()} TFLOPS"
             if peak else "",
             f"{from_si(product.memory_bandwidth_bytes_s or 0, Unit.TB_S):.2f} TB/s",
             f"{from_si(product.memory_bytes, Unit.GIB):.0f} GiB"]
    if system is not None:
        parts.append(f"{from_si(system.intra_node_bandwidth_bytes_s, Unit.GB_S):,.0f} GB/s "
                     f"{system.intra_node_fabric} in {system.gpus_per_node}-GPU nodes")
        if o.gpus > system.gpus_per_node and system.network_bandwidth_per_gpu_bytes_s:
            network = from_si(system.network_bandwidth_per_gpu_bytes_s, Unit.GBIT_S)
            parts.append(f"{network:,.0f} Gb/s network per GPU")
    return ", ".join(p for p in parts if p)


def _hybrid_groups(shape: TransformerShape, layouts: dict[str, np.ndarray], gpn: int
                   ) -> np.ndarray:
    """Each layout's hybrid-sharding group (``TrainingConfig.dp_shard``), 0 where it has
    none. The group is the DP x CP ranks one node holds (TP apart, Megatron's rank order);
    a layout has one where that is a proper divisor of its DP x CP ranks above one (else
    it is full sharding, or none) and, for a MoE model, the replicas also split the
    expert-data-parallel ranks."""
    tp, cp = layouts["tp"], layouts["cp"]
    ranks = layouts["gpus"] // (tp * layouts["pp"] * cp) * cp
    group = ranks_per_node(ranks, tp, gpn)
    ok = (group > 1) & (group < ranks) & (ranks % np.maximum(group, 1) == 0)
    if shape.is_moe:
        replicas = ranks // np.maximum(group, 1)
        # (expert TP is TP in the advisor's layouts)
        ok &= (ranks // layouts["ep"]) % np.maximum(replicas, 1) == 0
    return np.where(ok, group, 0)


def layout_config(shape: TransformerShape, layouts: dict[str, np.ndarray],
                  common: dict[str, Any], **more: Any) -> TrainingConfig:
    """The configurations of ``layouts`` (``_layouts``'s arrays) with the search's
    ``common`` fields and ``more``: integer fields as arrays, one configuration per element
    (the masks in ``_layouts`` stand for ``TrainingConfig.validate``)."""
    # a hybrid's pipeline split is one per chunk (_chunks)
    split = (_hybrid_split(shape, int(layouts["pp"][0]), int(layouts["vpp"][0]))
             if shape.is_hybrid else {"pp": layouts["pp"], "vpp": layouts["vpp"]})
    return TrainingConfig(**_layout_fields(layouts), **split, **common, **more)


def _layout_fields(layouts: dict[str, np.ndarray]) -> dict[str, Any]:
    """``layouts``' fields other than the pipeline split, as ``TrainingConfig`` fields."""
    return {"gpus": layouts["gpus"], "global_batch": layouts["gb"],
            "micro_batch": layouts["mb"], "tp": layouts["tp"], "cp": layouts["cp"],
            "ep": layouts["ep"]}


def _cost_variants(shape: TransformerShape, product: Product, device: Device, intra: Link,
                   inter: Link | None, efficiency: Efficiency, host_link: float | None,
                   common: dict[str, Any], layouts: dict[str, np.ndarray],
                   stages: tuple[tuple[int, bool], ...], layers: LayerCosts,
                   shards: np.ndarray | None = None, first: int = 0
                   ) -> tuple[dict[str, np.ndarray], TrainingConfig]:
    """``layouts`` under each of ``stages`` (with hybrid sharding over ``shards`` ranks,
    one per layout) in one call, the ZeRO fields along a first axis and the layouts along a
    second, so that what does not depend on the stage (the layers' costing) is computed
    once per layout. Returned flat, stage by stage (``variant``: the stage's index from
    ``first``), with the configuration costed."""
    n = len(layouts["gpus"])
    zeros = np.array([z for z, _ in stages])[:, None]
    prefetches = np.array([p for _, p in stages])[:, None]
    cfg = layout_config(shape, layouts, common, zero=zeros, fsdp_prefetch=prefetches,
                        **({"dp_shard": shards} if shards is not None else {}))
    core = evaluate_training(shape, product, device, intra, inter, cfg, efficiency,
                             layers=layers, host_link_bytes_s=host_link)
    grid = (len(stages), n)
    flat = {k: np.broadcast_to(v, grid).ravel() for k, v in layouts.items()}
    flat.update(zip(("zero", "prefetch", "shard", "step", "tps", "mfu", "hfu", "mem"), (
        np.broadcast_to(v, grid).ravel() for v in (
            zeros, prefetches, 0 if shards is None else shards, core.step,
            core.tokens_per_s, core.mfu, core.hfu, core.memory_total)), strict=True))
    flat["variant"] = np.repeat(np.arange(first, first + len(stages)), n)
    return flat, cfg


def _hybrid_split(shape: TransformerShape, pp: int, vpp: int) -> dict[str, Any]:
    """A hybrid model's pipeline fields: interleaved as its pattern cut into PP x VPP equal
    '|' segments (Megatron-Core's only way to interleave a hybrid)."""
    return {"pp": pp, "vpp": vpp,
            "pp_layout": even_segments(shape.hybrid_pattern, pp, vpp) if vpp > 1 else ""}


def option_config(search: TrainingSearch, o: TrainingOption, system: System | None,
                  shape: TransformerShape | None = None) -> TrainingConfig:
    """The training configuration an option stands for (what its estimate ran, what a
    launch command spells out); a hybrid ``shape``'s interleaved stages as its segments."""
    split = (_hybrid_split(shape, o.pp, o.vpp) if shape is not None and shape.is_hybrid
             else {"pp": o.pp, "vpp": o.vpp})
    return TrainingConfig(gpus=o.gpus, seq_len=search.seq_len, global_batch=o.global_batch,
                          micro_batch=o.micro_batch, tp=o.tp, cp=o.cp, ep=o.ep, **split,
                          sequence_parallel=o.sequence_parallel,
                          tp_comm_overlap=o.tp_comm_overlap, zero=o.zero,
                          fsdp_prefetch=o.fsdp_prefetch, dp_shard=o.dp_shard,
                          recompute=Recompute(o.recompute),
                          recompute_modules=(() if shape is None else named_recompute_modules(
                              shape, Recompute(o.recompute))),
                          precision=Precision(o.precision),
                          gpus_per_node=system.gpus_per_node if system else 8,
                          fp8_params=keeps_fp8_weights(Precision(o.precision)),
                          ep_dispatcher=MOE_DISPATCHER, mtp_layers=search.mtp_layers,
                          pp_schedule=search.pp_schedule if o.pp > 1 else PP_SCHEDULES[0],
                          optimizer_offload=search.optimizer_offload if o.zero >= 1 else 0.0,
                          offload_modules=o.offload_modules, **_fine_tuning(search))


def _offload_variants(shape: TransformerShape, search: TrainingSearch, recompute: Recompute,
                      host_link: float | None) -> tuple[tuple[str, ...], ...]:
    """The fine-grained offloading a variant is costed with: the modules the search names,
    for every option; else, where nothing is recomputed (offloading as the alternative to
    recomputation) on a GPU whose link to its host has a catalogued rate (so that the copies
    are priced): none; the attention core's tensors (``ATTENTION_MODULES``) where every
    layer has attention (not a hybrid, whose few attention blocks keep little); and for a
    mixture-of-experts model the experts' tensors
    (``activation_offload.expert_modules``), alone and with the attention core's; else
    none."""
    if search.offload_modules:
        return (search.offload_modules,)
    if not host_link or recompute is not Recompute.NONE:
        return ((),)
    variants: list[tuple[str, ...]] = [()]
    attention = ATTENTION_MODULES if shape.attention_layers and not shape.is_hybrid else ()
    if attention and not shape.is_moe:
        variants.append(attention)
    if shape.is_moe:
        experts = expert_modules(fused_mlp=False)  # the search's per-expert launches
        variants.append(experts)
        if attention:
            variants.append(experts + attention)
    return tuple(variants)


def _fine_tuning(search: TrainingSearch) -> dict[str, Any]:
    """The search's fine-tuning settings, as ``TrainingConfig`` fields."""
    return {"lora_rank": search.lora_rank, "lora_modules": search.lora_modules,
            "packed_doc_len": search.packed_doc_len}


def _explain(catalog: Catalog, shape: TransformerShape, search: TrainingSearch,
             o: TrainingOption, best: TrainingOption, rivals: dict[str, TrainingOption],
             eff: Efficiency, systems: dict[str, System | None]) -> TrainingOption:
    """The scalar estimate's bottleneck and reason for an option (the same formulas), and
    how its GPU compares with the best option on another GPU, in the catalog's terms."""
    product = catalog.product(o.gpu)
    system = systems.get(o.gpu)
    cfg = option_config(search, o, system, shape)
    est = estimate_training(catalog, shape, product, cfg, system=system, efficiency=eff)
    reason = est.bottleneck_reason
    is_best = o == best
    if is_best or o.gpu != best.gpu:
        reason += f"; {o.gpu_name}: {_hardware(catalog, o, system)}"
    metric = search.objective.value
    mine = {"time": o.time_days, "cost": o.cost_usd, "energy": o.energy_mwh}[metric]
    others = [r for k, r in rivals.items() if k != o.gpu]
    if is_best and others and mine:
        rival = others[0]
        theirs = {"time": rival.time_days, "cost": rival.cost_usd,
                  "energy": rival.energy_mwh}[metric]
        if theirs:
            hardware = _hardware(catalog, rival, systems.get(rival.gpu))
            reason += (f"; the best {rival.gpu_name} plan ({rival.gpus} GPUs, {hardware}) "
                       f"needs {theirs / mine:.2f}x the {metric}")
    elif o.gpu != best.gpu and best.time_days:
        reason += f"; {o.time_days / best.time_days:.2f}x the time of #1"
    return TrainingOption(**{**o.__dict__, "bottleneck": est.bottleneck, "reason": reason})

