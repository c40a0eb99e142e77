"""The one place where human units become SI and back.

Data files and flags carry human units in their key names (``memory_bandwidth_gb_s``,
``boost_clock_mhz``); everything inside gpuarch is SI (bytes, bytes/s, FLOP/s, Hz, W, s).
GB and TB are decimal (1e9, 1e12 bytes); GiB and MiB are binary (2**30, 2**20 bytes).
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["Unit", "from_si", "from_si_array", "optional_to_si", "to_si"]


class Unit(Enum):
    """A human unit and its factor to SI. The value is (label, factor)."""

    NONE = ("", 1.0)
    MHZ = ("MHz", 1e6)
    GB_S = ("GB/s", 1e9)  # decimal gigabytes per second
    GBIT_S = ("Gbit/s", 1e9 / 8)  # gigabits per second, to bytes per second
    GBPS_PIN = ("Gbit/s per pin", 1e9)  # per-pin data rate, bits per second
    GIB = ("GiB", float(2**30))
    MIB = ("MiB", float(2**20))
    KIB = ("KiB", 1024.0)
    TFLOPS = ("TFLOPS", 1e12)  # also TOPS for integer peaks
    GFLOPS = ("GFLOPS", 1e9)
    BILLION = ("billion", 1e9)  # counts: parameters
    GIB_PER_TFLOPS = ("GiB per TFLOPS", 2**30 / 1e12)
    GB_S_PER_TFLOPS = ("GB/s per TFLOPS", 1e9 / 1e12)
    TB_S = ("TB/s", 1e12)
    TERA_PER_S = ("e12", 1e12)  # a count per second in units of 10^12 (weights a kernel converts)
    WATT = ("W", 1.0)
    KW = ("kW", 1e3)
    KWH = ("kWh", 3.6e6)  # energy, to joules
    S = ("s", 1.0)
    MS = ("ms", 1e-3)
    US = ("us", 1e-6)
    NS = ("ns", 1e-9)
    MB = ("MB", 1e6)  # decimal megabytes
    GB = ("GB", 1e9)  # decimal gigabytes
    MINUTE = ("min", 60.0)
    HOUR = ("h", 3600.0)
    DAY = ("days", 86400.0)
    USD = ("USD", 1.0)

    @property
    def label(self) -> str:
        return self.value[0]

    @property
    def factor(self) -> float:
        return self.value[1]


def to_si(value: float, unit: Unit) -> float:
    """Convert ``value`` given in ``unit`` to SI."""
    return float(value) * unit.factor


def optional_to_si(value: float | None, unit: Unit) -> float | None:
    """``to_si`` for a value that may be absent (an optional flag): None stays None."""
    return None if value is None else to_si(value, unit)


def from_si(value: float, unit: Unit) -> float:
    """Convert an SI ``value`` back to ``unit`` (for display and JSON)."""
    return float(value) / unit.factor


def from_si_array(values: NDArray[np.float64], unit: Unit) -> NDArray[np.float64]:
    """``from_si`` over an array at once (the advisor's whole search space)."""
    return values / unit.factor
