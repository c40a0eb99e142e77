"""Plain text for ``gpuarch models``: the model presets, one line each or one in full."""

from __future__ import annotations

from collections.abc import Sequence

from gpuarch.report.text import fmt, table
from gpuarch.units import Unit, from_si
from gpuarch.workloads.hf_quant import CheckpointFormats
from gpuarch.workloads.params import count_params
from gpuarch.workloads.presets import Preset
from gpuarch.workloads.shape import MlaShape, QkNorm, TransformerShape

__all__ = ["checkpoint_label", "render_preset", "render_presets"]


def checkpoint_label(c: CheckpointFormats | None) -> str:
    """The published checkpoint's formats in a few characters (``bf16`` when 16-bit)."""
    if c is None:
        return "bf16"
    if c.expert_weights:
        acts = f" A{c.expert_activations}" if c.expert_activations else ""
        return f"W{c.weights} experts W{c.expert_weights}{acts}"
    return f"W{c.weights} A{c.activations}"


def _experts(s: TransformerShape) -> str:
    if not s.is_moe:
        return "-"
    shared = f" +{s.shared_experts} shared" if s.shared_experts else ""
    groups = (f" from {s.groups_per_token} of {s.expert_groups} groups"
              if s.expert_groups else "")
    zero = f" + {s.zero_experts} without weights" if s.zero_experts else ""
    real = (f", {s.mean_real_experts:g} of them real on average" if s.mean_real_experts
            else "")
    return f"{s.experts}{zero} (top {s.experts_per_token}{groups}{real}){shared}"


def _heads(s: TransformerShape) -> str:
    f = s.full_attention
    if s.mla is not None:
        return f"{s.heads}/latent" + (f"+{s.full_heads}/latent" if f is not None else "")
    if f is None:
        return f"{s.heads}/{s.n_kv_heads}"
    return f"{s.heads}/{s.n_kv_heads}+" + (f"{f.heads}/" if f.heads else "") + f"{f.kv_heads}"


def _latent_sizes(m: MlaShape) -> str:
    """Multi-head latent attention's sizes as the models listing words them."""
    return (f"KV rank {m.kv_lora_rank}, "
            + (f"query rank {m.q_lora_rank}" if m.q_lora_rank else "queries not compressed")
            + f", heads of {m.qk_nope_head_dim}+{m.qk_rope_head_dim} (query, key) and "
            f"{m.v_head_dim} (value)"
            + ("; the queries and a sigmoid gate a value channel from the query latent "
               "beside its norm" if m.q_gate else "")
            + ("; a norm over the rotary key" if m.rope_key_norm else ""))


def _head_widths(s: TransformerShape) -> str:
    """A grouped-query attention's head width, its values' where they differ, and whether
    its keys are also its values."""
    width = f"{s.d_head}" if s.d_value == s.d_head else f"{s.d_head} (values {s.d_value})"
    return width + (", keys as values" if s.keys_are_values else "")


def _layer_count(s: TransformerShape) -> str:
    """"N layers", and with looped layers (``loop_layers``) the runs they make."""
    if not s.loop_repeats:
        return f"{s.layers} layers"
    return f"{s.layers - s.loop_repeats} layers ({s.layers} runs a token)"


def render_presets(presets: Sequence[Preset]) -> str:
    rows = []
    for p in presets:
        s = p.shape
        counted = count_params(s)
        rows.append([s.name, fmt(from_si(counted.total, Unit.BILLION)),
                     fmt(from_si(counted.active(s), Unit.BILLION)),
                     str(s.layers), str(s.hidden), _heads(s),
                     _experts(s), checkpoint_label(p.checkpoint)])
    return (table(["Model", "Params (B)", "Active (B)", "Layers", "Hidden", "Heads (q/kv)",
                   "Experts", "Checkpoint"], rows,
                  right=[False, True, True, True, True, True, False, False])
            + "\n\nParameters are counted from the shape ('gpuarch models NAME' shows the "
              "published total and the source).")


def render_preset(p: Preset) -> str:
    s = p.shape
    counted = count_params(s)
    published = (f"{p.params:,}" if p.params is not None else
                 f"{p.params_billions:g} billion" if p.params_billions is not None
                 else "not published")
    lines = [f"{s.name}" + (f" (also: {', '.join(p.aliases)})" if p.aliases else ""),
             f"  parameters    {counted.total:,} counted, {counted.active(s):,} "
             + ("applied per token (a shared block's at each call)" if s.shared_blocks
                else "applied per token (a looped layer's at each run)" if s.loop_repeats
                else "active per token") + f"; published: {published}",
             f"  shape         {_layer_count(s)}, hidden {s.hidden}, "
             + (f"{s.heads} heads" + ("" if s.mla is not None
                                      else f" ({s.n_kv_heads} KV) of {_head_widths(s)}")
                if s.attention_layers else "no attention")
             + (f", FFN {s.d_ffn}" if not s.is_hybrid or s.mlp_layers else "")
             + (f" {s.ffn_kind.value}" if not s.is_hybrid or s.mlp_layers or s.is_moe else "")
             + f", vocabulary {s.vocab:,}"
             + (f" (an LM head of its first {s.head_vocab:,})" if s.head_vocab else "")]
    if s.is_moe:
        lines.append(f"  experts       {_experts(s)}, {s.d_expert} "
                     f"wide" + (f", in a latent width of {s.moe_latent} (projected from and "
                                f"back to the hidden size"
                                + (", normed before the way back" if s.moe_latent_norm
                                   else "") + ")" if s.moe_latent else "")
                     + ("" if not s.dense_layers else "; the first layer dense"
                        if s.dense_layers == 1 else f"; the first {s.dense_layers} layers dense")
                     + (f"; GLU inputs clamped at {s.glu_limit:g}" if s.glu_limit else "")
                     + ("; each routed expert followed by a norm of its own"
                        if s.routed_expert_norms else ""))
    if s.attention_experts:
        lines.append(f"  attention     a mixture of {s.attention_experts} experts (top "
                     f"{s.experts_per_token}), each the query and output projections of "
                     f"{s.n_kv_heads} heads; the keys and values one projection for all")
    if s.moe_out_bias:
        lines.append("  expert bias   one bias of the hidden width after the experts' combine")
    if s.residual_gates:
        lines.append("  residual      a learned gate a channel on each residual add ("
                     + ("the stream scaled by it: Doge's" if s.dynamic_mask else
                        "the branch and the stream mixed by it") + ")")
    if s.dynamic_mask:
        lines.append("  attention     a dynamic mask a KV head from a projection of the values "
                     "(each query keeps its highest-scoring positions), priced as the dense "
                     "masked attention Transformers computes")
    if s.relative_bias:
        extents = (f"{s.relative_extent:,} distances in the full layers, the window's in "
                   "the window layers" if s.sliding_window and s.windowed_layers
                   < s.attention_layers else f"{s.relative_extent_of(s.sliding_window):,} "
                   "distances")
        lines.append(f"  positions     a relative bias, no rotary positions: {s.relative_bias} "
                     f"numbers a query head from the hidden state mix a learned bank of bias "
                     f"profiles a layer ({extents})")
    if s.short_conv_taps:
        lines.append(f"  convolutions  short causal ones of {s.short_conv_taps} taps over the "
                     "keys, the values and each block's output, each added to its input"
                     + ("; the full layers' key and value taps also projected from their "
                        "inputs a token" if s.dynamic_kv_convs else ""))
    if s.head_scales or s.sink_projection:
        lines.append("  heads         " + "; ".join(
            part for part, on in (
                ("queries and relative states scaled a channel and clipped in length",
                 s.head_scales),
                ("a sink logit a head projected from the hidden state", s.sink_projection))
            if on))
    if s.split_attention_inputs:
        lines.append("  full inputs   the full layers' queries, keys and values each read a mix "
                     "of the block summaries of their own, each normed (two more norms a full "
                     "layer)")
    if s.mlp_scalar or s.shared_expert_sink:
        lines.append("  MLP scale     a learned scalar a layer on the MLP's output or the "
                     "router's weights" + ("; the router scores the shared experts too "
                                           "(their weights from the same softmax)"
                                           if s.shared_expert_sink else ""))
    if s.mamba is not None or s.is_hybrid:
        mixer = s.mamba.label if s.mamba is not None else "Mamba-2"
        blocks = [f"{s.mamba_layers} {mixer}", f"{s.attention_layers} attention",
                  f"{s.mlp_layers} MLP", f"{s.moe_layers} expert"]
        kept = [b for b in blocks if not b.startswith("0 ")]
        listed = ", ".join(kept[:-1]) + " and " + kept[-1] if len(kept) > 1 else kept[0]
        shared = (f"one norm each but the {s.shared_norm_pairs} {mixer} and attention pairs "
                  f"side by side, which share one" if s.parallel_mixers
                  else "one norm each but the expert blocks, which read the MLP's before "
                  "them and join the residual after the next attention and MLP"
                  if s.shortcut_experts
                  else "a norm before and after each" if s.sandwich_norms else "one norm each")
        lines.append(f"  blocks        hybrid: {listed} blocks, {shared}")
        if s.shared_blocks:
            sets = "one set of weights" if s.shared_blocks == 1 \
                else f"{s.shared_blocks} sets of weights, taken in turn"
            adapters = "" if not s.adapter_rank else (
                f"; LoRA adapters of rank {s.adapter_rank} a call on the "
                + ("query, key and value projections and " if s.adapter_attention else "")
                + "the MLP's gate and up projections")
            lines.append(f"  shared        each attention and MLP pair a call of a shared "
                         f"block ({sets}), its attention reading "
                         f"{s.attention_in:,} wide (the layer's input beside the token "
                         f"embedding), each call's output through a {s.hidden} x {s.hidden} "
                         f"projection of its own{adapters}")
        if s.mlp_widths:
            widths = ", ".join(f"{n} of {w}" for w, n, _ in reversed(s.mlp_kinds()))
            lines.append(f"  MLP widths    {widths} (the FFN above the widest)")
        if s.mamba is not None and s.mamba.kda:
            mb = s.mamba
            gates = ("full-rank decay and output gates" if mb.low_rank_pairs == 0 else
                     f"a low-rank decay gate of {mb.low_rank_width} and a full-rank output "
                     "gate" if mb.full_rank_gate else
                     f"low-rank decay and output gates of {mb.low_rank_width}")
            lines.append(f"  Kimi Delta    {mb.heads} heads of {mb.head_dim} (a {mb.state} x "
                         f"{mb.head_dim} state each, decaying by channel), {gates}, "
                         f"convolution of {mb.conv_kernel}")
        elif s.mamba is not None and s.mamba.gated_delta:
            mb = s.mamba
            lines.append(f"  Gated Delta   {mb.heads} value heads of {mb.head_dim}, {mb.groups} "
                         f"query/key heads of {mb.state} (a {mb.state} x {mb.head_dim} state "
                         f"per value head), convolution of {mb.conv_kernel}")
        elif s.mamba is not None and s.mamba.short_conv:
            mb = s.mamba
            lines.append(f"  Short conv.   {mb.inner} channels, gated, a convolution of "
                         f"{mb.conv_kernel} (no recurrent state)")
        elif s.mamba is not None and s.mamba.lightning:
            mb = s.mamba
            lines.append(f"  Lightning     {mb.heads} heads of {mb.head_dim} (a {mb.state} x "
                         f"{mb.head_dim} state each, a fixed decay a head), blocks of "
                         f"{mb.block}, an output gate")
        elif s.mamba is not None and s.mamba.mlstm:
            mb = s.mamba
            lines.append(f"  mLSTM         {mb.heads} heads of {mb.head_dim} (keys of "
                         f"{mb.state}, a {mb.state} x {mb.head_dim} memory each), an input and "
                         f"a forget gate a head, chunks of {mb.block}, an output gate")
        elif s.mamba is not None and s.mamba.rwkv:
            mb = s.mamba
            lines.append(f"  RWKV-4        {mb.inner} channels, a recurrence a channel (3 "
                         "numbers of state), a token shift and the receptance's gate"
                         + ("; the MLP its channel mixing (a receptance gate, a token shift)"
                            if s.receptance_mlp else ""))
        elif s.mamba is not None and s.mamba.selective:
            mb = s.mamba
            lines.append(f"  Mamba-1       {mb.inner} channels, a state of {mb.state} each, "
                         f"step rank {mb.dt_rank}, convolution of {mb.conv_kernel}"
                         + ("; norms over the step, B and C" if mb.dt_bc_norms else ""))
        elif s.mamba is not None:
            mb = s.mamba
            lines.append(f"  Mamba-2       {mb.heads} heads of {mb.head_dim}, state {mb.state}, "
                         f"{mb.groups} groups, convolution of {mb.conv_kernel}")
    if s.mla is not None:
        own = s.full_attention is not None  # the full layers' latent attention their own
        lines.append("  attention     multi-head latent" + (" (window layers)" if own else "")
                     + f": {_latent_sizes(s.mla)}"
                     + ("; a learned sink logit a head" if s.attention_sinks else ""))
        m = s.indexer_mla
        assert m is not None
        if m.sparse:
            kind = s.indexer_kind_layers
            layers = "full-attention layers" if own else "layers"
            where = (f"; in the {kind} {layers}" if own else "") \
                if s.indexer_layers == kind else (
                f"; in {s.indexer_layers} of the {kind} {layers}, the others reusing the "
                "last one's choice")
            lines.append(f"  sparse        DeepSeek Sparse Attention: an indexer of "
                         f"{m.index_heads} heads of {m.index_head_dim} picks the "
                         f"{m.index_topk:,} positions each query attends to (its FP8 keys, "
                         f"{m.index_key_bytes} bytes a position and layer, cached beside "
                         f"the latent{where})")
    if s.compressed is not None:
        c = s.compressed
        kinds = ", ".join(f"{n} of ratio {r}" if r else f"{n} window-only"
                          for r, n in ((r, c.layers_of(r)) for r, _ in c.kinds()))
        lines.append(f"  attention     compressed (DeepSeek-V4): a {c.window}-position window "
                     f"in every layer and one entry per ratio positions ({kinds}); the "
                     f"ratio-4 layers attend to the {c.index_topk:,} entries an indexer of "
                     f"{c.index_heads} heads of {c.index_head_dim} picks; query rank "
                     f"{c.q_lora_rank}, output in {c.o_groups} groups of rank {c.o_lora_rank}")
    if s.hyper_connections:
        lines.append(f"  residual      {s.hyper_connections} "
                     + ("independent " if s.independent_hyper_connections else "")
                     + "hyper-connection streams"
                     + (f"; the first {s.hash_layers} expert layers route by token id"
                        if s.hash_layers else ""))
    if s.attention_gate:
        lines.append("  attention     gated: a sigmoid gate on each output channel, "
                     + ("from a projection of its own" if s.mla is not None
                        else "from a projection of its own without bias and a learned bias a "
                        "head" if s.gate_head_bias
                        else "made by the query projection (twice as wide)"))
    if s.differential_attention:
        lines.append("  attention     differential: two softmax calls a layer over the same "
                     "queries and keys, against the two halves of the value heads, the second "
                     "subtracted by a learned lambda (priced as the two calls)")
    if s.attention_residual_block:
        lines.append(f"  residuals     block attention residuals: a summary every "
                     f"{s.attention_residual_block} layers; each block's input a softmax mix "
                     f"of the summaries so far and the running sum "
                     f"({s.attention_residual_reads:.1f} on average)"
                     + ("; norms without weights, none before the first layer's attention"
                        if s.lean_attention_residuals else ""))
    if s.loop_layers:
        end = s.loop_start + s.loop_layers - 1
        gates = "" if not s.loop_gate_rank else (
            f"; in each pass after the first, message gates of rank {s.loop_gate_rank} mix "
            "the last pass's states into each looped layer's query, key, value and MLP "
            f"inputs (four learned queries over {s.loop_message_sources} of them a layer)")
        lines.append(f"  loop          layers {s.loop_start} to {end} run {s.loop_passes} "
                     "times a token, each pass with its own KV cache and state, the weights "
                     f"held once{gates}")
    if s.sliding_window:
        reach = (f"within {s.sliding_window}-token chunks" if s.attention_chunked
                 else f"to {s.sliding_window} tokens")
        runs = "of the layer runs " if s.loop_repeats else "layers "
        lines.append(f"  window        {s.windowed_layers} {runs}attend {reach}")
    if s.block_sparse is not None:
        b = s.block_sparse
        lines.append(f"  sparse        block-sparse in {s.indexer_layers} of {s.attention_layers} "
                     f"layers: an indexer of {b.index_heads} heads of {b.index_head_dim} keeps "
                     f"each query's top {b.topk_blocks} blocks of {b.block} positions "
                     f"({b.positions:,}; its key cached beside the layer's)")
    if s.full_attention is not None and s.full_attention.mla is not None:
        lines.append(f"  full layers   {s.layers - s.windowed_layers} layers of "
                     + (f"{s.full_heads} heads, " if s.full_heads != s.heads else "")
                     + f"multi-head latent: {_latent_sizes(s.full_attention.mla)}")
    elif s.full_attention is not None:
        full = s.attention_kind(0)
        lines.append(f"  full layers   {s.layers - s.windowed_layers} layers of "
                     + (f"{full.heads} heads and " if full.heads != s.heads else "")
                     + f"{full.n_kv_heads} KV heads of {_head_widths(full)}"
                     + (", with attention sinks" if full.attention_sinks else "")
                     + ("; the window layers with sinks" if s.attention_sinks
                        and not full.attention_sinks else ""))
    if s.kv_shared_layers:
        lines.append(f"  KV-shared     the last {s.kv_shared_layers} layers ({s.kv_shared_full} "
                     "full, the rest window) read the keys and values an earlier layer of "
                     "their kind cached: no K/V projections or cache of their own"
                     + (f"; their MLPs {s.kv_shared_mlp} wide" if s.kv_shared_mlp else ""))
    if s.per_layer_input:
        lines.append(f"  per-layer in  per-layer input embeddings of {s.per_layer_input} a layer "
                     f"(a table of {s.per_layer_vocab:,} tokens, "
                     f"{s.per_layer_vocab * s.layers * s.per_layer_input:,} parameters), "
                     "projected and gated into every layer")
    if s.altup_streams:
        lines.append(f"  AltUp         {s.altup_streams} residual streams of the hidden width: "
                     "the layers run on one, the others predicted and corrected around each "
                     "layer by routed coefficients")
    if s.laurel_rank:
        lines.append(f"  LAuReL        a low-rank residual branch of rank {s.laurel_rank} "
                     "beside each layer's attention")
    norms = [f"{s.layer_norms} {s.norm.plural} a layer"
             + (" (before and after attention and MLP)" if s.sandwich_norms else "")]
    if s.qk_norm is not QkNorm.NONE:
        norms.append("query and key norms over "
                     + ("each head" if s.qk_norm is QkNorm.HEAD else "all heads together"))
    if s.gated_norm_rank:
        norms.append(f"the norm before attention (and before the experts) gated by a rank-"
                     f"{s.gated_norm_rank} sigmoid MLP")
    if s.embedding_norm:
        norms.append("one after the token embedding")
    if s.sandwich_norms or s.qk_norm is not QkNorm.NONE or s.gated_norm_rank \
            or not s.norm.params_per_width or s.embedding_norm:
        lines.append(f"  norms         {'; '.join(norms)}")
    if s.qk_conv_depthwise:
        lines.append(f"  attention     queries and keys convolved over time before it: "
                     f"{s.qk_conv_depthwise} taps a channel, then {s.qk_conv_grouped} within "
                     "each head; half of each value head the previous token's")
    if s.router_hidden:
        lines.append(f"  router        an MLP of {s.router_hidden} wide (with the previous "
                     "layer's router state) scoring the experts and a skip")
    if s.residual_scales:
        lines.append("  residuals     learned scales and shifts on each residual add's inputs")
    if s.head_gate:
        lines.append("  gate          a sigmoid gate a query head on the attention's output "
                     "(its own projection from the hidden state)")
    if s.parallel_attention:
        lines.append("  layers        attention and MLP side by side on the same input (one "
                     "tensor-parallel reduction a layer)")
    if s.positions:
        lines.append(f"  context       {s.positions:,} tokens configured")
    lines.append(f"  checkpoint    {checkpoint_label(p.checkpoint)}"
                 + (f"\n                read from {p.checkpoint.origin}" if p.checkpoint
                    else " (16-bit: no quantization_config)")
                 + ("\n                ships model code of its own (config.json's auto_map): "
                    "engines load it with their trust-remote-code flag"
                    if getattr(p, "remote_code", False) else ""))
    lines.append(f"  source        {p.source_title}\n                {p.source_url}")
    return "\n".join(lines)
