"""How often a long training run is interrupted: one published rate, for scale.

Meta's Llama 3 report counts 419 unexpected interruptions (78% of them attributed to
confirmed or suspected hardware) in a 54-day snapshot of pre-training on 16,384 H100 GPUs,
beside 47 planned ones, and an effective training time above 90% (Dubey et al. 2024, "The
Llama 3 Herd of Models", section 3.3.4 and Table 5). A training estimate with ``--tokens``
states how many unexpected interruptions a run of its size and length would see at that
rate. Given how fast the job writes a checkpoint (``CheckpointPlan``), it also prices
what those interruptions and the checkpoints against them cost: the saves, the work lost
since the last one and the restarts (``goodput``), at the checkpoint interval Young's
first-order optimum gives or at one the user sets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from gpuarch.errors import GpuarchError
from gpuarch.units import Unit, from_si, to_si

__all__ = ["INTERRUPTIONS_PER_GPU_DAY", "RATE_SOURCE", "CheckpointPlan", "Goodput",
           "WallTime", "expected_interruptions", "expected_wall_time", "goodput"]

_UNEXPECTED = 419
_GPUS = 16_384
_DAYS = 54

INTERRUPTIONS_PER_GPU_DAY = _UNEXPECTED / (_GPUS * _DAYS)
"""Unexpected interruptions per GPU and day of the Llama 3 pre-training run (4.7e-4)."""

RATE_SOURCE = (f"{_UNEXPECTED} unexpected interruptions in {_DAYS} days on {_GPUS:,} H100 "
               "GPUs (Llama 3 report, section 3.3.4)")


def expected_interruptions(gpus: int, days: float,
                           rate_per_gpu_day: float = INTERRUPTIONS_PER_GPU_DAY) -> float:
    """Unexpected interruptions a synchronous job of ``gpus`` GPUs running ``days`` days
    sees at ``rate_per_gpu_day`` (any GPU's failure stops the job)."""
    return rate_per_gpu_day * gpus * days


@dataclass(frozen=True)
class CheckpointPlan:
    """How a training job checkpoints: the rate its storage takes a checkpoint at (bytes/s
    for the whole job), the interval between checkpoints (None: Young's optimum), the time
    from an interruption until the job runs again besides reading the checkpoint back
    (rescheduling, start-up), and whether saves are asynchronous (training stops only to
    copy the state to host memory, the write to storage running behind it, as Megatron-Core's
    async checkpoint save and PyTorch DCP's async_save do)."""

    write_bytes_s: float
    interval_s: float | None = None
    restart_s: float = 0.0
    asynchronous: bool = False

    def validate(self) -> None:
        """Refuse values no run can have, naming the flag."""
        for flag, value, least in (("--checkpoint-write-gb-s", self.write_bytes_s, 0.0),
                                   ("--checkpoint-every-min", self.interval_s, 0.0),
                                   ("--restart-min", self.restart_s, None)):
            if value is None:
                continue
            bad = not isinstance(value, int | float) or isinstance(value, bool) \
                or not math.isfinite(value) or value < 0 or (least is not None and value <= least)
            if bad:
                bound = "> 0" if least is not None else ">= 0"
                raise GpuarchError(f"{flag}: expected a number {bound}, got {value!r}")


@dataclass(frozen=True)
class Goodput:
    """What checkpointing against interruptions costs a run (seconds; first order)."""

    checkpoint_bytes: float
    save_s: float  # training stopped per checkpoint
    write_s: float  # the checkpoint's write to storage (= save_s unless asynchronous)
    load_s: float  # reading it back after an interruption
    restart_s: float  # an interruption's time before the load
    interval_s: float  # training between checkpoints
    mean_time_between_interruptions_s: float
    wall_s: float  # the run's expected time with saves, lost work and restarts
    goodput: float  # failure-free time over wall_s


def goodput(plan: CheckpointPlan, *, gpus: int, time_s: float, step_s: float,
            checkpoint_bytes: float, host_copy_s: float | None = None,
            rate_per_gpu_day: float = INTERRUPTIONS_PER_GPU_DAY) -> Goodput:
    """The expected time of a run that trains for ``time_s`` without interruptions, on
    ``gpus`` GPUs that are interrupted at ``rate_per_gpu_day``, checkpointing
    ``checkpoint_bytes`` at ``plan``.

    A synchronous save stops training for the write (``checkpoint_bytes`` over the job's
    write rate); an asynchronous one for the copy to host memory (``host_copy_s``), and the
    interval is then at least the write, which must finish before the next save starts.
    Reading the checkpoint back after an interruption takes what writing it does. The
    interval between checkpoints is ``plan.interval_s``, or else Young's first-order optimum
    sqrt(2 x save x M), M the mean time between interruptions (J. W. Young, "A first order
    approximation to the optimum checkpoint interval", Comm. ACM 17(9), 1974), in whole
    steps. Each interruption loses on average half of an interval and its save, then the
    restart and the load; with failures at rate 1/M during the whole run (J. T. Daly, "A
    higher order estimate of the optimum checkpoint interval for restart dumps", FGCS
    22(3), 2006, the first-order model):

        wall = time x (1 + save / interval) / (1 - ((interval + save) / 2 + restart + load) / M)

    A run whose interruptions come faster than it can recover never finishes: an error
    says so."""
    plan.validate()
    write = checkpoint_bytes / plan.write_bytes_s
    save = write
    if plan.asynchronous:
        if host_copy_s is None:
            raise GpuarchError("--checkpoint-async: the GPU's link to its host is not "
                               "catalogued, so the copy that stops training cannot be timed")
        save = host_copy_s
    w = expected_wall_time(plan, gpus, time_s, step_s, save, write, rate_per_gpu_day)
    interval, mtbi, wall = float(w.interval_s), float(w.mtbi_s), float(w.wall_s)
    if not math.isfinite(wall):
        raise GpuarchError(
            f"checkpointing: an interruption every {from_si(mtbi, Unit.HOUR):.3g} h on "
            f"{gpus:,} GPUs, each costing {from_si(float(w.lost_s), Unit.HOUR):.3g} h (half "
            "an interval, the restart and the load): the run never finishes; write "
            "checkpoints faster or more often")
    return Goodput(checkpoint_bytes=checkpoint_bytes, save_s=save, write_s=write,
                   load_s=write, restart_s=plan.restart_s, interval_s=interval,
                   mean_time_between_interruptions_s=mtbi, wall_s=wall,
                   goodput=time_s / wall)


class WallTime(NamedTuple):
    """``expected_wall_time``'s result (numbers or arrays of them, seconds)."""

    interval_s: Any  # training between checkpoints, in whole steps
    mtbi_s: Any  # mean time between interruptions
    lost_s: Any  # what one interruption costs: half an interval and a save, restart, load
    wall_s: Any  # the run's expected time; infinite where lost_s reaches mtbi_s


def expected_wall_time(plan: CheckpointPlan, gpus: Any, time_s: Any, step_s: Any,
                       save_s: Any, write_s: Any,
                       rate_per_gpu_day: float = INTERRUPTIONS_PER_GPU_DAY) -> WallTime:
    """``goodput``'s arithmetic on numbers or arrays of them (the advisor prices every
    option at once)."""
    mtbi = to_si(1.0, Unit.DAY) / rate_per_gpu_day / np.asarray(gpus, dtype=float)
    step = np.asarray(step_s, dtype=float)
    interval = (np.full_like(mtbi, plan.interval_s) if plan.interval_s is not None
                else np.sqrt(2.0 * save_s * mtbi))
    interval = np.maximum(np.maximum(interval, write_s if plan.asynchronous else 0.0), step)
    interval = np.where(step > 0, np.ceil(interval / np.where(step > 0, step, 1.0)) * step,
                        interval)
    lost = (interval + save_s) / 2.0 + plan.restart_s + write_s
    share = lost / mtbi
    with np.errstate(divide="ignore"):
        wall = np.where(share < 1.0, np.asarray(time_s, dtype=float) * (1.0 + save_s / interval)
                        / np.maximum(1.0 - share, 1e-300), np.inf)
    return WallTime(interval, mtbi, lost, wall)
