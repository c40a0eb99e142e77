"""Set the Gated DeltaNet forward scan's rates from flash-linear-attention's measured kernels.

The FLA/Triton times FlashInfer's GDN pull requests print (``src/gpuarch/validation/data/
gated-delta-prefill-fla.csv``: Qwen3.5's head shapes on H100 and B300) are set beside the
roofline's forward scan (``validation.gated_delta_kernels``). Grids, in turn, minimise the
mean |ln(model/measured)|: ``gated_delta_scan`` on H100's wide rows (64 value heads),
``gated_delta_blackwell`` on B300's wide rows, ``gated_delta_chunk_step_s`` on the narrow
rows (one or two sequences of 8 heads) of both; then the backward's two rates on the FLA
backward times QwenLM FlashQLA's tables print (``gated-delta-backward-fla.csv``):
``gated_delta_backward`` on H200's wide rows, ``gated_delta_backward_blackwell`` on GB200's.
The script prints the fitted values and each group's error at them; no validation figure is
used.

    python scripts/fit_gated_delta.py
"""

from __future__ import annotations

import statistics

from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.validation.gated_delta_kernels import (
    compare_gated_delta,
    compare_gated_delta_backward,
    fit_gated_delta,
    narrow_rows,
    wide_rows,
)
from gpuarch.validation.measured import mean_abs_log_ratio


def main() -> None:
    catalog = load_catalog()
    fitted = fit_gated_delta(catalog)
    for name, value in fitted.items():
        print(f"{name} = {value:g} (shipped {getattr(DEFAULT_EFFICIENCY, name):g})")
    at = DEFAULT_EFFICIENCY.with_overrides(fitted)
    rows = compare_gated_delta(catalog, at)
    back = compare_gated_delta_backward(catalog, at)
    for label, group in (("H100 wide", wide_rows(rows, "h100-sxm-80gb")),
                         ("B300 wide", wide_rows(rows, "b300")),
                         ("narrow", narrow_rows(rows)),
                         ("backward H200 wide", wide_rows(back, "h200-sxm-141gb")),
                         ("backward GB200 wide", wide_rows(back, "gb200")),
                         ("backward narrow", narrow_rows(back))):
        ratios = [r.ratio for r in group]
        print(f"{label}: {len(group)} rows, mean |ln| {mean_abs_log_ratio(group):.3f}, "
              f"model/measured median {statistics.median(ratios):.3f} "
              f"({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
