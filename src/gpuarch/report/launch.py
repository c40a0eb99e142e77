"""Launch commands: the settings an estimate was made with, spelled as a framework's command
line, so the layout the model priced is the one that runs.

The flag spellings are data (``data/launch.toml``), each engine's read from a named version
of its argument parser. What the estimate assumed but the command line cannot set (routing
imbalance, the data and tokenizer, an optimizer without FP32 master weights) goes into the
launch's notes, never into a flag that might not exist.
"""

from __future__ import annotations

import math
import shlex
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from gpuarch.errors import GpuarchError, check_choice

__all__ = ["SERVING_ENGINES", "TRAINING_ENGINES", "Launch", "architecture_note",
           "best_serving_launch", "best_training_launch", "checkpoint_architecture",
           "engine_info", "feature_notes", "megatron_launch", "model_reference",
           "serving_launch"]

TRAINING_ENGINES = ("megatron",)
HOST_GPUS = 8
"""The most GPUs a node of the catalog's systems puts under one host (an HGX board); a
larger node is a rack-scale NVLink domain of several hosts."""
SERVING_ENGINES = ("vllm", "sglang", "trtllm")


@dataclass(frozen=True)
class Launch:
    """One framework's command for an estimate's setup, and what it leaves to the user."""

    engine: str
    name: str
    checked: str  # the file and version the flags were read from
    argv: tuple[str, ...]
    notes: tuple[str, ...]
    files: tuple[tuple[str, str], ...] = ()  # (name, text) the command reads
    head: int = 1  # words of argv that name the program and what it runs (one line)

    @property
    def command(self) -> str:
        """The command as one shell line (quoted where needed)."""
        return shlex.join(self.argv)

    def lines(self) -> list[str]:
        """The command as a shell script would break it: the program on the first line,
        then one flag and its values a line, indented, ``\\`` ending every line but the
        last."""
        words = [shlex.quote(w) for w in self.argv]
        out = [" ".join(words[:self.head])]
        for word in words[self.head:]:
            if word.startswith("--"):
                out.append("  " + word)
            else:
                out[-1] += " " + word
        return [line + " \\" for line in out[:-1]] + out[-1:]

    def as_json(self) -> dict[str, Any]:
        return {"engine": self.engine, "name": self.name, "checked_against": self.checked,
                "argv": list(self.argv), "command": self.command,
                "files": dict(self.files), "notes": list(self.notes)}


@cache
def _engines() -> dict[str, Any]:
    with resources.files("gpuarch.report").joinpath("data/launch.toml").open("rb") as fh:
        return tomllib.load(fh)


@cache
def _engine_models() -> dict[str, Any]:
    with resources.files("gpuarch.report").joinpath("data/engine_models.toml").open("rb") as fh:
        return tomllib.load(fh)


def checkpoint_architecture(reference: str) -> str | None:
    """The model class a local checkpoint's config.json names (its ``architectures``' first
    entry) where ``reference`` (``model_reference``) is that file or a directory holding it
    (``presets.local_config``); None otherwise (a repository id or a preset: not read
    here)."""
    from gpuarch.workloads.presets import local_config

    cfg = local_config(reference)
    classes = cfg.get("architectures") if cfg is not None else None
    if isinstance(classes, list) and classes and isinstance(classes[0], str):
        return classes[0]
    return None


def architecture_note(engine: str, architecture: str | None) -> str | None:
    """What a launch of ``engine`` should say of a checkpoint whose config.json names
    ``architecture``: that the engine's list of model classes (``data/engine_models.toml``,
    read from a named version) lacks it, or serves it through another backend; None where
    it is listed, or where the architecture or the engine's list is unknown."""
    models = _engine_models().get(engine)
    if architecture is None or models is None or architecture in models["architectures"]:
        return None
    name = engine_info(engine)["name"]
    if architecture in models.get("autodeploy", ()):
        return (f"{architecture}: {name} serves it through its AutoDeploy backend, not the "
                f"PyTorch backend this command starts (as read in {models['checked']})")
    return (f"{architecture} is not among the model classes {name} lists (as read in "
            f"{models['checked']}): {models['fallback']}")


def feature_notes(engine: str, architecture: str | None, speculative: bool,
                  attention_dp: bool) -> list[str]:
    """What ``engine``'s model-feature matrix (``data/engine_models.toml``, where it has one:
    TensorRT-LLM's key models) says of ``architecture`` for what the launch asks:
    speculative decoding (the drafting methods it marks as supported, or none) and
    attention data parallelism (where not marked Yes)."""
    models = _engine_models().get(engine) or {}
    row = models.get("features", {}).get(architecture) if architecture else None
    if row is None:
        return []
    name = engine_info(engine)["name"]
    notes = []
    if speculative:
        methods = row["speculative"]
        notes.append(f"{name}'s feature matrix marks "
                     + (f"{' and '.join(methods)} drafting" if methods
                        else "no MTP, EAGLE-3 or DFlash drafting")
                     + f" for {architecture} ({models['checked']})")
    if attention_dp and row["attention_dp"] != "Yes":
        notes.append(f"{name}'s feature matrix marks attention data parallelism "
                     f"{row['attention_dp']} for {architecture} ({models['checked']})")
    return notes


def engine_info(engine: str) -> dict[str, Any]:
    """An engine's entry in the launch data (name, program, checked, flags)."""
    engines = _engines()
    check_choice("--launch", engine, engines)
    return dict(engines[engine])


def megatron_launch(shape: Any, cfg: Any) -> Launch:
    """Megatron-LM's ``pretrain_gpt.py`` under torchrun for a training estimate's
    ``shape`` (``TransformerShape``) and ``cfg`` (``TrainingConfig``): the model's shape,
    the parallel layout, batch, recomputation, precision and the per-parameter formats."""
    from gpuarch.estimate.memory import Recompute
    from gpuarch.perf.precision import Precision
    from gpuarch.workloads.shape import FfnKind, NormKind, Position, QkNorm

    if shape.mamba is not None and shape.mamba.gated_delta:
        raise GpuarchError(f"--launch: {shape.name} is a {shape.mamba.label} hybrid, which "
                           "Megatron-LM would train as a GPT model with a linear-attention "
                           "variant, not the MambaModel this command writes; its launch "
                           "command is not written here (run without --launch for the "
                           "estimate)")
    if shape.mamba is not None and shape.mamba.kind in ("mamba1", "lightning", "short_conv",
                                                        "mlstm", "rwkv4"):
        raise GpuarchError(f"--launch: {shape.name} has {shape.mamba.label} blocks, which "
                           "Megatron-LM's MambaModel does not build (its mixer is Mamba-2's); "
                           "its launch command is not written here (run without --launch for "
                           "the estimate)")
    if shape.attention_experts:
        raise GpuarchError(f"--launch: {shape.name}'s mixture of attention heads (query and "
                           "output projections as experts) is not something Megatron-LM "
                           "builds; its launch command is not written here (run without "
                           "--launch for the estimate)")
    if shape.relative_bias or shape.short_conv_taps:
        raise GpuarchError(f"--launch: {shape.name}'s relative position bias and short "
                           "convolutions (Inkling's) are not something Megatron-LM builds; "
                           "its launch command is not written here (run without --launch "
                           "for the estimate)")
    if shape.loop_repeats:
        raise GpuarchError(f"--launch: {shape.name}'s looped layers (run several times a "
                           "token) are not something Megatron-LM builds; its launch command "
                           "is not written here (run without --launch for the estimate)")
    if shape.shared_blocks:
        raise GpuarchError(f"--launch: {shape.name}'s shared transformer blocks (one set of "
                           "weights called at several depths) are not something Megatron-LM's "
                           "MambaModel builds; its launch command is not written here (run "
                           "without --launch for the estimate)")
    info = engine_info("megatron")
    f = info["flags"]
    notes = [f"data, tokenizer (a vocabulary of {shape.vocab:,}), optimizer, learning-rate "
             "and checkpoint flags are yours; with more than one host, torchrun also needs "
             "each host's --node-rank and the rendezvous address"]
    if cfg.gpus_per_node <= HOST_GPUS:
        per_host = min(cfg.gpus, cfg.gpus_per_node)
        hosts, host_gpus = str(math.ceil(cfg.gpus / per_host)), str(per_host)
    else:  # a rack-scale NVLink domain spans several hosts, which the catalog does not count
        hosts, host_gpus = "HOSTS", "GPUS_PER_HOST"
        notes.append(f"one process per GPU, {cfg.gpus:,} in all: HOSTS x GPUS_PER_HOST (the "
                     f"{cfg.gpus_per_node}-GPU NVLink domain spans several hosts; 'gpuarch "
                     "systems' describes its trays)")
    # a pattern of attention and MLP blocks alone (Llama-Nemotron's NAS layers) is a GPT
    # model of heterogeneous layers to Megatron-LM, not a hybrid Mamba model
    mamba_hybrid = shape.is_hybrid and shape.mamba is not None
    program = info["hybrid_program"] if mamba_hybrid else info["program"]
    argv: list[str] = ["torchrun", "--nnodes", hosts, "--nproc-per-node", host_gpus, program]

    def add(key: str, *values: object) -> None:
        argv.append(f[key])
        argv.extend(str(v) for v in values)

    # the model (a hybrid one as Megatron-LM's MambaModel: its layer spec, the block
    # pattern, whose length is --num-layers, and the Mamba-2 mixer's shape)
    layers = shape.layers
    if shape.is_hybrid and not mamba_hybrid:
        # a layer is an attention block, an MLP block, or the one then the other
        layers = shape.hybrid_pattern.count("*") + shape.hybrid_pattern.count("-") \
            - shape.hybrid_pattern.count("*-")
        notes.append("the layers' own parts (which hold attention, each MLP's width: "
                     f"{shape.attention_layers} attention and {shape.mlp_layers} MLP blocks "
                     f"in {layers} layers) are not emitted: Megatron-LM builds such "
                     "heterogeneous layers from the checkpoint's block_configs "
                     "(--heterogeneous-layers-config-path); --ffn-hidden-size below is the "
                     "widest MLP's")
    if mamba_hybrid:
        add("spec", *info["hybrid_spec"])
        add("is_hybrid")
        add("hybrid_pattern", shape.hybrid_pattern)
        if shape.mamba is not None:
            add("mamba_heads", shape.mamba.heads)
            add("mamba_head_dim", shape.mamba.head_dim)
            add("mamba_state", shape.mamba.state)
            add("mamba_groups", shape.mamba.groups)
    add("layers", layers)
    add("hidden", shape.hidden)
    add("heads", shape.heads)
    if shape.n_kv_heads != shape.heads:
        add("gqa")
        add("kv_heads", shape.n_kv_heads)
    if shape.head_dim and shape.head_dim != shape.hidden // shape.heads:
        add("head_dim", shape.head_dim)
    add("ffn_hidden", shape.d_ffn)
    if shape.ffn_kind is FfnKind.SWIGLU:
        add("swiglu")
    elif shape.ffn_kind is FfnKind.GEGLU:
        notes.append("the GELU-gated MLP (GeGLU, Gemma-style) has no flag here: set "
                     "gated_linear_unit with a GELU activation in the model's config")
    elif shape.ffn_kind is FfnKind.RELU2:
        add("squared_relu")
    elif shape.ffn_kind is FfnKind.XIELU:
        notes.append("the xIELU activation (Apertus) has no flag here")
    elif shape.ffn_kind is FfnKind.RELU2_GLU:
        notes.append("the MLP gated by a squared ReLU (BitNet) has no flag here")
    if shape.sub_norms:
        notes.append("the norms inside attention and MLP (BitNet's sub-norms) have no flag "
                     "here")
    elif shape.ffn_kind is FfnKind.RELU:
        notes.append("the plain ReLU MLP (OPT) has no flag here (Megatron's default is "
                     "GELU)")
    if shape.qk_norm is QkNorm.HEAD:
        add("qk_layernorm")
    elif shape.qk_norm is QkNorm.FULL:
        notes.append("query and key norms over the whole projection (OLMo 2-style) are not "
                     "emitted: --qk-layernorm normalises each head")
    if shape.sandwich_norms:
        notes.append("the norms after attention and MLP (Gemma 2/3-style, four a layer) "
                     "have no flag here")
    if not shape.bias:
        add("no_bias")
    if shape.qkv_bias or shape.out_bias or shape.last_out_bias:
        notes.append("the attention projections' biases (Qwen2- or Llama attention_bias-"
                     "style, or the last layer's output bias alone, GPT-NeoX Japanese's) "
                     "are not set by a flag here")
    if shape.parallel_attention:
        notes.append("parallel attention (attention and MLP side by side, GPT-J/Falcon-style)"
                     " is not emitted: these layers run the two blocks one after the other")
    if not shape.tied_embeddings:
        add("untie")
    if shape.head_vocab:
        notes.append(f"an LM head pruned to {shape.head_vocab:,} of the vocabulary's "
                     f"{shape.vocab:,} rows (Apertus 1.5's) has no Megatron-Core flag: the "
                     "command builds the whole head")
    if shape.position is Position.ROPE:
        add("position", "rope")
    elif shape.position is Position.NONE:
        add("position", "none")
    elif shape.position is Position.ALIBI:
        notes.append("ALiBi positions (BLOOM) are not a Megatron-Core position embedding: "
                     "no position flag is emitted")
    if shape.embedding_norm:
        notes.append("the layer norm after the embedding (BLOOM's) has no Megatron-Core flag")
    if shape.norm in (NormKind.RMSNORM, NormKind.RMSNORM_NO_WEIGHT):
        add("norm", "RMSNorm")
    if shape.norm is NormKind.RMSNORM_NO_WEIGHT:
        notes.append("RMSNorms without weights (nanochat's) have no Megatron-Core flag: the "
                     "command builds RMSNorms with them")
    elif shape.norm is NormKind.LAYERNORM_NO_AFFINE:
        notes.append("LayerNorms without weights (OLMo 1's) have no Megatron-Core flag: "
                     "the command builds LayerNorms with them")
    if shape.mla is not None:
        notes.append("multi-head latent attention's shape (its low-rank projections) is not "
                     "emitted: take those flags from the model's own Megatron recipe")
        if shape.indexer_mla is not None and shape.indexer_mla.sparse:
            notes.append("DeepSeek Sparse Attention's indexer (heads, head size, top-k) is "
                         "not emitted either")
    if shape.compressed is not None:
        notes.append("DeepSeek-V4's compressed attention (window, compression ratios, "
                     "indexer, grouped output) and its hyper-connections are not emitted: "
                     "take those flags from the model's own Megatron recipe")
    if shape.full_attention is not None and shape.full_attention.mla is not None:
        notes.append("the full-attention layers' own latent attention (its heads, ranks and "
                     "widths) is not emitted either")
    elif shape.full_attention is not None:
        full = shape.full_attention
        notes.append("the full-attention layers' own heads ("
                     + (f"{full.heads} heads, " if full.heads else "")
                     + f"{full.kv_heads} KV heads of "
                     f"{full.head_dim}{', keys as values' if full.keys_are_values else ''}) "
                     "are not "
                     "emitted: the flags above give every layer the window layers' heads")
    if shape.head_gate:
        notes.append("the attention's gate a head (Step-3.5/3.7-style) has no flag here")
    if shape.differential_attention:
        notes.append("differential attention (DiffLlama's) has no Megatron-Core flag: the "
                     "command builds plain attention")
    if shape.kv_shared_layers or shape.per_layer_input:
        notes.append("KV-shared layers and per-layer input embeddings (Gemma 4 E2B/E4B-style) "
                     "have no flags here")
    if shape.altup_streams or shape.laurel_rank:
        notes.append("AltUp's streams and LAuReL's low-rank branches (Gemma 3n's) are not "
                     "Megatron-Core modules: the command builds plain layers")
    if shape.block_sparse is not None:
        notes.append("block-sparse attention (MiniMax-M3's indexer and top-k blocks) is not "
                     "emitted: the flags give every layer dense attention")
    if shape.v_head_dim or shape.keys_are_values:
        notes.append("value heads narrower than the key heads, or keys that are also the "
                     "values, have no flag here")
    if shape.expert_layer_norms or shape.router_scales or shape.routed_expert_norms:
        notes.append("the expert layers' own norms and the router's learned scales "
                     "(Gemma 4-style; a norm after each routed expert, Ergo's) have no flag "
                     "here")
    if shape.residual_gates:
        notes.append("the learned gates on the residual adds (Ergo's) have no flag here")
    if shape.sliding_window:
        kind = "chunked" if shape.attention_chunked else "sliding-window"
        notes.append(f"{kind} attention ({shape.sliding_window:,} tokens on "
                     f"{shape.windowed_layers} of {shape.layers} layers) is not emitted")
    if shape.is_moe:
        add("experts", shape.experts)
        add("top_k", shape.experts_per_token)
        add("moe_ffn_hidden", shape.d_expert)
        if shape.shared_experts:
            add("shared_expert_hidden", shape.shared_experts * shape.d_expert)
        if shape.moe_latent:
            add("moe_latent", shape.moe_latent)
        if shape.dense_layers:
            add("moe_layer_freq", f"([0]*{shape.dense_layers}+[1]*{shape.moe_layers})")
        if cfg.precision in (Precision.BF16, Precision.FP8, Precision.NVFP4):
            add("grouped_gemm")  # Megatron's grouped expert GEMMs run under --bf16 only
        else:
            notes.append("the grouped expert GEMMs (--moe-grouped-gemm) need --bf16; at "
                         f"{cfg.precision.value} the experts run one by one")
        if refused := cfg.moe_without_sequence_parallel(shape):
            notes.append(refused)
        if cfg.ep_dispatcher == "deepep":
            add("dispatcher", "flex")
            add("deepep")
        else:
            add("dispatcher", "alltoall")
        if cfg.ep_comm_overlap:
            add("ep_comm_overlap")
        if cfg.moe_token_drop:
            # padded to the capacity, as the estimate prices it: without the padding
            # Megatron-Core's dispatcher syncs with the host before its first permutation
            add("capacity_factor", "1.0")
            add("pad_to_capacity")
            notes.append("token dropping at a capacity factor of 1.0, the experts' inputs "
                         "padded to it (the estimate prices drop-and-pad as no host wait, "
                         "whatever the factor; dropping without the padding still waits)")
        if cfg.expert_launches != "per-expert":
            notes.append(f"expert launches '{cfg.expert_launches}': one grouped kernel for "
                         "the local experts depends on the Transformer Engine version (no "
                         "pretrain_gpt.py flag)")
        if cfg.moe_imbalance != 1.0:
            notes.append(f"routing imbalance {cfg.moe_imbalance:g} is an input to the "
                         "estimate, not a setting")
        if shape.bias:
            notes.append("the experts carry biases, which older Megatron grouped GEMMs "
                         "refuse")
    if cfg.mtp_layers:
        add("mtp_layers", cfg.mtp_layers)
        if shape.is_hybrid:
            notes.append("the MTP blocks' pattern (an attention and an expert block, '*E', a "
                         "depth) is not emitted: newer Megatron-LM appends it to the hybrid "
                         "layer pattern after a '/' per depth")
        if cfg.mtp_shared_weights:
            notes.append("MTP depths sharing one block's weights are not emitted (Megatron "
                         "Bridge's mtp_use_repeated_layer)")
    # the layout
    add("tp", cfg.tp)
    add("pp", cfg.pp)
    if cfg.pp_layout and shape.is_hybrid:
        notes.append(f"the stages as '|' segments of the block pattern ({cfg.pp_layout}) are "
                     "not emitted: newer Megatron-LM takes them in --hybrid-layer-pattern, "
                     "whose segments also set the interleaving")
    elif cfg.pp_layout:
        add("pp_layout", cfg.pp_layout)
    elif cfg.vpp > 1:
        add("vpp", cfg.vpp)
    if cfg.vpp > 1 and not cfg.pp_comm_overlap:
        add("no_pp_comm_overlap")
    if cfg.pp_edge_layers:
        add("embedding_in_split")
        add("loss_in_split")
    if cfg.cp > 1:
        add("cp", cfg.cp)
        if cfg.cp_comm_type != "p2p":
            add("cp_comm_type", cfg.cp_comm_type)
    if cfg.ep > 1:
        add("ep", cfg.ep)
    if cfg.etp and cfg.etp != cfg.tp:
        add("etp", cfg.etp)
    if cfg.sequence_parallel:
        add("sequence_parallel")
    if cfg.tp_comm_overlap:
        add("tp_comm_overlap")
    if cfg.zero == 1:
        add("distributed_optimizer")
    elif cfg.zero >= 2:
        add("fsdp")
        add("sharding", "optim_grads" if cfg.zero == 2 else "optim_grads_params")
        notes.append(f"ZeRO {cfg.zero} as Megatron-FSDP, which saves checkpoints with "
                     "--ckpt-format fsdp_dtensor")
    if cfg.dp_shard:
        add("dp_replicas", cfg.dp_replicas)
        if cfg.zero >= 2:
            add("outer_sharding", "optim" if cfg.outer_optimizer_sharding else "no_shard")
        if shape.is_moe and cfg.ep > 1 and cfg.zero == 1:
            notes.append("several distributed-optimizer instances with expert parallelism: "
                         "older Megatron-Core refuses them (its gradient buffer asserts "
                         "expert-parallel size 1); Megatron-FSDP (--zero 3) takes both")
    add("overlap_grad_reduce")
    if cfg.zero >= 1:
        add("overlap_param_gather")
    # batch and sequence
    add("micro_batch", cfg.micro_batch)
    add("global_batch", cfg.global_batch)
    add("seq_len", cfg.seq_len)
    add("max_positions", max(cfg.seq_len, shape.positions))
    # recomputation and offloading
    if cfg.recompute is Recompute.SELECTIVE:
        add("recompute", "selective")
        if cfg.recompute_modules == ("torchtitan_op",):  # estimate.recompute.TORCHTITAN_OP
            notes.append("TorchTitan's per-op checkpointing (torchtitan_op) has no Megatron "
                         "equivalent: selective recomputation is emitted with Megatron's "
                         "default module, the attention core")
        elif cfg.recompute_modules:
            add("recompute_modules", *cfg.recompute_modules)
    elif cfg.recompute is Recompute.FULL:
        add("recompute", "full")
        if cfg.recompute_layers:
            add("recompute_method", "block")
            add("recompute_layers", cfg.recompute_layers)
        else:
            add("recompute_method", "uniform")
            add("recompute_layers", 1)
    if cfg.offload_layers:
        add("offload_layers", cfg.offload_layers)
    if cfg.offload_modules:
        add("fine_grained_offloading")
        add("offload_modules", *cfg.offload_modules)
        add("min_offloaded_tensor_size", cfg.offload_min_elements)
    if cfg.optimizer_offload:
        # Megatron-LM asserts the precision-aware optimizer with CPU offload
        add("optimizer_cpu_offload")
        add("optimizer_offload_fraction", f"{cfg.optimizer_offload:g}")
        add("precision_aware_optimizer")
        if cfg.optimizer_offload_overlap:
            add("overlap_cpu_optimizer")
    # precision
    precision = cfg.precision
    if precision is Precision.FP16:
        add("fp16")
    elif precision in (Precision.BF16, Precision.FP8, Precision.NVFP4):
        add("bf16")
    if precision is Precision.FP8:
        add("fp8", "hybrid")
        notes.append("FP8 with Megatron's default scaling recipe; --fp8-recipe tensorwise, "
                     "mxfp8 (Blackwell) or blockwise choose another, which the estimate "
                     "does not tell apart")
    elif precision is Precision.NVFP4:
        add("fp4", "e2m1")
        add("fp4_recipe", "nvfp4")
    elif precision is Precision.TF32:
        notes.append("TF32: FP32 training with PyTorch's TF32 matmuls allowed "
                     "(torch.backends.cuda.matmul.allow_tf32), no Megatron flag")
    if any(cfg.bf16_layers):
        add("bf16_layers")
        add("bf16_layers_start", cfg.bf16_layers_start)
        add("bf16_layers_end", cfg.bf16_layers_end)
    if cfg.mtp_bf16:
        notes.append("the MTP blocks in BF16 are Megatron Bridge's keep_mtp_spec_in_bf16 (a "
                     "model setting); no Megatron-LM flag for it was read")
    if cfg.fp8_params:
        add("fp8_params")
    if cfg.bf16_grads:
        add("bf16_grads")
    if cfg.bf16_optimizer:
        notes.append("BF16 weights, gradients and Adam moments without FP32 master weights "
                     "(PyTorch FSDP2's plain Adam) have no Megatron equivalent")
    if cfg.cuda_graphs:
        add("cuda_graph_impl", "transformer_engine")
        notes.append("CUDA graphs over attention and the MoE router and preprocessing: the "
                     "scope flag differs by Megatron version (--cuda-graph-scope attn, or "
                     "newer releases' modules)")
    elif cfg.cuda_graph_scope:
        full = cfg.cuda_graph_scope == ("full_iteration",)
        add("cuda_graph_impl", "local" if full else "transformer_engine")
        add("cuda_graph_scope", *cfg.cuda_graph_scope)
    if cfg.dispatcher_wait_s is not None:
        notes.append("the dispatcher's host wait is a measured input to the estimate, not a "
                     "setting")
    if cfg.pp_schedule != "1f1b" and cfg.pp > 1:
        notes.append(_SCHEDULE_NOTES[cfg.pp_schedule])
    if cfg.lora_rank:
        notes.append(f"LoRA (rank {cfg.lora_rank} on {', '.join(cfg.adapted)}) is not a "
                     "pretrain_gpt.py flag: this is the base model's layout; Megatron Bridge "
                     "fine-tunes with it through its recipe's peft=LoRA(dim="
                     f"{cfg.lora_rank}, target_modules=[...]) and a pretrained checkpoint")
    return Launch("megatron", info["name"], info["checked"], tuple(argv), tuple(notes),
                  head=6)



_SCHEDULE_NOTES = {
    "zb1p": "the zero-bubble ZB-H1 schedule is not in upstream Megatron-LM: Sea AI Lab's "
            "fork (sail-sg/zero-bubble-pipeline-parallelism) runs it with "
            "--enable-zero-bubble --zero-bubble-max-pending-backward equal to --pp",
    "dualpipe": "DualPipe is not a Megatron-LM schedule: it is DeepSeek's own library "
                "(deepseek-ai/DualPipe), driven by a framework that supplies the overlapped "
                "forward-backward chunk",
    "dualpipev": "DualPipeV is not in upstream Megatron-LM: MindSpeed runs it with "
                 "--schedules-method dualpipev, PyTorch's pipelining as ScheduleDualPipeV",
}
"""What ``--launch megatron`` says about a pipeline schedule upstream Megatron-LM lacks."""


def model_reference(model: str) -> str:
    """What a serving command loads for ``--model``: a config.json's directory; a Hugging
    Face repository id as typed (``meta-llama/Llama-3.1-8B-Instruct``: the checkpoint the
    user named, not the base whose preset gives the shape); a preset's own repository
    (``Preset.hf_repos``; never a family's shared source page, which is another size's);
    else the name itself."""
    if model.endswith(".json"):
        from pathlib import Path

        return str(Path(model).parent)
    if "/" in model:
        return model
    from gpuarch.workloads.presets import preset

    try:
        repos = preset(model).hf_repos
    except GpuarchError:  # not a preset: the name as given
        return model
    return repos[0] if repos else model


_CHECKPOINTS = {"fp8": "an FP8 checkpoint, e.g. NVIDIA ModelOpt's",
                "fp4": "NVFP4, e.g. NVIDIA ModelOpt's", "mxfp4": "MXFP4",
                "int4": "INT4 weight-only, e.g. AWQ or GPTQ",
                "int8": "INT8, e.g. SmoothQuant W8A8 or weight-only"}


def serving_launch(engine: str, shape: Any, cfg: Any, model: str, batch: int,
                   checkpoint: Any = None) -> Launch:
    """``engine``'s server command (vLLM, SGLang or TensorRT-LLM) for a serving estimate's
    ``shape`` and ``cfg`` (``InferenceConfig``) at ``batch`` sequences per replica, loading
    ``model`` (``model_reference``); ``checkpoint`` (``hf_quant.CheckpointFormats``): the
    formats the checkpoint already stores, when known (nothing to quantize then)."""
    checkpoint_weights = checkpoint.weights if checkpoint is not None else None
    checkpoint_experts = (checkpoint.expert_weights or checkpoint.weights) \
        if checkpoint is not None else None
    info = engine_info(engine)
    f, values = info["flags"], info.get("values", {})
    argv: list[str] = [*info["program"].split(), model]
    head = len(argv)
    notes: list[str] = []
    files: list[tuple[str, str]] = []
    options: list[str] = []  # TensorRT-LLM's YAML lines

    def add(key: str, *vals: object) -> None:
        argv.append(f[key])
        argv.extend(str(v) for v in vals)

    from gpuarch.workloads.presets import needs_remote_code, preset

    architecture = checkpoint_architecture(model)
    architecture_issue = architecture_note(engine, architecture)
    if architecture_issue:
        notes.append(architecture_issue)
    try:
        paper_shape = not preset(model).hf_repos
    except GpuarchError:  # not a preset's name: a checkpoint or repository
        paper_shape = False
    if paper_shape:
        notes.append(f"{model} is a shape from its paper or recipe with no published "
                     "checkpoint: give the engine a checkpoint (a directory or a repository) "
                     "of this shape in its place")
    if needs_remote_code(model):
        add("trust_remote_code")
        notes.append(f"{f['trust_remote_code']}: the checkpoint ships model code of its own "
                     "(its config.json's auto_map), which the engine loads only when told to")
    moe = shape.is_moe
    ep = cfg.ep if moe else 1
    attention_dp = moe and ep > cfg.tp
    notes += feature_notes(engine, architecture, bool(cfg.speculative_tokens), attention_dp)
    from gpuarch.estimate.inference_config import server_layout

    group, dp = server_layout(cfg.tp, cfg.ep, moe)  # GPUs of one stage of one server
    servers = cfg.gpus // (group * cfg.pp)
    # parallelism
    if engine == "vllm":
        add("tp", cfg.tp)
        if cfg.pp > 1:
            add("pp", cfg.pp)
        if attention_dp:
            add("dp", dp)
        if ep > 1:
            add("expert_parallel")
        if moe and 1 < ep < cfg.tp:
            notes.append(f"EP {ep} below TP {cfg.tp}: vLLM's expert parallelism spans TP x DP "
                         "GPUs, so it runs EP over all of them")
    elif engine == "sglang":
        add("tp", group)
        if cfg.pp > 1:
            add("pp", cfg.pp)
        if attention_dp:
            add("dp", dp)
            add("dp_attention")
        if ep > 1:
            add("ep", ep)
    else:
        add("tp", group)
        if cfg.pp > 1:
            add("pp", cfg.pp)
        if ep > 1:
            add("ep", ep)
        if attention_dp:
            options.append("enable_attention_dp: true")
    if engine == "sglang" and moe and ep > 1 and cfg.moe_kernels == "sglang-deepep":
        # the wide-EP path the estimate priced: DeepEP's all-to-all, DeepGEMM's experts
        add("a2a_backend", values["a2a_deepep"])
        add("moe_runner", values["runner_deepgemm"])
    if engine == "sglang" and cfg.two_batch_overlap:
        add("two_batch_overlap")
    elif cfg.two_batch_overlap:
        notes.append(f"two-batch overlap: the estimate assumed it; {info['name']} is not "
                     "started with it here (SGLang's --enable-two-batch-overlap)")
    if engine == "trtllm" and moe and cfg.moe_kernels == "trtllm-gen":
        options.append("moe_config:\n  backend: TRTLLM")  # the TRT-LLM-Gen kernels priced
    if cfg.tp > 1 and cfg.all_reduce == "nccl":
        # the tensor-parallel all-reduce the estimate priced: NCCL's alone
        if engine == "trtllm":
            options.append("allreduce_strategy: NCCL")
        else:
            add("disable_custom_all_reduce")
    elif cfg.tp > 1 and cfg.all_reduce != engine:
        from gpuarch.estimate.inference_config import MOE_KERNEL_ENGINES

        notes.append(f"all-reduce: the estimate priced {MOE_KERNEL_ENGINES[cfg.all_reduce]}'s "
                     f"one-shot kernels; {info['name']} runs its own")
    if engine == "sglang" and cfg.redundant_experts:
        add("redundant_experts", cfg.redundant_experts)
        notes.append("redundant experts are placed by EPLB: give it an expert distribution "
                     "(--init-expert-location) or let it rebalance (--enable-eplb)")
    elif cfg.redundant_experts:
        notes.append(f"{cfg.redundant_experts} redundant experts: the estimate assumed them; "
                     f"set {info['name']}'s expert load balancer for {shape.experts} + "
                     f"{cfg.redundant_experts} slots")
    if servers > 1:
        notes.append(f"{servers} such servers (one per {group * cfg.pp} GPUs), requests "
                     "spread over them")
    # batch, tokens a pass, length
    if engine == "sglang" and attention_dp:
        notes.append(f"{batch:,} sequences per data-parallel attention rank: SGLang's "
                     "--max-running-requests and --chunked-prefill-size count all ranks "
                     "together; set them for the sum")
    else:
        add("max_batch", batch)
        # the engine's prompt tokens per pass; prefill chunks bound it from below
        add("max_tokens", min(cfg.chunk, cfg.max_num_tokens) if cfg.chunk
            else cfg.max_num_tokens)
    if cfg.chunk and engine == "trtllm":
        options.append("enable_chunked_prefill: true")
    add("max_len", cfg.input_len + cfg.output_len)
    if cfg.cpu_offload_gib:
        if "cpu_offload" in f:
            add("cpu_offload", f"{cfg.cpu_offload_gib:g}")
        else:
            notes.append(f"{cfg.cpu_offload_gib:g} GiB of weights per GPU in host memory: the "
                         f"estimate assumed it; {info['name']} has no such setting here")
    # formats
    q = cfg.quant
    weights = q.weights.value
    if not q.weights.is_16bit and weights != checkpoint_weights:
        if weights == "fp8" and engine != "trtllm":
            add("quantization", values["weights_fp8"])
            notes.append("FP8 weights quantized when the server loads a 16-bit checkpoint; "
                         "a pre-quantized FP8 checkpoint needs no flag")
        else:
            notes.append(f"{weights} weights: load a checkpoint quantized so "
                         f"({_CHECKPOINTS.get(weights, weights)}); the server reads the "
                         "method from it")
    if cfg.expert_weights is not None and cfg.expert_weights.value != checkpoint_experts:
        notes.append(f"{cfg.expert_weights.value} experts: a checkpoint that stores them so")
    kv = q.kv_cache.value
    kv_value = values.get(f"kv_{kv}")
    cache_options: list[str] = []  # TensorRT-LLM's kv_cache_config
    if kv_value is not None:
        if engine == "trtllm":
            cache_options.append(f"dtype: {kv_value}")
        else:
            add("kv_cache", kv_value)
        if kv == "fp4":
            notes.append("an NVFP4 KV cache runs on B200/B300 (sm100/103) only and wants a "
                         "checkpoint that carries its scales (NVIDIA ModelOpt's "
                         "--kv_cache_quant nvfp4)")
    elif not q.kv_cache.is_16bit:
        notes.append(f"KV cache in {kv}: no {info['name']} setting for it here")
    state = _state_setting(engine, shape, cfg.ssm_state_precision)
    if isinstance(state, tuple):
        key, value = state
        if engine == "trtllm":
            cache_options.append(f"mamba_ssm_cache_dtype: {value}")
        else:
            add(key, value)
    elif state:
        notes.append(state)
    if cache_options:
        options.append("kv_cache_config:\n" + "\n".join(f"  {o}" for o in cache_options))
    # engine properties the estimate was made with
    if engine == "trtllm":
        if cfg.kv_cache_fraction:
            add("kv_fraction", cfg.kv_cache_fraction)
        if cfg.cuda_graph_batch_sizes:
            sizes = ", ".join(str(b) for b in sorted(cfg.cuda_graph_batch_sizes))
            options.append(f"cuda_graph_config:\n  enable_padding: true\n  batch_sizes: "
                           f"[{sizes}]")
        if cfg.executor == "cpp":
            add("backend", "tensorrt")
            notes.append("--backend tensorrt serves a built TensorRT engine (the C++ "
                         "executor the estimate assumed)")
        elif cfg.executor != "python":
            notes.append(f"the estimate assumed {cfg.executor}'s engine loop; TensorRT-LLM's "
                         "PyTorch backend runs its own (estimate with --executor python)")
        if options:
            name = info["options_file"]
            add("options", name)
            files.append((name, "\n".join(options) + "\n"))
    else:
        if cfg.kv_cache_fraction:
            notes.append(f"KV cache at {cfg.kv_cache_fraction:g} of free memory: "
                         f"{info['name']}'s memory fraction counts the whole GPU")
        if cfg.executor != engine:
            assumed = ("a C++ executor" if cfg.executor == "cpp" else
                       f"{cfg.executor}'s engine loop" if cfg.executor != "python" else
                       "TensorRT-LLM's PyTorch executor")
            notes.append(f"the estimate assumed {assumed}; {info['name']} runs its own "
                         f"(estimate with --executor {engine})")
    if cfg.speculative_tokens:
        notes.append(f"speculative decoding with {cfg.speculative_tokens} draft tokens: the "
                     "draft method (MTP, EAGLE, n-gram) is yours to set")
        if engine == "sglang":
            # ServerArgs._handle_speculative_decoding: EAGLE (NEXTN too) and n-gram drafting
            # set max_running_requests to 48 when it is not given
            capped = ("; it is not written here, so give it" if attention_dp
                      else "; it is written above")
            notes.append("SGLang caps running requests at 48 under speculative decoding "
                         f"unless --max-running-requests is given{capped}")
    if cfg.cuda_graph_max_context:
        notes.append(f"the estimate ran decode steps past {cfg.cuda_graph_max_context:,} "
                     "tokens without a CUDA graph (--cuda-graph-max-context), as vLLM "
                     f"before V1 did; {info['name']} as launched here replays graphs by "
                     "batch size at any context")
    if cfg.batching.value == "static":
        notes.append("the estimate batched statically, a benchmark mode; servers batch in "
                     "flight (estimate with --batching continuous)")
    from gpuarch.estimate.inference_config import engine_of

    if moe and engine_of(cfg.moe_kernels) != engine:  # --moe-kernels names the engines
        notes.append(f"the estimate charged {cfg.moe_kernels}'s MoE kernels; "
                     f"--moe-kernels {engine} prices this engine's")
    return Launch(engine, info["name"], info["checked"], tuple(argv), tuple(notes),
                  tuple(files), head)


def _state_setting(engine: str, shape: Any, state: str) -> tuple[str, str] | str:
    """How ``engine`` is told to keep ``shape``'s recurrent state in ``state`` (the
    estimate's format): the flag's key in launch.toml and its value, or a note where it
    cannot be, or "" where its default is that format already
    (``estimate.mamba.default_state_precision``)."""
    from gpuarch.estimate.mamba import default_state_precision

    m = shape.mamba
    if m is None or not m.state or state == default_state_precision(shape, engine):
        return ""
    info = engine_info(engine)
    label = f"the {m.label} state in {state}"
    if m.kind == "kda" and engine != "sglang":  # SGLang's follows --mamba-ssm-dtype
        return (f"{label}: {info['name']} keeps Kimi Delta Attention's state in FP32 "
                "whatever it is asked (estimate with --ssm-state-precision fp32)")
    if m.lightning and engine == "sglang":
        return f"{label}: SGLang's setting for lightning attention's state was not read"
    value = info.get("values", {}).get(f"state_{state}")
    if value is None:
        return f"{label}: {info['name']} has no such setting"
    return ("linear_state" if m.lightning and engine == "vllm" else "ssm_state", value)


def best_training_launch(catalog: Any, shape: Any, search: Any, advice: Any) -> Launch | str:
    """Megatron-LM's command for a training advice's option 1, or why there is none."""
    from gpuarch.advise.train import option_config

    if not advice.top:
        return "no option to launch"
    best = advice.top[0]
    system = catalog.system_for(catalog.product(best.gpu))
    return megatron_launch(shape, option_config(search, best, system, shape))


def best_serving_launch(engine: str, shape: Any, search: Any, advice: Any, model: str,
                        checkpoint: Any = None) -> Launch | str:
    """``engine``'s server command for a serving advice's option 1 (``model`` as given to
    --model), or why there is none (nothing qualified; a disaggregated pick)."""
    from gpuarch.advise.infer import option_config

    if not advice.top:
        return "no option to launch"
    best = advice.top[0]
    if best.prefill is not None:
        return ("option 1 is disaggregated: its prefill and decode pools are started under "
                "a router (NVIDIA Dynamo, or the engine's own), not one command")
    return serving_launch(engine, shape, option_config(search, best), model_reference(model),
                          best.batch, checkpoint)
