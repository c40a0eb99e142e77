"""Set the serving model's fixed time per fused MoE block from measured MoE layers.

TensorRT-LLM's MoE layers as NVIDIA's aiconfigurator measured them
(``src/gpuarch/validation/data/moe-kernels-trtllm.csv``: 1,477 layers on H100, H200, B200
and GB200) are set beside ``estimate.inference.moe_module_time`` with the block's fixed time
scanned from 20 to 60 us, Hopper's (``moe_block_floor_s``) on the Hopper layers and
Blackwell's (``moe_block_floor_blackwell_s``) on the Blackwell ones, every other parameter as
shipped. The script prints the mean |ln(model/measured)| at each value, over all of an
architecture's layers, over those below 2,048 tokens (where the floor weighs most) and per
format, and the least. No validation figure is used.

    python scripts/fit_moe_floor.py
"""

from __future__ import annotations

from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.validation.measured import mean_abs_log_ratio
from gpuarch.validation.moe_kernels import LARGE_TOKENS, compare, load_kernel_rows

FLOORS_US = [20.0, 24.0, 26.6, 30.0, 33.0, 36.0, 40.0, 42.0, 45.0, 48.0, 50.0, 55.0, 60.0]
ARCHITECTURES = {"hopper": ("moe_block_floor_s", ("h100_sxm", "h200_sxm")),
                 "blackwell": ("moe_block_floor_blackwell_s", ("b200_sxm", "gb200"))}


def main() -> None:
    catalog = load_catalog()
    for arch, (name, devices) in ARCHITECTURES.items():
        raw = [r for r in load_kernel_rows() if r["device"] in devices]
        formats = sorted({r["moe_dtype"] for r in raw})
        print(f"{arch} ({name}, {len(raw)} layers):")
        scores = []
        for floor_us in FLOORS_US:
            eff = DEFAULT_EFFICIENCY.with_overrides({name: floor_us * 1e-6})
            rows = compare(catalog, eff, raw)
            small = [r for r in rows if r.tokens < LARGE_TOKENS]
            per_format = {f: mean_abs_log_ratio([r for r in rows if r.moe_dtype == f])
                          for f in formats}
            scores.append((mean_abs_log_ratio(rows), floor_us))
            print(f"  {floor_us:5.1f} us: mean |ln| {scores[-1][0]:.3f}, below "
                  f"{LARGE_TOKENS:,} tokens {mean_abs_log_ratio(small):.3f}; "
                  + ", ".join(f"{f} {v:.3f}" for f, v in per_format.items()))
        err, best = min(scores)
        print(f"  least: {best} us (mean |ln| {err:.3f}); shipped "
              f"{getattr(DEFAULT_EFFICIENCY, name) * 1e6:.1f} us")


if __name__ == "__main__":
    main()
