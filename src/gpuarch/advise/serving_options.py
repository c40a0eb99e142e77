"""A serving deployment as the advisor lists it: the option record, the GPU and formats it
runs on, and the constraint checks, price, power and energy that turn an estimate into an
option (``deployment``), for aggregated and disaggregated deployments alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product, System
from gpuarch.errors import GpuarchError
from gpuarch.estimate.energy import facility_power_w, serving_energy_kwh
from gpuarch.perf.kv_formats import kv_cache_run
from gpuarch.perf.quant import (
    QuantFormat,
    QuantScheme,
    activations_run,
    gemm_peak,
    in_sixteen_bit,
    sixteen_bit_format,
)
from gpuarch.units import Unit, from_si

if TYPE_CHECKING:
    from gpuarch.advise.infer import InferenceSearch

__all__ = ["CHECKPOINT_SCHEME", "Candidate", "InferenceOption", "Point", "PrefillPlan",
           "deployment", "native"]

CHECKPOINT_SCHEME = "checkpoint"
"""The label of the formats a ``config.json``'s checkpoint declares (``InferenceSearch.
checkpoint_quant``), searched besides the others on every GPU: the checkpoint as shipped,
dequantized where the GPU lacks its format."""


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
    # the routed experts' activations, where the checkpoint gives them (NVFP4 experts: W4A4)
    expert_activations: str | None = None
    # disaggregated: the prefill pool (the other fields describe the decode pool, except
    # ``gpus``, ``usd_per_hour`` and ``power_kw``, which count both); None: aggregated
    prefill: PrefillPlan | None = None
    # "aggregated" or "disaggregated": follows ``prefill`` (a field so that JSON carries it)
    mode: str = field(init=False, default="aggregated")

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode",
                           "aggregated" if self.prefill is None else "disaggregated")

    @property
    def formats(self) -> str:
        """Weights (with the activations when they are neither 16-bit nor the weights' own
        format, as in W4A8), the routed experts' weights where they differ, and KV cache:
        'Wfp8/KV fp8', 'Wint4 Afp8/KV fp8', 'Wbf16 experts Wmxfp4/KV bf16'."""
        acts = "" if self.activations in ("bf16", "fp16", self.weights) \
            else f" A{self.activations}"
        experts = f" experts W{self.expert_weights}" if self.expert_weights else ""
        if self.expert_weights and self.expert_activations:
            experts += f" A{self.expert_activations}"
        return f"W{self.weights}{acts}{experts}/KV {self.kv_cache}"


@dataclass(frozen=True)
class Point:
    """One batch size's numbers from the estimate's array evaluation."""

    fits: bool
    ttft_s: float
    tpot_s: float
    latency_s: float
    tokens_per_s: float  # one serving unit
    memory_bytes: float
    decode_limiter: str


@dataclass(frozen=True)
class Candidate:
    """The GPU and formats being searched, and what every option on them shares."""

    product: Product
    system: System | None
    price: float | None
    label: str
    scheme: QuantScheme
    expert_weights: QuantFormat | None
    seconds_per_token_at_peak: float  # 2 x active parameters over the scheme's peak
    expert_activations: QuantFormat | None = None


def in_gpu_formats(catalog: Catalog, product: Product, label: str, scheme: QuantScheme
                   ) -> tuple[str, QuantScheme]:
    """A searched scheme as ``product`` runs it: its BF16 parts FP16 on a GPU without BF16
    (before Ampere), as engines run them there, and the label saying so; the model's own
    checkpoint (``CHECKPOINT_SCHEME``), searched on every GPU, weight-only with 16-bit
    activations where the Tensor Cores lack its FP8 or FP4 (the other schemes are searched
    only where their formats are native), and its KV cache in a format an engine stores
    there (``perf.kv_formats.kv_cache_run``: INT8 for an FP8 cache before Ampere)."""
    sixteen = sixteen_bit_format(product)
    activations = in_sixteen_bit(scheme.activations, sixteen)
    if label == CHECKPOINT_SCHEME:
        activations = activations_run(product, activations)
    if sixteen is QuantFormat.FP16:
        label = label.replace("bf16", "fp16")
    return label, QuantScheme(in_sixteen_bit(scheme.weights, sixteen), activations,
                              kv_cache_run(catalog, product, scheme.kv_cache).format)


def native(product: Product, scheme: QuantScheme) -> bool:
    if scheme.weight_only or scheme.activations.is_16bit:
        return True
    try:
        return gemm_peak(product, scheme).peak.fallback_reason is None
    except GpuarchError:
        return False


def deployment(where: Candidate, search: InferenceSearch, split: tuple[int, int, int],
                batch: int, est: Point, gpus: int, replicas: int, tps: float,
                prefill: PrefillPlan | None = None,
                prefill_where: Candidate | None = None,
                why: list[str] | None = None) -> InferenceOption | None:
    """The option for ``gpus`` in all delivering ``tps`` output tokens/s with ``est``'s
    latencies, or None when it misses a constraint (named in ``why`` when given: "gpus",
    "ttft", "tpot", "throughput", "budget" or "power", the first it misses). A
    disaggregated deployment's two pools (``prefill`` on ``prefill_where``'s GPU) are priced
    and powered each on its own GPU; each pool's utilisation counts the tokens it processes
    (prompts, outputs)."""
    product = where.product
    tp, pp, ep = split

    def miss(name: str) -> InferenceOption | None:
        """No option: ``name`` is the constraint missed."""
        if why is not None:
            why.append(name)
        return None

    if gpus > search.max_gpus:
        return miss("gpus")
    ttft_cap, tpot_cap = search.ttft_cap_ms, search.tpot_cap_ms
    if ttft_cap is not None and from_si(est.ttft_s, Unit.MS) > ttft_cap:
        return miss("ttft")
    if tpot_cap is not None and from_si(est.tpot_s, Unit.MS) > tpot_cap:
        return miss("tpot")
    if search.min_throughput is not None and tps < search.min_throughput:
        return miss("throughput")
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
        return miss("budget")
    known = all(p.tdp_w for p, _, _, _, _ in pools)
    power = from_si(sum(facility_power_w(p.tdp_w, n, search.facility)
                        for p, _, n, _, _ in pools if p.tdp_w), Unit.KW) if known else None
    if search.max_power_kw is not None and (power is None or power > search.max_power_kw):
        return miss("power")
    seconds_per_million = 1e6 / tps
    kwh = None
    if known:
        # utilisation: the 2 x active-parameter FLOPs of the tokens a pool processes, against
        # its GPUs' peak for the scheme
        kwh = sum(serving_energy_kwh(p.tdp_w, n, tokens, spt, seconds_per_million,
                                     search.facility)
                  for p, _, n, tokens, spt in pools if p.tdp_w)
    price = where.price
    scheme = where.scheme
    return InferenceOption(
        gpu=product.key, gpu_name=product.name, gpus=gpus, replicas=replicas, tp=tp, pp=pp,
        ep=ep, batch=batch, scheme=where.label, weights=scheme.weights.value,
        activations=scheme.activations.value, kv_cache=scheme.kv_cache.value,
        expert_weights=where.expert_weights.value if where.expert_weights else None,
        expert_activations=where.expert_activations.value if where.expert_activations
        else None,
        ttft_ms=from_si(est.ttft_s, Unit.MS),
        tpot_ms=from_si(est.tpot_s, Unit.MS),
        request_latency_s=est.latency_s, output_tokens_per_s=tps,
        memory_per_gpu_gib=from_si(est.memory_bytes, Unit.GIB), usd_per_hour=per_hour,
        usd_per_million_tokens=(per_hour * from_si(seconds_per_million, Unit.HOUR)
                                if per_hour is not None else None),
        kwh_per_million_tokens=kwh, power_kw=power, price_usd_per_gpu_hour=price,
        bottleneck={"decode": est.decode_limiter}, prefill=prefill)
