"""A hybrid model's recurrent block's operators on one GPU, Mamba-2 (Nemotron-H, Nemotron 3
Nano) or Gated DeltaNet (Qwen3-Next, Qwen3.5): the chunked scan a training step and a
prefill run over every token, the one-token state update a decode step runs per sequence,
and the state a sequence holds between steps. The two share their structure (a convolution
over the inputs, a chunked linear recurrence with a per-head matrix state, a gated norm,
the projections) and differ in the scan's arithmetic (``mamba_scan_flops``,
``mamba_scan_bytes``); lightning attention (MiniMax-Text-01, MiniMax-M1) is Mamba-2's
algorithm with a fixed decay a head and no convolution, priced as such over its blocks.
Mamba-1 (Jamba, Falcon Mamba) has the convolution and the state
update too, but its scan is elementwise, a state a channel on the CUDA cores
(``selective_scan_costs``), and two small projections (x_proj, dt_proj) sit between the
convolution and the scan.

Heads and B/C groups are split over tensor parallelism, as Megatron-Core's MambaMixer and
the serving engines split them (a single group held whole on every GPU in serving, as vLLM
replicates it: ``MambaShape.groups_per_gpu``); the input and output projections are GEMMs
the caller builds (a serving engine's quantized weights, a training step's casts).
"""

from __future__ import annotations

from typing import Any

from gpuarch.estimate.inkling_ops import short_conv_state_bytes
from gpuarch.perf.num import Num
from gpuarch.perf.roofline import Elementwise, Gemm, Op
from gpuarch.workloads.flops import MAMBA_SCAN_FLOPS_PER_STATE
from gpuarch.workloads.shape import MambaShape, TransformerShape

__all__ = ["DEFAULT_SSM_STATE", "GDN_BACKWARD_CHAINS", "GDN_CHUNK", "MAMBA_CHUNK",
           "MAMBA_SERVING_STATE_BYTES", "SSM_STATE_BYTES", "default_state_precision",
           "gated_delta_glue_elements", "gated_delta_scan_bytes", "gated_delta_scan_flops",
           "hybrid_state_bytes", "mamba_decode_ops", "mamba_input_projections",
           "mamba_mixer_ops", "mamba_ops", "mamba_scan_bytes", "mamba_scan_flops",
           "mamba_state_bytes", "rwkv_wkv", "selective_scan_costs", "short_conv_gates",
           "x_proj_reduce_bytes"]

MAMBA_CHUNK = 128
"""Tokens per chunk of Mamba-2's chunked scan (SSD): Megatron-Core's MambaMixer default
(chunk_size 128, megatron/core/ssm/mamba_mixer.py @00bebb45), and Nemotron 3 Nano's
config.json's chunk_size."""

SSM_STATE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}
"""Bytes per element of the recurrent (SSM) state a serving engine keeps per sequence, by
its format (which format an engine keeps by default: ``default_state_precision``). The
convolution's state stays in the model's 16 bits in every engine."""

DEFAULT_SSM_STATE = "fp32"
"""The state's format with no engine named (``default_state_precision``): FP32, SGLang's
default and the one vLLM and TensorRT-LLM keep for Nemotron-H and Qwen3.5 (vLLM) as their
checkpoints ask; the larger of the engines' choices, so the memory it leaves is not
overstated."""

MAMBA_SERVING_STATE_BYTES = SSM_STATE_BYTES[DEFAULT_SSM_STATE]
"""Its bytes per element."""


def default_state_precision(shape: TransformerShape, engine: str = "",
                            sixteen: str = "bf16") -> str:
    """The recurrent state's format ``engine`` keeps for ``shape`` unless told (``sixteen``:
    the model's 16-bit format; "" or another engine: ``DEFAULT_SSM_STATE``, the model's 16
    bits for lightning attention).

    - Kimi Delta Attention: FP32 (vLLM's ``kda_state_dtype`` and TensorRT-LLM's
      ``extract_mamba_kv_cache_params`` keep its recurrent state so whatever they are told;
      SGLang's ``KimiLinearCacheParams`` follows its FP32 default).
    - vLLM (``MambaStateDtypeCalculator``, vllm/model_executor/layers/mamba/mamba_utils.py):
      the model's dtype unless ``--mamba-ssm-cache-dtype`` says otherwise, for Mamba-1,
      Mamba-2, Gated DeltaNet and (``--mamba-cache-dtype``) lightning attention, except
      where a model's config hook sets it (vllm/model_executor/models/config.py):
      Nemotron-H's from its config's ``mamba_ssm_cache_dtype`` (float32 if absent),
      Qwen3.5's from its config's ``mamba_ssm_dtype``.
    - SGLang: ``--mamba-ssm-dtype``, float32 by default (python/sglang/srt/server_args.py);
      its lightning attention's state was not read (the model's 16 bits kept).
    - TensorRT-LLM: ``KvCacheConfig.mamba_ssm_cache_dtype`` "auto" takes the config's
      ``mamba_ssm_cache_dtype``, else the model's dtype (``resolve_ssm_cache_dtype``,
      tensorrt_llm/_torch/pyexecutor/config_utils.py; it leaves Qwen3.5's
      ``mamba_ssm_dtype`` aside on purpose).

    Only Nemotron-H's configs write ``mamba_ssm_cache_dtype`` and only Qwen3.5's
    ``mamba_ssm_dtype`` among the families read, so each key stands for its family's hook."""
    m = shape.mamba
    if m is None:
        return DEFAULT_SSM_STATE
    if m.kind == "kda":
        return "fp32"
    if engine == "vllm":
        if m.lightning:
            return sixteen
        return m.ssm_cache_dtype or m.ssm_dtype or sixteen
    if engine == "trtllm":
        return m.ssm_cache_dtype or sixteen
    if m.lightning:
        return sixteen
    return DEFAULT_SSM_STATE


def mamba_ops(s: TransformerShape, tp: Any, tokens: Num, element: float,
              seq_len: Num = 0) -> list[Op]:
    """A Mamba-2 block's forward operators in training on one of ``tp`` GPUs: the input
    projection to z, x, B, C and dt, ``mamba_mixer_ops`` over sequences of ``seq_len``
    tokens and the output projection; a Gated DeltaNet block's also the copies around its
    scan (``gated_delta_glue_elements``)."""
    m = s.mamba
    assert m is not None
    glue: list[Op] = []
    if m.gated_delta:
        forward, backward = gated_delta_glue_elements(m, tp)
        glue = [Elementwise(tokens * forward * element, name="gdn_glue",
                            backward=Elementwise(tokens * backward * element,
                                                 name="gdn_glue"))]
    return [*(Gemm(tokens, n, k, name=name) for name, n, k in mamba_input_projections(s, tp)),
            *mamba_mixer_ops(m, tp, tokens, element, seq_len), *glue,
            Gemm(tokens, s.hidden, m.inner // tp, name="mamba_out_proj")]


def mamba_input_projections(s: TransformerShape, tp: Any) -> list[tuple[str, Any, int]]:
    """The GEMMs (name, outputs, inputs) a recurrent block runs before its mixer on one of
    ``tp`` GPUs: the input projection (``MambaShape.in_proj_per_gpu``) and, for Kimi Delta
    Attention, its decay's and output gate's up-projections from their low-rank halves;
    for Mamba-1, x_proj (row-parallel: this GPU's share of x in, the step's rank, B and C
    out, summed over the group: ``x_proj_reduce_bytes``) and dt_proj (column-parallel: the
    rank in, this GPU's channels' steps out)."""
    m = s.mamba
    assert m is not None
    out: list[tuple[str, Any, int]] = [("mamba_in_proj", m.in_proj_per_gpu(tp), s.hidden)]
    if m.selective:
        out += [("mamba_x_proj", m.x_proj_width, m.inner // tp),
                ("mamba_dt_proj", m.inner // tp, m.dt_rank)]
    if m.gate_up_width:  # (none where both gates are full rank: Ling's)
        out.append(("kda_gate_up", m.gate_up_width // tp, m.low_rank_width))
    return out


def gated_delta_glue_elements(m: MambaShape, tp: Any) -> tuple[Any, Any]:
    """Elements per token that a Gated DeltaNet block's training forward and backward move
    on one of ``tp`` GPUs in the copies Megatron-Core's GatedDeltaNet makes around the
    convolution and flash-linear-attention's scan (megatron/core/ssm/gated_delta_net.py
    @00caa53a, ``forward``), each read once and written once: q, k and v transposed to
    channels-first for the convolution (2(2QK + V)); q and k made contiguous (4QK) and
    L2-normalised (4QK); q and k repeated to the value heads, ``r`` = value over key heads,
    where r > 1 (2QK(1 + r)); v and the output gate made contiguous (4V); the gated norm's
    output transposed back (2V). QK: the key heads' width, V: the value heads'. The backward
    moves the same through each copy's gradient, the L2 norm's reading its input beside the
    gradient (4QK more). Transformers' Qwen3-Next block and vLLM's kernels fuse these; this
    is training's, which Megatron-Core runs."""
    qk = m.groups_per_gpu(tp) * m.state
    v = m.inner // tp
    r = m.heads // m.groups
    repeat = 2 * qk * (1 + r) if r > 1 else 0
    forward = 2 * (2 * qk + v) + 8 * qk + repeat + 6 * v
    return forward, forward + 4 * qk


def mamba_mixer_ops(m: MambaShape, tp: Any, tokens: Num, element: float,
                    seq_len: Num = 0) -> list[Op]:
    """What a Mamba-2 block runs between its projections over ``tokens`` tokens of whole
    sequences (training, prefill): the depthwise convolution over x, B and C (read and write;
    its backward runs it again, as mamba_ssm's fused function saves not its output, then reads
    its input and output gradient and writes the input gradient); the chunked scan over
    sequences of at most ``seq_len`` tokens, the longer of its memory traffic
    (``mamba_scan_bytes``) and its matrix products (``mamba_scan_flops``, at
    ``Efficiency.mamba_scan`` of the 16-bit peak), its backward likewise; the gated RMSNorm, a
    module of its own (reads y, writes its output; its backward reads y, its output's gradient
    and writes y's, a pass of twice the bytes). All of them ``mamba_kernel``s
    (``Efficiency.mamba_blackwell``), the backward ones ``mamba_backward``
    (``Efficiency.mamba_backward_for``). A Gated DeltaNet block's forward scan is marked
    ``gated_delta``: its measured rate (``Efficiency.gated_delta_scan``,
    ``gated_delta_blackwell``) replaces Mamba-2's, and it takes at least its longest sequence's
    chunks one after another (``Elementwise.chain_steps``); its backward, at the Gated DeltaNet
    backward's measured rate (``Efficiency.gated_delta_backward``), walks them
    ``GDN_BACKWARD_CHAINS`` times. A Mamba-1 block's: the convolution, then its selective
    scan (``selective_scan_costs``) at the roofline's rate (no timing of its kernels is in
    the validation data), the gate applied inside it, no norm."""
    conv = 1.0 * tokens * m.conv_per_gpu(tp) * element
    # (lightning attention has no convolution)
    conv_op: list[Op] = [Elementwise(
        2 * conv, name="mamba_conv",
        backward=Elementwise(5 * conv, name="mamba_conv", mamba_kernel=True,
                             mamba_backward=True),
        mamba_kernel=True)] if m.conv_kernel else []
    if m.short_conv:
        return [*conv_op, short_conv_gates(m, tp, tokens, element)]
    if m.rwkv:
        return [*conv_op, rwkv_wkv(m, tp, tokens, element)]
    if m.selective:
        f_bytes, b_bytes, f_flops, b_flops = selective_scan_costs(m, tp, element)
        return [*conv_op,
                Elementwise(tokens * f_bytes, tokens * f_flops, name="mamba_scan",
                            backward=Elementwise(tokens * b_bytes, tokens * b_flops,
                                                 name="mamba_scan"))]
    forward, backward = mamba_scan_bytes(m, tp, element)
    fwd_flops, bwd_flops = mamba_scan_flops(m, tp)
    chain = (seq_len + GDN_CHUNK - 1) // GDN_CHUNK if m.gated_delta else 0.0
    scan = Elementwise(tokens * forward, name="mamba_scan", matmul_flops=tokens * fwd_flops,
                       backward=Elementwise(tokens * backward, name="mamba_scan",
                                            matmul_flops=tokens * bwd_flops,
                                            mamba_kernel=True, mamba_backward=True,
                                            gated_delta=m.gated_delta,
                                            chain_steps=GDN_BACKWARD_CHAINS * chain),
                       mamba_kernel=True, gated_delta=m.gated_delta, chain_steps=chain)
    norm = 2.0 * tokens * (m.inner // tp) * element
    return [*conv_op,
            scan,
            Elementwise(norm, name="mamba_norm", mamba_kernel=True,
                        backward=Elementwise(2 * norm, name="mamba_norm", mamba_kernel=True,
                                             mamba_backward=True))]


def mamba_decode_ops(m: MambaShape, tp: Any, seqs: Num, element: float,
                     state_element: float = MAMBA_SERVING_STATE_BYTES,
                     tokens_per_seq: int = 1) -> list[Op]:
    """What a Mamba-2 block runs between its projections for one new token of each of
    ``seqs`` sequences (mamba_ssm's causal_conv1d_update and selective_state_update, the
    kernels vLLM and SGLang decode with): the convolution reads each sequence's last
    conv_kernel - 1 inputs and the new one and writes them back with its output; the state
    update reads and writes each sequence's heads x head_dim x state recurrent state, reads
    x, z, B, C and dt and writes y (Kimi Delta Attention's per-channel decay read beside);
    the gated RMSNorm as in a prefill (Mamba-1: its step a channel read too, no norm).
    With ``tokens_per_seq`` t > 1 (a speculative step verifying t - 1 drafted tokens and the
    target's own) the same kernels run over the t tokens: the convolution's window widened
    by t - 1 columns, the state read once and written after every token, so that it can go
    back to the last one accepted (vLLM's selective_state_update writes each token's state
    to its own page, vllm-project/vllm PR 33726; SGLang's to a scratch buffer it scatters
    back from, sgl-project/sglang PR 13434)."""
    t = tokens_per_seq
    inner = m.inner // tp
    conv_width = m.conv_per_gpu(tp)
    conv = 1.0 * seqs * conv_width * element * (2 * (m.conv_kernel - 1 + t - 1) + 2 * t)
    state = (1.0 + t) * seqs * (m.heads // tp) * m.head_dim * m.state * state_element
    # Kimi Delta Attention also reads its decay, and Mamba-1 its step, a channel each
    io = 1.0 * seqs * t * ((4 if m.kda or m.selective or m.rwkv else 3) * inner
                           + 2 * m.groups_per_gpu(tp) * m.state) * element
    ops: list[Op] = [Elementwise(conv, name="mamba_conv")] if m.conv_kernel else []
    if m.short_conv:  # no recurrent state: the convolution and its gates
        return [*ops, short_conv_gates(m, tp, seqs * t, element)]
    ops.append(Elementwise(state + io, name="mamba_scan"))
    if not (m.selective or m.rwkv):  # Mamba-1 gates inside the update; neither has a norm
        ops.append(Elementwise(2.0 * seqs * t * inner * element, name="mamba_norm"))
    return ops


def hybrid_state_bytes(s: TransformerShape, tp: Any,
                       state_element: float = MAMBA_SERVING_STATE_BYTES) -> Any:
    """Bytes one sequence holds on one of ``tp`` GPUs in all of a model's Mamba-2 blocks
    between serving steps (the convolution's inputs 16-bit, the recurrent state
    ``state_element`` bytes an element), or in its attention layers' convolutions over
    queries and keys (``qk_conv_state_bytes``), or its short convolutions
    (``inkling_ops.short_conv_state_bytes``); 0 without them."""
    if s.qk_conv_depthwise:
        return s.attention_layers * qk_conv_state_bytes(s, tp)
    if s.short_conv_taps:  # Inkling's short convolutions, each kind of layer its own
        return sum(n * short_conv_state_bytes(view, tp) for _, n, view in s.attention_kinds())
    if s.mamba is None:
        return 0.0
    return s.mamba_layers * mamba_state_bytes(s.mamba, tp, 2.0, state_element)


def qk_conv_state_bytes(s: TransformerShape, tp: Any) -> Any:
    """Bytes one sequence holds per attention layer on one of ``tp`` GPUs between steps
    with convolved queries and keys (ZAYA's): the last qk_conv_depthwise + qk_conv_grouped
    - 2 inputs of its query and key channels (its share of the query heads, at least one
    KV head) and the previous token's delayed half of its values, 16-bit."""
    kv = s.kv_heads_per_gpu(tp)
    channels = (s.heads // tp + kv) * s.d_head
    steps = s.qk_conv_depthwise + s.qk_conv_grouped - 2
    return (channels * steps + kv * s.d_head // 2) * 2.0


def mamba_state_bytes(m: MambaShape, tp: Any, element: float,
                      state_element: float = MAMBA_SERVING_STATE_BYTES) -> Any:
    """Bytes one sequence holds per Mamba-2 block on one of ``tp`` GPUs between steps,
    whatever its length: the convolution's last conv_kernel - 1 inputs over x, B and C, and
    the recurrent state, heads x head_dim x state."""
    conv = max(0, m.conv_kernel - 1) * m.conv_per_gpu(tp) * element
    if m.rwkv:  # the channel mixing's token shift keeps the previous input too
        conv *= 2
    return conv + (m.heads // tp) * m.head_dim * m.state * state_element


GDN_CHUNK = 64
"""Tokens per chunk of the chunked gated delta rule: the chunk size of Transformers'
reference ``torch_chunk_gated_delta_rule`` (models/qwen3_next/modular_qwen3_next.py
@043bb8dd), the block flash-linear-attention's ``chunk_gated_delta_rule`` kernels work in,
which vLLM, SGLang and Megatron-Core's GatedDeltaNet call."""


GDN_BACKWARD_CHAINS = 2
"""Passes along a sequence's chunks, one after another, in the chunked gated delta rule's
backward: flash-linear-attention's ``chunk_gated_delta_rule_bwd`` recomputes the chunk
states forward (``chunk_gated_delta_rule_fwd_h``) and then carries their gradients back
from the last chunk (``chunk_gated_delta_rule_bwd_dhu``), each a chain of the forward
state pass's length; the other backward kernels work on chunks independently."""


def gated_delta_scan_flops(m: MambaShape, tp: Any) -> tuple[Any, Any]:
    """Matrix FLOPs per token of the chunked gated delta rule on one of ``tp`` GPUs, forward
    and backward, counted from the products flash-linear-attention's kernels form over
    chunks of ``GDN_CHUNK`` tokens C, key width K (``state``) and value width V
    (``head_dim``), per value head at 2 FLOP a multiply-add: forward, the chunk's beta K K^T
    (CK), its triangular inverse (about C^2 / 3), the WY factors W and U (CK + CV), the
    state's passing, U - W S and the update K^T V (2KV), and the outputs Q S (KV) and the
    chunk's own masked Q K^T V (CK + CV); backward, those recomputed, then the gradients
    through the outputs, the state recurrence and the WY factors, about 8CK + 4CV + 8KV +
    C^2 in all. An estimate from the algorithm (Yang et al., "Gated Delta Networks", ICLR
    2025, section 3), not a count of the kernels' instructions."""
    c, k, v = GDN_CHUNK, m.state, m.head_dim
    heads = m.heads // tp
    forward = heads * 2 * (3 * c * k + 2 * c * v + 3 * k * v + c * c / 3)
    backward = heads * 2 * (8 * c * k + 4 * c * v + 8 * k * v + c * c)
    return forward, backward


def gated_delta_scan_bytes(m: MambaShape, tp: Any, element: float) -> tuple[Any, Any]:
    """Bytes per token the chunked gated delta rule's kernels move on one of ``tp`` GPUs,
    forward and backward, an estimate from the kernels' passes: forward, the keys read by
    the K K^T, WY, state and output passes and the queries by the output pass, the values by
    the WY pass, W and U written and read, the new values written and read, the output
    written (keys 7 passes, values 6, ``element`` bytes); per value head the decay and beta
    (FP32, about four reads each), the chunk's C x C matrix (FP32, written, inverted in
    place and read) and the chunk states (K x V in ``element`` bytes, written and read once
    a chunk). Backward, taken as three times the forward (the passes recomputed, then about
    twice as many for the gradients; Mamba-2's backward moves 2.9 times its forward)."""
    f = 4.0  # FP32
    keys = m.groups_per_gpu(tp) * m.state
    values = m.inner // tp
    heads = m.heads // tp
    states = m.state * m.head_dim / GDN_CHUNK
    forward = ((7 * keys + 6 * values) * element
               + heads * (8 * f + 4 * GDN_CHUNK * f + 2 * states * element))
    return forward, 3.0 * forward


def mamba_scan_flops(m: MambaShape, tp: Any, chunk: int = MAMBA_CHUNK) -> tuple[Any, Any]:
    """Matrix FLOPs per token of the chunked scan on one of ``tp`` GPUs, forward and
    backward (the SSD algorithm, Dao and Gu 2024, section 6, as mamba_ssm's kernels run it
    over chunks of ``chunk`` tokens Q, ``state`` N, ``head_dim`` P): forward, C B^T
    per group (2QN), the chunk's own outputs (2QP a head), the chunk states (2NP) and the
    outputs from the passed states (2NP); lightning attention, the same algorithm with a
    fixed decay, over its blocks (``MambaShape.block``: Q K^T a head, a group a head);
    backward, C B^T and the chunk states again, then
    the gradients of the outputs' two products (2QP + 2NP ... six 2NP products and two 2QP
    ones a head in all) and C B^T's gradient back to B and C (two more 2QN a group)."""
    if m.gated_delta:
        return gated_delta_scan_flops(m, tp)
    q, n, p = m.block or chunk, m.state, m.head_dim
    groups, heads = m.groups_per_gpu(tp), m.heads // tp
    forward = groups * 2 * q * n + heads * (2 * q * p + 4 * n * p)
    backward = 3 * groups * 2 * q * n + heads * (4 * q * p + 12 * n * p)
    return forward, backward


def mamba_scan_bytes(m: MambaShape, tp: Any, element: float) -> tuple[Any, Any]:
    """Bytes per token the chunked scan's kernels move on one of ``tp`` GPUs, forward and
    backward (mamba_ssm's ssd_combined.py @d757aef1, the kernels Megatron-Core's
    mamba_split_conv1d_scan_combined runs, the gate z applied inside the scan; FP32 where
    the kernels write FP32). Per token: x and z are ``inner`` wide, B and C together
    2 x groups x state, dt and its cumulative sum one each per head (FP32), each chunk's
    state heads x head_dim x state over ``MAMBA_CHUNK`` tokens, and B C^T groups x
    ``MAMBA_CHUNK`` (lightning attention: q, k, v, its output gate, its decays standing for
    dt, over blocks of ``MambaShape.block``).

    Forward: the cumulative sum (reads dt, writes two FP32); the chunk states (read x, B
    and those, write the states in FP32); the state passing (reads them, writes them in 16
    bits); B C^T (reads B and C, writes FP32); the chunk scan (reads B C^T, x, C, the
    states, dt and z, writes the output and the ungated output it saves): x and z five
    passes, B and C two, the states 12 bytes an element.

    Backward: the cumulative sum, B C^T, the chunk states and their passing run again (in
    FP32); then the gate's gradient (reads the output gradient, the saved output and z,
    writes dz), the state gradients (FP32, then both state tensors cast to 16 bits), their
    passing backward, dx (reads x, B, B C^T, the output gradient and the state gradients),
    dB, dC, the gradient of B C^T and its two products back to dB and dC: x-wide tensors
    13 passes, B and C 5.5, the states 24 + 8 x element bytes an element, B C^T five FP32
    passes, the per-head values some fifteen FP32 ones (about 2.9 x the forward's bytes
    for Nemotron 3 Nano)."""
    if m.gated_delta:
        return gated_delta_scan_bytes(m, tp, element)
    f = 4.0  # FP32
    chunk = m.block or MAMBA_CHUNK
    inner = m.inner // tp
    bc = 2 * m.groups_per_gpu(tp) * m.state
    heads = m.heads // tp
    state = heads * m.head_dim * m.state / chunk
    products = m.groups_per_gpu(tp) * chunk * f
    forward = ((5 * inner + 2 * bc) * element + heads * (element + 6 * f)
               + state * (2 * f + 2 * element) + 2 * products)
    backward = ((13 * inner + 5.5 * bc) * element + heads * (element + 15 * f)
                + state * (6 * f + 8 * element) + 5 * products)
    return forward, backward


def selective_scan_costs(m: MambaShape, tp: Any, element: float) -> tuple[Any, Any, Any, Any]:
    """Bytes and CUDA-core FLOPs per token of Mamba-1's selective scan on one of ``tp``
    GPUs, forward and backward (mamba_ssm's selective_scan_fwd and selective_scan_bwd, the
    kernels vLLM's and SGLang's Mamba-1 mixers and mamba_inner_fn run: the state kept on
    chip, a chunk's final state written every 2,048 tokens, not counted). Forward: reads x,
    the step and z (each the GPU's share of the inner width) and B and C, writes the output
    and its gated copy (the output projection's input): five x-wide passes, B and C one;
    ``MAMBA_SCAN_FLOPS_PER_STATE`` a channel and state element (discretising A and B,
    the update and C's product). Backward: reads x, the step, z, the output and its
    gradient, writes the gradients of x, the step and z (eight x-wide passes), reads B and C
    and writes their gradients in FP32; its arithmetic taken as three times the forward's
    (the forward recomputed from the saved chunk states, then the gradients' products, about
    twice as many), an estimate from the algorithm (Gu and Dao, "Mamba", arXiv 2312.00752,
    section 3.3.2), not a count of the kernels' instructions."""
    inner = m.inner // tp
    bc = 2 * m.state
    forward = (5 * inner + bc) * element
    backward = (8 * inner + bc) * element + bc * 4.0
    flops = MAMBA_SCAN_FLOPS_PER_STATE * inner * m.state
    return forward, backward, flops, 3.0 * flops


def x_proj_reduce_bytes(m: MambaShape, tokens: Num, element: float) -> Num:
    """Bytes a Mamba-1 block's x_proj all-reduces over its tensor-parallel group for
    ``tokens`` tokens (its row-parallel output: the step's rank, B and C, vLLM's MambaMixer;
    the backward reduces the gradients of the same once more); 0 for the other mixers."""
    return tokens * m.x_proj_width * element


RWKV_WKV_FLOPS = 20
"""CUDA-core FLOPs a channel and token of RWKV-4's recurrence: the exponentials of the
decayed and bonus-weighted keys, the running maximum and the two weighted sums' updates
and their quotient (Transformers' rwkv_linear_attention_cpu, the sequence its CUDA kernel
runs), about twenty operations, an estimate from the algorithm."""


def rwkv_wkv(m: MambaShape, tp: Any, tokens: Num, element: float) -> Elementwise:
    """RWKV-4's recurrence over ``tokens`` tokens on one of ``tp`` GPUs, and the
    receptance's gate on its output: the kernel reads the key and the value and writes the
    output (the GPU's share of the inner width each, its state kept on chip along the
    sequence), the gate reads the receptance and the output and writes their product;
    ``RWKV_WKV_FLOPS`` a channel and token. The backward reads and writes about twice as
    much and does about twice the arithmetic (Transformers' wkv CUDA kernel's backward
    walks the sequence once more)."""
    inner = m.inner // tp
    moved = 6.0 * tokens * inner * element
    flops = 1.0 * RWKV_WKV_FLOPS * tokens * inner
    return Elementwise(moved, flops, name="mamba_scan",
                       backward=Elementwise(2.0 * moved, 2.0 * flops, name="mamba_scan"))


def short_conv_gates(m: MambaShape, tp: Any, tokens: Num, element: float) -> Elementwise:
    """A short convolution's two gates over ``tokens`` tokens on one of ``tp`` GPUs: B x
    before the convolution and C times its output after it, each reading two of the GPU's
    share of the inner width and writing one (Transformers' Lfm2ShortConv and vLLM's
    ShortConv run them as elementwise products); the backward reads and writes about twice
    as much."""
    moved = 6.0 * tokens * (m.inner // tp) * element
    return Elementwise(moved, name="conv_gates",
                       backward=Elementwise(2.0 * moved, name="conv_gates"))
