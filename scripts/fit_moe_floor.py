"""Set the serving model's fixed time per fused MoE block from measured MoE layers.

Each engine's MoE layers as NVIDIA's aiconfigurator measured them on H100, H200, B200 and
GB200 (``src/gpuarch/validation/data/moe-kernels-trtllm.csv``: TensorRT-LLM 1.3.0rc20's CUTLASS
backend, 1,365 layers; ``moe-kernels-trtllm-gen.csv``: the same release's TRTLLM backend,
GPT-OSS's MXFP4 experts on Blackwell, 140; ``moe-kernels-vllm.csv``: vLLM 0.24.0, 1,708;
``moe-kernels-sglang.csv``: SGLang 0.5.14, 1,428) are set beside
``estimate.inference.moe_module_time`` with that engine's kernels and the block's fixed time
scanned from 10 to 60 us: the parameter each engine's
layers on each architecture are charged (TensorRT-LLM: ``moe_block_floor_s`` before
Blackwell, ``moe_block_floor_blackwell_s`` on it; its TRTLLM backend:
``moe_block_floor_trtllm_gen_s``; vLLM and SGLang: ``moe_block_floor_s`` on both), every
other parameter as shipped. The script prints the mean |ln(model/measured)| at
each value, over all of those layers, over those below 2,048 tokens (where the floor weighs
most) and per format, and the least. The TRTLLM backend's is set on its W4A8 MXFP4 x MXFP8
layers of 16 tokens or fewer (``FITTED_ON``), where the fixed time is most of a layer: its
W4A16 layers run three to four times slower than the model at every size from 16 tokens up
(a kernel's rate, not a fixed time), and its layers at EP 4-16 with hundreds of tokens or
more run up to three times slower too, so over all of them the least sits at the scan's top.
No validation figure is used.

    python scripts/fit_moe_floor.py
"""

from __future__ import annotations

from gpuarch.catalog import load_catalog
from gpuarch.catalog.loader import Catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.units import Unit, from_si, to_si
from gpuarch.validation.measured import mean_abs_log_ratio
from gpuarch.validation.moe_kernels import (
    FILES,
    LARGE_TOKENS,
    KernelRow,
    compare,
    load_kernel_rows,
)

FLOORS_US = [10.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 22.0, 24.0, 26.6, 30.0, 33.0,
             36.0, 40.0, 42.0, 45.0, 48.0, 50.0, 55.0, 60.0]
ARCHITECTURES = {"hopper": ("h100_sxm", "h200_sxm"), "blackwell": ("b200_sxm", "gb200")}
PARAMETER = {("trtllm", "hopper"): "moe_block_floor_s",
             ("trtllm", "blackwell"): "moe_block_floor_blackwell_s",
             ("trtllm-gen", "blackwell"): "moe_block_floor_trtllm_gen_s",
             ("vllm", "hopper"): "moe_block_floor_s",
             ("vllm", "blackwell"): "moe_block_floor_s",
             ("sglang", "hopper"): "moe_block_floor_s",
             ("sglang", "blackwell"): "moe_block_floor_s"}
"""The parameter the model charges each engine's blocks on each architecture."""

FITTED_ON = {("trtllm-gen", "blackwell"): ("w4a8_mxfp4_mxfp8", 16)}
"""Where a parameter is set on some of its layers only: (format, most tokens)."""


def _compared(catalog: Catalog, name: str, floor_us: float, raw: list[dict[str, str]],
              kernels: str) -> list[KernelRow]:
    """``raw``'s layers beside the model with the floor ``name`` at ``floor_us``."""
    eff = DEFAULT_EFFICIENCY.with_overrides({name: to_si(floor_us, Unit.US)})
    return compare(catalog, eff, raw, kernels)


def main() -> None:
    catalog = load_catalog()
    for (kernels, arch), name in PARAMETER.items():
        raw = [r for r in load_kernel_rows(FILES[kernels]) if r["device"] in ARCHITECTURES[arch]]
        formats = sorted({r["moe_dtype"] for r in raw})
        print(f"{kernels} on {arch} ({name}, {len(raw)} layers):")
        scores = []
        for floor_us in FLOORS_US:
            rows = _compared(catalog, name, floor_us, raw, kernels)
            small = [r for r in rows if r.tokens < LARGE_TOKENS]
            per_format = {f: mean_abs_log_ratio([r for r in rows if r.moe_dtype == f])
                          for f in formats}
            scores.append((mean_abs_log_ratio(rows), floor_us))
            print(f"  {floor_us:5.1f} us: mean |ln| {scores[-1][0]:.3f}, below "
                  f"{LARGE_TOKENS:,} tokens {mean_abs_log_ratio(small):.3f}; "
                  + ", ".join(f"{f} {v:.3f}" for f, v in per_format.items()))
        err, best = min(scores)
        shipped = f"shipped {from_si(getattr(DEFAULT_EFFICIENCY, name), Unit.US):.1f} us"
        print(f"  least: {best} us (mean |ln| {err:.3f})"
              + ("" if (kernels, arch) in FITTED_ON else f"; {shipped}"))
        if (kernels, arch) in FITTED_ON:
            fmt, most = FITTED_ON[(kernels, arch)]
            some = [r for r in raw if r["moe_dtype"] == fmt and int(r["num_tokens"]) <= most]
            scores = [(mean_abs_log_ratio(_compared(catalog, name, f, some, kernels)), f)
                      for f in FLOORS_US]
            err, best = min(scores)
            print(f"  its {len(some)} {fmt} layers of {most} tokens or fewer: "
                  + ", ".join(f"{f:g} us {e:.3f}" for e, f in scores)
                  + f"; least {best:g} us (mean |ln| {err:.3f}), which sets it; {shipped}")


if __name__ == "__main__":
    main()
