"""How often a long training run is interrupted: one published rate, for scale.

Meta's Llama 3 report counts 419 unexpected interruptions (78% of them attributed to
confirmed or suspected hardware) in a 54-day snapshot of pre-training on 16,384 H100 GPUs,
beside 47 planned ones, and an effective training time above 90% (Dubey et al. 2024, "The
Llama 3 Herd of Models", section 3.3.4 and Table 5). A training estimate with ``--tokens``
states how many unexpected interruptions a run of its size and length would see at that
rate; its time does not include the restarts, whose cost depends on checkpointing and
recovery the model does not know.
"""

from __future__ import annotations

__all__ = ["INTERRUPTIONS_PER_GPU_DAY", "RATE_SOURCE", "expected_interruptions"]

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
