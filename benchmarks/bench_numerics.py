"""Speed of the numerics lab: an emulated 4096 x 4096 x 4096 FP8 matmul (issue #5: seconds,
not minutes, on a 2-core machine), split into quantization, the FP32 product and the FP64
reference.

    python benchmarks/bench_numerics.py [--size 4096]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gpuarch.numerics import Distribution, NumberFormat, Recipe, make_operands, quantize
from gpuarch.numerics.matmul import emulate_matmul


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    n = args.size
    a, b = make_operands(n, n, n, Distribution.NORMAL, seed=0)
    for fmt, recipe in ((NumberFormat.FP8_E4M3, Recipe.CURRENT),
                        (NumberFormat.FP8_E4M3, Recipe.MX),
                        (NumberFormat.FP4_E2M1, Recipe.NVFP4)):
        start = time.perf_counter()
        quantize(a, fmt, recipe)
        quantize(b.T, fmt, recipe)
        q = time.perf_counter() - start
        start = time.perf_counter()
        emulate_matmul(a, b, fmt, recipe)
        total = time.perf_counter() - start
        print(f"{n}^3 {fmt.value:9} {recipe.value:8} quantize both {q:6.2f} s, "
              f"whole emulation (incl. FP32 product and FP64 reference) {total:6.2f} s")
    start = time.perf_counter()
    np.matmul(a, b)
    print(f"FP64 reference matmul alone: {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
