"""Set the serving model's per-format MoE rates from TensorRT-LLM's measured MoE layers.

Three formats of a fine-grained model's routed experts run at their own multiple of
``moe_gemm`` x ``moe_gemm_fine``: NVFP4 (``moe_gemm_nvfp4``), MXFP4 weights against FP8
activations (``moe_gemm_mxfp4_fp8``, TensorRT-LLM's W4A8 MXFP4 x MXFP8 MoE on Blackwell) and
FP8 with 128 x 128 weight blocks (``moe_gemm_fp8_block``; TensorRT-LLM's table times those on
Hopper only). Each is set where the mean |ln(model/measured)| over TensorRT-LLM's measured
layers of that format with ``LARGE_TOKENS`` tokens or more is least (NVIDIA aiconfigurator's
tables, ``src/gpuarch/validation/data/moe-kernels-trtllm.csv``, and for MXFP4 x MXFP8, which
TensorRT-LLM runs on its TRTLLM backend, ``moe-kernels-trtllm-gen.csv``; at fewer tokens the
experts' weight reads and the block floor set the time, not the GEMMs' rate), every other parameter
as shipped. vLLM's and SGLang's measured layers of the same format, where they have any, are
printed beside them as a check, not used. No validation figure is used. Since the MXFP4 x MXFP8
layers are compared with their own backend's 17 us floor (2026-12-07) the rule gives 1.46 for
``moe_gemm_mxfp4_fp8``, which stays at 2.08: see its docstring in perf/efficiency.py.

    python scripts/fit_moe_formats.py
"""

from __future__ import annotations

import statistics

from gpuarch.catalog import load_catalog
from gpuarch.catalog.loader import Catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.validation.measured import mean_abs_log_ratio
from gpuarch.validation.moe_kernels import FILES, LARGE_TOKENS, compare, load_kernel_rows

PARAMETERS = {"moe_gemm_nvfp4": "nvfp4", "moe_gemm_mxfp4_fp8": "w4a8_mxfp4_mxfp8",
              "moe_gemm_fp8_block": "fp8_block"}
"""Each per-format rate and the measured format it is set from."""

VALUES = [round(0.5 + 0.05 * i, 2) for i in range(41)]  # 0.50 ... 2.50


def _score(catalog: Catalog, name: str, raw: list[dict[str, str]], kernels: str,
           value: float) -> tuple[float, float, float]:
    """(mean |ln(model/measured)|, the value, median model/measured) over ``raw`` with the
    parameter ``name`` at ``value``."""
    eff = DEFAULT_EFFICIENCY.with_overrides({name: value})
    rows = compare(catalog, eff, raw, kernels)
    median = statistics.median(r.model_s / r.measured_s for r in rows)
    return mean_abs_log_ratio(rows), value, median


def main() -> None:
    catalog = load_catalog()
    for name, fmt in PARAMETERS.items():
        print(f"{name} (format {fmt}; layers of {LARGE_TOKENS:,} tokens and more):")
        best: tuple[float, float] | None = None
        for kernels in ("trtllm", "trtllm-gen", "vllm", "sglang"):
            raw = [r for r in load_kernel_rows(FILES[kernels]) if r["moe_dtype"] == fmt
                   and int(r["num_tokens"]) >= LARGE_TOKENS]
            if not raw:
                print(f"  {kernels}: no layers of this format")
                continue
            scores = [_score(catalog, name, raw, kernels, v) for v in VALUES]
            # then in steps of 0.01 around the coarse grid's least
            coarse = min(scores)[1]
            fine = [_score(catalog, name, raw, kernels, round(coarse + 0.01 * i, 2))
                    for i in range(-4, 5) if i]
            err, value, median = min(scores + fine)
            role = "sets it" if kernels.startswith("trtllm") else "check"
            print(f"  {kernels} ({len(raw)} layers, {role}): least at {value:.2f} "
                  f"(mean |ln| {err:.3f}, median model/measured {median:.2f}); "
                  + ", ".join(f"{v:.2f}: {e:.3f}" for e, v, _ in scores if v in
                              (0.7, 0.8, 1.0, 1.5, 2.0, 2.5)))
            if kernels.startswith("trtllm"):
                best = (value, err)
        if best is not None:
            print(f"  set: {best[0]:.2f}; shipped {getattr(DEFAULT_EFFICIENCY, name)}")


if __name__ == "__main__":
    main()
