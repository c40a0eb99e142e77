"""Your own measured runs against the model: a file in the shipped validation files' format
(``[[point]]`` tables, optional ``[[source]]`` tables) read strictly, for
``gpuarch validate training --data FILE``, ``gpuarch validate inference --data FILE`` and
``gpuarch validate load --data FILE`` (serving runs under a stream of requests at a rate).

The shipped files are held to their format by the test suite; a user's file is not, so every
field is checked here before the model sees it: its name (with the nearest known one), its
type (``data/point-fields.toml``), and for the fields whose value is one of a fixed set, the
value (with the nearest allowed one). A point the model then cannot compare (an unknown GPU,
a layout that does not divide) is an error too, naming the point: a user asked about every
row of the file, so none is quietly left out.
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Mapping
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any, Literal

from gpuarch.errors import GpuarchError, check_choice, is_positive_number, suggestion
from gpuarch.estimate.inference_config import SCHEDULES
from gpuarch.estimate.memory import Recompute
from gpuarch.files import read_input_text
from gpuarch.perf.precision import Precision
from gpuarch.perf.quant import QuantFormat
from gpuarch.validation.serving_load import ARRIVALS, METRICS
from gpuarch.validation.stats import ErrorSummary
from gpuarch.validation.training import TrainingPoint, check_point_keys
from gpuarch.workloads.shape import FfnKind, NormKind, Position

__all__ = ["AT_LEAST_ONE", "CHOICES", "FIELDS_FILE", "FIGURES", "REQUIRED", "Kind", "cited_source",
           "field_types", "load_user_points", "read_user_toml", "require_all_compared"]

Kind = Literal["training", "inference", "load"]

FIELDS_FILE = Path(__file__).with_name("data") / "point-fields.toml"

_TYPE_NAMES = {"int": "a whole number", "number": "a number", "bool": "true or false",
               "text": "text in quotes", "texts": "a list of texts",
               "ints": "a list of whole numbers"}


@cache
def field_types(kind: Kind) -> dict[str, str]:
    """Each field a point of ``kind`` may carry, and its type (a key of the file's table:
    int, number, bool, text, texts, ints); a load run takes a serving point's fields and
    the ``[load]`` table's."""
    with FIELDS_FILE.open("rb") as fh:
        tables = tomllib.load(fh)
    kinds = ("inference", "load") if kind == "load" else (kind,)
    return {key: type_name for k in kinds for type_name, keys in tables[k].items()
            for key in keys}


def _values(enum: type[Enum]) -> tuple[str, ...]:
    return tuple(str(member.value) for member in enum)


_SHAPE_CHOICES = {"ffn_kind": _values(FfnKind), "norm": _values(NormKind),
                  "position": _values(Position)}
_QUANT = _values(QuantFormat)
_SERVING_CHOICES = {**_SHAPE_CHOICES, "weight_precision": _QUANT, "activation_precision": _QUANT,
                    "kv_precision": _QUANT, "expert_weight_precision": _QUANT,
                    "expert_activation_precision": _QUANT, "schedule": SCHEDULES}
CHOICES: dict[Kind, dict[str, tuple[str, ...]]] = {
    "training": {**_SHAPE_CHOICES, "precision": _values(Precision),
                 "recompute": _values(Recompute),
                 "tflops_convention": ("model-flops", "megatron-causal", "megatron-hfu",
                                       "unspecified")},
    "inference": {**_SERVING_CHOICES, "mode": ("static-batch", "serving", "max-throughput")},
    # (a load run's mode: _check_load_run)
    "load": {**_SERVING_CHOICES, "arrivals": ARRIVALS},
}
"""Fields whose readers convert the value without a message of their own (an enum, or a
mode the reader tells apart by ``if``): checked here. The other fixed-set fields (a
dispatcher, a schedule, an engine's option) are checked by the configuration they fill,
which names the allowed values."""


FIGURES: dict[Kind, tuple[str, ...]] = {
    "training": ("tokens_per_s_per_gpu", "tokens_per_s", "step_time_s", "tflops_per_gpu",
                 "mfu", "hfu"),
    "inference": ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "ttft_s", "tpot_s",
                  "request_latency_s", "decode_tokens_per_s_per_gpu",
                  "prefill_tokens_per_s_per_gpu", "total_tokens_per_s"),
    "load": tuple(METRICS),
}
"""The measured figures a point may give: each a positive, finite number (MFU and HFU at
most 1, fractions of the peak)."""

AT_LEAST_ONE = frozenset({"gpus", "tp", "pp", "cp", "ep", "vpp", "dp", "micro_batch",
                          "global_batch", "seq_len", "input_len", "output_len", "batch",
                          "concurrency", "gpus_per_node"})
"""Counts a run has at least one of (the readers take a 0 here for 'not given', 1)."""

REQUIRED: dict[Kind, tuple[str, ...]] = {
    "training": ("gpu", "gpus", "seq_len", "global_batch"),
    "inference": ("gpu", "gpus", "input_len", "output_len"),
    "load": ("gpu", "gpus", "input_len", "output_len", "rate_per_s"),
}
"""Fields a point of a user's file must give (besides its id, its model and a figure, which
the comparison asks for by name)."""


def _check_required(where: str, entry: Mapping[str, Any], kind: Kind) -> None:
    """Raise GpuarchError naming the first required field ``entry`` leaves out; a static
    batch needs its ``batch`` and a serving run its ``concurrency`` (an offline
    max-throughput run fills the memory, as ``--batch max``); a training run's ``dp``, where
    given, must be its GPUs over TP x PP x CP."""
    for key in REQUIRED[kind]:
        if key not in entry:
            raise GpuarchError(f"{where}: give {key}")
    if kind == "training" and "dp" in entry:
        split = (entry.get("tp") or 1) * (entry.get("pp") or 1) * (entry.get("cp") or 1)
        if entry["dp"] * split != entry["gpus"]:
            raise GpuarchError(f"{where}: dp = {entry['dp']}: GPUs / (TP x PP x CP) = "
                               f"{entry['gpus']} / {split} (leave dp out to take that)")
    if kind == "inference":
        mode = entry.get("mode", "static-batch")
        if mode == "static-batch" and "batch" not in entry:
            raise GpuarchError(f"{where}: give batch, the static batch's sequences (or mode "
                               "= \"serving\" with concurrency, or \"max-throughput\")")
        if mode == "serving" and "concurrency" not in entry and "batch" not in entry:
            raise GpuarchError(f"{where}: give concurrency, the requests in flight")
    if kind == "load":
        _check_load_run(where, entry)


_LOAD_MEANS = {"ttft_s": "ttft_mean_s", "tpot_s": "tpot_mean_s",
               "request_latency_s": "latency_mean_s"}
"""A serving point's latency and the load run's figure a user giving it most likely means."""


def _check_load_run(where: str, entry: Mapping[str, Any]) -> None:
    """Raise GpuarchError where a load run gives what its rate decides (a batch, the
    requests in flight), a figure of a run without a rate, or the shipped runs' Offline
    reference; or where its figures and rate cannot be a run's."""
    if entry.get("mode", "max-throughput") != "max-throughput":
        raise GpuarchError(f"{where}: mode = {entry['mode']!r}: a run at a rate batches "
                           "continuously, up to max_batch_size or what fits; leave mode out")
    for key in ("batch", "concurrency"):
        if key in entry:
            raise GpuarchError(f"{where}: {key}: a run at a rate holds what its requests "
                               "leave in flight; leave it out (max_batch_size caps it)")
    for key in FIGURES["inference"]:
        if key in entry:
            mean = _LOAD_MEANS.get(key)
            raise GpuarchError(f"{where}: {key}: a load run gives the latencies its "
                               f"requests saw ({', '.join(FIGURES['load'][:4])}, ...)"
                               + (f"; did you mean {mean!r}?" if mean else
                                  "; its throughput follows from rate_per_s"))
    if "offline" in entry:
        raise GpuarchError(f"{where}: offline names a shipped Offline point; a run of your "
                           "own is replayed at its own rate_per_s (leave it out)")
    if not any(key in entry for key in FIGURES["load"]):
        raise GpuarchError(f"{where}: give a measured figure: "
                           f"{', '.join(FIGURES['load'])}")
    if not is_positive_number(entry["rate_per_s"]):
        raise GpuarchError(f"{where}: rate_per_s = {entry['rate_per_s']!r}: expected "
                           "requests per second > 0")
    cv = entry.get("input_len_cv", 0)
    if not (cv == 0 or is_positive_number(cv)):
        raise GpuarchError(f"{where}: input_len_cv = {cv!r}: expected a spread >= 0 (the "
                           "prompts' standard deviation over their mean)")
    for figure in ("ttft", "tpot", "latency"):
        given = [(stat, entry[f"{figure}_{stat}_s"]) for stat in ("p50", "p90", "p99")
                 if f"{figure}_{stat}_s" in entry]
        for (low, a), (high, b) in itertools.pairwise(given):
            if a > b:
                raise GpuarchError(f"{where}: {figure}_{low}_s = {a!r} is above "
                                   f"{figure}_{high}_s = {b!r}: a percentile cannot fall")


def _is(type_name: str, value: Any) -> bool:
    if type_name == "bool":
        return isinstance(value, bool)
    if type_name == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if type_name == "text":
        return isinstance(value, str)
    if type_name == "texts":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                           for v in value)


def _check_fields(where: str, entry: Mapping[str, Any], kind: Kind) -> None:
    """Raise GpuarchError at the first field of ``entry`` whose type or value is wrong."""
    types = field_types(kind)
    for key, value in entry.items():
        type_name = types[key]
        if not _is(type_name, value):
            raise GpuarchError(f"{where}: {key} = {value!r}: expected "
                               f"{_TYPE_NAMES[type_name]}")
        if key in FIGURES[kind] and not is_positive_number(value):
            raise GpuarchError(f"{where}: {key} = {value!r}: expected a measured figure > 0")
        if key in AT_LEAST_ONE and value < 1:
            raise GpuarchError(f"{where}: {key} = {value!r}: expected a whole number >= 1")
        if key in ("mfu", "hfu") and value > 1:
            raise GpuarchError(f"{where}: {key} = {value!r}: expected a fraction of the peak, "
                               "at most 1 (0.45 for 45%)")
        choices = CHOICES[kind].get(key)
        if choices is not None:
            check_choice(f"{where}: {key}", value, choices)


def load_user_points(path: Path, kind: Kind) -> tuple[TrainingPoint, ...]:
    """The points of a user's file of measured ``kind`` runs (the record the shipped files
    load into). A point without ``source`` is cited as the file itself; a ``[[source]]``
    needs an ``id`` and a ``title`` (``url`` optional), and a point naming one must find it.
    ``out_of_sample``, the shipped files' note of which rows a fit saw, is set false: the
    in- and out-of-sample split of the report is about the published points."""
    raw = read_user_toml(path)
    name = path.name
    for key, value in raw.items():
        if key not in ("point", "source"):
            what = "table" if isinstance(value, dict | list) else "key outside a [[point]] table:"
            raise GpuarchError(f"{name}: unknown {what} {key!r}"
                               f"{suggestion(key, ('point', 'source'))} (a file holds "
                               "[[point]] tables and, optionally, [[source]] tables)")
    entries = raw.get("point", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise GpuarchError(f"{name}: point: expected [[point]] tables")
    if not entries:
        raise GpuarchError(f"{name}: no [[point]] tables: give one per measured run")
    sources = _sources(name, raw.get("source", []))
    known = frozenset(field_types(kind))
    seen: set[str] = set()
    points = []
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry.get("id"), str) or not entry["id"]:
            got = f": id = {entry['id']!r} is not a name" if "id" in entry else " has no id"
            raise GpuarchError(f"{name}: point {n}{got} (give id = \"...\", a name for the "
                               "run)")
        pid = entry["id"]
        if pid in seen:
            raise GpuarchError(f"{name}: point id {pid!r} is used twice")
        seen.add(pid)
        check_point_keys(path, entry, known)
        _check_fields(f"{name}: point {pid!r}", entry, kind)
        _check_required(f"{name}: point {pid!r}", entry, kind)
        src = cited_source(path, f"{name}: point {pid!r}", entry.get("source"), sources)
        # a load run batches continuously (_check_load_run allows no other mode)
        raw = {"mode": "max-throughput", **entry} if kind == "load" else dict(entry)
        points.append(TrainingPoint(pid, src["id"], src["title"], src.get("url", ""),
                                    entry.get("where", ""), {**raw, "out_of_sample": False}))
    return tuple(points)


def read_user_toml(path: Path) -> dict[str, Any]:
    """A user's --data file as TOML, or a usage error naming --data: not there, a folder,
    not text, unreadable (a name too long, no permission), or not TOML."""
    text = read_input_text(path, "--data")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise GpuarchError(f"--data: {path.name} is not valid TOML: {exc}") from None


def cited_source(path: Path, where: str, cited: Any,
                 sources: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any]:
    """The ``[[source]]`` a run of a user's file cites (the file itself where it cites
    none), or an error naming the run and the nearest source id."""
    if cited is None:
        return {"id": path.stem, "title": path.name, "url": ""}
    if cited not in sources:
        raise GpuarchError(f"{where}: source {cited!r} is not a [[source]] id of the "
                           f"file{suggestion(str(cited), sources)}")
    return sources[cited]


def _sources(name: str, entries: Any) -> dict[str, Mapping[str, Any]]:
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise GpuarchError(f"{name}: source: expected [[source]] tables")
    sources: dict[str, Mapping[str, Any]] = {}
    for n, source in enumerate(entries, 1):
        sid = source.get("id")
        if not isinstance(sid, str) or not sid:
            raise GpuarchError(f"{name}: source {n} has no id")
        if sid in sources:
            raise GpuarchError(f"{name}: source id {sid!r} is used twice")
        for key in sorted(set(source) - {"id", "title", "url", "authors", "year", "engine"}):
            raise GpuarchError(f"{name}: source {sid!r}: unknown key {key!r}"
                               f"{suggestion(key, ('id', 'title', 'url', 'authors', 'year'))}")
        if "engine" in source:
            raise GpuarchError(f"{name}: source {sid!r}: engine settings belong on each "
                               "point in a file of your own")
        if not isinstance(source.get("title"), str):
            raise GpuarchError(f"{name}: source {sid!r}: give its title (title = \"...\")")
        sources[sid] = source
    return sources


def require_all_compared(summary: ErrorSummary, path: Path) -> None:
    """Raise GpuarchError naming every point of a user's file the model could not compare,
    with the reason; a user's file has no points to leave out."""
    if summary.skipped:
        # the comparison's own messages may already name the point
        reasons = "; ".join(f"point {pid!r}: {why.removeprefix(f'point {pid}: ')}"
                            for pid, why in summary.skipped)
        raise GpuarchError(f"{path.name}: {len(summary.skipped)} of the file's points "
                           f"cannot be compared: {reasons}")

