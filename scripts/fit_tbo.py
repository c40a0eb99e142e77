"""Set the share of an expert exchange that two-batch overlap hides.

``Efficiency.tbo_exchange_hidden`` is the one parameter of the serving model's two-batch
overlap (``InferenceConfig.two_batch_overlap``): each expert layer runs its batch as two
micro-batches, and of the shorter of one micro-batch's all-to-all and the other's work in
the layer that share is hidden. It is fitted on the one published figure that measures the
overlap on its own terms: SGLang's decode of DeepSeek-V3 on 72 H100s with it on (LMSYS
blog, 2025-05-05; ``sglang-lsep-h100-deepseek-v3-decode-ep72-tbo`` in
``src/gpuarch/validation/data/inference.toml``). The script scans the share from 0 to 1,
prints the model's error on that figure and on the source's other two (the same decode
without the overlap, and a prefill with it), and the share where the fitted figure's error
changes sign, found by bisection. Every other parameter stays as shipped.

    python scripts/fit_tbo.py
"""

from __future__ import annotations

from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.validation.inference import compare_point, load_inference_points

SOURCE = "lmsys-sglang-large-scale-ep"
FITTED = "sglang-lsep-h100-deepseek-v3-decode-ep72-tbo"
PARAMETER = "tbo_exchange_hidden"


def main() -> None:
    catalog = load_catalog()
    points = [p for p in load_inference_points() if p.source == SOURCE]
    fitted = next(p for p in points if p.id == FITTED)

    def error(point_id: str, share: float) -> float:
        eff = DEFAULT_EFFICIENCY.with_overrides({PARAMETER: share})
        point = next(p for p in points if p.id == point_id)
        return compare_point(catalog, point, eff)[0].error

    for step in range(11):
        share = step / 10
        print(f"{PARAMETER} {share:.1f}: " + ", ".join(
            f"{p.id.removeprefix('sglang-lsep-h100-deepseek-v3-')} {error(p.id, share):+.1%}"
            for p in points))
    lo, hi = 0.0, 1.0
    if error(fitted.id, lo) * error(fitted.id, hi) > 0:
        print("the fitted figure's error does not change sign between 0 and 1")
        return
    for _ in range(30):
        mid = (lo + hi) / 2
        if (error(fitted.id, mid) > 0) == (error(fitted.id, hi) > 0):
            hi = mid
        else:
            lo = mid
    share = (lo + hi) / 2
    print(f"fitted: {PARAMETER} = {share:.3f}; shipped "
          f"{getattr(DEFAULT_EFFICIENCY, PARAMETER):.3f}")


if __name__ == "__main__":
    main()
