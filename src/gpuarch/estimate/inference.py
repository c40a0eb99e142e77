"""An LLM serving request: time to first token, time per output token, throughput, memory.

Model:

- **Prefill** runs the prompt's tokens through every layer (GEMMs with M = tokens, causal
  fused attention), in chunks of ``chunk`` tokens when chunked prefill is on, each chunk
  attending to the prompt before it; compute-bound for all but short prompts.
- **Decode** runs one token per sequence per step: each GPU reads its shard of the weights
  once per step (for MoE only the experts the batch's tokens touch) and the KV cache of
  every sequence at the current context length, once, plus two tensor-parallel all-reduces
  per layer, which are latency-bound at small batch, and a fixed per-step overhead. A
  Python executor loop (``executor="python"``, the default: TensorRT-LLM's PyTorch backend
  and engines like it) also spends host time per request in flight each step, hidden behind
  the GPU's step by its overlap scheduler until it is the longer of the two. The
  context grows from the prompt to prompt + output; the KV term is linear in it, so the step
  at the mean context gives the mean step time exactly.
- **Static batch**: TTFT = prefill of the whole batch; request latency = TTFT + (O - 1)
  decode steps. **Continuous batching** (steady state): every O decode steps, ``batch`` new
  prompts are prefilled between them (batched into passes), so decode steps are stretched by
  the prefill work; a new prompt's TTFT is its pass plus the M/D/1 wait for the prefill
  server at that load, plus half a decode step.
- **Memory**: weights at their format (sharded by TP x PP, experts by EP), KV cache at its
  format for prompt + output tokens, peak prefill activations and logits, and a reserve.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property, lru_cache
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
from gpuarch.errors import GpuarchError, check_choice, check_count, check_number
from gpuarch.estimate.energy import (
    DEFAULT_FACILITY,
    GPU_POWER_MODEL,
    Facility,
    seconds_per_token_at_peak,
    serving_energy_kwh,
)
from gpuarch.estimate.expert_load import busiest_rank_experts
from gpuarch.estimate.host_link import product_host_link
from gpuarch.estimate.mamba import (
    DEFAULT_SSM_STATE,
    SSM_STATE_BYTES,
    hybrid_state_bytes,
    mamba_decode_ops,
    mamba_mixer_ops,
)
from gpuarch.perf.collectives import (
    Collective,
    Fabric,
    Group,
    collective_time,
    dispatch_time,
    exchange_latencies,
    link_for,
    nvls_for,
)
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.kv_formats import kv_cache_run
from gpuarch.perf.num import any_of, ceil, floor, maximum, minimum, where
from gpuarch.perf.precision import Precision
from gpuarch.perf.quant import GemmPeak, QuantFormat, QuantScheme, gemm_peak
from gpuarch.perf.roofline import (
    CONTEXT_ATTENTION,
    MLA_DECODE,
    SPREAD_ROWS,
    Attention,
    Device,
    Elementwise,
    Gemm,
    Op,
    mean_keys,
    moe_permute,
    op_kind,
    op_time,
)
from gpuarch.perf.sibling import sibling_notes
from gpuarch.units import Unit, from_si, to_si
from gpuarch.workloads.flops import attention_core_dims, attention_projections
from gpuarch.workloads.mtp import mtp_block_params
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import MAX_DIMENSION, TransformerShape

__all__ = [
    "ANSWER_DRAWS",
    "DECODE_KV_READS",
    "DRAIN_POINTS",
    "EXECUTORS",
    "FP8_SCALINGS",
    "MAX_PREFILL_LOAD",
    "MOE_COMMS",
    "MOE_GEMM_KERNELS",
    "MOE_KERNELS",
    "MOE_KERNEL_ENGINES",
    "OP_PARTS",
    "RESERVE_FRACTION",
    "SCHEDULER_POLICIES",
    "SCHEDULES",
    "STREAM_PASS_ROUNDS",
    "WINDOW_KV_CACHES",
    "Batching",
    "InferenceConfig",
    "InferenceCore",
    "InferenceEstimate",
    "PassTimes",
    "admission_starts",
    "check_cached_prefix",
    "decode_attention_time",
    "drain_shares",
    "engine_of",
    "engine_slots",
    "estimate_inference",
    "evaluate_inference",
    "fp8_scaling_of",
    "gamma_lengths",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "max_batch_that_fits",
    "max_context_that_fits",
    "memory_per_gpu",
    "mla_decode_attention_time",
    "moe_block_floor_s",
    "moe_module_time",
    "moe_rank_tokens",
    "pass_times",
    "server_layout",
    "with_expert_options",
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
EXECUTORS = ("python", "cpp")
"""Serving executors: a Python loop with per-request host time each step (TensorRT-LLM's
PyTorch backend, vLLM, SGLang), or a C++ executor whose host time is not modelled
(TensorRT-LLM's TensorRT engines of the 0.x releases, LMDeploy's TurboMind)."""

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


MOE_KERNELS = ("trtllm", "vllm", "sglang", "sglang-deepep")
"""Whose fused MoE kernels a serving estimate charges the block's fixed time for: TensorRT-
LLM's (``moe_block_floor_s``, on Blackwell ``moe_block_floor_blackwell_s``, as its measured
layers put them), vLLM's or SGLang's (``moe_block_floor_s`` on every GPU: on Blackwell both run
FlashInfer's TRT-LLM-Gen MoE, whose measured layers put it there); the rest of the model is
the same for the three. "sglang-deepep" is SGLang's wide-EP path (its DeepEP all-to-all,
``--moe-a2a-backend deepep``), whose expert GEMMs on Hopper are DeepGEMM's grouped FP8 GEMMs:
block-scaled FP8 experts there run at ``Efficiency.moe_gemm_deepgemm``."""

MOE_GEMM_KERNELS = ("native", "ampere")
"""The routed experts' grouped GEMM kernels: the GPU generation's own, or ones written for
Ampere's synchronous Tensor Core instructions, which on Hopper and datacenter Blackwell run
at ``Efficiency.moe_gemm_ampere_kernel`` of the native rate (TensorRT-LLM before 0.10 ran
16-bit experts on Hopper so); no change on Ampere, Ada or GeForce/RTX Blackwell."""

MOE_KERNEL_ENGINES = {"trtllm": "TensorRT-LLM", "vllm": "vLLM", "sglang": "SGLang",
                      "sglang-deepep": "SGLang (DeepEP, DeepGEMM)"}
"""Each of ``MOE_KERNELS`` by the engine's name, as reports print it."""


def engine_of(kernels: str) -> str:
    """The serving engine whose kernels ``kernels`` (``MOE_KERNELS``) are: "sglang" for
    SGLang's wide-EP path too."""
    return kernels.split("-", 1)[0]


MAX_BATCH_SEARCH = 4096
"""Upper end of the search for the largest batch that fits (``--batch max``)."""


def moe_block_floor_s(tensor_core_generation: int | None, kernels: str,
                      efficiency: Efficiency = DEFAULT_EFFICIENCY) -> float:
    """Fixed time of one fused MoE block per expert layer and pass (seconds) for ``kernels``
    (``MOE_KERNELS``) on a GPU of that Tensor Core generation: TensorRT-LLM's on Blackwell
    their own, every other case the Hopper-measured one."""
    if (tensor_core_generation or 0) >= BLACKWELL_TENSOR_CORES and kernels == "trtllm":
        return efficiency.moe_block_floor_blackwell_s
    return efficiency.moe_block_floor_s

Num = Any
"""A float, or a NumPy array of them: the same formulas cost one batch or many."""


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
    # the engine's executor loop: "python" (per-request host time each step, overlapped with
    # the GPU) or "cpp" (none modelled); see EXECUTORS
    executor: str = "python"
    # how new prompts are fitted in under continuous batching (SCHEDULES): in passes of their
    # own between decode steps, or in the decode step's iteration; it moves TTFT, not the
    # steady state's TPOT or throughput
    schedule: str = "separate"
    # a sliding-window layer's KV cache: its window only ("ring") or every position ("full");
    # see WINDOW_KV_CACHES
    window_kv_cache: str = "ring"
    # admission against the KV cache under continuous batching: SCHEDULER_POLICIES
    scheduler_policy: str = "guaranteed_no_evict"
    # how decode attention reads a grouped-query model's KV cache: see DECODE_KV_READS
    decode_kv_reads: str = "shared"
    # expert dispatch with data-parallel attention: see MOE_COMMS
    moe_comm: str = "alltoall"
    # whose fused MoE kernels set the block's fixed time per expert layer: see MOE_KERNELS
    moe_kernels: str = "trtllm"
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
        if self.batch is not None and (not isinstance(self.batch, int) or self.batch < 1):
            raise GpuarchError(f"--batch: expected an integer >= 1 or 'max', got "
                               f"{self.batch!r}")
        if self.chunk < 0:
            raise GpuarchError(f"--chunk: expected tokens >= 0, got {self.chunk}")
        check_cached_prefix(self.cached_prefix, self.input_len)
        check_choice("--executor", self.executor, EXECUTORS)
        check_choice("--schedule", self.schedule, SCHEDULES)
        check_choice("--scheduler-policy", self.scheduler_policy, SCHEDULER_POLICIES)
        if self.schedule != "separate" and self.batching is not Batching.CONTINUOUS:
            raise GpuarchError(f"--schedule {self.schedule}: how a continuous-batching engine "
                               "fits new prompts in; give --batching continuous")
        check_choice("--window-kv-cache", self.window_kv_cache, WINDOW_KV_CACHES)
        check_choice("--decode-kv-reads", self.decode_kv_reads, DECODE_KV_READS)
        check_choice("--moe-comm", self.moe_comm, MOE_COMMS)
        check_choice("--moe-kernels", self.moe_kernels, MOE_KERNELS)
        check_choice("--moe-gemm-kernel", self.moe_gemm_kernel, MOE_GEMM_KERNELS)
        check_choice("--fp8-scaling", self.fp8_scaling, FP8_SCALINGS)
        check_choice("--ssm-state-precision", self.ssm_state_precision,
                     tuple(SSM_STATE_BYTES))
        check_count("--num-requests", self.num_requests, zero_unset=True)
        check_output_len_cv(self.output_len_cv)
        offload = self.cpu_offload_gib
        if isinstance(offload, bool) or not isinstance(offload, (int, float)) \
                or not 0 <= offload < math.inf:
            raise GpuarchError(f"--cpu-offload-gb: expected a size in GiB >= 0, got "
                               f"{offload!r}")
        if offload and offload >= (held := from_si(_model_weight_bytes(shape, self),
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
        if shape.heads % self.tp:
            raise GpuarchError(f"--tp: {self.tp} does not divide the {shape.heads} heads")
        if shape.d_ffn % self.tp:
            # a column-parallel MLP splits its hidden units evenly (Megatron-Core's and the
            # serving engines' linear layers refuse a width the TP size does not divide)
            raise GpuarchError(f"--tp: {self.tp} does not divide the MLP's {shape.d_ffn} "
                               "hidden units (--ffn-hidden)")
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
        shape.check_mamba_split(self.tp, "--tp", str(self.tp))


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


def kv_bytes_per_token(shape: TransformerShape, element: float, tp: int = 1) -> float:
    """KV-cache bytes one token adds per GPU, all layers: 2 (K and V) x KV heads (not fewer
    than one per GPU when TP exceeds them) x head dim x layers x element (a hybrid model's
    attention blocks only); MLA stores its compressed latent and the rotary key instead."""
    if shape.mla is not None:
        per_layer = shape.mla.latent_width
        return float(per_layer * shape.layers * element)
    kv_heads = max(1, shape.n_kv_heads // tp) if tp <= shape.n_kv_heads else 1
    return float(2 * kv_heads * shape.d_head * shape.attention_layers * element)


def kv_bytes_per_sequence(shape: TransformerShape, element: float, tokens: int,
                          tp: int = 1, window_kv_cache: str = "ring") -> float:
    """KV-cache bytes of one sequence of ``tokens`` per GPU: sliding-window layers keep only
    the last ``sliding_window`` positions (a ring buffer), the others every position; with
    ``window_kv_cache`` "full" every layer keeps every position."""
    return kv_bytes_per_token(shape, element, tp) \
        * _positions_held(shape, tokens, window_kv_cache)


def _positions_held(shape: TransformerShape, tokens: int, window_kv_cache: str = "ring"
                    ) -> float:
    """Positions of one sequence of ``tokens`` the KV cache holds, averaged over the layers
    (``kv_bytes_per_sequence`` over the bytes a position adds): all of them, but only the
    last ``sliding_window`` in a sliding-window layer unless ``window_kv_cache`` is "full"."""
    if not shape.windowed_layers or window_kv_cache == "full":
        return tokens
    share = shape.windowed_layers / shape.layers
    return (1 - share) * tokens + share * min(tokens, shape.sliding_window)


@dataclass(frozen=True)
class InferenceEstimate:
    """The result of one inference estimate (SI inside; ``as_json`` uses the issue's keys)."""

    model: str
    gpu: str
    batch: int
    max_batch: int
    max_context: int | None  # longest prompt + output per sequence that fits at ``batch``
    ttft_s: float
    tpot_s: float
    request_latency_s: float
    output_tokens_per_s: float
    gpus: int
    memory: dict[str, float]  # bytes per GPU
    gpu_memory_bytes: float
    fits_in_memory: bool
    bottleneck: dict[str, str]  # phase -> limiter
    bottleneck_reason: dict[str, str]
    prefill_breakdown_s: dict[str, float]
    decode_step_breakdown_s: dict[str, float]
    assumptions: dict[str, Any]
    prefill_parts_s: dict[str, float] = field(default_factory=dict)  # OP_PARTS
    decode_step_parts_s: dict[str, float] = field(default_factory=dict)
    # energy (and with a price, cost) per million output tokens (``serving_cost``)
    cost: dict[str, Any] = field(default_factory=dict)

    @property
    def output_tokens_per_s_per_user(self) -> float:
        """How fast one request's output streams once it has begun: 1 / TPOT (under
        continuous batching the TPOT includes the prefill passes run between steps)."""
        return 1.0 / self.tpot_s

    def as_json(self) -> dict[str, Any]:
        mem = {k: from_si(v, Unit.GIB) for k, v in self.memory.items()}
        mem["total"] = from_si(sum(self.memory.values()), Unit.GIB)
        return {
            "model": self.model,
            "gpu": self.gpu,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "request_latency_s": self.request_latency_s,
            "batch": self.batch,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s / self.gpus,
            "output_tokens_per_s_per_user": self.output_tokens_per_s_per_user,
            "memory_per_gpu_gib": mem,
            "gpu_memory_gib": from_si(self.gpu_memory_bytes, Unit.GIB),
            "fits_in_memory": self.fits_in_memory,
            "max_batch": self.max_batch,
            "max_context": self.max_context,
            "bottleneck": self.bottleneck,
            "bottleneck_reason": self.bottleneck_reason,
            "prefill_breakdown_s": self.prefill_breakdown_s,
            "decode_step_breakdown_s": self.decode_step_breakdown_s,
            "prefill_parts_s": self.prefill_parts_s,
            "decode_step_parts_s": self.decode_step_parts_s,
            "cost": self.cost,
            "assumptions": self.assumptions,
        }


@dataclass
class _Phase:
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

    def __add__(self, o: _Phase) -> _Phase:
        return _Phase(self.compute + o.compute, self.memory + o.memory,
                      self.communication + o.communication, self.overhead + o.overhead,
                      self.host + o.host)

    def scale(self, k: Num) -> _Phase:
        return _Phase(self.compute * k, self.memory * k, self.communication * k,
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
prefill passes wait for its busiest rank (``_Runner.prefill_skew``), and the copies of
weights kept in host memory (``cpu_offload_gib``)."""


def _split(op: Op, device: Device, eff: Efficiency) -> tuple[Num, Num]:
    """(time, whether compute-bound) of one operator; the bound rule of ``op_cost``."""
    t, t_cmp, t_mem, _, _ = op_time(op, device, eff)
    compute = t_mem < t_cmp if isinstance(op, Elementwise) else t_cmp >= t_mem
    return t, compute


EXPERT_GEMM_PREFIX = "expert_"
"""Names of the routed experts' GEMMs (``expert_up``, ``expert_down``): they run in the
configuration's expert formats (``InferenceConfig.expert_quant``)."""

GATHERED_OPS = ("expert_up", "expert_down", "moe_permute", "activation")
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
    norms; five in a hybrid model's block (one norm, one residual add)."""
    passes = 5 if block else 10 + 2 * (shape.layer_norms - 2)
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
    runner = _Runner(catalog, shape, product, cfg, system, efficiency, balanced_routing=True)
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
    runner = _Runner(catalog, shape, product, cfg, None, efficiency)
    runner.parts = {}
    runner.layer(seqs, seqs, 1, ctx + 1, 0.0, moe=False, window=window)
    return float(runner.parts["attention"])


class _Runner:
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
            self.expert_eff = dataclasses.replace(eff, moe_gemm=eff.moe_gemm_deepgemm)
        elif shape.is_fine_grained_moe and not (weights.is_16bit and acts.is_16bit):
            factor = eff.moe_gemm_fine
            if weights is QuantFormat.FP4 and acts is QuantFormat.FP4:
                factor *= eff.moe_gemm_nvfp4
            elif weights is QuantFormat.MXFP4 and acts is QuantFormat.FP8:
                factor *= eff.moe_gemm_mxfp4_fp8
            elif block_fp8:
                factor *= eff.moe_gemm_fp8_block
            self.expert_eff = dataclasses.replace(eff, moe_gemm=eff.moe_gemm * factor)
        # grouped GEMMs written for Ampere's synchronous Tensor Core instructions, on a GPU
        # that drives its Tensor Cores asynchronously (MOE_GEMM_KERNELS)
        if cfg.moe_gemm_kernel == MOE_GEMM_KERNELS[1] and drives_tensor_cores_async(
                catalog.chip_of(product).compute_capability):
            self.expert_eff = dataclasses.replace(
                self.expert_eff, moe_gemm=self.expert_eff.moe_gemm * eff.moe_gemm_ampere_kernel)
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
        self.ep_group = Group(cfg.ep, min(cfg.ep, cfg.gpus_per_node), intra, inter)
        # an all-to-all's fixed times (dispatch, combine): the one-shot kernels', but
        # TensorRT-LLM's DeepEP path where it has no multi-node NVLink (an 8-GPU board)
        self.trtllm_deepep = cfg.moe_kernels == "trtllm" and cfg.gpus_per_node <= HGX_GPUS
        self.a2a_latency = exchange_latencies(eff, self.trtllm_deepep)
        self.spread = slot_spread(shape, cfg)
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
        self._forward_cache: dict[tuple[Any, ...], tuple[_Phase, dict[str, float]]] = {}
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

    def _scaled(self, k: Num, phase: Callable[[], _Phase]) -> _Phase:
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
              overlapped: bool = False, block: str = "") -> _Phase:
        """One layer on one GPU: ``tokens`` = seqs x q_len new tokens attending to ``ctx``
        positions each (at most ``window`` of them if given); an expert layer if ``moe``
        (default: if the model has experts); in a prefill pass if ``prefill``; one of two
        micro-batches whose exchanges overlap the other's work if ``overlapped``. A hybrid
        model's ``block`` ("M" Mamba-2, "*" attention, "-" MLP, "E" experts) is one part of
        a layer, with one norm, one residual add and one tensor-parallel reduction."""
        if moe is None:
            moe = self.s.is_moe
        s = self.s
        ops: list[Op] = []
        if block in ("", "*"):
            ops += self._attention_ops(tokens, seqs, q_len, ctx, window, prefill)
        inner: Num = 0.0
        if block == "M":
            ops += self._mamba_ops(tokens, q_len, prefill)
        elif block in ("", "-", "E"):
            ffn, inner = self._ffn_ops(tokens, experts_touched, moe)
            ops += ffn
        hidden_bytes = tokens * s.hidden * 2.0
        ops.append(_norms_residuals(tokens, s, bool(block)))
        if block in ("", "-", "E"):
            ops.append(Elementwise(3.0 * inner * 2.0, name="activation"))
        return self._run_layer(ops, tokens, q_len, moe, prefill, overlapped, hidden_bytes,
                               bool(block))

    def _mamba_ops(self, tokens: Num, q_len: int, prefill: bool) -> list[Op]:
        """A Mamba-2 block: its projections (GEMMs in the scheme's formats) around the
        chunked scan over a prefill's tokens, or a decode step's state update per
        sequence."""
        s, t = self.s, self.cfg.tp
        m = s.mamba
        assert m is not None
        # a decode step's state update per sequence, over each one's q_len tokens when it
        # verifies drafted ones
        mixer = mamba_mixer_ops(m, t, tokens, 2.0, q_len) if prefill else \
            mamba_decode_ops(m, t, tokens / q_len, 2.0, self.cfg.ssm_state_bytes, q_len)
        return [self._gemm(tokens, m.in_proj_width // t, s.hidden, "mamba_in_proj"), *mixer,
                self._gemm(tokens, s.hidden, m.inner // t, "mamba_out_proj")]

    def _attention_ops(self, tokens: Num, seqs: Num, q_len: int, ctx: Num, window: Num,
                       prefill: bool) -> list[Op]:
        """An attention block's projections and core."""
        s, cfg, t = self.s, self.cfg, self.cfg.tp
        heads = s.heads // t
        kv_element = cfg.quant.kv_cache.bytes
        m = None if prefill else s.mla
        absorbed = m is not None
        reads = 1.0
        chunked = s.chunks(window)
        if m is not None:
            # decode (a drafted token's verification too) with the up-projections absorbed:
            # one shared latent "head" of kv_lora + rope width is both key and value (values
            # use the kv_lora part)
            width = m.latent_width
            d = (width + m.kv_lora_rank) // 2
            kv = 1
            kv_element = kv_element * width / (2 * d)
        else:
            core_kv, d = attention_core_dims(s)
            kv = max(1, core_kv // t)
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
        ops.append(Attention(seqs, q_len, ctx, heads, kv, d, causal=True,
                             kv_element=kv_element, window=window, chunked=chunked,
                             kv_head_reads=reads,
                             name=MLA_DECODE if absorbed else CONTEXT_ATTENTION if prefill
                             else "attention"))
        name, n, k = projections[-1]
        ops.append(self._gemm(tokens, n, k, name))
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

    def _ffn_ops(self, tokens: Num, experts_touched: Num, moe: bool
                 ) -> tuple[list[Op], Num]:
        """A dense MLP's or an expert block's operators, and the elements its activation
        function reads."""
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
            routed = tokens * gathered * s.experts_per_token * cfg.moe_imbalance
            per_expert = maximum(1, ceil(routed / maximum(touched, 1.0)))
            width = s.d_expert
            outer = s.expert_width  # what the routed experts read and write
            ops.append(Gemm(tokens, s.experts, s.hidden, name="router"))
            if s.moe_latent:
                # latent experts: every rank projects its tokens to the latent width and
                # back (the projections are replicated over TP)
                ops += [self._gemm(tokens, s.moe_latent, s.hidden, "moe_latent_down"),
                        self._gemm(tokens, s.hidden, s.moe_latent, "moe_latent_up")]
            ops += [self._gemm(per_expert, up_factor * width // moe_tp, outer, "expert_up",
                               batch=ceil(local)),
                    self._gemm(per_expert, outer, width // moe_tp, "expert_down",
                               batch=ceil(local))]
            if s.shared_experts:
                shared = width * s.shared_experts
                ops += [self._gemm(tokens, up_factor * shared // t, s.hidden, "shared_up"),
                        self._gemm(tokens, s.hidden, shared // t, "shared_down")]
            # a GPU permutes, activates and un-permutes only the copies routed to its own
            # experts, 1/EP of the group's (TensorRT-LLM's expandInputRowsKernel stops at
            # the local experts' last row); they go in quantized as the GEMMs take them and
            # come out of the down projection in 16 bits
            ops.append(moe_permute(routed / cfg.ep, outer, self.expert_act_bytes, 2.0))
            inner = routed / cfg.ep * width // moe_tp
        else:
            f = s.d_ffn
            ops += [self._gemm(tokens, up_factor * f // t, s.hidden, "mlp_up"),
                    self._gemm(tokens, s.hidden, f // t, "mlp_down")]
            inner = tokens * f // t
        return ops, inner

    def _run_layer(self, ops: list[Op], tokens: Num, q_len: int, moe: bool, prefill: bool,
                   overlapped: bool, hidden_bytes: Num, block: bool) -> _Phase:
        """A layer's (or hybrid block's) operators, collectives and fixed time."""
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
                if op.name == MLA_DECODE else self.context_device \
                if isinstance(op, Attention) and q_len > 1 else self.device
            time, compute = _split(op, device, self.expert_eff if expert else self.eff)
            if isinstance(op, Gemm) and (self.expert_peak if expert else self.peak).dequantize:
                time = where(compute, time * (1 + self.eff.dequant_overhead), time)
            self._add(op_kind(op), time)
            if skew != 1.0 and not (moe and op.name in GATHERED_OPS):
                self._add("attention_dp_wait", time * (skew - 1.0))
                time = time * skew
            compute_time = compute_time + where(compute, time, 0.0)
            memory_time = memory_time + where(compute, 0.0, time)
        phase = _Phase(compute=compute_time, memory=memory_time)
        tp_comm: Num = 0.0
        ep_comm: Num = 0.0
        if t > 1:
            # one all-reduce per block, or one a layer with parallel attention (one a hybrid
            # model's block)
            tp_comm = (1 if block else s.tp_reductions) * collective_time(
                Collective.ALL_REDUCE, hidden_bytes, self.tp_group, self.eff, nvls=cfg.nvls)
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
            copies = tokens * s.experts_per_token * s.expert_width / t * cfg.moe_imbalance
            dispatch, combine = self.a2a_latency
            # a prefill pass's exchange across nodes runs the high-throughput kernels, which
            # send a token over the network once per node (DeepEP's normal mode); decode's
            # low-latency kernels send every copy
            dedupe = s.experts_per_token if prefill else 0
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
        return phase + _Phase(communication=tp_comm + ep_comm) + _Phase(overhead=fixed)

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

    def head(self, tokens: Num) -> _Phase:
        gemm = Gemm(tokens, -(-self.s.vocab // self.cfg.tp), self.s.hidden, name="lm_head",
                    weight_element=max(self.weight_bytes, EMBEDDING_BYTES))
        time, compute = _split(gemm, self.head_device, self.eff)
        self._add("lm_head", time)
        return _Phase(compute=where(compute, time, 0.0), memory=where(compute, 0.0, time))

    def experts_touched(self, tokens: Num) -> Num:
        """Expected distinct experts a layer's tokens are routed to (uniform routing)."""
        s = self.s
        if not s.is_moe:
            return 0.0
        untouched = (1 - s.experts_per_token / s.experts) ** tokens
        return s.experts * (1 - untouched)

    def forward(self, seqs: Num, q_len: int, ctx: Num, rows: Num | None = None,
                prefill: bool = False) -> _Phase:
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

    def _kinds(self) -> list[tuple[bool, int, float, str]]:
        """(expert layer?, attention window, share of the layers, hybrid block) for each kind
        of layer (``TransformerShape.layer_kinds``), or of a hybrid model's block."""
        s = self.s
        if s.is_hybrid:
            return [(block == "E", 0, s.hybrid_pattern.count(block) / s.layers, block)
                    for block in sorted(set(s.hybrid_pattern))]
        return [(moe, window, share, "") for moe, window, share in s.layer_kinds()]

    def _forward(self, seqs: Num, q_len: int, ctx: Num, rows: Num, prefill: bool) -> _Phase:
        """``forward`` without its cache."""
        tokens = rows * q_len
        s = self.s
        touched = self.experts_touched(tokens)
        layers = math.ceil(s.layers / self.cfg.pp) * self.cfg.pp
        # layer counts by kind: expert or dense (the leading dense layers of an MoE model),
        # full or sliding-window attention
        body = _Phase()
        tbo = self.cfg.two_batch_overlap
        half = self.experts_touched(tokens / 2) if tbo else 0.0
        for moe, window, share, block in self._kinds():
            def one(moe: bool = moe, window: int = window, block: str = block) -> _Phase:
                return self.layer(tokens, seqs, q_len, ctx, touched if moe else 0.0,
                                  moe=moe, window=window, prefill=prefill, block=block)

            def halves(window: int = window) -> _Phase:
                # two-batch overlap: the expert layer runs twice at half the batch
                return self._scaled(2, lambda: self.layer(
                    tokens / 2, seqs / 2, q_len, ctx, half, moe=True, window=window,
                    prefill=prefill, overlapped=True))

            body = body + self._scaled(layers * share, halves if moe and tbo else one)
        total = body + self.head(rows)
        if self.offload_s:
            # every stage copies its GPU's offloaded weights up before running them
            self._add("weight_offload", self.offload_s * self.cfg.pp)
            total = total + _Phase(communication=self.offload_s * self.cfg.pp)
        if self.cfg.pp > 1:
            act = tokens * self.s.hidden * self.act_bytes
            p2p = sum(hops * collective_time(Collective.P2P, act, group, self.eff)
                      for hops, group in self.pp_hops if hops)
            self._add("pipeline_p2p", p2p)
            total = total + _Phase(communication=p2p)
        return total

    def prefill(self, seqs: Num) -> _Phase:
        """Prefill ``seqs`` prompts, chunked if configured, at most ``max_num_tokens`` per
        pass (whole prompts are grouped into passes)."""
        length = self.cfg.input_len
        cached = self.cfg.cached_prefix  # in the KV cache already: attended to, not computed
        budget = self.cfg.max_num_tokens
        new = length - cached
        chunk = self.cfg.chunk if 0 < self.cfg.chunk < new else new
        chunk = min(chunk, budget)
        group = max(1, budget // chunk)  # prompts per pass
        phase = _Phase(overhead=self.eff.prefill_overhead_s)
        self._add("overhead", self.eff.prefill_overhead_s)
        full, rest = divmod(seqs, group)  # passes of whole groups are identical
        for n, times in ((group, full), (maximum(rest, 1), where(rest > 0, 1, 0))):
            if not any_of(times):
                continue

            def one(n: Num = n) -> _Phase:
                full_chunks, last = divmod(new, chunk)
                total = _Phase()
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

                        def at(end: int = end) -> _Phase:
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

    def decode_step(self, seqs: Num, ctx: float) -> _Phase:
        """One target step: one new token per sequence, or with speculative decoding the k
        drafted tokens and the target's own verified together (k + 1 queries at the end of
        the context), after k draft passes of one target-shaped layer and the LM head each
        (an MTP module or an EAGLE head)."""
        k = self.cfg.speculative_tokens
        position = max(1, round(ctx))
        step = self.forward(seqs, k + 1, position + k, self.graph_rows(seqs)) + _Phase(
            overhead=self.eff.decode_step_overhead_s)
        self._add("overhead", self.eff.decode_step_overhead_s)
        if k:
            s = self.s
            touched = self.experts_touched(seqs) if s.is_moe else 0.0
            step = step + self._scaled(k, lambda: self.layer(seqs, seqs, 1, position, touched,
                                                             moe=s.is_moe) + self.head(seqs))
        if self.cfg.executor == "python":
            # the executor's host work for every request in flight, in proportion to the
            # stage's expert layers, overlaps the GPU's step (overlap scheduler); the step
            # lasts as long as the longer of the two
            per_request = self.host_s_per_request_layer * self.s.moe_layers / self.cfg.pp
            host = maximum(0.0, per_request * seqs - step.total)
            self._add("host", host)
            step = step + _Phase(host=host)
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
            step = step + _Phase(host=wait)
        return step

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


def _exchange_note(runner: _Runner) -> dict[str, Any]:
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


def _context_note(shape: TransformerShape, cfg: InferenceConfig) -> dict[str, Any] | None:
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


def slot_spread(shape: TransformerShape, cfg: InferenceConfig) -> float:
    """Expert slots over experts: 1 + the redundant copies over the model's experts (1 for a
    model without experts or without redundant copies)."""
    if not shape.is_moe or not cfg.redundant_experts:
        return 1.0
    return (shape.experts + cfg.redundant_experts) / shape.experts


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
    return float(batch / _lanes(batch, micro_batches) * (1 + speculative_tokens))


def _weight_bytes(shape: TransformerShape, cfg: InferenceConfig) -> float:
    """Weight bytes each GPU holds: the model's share (``_model_weight_bytes``) less what
    stays in host memory (``cpu_offload_gib``)."""
    return _model_weight_bytes(shape, cfg) - cfg.cpu_offload_bytes


def _model_weight_bytes(shape: TransformerShape, cfg: InferenceConfig) -> float:
    """Weight bytes per GPU: dense weights over TP x PP, expert weights (with their redundant
    copies) over max(TP, EP) GPUs per stage (see _Runner.layer); with speculative decoding
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


def _mamba_state_per_sequence(shape: TransformerShape, cfg: InferenceConfig) -> Any:
    """The Mamba-2 state a running sequence holds on one GPU of a stage's TP group: one copy,
    or with k drafted tokens a step 1 + k, a state for each position a verification can go
    back to (vLLM's num_speculative_blocks pages beside the request's own, PR 33726;
    SGLang's scratch of the step's states per running request is about as large); under
    prefix caching (a cached prefix) one more, the state the engine keeps at the request's
    last cache-aligned position beside its running one (vLLM's "align" mode reserves
    2 + k pages a request: MambaSpec.max_memory_usage_bytes)."""
    return hybrid_state_bytes(shape, cfg.tp, cfg.ssm_state_bytes) * (
        1 + cfg.speculative_tokens + (1 if cfg.cached_prefix else 0))


def _kv_and_activation_bytes(shape: TransformerShape, cfg: InferenceConfig, batch: Num,
                             prompt: int) -> tuple[Num, Num]:
    """(KV cache, activations and logits) bytes per GPU for ``batch`` sequences of
    ``prompt`` + output tokens."""
    return _kv_and_activation_sizer(shape, cfg)(batch, prompt)


def _kv_and_activation_sizer(shape: TransformerShape, cfg: InferenceConfig
                             ) -> Callable[[Num, int], tuple[Num, Num]]:
    """``_kv_and_activation_bytes`` for one model and configuration, what does not depend on
    the batch or the prompt worked out once (the searches for the largest batch and the
    longest context that fit call it a dozen times an estimate)."""
    element = cfg.quant.kv_cache.bytes
    per_token = kv_bytes_per_token(shape, element, cfg.tp)
    # the answer's positions a running sequence holds: all of them (reserved at admission), or
    # under max_utilization the mean so far of the sequences in flight
    static = cfg.batching is Batching.STATIC
    out_tokens = round(cfg.output_in_flight) if static or \
        cfg.scheduler_policy == SCHEDULER_POLICIES[0] \
        else round(cfg.mean_decode_context - cfg.input_len)
    # the shared prefix's blocks are held once, not once per sequence, in the layers that
    # keep every position (a sliding-window layer's ring moves past the prefix)
    windowed = 0.0 if cfg.window_kv_cache == "full" \
        else shape.windowed_layers / shape.layers
    shared_per_token = (1 - windowed) * per_token / cfg.pp
    if shape.is_moe:
        # the expert buffers hold every routed row of the tokens that reach a GPU's experts
        # (which experts a token picks is known only at run time; the width split only by
        # what is left of TP after EP): with data-parallel attention and all-gather dispatch
        # every rank's tokens (TensorRT-LLM sizes its MoE modules for max_num_tokens x the
        # data-parallel size); with all-to-all dispatch a rank receives about its own
        # tokens' worth of routed copies (the group's, spread over its EP ranks)
        gathered = max(1.0, cfg.ep / cfg.tp) if cfg.moe_comm == "allgather" else 1.0
        width = shape.d_expert * shape.experts_per_token * gathered / max(1, cfg.tp // cfg.ep)
    else:
        width = shape.d_ffn / cfg.tp
    per_token_activations = (4 * shape.hidden + 3 * width) * 2.0
    logits_per_sequence = shape.vocab / cfg.tp * 4.0

    # a hybrid model's Mamba-2 blocks hold a fixed state per sequence, whatever its length
    state = _mamba_state_per_sequence(shape, cfg)
    cached_state = hybrid_state_bytes(shape, cfg.tp, cfg.ssm_state_bytes)

    def sizes(batch: Num, prompt: int) -> tuple[Num, Num]:
        kv = batch * (per_token * _positions_held(
            shape, prompt + out_tokens, cfg.window_kv_cache) + state) / cfg.pp
        if cfg.cached_prefix:
            # the prefix's attention KV held once, and a hybrid's Mamba state at its end
            # (what a hit starts from) once beside the running sequences' own
            kv = kv - maximum(batch - 1, 0) * min(cfg.cached_prefix, prompt) \
                * shared_per_token + cached_state / cfg.pp
        if static:
            # the batch's prompts (or chunks) in passes of up to max_num_tokens
            new = max(1, prompt - cfg.cached_prefix)
            chunk = cfg.chunk if 0 < cfg.chunk < new else new
            tokens = minimum(batch * chunk, cfg.max_num_tokens)
        else:
            # an in-flight batching engine reserves activations for a full pass of its token
            # budget before it sizes the KV cache: TensorRT-LLM profiles its peak memory with
            # dummy context requests of max_num_tokens (KvCacheCreator, one set per rank with
            # attention data-parallel), vLLM with a forward pass of max_num_batched_tokens
            tokens = cfg.max_num_tokens
        return kv, tokens * per_token_activations + batch * logits_per_sequence

    return sizes


def _memory(shape: TransformerShape, cfg: InferenceConfig, batch: Num,
            product: Product) -> dict[str, Num]:
    """Bytes per GPU by part for ``batch`` sequences of the configured lengths."""
    kv, activations = _kv_and_activation_bytes(shape, cfg, batch, cfg.input_len)
    weights = _weight_bytes(shape, cfg)
    if cfg.kv_cache_fraction:
        reserve = (1 - cfg.kv_cache_fraction) * maximum(
            0.0, product.memory_bytes - weights - activations)
    else:
        reserve = RESERVE_FRACTION * product.memory_bytes
    return {"weights": weights, "kv_cache": kv, "activations": activations,
            "other": reserve}


def memory_per_gpu(shape: TransformerShape, cfg: InferenceConfig, batch: int,
                   product: Product) -> dict[str, float]:
    """Bytes per GPU by part (weights, kv_cache, activations, other) for ``batch``
    sequences of the configured lengths."""
    return {k: float(v) for k, v in _memory(shape, cfg, batch, product).items()}


def _margin(shape: TransformerShape, cfg: InferenceConfig, product: Product
          ) -> Callable[[int, int], float]:
    """The memory margin of ``batch`` sequences with prompts of ``prompt`` tokens under the
    configuration's KV-cache memory policy, in bytes (the weights computed once): they fit
    when it is >= 0 (``a <= b`` exactly when ``b - a >= 0`` for finite floats). Falls as
    either grows, linearly but for the steps of windows, chunks and caps, which is what
    ``_largest`` searches by."""
    weights = _weight_bytes(shape, cfg)
    memory = product.memory_bytes
    sizes = _kv_and_activation_sizer(shape, cfg)

    def margin(batch: int, prompt: int) -> float:
        kv, activations = sizes(batch, prompt)
        if cfg.kv_cache_fraction:
            return float(cfg.kv_cache_fraction * (memory - weights - activations) - kv)
        return float(memory * (1 - RESERVE_FRACTION) - weights - (kv + activations))

    return margin


def max_batch_that_fits(shape: TransformerShape, cfg: InferenceConfig, product: Product
                        ) -> int:
    """The largest batch whose weights, KV cache, activations and reserve fit (0: none)."""
    return _max_batch(shape, cfg, product)


def engine_slots(shape: TransformerShape, cfg: InferenceConfig, product: Product) -> int:
    """Sequences a continuous-batching replica can hold: the largest batch that fits, or the
    engine's ``max_batch_size`` where that is smaller (0: none fits)."""
    limit = _max_batch(shape, cfg, product)
    return min(limit, cfg.max_batch_size) if cfg.max_batch_size else limit


MAX_CONTEXT_SEARCH = 2**24
"""Upper end of the search for the longest context that fits (16.8 M tokens); a model whose
every layer attends to a sliding window can hold any context, reported as no limit."""


def _largest(margin: Callable[[int], float], hi: int) -> int | None:
    """The largest n in [1, hi) with ``margin(n) >= 0`` (``margin`` falling as n grows): 0
    if not even 1 has, None if ``hi`` itself has (the search sets no limit). Found by false
    position on the margins (a straight margin is hit in one guess, then confirmed), with a
    halving step whenever a guess leaves more than half the bracket, so it never takes more
    than about twice the steps of plain bisection (a property test compares the two)."""
    m_lo = margin(1)
    if m_lo < 0:
        return 0
    m_hi = margin(hi)
    if m_hi >= 0:
        return None
    lo = 1
    while lo + 1 < hi:
        width = hi - lo
        guess = lo + int(m_lo / (m_lo - m_hi) * width)
        guess = min(max(guess, lo + 1), hi - 1)
        m = margin(guess)
        if m >= 0:
            lo, m_lo = guess, m
        else:
            hi, m_hi = guess, m
        if hi - lo > width // 2 and lo + 1 < hi:  # a poor guess: halve instead
            mid = (lo + hi) // 2
            m = margin(mid)
            if m >= 0:
                lo, m_lo = mid, m
            else:
                hi, m_hi = mid, m
    return lo


def max_context_that_fits(shape: TransformerShape, cfg: InferenceConfig, product: Product,
                          batch: int) -> int | None:
    """The longest context (prompt plus output tokens per sequence, the output length as
    configured) whose KV cache for ``batch`` sequences fits with the weights, activations and
    reserve; 0 if not even a one-token prompt fits, None if memory sets no limit (every
    layer attends to a sliding window)."""
    margin = _margin(shape, cfg, product)
    prompt = _largest(lambda p: margin(batch, p), MAX_CONTEXT_SEARCH)
    return prompt + cfg.output_len if prompt else prompt


def _max_batch(shape: TransformerShape, cfg: InferenceConfig, product: Product) -> int:
    margin = _margin(shape, cfg, product)
    batch = _largest(lambda b: margin(b, cfg.input_len), MAX_BATCH_SEARCH)
    return MAX_BATCH_SEARCH if batch is None else batch


@dataclass(frozen=True)
class InferenceCore:
    """The estimate's numbers for one batch or an array of batches (same formulas)."""

    batch: Num  # sequences decoded together (requested, capped at what fits when continuous)
    ttft: Num
    tpot: Num
    latency: Num
    per_replica: Num  # output tokens/s of one replica
    queue: Num
    prefill: _Phase
    step: _Phase
    memory_total: Num
    max_batch: int
    # prompts one prefill pass holds: a continuous batch's (its TTFT's pass), else the batch
    pass_prompts: Num = 1.0

    def decode_limiter(self) -> Num:
        """What bounds decode: one name, or an array of names."""
        return self.step.limiters() if np.ndim(self.step.total) else self.step.limiter()


def _evaluate(runner: _Runner, cfg: InferenceConfig, product: Product, max_batch: int,
              requested: Num, parts: dict[str, dict[str, float]] | None = None
              ) -> InferenceCore:
    """The model for ``requested`` sequences (a number or an array of them); with ``parts``
    (scalars only), the decode step's and the first-token prefill's seconds by kind are
    left under "decode" and "prefill"."""
    batch = requested
    stages = cfg.micro_batches
    if cfg.batching is Batching.CONTINUOUS and max_batch >= 1:
        batch = minimum(batch, max_batch)  # a serving engine admits only what fits
    if cfg.batching is Batching.CONTINUOUS and cfg.max_batch_size:
        # and no more than its cap, which bounds each micro-batch of a pipeline
        batch = minimum(batch, cfg.max_batch_size * stages)
    if cfg.batching is Batching.CONTINUOUS and cfg.num_requests:
        # an offline run of num_requests: a replica never holds more than its share, nor
        # has more than that in flight (a client's concurrency above the run's requests
        # sends them all at once and leaves nothing to queue)
        share = math.ceil(cfg.num_requests / cfg.replicas)
        batch = minimum(batch, share)
        requested = minimum(requested, share)
    mean_ctx = cfg.mean_decode_context
    runner.parts = {} if parts is not None else None
    # with pipeline stages the sequences in flight are split into one micro-batch per stage:
    # each step below is one micro-batch through every stage, and while it moves through
    # one stage the others run the other micro-batches (fewer sequences than stages leave
    # stages idle: a micro-batch holds at least one)
    lanes = _lanes(batch, stages)
    step = runner.decode_step(batch / lanes, mean_ctx)
    if parts is not None and runner.parts is not None:
        parts["decode"] = runner.parts
    runner.parts = None
    queue: Num = 0.0
    per_step = runner.tokens_per_step
    if cfg.batching is Batching.STATIC:
        # the prefill pass produces the first token; with pipeline stages the micro-batches'
        # passes follow each other through the stages, the last done after (micro-batches +
        # stages - 1) stage times of one micro-batch's pass
        runner.parts = {} if parts is not None else None
        pass_prompts = batch / lanes
        prefill = runner.prefill(pass_prompts)
        ttft = prefill.total * (lanes + cfg.pp - 1) / cfg.pp
        tpot = step.total / per_step
        latency = ttft + (cfg.output_len - 1) * tpot
        per_replica = batch * cfg.output_len / latency
    else:
        # every output_len / per_step steps, `batch` new prompts are prefilled between decode
        # steps (pipelined, the micro-batches' passes overlap across the stages): in passes
        # of the prompts that arrived during a step and the pass before it (a request
        # arrives every cycle / batch seconds), at least one and at most what a pass takes
        # and what is in flight; an offline run of num_requests has its prompts waiting
        # from the start and fills passes of whole budgets (estimate.simulate replays
        # both: tests/test_serving_simulation.py holds the two together)
        cycle, passes, pass_prompts = _prefill_cycle(runner, cfg, batch, lanes, step.total)
        tpot = cycle / cfg.output_len
        per_replica = batch * cfg.output_len / cycle
        if cfg.num_requests:
            per_replica = _offline_rate(runner, cfg, batch, cycle, mean_ctx, per_step,
                                        step.total)
        # a new prompt is prefilled in such a pass, after waiting for the pass in progress:
        # M/D/1 waiting time at the prefill load rho; passes start at decode-step boundaries
        runner.parts = {} if parts is not None else None
        prefill = runner.prefill(pass_prompts)
        service = prefill.total
        if cfg.schedule == "mixed":
            # mixed into the decode iteration, a prompt's pass also runs the running
            # sequences' step (none run beside a lone request), and so does the pass in
            # progress it waits for
            service = service + where(batch > 1, step.total, 0.0)
        rho = minimum(MAX_PREFILL_LOAD, passes / lanes / cycle)
        wait = rho / (2 * (1 - rho)) * service + step.total / 2
        ttft = service + wait
        latency = ttft + (cfg.output_len - 1) * tpot
        # more requests in flight than fit wait for a slot (Little's law: `batch` slots
        # each free up once per request latency)
        queue = where(requested > batch, (requested - batch) * latency / batch, 0.0)
        ttft = ttft + queue
        latency = latency + queue
    if parts is not None and runner.parts is not None:
        parts["prefill"] = runner.parts
    runner.parts = None
    memory_total = sum(_memory(runner.s, cfg, batch, product).values())
    return InferenceCore(batch, ttft, tpot, latency, per_replica, queue, prefill, step,
                         memory_total, max_batch, pass_prompts)


def _prefill_cycle(runner: _Runner, cfg: InferenceConfig, batch: Num, lanes: Num,
                   step_s: Num) -> tuple[Num, Num, Num]:
    """One continuous batch's answer cycle (``output_len`` tokens of decode steps and the
    prefill passes of ``batch`` new prompts), the seconds of those passes and the prompts
    one pass holds. Requests arrive every ``cycle / batch`` seconds, a pipeline's spread over
    its micro-batches (``lanes``), each admitting to its own slots, and passes start at step
    boundaries, so a stream's pass holds the prompts that arrived during the decode step and
    the pass before it (at least one, at most ``prompts_per_pass`` and ``batch``): small
    passes, each with its weight reads and fixed time, lengthen the cycle, and a longer pass
    gathers more prompts, so the pass and the cycle are found together, from whole-budget
    passes, in at most ``STREAM_PASS_ROUNDS`` rounds. An offline run of ``num_requests`` has
    every prompt waiting: answers of one length end together, in waves, and the waiting
    prompts go in whole budgets; answers of varying length (``output_len_cv``) free their
    slots one by one, and the waiting prompts go in as a stream's arrive."""
    decoding = cfg.output_len / runner.tokens_per_step * step_s
    passes = runner.prefill(batch).total
    cycle = decoding + passes / lanes
    most = minimum(batch, cfg.prompts_per_pass)
    # each micro-batch of a pipeline admits to its own slots, between its own steps
    prompts = maximum(1.0, minimum(ceil(batch / lanes / cycle * step_s), most))
    if cfg.num_requests and not cfg.output_len_cv:
        return cycle, passes, prompts
    before = prompts
    for round_ in range(STREAM_PASS_ROUNDS):
        one = runner.prefill(prompts).total
        passes = batch / prompts * one
        cycle = decoding + passes / lanes
        gathered = maximum(1.0, minimum(ceil(batch / lanes / cycle * (step_s + one)), most))
        moving = gathered != prompts
        # settled, or swinging back to the size before (the last round keeps the cycle of
        # the pass it costed)
        if not any_of(moving & (gathered != before)) or round_ == STREAM_PASS_ROUNDS - 1:
            break
        before, prompts = prompts, gathered
    return cycle, passes, prompts


def _lanes(batch: Num, micro_batches: int) -> Num:
    """Micro-batches that hold a sequence when ``batch`` sequences are split into up to
    ``micro_batches``: the stages working at once."""
    return minimum(micro_batches, maximum(batch, 1.0))


def _offline_rate(runner: _Runner, cfg: InferenceConfig, batch: Num, cycle: Num,
                  mean_ctx: float, per_step: float, step_s: Num) -> Num:
    """Output tokens/s of one replica over an offline run of ``cfg.num_requests`` (shared
    evenly by the replicas): fixed-length requests move through ``batch`` slots in waves,
    each lasting a steady-state cycle, and the last wave runs only the remainder, at the
    shorter cycle of its smaller batch; the run ends with the last request. Where the engine
    admits whole prompts within its token budget, the waves start staggered
    (``_staggered_offline_rate``). With answers that vary in length and the engine's cap on
    them (``output_len_cv``, ``max_output_len``) the run ends with a drain instead
    (``_drained_offline_rate``)."""
    share = cfg.num_requests / cfg.replicas
    if cfg.drains_offline:
        return _drained_offline_rate(runner, cfg, share, batch, cycle, mean_ctx, per_step)
    if np.ndim(batch):  # several batches at once: each on its own (the staggered start)
        return np.array([_offline_rate(runner, cfg, b, c, mean_ctx, per_step, s)
                         for b, c, s in np.broadcast(batch, cycle, step_s)])
    staggered = _staggered_offline_rate(runner, cfg, int(batch), share, mean_ctx, per_step)
    if staggered is not None:
        return staggered
    full = floor(share / batch)
    rest = ceil(share - full * batch)
    tail = maximum(rest, 1)
    lanes = _lanes(tail, cfg.micro_batches)
    tail_cycle = cfg.output_len / per_step * runner.decode_step(tail / lanes, mean_ctx).total \
        + runner.prefill(tail).total / lanes
    total = full * cycle + where(rest > 0, tail_cycle, 0.0)
    return share * cfg.output_len / total


def admission_starts(cfg: InferenceConfig, batch: int, answer_steps: float
                     ) -> np.ndarray | None:
    """The iteration (from 0) at which each of ``batch`` slots takes its first request when
    an offline run starts with every request waiting and the engine admits whole prompts
    within its token budget after the tokens of the sequences already running: TensorRT-LLM's
    micro-batch scheduler without chunked context schedules the generation requests first,
    then context requests while the batch's tokens plus the next prompt stay within
    max_num_tokens, and stops at the first that does not fit
    (``MicroBatchScheduler::operator()``, cpp/tensorrt_llm/batch_manager/
    microBatchScheduler.cpp; the PyTorch backend binds the same scheduler). A budget of
    2,048 tokens and prompts of 1,024 so admit two prompts in the first iteration and one in
    each after. None where this rule does not fill the batch before the first answers end
    (``answer_steps`` decode steps): with chunked prefill or pipeline stages (not modelled
    this way), where a prompt no longer fits beside the running sequences (trtllm-bench
    raises the budget to the longest prompt plus the batch when chunking is off,
    tensorrt_llm/bench/benchmark/utils/general.py, so its runs never stop there), or where
    admission outlasts an answer."""
    if cfg.chunk or cfg.micro_batches > 1:
        return None
    prompt = cfg.new_prompt_tokens
    per_seq = cfg.speculative_tokens + 1  # tokens a running sequence adds to an iteration
    starts: list[int] = []
    iteration = 0
    while len(starts) < batch:
        room = cfg.max_num_tokens - len(starts) * per_seq
        admitted = min(batch - len(starts), room // prompt)
        if admitted < 1 or iteration >= answer_steps:
            return None
        starts.extend([iteration] * admitted)
        iteration += 1
    return np.asarray(starts, dtype=float)


def _staggered_offline_rate(runner: _Runner, cfg: InferenceConfig, batch: int,
                            share: float, mean_ctx: float, per_step: float) -> float | None:
    """Output tokens/s of one replica over an offline run of ``share`` fixed-length requests
    whose first ``batch`` are admitted a few prompts an iteration (``admission_starts``);
    None where that rule does not apply. Each slot keeps the stagger it started with: its
    request holds it for an answer's decode steps, the next waiting request takes it as it
    frees (one for one), and once the queue is empty the slots go idle in the order they
    started. The run is so many stretches of a constant number of sequences in flight,
    each decode step priced at that number, plus every request's prefill at the steady
    cycle's cost. Admitting everything at once (a budget that holds every prompt) gives
    back the waves of ``_offline_rate``; a stagger of F iterations adds about F decode steps
    at the small batches of the start and the end, which matters where an answer is not
    much longer than the batch's admission: a share that fits in one batch of 1,024-token
    answers admitted one prompt an iteration runs about a third longer than all at once."""
    answer = cfg.output_len / per_step
    starts = admission_starts(cfg, batch, answer)
    if starts is None:
        return None
    waves = math.ceil(share / batch)
    rounds = np.full(batch, waves - 1.0)
    rounds[: math.ceil(share - (waves - 1) * batch)] += 1.0  # the last wave's slots
    events = np.concatenate([starts, starts + rounds * answer])
    change = np.concatenate([np.ones(batch), -np.ones(batch)])
    order = np.argsort(events, kind="stable")
    held = np.cumsum(change[order])[:-1]  # sequences in flight after each event
    length = np.diff(events[order])  # decode steps until the next event
    busy = (length > 0) & (held > 0)
    steps = runner.decode_step(held[busy], mean_ctx).total
    decode = float(np.sum(length[busy] * steps))
    prefill = share / batch * float(runner.prefill(batch).total)
    return share * cfg.output_len / (decode + prefill)


DRAIN_POINTS = 48
"""Slices of the answer lengths (0 to ``max_output_len``) a drain's steps are costed in:
narrow at the start, where most sequences are still running, wider towards the cap (the
k-th slice ends at cap x (k / DRAIN_POINTS)^2)."""

ANSWER_DRAWS = 65536
"""Answers drawn (a fixed seed: the same every estimate) for the shares of a batch still
decoding as a drain goes on."""


def gamma_lengths(rng: np.random.Generator, mean: float, cv: float, n: int) -> np.ndarray:
    """``n`` lengths drawn from the gamma distribution of this ``mean`` and spread ``cv``
    (standard deviation over mean: shape 1 / cv^2, scale mean x cv^2), unrounded: the one
    shape every varying prompt or answer length here is drawn with."""
    shape = 1.0 / cv ** 2
    return rng.gamma(shape, mean / shape, n)


@lru_cache(maxsize=64)
def drain_shares(mean: float, cv: float, longest: int, residual: bool
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The tokens in each of ``DRAIN_POINTS`` slices of 0 to ``longest`` and the share of a
    batch still decoding at the middle of each: answers of gamma-distributed length
    (``mean``, ``cv``; at least 1, at most ``longest``), either started together (whole
    answers, whose survival at k tokens is P(L > k)) or caught in flight when the queue
    empties (``residual``: a length-biased answer's remaining part, E[max(L - k, 0)] /
    E[L]). The tokens a sequence still generates are the sum of the slices' tokens times
    their shares."""
    answers = np.sort(np.clip(gamma_lengths(np.random.default_rng(0), mean, cv, ANSWER_DRAWS),
                              1.0, float(longest)))
    edges = longest * (np.arange(DRAIN_POINTS + 1) / DRAIN_POINTS) ** 2
    middles = (edges[1:] + edges[:-1]) / 2
    first = np.searchsorted(answers, middles, side="right")  # the first answer beyond k
    longer = ANSWER_DRAWS - first
    if residual:
        # the tokens beyond k of the answers longer than k, from the sorted answers' sums
        beyond = np.concatenate([np.cumsum(answers[::-1])[::-1], [0.0]])[first]
        shares = (beyond - middles * longer) / answers.sum()
    else:
        shares = longer / ANSWER_DRAWS
    return np.diff(edges), shares


def _drain_seconds(runner: _Runner, cfg: InferenceConfig, start: Num, mean_ctx: float,
                   per_step: float, residual: bool) -> tuple[Num, Num]:
    """Seconds for ``start`` sequences to drain (``drain_shares``: each slice of the
    answer lengths costs its steps at the decode step of the sequences still running, at
    least one, for as long as any of the ``start`` still runs in it: the chance 1 - (1 -
    s)^start that one of them outlives the slice, s its share) and the tokens they generate
    meanwhile."""
    widths, shares = drain_shares(float(cfg.output_len), float(cfg.output_len_cv),
                                  int(cfg.max_output_len), residual)
    # every slice's batch at once: (slices,) for one start, (starts, slices) for several;
    # a slice's steps run while any of the ``start`` sequences is still decoding
    running = maximum(np.multiply.outer(start, shares), 1.0)
    lanes = _lanes(running, cfg.micro_batches)
    steps = runner.decode_step(running / lanes, mean_ctx).total
    anyone = 1.0 - (1.0 - shares) ** np.expand_dims(start, -1)
    seconds = np.sum(widths * steps * anyone, axis=-1) / per_step
    return seconds, start * float(np.dot(widths, shares))


def _drained_offline_rate(runner: _Runner, cfg: InferenceConfig, share: float, batch: Num,
                          cycle: Num, mean_ctx: float, per_step: float) -> Num:
    """Output tokens/s of one replica over an offline run of ``share`` requests whose
    answers vary in length, at most ``cfg.max_output_len``. While requests wait, every slot
    is busy and the run goes at the steady cycle's rate. Once the last is admitted, the
    ``batch`` in flight drain, each with the rest of a length-biased answer left (the
    renewal residual), and the run lasts until the longest of them finishes (nearly the cap
    for a large batch, the expected remainder for one sequence): the drain's steps are
    costed at the batch still
    running as it thins (``_drain_seconds``), so a step whose weight reads or fixed costs do
    not shrink with the batch (a MoE layer touches every expert until few sequences are
    left) costs what it costs. A share within one batch starts together: its prefill, then
    the same drain over whole answers."""
    work = share * cfg.output_len
    drain_s, left = _drain_seconds(runner, cfg, batch, mean_ctx, per_step, residual=True)
    queued = maximum(0.0, work - left) * cycle / (batch * cfg.output_len) + drain_s
    lanes = _lanes(batch, cfg.micro_batches)
    alone_s, _ = _drain_seconds(runner, cfg, share, mean_ctx, per_step, residual=False)
    together = runner.prefill(batch).total / lanes + alone_s
    return work / where(share > batch, queued, together)


def _offline_run(cfg: InferenceConfig, batch: int, tpot: float, throughput: float
                 ) -> dict[str, Any]:
    """An offline run's length: its requests' output over the run's rate, and how much of it
    is beyond the steady state's rate (``batch`` / ``tpot`` a replica): the part-full last
    wave of fixed-length requests ("last wave"), the same with the waves' prompts admitted a
    few an iteration ("staggered"), or the drain of varying answers ("drain")."""
    tokens = cfg.num_requests * cfg.output_len
    run_s = tokens / throughput
    steady_s = tokens / (batch / tpot * cfg.replicas)
    ends = "drain" if cfg.drains_offline else "staggered" \
        if admission_starts(cfg, batch, cfg.output_len / cfg.tokens_per_step) is not None \
        else "last wave"
    return {"requests": cfg.num_requests, "run_s": run_s,
            "beyond_steady_s": max(0.0, run_s - steady_s), "ends_with": ends}


def _check_kv_cache(catalog: Catalog, product: Product, cfg: InferenceConfig) -> None:
    """Refuse a KV cache format no engine stores on ``product``: the caller resolves it
    first (``perf.kv_formats.kv_cache_run``, as the CLI and the advisor do), so that the
    memory sizing, the estimate and its stated reason agree."""
    run = kv_cache_run(catalog, product, cfg.quant.kv_cache)
    if run.format is not cfg.quant.kv_cache:
        raise GpuarchError(f"--kv-precision: {run.reason}; give "
                           f"{run.format.value} (perf.kv_formats.kv_cache_run resolves it)")


def _checked_runner(catalog: Catalog, shape: TransformerShape, product: Product,
                    cfg: InferenceConfig, system: System | None, efficiency: Efficiency
                    ) -> _Runner:
    """``cfg`` validated for ``shape`` (its KV cache format resolved for ``product``, a
    replica beyond a node given a system), and the runner that costs its passes."""
    cfg.validate(shape)
    _check_kv_cache(catalog, product, cfg)
    if cfg.tp * cfg.pp > cfg.gpus_per_node and system is None:
        raise GpuarchError(f"--tp/--pp: a replica of {cfg.tp * cfg.pp} GPUs spans nodes; "
                           "give --system with an inter-node network")
    return _Runner(catalog, shape, product, cfg, system, efficiency)


def evaluate_inference(catalog: Catalog, shape: TransformerShape, product: Product,
                       cfg: InferenceConfig, batches: Num, *, system: System | None = None,
                       efficiency: Efficiency = DEFAULT_EFFICIENCY) -> InferenceCore:
    """``estimate_inference``'s numbers for an array of batch sizes at once (``cfg.batch``
    is ignored); the advisor's search evaluates a whole batch axis per call."""
    runner = _checked_runner(catalog, shape, product, cfg, system, efficiency)
    return _evaluate(runner, cfg, product, _max_batch(shape, cfg, product),
                     np.asarray(batches))


@dataclass(frozen=True)
class PassTimes:
    """What one replica's passes take, as a request-level simulation replays them: a
    prefill pass of ``n`` prompts ``prefill_s[n - 1]`` (n up to ``prompts_per_pass``) and a
    decode step of ``b`` sequences at the mean decode context ``decode_s[b - 1]`` (b up to
    ``max_batch``, what fits and the engine's cap)."""

    prefill_s: np.ndarray
    decode_s: np.ndarray
    prompts_per_pass: int
    max_batch: int
    tokens_per_step: float
    # for prompts whose lengths vary: one prefill pass's token budget (max_num_tokens) and
    # the seconds of a pass of ``prefill_tokens`` new tokens in all (a grid to interpolate
    # on, ``prefill_for_tokens``); empty when every prompt has the configured length
    token_budget: int = 0
    prefill_tokens: np.ndarray = field(default_factory=lambda: np.empty(0))
    prefill_tokens_s: np.ndarray = field(default_factory=lambda: np.empty(0))

    def prefill_for_tokens(self, tokens: float) -> float:
        """Seconds of a prefill pass of ``tokens`` new prompt tokens in all (linear between
        the grid's points, which are geometrically spaced)."""
        if not self.prefill_tokens.size:
            raise ValueError("pass_times was built without a token grid (max_prompt_tokens)")
        return float(np.interp(tokens, self.prefill_tokens, self.prefill_tokens_s))


TOKEN_GRID_POINTS = 512
"""Points of the prefill-seconds-by-tokens grid, geometrically spaced from one token to the
longest pass (``pass_times(max_prompt_tokens=...)``), about 2% apart for a pass of 10,000
tokens, besides the passes of whole prompts of the configured length (exact there);
between points a pass's time is linear, which misses the teeth of wave quantization by a
few percent."""


def pass_times(catalog: Catalog, shape: TransformerShape, product: Product,
               cfg: InferenceConfig, *, system: System | None = None,
               efficiency: Efficiency = DEFAULT_EFFICIENCY,
               max_prompt_tokens: int = 0) -> PassTimes:
    """The estimate's own pass costs for ``cfg`` (continuous batching), for every pass size
    a replica can run: the prefill pass of up to ``max_num_tokens`` // new prompt tokens
    whole prompts (chunked as configured) and the decode step of up to the batch that fits
    (``max_batch_size`` where set). With ``max_prompt_tokens`` (the longest new prompt of
    prompts whose lengths vary), also a pass's seconds by its tokens, up to the larger of
    that and the budget (``_Runner.prefill_tokens``)."""
    runner = _checked_runner(catalog, shape, product, cfg, system, efficiency)
    limit = engine_slots(shape, cfg, product)
    prompts = np.arange(1, max(1, min(cfg.prompts_per_pass, limit)) + 1, dtype=float)
    batches = np.arange(1, max(1, limit) + 1, dtype=float)
    prefill = np.broadcast_to(runner.prefill(prompts).total, prompts.shape)
    decode = np.broadcast_to(runner.decode_step(batches, cfg.mean_decode_context).total,
                             batches.shape)
    grid = np.empty(0)
    grid_s = np.empty(0)
    if max_prompt_tokens:
        top = max(max_prompt_tokens, cfg.max_num_tokens)
        # geometric points, and the whole-prompt passes themselves (exact there)
        grid = np.unique(np.concatenate([np.round(np.geomspace(1, top, TOKEN_GRID_POINTS)),
                                         prompts * cfg.new_prompt_tokens]))
        grid_s = np.array(runner.prefill_tokens(grid), dtype=float)
    return PassTimes(np.array(prefill, dtype=float), np.array(decode, dtype=float),
                     len(prompts), limit, cfg.tokens_per_step, cfg.max_num_tokens, grid,
                     grid_s)


def _cpu_offload_note(cfg: InferenceConfig, runner: _Runner) -> str:
    """What the estimate takes for weights kept in host memory (``cpu_offload_gib``)."""
    head = (f"{cfg.cpu_offload_gib:g} GiB of each GPU's weights in host memory, copied to "
            "the GPU before the modules that hold them run, in every prefill pass and decode "
            "step (vLLM's --cpu-offload-gb)")
    if not runner.host_link:
        return head + ("; the GPU's link to its CPU has no catalogued rate, so the copies are "
                       "not counted")
    return (head + f": {from_si(runner.offload_s, Unit.MS):.3g} ms a pass per pipeline stage "
            f"at {from_si(runner.host_link, Unit.GB_S):.0f} GB/s (this GPU's share of its "
            "link to the CPU), not overlapped with the pass")


_REASONS = {
    "compute": "Tensor Core math dominates (large GEMMs); a faster or lower-precision "
               "Tensor Core rate shortens it",
    "memory": "reading weights and KV cache from DRAM dominates; quantizing weights/KV, more "
              "batch per weight read, or more bandwidth shortens it",
    "communication": "tensor-parallel all-reduces (latency-bound at small batch) dominate; "
                     "fewer GPUs per replica or NVLink shortens it",
    "communication:expert_parallel": "the expert-parallel token exchange (all-to-all, or "
                                     "all-gather and reduce-scatter) dominates; a smaller EP "
                                     "group, an all-to-all dispatch or a faster fabric "
                                     "shortens it",
    "communication:pipeline_p2p": "pipeline sends between stages dominate; fewer stages or "
                                  "a faster link shortens it",
    "communication:weight_offload": "copying the weights kept in host memory to the GPU "
                                    "every pass dominates; less offloaded (more GPUs, "
                                    "lower-precision weights) or a faster host link "
                                    "shortens it",
    "overhead": "fixed per-step framework and launch time dominates; larger batches amortise "
                "it",
    "host": "the executor's host work per request in flight and expert layer (a Python "
            "loop) sets the pace; fewer requests per replica, more replicas or a C++ "
            "executor shorten it",
    "eager_launch": "decode steps run without a CUDA graph wait on the host launching "
                    "every kernel; graphs that cover the context (vLLM before V1: "
                    "--max-seq-len-to-capture) or the batch shorten them",
    "dequant": "the mixed-input kernel's dequantization of a few rows' weights dominates "
               f"(slower than the memory delivers them); {SPREAD_ROWS} or more rows a step (a "
               "larger batch) or a format the Tensor Cores take as stored shortens it",
}


def _chunked_decode_hint(catalog: Catalog, shape: TransformerShape, product: Product,
                         cfg: InferenceConfig) -> str | None:
    """What TensorRT-LLM would do with a chunked-attention model's decode where the estimate
    reads every layer once a KV head: from 0.21 on a GPU before Blackwell its XQA kernel
    refuses the chunked layers, so they run on the multi-head kernel whenever the model's
    max_seq_len (the longest input plus output) is at least the chunk (DECODE_KV_READS);
    None where that does not arise."""
    if not shape.attention_chunked or cfg.decode_kv_reads != "shared" \
            or shape.n_kv_heads >= shape.heads:
        return None
    if (catalog.chip_of(product).sm.tensor_core_generation or 0) >= BLACKWELL_TENSOR_CORES:
        return None
    longest = cfg.input_len + max(cfg.output_len, cfg.max_output_len)
    if longest < shape.sliding_window:
        return None
    return (f"TensorRT-LLM 0.21 and later decode this model's chunked layers on its "
            f"multi-head kernel on this GPU at a max_seq_len of {longest:,} (at least the "
            f"{shape.sliding_window:,}-token chunk): --decode-kv-reads "
            "chunked-per-query-head prices that")


def estimate_inference(
    catalog: Catalog,
    shape: TransformerShape,
    product: Product,
    cfg: InferenceConfig,
    *,
    system: System | None = None,
    efficiency: Efficiency = DEFAULT_EFFICIENCY,
    measured: dict[str, str] | None = None,
    formats_origin: str | None = None,
    price_per_gpu_hour: float | None = None,
    facility: Facility = DEFAULT_FACILITY,
) -> InferenceEstimate:
    """Estimate serving ``shape`` on ``cfg.gpus`` x ``product`` (``formats_origin``: where
    the formats came from when not from the caller, e.g. the checkpoint's config.json;
    ``price_per_gpu_hour``: USD, for the cost per million output tokens; ``facility``: the
    node and data centre around the GPUs, for the energy per million)."""
    runner = _checked_runner(catalog, shape, product, cfg, system, efficiency)
    max_batch = _max_batch(shape, cfg, product)
    requested = cfg.batch if cfg.batch is not None else max(1, max_batch)
    if cfg.batch is None and cfg.max_batch_size:
        requested = min(requested, cfg.max_batch_size)
    phase_parts: dict[str, dict[str, float]] = {}
    core = _evaluate(runner, cfg, product, max_batch, requested, phase_parts)
    batch = int(core.batch)
    memory = {k: float(v) for k, v in _memory(shape, cfg, batch, product).items()}
    fits = sum(memory.values()) <= product.memory_bytes and max_batch >= 1
    ttft, tpot, latency = float(core.ttft), float(core.tpot), float(core.latency)
    per_replica, queue = float(core.per_replica), float(core.queue)
    prefill, step = core.prefill, core.step
    mean_ctx = cfg.mean_decode_context

    throughput = per_replica * cfg.replicas

    phases = {"prefill": prefill, "decode": step}
    bottleneck = {k: v.limiter() for k, v in phases.items()}
    rows = decode_rows(batch, cfg.micro_batches, cfg.speculative_tokens)
    dequant = mixed_input_dequant(product, cfg.quant, rows, runner.eff, runner.peak.dequantize)
    # the share of decode steps run eagerly, for the micro-batch the step ran (_evaluate)
    eager_share = float(runner.eager_share(batch / _lanes(batch, cfg.micro_batches)))
    def share(phase: str, v: _Phase) -> str:
        part = bottleneck[phase]
        if part == "host":  # the host's time is the whole step; the GPU's part is hidden
            host_ms, gpu_ms = (from_si(float(x), Unit.MS) for x in (v.total, v.total - v.host))
            return f"the host's {host_ms:.3g} ms per step outlast the GPU's {gpu_ms:.3g} ms"
        return f"{float(v.as_dict()[part] / v.total):.0%} of the {phase} time"

    def why(phase: str) -> str:
        part = bottleneck[phase]
        if part == "communication":  # name the exchange that takes most of it
            parts = phase_parts[phase]
            kind = max(("tensor_parallel", "expert_parallel", "pipeline_p2p",
                        "weight_offload"), key=lambda k: parts.get(k, 0.0))
            return _REASONS.get(f"communication:{kind}", _REASONS[part])
        if part == "host" and phase_parts[phase].get("eager_launch", 0.0) \
                > phase_parts[phase].get("host", 0.0):
            per_us = from_si(runner.eff.eager_decode_host_s_per_layer, Unit.US)
            return (f"{_REASONS['eager_launch']} ({per_us:.3g} us a layer; "
                    f"{eager_share:.0%} of the steps eager)")
        if part == "memory" and phase == "decode" and dequant and dequant["binds_in_decode"]:
            return _REASONS["dequant"]
        if part == "host":  # whose host, at what cost (host_time_x86_speedup)
            per_us = from_si(runner.host_s_per_request_layer, Unit.US)
            host = "a Grace" if runner.host_cpu == "grace" else "an x86"
            return f"{_REASONS[part]} ({host} host: {per_us:.2g} us a request and expert layer)"
        return _REASONS[part]

    reasons = {k: f"{share(k, v)}: {why(k)}" for k, v in phases.items()}
    assumptions: dict[str, Any] = {
        "gemm_peak_tflops": from_si(runner.peak.peak.flops, Unit.TFLOPS),
        "gemm_peak_source": f"{runner.peak.peak.key.value} ({runner.peak.peak.origin}, "
                            "catalog)",
        "weights_dequantized": runner.peak.dequantize,
        "precision_fallback": runner.peak.peak.fallback_reason,
        "formats": {"weights": cfg.quant.weights.value,
                    "activations": cfg.quant.activations.value,
                    "kv_cache": cfg.quant.kv_cache.value},
        "expert_formats": {
            "weights": cfg.expert_quant.weights.value,
            "activations": cfg.expert_quant.activations.value,
            "bytes_per_weight": cfg.expert_quant.weights.bytes,
            "gemm_peak_tflops": from_si(runner.expert_peak.peak.flops, Unit.TFLOPS),
            "weights_dequantized": runner.expert_peak.dequantize,
            "precision_fallback": runner.expert_peak.peak.fallback_reason}
        if shape.is_moe and cfg.expert_quant != cfg.quant else None,
        "formats_origin": formats_origin,
        "fp8_scaling": cfg.fp8_scaling
        if QuantFormat.FP8 in (cfg.quant.weights, cfg.expert_quant.weights) else None,
        "bytes_per_element": {"weights": cfg.quant.weights.bytes,
                              "embeddings_and_lm_head": max(cfg.quant.weights.bytes,
                                                            EMBEDDING_BYTES),
                              "kv_cache": cfg.quant.kv_cache.bytes},
        "kv_cache_fallback": cfg.kv_cache_fallback,
        "kv_bytes_per_token_per_gpu": kv_bytes_per_token(shape, cfg.quant.kv_cache.bytes,
                                                         cfg.tp) / cfg.pp,
        # a hybrid model's Mamba-2 convolution and recurrent state, held in the KV cache's
        # memory, per sequence whatever its length (0 without Mamba-2 blocks)
        "mamba_state_bytes_per_sequence_per_gpu": _mamba_state_per_sequence(shape, cfg)
        / cfg.pp,
        "ssm_state_precision": cfg.ssm_state_precision if shape.mamba is not None else None,
        # a hybrid model's recurrent mixer: "Mamba-2" or "Gated DeltaNet" (None without)
        "recurrent_mixer": shape.mamba.label if shape.mamba is not None else None,
        "batching": cfg.batching.value,
        # the batch as asked: a number, or "max" (the largest that fits)
        "batch_asked": "max" if cfg.batch is None else cfg.batch,
        # how new prompts meet the decode steps (continuous batching; SCHEDULES)
        "schedule": cfg.schedule if cfg.batching is Batching.CONTINUOUS else None,
        # what the batch that fits holds each sequence at (SCHEDULER_POLICIES)
        "scheduler_policy": cfg.scheduler_policy if cfg.batching is Batching.CONTINUOUS
        else None,
        "prefill_chunk_tokens": cfg.chunk,
        "replicas": cfg.replicas,
        "parallelism": {"tp": cfg.tp, "pp": cfg.pp, "ep": cfg.ep,
                        "expert_split_gpus": max(cfg.tp, cfg.ep) if shape.is_moe else 1,
                        "attention_data_parallel": shape.is_moe and cfg.exchanges_tokens,
                        "redundant_experts": cfg.redundant_experts or None,
                        "expert_slots": shape.experts + cfg.redundant_experts
                        if shape.is_moe else None,
                        "two_batch_overlap": cfg.two_batch_overlap},
        "reserve_fraction": RESERVE_FRACTION if not cfg.kv_cache_fraction else None,
        "kv_cache_fraction": cfg.kv_cache_fraction or None,
        "max_prefill_tokens_per_pass": cfg.max_num_tokens,
        # the prompts in a new request's prefill pass: a static batch's micro-batch; under
        # continuous batching those that arrive during a decode step and the pass before
        # it (the steady cycle is made of such passes, but for an offline run of
        # num_requests, whose cycle fills whole budgets)
        "prefill_pass_prompts": round(float(core.pass_prompts), 2),
        "max_batch_size": cfg.max_batch_size or None,
        "pipeline_micro_batches": cfg.micro_batches,
        "engine_limits": cfg.limits_source or None,
        "executor": cfg.executor,
        # a Python executor's host time per request in flight and expert layer, on this
        # GPU's host: measured on Grace, an x86 host's shorter (host_time_x86_speedup)
        "executor_host": {
            "cpu": runner.host_cpu, "s_per_request_expert_layer": runner.host_s_per_request_layer}
        if cfg.executor == "python" and shape.is_moe else None,
        "cuda_graph_padding": {
            "batch_sizes": sorted(cfg.cuda_graph_batch_sizes),
            "decode_rows": int(runner.graph_rows(int(core.batch)))}
        if cfg.cuda_graph_batch_sizes else None,
        # decode steps run without a captured graph (past cuda_graph_max_context, or more
        # sequences than the largest captured batch) wait on the host's launches
        "eager_decode": {
            "graph_max_context": cfg.cuda_graph_max_context or None,
            "share_of_steps": eager_share,
            "host_s_per_layer": efficiency.eager_decode_host_s_per_layer,
            "host_s_per_step": runner.eager_launch_s}
        if cfg.cuda_graph_max_context or cfg.cuda_graph_batch_sizes else None,
        # a mixed-input kernel's dequantization rate, the floor of its GEMMs of few rows
        # (roofline.mixed_input_floor), and whether it is slower than the weights' read in
        # this decode step
        "mixed_input_dequant": dequant,
        "window_kv_cache": cfg.window_kv_cache if shape.windowed_layers else None,
        "decode_kv_reads": cfg.decode_kv_reads
        if shape.mla is None and shape.n_kv_heads < shape.heads
        and (shape.attention_chunked or cfg.decode_kv_reads != "chunked-per-query-head")
        else None,
        # a chunked model's decode read once a KV head on a GPU whose TensorRT-LLM (0.21 and
        # later) would run its chunked layers on the multi-head kernel at this length
        "chunked_decode_on_trtllm": _chunked_decode_hint(catalog, shape, product, cfg),
        # latent attention in decode: the precision its math runs in (FP8 over an FP8 cache
        # on Blackwell unless fp8_mla_decode is off)
        "mla_decode_math": ("fp8" if runner.mla_decode_device is not runner.device
                            else "16-bit") if shape.mla is not None else None,
        "fp8_mla_decode": cfg.fp8_mla_decode if shape.mla is not None else None,
        "moe_comm": cfg.moe_comm if shape.is_moe and cfg.exchanges_tokens else None,
        "moe_exchange": _exchange_note(runner) if shape.is_moe and cfg.exchanges_tokens
        and cfg.moe_comm == "alltoall" else None,
        "moe_kernels": cfg.moe_kernels if shape.is_moe else None,
        "moe_gemm_kernel": cfg.moe_gemm_kernel if shape.is_moe else None,
        # the routed experts as DeepGEMM's grouped GEMMs (SGLang's wide-EP path on Hopper)
        "deepgemm_experts": True if runner.deepgemm else None,
        "moe_block_floor_s": runner.moe_floor if shape.is_moe else None,
        "moe_imbalance": cfg.moe_imbalance if shape.is_moe and cfg.ep > 1 else None,
        "tp_all_reduce": ("NVLink SHARP where faster" if runner.tp_group.intra.nvls_efficiency
                          and cfg.nvls else "ring or tree") if cfg.tp > 1 else None,
        "attention_dp_prefill": (f"waits for the busiest rank: per-rank work x"
                                 f"{runner.prefill_skew:.2f}")
        if runner.prefill_skew != 1.0 else None,
        "context_window": _context_note(shape, cfg),
        "num_requests": cfg.num_requests or None,
        "max_output_len": cfg.max_output_len or None,
        "offline_run": _offline_run(cfg, batch, tpot, throughput) if cfg.num_requests
        else None,
        "cached_prefix": cfg.cached_prefix or None,
        "cpu_offload": _cpu_offload_note(cfg, runner) if cfg.cpu_offload_gib else None,
        "hybrid_prefix_reuse": HYBRID_PREFIX_NOTE if shape.is_hybrid and cfg.cached_prefix
        else None,
        "context_attention": "fp8" if runner.context_device is not runner.device
        else "16-bit (--fp8-context-attention applies with FP8 or FP4 activations and an "
        "FP8 KV cache)" if cfg.fp8_context_attention else "16-bit",
        "speculative": {"draft_tokens": cfg.speculative_tokens,
                        "acceptance_length": cfg.acceptance_length,
                        "draft": ("the MTP block (an attention and an MLP or expert block) "
                                  "and the LM head per draft token" if shape.is_hybrid else
                                  "one target-shaped layer and the LM head per draft token")}
        if cfg.speculative_tokens else None,
        "efficiency": efficiency.as_dict(),
        "sibling_rates": sibling_notes(product.key, (
            ("gemm", runner.peak.peak.key), ("gemm", runner.expert_peak.peak.key),
            ("attention_forward", runner.device.attention_key),
            ("attention_forward", runner.context_device.attention_key)))
        if efficiency.sibling_rates else [],
        "efficiency_origin": "assumed defaults fitted to published measurements"
        if efficiency is DEFAULT_EFFICIENCY else "calibrated or overridden",
        "measured_parameters": measured or {},
        "mean_decode_context": mean_ctx,
        "output_len_cv": cfg.output_len_cv,
        "mean_output_in_flight": cfg.output_in_flight,
        "requests_in_flight": requested,
        "queueing_s": queue,
    }
    cost = serving_cost(product, cfg, throughput,
                        seconds_per_token_at_peak(count_params(shape).active(shape),
                                                  runner.peak.peak.flops),
                        price_per_gpu_hour, facility)
    return InferenceEstimate(
        model=shape.name, gpu=product.name, batch=batch, max_batch=max_batch,
        max_context=max_context_that_fits(shape, cfg, product, max(1, batch)),
        ttft_s=ttft, tpot_s=tpot, request_latency_s=latency,
        output_tokens_per_s=throughput, gpus=cfg.gpus, memory=memory,
        gpu_memory_bytes=product.memory_bytes, fits_in_memory=fits,
        bottleneck=bottleneck, bottleneck_reason=reasons,
        prefill_breakdown_s={k: float(v) for k, v in prefill.as_dict().items()},
        decode_step_breakdown_s={k: float(v) for k, v in step.as_dict().items()},
        prefill_parts_s={k: phase_parts["prefill"].get(k, 0.0) for k in OP_PARTS},
        decode_step_parts_s={k: phase_parts["decode"].get(k, 0.0) for k in OP_PARTS},
        cost=cost, assumptions=assumptions)


def serving_cost(product: Product, cfg: InferenceConfig, output_tokens_per_s: float,
                 seconds_per_token_at_peak: float, price_per_gpu_hour: float | None,
                 facility: Facility = DEFAULT_FACILITY) -> dict[str, Any]:
    """Energy and cost of a deployment's output, as the advisor prices its options: the
    GPUs' energy per million output tokens at the utilisation the prompt and output tokens
    they process imply (``energy.serving_energy_kwh``; None without a board power), and with
    ``price_per_gpu_hour`` the hourly cost and the cost per million output tokens."""
    seconds = 1e6 / output_tokens_per_s  # to produce a million output tokens
    processed = output_tokens_per_s * (1 + cfg.input_len / cfg.output_len)
    out: dict[str, Any] = {
        "kwh_per_million_output_tokens": serving_energy_kwh(
            product.tdp_w, cfg.gpus, processed, seconds_per_token_at_peak, seconds, facility)
        if product.tdp_w else None,
        "power_model": f"{GPU_POWER_MODEL} at the utilisation the processed tokens' 2 x "
                       f"active-parameter FLOPs give at the format's peak, "
                       f"{facility.describe()} (gpuarch.estimate.energy; measured serving "
                       "power beside it: gpuarch validate power)"}
    if price_per_gpu_hour is not None:
        per_hour = cfg.gpus * price_per_gpu_hour
        out.update(usd_per_gpu_hour=price_per_gpu_hour, usd_per_hour=per_hour,
                   usd_per_million_output_tokens=per_hour * from_si(seconds, Unit.HOUR))
    return out
