"""The checks every reader of a benchmark's saved result shares (validation/bench_results.py
and the AIPerf, trtllm-bench, GuideLLM and server-settings readers beside it): a figure, a
count, and what a run's requests in flight say about how it was sent. Each error names the
file (``where``) and the key's path in it."""

from __future__ import annotations

from typing import Any

from gpuarch.errors import GpuarchError, is_positive_number

__all__ = ["held_in_flight", "saved_count", "saved_figure"]


def saved_figure(where: str, path: str, value: Any) -> float:
    """A saved figure: a finite number above zero."""
    if not is_positive_number(value):
        raise GpuarchError(f"--measured: {where}: {path} = {value!r}: expected a number above "
                           "zero")
    return float(value)


def saved_count(where: str, path: str, value: Any, low: int = 1) -> int:
    """A saved count: a whole number of at least ``low`` (bools refused)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise GpuarchError(f"--measured: {where}: {path} = {value!r}: expected a whole number "
                           f">= {low}")
    return value


def held_in_flight(concurrency: int | None, completed: int) -> int | None:
    """The requests a run held in flight, or None where it held every one it sent at once
    (an offline run): a concurrency at least the run's requests is all of them."""
    return None if concurrency is None or concurrency >= completed else concurrency
