"""LoRA fine-tuning: which linear layers carry adapters, what they hold and cost.

Low-rank adaptation (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models",
arXiv:2106.09685) freezes the model's weights and trains, beside each chosen linear layer
W (d_in -> d_out), two matrices A (d_in -> r) and B (r -> d_out) whose product is added to
the layer's output. What that changes in a training step:

- the frozen layers' weight gradients are not computed (their backward pass keeps only the
  data gradient, which the layers below need), nor reduced across data-parallel ranks,
  nor stepped by the optimizer;
- each adapter adds two thin GEMMs and the add of its output, forward, and their data and
  weight gradients backward;
- memory holds the frozen weights (16-bit, or FP8 with ``fp8_params``) and, for the
  adapters alone, weights, gradients and optimizer states.

Module names are Megatron Bridge's (``megatron/bridge/peft/lora.py``'s ``target_modules``),
one per fused linear layer of a Megatron transformer layer. An expert layer's
``linear_fc1`` and ``linear_fc2`` are its shared experts' and every routed expert's, each
expert with adapters of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuarch.errors import check_names
from gpuarch.workloads.flops import attention_projections
from gpuarch.workloads.shape import TransformerShape

__all__ = ["DEFAULT_LORA_MODULES", "LORA_MODULES", "LoraParams", "adapted_gemms",
           "check_lora_modules", "lora_forward_flops_per_token", "lora_params"]

LORA_MODULES: dict[str, str] = {
    "linear_qkv": "the attention block's input projections (fused QKV; with latent "
                  "attention its query and key/value down- and up-projections)",
    "linear_proj": "the attention block's output projection",
    "linear_fc1": "the MLP's up (and gate) projection; in an expert layer the shared "
                  "experts' and each routed expert's",
    "linear_fc2": "the MLP's down projection; in an expert layer the shared experts' and "
                  "each routed expert's",
}
"""The linear layers an adapter can be attached to, by Megatron Bridge's names."""

DEFAULT_LORA_MODULES: tuple[str, ...] = tuple(LORA_MODULES)
"""What ``--lora-rank`` adapts when no module is named: all four linear layers, Megatron
Bridge's ``LoRA.target_modules`` default."""

_MLP_GEMMS = {"linear_fc1": ("mlp_up", "shared_up", "grouped_expert_up"),
              "linear_fc2": ("mlp_down", "shared_down", "grouped_expert_down")}


def check_lora_modules(modules: Iterable[str]) -> tuple[str, ...]:
    """The modules as a tuple without repeats, or an error naming ``--lora-modules`` for a
    name that is not one of ``LORA_MODULES`` (with the closest one)."""
    return check_names("--lora-modules", modules, LORA_MODULES)


def adapted_gemms(shape: TransformerShape, modules: Iterable[str]) -> frozenset[str]:
    """The names of the training model's GEMMs (``estimate/training_layers.py``, ``_layer_ops``)
    that carry an adapter when ``modules`` are adapted."""
    names: set[str] = set()
    projections = [name for name, _, _ in attention_projections(shape)]
    for module in modules:
        if module == "linear_qkv":
            names.update(projections[:-1])
        elif module == "linear_proj":
            names.add(projections[-1])
        else:
            names.update(_MLP_GEMMS[module])
    return frozenset(names)


@dataclass(frozen=True)
class LoraParams:
    """Trainable adapter parameters of the whole model: those outside the routed experts
    (attention, dense MLPs, shared experts) and those of the routed experts."""

    dense: int
    experts: int

    @property
    def total(self) -> int:
        return self.dense + self.experts


def _widths(shape: TransformerShape, modules: Iterable[str]) -> tuple[int, int, int, int]:
    """Sums of d_in + d_out over the adapted linear layers of one layer: (attention,
    a dense layer's MLP, an expert layer's shared experts, one routed expert)."""
    attention = dense = shared = expert = 0
    up = 2 if shape.ffn_kind.gated else 1
    wanted = set(modules)
    projections = attention_projections(shape)
    for i, (_, n, k) in enumerate(projections):
        last = i == len(projections) - 1
        if (last and "linear_proj" in wanted) or (not last and "linear_qkv" in wanted):
            attention += n + k

    def mlp(module: str, width: int) -> int:
        # fc1: hidden -> (2 x) width; fc2: width -> hidden
        return shape.hidden + (up * width if module == "linear_fc1" else width)

    for module in ("linear_fc1", "linear_fc2"):
        if module in wanted:
            dense += mlp(module, shape.d_ffn)
            if shape.is_moe:
                shared += mlp(module, shape.shared_experts * shape.d_expert) \
                    if shape.shared_experts else 0
                expert += mlp(module, shape.d_expert)
    return attention, dense, shared, expert


def lora_params(shape: TransformerShape, rank: int, modules: Iterable[str]) -> LoraParams:
    """Adapter parameters of rank ``rank`` on ``modules`` in every transformer layer: r x
    (d_in + d_out) per adapted linear layer (no biases)."""
    attention, dense, shared, expert = _widths(shape, modules)
    dense_layers = shape.layers - shape.moe_layers
    outside = (shape.layers * attention + dense_layers * dense
               + shape.moe_layers * shared) * rank
    routed = shape.moe_layers * shape.experts * expert * rank
    return LoraParams(dense=outside, experts=routed)


def lora_forward_flops_per_token(shape: TransformerShape, rank: int,
                                 modules: Iterable[str]) -> float:
    """Forward FLOPs per token of the adapters: 2 x r x (d_in + d_out) per adapted linear
    layer a token passes through (its routed experts' and the shared ones in an expert
    layer)."""
    attention, dense, shared, expert = _widths(shape, modules)
    dense_layers = shape.layers - shape.moe_layers
    per_token = (shape.layers * attention + dense_layers * dense
                 + shape.moe_layers * (shared + shape.experts_per_token * expert))
    return 2.0 * rank * per_token
