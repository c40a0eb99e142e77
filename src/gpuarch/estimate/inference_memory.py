"""What serving holds in each GPU's memory: weights at their formats, the KV cache (and a
hybrid model's recurrent state), activations and the reserve; the largest batch and the longest
context that fit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuarch.catalog.model import Product
from gpuarch.estimate.inference_config import (
    MAX_BATCH_SEARCH,
    RESERVE_FRACTION,
    SCHEDULER_POLICIES,
    Batching,
    InferenceConfig,
    model_weight_bytes,
)
from gpuarch.estimate.inkling_ops import relative_bias_table_bytes
from gpuarch.estimate.mamba import hybrid_state_bytes
from gpuarch.perf.collectives import Num
from gpuarch.perf.num import maximum, minimum
from gpuarch.workloads.shape import TransformerShape

__all__ = [
    "MAX_CONTEXT_SEARCH",
    "compressed_kv_bytes",
    "engine_slots",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "largest_batch",
    "mamba_state_per_sequence",
    "max_batch_that_fits",
    "max_context_that_fits",
    "memory_parts",
    "memory_per_gpu",
    "mla_entry_bytes",
]


def kv_bytes_per_token(shape: TransformerShape, element: float, tp: int = 1,
                       mla_cache: str = "tensor") -> float:
    """KV-cache bytes one token adds per GPU, all layers: 2 (K and V) x KV heads (not fewer
    than one per GPU when TP exceeds them) x head dim x layers x element (a hybrid model's
    attention blocks only; a block-sparse layer's indexer key too, on every GPU); MLA
    stores its compressed latent and the rotary key instead, and
    a sparse-attention indexer its FP8 key and scale beside them (in FP8 whatever the cache's
    element: DeepGEMM's MQA-logits kernels read FP8 keys), the latent of a one-byte cache
    in FlashMLA's layout where ``mla_cache`` says so (``MLA_CACHES``). DeepSeek-V4: the
    compressed entries a position adds beyond the window rings (``compressed_kv_bytes``)."""
    if shape.compressed is not None:
        return compressed_kv_bytes(shape, element)[0]
    if shape.mla is not None:
        index = shape.indexer_mla
        assert index is not None
        return float(sum(_layer_cache_bytes(view, element, tp, mla_cache) * n
                         for _, n, view in shape.attention_kinds())
                     + index.index_key_bytes * shape.indexer_layers)
    index_keys = shape.indexer_layers * shape.block_sparse.index_key_bytes(element) \
        if shape.block_sparse is not None else 0.0
    return float(sum(_layer_kv_width(view, tp) * n for _, n, view in shape.attention_kinds())
                 * element) + index_keys


def _layer_cache_bytes(shape: TransformerShape, element: float, tp: int,
                       mla_cache: str = "tensor") -> float:
    """Bytes one attention layer of ``shape`` (a kind's view, ``attention_kind``) caches a
    position on one of ``tp`` GPUs: latent attention's entry (``mla_entry_bytes``, the
    same on every GPU), else its share of the keys and values (``_layer_kv_width``); an
    indexer's key apart."""
    if shape.mla is not None:
        return mla_entry_bytes(shape, element, mla_cache)
    return float(_layer_kv_width(shape, tp) * element)


def _layer_kv_width(shape: TransformerShape, tp: int) -> int:
    """Channels one attention layer of grouped-query attention caches per position on one
    of ``tp`` GPUs: its share of the KV heads (at least one), keys and values (the keys
    alone where they are also the values); none in a layer that reads an earlier layer's
    (``reuses_kv``)."""
    if shape.reuses_kv:
        return 0
    return int(shape.kv_heads_per_gpu(tp)) * shape.kv_width


def _window_share(shape: TransformerShape, tp: int, element: float, mla_cache: str
                  ) -> float:
    """The share of the bytes a position adds to the cache that the sliding-window layers
    hold: their share of the attention layers (a hybrid's attention blocks), or of the
    bytes where the full layers have heads of their own (Gemma 4's window layers cache
    8 x 2 x 256 channels a position on one GPU, its global ones 2 x 512; dots3-note's
    window layers a latent of 1,024 + 64 channels, its full ones 512 + 64 and the
    indexer's key, in a cache of ``element`` bytes laid out as ``mla_cache`` says)."""
    if shape.full_attention is None and not shape.kv_shared_layers:
        return shape.windowed_layers / shape.attention_layers
    widths: dict[int, float] = {}
    for window, n, view in shape.attention_kinds():
        widths[window] = widths.get(window, 0.0) + n * _layer_cache_bytes(
            view, element, tp, mla_cache)
    index = shape.indexer_mla
    if index is not None:  # the indexer's keys, in the full layers
        widths[0] = widths.get(0, 0.0) + index.index_key_bytes * shape.indexer_layers
    return widths.get(shape.sliding_window, 0.0) / sum(widths.values())


def mla_entry_bytes(shape: TransformerShape, element: float, mla_cache: str = "tensor"
                    ) -> float:
    """Bytes of one position's latent in one layer of a latent-attention model's cache of
    ``element`` bytes: the latent and rotary key at that width, or FlashMLA's FP8 layout
    for a sparse-attention model in a one-byte cache under ``mla_cache`` "flashmla"."""
    m = shape.mla
    assert m is not None
    if mla_cache == "flashmla" and m.sparse and element == 1.0:
        return float(m.flashmla_fp8_bytes)
    return float(m.latent_width * element)


def compressed_kv_bytes(shape: TransformerShape, element: float) -> tuple[float, float]:
    """DeepSeek-V4's cache per GPU (replicated over tensor parallelism: one key-value head)
    as (bytes a position adds, all layers; bytes of one window position, all layers): one
    entry per ``ratio`` positions in each compressed layer and, in the CSA layers, the
    indexer's FP8 key for each (``CompressedAttention.index_key_bytes``), and every layer's
    ring of the last ``window`` positions, an entry each (``CompressedAttention.entry_bytes``:
    the engines' 584-byte FP8 layout in a one-byte cache). The compressors' buffers of a
    window not yet closed (at most 8 or 128 positions a layer) are not counted."""
    c = shape.compressed
    assert c is not None
    entry = c.entry_bytes(element, shape.d_head)
    grows = sum((entry + (c.index_key_bytes if c.overlaps(r) else 0)) / r
                for r in c.ratios if r)
    return grows, entry * shape.layers


def kv_bytes_per_sequence(shape: TransformerShape, element: float, tokens: int,
                          tp: int = 1, window_kv_cache: str = "ring",
                          mla_cache: str = "tensor") -> float:
    """KV-cache bytes of one sequence of ``tokens`` per GPU: sliding-window layers keep only
    the last ``sliding_window`` positions (a ring buffer), the others every position; with
    ``window_kv_cache`` "full" every layer keeps every position (DeepSeek-V4's windows
    too)."""
    return _sequence_bytes(shape, element, kv_bytes_per_token(shape, element, tp, mla_cache),
                           window_kv_cache, tp, mla_cache)(tokens)


def _sequence_bytes(shape: TransformerShape, element: float, per_token: float,
                    window_kv_cache: str, tp: int = 1, mla_cache: str = "tensor"
                    ) -> Callable[[int], float]:
    """``kv_bytes_per_sequence`` as a function of the tokens, for a cache of ``per_token``
    bytes a position (``kv_bytes_per_token``, which the memory searches work out once)."""
    if shape.compressed is not None:
        window = compressed_kv_bytes(shape, element)[1]
        ring = shape.compressed.window

        def compressed(tokens: int) -> float:
            held = tokens if window_kv_cache == "full" else min(tokens, ring)
            return per_token * tokens + window * held
        return compressed
    if not shape.windowed_layers or window_kv_cache == "full":
        return lambda tokens: per_token * tokens
    share = _window_share(shape, tp, element, mla_cache)
    window = shape.sliding_window
    return lambda tokens: per_token * ((1 - share) * tokens + share * min(tokens, window))


def _weight_bytes(shape: TransformerShape, cfg: InferenceConfig) -> float:
    """Weight bytes each GPU holds: the model's share (``model_weight_bytes``) less what
    stays in host memory (``cpu_offload_gib``)."""
    return model_weight_bytes(shape, cfg) - cfg.cpu_offload_bytes


def mamba_state_per_sequence(shape: TransformerShape, cfg: InferenceConfig) -> Any:
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
    per_token = kv_bytes_per_token(shape, element, cfg.tp, cfg.mla_cache)
    # the answer's positions a running sequence holds: all of them (reserved at admission), or
    # under max_utilization the mean so far of the sequences in flight
    static = cfg.batching is Batching.STATIC
    out_tokens = round(cfg.output_in_flight) if static or \
        cfg.scheduler_policy == SCHEDULER_POLICIES[0] \
        else round(cfg.mean_decode_context - cfg.input_len)
    # the shared prefix's blocks are held once, not once per sequence, in the layers that
    # keep every position (a sliding-window layer's ring moves past the prefix)
    windowed = 0.0 if cfg.window_kv_cache == "full" or not shape.windowed_layers \
        else _window_share(shape, cfg.tp, element, cfg.mla_cache)
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
    # (and Inkling's relative-bias table, a layer's at a time)
    per_token_activations = (4 * shape.hidden + 3 * width) * 2.0 \
        + relative_bias_table_bytes(shape, cfg.tp)
    logits_per_sequence = shape.head_rows / cfg.tp * 4.0

    # a hybrid model's Mamba-2 blocks hold a fixed state per sequence, whatever its length
    state = mamba_state_per_sequence(shape, cfg)
    cached_state = hybrid_state_bytes(shape, cfg.tp, cfg.ssm_state_bytes)

    sequence_bytes = _sequence_bytes(shape, element, per_token, cfg.window_kv_cache, cfg.tp,
                                     cfg.mla_cache)

    def sizes(batch: Num, prompt: int) -> tuple[Num, Num]:
        kv = batch * (sequence_bytes(prompt + out_tokens) + state) / cfg.pp
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


def memory_parts(shape: TransformerShape, cfg: InferenceConfig, batch: Num,
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
    return {k: float(v) for k, v in memory_parts(shape, cfg, batch, product).items()}


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
    return largest_batch(shape, cfg, product)


def engine_slots(shape: TransformerShape, cfg: InferenceConfig, product: Product) -> int:
    """Sequences a continuous-batching replica can hold: the largest batch that fits, or the
    engine's ``max_batch_size`` where that is smaller (0: none fits)."""
    limit = largest_batch(shape, cfg, product)
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


def largest_batch(shape: TransformerShape, cfg: InferenceConfig, product: Product) -> int:
    margin = _margin(shape, cfg, product)
    batch = _largest(lambda b: margin(b, cfg.input_len), MAX_BATCH_SEARCH)
    return MAX_BATCH_SEARCH if batch is None else batch
