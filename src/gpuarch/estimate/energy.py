"""Power and energy: one model for the estimate and the advisor.

A GPU draws a share of its board power with its Tensor Cores all but idle
(``LOW_LOAD_SHARE``), rising linearly with its hardware FLOP utilisation to the full board
power at ``FULL_POWER_HFU`` and above. The two constants are fitted on measured GPU power
while serving (scripts/fit_power.py; ``gpuarch validate power`` sets the model beside every
measurement). The node around the GPUs (CPUs, memory, NICs, fans, switches) adds a share of
the GPU power, and the data centre's PUE multiplies the total.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuarch.errors import GpuarchError
from gpuarch.units import Unit

__all__ = ["DEFAULT_FACILITY", "FULL_POWER_HFU", "GPU_POWER_MODEL", "LOW_LOAD_SHARE",
           "NODE_OVERHEAD", "PUE", "Facility", "energy_kwh", "facility_power_w", "gpu_power_w",
           "seconds_per_token_at_peak", "serving_energy_kwh", "serving_utilisation"]

LOW_LOAD_SHARE = 0.6
"""A GPU's power as a share of its board power with its Tensor Cores all but idle: fitted,
with ``FULL_POWER_HFU``, on the GPU power ML.ENERGY measured (NVML) for vLLM serving on H100s
at 177 batch caps (validation/data/power.toml, [serving]; scripts/fit_power.py), each at the
utilisation of its output and its prompts (the prompts' mean length fitted on the same runs'
output rates: scripts/fit_mlenergy_prompt.py). A serving GPU streams its weights and KV cache
through HBM while its Tensor Cores are a few percent busy, and draws 60-70% of its board
power doing it. Mean |error| on the 177: 11.5% (24.6% for the assumed 0.5 and 0.6 first used,
counting outputs only). Out of sample: the 151 B200 configurations 13.4% (mean -6.0%), and
the three metered MLPerf Training runs' node power +12.8%/+12.9%/-13.3%. (Fitted on output
tokens alone, as before the prompts' length was known: 0.61 and 0.235.)"""

FULL_POWER_HFU = 0.365
"""The hardware FLOP utilisation from which a GPU draws its full board power: fitted with
``LOW_LOAD_SHARE`` (above). Large training steps run above it, so a training estimate's GPUs
draw their board power, as large training runs are reported to."""

GPU_POWER_MODEL = (f"board power x min(1, {LOW_LOAD_SHARE:g} + {1 - LOW_LOAD_SHARE:g} x HFU / "
                   f"{FULL_POWER_HFU:g}) per GPU")
"""The GPU power model in words, for the assumptions an answer lists."""

NODE_OVERHEAD = 0.35
"""Non-GPU node power as a fraction of GPU power (assumed; a DGX H100's 10.2 kW maximum
against 8 x 700 W of GPUs is a ratio of 0.8 at full load, of which part is headroom). Against
metered MLPerf Training nodes (``gpuarch validate power``) it reads a water-cooled 8 x B200
node 13% high and air-cooled 8 x H100 nodes 13% low: ``--node-overhead`` sets a site's own."""

PUE = 1.25
"""Power usage effectiveness of the data centre (assumed; large AI data centres report
1.1 to 1.4): ``--pue`` sets a site's own."""


@dataclass(frozen=True)
class Facility:
    """What surrounds the GPUs: the node's power beyond them, as a fraction of theirs, and
    the data centre's power usage effectiveness."""

    node_overhead: float = NODE_OVERHEAD
    pue: float = PUE

    def __post_init__(self) -> None:
        if not 0 <= self.node_overhead < 10:  # also refuses nan
            raise GpuarchError(f"--node-overhead: expected a fraction of the GPUs' power "
                               f"from 0 (e.g. 0.35), got {self.node_overhead!r}")
        if not 1 <= self.pue < 10:
            raise GpuarchError(f"--pue: expected a power usage effectiveness of 1 or more "
                               f"(e.g. 1.25), got {self.pue!r}")

    @property
    def factor(self) -> float:
        """Facility power over GPU power."""
        return (1 + self.node_overhead) * self.pue

    def describe(self) -> str:
        """The two in words, for the assumptions an answer lists."""
        return (f"plus {self.node_overhead:.0%} for the rest of the node, times a PUE of "
                f"{self.pue:g}")


DEFAULT_FACILITY = Facility()

Num = Any


def gpu_power_w(tdp_w: float, hfu: Num, low_load_share: float = LOW_LOAD_SHARE,
                full_power_hfu: float = FULL_POWER_HFU) -> Num:
    """Average power of one GPU at hardware FLOP utilisation ``hfu`` (the curve's two
    constants can be given, for a fit: scripts/fit_power.py)."""
    return tdp_w * np.minimum(1.0, low_load_share
                              + (1 - low_load_share) * np.asarray(hfu) / full_power_hfu)


def facility_power_w(tdp_w: float, gpus: Num, facility: Facility = DEFAULT_FACILITY) -> Num:
    """Most a job can draw from the facility: every GPU at its board power, plus the node
    overhead, times PUE (what a power cap is checked against)."""
    return gpus * tdp_w * facility.factor


def energy_kwh(tdp_w: float, hfu: Num, gpus: Num, seconds: Num,
               facility: Facility = DEFAULT_FACILITY) -> Num:
    """Energy of a job at the facility: its GPUs' power, plus node overhead, times PUE."""
    joules = gpu_power_w(tdp_w, hfu) * gpus * facility.factor * seconds
    return joules / Unit.KWH.factor  # arrays too (the advisor's whole search space)


def seconds_per_token_at_peak(active_params: float, peak_flops: float) -> float:
    """GPU-seconds one token's 2 x active-parameter FLOPs take at ``peak_flops``: what a
    serving pool's utilisation (``serving_energy_kwh``) is counted in."""
    return 2 * active_params / peak_flops


def serving_utilisation(tokens_per_s: float, seconds_per_token_at_peak: float,
                        gpus: int) -> float:
    """The hardware FLOP utilisation of ``gpus`` processing ``tokens_per_s`` tokens: their
    2 x active-parameter FLOPs at the format's peak (``seconds_per_token_at_peak``) over
    the GPUs, capped at 1."""
    return min(1.0, tokens_per_s * seconds_per_token_at_peak / gpus)


def serving_energy_kwh(tdp_w: float, gpus: int, tokens_per_s: float,
                       seconds_per_token_at_peak: float, seconds: float,
                       facility: Facility = DEFAULT_FACILITY) -> float:
    """Energy of ``gpus`` serving for ``seconds`` while they process ``tokens_per_s``
    tokens (prompts and outputs), at their ``serving_utilisation``."""
    busy = serving_utilisation(tokens_per_s, seconds_per_token_at_peak, gpus)
    return float(energy_kwh(tdp_w, busy, gpus, seconds, facility))
