"""TensorRT-LLM 0.9.0's performance tables, cell by cell, with Mixtral's experts in a chosen format.

The validation holds every cell of those tables (source trtllm-perf-v0.9.0: GPT-J 6B,
Mistral 7B, Mixtral 8x7B, LLaMA 7B and 70B, Falcon 180B on H200, H100, L40S and A100; 144
figures, GPT-J and Falcon given by architecture), Mixtral's experts entered in 16 bits
(release 0.9.0 had no FP8 Mixtral, see the points' notes). This prints them all, the five
excluded ones too, with ``--mixtral-experts`` taking the experts on the FP8 tables in 16
bits, FP8 (W8A8) or FP8 weights against 16-bit activations (W8A16), and beside each the
weight-read bound: the most output tokens/s per GPU (or the least first-token time) that
reading the GPU's share of the weights once per step at the datasheet bandwidth allows,
every expert touched. Then the median error by table, model and GPU family.

    python scripts/trtllm09_tables.py [--mixtral-experts fp16|fp8|w8a16]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics

from gpuarch.catalog import load_catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.units import Unit, from_si
from gpuarch.validation.inference import (
    compare_point,
    load_inference_points,
    point_config,
    weight_read_s,
)

EXPERTS = {"fp16": ("fp16", "fp16"), "fp8": ("fp8", "fp8"), "w8a16": ("fp8", "fp16")}
HOPPER = ("h100-sxm5-80gb", "h200-sxm-141gb")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mixtral-experts", choices=sorted(EXPERTS), default="fp16")
    args = parser.parse_args()
    catalog = load_catalog()
    errors: dict[tuple[str, str, str], list[float]] = {}
    print(f"{'point':48} {'published':>9} {'predicted':>9} {'error':>7} {'bound':>9}")
    for point in load_inference_points():
        if point.source != "trtllm-perf-v0.9.0":
            continue
        excluded = bool(point.get("excluded"))
        raw = {k: v for k, v in point.raw.items() if k != "excluded"}
        if raw.get("expert_weight_precision"):  # Mixtral on an FP8 table
            raw["expert_weight_precision"], raw["expert_activation_precision"] = \
                EXPERTS[args.mixtral_experts]
        point = dataclasses.replace(point, raw=raw)
        (row,) = compare_point(catalog, point, DEFAULT_EFFICIENCY)
        cfg = point_config(point, 8, catalog.product(point.get("gpu")))
        batch = int(cfg.batch or 1)
        read_s = weight_read_s(catalog, point)
        ttft = row.metric == "ttft_s"
        unit = Unit.MS if ttft else Unit.NONE  # first tokens in ms, throughputs as they are
        bound = read_s if ttft else batch / read_s / cfg.gpus
        print(f"{point.id:48} {from_si(row.published, unit):9.1f} "
              f"{from_si(row.predicted, unit):9.1f} {row.error:+7.1%} "
              f"{from_si(bound, unit):9.1f}{'  excluded' if excluded else ''}")
        family = "hopper" if point.get("gpu") in HOPPER else "ampere/ada"
        errors.setdefault(("ttft" if ttft else "throughput", row.model, family),
                          []).append(row.error)
    print("\nmedian error by table, model and GPU family (the excluded cells too):")
    for (table, model, family), errs in sorted(errors.items()):
        print(f"  {table:10} {model:13} {family:10} {statistics.median(errs):+7.1%} "
              f"({min(errs):+.0%} to {max(errs):+.0%}, {len(errs)} cells)")


if __name__ == "__main__":
    main()
