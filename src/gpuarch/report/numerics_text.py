"""Terminal renderings of the numerics lab's results."""

from __future__ import annotations

from typing import Any

from gpuarch.report.text import fmt, table

__all__ = ["render_formats", "render_matmul", "render_sim", "render_sparsity"]


def _g(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}"


def render_formats(rows: list[dict[str, Any]]) -> str:
    out = [[r["format"], str(r["bits"]),
            "-" if r["exponent_bits"] is None else str(r["exponent_bits"]),
            "-" if r["mantissa_bits"] is None else str(r["mantissa_bits"]),
            _g(r["max"]), _g(r["smallest_normal"]), _g(r["smallest_subnormal"]),
            _g(r["epsilon"]), r["overflow"], ", ".join(r["tensor_core_architectures"]) or "-"]
           for r in rows]
    return table(["Format", "Bits", "E", "M", "Max", "Min normal", "Min subnormal", "Epsilon",
                  "Overflow", "Tensor Cores (catalog)"], out,
                 right=[False, True, True, True, True, True, True, True, False, False]) + \
        "\n\nLimits computed from each format's definition and checked against ml_dtypes."


def render_matmul(r: dict[str, Any]) -> str:
    rows = [[x["format"], x["recipe"], _g(x["relative_error"]), fmt(x["sqnr_db"]),
             _g(x["max_abs_error"]), str(x["overflow"]), str(x["underflow"])]
            for x in r["results"]]
    lines = [f"C = A[{r['m']}x{r['k']}] @ B[{r['k']}x{r['n']}], {r['distribution']} "
             f"operands, seed {r['seed']}; reference: {r['reference']}", "",
             table(["Format", "Recipe", "Rel. error", "SQNR dB", "Max abs error", "Overflow",
                    "Underflow"], rows, right=[False, False, True, True, True, True, True])]
    if "gpu" in r:
        value = r["predicted_speedup_over_bf16"]
        lines += ["", f"{r['gpu']}: predicted speed-up over BF16 "
                      + (f"{value:.2f}x" if value else "none") + f" ({r['speedup_basis']})"]
    return "\n".join(lines)


def render_sim(r: dict[str, Any]) -> str:
    rows = [[str(s["step"]), _g(s["amax"]), _g(s["delayed_scale"]),
             str(s["delayed_overflow"]), fmt(s["delayed_sqnr_db"]),
             fmt(s["delayed_wasted_bits"]), str(s["current_overflow"]),
             fmt(s["current_sqnr_db"])] for s in r["steps"]]
    return "\n".join([
        f"{r['format']}: delayed scaling (history {r['history']}, {r['algo']}, margin "
        f"{r['margin']}) vs current scaling, {r['pattern']} tensor", "",
        table(["Step", "Amax", "Delayed scale", "Delayed overflow", "Delayed SQNR dB",
               "Unused bits", "Current overflow", "Current SQNR dB"], rows,
              right=[True] * 8), "",
        f"delayed: {r['delayed_overflow_total']} overflowing elements in "
        f"{r['steps_with_delayed_overflow']} steps; current: {r['current_overflow_total']}"])


def render_sparsity(r: dict[str, Any]) -> str:
    lines = [f"2:4 magnitude pruning of B[{r['k']}x{r['n']}] along K (seed {r['seed']}): mask "
             f"{'valid' if r['mask_valid'] else 'INVALID'}, {r['kept_fraction']:.0%} kept, "
             f"{r['weight_energy_kept']:.1%} of the weights' energy kept",
             f"matmul error vs dense: relative {_g(r['relative_error'])}, SQNR "
             f"{fmt(r['sqnr_db'])} dB ({r['note']})"]
    if "gpu" in r:
        value = r["predicted_speedup_upper_bound"]
        lines.append(f"{r['gpu']}, {r['format']}: speed-up at most "
                     + (f"{value:.2f}x" if value else "none") + f" ({r['speedup_basis']})")
    return "\n".join(lines)
