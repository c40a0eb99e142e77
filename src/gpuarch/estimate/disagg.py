"""Disaggregated serving: prompts prefilled on one pool of GPUs, tokens decoded on another.

Engines that split the two phases (NVIDIA Dynamo, SGLang's and vLLM's prefill-decode
disaggregation, TensorRT-LLM's disaggregated serving) run each prompt's prefill on a prefill
worker, send its KV cache to a decode worker, and decode there without prefills breaking
into the decode steps. The model here reuses the aggregated estimate's own operators
(``evaluate_inference``) for each pool:

- a prefill replica runs passes of up to ``max_num_tokens`` prompt tokens; of the pass
  sizes whose prompts per second carry the load, the one with the shortest time to the
  first token (the pass itself plus an M/D/1 wait for the pass in progress at that load, as
  the aggregated model's prefill waits) is taken: an engine batches more prompts a pass as
  the load rises (``best_pass``); the first token comes out of the prefill;
- the KV cache of the prompt then goes from each prefill GPU's shard to the decode pool, one
  point-to-point transfer over NVLink when both pools are in one node or NVLink domain,
  else over the network (it adds to the time to first token, not to the throughput: the
  transfer overlaps other requests' work);
- a decode replica holds ``batch`` sequences and emits the remaining output tokens at the
  decode step of that batch alone, with no prefill between steps.

The deployment serves the smaller of the two pools' request rates; ``rate`` (requests per
second) sets the load instead, refused beyond either pool's capacity, and ``concurrency``
a closed-loop client's requests in flight (``closed_loop``). Checked on two published
disaggregated runs (``validation/data/inference.toml``, sources
``inferencemax-20764588467`` and ``inferencemax-20321908209``: GPT-OSS-120B and
DeepSeek-R1 on GB200 NVL72 under Dynamo and TensorRT-LLM).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System
from gpuarch.errors import GpuarchError, check_count
from gpuarch.estimate.inference import evaluate_inference, pass_times
from gpuarch.estimate.inference_config import (
    MAX_PREFILL_LOAD,
    RESERVE_FRACTION,
    Batching,
    InferenceConfig,
    moe_block_floor_s,
)
from gpuarch.estimate.inference_memory import (
    kv_bytes_per_sequence,
    max_batch_that_fits,
    memory_per_gpu,
)
from gpuarch.estimate.inference_passes import with_expert_options
from gpuarch.estimate.mamba import hybrid_state_bytes
from gpuarch.perf.collectives import Collective, Group, collective_time, link_for
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.units import Unit, from_si
from gpuarch.workloads.shape import TransformerShape

__all__ = [
    "ClosedLoop", "DisaggEstimate", "PrefillPool", "best_pass", "closed_loop",
    "estimate_disaggregated", "kv_transfer", "prefill_pool_config",
]


def prefill_pool_config(decode: InferenceConfig, *, gpus: int, tp: int, ep: int,
                        **changes: Any) -> InferenceConfig:
    """The engine setup of a prefill pool beside ``decode``'s GPUs: its formats and engine
    settings, its own split (no pipeline), no batch, cap or speculative decoding; its ranks
    all run context passes, none waits on a decoding one (``adp_balance``)."""
    pool = replace(decode, gpus=gpus, tp=tp, pp=1, ep=ep, batch=None, max_batch_size=0,
                   num_requests=0, max_output_len=0, speculative_tokens=0,
                   acceptance_length=0.0,
                   adp_balance=True, **changes)
    # the decode side's expert options where the pool's own split can take them
    return with_expert_options(pool, decode.moe_imbalance, decode.redundant_experts,
                               decode.two_batch_overlap)


def best_pass(load: float, sizes: Sequence[float], pass_s: Sequence[float],
              busy_cap: float = 1.0) -> tuple[int, float, float] | None:
    """(index into ``sizes``, utilization, wait in seconds) of the prefill pass size that
    gives the shortest time to the first token at ``load`` prompts per second on one
    replica, where a pass of ``sizes[i]`` prompts takes ``pass_s[i]``: among the sizes that
    carry the load, the pass plus an M/D/1 wait for the one in progress at utilization
    ``load / rate`` (at most ``busy_cap``). None when no pass size carries the load. (Plain
    Python: the advisor calls it for every pool it sizes, on a handful of sizes.)"""
    best: tuple[int, float, float] | None = None
    best_time = math.inf
    for i, (size, seconds) in enumerate(zip(sizes, pass_s, strict=True)):
        rate = float(size) / float(seconds)
        if rate < load * (1 - 1e-12):
            continue
        rho = min(busy_cap, load / rate)
        wait = rho / (2 * (1 - rho)) * float(seconds) if rho < 1 else math.inf
        # ties (every carrying size fully busy) go to the largest
        if best is None or seconds + wait < best_time or math.isinf(best_time):
            best, best_time = (i, rho, wait), float(seconds) + wait
    return best


@dataclass(frozen=True)
class ClosedLoop:
    """A closed-loop client's steady state: its requests per second, the mean number each
    decode replica holds decoding (between two whole batches) and the wait for a decode slot
    where the decode replicas are full."""

    rate: float
    batch: float
    queue_s: float


CLOSED_LOOP_ROUNDS = 100
"""Bisection rounds of ``closed_loop`` (each halves the interval of the decoding batch)."""


def closed_loop(concurrency: int, decode_replicas: int, output_len: int,
                tpot: Sequence[float], sizes: Sequence[float], pass_s: Sequence[float],
                prefill_replicas: int, transfer_s: float) -> ClosedLoop:
    """The steady state of a client that keeps ``concurrency`` requests in flight through a
    disaggregated deployment, each request in turn waiting for and taking a prefill pass
    (``best_pass`` at the loop's rate), handed over (``transfer_s``) and decoding
    ``output_len - 1`` tokens at ``tpot[b - 1]`` a token for a decode batch of ``b``
    sequences a replica (interpolated between whole batches). By Little's law the requests
    in flight are the rate times a request's time in the system; the decoding batch ``b``
    that makes them ``concurrency`` is found by bisection. Where even full decode replicas
    (the last of ``tpot``) leave requests over, they wait for a slot: ``queue_s``."""
    steps = output_len - 1
    table = np.asarray(tpot, dtype=float)
    batches = np.arange(1, table.size + 1, dtype=float)

    def rate_at(b: float) -> float:
        return decode_replicas * b / (steps * float(np.interp(b, batches, table)))

    def in_flight(b: float) -> float:
        r = rate_at(b)
        chosen = best_pass(r / prefill_replicas, sizes, pass_s, 1.0)
        if chosen is None or math.isinf(chosen[2]):
            return math.inf  # beyond what the prefill pool carries
        k, _, wait = chosen
        ttft = float(pass_s[k]) + wait + transfer_s
        return r * (ttft + steps * float(np.interp(b, batches, table)))

    top = min(float(table.size), concurrency / decode_replicas)
    held = in_flight(top)
    if held <= concurrency:  # every decode slot full, the rest wait for one
        r = rate_at(top)
        return ClosedLoop(r, top, (concurrency - held) / r)
    low, high = 0.0, top
    for _ in range(CLOSED_LOOP_ROUNDS):
        mid = (low + high) / 2
        if in_flight(mid) <= concurrency:
            low = mid
        else:
            high = mid
    return ClosedLoop(rate_at(low), low, 0.0)


@dataclass(frozen=True)
class PrefillPool:
    """The prefill workers: ``gpus`` in all, each replica ``tp`` x ``ep`` of them, on
    ``product`` in ``system`` where they differ from the decode pool's GPU (prefill on one
    GPU type, decode on another: the KV cache then crosses the network), each pass of up to
    ``max_num_tokens`` prompt tokens where the prefill workers' engine sets its own token
    budget (0: the decode side's)."""

    gpus: int
    tp: int = 1
    ep: int = 1
    product: Product | None = None
    system: System | None = None
    max_num_tokens: int = 0

    @property
    def replica_gpus(self) -> int:
        return max(self.tp, self.ep)

    def validate(self) -> None:
        for name in ("gpus", "tp", "ep"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise GpuarchError(f"--prefill-{name}: expected an integer >= 1, got "
                                   f"{value!r}")
        check_count("--prefill-max-num-tokens", self.max_num_tokens, zero_unset=True)
        if self.gpus % self.replica_gpus:
            raise GpuarchError(f"--prefill-gpus: {self.gpus} is not a multiple of a prefill "
                               f"replica's {self.replica_gpus} GPUs")


@dataclass(frozen=True)
class DisaggEstimate:
    """A disaggregated deployment at its steady state (SI inside; ``as_json`` for output)."""

    model: str
    gpu: str  # the decode pool's
    prefill_gpus: int
    decode_gpus: int
    batch: int  # sequences each decode replica holds
    max_batch: int  # the most that fit a decode replica
    ttft_s: float
    tpot_s: float
    request_latency_s: float
    requests_per_s: float
    output_tokens_per_s: float
    prefill_capacity_per_s: float  # requests/s the prefill pool carries at most
    decode_capacity_per_s: float  # requests/s the decode pool carries at capacity_batch
    prefill_utilization: float
    bottleneck: str  # "prefill" or "decode"
    kv_transfer_s: float
    kv_transfer_bytes_per_gpu: float
    kv_link: str
    memory: dict[str, float]  # bytes per decode GPU
    prefill_memory: dict[str, float]  # bytes per prefill GPU
    gpu_memory_bytes: float
    assumptions: dict[str, Any] = field(default_factory=dict)
    prefill_gpu: str = ""  # the prefill pool's, where another type ("": the same)
    # the decode batch ``decode_capacity_per_s`` is at: the batch given, else the most
    # that fit (0: ``max_batch``)
    capacity_batch: int = 0

    @property
    def gpus(self) -> int:
        return self.prefill_gpus + self.decode_gpus

    def as_json(self) -> dict[str, Any]:
        def gib(parts: dict[str, float]) -> dict[str, float]:
            out = {k: from_si(v, Unit.GIB) for k, v in parts.items()}
            out["total"] = from_si(sum(parts.values()), Unit.GIB)
            return out

        return {
            "model": self.model, "gpu": self.gpu, "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s, "request_latency_s": self.request_latency_s,
            "batch": self.batch, "max_batch": self.max_batch,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s / self.gpus,
            "output_tokens_per_s_per_user": 1.0 / self.tpot_s,
            "memory_per_gpu_gib": gib(self.memory),
            "gpu_memory_gib": from_si(self.gpu_memory_bytes, Unit.GIB),
            "fits_in_memory": self.max_batch >= 1,
            "bottleneck": {"deployment": self.bottleneck},
            "disaggregated": {
                "prefill_gpus": self.prefill_gpus, "decode_gpus": self.decode_gpus,
                "prefill_gpu": self.prefill_gpu or self.gpu,
                "requests_per_s": self.requests_per_s,
                "prefill_capacity_per_s": self.prefill_capacity_per_s,
                "decode_capacity_per_s": self.decode_capacity_per_s,
                "decode_capacity_batch": self.capacity_batch or self.max_batch,
                "prefill_utilization": self.prefill_utilization,
                "kv_transfer_s": self.kv_transfer_s,
                "kv_transfer_bytes_per_gpu": self.kv_transfer_bytes_per_gpu,
                "kv_link": self.kv_link,
                "prefill_memory_per_gpu_gib": gib(self.prefill_memory)},
            "assumptions": self.assumptions,
        }


def kv_transfer(catalog: Catalog, shape: TransformerShape, product: Product,
                 cfg: InferenceConfig, pool: PrefillPool, system: System | None,
                 eff: Efficiency) -> tuple[float, float, str]:
    """(seconds, bytes each prefill GPU sends, link) to move one prompt's KV cache and, for
    a hybrid model, its Mamba-2 state: one final convolution and recurrent state per Mamba-2
    block, the engines' hand-over (vLLM's NixlConnector, PRs 36687 and 37635; SGLang's
    PD transfer of the request's state slot, PR 10912; TensorRT-LLM's cache transceiver, PR
    14060), split as the prefill pool's TP splits it."""
    sent = kv_bytes_per_sequence(shape, cfg.quant.kv_cache.bytes, cfg.input_len, pool.tp,
                                 cfg.window_kv_cache, cfg.mla_cache) \
        + hybrid_state_bytes(shape, pool.tp, cfg.ssm_state_bytes)
    if pool.product is not None and pool.product.key != product.key:
        # two GPU types sit in two systems: the network, at the slower end's rate
        ends = [(pool.product, pool.system), (product, system)]
        networks = [link_for(p, s, None, required=False)[1] for p, s in ends]
        for (p, s), network in zip(ends, networks, strict=True):
            if network is None:
                raise GpuarchError(
                    f"--prefill-gpu: prefill on {pool.product.name} and decode on "
                    f"{product.name} hand the KV cache over the network, and the catalog "
                    f"gives {s.name if s else p.name} no scale-out network")
        slower = min((n for n in networks if n is not None), key=lambda n: n.bandwidth)
        group = Group(2, 1, slower, slower)
        return float(collective_time(Collective.P2P, sent, group, eff)), sent, \
            slower.fabric.value
    total = pool.gpus + cfg.gpus
    domain = system.nvlink_domain_gpus if system is not None else None
    together = total <= cfg.gpus_per_node or bool(domain and total <= domain)
    pcie = catalog.pcie_generation(product.pcie_generation or 0)
    intra, inter = link_for(product, system, pcie.x16_bandwidth_bytes_s if pcie else None)
    if not together and inter is None:
        raise GpuarchError(f"--prefill-gpus: {pool.gpus} prefill and {cfg.gpus} decode GPUs "
                           f"do not fit one {cfg.gpus_per_node}-GPU node, so the KV cache "
                           "crosses the network; give --system with one")
    group = Group(2, 2 if together else 1, intra, inter)
    link = (intra if together else inter or intra).fabric.value
    return float(collective_time(Collective.P2P, sent, group, eff)), sent, link


def estimate_disaggregated(catalog: Catalog, shape: TransformerShape, product: Product,
                           cfg: InferenceConfig, pool: PrefillPool, *,
                           rate: float | None = None, concurrency: int | None = None,
                           system: System | None = None,
                           efficiency: Efficiency = DEFAULT_EFFICIENCY) -> DisaggEstimate:
    """Serve with ``pool`` prefilling and ``cfg``'s GPUs (TP, PP, EP, formats) decoding:
    at ``cfg.batch`` sequences per decode replica (None: the most that fit; fewer where the
    prefill pool cannot keep that many decoding, the batch its rate holds), at ``rate``
    requests per second, or for a closed-loop client that keeps ``concurrency`` requests in
    flight (a benchmark's maximum concurrency: each request waits for and takes its prefill,
    is handed over and decodes, so fewer than ``concurrency`` decode at once;
    ``closed_loop``). Errors name the flag when a pool cannot hold the model or cannot
    carry the rate."""
    pool.validate()
    if rate is not None and concurrency is not None:
        raise GpuarchError("--rate and --concurrency: give one of them (requests arriving "
                           "per second, or requests a client keeps in flight)")
    if concurrency is not None and (isinstance(concurrency, bool) or
                                    not isinstance(concurrency, int) or concurrency < 1):
        raise GpuarchError(f"--concurrency: expected an integer >= 1, got {concurrency!r}")
    if cfg.output_len < 2:
        raise GpuarchError("--output-len: disaggregated serving decodes from the second "
                           "token on; give at least 2")
    decode = replace(cfg, batching=Batching.CONTINUOUS, num_requests=0, max_output_len=0)
    decode.validate(shape)
    prefill_product = pool.product or product
    prefill_system = pool.system if pool.product is not None else system
    prefill = prefill_pool_config(decode, gpus=pool.gpus, tp=pool.tp, ep=pool.ep,
                                  gpus_per_node=prefill_system.gpus_per_node
                                  if prefill_system else decode.gpus_per_node,
                                  max_num_tokens=pool.max_num_tokens or decode.max_num_tokens)
    try:
        prefill.validate(shape)
    except GpuarchError as exc:  # name the prefill pool's own flags
        own = r"tp|ep|gpus|max-num-tokens" if pool.max_num_tokens else r"tp|ep|gpus"
        raise GpuarchError(re.sub(rf"^--({own})\b", r"--prefill-\1", str(exc))) from None

    # prefill: passes of 1 .. per_pass whole prompts (what a replica holds); a pass of k
    # prompts serves k requests and takes the aggregated model's own pass of k prompts
    held = max_batch_that_fits(shape, prefill, prefill_product)
    if held < 1:
        raise GpuarchError(f"--prefill-gpus: {shape.name} does not fit a prefill replica of "
                           f"{pool.replica_gpus} x {prefill_product.name}")
    pass_s = np.asarray(pass_times(catalog, shape, prefill_product, prefill,
                                   system=prefill_system, efficiency=efficiency).prefill_s,
                        dtype=float)
    sizes = np.arange(1, pass_s.size + 1)
    prefill_rate = float(prefill.replicas) * sizes / pass_s  # requests/s at each pass size
    prefill_capacity = float(prefill_rate.max())

    # decode: every batch that fits; each sequence emits output_len - 1 tokens there
    limit = max_batch_that_fits(shape, decode, product)
    if decode.max_batch_size:
        limit = min(limit, decode.max_batch_size)
    if limit < 1:
        raise GpuarchError(f"--gpus/--tp: {shape.name} does not fit a decode replica of "
                           f"{decode.tp * decode.pp} x {product.name}")
    batches = np.arange(1, limit + 1)
    core = evaluate_inference(catalog, shape, product, decode, batches, system=system,
                              efficiency=efficiency)
    per_step = decode.acceptance_length if decode.speculative_tokens else 1.0
    tpot = np.asarray(core.step.total, dtype=float) / per_step
    decode_rate = float(decode.replicas) * batches / ((cfg.output_len - 1) * tpot)
    decode_capacity = float(decode_rate[-1 if cfg.batch is None else
                                        min(cfg.batch, limit) - 1])

    bottleneck = "prefill" if prefill_capacity < decode_capacity else "decode"
    transfer, sent, link = kv_transfer(catalog, shape, product, decode, pool, system,
                                        efficiency)
    queue = 0.0
    if concurrency is not None:
        # within both pools' capacities by construction (up to rounding at a full pool)
        loop = closed_loop(concurrency, decode.replicas, cfg.output_len, tpot.tolist(),
                           sizes.tolist(), pass_s.tolist(), prefill.replicas, transfer)
        load = min(loop.rate, prefill_capacity, decode_capacity)
        queue = loop.queue_s
        utilization_cap = 1.0
    elif rate is None:
        load = min(prefill_capacity, decode_capacity)
        utilization_cap = MAX_PREFILL_LOAD
    else:
        if not (rate > 0 and math.isfinite(rate)):
            raise GpuarchError(f"--rate: expected a positive number of requests per "
                               f"second, got {rate}")
        for pool_name, capacity, flag in (("prefill", prefill_capacity, "--prefill-gpus"),
                                          ("decode", decode_capacity, "--gpus")):
            if rate > capacity:
                raise GpuarchError(f"--rate: {rate:g} requests/s is more than the {pool_name} "
                                   f"pool carries ({capacity:.3g} requests/s); more "
                                   f"{flag} would carry it")
        load = rate
        utilization_cap = 1.0
    # the decode batch the load settles at (where the prefill pool is the narrower, the
    # batch its rate keeps in flight, not the batch given: the decode replicas cannot fill
    # faster than prompts arrive), and the pass size that keeps up with it
    b = int(np.nonzero(decode_rate >= load * (1 - 1e-12))[0][0])
    if cfg.batch is not None and rate is None and bottleneck == "decode":
        b = min(cfg.batch, limit) - 1
    if concurrency is not None:  # the whole batch that holds the loop's mean
        b = min(limit, max(1, math.ceil(loop.batch - 1e-9))) - 1
    chosen = best_pass(load / prefill.replicas, sizes.tolist(), pass_s.tolist(),
                       utilization_cap)
    assert chosen is not None  # load <= prefill_capacity
    k, rho, wait = chosen
    service = float(pass_s[k])
    ttft = service + wait + transfer + queue
    step = float(tpot[b])
    if concurrency is not None:  # the mean decoding batch, between two whole ones
        step = float(np.interp(loop.batch, batches, tpot))
    memory = memory_per_gpu(shape, decode, b + 1, product)
    prefill_memory = memory_per_gpu(shape, prefill, int(sizes[k]), prefill_product)
    return DisaggEstimate(
        model=shape.name, gpu=product.name, prefill_gpus=pool.gpus, decode_gpus=cfg.gpus,
        batch=b + 1, max_batch=limit, ttft_s=ttft, tpot_s=step,
        request_latency_s=ttft + (cfg.output_len - 1) * step, requests_per_s=load,
        output_tokens_per_s=load * cfg.output_len,
        prefill_capacity_per_s=prefill_capacity, decode_capacity_per_s=decode_capacity,
        prefill_utilization=load / prefill_capacity, bottleneck=bottleneck,
        kv_transfer_s=transfer, kv_transfer_bytes_per_gpu=sent, kv_link=link,
        memory=memory, prefill_memory=prefill_memory, gpu_memory_bytes=product.memory_bytes,
        prefill_gpu=prefill_product.name if prefill_product.key != product.key else "",
        capacity_batch=limit if cfg.batch is None else min(cfg.batch, limit),
        assumptions={
            "formats": {"weights": cfg.quant.weights.value,
                        "activations": cfg.quant.activations.value,
                        "kv_cache": cfg.quant.kv_cache.value},
            "kv_cache_fallback": cfg.kv_cache_fallback,
            "prefill": {"gpu": prefill_product.name, "gpus": pool.gpus, "tp": pool.tp,
                        "ep": pool.ep,
                        "replicas": prefill.replicas, "max_num_tokens": prefill.max_num_tokens,
                        "prompts_per_pass": int(sizes[k]),
                        "pass_s": service, "busy": rho, "wait_s": wait},
            "decode": {"gpus": cfg.gpus, "tp": cfg.tp, "pp": cfg.pp, "ep": cfg.ep,
                       "replicas": decode.replicas},
            # whose MoE kernels, and the fixed time per expert layer they take on each
            # pool's GPU (estimate.inference.moe_block_floor_s)
            "moe_kernels": cfg.moe_kernels if shape.is_moe else None,
            "moe_gemm_kernel": cfg.moe_gemm_kernel if shape.is_moe else None,
            "moe_block_floor_s": {
                role: moe_block_floor_s(catalog.chip_of(p).sm.tensor_core_generation,
                                        cfg.moe_kernels, efficiency)
                for role, p in (("prefill", prefill_product), ("decode", product))}
            if shape.is_moe else None,
            "rate_given": rate is not None and concurrency is None,
            # a closed-loop client's requests in flight, the mean each decode replica holds
            # of them and the wait for a pool beyond what the loop's rate leaves
            "closed_loop": {"concurrency": concurrency, "decoding_per_replica": loop.batch,
                            "queue_s": queue} if concurrency is not None else None,
            # what the hand-off carries beside the prompt's KV cache: a hybrid model's
            # Mamba-2 state, one per block, on each prefill GPU
            "mamba_state_sent_bytes_per_gpu": hybrid_state_bytes(shape, pool.tp,
                                                                 cfg.ssm_state_bytes)
            if shape.is_hybrid else None,
            "prefill_gpu_memory_bytes": prefill_product.memory_bytes,
            "reserve_fraction": RESERVE_FRACTION if not cfg.kv_cache_fraction else None,
            "model": "estimate.disagg: the aggregated model's operators per pool; checked "
                     "on two published disaggregated runs (InferenceMAX's GPT-OSS-120B and "
                     "DeepSeek-R1 on GB200, sources inferencemax-20764588467 and "
                     "inferencemax-20321908209)",
        })
