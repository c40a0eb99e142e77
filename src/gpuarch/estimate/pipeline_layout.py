"""Explicit pipeline layouts in Megatron-Core's notation (``--pipeline-model-parallel-layout``).

A layout names what each virtual pipeline stage holds, stage by stage, separated by ``|``:
``E`` the embedding, ``t`` a transformer layer, ``m`` a multi-token-prediction block and
``L`` the LM head with the loss. ``X*n`` repeats one symbol and ``(...)*n`` a group, so
DeepSeek-V3's recipe for PP 4 x VPP 4 is ``Et*4|(t*4|)*14tmL``: the embedding with four
layers, fourteen stages of four, and a last stage of one layer, the MTP block and the loss.
Virtual stage ``v`` runs on pipeline rank ``v mod PP`` (Megatron's interleaved order), so a
rank's load is the sum of its ``VPP`` virtual stages. Transformer layers are numbered in
order through the stages, so an MoE model's leading dense layers are where the layout puts
its first ``t`` symbols.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuarch.errors import GpuarchError
from gpuarch.perf.num import Num, maximum, minimum, where

__all__ = ["PipelineLayout", "StageLoad", "even_layout", "even_segments", "held_layer_passes",
           "hybrid_layout",
           "is_bf16_layer", "layout_held_by_rank", "layout_held_layer_passes", "parse_pp_layout"]


@dataclass(frozen=True)
class StageLoad:
    """What one pipeline rank holds over all its virtual stages."""

    dense_layers: int = 0  # transformer layers among the model's leading dense ones
    expert_layers: int = 0  # the other transformer layers
    mtp: int = 0  # multi-token-prediction blocks
    embedding: bool = False
    loss: bool = False
    # a hybrid model's blocks on the rank, by kind (HYBRID_BLOCKS' letters), counted in
    # dense_layers as their count; empty for a transformer
    blocks: tuple[tuple[str, int], ...] = ()
    # of those layers, the ones run in BF16 under a low-precision recipe (the model's first
    # and last, bf16_layers), by kind: False for dense, True for expert layers, or a hybrid
    # block's letter
    bf16: tuple[tuple[bool | str, int], ...] = ()

    @property
    def layers(self) -> int:
        return self.dense_layers + self.expert_layers


@dataclass(frozen=True)
class PipelineLayout:
    """A parsed layout: the virtual stages as written and each pipeline rank's load."""

    text: str
    virtual: tuple[str, ...]  # each virtual stage's symbols, in order
    ranks: tuple[StageLoad, ...]  # one per pipeline rank
    # each virtual stage's layers (blocks) run in BF16 under a low-precision recipe; empty
    # when none are
    bf16_virtual: tuple[int, ...] = ()

    def bf16_part(self) -> PipelineLayout:
        """The layers run in BF16 alone, rank by rank (no embedding, loss or MTP block)."""
        ranks = []
        for r in self.ranks:
            sixteen = dict(r.bf16)
            ranks.append(StageLoad(dense_layers=sum(sixteen.values()),
                                   blocks=tuple((str(b), n) for b, n in r.bf16))
                         if r.blocks else
                         StageLoad(dense_layers=sixteen.get(False, 0),
                                   expert_layers=sixteen.get(True, 0)))
        return PipelineLayout(self.text, self.virtual, tuple(ranks))

    @property
    def max_layers(self) -> int:
        """Transformer layers plus MTP blocks on the most loaded rank (a hybrid model's
        blocks, an MTP block two of them: the symbols of the rank's virtual stages)."""
        pp = len(self.ranks)
        return max(sum(self.virtual[v].count("t") + self.virtual[v].count("m")
                       for v in range(rank, len(self.virtual), pp)) for rank in range(pp))


def hybrid_layout(pattern: str, *, pp: int, vpp: int = 1, mtp_layers: int = 0,
                  segments: str = "", flag: str = "--pp-layout",
                  bf16: tuple[int, int] = (0, 0)) -> PipelineLayout:
    """A hybrid model's pipeline as Megatron-Core splits its block pattern
    (``select_pipeline_segment`` in megatron/core/models/hybrid/hybrid_layer_allocation.py
    @089b33b8). With ``segments``, the pattern cut by '|' into PP x VPP virtual stages, in
    order, virtual stage v on rank v mod PP (newer Megatron's ``--hybrid-layer-pattern``
    with separators, the only way it interleaves a hybrid); without, PP even slices (rank r
    holds blocks r x L / PP to (r + 1) x L / PP; MambaStack's split before it). The
    embedding is on the first stage, the MTP blocks and the loss on the last (the last
    rank's last chunk). In the virtual stage each block is a 't' and an MTP block (an
    attention and an expert block) two 'm's, for the activations held. ``bf16``: how many
    of the first and of the last blocks run in BF16 (``bf16_layers``)."""
    if segments:
        parts = "".join(segments.split()).split("|")
        if len(parts) != pp * vpp:
            raise GpuarchError(f"{flag}: {len(parts)} stages in {segments!r}, but PP x VPP = "
                               f"{pp} x {vpp} = {pp * vpp}")
        joined = "".join(parts)
        if joined != pattern:
            at = next((i for i, (a, b) in enumerate(zip(joined, pattern, strict=False))
                       if a != b), min(len(joined), len(pattern)))
            raise GpuarchError(f"{flag}: the stages joined must be the model's block pattern "
                               f"({len(pattern)} blocks); they differ at block {at + 1}")
    else:
        if vpp != 1:
            raise GpuarchError(f"--vpp: a hybrid model's stages interleave only as '|' "
                               f"segments of its pattern ({flag}); got --vpp {vpp}")
        if len(pattern) % pp:
            raise GpuarchError(f"--pp: {pp} must divide the {len(pattern)} blocks of the "
                               "hybrid pattern (Megatron-Core splits them evenly over the "
                               f"stages without '|' segments in {flag})")
        n = len(pattern) // pp
        parts = [pattern[r * n:(r + 1) * n] for r in range(pp)]
    last = len(parts) - 1
    held: list[str] = [""] * pp
    held16: list[str] = [""] * pp
    virtual = []
    in_bf16 = []
    at = 0
    for v, part in enumerate(parts):
        held[v % pp] += part
        sixteen = "".join(b for i, b in enumerate(part, at) if is_bf16_layer(i, len(pattern),
                                                                             bf16))
        held16[v % pp] += sixteen
        in_bf16.append(len(sixteen))
        at += len(part)
        virtual.append(("E" if v == 0 else "") + "t" * len(part)
                       + ("mm" * mtp_layers + "L" if v == last else ""))
    ranks = tuple(StageLoad(dense_layers=len(held[r]), mtp=mtp_layers if r == pp - 1 else 0,
                            embedding=r == 0, loss=r == pp - 1,
                            blocks=tuple((b, held[r].count(b)) for b in sorted(set(held[r]))),
                            bf16=tuple((b, held16[r].count(b))
                                       for b in sorted(set(held16[r]))))
                  for r in range(pp))
    return PipelineLayout(segments, tuple(virtual), ranks,
                          tuple(in_bf16) if any(in_bf16) else ())


def even_segments(pattern: str, pp: int, vpp: int) -> str:
    """A hybrid's block pattern cut by '|' into PP x VPP equal segments (the interleaved
    layout ``hybrid_layout`` takes as ``segments``); PP x VPP must divide the blocks."""
    stages = pp * vpp
    if len(pattern) % stages:
        raise GpuarchError(f"--pp/--vpp: PP x VPP = {stages} must divide the "
                           f"{len(pattern)} blocks of the hybrid pattern")
    n = len(pattern) // stages
    return "|".join(pattern[i * n:(i + 1) * n] for i in range(stages))


def is_bf16_layer(index: int, layers: int, bf16: tuple[int, int]) -> bool:
    """Whether layer ``index`` (from 0) of ``layers`` is among the first ``bf16[0]`` or the
    last ``bf16[1]``, which Megatron-Core runs in BF16 under --first-last-layers-bf16
    (``is_first_last_bf16_layer``, on the global layer index)."""
    return index < bf16[0] or index >= layers - bf16[1]


def even_layout(layers: int, *, pp: int, vpp: int, mtp_layers: int = 0,
                edge_layers: bool = False) -> str:
    """The even split written as a --pp-layout: PP x VPP virtual stages of the model's
    layers (with ``edge_layers`` the embedding and the loss taking a layer's slot each);
    where the layers do not divide, the last stages hold one more (so the last rank, with
    the loss, holds as many as the even split's slowest stage)."""
    stages = pp * vpp
    slots = layers + (2 if edge_layers else 0)
    base, extra = divmod(slots, stages)
    out = []
    for g in range(stages):
        n = base + (1 if g >= stages - extra else 0)
        if edge_layers:
            n -= (g == 0) + (g == stages - 1)
        out.append(("E" if g == 0 else "") + "t" * n
                   + ("m" * mtp_layers + "L" if g == stages - 1 else ""))
    return "|".join(out)


def _expand(text: str, start: int, flag: str) -> tuple[str, int]:
    """Expand ``text`` from ``start`` up to a closing parenthesis (or the end): the flat
    symbol string and the position after what was read."""
    out: list[str] = []
    i = start
    while i < len(text):
        ch = text[i]
        if ch == ")":
            return "".join(out), i
        if ch == "(":
            inner, i = _expand(text, i + 1, flag)
            if i >= len(text) or text[i] != ")":
                raise GpuarchError(f"{flag}: unclosed '(' in {text!r}")
            piece = inner
        elif ch in "Etm|L":
            piece = ch
        else:
            raise GpuarchError(f"{flag}: unexpected {ch!r} at position {i + 1} of {text!r} "
                               "(expected E, t, m, L, |, parentheses or *N)")
        i += 1
        if i < len(text) and text[i] == "*":
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            if j == i + 1:
                raise GpuarchError(f"{flag}: '*' at position {i + 1} of {text!r} needs a "
                                   "repeat count")
            piece *= int(text[i + 1:j])
            i = j
        out.append(piece)
    return "".join(out), i


def parse_pp_layout(text: str, *, pp: int, vpp: int, layers: int, dense_layers: int = 0,
                    mtp_layers: int = 0, flag: str = "--pp-layout",
                    bf16: tuple[int, int] = (0, 0)) -> PipelineLayout:
    """Parse and check a layout against the run: PP x VPP stages, every transformer layer
    once (``t``), ``mtp_layers`` MTP blocks (``m``), the embedding first and the loss last,
    once each. Errors name ``flag`` and say what disagrees. ``bf16``: how many of the first
    and of the last layers run in BF16 (``bf16_layers``)."""
    compact = "".join(text.split())
    if not compact:
        raise GpuarchError(f"{flag}: empty layout")
    flat, end = _expand(compact, 0, flag)
    if end < len(compact):
        raise GpuarchError(f"{flag}: unmatched ')' at position {end + 1} of {text!r}")
    stages = tuple(flat.split("|"))
    want = pp * vpp
    if len(stages) != want:
        raise GpuarchError(f"{flag}: {len(stages)} stages in {text!r}, but PP x VPP = "
                           f"{pp} x {vpp} = {want}")
    counts = {s: flat.count(s) for s in "tmEL"}
    if counts["t"] != layers:
        raise GpuarchError(f"{flag}: {counts['t']} transformer layers ('t') in {text!r}, "
                           f"the model has {layers}")
    if counts["m"] != mtp_layers:
        raise GpuarchError(f"{flag}: {counts['m']} MTP blocks ('m') in {text!r}, but "
                           f"--mtp-layers is {mtp_layers}")
    if counts["E"] != 1 or "E" not in stages[0]:
        raise GpuarchError(f"{flag}: the embedding ('E') must appear once, in the first "
                           f"stage, in {text!r}")
    if counts["L"] != 1 or "L" not in stages[-1]:
        raise GpuarchError(f"{flag}: the loss ('L') must appear once, in the last stage, "
                           f"in {text!r}")
    loads = [dict(dense=0, expert=0, mtp=0, embedding=False, loss=False) for _ in range(pp)]
    sixteen = [[0, 0] for _ in range(pp)]  # BF16 dense and expert layers by rank
    in_bf16 = [0] * len(stages)
    seen = 0
    for v, stage in enumerate(stages):
        load = loads[v % pp]
        for symbol in stage:
            if symbol == "t":
                load["dense" if seen < dense_layers else "expert"] += 1
                if is_bf16_layer(seen, layers, bf16):
                    sixteen[v % pp][seen >= dense_layers] += 1
                    in_bf16[v] += 1
                seen += 1
            elif symbol == "m":
                load["mtp"] += 1
            elif symbol == "E":
                load["embedding"] = True
            else:
                load["loss"] = True
    ranks = tuple(StageLoad(int(d["dense"]), int(d["expert"]), int(d["mtp"]),
                            bool(d["embedding"]), bool(d["loss"]),
                            bf16=tuple((kind, n) for kind, n in zip((False, True), b16,
                                                                    strict=True) if n))
                  for d, b16 in zip(loads, sixteen, strict=True))
    return PipelineLayout(text, stages, ranks, tuple(in_bf16) if any(in_bf16) else ())


# Activations a pipeline rank holds at its peak under Megatron's 1F1B schedules. Rank i of
# PP runs PP - i forwards before its first backward; interleaved over VPP model chunks, it
# runs (PP - i - 1) x 2 + (VPP - 1) x PP warm-up chunk forwards and one more before its first
# backward, micro-batches entering the chunks in groups of PP (Megatron-LM's
# forward_backward_pipelining_with_interleaving). Each forward's activations stay until its
# backward, so the peak is at the end of the warm-up, counted in layer-passes: the layers of
# each chunk forward then held.


def _passes_held(rank: Num, pp: Num, vpp: Num, micro_batches: Num) -> Num:
    """Chunk forwards rank ``rank`` has run when its first backward starts (at most all the
    step's, ``micro_batches`` x ``vpp``)."""
    warm = where(vpp > 1, (pp - rank - 1) * 2 + (vpp - 1) * pp + 1, pp - rank)
    return minimum(warm, micro_batches * vpp)


def _chunk_passes(first: Num, chunk: Num, pp: Num, vpp: Num) -> Num:
    """How many of a rank's first ``first`` chunk forwards went through model chunk
    ``chunk`` (forwards k take chunk (k // PP) mod VPP; ``first`` < (VPP + 1) x PP, so the
    chunk's groups are ``chunk`` and, for chunk 0, VPP)."""
    passes = minimum(pp, maximum(0, first - chunk * pp))
    return passes + where(chunk == 0, maximum(0, first - vpp * pp), 0)


def held_layer_passes(chunk_layers: Num, pp: Num, vpp: Num, micro_batches: Num, *,
                      first_chunk_fewer: Num = 0, last_chunk_more: Num = 0) -> Num:
    """The most layer-passes of activations any rank holds at once when every model chunk
    has ``chunk_layers`` layers, but the first rank's first chunk ``first_chunk_fewer``
    fewer (the embedding taking a layer's slot) and the last rank's last chunk
    ``last_chunk_more`` more (MTP blocks, less the loss's slot). Vectorised over arrays.
    The first rank holds the most when the chunks are even; a middle rank (PP >= 3) or the
    last can hold more when the first is lighter."""
    first = _passes_held(0, pp, vpp, micro_batches)
    held = chunk_layers * first - first_chunk_fewer * _chunk_passes(first, 0, pp, vpp)
    middle = _passes_held(1, pp, vpp, micro_batches) * chunk_layers
    held = where(pp >= 3, maximum(held, middle), held)
    last_n = _passes_held(pp - 1, pp, vpp, micro_batches)
    last = chunk_layers * last_n + last_chunk_more * _chunk_passes(last_n, vpp - 1, pp, vpp)
    # with one rank the first is the last (and holds no edge slots)
    return where(pp >= 2, maximum(held, last), last)


def layout_held_layer_passes(layout: PipelineLayout, pp: int, vpp: int,
                             micro_batches: Num) -> Num:
    """``held_layer_passes`` for an explicit layout: each virtual stage's transformer
    layers and MTP blocks, rank by rank (``micro_batches`` may be an array)."""
    best: Num = 0
    for held, _ in layout_held_by_rank(layout, pp, vpp, micro_batches):
        best = maximum(best, held)
    return best


def layout_held_by_rank(layout: PipelineLayout, pp: int, vpp: int, micro_batches: Num
                        ) -> list[tuple[Num, Num]]:
    """Each pipeline rank's layer-passes held at its peak, and how many of them are of
    layers run in BF16 (``PipelineLayout.bf16_virtual``)."""
    out = []
    for rank in range(pp):
        stages = [layout.virtual[v * pp + rank] for v in range(vpp)]
        layers = [s.count("t") + s.count("m") for s in stages]
        sixteen = [layout.bf16_virtual[v * pp + rank] if layout.bf16_virtual else 0
                   for v in range(vpp)]
        warm = int(np.max(_passes_held(rank, pp, vpp, 1 << 62)))
        n = _passes_held(rank, pp, vpp, micro_batches)
        counts = []
        for per_chunk in (layers, sixteen):
            # the layers of the rank's first k chunk forwards, k = 0 .. its warm-up
            held = np.cumsum([0] + [per_chunk[(k // pp) % vpp] for k in range(warm)])
            counts.append(held[np.asarray(n, dtype=np.int64)] if np.ndim(n)
                          else int(held[int(n)]))
        out.append((counts[0], counts[1]))
    return out
