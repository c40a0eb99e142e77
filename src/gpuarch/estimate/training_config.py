"""How a training job runs (the strategy of Model x Strategy x System): parallelism, batch,
precision, recomputation and the frameworks' options, validated against the model."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuarch.errors import GpuarchError, check_choice, check_count
from gpuarch.estimate.activation_offload import DEFAULT_MIN_ELEMENTS, check_offload_modules
from gpuarch.estimate.lora import DEFAULT_LORA_MODULES, check_lora_modules
from gpuarch.estimate.memory import BytesPerParam, Recompute, bytes_per_param
from gpuarch.estimate.pipeline_layout import (
    PipelineLayout,
    even_layout,
    hybrid_layout,
    parse_pp_layout,
)
from gpuarch.estimate.pipeline_schedule import DUALPIPE_SCHEDULES, PP_SCHEDULES, schedule_chunks
from gpuarch.estimate.recompute import (
    DEFAULT_MODULES,
    check_recompute_modules,
    selective_modules,
)
from gpuarch.perf.fp8_attention import FP8_ATTENTION_SCALINGS
from gpuarch.perf.num import ceil, maximum, minimum, where
from gpuarch.perf.precision import Precision
from gpuarch.units import Unit, from_si
from gpuarch.workloads.flops import attention_core_dims
from gpuarch.workloads.shape import MAX_DIMENSION, TransformerShape

__all__ = [
    "ATTENTION_KERNELS",
    "CP_COMM_TYPES",
    "CUDA_GRAPH_SCOPES",
    "EP_DISPATCHERS",
    "EXPERT_LAUNCHES",
    "FP8_RECIPES",
    "MOE_ROUTINGS",
    "TrainingConfig",
]

EP_DISPATCHERS = ("alltoall", "deepep")
"""MoE token dispatchers: every routed copy sent on its own, or deduplicated by node."""


CP_COMM_TYPES = ("p2p", "all_gather", "a2a")
"""How context-parallel ranks exchange attention inputs (Megatron-Core's ``--cp-comm-type``,
Transformer Engine's ``cp_comm_type``): "p2p" passes key/value chunks around a ring while
each chunk's attention runs (the exchange largely hidden, ``Efficiency.cp_comm_exposed``);
"all_gather" gathers every rank's keys and values before the attention core, which waits
for them; "a2a" (DeepSpeed-Ulysses style) swaps the sequence split for a head split with an
all-to-all of the queries, keys and values before the core and of its output after it, in
the forward pass and again for their gradients in the backward, none of it overlapped."""


CUDA_GRAPH_SCOPES = ("attn", "mamba", "mlp", "moe", "moe_router", "moe_preprocess",
                     "full_iteration")
"""Megatron-Core's ``--cuda-graph-scope`` modules. What the model draws from a scope is
where a dropless MoE dispatcher's host wait goes (``TrainingConfig.ungraphed_expert_share``):
an expert block pays it only when the block before it (attention, or in a hybrid model the
Mamba-2, attention or MLP block) is launched kernel by kernel; ``moe`` (an expert layer
graphed whole, which needs padded, fixed-size expert inputs) and ``full_iteration`` leave no
wait anywhere; ``moe_router`` and ``moe_preprocess`` alone leave it, as the runs that graph
only those read (docs/performance-model.md, "CUDA graph scopes")."""


EXPERT_LAUNCHES = ("per-expert", "grouped", "fused-mlp")
"""How a GPU's expert GEMMs are launched: one GEMM (and, in low precision, one quantization)
per local expert, as Transformer Engine's grouped linear layers do by default (multi-stream
cuBLASLt); one grouped kernel for all of them (CUTLASS or cuBLASLt grouped GEMM with the
shapes on the device); or a fused grouped MLP, whose up projection applies the activation
and, in FP8/FP4, quantizes the down projection's input in its epilogue, so neither makes a
pass through memory of its own (cuDNN frontend's CuTe DSL grouped GEMM + GLU kernels,
Megatron Bridge's ``cutedsl_fused_grouped_mlp``; NVIDIA's timings of them against
Transformer Engine's unfused grouped GEMM, activation and MXFP8 quantization on GB200:
1.25x faster for the SwiGLU forward, 2.0x for its backward, cuDNN frontend
benchmark/cutedsl_fusion_kernels/results)."""


ATTENTION_KERNELS = ("native", "ampere", "triton")
"""Fused attention kernels: the GPU generation's own, one written for Ampere's synchronous
Tensor Core instructions (FlashAttention-2), or 2023's flash attention in Triton (slower
than FlashAttention-2 everywhere: ``Efficiency.attention_triton_kernel``)."""


FRAMEWORK_SETTINGS: dict[str, dict[str, Any]] = {
    "fsdp": {"zero": 3},
    "maxtext": {"zero": 3},
}
"""What naming the training framework family (``--framework``, ``validation.bands.
FRAMEWORKS``' key) sets where its own flag is not given: PyTorch FSDP (FULL_SHARD, FSDP2)
and MaxText's fsdp axis shard weights, gradients and optimizer states over the data-parallel
ranks, ZeRO-3 (every one of the validation's 219 FSDP-family and 6 MaxText runs is entered
so). Megatron's distributed optimizer (ZeRO-1) is the default, ``FRAMEWORK_DEFAULTS``."""

FRAMEWORK_DEFAULTS: dict[str, Any] = {"zero": 1}
"""The framework settings of an estimate that names no framework: Megatron's distributed
optimizer, ZeRO-1."""


def named_recompute_modules(shape: TransformerShape, recompute: Recompute
                            ) -> tuple[str, ...]:
    """The modules a configuration of ``recompute`` that names none must name for
    ``shape``: none (selective recomputation's default, the attention core), or, where the
    core cannot be recomputed (DeepSeek-V4), ``recompute.selective_modules``."""
    modules = selective_modules(shape)
    return modules if recompute is Recompute.SELECTIVE and modules != DEFAULT_MODULES else ()


def framework_settings(framework: str) -> dict[str, Any]:
    """The settings ``framework`` (a family's key, or "" for none) runs: ``FRAMEWORK_SETTINGS``
    over ``FRAMEWORK_DEFAULTS``."""
    return {**FRAMEWORK_DEFAULTS, **FRAMEWORK_SETTINGS.get(framework, {})}


@dataclass(frozen=True, kw_only=True)
class TrainingConfig:
    """How the job runs: parallelism, batch, precision, recomputation."""

    gpus: int
    seq_len: int
    global_batch: int  # sequences per step
    micro_batch: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    # expert tensor parallelism (Megatron --expert-tensor-parallel-size): GPUs each expert's
    # width is split over; 0 = TP (Megatron's default). With fewer than TP, the expert group
    # (EP x ETP) is laid over the tensor-parallel ranks too.
    etp: int = 0
    vpp: int = 1
    sequence_parallel: bool = False
    zero: int = 1
    # hybrid sharding (PyTorch FSDP's HYBRID_SHARD and FSDP2's HSDP, Megatron's
    # --num-distributed-optimizer-instances): ZeRO shards over groups of this many ranks of
    # the DP x CP group, each group a replica of the others whose gradient shards are
    # all-reduced across the groups; 0 = one group of all DP x CP ranks
    dp_shard: int = 0
    # with dp_shard and ZeRO-3: the optimizer state sharded over all DP x CP ranks, the
    # weights and gradients over the group (Megatron-FSDP's Hybrid-FSDP,
    # --outer-dp-sharding-strategy optim); the replicas' gradient reduce-scatter and weight
    # gather once a step move what their all-reduce would
    outer_optimizer_sharding: bool = False
    tp_comm_overlap: bool = False  # Megatron --tp-comm-overlap (userbuffers)
    # ZeRO-3 gathers prefetched a layer ahead (Megatron-FSDP): the per-micro-batch traffic
    # hides behind that micro-batch's compute; off = the exposed fraction of all of it
    fsdp_prefetch: bool = False
    # ZeRO-3 only: False keeps each layer's gathered parameters from its forward to its
    # backward (PyTorch FSDP2's fully_shard(reshard_after_forward=False)): one all-gather a
    # micro-batch instead of two, and the parameters held whole between the passes
    reshard_after_forward: bool = True
    # MoE routing with a capacity bound (tokens over it dropped) and the experts' inputs
    # padded to it (Megatron-Core's drop-and-pad): buffer sizes are known ahead, so the
    # dropless dispatcher's per-layer wait for the host is not paid (token drop without the
    # padding syncs before its first permutation and is priced as dropless)
    moe_token_drop: bool = False
    # partial CUDA graphs (Megatron's cuda_graph_impl "transformer_engine" over the scopes
    # attn, moe_router and moe_preprocess): the host no longer launches the kernels before a
    # dropless dispatcher's sync one by one, so the forward does not wait on it
    cuda_graphs: bool = False
    # the CUDA graph scope when it is not that standard one (CUDA_GRAPH_SCOPES; e.g. a
    # hybrid model's ("mamba",)): the wait is charged to the expert blocks whose preceding
    # block the scope leaves out (ungraphed_expert_share); empty = cuda_graphs decides
    cuda_graph_scope: tuple[str, ...] = ()
    # the dropless dispatcher's host wait per expert layer and forward pass, when the
    # framework's own is measured (seconds; None = Megatron-Core's, fitted:
    # Efficiency.moe_layer_overhead_s or moe_layer_overhead_c2c_s by the host's link)
    dispatcher_wait_s: float | None = None
    # MoE token dispatcher: "alltoall" sends every routed copy of a token on its own
    # (Megatron's alltoall dispatcher); "deepep" deduplicates, a token crossing the network
    # once per destination node and NVLink once per destination GPU (the flex dispatcher
    # with DeepEP or HybridEP)
    ep_dispatcher: str = "alltoall"
    # how context-parallel ranks exchange attention inputs (CP_COMM_TYPES)
    cp_comm_type: str = "p2p"
    # the grouped expert GEMMs launched per local expert (TE's multi-stream cuBLASLt, the
    # default) or as one grouped kernel: the host's launch floor counts one expert then
    expert_launches: str = "per-expert"
    # the expert all-to-alls overlap another micro-batch's compute (Megatron
    # --overlap-moe-expert-parallel-comm, Megatron Bridge's moe_a2a_overlap)
    ep_comm_overlap: bool = False
    # routed tokens on the busiest expert-parallel rank over the mean (1 = balanced, as
    # force-balanced benchmark runs route; real routing is uneven): every rank waits for
    # the busiest at the combine, so its expert section and all-to-alls set the pace
    moe_imbalance: float = 1.0
    # an interleaved pipeline sends activations between chunks while the next chunk
    # computes (Megatron's overlap_p2p_comm: on by default since 2024, and in NeMo and
    # Megatron Bridge recipes; before, the --overlap-p2p-communication flag was off unless
    # set). Non-interleaved 1F1B waits on its sends either way (Megatron runs overlap only
    # the interleaved schedule); DualPipe's paired chunks overlap them by design
    pp_comm_overlap: bool = True
    # each tensor-parallel rank sends only its 1/TP share of a stage's activations and the
    # receiving ranks all-gather them over NVLink (Megatron-LM's scatter/gather optimisation,
    # SC21 section 4.1, default in its pre-Megatron-Core pipeline code); with sequence
    # parallelism the activations are split that way anyway
    pp_scatter_gather: bool = False
    # the embedding and the loss count as a layer each in the pipeline split: the first and
    # last stages hold one transformer layer fewer (Megatron's account_for_embedding_ and
    # account_for_loss_in_pipeline_split)
    pp_edge_layers: bool = False
    # an explicit pipeline layout in Megatron-Core's notation (--pipeline-model-parallel-
    # layout, e.g. "Et*4|(t*4|)*14tmL"; estimate/pipeline_layout.py): what each virtual stage
    # holds; "" = the even split above
    pp_layout: str = ""
    # the pipeline schedule (PP_SCHEDULES): "1f1b" (interleaved with vpp > 1), the zero-
    # bubble "zb1p", DeepSeek's "dualpipe" or its V-shaped half "dualpipev" (vpp 2)
    pp_schedule: str = "1f1b"
    # multi-token-prediction blocks trained beside the model (Megatron --mtp-num-layers;
    # DeepSeek-V3 trains with one): each a layer, a projection and a pass through the shared
    # head, on the last pipeline stage unless ``pp_layout`` places it
    mtp_layers: int = 0
    # the MTP depths run one block, its weights shared (Megatron-Core's
    # --mtp-use-repeated-layer, as Nemotron 3 Super trains its two): parameters, gradients
    # and optimizer state held once, the compute of every depth
    mtp_shared_weights: bool = False
    fused_attention: bool = True  # FlashAttention-style; False = scores materialised
    # the fused attention kernel: "native" (the GPU generation's own: FlashAttention-2 on
    # Ampere and Ada, FlashAttention-3 or cuDNN on Hopper and datacenter Blackwell),
    # "ampere" (written for Ampere: on Hopper and datacenter Blackwell it keeps
    # Efficiency.attention_ampere_kernel of the native speed) or "triton" (2023's Triton
    # flash attention: Efficiency.attention_triton_kernel of "ampere"); see ATTENTION_KERNELS
    attention_kernel: str = "native"
    # fused attention in FP8, forward and backward (Transformer Engine's FP8 dot-product
    # attention, NVTE_FP8_DPA; MLPerf's FP8_DPA): at the FP8 peak (attention_efficiency)
    fp8_attention: bool = False
    # its kernel where measured (perf/fp8_attention.py FP8_ATTENTION_SCALINGS): "tensor",
    # per-tensor scales, or "mxfp8", an MXFP8 recipe's own block-scaled attention; "" (the
    # default) the recipe's: mxfp8 under fp8_recipe "mxfp8", else tensor (NVFP4 runs pin
    # attention to current scaling)
    fp8_attention_scaling: str = ""
    # with --precision fp8, how the GEMM operands are scaled (FP8_RECIPES): "tensor", one
    # scale per tensor (delayed or current scaling), or "mxfp8", one per 32 elements
    fp8_recipe: str = "tensor"
    recompute: Recompute = Recompute.NONE
    # with selective recomputation, the modules recomputed (Megatron-Core's
    # recompute_modules; estimate/recompute.py); () = the attention core
    recompute_modules: tuple[str, ...] = ()
    # with full recomputation, only the first this many layers of each pipeline stage's
    # model chunk are recomputed, the others keep their activations (Megatron's
    # --recompute-method block --recompute-num-layers N); 0 = every layer
    recompute_layers: int = 0
    precision: Precision = Precision.BF16
    # under a low-precision recipe, how many of the model's first and of its last layers
    # (a hybrid's blocks) run in BF16, weights and all (Megatron-Core's
    # --first-last-layers-bf16 with --num-layers-at-start-in-bf16 / -at-end-in-bf16)
    bf16_layers_start: int = 0
    bf16_layers_end: int = 0
    # the MTP blocks too (Megatron Bridge's keep_mtp_spec_in_bf16, as its Nemotron 3 Super
    # recipes set it)
    mtp_bf16: bool = False
    gpus_per_node: int = 8
    # what the framework keeps per parameter (``bytes_per_param``): FP8 weights (Megatron
    # fp8_param_gather), BF16 gradients (grad_reduce_in_fp32 off), or BF16 weights,
    # gradients and Adam moments with no FP32 master copy (PyTorch FSDP2 on a BF16 model)
    fp8_params: bool = False
    bf16_grads: bool = False
    bf16_optimizer: bool = False
    # activation offloading: the saved activations of this many layers go to CPU memory
    # after their forward pass and come back for the backward (Megatron-Core's
    # cpu_offloading_num_layers, activations only)
    offload_layers: int = 0
    # fine-grained activation offloading (Megatron-Core's --fine-grained-activation-
    # offloading --offload-modules; estimate/activation_offload.py): what these modules keep
    # goes to CPU memory after their forward pass and comes back for the backward, each
    # tensor of at least ``offload_min_elements`` elements (min_offloaded_tensor_size)
    offload_modules: tuple[str, ...] = ()
    offload_min_elements: int = DEFAULT_MIN_ELEMENTS
    # optimizer CPU offload (Megatron-Core's --optimizer-cpu-offload with
    # --optimizer-offload-fraction; the distributed optimizer): the Adam moments of this
    # share of the optimizer's elements on the CPU, updated there
    optimizer_offload: float = 0.0
    optimizer_offload_overlap: bool = False  # --overlap-cpu-optimizer-d2h-h2d
    # LoRA fine-tuning (estimate/lora.py): the model's weights frozen, adapters of this rank
    # trained beside the linear layers ``lora_modules`` names (() = all four, Megatron
    # Bridge's default); 0 = every weight trained
    lora_rank: int = 0
    lora_modules: tuple[str, ...] = ()
    # sequences packed from documents of about this many tokens, attention staying inside
    # each (Megatron's packed sequences, THD layout with cu_seqlens: fine-tuning sets such
    # as SQuAD); 0 = attention over the whole sequence, as pre-training runs
    packed_doc_len: int = 0

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    def moe_without_sequence_parallel(self, shape: TransformerShape) -> str:
        """Why Megatron-Core would not train this run (its MoELayer.forward refuses an MoE
        layer at TP > 1 without sequence parallelism), or "" where it would: the note the
        estimate and ``--launch megatron`` print."""
        if not shape.is_moe or self.tp == 1 or self.sequence_parallel:
            return ""
        return (f"Megatron-Core refuses to train an MoE layer at TP {self.tp} without "
                "--sequence-parallel (MoELayer.forward); priced as asked, every "
                "tensor-parallel rank routing all the micro-batch's tokens")

    @property
    def dp_replicas(self) -> Any:
        """Groups the DP x CP ranks form under hybrid sharding (``dp_shard``), each holding
        one sharded copy of the weights and optimizer states; 1 without it (an array of
        them where ``dp_shard`` is one: the advisor's hybrid variants, 0 where not hybrid)."""
        return where(self.dp_shard > 0, self.dp * self.cp // maximum(self.dp_shard, 1), 1)

    @property
    def param_bytes(self) -> BytesPerParam:
        """Bytes each parameter costs for weights, gradients and optimizer states."""
        return bytes_per_param(self.precision, fp8_params=self.fp8_params,
                               bf16_grads=self.bf16_grads,
                               bf16_optimizer=self.bf16_optimizer)

    @property
    def edge_layers(self) -> Any:
        """Layer slots the embedding and the loss take in the pipeline split: two with
        ``pp_edge_layers`` and more than one stage, else none."""
        return where(self.pp > 1, 2, 0) if self.pp_edge_layers else 0

    @property
    def expert_tp(self) -> Any:
        """GPUs each expert's width is split over (``etp``, or TP by default)."""
        return self.etp or self.tp

    @property
    def bf16_layers(self) -> tuple[int, int]:
        """How many of the first and of the last layers run in BF16."""
        return (self.bf16_layers_start, self.bf16_layers_end)

    @property
    def in_bf16(self) -> TrainingConfig:
        """This run as its BF16 layers run: outside the low-precision autocast, so with
        BF16 GEMMs, inputs, weights and attention."""
        return dataclasses.replace(self, precision=Precision.BF16, fp8_attention=False,
                                   fp8_params=False, bf16_layers_start=0, bf16_layers_end=0,
                                   mtp_bf16=False)

    @property
    def attention_fp8_kernel(self) -> str:
        """The FP8 attention kernel this run takes (``FP8_ATTENTION_SCALINGS``, named as the
        recipes are): the one asked for, else its recipe's (per-tensor for NVFP4, whose
        recipe field stays "tensor")."""
        return self.fp8_attention_scaling or self.fp8_recipe

    def ungraphed_expert_share(self, shape: TransformerShape) -> float:
        """The share of ``shape``'s expert blocks whose preceding block runs outside a CUDA
        graph, so that the host, launching it kernel by kernel, falls behind before the
        dropless dispatcher's sync (CUDA_GRAPH_SCOPES): 1 without graphs, 0 with
        ``cuda_graphs`` (attention graphed before every expert layer) or a scope holding the
        blocks before them all. In a hybrid model each expert block's own predecessor in
        ``hybrid_pattern`` decides (the first block has none graphed before it)."""
        scope = set(self.cuda_graph_scope)
        if self.cuda_graphs or scope & {"moe", "full_iteration"}:
            return 0.0
        graphed = {block for block, module in (("*", "attn"), ("M", "mamba"), ("-", "mlp"))
                   if module in scope}
        if not shape.is_hybrid:
            return 0.0 if "*" in graphed else 1.0
        pattern = shape.hybrid_pattern
        before = [pattern[i - 1] if i else "" for i, block in enumerate(pattern)
                  if block == "E"]
        return sum(block not in graphed for block in before) / len(before) if before else 1.0

    def layout(self, shape: TransformerShape) -> PipelineLayout | None:
        """The parsed ``pp_layout`` checked against ``shape`` and the run (for a hybrid
        model, ``hybrid_layout``: its pattern cut by the layout's '|', or split evenly over
        PP > 1 stages), or None. With BF16 layers (``bf16_layers``) the even split is
        written out (``even_layout``) so that each rank is costed with its own."""
        mixed = self.bf16_layers != (0, 0)
        # (the advisor's arrays hold one PP for a hybrid: its chunks are split by PP)
        if shape.is_hybrid and (self.pp_layout or np.max(self.pp) > 1 or mixed):
            return hybrid_layout(shape.hybrid_pattern, pp=self.pp, vpp=self.vpp,
                                 mtp_layers=self.mtp_layers, segments=self.pp_layout,
                                 bf16=self.bf16_layers)
        if not self.pp_layout and not mixed:
            return None
        text = self.pp_layout or even_layout(shape.layers, pp=self.pp, vpp=self.vpp,
                                             mtp_layers=self.mtp_layers,
                                             edge_layers=self.pp_edge_layers)
        return parse_pp_layout(text, pp=self.pp, vpp=self.vpp, layers=shape.layers,
                               dense_layers=shape.layers - shape.moe_layers,
                               mtp_layers=self.mtp_layers, bf16=self.bf16_layers)

    @property
    def attention_span(self) -> int:
        """Tokens a sequence's attention spans: a packed document's, or the sequence's."""
        return min(self.packed_doc_len, self.seq_len) if self.packed_doc_len else self.seq_len

    @property
    def adapted(self) -> tuple[str, ...]:
        """The linear layers that carry LoRA adapters (none without ``lora_rank``)."""
        if not self.lora_rank:
            return ()
        return self.lora_modules or DEFAULT_LORA_MODULES

    @property
    def recomputed(self) -> tuple[str, ...]:
        """The modules the recompute pass runs again under selective recomputation."""
        if self.recompute is not Recompute.SELECTIVE:
            return ()
        return self.recompute_modules or DEFAULT_MODULES

    def full_recompute_share(self, shape: TransformerShape) -> Any:
        """The share of each stage's layers that full recomputation recomputes: all of them,
        or ``recompute_layers`` of each model chunk's (layers + edge slots) / (PP x VPP),
        rounded up as the even split rounds (with an explicit layout, the same mean chunk);
        0 without full recomputation."""
        if self.recompute is not Recompute.FULL:
            return 0.0
        if not self.recompute_layers:
            return 1.0
        chunk = ceil((shape.layers + self.edge_layers) / (self.pp * self.vpp))
        return minimum(1.0, self.recompute_layers / chunk)

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per step (gradient accumulation steps)."""
        return self.global_batch // (self.dp * self.micro_batch)

    def _validate_dp_shard(self, shape: TransformerShape) -> None:
        """``dp_shard`` must split the DP x CP ranks (and a MoE model's expert-data-parallel
        ranks) into equal groups, under a ZeRO stage that shards something."""
        if self.outer_optimizer_sharding and (not self.dp_shard or self.zero != 3):
            raise GpuarchError("--outer-optimizer-sharding: shards the optimizer over the "
                               "replicas of hybrid sharding; needs --dp-shard and --zero 3, got "
                               f"--dp-shard {self.dp_shard} --zero {self.zero}")
        if not self.dp_shard:
            return
        if not isinstance(self.dp_shard, int) or isinstance(self.dp_shard, bool) \
                or self.dp_shard < 1:
            raise GpuarchError(f"--dp-shard: expected a whole number of GPUs >= 1, got "
                               f"{self.dp_shard!r}")
        if self.zero < 1:
            raise GpuarchError("--dp-shard: hybrid sharding needs a ZeRO stage that shards "
                               "(--zero 1, 2 or 3), got --zero 0")
        ranks = self.dp * self.cp
        if ranks % self.dp_shard:
            raise GpuarchError(
                f"--dp-shard: {self.dp_shard} does not divide the {ranks} data-parallel ranks "
                f"(DP {self.dp} x CP {self.cp}); give a divisor of {ranks}")
        if shape.is_moe:
            expert_ranks = self.tp * ranks // (self.expert_tp * self.ep)
            if expert_ranks % self.dp_replicas:
                raise GpuarchError(
                    f"--dp-shard: {self.dp_replicas} replicas (DP x CP {ranks} / "
                    f"{self.dp_shard}) do not divide the {expert_ranks} expert-data-parallel "
                    f"ranks (TP x DP x CP / (ETP x EP)); give a larger --dp-shard")

    def validate(self, shape: TransformerShape) -> None:
        """Raise an error naming the flag when the combination does not divide."""
        for name in ("gpus", "seq_len", "global_batch", "micro_batch", "tp", "pp", "cp", "ep",
                     "vpp", "gpus_per_node"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise GpuarchError(f"--{name.replace('_', '-')}: expected an integer >= 1, "
                                   f"got {value!r}")
        if self.seq_len > MAX_DIMENSION:
            raise GpuarchError(f"--seq-len: expected at most {MAX_DIMENSION:,} tokens (past "
                               f"any model's context), got {self.seq_len}")
        shape.check_pipeline(self.pp)
        if self.recompute_modules:
            if self.recompute is not Recompute.SELECTIVE:
                raise GpuarchError("--recompute-modules: needs --recompute selective, got "
                                   f"--recompute {self.recompute.value}")
            check_recompute_modules(self.recompute_modules, shape)
        check_count("--recompute-layers", self.recompute_layers)
        check_count("--lora-rank", self.lora_rank)
        for flag, n in (("--bf16-layers-at-start", self.bf16_layers_start),
                        ("--bf16-layers-at-end", self.bf16_layers_end)):
            check_count(flag, n)
            if n and not self.precision.low_precision:
                raise GpuarchError(f"{flag}: layers run in BF16 beside a low-precision "
                                   "recipe; needs --precision fp8 or nvfp4, got --precision "
                                   f"{self.precision.value}")
        if sum(self.bf16_layers) > shape.layers:
            raise GpuarchError(
                f"--bf16-layers-at-start/--bf16-layers-at-end: {self.bf16_layers_start} + "
                f"{self.bf16_layers_end} layers in BF16, but the model has {shape.layers}")
        if self.tp_comm_overlap and self.tp > 1 and not self.sequence_parallel:
            raise GpuarchError("--tp-comm-overlap: Megatron's tensor-parallel overlap "
                               "(userbuffers) runs only with sequence parallelism, as "
                               "Megatron-LM's arguments check says; add --sequence-parallel")
        if self.fp8_attention and not self.precision.low_precision:
            raise GpuarchError("--fp8-attention: needs --precision fp8 or nvfp4 (FP8 "
                               "attention runs inside the FP8 autocast), got --precision "
                               f"{self.precision.value}")
        if self.fp8_attention_scaling:
            check_choice("--fp8-attention-scaling", self.fp8_attention_scaling,
                         FP8_ATTENTION_SCALINGS)
        check_choice("--fp8-recipe", self.fp8_recipe, FP8_RECIPES)
        if self.fp8_recipe != FP8_RECIPES[0] and self.precision is not Precision.FP8:
            raise GpuarchError("--fp8-recipe: needs --precision fp8, got --precision "
                               f"{self.precision.value}")
        if self.fp8_attention_scaling and not self.fp8_attention:
            raise GpuarchError("--fp8-attention-scaling: needs --fp8-attention")
        check_count("--packed-doc-len", self.packed_doc_len)
        if self.packed_doc_len > self.seq_len:
            raise GpuarchError(f"--packed-doc-len: expected at most --seq-len "
                               f"({self.seq_len:,}), got {self.packed_doc_len:,}")
        if self.lora_rank > shape.hidden:
            raise GpuarchError(f"--lora-rank: expected at most the hidden size "
                               f"({shape.hidden:,}), got {self.lora_rank}")
        if self.lora_rank and shape.shared_blocks:
            raise GpuarchError("--lora-rank: LoRA over shared transformer blocks (Zamba's: an "
                               "adapter on a shared weight serves every call) is not priced; "
                               "give --lora-rank 0")
        if self.lora_rank and shape.loop_repeats:
            raise GpuarchError("--lora-rank: LoRA over looped layers (an adapter on a looped "
                               "layer's weight serves every run) is not priced; give "
                               "--lora-rank 0")
        if np.max(self.cp) > 1 and (shape.relative_bias or shape.short_conv_taps):
            raise GpuarchError(f"--cp: {shape.name}'s relative position bias and short "
                               "convolutions (Inkling's) are modelled without context "
                               f"parallelism; use --cp 1, got {self.cp}")
        if self.lora_rank and shape.attention_experts:
            raise GpuarchError("--lora-rank: LoRA over a mixture of attention heads (JetMoE's "
                               "query and output experts) is not priced; give --lora-rank 0")
        if self.lora_modules:
            if not self.lora_rank:
                raise GpuarchError("--lora-modules: needs --lora-rank (the adapters' rank)")
            check_lora_modules(self.lora_modules)
        if self.dispatcher_wait_s is not None and not (
                isinstance(self.dispatcher_wait_s, int | float) and self.dispatcher_wait_s >= 0):
            got = (f"{from_si(self.dispatcher_wait_s, Unit.US):g}"
                   if isinstance(self.dispatcher_wait_s, int | float)
                   else repr(self.dispatcher_wait_s))
            raise GpuarchError("--dispatcher-wait-us: expected a number of microseconds >= 0, "
                               f"got {got}")
        if self.recompute_layers and self.recompute is not Recompute.FULL:
            raise GpuarchError("--recompute-layers: needs --recompute full, got --recompute "
                               f"{self.recompute.value}")
        if self.zero not in (0, 1, 2, 3):
            raise GpuarchError(f"--zero: expected 0, 1, 2 or 3, got {self.zero!r}")
        check_choice("--ep-dispatcher", self.ep_dispatcher, EP_DISPATCHERS)
        for module in self.cuda_graph_scope:
            check_choice("--cuda-graph-scope", module, CUDA_GRAPH_SCOPES)
        if self.cuda_graph_scope and self.cuda_graphs:
            raise GpuarchError("--cuda-graph-scope: give it or --cuda-graphs (the scope attn, "
                               "moe_router, moe_preprocess), not both")
        check_choice("--cp-comm-type", self.cp_comm_type, CP_COMM_TYPES)
        if self.cp_comm_type == "a2a" and self.cp > 1:
            # the all-to-all hands each rank whole heads: every tensor-parallel rank's query
            # and key/value heads (at least one, replicated where TP exceeds them) must split
            # evenly over the CP ranks
            core_kv, _ = attention_core_dims(shape)
            for label, count in (("heads", shape.heads), ("KV heads", core_kv),
                                 ("full layers' heads", shape.full_heads)):
                local = max(1, count // self.tp)
                if local % self.cp:
                    raise GpuarchError(
                        f"--cp-comm-type a2a: the {label} on each tensor-parallel rank "
                        f"({count} / TP {self.tp}: {local}) do not divide over CP {self.cp};"
                        " use --cp-comm-type p2p or all_gather")
        check_choice("--expert-launches", self.expert_launches, EXPERT_LAUNCHES)
        check_choice("--attention-kernel", self.attention_kernel, ATTENTION_KERNELS)
        if self.fsdp_prefetch and self.zero != 3:
            raise GpuarchError(f"--fsdp-prefetch: needs --zero 3, got --zero {self.zero}")
        if not self.reshard_after_forward and self.zero != 3:
            raise GpuarchError("--no-reshard-after-forward: needs --zero 3, got --zero "
                               f"{self.zero}")
        model_parallel = self.tp * self.pp * self.cp
        if self.gpus % model_parallel:
            raise GpuarchError(
                f"--gpus: {self.gpus} is not divisible by TP x PP x CP = {self.tp} x {self.pp}"
                f" x {self.cp} = {model_parallel}")
        self._validate_dp_shard(shape)
        if self.global_batch % (self.dp * self.micro_batch):
            raise GpuarchError(
                f"--global-batch: {self.global_batch} is not divisible by DP x micro-batch = "
                f"{self.dp} x {self.micro_batch}")
        if not isinstance(self.mtp_layers, int) or not 0 <= self.mtp_layers <= shape.layers:
            raise GpuarchError(f"--mtp-layers: expected an integer from 0 to {shape.layers} "
                               f"(the model's layers), got {self.mtp_layers!r}")
        if self.mtp_shared_weights and not self.mtp_layers:
            raise GpuarchError("--mtp-shared-weights: needs --mtp-layers > 0")
        if self.mtp_bf16 and not (self.mtp_layers and self.precision.low_precision):
            raise GpuarchError("--mtp-bf16: needs --mtp-layers > 0 and --precision fp8 or "
                               f"nvfp4, got --mtp-layers {self.mtp_layers} and --precision "
                               f"{self.precision.value}")
        if self.pp_layout:
            if self.pp_edge_layers:
                raise GpuarchError("--pp-edge-layers: not with --pp-layout, which places the "
                                   "embedding and the loss itself")
            self.layout(shape)
        slots = shape.layers + self.edge_layers
        if slots < self.pp * self.vpp and not self.pp_layout:
            raise GpuarchError(f"--pp/--vpp: {shape.layers} layers cannot fill "
                               f"PP x VPP = {self.pp * self.vpp} stages"
                               + ("" if self.pp_edge_layers else
                                  " (--pp-edge-layers counts the embedding and the loss as "
                                  "a layer each)"))
        if self.vpp > 1 and self.pp == 1:
            raise GpuarchError("--vpp: interleaved stages need --pp > 1")
        self._check_schedule()
        self._check_ep_comm_overlap()
        shape.check_head_split(self.tp)
        shape.check_mlp_split(self.tp)
        if self.seq_len % self.cp:
            raise GpuarchError(f"--cp: {self.cp} does not divide --seq-len {self.seq_len}")
        if self.sequence_parallel and self.tp == 1:
            raise GpuarchError("--sequence-parallel needs --tp > 1")
        if self.fp8_params and self.precision is not Precision.FP8:
            raise GpuarchError(f"--fp8-params: needs --precision fp8, got --precision "
                               f"{self.precision.value}")
        if (self.bf16_grads or self.bf16_optimizer) and self.precision in (
                Precision.FP32, Precision.TF32):
            flag = "--bf16-optimizer" if self.bf16_optimizer else "--bf16-grads"
            raise GpuarchError(f"{flag}: needs a 16-bit or lower --precision, got "
                               f"{self.precision.value}")
        f = self.optimizer_offload
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 <= f <= 1:
            raise GpuarchError(f"--optimizer-offload: expected a fraction from 0 to 1, got "
                               f"{f!r}")
        if f and self.zero < 1:
            raise GpuarchError("--optimizer-offload: needs the distributed optimizer (--zero 1 "
                               f"or higher), got --zero {self.zero}")
        if self.optimizer_offload_overlap and not f:
            raise GpuarchError("--optimizer-offload-overlap: needs --optimizer-offload")
        if not isinstance(self.offload_layers, int) or self.offload_layers < 0:
            raise GpuarchError(f"--offload-layers: expected an integer >= 0, got "
                               f"{self.offload_layers!r}")
        if self.offload_layers:
            # Megatron-Core's own conditions for activation offloading
            if self.offload_layers >= shape.layers:
                raise GpuarchError(f"--offload-layers: {self.offload_layers} must be fewer "
                                   f"than the model's {shape.layers} layers")
            if self.pp > 1:
                raise GpuarchError(f"--offload-layers: activation offloading needs --pp 1, "
                                   f"got --pp {self.pp}")
            if self.recompute is not Recompute.NONE:
                raise GpuarchError("--offload-layers: activation offloading cannot be "
                                   f"combined with --recompute {self.recompute.value}")
        check_offload_modules(self.offload_modules, shape,
                              recompute_modules=self.recomputed,
                              offload_layers=self.offload_layers,
                              fused_mlp=self.expert_launches == "fused-mlp",
                              min_elements=self.offload_min_elements)
        if not isinstance(self.etp, int) or self.etp < 0 or (self.etp and self.tp % self.etp):
            raise GpuarchError(f"--etp: expected a divisor of --tp {self.tp} (or 0 for TP), "
                               f"got {self.etp!r}")
        shape.check_expert_parallel(self.ep, self.moe_imbalance)
        if self.ep > 1 and (self.tp * self.dp * self.cp) % (self.ep * self.expert_tp):
            if self.etp:
                raise GpuarchError(
                    f"--ep: EP x ETP = {self.ep * self.expert_tp} must divide TP x DP x "
                    f"CP = {self.tp * self.dp * self.cp}")
            raise GpuarchError(f"--ep: {self.ep} must divide DP x CP = "
                               f"{self.dp * self.cp} (or give --etp 1 to lay experts "
                               "over the tensor-parallel ranks too)")
        if shape.is_hybrid:
            self._check_hybrid(shape)

    def _check_hybrid(self, shape: TransformerShape) -> None:
        """What a hybrid Mamba-2 model's blocks are not costed under: LoRA adapters,
        embedding and loss slots in the pipeline split (``--pp-edge-layers``; Megatron-Core
        splits a hybrid's blocks alone, ``hybrid_layout``, which checks the stages); and a TP
        (with context parallelism, TP x CP, over which the Mamba-2 blocks split their heads)
        that does not split the Mamba-2 heads and B/C groups evenly."""
        if self.lora_rank:
            raise GpuarchError(
                f"--lora-rank: {shape.name} is a hybrid model (a pattern of blocks), whose "
                f"training is modelled only with --lora-rank 0 so far; got {self.lora_rank}")
        if self.pp_edge_layers:
            raise GpuarchError(
                f"--pp-edge-layers: {shape.name} is a hybrid model (a pattern of blocks), whose "
                "pipeline stages hold its blocks alone (Megatron-Core's hybrid split; --pp-layout "
                "takes the pattern cut by '|' into stages)")
        if not self.pp_layout and np.max(self.pp) > 1:  # (validate checks a layout given)
            self.layout(shape)
        m = shape.mamba
        if self.cp > 1 and m is not None and (m.selective or m.lightning or m.short_conv
                                              or m.mlstm or m.rwkv):
            raise GpuarchError(
                f"--cp: {shape.name}'s {m.label} blocks are modelled without context "
                f"parallelism (Megatron-Core's MambaContextParallel is Mamba-2's); use --cp 1, "
                f"got {self.cp}")
        flag, what = ("--tp", str(self.tp)) if self.cp == 1 else \
            ("--cp", f"TP x CP = {self.tp} x {self.cp}")
        shape.check_mamba_split(self.tp * self.cp, flag, what)

    def _check_ep_comm_overlap(self) -> None:
        """Megatron-Core's conditions for overlapping the expert all-to-alls with another
        micro-batch (TransformerConfig.__post_init__, overlap_moe_expert_parallel_comm):
        expert parallelism, no full recomputation, one MTP depth at most, a 16-bit model
        (FP8 and FP4 runs keep 16-bit parameters), and with pipeline stages an interleaved
        schedule (DualPipe's own overlap aside)."""
        if not self.ep_comm_overlap:
            return
        flag = "--ep-comm-overlap"
        if self.ep == 1:
            raise GpuarchError(f"{flag}: overlaps the expert all-to-alls; needs --ep > 1")
        if self.recompute is Recompute.FULL:
            raise GpuarchError(f"{flag}: Megatron-Core refuses it with full recomputation; "
                               "use --recompute selective or none")
        if self.mtp_layers > 1:
            raise GpuarchError(f"{flag}: Megatron-Core allows at most one MTP depth with it, "
                               f"got --mtp-layers {self.mtp_layers}")
        if self.precision in (Precision.FP32, Precision.TF32):
            raise GpuarchError(f"{flag}: needs a 16-bit model (bf16, fp16, or fp8/nvfp4 over "
                               f"16-bit parameters), got --precision {self.precision.value}")
        if self.pp > 1 and self.vpp == 1 and self.pp_schedule not in DUALPIPE_SCHEDULES:
            raise GpuarchError(f"{flag}: with --pp > 1 Megatron-Core needs an interleaved "
                               "schedule: give --vpp > 1")

    def _check_schedule(self) -> None:
        """The pipeline schedule's own conditions (DeepSeek's DualPipe asserts an even
        number of ranks and of micro-batches, at least twice the ranks; DualPipeV at least
        twice the ranks)."""
        check_choice("--pp-schedule", self.pp_schedule, PP_SCHEDULES)
        if self.pp_schedule == "1f1b":
            return
        flag = f"--pp-schedule {self.pp_schedule}"
        if self.pp == 1:
            raise GpuarchError(f"{flag}: a pipeline schedule needs --pp > 1")
        chunks = schedule_chunks(self.pp_schedule)
        if self.vpp != chunks:
            raise GpuarchError(f"{flag}: needs --vpp {chunks} ("
                               + ("its V shape puts two model chunks on each GPU"
                                  if chunks == 2 else "one model chunk per GPU; "
                                  "interleaving is 1f1b's") + f"), got --vpp {self.vpp}")
        if self.pp_schedule == "zb1p":
            return
        if self.pp_schedule == "dualpipe" and self.pp % 2:
            raise GpuarchError(f"{flag}: needs an even --pp (micro-batches enter from both "
                               f"ends and meet in the middle), got --pp {self.pp}")
        m = self.micro_batches
        if m < 2 * self.pp or (self.pp_schedule == "dualpipe" and m % 2):
            even = " and even" if self.pp_schedule == "dualpipe" else ""
            raise GpuarchError(
                f"{flag}: needs at least 2 x PP = {2 * self.pp}{even} micro-batches per "
                f"pipeline, got {m} (--global-batch / (DP x --micro-batch) = "
                f"{self.global_batch} / ({self.dp} x {self.micro_batch}))")


FP8_RECIPES = FP8_ATTENTION_SCALINGS
"""How an FP8 run scales its GEMM operands (Transformer Engine's recipes), named as the
attention kernel each takes by default (``TrainingConfig.attention_fp8_kernel``): "tensor",
one scale per tensor (DelayedScaling, Float8CurrentScaling), or "mxfp8", one per 32 elements
along the reduction (MXFP8BlockScaling)."""


MOE_ROUTINGS = ("balanced", "unbalanced")
"""How a run's routing is balanced, as the validation rows record it: balanced (an
auxiliary loss, an expert bias or forced balancing keeps every expert-parallel rank near
the mean; ``moe_imbalance`` says otherwise) or unbalanced (nothing does:
``Efficiency.moe_unbalanced_load``)."""
