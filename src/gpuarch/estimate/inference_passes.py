"""One serving pass through the model on one replica: the operators of a prefill pass or a
decode step, costed on the GPU by the roofline and the engines' measured kernels, with the
collectives between GPUs and the host's fixed times."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import (
    BLACKWELL_TENSOR_CORES,
    HOPPER_TENSOR_CORES,
    Product,
    System,
    drives_tensor_cores_async,
)
from gpuarch.errors import GpuarchError
from gpuarch.estimate.expert_load import busiest_rank_experts, expected_experts_touched
from gpuarch.estimate.host_link import product_host_link
from gpuarch.estimate.inference_config import (
    CHUNK_PASSES_COSTED,
    COMBINE_BYTES,
    EMBEDDING_BYTES,
    HGX_GPUS,
    MOE_GEMM_KERNELS,
    PYTHON_EXECUTORS,
    Batching,
    InferenceConfig,
    engine_of,
    moe_block_floor_s,
    real_slots,
    routed_slots,
    slot_spread,
)
from gpuarch.estimate.inference_memory import mla_entry_bytes
from gpuarch.estimate.inkling_ops import loop_message_ops, relative_bias_ops, short_conv_ops
from gpuarch.estimate.mamba import (
    mamba_decode_ops,
    mamba_input_projections,
    mamba_mixer_ops,
    x_proj_reduce_bytes,
)
from gpuarch.perf.collectives import (
    Collective,
    Fabric,
    Group,
    Num,
    collective_time,
    dispatch_time,
    engine_all_reduce_applies,
    engine_all_reduce_time,
    exchange_latencies,
    link_for,
    nvls_for,
    one_shot_all_reduce,
)
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.num import any_of, ceil, maximum, minimum, where
from gpuarch.perf.precision import Precision
from gpuarch.perf.quant import GemmPeak, QuantFormat, QuantScheme, gemm_peak
from gpuarch.perf.roofline import (
    CONTEXT_ATTENTION,
    INDEXER,
    MLA_DECODE,
    SPREAD_ROWS,
    Attention,
    Device,
    Elementwise,
    Gemm,
    Op,
    attention_residual_op,
    compressed_attention_ops,
    hyper_connection_ops,
    mean_keys,
    moe_permute,
    op_kind,
    op_time,
    per_layer_input_op,
    stream_ops,
    sub_norm_op,
)
from gpuarch.workloads.flops import (
    attention_core_dims,
    attention_expert_gemms,
    attention_projections,
    conv_tap_gemms,
    mlp_side_gemms,
    per_layer_input_gemms,
    router_gemms,
    stream_gemms,
)
from gpuarch.workloads.params import indexer_projections, layer_op_shares
from gpuarch.workloads.shape import TransformerShape

__all__ = [
    "EXPERT_GEMM_PREFIX",
    "GATHERED_OPS",
    "OP_PARTS",
    "PhaseSeconds",
    "ReplicaRunner",
    "context_note",
    "decode_attention_time",
    "decode_rows",
    "exchange_note",
    "mixed_input_dequant",
    "mla_decode_attention_time",
    "moe_module_time",
    "moe_rank_tokens",
    "stage_lanes",
    "with_expert_options",
]


@dataclass
class PhaseSeconds:
    """Seconds of one phase on the critical path, by kind. Treated as a value (every
    operation returns a new one); not frozen, as an estimate builds a few dozen and a
    frozen dataclass costs five times as much to build."""

    compute: Num = 0.0  # compute-bound operators
    memory: Num = 0.0  # memory-bound operators
    communication: Num = 0.0
    overhead: Num = 0.0
    host: Num = 0.0  # the executor's host time beyond the GPU's step (it waits on the host)

    @property
    def total(self) -> Num:
        return self.compute + self.memory + self.communication + self.overhead + self.host

    def __add__(self, o: PhaseSeconds) -> PhaseSeconds:
        return PhaseSeconds(self.compute + o.compute, self.memory + o.memory,
                      self.communication + o.communication, self.overhead + o.overhead,
                      self.host + o.host)

    def scale(self, k: Num) -> PhaseSeconds:
        return PhaseSeconds(self.compute * k, self.memory * k, self.communication * k,
                      self.overhead * k, self.host * k)

    def as_dict(self) -> dict[str, Num]:
        return {"compute": self.compute, "memory": self.memory,
                "communication": self.communication, "overhead": self.overhead,
                "host": self.host}

    def limiter(self) -> str:
        """The largest part; "host" whenever the step waits on the executor's host work
        (its host time is only the excess over the GPU's, but it sets the step)."""
        host = self.host
        if (float(np.max(host)) if isinstance(host, np.ndarray) else host) > 0.0:
            return "host"
        parts = self.as_dict()
        return max(parts, key=lambda k: parts[k])

    def limiters(self) -> np.ndarray:
        """The limiter of each element when the phase holds arrays (first largest wins,
        as ``limiter`` does; "host" where the step waits on the host)."""
        names = list(self.as_dict())
        stack = np.stack(np.broadcast_arrays(*[np.asarray(v, dtype=np.float64)
                                               for v in self.as_dict().values()]))
        picked: np.ndarray = np.array(names, dtype=object)[np.argmax(stack, axis=0)]
        host = np.broadcast_to(np.asarray(self.host, dtype=np.float64), picked.shape)
        return np.where(host > 0.0, "host", picked).astype(object)


OP_PARTS = ("dense_gemms", "expert_gemms", "attention", "mamba_scan", "memory_bound",
            "lm_head", "tensor_parallel", "expert_parallel", "pipeline_p2p", "overhead",
            "host", "eager_launch", "attention_dp_wait", "weight_offload")
"""How ``prefill_parts_s`` and ``decode_step_parts_s`` split a phase's seconds: the dense
GEMMs (in decode mostly their weight reads), the experts' GEMMs with the router, attention
(in decode mostly its KV-cache reads), a hybrid model's Mamba-2 convolution and scan (in
decode mostly its recurrent state's read and write), memory-bound elementwise work (norms,
residuals, activation, MoE permutation), the LM head, the tensor-parallel all-reduces, the expert
all-to-alls, the pipeline sends, fixed per-layer/per-step/per-pass overheads, the
executor's host time beyond the GPU's step, the wait of eager decode steps on the host
launching their kernels (``eager_share``), the time an attention-data-parallel group's
prefill passes wait for its busiest rank (``ReplicaRunner.prefill_skew``), and the copies of
weights kept in host memory (``cpu_offload_gib``)."""


def _split(op: Op, device: Device, eff: Efficiency) -> tuple[Num, Num]:
    """(time, whether compute-bound) of one operator; the bound rule of ``op_cost``."""
    t, t_cmp, t_mem, _, _ = op_time(op, device, eff)
    compute = t_mem < t_cmp if isinstance(op, Elementwise) else t_cmp >= t_mem
    return t, compute


EXPERT_GEMM_PREFIX = "expert_"
"""Names of the routed experts' GEMMs (``expert_up``, ``expert_down``): they run in the
configuration's expert formats (``InferenceConfig.expert_quant``)."""


GATHERED_OPS = ("expert_up", "expert_down", "expert_up_identity", "expert_down_identity",
                "moe_permute", "activation")
"""An expert layer's operators over the tokens its EP group gathers from every rank (the
routed experts' GEMMs, the permutation and the experts' activation); the rest of the layer
(projections, attention, norms, router, shared experts) runs on each rank's own tokens."""


_GEMM_DEVICES: dict[tuple[int, QuantScheme, int | None],
                    tuple[Product, tuple[GemmPeak, Device]]] = {}
"""``_gemm_device``'s answers by the product's identity (kept beside each answer, so the
identity stays its own while it is held), scheme and Tensor Core generation: every estimate
looks up two or three, the same few over a search or a validation run."""


def _gemm_device(product: Product, quant: QuantScheme, generation: int | None
                 ) -> tuple[GemmPeak, Device]:
    """The peak a scheme's GEMMs run at and the device that costs them (16-bit attention,
    the GPU's bandwidth and vector rate)."""
    key = (id(product), quant, generation)
    held = _GEMM_DEVICES.get(key)
    if held is not None and held[0] is product:
        return held[1]
    if len(_GEMM_DEVICES) >= 256:
        _GEMM_DEVICES.clear()
    answer = _new_gemm_device(product, quant, generation)
    _GEMM_DEVICES[key] = (product, answer)
    return answer


def _new_gemm_device(product: Product, quant: QuantScheme, generation: int | None
                     ) -> tuple[GemmPeak, Device]:
    """``_gemm_device`` worked out."""
    peak = gemm_peak(product, quant)
    act = Precision.FP16 if quant.activations is QuantFormat.FP16 else Precision.BF16
    base = Device.of(product, act, generation)
    return peak, Device(product, act, peak.peak, base.vector_flops, base.bandwidth,
                        base.attention_flops, generation, base.attention_key,
                        max(1.0, peak.peak.flops / base.attention_flops))


def _norms_residuals(tokens: Num, shape: TransformerShape, block: bool = False
                     ) -> Elementwise:
    """A layer's norms and residual adds: ten 16-bit passes over its tokens' hidden states
    (two norms, each read and written, and two residual adds), four more with sandwich
    norms; five in a hybrid model's block (one norm, one residual add), seven with a norm
    after it too."""
    passes = 3 + 2 * shape.block_norms if block else 10 + 2 * (shape.layer_norms - 2)
    return Elementwise(passes * tokens * shape.hidden * 2.0, name="norms_residuals")


def moe_rank_tokens(tokens: int, tp: int, ep: int) -> int:
    """Tokens a rank's attention holds when ``tokens`` enter its MoE module: with attention
    data parallelism (EP > TP) the module gathers the EP / TP ranks' tokens, else the same."""
    return tokens * tp // ep if ep > tp else tokens


def moe_module_time(catalog: Catalog, shape: TransformerShape, product: Product,
                    cfg: InferenceConfig, tokens: int, system: System | None = None,
                    efficiency: Efficiency = DEFAULT_EFFICIENCY) -> float:
    """Seconds the serving model charges one GPU for one expert layer's fused MoE module at
    ``tokens`` tokens entering it (with attention data parallelism, EP > TP, every rank's
    tokens of the group): its expert GEMMs, permutation, activation and fixed floor, without
    attention, norms, the router's GEMM or any all-to-all; the module that TensorRT-LLM's
    measured MoE layers time (validation/moe_kernels.py)."""
    if not shape.is_moe:
        raise GpuarchError(f"--model: {shape.name} has no experts")
    if moe_rank_tokens(tokens, cfg.tp, cfg.ep) < 1:
        raise GpuarchError(f"tokens: {tokens} entering the module leave a rank's attention "
                           f"none at TP {cfg.tp} and EP {cfg.ep}; give at least "
                           f"{-(-cfg.ep // cfg.tp)}")
    runner = ReplicaRunner(catalog, shape, product, cfg, system, efficiency, balanced_routing=True)
    runner.parts = {}
    per_rank = moe_rank_tokens(tokens, cfg.tp, cfg.ep)
    runner.layer(per_rank, 1, per_rank, per_rank, runner.experts_touched(per_rank), moe=True,
                 prefill=True)
    norms = _split(_norms_residuals(per_rank, shape), runner.device, efficiency)[0]
    parts = runner.parts
    return float(parts["expert_gemms"] + parts["overhead"] + parts["memory_bound"] - norms)


def _activation_bytes(quant: QuantScheme) -> float:
    """Bytes of one activation element as a scheme's GEMMs take it in."""
    return 2.0 if quant.activations.is_16bit else quant.activations.bytes


def mla_decode_attention_time(catalog: Catalog, shape: TransformerShape, product: Product,
                              kv_cache: QuantFormat, seqs: int, ctx: int,
                              efficiency: Efficiency = DEFAULT_EFFICIENCY,
                              fp8_math: bool = True) -> float:
    """Seconds the serving model charges one GPU for one decode step's absorbed latent
    attention core over ``seqs`` sequences of ``ctx`` cached tokens, all query heads on it
    (TP 1); the kernel TensorRT-LLM's measured MLA generation rows time
    (validation/attention_kernels.py); ``fp8_math`` as ``InferenceConfig.fp8_mla_decode``."""
    if shape.mla is None:
        raise GpuarchError(f"--model: {shape.name} has no multi-head latent attention")
    return decode_attention_time(catalog, shape, product, kv_cache, seqs, ctx, efficiency,
                                 fp8_math=fp8_math)


def decode_attention_time(catalog: Catalog, shape: TransformerShape, product: Product,
                          kv_cache: QuantFormat, seqs: int, ctx: int,
                          efficiency: Efficiency = DEFAULT_EFFICIENCY, *, fp8_math: bool = True,
                          window: int = 0) -> float:
    """Seconds the serving model charges one GPU for one decode step's attention core (one
    new token per sequence) over ``seqs`` sequences of ``ctx`` cached tokens, all of the
    shape's heads on it (TP 1), at most ``window`` positions each if given; ``fp8_math`` as
    ``InferenceConfig.fp8_mla_decode``. The op that TensorRT-LLM's measured
    generation-attention rows time (validation/attention_kernels.py)."""
    cfg = InferenceConfig(input_len=ctx, output_len=2, batch=seqs,
                          quant=QuantScheme(QuantFormat.BF16, QuantFormat.BF16, kv_cache),
                          fp8_mla_decode=fp8_math)
    runner = ReplicaRunner(catalog, shape, product, cfg, None, efficiency)
    runner.parts = {}
    runner.layer(seqs, seqs, 1, ctx + 1, 0.0, moe=False, window=window)
    return float(runner.parts["attention"])


class ReplicaRunner:
    """Costs the layers of one model on one GPU for one scheme."""

    def __init__(self, catalog: Catalog, shape: TransformerShape, product: Product,
                 cfg: InferenceConfig, system: System | None, eff: Efficiency,
                 balanced_routing: bool = False) -> None:
        self.s, self.cfg, self.eff = shape, cfg, eff
        # the routed experts' GEMMs of a fine-grained MoE in reduced precision run at a
        # further fraction (Efficiency.moe_gemm_fine), in NVFP4 a further one still
        # (Efficiency.moe_gemm_nvfp4), MXFP4 weights against FP8 activations and
        # block-scaled FP8 their own (Efficiency.moe_gemm_mxfp4_fp8, moe_gemm_fp8_block)
        weights, acts = cfg.expert_quant.weights, cfg.expert_quant.activations
        self.expert_eff = eff
        generation = catalog.chip_of(product).sm.tensor_core_generation
        # SGLang's wide-EP path on Hopper runs block-scaled FP8 experts as DeepGEMM's
        # grouped GEMMs, at their own measured rate
        block_fp8 = weights is QuantFormat.FP8 and acts is QuantFormat.FP8 \
            and cfg.fp8_scaling == "block"
        self.deepgemm = cfg.moe_kernels == "sglang-deepep" and shape.is_moe \
            and generation == HOPPER_TENSOR_CORES and block_fp8
        if self.deepgemm:
            self.expert_eff = eff.with_value("moe_gemm", eff.moe_gemm_deepgemm)
        elif shape.is_fine_grained_moe and not (weights.is_16bit and acts.is_16bit):
            factor = eff.moe_gemm_fine
            if weights is QuantFormat.FP4 and acts is QuantFormat.FP4:
                factor *= eff.moe_gemm_nvfp4
            elif weights is QuantFormat.MXFP4 and acts is QuantFormat.FP8:
                factor *= eff.moe_gemm_mxfp4_fp8
            elif block_fp8:
                factor *= eff.moe_gemm_fp8_block
            self.expert_eff = eff.with_value("moe_gemm", eff.moe_gemm * factor)
        # grouped GEMMs written for Ampere's synchronous Tensor Core instructions, on a GPU
        # that drives its Tensor Cores asynchronously (MOE_GEMM_KERNELS)
        if cfg.moe_gemm_kernel == MOE_GEMM_KERNELS[1] and drives_tensor_cores_async(
                catalog.chip_of(product).compute_capability):
            self.expert_eff = self.expert_eff.with_value(
                "moe_gemm", self.expert_eff.moe_gemm * eff.moe_gemm_ampere_kernel)
        self.peak, self.device = _gemm_device(product, cfg.quant, generation)
        # the Python executor's host and its time per request in flight and expert layer:
        # measured on a Grace host, an x86 host's shorter (Efficiency.host_time_x86_speedup)
        self.host_cpu = "grace" if product.grace_host else "x86"
        self.host_s_per_request_layer = eff.host_time_per_request_expert_layer_s / (
            1.0 if product.grace_host else eff.host_time_x86_speedup)
        # the LM head in 16 bits (EMBEDDING_BYTES) unless the whole model runs wider
        sixteen = QuantScheme(QuantFormat.BF16, QuantFormat.BF16, cfg.quant.kv_cache)
        self.head_device = self.device if cfg.quant.weights.bytes >= EMBEDDING_BYTES \
            else _gemm_device(product, sixteen, generation)[1]
        # the routed experts' GEMMs, in their own formats where they differ
        self.expert_peak, self.expert_device = (self.peak, self.device) \
            if cfg.expert_quant == cfg.quant else \
            _gemm_device(product, cfg.expert_quant, generation)
        # prefill attention at the FP8 rate (FP8 context FMHA) where the engine runs it: with
        # quantized activations (the attention output feeds an FP8 or FP4 GEMM) and an FP8
        # KV cache
        self.context_device = self.device
        acts = cfg.quant.activations
        if cfg.fp8_context_attention and cfg.quant.kv_cache is QuantFormat.FP8 \
                and (acts is QuantFormat.FP8 or acts.is_float4):
            fp8_device = self.device.with_fp8_attention()
            if fp8_device is None:
                raise GpuarchError(f"--fp8-context-attention: {product.name} has no FP8 "
                                   "Tensor Cores (Ada, Hopper or newer)")
            self.context_device = fp8_device
        # absorbed multi-head latent attention in decode: Blackwell's MLA generation kernels
        # run their math in FP8 over an FP8 cache (Efficiency.mla_decode_attention), unless
        # the engine's kernel computes in 16 bits (InferenceConfig.fp8_mla_decode)
        self.mla_decode_device = self.device
        if shape.mla is not None and cfg.quant.kv_cache is QuantFormat.FP8 \
                and (generation or 0) >= BLACKWELL_TENSOR_CORES and cfg.fp8_mla_decode:
            self.mla_decode_device = self.device.with_fp8_attention() or self.device
        # a sparse-attention indexer's scores run in FP8 over its FP8 keys where the GPU has
        # FP8 Tensor Cores (DeepGEMM's MQA-logits kernels, which the engines call)
        self.indexer_device = self.device
        self.op_shares = layer_op_shares(shape)
        # (a block-sparse model's indexer in the scheme's format: its FP8 kernels are not
        # published)
        if shape.indexer_layers and shape.block_sparse is None:
            self.indexer_device = self.device.with_fp8_attention() or self.device
        # the fused MoE block's fixed time per expert layer and pass (TensorRT-LLM's kernels
        # on Blackwell their own)
        self.moe_floor = moe_block_floor_s(generation, cfg.moe_kernels, eff)
        self.act_bytes = _activation_bytes(cfg.quant)
        self.expert_act_bytes = _activation_bytes(cfg.expert_quant)
        self.weight_bytes = cfg.quant.weights.bytes
        self.expert_weight_bytes = cfg.expert_quant.weights.bytes
        pcie = catalog.pcie_generation(product.pcie_generation or 0)
        intra, inter = link_for(product, system, pcie.x16_bandwidth_bytes_s if pcie else None,
                                required=cfg.tp * cfg.pp * cfg.ep > 1)
        if system is None and intra.fabric is Fabric.NVLINK:
            # without --system, the GPU's reference system says whether an NVSwitch joins
            # its GPUs (as it gives the GPUs per node)
            intra = dataclasses.replace(
                intra, nvls_efficiency=nvls_for(product, catalog.system_for(product)))
        per_node = min(cfg.tp, cfg.gpus_per_node)
        self.tp_group = Group(cfg.tp, per_node, intra, inter)
        self.architecture = product.architecture
        self.engine_all_reduce = engine_all_reduce_applies(
            self.tp_group, product.architecture, system or catalog.system_for(product))
        # the engines' one-shot kernels join one host's GPUs, at most 8
        self.one_shot_all_reduce = cfg.tp <= one_shot_all_reduce().ranks(product.key,
                                                                          cfg.gpus_per_node)
        self.ep_group = Group(cfg.ep, min(cfg.ep, cfg.gpus_per_node), intra, inter)
        # an all-to-all's fixed times (dispatch, combine): the one-shot kernels', but
        # TensorRT-LLM's DeepEP path where it has no multi-node NVLink (an 8-GPU board)
        self.trtllm_deepep = engine_of(cfg.moe_kernels) == "trtllm" \
            and cfg.gpus_per_node <= HGX_GPUS
        self.a2a_latency = exchange_latencies(eff, self.trtllm_deepep)
        self.spread = slot_spread(shape, cfg)
        # routed copies a token makes (fewer where the kernels skip identity slots), and
        # those that reach real experts' rows (the rest, where the kernels run identity
        # slots, all on expert 0)
        self.slots = routed_slots(shape, cfg)
        self.real_slots = real_slots(shape)
        # True where every rank runs the same number of experts (the measured kernels'
        # balanced routing, moe_module_time's)
        self.balanced_routing = balanced_routing
        # a token crosses every stage boundary in turn: those between nodes over the network
        # (stages TP ranks apart, gpus_per_node // TP of them in a node), the rest inside one
        stages_per_node = max(1, cfg.gpus_per_node // cfg.tp)
        crossing = -(-cfg.pp // stages_per_node) - 1
        self.pp_hops = ((cfg.pp - 1 - crossing, Group(2, 2, intra, inter)),
                        (crossing, Group(2, 1, intra, inter)))
        # when a dict, the seconds each call adds are also summed there by kind
        # (``OP_PARTS``), times the multiplicity ``_weight`` of the call in progress
        self.parts: dict[str, float] | None = None
        self._weight = 1.0
        # prefill passes already costed for single values (``forward``): a continuous-
        # batching estimate prices the same pass for the steady state and for a new
        # prompt's first token
        self._forward_cache: dict[tuple[Any, ...], tuple[PhaseSeconds, dict[str, float]]] = {}
        # weights kept in host memory (cpu_offload_gib) cross the GPU's link to its CPU in
        # every forward pass (none counted where that link's rate is not catalogued)
        self.host_link: float | None = None
        self.offload_s = 0.0
        if cfg.cpu_offload_gib:
            self.host_link = product_host_link(catalog, product)
            if self.host_link:
                self.offload_s = cfg.cpu_offload_bytes / self.host_link

    def _add(self, key: str, seconds: Num) -> None:
        if self.parts is not None:
            self.parts[key] = self.parts.get(key, 0.0) + self._weight * float(seconds)

    def _scaled(self, k: Num, phase: Callable[[], PhaseSeconds]) -> PhaseSeconds:
        """``phase()`` times ``k``, with its parts counted ``k`` times."""
        if self.parts is None:
            return phase().scale(k)
        outer = self._weight
        self._weight = outer * float(k)
        try:
            return phase().scale(k)
        finally:
            self._weight = outer

    def _gemm(self, m: Num, n: int, k: int, name: str, batch: Num = 1) -> Gemm:
        if name.startswith(EXPERT_GEMM_PREFIX):  # the fused MoE block's grouped GEMMs
            return Gemm(m, n, k, batch=batch, name=name, weight_element=self.expert_weight_bytes)
        # weight-only kernels spread a GEMM of few rows over every SM (roofline.SPREAD_ROWS);
        # a kernel that converts its weights (weight-only, or W4A8 without the Tensor Cores'
        # mixed-input MMA) dequantizes a few rows' weights at its own rate (mixed_input_floor)
        return Gemm(m, n, k, batch=batch, name=name, weight_element=self.weight_bytes,
                    spread=self.cfg.quant.weight_only,
                    weight_bits=self.cfg.quant.weights.bits if self.peak.dequantize else None)

    def layer(self, tokens: Num, seqs: Num, q_len: int, ctx: Num, experts_touched: Num,
              moe: bool | None = None, window: int = 0, prefill: bool = False,
              overlapped: bool = False, block: str = "", ffn_width: int = 0,
              shared: bool = False) -> PhaseSeconds:
        """One layer on one GPU: ``tokens`` = seqs x q_len new tokens attending to ``ctx``
        positions each (at most ``window`` of them if given); an expert layer if ``moe``
        (default: if the model has experts); in a prefill pass if ``prefill``; one of two
        micro-batches whose exchanges overlap the other's work if ``overlapped``. A hybrid
        model's ``block`` ("M" Mamba-2, "*" attention, "-" MLP, "E" experts) is one part of
        a layer, with one norm, one residual add and one tensor-parallel reduction; a dense
        MLP ``ffn_width`` wide if given (the model's d_ffn otherwise); a KV-shared layer if
        ``shared`` (``TransformerShape.layer_view``)."""
        if moe is None:
            moe = self.s.is_moe
        s = self.s
        ops: list[Op] = []
        if block in ("", "*"):
            view = s.layer_view(window, shared)
            ops += self._attention_ops(view, tokens, seqs, q_len, ctx, window, prefill)
            # Inkling's short convolutions (keys, values and both blocks' outputs), with
            # each sequence's kept inputs (a prefill chunk after the first reads them too)
            ops += short_conv_ops(view, self.cfg.tp, tokens, seqs, 2.0, True)
        inner: Num = 0.0
        if block == "M":
            ops += self._mamba_ops(tokens, q_len, prefill)
        elif block in ("", "-", "E"):
            ffn, inner = self._ffn_ops(tokens, experts_touched, moe, ffn_width)
            ops += ffn
        hidden_bytes = tokens * s.hidden * 2.0
        ops.append(_norms_residuals(tokens, s, bool(block)))
        if s.sub_norms:
            ops.append(sub_norm_op(tokens, s, self.cfg.tp))
        ops += hyper_connection_ops(tokens, s)
        if s.attention_residual_block:
            ops.append(attention_residual_op(tokens, s, 2.0, bool(block)))
        # a looped layer's message gates and messages (Inkling 2 Mini's), in its later runs
        ops += loop_message_ops(s, tokens, self._gemm)
        if s.per_layer_input:
            # per-layer inputs (Gemma 4's PLE): their GEMMs, whole on each GPU, the gate's
            # activation and product, the norm and the residual add
            ops += [self._gemm(tokens, n, k, name) for name, n, k in per_layer_input_gemms(s)]
            ops.append(per_layer_input_op(tokens, s))
        # AltUp's and LAuReL's (Gemma 3n's) GEMMs, whole on each GPU, and stream traffic
        ops += [self._gemm(tokens, n, k, name) for name, n, k in stream_gemms(s)]
        ops += stream_ops(tokens, s)
        if block in ("", "-", "E"):
            ops.append(Elementwise(3.0 * inner * 2.0, name="activation"))
        # a Mamba-1 block's row-parallel x_proj sums its small output over the group too
        reduced = x_proj_reduce_bytes(s.mamba, tokens, 2.0) \
            if block == "M" and s.mamba is not None and s.mamba.selective else None
        return self._run_layer(ops, tokens, q_len, moe, prefill, overlapped, hidden_bytes,
                               bool(block), reduced)

    def _mamba_ops(self, tokens: Num, q_len: int, prefill: bool) -> list[Op]:
        """A recurrent block: its projections (GEMMs in the scheme's formats) around the
        scan over a prefill's tokens, or a decode step's state update per sequence."""
        s, t = self.s, self.cfg.tp
        m = s.mamba
        assert m is not None
        # a decode step's state update per sequence, over each one's q_len tokens when it
        # verifies drafted ones
        mixer = mamba_mixer_ops(m, t, tokens, 2.0, q_len) if prefill else \
            mamba_decode_ops(m, t, tokens / q_len, 2.0, self.cfg.ssm_state_bytes, q_len)
        return [*(self._gemm(tokens, n, k, name) for name, n, k
                  in mamba_input_projections(s, t)), *mixer,
                self._gemm(tokens, s.hidden, m.inner // t, "mamba_out_proj")]

    def _attention_ops(self, s: TransformerShape, tokens: Num, seqs: Num, q_len: int,
                       ctx: Num, window: Num, prefill: bool) -> list[Op]:
        """An attention block's projections and core, with the heads of ``s`` (the model's,
        or its full layers' where they have their own: ``attention_kind``)."""
        if s.compressed is not None:
            return self._compressed_attention_ops(tokens, seqs, q_len, ctx)
        cfg, t = self.cfg, self.cfg.tp
        heads = s.heads // t
        kv_element = cfg.quant.kv_cache.bytes
        m = None if prefill and not self._sparse_prompt(s, ctx) else s.mla
        absorbed = m is not None
        reads = 1.0
        chunked = s.chunks(window)
        if m is not None:
            # decode (a drafted token's verification too) with the up-projections absorbed:
            # one shared latent "head" of kv_lora + rope width is both key and value (values
            # use the kv_lora part), read in the cache's layout (``mla_entry_bytes``)
            d = (m.latent_width + m.kv_lora_rank) // 2
            kv = 1
            kv_element = mla_entry_bytes(s, kv_element, cfg.mla_cache) / (2 * d)
        else:
            core_kv, d = attention_core_dims(s)
            kv = max(1, core_kv // t)
            if s.keys_are_values:
                kv_element /= 2  # one vector a KV head and position, read as both
            if not prefill and (cfg.decode_kv_reads == "per-query-head" or (
                    chunked and cfg.decode_kv_reads == "chunked-per-query-head")):
                # a multi-head decode kernel: each query head reads its KV head's cache
                reads = heads / kv
        if chunked and not prefill:
            # a decode step runs at the mean context; a chunked layer's queries see their
            # chunk's positions, whose mean over the decode steps stands in as the window
            window, chunked = self.decode_chunk_keys, False
        projections = attention_projections(s, t)
        ops: list[Op] = [self._gemm(tokens, n, k, name) for name, n, k in projections[:-1]]
        per_expert: Num = 0
        touched: Num = 0
        if s.attention_experts:
            # a mixture of attention heads (JetMoE's): the keys and values and the router for
            # every token, then each touched expert's query projection for its tokens (a
            # decode step reads only the experts its tokens chose); the output projections
            # likewise after the core
            (kv_name, kv_n, kv_k), (r_name, r_n, r_k), (q_name, q_n, q_k), out = \
                attention_expert_gemms(s, t)
            touched = expected_experts_touched(s.attention_experts, s.experts_per_token, tokens)
            per_expert = maximum(1, ceil(tokens * s.experts_per_token / maximum(touched, 1.0)))
            ops = [self._gemm(tokens, kv_n, kv_k, kv_name), Gemm(tokens, r_n, r_k, name=r_name),
                   self._gemm(per_expert, q_n, q_k, q_name, batch=ceil(touched))]
            projections = [*projections[:-1], out]
        if s.mla is not None and s.mla.sparse:
            # DeepSeek Sparse Attention: the indexer scores every held position, and the
            # attention reads only the index_topk it picks (as a window of that many would)
            ops += self._indexer_ops(s, tokens, seqs, q_len, ctx)
            window = s.mla.index_topk
        elif s.block_sparse is not None:
            # a block-sparse layer (MiniMax-M3; its dense layers' view has none): the indexer
            # scores every held position, and the attention reads the blocks it picks (the
            # layer kind's window, their positions)
            ops += self._indexer_ops(s, tokens, seqs, q_len, ctx)
        # Inkling's relative position bias: its table, then the core's reads of it; Inkling
        # 2's full layers' projections to their convolutions' taps
        ops += relative_bias_ops(s, tokens, heads, window, ctx)
        ops += [self._gemm(tokens, n, k, name) for name, n, k in conv_tap_gemms(s, window, t)]
        # (differential attention: the core twice, two calls as Transformers' DiffLlama
        # makes, each reading the keys and half the values, all heads' worth)
        ops += [Attention(seqs, q_len, ctx, heads, kv, d, causal=True,
                          kv_element=kv_element, window=window, chunked=chunked,
                          kv_head_reads=reads,
                          name=MLA_DECODE if absorbed else CONTEXT_ATTENTION if prefill
                          else "attention")] * s.attention_calls
        name, n, k = projections[-1]
        if s.attention_experts:
            ops.append(self._gemm(per_expert, n, k, name, batch=ceil(touched)))
            return ops
        ops.append(self._gemm(tokens, n, k, name))
        return ops

    def _compressed_attention_ops(self, tokens: Num, seqs: Num, q_len: int, ctx: Num
                                  ) -> list[Op]:
        """A DeepSeek-V4 layer's attention (``roofline.compressed_attention_ops``): the core
        in the latent attention's MQA form, prefill and decode alike (FlashMLA's sparse
        kernels, which vLLM and SGLang run for V4), at ``mla_decode_attention``, reading one
        entry a key (keys and values one vector) in the cache's layout; the indexer's scores
        over its FP8 keys."""
        s, c = self.s, self.s.compressed
        assert c is not None
        entry = c.entry_bytes(self.cfg.quant.kv_cache.bytes, s.d_head)
        core = Attention(seqs, q_len, ctx, s.heads // self.cfg.tp, 1, s.d_head, causal=True,
                         kv_element=entry / (2 * s.d_head), window=c.window, name=MLA_DECODE)
        indexer = Attention(seqs, q_len, ctx, c.index_heads, 1, c.index_head_dim,
                            causal=True, kv_element=c.index_key_bytes / c.index_head_dim)
        return compressed_attention_ops(s, self.cfg.tp, tokens, self._gemm, core, indexer)

    @staticmethod
    def _sparse_prompt(s: TransformerShape, ctx: Num) -> bool:
        """Whether a prefill pass over ``ctx`` held positions runs sparse attention in a
        layer of ``s`` (a kind's view: a window layer of dots3-note's has no indexer): more
        positions than the indexer chooses, where the engines' sparse prefill kernels run
        the latent attention absorbed (MQA mode: query/key 576, value 512 wide; FlashMLA's
        sparse prefill, the only mode TensorRT-LLM's DSA runs); at or below it they run the
        dense MHA-mode prefill (SGLang below 2,048 tokens, TensorRT-LLM's fast path)."""
        m = s.mla
        if m is None or not m.sparse:
            return False
        return bool(np.all(np.asarray(ctx) > m.index_topk))

    def _indexer_ops(self, s: TransformerShape, tokens: Num, seqs: Num, q_len: int, ctx: Num
                     ) -> list[Op]:
        """A sparse-attention layer's indexer: its projections, whole on every tensor-
        parallel GPU, and its scores of each query's heads against every held position's
        FP8 key (``INDEXER``). Where no more positions are held than it would choose, the
        engines skip the scores and the top-k (TensorRT-LLM's fast path for short
        sequences, PR 9524; SGLang's dense prefill below 2,048 tokens): their work counts
        for nothing there. A block-sparse layer's (MiniMax-M3) the same, its key at the
        cache's width, its top-k its blocks' positions."""
        b = s.block_sparse
        if b is not None:
            heads, dim, topk = b.index_heads, b.index_head_dim, b.positions
            key_bytes = b.index_key_bytes(self.cfg.quant.kv_cache.bytes)
        else:
            m = s.mla
            assert m is not None
            heads, dim, topk, key_bytes = (m.index_heads, m.index_head_dim, m.index_topk,
                                           float(m.index_key_bytes))
        ops: list[Op] = [self._gemm(tokens, n, k, name)
                         for name, n, k in indexer_projections(s)]
        if isinstance(ctx, np.ndarray) or ctx > topk:
            scored = where(ctx > topk, 1.0, 0.0)
            ops.append(Attention(seqs * scored, q_len, ctx, heads, 1, dim, causal=True,
                                 kv_element=key_bytes / dim, values=False, name=INDEXER))
        return ops

    @cached_property
    def decode_chunk_keys(self) -> float:
        """Mean positions a chunked-attention layer's decode query sees over a request's
        decode steps (its positions after the input, ``output_in_flight`` of them): its own
        chunk's up to itself; with ``sliding_window`` the chunk size."""
        cfg = self.cfg
        steps = max(1.0, cfg.output_in_flight)
        return float(mean_keys(steps, cfg.input_len + steps, self.s.sliding_window,
                               chunked=True))

    def _ffn_ops(self, tokens: Num, experts_touched: Num, moe: bool, ffn_width: int = 0
                 ) -> tuple[list[Op], Num]:
        """A dense MLP's (``ffn_width`` wide if given, else d_ffn) or an expert block's
        operators, and the elements its activation function reads."""
        s, cfg, t = self.s, self.cfg, self.cfg.tp
        ops: list[Op] = []
        up_factor = 2 if s.ffn_kind.gated else 1
        if moe:
            # experts are split over max(TP, EP) GPUs: EP divides the experts, what is left
            # of TP divides each expert's width; an EP group wider than TP spans replicas
            # (data-parallel attention), whose tokens all reach its experts
            moe_tp = max(1, t // cfg.ep)
            gathered = max(1.0, cfg.ep / t)
            touched = experts_touched if gathered == 1.0 else \
                self.experts_touched(tokens * gathered)
            # redundant copies of an expert share its tokens: the slots touched grow with
            # them, and each rank holds its share of the slots
            # the layer waits for the rank whose local experts the tokens touched most
            # (expert_load.py), not the average rank; the measured kernels' balanced
            # routing (moe_module_time) spreads them evenly
            local = touched / cfg.ep if self.balanced_routing else busiest_rank_experts(
                s.experts // cfg.ep, touched / s.experts, cfg.ep)
            touched = touched * self.spread
            local = maximum(1.0, local * self.spread)
            routed = tokens * gathered * self.real_slots * cfg.moe_imbalance
            per_expert = maximum(1, ceil(routed / maximum(touched, 1.0)))
            width = s.d_expert
            outer = s.expert_width  # what the routed experts read and write
            # identity slots the kernels run (vLLM's, remapped to expert 0 with zero
            # weight): every one on expert 0's rows, on the rank that holds it
            identity = tokens * gathered * (self.slots - self.real_slots)
            ops += [Gemm(tokens, n, k, name=name) for name, n, k in router_gemms(s)]
            if s.moe_latent:
                # latent experts: every rank projects its tokens to the latent width and
                # back (the projections are replicated over TP)
                ops += [self._gemm(tokens, s.moe_latent, s.hidden, "moe_latent_down"),
                        self._gemm(tokens, s.hidden, s.moe_latent, "moe_latent_up")]
            ops += [self._gemm(per_expert, up_factor * width // moe_tp, outer, "expert_up",
                               batch=ceil(local)),
                    self._gemm(per_expert, outer, width // moe_tp, "expert_down",
                               batch=ceil(local))]
            if self.slots > self.real_slots:
                ops += [self._gemm(ceil(identity), up_factor * width // moe_tp, outer,
                                   "expert_up_identity"),
                        self._gemm(ceil(identity), outer, width // moe_tp,
                                   "expert_down_identity")]
            if s.shared_experts:
                shared = width * s.shared_experts
                ops += [self._gemm(tokens, up_factor * shared // t, s.hidden, "shared_up"),
                        self._gemm(tokens, s.hidden, shared // t, "shared_down")]
            # a GPU permutes, activates and un-permutes only the copies routed to its own
            # experts, 1/EP of the group's (TensorRT-LLM's expandInputRowsKernel stops at
            # the local experts' last row); they go in quantized as the GEMMs take them and
            # come out of the down projection in 16 bits
            ops.append(moe_permute(routed / cfg.ep + identity, outer, self.expert_act_bytes,
                                   2.0))
            inner = (routed / cfg.ep + identity) * width // moe_tp
        else:
            f = ffn_width or s.d_ffn
            # (a shared block's gate/up adapter and output projection after it: Zamba's)
            ops += [self._gemm(tokens, up_factor * f // t, s.hidden, "mlp_up"),
                    self._gemm(tokens, s.hidden, f // t, "mlp_down"),
                    *(self._gemm(tokens, n, k, name)
                      for name, n, k in mlp_side_gemms(s, t))]
            inner = tokens * f // t
        return ops, inner

    def _run_layer(self, ops: list[Op], tokens: Num, q_len: int, moe: bool, prefill: bool,
                   overlapped: bool, hidden_bytes: Num, block: bool,
                   reduced: Num | None = None) -> PhaseSeconds:
        """A layer's (or hybrid block's) operators, collectives and fixed time; ``reduced``:
        bytes of a further all-reduce over the tensor-parallel group (a Mamba-1 block's
        x_proj output)."""
        s, cfg, t = self.s, self.cfg, self.cfg.tp
        if moe:
            gathered = max(1.0, cfg.ep / t)
        # an attention-data-parallel group's prefill passes wait for the rank with the most
        # context tokens in the work each rank does on its own tokens (all but the gathered
        # expert block)
        skew = self.prefill_skew if prefill else 1.0
        compute_time: Num = 0.0
        memory_time: Num = 0.0
        for op in ops:
            expert = isinstance(op, Gemm) and op.name.startswith(EXPERT_GEMM_PREFIX)
            device = self.expert_device if expert else self.mla_decode_device \
                if op.name == MLA_DECODE else self.indexer_device if op.name == INDEXER \
                else self.context_device \
                if isinstance(op, Attention) and q_len > 1 else self.device
            time, compute = _split(op, device, self.expert_eff if expert else self.eff)
            share = self.op_shares.get(op.name)
            if share is not None:  # an operator of some of the layers only
                time = time * share
            if isinstance(op, Gemm) and (self.expert_peak if expert else self.peak).dequantize:
                time = where(compute, time * (1 + self.eff.dequant_overhead), time)
            self._add(op_kind(op), time)
            if skew != 1.0 and not (moe and op.name in GATHERED_OPS):
                self._add("attention_dp_wait", time * (skew - 1.0))
                time = time * skew
            compute_time = compute_time + where(compute, time, 0.0)
            memory_time = memory_time + where(compute, 0.0, time)
        phase = PhaseSeconds(compute=compute_time, memory=memory_time)
        tp_comm: Num = 0.0
        ep_comm: Num = 0.0
        if t > 1:
            # one all-reduce per block, or one a layer with parallel attention (one a hybrid
            # model's block)
            tp_comm = (1 if block else s.tp_reductions) * self.tp_all_reduce(hidden_bytes)
            if reduced is not None:
                tp_comm = tp_comm + self.tp_all_reduce(reduced)
        if moe and cfg.exchanges_tokens and cfg.moe_comm == "allgather":
            # every GPU of the group gathers all its ranks' tokens (quantized as the GEMMs
            # take them), and the 16-bit partial outputs are reduce-scattered back
            every = tokens * gathered * s.expert_width
            ep_comm = collective_time(Collective.ALL_GATHER, every * self.expert_act_bytes,
                                      self.ep_group, self.eff) \
                + collective_time(Collective.REDUCE_SCATTER, every * 2.0, self.ep_group,
                                  self.eff)
        elif moe and cfg.exchanges_tokens:
            # a one-shot dispatch kernel sends each routed copy, quantized as the GEMMs take
            # it, and the combine returns the experts' outputs in 16 bits
            copies = tokens * self.slots * s.expert_width / t * cfg.moe_imbalance
            dispatch, combine = self.a2a_latency
            # a prefill pass's exchange across nodes runs the high-throughput kernels, which
            # send a token over the network once per node (DeepEP's normal mode); decode's
            # low-latency kernels send every copy
            dedupe = self.slots if prefill else 0
            groups = (s.expert_groups, s.groups_per_token)
            ep_comm = dispatch_time(copies * self.expert_act_bytes, self.ep_group, self.eff,
                                    dispatch, dedupe, groups) \
                + dispatch_time(copies * COMBINE_BYTES, self.ep_group, self.eff, combine,
                                dedupe, groups)
        # the fused MoE block's fixed chain of kernels (routing, sorting, grouped GEMMs'
        # fill and drain, activation, weighted sum) beyond its bytes and FLOPs
        fixed = self.eff.layer_overhead_s * (0.5 if block else 1.0) \
            + (self.moe_floor if moe else 0.0)
        if overlapped:
            # one of two micro-batches: its exchange runs while the other computes the same
            # work, and the share tbo_exchange_hidden of the shorter of the two is hidden
            ep_comm = ep_comm - self.eff.tbo_exchange_hidden * minimum(
                ep_comm, compute_time + memory_time + tp_comm + fixed)
        self._add("tensor_parallel", tp_comm)
        self._add("expert_parallel", ep_comm)
        self._add("overhead", fixed)
        return phase + PhaseSeconds(communication=tp_comm + ep_comm) + PhaseSeconds(overhead=fixed)

    def tp_all_reduce(self, size_bytes: Num) -> Num:
        """Seconds for one all-reduce of ``size_bytes`` over the tensor-parallel group: the
        engine's own kernels or NCCL (``InferenceConfig.all_reduce``) where those were
        measured (inside one NVLink domain of Ampere, Hopper or Blackwell GPUs), else the
        serving ring model."""
        cfg = self.cfg
        if self.engine_all_reduce:
            return engine_all_reduce_time(size_bytes, self.tp_group, self.eff, cfg.all_reduce,
                                          self.architecture, cfg.nvls, self.one_shot_all_reduce)
        return collective_time(Collective.ALL_REDUCE, size_bytes, self.tp_group, self.eff,
                               nvls=cfg.nvls)

    @property
    def prefill_skew(self) -> float:
        """How much longer a prefill pass's per-rank work takes than on evenly loaded ranks:
        for an attention-data-parallel group (EP wider than TP) under continuous batching,
        one over the balance ratio its scheduler reaches (``Efficiency.adp_prefill_balance``,
        or ``adp_prefill_balance_lined_up`` with ``InferenceConfig.adp_balance``); else 1."""
        cfg, eff = self.cfg, self.eff
        if self.s.is_moe and cfg.exchanges_tokens and cfg.batching is Batching.CONTINUOUS:
            return 1.0 / (eff.adp_prefill_balance_lined_up if cfg.adp_balance
                          else eff.adp_prefill_balance)
        return 1.0

    def head(self, tokens: Num) -> PhaseSeconds:
        gemm = Gemm(tokens, -(-self.s.head_rows // self.cfg.tp), self.s.hidden, name="lm_head",
                    weight_element=max(self.weight_bytes, EMBEDDING_BYTES))
        time, compute = _split(gemm, self.head_device, self.eff)
        self._add("lm_head", time)
        return PhaseSeconds(compute=where(compute, time, 0.0), memory=where(compute, 0.0, time))

    def experts_touched(self, tokens: Num) -> Num:
        """Expected distinct experts a layer's tokens are routed to (uniform routing)."""
        s = self.s
        if not s.is_moe:
            return 0.0
        return expected_experts_touched(s.experts, self.real_slots, tokens)

    def forward(self, seqs: Num, q_len: int, ctx: Num, rows: Num | None = None,
                prefill: bool = False) -> PhaseSeconds:
        """The whole model for ``seqs`` sequences of ``q_len`` new tokens at context ``ctx``:
        the pipeline stages run one after the other for one batch. ``rows``: the sequences
        the GEMMs, experts and LM head run for when a padded CUDA graph adds dummy ones
        (their attention, over a token or two, is left out). ``prefill``: a prefill pass
        (not a decode step, even one verifying several drafted tokens)."""
        if rows is None:
            rows = seqs
        if not prefill or any(isinstance(x, np.ndarray) for x in (seqs, ctx, rows)):
            return self._forward(seqs, q_len, ctx, rows, prefill)
        # a prefill pass for single values is costed once, with the seconds it adds to
        # ``parts`` by kind (counted once per pass, then weighted as the call in progress is)
        key = (float(seqs), q_len, float(ctx), float(rows), prefill)
        cached = self._forward_cache.get(key)
        if cached is None:
            outer_parts, outer_weight = self.parts, self._weight
            self.parts, self._weight = {}, 1.0
            try:
                cached = (self._forward(seqs, q_len, ctx, rows, prefill), self.parts)
            finally:
                self.parts, self._weight = outer_parts, outer_weight
            self._forward_cache[key] = cached
        phase, parts = cached
        for kind, seconds in parts.items():
            self._add(kind, seconds)
        return phase

    def _kinds(self) -> list[tuple[bool, int, float, str, int, bool]]:
        """(expert layer?, attention window, share of the layers, hybrid block, dense MLP
        width or 0, KV-shared?) for each kind of layer (``TransformerShape.layer_kinds``), or
        of a hybrid model's block (its MLP blocks by width where they differ:
        ``mlp_kinds``)."""
        s = self.s
        if s.is_hybrid:
            kinds = []
            for block in sorted(set(s.hybrid_pattern)):
                if block == "-" and s.mlp_widths:
                    kinds += [(False, 0, n / s.layers, block, width, False)
                              for width, n, _ in s.mlp_kinds()]
                elif block == "*" and s.windowed_layers:
                    # attention blocks within a window and over every position (LFM3)
                    kinds += [(False, window, n / s.layers, block, 0, False)
                              for window, n, _ in s.attention_kinds()]
                else:
                    kinds.append((block == "E", 0, s.hybrid_pattern.count(block) / s.layers,
                                  block, 0, False))
            return kinds
        return [(moe, window, share, "", s.layer_view(window, True).d_ffn if shared else 0,
                 shared) for moe, window, share, shared in s.layer_kinds()]

    def _forward(self, seqs: Num, q_len: int, ctx: Num, rows: Num, prefill: bool) -> PhaseSeconds:
        """``forward`` without its cache."""
        tokens = rows * q_len
        s = self.s
        touched = self.experts_touched(tokens)
        layers = math.ceil(s.layers / self.cfg.pp) * self.cfg.pp
        # layer counts by kind: expert or dense (the leading dense layers of an MoE model),
        # full or sliding-window attention
        body = PhaseSeconds()
        tbo = self.cfg.two_batch_overlap
        half = self.experts_touched(tokens / 2) if tbo else 0.0
        for moe, window, share, block, width, shared in self._kinds():
            def one(moe: bool = moe, window: int = window, block: str = block,
                    width: int = width, shared: bool = shared) -> PhaseSeconds:
                return self.layer(tokens, seqs, q_len, ctx, touched if moe else 0.0,
                                  moe=moe, window=window, prefill=prefill, block=block,
                                  ffn_width=width, shared=shared)

            def halves(window: int = window) -> PhaseSeconds:
                # two-batch overlap: the expert layer runs twice at half the batch
                return self._scaled(2, lambda: self.layer(
                    tokens / 2, seqs / 2, q_len, ctx, half, moe=True, window=window,
                    prefill=prefill, overlapped=True))

            body = body + self._scaled(layers * share, halves if moe and tbo else one)
        total = body + self.head(rows)
        if self.offload_s:
            # every stage copies its GPU's offloaded weights up before running them
            self._add("weight_offload", self.offload_s * self.cfg.pp)
            total = total + PhaseSeconds(communication=self.offload_s * self.cfg.pp)
        if self.cfg.pp > 1:
            act = tokens * self.s.hidden * self.act_bytes
            p2p = sum(hops * collective_time(Collective.P2P, act, group, self.eff)
                      for hops, group in self.pp_hops if hops)
            self._add("pipeline_p2p", p2p)
            total = total + PhaseSeconds(communication=p2p)
        return total

    def prefill(self, seqs: Num) -> PhaseSeconds:
        """Prefill ``seqs`` prompts, chunked if configured, at most ``max_num_tokens`` per
        pass (whole prompts are grouped into passes)."""
        length = self.cfg.input_len
        cached = self.cfg.cached_prefix  # in the KV cache already: attended to, not computed
        budget = self.cfg.max_num_tokens
        new = length - cached
        chunk = self.cfg.chunk if 0 < self.cfg.chunk < new else new
        chunk = min(chunk, budget)
        group = max(1, budget // chunk)  # prompts per pass
        phase = PhaseSeconds(overhead=self.eff.prefill_overhead_s)
        self._add("overhead", self.eff.prefill_overhead_s)
        full, rest = divmod(seqs, group)  # passes of whole groups are identical
        for n, times in ((group, full), (maximum(rest, 1), where(rest > 0, 1, 0))):
            if not any_of(times):
                continue

            def one(n: Num = n) -> PhaseSeconds:
                full_chunks, last = divmod(new, chunk)
                total = PhaseSeconds()
                if full_chunks <= CHUNK_PASSES_COSTED:
                    for i in range(full_chunks):
                        total = total + self.forward(n, chunk, cached + (i + 1) * chunk,
                                                     prefill=True)
                else:
                    # a prompt of very many chunks: the chunks differ only in the context
                    # they attend to, so cost evenly spaced ones (each at the middle of its
                    # share of the prompt) and weight each by the chunks it stands for
                    share = full_chunks / CHUNK_PASSES_COSTED
                    for j in range(CHUNK_PASSES_COSTED):
                        end = cached + (int((j + 0.5) * share) + 1) * chunk

                        def at(end: int = end) -> PhaseSeconds:
                            return self.forward(n, chunk, end, prefill=True)

                        total = total + self._scaled(share, at)
                if last:
                    total = total + self.forward(n, last, length, prefill=True)
                return total

            phase = phase + self._scaled(times, one)
        return phase

    def prefill_tokens(self, tokens: np.ndarray) -> np.ndarray:
        """Seconds of one prefill pass of ``tokens`` new prompt tokens in all (an array), as
        prompts of the configured length: the pass's fixed time and the model over that many
        rows, attention at the configured prompt's context (a pass of prompts whose lengths
        vary, ``estimate.simulate``; the rows carry the GEMMs, the quadratic part of
        attention is the mean prompt's). Equal to ``prefill`` for whole prompts within one
        pass's budget."""
        new = self.cfg.new_prompt_tokens
        rows = np.asarray(tokens, dtype=float) / new
        return self.eff.prefill_overhead_s + np.broadcast_to(
            self.forward(rows, new, self.cfg.input_len, prefill=True).total, rows.shape)

    def decode_step(self, seqs: Num, ctx: float) -> PhaseSeconds:
        """One target step: one new token per sequence, or with speculative decoding the k
        drafted tokens and the target's own verified together (k + 1 queries at the end of
        the context), after k draft passes of one target-shaped layer and the LM head each
        (an MTP module or an EAGLE head)."""
        k = self.cfg.speculative_tokens
        position = max(1, round(ctx))
        fixed = self.step_overhead_s
        step = self.forward(seqs, k + 1, position + k, self.graph_rows(seqs)) + PhaseSeconds(
            overhead=fixed)
        self._add("overhead", fixed)
        if k:
            s = self.s
            touched = self.experts_touched(seqs) if s.is_moe else 0.0
            step = step + self._scaled(k, lambda: self.layer(seqs, seqs, 1, position, touched,
                                                             moe=s.is_moe) + self.head(seqs))
        if self.cfg.executor in PYTHON_EXECUTORS:
            # the executor's host work for every request in flight, in proportion to the
            # stage's expert layers, overlaps the GPU's step (overlap scheduler); the step
            # lasts as long as the longer of the two
            per_request = self.host_s_per_request_layer * self.s.moe_layers / self.cfg.pp
            host = maximum(0.0, per_request * seqs - step.total)
            self._add("host", host)
            step = step + PhaseSeconds(host=host)
        eager = self.eager_share(seqs)
        if np.any(eager > 0.0):
            # a step run eagerly lasts at least as long as its host takes to launch the
            # stage's kernels: on average over the steps, that share of them waits on it
            # (one micro-batch's: with several in flight through pipeline stages each
            # stage's host launches them all in turn, so this is a lower bound there)
            wait: Num = eager * maximum(0.0, self.eager_launch_s - step.total)
            if np.ndim(seqs) == 0:
                wait = float(wait)
            self._add("eager_launch", wait)
            step = step + PhaseSeconds(host=wait)
        return step

    @property
    def step_overhead_s(self) -> float:
        """The executor's fixed time per decode step: TensorRT-LLM's PyTorch backend its
        measured one, every other executor the fitted one."""
        if self.cfg.executor == "python":
            return self.eff.decode_step_overhead_pytorch_s
        return self.eff.decode_step_overhead_s

    @property
    def eager_launch_s(self) -> float:
        """The host's time to launch one micro-batch's kernels for the stage's layers, the
        least a decode step run without a captured CUDA graph lasts."""
        return self.eff.eager_decode_host_s_per_layer * self.s.layers / self.cfg.pp

    def eager_share(self, seqs: Num) -> np.ndarray:
        """The share of decode steps of ``seqs`` sequences that run eagerly, without a
        captured CUDA graph: every step of more sequences than the largest captured batch
        (``cuda_graph_batch_sizes``), and those whose longest sequence is beyond the context
        a graph covers (``cuda_graph_max_context``). A static batch's sequences advance
        together, so its steps past that context are eager; in a continuous batch each
        sequence spends the share of its answer past it there, and a step is eager when
        any of the ``seqs`` is (independently: 1 - p^seqs)."""
        cfg = self.cfg
        rows = np.asarray(seqs, dtype=float)
        share = np.zeros_like(rows)
        cap = cfg.cuda_graph_max_context
        if cap:
            start, out = cfg.input_len, cfg.output_len
            if cfg.batching is Batching.STATIC:
                # the step that makes token j + 1 runs over a sequence of I + j tokens
                steps = out - 1
                beyond = min(max(start + out - 1 - cap, 0), steps)
                share = share + (beyond / steps if steps > 0 else 0.0)
            else:
                within = min(max((cap - start) / out, 0.0), 1.0)
                share = share + 1.0 - within ** rows
        if cfg.cuda_graph_batch_sizes:
            share = np.where(rows > max(cfg.cuda_graph_batch_sizes), 1.0, share)
        return share

    def graph_rows(self, seqs: Num) -> Num:
        """The sequences a decode step of ``seqs`` runs for: the smallest captured CUDA-graph
        batch size that holds them when the engine pads (``cuda_graph_batch_sizes``), else
        ``seqs`` (none given, or more than the largest: an eager step)."""
        if not self.cfg.cuda_graph_batch_sizes:
            return seqs
        sizes = np.sort(np.asarray(self.cfg.cuda_graph_batch_sizes, dtype=float))
        at = np.searchsorted(sizes, seqs, side="left")
        return np.where(at < sizes.size, sizes[np.minimum(at, sizes.size - 1)], seqs)

    @property
    def tokens_per_step(self) -> float:
        """Tokens each sequence emits per target step (``InferenceConfig.tokens_per_step``)."""
        return self.cfg.tokens_per_step


def exchange_note(runner: ReplicaRunner) -> dict[str, Any]:
    """How an all-to-all dispatch and combine are priced: whose path, and its fixed times."""
    dispatch, combine = runner.a2a_latency
    return {"path": "TensorRT-LLM's DeepEP low-latency path (no multi-node NVLink)"
            if runner.trtllm_deepep else "one-shot all-to-all kernels",
            "dispatch_fixed_s": dispatch, "combine_fixed_s": combine,
            "per_gpu_s": runner.eff.moe_dispatch_peer_latency_s,
            "combine_bytes_per_element": COMBINE_BYTES,
            # across nodes a prefill pass's exchange crosses the network once per node
            "prefill_node_dedupe": bool(runner.ep_group.nodes > 1),
            "two_batch_overlap_hidden": runner.eff.tbo_exchange_hidden
            if runner.cfg.two_batch_overlap else None}


def context_note(shape: TransformerShape, cfg: InferenceConfig) -> dict[str, Any] | None:
    """The model's configured context and whether a sequence of the configured lengths runs
    past it (the estimate does not stop there: a deployment may extend it with RoPE
    scaling, and the cost model holds at any length)."""
    if not shape.positions:
        return None
    tokens = cfg.input_len + cfg.output_len
    return {"tokens": shape.positions, "sequence": tokens,
            "exceeded": tokens > shape.positions}


def with_expert_options(cfg: InferenceConfig, imbalance: float = 1.0, redundant: int = 0,
                        overlap: bool = False) -> InferenceConfig:
    """``cfg`` with the expert-parallel options a search or a prefill pool carries over from
    the user where its own split can take them: the routing imbalance, redundant expert
    slots and two-batch overlap with EP > 1 (the overlap where the experts exchange by
    all-to-all), the defaults without expert parallelism."""
    wide = cfg.ep > 1
    return dataclasses.replace(
        cfg, moe_imbalance=imbalance if wide else 1.0,
        redundant_experts=redundant if wide else 0,
        two_batch_overlap=overlap and wide and cfg.exchanges_all_to_all)


def mixed_input_dequant(product: Product, quant: QuantScheme, rows: float,
                        eff: Efficiency = DEFAULT_EFFICIENCY,
                        converts: bool | None = None) -> dict[str, Any] | None:
    """What ``assumptions.mixed_input_dequant`` says of the dense GEMMs of a format whose
    weights the kernel converts on ``product`` (weight-only, or W4A8 without mixed-input
    MMA): the kernel's weights a second at that width, and whether it binds on a decode
    step of ``rows`` rows (fewer than SPREAD_ROWS, and slower than the GPU reads those
    weights); None for a format whose weights are not converted or that has no such
    rate. ``converts``: whether they are, where the caller has the GEMM peak already."""
    if not (gemm_peak(product, quant).dequantize if converts is None else converts):
        return None
    rate = eff.mixed_input_weights_s(quant.weights.bits)
    if rate <= 0.0:
        return None
    read = (product.memory_bandwidth_bytes_s or 0.0) * eff.memory / quant.weights.bytes
    return {"weights_per_s": rate, "bits": quant.weights.bits,
            "binds_in_decode": bool(rows < SPREAD_ROWS and rate < read)}


def decode_rows(batch: float, micro_batches: int, speculative_tokens: int = 0) -> float:
    """Rows of a decode step's dense GEMMs at ``batch`` sequences split into up to
    ``micro_batches`` (``InferenceConfig.micro_batches``): one micro-batch's sequences,
    each with its drafted tokens under speculative decoding."""
    return float(batch / stage_lanes(batch, micro_batches) * (1 + speculative_tokens))


def stage_lanes(batch: Num, micro_batches: int) -> Num:
    """Micro-batches that hold a sequence when ``batch`` sequences are split into up to
    ``micro_batches``: the stages working at once."""
    return minimum(micro_batches, maximum(batch, 1.0))
