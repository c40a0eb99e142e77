"""Read the rate of Mamba-2's backward kernels on Ampere, Hopper and Blackwell from a measured
training run of a pure Mamba-2 model on each.

state-spaces/mamba issue 904 (2026-04-06, mamba_ssm's Triton SSD kernels) trains a Mamba-2
model of 48 layers of width 2,048, batch 4 x 4,096 tokens in BF16 on one GPU at 102.5 TFLOP/s
on A100, 239.2 on H200 and 360.4 on GB200. The issue does not print its FLOP count; its
Mamba-3 run's kernel table (the backward kernel's 22,746 ms over ten iterations, 90.76% of the
GPU's time, at 56.0 TFLOP/s) gives 1.40e14 FLOP a step, 6 x 1.43B parameters x 16,384
tokens: six FLOPs a parameter and token. Taken the same for Mamba-2, whose model has
1,343,740,928 parameters by ``gpuarch.workloads.count_params`` (state-spaces' mamba2-1.3b, the
same shape), each figure is 6 x those parameters x tokens/s.

The forward kernels stay at the roofline's rate (the scan's products at ``mamba_scan``, the
measured H200 forward scan's rate, and ``mamba_blackwell`` on Blackwell); for each GPU the
script finds by bisection the factor on the backward kernels' rate
(``Efficiency.mamba_backward_ampere``, ``_hopper``, ``_blackwell``) at which the model's
tokens/s is the measured one, and prints it. No validation row enters.

    python scripts/mamba_backward.py
"""

from __future__ import annotations

import dataclasses

from gpuarch.catalog import load_catalog
from gpuarch.estimate.training import estimate_training
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.precision import Precision
from gpuarch.workloads import count_params
from gpuarch.workloads.presets import preset
from gpuarch.workloads.shape import TransformerShape

ISSUE_904_TFLOPS = {"a100-sxm4-80gb": ("ampere", 102.5), "h200-sxm-141gb": ("hopper", 239.2),
                    "gb200": ("blackwell", 360.4)}
"""Each GPU of the issue's Mamba-2 runs: the factor it sets and its measured TFLOP/s."""

ISSUE_904_RUN = TrainingConfig(gpus=1, seq_len=4096, global_batch=4, micro_batch=4,
                               precision=Precision.BF16)
"""The issue's run: batch 4 x 4,096 tokens in BF16 on one GPU, one micro-batch a step."""

FLOPS_PER_PARAMETER_TOKEN = 6
"""The issue's count (read from its Mamba-3 kernel table, module docstring)."""


def mamba2_1p4b() -> TransformerShape:
    """The issue's model: 48 Mamba-2 blocks of width 2,048 (expand 2: 64 heads of 64, state
    128, one group), GPT-NeoX's vocabulary padded to 50,280, tied embeddings; no attention,
    no MLP."""
    base = preset("nemotron-h-8b").shape
    assert base.mamba is not None
    mamba = dataclasses.replace(base.mamba, heads=64, head_dim=64, state=128, groups=1)
    return dataclasses.replace(base, name="mamba2-1.4b", layers=48, hidden=2048, heads=64,
                               kv_heads=64, head_dim=64, vocab=50280, ffn_hidden=0,
                               hybrid_pattern="M" * 48, mamba=mamba, tied_embeddings=True)


def issue_904_tokens_per_s(gpu: str, shape: TransformerShape | None = None,
                           eff: Efficiency = DEFAULT_EFFICIENCY) -> tuple[float, float]:
    """(model, measured) tokens/s of the issue's run on ``gpu``."""
    shape = shape or mamba2_1p4b()
    catalog = load_catalog()
    model = estimate_training(catalog, shape, catalog.product(gpu), ISSUE_904_RUN,
                              efficiency=eff).tokens_per_s
    measured = ISSUE_904_TFLOPS[gpu][1] * 1e12 / (FLOPS_PER_PARAMETER_TOKEN
                                                  * count_params(shape).total)
    return model, measured


def solve() -> dict[str, float]:
    """The backward factor of each architecture at which the model gives the issue's figure
    (three decimals)."""
    shape = mamba2_1p4b()
    out: dict[str, float] = {}
    for gpu, (arch, _) in ISSUE_904_TFLOPS.items():
        lo, hi = 0.05, 2.0
        for _ in range(40):
            mid = (lo + hi) / 2
            eff = dataclasses.replace(DEFAULT_EFFICIENCY, **{f"mamba_backward_{arch}": mid})
            model, measured = issue_904_tokens_per_s(gpu, shape, eff)
            lo, hi = (lo, mid) if model > measured else (mid, hi)
        out[arch] = round((lo + hi) / 2, 3)
    return out


def main() -> None:
    values = solve()
    eff = dataclasses.replace(DEFAULT_EFFICIENCY, **{f"mamba_backward_{arch}": value
                                                     for arch, value in values.items()})
    shape = mamba2_1p4b()
    print(f"issue 904's Mamba-2 model: {count_params(shape).total:,} parameters, "
          f"{FLOPS_PER_PARAMETER_TOKEN} FLOP a parameter and token")
    for gpu, (arch, tflops) in ISSUE_904_TFLOPS.items():
        before, measured = issue_904_tokens_per_s(gpu, shape, dataclasses.replace(
            DEFAULT_EFFICIENCY, **{f"mamba_backward_{arch}": 1.0}))
        after, _ = issue_904_tokens_per_s(gpu, shape, eff)
        print(f"{gpu:16s} {tflops:6.1f} TFLOP/s = {measured:8,.0f} tokens/s; model at the "
              f"roofline's backward rate {before:8,.0f} ({before / measured - 1:+.1%}); "
              f"mamba_backward_{arch} = {values[arch]}: {after:8,.0f} "
              f"({after / measured - 1:+.1%})")


if __name__ == "__main__":
    main()
