"""Power and energy: one model for the estimate and the advisor.

A GPU draws its board power scaled by how busy its Tensor Cores are: half the board power at
idle-ish load rising linearly to the full board power at 60% hardware FLOP utilisation and
above (an assumption: measured large-training H100 nodes run near their power limit at
40-50% MFU). The node around the GPUs (CPUs, memory, NICs, fans, switches) adds a share of
the GPU power, and the data centre's PUE multiplies the total.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["FULL_POWER_HFU", "GPU_POWER_MODEL", "LOW_LOAD_SHARE", "NODE_OVERHEAD", "PUE",
           "energy_kwh", "facility_power_w", "gpu_power_w", "seconds_per_token_at_peak",
           "serving_energy_kwh"]

LOW_LOAD_SHARE = 0.5
"""A GPU's power as a share of its board power with its Tensor Cores all but idle (assumed)."""

FULL_POWER_HFU = 0.6
"""The hardware FLOP utilisation from which a GPU draws its full board power (assumed)."""

GPU_POWER_MODEL = (f"board power x min(1, {LOW_LOAD_SHARE:g} + {1 - LOW_LOAD_SHARE:g} x HFU / "
                   f"{FULL_POWER_HFU:g}) per GPU")
"""The GPU power model in words, for the assumptions an answer lists."""

NODE_OVERHEAD = 0.35
"""Non-GPU node power as a fraction of GPU power (assumed; a DGX H100's 10.2 kW maximum
against 8 x 700 W of GPUs is a ratio of 0.8 at full load, of which part is headroom)."""

PUE = 1.25
"""Power usage effectiveness of the data centre (assumed; large AI data centres report
1.1 to 1.4)."""

Num = Any


def gpu_power_w(tdp_w: float, hfu: Num) -> Num:
    """Average power of one GPU at hardware FLOP utilisation ``hfu``."""
    return tdp_w * np.minimum(1.0, LOW_LOAD_SHARE
                              + (1 - LOW_LOAD_SHARE) * np.asarray(hfu) / FULL_POWER_HFU)


def facility_power_w(tdp_w: float, gpus: Num) -> Num:
    """Most a job can draw from the facility: every GPU at its board power, plus the node
    overhead, times PUE (what a power cap is checked against)."""
    return gpus * tdp_w * (1 + NODE_OVERHEAD) * PUE


def energy_kwh(tdp_w: float, hfu: Num, gpus: Num, seconds: Num, *,
               facility: bool = True) -> Num:
    """Energy of a job: GPUs, plus node overhead and PUE when ``facility``."""
    power = gpu_power_w(tdp_w, hfu) * gpus
    if facility:
        power = power * (1 + NODE_OVERHEAD) * PUE
    return power * seconds / 3.6e6


def seconds_per_token_at_peak(active_params: float, peak_flops: float) -> float:
    """GPU-seconds one token's 2 x active-parameter FLOPs take at ``peak_flops``: what a
    serving pool's utilisation (``serving_energy_kwh``) is counted in."""
    return 2 * active_params / peak_flops


def serving_energy_kwh(tdp_w: float, gpus: int, tokens_per_s: float,
                       seconds_per_token_at_peak: float, seconds: float) -> float:
    """Energy of ``gpus`` serving for ``seconds`` while they process ``tokens_per_s``
    tokens (prompts and outputs): their utilisation is the tokens' 2 x active-parameter
    FLOPs at the format's peak (``seconds_per_token_at_peak``) over the GPUs, capped at 1."""
    busy = min(1.0, tokens_per_s * seconds_per_token_at_peak / gpus)
    return float(energy_kwh(tdp_w, busy, gpus, seconds))
