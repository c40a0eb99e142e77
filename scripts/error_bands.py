"""Write the model's error bands (src/gpuarch/validation/data/error_bands.json).

Runs the whole training and serving validation with the shipped parameters, groups the
signed throughput errors by regime (task / model kind / GPU architecture, then broader) and
writes each regime's figure count, median and 10th-90th percentile error. Run it after any
change to the model or the validation data; tests/test_error_bands.py fails until then.

    python scripts/error_bands.py          # write the file and print the table
    python scripts/error_bands.py --check  # print only; exit 1 if the file is stale
"""

from __future__ import annotations

import argparse
import sys

from gpuarch.catalog import load_catalog
from gpuarch.validation.bands import (
    BANDS_FILE,
    MIN_FIGURES,
    compute_bands,
    load_bands,
    write_bands,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with the file instead of writing it")
    args = parser.parse_args()
    bands = compute_bands(load_catalog())
    print(f"{'regime':34} {'figures':>7} {'oos':>5} {'p10':>7} {'median':>7} {'p90':>7}")
    for key, b in bands.items():
        mark = "" if b.figures >= MIN_FIGURES else "  (too few: the broader band is used)"
        print(f"{key:34} {b.figures:7d} {b.out_of_sample:5d} {b.p10_error:+7.1%} "
              f"{b.median_error:+7.1%} {b.p90_error:+7.1%}{mark}")
    if args.check:
        stale = load_bands(BANDS_FILE) != bands
        print(f"{BANDS_FILE}: {'stale' if stale else 'up to date'}")
        return 1 if stale else 0
    write_bands(bands)
    print(f"wrote {BANDS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
