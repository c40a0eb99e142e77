"""Pipeline schedules: 1F1B (interleaved or not), zero-bubble ZB-H1, DualPipe and DualPipeV;
which layouts each can run and the bubble each leaves a step."""

from __future__ import annotations

import numpy as np

from gpuarch.perf.collectives import Num
from gpuarch.perf.num import maximum

__all__ = [
    "DUALPIPE_SCHEDULES",
    "PP_SCHEDULES",
    "SCHEDULE_BUBBLES",
    "pipeline_bubble",
    "schedule_chunks",
    "schedule_runs",
]

SCHEDULE_BUBBLES = {
    "1f1b": "1F1B (interleaved over VPP chunks): a bubble of (PP-1)(F+B)/VPP, F and B a "
            "stage's forward and backward per micro-batch",
    "zb1p": "zero-bubble ZB-H1 (Qi et al., ICLR 2024): the weight gradients W deferred into "
            "the bubble, (PP-1)(F+B-2W), W each trained GEMM's forward time again; 1F1B's "
            "memory",
    "dualpipe": "DualPipe (DeepSeek-V3 report, Table 2): (PP/2-1)(F&B+B-3W), F&B taken as "
                "F+B (the pair overlaps communication, not compute); two copies of the "
                "parameters, their gradients and optimizer states; PP+1 micro-batches' "
                "activations",
    "dualpipev": "DualPipeV (DeepSeek's DualPipe README): DualPipe's bubble over 2 x PP "
                 "chunks of half a GPU's layers; one copy of the parameters; PP+1 chunks' "
                 "activations",
}
"""The pipeline schedules (``TrainingConfig.pp_schedule``) and the bubble each leaves, as an
estimate's ``assumptions.pp_schedule`` states it (F, B: a stage's forward and whole
backward per micro-batch, W its weight-gradient GEMMs; ``pipeline_bubble`` computes them)."""


PP_SCHEDULES = tuple(SCHEDULE_BUBBLES)
"""The schedules' names, 1F1B (the default) first."""


def schedule_chunks(schedule: str) -> int:
    """Model chunks per GPU a non-1F1B schedule runs (its --vpp): DualPipeV's V shape puts
    two on each GPU, ZB-1P and DualPipe one."""
    return 2 if schedule == "dualpipev" else 1


DUALPIPE_SCHEDULES = ("dualpipe", "dualpipev")
"""DeepSeek's bidirectional schedules (DualPipe and its V-shaped half): they hold their own
count of micro-batches in flight, and pair chunks so that their sends hide behind compute."""


def schedule_runs(schedule: str, pp: np.ndarray, vpp: np.ndarray, micro_batches: np.ndarray
                  ) -> np.ndarray:
    """Which of the advisor's layouts (arrays) can run a pipeline schedule: the conditions
    ``TrainingConfig._check_schedule`` refuses with a message, here as a mask (a test holds
    the two together); a layout without a pipeline runs without one, whatever the
    schedule."""
    if schedule == "1f1b":
        return np.ones_like(pp, dtype=bool)
    runs = (vpp == schedule_chunks(schedule))
    if schedule != "zb1p":
        runs &= micro_batches >= 2 * pp
    if schedule == "dualpipe":
        runs &= (pp % 2 == 0) & (micro_batches % 2 == 0)
    plain = np.logical_and(pp == 1, vpp == 1)
    return np.asarray(np.logical_or(plain, np.logical_and(pp > 1, runs)))


def pipeline_bubble(schedule: str, pp: Num, vpp: Num, stage_s: Num, forward_s: Num,
                    wgrad_s: Num) -> Num:
    """Seconds a step's pipeline leaves each GPU idle under ``schedule`` (PP_SCHEDULES),
    for a stage's time per micro-batch ``stage_s`` (forward, backward, recomputation and
    their exposed communication), its forward part and its weight-gradient GEMMs (W). The
    full backward B is the rest of the stage's time."""
    if schedule == "1f1b":
        return (pp - 1) / vpp * stage_s
    if schedule == "zb1p":
        return (pp - 1) * maximum(0.0, stage_s - 2 * wgrad_s)
    backward_s = stage_s - forward_s
    pair = maximum(0.0, stage_s + backward_s - 3 * wgrad_s)
    if schedule == "dualpipe":
        return maximum(0.0, pp / 2 - 1) * pair  # nothing without a pipeline (PP 1)
    # dualpipev: 2 x PP stages of half a GPU's layers each
    return (pp - 1) * pair / 2
