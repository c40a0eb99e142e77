"""Model presets (``data/models.toml``): public model shapes with their sources."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any

from gpuarch.catalog.lookup import Resolver
from gpuarch.errors import GpuarchError, UnknownNameError, suggestion
from gpuarch.jsonfile import read_json_object
from gpuarch.workloads.hf_quant import CheckpointFormats, declared_quantization
from gpuarch.workloads.shape import (
    BlockSparseAttention,
    CompressedAttention,
    FfnKind,
    FullAttention,
    MambaShape,
    MlaShape,
    NormKind,
    Position,
    QkNorm,
    TransformerShape,
)

__all__ = ["MODELS_FILE", "Preset", "load_presets", "local_config", "needs_remote_code",
           "preset", "shape_from_mapping"]

MODELS_FILE = Path(__file__).with_name("data") / "models.toml"

_ENUMS: dict[str, type[Enum]] = {"ffn_kind": FfnKind, "norm": NormKind, "position": Position,
                                  "qk_norm": QkNorm}
_TABLES: dict[str, type[Any]] = {"mla": MlaShape, "mamba": MambaShape,
                                  "compressed": CompressedAttention,
                                  "full_attention": FullAttention,
                                  "block_sparse": BlockSparseAttention}
"""A shape's parts given as tables of their own, by key."""
_SHAPE_KEYS = {f.name for f in fields(TransformerShape)} - {"name", *_TABLES}
_TABLE_KEYS = {key: {f.name for f in fields(kind)} for key, kind in _TABLES.items()}
_META_KEYS = {"name", "aliases", "hf_repos", "params", "params_billions", "source",
              "quantization_config", "expert_dtype", "remote_code", *_TABLES}
_HF_MODEL_URL = re.compile(r"https://huggingface\.co/([^/]+/[^/]+)")


@dataclass(frozen=True)
class Preset:
    """A named public model: its shape, its published size and the source of both."""

    shape: TransformerShape
    aliases: tuple[str, ...]  # other names, Hugging Face repository ids among them
    source_title: str
    source_url: str
    params: int | None  # exact published total, where one is published
    params_billions: float | None  # rounded published total otherwise
    # the formats the published checkpoint is stored in, where it is not 16-bit (its
    # config.json's quantization_config, as recorded in models.toml)
    checkpoint: CheckpointFormats | None = None
    # its Hugging Face repository ids (also among ``aliases``), the first the checkpoint a
    # serving command loads (``report.launch.model_reference``)
    hf_repos: tuple[str, ...] = ()
    # the published checkpoint ships model code of its own (its config.json's auto_map), which
    # a serving engine loads only when told to trust it (``--trust-remote-code``)
    remote_code: bool = False


def _table(key: str, value: Any, where: str) -> Any:
    """One of a shape's parts given as a table (``_TABLES``' ``key``), its keys checked; a
    ``full_attention`` table's ``mla`` (the full layers' own latent attention) a table in
    turn."""
    known, kind = _TABLE_KEYS[key], _TABLES[key]
    if not isinstance(value, Mapping):
        raise GpuarchError(f"{where}: expected a table, got {value!r}")
    unknown = set(value) - known
    if unknown:
        bad = sorted(unknown)[0]
        raise GpuarchError(f"{where}: unknown key {bad!r}{suggestion(bad, known)}")
    if isinstance(value.get("ratios"), list):  # TOML and JSON give a list
        value = {**value, "ratios": tuple(value["ratios"])}
    if key == "full_attention" and value.get("mla") is not None:
        value = {**value, "mla": _table("mla", value["mla"], f"{where}.mla")}
    try:
        return kind(**value)
    except (TypeError, GpuarchError) as exc:
        raise GpuarchError(f"{where}: {exc}") from None


def shape_from_mapping(raw: Mapping[str, Any], where: str) -> TransformerShape:
    """Build a shape from plain keys (TOML, JSON, flags); errors name ``where`` and the key."""
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _META_KEYS - {"name", *_TABLES}:
            continue
        if key in _TABLES:
            kwargs[key] = _table(key, value, f"{where}.{key}")
        elif key == "name":
            kwargs["name"] = value
        elif key in _ENUMS:
            members = {m.value: m for m in _ENUMS[key]}
            if value not in members:
                raise GpuarchError(f"{where}.{key}: unknown value {value!r}"
                                   f"{suggestion(str(value), members)}")
            kwargs[key] = members[value]
        elif key in _SHAPE_KEYS:
            # (TOML and JSON give a list where the shape holds a tuple)
            kwargs[key] = tuple(value) if key == "mlp_widths" and isinstance(value, list) \
                else value
        else:
            raise GpuarchError(f"{where}: unknown key {key!r}"
                               f"{suggestion(key, _SHAPE_KEYS | _META_KEYS)}")
    try:
        return TransformerShape(**kwargs)
    except TypeError as exc:  # a required field is missing
        raise GpuarchError(f"{where}: {exc}") from None
    except GpuarchError as exc:
        raise GpuarchError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class _Presets:
    by_name: Mapping[str, Preset]
    names: Resolver[Preset]


@cache
def load_presets(path: Path = MODELS_FILE) -> _Presets:
    """Read and validate the presets file once."""
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    sources = {s["id"]: s for s in raw.get("source", [])}
    citing = Counter(entry.get("source", "") for entry in raw.get("model", []))
    out: dict[str, Preset] = {}
    resolver: Resolver[Preset] = Resolver("model")
    for i, entry in enumerate(raw.get("model", [])):
        where = f"{path.name}: model[{i}]"
        source = sources.get(entry.get("source", ""))
        if source is None:
            raise GpuarchError(f"{where}.source: unknown source {entry.get('source')!r}")
        repos = _hf_repos(entry, source, citing[entry["source"]])
        item = Preset(
            shape=shape_from_mapping(entry, where),
            aliases=(*entry.get("aliases", ()), *repos), hf_repos=repos,
            source_title=source["title"],
            source_url=source["url"],
            params=entry.get("params"),
            params_billions=entry.get("params_billions"),
            checkpoint=_checkpoint(entry),
            remote_code=_remote_code(entry, where),
        )
        out[item.shape.name] = item
        resolver.add(item.shape.name, item, item.aliases)
    return _Presets(out, resolver)


def _remote_code(entry: Mapping[str, Any], where: str) -> bool:
    value = entry.get("remote_code", False)
    if not isinstance(value, bool):
        raise GpuarchError(f"{where}.remote_code: expected true or false, got {value!r}")
    return value


def _hf_repos(entry: Mapping[str, Any], source: Mapping[str, Any], citing: int
              ) -> tuple[str, ...]:
    """The Hugging Face repository ids a preset answers to (``--model Qwen/Qwen3-8B``): its
    ``hf_repos`` list, else the model page its source is, where no other preset cites that
    page (a family's shared config is one size's)."""
    if "hf_repos" in entry:
        return tuple(entry["hf_repos"])
    found = _HF_MODEL_URL.fullmatch(str(source.get("url", "")))
    return (found.group(1),) if found and citing == 1 else ()


def _checkpoint(entry: Mapping[str, Any]) -> CheckpointFormats | None:
    """A preset's published checkpoint formats, from its ``quantization_config`` table."""
    q = entry.get("quantization_config")
    if q is None:
        return None
    return declared_quantization(q, f"preset {entry['name']}'s published checkpoint "
                                    "(its config.json quantization_config)",
                                 entry.get("expert_dtype"))


_TUNED_WORDS = re.compile(r"(?<![a-z0-9.])(instruct|chat|it|hf)(?:[-_ ]\d{4})?(?![a-z0-9.])",
                          re.IGNORECASE)
"""Words a fine-tune adds to its base model's name (``-Instruct``, ``-Instruct-2507``,
``-chat-hf``, Gemma's ``-it``): the same shape as the base."""


def preset(name: str) -> Preset:
    """The preset ``name`` means (case and separators ignored; "did you mean" otherwise).
    An instruction- or chat-tuned checkpoint's name (``meta-llama/Llama-3.1-8B-Instruct``,
    ``google/gemma-3-27b-it``) finds its base model's preset, whose shape it shares; a
    quantized checkpoint's (``...-Instruct-FP8``) does not, its formats differing, and the
    error says which preset and flags describe it."""
    names = load_presets().names
    try:
        return names.resolve(name)
    except UnknownNameError as unknown:
        tuned = _TUNED_WORDS.sub(" ", name)
        found = _base_of(names, tuned, name)
        if found is not None:
            return found
        base = _base_of(names, _QUANT_WORDS.sub(" ", tuned), tuned)
        if base is not None:
            raise GpuarchError(
                f"unknown model {name!r}: a quantized checkpoint of {base.shape.name}? Give "
                f"--model {base.shape.name} with its formats (--weight-precision, "
                "--activation-precision, --kv-precision), or the checkpoint's config.json, "
                "which declares them") from None
        raise unknown


def _base_of(names: Resolver[Preset], stem: str, name: str) -> Preset | None:
    """The preset ``stem`` (``name`` with words removed) means, with or without its
    organisation; None where nothing was removed or it means none or several."""
    if stem == name:
        return None
    for base in (stem, stem.split("/", 1)[-1]):
        try:
            return names.resolve(base)
        except GpuarchError:
            continue
    return None


_QUANT_WORDS = re.compile(
    r"(?<![a-z0-9.])(fp8|fp4|nvfp4|mxfp4|int4|int8|awq|gptq|w8a8|w4a16|w8a16|bnb|4bit|8bit|"
    r"dynamic|quantized|quant)(?![a-z0-9.])", re.IGNORECASE)
"""Words a quantized checkpoint adds to its model's name (``-FP8``, ``-AWQ``, ``-W4A16``)."""


def local_config(reference: str) -> dict[str, Any] | None:
    """The config.json a serving command's checkpoint reference names (the file, or a
    directory holding one), read; None where it names none or it cannot be read (the
    estimate that asked has read and checked it already)."""
    path = Path(reference)
    config = path / "config.json" if path.is_dir() else path
    if config.suffix != ".json" or not config.is_file():
        return None
    try:
        return read_json_object(config)
    except GpuarchError:
        return None


def needs_remote_code(reference: str) -> bool:
    """Whether the checkpoint a serving command loads ships model code
    of its own, which vLLM, SGLang and TensorRT-LLM load only with their trust-remote-code
    flag: a local config.json (or a directory holding one) whose ``auto_map`` names its own
    classes (at the top or in its ``text_config``), else the preset the name resolves to
    (``Preset.remote_code``); False for anything else. (``report.launch.model_reference``
    names the checkpoint.)"""
    path = Path(reference)
    config = path / "config.json" if path.is_dir() else path
    if config.suffix == ".json" and config.is_file():
        cfg = local_config(reference)
        if cfg is None:
            return False
        text = cfg.get("text_config")
        return "auto_map" in cfg or (isinstance(text, dict) and "auto_map" in text)
    try:
        return preset(reference).remote_code
    except GpuarchError:
        return False
