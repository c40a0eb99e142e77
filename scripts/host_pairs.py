"""Read how much faster an x86 host runs the Python executor loop than a Grace CPU, from
published pairs of the same serving runs.

``Efficiency.host_time_per_request_expert_layer_s`` was measured on GB200, a Grace host.
TensorRT-LLM's performance overviews publish the same runs (one source, model, lengths and
GPU count) on a B200 or B300, whose DGX/HGX hosts are x86, and on a GB200 or GB300. Where the
model's decode step waits on the host on both sides (with the Grace cost charged to both,
``host_time_x86_speedup`` = 1, so the choice of pairs does not depend on the value being
read), throughput is about one over the host's time per request, and the ratio of the two
published throughputs is the ratio of the two hosts' speeds (the GPUs' own differences
confound it a little: the Grace-side GPUs are the faster ones). The script prints every pair
and their median, the value ``host_time_x86_speedup`` carries. No model error is minimized.

    python scripts/host_pairs.py
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.validation.inference import compare_point, load_inference_points

PAIRS = {"b200": "gb200", "b300": "gb300"}
"""Each x86-hosted GPU and the Grace superchip with the same GPU."""


def _per_gpu(row: Any) -> float:
    return row.published / row.gpus if row.metric == "output_tokens_per_s" else row.published


def host_pairs() -> list[tuple[str, float]]:
    """(label, x86 over Grace published throughput per GPU) for every pair of the same run
    whose modelled decode step is host-bound on both sides."""
    catalog = load_catalog()
    grace_cost = dataclasses.replace(DEFAULT_EFFICIENCY, host_time_x86_speedup=1.0)
    rows: dict[tuple[Any, ...], Any] = {}
    for point in load_inference_points():
        if point.get("gpu") not in (*PAIRS, *PAIRS.values()) or point.get("excluded"):
            continue
        for row in compare_point(catalog, point, grace_cost):
            if row.metric.startswith("output_tokens_per_s") \
                    and row.explain["bottleneck"].get("decode") == "host":
                rows[(row.source, row.model, row.lengths, row.metric, row.gpus, row.gpu)] = row
    pairs = []
    for (source, model, lengths, metric, gpus, gpu), row in sorted(rows.items()):
        other = rows.get((source, model, lengths, metric, gpus, PAIRS.get(gpu)))
        if other is not None:
            pairs.append((f"{source} {model} {lengths} {gpus} x {gpu} / {other.gpu}",
                          _per_gpu(row) / _per_gpu(other)))
    return pairs


def main() -> None:
    pairs = host_pairs()
    for label, ratio in pairs:
        print(f"{ratio:6.3f}  {label}")
    ratios = [r for _, r in pairs]
    print(f"{len(ratios)} pairs: median {statistics.median(ratios):.3f}, "
          f"range {min(ratios):.3f}-{max(ratios):.3f}; shipped "
          f"host_time_x86_speedup = {DEFAULT_EFFICIENCY.host_time_x86_speedup}")


if __name__ == "__main__":
    main()
