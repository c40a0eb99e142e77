"""The flags of `gpuarch estimate train` and `estimate infer` (and the model, engine, length
and simulation flags `advise`, `report` and the web forms share with them): argparse
registrations only; the commands themselves are in ``estimate_cmds``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuarch.cli.checkpointing import add_checkpoint_flags
from gpuarch.cli.options import (
    add_facility_flags,
    at_least_one,
    lazy_enum_value,
    name_list,
    non_negative,
    number_or_word,
    parse_quantity,
    positive_number,
    size_list,
)
from gpuarch.errors import GpuarchError
from gpuarch.report.launch import SERVING_ENGINES, TRAINING_ENGINES

MOE_IMBALANCE_BOUND = ("(at most EP x min(experts per token, experts per rank) / experts per "
                       "token)")
"""The largest --moe-imbalance a layout allows (TransformerShape.check_expert_parallel)."""

MODEL_OVERRIDES = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab",
              "experts", "experts_per_token", "shared_experts", "moe_ffn_hidden", "moe_latent",
              "dense_layers", "sliding_window", "sliding_layers")


def add_gpu_link(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu-link", metavar="pcie|pcieN",
                   help="the GPUs have no NVLink between them (PCIe cards without a bridge): "
                        "their collectives go over PCIe x16 at the card's generation, or at "
                        "slot generation N if lower (e.g. pcie4 for a Gen5 card in a Gen4 "
                        "slot); node size and network stay the system's")


def engine_flags(p: argparse.ArgumentParser) -> None:
    """The serving engine's properties, shared by estimate infer and advise infer."""
    p.add_argument("--executor", metavar="python|vllm|sglang|cpp",
                   help="the engine's executor loop: python (default: TensorRT-LLM's "
                        "PyTorch backend, 0.58 ms fixed a decode step, as NVIDIA measured "
                        "it) or vllm or sglang (those engines' loops, the default with "
                        "--engine vllm|sglang: 1.51 ms, fitted) spend host time per request "
                        "and expert layer each step, hidden behind the GPU's step until it "
                        "is longer (a dense model none); cpp (a C++ executor, e.g. "
                        "TensorRT-LLM's TensorRT engines: none modelled, 1.51 ms a step; the "
                        "default with --engine lmdeploy, whose TurboMind is one)")
    p.add_argument("--schedule", default="separate", metavar="separate|mixed",
                   help="continuous batching: new prompts prefilled in a pass of their own "
                        "between decode steps (separate, default; SGLang's default) or in "
                        "the same iteration as the running sequences' decode step (mixed: "
                        "TensorRT-LLM's in-flight batching, vLLM's V1 scheduler), which "
                        "adds that step to TTFT; --simulate replays the same schedule")
    p.add_argument("--scheduler-policy", default="guaranteed_no_evict",
                   metavar="guaranteed_no_evict|max_utilization",
                   help="continuous batching: admit a sequence while its whole prompt and "
                        "answer's KV cache fits (guaranteed_no_evict, TensorRT-LLM's default) "
                        "or while the tokens so far fit (max_utilization, as vLLM's paged "
                        "scheduler and NVIDIA's MLPerf runs): the batch that fits is then what "
                        "the running sequences' mean context fills")
    p.add_argument("--window-kv-cache", default="ring", metavar="ring|full",
                   help="a sliding-window layer's KV cache: ring (default: its window only, "
                        "as vLLM and SGLang keep it) or full (every position, as "
                        "TensorRT-LLM allocates unless KvCacheConfig.max_attention_window "
                        "lists the windows)")
    p.add_argument("--mla-cache", metavar="tensor|flashmla",
                   help="a sparse-attention model's latent in an FP8 cache (DeepSeek-V3.2, "
                        "GLM-5): tensor (576 bytes a position and layer under one scale, as "
                        "TensorRT-LLM keeps it) or flashmla (656: FP32 scales per 128 "
                        "channels and the rotary key in BF16, FlashMLA's layout, which vLLM "
                        "and SGLang keep; default: the named engine's, --engine or --launch "
                        "vllm|sglang, else tensor)")
    p.add_argument("--no-fp8-mla-decode", action="store_true",
                   help="latent attention (DeepSeek's MLA) in decode over an FP8 cache on "
                        "Blackwell computes in 16 bits, as TensorRT-LLM 1.0.0rc6's generation "
                        "kernel ran in NVIDIA aiconfigurator's tables (default: in FP8, as "
                        "its 1.2 and 1.3 kernels run)")
    p.add_argument("--decode-kv-reads", default="shared",
                   metavar="shared|per-query-head|chunked-per-query-head",
                   help="how decode attention reads a grouped-query model's KV cache: "
                        "shared (default: each KV head once a step for its query heads, as "
                        "GQA-aware kernels such as TensorRT-LLM's XQA and FlashInfer do), "
                        "per-query-head (once for every query head, as a multi-head kernel "
                        "does, the repeats from L2: TensorRT-LLM before v0.7, and up to 0.10 "
                        "for groups other than 8 query heads per KV head) or "
                        "chunked-per-query-head (only the chunked-attention layers so: "
                        "TensorRT-LLM 0.21 and later on Hopper, whose XQA refuses Llama 4's "
                        "chunked layers when max_seq_len is at least the chunk)")
    p.add_argument("--moe-comm", default="alltoall", metavar="alltoall|allgather",
                   help="expert dispatch when EP exceeds TP (data-parallel attention): "
                        "alltoall (default: each token to its top-k experts' GPUs and back, "
                        "as DeepEP or TensorRT-LLM on GB200 NVL72) or allgather (every GPU "
                        "gathers all ranks' tokens, outputs reduce-scattered: TensorRT-LLM "
                        "without multi-node NVLink)")
    p.add_argument("--moe-kernels",
                   metavar="trtllm|vllm|sglang|sglang-deepep|trtllm-gen",
                   help="whose fused MoE kernels set an expert layer's fixed time per pass: "
                        "trtllm (TensorRT-LLM's, 26.6 us, 45 us on Blackwell, as its "
                        "measured layers put them), vllm or sglang (26.6 us on Hopper and "
                        "Blackwell alike); sglang-deepep: SGLang's wide-EP path (DeepEP), "
                        "whose block-scaled FP8 experts on Hopper run as DeepGEMM's grouped "
                        "GEMMs at their published rate; trtllm-gen: TensorRT-LLM's TRTLLM MoE "
                        "backend, the TRT-LLM-Gen kernels, 17 us on Blackwell "
                        "(default: the named engine's, --engine or --launch vllm|sglang, "
                        "else trtllm)")
    p.add_argument("--moe-gemm-kernel", default="native", metavar="native|ampere",
                   help="the routed experts' grouped GEMM kernels: native (default: the "
                        "GPU's own) or ampere (written for Ampere's synchronous Tensor Core "
                        "instructions, as TensorRT-LLM before 0.10 ran 16-bit experts on "
                        "Hopper: on Hopper and datacenter Blackwell 0.73 of the native "
                        "rate)")
    p.add_argument("--moe-imbalance", type=float, default=1.0, metavar="X",
                   help="routed tokens on the busiest expert-parallel rank over the mean "
                        "(default 1: balanced): its expert GEMMs, permutation and "
                        "all-to-alls carry X times the mean tokens, and the step waits for it "
                        + MOE_IMBALANCE_BOUND)
    p.add_argument("--redundant-experts", type=int, default=0, metavar="N",
                   help="redundant copies of busy experts spread over the EP ranks (EPLB: "
                        "SGLang's --ep-num-redundant-experts; default 0): experts + N slots, "
                        "which --ep must divide (DeepSeek-V3's 256 + 32 allow EP 72); each "
                        "GPU holds the weights of its share of the slots")
    p.add_argument("--two-batch-overlap", action="store_true",
                   help="run each expert layer as two micro-batches, one's all-to-all under "
                        "the other's computation (SGLang's --enable-two-batch-overlap); "
                        "needs --ep > 1 and --moe-comm alltoall")
    p.add_argument("--cached-prefix", type=int, default=0, metavar="N",
                   help="prompt tokens every request shares with one already in the KV "
                        "cache (a system prompt under prefix caching): not prefilled, their "
                        "KV cache held once per replica (default 0)")
    p.add_argument("--cpu-offload-gb", type=float, default=0.0, metavar="GIB",
                   help="GiB of each GPU's weights kept in host memory and copied over the "
                        "GPU's link to its CPU for every forward pass (vLLM's "
                        "--cpu-offload-gb; default 0)")
    p.add_argument("--output-len-cv", type=float, default=0.0, metavar="CV",
                   help="spread of the requests' output lengths (standard deviation over "
                        "mean, e.g. 1.25 for DeepSeek-R1's reasoning answers in MLPerf); "
                        "long requests stay in flight longer, so the batch holds more "
                        "context than --output-len suggests; in-flight batching only; "
                        "default 0: every request generates --output-len tokens")
    p.add_argument("--all-reduce", metavar="trtllm|vllm|sglang|nccl",
                   help="whose kernels run the tensor-parallel all-reduce inside one NVLink "
                        "node: an engine's own one-shot kernel (2.5-7.5 us for a small "
                        "buffer, by engine and GPU generation, as NVIDIA's aiconfigurator "
                        "measured them; NCCL for large buffers) or nccl alone (vLLM's and "
                        "SGLang's --disable-custom-all-reduce); default: the named engine's, "
                        "--engine or --launch vllm|sglang, else trtllm")
    p.add_argument("--no-nvls", action="store_true",
                   help="tensor-parallel all-reduces as rings and trees only (NCCL with "
                        "NCCL_NVLS_ENABLE=0); by default an all-reduce inside an NVSwitch "
                        "node of Hopper or Blackwell GPUs runs as NVLink SHARP where NCCL's "
                        "tuner finds that faster")
    p.add_argument("--adp-balance", action="store_true",
                   help="with data-parallel attention (EP above TP) and continuous batching, "
                        "the engine holds context requests back so the ranks prefill together "
                        "(TensorRT-LLM's attention_dp_config enable_balance); by default each "
                        "rank schedules its own and a prefill pass waits for the busiest")
    p.add_argument("--fp8-context-attention", action="store_true",
                   help="prefill attention at the FP8 Tensor Core rate (TensorRT-LLM's FP8 "
                        "context FMHA, on when an FP8 or NVFP4 checkpoint's attention output "
                        "is quantized and the KV cache is FP8); default: the 16-bit rate")
    p.add_argument("--ssm-state-precision", metavar="fp32|bf16|fp16",
                   help="a hybrid model's recurrent (Mamba or linear-attention) state "
                        "between steps: fp32, bf16 or fp16 (default: what the named engine, "
                        "--engine or --launch, keeps for the model: vLLM and TensorRT-LLM the "
                        "model's 16 bits unless its config.json asks for FP32 (Nemotron-H, "
                        "Qwen3.5 in vLLM), SGLang FP32; Kimi Delta Attention FP32 in all; "
                        "with no engine named fp32, lightning attention's 16 bits)")
    p.add_argument("--fp8-scaling", metavar="tensor|block",
                   help="how FP8 weights carry their scales: 'tensor' (one per tensor or "
                        "channel, NVIDIA ModelOpt's FP8 checkpoints) or 'block' (128 x 128 "
                        "weight blocks, DeepSeek-V3's own checkpoints; a fine-grained MoE's "
                        "block-scaled experts run slower, as TensorRT-LLM's measured layers "
                        "do); default: what the checkpoint declares, else 'tensor'")
    p.add_argument("--cuda-graph-batch-sizes", type=size_list("--cuda-graph-batch-sizes"),
                   default=(), metavar="LIST",
                   help="batch sizes the engine captures CUDA graphs at with padding on "
                        "(TensorRT-LLM's cuda_graph_config batch_sizes + enable_padding, e.g. "
                        "1,2,4,8,16,32,64,128,256,384,512,1024,2048,4096,8192): a decode step "
                        "runs the GEMMs and experts for the next size up; default: no padding")
    p.add_argument("--cuda-graph-max-context", type=int, default=0, metavar="N",
                   help="the longest context a captured CUDA graph covers: decode steps "
                        "with a sequence beyond it run eagerly, waiting on the host to "
                        "launch every kernel (vLLM before V1, 0.7 and earlier: "
                        "--max-seq-len-to-capture, 8192 by default); default: graphs cover "
                        "every context (TensorRT-LLM, vLLM V1, SGLang)")


def gpu_counts(text: str) -> int | tuple[int, ...]:
    """--gpus for training: a count, or a comma-separated list of them (a scaling table)."""
    values = []
    for item in text.split(","):
        try:
            value = int(item.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"--gpus: expected a number or a comma-separated "
                                             f"list of them, got {item.strip()!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"--gpus: expected >= 1, got {value}")
        values.append(value)
    return values[0] if len(values) == 1 and "," not in text else tuple(values)


TRAINING_LAUNCH = TRAINING_ENGINES
SERVING_LAUNCH = SERVING_ENGINES
"""--launch's engines: report.launch's (a light module, no NumPy on --help)."""


def engine_choice(flag: str, choices: tuple[str, ...]) -> Callable[[str], str]:
    """An argparse type: one of ``choices``, else an error naming ``flag``, the choices and
    the nearest."""
    from gpuarch.errors import suggestion

    def parse(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(f"{flag}: expected one of {', '.join(choices)}, "
                                             f"got {text!r}{suggestion(text, choices)}")
        return text

    return parse


NO_BATCH = 0
"""--batch's value when it is not given (``max`` parses to None)."""

SWEEP = 0
"""In a --batch list, 'sweep': powers of two up to the largest batch that fits, then it
(``estimate.sweep.sweep_values``)."""


def batch_size(text: str) -> int | tuple[int | None, ...] | None:
    """One batch (a number, or None for 'max'), or a tuple of them for a sweep: a
    comma-separated list, 'sweep' (``SWEEP``) standing for powers of two up to 'max'."""
    if "," not in text and text != "sweep":
        return _one_batch(text)
    return tuple(SWEEP if item.strip() == "sweep" else _one_batch(item.strip())
                 for item in text.split(","))


def _one_batch(text: str) -> int | None:
    if text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--batch: expected a number, 'max', 'sweep' or a "
                                         f"comma-separated list of them, got "
                                         f"{text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--batch: expected >= 1, got {value}")
    return value


def lengths_flag(args: argparse.Namespace) -> tuple[Any, float]:
    """--lengths FILE read (``estimate.simulate.RequestLengths``, or None without it), and
    the answers' spread the steady state takes: the file's, where it gives answers, else
    --output-len-cv."""
    if args.lengths is None:
        return None, args.output_len_cv
    from gpuarch.estimate.simulate import read_lengths

    lengths = read_lengths(args.lengths)
    if lengths.output is None:
        return lengths, args.output_len_cv
    if args.output_len_cv:
        raise GpuarchError("--output-len-cv: the answers' lengths come from --lengths; "
                           "leave it out")
    # the steady state's requests in flight as the file's answers spread
    return lengths, float(lengths.output.std() / lengths.output.mean())


def simulation_flags(p: argparse.ArgumentParser) -> None:
    """--seed, --input-len-cv, --arrivals and --lengths, which shape a --simulate replay
    (estimate infer's and advise infer's alike)."""
    p.add_argument("--seed", type=non_negative("--seed"), metavar="S",
                   help="with --simulate: the random stream's seed (default 0)")
    p.add_argument("--input-len-cv", type=float, metavar="CV",
                   help="with --simulate: prompts vary in length around --input-len, a gamma "
                        "spread of this standard deviation over mean (the uncached tokens "
                        "with --cached-prefix); a prefill pass then takes waiting prompts "
                        "while their tokens fit --max-num-tokens (default 0: one length)")
    p.add_argument("--arrivals", metavar="poisson|uniform|trace",
                   help="with --simulate: a Poisson stream (default), evenly spaced "
                        "arrivals (the steady state's view), or --lengths' arrival_s column "
                        "in order, its times scaled so that it arrives at --rate (trace)")
    p.add_argument("--lengths", metavar="FILE",
                   help="with --simulate: a CSV of requests (a header naming input_len, "
                        "output_len and/or arrival_s, then one request a row, e.g. from a "
                        "service's log); each simulated request takes a row at random (in "
                        "order with --arrivals trace), its means within 5%% of --input-len "
                        "and --output-len (the answers' spread then sets the steady state's "
                        "--output-len-cv)")


def model_flags(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """--model and the shape overrides (required unless ``default``)."""
    p.add_argument("--model", required=default is None, default=default,
                   help="a preset (llama-3.1-70b, gpt3-175b, mixtral-8x7b, ...) or a local "
                   "Hugging Face config.json" + (f" (default {default})" if default else ""))
    for name in MODEL_OVERRIDES:
        p.add_argument(f"--{name.replace('_', '-')}", type=int, dest=name,
                       help="override the model's " + name.replace("_", " ")
                       + (" (its window layers' where its full layers have heads of their "
                          "own: Gemma 4, MiMo-V2-Flash)" if name in ("kv_heads", "head_dim")
                          else ""))
    p.add_argument("--ffn-kind", type=lazy_enum_value("gpuarch.workloads.shape:FfnKind",
                                                      "--ffn-kind"),
                   help="two matrices: gelu, relu, relu2 (squared ReLU) or xielu; gated, "
                        "three: swiglu, geglu or relu2_glu (BitNet's)")
    p.add_argument("--qk-norm", type=lazy_enum_value("gpuarch.workloads.shape:QkNorm",
                                                     "--qk-norm"),
                   help="query-key norms: none, head (each head's, Qwen3 and Gemma 3) or "
                        "full (the whole projection's, OLMo 2)")
    p.add_argument("--sandwich-norms", action=argparse.BooleanOptionalAction, default=None,
                   help="norms after the attention and MLP too, four a layer (Gemma 2 and "
                        "3); --no-sandwich-norms for two")
    p.add_argument("--attention-chunked", action=argparse.BooleanOptionalAction, default=None,
                   help="the window layers attend within fixed chunks of --sliding-window "
                        "positions (Llama 4), not to the last ones; --no-attention-chunked "
                        "for a sliding window")


def add_train_parser(est_sub: argparse._SubParsersAction[argparse.ArgumentParser],
                     common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Register `estimate train` and its flags; the caller sets its handler."""
    p = est_sub.add_parser("train", parents=[common],
                           help="one training step: time, memory, MFU, bottleneck")
    model_flags(p)
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--global-batch", type=int, required=True, help="sequences per step")
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--gpu", help="GPU name (default: the system's GPU); a comma-separated "
                                 "list (e.g. h100,h200,b200) compares the same run on each, "
                                 "one row a GPU")
    p.add_argument("--gpus", type=gpu_counts, required=True,
                   help="GPUs in all; a comma-separated list (e.g. 64,128,256,512) gives a "
                        "scaling table: the layout and global batch kept, data parallelism "
                        "growing")
    p.add_argument("--plot", type=Path, metavar="FILE",
                   help="with a --gpus list: draw tokens/s against GPUs beside the ideal "
                        "line, to .png or .svg")
    p.add_argument("--gpus-per-node", type=int,
                   help="GPUs that share one NVLink domain; beyond it traffic takes the "
                        "network (default: the system's, else the GPU's reference "
                        "system's, else 8; on a GB200/GB300 NVL72 rack, 4 prices its "
                        "compute trays talking over InfiniBand, as when multi-node NVLink "
                        "is not set up)")
    p.add_argument("--system", help="reference system (see 'gpuarch systems')")
    add_gpu_link(p)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--cp", type=int, default=1)
    p.add_argument("--ep", type=int, default=1)
    p.add_argument("--etp", type=int, default=0,
                   help="expert tensor parallelism: GPUs each expert's width is split over "
                        "(default: --tp; 1 lays the expert group over the TP ranks too, as "
                        "Megatron's --expert-tensor-parallel-size 1)")
    p.add_argument("--vpp", type=int, default=1, help="interleaved virtual stages per GPU")
    p.add_argument("--sequence-parallel", action="store_true")
    p.add_argument("--tp-comm-overlap", action="store_true",
                   help="overlap tensor-parallel communication with GEMMs")
    p.add_argument("--zero", type=int,
                   help="ZeRO / distributed-optimizer stage (default 1, Megatron's "
                        "distributed optimizer; 3 with --framework fsdp or maxtext, which "
                        "shard everything)")
    p.add_argument("--dp-shard", type=int, default=0, metavar="N",
                   help="hybrid sharding (FSDP's HSDP, Megatron's --num-distributed-optimizer-"
                        "instances): ZeRO shards over groups of N data-parallel ranks, e.g. a "
                        "node's, and the groups' gradient shards are all-reduced across them "
                        "(default: shard over all DP x CP ranks)")
    p.add_argument("--outer-optimizer-sharding", action="store_true",
                   help="with --dp-shard and --zero 3: the optimizer state sharded over all "
                        "DP x CP ranks, weights and gradients over the group (Megatron-FSDP's "
                        "Hybrid-FSDP, --outer-dp-sharding-strategy optim)")
    p.add_argument("--fsdp-prefetch", action="store_true",
                   help="with --zero 3: parameters gathered a layer ahead and overlapped with "
                        "compute (Megatron-FSDP); without it a fixed share of the ZeRO-3 "
                        "traffic is exposed")
    p.add_argument("--no-reshard-after-forward", dest="reshard_after_forward",
                   action="store_false",
                   help="with --zero 3: each layer's gathered parameters kept from its forward "
                        "to its backward (PyTorch FSDP2's reshard_after_forward=False): one "
                        "all-gather a micro-batch instead of two, the weights held whole")
    p.add_argument("--pp-edge-layers", action="store_true",
                   help="the first and last pipeline stages hold one layer fewer, counting the "
                        "embedding and the loss as a layer each (Megatron's account_for_"
                        "embedding/loss_in_pipeline_split)")
    p.add_argument("--pp-layout", default="", metavar="LAYOUT",
                   help="what each virtual pipeline stage holds, in Megatron's notation "
                        "(--pipeline-model-parallel-layout): E embedding, t layer, m MTP "
                        "block, L loss, | between stages, X*n and (...)*n repeat; e.g. "
                        "'Et*4|(t*4|)*14tmL' for DeepSeek-V3 at PP 4 x VPP 4; for a hybrid "
                        "model, its block pattern cut by | into the stages (newer "
                        "Megatron's --hybrid-layer-pattern)")
    p.add_argument("--pp-schedule", default="1f1b", metavar="1f1b|zb1p|dualpipe|dualpipev",
                   help="pipeline schedule (default 1f1b, interleaved with --vpp > 1; "
                        "zb1p: zero-bubble ZB-H1, weight gradients deferred into the "
                        "bubble; dualpipe: DeepSeek's "
                        "bidirectional schedule, two copies of the weights, even --pp, at "
                        "least 2 x PP micro-batches; dualpipev: its V-shaped half, --vpp 2)")
    p.add_argument("--mtp-layers", type=non_negative("--mtp-layers"), default=0, metavar="N",
                   help="multi-token-prediction blocks trained with the model (Megatron "
                        "--mtp-num-layers; DeepSeek-V3 uses 1): each a layer, a projection "
                        "and a pass through the shared head, on the last stage unless "
                        "--pp-layout places it")
    p.add_argument("--mtp-shared-weights", action="store_true",
                   help="the MTP depths run one block whose weights they share (Megatron "
                        "--mtp-use-repeated-layer; Nemotron 3 Super trains two depths so)")
    p.add_argument("--moe-token-drop", action="store_true",
                   help="MoE routing with a capacity bound (overflow tokens dropped), the "
                        "experts' inputs padded to it (Megatron's drop-and-pad): no "
                        "per-layer host wait of the dropless dispatcher (dropping without "
                        "the padding still waits: leave this off)")
    p.add_argument("--dispatcher-wait-us", type=float, default=None, metavar="US",
                   help="the dropless MoE dispatcher's host wait per expert layer and forward "
                        "pass, when your framework's is measured (default: Megatron-Core's, "
                        "fitted: 4 ms on a PCIe-attached host, 1.5 ms over NVLink-C2C)")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="partial CUDA graphs over attention and the MoE router and "
                        "preprocessing (Megatron cuda_graph_impl transformer_engine): no "
                        "per-layer host wait of the dropless dispatcher (nothing else is "
                        "modelled: on a dense model the estimate is unchanged and says so)")
    p.add_argument("--cuda-graph-scope", type=name_list, default=(), metavar="M,M",
                   help="instead of --cuda-graphs, the modules graphed, comma-separated "
                        "(Megatron --cuda-graph-scope): attn, mamba, mlp, moe, moe_router, "
                        "moe_preprocess, full_iteration; the dropless dispatcher's host wait "
                        "is charged to the expert layers whose preceding block is not graphed "
                        "(e.g. mamba alone on a hybrid model: those after attention)")
    p.add_argument("--cp-comm-type", default="p2p", metavar="p2p|all_gather|a2a",
                   help="how context-parallel ranks exchange attention inputs (Megatron "
                        "--cp-comm-type): p2p (default: a ring of key/value chunks, largely "
                        "hidden behind the attention), all_gather (keys and values gathered "
                        "before the attention, not hidden) or a2a (all-to-alls of queries, "
                        "keys, values and output, not hidden; heads must divide over CP)")
    p.add_argument("--ep-dispatcher", default="alltoall", metavar="alltoall|deepep",
                   help="MoE token dispatcher: alltoall (default: every routed copy of a "
                        "token sent on its own) or deepep (DeepEP/HybridEP: a token crosses "
                        "the network once per destination node and NVLink once per "
                        "destination GPU)")
    p.add_argument("--expert-launches", default="per-expert",
                   metavar="per-expert|grouped|fused-mlp",
                   help="how the expert GEMMs are launched: per-expert (default: one GEMM "
                        "and, in FP8/FP4, one quantization per local expert, Transformer "
                        "Engine's multi-stream cuBLASLt), grouped (one grouped kernel for "
                        "all of a GPU's experts) or fused-mlp (a fused grouped MLP: the "
                        "activation and the down projection's input quantization done in the "
                        "up projection's epilogue): the host's launches are a floor on the "
                        "expert section")
    p.add_argument("--moe-imbalance", type=number_or_word("--moe-imbalance", "unbalanced"),
                   default=1.0, metavar="X|unbalanced",
                   help="routed tokens on the busiest expert-parallel rank over the mean "
                        "(default 1: balanced, as force-balanced benchmark runs route); its "
                        "expert section and all-to-alls set every rank's pace "
                        + MOE_IMBALANCE_BOUND + "; 'unbalanced': routing that nothing "
                        "balances (no load-balancing loss, expert bias or capacity), the "
                        "model's moe_unbalanced_load, fitted on MLPerf v6.0's GPT-OSS-20B "
                        "runs (listed under the estimate's assumptions)")
    p.add_argument("--ep-comm-overlap", action="store_true",
                   help="overlap the expert all-to-alls with another micro-batch's compute "
                        "(Megatron --overlap-moe-expert-parallel-comm); only what exceeds "
                        "that compute is exposed. Megatron-Core's conditions: --ep > 1, no "
                        "full recomputation, at most one MTP depth, --vpp > 1 with --pp > 1")
    p.add_argument("--no-pp-comm-overlap", dest="pp_comm_overlap", action="store_false",
                   help="an interleaved pipeline (--vpp > 1) waits on its sends between "
                        "chunks (Megatron --no-overlap-p2p-communication, or a Megatron "
                        "before 2024 without --overlap-p2p-communication); non-interleaved "
                        "1F1B always waits on them")
    p.add_argument("--attention-kernel", default="native", metavar="native|ampere|triton",
                   help="fused attention kernel: native (default: the GPU's own, e.g. "
                        "FlashAttention-3 or cuDNN on Hopper), ampere (FlashAttention-2, "
                        "written for Ampere: on Hopper and datacenter Blackwell it keeps 0.47 "
                        "of the native speed) or triton (2023's Triton flash attention: 1/1.3 "
                        "of ampere's)")
    p.add_argument("--bf16-layers-at-start", type=int, default=0, metavar="N",
                   help="with --precision fp8 or nvfp4: the model's first N layers (a hybrid's "
                        "blocks) run in BF16, weights and all (Megatron's "
                        "--first-last-layers-bf16 --num-layers-at-start-in-bf16); each "
                        "pipeline rank is costed with its own (default 0)")
    p.add_argument("--bf16-layers-at-end", type=int, default=0, metavar="N",
                   help="with --precision fp8 or nvfp4: the model's last N layers run in BF16 "
                        "(--num-layers-at-end-in-bf16; low-precision runs keep a few so for "
                        "stability, e.g. Nemotron 3 Super's release test its last 14) "
                        "(default 0)")
    p.add_argument("--mtp-bf16", action="store_true",
                   help="with --mtp-layers and --precision fp8 or nvfp4: the MTP blocks run "
                        "in BF16, weights and all (Megatron Bridge's keep_mtp_spec_in_bf16, "
                        "which its Nemotron 3 Super recipes set)")
    p.add_argument("--fp8-attention", action="store_true",
                   help="with --precision fp8 or nvfp4: fused attention in FP8 too, forward "
                        "and backward (Transformer Engine's FP8 dot-product attention); "
                        "on Blackwell at cuDNN's measured FP8 speedup of each training pass "
                        "(0.9-1.9x by head size and span), elsewhere at FP8 prompt "
                        "attention's, 1.39x the 16-bit kernel's on Hopper")
    p.add_argument("--fp8-recipe", default="tensor", metavar="tensor|mxfp8",
                   help="with --precision fp8: how the GEMM operands are scaled: tensor "
                        "(default; one scale per tensor, delayed or current scaling) or "
                        "mxfp8 (one per 32 elements); MXFP8, NVFP4 and any FP8 on Hopper cast "
                        "each GEMM input into two copies, row-wise and column-wise")
    p.add_argument("--fp8-attention-scaling", default="", metavar="tensor|mxfp8",
                   help="with --fp8-attention: the FP8 attention kernel where measured: "
                        "tensor (per-tensor scales: the current- and delayed-scaling "
                        "recipes, NVFP4 runs pinned to current scaling) or mxfp8 (an MXFP8 "
                        "recipe's own block-scaled attention, slower); default: the "
                        "--fp8-recipe's")
    p.add_argument("--recompute", type=lazy_enum_value("gpuarch.estimate.memory:Recompute",
                                                       "--recompute"),
                   help="none (default), selective or full")
    p.add_argument("--recompute-layers", type=int, default=0, metavar="N",
                   help="with --recompute full: recompute only the first N layers of each "
                        "pipeline stage's model chunk, the others keep their activations "
                        "(Megatron's --recompute-method block --recompute-num-layers N); "
                        "default every layer")
    p.add_argument("--recompute-modules", type=name_list, default=(), metavar="M,M",
                   help="with --recompute selective: the modules recomputed, comma-separated "
                        "(Megatron-Core's recompute_modules): core_attn (the default; "
                        "mla_up_proj for DeepSeek-V4, whose core cannot be), "
                        "layernorm, mla_up_proj, mlp, moe, moe_act, shared_experts; or "
                        "torchtitan_op alone, TorchTitan's per-op policy (every second "
                        "matrix multiply of a block)")
    p.add_argument("--precision", type=lazy_enum_value("gpuarch.perf.precision:Precision",
                                                       "--precision"),
                   help="fp32, tf32, fp16, bf16 (default; fp16 on a GPU without BF16: "
                        "P100, V100, T4) or fp8")
    p.add_argument("--offload-layers", type=int, default=0, metavar="N",
                   help="activation offloading: the saved activations of N layers go to CPU "
                        "memory and come back for the backward pass (Megatron-Core's "
                        "cpu_offloading_num_layers; needs --pp 1 and no --recompute)")
    p.add_argument("--offload-modules", type=name_list, default=(), metavar="M,M",
                   help="fine-grained activation offloading: what these modules keep for the "
                        "backward pass goes to CPU memory and comes back, comma-separated "
                        "(Megatron-Core's --fine-grained-activation-offloading "
                        "--offload-modules): attn_norm, qkv_linear, core_attn, attn_proj "
                        "(with core_attn), mlp_norm, expert_fc1, moe_act, or fused_group_mlp "
                        "(with --expert-launches fused-mlp)")
    p.add_argument("--offload-min-elements", type=int, default=None, metavar="N",
                   help="with --offload-modules: tensors of fewer elements stay on the GPU "
                        "(Megatron-Core's min_offloaded_tensor_size, default 1,048,576)")
    p.add_argument("--optimizer-offload", type=float, default=0.0, metavar="F",
                   help="optimizer CPU offload: the Adam moments of this fraction (0-1) of the "
                        "optimizer's elements live on the CPU and are updated there "
                        "(Megatron-Core's --optimizer-cpu-offload --optimizer-offload-fraction"
                        " F; needs --zero 1 or higher)")
    p.add_argument("--optimizer-offload-overlap", action="store_true",
                   help="with --optimizer-offload: overlap the copies with the CPU's updates "
                        "(Megatron-Core's --overlap-cpu-optimizer-d2h-h2d)")
    p.add_argument("--fp8-params", action="store_true",
                   help="with --precision fp8: keep the weights' compute copy in FP8, 1 byte "
                        "(Megatron's fp8_param_gather)")
    p.add_argument("--bf16-grads", action="store_true",
                   help="accumulate and reduce gradients in BF16, 2 bytes instead of FP32 "
                        "main gradients (Megatron's grad_reduce_in_fp32 off)")
    p.add_argument("--bf16-optimizer", action="store_true",
                   help="no FP32 master weights: BF16 weights, gradients and Adam moments, "
                        "8 bytes per parameter (PyTorch FSDP2 on a model held in BF16)")
    p.add_argument("--lora-rank", type=int, default=0, metavar="R",
                   help="LoRA fine-tuning: freeze the model's weights and train adapters of "
                        "rank R beside its linear layers (no weight gradients, reductions "
                        "or optimizer states for the frozen weights); default 0, every "
                        "weight trained")
    p.add_argument("--lora-modules", type=name_list, default=(), metavar="M,M",
                   help="with --lora-rank: the linear layers given adapters, comma-separated "
                        "(Megatron Bridge's target_modules): linear_qkv, linear_proj, "
                        "linear_fc1, linear_fc2 (default all four; in an expert layer fc1 "
                        "and fc2 are every expert's)")
    p.add_argument("--packed-doc-len", type=int, default=0, metavar="L",
                   help="each sequence is packed from documents of about L tokens and "
                        "attention stays inside each (Megatron's packed sequences, as "
                        "fine-tuning on short samples runs); default: attention over the "
                        "whole --seq-len")
    p.add_argument("--tokens", type=parse_quantity("--tokens"),
                   help="total training tokens, e.g. 2T, 300B or 2e12 (adds time, cost, "
                   "energy)")
    p.add_argument("--price-per-gpu-hour", type=positive_number("--price-per-gpu-hour"),
                   help="USD per GPU-hour")
    add_facility_flags(p)
    add_checkpoint_flags(p)
    p.add_argument("--calibration", type=Path, metavar="FILE",
                   help="measured efficiencies from 'gpuarch probe --bench --save FILE'")
    p.add_argument("--as-point", nargs="?", const="run", metavar="ID",
                   help="print this run as a [[point]] of a measured-runs file (id ID, "
                        "default 'run') instead of the estimate: add your measured figure "
                        "and compare with 'gpuarch validate training --data FILE'")
    p.add_argument("--measured", type=Path, metavar="LOG",
                   help="with --as-point: the point's figure from the run's training log "
                        "(Megatron-LM's 'elapsed time per iteration', NeMo's "
                        "'train_step_timing', torchtitan's 'tps'): the median of the logged "
                        "steps at --global-batch after the first tenth")
    p.add_argument("--framework", metavar="megatron|fsdp|deepspeed|maxtext|meta",
                   help="the training framework you run (megatron: Megatron-LM, NeMo, "
                        "Megatron Bridge; fsdp: PyTorch FSDP, e.g. llm-foundry or "
                        "TorchTitan): the error band is then the model's error on that "
                        "family's published runs (narrowest regime down to the GPU "
                        "architecture; else every family's, pooled) and the nearest "
                        "published runs prefer it (default: --launch's, else none)")
    p.add_argument("--launch", type=engine_choice("--launch", TRAINING_LAUNCH), metavar="megatron",
                   help="also print Megatron-LM's command for this run (torchrun "
                        "pretrain_gpt.py with the model, layout, batch, recomputation and "
                        "precision flags), and what it leaves to you")
    return p


def add_infer_parser(est_sub: argparse._SubParsersAction[argparse.ArgumentParser],
                     common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Register `estimate infer` and its flags; the caller sets its handler."""
    p = est_sub.add_parser("infer", parents=[common],
                           help="LLM serving: TTFT, TPOT, throughput, memory, bottleneck")
    model_flags(p)
    p.add_argument("--gpu", help="GPU name (default: the system's GPU); a comma-separated "
                                 "list (e.g. h100,h200,b200) compares the same run on each, "
                                 "one row a GPU")
    p.add_argument("--gpus", type=int, help="GPUs in all; replicas = GPUs / (TP x PP) "
                   "(default: TP x PP)")
    p.add_argument("--gpus-per-node", type=int,
                   help="GPUs that share one NVLink domain; beyond it traffic takes the "
                        "network (default: the system's, else the GPU's reference "
                        "system's, else 8; on a GB200/GB300 NVL72 rack, 4 prices its "
                        "compute trays talking over InfiniBand, as when multi-node NVLink "
                        "is not set up)")
    p.add_argument("--system", help="reference system (see 'gpuarch systems')")
    add_gpu_link(p)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--ep", type=int, default=1)
    p.add_argument("--input-len", type=int, required=True, help="prompt tokens")
    p.add_argument("--output-len", type=int, required=True, help="generated tokens")
    p.add_argument("--batch", type=batch_size, default=NO_BATCH,
                   help="sequences decoded together, or 'max' for the largest that fits "
                        "(this or --rate); a comma-separated list (e.g. 1,8,64,max) or "
                        "'sweep' (powers of two up to max) estimates each and marks the "
                        "frontier of output tokens/s per GPU against per user")
    p.add_argument("--plot", type=Path, metavar="FILE",
                   help="with a --batch list: draw tokens/s per GPU against tokens/s per "
                        "user, one point per batch, to .png or .svg")
    p.add_argument("--prefill-gpus", type=at_least_one("--prefill-gpus"), metavar="N",
                   help="disaggregated serving: N more GPUs that only prefill, their KV "
                        "caches sent to the --gpus that only decode (checked on two "
                        "published runs)")
    p.add_argument("--prefill-tp", type=at_least_one("--prefill-tp"), metavar="T",
                   help="tensor parallelism of a prefill replica (default: --tp)")
    p.add_argument("--prefill-ep", type=at_least_one("--prefill-ep"), metavar="E",
                   help="expert parallelism of a prefill replica (MoE; default 1)")
    p.add_argument("--concurrency", type=at_least_one("--concurrency"), metavar="C",
                   help="with --prefill-gpus (this, --batch or --rate): a client that keeps C "
                        "requests in flight (a benchmark's maximum concurrency); each waits "
                        "for its prefill and is handed over before it decodes, so fewer "
                        "than C decode at once")
    p.add_argument("--prefill-max-num-tokens", type=at_least_one("--prefill-max-num-tokens"),
                   metavar="N",
                   help="prompt tokens one prefill pass takes, where the prefill workers' "
                        "engine sets its own budget (default: --max-num-tokens)")
    p.add_argument("--prefill-gpu", metavar="NAME",
                   help="the prefill pool's GPU where it differs from --gpu (e.g. prefill "
                        "on H100, decode on H200): the KV cache then crosses the network "
                        "between the two GPUs' reference systems")
    p.add_argument("--rate", type=positive_number("--rate"), metavar="R",
                   help="requests per second arriving at the whole deployment (this or "
                        "--batch): continuous batching at the batch that load settles at, "
                        "by Little's law; refused beyond what the replicas can carry")
    p.add_argument("--simulate", type=at_least_one("--simulate"), metavar="N",
                   help="with --rate: also replay N requests per replica (10 to 200,000) "
                        "arriving at random through the engine, pass by pass, and report the "
                        "mean and 50th/90th/99th percentiles of TTFT, TPOT, latency and "
                        "queueing (estimate.simulate; the first tenth warm up)")
    simulation_flags(p)
    p.add_argument("--slo-ttft-ms", type=positive_number("--slo-ttft-ms"), metavar="MS",
                   help="with --simulate: a time-to-first-token objective; the simulation "
                        "says what share of requests met every objective given and the "
                        "goodput (that share of --rate)")
    p.add_argument("--slo-tpot-ms", type=positive_number("--slo-tpot-ms"), metavar="MS",
                   help="with --simulate: a time-per-output-token objective (each request's "
                        "own TPOT), as --slo-ttft-ms")
    fmt = "gpuarch.perf.quant:QuantFormat"
    for flag, text in (
            ("--weight-precision",
             "bf16, fp16, fp8, int8, int4, fp4 (NVFP4) or mxfp4; default: what the "
             "checkpoint is stored in: a config.json's quantization_config (or ModelOpt's "
             "hf_quant_config.json beside it), a preset's published checkpoint "
             "(deepseek-v3 and kimi-k2 FP8, gpt-oss MXFP4 experts), else bf16; BF16 is "
             "FP16 on a GPU without BF16 (P100, V100, T4), as engines run it there"),
            ("--activation-precision",
             "default: the weights' format for fp8/fp4 (W8A8, W4A4) where the Tensor Cores "
             "take it, else 16-bit (weight-only), as for int8/int4; int8 gives W8A8; fp8 "
             "with int4 or fp4 weights gives W4A8"),
            ("--kv-precision", "KV cache: bf16 (default; fp16 on a GPU without BF16), "
             "fp16, fp8 (Ampere and newer), int8 or int4 (Volta and newer), fp4 (NVFP4: "
             "B200, B300 and their Grace boards); on a GPU no engine keeps the format on, "
             "the next wider one, and the estimate says why"),
            ("--expert-weight-precision",
             "MoE: the routed experts' weights where they differ from the rest (default: "
             "the checkpoint's, e.g. GPT-OSS's MXFP4 experts, else --weight-precision)"),
            ("--expert-activation-precision",
             "MoE: the activations the experts' GEMMs take (default: as "
             "--activation-precision defaults, from the expert weights)")):
        p.add_argument(flag, type=lazy_enum_value(fmt, flag), help=text)
    p.add_argument("--batching", type=lazy_enum_value(
        "gpuarch.estimate.inference:Batching", "--batching"),
        help="static (default) or continuous (in-flight, steady state)")
    p.add_argument("--chunk", type=int, default=0,
                   help="chunked prefill: tokens per chunk (default: whole prompt)")
    p.add_argument("--kv-cache-fraction", type=float, default=0.0, metavar="F",
                   help="KV cache gets the fraction F of the memory left after weights and "
                        "activations (TensorRT-LLM's kv_cache_free_gpu_mem_fraction); "
                        "default: all but a reserve of 10%% of GPU memory (vLLM's 0.9)")
    p.add_argument("--max-batch-size", type=at_least_one("--max-batch-size"), default=0,
                   metavar="N",
                   help="the engine's cap on sequences decoded together (vLLM "
                        "max_num_seqs, TensorRT-LLM max_batch_size); requests beyond it "
                        "queue; default: memory alone limits the batch")
    engine_flags(p)
    p.add_argument("--num-requests", type=at_least_one("--num-requests"), default=0,
                   metavar="N",
                   help="an offline benchmark of N requests (trtllm-bench throughput) "
                        "instead of the steady state: at one length the last wave runs "
                        "part-full, with --output-len-cv and --max-output-len the run ends "
                        "with a drain; needs --batching continuous")
    p.add_argument("--max-output-len", type=at_least_one("--max-output-len"), default=0,
                   metavar="N",
                   help="the longest answer of the run: the engine's cap (its "
                        "max_output_len or max_tokens) where answers reach it; with "
                        "--num-requests and --output-len-cv the run ends with the batch in "
                        "flight draining, the longest toward it, at a shrinking batch, which "
                        "is priced; "
                        "without it the offline waves take one length")
    p.add_argument("--speculative-tokens", type=int, default=0, metavar="K",
                   help="speculative decoding: draft tokens per step (MTP modules, an EAGLE "
                        "head; each costs one target-shaped layer and the LM head, a hybrid "
                        "model's its MTP block)")
    p.add_argument("--acceptance-length", type=float, default=0.0, metavar="A",
                   help="with --speculative-tokens: mean tokens each sequence emits per "
                        "target step (1 to K + 1; measure it on your data)")
    p.add_argument("--max-num-tokens", type=at_least_one("--max-num-tokens"), default=None,
                   help="prompt tokens per prefill pass (TensorRT-LLM max_num_tokens, vLLM "
                        "max_num_batched_tokens; default 8192); under continuous batching "
                        "the engine holds activations for a whole pass of it")
    p.add_argument("--engine-limits", default=None,
                   metavar="trtllm-bench-pytorch|trtllm-bench-pytorch-2026-07|"
                           "trtllm-bench-build",
                   help="take --max-batch-size and --max-num-tokens, where not given, as "
                        "trtllm-bench chooses them from the model, formats, GPUs and the "
                        "requests' lengths: on the PyTorch backend (throughput command) of "
                        "TensorRT-LLM 1.x, of its main branch from July 2026 (checkpoint "
                        "bytes, attention-DP ranks and MLA's cache sized apart), or for a "
                        "TensorRT engine built by 'trtllm-bench build --dataset'")
    p.add_argument("--calibration", type=Path, metavar="FILE",
                   help="measured efficiencies from 'gpuarch probe --bench --save FILE'")
    p.add_argument("--price-per-gpu-hour", type=positive_number("--price-per-gpu-hour"),
                   help="USD per GPU-hour: adds the hourly cost and the cost per million "
                        "output tokens (energy per million is always given)")
    add_facility_flags(p)
    p.add_argument("--as-point", nargs="?", const="run", metavar="ID",
                   help="print this serving run as a [[point]] of a measured-runs file (id "
                        "ID, default 'run') instead of the estimate: add your measured figure "
                        "and compare with 'gpuarch validate inference --data FILE' (with "
                        "--rate, a load run for 'gpuarch validate load --data FILE')")
    p.add_argument("--measured-kind", default=None, metavar="rate|concurrency|offline",
                   help="with --measured: keep only the runs sent at a rate, at a "
                        "concurrency, or all at once (a GuideLLM sweep saves all three in "
                        "one file)")
    p.add_argument("--measured", type=Path, nargs="+", metavar="FILE",
                   help="with --as-point: fill the point's figures from saved benchmark "
                        "results (vLLM's 'vllm bench serve --save-result' JSON, SGLang's "
                        "'bench_serving --output-file' lines, AIPerf's "
                        "profile_export_aiperf.json, trtllm-bench's --report_json, "
                        "GuideLLM's benchmarks.json): a point a run, at its rate, "
                        "concurrency or all at once, with its lengths' spread, checked "
                        "against --input-len and --output-len")
    p.add_argument("--engine", metavar="trtllm|vllm|sglang|lmdeploy|nim",
                   help="the serving engine you run: the error band is then the model's "
                        "error on that engine's published runs (narrowest regime down to the "
                        "GPU architecture; else every engine's, pooled) and the nearest "
                        "published runs prefer it (default: --launch's engine, else none)")
    p.add_argument("--launch", type=engine_choice("--launch", SERVING_LAUNCH),
                   metavar="vllm|sglang|trtllm",
                   help="also print that engine's server command for this deployment "
                        "(parallelism, batch, tokens a pass, length, formats; TensorRT-LLM's "
                        "options file too), and what it leaves to you")
    return p
