"""FLOPs per token of a transformer, in the conventions published MFU figures use.

Matrix multiplies cost 2 FLOP per multiply-accumulate. The attention core (QK^T and AV)
costs 4 x seq x heads x head_dim per layer per token when counted in full, as Megatron-LM
(Narayanan et al. 2021, eq. 3) and PaLM (Chowdhery et al. 2022, appendix B) count it;
``causal=True`` halves it, as FlashAttention's causal kernels actually compute.
Training is forward + backward = 3 x forward; recomputation adds forward work on top
(hardware FLOPs, HFU), never model FLOPs (MFU).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuarch.workloads.params import attention_params, count_params, mlp_params
from gpuarch.workloads.shape import TransformerShape

__all__ = ["ForwardFlops", "forward_flops_per_token", "training_flops_per_token"]


@dataclass(frozen=True)
class ForwardFlops:
    """Forward FLOPs per token by component, at one sequence length."""

    attention_proj: float  # QKV and output projections, all layers
    attention_core: float  # QK^T and AV, all layers
    mlp: float  # dense MLPs plus the experts a token is routed to (and shared experts)
    router: float
    lm_head: float

    @property
    def total(self) -> float:
        return (self.attention_proj + self.attention_core + self.mlp + self.router
                + self.lm_head)


def _core_dims(s: TransformerShape) -> tuple[int, int]:
    if s.mla is not None:
        return (s.mla.qk_nope_head_dim + s.mla.qk_rope_head_dim, s.mla.v_head_dim)
    return (s.d_head, s.d_head)


def forward_flops_per_token(s: TransformerShape, seq_len: int, *, causal: bool = False
                            ) -> ForwardFlops:
    """Forward FLOPs per token for sequences of ``seq_len`` tokens."""
    pc = count_params(s)
    qk_dim, v_dim = _core_dims(s)
    core = 2.0 * seq_len * s.heads * (qk_dim + v_dim) * s.layers
    if causal:
        core /= 2
    per_token_mlp = (s.layers - s.moe_layers) * mlp_params(s, s.d_ffn) + s.moe_layers * (
        s.experts_per_token + s.shared_experts) * mlp_params(s, s.d_expert)
    return ForwardFlops(
        attention_proj=2.0 * s.layers * attention_params(s),
        attention_core=float(core),
        mlp=2.0 * per_token_mlp,
        router=2.0 * pc.router,
        lm_head=2.0 * s.vocab * s.hidden,
    )


def training_flops_per_token(s: TransformerShape, seq_len: int, *, causal: bool = False
                             ) -> float:
    """Model FLOPs per trained token: forward + backward, no recomputation."""
    return 3.0 * forward_flops_per_token(s, seq_len, causal=causal).total
