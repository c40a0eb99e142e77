"""What to change when a run does not fit: the usual memory levers, each estimated.

When an estimate finds more memory per GPU than the GPU has, a user's next question is what
to change. This module tries the levers Megatron-style frameworks offer, one at a time, on
the same layout: recomputing the modules that keep the most for little work (the norms, and
the experts' activation, the dense MLPs or latent attention's up-projections where the
model has them), full recomputation of the fewest layers per stage that fits (Megatron's
block method) or of every layer, sequence parallelism where TP > 1 (alone and with those
modules), a higher ZeRO stage, half the micro-batch, the whole optimizer offloaded to the
CPU where the optimizer is distributed, activation offloading where the run allows it (whole
layers, or the experts' or the attention core's kept tensors, module by module), and,
for a mixture-of-experts run without it, expert parallelism over its data-parallel ranks.
Each is estimated with the same model (no rule of thumb), and the ones that fit come first,
fastest first.

A serving estimate that does not fit gets the same treatment with a server's levers: an FP8
KV cache, FP8 weights and activations where the Tensor Cores run FP8, 4-bit weights (INT4
weight-only anywhere, FP4 where the Tensor Cores run it), twice the tensor parallelism
inside a node on as many replicas, the run's own GPUs as fewer and wider replicas, and the
largest batch that fits; the ones that fit come first, the most output tokens per second and
GPU first. Among them, where the GPU's link to its CPU has a catalogued rate: the weights
that do not fit kept in host memory (``--cpu-offload-gb``), copied over the host link every
pass, which fits on the GPUs given but runs at the link's pace.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System
from gpuarch.errors import GpuarchError
from gpuarch.estimate.activation_offload import ATTENTION_MODULES, expert_modules
from gpuarch.estimate.host_link import product_host_link
from gpuarch.estimate.inference import InferenceEstimate, estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.estimate.memory import Recompute
from gpuarch.estimate.recompute import up_projections
from gpuarch.estimate.training import TrainingEstimate, estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.kv_formats import kv_cache_run
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.units import Unit, from_si
from gpuarch.workloads.shape import TransformerShape

__all__ = ["Remedy", "memory_remedies", "serving_remedies"]

C = TypeVar("C")  # a run's configuration (training or serving)
E = TypeVar("E")  # its estimate


@dataclass(frozen=True)
class Remedy:
    """One change to the run (as the command-line flags that make it) and its estimate:
    a training step's time, or a server's output tokens per second and GPUs."""

    change: str
    memory_per_gpu_gib: float
    fits: bool
    step_time_s: float | None = None
    output_tokens_per_s: float | None = None
    gpus: int | None = None

    def as_json(self) -> dict[str, object]:
        doc: dict[str, object] = {"change": self.change,
                                  "memory_per_gpu_gib": self.memory_per_gpu_gib,
                                  "fits": self.fits}
        if self.step_time_s is not None:
            doc["step_time_s"] = self.step_time_s
        if self.output_tokens_per_s is not None:
            doc["output_tokens_per_s"] = self.output_tokens_per_s
            doc["gpus"] = self.gpus
        return doc


def _cheap_modules(shape: TransformerShape) -> tuple[str, ...]:
    """The recompute modules that free the most for the least work on this model."""
    modules = ["layernorm"]
    if shape.is_moe:
        modules.append("moe_act")
    if shape.layers > shape.moe_layers:
        modules.append("mlp")
    if up_projections(shape):
        modules.append("mla_up_proj")
    return tuple(modules)


def _unset_modules(cfg: TrainingConfig) -> str:
    """The flag that drops the run's recompute modules when a change leaves selective
    recomputation (the command line refuses modules with any other mode)."""
    return " --recompute-modules ''" if cfg.recompute_modules else ""


def _candidates(shape: TransformerShape, cfg: TrainingConfig
                ) -> list[tuple[str, TrainingConfig]]:
    """(flags, configuration) for each lever that changes this run."""
    out: list[tuple[str, TrainingConfig]] = []
    replace = dataclasses.replace
    if cfg.recompute is not Recompute.FULL:
        modules = tuple(dict.fromkeys((*cfg.recomputed, *_cheap_modules(shape))))
        if modules != cfg.recomputed:
            out.append((f"--recompute selective --recompute-modules {','.join(modules)}",
                        replace(cfg, recompute=Recompute.SELECTIVE,
                                recompute_modules=modules)))
    if cfg.recompute is not Recompute.FULL or cfg.recompute_layers:
        out.append(("--recompute full" + _unset_modules(cfg)
                    + (" --recompute-layers 0" if cfg.recompute_layers else ""),
                    replace(cfg, recompute=Recompute.FULL, recompute_modules=(),
                            recompute_layers=0, offload_layers=0)))
    if cfg.tp > 1 and not cfg.sequence_parallel:
        out.append(("--sequence-parallel", replace(cfg, sequence_parallel=True)))
        if out[0][0].startswith("--recompute selective"):
            # the two cheap levers together
            out.append((f"--sequence-parallel {out[0][0]}",
                        replace(out[0][1], sequence_parallel=True)))
    if cfg.dp_shard:
        # hybrid sharding keeps a copy per group: larger groups (doubling while they divide
        # the DP x CP ranks), or one group of all of them
        group = cfg.dp_shard * 2
        while group < cfg.dp * cfg.cp and not (cfg.dp * cfg.cp) % group:
            out.append((f"--dp-shard {group}", replace(cfg, dp_shard=group)))
            group *= 2
        out.append(("--dp-shard 0", replace(cfg, dp_shard=0)))
    if cfg.zero < 3 and cfg.dp * cfg.cp > 1:
        out.append((f"--zero {cfg.zero + 1}", replace(cfg, zero=cfg.zero + 1)))
    if cfg.micro_batch > 1:
        half = cfg.micro_batch // 2
        out.append((f"--micro-batch {half}", replace(cfg, micro_batch=half)))
    if cfg.zero >= 1 and cfg.optimizer_offload < 1:
        out.append(("--optimizer-offload 1", replace(cfg, optimizer_offload=1.0)))
    if cfg.pp == 1 and cfg.recompute is Recompute.NONE and not cfg.offload_layers \
            and not cfg.offload_modules:
        out.append((f"--offload-layers {shape.layers - 1}",
                    replace(cfg, offload_layers=shape.layers - 1)))
    out.extend((f"--offload-modules {','.join(m)}", replace(cfg, offload_modules=m))
               for m in _offload_sets(shape, cfg))
    out.extend((f"--ep {ep}", replace(cfg, ep=ep)) for ep in _expert_splits(shape, cfg))
    return out


def _offload_sets(shape: TransformerShape, cfg: TrainingConfig
                  ) -> tuple[tuple[str, ...], ...]:
    """Fine-grained offloading a run without any can take: the routed experts' kept
    tensors (``activation_offload.expert_modules``) where the expert layers are not
    recomputed whole, and the attention core's inputs and output."""
    if cfg.offload_layers or cfg.offload_modules:
        return ()
    out: list[tuple[str, ...]] = []
    if shape.is_moe and "moe" not in cfg.recomputed:
        out.append(expert_modules(fused_mlp=cfg.expert_launches == "fused-mlp"))
    if not shape.is_hybrid or "*" in shape.hybrid_pattern:
        out.append(ATTENTION_MODULES)
    return tuple(out)


def _expert_splits(shape: TransformerShape, cfg: TrainingConfig) -> tuple[int, ...]:
    """Expert-parallel sizes an MoE run without expert parallelism can take on the same GPUs
    (Megatron carves EP out of the data-parallel ranks: it must divide DP x CP and the
    experts): the largest, which splits the experts' weights, gradients and optimizer states
    the most, and 8, one HGX node's all-to-all, where that is smaller."""
    if not shape.is_moe or cfg.ep > 1:
        return ()
    ranks, experts = cfg.dp * cfg.cp, shape.experts
    largest = max((n for n in range(2, min(ranks, experts) + 1)
                   if not ranks % n and not experts % n), default=1)
    return tuple(n for n in dict.fromkeys((8, largest))
                 if 1 < n <= largest and not ranks % n and not experts % n)


def memory_remedies(catalog: Catalog, shape: TransformerShape, product: Product,
                    cfg: TrainingConfig, *, system: System | None = None,
                    efficiency: Efficiency = DEFAULT_EFFICIENCY,
                    most: int = 4) -> tuple[Remedy, ...]:
    """Up to ``most`` single changes to ``cfg`` and their estimates: those that fit first
    (fastest first), then those that come closest. Full recomputation is also tried on the
    fewest layers per stage that fit (``--recompute-layers``). Empty when ``cfg`` fits."""

    def estimate(c: TrainingConfig) -> TrainingEstimate | None:
        try:
            return estimate_training(catalog, shape, product, c, system=system,
                                     efficiency=efficiency)
        except GpuarchError:  # a lever this run does not allow (e.g. a batch that splits)
            return None

    base = estimate(cfg)
    if base is None or base.fits_in_memory:
        return ()

    def total(e: TrainingEstimate) -> float:
        return e.memory.total

    found = _shrinking(_candidates(shape, cfg), estimate, total, total(base))
    full = next((est for flags, est in found.items()
                 if flags.startswith("--recompute full")), None)
    if full is not None and full.fits_in_memory:
        layers = _fewest_layers(lambda n: estimate(dataclasses.replace(
            cfg, recompute=Recompute.FULL, recompute_modules=(), recompute_layers=n,
            offload_layers=0)), shape.layers, full)
        if layers is not None:
            n, est = layers
            found[f"--recompute full --recompute-layers {n}{_unset_modules(cfg)}"] = est
    return tuple(Remedy(flags, from_si(total(est), Unit.GIB), est.fits_in_memory,
                        step_time_s=est.step_time_s)
                 for flags, est in _ranked(found, lambda e: e.fits_in_memory,
                                           lambda e: e.step_time_s, total, most))


def _shrinking(candidates: Iterable[tuple[str, C]], estimate: Callable[[C], E | None],
               total: Callable[[E], float], base_total: float) -> dict[str, E]:
    """The estimate of each candidate (flags, configuration) that the model allows and that
    needs less memory per GPU than the run itself."""
    found: dict[str, E] = {}
    for flags, candidate in candidates:
        est = estimate(candidate)
        if est is not None and total(est) < base_total:
            found[flags] = est
    return found


def _ranked(found: dict[str, E], fits: Callable[[E], bool], cost: Callable[[E], float],
            total: Callable[[E], float], most: int) -> list[tuple[str, E]]:
    """The ``most`` best changes: those that fit first, by ``cost`` (lower is better), then
    those that do not, by the memory they still need."""
    return sorted(found.items(), key=lambda kv: (not fits(kv[1]), cost(kv[1]) if fits(kv[1])
                                                 else total(kv[1])))[:most]


def _fewest_layers(estimate: Callable[[int], TrainingEstimate | None], layers: int,
                   every: TrainingEstimate) -> tuple[int, TrainingEstimate] | None:
    """The fewest layers per model chunk whose block recomputation fits (memory falls as
    the count grows, so a bisection finds it), with its estimate; None if it is no faster
    than recomputing ``every`` layer."""
    low, high = 1, layers
    best: tuple[int, TrainingEstimate] | None = None
    while low <= high:
        mid = (low + high) // 2
        est = estimate(mid)
        if est is not None and est.fits_in_memory:
            best, high = (mid, est), mid - 1
        else:
            low = mid + 1
    if best is None:
        return None
    n, est = best
    if est.step_time_s >= every.step_time_s:
        return None  # as slow as recomputing every layer: nothing gained
    return n, est


def _serving_candidates(catalog: Catalog, product: Product, cfg: InferenceConfig
                        ) -> list[tuple[str, InferenceConfig]]:
    """(flags, configuration) for each server lever that changes this run."""
    replace = dataclasses.replace
    q = cfg.quant
    out: list[tuple[str, InferenceConfig]] = []
    # an 8-bit KV cache: FP8, or INT8 where no engine keeps FP8 (before Ampere)
    kv = kv_cache_run(catalog, product, QuantFormat.FP8).format
    if q.kv_cache.is_16bit and not kv.is_16bit:
        out.append((f"--kv-precision {kv.value}",
                    replace(cfg, quant=QuantScheme(q.weights, q.activations, kv))))
    if q.weights.is_16bit:
        schemes = [("fp8", QuantScheme(QuantFormat.FP8, QuantFormat.FP8, q.kv_cache)),
                   ("int4", QuantScheme(QuantFormat.INT4, q.activations, q.kv_cache)),
                   ("fp4", QuantScheme(QuantFormat.FP4, QuantFormat.FP4, q.kv_cache))]
        for name, scheme in schemes:
            acts = "" if scheme.activations is q.activations else \
                f" --activation-precision {scheme.activations.value}"
            out.append((f"--weight-precision {name}{acts}", replace(cfg, quant=scheme)))
    replicas = max(1, cfg.gpus // (cfg.tp * cfg.pp))
    if cfg.tp * 2 <= cfg.gpus_per_node:
        tp = cfg.tp * 2
        gpus = tp * cfg.pp * replicas
        out.append((f"--tp {tp}" + (f" --gpus {gpus}" if gpus != cfg.gpus else ""),
                    replace(cfg, tp=tp, gpus=gpus)))
    return out


def _same_gpus_tp(cfg: InferenceConfig,
                  estimate: Callable[[InferenceConfig], InferenceEstimate | None]
                  ) -> tuple[str, InferenceConfig] | None:
    """The GPUs a run has, split over fewer, wider replicas: the smallest tensor-parallel
    size above ``cfg.tp`` (doubling, within a node, dividing the GPUs) at which a replica
    fits, or the widest if none does; None where the GPUs hold one replica already."""
    last: tuple[str, InferenceConfig] | None = None
    tp = cfg.tp * 2
    while tp <= cfg.gpus_per_node and tp * cfg.pp <= cfg.gpus:
        if cfg.gpus % (tp * cfg.pp) == 0:
            last = (f"--tp {tp}", dataclasses.replace(cfg, tp=tp))
            est = estimate(last[1])
            if est is not None and est.fits_in_memory:
                return last
        tp *= 2
    return last


def serving_remedies(catalog: Catalog, shape: TransformerShape, product: Product,
                     cfg: InferenceConfig, *, system: System | None = None,
                     efficiency: Efficiency = DEFAULT_EFFICIENCY,
                     most: int = 4) -> tuple[Remedy, ...]:
    """Up to ``most`` single changes to a serving ``cfg`` that does not fit, with their
    estimates: those that fit first (the most output tokens per second and GPU first), then
    those that come closest. Formats the GPU's Tensor Cores do not run natively are not
    offered (their estimate would fall back); a static batch larger than fits is offered
    the largest that does. Empty when ``cfg`` fits."""

    def estimate(c: InferenceConfig) -> InferenceEstimate | None:
        try:
            est = estimate_inference(catalog, shape, product, c, system=system,
                                     efficiency=efficiency)
        except GpuarchError:  # a lever this model or GPU does not allow
            return None
        if est.assumptions.get("precision_fallback"):
            return None
        return est

    base = estimate(cfg)
    if base is None or base.fits_in_memory:
        return ()

    def total(e: InferenceEstimate) -> float:
        return sum(e.memory.values())

    candidates = _serving_candidates(catalog, product, cfg)
    # the weights that do not fit kept in host memory instead (vLLM's --cpu-offload-gb),
    # where the GPU's link to its CPU has a catalogued rate (else the copies would be free)
    short = math.ceil(from_si(total(base) - product.memory_bytes, Unit.GIB)) \
        + cfg.cpu_offload_gib
    if short > cfg.cpu_offload_gib and product_host_link(catalog, product) is not None:
        candidates.append((f"--cpu-offload-gb {short:g}",
                           dataclasses.replace(cfg, cpu_offload_gib=short)))
    if cfg.batch and base.max_batch and base.max_batch < cfg.batch:
        candidates.append((f"--batch {base.max_batch}",
                           dataclasses.replace(cfg, batch=base.max_batch)))
    same_gpus = _same_gpus_tp(cfg, estimate)
    if same_gpus is not None:
        # at the same width, the run's own GPUs in fewer replicas, not more GPUs
        candidates = [c for c in candidates if c[1].tp != same_gpus[1].tp]
        candidates.append(same_gpus)
    found = _shrinking(candidates, estimate, total, total(base))
    return tuple(Remedy(flags, from_si(total(est), Unit.GIB), est.fits_in_memory,
                        output_tokens_per_s=est.output_tokens_per_s, gpus=est.gpus)
                 for flags, est in _ranked(found, lambda e: e.fits_in_memory,
                                           lambda e: -e.output_tokens_per_s / e.gpus,
                                           total, most))
