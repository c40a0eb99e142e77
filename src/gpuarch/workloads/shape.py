"""The shape of a decoder-only transformer: dense, GQA/MQA, SwiGLU or GELU, MoE, MLA.

A shape holds only what determines parameter and FLOP counts. Validation names the field
and the bad value.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from functools import lru_cache
from typing import Any

from gpuarch.errors import GpuarchError, check_count, check_number

__all__ = [
    "CSA_RATIO",
    "FINE_GRAINED_EXPERTS",
    "HYBRID_BLOCKS",
    "STATE_FORMATS",
    "BlockSparseAttention",
    "CompressedAttention",
    "FfnKind",
    "FullAttention",
    "MambaShape",
    "MlaShape",
    "NormKind",
    "Position",
    "QkNorm",
    "TransformerShape",
]


class FfnKind(Enum):
    """The MLP block of a layer."""

    GELU = "gelu"  # two matrices: h -> ffn -> h (GPT, Megatron GPT)
    RELU = "relu"  # the same two matrices with a ReLU (OPT)
    SWIGLU = "swiglu"  # three matrices: gate and up h -> ffn, down ffn -> h (Llama, Mistral)
    GEGLU = "geglu"  # the same three matrices with a GELU gate (Gemma)
    RELU2 = "relu2"  # squared ReLU, two matrices (Nemotron-4)
    XIELU = "xielu"  # xIELU, two matrices and two learned scalars (Apertus)
    RELU2_GLU = "relu2_glu"  # three matrices with a squared-ReLU gate (BitNet)

    @property
    def gated(self) -> bool:
        """A gated linear unit: the up projection is twice the MLP's width (gate and up)."""
        return self in (FfnKind.SWIGLU, FfnKind.GEGLU, FfnKind.RELU2_GLU)

    @property
    def matrices(self) -> int:
        return 3 if self.gated else 2

    @property
    def activation_params(self) -> int:
        """Learned parameters of one MLP's activation: xIELU's two scalars (alpha_p and
        alpha_n, Transformers' XIELUActivation); none for the others."""
        return 2 if self is FfnKind.XIELU else 0


class NormKind(Enum):
    """Normalisation layers: LayerNorm has a weight and a bias, RMSNorm a weight only, and a
    LayerNorm without its affine transform (OLMo 1's OlmoLayerNorm) or an RMSNorm without its
    weight (nanochat's NanoChatRMSNorm) neither."""

    LAYERNORM = "layernorm"
    RMSNORM = "rmsnorm"
    LAYERNORM_NO_AFFINE = "layernorm_no_affine"
    RMSNORM_NO_WEIGHT = "rmsnorm_no_weight"

    @property
    def params_per_width(self) -> int:
        return {NormKind.LAYERNORM: 2, NormKind.RMSNORM: 1}.get(self, 0)

    @property
    def plural(self) -> str:
        """Its name in text, for several of them."""
        return {NormKind.LAYERNORM: "LayerNorms", NormKind.RMSNORM: "RMSNorms",
                NormKind.RMSNORM_NO_WEIGHT: "RMSNorms without weights"}.get(
            self, "LayerNorms without weights")


class QkNorm(Enum):
    """A norm on the queries and keys before the attention scores: none, one over each head's
    width (Qwen3, Gemma 3; its weights a head's width each for queries and keys) or one over
    all heads together (OLMo 2; weights as wide as the query and key projections)."""

    NONE = "none"
    HEAD = "head"
    FULL = "full"


class Position(Enum):
    """Position encoding: rotary (no parameters), a learned table, ALiBi (a fixed bias on
    the attention scores by distance, no parameters: BLOOM), or none (Nemotron-H's
    attention blocks, which Megatron-LM builds with --position-embedding-type none:
    examples/mamba/train.sh and its hybrid checkpoint loader)."""

    ROPE = "rope"
    LEARNED = "learned"
    ALIBI = "alibi"
    NONE = "none"


INDEX_KEY_SCALE_BYTES = 4
"""Bytes of the one FP32 scale stored with each token's FP8 index key per 128 channels
(DeepSeek-V3.2-Exp inference/model.py: the indexer's ``k_scale_cache`` holds head_dim / 128
FP32 scales beside its ``float8_e4m3fn`` ``k_cache``)."""


@dataclass(frozen=True, kw_only=True)
class MlaShape:
    """Multi-head latent attention (DeepSeek-V2/V3): low-rank queries and a compressed KV.

    With ``index_topk`` (DeepSeek Sparse Attention, DeepSeek-V3.2): a lightning indexer in
    each attention layer scores every earlier position for each query with ``index_heads``
    heads of ``index_head_dim`` (queries from the compressed query, one shared key per
    position, ReLU, a learned weight per head), and the attention then attends to the
    ``index_topk`` best-scoring positions only. Its weights (DeepSeek-V3.2-Exp
    inference/model.py, ``Indexer``): wq_b (q_lora_rank to heads x head_dim), wk (hidden to
    head_dim), a LayerNorm over the key (weight and bias) and weights_proj (hidden to
    heads); it caches one FP8 key of ``index_head_dim`` and its scale per position."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    index_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0  # positions each query attends to; 0 = dense attention (no indexer)
    # layers with an indexer of their own; the others reuse the choice of the last layer
    # before them that has one (GLM-5.2's shared indexers, indexer_types "shared"); 0 = every
    # attention layer has its own
    index_layers: int = 0
    # the query up-projection reads the query latent beside its norm (2 x q_lora_rank wide)
    # and writes the queries and a sigmoid gate a channel of the attention's output
    # (A.X K2's q_gate_proj), in place of a query up-projection of queries alone
    q_gate: bool = False
    # an RMSNorm over the shared rotary key before its rotation, qk_rope_head_dim weights a
    # layer (dots3-note's k_rope_only_layernorm)
    rope_key_norm: bool = False

    def __post_init__(self) -> None:
        _positive("q_lora_rank", self.q_lora_rank, minimum=0)  # 0: queries not compressed
        if self.q_gate and not self.q_lora_rank:
            raise GpuarchError("q_gate: the gated query projection reads the query latent; it "
                               "needs q_lora_rank > 0")
        _positive("qk_nope_head_dim", self.qk_nope_head_dim, minimum=0)
        _positive("qk_rope_head_dim", self.qk_rope_head_dim, minimum=0)
        for name in ("kv_lora_rank", "v_head_dim"):
            _positive(name, getattr(self, name))
        for name in ("index_heads", "index_head_dim", "index_topk", "index_layers"):
            _positive(name, getattr(self, name), minimum=0)
        if self.qk_nope_head_dim + self.qk_rope_head_dim < 1:
            raise GpuarchError("qk_nope_head_dim + qk_rope_head_dim: a query-key head needs "
                               "at least one dimension, got 0")
        given = [n for n in ("index_heads", "index_head_dim", "index_topk") if getattr(self, n)]
        if given and len(given) < 3:
            missing = sorted({"index_heads", "index_head_dim", "index_topk"} - set(given))
            raise GpuarchError(f"{missing[0]}: sparse attention's indexer needs index_heads, "
                               "index_head_dim and index_topk together")
        if given and not self.q_lora_rank:
            raise GpuarchError("index_topk: sparse attention's indexer reads the compressed "
                               "query; it needs q_lora_rank > 0")
        if not isinstance(self.rope_key_norm, bool) or not isinstance(self.q_gate, bool):
            raise GpuarchError("q_gate / rope_key_norm: expected true or false")
        if self.index_layers and not given:
            raise GpuarchError("index_layers: layers with an indexer need sparse attention "
                               "(index_heads, index_head_dim, index_topk)")

    @property
    def sparse(self) -> bool:
        """DeepSeek Sparse Attention: each query attends to ``index_topk`` positions its
        indexer picks."""
        return self.index_topk > 0

    @property
    def index_key_bytes(self) -> int:
        """Bytes the indexer caches per position and layer: an FP8 key and its FP32 scale
        per 128 channels (0 without an indexer)."""
        if not self.sparse:
            return 0
        return self.index_head_dim + INDEX_KEY_SCALE_BYTES * -(-self.index_head_dim // 128)

    @property
    def latent_width(self) -> int:
        """Width cached per token and layer: the compressed KV plus the shared rotary key."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def flashmla_fp8_bytes(self) -> int:
        """Bytes of one position's latent in FlashMLA's FP8 layout for sparse attention: the
        compressed KV in FP8 with an FP32 scale per 128 channels, the rotary key in BF16
        (656 for DeepSeek-V3.2: FlashMLA's README, vLLM's ``fp8_ds_mla``)."""
        return self.kv_lora_rank + 4 * -(-self.kv_lora_rank // 128) + 2 * self.qk_rope_head_dim


CSA_RATIO = 4
"""The compression ratio of DeepSeek-V4's compressed sparse attention (CSA) layers: their
compressor pools overlapping windows (two projections of the head width a token) and an
indexer picks the entries each query attends to; a layer of any other ratio above 1 is
heavily compressed (HCA): one projection, disjoint windows, every entry attended to
(DeepSeek-V4 inference/model.py: ``overlap = compress_ratio == 4``, the indexer built only
for ratio 4; vLLM's deepseek_v4 attention the same)."""


@dataclass(frozen=True, kw_only=True)
class CompressedAttention:
    """DeepSeek-V4's hybrid attention: every layer attends, with one shared key-value head
    of the model's ``head_dim`` (keys and values one vector), to the last ``window``
    positions, and most layers also to compressed entries that each pool ``ratio``
    positions: a CSA layer (``CSA_RATIO``) to the ``index_topk`` of its entries its
    lightning indexer picks, an HCA layer to all of them; ``ratios`` gives each layer's
    ratio (0: the window only). Queries come through a low-rank projection (``q_lora_rank``,
    as MLA's); the output projection is grouped and low-rank: the heads in ``o_groups``
    groups, each projected to ``o_lora_rank``, then together to the hidden size.

    Weights a layer (DeepSeek-V4 inference/model.py, the deepseek-ai/DeepSeek-V4-Pro
    checkpoint's tensors): wq_a, its norm, wq_b, wkv and its norm, wo_a (grouped), wo_b and a
    sink logit per head; a compressor where the ratio is above 0 (wkv and wgate to the head
    width, twice it in CSA layers, a learned bias per window position, a norm); in CSA
    layers an indexer: wq_b from the compressed query to ``index_heads`` x
    ``index_head_dim``, weights_proj from the hidden state to one weight a head, and its own
    overlapping compressor of ``index_head_dim`` (its keys: no wk)."""

    q_lora_rank: int
    rope_head_dim: int
    o_groups: int
    o_lora_rank: int
    window: int
    ratios: tuple[int, ...]
    index_heads: int
    index_head_dim: int
    index_topk: int

    def __post_init__(self) -> None:
        for name in ("q_lora_rank", "o_groups", "o_lora_rank", "window", "index_heads",
                     "index_head_dim", "index_topk"):
            _positive(f"compressed.{name}", getattr(self, name))
        _positive("compressed.rope_head_dim", self.rope_head_dim, minimum=0)
        if not isinstance(self.ratios, tuple) or not self.ratios:
            raise GpuarchError(f"compressed.ratios: expected one ratio a layer, got "
                               f"{self.ratios!r}")
        for ratio in self.ratios:
            if ratio == 1:
                raise GpuarchError("compressed.ratios: a ratio of 1 compresses nothing; "
                                   "give 0 for a layer that attends to its window only")
            _positive("compressed.ratios", ratio, minimum=0)

    def layers_of(self, ratio: int) -> int:
        """How many layers have ``ratio`` (0: the window only)."""
        return self.ratios.count(ratio)

    @property
    def csa_layers(self) -> int:
        """Layers of compressed sparse attention (with an indexer)."""
        return self.layers_of(CSA_RATIO)

    def kinds(self) -> list[tuple[int, float]]:
        """(ratio, share of the layers) for each ratio the layers have, smallest first."""
        return [(r, self.ratios.count(r) / len(self.ratios)) for r in sorted(set(self.ratios))]

    @staticmethod
    def overlaps(ratio: int) -> bool:
        """Whether a layer of ``ratio`` pools overlapping windows (two projections a token):
        the CSA layers."""
        return ratio == CSA_RATIO

    def entry_bytes(self, element: float, head_dim: int) -> float:
        """Bytes of one cached entry (a window position or a compressed one) of ``head_dim``
        channels in a cache of ``element`` bytes: in a one-byte cache the engines' FP8
        layout, the non-rotary channels in FP8 with a UE8M0 scale per 64 and a pad byte, the
        rotary ones in BF16 (584 bytes for V4's 512 with 64 rotary: vLLM
        vllm/models/deepseek_v4/attention.py @0484480b, ``fp8_ds_mla``; SGLang
        deepseek_v4_memory_pool.py @007bddd4, the same layout); else every channel at the
        element's width."""
        if element == 1.0:
            return float(head_dim - self.rope_head_dim + 2 * self.rope_head_dim
                         + -(-(head_dim - self.rope_head_dim) // 64) + 1)
        return float(head_dim * element)

    @property
    def index_key_bytes(self) -> int:
        """Bytes the indexer caches per compressed entry: an FP8 key and its FP32 scale per
        128 channels (vLLM's and SGLang's V4 indexer cache, 132 bytes, as V3.2's)."""
        return self.index_head_dim + INDEX_KEY_SCALE_BYTES * -(-self.index_head_dim // 128)


HYBRID_BLOCKS = {"M": "recurrent mixer (Mamba-2 or Gated DeltaNet)", "*": "attention",
                 "-": "MLP", "E": "mixture of experts"}
"""The block kinds of a hybrid layer pattern (Nemotron-H's ``hybrid_override_pattern``):
each character is one block with its own pre-norm and residual. A model's recurrent blocks
are all of one kind, its ``MambaShape.kind``."""

MIXER_KINDS = {"mamba2": "Mamba-2", "gated_delta": "Gated DeltaNet",
               "kda": "Kimi Delta Attention", "mamba1": "Mamba-1",
               "lightning": "lightning attention", "short_conv": "short convolution",
               "mlstm": "mLSTM", "rwkv4": "RWKV-4 time mixing"}
"""The recurrent mixers a hybrid model's "M" blocks can be, and their names: Mamba-2's
state-space duality (Nemotron-H, Granite 4.0), the gated delta rule (Yang et al., "Gated
Delta Networks", ICLR 2025: Qwen3-Next, Qwen3.5) and its refinement with a decay per
channel rather than per head (Kimi Team, "Kimi Linear", arXiv 2510.26692: Kimi Linear), and
Mamba-1's selective scan (Gu and Dao, "Mamba", arXiv 2312.00752: Jamba, Falcon Mamba), and
lightning attention, linear attention with a fixed decay a head computed block by block
(MiniMax, "MiniMax-01", arXiv 2501.08313: MiniMax-Text-01, MiniMax-M1), and a gated short
convolution with no recurrent state (Liquid AI's LFM2)."""

STATE_FORMATS = ("", "fp32", "bf16", "fp16")
"""The formats a checkpoint's config.json can name for a recurrent state ("" none)."""


@dataclass(frozen=True, kw_only=True)
class MambaShape:
    """A hybrid model's recurrent mixer block, ``kind`` one of ``MIXER_KINDS``.

    Mamba-2 (Nemotron-H): ``heads`` SSM heads of ``head_dim`` channels (together the inner
    width), a state of ``state`` per head shared by ``groups`` groups of B and C, a
    depthwise causal convolution of ``conv_kernel`` taps over x, B and C. Weights
    (Transformers' NemotronHMamba2Mixer): the input projection to z, x, B, C and one dt per
    head; the convolution's taps (and bias); dt_bias, A_log and D per head; a gated RMSNorm
    over the inner width; the output projection.

    Gated DeltaNet (Qwen3-Next, Qwen3.5), the same sizes under other names: ``heads`` value
    heads of ``head_dim`` channels, ``groups`` key heads (queries and keys) of ``state``
    channels, so that each value head keeps a ``state`` x ``head_dim`` matrix; the
    convolution runs over q, k and v. Weights (Transformers' Qwen3NextGatedDeltaNet): the
    input projection to q, k, v, the output gate z and two per value head (beta and the
    decay's a); the convolution's taps, no bias; dt_bias and A_log per value head; a gated
    RMSNorm whose weight is one head's width, shared by the heads; the output
    projection.

    Kimi Delta Attention (Kimi Linear), the same sizes again with as many key heads as value
    heads (``groups`` = ``heads``, ``state`` = ``head_dim``). Weights (Transformers'
    KimiLinearDeltaAttention): q, k and v projections; the convolution's taps over them, no
    bias; beta, one a head; the decay and the output gate each a low-rank pair, hidden to
    one head's width (the same on every tensor-parallel GPU, as vLLM runs them) and back up
    to the inner width; dt_bias a channel and A_log a head; the gated RMSNorm's one
    head-wide weight; the output projection.

    Mamba-1 (Jamba, Falcon Mamba, state-spaces' Mamba): every channel of the inner width has
    its own state of ``state`` elements and its own step, so the shape holds it as ``heads``
    = the inner width, ``head_dim`` 1 and one group (B and C, computed from each token, are
    shared by every channel). Weights (Transformers' MambaMixer, JambaMambaMixer): the input
    projection to x and z; the convolution's taps over x (and bias); x_proj from x to the
    step's ``dt_rank`` low-rank input and B and C, no bias; dt_proj from that rank to a step a
    channel, with bias; A_log (a channel x ``state``) and D a channel; with ``dt_bc_norms``
    (Jamba) an RMSNorm weight over the step's rank and over B and C each; the output
    projection. No gated norm: the gate z is applied in the scan.

    Lightning attention (MiniMax-Text-01, MiniMax-M1): ``heads`` heads of ``head_dim``, each
    with its own keys (``groups`` = ``heads``, ``state`` = ``head_dim``) and a ``head_dim`` x
    ``head_dim`` state decaying at a fixed rate a head, no convolution (``conv_kernel`` 0),
    computed in blocks of ``block`` tokens. Weights (Transformers'
    MiniMaxLightningAttention): qkv_proj (hidden to three times the inner width), the
    output gate (hidden to the inner width: the input projection's "z"), an RMSNorm over
    the inner width, out_proj; the decays are buffers, not parameters.

    A gated short convolution (LFM2): the input projection to B, C and x (each the inner
    width, which is the hidden size), B x through a depthwise causal convolution of
    ``conv_kernel`` taps, its output times C, the output projection; held as one-channel
    heads (``head_dim`` 1, one group) with no recurrent state (``state`` 0), its only state
    between steps the convolution's last inputs.

    An mLSTM cell (xLSTM): ``heads`` heads of ``head_dim`` value channels, each with its own
    keys of ``state`` channels (``groups`` = ``heads``) and a ``state`` x ``head_dim``
    matrix memory, no convolution (``conv_kernel`` 0), an input and a forget gate a head
    from the hidden state, computed in chunks of ``block`` tokens. Weights (Transformers'
    xLSTMLayer): q and k (hidden to the keys' width each), v and the output gate (hidden to
    the inner width each), the two gates (hidden to one a head, with biases), a layer norm
    a head over the inner width (the gated norm's place), out_proj.

    RWKV-4's time mixing (Transformers' RwkvSelfAttention): a recurrence a channel, held as
    one-channel heads (``head_dim`` 1, one group) with a state of three numbers each (the
    weighted sums of values and of weights, and their running maximum: ``state`` 3); its
    token shift (each of the key, value and receptance inputs a learned mix of this token's
    and the previous token's hidden state) stands in the convolution's place with
    ``conv_kernel`` 2 (one earlier input kept). Weights: the three mixes (hidden wide each),
    key, value and receptance (hidden to the inner width each), a decay and a first-token
    bonus a channel, the output projection; no norm."""

    heads: int
    head_dim: int
    state: int
    groups: int
    conv_kernel: int = 4
    conv_bias: bool = True
    proj_bias: bool = False
    kind: str = "mamba2"
    # Kimi Delta Attention's output gate a full-rank projection of the hidden state to the
    # inner width (Kimi K3's use_full_rank_gate), not a low-rank pair; its decay stays one
    full_rank_gate: bool = False
    # Kimi Delta Attention's decay from a full-rank projection of the hidden state to the
    # inner width (Ling 2.5's BailingHybridForgetGate f_proj), not a low-rank pair
    full_rank_decay: bool = False
    # Mamba-2's gated RMSNorm over the inner width before the output projection; Falcon-H1
    # builds it only with mamba_rms_norm (the gate itself still applies)
    gated_norm: bool = True
    # Mamba-1: the step's low rank (x_proj's first outputs, dt_proj's inputs), and whether
    # the step, B and C each pass an RMSNorm with a weight (Jamba's dt/b/c_layernorm)
    dt_rank: int = 0
    dt_bc_norms: bool = False
    # lightning attention: tokens a block of its blocked computation (0 for the others)
    block: int = 0
    # the recurrent state's format as the checkpoint's config.json names it ("fp32", "bf16",
    # "fp16"; "" where it names none): its mamba_ssm_cache_dtype (Nemotron-H's, which
    # Transformers' NemotronHConfig defaults to float32) and its mamba_ssm_dtype (Qwen3.5's);
    # engines read one, the other or neither (estimate.mamba.default_state_precision)
    ssm_cache_dtype: str = ""
    ssm_dtype: str = ""

    def __post_init__(self) -> None:
        for name in ("ssm_cache_dtype", "ssm_dtype"):
            value = getattr(self, name)
            if value not in STATE_FORMATS:
                raise GpuarchError(f"mamba.{name}: expected one of "
                                   f"{', '.join(f for f in STATE_FORMATS if f)} (or none), "
                                   f"got {value!r}")
        for name in ("heads", "head_dim", "groups"):
            _positive(f"mamba.{name}", getattr(self, name))
        _positive("mamba.state", self.state, minimum=0 if self.kind == "short_conv" else 1)
        if self.kind == "short_conv" and (self.head_dim != 1 or self.groups != 1
                                          or self.state or self.gated_norm):
            raise GpuarchError(
                f"mamba.head_dim / mamba.groups / mamba.state / mamba.gated_norm: a short "
                f"convolution is held as one-channel heads in one group with no state and no "
                f"norm, got {self.head_dim}, {self.groups}, {self.state}, {self.gated_norm}")
        lightning = self.kind == "lightning"
        mlstm = self.kind == "mlstm"
        _positive("mamba.conv_kernel", self.conv_kernel,
                  minimum=0 if lightning or mlstm else 1)
        _positive("mamba.dt_rank", self.dt_rank, minimum=0)
        _positive("mamba.block", self.block, minimum=1 if lightning or mlstm else 0)
        if mlstm and (self.groups != self.heads or self.conv_kernel or self.conv_bias
                      or not self.gated_norm):
            raise GpuarchError(
                f"mamba.groups / mamba.conv_kernel: an mLSTM cell has a key head a head, no "
                f"convolution and a norm a head, got {self.groups} key heads for "
                f"{self.heads} heads, a convolution of {self.conv_kernel}")
        if lightning and (self.groups != self.heads or self.state != self.head_dim
                          or self.conv_kernel or self.conv_bias or not self.gated_norm):
            raise GpuarchError(
                f"mamba.groups / mamba.state / mamba.conv_kernel: lightning attention has a "
                f"key head a head, keys as wide as values, no convolution and a gated norm, "
                f"got {self.groups} key heads of {self.state} for {self.heads} heads of "
                f"{self.head_dim}, a convolution of {self.conv_kernel}")
        if self.block and not (lightning or mlstm):
            raise GpuarchError("mamba.block: lightning attention's or an mLSTM cell's chunk "
                               "(kind \"lightning\" or \"mlstm\")")
        if self.kind == "rwkv4" and (self.head_dim != 1 or self.groups != 1 or self.state != 3
                                     or self.conv_kernel != 2 or self.conv_bias
                                     or self.gated_norm or self.proj_bias):
            raise GpuarchError(
                f"mamba.head_dim / mamba.state / mamba.conv_kernel: RWKV-4's time mixing is "
                f"held as one-channel heads in one group with a state of 3, a token shift "
                f"(conv_kernel 2, no bias), no norm and no projection biases, got head_dim "
                f"{self.head_dim}, {self.groups} groups, state {self.state}, conv_kernel "
                f"{self.conv_kernel}")
        if self.kind == "mamba1":
            if self.head_dim != 1 or self.groups != 1 or self.gated_norm:
                raise GpuarchError(
                    f"mamba.head_dim / mamba.groups / mamba.gated_norm: a Mamba-1 mixer is "
                    f"held as one-channel heads in one group with no gated norm, got "
                    f"{self.head_dim}, {self.groups}, {self.gated_norm}")
            if self.dt_rank < 1:
                raise GpuarchError(f"mamba.dt_rank: a Mamba-1 mixer needs its step's rank "
                                   f"(>= 1), got {self.dt_rank}")
        elif self.dt_rank or self.dt_bc_norms:
            raise GpuarchError("mamba.dt_rank / mamba.dt_bc_norms: a Mamba-1 mixer's "
                               "(kind \"mamba1\")")
        if self.kind not in MIXER_KINDS:
            raise GpuarchError(f"mamba.kind: expected one of {', '.join(MIXER_KINDS)}, got "
                               f"{self.kind!r}")
        if self.heads % self.groups:
            raise GpuarchError(f"mamba.groups: {self.groups} must divide mamba.heads "
                               f"{self.heads}")
        if not self.gated_norm and self.kind not in ("mamba2", "mamba1", "short_conv",
                                                     "rwkv4"):
            raise GpuarchError("mamba.gated_norm: only a Mamba-2 mixer goes without its "
                               "gated norm")
        if (self.full_rank_gate or self.full_rank_decay) and self.kind != "kda":
            raise GpuarchError("mamba.full_rank_gate / mamba.full_rank_decay: Kimi Delta "
                               "Attention's (kind \"kda\")")
        if self.kind == "kda" and (self.groups != self.heads or self.state != self.head_dim):
            raise GpuarchError(f"mamba.groups / mamba.state: Kimi Delta Attention has a key "
                               f"head a value head and keys as wide as values, got "
                               f"{self.groups} key heads of {self.state} for {self.heads} "
                               f"value heads of {self.head_dim}")

    @property
    def label(self) -> str:
        """The mixer's name: Mamba-2 or Gated DeltaNet."""
        return MIXER_KINDS[self.kind]

    @property
    def gated_delta(self) -> bool:
        """Whether the mixer runs the chunked gated delta rule (a Gated DeltaNet or Kimi
        Delta Attention) rather than Mamba-2's scan."""
        return self.kind in ("gated_delta", "kda")

    @property
    def short_conv(self) -> bool:
        """Whether the mixer is a gated short convolution (no recurrent state)."""
        return self.kind == "short_conv"

    @property
    def channelwise(self) -> bool:
        """Whether the mixer splits over tensor parallelism by channel alone, with no B/C
        groups to hold whole (Mamba-1, the short convolution, RWKV-4's time mixing)."""
        return self.kind in ("mamba1", "short_conv", "rwkv4")

    @property
    def lightning(self) -> bool:
        """Whether the mixer is lightning attention (no convolution, a fixed decay a head)."""
        return self.kind == "lightning"

    @property
    def mlstm(self) -> bool:
        """Whether the mixer is an mLSTM cell (xLSTM: a matrix memory a head, an input and a
        forget gate a head, no convolution)."""
        return self.kind == "mlstm"

    @property
    def rwkv(self) -> bool:
        """Whether the mixer is RWKV-4's time mixing (a recurrence a channel, a token
        shift, the receptance's gate)."""
        return self.kind == "rwkv4"

    @property
    def selective(self) -> bool:
        """Whether the mixer is Mamba-1's (a selective scan a channel, B and C from x_proj)."""
        return self.kind == "mamba1"

    @property
    def x_proj_width(self) -> int:
        """Mamba-1's x_proj outputs, the step's low-rank input and B and C, which every
        tensor-parallel GPU holds whole (vLLM's MambaMixer: a row-parallel x_proj, its output
        all-reduced); 0 for the other mixers."""
        return self.dt_rank + 2 * self.state if self.selective else 0

    @property
    def kda(self) -> bool:
        """Whether the mixer is Kimi Delta Attention (a decay per channel, low-rank gates)."""
        return self.kind == "kda"

    @property
    def low_rank_width(self) -> int:
        """The width of Kimi Delta Attention's two low-rank gate projections (one head's);
        0 for the other mixers."""
        return self.head_dim if self.kda else 0

    @property
    def inner(self) -> int:
        """The inner width: heads x head size (x and z are each this wide)."""
        return self.heads * self.head_dim

    @property
    def conv_width(self) -> int:
        """Channels the convolution runs over: x, B and C (Mamba-1's: x alone; a short
        convolution's: B x)."""
        if self.channelwise:
            return self.inner
        return self.inner + 2 * self.groups * self.state

    @property
    def in_proj_width(self) -> int:
        """The input projection's outputs: z, then x, B and C (q, k, v), then one dt per
        head (a Gated DeltaNet's beta and a, two; lightning attention's output gate, q, k
        and v, none). Kimi Delta Attention's: q, k and v, beta
        a head and the two gates' low-rank halves (``low_rank_width`` each). Mamba-1's: x
        and z; a short convolution's: B, C and x."""
        if self.channelwise:
            return (2 if self.selective else 3) * self.inner
        if self.kda:
            return (self.conv_width + self.heads + self.replicated_in_proj
                    + self.inner * (self.full_rank_gate + self.full_rank_decay))
        # (an mLSTM cell's: its output gate, v, k and q, and two gates a head)
        steps = 2 if self.gated_delta or self.mlstm else 0 if self.lightning else 1
        return self.inner + self.conv_width + self.heads * steps

    @property
    def replicated_in_proj(self) -> int:
        """The input projection's outputs every tensor-parallel GPU computes whole: Kimi Delta
        Attention's low-rank halves (the decay's and the output gate's, each unless full rank);
        0 for the other mixers."""
        return self.low_rank_width * self.low_rank_pairs

    def in_proj_per_gpu(self, tp: Any) -> Any:
        """The input projection's outputs on one of ``tp`` tensor-parallel GPUs: split but
        for Kimi Delta Attention's low-rank gate halves, which every GPU computes whole, and
        a single B/C group's (``groups_per_gpu``); Mamba-1's and a short convolution's
        split evenly."""
        if self.channelwise:
            return self.in_proj_width // tp
        low_rank = self.replicated_in_proj
        bc = 2 * self.groups * self.state
        return (self.in_proj_width - low_rank - bc) // tp + low_rank \
            + 2 * self.groups_per_gpu(tp) * self.state

    def groups_per_gpu(self, tp: Any) -> Any:
        """B/C groups (a Gated DeltaNet's key heads) on one of ``tp`` tensor-parallel GPUs:
        an even share, or where there is a single group, that group whole on every GPU, as
        vLLM's Mamba-2 mixer replicates it (MambaStateShapeCalculator.
        extra_groups_for_head_shards, vllm/model_executor/layers/mamba/mamba_utils.py;
        Granite 4.0's and Falcon-H1's one group at TP > 1). Megatron-Core does not
        ("ngroups must be evenly divisible by tp_size", megatron/core/ssm/mamba_mixer.py)."""
        return 1 if self.groups == 1 else self.groups // tp

    def conv_per_gpu(self, tp: Any) -> Any:
        """Channels the convolution runs over on one of ``tp`` GPUs: x split, B and C as
        ``groups_per_gpu`` has them (Mamba-1's and a short convolution's: its share)."""
        if self.channelwise:
            return self.inner // tp
        return self.inner // tp + 2 * self.groups_per_gpu(tp) * self.state

    def replicated_params(self, tp: Any, hidden: int) -> Any:
        """A mixer's weights each of ``tp`` GPUs holds beyond its even share: a single B/C
        group's input projection rows and convolution taps (and bias) when ``tp`` > 1.
        Mamba-1's split evenly (its x_proj by input, dt_proj by output; the three small
        norms' weights, whole on each GPU, are not counted here), and so is a short
        convolution."""
        if self.channelwise:
            return 0.0
        extra = 2 * self.state * (self.groups_per_gpu(tp) - self.groups / tp)
        return extra * (hidden + self.conv_kernel + (1 if self.conv_bias else 0))

    @property
    def gate_up_width(self) -> int:
        """Outputs of Kimi Delta Attention's low-rank up-projections (the decay's and the
        output gate's, each unless full rank, from one head's width to the inner width); 0
        for the other mixers."""
        return self.inner * self.low_rank_pairs if self.kda else 0

    @property
    def low_rank_pairs(self) -> int:
        """Kimi Delta Attention's gates made by a low-rank pair of projections: the decay's
        and the output gate's, but for those made full rank; 0 for the other mixers."""
        return 2 - self.full_rank_gate - self.full_rank_decay if self.kda else 0


@dataclass(frozen=True, kw_only=True)
class FullAttention:
    """The heads of a model's full-attention layers where they differ from its sliding-window
    layers', which the shape's own ``heads``, ``kv_heads``, ``head_dim``, ``v_head_dim``,
    ``keys_are_values`` and ``attention_sinks`` describe; ``heads`` 0 where the query heads
    are the same. Step-3.5/3.7-Flash: 96 query heads in its window layers, 64 in its full
    ones, 8 KV heads of 128 in both (its config.json's ``attention_other_setting``,
    Transformers' ``num_sliding_attention_heads``).
    Gemma 4: its window layers have 8 or 16 KV heads of 256, its global ones 2 or 4 of 512
    whose keys are also their values (Transformers' Gemma4TextAttention:
    ``global_head_dim``, ``num_global_key_value_heads``, ``attention_k_eq_v``, no v_proj in
    those layers). MiMo-V2-Flash: 4 KV heads in its full layers against 8 in its window
    layers, which alone hold attention sinks (its config.json's ``swa_num_key_value_heads``,
    ``add_swa_attention_sink_bias``).
    With ``mla``: the full layers' latent attention where the window layers' (the shape's
    own ``mla``) has other sizes; ``kv_heads`` then equals the query heads and ``head_dim``
    the query-key width, as the shape's own for latent attention. dots3-note: 128 heads,
    KV rank 512 and DeepSeek Sparse Attention's indexer in its full layers, 64 heads and KV
    rank 1024 without an indexer in its window layers (Transformers' Dots3NoteTextConfig:
    ``per_layer_config``, the released config.json's ``swa_*`` keys)."""

    kv_heads: int
    head_dim: int
    v_head_dim: int = 0  # 0 = head_dim
    keys_are_values: bool = False
    sinks: bool = False
    heads: int = 0  # 0 = the shape's query heads
    mla: MlaShape | None = None

    def __post_init__(self) -> None:
        for name in ("kv_heads", "head_dim"):
            _positive(f"full_attention.{name}", getattr(self, name))
        for name in ("v_head_dim", "heads"):
            _positive(f"full_attention.{name}", getattr(self, name), minimum=0)
        for name in ("keys_are_values", "sinks"):
            if not isinstance(getattr(self, name), bool):
                raise GpuarchError(f"full_attention.{name}: expected true or false, got "
                                   f"{getattr(self, name)!r}")
        if self.keys_are_values and self.v_head_dim not in (0, self.head_dim):
            raise GpuarchError(f"full_attention.v_head_dim: keys that are also values have "
                               f"the keys' width ({self.head_dim}), got {self.v_head_dim}")
        m = self.mla
        if m is None:
            return
        if not isinstance(m, MlaShape):
            raise GpuarchError(f"full_attention.mla: expected latent attention's sizes, got "
                               f"{m!r}"[:200])
        if self.v_head_dim or self.keys_are_values or self.sinks:
            raise GpuarchError("full_attention.v_head_dim / keys_are_values / sinks: the full "
                               "layers' latent attention (full_attention.mla) has its own "
                               "widths and no sinks")
        if self.heads and self.kv_heads != self.heads:
            raise GpuarchError(f"full_attention.kv_heads: latent attention's {self.heads} "
                               f"heads are their own key-value heads, got {self.kv_heads}")
        if self.head_dim != m.qk_nope_head_dim + m.qk_rope_head_dim:
            raise GpuarchError(f"full_attention.head_dim: latent attention's query-key width "
                               f"is {m.qk_nope_head_dim + m.qk_rope_head_dim}, got "
                               f"{self.head_dim}")


@dataclass(frozen=True, kw_only=True)
class BlockSparseAttention:
    """Block-sparse grouped-query attention (MiniMax-M3): in each of ``layers`` attention
    layers (0: every one; the others attend to every position) a lightning indexer of
    ``index_heads`` heads of ``index_head_dim`` (its queries from the hidden state, one shared
    key a position, each normed) scores every earlier position, max-pools the scores into
    blocks of ``block`` positions and keeps the ``topk_blocks`` best for each query, the
    query's own block among them; the attention then reads those blocks' keys and values
    only. Weights a layer (Transformers' MiniMaxM3VLIndexer): q_proj (hidden to heads x
    head dim), k_proj (hidden to head dim) and a norm over each's head width. Its key is
    cached beside the layer's keys and values."""

    index_heads: int
    index_head_dim: int
    block: int
    topk_blocks: int
    layers: int = 0

    def __post_init__(self) -> None:
        for name in ("index_heads", "index_head_dim", "block", "topk_blocks"):
            _positive(f"block_sparse.{name}", getattr(self, name))
        _positive("block_sparse.layers", self.layers, minimum=0)

    @property
    def positions(self) -> int:
        """The most positions a query attends to: its blocks' (the top-k blocks x block)."""
        return self.topk_blocks * self.block

    def index_key_bytes(self, element: float) -> float:
        """Bytes the indexer caches per position and layer: its key at the cache's width (the
        reference code keeps it in the model's dtype; no engine's layout is published)."""
        return float(self.index_head_dim * element)


MAX_DIMENSION = 2**24
"""The largest any of a shape's sizes may be (layers, widths, heads, vocabulary, experts,
windows): 16,777,216, above every published model's (a 10M-token context window the
largest); products of such sizes stay exact in FP64 and within int64 in NumPy."""


def _positive(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) \
            or not minimum <= value <= MAX_DIMENSION:
        raise GpuarchError(f"{name}: expected an integer from {minimum} to "
                           f"{MAX_DIMENSION:,}, got {value!r}")


FINE_GRAINED_EXPERTS = 16
"""A mixture of experts with more routed experts than this is fine-grained (DeepSeek-V3
256, Qwen3 MoE 128, GPT-OSS 32-128, Llama 4 Maverick 128); at most this many is coarse
(Mixtral 8)."""


@dataclass(frozen=True, kw_only=True)
class TransformerShape:
    """A decoder-only transformer. Defaults describe a Llama-style dense model."""

    name: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    kv_heads: int = 0  # 0 = same as heads (multi-head attention)
    head_dim: int = 0  # 0 = hidden // heads
    # the value heads' width where it differs from the query and key heads'
    # (MiMo-V2-Flash: 128 against 192); 0 = head_dim
    v_head_dim: int = 0
    # the key projection's output is also the values (Gemma 4's global layers,
    # attention_k_eq_v): no value projection, one vector a KV head cached
    keys_are_values: bool = False
    ffn_hidden: int = 0  # 0 = 4 * hidden
    ffn_kind: FfnKind = FfnKind.SWIGLU
    norm: NormKind = NormKind.RMSNORM
    position: Position = Position.ROPE
    max_positions: int = 0  # rows of a learned position table
    bias: bool = False  # linear layers carry biases (GPT-2/3, Megatron GPT)
    qkv_bias: bool = False  # only the QKV projection has biases (Qwen2)
    # the attention's output projection has a bias too (Llama's attention_bias, with
    # qkv_bias): a hidden-wide vector a layer
    out_bias: bool = False
    tied_embeddings: bool = False
    # a norm right after the token embedding (BLOOM's word_embeddings_layernorm)
    embedding_norm: bool = False
    # norms on the attention and MLP outputs as well as their inputs (Gemma 2 and 3): four a
    # layer instead of two
    sandwich_norms: bool = False
    # a norm inside each block too (BitNet's sub-norms): over the attention's output before
    # its projection (hidden wide, attn_sub_norm) and over the MLP's gated product before
    # its down projection (the MLP's width, ffn_sub_norm)
    sub_norms: bool = False
    qk_norm: QkNorm = QkNorm.NONE
    # a sigmoid gate on each attention output channel (Qwen3-Next's and Qwen3.5's gated
    # attention, Megatron-Core's attention_output_gate): the query projection also makes the
    # gate, twice as wide
    attention_gate: bool = False
    # the channel gate (attention_gate) from a projection of its own without bias, and one
    # learned bias a query head added to it (Beam's gate_proj and gate_bias), rather than
    # from the query projection (whose attention_bias would bias every gate channel)
    gate_head_bias: bool = False
    # a sigmoid gate a query head on the attention's output, from a projection of the hidden
    # state to one value a head (Step-3.5/3.7-Flash's g_proj, use_head_wise_attn_gate)
    head_gate: bool = False
    # the attention and MLP blocks of a layer read the same input and their outputs are
    # added into the residual together (GPT-J, GPT-NeoX, Falcon, PaLM), so a tensor-parallel
    # layer reduces its output once, not after each block
    parallel_attention: bool = False
    experts: int = 0  # 0 = dense
    experts_per_token: int = 0
    shared_experts: int = 0
    # group-limited routing (DeepSeek-V3's n_group / topk_group): the experts form this many
    # equal groups and a token's experts come from at most groups_per_token of them; 0 = none
    expert_groups: int = 0
    groups_per_token: int = 0
    moe_ffn_hidden: int = 0  # 0 = ffn_hidden
    # latent experts (Nemotron 3 Super's LatentMoE, Megatron-Core's moe_latent_size): the
    # routed experts read and write vectors of this width, which a projection from the hidden
    # size makes before dispatch and another takes back after the combine (both duplicated
    # over TP); the router and the shared experts see the full hidden state. 0 = none
    moe_latent: int = 0
    dense_layers: int = 0  # leading layers that stay dense in an MoE model
    sliding_window: int = 0  # tokens a query sees in sliding-window layers; 0 = none
    sliding_layers: int = 0  # how many layers (attention blocks) use the window; 0 = all
    # the windowed layers attend within fixed chunks of ``sliding_window`` positions (Llama
    # 4's attention_chunk_size: a query sees its own chunk up to itself), not to the last
    # ``sliding_window`` positions; the KV cache they hold is the same at most
    attention_chunked: bool = False
    # a clamped GLU (GPT-OSS's swiglu_limit): both halves of the up projection's output are
    # clamped at this value before the activation; 0 = none
    glu_limit: float = 0.0
    mla: MlaShape | None = field(default=None)
    # the full-attention layers' heads where they differ from the sliding-window layers'
    # (Gemma 4, MiMo-V2-Flash); None = every attention layer has the heads above
    full_attention: FullAttention | None = field(default=None)
    # block-sparse grouped-query attention in some or all attention layers (MiniMax-M3);
    # None = every attention layer attends to every position (or its window)
    block_sparse: BlockSparseAttention | None = field(default=None)
    # DeepSeek-V4's compressed attention (one key-value head of ``head_dim``); None = none
    compressed: CompressedAttention | None = field(default=None)
    # residual streams of manifold-constrained hyper-connections (DeepSeek-V4's mHC,
    # config.json hc_mult): each attention and expert block reads a learned mix of them and
    # writes its output back into all of them, through a small projection of the streams to
    # (2 + streams) x streams mixing weights; 0 = a plain residual
    hyper_connections: int = 0
    # the hyper-connections independent (Hy4's iHC, HYV4HyperConnection): each block's
    # projection makes 2 x streams logits, a weight a stream to read the block's input with
    # and one to add its output into each stream with, no stream-to-stream mix, and two
    # scales a block where mHC has three
    independent_hyper_connections: bool = False
    # leading expert layers that route each token by a fixed table of its id (DeepSeek-V4's
    # num_hash_layers): no learned selection bias there
    hash_layers: int = 0
    # each learned-routing expert layer's router carries a bias per expert (DeepSeek-V4's
    # selection bias, gate.bias, counted in its weights; GPT-OSS's router's own bias)
    router_bias: bool = False
    # each layer's norm before attention, and an expert layer's before its experts, gated by
    # a sigmoid of a low-rank MLP of its output (hidden -> rank -> hidden, no biases: A.X K2's
    # gated_norm_rank, Megatron's GatedNormWrapper); 0 = plain norms
    gated_norm_rank: int = 0
    # experts without weights among the router's choices (LongCat-Flash's zero-computation
    # experts, zero_expert_num, each adding the token's own hidden state, scaled; ZAYA's skip
    # expert, adding nothing): the router scores experts + zero_experts; experts_per_token
    # counts every slot
    zero_experts: int = 0
    # of those slots, how many a token sends to real experts on average where the model's
    # makers publish it (LongCat-Flash: about 8 of 12); 0 = not published. An engine that
    # skips the identity slots (SGLang) runs that many a token; one that runs them on a real
    # expert with zero weight (vLLM) runs all
    mean_real_experts: float = 0.0
    # each expert layer scales its shared experts' output by a sigmoid of a one-output
    # projection of the hidden state (Qwen2-MoE's, Qwen3-Next's and Qwen3.5's
    # shared_expert_gate): a hidden-wide vector a layer, beside the router
    shared_expert_gate: bool = False
    # each attention layer holds a learned logit a query head that takes a share of the
    # softmax (GPT-OSS's attention sinks): a parameter a head, no GEMM
    attention_sinks: bool = False
    # queries and keys mixed over time before attention (ZAYA's compressed convolutional
    # attention: cca_time0, cca_time1): a depthwise causal convolution of qk_conv_depthwise
    # taps over the query and key channels, then one of qk_conv_grouped taps within each
    # head (head-wide in and out), both with biases; a learned temperature a KV head; each
    # value head half the previous token's projection. A sequence keeps the convolutions'
    # last inputs and that projection between steps. 0 = none
    qk_conv_depthwise: int = 0
    qk_conv_grouped: int = 0
    # the router an MLP (ZAYA's): a projection to router_hidden with bias, a scale of the
    # previous layer's router state added (all but the first expert layer), a norm, two
    # router_hidden-wide layers with biases, then the scores of router_width choices;
    # 0 = a linear router
    router_hidden: int = 0
    # every residual add scales and shifts its two inputs by learned hidden-wide vectors,
    # and the embedding's output too (ZAYA's residual scaling): 8 x hidden a layer, 2 x
    # hidden once
    residual_scales: bool = False
    # hidden-wide norms each expert layer has beside its two (or four): Gemma 4's MLP
    # beside the experts and its experts each have their own (the experts' pre-norm and a
    # post-norm for each output: 3)
    expert_layer_norms: int = 0
    # the router scales its (normed) input by a learned hidden-wide vector and each expert's
    # weight by a learned scalar (Gemma 4's Gemma4TextRouter: scale, per_expert_scale)
    router_scales: bool = False
    # a parallel layer's attention and MLP read one norm's output (Falcon-7B's and GPT-J's
    # one LayerNorm a layer), not a norm each
    shared_norm: bool = False
    # the MLP's projections carry biases whether or not the attention's do (GPT-J, GPT-NeoX
    # and GPT-OSS without attention_bias, Llama and Granite with mlp_bias), and the LM head a
    # bias a token (GPT-J's)
    mlp_bias: bool = False
    lm_head_bias: bool = False
    # the last layer's attention output projection alone carries a bias, a hidden-wide
    # vector (GPT-NeoX Japanese's dense_bias), counted with the attention's weights
    last_out_bias: bool = False
    # differential attention (DiffLlama's, as Transformers builds it): each layer runs its
    # softmax attention twice over the same queries and keys, against the two halves of its
    # value heads each repeated to all, subtracts the second scaled by a learned lambda from
    # the first and norms each head pair without weights; four head-wide lambda vectors a
    # layer
    differential_attention: bool = False
    # a norm of the hidden width after each routed expert, its own weights (experts x hidden
    # an expert layer: Ergo's post_expert_norm), counted with the experts
    routed_expert_norms: bool = False
    # each residual add mixes the branch and the stream by a learned weight a channel (two
    # hidden-wide vectors a layer: Ergo's ErgoResidualGate), counted with the norms
    residual_gates: bool = False
    # the LM head's rows where it is pruned to fewer tokens than the embedding holds
    # (Apertus 1.5's output_vocab_size: the text tokens of a vocabulary that also holds image
    # and audio codes); 0 = vocab
    head_vocab: int = 0
    # a hybrid model (Nemotron-H): one character per block, in order, from HYBRID_BLOCKS;
    # ``layers`` counts the blocks, each of which is only a Mamba-2 mixer, an attention, an
    # MLP or an expert block. "" = every layer is attention and MLP (or experts)
    hybrid_pattern: str = ""
    mamba: MambaShape | None = field(default=None)
    # each MLP block's inner width, in the hybrid pattern's order, where they differ
    # (Llama-Nemotron's NAS layers: each its own ffn_mult); () = every MLP block d_ffn wide.
    # d_ffn is then the widest
    mlp_widths: tuple[int, ...] = ()
    # the last layers read the keys and values that the last earlier layer of their kind
    # cached (Gemma 4 E2B/E4B's num_kv_shared_layers): no key or value projections, no key
    # norm and no cache of their own. kv_shared_full of them are full-attention layers, the
    # rest sliding-window ones; kv_shared_mlp their MLP's inner width where it differs
    # (use_double_wide_mlp: twice d_ffn); 0 = d_ffn
    # block attention residuals (Kimi K3's attn_res_block_size): before each of a layer's two
    # blocks, and after the last layer, the input is a softmax mix of the block summaries so
    # far (the embedding, then one a block of this many layers, and the running sum), each
    # mix with a learned query and a norm of its own; 0 = plain residuals
    attention_residual_block: int = 0
    # latent experts normalise the combined latent before projecting it back (Kimi K3's
    # latent_moe_use_norm): a norm of moe_latent's width a layer
    moe_latent_norm: bool = False
    kv_shared_layers: int = 0
    kv_shared_full: int = 0
    kv_shared_mlp: int = 0
    # a view's (``layer_view``): every attention layer is such a KV-shared layer
    reuses_kv: bool = False
    # per-layer input embeddings (Gemma 4 E2B/E4B's PLE): a table of per_layer_vocab tokens x
    # layers x per_layer_input, a projection of the hidden state to layers x per_layer_input
    # and its norm, then in each layer a gate from the hidden state to per_layer_input and a
    # projection back, and a norm after it; 0 = none
    per_layer_input: int = 0
    per_layer_vocab: int = 0
    # alternating updates (Gemma 3n's AltUp, altup_num_inputs streams of the hidden width):
    # the layers run on one stream; before each layer the others are predicted from all of
    # them by coefficients routed from it (a router of its own a layer: the hidden width to
    # one logit a stream, with its norm), after it corrected by the layer's change (another
    # routing), and the corrected stream scaled; the token embedding is projected into the
    # other streams at the start and out of them at the end (streams - 1 square matrices
    # each way); 0 = none
    altup_streams: int = 0
    # a low-rank residual branch a layer (Gemma 3n's LAuReL, laurel_rank): the attention's
    # normed input projected to this rank and back, normed and added beside the attention's
    # output; 0 = none
    laurel_rank: int = 0
    # the longest sequence the model is configured for (config.json's
    # max_position_embeddings: trained, or extended by RoPE scaling in the config); 0 = not
    # given. Informational: estimates run past it and say so
    context_window: int = 0
    # each recurrent block of the hybrid_pattern and the attention block right after it
    # read one norm's output side by side, their outputs summed (Falcon-H1's layers: "M*"
    # pairs, one norm for the two)
    parallel_mixers: bool = False
    # each expert block of the hybrid_pattern reads the norm of the MLP block before it ("-E"
    # pairs, one norm for the two) and its output joins the residual after the blocks that
    # follow it (LongCat-Flash's shortcut-connected MoE); costed in sequence with them
    shortcut_experts: bool = False
    # shared transformer blocks (Zamba's and Zamba2's): the hybrid_pattern's attention and
    # MLP blocks come in "*-" pairs, each pair a call of one of this many sets of weights,
    # taken in turn (Zamba: 1; Zamba2: num_mem_blocks); the weights are held once, the work
    # is done at every call, and each call's output passes through a hidden x hidden
    # projection of its own (Zamba's `linear`) before it joins the next Mamba block's input;
    # 0 = every block its own weights
    shared_blocks: int = 0
    # the attention block's input width where it is not the hidden width (Zamba's 2 x hidden:
    # the layer's input beside the token embedding); its norm is as wide; 0 = hidden
    attention_input: int = 0
    # LoRA adapters of this rank in each call of a shared block (Zamba2's adapter_rank): on
    # the MLP's gate and up projections, and with adapter_attention on the query, key and
    # value projections too; 0 = none
    adapter_rank: int = 0
    adapter_attention: bool = False
    # a mixture of attention heads (JetMoE's MoA): each layer's query and output projections
    # are this many experts, each holding kv_heads heads' worth, of which a router (the
    # hidden width to one logit an expert, no bias) picks experts_per_token a token; heads
    # = experts_per_token x kv_heads, the keys and values one projection shared by all;
    # 0 = plain attention
    attention_experts: int = 0
    # a bias of the hidden width after the expert block's combine (JetMoE's MoE bias)
    moe_out_bias: bool = False
    # RWKV's channel mixing as the MLP: its output gated by a sigmoid of a hidden x hidden
    # projection (the receptance), its two inputs each a learned mix of this token's and the
    # previous token's hidden state (two hidden-wide mixes)
    receptance_mlp: bool = False
    # Doge's dynamic mask: a projection of each position's values (every KV head's) to one
    # logit a KV head (dt_proj, with the attention's biases) and a learned scale a KV head
    # (A), whose mask keeps each query's keep_window_size highest-scoring positions; priced
    # as the dense masked attention Transformers computes
    dynamic_mask: bool = False
    # Inkling's relative position bias (no rotary positions): each attention layer projects
    # the hidden state to relative_bias numbers a query head (beside the queries, keys and
    # values) and mixes a learned bank of relative_bias x extent bias profiles into a bias
    # a backward distance, added to the scores; extent = relative_extent in the full
    # layers, the window in the window layers; 0 = none
    relative_bias: int = 0
    relative_extent: int = 0
    # Inkling's short convolutions: depthwise causal convolutions of short_conv_taps taps
    # (no bias, weights and sums in FP32, each added to its input) over every layer's keys
    # and values and over its attention and MLP blocks' outputs; a sequence keeps their
    # last short_conv_taps - 1 inputs between steps; 0 = none
    short_conv_taps: int = 0
    # a learned scalar a layer on its MLP block (Inkling's global_scale: on the dense MLP's
    # output, or on the router's expert weights)
    mlp_scalar: bool = False
    # the router scores the shared experts beside the routed ones, its softmax over the
    # chosen and the shared experts weighting both (Inkling's shared_expert_sink): a
    # router row a shared expert
    shared_expert_sink: bool = False
    # a learned scale a query channel and a relative-state channel a head (Inkling 2's
    # scaled L2 clips of its queries and relative states; its keys are clipped and its
    # values normed without weights): heads x (head_dim + relative_bias) a layer
    head_scales: bool = False
    # attention sinks from a projection of the hidden state, one logit a query head and
    # token (Inkling 2's sink_proj, hidden x heads a layer, no bias), rather than learned
    # constants (attention_sinks)
    sink_projection: bool = False
    # the full layers' key and value convolutions take taps of their own a token beside the
    # static ones: a projection of the layer's key (value) input to short_conv_taps taps a
    # KV head (Inkling 2's dynamic short convolutions; hidden x KV heads x taps each)
    dynamic_kv_convs: bool = False
    # the full layers' attention reads three inputs of its own, the queries', the keys' and
    # the values', each a mix of the block attention residuals (three learned queries) with
    # its own norm (Inkling 2's full decoder layers)
    split_attention_inputs: bool = False
    # block attention residuals as Inkling 2 has them: their norms hold no weights, and the
    # first layer's attention reads the embedding unmixed (no query there)
    lean_attention_residuals: bool = False
    # looped layers (Inkling 2 Mini's loop_layer_index_start and _end, loop_num_passes):
    # loop_layers of the model's layers, the first at index loop_start, run loop_passes times
    # a token, each run (a pass) with a KV cache and convolution state of its own and its
    # block attention residuals starting again from the loop's input. ``layers`` counts every
    # run of a layer (the model's own layers + (loop_passes - 1) x loop_layers) and
    # ``sliding_layers`` every run of a window layer, loop_window_layers of the looped layers
    # being window layers; the weights are held once (``weight_view``). 0 = none
    loop_layers: int = 0
    loop_passes: int = 0
    loop_start: int = 0
    loop_window_layers: int = 0
    # message gates in the looped layers (Inkling 2 Mini's loop_gate_rank): in each pass after
    # the first, a looped layer mixes a message into its query, key, value and MLP inputs,
    # each gate a projection of the input's and the message's weightless norms (2 x hidden to
    # this rank) and two back (to a forget and a message gate, hidden wide each, tanh); the
    # messages come from a block attention residual over the last pass's blocks with four
    # learned queries a looped layer (4 x hidden). 0 = none
    loop_gate_rank: int = 0

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "vocab"):
            _positive(name, getattr(self, name))
        for name in ("kv_heads", "head_dim", "ffn_hidden", "max_positions", "experts",
                     "experts_per_token", "shared_experts", "moe_ffn_hidden", "moe_latent",
                     "dense_layers",
                     "sliding_window", "sliding_layers", "expert_groups", "groups_per_token",
                     "context_window", "hyper_connections", "hash_layers", "v_head_dim",
                     "expert_layer_norms", "kv_shared_layers", "kv_shared_full",
                     "attention_residual_block",
                     "kv_shared_mlp", "per_layer_input", "per_layer_vocab", "head_vocab",
                     "altup_streams", "laurel_rank", "zero_experts", "gated_norm_rank",
                     "qk_conv_depthwise", "qk_conv_grouped", "router_hidden",
                     "shared_blocks", "attention_input", "adapter_rank",
                     "attention_experts", "relative_bias", "relative_extent",
                     "short_conv_taps", "loop_layers", "loop_passes", "loop_start",
                     "loop_window_layers", "loop_gate_rank"):
            _positive(name, getattr(self, name), minimum=0)
        if self.altup_streams == 1:
            raise GpuarchError("altup_streams: AltUp needs 2 streams or more (0 = none), got 1")
        if (self.altup_streams or self.laurel_rank) and self.is_hybrid:
            raise GpuarchError("altup_streams / laurel_rank: not with a hybrid_pattern")
        check_number("glu_limit", self.glu_limit, 0)
        if self.head_vocab > self.vocab:
            raise GpuarchError(f"head_vocab: the LM head's {self.head_vocab:,} rows exceed the "
                               f"vocabulary's {self.vocab:,}")
        if self.differential_attention:
            self._check_differential()
        if self.shared_blocks or self.attention_input or self.adapter_rank \
                or self.adapter_attention:
            self._check_shared_blocks()
        if self.attention_experts:
            self._check_attention_experts()
        if self.receptance_mlp and (self.is_moe or self.mamba is None or not self.mamba.rwkv):
            raise GpuarchError("receptance_mlp: RWKV's channel mixing, beside its time mixing "
                               "(mamba kind \"rwkv4\") and without experts")
        if self.dynamic_mask and (self.mla is not None or self.compressed is not None
                                  or self.is_hybrid or self.full_attention is not None):
            raise GpuarchError("dynamic_mask: Doge's dynamic mask stands on plain grouped-query "
                               "attention in every layer (no latent or compressed attention, "
                               "no hybrid_pattern, no full layers' own heads)")
        if self.relative_bias or self.relative_extent or self.short_conv_taps:
            self._check_inkling_attention()
        if (self.split_attention_inputs or self.lean_attention_residuals) \
                and not self.attention_residual_block:
            raise GpuarchError("split_attention_inputs / lean_attention_residuals: variants of "
                               "block attention residuals; need attention_residual_block > 0")
        if self.loop_layers or self.loop_passes or self.loop_start \
                or self.loop_window_layers or self.loop_gate_rank:
            self._check_loops()
        if self.dynamic_kv_convs and not self.short_conv_taps:
            raise GpuarchError("dynamic_kv_convs: taps projected for the key and value "
                               "convolutions need short_conv_taps > 0")
        if self.sink_projection and (self.attention_sinks or self.mla is not None
                                     or self.compressed is not None):
            raise GpuarchError("sink_projection: sinks projected from the hidden state stand "
                               "on grouped-query attention without learned sinks "
                               "(attention_sinks), latent or compressed attention")
        if self.shared_expert_sink and not (self.is_moe and self.shared_experts):
            raise GpuarchError("shared_expert_sink: the router scoring the shared experts "
                               "needs experts > 0 and shared_experts > 0")
        if self.moe_out_bias and not self.is_moe:
            raise GpuarchError("moe_out_bias: a bias after the experts' combine needs "
                               "experts > 0")
        if self.routed_expert_norms and not self.is_moe:
            raise GpuarchError("routed_expert_norms: a norm after each routed expert needs "
                               "experts > 0")
        if self.residual_gates and (self.is_hybrid or self.residual_scales
                                    or self.hyper_connections):
            raise GpuarchError("residual_gates: a learned gate a channel on each residual add "
                               "of a model of layers (not with a hybrid_pattern, "
                               "residual_scales or hyper_connections)")
        if self.last_out_bias and (self.bias or self.out_bias):
            raise GpuarchError("last_out_bias: the last layer's output bias alone; every "
                               "layer's already has one (bias, out_bias)")
        if self.head_vocab and self.tied_embeddings:
            raise GpuarchError("head_vocab: a pruned LM head is a matrix of its own, not the "
                               "tied embedding")
        if self.sliding_layers and not self.sliding_window:
            raise GpuarchError("sliding_layers: needs sliding_window > 0")
        if self.attention_chunked and not self.sliding_window:
            raise GpuarchError("attention_chunked: needs sliding_window > 0 (the chunk size)")
        if self.sliding_layers > self.attention_layers:
            raise GpuarchError(f"sliding_layers: {self.sliding_layers} exceeds the attention "
                               f"layers {self.attention_layers}")
        if self.head_dim == 0 and self.hidden % self.heads:
            raise GpuarchError(
                f"heads: {self.heads} does not divide hidden {self.hidden}; give head_dim")
        if self.kv_heads and self.heads % self.kv_heads:
            raise GpuarchError(
                f"kv_heads: {self.kv_heads} must divide heads {self.heads}")
        if self.kv_heads > self.heads:
            raise GpuarchError(f"kv_heads: {self.kv_heads} exceeds heads {self.heads}")
        if self.experts:
            if not 1 <= self.experts_per_token <= self.experts:
                raise GpuarchError(f"experts_per_token: expected 1..{self.experts} "
                                   f"(experts), got {self.experts_per_token}")
            if self.expert_groups and self.experts % self.expert_groups:
                raise GpuarchError(f"expert_groups: {self.expert_groups} must divide experts "
                                   f"{self.experts}")
            if bool(self.expert_groups) != bool(self.groups_per_token) or \
                    self.groups_per_token > self.expert_groups:
                raise GpuarchError(f"groups_per_token: expected 1..{self.expert_groups} "
                                   f"(expert_groups), got {self.groups_per_token}")
            if self.dense_layers >= self.layers:
                raise GpuarchError(f"dense_layers: {self.dense_layers} must be below layers "
                                   f"{self.layers}")
            if self.moe_latent >= self.hidden:
                raise GpuarchError(f"moe_latent: {self.moe_latent} must be below hidden "
                                   f"{self.hidden} (a latent width narrows the experts')")
        elif self.experts_per_token or self.shared_experts or self.expert_groups or \
                self.moe_latent or self.zero_experts:
            raise GpuarchError("experts_per_token / shared_experts / expert_groups / "
                               "moe_latent / zero_experts need experts > 0")
        if self.sub_norms and (self.is_moe or self.is_hybrid or self.mlp_widths
                               or self.parallel_attention):
            raise GpuarchError("sub_norms: the norms inside attention and MLP are read for "
                               "dense models of plain layers (BitNet's)")
        check_number("mean_real_experts", self.mean_real_experts, 0)
        if self.mean_real_experts and (not self.zero_experts
                                       or self.mean_real_experts > self.experts_per_token):
            raise GpuarchError(f"mean_real_experts: {self.mean_real_experts:g} real experts a "
                               "token needs identity experts (zero_experts) beside at least "
                               "as many slots (experts_per_token "
                               f"{self.experts_per_token})")
        if self.compressed is not None:
            self._check_compressed()
        if self.hash_layers > self.moe_layers:
            raise GpuarchError(f"hash_layers: {self.hash_layers} exceeds the "
                               f"{self.moe_layers} expert layers")
        if self.router_bias and not self.is_moe:
            raise GpuarchError("router_bias: a router bias needs experts > 0")
        if self.shared_expert_gate and not (self.is_moe and self.shared_experts):
            raise GpuarchError("shared_expert_gate: a gate on the shared experts needs "
                               "shared_experts > 0")
        if self.shared_norm and (not self.parallel_attention or self.sandwich_norms):
            raise GpuarchError("shared_norm: one norm a layer needs parallel_attention "
                               "(and no sandwich_norms)")
        if (self.expert_layer_norms or self.router_scales) and not self.is_moe:
            raise GpuarchError("expert_layer_norms / router_scales: need experts > 0")
        self._check_heads()
        m = self.indexer_mla
        if m is not None and m.index_layers > self.indexer_kind_layers:
            which = "is fewer than" if m is self.mla else \
                f"has {self.indexer_kind_layers} full-attention layers, fewer than"
            raise GpuarchError(f"layers: {self.layers} {which} the {m.index_layers} layers "
                               "with a sparse-attention indexer of their own (its "
                               "config.json's schedule)")
        if self.attention_sinks and self.compressed is not None:
            raise GpuarchError("attention_sinks: compressed attention counts its own")
        if bool(self.qk_conv_depthwise) != bool(self.qk_conv_grouped):
            raise GpuarchError("qk_conv_depthwise / qk_conv_grouped: the two convolutions over "
                               "queries and keys go together")
        if self.qk_conv_depthwise and (self.mla is not None or self.compressed is not None
                                       or self.block_sparse is not None or self.is_hybrid
                                       or self.keys_are_values or self.full_attention
                                       is not None or self.kv_width % 2):
            raise GpuarchError("qk_conv_depthwise: convolved queries and keys are grouped-"
                               "query attention's with keys and values of their own (an even "
                               "width, values half current and half delayed), in a model of "
                               "layers")
        if self.router_hidden and (not self.is_moe or self.router_bias):
            raise GpuarchError("router_hidden: an MLP router needs experts, and holds its own "
                               "biases (not router_bias)")
        if self.gated_norm_rank and (self.gated_norm_rank >= self.hidden or self.is_hybrid):
            raise GpuarchError(f"gated_norm_rank: {self.gated_norm_rank}: a low rank below "
                               f"hidden {self.hidden}, in a model of layers (not a "
                               "hybrid_pattern)")
        if self.hybrid_pattern or self.mamba is not None:
            self._check_hybrid()
        elif self.parallel_mixers:
            raise GpuarchError("parallel_mixers: pairs a hybrid_pattern's blocks; this shape "
                               "has none")
        if self.mlp_widths:
            self._check_mlp_widths()
        if self.kv_shared_layers or self.kv_shared_full or self.kv_shared_mlp \
                or self.reuses_kv:
            self._check_kv_shared()
        if self.moe_latent_norm and not self.moe_latent:
            raise GpuarchError("moe_latent_norm: a norm of the latent width needs moe_latent")
        if self.attention_residual_block and self.hyper_connections:
            raise GpuarchError("attention_residual_block: not with hyper_connections")
        if self.independent_hyper_connections and not self.hyper_connections:
            raise GpuarchError("independent_hyper_connections: needs hyper_connections "
                               "(the streams' count)")
        if bool(self.per_layer_input) != bool(self.per_layer_vocab):
            raise GpuarchError("per_layer_input / per_layer_vocab: per-layer input embeddings "
                               "need both their width and their vocabulary")
        if self.per_layer_input and self.is_hybrid:
            raise GpuarchError("per_layer_input: not with a hybrid_pattern")
        if self.position is Position.LEARNED and self.max_positions == 0:
            raise GpuarchError("max_positions: a learned position table needs its length")

    def _check_differential(self) -> None:
        """Differential attention: grouped-query attention of plain layers, its KV heads
        even (the values split in two halves; Transformers' DiffLlamaAttention refuses an
        odd count)."""
        for name, bad in (("mla", self.mla is not None), ("compressed",
                          self.compressed is not None), ("block_sparse",
                          self.block_sparse is not None), ("hybrid_pattern",
                          self.hybrid_pattern), ("full_attention",
                          self.full_attention is not None), ("keys_are_values",
                          self.keys_are_values), ("kv_shared_layers", self.kv_shared_layers),
                          ("qk_conv_depthwise", self.qk_conv_depthwise)):
            if bad:
                raise GpuarchError(f"{name}: not with differential_attention (grouped-query "
                                   "attention's two softmax calls over split values)")
        if self.n_kv_heads % 2:
            raise GpuarchError(f"kv_heads: differential attention splits the values over the "
                               f"KV heads in two halves; {self.n_kv_heads} is odd")

    @property
    def attention_calls(self) -> int:
        """The softmax attention calls a layer makes over its queries and keys: two with
        differential attention, else one."""
        return 2 if self.differential_attention else 1

    def _check_shared_blocks(self) -> None:
        pattern = self.hybrid_pattern
        if not self.shared_blocks:
            raise GpuarchError("attention_input / adapter_rank / adapter_attention: only "
                               "with shared_blocks (Zamba's shared transformer blocks)")
        if self.mamba is None or set(pattern) - set("M*-") \
                or pattern.replace("*-", "").count("*") or pattern.replace("*-", "").count("-"):
            raise GpuarchError("shared_blocks: the hybrid_pattern must be recurrent blocks "
                               "(M) and \"*-\" pairs (a shared block's attention and MLP)")
        calls = pattern.count("*-")
        if not calls or self.shared_blocks > calls:
            raise GpuarchError(f"shared_blocks: {self.shared_blocks} sets of weights for "
                               f"{calls} calls (expected 1 to {calls})")
        for name, bad in (("mla", self.mla is not None), ("sliding_window",
                          self.sliding_window), ("sandwich_norms", self.sandwich_norms),
                          ("mlp_widths", self.mlp_widths), ("full_attention",
                          self.full_attention is not None), ("parallel_mixers",
                          self.parallel_mixers), ("kv_shared_layers", self.kv_shared_layers),
                          ("attention_gate", self.attention_gate or self.head_gate),
                          ("qk_conv_depthwise", self.qk_conv_depthwise),
                          ("attention_residual_block", self.attention_residual_block),
                          ("hyper_connections", self.hyper_connections),
                          ("differential_attention", self.differential_attention)):
            if bad:
                raise GpuarchError(f"{name}: not with shared_blocks (Zamba's shared "
                                   "transformer blocks are plain attention and MLP)")
        if self.adapter_attention:
            if not self.adapter_rank:
                raise GpuarchError("adapter_attention: needs adapter_rank > 0")
            width = self.attention_in
            if self.heads * self.d_head != width or self.n_kv_heads * self.d_head != width:
                raise GpuarchError(f"adapter_attention: the query, key and value adapters "
                                   f"each write the attention's input width ({width:,}), so "
                                   f"heads x head_dim ({self.heads * self.d_head:,}) and "
                                   f"kv_heads x head_dim ({self.n_kv_heads * self.d_head:,}) "
                                   "must equal it (as Transformers' Zamba2Attention adds "
                                   "them)")

    def _check_inkling_attention(self) -> None:
        """Inkling's relative position bias and short convolutions stand on grouped-query
        attention without rotary positions in every layer."""
        if bool(self.relative_bias) != bool(self.relative_extent):
            raise GpuarchError(f"relative_bias / relative_extent: the relative position bias "
                               f"needs both its width a head and its extent, got "
                               f"{self.relative_bias} and {self.relative_extent}")
        if self.relative_bias and self.position is not Position.NONE:
            raise GpuarchError(f"relative_bias: the relative position bias replaces position "
                               f"encodings; needs position none, got {self.position.value}")
        if self.short_conv_taps == 1:
            raise GpuarchError("short_conv_taps: a causal convolution needs 2 taps or more "
                               "(0 = none), got 1")
        for name, bad in (("mla", self.mla is not None), ("compressed",
                          self.compressed is not None), ("block_sparse",
                          self.block_sparse is not None), ("hybrid_pattern", self.is_hybrid),
                          ("attention_chunked", self.attention_chunked),
                          ("parallel_attention", self.parallel_attention),
                          ("differential_attention", self.differential_attention),
                          ("kv_shared_layers", self.kv_shared_layers),
                          ("keys_are_values", self.keys_are_values),
                          ("qk_conv_depthwise", self.qk_conv_depthwise),
                          ("shared_blocks", self.shared_blocks),
                          ("attention_experts", self.attention_experts),
                          ("dynamic_mask", self.dynamic_mask)):
            if bad:
                raise GpuarchError(f"relative_bias / short_conv_taps: Inkling's attention is "
                                   f"grouped-query attention in every layer; not with "
                                   f"{name}")

    def _check_loops(self) -> None:
        """Looped layers (``loop_layers``) run within a model of plain layers, after its
        leading dense and hash-routed layers, each run priced as a layer."""
        if not self.loop_layers or not self.loop_passes:
            raise GpuarchError(f"loop_layers / loop_passes: looped layers need both, got "
                               f"{self.loop_layers} and {self.loop_passes}")
        own = self.layers - self.loop_repeats
        if own < 1 or self.loop_start + self.loop_layers > own:
            raise GpuarchError(f"layers: {max(own, 0)} of the model's own ({self.layers} "
                               f"runs) are too few for layers {self.loop_start} to "
                               f"{self.loop_start + self.loop_layers - 1} looped "
                               f"{self.loop_passes} times (at least "
                               f"{self.loop_start + self.loop_layers})")
        if self.loop_window_layers > self.loop_layers:
            raise GpuarchError(f"loop_window_layers: {self.loop_window_layers} exceeds the "
                               f"{self.loop_layers} looped layers")
        if not self.sliding_window and self.loop_window_layers:
            raise GpuarchError("loop_window_layers: needs sliding_window > 0")
        if self.sliding_window and not self.sliding_layers \
                and self.loop_window_layers != self.loop_layers:
            raise GpuarchError(f"loop_window_layers: every layer attends within the window "
                               f"(sliding_layers 0), so all {self.loop_layers} looped layers "
                               f"do, got {self.loop_window_layers}")
        if self.sliding_layers:
            window = self.sliding_layers - self.loop_repeats_windowed
            looped_full = self.loop_layers - self.loop_window_layers
            if window < self.loop_window_layers or own - window < looped_full:
                raise GpuarchError(f"sliding_layers: {self.sliding_layers} runs of window "
                                   f"layers do not hold the looped layers' "
                                   f"({self.loop_window_layers} window and {looped_full} "
                                   f"full layers run {self.loop_passes} times)")
        if self.dense_layers + self.hash_layers > self.loop_start:
            raise GpuarchError(f"loop_start: the leading dense and hash-routed layers "
                               f"({self.dense_layers + self.hash_layers}) come before the "
                               f"loop, which starts at layer {self.loop_start}")
        if self.loop_gate_rank and not self.attention_residual_block:
            raise GpuarchError("loop_gate_rank: the message gates read the last pass's block "
                               "attention residuals; need attention_residual_block > 0")
        for name, bad in (("hybrid_pattern", self.is_hybrid), ("mamba",
                          self.mamba is not None), ("shared_blocks", self.shared_blocks),
                          ("kv_shared_layers", self.kv_shared_layers),
                          ("per_layer_input", self.per_layer_input),
                          ("altup_streams", self.altup_streams),
                          ("compressed", self.compressed is not None),
                          ("block_sparse", self.block_sparse is not None),
                          ("a sparse-attention indexer", self.indexer_layers),
                          ("hyper_connections", self.hyper_connections),
                          ("mlp_widths", self.mlp_widths)):
            if bad:
                raise GpuarchError(f"loop_layers: looped layers are read for models of plain "
                                   f"layers; not with {name}")

    @property
    def loop_repeats(self) -> int:
        """Runs of the looped layers beyond each one's first (``loop_layers``): layers
        whose weights are another's; 0 without."""
        return max(self.loop_passes - 1, 0) * self.loop_layers

    @property
    def loop_repeats_windowed(self) -> int:
        """Of ``loop_repeats``, the runs of window layers."""
        return max(self.loop_passes - 1, 0) * self.loop_window_layers

    @property
    def loop_repeat_share(self) -> float:
        """The share of the layer runs that are a looped layer's runs after its first
        (``loop_repeats`` / ``layers``): where its message gates run; 0 without a loop."""
        return self.loop_repeats / self.layers

    @property
    def loop_message_sources(self) -> int:
        """The states a looped layer's messages attend over in a pass after the first
        (``loop_gate_rank``): the last pass's blocks after its first (the loop's input) and
        its running sum; 0 without message gates."""
        b = self.attention_residual_block
        if not self.loop_gate_rank or not b:
            return 0
        starts = sum(1 for layer in range(self.loop_start, self.loop_start + self.loop_layers)
                     if layer % b == 0)
        return max(starts, 1)

    def run_order(self) -> list[int]:
        """The model's own layer index of each run of a layer, in order: each layer once,
        the looped ones (``loop_layers``) ``loop_passes`` times over."""
        start, end = self.loop_start, self.loop_start + self.loop_layers
        own = self.layers - self.loop_repeats
        return [*range(start), *list(range(start, end)) * max(self.loop_passes, 1),
                *range(end, own)] if self.loop_layers else list(range(self.layers))

    def weight_view(self) -> TransformerShape:
        """The shape with each of its own layers once (``loop_layers``' runs beyond the
        first left out, and the loop with them): what its weights count. Itself without
        looped layers."""
        return _weight_view(self) if self.loop_layers else self

    def unrolled_view(self) -> TransformerShape:
        """The shape with every run of a layer as a layer of its own weights (no loop, no
        message gates): what its runs compute. Itself without looped layers."""
        return _unrolled_view(self) if self.loop_layers else self

    @property
    def relative_bias_params(self) -> int:
        """The relative position bias's banks, all layers (``relative_bias``): a bias
        profile a bias dimension and backward distance, over ``relative_extent`` distances
        in a full layer and the window's in a window layer; 0 without."""
        if not self.relative_bias:
            return 0
        windowed = self.windowed_layers
        return self.relative_bias * (windowed * self.sliding_window + (
            self.attention_layers - windowed) * self.relative_extent)

    def relative_extent_of(self, window: int) -> int:
        """The distances the relative position bias covers in a layer of ``window`` (0: a
        full layer): the window, or ``relative_extent``; 0 without the bias."""
        if not self.relative_bias:
            return 0
        return window or self.relative_extent

    def _check_attention_experts(self) -> None:
        k, e = self.experts_per_token, self.attention_experts
        if not self.is_moe or self.is_hybrid or self.dense_layers:
            raise GpuarchError("attention_experts: a mixture of attention heads is read beside "
                               "expert MLPs in every layer (JetMoE's), which pick as many "
                               "experts a token (experts_per_token)")
        if k > e:
            raise GpuarchError(f"attention_experts: {e} experts, fewer than the "
                               f"experts_per_token ({k}) a token takes")
        if self.heads != k * self.n_kv_heads:
            raise GpuarchError(f"attention_experts: heads must be experts_per_token x kv_heads "
                               f"({k} x {self.n_kv_heads} = {k * self.n_kv_heads}: each "
                               f"chosen expert makes kv_heads heads' queries), got "
                               f"{self.heads}")
        for name, bad in (("mla", self.mla is not None), ("compressed",
                          self.compressed is not None), ("sliding_window",
                          self.sliding_window), ("full_attention",
                          self.full_attention is not None), ("attention_gate",
                          self.attention_gate or self.head_gate), ("bias",
                          self.bias or self.qkv_bias), ("parallel_attention",
                          self.parallel_attention), ("differential_attention",
                          self.differential_attention), ("kv_shared_layers",
                          self.kv_shared_layers), ("qk_conv_depthwise",
                          self.qk_conv_depthwise), ("v_head_dim", self.v_head_dim),
                          ("keys_are_values", self.keys_are_values)):
            if bad:
                raise GpuarchError(f"{name}: not with attention_experts (JetMoE's mixture of "
                                   "attention heads is plain grouped-query attention)")

    @property
    def attention_in(self) -> int:
        """The width the attention's query, key and value projections read (and its norm
        normalises): ``attention_input``, else the hidden width."""
        return self.attention_input or self.hidden

    @property
    def shared_block_calls(self) -> int:
        """Calls of the shared transformer blocks (``shared_blocks``): the hybrid pattern's
        "*-" pairs; 0 without shared blocks."""
        return self.hybrid_pattern.count("*-") if self.shared_blocks else 0

    def _check_kv_shared(self) -> None:
        if self.reuses_kv:
            if self.kv_shared_layers:
                raise GpuarchError("reuses_kv: a view's flag, not with kv_shared_layers")
            return
        shared, full = self.kv_shared_layers, self.kv_shared_full
        if not 0 < shared < self.layers:
            raise GpuarchError(f"kv_shared_layers: expected 1..{self.layers - 1} (some layers "
                               f"must cache what the others read), got {shared}")
        for name, bad in (("hybrid_pattern", self.hybrid_pattern), ("experts", self.experts),
                          ("mla", self.mla is not None), ("compressed",
                          self.compressed is not None), ("block_sparse",
                          self.block_sparse is not None), ("mlp_widths", self.mlp_widths)):
            if bad:
                raise GpuarchError(f"{name}: not with kv_shared_layers (grouped-query "
                                   "attention layers of a dense model)")
        producers_full = self.layers - self.windowed_layers - full
        producers_window = self.windowed_layers - (shared - full)
        if full > shared or producers_full < 0 or producers_window < 0:
            raise GpuarchError(f"kv_shared_full: {full} of the {shared} KV-shared layers "
                               f"full-attention ones does not fit {self.windowed_layers} "
                               f"window and {self.layers - self.windowed_layers} full layers")
        if (full and not producers_full) or (shared - full and not producers_window):
            raise GpuarchError("kv_shared_layers: each kind of KV-shared layer needs an "
                               "earlier layer of its kind that caches what it reads")

    def _check_mlp_widths(self) -> None:
        widths = self.mlp_widths
        if not isinstance(widths, tuple):
            raise GpuarchError(f"mlp_widths: expected one width a dense MLP block, got "
                               f"{widths!r}")
        for width in widths:
            _positive("mlp_widths", width)
        if not self.hybrid_pattern:
            raise GpuarchError("mlp_widths: MLP blocks of their own widths need a "
                               "hybrid_pattern placing them")
        if len(widths) != self.mlp_layers:
            raise GpuarchError(f"mlp_widths: {len(widths)} widths, but hybrid_pattern has "
                               f"{self.mlp_layers} MLP blocks (-)")
        if self.ffn_hidden and self.ffn_hidden != max(widths):
            raise GpuarchError(f"ffn_hidden: {self.ffn_hidden}, but the widest of mlp_widths "
                               f"is {max(widths)}; give 0 or that")

    def _check_heads(self) -> None:
        """The value width, keys as values and the full layers' own heads: grouped-query
        attention's, with sliding-window layers for the full ones to differ from."""
        if self.keys_are_values and self.v_head_dim not in (0, self.d_head):
            raise GpuarchError(f"v_head_dim: keys that are also values have the keys' width "
                               f"({self.d_head}), got {self.v_head_dim}")
        f = self.full_attention
        latent_full = f is not None and f.mla is not None
        if latent_full and (self.mla is None or self.mla.sparse or self.attention_sinks):
            raise GpuarchError("full_attention.mla: the full layers' latent attention of its "
                               "own sizes stands beside window layers of latent attention "
                               "(mla) without an indexer or sinks")
        if (self.v_head_dim or self.keys_are_values or (f is not None and not latent_full)
                or (self.head_gate and self.mla is None)) \
                and (self.mla is not None or self.compressed is not None):
            raise GpuarchError("v_head_dim / keys_are_values / full_attention / head_gate: "
                               "for grouped-query attention, not latent or compressed "
                               "attention (which have their own widths; latent attention may "
                               "gate a head)")
        if self.gate_head_bias and (not self.attention_gate or self.mla is not None):
            raise GpuarchError("gate_head_bias: a bias a head on the channel gate of grouped-"
                               "query attention (needs attention_gate, not latent attention)")
        if self.mla is not None and self.mla.q_gate and (self.attention_gate or self.head_gate):
            raise GpuarchError("q_gate: the gated query projection is the latent attention's "
                               "gate; not with attention_gate or head_gate")
        if self.head_gate and self.attention_gate:
            raise GpuarchError("head_gate: a gate a head, or attention_gate's a channel, not "
                               "both")
        b = self.block_sparse
        if b is not None:
            for name, bad in (("mla", self.mla is not None), ("compressed",
                              self.compressed is not None), ("sliding_window",
                              self.sliding_window), ("hybrid_pattern", self.hybrid_pattern)):
                if bad:
                    raise GpuarchError(f"{name}: not with block_sparse attention (its own "
                                       "sparse selection over grouped-query heads)")
            if b.layers > self.layers:
                raise GpuarchError(f"block_sparse.layers: {b.layers} exceeds layers "
                                   f"{self.layers}")
        if f is None:
            return
        if not self.sliding_window or self.windowed_layers >= self.layers:
            raise GpuarchError("full_attention: the full layers' own heads need sliding-"
                               "window layers beside them (sliding_window, and "
                               "sliding_layers below layers)")
        heads = f.heads or self.heads
        if heads % f.kv_heads:
            raise GpuarchError(f"full_attention.kv_heads: {f.kv_heads} must divide the full "
                               f"layers' heads {heads}")

    def _check_compressed(self) -> None:
        c = self.compressed
        assert c is not None
        if len(c.ratios) != self.layers:
            raise GpuarchError(f"layers: {self.layers}, but compressed attention lists "
                               f"{len(c.ratios)} compression ratios, one a layer "
                               "(as its config.json lists them)")
        if self.n_kv_heads != 1:
            raise GpuarchError(f"kv_heads: compressed attention has one key-value head, got "
                               f"{self.n_kv_heads}")
        if self.heads % c.o_groups:
            raise GpuarchError(f"compressed.o_groups: {c.o_groups} must divide heads "
                               f"{self.heads}")
        if c.rope_head_dim >= self.d_head:
            raise GpuarchError(f"compressed.rope_head_dim: {c.rope_head_dim} must be below "
                               f"head_dim {self.d_head}")
        for name, bad in (("mla", self.mla is not None), ("sliding_window",
                          self.sliding_window), ("hybrid_pattern", self.hybrid_pattern),
                          ("parallel_attention", self.parallel_attention)):
            if bad:
                raise GpuarchError(f"{name}: not with compressed attention, which has its "
                                   "own window and latent")

    def _check_hybrid(self) -> None:
        pattern = self.hybrid_pattern
        if not pattern:
            raise GpuarchError("mamba: recurrent (Mamba-2 or Gated DeltaNet) blocks need a "
                               "hybrid_pattern placing them")
        unknown = sorted(set(pattern) - set(HYBRID_BLOCKS))
        if unknown:
            raise GpuarchError(f"hybrid_pattern: unknown block {unknown[0]!r} (expected "
                               + ", ".join(f"{k} {v}" for k, v in HYBRID_BLOCKS.items()) + ")")
        if len(pattern) != self.layers:
            raise GpuarchError(f"hybrid_pattern: {len(pattern)} blocks, but layers is "
                               f"{self.layers}")
        if ("M" in pattern) != (self.mamba is not None):
            raise GpuarchError("hybrid_pattern: recurrent blocks (M) and the mamba shape go "
                               "together")
        if ("E" in pattern) != self.is_moe:
            raise GpuarchError("hybrid_pattern: expert blocks (E) and experts > 0 go together")
        for name, bad in (("dense_layers", self.dense_layers),
                          ("parallel_attention", self.parallel_attention)):
            if bad:
                raise GpuarchError(f"{name}: not with a hybrid_pattern, whose blocks each "
                                   "hold one part of a layer")
        if self.sliding_window and "*" not in pattern:
            raise GpuarchError("sliding_window: the hybrid_pattern has no attention block (*) "
                               "to limit")
        if self.sliding_window and (self.attention_chunked or self.full_attention is not None
                                    or self.kv_shared_layers):
            raise GpuarchError("sliding_window: a hybrid_pattern's window blocks are plain "
                               "sliding windows (no chunks, full layers' own heads or KV "
                               "sharing)")
        if self.mla is not None and self.mla.sparse:
            raise GpuarchError("index_topk: sparse latent attention is not modelled in a "
                               "hybrid_pattern's attention blocks (dense latent attention is)")
        if self.shortcut_experts and "-E" not in pattern:
            raise GpuarchError("shortcut_experts: the hybrid_pattern has no MLP block followed "
                               "by an expert block (\"-E\") to pair")
        if self.parallel_mixers and "M*" not in pattern:
            raise GpuarchError("parallel_mixers: the hybrid_pattern has no recurrent block "
                               "followed by an attention block (\"M*\") to pair")

    @property
    def qk_conv_channels(self) -> int:
        """The query and key channels the convolutions over time mix (``qk_conv_depthwise``):
        every query and key head's; 0 without them."""
        return (self.heads + self.n_kv_heads) * self.d_head if self.qk_conv_depthwise else 0

    @property
    def hyper_connection_logits(self) -> int:
        """The mixing logits each block's hyper-connection projection makes: (2 + streams) x
        streams (mHC: a read and a write weight a stream and the stream-to-stream mix), or
        2 x streams where they are independent (iHC); 0 without."""
        n = self.hyper_connections
        return 2 * n if self.independent_hyper_connections else (2 + n) * n

    @property
    def router_width(self) -> int:
        """The choices an expert layer's router scores: the routed experts and any identity
        experts (``zero_experts``), and the shared ones where it scores them too
        (``shared_expert_sink``)."""
        return self.experts + self.zero_experts \
            + (self.shared_experts if self.shared_expert_sink else 0)

    @property
    def shared_norm_pairs(self) -> int:
        """Blocks that read another's norm: the "M*" pairs of ``parallel_mixers`` and the
        "-E" pairs of ``shortcut_experts`` (0 otherwise)."""
        return (self.hybrid_pattern.count("M*") if self.parallel_mixers else 0) \
            + (self.hybrid_pattern.count("-E") if self.shortcut_experts else 0)

    # -- resolved dimensions ---------------------------------------------------------------

    @property
    def is_hybrid(self) -> bool:
        """Blocks of different kinds (Mamba-2, attention, MLP, experts) rather than layers
        of attention and MLP."""
        return bool(self.hybrid_pattern)

    @property
    def attention_layers(self) -> int:
        """Layers (blocks) with attention, and so a KV cache."""
        return self.hybrid_pattern.count("*") if self.hybrid_pattern else self.layers

    @property
    def indexer_layers(self) -> int:
        """Attention layers with a sparse-attention indexer of their own (0 without sparse
        attention): DeepSeek-V4's CSA layers, those of DeepSeek Sparse Attention, or the
        block-sparse layers (MiniMax-M3)."""
        if self.compressed is not None:
            return self.compressed.csa_layers
        if self.block_sparse is not None:
            return self.block_sparse.layers or self.attention_layers
        m = self.indexer_mla
        if m is None or not m.sparse:
            return 0
        return m.index_layers or self.indexer_kind_layers

    @property
    def indexer_kind_layers(self) -> int:
        """The attention layers of the kind whose latent attention holds the indexer, those
        whose queries attend to its picks: the full layers where they have latent attention
        of their own (``full_attention.mla``), else every attention layer."""
        if self.full_attention is not None and self.full_attention.mla is not None:
            return self.attention_layers - self.windowed_layers
        return self.attention_layers

    @property
    def indexer_mla(self) -> MlaShape | None:
        """The latent attention whose sparse-attention indexer the model runs: the full
        layers' where they have their own (``full_attention.mla``: dots3-note's), else the
        shape's (None without latent attention)."""
        f = self.full_attention
        return f.mla if f is not None and f.mla is not None else self.mla

    @property
    def indexer_share(self) -> float:
        """The share of the attention layers of the indexer's kind (every attention layer,
        or the full ones where they have latent attention of their own) that run an indexer
        of their own (1 where each does; 0 without sparse attention, or without attention
        layers)."""
        return self.indexer_layers / self.indexer_kind_layers if self.indexer_layers \
            else 0.0

    @property
    def mamba_layers(self) -> int:
        return self.hybrid_pattern.count("M")

    @property
    def mlp_layers(self) -> int:
        """Layers (blocks) with a dense MLP."""
        if self.hybrid_pattern:
            return self.hybrid_pattern.count("-")
        return self.layers - self.moe_layers

    @property
    def one_stage(self) -> bool:
        """Whether the model's weights serve several depths, so its pipeline is one stage
        (``check_pipeline``): shared transformer blocks, or looped layers."""
        return bool(self.shared_blocks or self.loop_repeats)

    def check_pipeline(self, pp: int) -> None:
        """Raise for pipeline parallelism where weights serve several depths (``one_stage``):
        shared transformer blocks (``shared_blocks``), whose stages would each hold a copy
        of the blocks its calls use, which is not priced (vLLM serves Zamba2 without it:
        its Zamba2ForCausalLM supports no PP); looped layers (``loop_layers``), whose runs
        would pass the hidden state back to the stage holding the loop, also not priced."""
        if pp <= 1:
            return
        if self.shared_blocks:
            raise GpuarchError(f"--pp: {pp} is not priced for shared transformer blocks "
                               "(Zamba's: each stage would hold its own copy of the blocks "
                               "its calls use); give --pp 1")
        if self.loop_repeats:
            raise GpuarchError(f"--pp: {pp} is not priced for looped layers ({self.name}'s "
                               f"{self.loop_layers} layers run {self.loop_passes} times: "
                               "each pass would return to the stage holding them); give "
                               "--pp 1")

    def check_mamba_split(self, ways: int, flag: str, what: str,
                          one_group_whole: bool = False) -> None:
        """Raise unless ``ways`` GPUs (TP, or TP x CP in training) split the Mamba-2 heads
        and B/C groups evenly, as Megatron-Core splits them, or with ``one_group_whole``
        (the serving engines) hold a single group whole each (``groups_per_gpu``); ``flag``
        and ``what`` name the setting in the message. Nothing to check without Mamba-2
        blocks. A Mamba-1 mixer splits its channels (``heads``) alone, B and C whole on
        every GPU."""
        m = self.mamba
        if m is not None and m.channelwise:
            if m.inner % ways:
                raise GpuarchError(f"{flag}: {what} must divide the {m.label} inner width "
                                   f"({m.inner}) of {self.name}")
            return
        whole = one_group_whole and m is not None and m.groups == 1 and not m.gated_delta
        if m is not None and (m.heads % ways or (m.groups % ways and not whole)):
            heads, groups = ("value heads", "key heads") if m.gated_delta else \
                ("heads", "groups")
            raise GpuarchError(f"{flag}: {what} must divide the {m.label} {heads} "
                               f"({m.heads}) and {groups} ({m.groups}) of {self.name}")

    def splits_heads(self, tp: int) -> bool:
        """Whether ``tp`` tensor-parallel GPUs split the attention evenly: its heads, each
        attention expert's heads and compressed attention's output groups."""
        if self.heads % tp or self.full_heads % tp:
            return False
        if self.attention_experts and self.n_kv_heads % tp:
            return False  # each attention expert's heads split too (JetMoE's)
        return self.compressed is None or self.compressed.o_groups % tp == 0

    @property
    def full_heads(self) -> int:
        """The full-attention layers' query heads: the shape's unless they have their own
        (``full_attention.heads``)."""
        f = self.full_attention
        return f.heads if f is not None and f.heads else self.heads

    @property
    def tp_reductions(self) -> int:
        """How many times a tensor-parallel layer reduces its output across the group: after
        the attention block and after the MLP, or once where the two run side by side
        (``parallel_attention``)."""
        return 1 if self.parallel_attention else 2

    @property
    def block_norms(self) -> int:
        """Norms over the hidden width in each block of a hybrid pattern: one before it, and
        one after it too with ``sandwich_norms`` (LFM3)."""
        return 2 if self.sandwich_norms else 1

    @property
    def layer_norms(self) -> int:
        """Norms over the hidden width in each layer: before attention and MLP, and after
        them too with ``sandwich_norms``; one where they share it (``shared_norm``)."""
        return 4 if self.sandwich_norms else 1 if self.shared_norm else 2

    @property
    def positions(self) -> int:
        """The longest sequence the model is configured for: its context window, else a
        learned position table's rows; 0 = not known."""
        if self.context_window:
            return self.context_window
        return self.max_positions if self.position is Position.LEARNED else 0

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    def kv_heads_per_gpu(self, tp: Any) -> Any:
        """The KV heads each of ``tp`` tensor-parallel GPUs holds: its share, at least one
        (replicated where TP exceeds them); ``tp`` may be a NumPy array."""
        kv = self.n_kv_heads // tp
        return kv + (kv < 1)

    @property
    def head_rows(self) -> int:
        """The LM head's rows: the tokens it scores (``head_vocab``, else the vocabulary)."""
        return self.head_vocab or self.vocab

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def d_value(self) -> int:
        """The width of a value head (and of the attention's output per head)."""
        return self.v_head_dim or self.d_head

    @property
    def kv_width(self) -> int:
        """Channels one KV head caches per position: its key and value, or the key alone
        where keys are values."""
        return self.d_head + (0 if self.keys_are_values else self.d_value)

    def attention_kind(self, window: int) -> TransformerShape:
        """The shape as if every attention layer had the heads of the layers of ``window``
        (0: the full-attention layers; ``layer_kinds``): itself unless its full layers have
        heads of their own (``full_attention``), and then one without ``full_attention``.
        What a cost of one layer kind reads. A block-sparse model's (``block_sparse``)
        kinds are its sparse layers (``window`` its blocks' positions: the shape itself) and
        its dense ones (0: the shape without ``block_sparse``)."""
        if self.block_sparse is not None:
            return self if window else _dense_view(self)
        if self.full_attention is None:
            return self
        return _kind_view(self, bool(window))

    @property
    def sparse_window(self) -> int:
        """The positions a block-sparse layer's query attends to, its blocks' (0 without
        block-sparse attention): the window its layers are costed with."""
        return self.block_sparse.positions if self.block_sparse is not None else 0

    def attention_kinds(self) -> list[tuple[int, int, TransformerShape]]:
        """(window or 0, attention layers, ``attention_kind``) for the sliding-window and the
        full attention layers the model has (a kind with no layers left out)."""
        if self.block_sparse is not None:
            window, windowed = self.sparse_window, self.indexer_layers
        else:
            window, windowed = self.sliding_window, self.windowed_layers
        kinds = [kind for kind in ((window, windowed, self.attention_kind(window)),
                                   (0, self.attention_layers - windowed,
                                    self.attention_kind(0))) if kind[1]]
        if self.kv_shared_layers:
            # each kind's KV-shared layers apart (``layer_view``)
            kinds = [split for w, n, _ in kinds
                     for split in ((w, n - self.kv_shared_of(w), self.layer_view(w)),
                                   (w, self.kv_shared_of(w), self.layer_view(w, True)))
                     if split[1]]
        return kinds

    @property
    def d_ffn(self) -> int:
        """The dense MLP's inner width (the widest, where the MLP blocks differ)."""
        if self.mlp_widths:
            return max(self.mlp_widths)
        return self.ffn_hidden or 4 * self.hidden

    def mlp_kinds(self) -> list[tuple[int, int, TransformerShape]]:
        """(inner width, dense MLP layers or blocks, the shape as if every MLP had that
        width) for each width the dense MLPs have, narrowest first; none without them."""
        if self.kv_shared_mlp:
            wide = self.kv_shared_layers
            return [(self.d_ffn, self.mlp_layers - wide, self),
                    (self.kv_shared_mlp, wide, _width_view(self, self.kv_shared_mlp))]
        if not self.mlp_widths:
            return [(self.d_ffn, self.mlp_layers, self)] if self.mlp_layers else []
        return [(w, self.mlp_widths.count(w), _width_view(self, w))
                for w in sorted(set(self.mlp_widths))]

    @property
    def mean_mlp_width(self) -> float:
        """The dense MLPs' mean inner width (d_ffn unless their widths differ)."""
        if self.kv_shared_mlp:
            return sum(w * n for w, n, _ in self.mlp_kinds()) / self.mlp_layers
        if not self.mlp_widths:
            return float(self.d_ffn)
        return sum(self.mlp_widths) / len(self.mlp_widths)

    @property
    def attention_residual_reads(self) -> float:
        """The hidden-wide vectors one block attention residual reads a token, averaged over
        the model's mixes (``attention_residual_block`` B; 0 without): the block summaries
        before a layer l (the embedding and one a finished block, 1 + l // B) and the running
        sum. A hybrid pattern's blocks are two to a decoder layer, as Kimi K3's are; a
        looped layer's runs (``loop_layers``) each read its own layer's."""
        b = self.attention_residual_block
        if not b:
            return 0.0
        if self.loop_layers:  # each pass's blocks start again from the loop's input
            order = self.run_order()
            return sum(2 + layer // b for layer in order) / len(order)
        layers = self.layers // 2 if self.is_hybrid else self.layers
        return sum(2 + layer // b for layer in range(layers)) / layers

    def layer_view(self, window: int, shared: bool = False) -> TransformerShape:
        """The shape as if every layer were of one kind: ``attention_kind(window)``, and for
        ``shared`` the KV-shared layers' (``kv_shared_layers``: ``reuses_kv``, their MLP's
        width)."""
        view = self.attention_kind(window)
        if not self.kv_shared_layers:
            return view
        return _shared_view(view, self.kv_shared_mlp) if shared else _caching_view(view)

    def kv_shared_of(self, window: int) -> int:
        """How many of the layers of ``window`` (0: the full ones) are KV-shared."""
        if not self.kv_shared_layers:
            return 0
        return self.kv_shared_layers - self.kv_shared_full if window else self.kv_shared_full

    def check_head_split(self, tp: int) -> None:
        """Raise unless ``tp`` divides the query heads (the full-attention layers' too, where
        they have their own) and compressed attention's output groups; a model without
        attention whose Mamba-1 mixers stand in the heads' place is named by their
        channels."""
        for heads in sorted({self.heads, self.full_heads}):
            if heads % tp:
                what = (f"{heads} channels of its Mamba-1 mixers"
                        if not self.attention_layers and self.mamba is not None
                        and self.mamba.selective else f"{heads} heads"
                        + (" of the full-attention layers" if heads != self.heads else ""))
                raise GpuarchError(f"--tp: {tp} does not divide the {what}")
        if self.compressed is not None and self.compressed.o_groups % tp:
            raise GpuarchError(f"--tp: {tp} does not divide the {self.compressed.o_groups} "
                               "output groups (o_groups) of compressed attention")
        if self.attention_experts and self.n_kv_heads % tp:
            raise GpuarchError(f"--tp: {tp} does not divide the {self.n_kv_heads} heads of "
                               "each attention expert (a mixture of attention heads splits "
                               "every expert's heads)")

    def check_mlp_split(self, tp: int) -> None:
        """Raise unless ``tp`` divides every dense MLP's inner width, as a column-parallel
        MLP splits its hidden units (Megatron-Core's and the serving engines' linear layers
        refuse a width the TP size does not divide)."""
        for width in sorted(set(self.mlp_widths or (self.d_ffn,))):
            if width % tp:
                raise GpuarchError(f"--tp: {tp} does not divide the MLP's {width} hidden "
                                   "units (--ffn-hidden)")

    @property
    def d_expert(self) -> int:
        return self.moe_ffn_hidden or self.d_ffn

    @property
    def expert_width(self) -> int:
        """The width of the vectors the routed experts read and write and the dispatcher
        sends: the latent width of latent experts, else the hidden size."""
        return self.moe_latent or self.hidden

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_fine_grained_moe(self) -> bool:
        """More than ``FINE_GRAINED_EXPERTS`` routed experts (DeepSeek-V3, Qwen3 MoE,
        GPT-OSS, Llama 4), against a few large ones (Mixtral's 8)."""
        return self.experts > FINE_GRAINED_EXPERTS

    @property
    def moe_layers(self) -> int:
        if self.hybrid_pattern:
            return self.hybrid_pattern.count("E")
        return self.layers - self.dense_layers if self.is_moe else 0

    def check_expert_parallel(self, ep: int, imbalance: float = 1.0,
                              redundant: int = 0) -> None:
        """Raise unless ``ep`` expert-parallel ranks can split this model's experts (with
        ``redundant`` extra copies of busy experts, EPLB's slots: experts + redundant) and
        the busiest of them can carry ``imbalance`` times the mean routed load: a token sends
        at most min(experts per token, experts per rank) of its copies to one rank, against
        experts_per_token / ep on average."""
        check_number("--moe-imbalance", imbalance, 1,
                     "the busiest rank's load over the mean, a number")
        check_count("--redundant-experts", redundant)
        if redundant and not self.is_moe:
            raise GpuarchError("--redundant-experts: redundant expert copies need a "
                               "mixture-of-experts model")
        if redundant and ep <= 1:
            raise GpuarchError("--redundant-experts: redundant expert copies are spread "
                               "over expert-parallel ranks; give --ep > 1")
        if ep <= 1:
            return
        if not self.is_moe:
            raise GpuarchError("--ep: expert parallelism needs a mixture-of-experts model")
        slots = self.experts + redundant
        if slots % ep:
            where = f"{slots} expert slots ({self.experts} experts + {redundant} " \
                    "redundant)" if redundant else f"{self.experts} experts"
            raise GpuarchError(f"--ep: {ep} does not divide the {where}")
        most = self.busiest_rank_bound(ep, redundant)
        if imbalance > most:
            raise GpuarchError(
                f"--moe-imbalance: {imbalance:g} exceeds {most:g}, the load of a rank that "
                f"receives every token's copies it can hold ({slots // ep} experts per "
                f"rank of {ep}, {self.experts_per_token} experts per token)")

    def busiest_rank_bound(self, ep: int, redundant: int = 0) -> float:
        """The most routed load, over the mean, one of ``ep`` expert-parallel ranks can
        receive: every token's copies it can hold (min(experts per token, expert slots per
        rank) of its experts_per_token) against experts_per_token / ep on average; 1 without
        expert parallelism."""
        if ep <= 1 or not self.is_moe:
            return 1.0
        per_rank = (self.experts + redundant) // ep
        return ep * min(self.experts_per_token, per_rank) / self.experts_per_token

    def chunks(self, window: int) -> bool:
        """Whether a layer kind's attention of ``window`` (``layer_kinds``; 0 = full) attends
        by chunks: a window layer of a chunked model (``attention_chunked``)."""
        return bool(window) and self.attention_chunked

    @property
    def full_layers(self) -> int:
        """Attention layers (a hybrid pattern's attention blocks) without a window."""
        return self.attention_layers - self.windowed_layers

    @property
    def windowed_layers(self) -> int:
        """Layers (a hybrid pattern's attention blocks) whose attention is limited to the last
        ``sliding_window`` positions."""
        if not self.sliding_window:
            return 0
        return self.sliding_layers or self.attention_layers

    def layer_kinds(self) -> list[tuple[bool, int, float, bool]]:
        """(expert layer?, attention window or 0, share of the layers, KV-shared?) for each
        kind of layer the model has; windowed layers are taken as spread evenly over dense
        and expert layers, and KV-shared layers (``kv_shared_layers``, in dense models
        only) counted by their kind of attention. The shares add up to 1."""
        if self.kv_shared_layers:
            return [(False, w, n / self.layers, bool(v.reuses_kv))
                    for w, n, v in self.attention_kinds()]
        moe_share = self.moe_layers / self.layers
        # a block-sparse model's sparse layers are costed as windows of their blocks'
        # positions (its KV cache still holds every position: ``windowed_layers`` is 0)
        if self.block_sparse is not None:
            reach, window_share = self.sparse_window, self.indexer_layers / self.layers
        else:
            reach, window_share = self.sliding_window, self.windowed_layers / self.layers
        kinds = []
        for moe, w_moe in ((True, moe_share), (False, 1 - moe_share)):
            for window, w_window in ((reach, window_share), (0, 1 - window_share)):
                if w_moe * w_window > 0:
                    kinds.append((moe, window, w_moe * w_window, False))
        return kinds


@lru_cache(maxsize=64)
def _dense_view(s: TransformerShape) -> TransformerShape:
    """``TransformerShape.attention_kind``'s view of a block-sparse model's dense layers."""
    return replace(s, block_sparse=None)


@lru_cache(maxsize=64)
def _caching_view(s: TransformerShape) -> TransformerShape:
    """``TransformerShape.layer_view``'s layers of a model with KV-shared layers that cache
    their own keys and values: the shape without KV-shared layers."""
    return replace(s, kv_shared_layers=0, kv_shared_full=0, kv_shared_mlp=0)


@lru_cache(maxsize=64)
def _shared_view(s: TransformerShape, width: int) -> TransformerShape:
    """``TransformerShape.layer_view``'s KV-shared layers (``reuses_kv``), their MLP
    ``width`` wide where given."""
    return replace(_caching_view(s), reuses_kv=True, ffn_hidden=width or s.ffn_hidden)


@lru_cache(maxsize=256)
def _width_view(s: TransformerShape, width: int) -> TransformerShape:
    """``TransformerShape.mlp_kinds``' view: every dense MLP ``width`` wide."""
    return replace(s, ffn_hidden=width, mlp_widths=(), kv_shared_mlp=0)


@lru_cache(maxsize=64)
def _weight_view(s: TransformerShape) -> TransformerShape:
    """``TransformerShape.weight_view`` of a model with looped layers."""
    return replace(_unrolled_view(s), layers=s.layers - s.loop_repeats,
                   sliding_layers=s.sliding_layers - s.loop_repeats_windowed
                   if s.sliding_layers else 0)


@lru_cache(maxsize=64)
def _unrolled_view(s: TransformerShape) -> TransformerShape:
    """``TransformerShape.unrolled_view`` of a model with looped layers."""
    return replace(s, loop_layers=0, loop_passes=0, loop_start=0, loop_window_layers=0,
                   loop_gate_rank=0)


@lru_cache(maxsize=64)
def _kind_view(s: TransformerShape, windowed: bool) -> TransformerShape:
    """``TransformerShape.attention_kind`` of a model whose full layers have heads of their
    own: the window layers' (the shape's own heads) or the full layers'."""
    f = s.full_attention
    assert f is not None
    if windowed:
        return replace(s, full_attention=None)
    if f.mla is not None:  # latent attention of the full layers' own sizes
        heads = f.heads or s.heads
        return replace(s, heads=heads, kv_heads=heads, head_dim=f.head_dim, mla=f.mla,
                       full_attention=None)
    return replace(s, heads=f.heads or s.heads, kv_heads=f.kv_heads, head_dim=f.head_dim,
                   v_head_dim=f.v_head_dim, keys_are_values=f.keys_are_values,
                   attention_sinks=f.sinks, full_attention=None)
