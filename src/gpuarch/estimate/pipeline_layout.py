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

from gpuarch.errors import GpuarchError

__all__ = ["PipelineLayout", "StageLoad", "parse_pp_layout"]


@dataclass(frozen=True)
class StageLoad:
    """What one pipeline rank holds over all its virtual stages."""

    dense_layers: int = 0  # transformer layers among the model's leading dense ones
    expert_layers: int = 0  # the other transformer layers
    mtp: int = 0  # multi-token-prediction blocks
    embedding: bool = False
    loss: bool = False

    @property
    def layers(self) -> int:
        return self.dense_layers + self.expert_layers


@dataclass(frozen=True)
class PipelineLayout:
    """A parsed layout: the virtual stages as written and each pipeline rank's load."""

    text: str
    virtual: tuple[str, ...]  # each virtual stage's symbols, in order
    ranks: tuple[StageLoad, ...]  # one per pipeline rank

    @property
    def max_layers(self) -> int:
        """Transformer layers plus MTP blocks on the most loaded rank."""
        return max(r.layers + r.mtp for r in self.ranks)


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
                    mtp_layers: int = 0, flag: str = "--pp-layout") -> PipelineLayout:
    """Parse and check a layout against the run: PP x VPP stages, every transformer layer
    once (``t``), ``mtp_layers`` MTP blocks (``m``), the embedding first and the loss last,
    once each. Errors name ``flag`` and say what disagrees."""
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
    seen = 0
    for v, stage in enumerate(stages):
        load = loads[v % pp]
        for symbol in stage:
            if symbol == "t":
                load["dense" if seen < dense_layers else "expert"] += 1
                seen += 1
            elif symbol == "m":
                load["mtp"] += 1
            elif symbol == "E":
                load["embedding"] = True
            else:
                load["loss"] = True
    ranks = tuple(StageLoad(int(d["dense"]), int(d["expert"]), int(d["mtp"]),
                            bool(d["embedding"]), bool(d["loss"])) for d in loads)
    return PipelineLayout(text, stages, ranks)
