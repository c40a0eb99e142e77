"""The storage formats a Hugging Face checkpoint declares, read from its ``config.json``
(``quantization_config``) or, for NVIDIA ModelOpt checkpoints, the ``hf_quant_config.json``
beside it, or recorded for a preset's published checkpoint in ``models.toml`` (the same
``quantization_config`` object): what ``estimate infer`` uses unless format flags are given.

Read: ``fp8`` (e.g. DeepSeek-V3's block-scaled FP8: W8A8), ``mxfp4`` (GPT-OSS: the routed
experts' weights in 4 bits, 16-bit activations unless told otherwise; attention, router,
embeddings and LM head stay 16-bit, as Transformers' MXFP4 quantizer replaces only the
experts), ``awq`` and ``gptq`` (INT4 or INT8
weight-only), ``modelopt`` (its ``quant_algo`` FP8, MXFP8, NVFP4, W4A16_NVFP4, W4A16_AWQ /
INT4_AWQ, W4A8_AWQ, W8A16 / INT8 weight-only, and ``kv_cache_quant_algo`` FP8; the modules
it leaves out, ``exclude_modules`` or ``ignore``, and MIXED_PRECISION's ``quantized_layers``,
one algorithm a module, the rest unquantized) and ``compressed-tensors``
(weights and input activations by bits and type, ``kv_cache_scheme``). Any other declared
method is refused with its name, rather than read as 16-bit.

The estimate prices two groups of weights: the routed experts, and everything else. A
ModelOpt checkpoint's modules are sorted by role from their names (attention and other
sequence mixers, dense or shared MLPs, routed experts; routers, convolutions, embeddings, the
LM head, vision towers and MTP blocks are not counted): a role is unquantized where its
modules are left out in at least half the model's layers (or by a pattern naming no layer),
and in MIXED_PRECISION takes the algorithm most of its listed layers carry. The rest of an
MoE model takes the attention's format, of a dense model the MLP's; a role that differs is
named in ``origin``. (NVIDIA's NVFP4 checkpoints of MoE models mostly keep attention, and
often the shared experts, in 16 bits: their experts alone are 4-bit.)

Formats are returned as the names ``estimate infer`` takes (``fp8``, ``fp4`` for NVFP4,
``mxfp4``, ``int8``, ``int4``, ``bf16``), so this module needs nothing from the performance
model.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.jsonfile import read_json_object
from gpuarch.workloads.hf import EXPERT_COUNT_KEYS

__all__ = ["CheckpointFormats", "checkpoint_formats", "declared_quantization", "module_role"]


@dataclass(frozen=True)
class CheckpointFormats:
    """Weights, activations and (when the checkpoint says) KV-cache formats, and where they
    were read."""

    weights: str
    activations: str
    kv_cache: str | None
    origin: str
    expert_weights: str | None = None  # the routed experts', where they differ
    # FP8 weights scaled per 128 x 128 block (DeepSeek-V3's checkpoints), not per tensor
    fp8_blocks: bool = False
    # the routed experts' activations, where the checkpoint gives them a format of their own
    # (NVFP4 experts, W4A4, beside 16-bit attention)
    expert_activations: str | None = None


_MODELOPT_ALGOS: dict[str, tuple[str, str]] = {
    "FP8": ("fp8", "fp8"),
    "FP8_BLOCK_SCALES": ("fp8", "fp8"),
    "FP8_PB_WO": ("fp8", "fp8"),
    "MXFP8": ("fp8", "fp8"),
    "NVFP4": ("fp4", "fp4"),
    "W4A16_NVFP4": ("fp4", "bf16"),
    "W4A16_AWQ": ("int4", "bf16"),
    "INT4_AWQ": ("int4", "bf16"),
    "W4A8_AWQ": ("int4", "fp8"),
    "W8A16": ("int8", "bf16"),
    "INT8_WEIGHT_ONLY": ("int8", "bf16"),
    "W8A8_SQ_PER_CHANNEL": ("int8", "int8"),
}
_UNQUANTIZED = ("bf16", "bf16")
_ROLE_NAMES = {"attention": "attention", "mlp": "MLP", "shared": "shared experts",
               "experts": "routed experts"}

# module names (or patterns) that are no GEMM of a decoder layer the estimate prices
_NOT_PRICED = re.compile(r"vision|visual|mm_projector|multi_modal|patch_merge|audio|embed"
                         r"|lm_head|(^|\.)head$|(^|\.)mtp\b|^mtp|conv|router|_gate$"
                         r"|(^|\.)gate\*?$")
_ATTENTION = re.compile(r"attn|attention|indexer|(^|\.)index_|(^|\.)(q|k|v|o|qkv|wq\w*|wkv\w*"
                        r"|wo\w*|q_a|q_b|kv_a|kv_b|in|out)_?proj\w*|kv_a_proj|(^|\.)w[qkvo]\b")
_MLP = re.compile(r"mlp|ffn|feed_forward|(^|\.)(gate_up|gate|up|down|fc1|fc2|w1|w2|w3)_?proj"
                  r"|(^|\.)(w1|w2|w3|fc1|fc2)\b")
_WHOLE_LAYER = re.compile(r"layers\.\d+\.?\*?$")
_LAYER = re.compile(r"layers\.(\d+)")


def module_role(name: str) -> str | None:
    """The role of a ModelOpt module name or pattern in the estimate: ``attention`` (and
    other sequence mixers), ``mlp``, ``shared`` (shared experts), ``experts`` (routed),
    ``layer`` (a whole layer), or None for what it does not price as a layer's GEMM."""
    lower = name.lower()
    if "shared_expert" in lower:
        return None if lower.endswith("shared_expert_gate") else "shared"
    if _NOT_PRICED.search(lower):
        return None
    if "experts" in lower:
        return "experts"
    if _WHOLE_LAYER.search(lower):
        return "layer"
    if _ATTENTION.search(lower):
        return "attention"
    if _MLP.search(lower):
        return "mlp"
    return None


def _layers_of(names: list[str], layers: int) -> set[int]:
    """The layer indices ``names`` cover; a name without one covers them all."""
    covered: set[int] = set()
    for name in names:
        found = _LAYER.search(name)
        if found is None:
            return set(range(max(layers, 1)))
        covered.add(int(found.group(1)))
    return covered


def _excluded_roles(patterns: list[str], layers: int) -> set[str]:
    """The roles a ModelOpt exclusion list leaves unquantized: those whose modules it names
    in at least half the layers (or by a pattern naming no layer)."""
    by_role: dict[str, list[str]] = {}
    for pattern in patterns:
        role = module_role(pattern)
        if role is not None and role != "layer":
            by_role.setdefault(role, []).append(pattern)
    return {role for role, names in by_role.items()
            if 2 * len(_layers_of(names, layers)) >= max(layers, 1)}


def _mixed_roles(quantized: dict[str, Any], excluded: list[str], layers: int, where: str,
                 left_out: tuple[str, str]) -> dict[str, tuple[str, str]]:
    """MIXED_PRECISION's ``quantized_layers`` as one format for each role they or
    ``excluded`` name: of the layers where the role's modules are listed (quantized, or left
    out by ``excluded``), the format most of them carry, a layer left out or not listed in
    ``left_out``. (A hybrid model's experts sit in some of its layers: they are counted over
    those.)"""
    by_layer: dict[str, dict[int, Counter[str]]] = {}
    everywhere: dict[str, str] = {}  # a role listed by a name without a layer index
    for name, spec in quantized.items():
        algo = str(spec.get("quant_algo") if isinstance(spec, dict) else spec or "").upper()
        if algo not in _MODELOPT_ALGOS:
            raise GpuarchError(f"{where}: quantized_layers {name!r}: quant_algo {algo!r} is not "
                               f"one gpuarch reads ({', '.join(sorted(_MODELOPT_ALGOS))}); "
                               "give --weight-precision")
        role = module_role(name)
        if role is None or role == "layer":
            continue
        found = _LAYER.search(name)
        if found is None:
            everywhere[role] = algo
            continue
        by_layer.setdefault(role, {}).setdefault(int(found.group(1)), Counter())[algo] += 1
    dropped: dict[str, set[int]] = {}
    for pattern in excluded:
        role = module_role(pattern)
        if role is not None and role != "layer":
            dropped.setdefault(role, set()).update(_layers_of([pattern], layers))
    roles: dict[str, tuple[str, str]] = {}
    for role in _ROLE_NAMES:
        listed = by_layer.get(role, {})
        if role in everywhere and not listed:
            roles[role] = _MODELOPT_ALGOS[everywhere[role]]
            continue
        votes: Counter[str] = Counter()
        for layer in set(listed) | dropped.get(role, set()):
            votes[listed[layer].most_common(1)[0][0] if layer in listed else ""] += 1
        if votes:  # a tie goes to a quantized format
            best = max(votes.items(), key=lambda kv: (kv[1], kv[0] != ""))[0]
            roles[role] = _MODELOPT_ALGOS[best] if best else left_out
    return roles


def _kv_format(q: dict[str, Any], where: str) -> str | None:
    """The KV cache's format a ModelOpt declaration gives: ``kv_cache_quant_algo``
    (hf_quant_config.json) or ``kv_cache_scheme`` (config.json: a name, or bits and type);
    None where it gives none."""
    key = "kv_cache_quant_algo" if q.get("kv_cache_quant_algo") is not None \
        else "kv_cache_scheme"
    algo = q.get(key)
    if isinstance(algo, dict):
        bits, kind = algo.get("num_bits"), algo.get("type")
        algo = "FP8" if (bits, kind) == (8, "float") else "INT8" if (bits, kind) == (8, "int") \
            else "NVFP4" if (bits, kind) == (4, "float") else f"{bits!r} bits of {kind!r}"
    if algo is None:
        return None
    formats = {"FP8": "fp8", "INT8": "int8", "NVFP4": "fp4"}
    if not isinstance(algo, str) or algo.upper() not in formats:
        raise GpuarchError(f"{where}: {key} {algo!r} is not a KV cache format gpuarch reads "
                           "(FP8, INT8, NVFP4); give --kv-precision")
    return formats[algo.upper()]


def _modelopt(q: dict[str, Any], where: str, model: Mapping[str, Any] | None = None,
              rest: tuple[str, str] | None = None) -> CheckpointFormats:
    """A ModelOpt declaration (hf_quant_config.json's ``quantization``, or config.json's
    ``quantization_config``); ``model`` the config.json (its layer count and whether it has
    routed experts), ``rest`` the format of modules ModelOpt leaves out where the checkpoint
    keeps them in one of its own (DeepSeek-V4's FP8) rather than 16-bit."""
    algo = str(q.get("quant_algo") or "").upper()
    if algo not in _MODELOPT_ALGOS and algo != "MIXED_PRECISION":
        raise GpuarchError(f"{where}: quant_algo {q.get('quant_algo')!r} is not one gpuarch "
                           f"reads ({', '.join(sorted([*_MODELOPT_ALGOS, 'MIXED_PRECISION']))}"
                           "); give --weight-precision")
    layers, moe = _model_layers(model)
    left_out = rest or _UNQUANTIZED
    excluded = q.get("exclude_modules", q.get("ignore")) or []
    if not isinstance(excluded, list) or not all(isinstance(e, str) for e in excluded):
        raise GpuarchError(f"{where}: exclude_modules: expected a list of module names, got "
                           f"{excluded!r}")
    if algo == "MIXED_PRECISION":
        quantized = q.get("quantized_layers")
        if not isinstance(quantized, dict) or not quantized:
            raise GpuarchError(f"{where}: quant_algo MIXED_PRECISION without quantized_layers; "
                               "give --weight-precision")
        # the roles it names, each in its format (left out: ``left_out``); the rest as
        # ModelOpt leaves what it does not list
        named = _mixed_roles(quantized, excluded, layers, where, left_out)
        roles = {role: named.get(role, left_out) for role in _ROLE_NAMES}
    else:
        named = {role: left_out for role in _excluded_roles(excluded, layers)}
        roles = {role: named.get(role, _MODELOPT_ALGOS[algo]) for role in _ROLE_NAMES}
    main = "attention" if moe else "mlp"
    weights, activations = roles[main]
    experts = roles["experts"] if moe and roles["experts"] != roles[main] else None
    others = [f"{_ROLE_NAMES[role]} W{w}A{a}" for role, (w, a) in named.items()
              if role not in (main, "experts") and (w, a) != roles[main]
              and (role != "shared" or moe)]
    kv = _kv_format(q, where)
    kv_algo = "" if kv is None else f", KV cache {kv}"
    origin = (f"{where}: quant_algo {algo}" + kv_algo
              + (f"; {_ROLE_NAMES[main]} W{weights}A{activations}" if algo == "MIXED_PRECISION"
                 or roles[main] != _MODELOPT_ALGOS.get(algo) else "")
              + (f"; routed experts W{experts[0]}A{experts[1]}" if experts else "")
              + (f"; also {', '.join(others)}, priced at the "
                 f"{'non-expert' if moe else 'MLP'} weights' format" if others else ""))
    return CheckpointFormats(weights, activations, kv, origin,
                             expert_weights=experts[0] if experts else None,
                             fp8_blocks=algo == "FP8_BLOCK_SCALES",
                             expert_activations=experts[1] if experts else None)


def _model_layers(model: Mapping[str, Any] | None) -> tuple[int, bool]:
    """(Layers, whether it has routed experts) of a config.json (its text_config for a
    multimodal one); (1, False) where not known."""
    if not isinstance(model, Mapping):
        return 1, False
    text = model.get("text_config")
    cfg = text if isinstance(text, Mapping) else model

    def count(key: str) -> int:
        value = cfg.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    experts = any(count(k) > 0 for k in EXPERT_COUNT_KEYS)
    return max(count("num_hidden_layers"), 1), experts


# compressed-tensors (num_bits, type) -> format name
_COMPRESSED_FORMATS: dict[tuple[Any, Any], str] = {
    (8, "float"): "fp8", (8, "int"): "int8", (4, "float"): "fp4", (4, "int"): "int4",
    (16, "float"): "bf16"}


def _scheme_format(scheme: Any, what: str, where: str) -> str | None:
    """A compressed-tensors weights / input_activations entry as a format name."""
    if not scheme:
        return None
    if not isinstance(scheme, dict):
        raise GpuarchError(f"{where}: {what} is not an object")
    bits, kind = scheme.get("num_bits"), scheme.get("type")
    if (bits, kind) not in _COMPRESSED_FORMATS:
        raise GpuarchError(f"{where}: {what} with num_bits {bits!r} and type {kind!r} is not "
                           "a format gpuarch reads; give --weight-precision")
    return _COMPRESSED_FORMATS[(bits, kind)]


def _compressed_tensors(q: dict[str, Any], where: str,
                        model: Mapping[str, Any] | None = None) -> CheckpointFormats:
    """A compressed-tensors declaration: its groups' one format (4-bit floats with a scale
    per 32, ``mxfp4-pack-quantized``, as MXFP4), its KV cache's, and the modules its
    ``ignore`` list leaves in 16 bits, sorted by role as a ModelOpt exclusion list is (an MoE
    model's attention left out: the rest 16-bit, the routed experts in the format)."""
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise GpuarchError(f"{where}: compressed-tensors without config_groups; give "
                           "--weight-precision")
    seen = set()
    for group in groups.values():
        if not isinstance(group, dict):
            raise GpuarchError(f"{where}: a config_groups entry is not an object")
        weights = _scheme_format(group.get("weights"), "weights", where) or "bf16"
        acts = _scheme_format(group.get("input_activations"), "input_activations", where)
        seen.add((weights, acts or "bf16"))
    if len(seen) > 1:
        raise GpuarchError(f"{where}: compressed-tensors groups of different formats "
                           f"({sorted(seen)}); give --weight-precision")
    weights, activations = seen.pop()
    sizes = {(g.get("weights") or {}).get("group_size") for g in groups.values()
             if isinstance(g.get("weights"), dict)}
    if weights == "fp4" and (sizes == {32} or "mxfp4" in str(q.get("format") or "")):
        weights = "mxfp4"  # MX scaling: an 8-bit exponent a block of 32 (NVFP4's is 16)
    kv = _scheme_format(q.get("kv_cache_scheme"), "kv_cache_scheme", where)
    origin = (f"{where}: compressed-tensors, weights {weights}, activations {activations}"
              + (f", KV cache {kv}" if kv else ""))
    ignore = q.get("ignore") or []
    if not isinstance(ignore, list) or not all(isinstance(i, str) for i in ignore):
        raise GpuarchError(f"{where}: ignore: expected a list of module names, got "
                           f"{ignore!r}"[:300])
    layers, moe = _model_layers(model)
    left_out = _excluded_roles([i.removeprefix("re:") for i in ignore], layers)
    main = "attention" if moe else "mlp"
    if main in left_out and not (moe and "experts" in left_out):
        return CheckpointFormats(
            "bf16", "bf16", kv, origin + f"; {_ROLE_NAMES[main]} left out (ignore): 16-bit"
            + (", routed experts in the format" if moe else ""),
            expert_weights=weights if moe else None,
            expert_activations=activations if moe else None)
    return CheckpointFormats(weights, activations, kv, origin)


def _bitnet(q: dict[str, Any], where: str) -> CheckpointFormats:
    """BitNet's declaration (Transformers' BitNetQuantConfig): ``quantization_mode``
    "online" stores BF16 master weights that every linear makes ternary as it runs (read as
    16-bit weights: what the GPU reads); "offline" (the default) stores the ternary weights
    packed four to a byte, which no Tensor Core format here prices."""
    mode = q.get("quantization_mode", "offline")
    if mode == "online":
        return CheckpointFormats("bf16", "bf16", None,
                                 f"{where}: quant_method bitnet, quantization_mode online "
                                 "(BF16 master weights, made ternary as each linear runs)")
    if mode == "offline":
        raise GpuarchError(f"{where}: quant_method bitnet, quantization_mode offline: ternary "
                           "weights packed four to a byte (2 bits), a format gpuarch does not "
                           "price; give --weight-precision (bf16 for the BF16 master weights "
                           "a quantization_mode online checkpoint stores)")
    raise GpuarchError(f"{where}: quantization_mode: expected \"online\" or \"offline\" for "
                       f"quant_method bitnet, got {mode!r}"[:200])


def checkpoint_formats(config_path: Path) -> CheckpointFormats | None:
    """The formats the checkpoint of ``config_path`` declares, or None when it declares none
    (a 16-bit checkpoint). Raises :class:`GpuarchError` for a declared method it cannot read,
    naming the file and the method."""
    cfg = read_json_object(config_path)
    q = cfg.get("quantization_config")
    if q is None and isinstance(cfg.get("text_config"), Mapping):
        q = cfg["text_config"].get("quantization_config")
    beside = config_path.with_name("hf_quant_config.json")
    if (q is None or _declared_by_modelopt(q)) and beside.is_file():
        # ModelOpt's own file, which TensorRT-LLM's loader reads before config.json
        # (ModelConfig.from_pretrained in tensorrt_llm/_torch/model_config.py), where
        # config.json's copy may leave out the KV cache's format
        modelopt = read_json_object(beside).get("quantization")
        if isinstance(modelopt, dict):
            return _modelopt(modelopt, f"{beside.name} quantization", cfg)
    if q is None:
        return None
    return declared_quantization(q, f"{config_path.name} quantization_config",
                                 cfg.get("expert_dtype"), cfg)


def _declared_by_modelopt(q: Any) -> bool:
    """Whether a config.json's ``quantization_config`` is ModelOpt's (by method or
    producer) and declares no FP8 checkpoint of the model's own beneath it."""
    if not isinstance(q, Mapping):
        return False
    producer = q.get("producer")
    return q.get("quant_method") == "modelopt" or (
        not q.get("quant_method") and isinstance(producer, Mapping)
        and producer.get("name") == "modelopt")


def declared_quantization(q: Any, where: str, expert_dtype: Any = None,
                          model: Mapping[str, Any] | None = None) -> CheckpointFormats:
    """The formats one ``quantization_config`` object declares (as a ``config.json`` holds
    it, or a preset records its published checkpoint's); errors name ``where`` and the
    method. ``expert_dtype``: config.json's key of that name beside it (DeepSeek-V4's
    instruct checkpoints: "fp4", the routed experts' weights in FP4 E2M1 with a UE8M0 scale
    per 32, MXFP4's layout, the rest FP8). ``model``: the config.json, for a ModelOpt
    declaration's roles (its layer count, whether it has routed experts)."""
    if not isinstance(q, Mapping):
        raise GpuarchError(f"{where}: expected an object")
    q = dict(q)
    method = str(q.get("quant_method") or "")
    if expert_dtype not in (None, "fp8", "fp4"):
        raise GpuarchError(f"{where}: expert_dtype {expert_dtype!r} is not one gpuarch reads "
                           "(fp8, fp4); give --expert-weight-precision")
    if _declared_by_modelopt(q):
        method = "modelopt"  # ModelOpt's config.json declarations may name no method
    if method == "fp8" and q.get("quant_algo") is not None:
        # ModelOpt re-quantizing an FP8 checkpoint in part (NVIDIA's DeepSeek-V4 NVFP4: the
        # routed experts in NVFP4, the modules it leaves out in the original FP8)
        found = _modelopt(q, where, model, rest=("fp8", "fp8"))
        block = q.get("weight_block_size")
        blocks = f", weight blocks {block}" if block else ""
        return replace(found, fp8_blocks=bool(block), origin=found.origin.replace(
            ": quant_algo", f": quant_method fp8{blocks}, quant_algo", 1))
    if method == "fp8":
        block = q.get("weight_block_size")
        experts = "mxfp4" if expert_dtype == "fp4" else None
        return CheckpointFormats("fp8", "fp8", None, f"{where}: quant_method fp8"
                                 + (f", weight blocks {block}" if block else "")
                                 + (", experts fp4 (expert_dtype)" if experts else ""),
                                 expert_weights=experts, fp8_blocks=bool(block))
    if method == "mxfp4":
        return CheckpointFormats("bf16", "bf16", None,
                                 f"{where}: quant_method mxfp4 (the experts' weights in 4 "
                                 "bits, the rest 16-bit; add --expert-activation-precision "
                                 "fp8 for W4A8 experts, as TensorRT-LLM runs them on "
                                 "Blackwell)", expert_weights="mxfp4")
    if method in ("awq", "gptq"):
        bits = q.get("bits", q.get("w_bit"))
        if bits not in (4, 8):
            raise GpuarchError(f"{where}: {method} with bits {bits!r}; gpuarch reads 4 or 8")
        return CheckpointFormats(f"int{bits}", "bf16", None,
                                 f"{where}: quant_method {method}, {bits}-bit weights")
    if method == "bitnet":
        return _bitnet(q, where)
    if method == "modelopt":
        return _modelopt(q, where, model)
    if method == "compressed-tensors":
        return _compressed_tensors(q, where, model)
    raise GpuarchError(f"{where}: quant_method {method!r} is not one gpuarch reads (fp8, "
                       "mxfp4, awq, gptq, bitnet, modelopt, compressed-tensors); give "
                       "--weight-precision")
