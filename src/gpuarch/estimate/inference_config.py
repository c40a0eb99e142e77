"""How a model is served (the strategy of Model x Strategy x System): parallelism, batching,
formats, the engine's limits and options, validated against the model."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from gpuarch.catalog.model import BLACKWELL_TENSOR_CORES
from gpuarch.errors import GpuarchError, check_choice, check_count, check_number
from gpuarch.estimate.mamba import DEFAULT_SSM_STATE, SSM_STATE_BYTES
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.units import Unit, from_si, to_si
from gpuarch.workloads.mtp import mtp_block_params
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import MAX_DIMENSION, TransformerShape

__all__ = [
    "CHUNK_PASSES_COSTED",
    "COMBINE_BYTES",
    "DECODE_KV_READS",
    "EMBEDDING_BYTES",
    "EXECUTORS",
    "EXECUTOR_NAMES",
    "FP8_SCALINGS",
    "HGX_GPUS",
    "HYBRID_PREFIX_NOTE",
    "MAX_BATCH_SEARCH",
    "MAX_ENGINE_COUNT",
    "MAX_PREFILL_LOAD",
    "MAX_PREFILL_TOKENS",
    "MLA_CACHES",
    "MOE_COMMS",
    "MOE_GEMM_KERNELS",
    "MOE_KERNELS",
    "MOE_KERNEL_ENGINES",
    "PYTHON_EXECUTORS",
    "RESERVE_FRACTION",
    "SCHEDULER_POLICIES",
    "SCHEDULES",
    "STREAM_PASS_ROUNDS",
    "WINDOW_KV_CACHES",
    "Batching",
    "InferenceConfig",
    "check_cached_prefix",
    "check_output_len_cv",
    "engine_of",
    "fp8_scaling_of",
    "model_weight_bytes",
    "moe_block_floor_s",
    "server_layout",
    "slot_spread",
]

RESERVE_FRACTION = 0.10
"""Share of GPU memory kept back for the CUDA context, CUDA graphs, workspaces and
fragmentation: vLLM's default gpu_memory_utilization of 0.9 leaves the same 10%."""


MAX_PREFILL_LOAD = 0.95
"""Highest load the M/D/1 wait for a prefill pass is taken at: an engine run flat out keeps
its prefill busy nearly all the time, and the wait grows without bound at full load."""


STREAM_PASS_ROUNDS = 64
"""Most rounds taken to find a stream's prefill pass and the cycle it sets together (over
the validation's points, four settle every one; where rounding makes the pass swing
between two sizes, the last one costed is kept, and the search stops there). A cycle made
almost wholly of passes (two-token answers to 16-token prompts at 300 sequences) climbs a
few prompts a round and took 22."""


CHUNK_PASSES_COSTED = 256
"""Most passes of one prompt costed one by one; a prompt that needs more (a long prompt in
small chunks) is costed at this many evenly spaced chunks, each weighted by the chunks it
stands for: a chunk's cost varies smoothly with the context it attends to, so the sum moves
by well under 0.1%, and the estimate stays quick for any length."""


MAX_ENGINE_COUNT = 2**31 - 1
"""The largest batch, batch cap or token budget an estimate takes: serving engines hold
them as 32-bit integers (TensorRT-LLM's SizeType32)."""


MAX_PREFILL_TOKENS = 8192
"""Default for the most prompt tokens one prefill pass processes (TensorRT-LLM's default
max_num_tokens; vLLM's max_num_batched_tokens is of the same order); ``--max-num-tokens``
sets it. A larger batch of prompts is prefilled in several passes; this bounds prefill
activation memory."""


EMBEDDING_BYTES = 2.0
"""Bytes per parameter of the token embedding table and the LM head whatever format the other
weights are quantized to: NVIDIA's Model Optimizer leaves the LM head out of every
quantization config it ships (``_default_disabled_quantizer_cfg``: ``"*lm_head*": {"enable":
False}``, in FP8_DEFAULT_CFG, INT4_AWQ_CFG, NVFP4_DEFAULT_CFG and the rest;
modelopt/torch/quantization/config.py), and an embedding is a table lookup, not a GEMM a
quantizer is attached to. So the LM head's GEMM runs in 16 bits too."""


DECODE_KV_READS = ("shared", "per-query-head", "chunked-per-query-head")
"""How an engine's decode attention reads a grouped-query (GQA or MQA) model's KV cache:
"shared", each KV head once a step for all the query heads it serves (a GQA-aware decode
kernel: TensorRT-LLM's XQA, FlashInfer, FlashAttention's packed GQA), or "per-query-head",
once for every query head, as a multi-head kernel that runs one thread block per query head
and sequence reads it (TensorRT-LLM's masked multi-head attention: every GQA model before
v0.7's GQA kernels, and through the 0.8-0.10 line every model whose groups XQA did not take,
any but 8 or 1 query heads per KV head). The repeats come from L2: DRAM sees the cache once,
the kernel streams it once per query head at ``Efficiency.multihead_decode_read_bytes_s``,
whichever takes longer. A model with as many KV heads as query heads reads the same either
way; a prompt's attention is not affected, nor is the verification of drafted tokens (several
query rows a sequence: TensorRT-LLM runs those on XQA, which takes any group in that mode).
"chunked-per-query-head" reads a chunked-attention layer's cache (Llama 4's local layers)
per query head and every other layer's shared: TensorRT-LLM from 0.21 on Hopper and older
GPUs, whose XQA refuses a layer with chunked attention (``supportConfigCommon`` in
decoderXQAImplJIT/kernelUtils.cpp: "chunked attention is not supported yet"), so those
layers decode on the masked multi-head kernel, reading their current chunk, while the
layers without chunks (Llama 4's NoPE layers) stay on XQA; from PR #6306 (August 2025) only
when the model's max_seq_len (trtllm-bench: the dataset's longest input plus output) is at
least the chunk, below it the chunks are dropped and every layer takes XQA. Blackwell's
trtllm-gen kernels take chunked attention: "shared" there."""


MLA_CACHES = ("tensor", "flashmla")
"""How an engine lays out a sparse-attention model's latent in an FP8 cache (DeepSeek-V3.2,
GLM-5): "tensor", the 576 bytes of the latent and rotary key in FP8 under one scale
(TensorRT-LLM's DSA), or "flashmla", FlashMLA's sparse layout: the latent in FP8 with an
FP32 scale per 128 channels and the rotary key in BF16, 656 bytes (vLLM's ``fp8_ds_mla``
cache dtype and SGLang's NSA backend, which run FlashMLA's sparse kernels). Either way the
indexer's FP8 keys sit beside it; other caches and dense latent attention are unaffected."""

WINDOW_KV_CACHES = ("ring", "full")
"""How an engine keeps a sliding-window layer's KV cache: "ring", only the last window of
positions (vLLM's and SGLang's hybrid KV-cache managers, TensorRT-LLM when
KvCacheConfig.max_attention_window lists the windows), or "full", every position, as
TensorRT-LLM allocates by default (its long-sequence guide: the cyclic cache keeps N tokens
with N from max_attention_window, and the allocation follows the largest window). Either way
a windowed layer's attention reads only its window."""


MOE_COMMS = ("alltoall", "allgather")
"""How an expert-parallel group with data-parallel attention moves tokens to the experts:
"alltoall", each token's hidden state to the GPUs of its top-k experts and back (DeepEP,
TensorRT-LLM over multi-node NVLink on GB200 NVL72; one-shot kernels,
``perf.collectives.dispatch_time``), or "allgather", every GPU gathers every
rank's tokens, runs its experts on the ones routed to them, and the partial outputs are
reduce-scattered back (TensorRT-LLM's CUTLASS and TRT-LLM-Gen MoE with attention DP where
there is no multi-node NVLink: H100, H200, B200)."""


HGX_GPUS = 8
"""GPUs of the largest NVLink domain without multi-node NVLink (an HGX board): a system with
more per node (GB200 and GB300 NVL72) lets TensorRT-LLM run its own NVLink all-to-all."""


COMBINE_BYTES = 2.0
"""Bytes per element an all-to-all combine returns the experts' outputs in: 16 bits
(DeepEP's and TensorRT-LLM's default combine, BF16, whatever format the dispatch sent)."""


SCHEDULES = ("separate", "mixed")
"""How a continuous-batching engine fits new prompts in: ``separate``, a prefill pass of its
own between decode steps (SGLang's default, vLLM's before chunked prefill), or ``mixed``,
the prompts' prefill in the same iteration as the running sequences' decode step, each new
prompt's first token at the iteration's end (TensorRT-LLM's in-flight batching, vLLM's V1
scheduler): an iteration takes the prefill pass's time plus the decode step's."""


SCHEDULER_POLICIES = ("guaranteed_no_evict", "max_utilization")
"""How a continuous-batching engine admits sequences against its KV cache (TensorRT-LLM's
capacity scheduler policies, by their names there): ``guaranteed_no_evict``, the default, a
sequence is admitted only while the KV cache of its whole prompt and answer fits beside the
running ones', so the batch that fits holds every sequence at its full length; or
``max_utilization``, admitted while the blocks of the tokens so far fit (pausing a sequence
when the cache runs short, as vLLM preempts one), so the batch that fits is what the running
sequences' mean context fills: prompt plus half the answer (``mean_decode_context``). NVIDIA's
MLPerf Inference harness runs Llama 2 70B with ``max_util`` (closed/NVIDIA/code/harness/
harness_llm/main_llm.cc in inference_results_v4.0: ``trtllm_batch_sched_policy`` defaults
to it; the v5.1 B200 configs set ``'batch_scheduler_policy': 'max_util'``). A static batch
holds every sequence to its end either way."""


EXECUTORS = ("python", "cpp", "vllm", "sglang")
"""Serving executors: "python", TensorRT-LLM's PyTorch backend (its Python executor loop and
overlap scheduler: host time per request each step, hidden behind the GPU's step until it
is longer, and a measured fixed time each step, ``Efficiency.decode_step_overhead_pytorch_s``);
"vllm" or "sglang", those engines' Python engine loops (the same host time per request, the
fitted fixed time, ``Efficiency.decode_step_overhead_s``); "cpp", a C++ executor whose host
time per request is not modelled (TensorRT-LLM's TensorRT engines of the 0.x releases,
LMDeploy's TurboMind), the fitted fixed time."""

PYTHON_EXECUTORS = ("python", "vllm", "sglang")
"""The executors that spend host time per request in flight each step."""

EXECUTOR_NAMES = {"python": "TensorRT-LLM's PyTorch backend", "cpp": "a C++ executor",
                  "vllm": "vLLM's engine loop", "sglang": "SGLang's engine loop"}
"""Each of ``EXECUTORS`` as reports name it."""


FP8_SCALINGS = ("tensor", "block")
"""How FP8 weights carry their scales: "tensor", one per tensor (or per channel; NVIDIA
ModelOpt's FP8 checkpoints), or "block", one per 128 x 128 block of weights with activations
scaled per 1 x 128 group (DeepSeek-V3's and Kimi K2's own FP8 checkpoints; DeepGEMM's
kernels). A fine-grained MoE's block-scaled FP8 experts run at their own rate
(``Efficiency.moe_gemm_fp8_block``)."""


def fp8_scaling_of(blocks: bool) -> str:
    """The FP8_SCALINGS name for a checkpoint whose FP8 weights are (``blocks``) or are not
    scaled per 128 x 128 block (``CheckpointFormats.fp8_blocks``)."""
    return FP8_SCALINGS[1] if blocks else FP8_SCALINGS[0]


MOE_KERNELS = ("trtllm", "vllm", "sglang", "sglang-deepep", "trtllm-gen")
"""Whose fused MoE kernels a serving estimate charges the block's fixed time for: TensorRT-
LLM's (``moe_block_floor_s``, on Blackwell ``moe_block_floor_blackwell_s``, as its measured
layers put them), vLLM's or SGLang's (``moe_block_floor_s`` on every GPU: on Blackwell both run
FlashInfer's TRT-LLM-Gen MoE, whose measured layers put it there); the rest of the model is
the same for the three. "sglang-deepep" is SGLang's wide-EP path (its DeepEP all-to-all,
``--moe-a2a-backend deepep``), whose expert GEMMs on Hopper are DeepGEMM's grouped FP8 GEMMs:
block-scaled FP8 experts there run at ``Efficiency.moe_gemm_deepgemm``. "trtllm-gen" is
TensorRT-LLM with its TRTLLM MoE backend (``moe_config: backend: TRTLLM``; its default is
CUTLASS, "trtllm"): the TRT-LLM-Gen kernels on Blackwell that vLLM and SGLang run through
FlashInfer, with TensorRT-LLM's own measured floor there (``moe_block_floor_trtllm_gen_s``);
elsewhere the same as "trtllm"."""


ALL_REDUCE_KERNELS = ("trtllm", "vllm", "sglang", "nccl")
"""Whose kernels run a serving engine's tensor-parallel all-reduce inside one NVLink domain
(``perf.collectives.engine_all_reduce_time``): TensorRT-LLM's, vLLM's or SGLang's own
one-shot kernels (each engine's default), or NCCL alone (vLLM's and SGLang's
--disable-custom-all-reduce, TensorRT-LLM's allreduce_strategy NCCL)."""


ENGINE_SETTINGS: dict[str, dict[str, str]] = {
    "vllm": {"moe_kernels": "vllm", "mla_cache": "flashmla", "all_reduce": "vllm",
             "executor": "vllm"},
    "sglang": {"moe_kernels": "sglang", "mla_cache": "flashmla", "all_reduce": "sglang",
               "executor": "sglang"},
    "lmdeploy": {"executor": "cpp", "all_reduce": "nccl"},
}
"""What naming the serving engine (``--engine``, or ``--launch``'s) sets where its own flag
is not given: vLLM's and SGLang's own engine loops (``EXECUTORS``), fused MoE kernels
(``MOE_KERNELS``: their measured layers, ``gpuarch validate moe-kernels --moe-kernels
vllm|sglang``) and all-reduce kernels
(``ALL_REDUCE_KERNELS``: ``gpuarch validate engine-all-reduce``), FlashMLA's FP8
layout of a sparse-attention latent (``MLA_CACHES``), LMDeploy's TurboMind, a C++ executor
(``EXECUTORS``) whose all-reduce is NCCL's: TurboMind's custom all-reduce, FasterTransformer's,
is off unless enabled and takes 8 ranks only, "Using NCCL as Comm." otherwise
(InternLM/lmdeploy src/turbomind/utils/custom_ar_comm.cc). TensorRT-LLM and NIM (TensorRT-LLM's
engines) keep the defaults, ``ENGINE_DEFAULTS``."""

ENGINE_DEFAULTS: dict[str, str] = {"executor": "python", "moe_kernels": "trtllm",
                                   "mla_cache": "tensor", "all_reduce": "trtllm"}
"""The engine settings of an estimate that names no engine: TensorRT-LLM's fused MoE kernels,
all-reduce kernels, its PyTorch backend's Python executor and its one-scale FP8 latent."""


def engine_settings(engine: str) -> dict[str, str]:
    """The executor and MoE kernels ``engine`` (``validation.bands.ENGINES``' key, or "" for
    none) runs: ``ENGINE_SETTINGS`` over ``ENGINE_DEFAULTS``."""
    return {**ENGINE_DEFAULTS, **ENGINE_SETTINGS.get(engine, {})}


MOE_GEMM_KERNELS = ("native", "ampere")
"""The routed experts' grouped GEMM kernels: the GPU generation's own, or ones written for
Ampere's synchronous Tensor Core instructions, which on Hopper and datacenter Blackwell run
at ``Efficiency.moe_gemm_ampere_kernel`` of the native rate (TensorRT-LLM before 0.10 ran
16-bit experts on Hopper so); no change on Ampere, Ada or GeForce/RTX Blackwell."""


MOE_KERNEL_ENGINES = {"trtllm": "TensorRT-LLM", "vllm": "vLLM", "sglang": "SGLang",
                      "sglang-deepep": "SGLang (DeepEP, DeepGEMM)",
                      "trtllm-gen": "TensorRT-LLM (TRTLLM MoE backend)"}
"""Each of ``MOE_KERNELS`` by the engine's name, as reports print it."""


def engine_of(kernels: str) -> str:
    """The serving engine whose kernels ``kernels`` (``MOE_KERNELS``) are: "sglang" for
    SGLang's wide-EP path too, "trtllm" for TensorRT-LLM's TRTLLM MoE backend."""
    return kernels.split("-", 1)[0]


MAX_BATCH_SEARCH = 4096
"""Upper end of the search for the largest batch that fits (``--batch max``)."""


def moe_block_floor_s(tensor_core_generation: int | None, kernels: str,
                      efficiency: Efficiency = DEFAULT_EFFICIENCY) -> float:
    """Fixed time of one fused MoE block per expert layer and pass (seconds) for ``kernels``
    (``MOE_KERNELS``) on a GPU of that Tensor Core generation: TensorRT-LLM's two backends on
    Blackwell their own, every other case the Hopper-measured one."""
    if (tensor_core_generation or 0) >= BLACKWELL_TENSOR_CORES:
        if kernels == "trtllm":
            return efficiency.moe_block_floor_blackwell_s
        if kernels == "trtllm-gen":
            return efficiency.moe_block_floor_trtllm_gen_s
    return efficiency.moe_block_floor_s


class Batching(Enum):
    """How requests are batched."""

    STATIC = "static"  # one batch, prefilled together, decoded to the end
    CONTINUOUS = "continuous"  # in-flight batching, steady state


def server_layout(tp: int, ep: int, moe: bool) -> tuple[int, int]:
    """(GPUs of one pipeline stage of a serving engine, its data-parallel attention ranks)
    for TP and EP: a stage spans max(TP, EP) GPUs (the engines' tensor-parallel size), and
    where EP is above TP on a MoE model attention runs data-parallel over EP / TP ranks
    (``InferenceConfig.attention_dp``). The engines' launch flags and the checks of a
    measured server's saved settings both map the estimate's layout so."""
    ep = ep if moe else 1
    return max(tp, ep), ep // tp if ep > tp else 1


@dataclass(frozen=True, kw_only=True)
class InferenceConfig:
    """How the model is served."""

    input_len: int
    output_len: int
    batch: int | None = None  # None = the largest batch that fits
    gpus: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    quant: QuantScheme = field(default_factory=QuantScheme)
    # the routed experts' weight and activation formats where a checkpoint or engine keeps
    # them apart from the rest of the model (GPT-OSS: MXFP4 experts beside 16-bit attention;
    # an engine that quantizes everything but the experts); None = the model's (see
    # ``expert_quant``)
    expert_weights: QuantFormat | None = None
    expert_activations: QuantFormat | None = None
    batching: Batching = Batching.STATIC
    chunk: int = 0  # prefill chunk in tokens; 0 = whole prompt at once
    gpus_per_node: int = 8
    max_num_tokens: int = MAX_PREFILL_TOKENS  # prompt tokens per prefill pass
    # KV-cache memory policy: 0 = everything but a reserve of RESERVE_FRACTION of the GPU's
    # memory (vLLM's gpu_memory_utilization 0.9); f in (0, 1] = the fraction f of the memory
    # left after weights and activations (TensorRT-LLM's kv_cache_free_gpu_mem_fraction)
    kv_cache_fraction: float = 0.0
    # the engine's cap on sequences decoded together (vLLM max_num_seqs, TensorRT-LLM
    # max_batch_size); 0 = only memory limits the batch
    max_batch_size: int = 0
    # speculative decoding: draft tokens proposed per step (MTP modules, an EAGLE head), and
    # the mean tokens each sequence emits per target step (accepted drafts + the target's
    # own token, between 1 and speculative_tokens + 1; measured on the workload's data)
    speculative_tokens: int = 0
    acceptance_length: float = 0.0
    # the engine's executor loop: "python" (TensorRT-LLM's PyTorch backend), "vllm" or
    # "sglang" (per-request host time each step, overlapped with the GPU, and each its fixed
    # time a step) or "cpp" (no host time per request modelled); see EXECUTORS
    executor: str = "python"
    # how new prompts are fitted in under continuous batching (SCHEDULES): in passes of their
    # own between decode steps, or in the decode step's iteration; it moves TTFT, not the
    # steady state's TPOT or throughput
    schedule: str = "separate"
    # a sliding-window layer's KV cache: its window only ("ring") or every position ("full");
    # see WINDOW_KV_CACHES
    window_kv_cache: str = "ring"
    # a sparse-attention model's FP8 latent: one scale for all ("tensor") or FlashMLA's
    # layout ("flashmla"); see MLA_CACHES
    mla_cache: str = "tensor"
    # admission against the KV cache under continuous batching: SCHEDULER_POLICIES
    scheduler_policy: str = "guaranteed_no_evict"
    # how decode attention reads a grouped-query model's KV cache: see DECODE_KV_READS
    decode_kv_reads: str = "shared"
    # expert dispatch with data-parallel attention: see MOE_COMMS
    moe_comm: str = "alltoall"
    # whose fused MoE kernels set the block's fixed time per expert layer: see MOE_KERNELS
    moe_kernels: str = "trtllm"
    # whose kernels run the tensor-parallel all-reduce inside one NVLink domain: an engine's
    # own one-shot kernels or NCCL alone (perf.collectives.ALL_REDUCE_KERNELS)
    all_reduce: str = "trtllm"
    # the routed experts' grouped GEMMs: the generation's own kernels or Ampere-style ones,
    # see MOE_GEMM_KERNELS
    moe_gemm_kernel: str = "native"
    # routed tokens on the busiest expert-parallel rank over the mean (1 = balanced): that
    # rank's expert GEMMs, permutation and all-to-alls carry this many times the mean
    # tokens (its weight reads do not change), and the step waits for it
    moe_imbalance: float = 1.0
    # redundant copies of busy experts (EPLB's --ep-num-redundant-experts in SGLang,
    # TensorRT-LLM's num_slots - experts): experts + redundant slots are spread over the EP
    # ranks, each holding the weights of its share of slots
    redundant_experts: int = 0
    # two-batch overlap (SGLang's --enable-two-batch-overlap, DeepSeek's inference design):
    # each expert layer runs the batch as two micro-batches, one's expert exchange under the
    # other's computation (Efficiency.tbo_exchange_hidden)
    two_batch_overlap: bool = False
    # prefill attention at the FP8 Tensor Core rate where the activations are FP8 or FP4 and
    # the KV cache FP8: TensorRT-LLM's PyTorch backend runs FP8 context FMHA when the
    # attention output is quantized (FP8 or NVFP4 checkpoints) and the KV cache is FP8; the
    # default keeps prefill attention at the 16-bit rate
    fp8_context_attention: bool = False
    # how FP8 weights carry their scales: see FP8_SCALINGS
    fp8_scaling: str = "tensor"
    # the format a hybrid model's Mamba-2 recurrent state is kept in between steps
    # (estimate.mamba.SSM_STATE_BYTES: fp32, the engines' default, bf16 or fp16)
    ssm_state_precision: str = DEFAULT_SSM_STATE
    # absorbed latent attention (MLA) in decode over an FP8 cache on Blackwell computes in
    # FP8 (Efficiency.mla_decode_attention_fp8), as TensorRT-LLM's generation kernel does in
    # NVIDIA aiconfigurator's 1.2.0rc5 and 1.3.0rc20 tables; off: in 16 bits whatever the
    # cache, as the same kernel ran in its 1.0.0rc6 tables (FP8-cache steps as long as
    # 16-bit ones; validation.attention_kernels.MLA_KERNELS_1_0_FILE)
    fp8_mla_decode: bool = True
    # tensor-parallel all-reduces may run as NVLink SHARP inside an NVSwitch node of Hopper
    # or Blackwell GPUs, where NCCL's tuner finds that faster (its default); off = NCCL with
    # NCCL_NVLS_ENABLE=0, rings and trees only
    nvls: bool = True
    # with attention data-parallel (EP wider than TP) and continuous batching, each rank
    # schedules its own context requests and a prefill pass waits for the rank with the most
    # (Efficiency.adp_prefill_balance); on = the engine holds context requests back to line
    # them up across the ranks (TensorRT-LLM's attention_dp_config enable_balance), which
    # leaves less imbalance (adp_prefill_balance_lined_up)
    adp_balance: bool = False
    # an offline benchmark of this many fixed-length requests (trtllm-bench throughput,
    # vLLM's benchmark_throughput) instead of the steady state: the last wave of requests
    # runs part-full; 0 = steady state (continuous batching only)
    num_requests: int = 0
    # spread of the requests' output lengths (standard deviation over mean; 0 = all
    # output_len): in-flight batching holds each request for as many steps as it generates,
    # so long requests are over-represented among those in flight (length-biased sampling):
    # the mean output length in flight is output_len x (1 + cv^2), its mean context input +
    # that / 2, and each held request's KV cache grows accordingly (continuous batching only)
    output_len_cv: float = 0.0
    # the longest answer of the run: the engine's cap on one (its max_output_len or
    # max_tokens) where answers reach it; with num_requests and output_len_cv, an offline
    # run ends with the requests admitted last, some of them running to it at a shrinking
    # batch (the drain); 0 = not given, the run's waves then take one length
    max_output_len: int = 0
    # prompt tokens every request shares with one already in the KV cache (a system prompt
    # or few-shot examples under prefix caching: vLLM's automatic prefix caching, SGLang's
    # radix cache, TensorRT-LLM's KV-cache reuse): their prefill is skipped, and their KV
    # cache is held once per replica in the layers that keep every position
    cached_prefix: int = 0
    # GiB of each GPU's weights kept in host memory and copied to the GPU for every forward
    # pass (vLLM's --cpu-offload-gb: pinned CPU tensors moved to the device before each
    # offloaded module runs)
    cpu_offload_gib: float = 0.0
    # the batch sizes the engine captures CUDA graphs at with padding on (TensorRT-LLM's
    # cuda_graph_config batch_sizes with enable_padding): a decode step of b sequences is
    # replayed as the smallest captured size >= b, dummy requests filling the rest, whose
    # GEMM, expert and LM-head rows are computed like real ones; beyond the largest size the
    # step runs eagerly at b (its host launching every kernel:
    # Efficiency.eager_decode_host_s_per_layer); () = no padding
    cuda_graph_batch_sizes: tuple[int, ...] = ()
    # the longest context a captured CUDA graph covers: a decode step whose longest sequence
    # is beyond it runs eagerly (vLLM before V1: max_seq_len_to_capture, 8,192 by default);
    # 0 = graphs cover every context (TensorRT-LLM, vLLM V1, SGLang)
    cuda_graph_max_context: int = 0
    # where max_batch_size and max_num_tokens came from when an engine chose them itself (a
    # key of engine_limits.LIMIT_SOURCES, set by engine_limits.apply_limits); reported only
    limits_source: str = ""
    # why the KV cache is not in the format it was asked for (perf.kv_formats.kv_cache_run's
    # reason, set by whoever resolved the format for the GPU); reported only
    kv_cache_fallback: str | None = None

    @property
    def tokens_per_step(self) -> float:
        """Tokens each sequence emits per target decode step: the acceptance length with
        speculative decoding, else one."""
        return self.acceptance_length if self.speculative_tokens else 1.0

    @property
    def new_prompt_tokens(self) -> int:
        """Prompt tokens each request prefills (the rest were cached)."""
        return self.input_len - self.cached_prefix

    @property
    def prompts_per_pass(self) -> int:
        """Whole prompts one prefill pass of ``max_num_tokens`` takes (at least one)."""
        return max(1, self.max_num_tokens // self.new_prompt_tokens)

    @property
    def drains_offline(self) -> bool:
        """Whether an offline run (``num_requests``) ends with a drain of answers that vary
        in length up to ``max_output_len``, rather than waves of one length."""
        return bool(self.num_requests and self.output_len_cv and self.max_output_len)

    @property
    def replicas(self) -> int:
        """Data-parallel copies of the model."""
        return self.gpus // (self.tp * self.pp)

    @property
    def output_in_flight(self) -> float:
        """Mean output length of the requests in flight: ``output_len`` x (1 + cv^2), a
        request being held for as many steps as it generates."""
        return self.output_len * (1 + self.output_len_cv ** 2)

    @property
    def mean_decode_context(self) -> float:
        """Mean context of a sequence in a decode step: its input and half its output (the
        output generated so far, averaged over its steps), of the requests in flight."""
        return self.input_len + (self.output_in_flight + 1) / 2

    @property
    def micro_batches(self) -> int:
        """Micro-batches a replica keeps in flight: one per pipeline stage, so the stages
        work at once. TensorRT-LLM's in-flight batching model sets its micro-batch count to
        the pipeline-parallel size and admits max_batch_size requests per micro-batch
        (cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp); its static-batch
        session splits a batch the same way (GptSession, cpp/tensorrt_llm/runtime/
        gptSession.cpp: micro-batches = the pipeline-parallel size)."""
        return self.pp

    @property
    def ssm_state_bytes(self) -> float:
        """Bytes per element of a hybrid model's recurrent Mamba-2 state
        (``ssm_state_precision``)."""
        return SSM_STATE_BYTES[self.ssm_state_precision]

    @property
    def exchanges_all_to_all(self) -> bool:
        """Whether expert layers send routed tokens to their experts' GPUs and back (an
        all-to-all) rather than all-gather every rank's tokens (``moe_comm`` "allgather"),
        or exchange none: with EP no wider than TP every GPU of the tensor-parallel group
        already holds every token (``exchanges_tokens``)."""
        return self.exchanges_tokens and self.moe_comm == "alltoall"

    @property
    def exchanges_tokens(self) -> bool:
        """Whether expert layers move tokens between GPUs: only where EP is wider than TP
        (data-parallel attention), each rank holding its own requests' tokens. With EP
        inside a TP group the attention's all-reduce leaves every token on every GPU of the
        group, each runs its own experts (and its share of their width) on all of them, and
        the layer's all-reduce sums the partial outputs, as after a dense MLP: TensorRT-LLM
        gathers or exchanges tokens only with attention DP ("alltoall should only enabled
        with attention dp", its fused MoE modules' ``use_dp`` checks), vLLM runs its
        all-to-all kernels only where ``dp_size > 1`` (``FusedMoEParallelConfig.
        use_all2all_kernels``, vllm/model_executor/layers/fused_moe/config.py)."""
        return self.ep > self.tp

    @property
    def expert_quant(self) -> QuantScheme:
        """The formats the routed experts' GEMMs run in: ``expert_weights`` and
        ``expert_activations`` where given, else the model's. Expert weights given alone take
        their activations as the flags do: 16-bit weights run 16-bit; quantized weights keep
        the model's activations where those are 16-bit (weight-only) or at least as wide as
        the weights (W8A8, W4A8, W4A4), else match the weights."""
        weights = self.expert_weights or self.quant.weights
        activations = self.expert_activations
        if activations is None:
            model = self.quant.activations
            if self.expert_weights is None:
                activations = model
            elif weights.is_16bit:
                activations = weights
            elif model.is_16bit or model.bits >= weights.bits:
                activations = model
            else:
                activations = weights
        return QuantScheme(weights, activations, self.quant.kv_cache)

    @property
    def cpu_offload_bytes(self) -> float:
        """``cpu_offload_gib`` in bytes."""
        return to_si(self.cpu_offload_gib, Unit.GIB)

    def validate(self, shape: TransformerShape) -> None:
        for name in ("input_len", "output_len", "gpus", "tp", "pp", "ep", "gpus_per_node",
                     "max_num_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise GpuarchError(f"--{name.replace('_', '-')}: expected an integer >= 1, "
                                   f"got {value!r}")
        for name in ("input_len", "output_len"):
            if getattr(self, name) > MAX_DIMENSION:
                raise GpuarchError(f"--{name.replace('_', '-')}: expected at most "
                                   f"{MAX_DIMENSION:,} tokens (past any model's context), "
                                   f"got {getattr(self, name)}")
        shape.check_pipeline(self.pp)
        if self.batch is not None and (not isinstance(self.batch, int) or self.batch < 1):
            raise GpuarchError(f"--batch: expected an integer >= 1 or 'max', got "
                               f"{self.batch!r}")
        if self.chunk < 0:
            raise GpuarchError(f"--chunk: expected tokens >= 0, got {self.chunk}")
        check_cached_prefix(self.cached_prefix, self.input_len)
        check_engine_choices(self)
        if self.schedule != "separate" and self.batching is not Batching.CONTINUOUS:
            raise GpuarchError(f"--schedule {self.schedule}: how a continuous-batching engine "
                               "fits new prompts in; give --batching continuous")
        check_count("--num-requests", self.num_requests, zero_unset=True)
        check_output_len_cv(self.output_len_cv)
        offload = self.cpu_offload_gib
        if isinstance(offload, bool) or not isinstance(offload, (int, float)) \
                or not 0 <= offload < math.inf:
            raise GpuarchError(f"--cpu-offload-gb: expected a size in GiB >= 0, got "
                               f"{offload!r}")
        if offload and offload >= (held := from_si(model_weight_bytes(shape, self),
                                                   Unit.GIB)):
            raise GpuarchError(f"--cpu-offload-gb: {offload:g} GiB is not less than the "
                               f"{held:.1f} GiB of weights per GPU")
        if self.output_len_cv and self.batching is not Batching.CONTINUOUS:
            raise GpuarchError("--output-len-cv: varying output lengths are modelled for "
                               "in-flight batching; give --batching continuous")
        if self.num_requests and self.batching is not Batching.CONTINUOUS:
            raise GpuarchError("--num-requests: an offline run of N requests needs "
                               "--batching continuous")
        check_count("--max-output-len", self.max_output_len, zero_unset=True)
        if self.max_output_len and not (self.num_requests and self.output_len_cv):
            raise GpuarchError("--max-output-len: prices the end of an offline run whose "
                               "answers vary in length; give --num-requests and "
                               "--output-len-cv with it")
        if self.max_output_len and self.max_output_len < self.output_len:
            raise GpuarchError(f"--max-output-len: {self.max_output_len} is below the mean "
                               f"output length {self.output_len}")
        if self.gpus % (self.tp * self.pp):
            raise GpuarchError(f"--gpus: {self.gpus} is not divisible by TP x PP = "
                               f"{self.tp} x {self.pp}")
        shape.check_head_split(self.tp)
        shape.check_mlp_split(self.tp)
        if not isinstance(self.kv_cache_fraction, (int, float)) or isinstance(
                self.kv_cache_fraction, bool) or not 0 <= self.kv_cache_fraction <= 1:
            raise GpuarchError("--kv-cache-fraction: expected a fraction in (0, 1], got "
                               f"{self.kv_cache_fraction!r}")
        check_count("--max-batch-size", self.max_batch_size, zero_unset=True)
        for flag, value in (("--max-batch-size", self.max_batch_size),
                            ("--max-num-tokens", self.max_num_tokens),
                            ("--batch", self.batch or 0)):
            if value > MAX_ENGINE_COUNT:
                raise GpuarchError(f"{flag}: expected at most {MAX_ENGINE_COUNT:,} (an "
                                   f"engine holds it as a 32-bit integer), got {value}")
        if (self.max_batch_size and self.batching is Batching.STATIC and self.batch is not None
                and self.batch > self.max_batch_size):
            raise GpuarchError(f"--batch: {self.batch} exceeds --max-batch-size "
                               f"{self.max_batch_size} (a static batch runs all at once)")
        for size in self.cuda_graph_batch_sizes:
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise GpuarchError(f"--cuda-graph-batch-sizes: expected batch sizes >= 1, "
                                   f"got {size!r}")
        check_count("--cuda-graph-max-context", self.cuda_graph_max_context, zero_unset=True)
        check_count("--speculative-tokens", self.speculative_tokens)
        if self.speculative_tokens:
            top = self.speculative_tokens + 1
            if not self.acceptance_length:
                raise GpuarchError(
                    f"--acceptance-length: needed with --speculative-tokens "
                    f"{self.speculative_tokens}: the mean tokens each sequence emits per "
                    f"step, between 1 and {top} (measure it on your data)")
            if not isinstance(self.acceptance_length, (int, float)) or isinstance(
                    self.acceptance_length, bool) or not 1 <= self.acceptance_length <= top:
                raise GpuarchError(
                    f"--acceptance-length: expected the mean tokens per step, between 1 and "
                    f"{top} for {self.speculative_tokens} draft tokens, got "
                    f"{self.acceptance_length!r}")
        elif self.acceptance_length:
            raise GpuarchError("--acceptance-length: needs --speculative-tokens")
        if shape.layers < self.pp:
            raise GpuarchError(f"--pp: {self.pp} exceeds the {shape.layers} layers")
        shape.check_expert_parallel(self.ep, self.moe_imbalance, self.redundant_experts)
        if self.two_batch_overlap and not (shape.is_moe and self.exchanges_all_to_all):
            raise GpuarchError("--two-batch-overlap: overlaps an expert all-to-all with "
                               "computation; needs a mixture-of-experts model with --ep "
                               "wider than --tp (data-parallel attention) and --moe-comm "
                               "alltoall")
        if self.ep > self.tp * self.replicas:
            raise GpuarchError(f"--ep: {self.ep} exceeds the {self.tp * self.replicas} "
                               "GPUs that can hold experts (TP x replicas)")
        self.quant.validate()
        if shape.is_hybrid:
            self._check_hybrid(shape)
        if self.expert_weights is not None or self.expert_activations is not None:
            if not shape.is_moe:
                flag = "--expert-weight-precision" if self.expert_weights is not None \
                    else "--expert-activation-precision"
                raise GpuarchError(f"{flag}: {shape.name} has no routed experts")
            self.expert_quant.validate("expert-")


    def _check_hybrid(self, shape: TransformerShape) -> None:
        """What a hybrid Mamba-2 model's serving needs: a TP that splits the Mamba-2 heads and
        groups evenly."""
        shape.check_mamba_split(self.tp, "--tp", str(self.tp), one_group_whole=True)


HYBRID_PREFIX_NOTE = (
    "a hybrid model's cached prefix is taken as reused whole: its prefill starts every Mamba-2 "
    "block from the state kept at the prefix's end and runs the new tokens only. Engines keep "
    "that state only at some positions, so give the length they reuse: vLLM a multiple of its "
    "block size (raised until one layer's attention page holds a Mamba state page: hundreds "
    "of tokens, e.g. 400 for Nemotron 3 Nano at TP 2), TensorRT-LLM a multiple of 256 "
    "(mamba_state_cache_interval), SGLang a point where a cached request's prefill chunk "
    "ended")
"""What ``estimate infer --cached-prefix`` says of a hybrid model's prefix (vLLM PRs 25752,
30877 and the hybrid disaggregation post of 2026-04-21; TensorRT-LLM PR 12185; SGLang's
MambaRadixCache)."""


ENGINE_CHOICES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("--executor", "executor", EXECUTORS),
    ("--schedule", "schedule", SCHEDULES),
    ("--scheduler-policy", "scheduler_policy", SCHEDULER_POLICIES),
    ("--window-kv-cache", "window_kv_cache", WINDOW_KV_CACHES),
    ("--mla-cache", "mla_cache", MLA_CACHES),
    ("--decode-kv-reads", "decode_kv_reads", DECODE_KV_READS),
    ("--moe-comm", "moe_comm", MOE_COMMS),
    ("--moe-kernels", "moe_kernels", MOE_KERNELS),
    ("--all-reduce", "all_reduce", ALL_REDUCE_KERNELS),
    ("--moe-gemm-kernel", "moe_gemm_kernel", MOE_GEMM_KERNELS),
    ("--fp8-scaling", "fp8_scaling", FP8_SCALINGS),
    ("--ssm-state-precision", "ssm_state_precision", tuple(SSM_STATE_BYTES)),
)
"""The engine settings that take one of a set of words: (flag, attribute, choices). An
estimate (``InferenceConfig``) and the serving advisor's search (``advise.infer.
InferenceSearch``) hold them under the same attribute names and check them with
``check_engine_choices``."""


def check_engine_choices(options: Any) -> None:
    """Each of ``ENGINE_CHOICES`` that ``options`` sets (not None) is one of its words; the
    error names the flag, the bad value and the nearest word."""
    for flag, attribute, choices in ENGINE_CHOICES:
        value = getattr(options, attribute)
        if value is not None:
            check_choice(flag, value, choices)


def check_output_len_cv(cv: Any) -> None:
    """The spread of output lengths is a number from 0 (one length) to 10."""
    check_number("--output-len-cv", cv, 0, maximum=10,
                 note="standard deviation over mean of the output lengths")


def check_cached_prefix(cached: Any, input_len: int) -> None:
    """A cached prefix is shorter than the prompt: engines always compute its last token."""
    if not isinstance(cached, int) or isinstance(cached, bool) \
            or not 0 <= cached < input_len:
        raise GpuarchError(f"--cached-prefix: expected tokens from 0 to --input-len - 1 "
                           f"({input_len - 1}: the last prompt token is always computed), "
                           f"got {cached!r}")


IDENTITY_SKIPPING_KERNELS = ("sglang", "sglang-deepep")
"""The MoE kernels that drop a token's identity-expert slots before the experts run
(SGLang's ``zero_experts_compute_triton`` marks them -1, which its fused MoE and DeepEP
skip); vLLM's marks them expert 0 with zero weight, so they run there (its later
ZeroExpertRouter remaps them the same way); TensorRT-LLM's handling was not read."""


def routed_slots(shape: TransformerShape, cfg: InferenceConfig) -> float:
    """Expert slots a token's routed copies fill in the experts' GEMMs and exchange: its
    ``experts_per_token``, or the mean that go to real experts
    (``TransformerShape.mean_real_experts``) where the kernels skip identity slots."""
    if shape.mean_real_experts and cfg.moe_kernels in IDENTITY_SKIPPING_KERNELS:
        return shape.mean_real_experts
    return float(shape.experts_per_token)


def real_slots(shape: TransformerShape) -> float:
    """Expert slots a token fills with real experts' rows: the published mean where some
    slots go to identity experts (``TransformerShape.mean_real_experts``), else every one.
    Where the kernels run the identity slots (``routed_slots`` above this), the rest land
    on expert 0 with zero weight (vLLM's ZeroExpertRouter)."""
    return shape.mean_real_experts or float(shape.experts_per_token)


def slot_spread(shape: TransformerShape, cfg: InferenceConfig) -> float:
    """Expert slots over experts: 1 + the redundant copies over the model's experts (1 for a
    model without experts or without redundant copies)."""
    if not shape.is_moe or not cfg.redundant_experts:
        return 1.0
    return (shape.experts + cfg.redundant_experts) / shape.experts


def model_weight_bytes(shape: TransformerShape, cfg: InferenceConfig) -> float:
    """Weight bytes per GPU: dense weights over TP x PP, expert weights (with their redundant
    copies) over max(TP, EP) GPUs per stage (see ReplicaRunner.layer); with speculative decoding
    also the draft, one average layer on the last stage."""
    pc = count_params(shape)
    w = cfg.quant.weights.bytes
    shard = cfg.tp * cfg.pp
    # the embedding table and the LM head stay in 16 bits in a quantized checkpoint
    # (EMBEDDING_BYTES)
    ends = (pc.embedding + pc.lm_head) * max(w, EMBEDDING_BYTES)
    if not shape.is_moe:
        model = ((pc.total - pc.embedding - pc.lm_head) * w + ends) / shard
    else:
        experts = pc.mlp_experts
        # latent experts' projections are replicated over TP
        model = ((pc.total - experts - pc.moe_latent - pc.embedding - pc.lm_head) * w
                 + ends) / shard + pc.moe_latent * w / cfg.pp \
            + experts * slot_spread(shape, cfg) * cfg.expert_quant.weights.bytes \
            / (cfg.pp * max(cfg.tp, cfg.ep))
    m = shape.mamba
    if m is not None:
        # a single B/C group held whole on every GPU of the TP group
        model += shape.mamba_layers * m.replicated_params(cfg.tp, shape.hidden) * w / cfg.pp
    if not cfg.speculative_tokens:
        return model
    if shape.is_hybrid:
        # a hybrid's draft is its MTP block, an attention and an MLP (or expert) block (the
        # engines' nemotron_h_mtp builds it from the model's "*E" MTP pattern, no Mamba-2)
        dense, routed = mtp_block_params(shape)
        return model + dense * w / cfg.tp + routed * cfg.expert_quant.weights.bytes / max(
            cfg.tp, cfg.ep)
    embeddings = ends / cfg.tp
    return model + (model * cfg.pp - embeddings) / shape.layers
