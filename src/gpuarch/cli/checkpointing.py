"""The checkpointing flags of ``estimate train`` and ``advise train``: how fast the job
writes a checkpoint and what an interruption costs (estimate.reliability.CheckpointPlan)."""

from __future__ import annotations

import argparse
from typing import Any

from gpuarch.cli.options import non_negative_number, positive_number
from gpuarch.errors import GpuarchError


def add_checkpoint_flags(p: argparse.ArgumentParser) -> None:
    """--checkpoint-write-gb-s and the flags that need it."""
    p.add_argument("--checkpoint-write-gb-s", type=positive_number("--checkpoint-write-gb-s"),
                   metavar="GB_S",
                   help="how fast the whole job writes a checkpoint (GB/s); adds the run's "
                        "time with checkpoints, the interruptions expected at the Llama 3 "
                        "run's rate and the restarts, and its goodput")
    p.add_argument("--checkpoint-every-min", type=positive_number("--checkpoint-every-min"),
                   metavar="MIN",
                   help="minutes of training between checkpoints (default: Young's optimum)")
    p.add_argument("--restart-min", type=non_negative_number("--restart-min"), metavar="MIN",
                   help="minutes from an interruption until the job runs again, besides "
                        "reading the checkpoint back (default 0)")
    p.add_argument("--checkpoint-async", action="store_true",
                   help="saves stop training only to copy the state to host memory (async "
                        "save), the write running behind")


def checkpoint_plan(args: argparse.Namespace) -> Any:
    """The run's ``CheckpointPlan`` from the flags (None without --checkpoint-write-gb-s;
    the others alone are a usage error naming it)."""
    from gpuarch.estimate.reliability import CheckpointPlan
    from gpuarch.units import Unit, to_si

    if args.checkpoint_write_gb_s is None:
        for flag, value in (("--checkpoint-every-min", args.checkpoint_every_min),
                            ("--restart-min", args.restart_min),
                            ("--checkpoint-async", args.checkpoint_async or None)):
            if value is not None:
                raise GpuarchError(f"{flag}: needs --checkpoint-write-gb-s (how fast the job "
                                   "writes a checkpoint)")
        return None
    return CheckpointPlan(
        write_bytes_s=to_si(args.checkpoint_write_gb_s, Unit.GB_S),
        interval_s=None if args.checkpoint_every_min is None
        else to_si(args.checkpoint_every_min, Unit.MINUTE),
        restart_s=to_si(args.restart_min or 0.0, Unit.MINUTE),
        asynchronous=args.checkpoint_async)
