"""A training run's log read as a measured run: the step time (or throughput) it printed.

Three families of log line are read, each as its framework prints it every logged step:

- Megatron-LM, Megatron Bridge and Megatron-DeepSpeed: ``iteration N/ M | ... | elapsed
  time per iteration (ms): T | ... | global batch size: B | ...`` (T is the mean over the
  logging interval; a newer ``T/avg`` form is read by its first figure);
- NeMo 2 (PyTorch Lightning): ``Training epoch E, iteration N/M | ... | global_batch_size: B
  | ... | train_step_timing in s: T | ...``;
- torchtitan: ``step: N  loss: ...  tps: X  ...``, X the tokens a second per GPU (``wps``
  in its 2024 releases).

The first logged steps carry compilation, allocator growth and data-loader warm-up, so the
first tenth of the records (at least one) is left out and the median of the rest stands for
the run; records at a global batch other than the run's (a batch-size ramp) are left out
too. ``estimate train ... --as-point --measured LOG`` writes the result as a point of a
measured-runs file (docs/your-measurements.md), with how many steps it rests on and their
spread.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from gpuarch.errors import GpuarchError
from gpuarch.files import read_input_text
from gpuarch.units import Unit, to_si

__all__ = ["MIN_STEPS", "TrainingLog", "read_training_log"]

MIN_STEPS = 3
"""Logged steps a run must keep after the warm-up to stand for it."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

_FORMATS = (
    # (framework, the step's number, the figure, the unit it is printed in, the batch)
    ("Megatron-LM log", re.compile(r"\biteration\s+(\d+)\s*/\s*\d+\s*\|"),
     re.compile(r"elapsed time per iteration \(ms\):\s*([0-9.]+)"), Unit.MS,
     re.compile(r"global batch size:\s*(\d+)")),
    ("NeMo log", re.compile(r"Training epoch \d+, iteration (\d+)/\d+"),
     re.compile(r"train_step_timing in s:\s*([0-9.]+(?:[eE][-+]?\d+)?)"), Unit.NONE,
     re.compile(r"global_batch_size:\s*(\d+)")),
    ("torchtitan log", re.compile(r"\bstep:\s*(\d+)\s"),
     re.compile(r"\b[tw]ps:\s*([0-9][0-9,]*)"), Unit.NONE, None),
)


@dataclass(frozen=True)
class TrainingLog:
    """What a log says of its run: the median after the warm-up and how it was taken."""

    framework: str
    figure: str  # the point's field: step_time_s, or tokens_per_s_per_gpu (torchtitan)
    value: float
    steps: tuple[int, int]  # the first and last step kept
    kept: int  # logged records the median is over
    skipped: int  # records left out as warm-up
    low: float  # the smallest and largest kept
    high: float

    def summary(self) -> str:
        """The figure's provenance in a line (the point's comment)."""
        unit = "s" if self.figure == "step_time_s" else "tokens/s per GPU"
        return (f"{self.framework}: median of {self.kept} logged steps ({self.steps[0]} to "
                f"{self.steps[1]}) after {self.skipped} warm-up record(s), {self.value:g} "
                f"{unit} (from {self.low:g} to {self.high:g})")


def _records(path: Path) -> tuple[str, list[tuple[int, float, int | None]]]:
    """The log's framework and its (step, figure, global batch) records, the first one
    printed for each step (a multi-rank log repeats them)."""
    # (a log with a stray byte is still read: only its step lines matter)
    text = read_input_text(path, "--measured", errors="replace")
    lines = [_ANSI.sub("", line) for line in text.splitlines()]
    for framework, step_re, figure_re, unit, batch_re in _FORMATS:
        seen: dict[int, tuple[int, float, int | None]] = {}
        for line in lines:
            if "validat" in line:  # a validation pass's line, not a training step's
                continue
            step, figure = step_re.search(line), figure_re.search(line)
            if not (step and figure):
                continue
            number = int(step.group(1))
            batch = batch_re.search(line) if batch_re else None
            try:
                value = to_si(float(figure.group(1).replace(",", "")), unit)
            except ValueError:
                continue
            if number not in seen and math.isfinite(value) and value > 0:
                seen[number] = (number, value, int(batch.group(1)) if batch else None)
        if seen:
            return framework, [seen[n] for n in sorted(seen)]
    raise GpuarchError(f"--measured: {path.name}: no step lines of Megatron-LM ('elapsed "
                       "time per iteration (ms)'), NeMo ('train_step_timing in s') or "
                       "torchtitan ('tps:')")


def read_training_log(path: Path, global_batch: int) -> TrainingLog:
    """The run's figure from its log: the median of the logged steps at ``global_batch``
    after the first tenth of them (at least one). Too few steps left, or a log whose every
    step ran another global batch, is an error naming the file."""
    framework, records = _records(path)
    batches = {b for _, _, b in records if b is not None}
    at_batch = [r for r in records if r[2] in (None, global_batch)]
    if not at_batch:
        raise GpuarchError(f"--measured: {path.name}: every logged step ran a global batch "
                           f"of {', '.join(map(str, sorted(batches)))}, not --global-batch "
                           f"{global_batch}")
    skipped = max(1, len(at_batch) // 10)
    kept = at_batch[skipped:]
    if len(kept) < MIN_STEPS:
        raise GpuarchError(f"--measured: {path.name}: {len(at_batch)} logged step(s) at "
                           f"global batch {global_batch}; after the first {skipped} (warm-up) "
                           f"at least {MIN_STEPS} are needed to stand for the run")
    values = [v for _, v, _ in kept]
    figure = "tokens_per_s_per_gpu" if framework == "torchtitan log" else "step_time_s"
    return TrainingLog(framework, figure, statistics.median(values),
                       (kept[0][0], kept[-1][0]), len(kept), skipped, min(values),
                       max(values))
