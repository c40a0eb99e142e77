"""The storage formats a Hugging Face checkpoint declares, read from its ``config.json``
(``quantization_config``) or, for NVIDIA ModelOpt checkpoints, the ``hf_quant_config.json``
beside it, or recorded for a preset's published checkpoint in ``models.toml`` (the same
``quantization_config`` object): what ``estimate infer`` uses unless format flags are given.

Read: ``fp8`` (e.g. DeepSeek-V3's block-scaled FP8: W8A8), ``mxfp4`` (GPT-OSS: the routed
experts' weights in 4 bits, 16-bit activations unless told otherwise; attention, router,
embeddings and LM head stay 16-bit, as Transformers' MXFP4 quantizer replaces only the
experts), ``awq`` and ``gptq`` (INT4 or INT8
weight-only), ``modelopt`` (its ``quant_algo`` FP8, NVFP4, W4A16_AWQ / INT4_AWQ, W4A8_AWQ,
W8A16 / INT8 weight-only, and ``kv_cache_quant_algo`` FP8) and ``compressed-tensors``
(weights and input activations by bits and type, ``kv_cache_scheme``). Any other declared
method is refused with its name, rather than read as 16-bit.

Formats are returned as the names ``estimate infer`` takes (``fp8``, ``fp4`` for NVFP4,
``mxfp4``, ``int8``, ``int4``, ``bf16``), so this module needs nothing from the performance
model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.jsonfile import read_json_object

__all__ = ["CheckpointFormats", "checkpoint_formats", "declared_quantization"]


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


_MODELOPT_ALGOS: dict[str, tuple[str, str]] = {
    "FP8": ("fp8", "fp8"),
    "FP8_BLOCK_SCALES": ("fp8", "fp8"),
    "FP8_PB_WO": ("fp8", "fp8"),
    "NVFP4": ("fp4", "fp4"),
    "W4A16_AWQ": ("int4", "bf16"),
    "INT4_AWQ": ("int4", "bf16"),
    "W4A8_AWQ": ("int4", "fp8"),
    "W8A16": ("int8", "bf16"),
    "INT8_WEIGHT_ONLY": ("int8", "bf16"),
    "W8A8_SQ_PER_CHANNEL": ("int8", "int8"),
}


def _modelopt(q: dict[str, Any], where: str) -> CheckpointFormats:
    algo = str(q.get("quant_algo") or "").upper()
    if algo not in _MODELOPT_ALGOS:
        raise GpuarchError(f"{where}: quant_algo {q.get('quant_algo')!r} is not one gpuarch "
                           f"reads ({', '.join(sorted(_MODELOPT_ALGOS))}); give "
                           "--weight-precision")
    weights, activations = _MODELOPT_ALGOS[algo]
    kv_algo = str(q.get("kv_cache_quant_algo") or "").upper()
    kv = "fp8" if kv_algo == "FP8" else "int8" if kv_algo == "INT8" else None
    origin = f"{where}: quant_algo {algo}" + (f", kv_cache_quant_algo {kv_algo}" if kv else "")
    return CheckpointFormats(weights, activations, kv, origin,
                             fp8_blocks=algo == "FP8_BLOCK_SCALES")


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


def _compressed_tensors(q: dict[str, Any], where: str) -> CheckpointFormats:
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
    kv = _scheme_format(q.get("kv_cache_scheme"), "kv_cache_scheme", where)
    return CheckpointFormats(weights, activations, kv,
                             f"{where}: compressed-tensors, weights {weights}, activations "
                             f"{activations}" + (f", KV cache {kv}" if kv else ""))


def checkpoint_formats(config_path: Path) -> CheckpointFormats | None:
    """The formats the checkpoint of ``config_path`` declares, or None when it declares none
    (a 16-bit checkpoint). Raises :class:`GpuarchError` for a declared method it cannot read,
    naming the file and the method."""
    cfg = read_json_object(config_path)
    q = cfg.get("quantization_config")
    if q is None:
        beside = config_path.with_name("hf_quant_config.json")
        if beside.is_file():
            modelopt = read_json_object(beside).get("quantization")
            if isinstance(modelopt, dict):
                return _modelopt(modelopt, f"{beside.name} quantization")
        return None
    return declared_quantization(q, f"{config_path.name} quantization_config",
                                 cfg.get("expert_dtype"))


def declared_quantization(q: Any, where: str, expert_dtype: Any = None) -> CheckpointFormats:
    """The formats one ``quantization_config`` object declares (as a ``config.json`` holds
    it, or a preset records its published checkpoint's); errors name ``where`` and the
    method. ``expert_dtype``: config.json's key of that name beside it (DeepSeek-V4's
    instruct checkpoints: "fp4", the routed experts' weights in FP4 E2M1 with a UE8M0 scale
    per 32, MXFP4's layout, the rest FP8)."""
    if not isinstance(q, Mapping):
        raise GpuarchError(f"{where}: expected an object")
    q = dict(q)
    method = str(q.get("quant_method") or "")
    if expert_dtype not in (None, "fp8", "fp4"):
        raise GpuarchError(f"{where}: expert_dtype {expert_dtype!r} is not one gpuarch reads "
                           "(fp8, fp4); give --expert-weight-precision")
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
    if method == "modelopt":
        return _modelopt(q, where)
    if method == "compressed-tensors":
        return _compressed_tensors(q, where)
    raise GpuarchError(f"{where}: quant_method {method!r} is not one gpuarch reads (fp8, "
                       "mxfp4, awq, gptq, modelopt, compressed-tensors); give "
                       "--weight-precision")
