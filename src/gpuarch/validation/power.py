"""The power model against node power metered during MLPerf Training runs.

MLPerf Training's power category meters whole nodes (at the wall, AC, or at the rack's power
shelf, DC) for the length of a timed run. ``data/power.toml`` holds such runs on NVIDIA GPUs:
each names the training point of ``data/training.toml`` whose workload and layout it shares
(fields of its own replace the point's), the step time of the metered run itself, and the
node power it drew: the mean of the meter's readings, shipped beside it
(``data/power-*.csv``), over the window the row names, taken as MLPerf's result summarizer
takes it.

The model's node power for the row is the power model's (``estimate.energy``): each GPU's
board power at the run's hardware FLOP utilisation, plus ``NODE_OVERHEAD`` for the rest of
the node, times the GPUs in a node; no PUE (the meter sits inside the data centre). The
utilisation is the estimate's FLOPs per step over the *measured* step time, so a row tests
the power model, not the step-time model (``validate training`` tests that).
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpuarch.catalog.loader import Catalog
from gpuarch.errors import GpuarchError, check_choice, is_positive_number, suggestion
from gpuarch.estimate.energy import (
    NODE_OVERHEAD,
    gpu_power_w,
    seconds_per_token_at_peak,
    serving_utilisation,
)
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.precision import Precision, matmul_peak
from gpuarch.validation.measured import band_named, read_commented_csv
from gpuarch.validation.mlenergy import ServingRun, load_serving_runs
from gpuarch.validation.training import (
    POINT_KEYS,
    TrainingPoint,
    check_point_keys,
    estimate_point,
    load_training_points,
    sources_by_id,
)
from gpuarch.workloads.params import count_params
from gpuarch.workloads.presets import preset

__all__ = ["BATCH_BANDS", "METERS", "POWER_FILE", "ModelOverMeasuredPower", "PowerComparison",
           "PowerRun",
           "ServingPowerComparison", "compare_run", "compare_serving",
           "load_power_runs", "load_readings", "load_serving_power", "load_user_power_runs",
           "mean_power_w",
           "power_accuracy", "serving_groups", "serving_prompt_len", "serving_summary", "summary",
           "validate_power"]

POWER_FILE = Path(__file__).with_name("data") / "power.toml"

METERS = {"node-ac": "each node at the wall (AC)",
          "node-dc": "each node at the rack's DC power shelf"}
"""Where a row's meter reads, as MLPerf's power rules allow it."""

RUN_KEYS = frozenset({
    "id", "source", "where", "point", "step_time_s", "nodes", "meter",
    "readings", "window_ms", "averaged_over", "notes",
})
"""A run's own keys; any training point key (``training.POINT_KEYS``) may follow them and
replaces the named point's."""


@dataclass(frozen=True)
class PowerRun:
    """One metered run: its workload and layout (a training point's fields, the run's
    own over the named point's), its step time, and where its power figure comes from."""

    id: str
    source: str
    where: str
    training: TrainingPoint
    step_time_s: float
    nodes: int
    meter: str
    averaged_over: str
    readings: Path
    window_ms: tuple[int, int]

    def get(self, key: str, default: Any = None) -> Any:
        """A field of the run's workload and layout (its training point's, its own over)."""
        return self.training.get(key, default)


def _read(path: Path) -> tuple[dict[str, Any], dict[str, Mapping[str, Any]]]:
    """The file as read, and its sources by id (each cited by a run or the serving table)."""
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    citing = [*raw.get("run", []),
              *([{"id": "serving", **raw["serving"]}] if "serving" in raw else [])]
    return raw, sources_by_id({"source": raw.get("source", []), "point": citing}, path)


@cache
def load_power_runs(path: Path = POWER_FILE) -> tuple[PowerRun, ...]:
    """The metered runs, each with its training point resolved (an unknown key, source,
    point or meter is an error naming it; a run's own keys are checked as a user's are)."""
    raw, sources = _read(path)
    points = {p.id: p for p in load_training_points()}
    runs = []
    for entry in raw.get("run", []):
        check_point_keys(path, entry, RUN_KEYS | POINT_KEYS)
        src = sources.get(entry.get("source"))
        if src is None:
            raise GpuarchError(f"{path.name}: run {entry.get('id')!r}: unknown source "
                               f"{entry.get('source')!r}")
        fields = {k: v for k, v in entry.items() if k in POINT_KEYS and k not in RUN_KEYS}
        runs.append(_power_run(path, entry, src, fields, points))
    return tuple(runs)


def _power_run(path: Path, entry: Mapping[str, Any], src: Mapping[str, Any],
               fields: Mapping[str, Any], points: Mapping[str, TrainingPoint]) -> PowerRun:
    """A ``[[run]]`` table as a run: its own keys checked (``_check_run_values``), its
    workload and layout the named training point's with ``fields`` over them, or ``fields``
    alone where it names none."""
    rid = entry["id"]
    where = f"{path.name}: run {rid!r}"
    _check_run_values(where, entry)
    record = {**fields, "step_time_s": entry["step_time_s"]}
    if "point" in entry:
        base = points.get(entry["point"])
        if base is None:
            raise GpuarchError(f"{where}: unknown training point {entry['point']!r}: not a "
                               f"shipped training point{suggestion(entry['point'], points)}")
        # the point's source stays the record's: it says how its layout is read
        training = dataclasses.replace(base, id=rid, raw={**base.raw, **record})
    else:
        training = TrainingPoint(rid, src["id"], src["title"], src.get("url", ""),
                                 str(entry.get("where", "")), record)
    window = entry["window_ms"]
    return PowerRun(rid, src["id"], str(entry.get("where", "")), training,
                    float(entry["step_time_s"]), int(entry["nodes"]), entry["meter"],
                    str(entry.get("averaged_over", "the window")),
                    _beside(path, entry["readings"], f"run {rid!r}"),
                    (int(window[0]), int(window[1])))


def _beside(path: Path, name: str, what: str) -> Path:
    """The file ``name`` in the data file's folder (a missing one is an error naming it)."""
    found = path.with_name(str(name))
    try:
        there = found.is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte
        there = False
    if not there:
        raise GpuarchError(f"{path.name}: {what}: readings file {name!r} not found beside it")
    return found


READING_COLUMNS = ("node", "time_ms", "watts")
"""A readings file's columns: the node the meter reads, the reading's time (ms) and watts."""


_RUN_TYPES = {"step_time_s": "a step time in seconds > 0", "nodes": "a whole number >= 1",
              "meter": "text in quotes", "readings": "a file name in quotes",
              "window_ms": "[start, end] in whole ms", "averaged_over": "text in quotes",
              "point": "a shipped training point's id in quotes"}
"""A user's run's own keys (beside a training point's fields) and what each takes."""


def load_user_power_runs(path: Path) -> tuple[PowerRun, ...]:
    """The metered runs of a user's file (``validate power --data FILE``): ``[[run]]`` tables
    as the shipped file's, each giving its workload and layout as a training point's fields
    (checked as ``validate training --data`` checks them) or naming a shipped training point
    (``point``), its measured step time, the meter's readings file beside it, and the window
    to average them over; ``[[source]]`` tables optional (a run without one is cited as the
    file). Every key's name, type and value is checked, naming the run and the key."""
    from gpuarch.validation.user_data import (
        _check_fields,
        _check_required,
        _sources,
        cited_source,
        field_types,
        read_user_toml,
    )

    raw = read_user_toml(path)
    name = path.name
    for key in raw:
        if key not in ("run", "source"):
            raise GpuarchError(f"{name}: unknown key or table {key!r}"
                               f"{suggestion(key, ('run', 'source'))} (a file holds [[run]] "
                               "tables and, optionally, [[source]] tables)")
    entries = raw.get("run", [])
    if not isinstance(entries, list) or not entries or \
            not all(isinstance(e, dict) for e in entries):
        raise GpuarchError(f"{name}: give one [[run]] table per metered run")
    sources = _sources(name, raw.get("source", []))
    points = {p.id: p for p in load_training_points()}
    training_keys = frozenset(field_types("training")) - {"step_time_s"}
    runs: list[PowerRun] = []
    for n, entry in enumerate(entries, 1):
        rid = entry.get("id")
        if not isinstance(rid, str) or not rid:
            raise GpuarchError(f"{name}: run {n} has no id (give id = \"...\")")
        if any(r.id == rid for r in runs):
            raise GpuarchError(f"{name}: run id {rid!r} is used twice")
        where = f"{name}: run {rid!r}"
        for key in sorted(set(entry) - RUN_KEYS - training_keys):
            raise GpuarchError(f"{where}: unknown key {key!r}"
                               f"{suggestion(key, RUN_KEYS | training_keys)}")
        fields = {k: v for k, v in entry.items() if k in training_keys and k != "id"}
        _check_fields(where, fields, "training")
        if "point" not in entry:
            _check_required(where, fields, "training")
            if "preset" not in fields and "layers" not in fields:
                raise GpuarchError(f"{where}: give the model: preset = \"...\" or its "
                                   "shape fields, or point = a shipped training point's id")
        src = cited_source(path, where, entry.get("source"), sources)
        runs.append(_power_run(path, entry, src, fields, points))
    return tuple(runs)


def _check_run_values(where: str, entry: Mapping[str, Any]) -> None:
    """Raise GpuarchError at the first of a run's own keys that is missing or wrong
    (``_RUN_TYPES``)."""
    for key in ("step_time_s", "nodes", "meter", "readings", "window_ms"):
        if key not in entry:
            raise GpuarchError(f"{where}: give {key} ({_RUN_TYPES[key]}): it is required")
    for key, value in entry.items():
        if key not in _RUN_TYPES:
            continue
        window = key == "window_ms" and isinstance(value, list) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value) and \
            value[0] < value[1]
        good = {"step_time_s": is_positive_number(value),
                "nodes": isinstance(value, int) and not isinstance(value, bool) and value >= 1,
                "window_ms": window}.get(key, isinstance(value, str) and bool(value))
        if not good and key == "window_ms":
            raise GpuarchError(f"{where}: window_ms must be [start, end] in whole ms with "
                               f"start before end, not {value!r}")
        if not good:
            raise GpuarchError(f"{where}: {key} = {value!r}: expected {_RUN_TYPES[key]}")
    check_choice(f"{where}: meter", entry["meter"], METERS)


@cache
def load_readings(path: Path) -> Mapping[str, tuple[tuple[int, float], ...]]:
    """A readings file's (time in ms, watts) pairs by node, in the file's order (a missing
    column or a value that is not a time or a power is an error naming the file and row)."""
    try:
        rows = read_commented_csv(path)
    except UnicodeDecodeError as exc:
        raise GpuarchError(f"{path.name}: not a text file: {exc}") from None
    by_node: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for n, row in enumerate(rows, 1):
        try:
            node, time_ms, watts = (row[c] for c in READING_COLUMNS)
            reading = (int(time_ms), float(watts))
        except (KeyError, TypeError, ValueError):
            raise GpuarchError(
                f"{path.name}: row {n} ({dict(row)!r}): expected the columns "
                f"{', '.join(READING_COLUMNS)}, a time in whole ms and watts") from None
        if not (math.isfinite(reading[1]) and reading[1] >= 0):
            raise GpuarchError(f"{path.name}: row {n}: watts = {watts!r}: expected a power "
                               ">= 0")
        by_node[str(node)].append(reading)
    if not by_node:
        raise GpuarchError(f"{path.name}: no readings (columns {', '.join(READING_COLUMNS)})")
    return {node: tuple(rows) for node, rows in by_node.items()}


def mean_power_w(readings: Sequence[tuple[int, float]], window_ms: tuple[int, int]) -> float:
    """The mean of a meter's readings over ``window_ms`` (start, end; ms) as MLPerf's result
    summarizer takes it: each reading inside holds for the time since the one before it (the
    window's start for the first), summed over the time to the last reading inside."""
    start, end = window_ms
    energy, last = 0.0, start
    for t, watts in sorted(readings):
        if start < t <= end:
            energy += watts * (t - last)
            last = t
    if last <= start:
        raise GpuarchError(f"no meter reading in the window {start}-{end} ms")
    return energy / (last - start)


class ModelOverMeasuredPower:
    """A row with a measured power and the model's for the same thing (W); the dataclasses
    that use it declare the two fields."""

    measured_w: float
    model_w: float

    @property
    def error(self) -> float:
        """Signed relative error of the model's power."""
        return self.model_w / self.measured_w - 1.0


@dataclass(frozen=True)
class PowerComparison(ModelOverMeasuredPower):
    """One metered run beside the power model: a node's mean power, measured and model."""

    id: str
    source: str
    where: str
    model: str
    gpu: str
    gpus: int
    nodes: int
    precision: str
    step_time_s: float
    hfu: float
    gpu_power_w: float
    meter: str
    averaged_over: str
    measured_w: float
    model_w: float
    node_spread_w: tuple[float, float] | None


def compare_run(catalog: Catalog, run: PowerRun,
                efficiency: Efficiency = DEFAULT_EFFICIENCY,
                node_overhead: float = NODE_OVERHEAD) -> PowerComparison:
    """The model's node power at the run's measured pace, with ``node_overhead`` for the
    rest of the node, beside the metered one."""
    point = estimate_point(catalog, run.training, efficiency)
    est, product = point.estimate, point.product
    if not product.tdp_w:
        raise GpuarchError(f"run {run.id}: {product.key} has no board power in the catalog")
    if run.nodes * (point.config.gpus_per_node) != point.config.gpus:
        raise GpuarchError(f"run {run.id}: {run.nodes} nodes of {point.config.gpus_per_node} "
                           f"GPUs are not the layout's {point.config.gpus}")
    # the estimate's hardware FLOPs per step at the measured step time
    hfu = est.hfu * est.step_time_s / run.step_time_s
    per_gpu = float(gpu_power_w(product.tdp_w, hfu))
    model_w = per_gpu * (1 + node_overhead) * point.config.gpus_per_node
    nodes = [mean_power_w(r, run.window_ms) for r in load_readings(run.readings).values()]
    if len(nodes) != run.nodes:
        raise GpuarchError(f"run {run.id}: {run.readings.name} holds {len(nodes)} nodes' "
                           f"readings, not the run's {run.nodes}")
    measured = sum(nodes) / len(nodes)
    spread = (min(nodes), max(nodes)) if len(nodes) > 1 else None
    return PowerComparison(run.id, run.source, run.where, point.shape.name, product.key,
                           point.config.gpus, run.nodes, point.config.precision.value,
                           run.step_time_s, hfu, per_gpu, run.meter,
                           run.averaged_over, measured, model_w, spread)


def validate_power(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY,
                   runs: Iterable[PowerRun] | None = None,
                   node_overhead: float = NODE_OVERHEAD) -> list[PowerComparison]:
    """Every metered run beside the power model (one that cannot be compared is an error
    naming it)."""
    out = []
    for run in load_power_runs() if runs is None else runs:
        try:
            out.append(compare_run(catalog, run, efficiency, node_overhead))
        except GpuarchError as exc:
            message = str(exc)
            raise GpuarchError(message if message.startswith(f"run {run.id}")
                               else f"run {run.id}: {message}") from None
    return out


def summary(rows: Sequence[PowerComparison]) -> dict[str, Any]:
    """Mean absolute and signed errors over the rows, and the largest."""
    errors = [r.error for r in rows]
    return {"compared": len(rows),
            "mean_abs_error": sum(abs(e) for e in errors) / len(errors) if errors else None,
            "mean_error": sum(errors) / len(errors) if errors else None,
            "max_abs_error": max((abs(e) for e in errors), default=None)}


BATCH_BANDS = (("1-16", 0, 16.5, "1-16"), ("17-128", 16.5, 128.5, "17-128"),
               ("129+", 128.5, float("inf"), "129+"))
"""Batch bands (mean sequences in flight) the serving rows are summed up in."""


@cache
def load_serving_power(path: Path = POWER_FILE
                       ) -> tuple[Mapping[str, Any], tuple[ServingRun, ...]]:
    """The serving table's source and where, and its configurations (``serving.readings``, a
    CSV file beside the data file, read by ``validation.mlenergy``)."""
    raw, sources = _read(path)
    table = raw.get("serving")
    if table is None:
        return {}, ()
    src = sources.get(table.get("source"))
    if src is None:
        raise GpuarchError(f"{path.name}: serving: unknown source {table.get('source')!r}")
    rows = load_serving_runs(_beside(path, table.get("readings", ""), "serving"))
    return {**table, "source_title": src["title"], "source_url": src["url"]}, rows


@dataclass(frozen=True)
class ServingPowerComparison(ModelOverMeasuredPower):
    """A serving configuration's measured power per GPU beside the power model's at the
    utilisation its measured output and its prompts give."""

    row: ServingRun
    prompt_tokens_per_s: float
    utilisation: float
    measured_w: float
    model_w: float


def serving_prompt_len(table: Mapping[str, Any]) -> int:
    """The prompts' mean length in tokens the serving table's runs are taken at: the one the
    serving validation fitted on the same runs (``prompts``, the source of
    data/inference.toml whose points carry it; scripts/fit_mlenergy_prompt.py)."""
    from gpuarch.validation.inference import load_inference_points

    lengths = {p.get("input_len") for p in load_inference_points()
               if p.source == table.get("prompts")}
    if len(lengths) != 1:
        raise GpuarchError(f"power.toml: serving: prompts: {table.get('prompts')!r} names no "
                           "inference source whose runs share one prompt length")
    return int(lengths.pop())


def compare_serving(catalog: Catalog, rows: Iterable[ServingRun] | None = None
                    ) -> list[ServingPowerComparison]:
    """Each configuration's GPU power beside the power model's at the utilisation the
    serving energy model takes (``energy.serving_energy_kwh``): its tokens' 2 x
    active-parameter FLOPs at the weights' format's dense peak, over the GPUs; the tokens
    are its output and its prompts (a request per mean answer, each of the prompts' mean
    length, ``serving_prompt_len``)."""
    table, shipped = load_serving_power()
    prompt_len = serving_prompt_len(table)
    out = []
    for r in shipped if rows is None else rows:
        product = catalog.product(r.gpu)
        peak = matmul_peak(product, Precision(r.weights))
        if peak is None or not product.tdp_w:
            raise GpuarchError(f"{r.gpu}: no {r.weights} peak or board power in the catalog")
        shape = preset(r.preset).shape
        prompts = r.output_tokens_per_s / r.output_len * prompt_len
        busy = serving_utilisation(r.output_tokens_per_s + prompts, seconds_per_token_at_peak(
            count_params(shape).active(shape), peak.flops), r.gpus)
        out.append(ServingPowerComparison(r, prompts, busy, r.power_w / r.gpus,
                                          float(gpu_power_w(product.tdp_w, busy))))
    return out


def serving_groups(rows: Sequence[ServingPowerComparison]) -> list[dict[str, Any]]:
    """Per model, GPU, GPU count and weights: the batches swept, the measured and model
    power per GPU at the smallest and the largest batch, and the mean signed error."""
    groups: dict[tuple[str, str, int, str], list[ServingPowerComparison]] = defaultdict(list)
    for r in rows:
        groups[(r.row.model_id, r.row.gpu, r.row.gpus, r.row.weights)].append(r)
    out = []
    for (model, gpu, gpus, weights), members in groups.items():
        members = sorted(members, key=lambda m: m.row.batch)
        low, high = members[0], members[-1]
        out.append({"model_id": model, "gpu": gpu, "gpus": gpus, "weights": weights,
                    "configurations": len(members),
                    "batch": [low.row.batch, high.row.batch],
                    "measured_w": [low.measured_w, high.measured_w],
                    "model_w": [low.model_w, high.model_w],
                    "mean_error": sum(m.error for m in members) / len(members)})
    return out


def power_accuracy(catalog: Catalog) -> dict[str, Any]:
    """Where the power model stands on every shipped measurement: the training runs'
    ``summary`` and the serving configurations' ``serving_summary``."""
    return {"training": summary(validate_power(catalog)),
            "serving": serving_summary(compare_serving(catalog))}


def serving_summary(rows: Sequence[ServingPowerComparison]) -> dict[str, Any]:
    """Mean signed and absolute errors by GPU and batch band (``BATCH_BANDS``)."""
    cells: dict[str, dict[str, Any]] = {}
    for gpu in sorted({r.row.gpu for r in rows}):
        for band, *_ in BATCH_BANDS:
            chosen = [r for r in rows if r.row.gpu == gpu
                      and band_named(BATCH_BANDS, r.row.batch) == band]
            if chosen:
                cells.setdefault(gpu, {})[band] = {
                    "configurations": len(chosen),
                    "mean_error": sum(r.error for r in chosen) / len(chosen),
                    "mean_abs_error": sum(abs(r.error) for r in chosen) / len(chosen)}
    errors = [r.error for r in rows]
    return {"compared": len(rows),
            "mean_error": sum(errors) / len(errors) if errors else None,
            "mean_abs_error": sum(abs(e) for e in errors) / len(errors) if errors else None,
            "by_gpu_and_batch": cells}
