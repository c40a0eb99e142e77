"""Set the rate of a multi-head decode kernel's repeated KV reads from the figures that ran one.

Every validation figure whose engine decoded a grouped-query model with a multi-head kernel
(``decode_kv_reads = "per-query-head"``: TensorRT-LLM 0.9's Mistral 7B, Mixtral 8x7B and
Falcon 180B cells, the H200 launch blog's Llama-2-70B on 0.5) is predicted with
``Efficiency.multihead_decode_read_bytes_s`` scanned from 2.5 to 8 TB/s, every other
parameter as shipped. The script prints the mean |ln(model/published)| at each value, over
them all and by GPU, and the least. First-token figures are left out: a prompt's attention
does not use the kernel.

    python scripts/fit_multihead_decode.py
"""

from __future__ import annotations

import math
from collections import defaultdict

from gpuarch.catalog import load_catalog
from gpuarch.catalog.loader import Catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.units import Unit, from_si, to_si
from gpuarch.validation.inference import compare_point, load_inference_points, point_config
from gpuarch.validation.training import TrainingPoint, point_shape

RATES_TB_S = [2.5, 3.0, 3.5, 4.0, 4.25, 4.5, 4.75, 5.0, 5.5, 6.0, 7.0, 8.0]
PARAMETER = "multihead_decode_read_bytes_s"


def multihead_points() -> list[TrainingPoint]:
    """The points whose engine decoded a grouped-query model with a multi-head kernel."""
    points = []
    for point in load_inference_points():
        shape = point_shape(point)
        if point.get("excluded") or shape.n_kv_heads == shape.heads \
                or point_config(point, 8).decode_kv_reads != "per-query-head":
            continue
        points.append(point)
    return points


def scan(catalog: Catalog, rate_tb_s: float, points: list[TrainingPoint]
         ) -> dict[str, list[float]]:
    """|ln(model/published)| of the points' throughput figures at one rate, by GPU."""
    eff = DEFAULT_EFFICIENCY.with_overrides({PARAMETER: to_si(rate_tb_s, Unit.TB_S)})
    logs: dict[str, list[float]] = defaultdict(list)
    for point in points:
        for row in compare_point(catalog, point, eff):
            if row.metric != "ttft_s":
                logs[row.gpu].append(abs(math.log(row.predicted / row.published)))
    return logs


def mean(logs: dict[str, list[float]]) -> float:
    """Mean over every GPU's figures."""
    every = [v for values in logs.values() for v in values]
    return sum(every) / len(every)


def main() -> None:
    catalog = load_catalog()
    points = multihead_points()
    scores = []
    for rate in RATES_TB_S:
        logs = scan(catalog, rate, points)
        scores.append((mean(logs), rate))
        print(f"{rate:5.2f} TB/s: mean |ln| {scores[-1][0]:.3f} over "
              f"{sum(len(v) for v in logs.values())} figures; "
              + ", ".join(f"{gpu} {sum(v) / len(v):.3f} ({len(v)})"
                          for gpu, v in sorted(logs.items())))
    err, best = min(scores)
    print(f"least: {best} TB/s (mean |ln| {err:.3f}); shipped "
          f"{from_si(getattr(DEFAULT_EFFICIENCY, PARAMETER), Unit.TB_S):g} TB/s")


if __name__ == "__main__":
    main()
