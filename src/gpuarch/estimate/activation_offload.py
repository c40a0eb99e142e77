"""Megatron-Core's fine-grained activation offloading (``--fine-grained-activation-offloading
--offload-modules``): what a named module keeps for its backward pass goes to host memory
after its forward pass and comes back before its backward, one module at a time, so that a
run keeps less on the GPU without recomputing anything.

The module names and the rules below are Megatron-Core's (``TransformerConfig``'s checks of
``offload_modules``: megatron/core/transformer/transformer_config.py); what each module's
offloading leaves on the GPU is costed by ``memory.activation_bytes_per_layer`` and its
copies by ``training_step``.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuarch.errors import GpuarchError, check_names
from gpuarch.workloads.shape import TransformerShape

__all__ = ["ATTENTION_MODULES", "DEFAULT_MIN_ELEMENTS", "OFFLOAD_MODULES", "OFFLOAD_TAG_KEY",
           "check_offload_modules", "expert_modules", "offload_tag"]

OFFLOAD_MODULES = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm",
                   "expert_fc1", "moe_act", "fused_group_mlp")
"""The modules whose kept tensors can be offloaded: the attention norm's input, the QKV
projection's input, the attention core's (queries, keys, values), the output projection's,
the MLP norm's input, the routed experts' first projection's input and the activation's,
and everything the fused grouped MLP keeps (Transformer Engine's op fuser)."""

DEFAULT_MIN_ELEMENTS = 1024 * 1024
"""Megatron-Core's ``min_offloaded_tensor_size``: a tensor of fewer elements stays."""

_EXPERT_MODULES = ("expert_fc1", "moe_act", "fused_group_mlp")


def expert_modules(fused_mlp: bool) -> tuple[str, ...]:
    """The modules that offload what a routed expert layer keeps (its largest tensors: the
    first projection's input and output): ``fused_group_mlp`` under the fused grouped MLP
    (``--expert-launches fused-mlp``), else ``expert_fc1`` and ``moe_act``."""
    return ("fused_group_mlp",) if fused_mlp else ("expert_fc1", "moe_act")


ATTENTION_MODULES = ("core_attn", "attn_proj")
"""The modules that offload what an attention layer keeps at the heads' width: the queries,
keys and values the attention core saves and its output (the output projection's input),
the pair Megatron-Core's recipes name for attention offloading."""


OFFLOAD_TAG_KEY = ("+off: = activations offloaded to host memory, moe = the routed experts' "
                   "(expert_fc1,moe_act), attn = the attention core's (core_attn,attn_proj)")
"""What ``offload_tag``'s names mean, for the tables that print them."""


def offload_tag(modules: Iterable[str]) -> str:
    """A short name for a set of offloaded modules: ``moe`` for the experts' set (either
    form, ``expert_modules``), ``attn`` for ``ATTENTION_MODULES``, ``moe,attn`` for both,
    else the modules themselves, comma-separated."""
    mods = set(modules)
    experts = next((set(expert_modules(f)) for f in (False, True)
                    if set(expert_modules(f)) <= mods), set())
    attention = set(ATTENTION_MODULES) if set(ATTENTION_MODULES) <= mods else set()
    if mods and mods == experts | attention:
        return ",".join(tag for tag, part in (("moe", experts), ("attn", attention)) if part)
    return ",".join(m for m in OFFLOAD_MODULES if m in mods)


def check_offload_modules(modules: Iterable[str], shape: TransformerShape, *,
                          recompute_modules: Iterable[str] = (), offload_layers: int = 0,
                          fused_mlp: bool = False, min_elements: int = DEFAULT_MIN_ELEMENTS
                          ) -> tuple[str, ...]:
    """The modules as a tuple without repeats, or an error naming ``--offload-modules``:
    an unknown name (with the closest one), a module the model has nothing for, or a
    combination Megatron-Core refuses (with layer offloading; ``attn_proj`` without
    ``core_attn``; the expert modules while the whole expert layer is recomputed; the fused
    grouped MLP's module without the fused MLP, or the unfused ones with it)."""
    out = check_names("--offload-modules", modules, OFFLOAD_MODULES)
    if isinstance(min_elements, bool) or not isinstance(min_elements, int) \
            or min_elements < 0:
        raise GpuarchError(f"--offload-min-elements: expected an integer >= 0, got "
                           f"{min_elements!r}")
    if not out:
        return ()
    if offload_layers:
        raise GpuarchError("--offload-modules: fine-grained offloading cannot be combined "
                           f"with --offload-layers {offload_layers} (Megatron-Core refuses "
                           "both at once)")
    if "attn_proj" in out and "core_attn" not in out:
        raise GpuarchError("--offload-modules: 'attn_proj' needs 'core_attn' too (the "
                           "output projection's input is the attention core's output)")
    experts = [n for n in out if n in _EXPERT_MODULES]
    if experts and not shape.is_moe:
        raise GpuarchError(f"--offload-modules: {shape.name} has no expert layers for "
                           f"{', '.join(repr(n) for n in experts)}")
    if experts and "moe" in set(recompute_modules):
        raise GpuarchError(f"--offload-modules: {', '.join(repr(n) for n in experts)} "
                           "cannot be offloaded while the whole expert layer is recomputed "
                           "(--recompute-modules moe)")
    if "fused_group_mlp" in out:
        if not fused_mlp:
            raise GpuarchError("--offload-modules: 'fused_group_mlp' needs the fused grouped "
                               "MLP (--expert-launches fused-mlp)")
        if len(experts) > 1:
            raise GpuarchError("--offload-modules: 'fused_group_mlp' already holds the "
                               "experts' tensors; not with "
                               f"{', '.join(repr(n) for n in experts if n != 'fused_group_mlp')}")
    elif experts and fused_mlp:
        raise GpuarchError(f"--offload-modules: with the fused grouped MLP (--expert-launches "
                           f"fused-mlp) the experts' tensors are offloaded as "
                           f"'fused_group_mlp', not {', '.join(repr(n) for n in experts)}")
    attention = [n for n in out if n in ("attn_norm", "qkv_linear", "core_attn",
                                         "attn_proj")]
    if attention and shape.is_hybrid and "*" not in shape.hybrid_pattern:
        raise GpuarchError(f"--offload-modules: {shape.name} has no attention blocks for "
                           f"{', '.join(repr(n) for n in attention)}")
    return out
