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
    compute_bands,
    load_bands,
    render_bands,
    write_bands,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with the file instead of writing it")
    args = parser.parse_args()
    bands = compute_bands(load_catalog())
    print(render_bands(bands))
    if args.check:
        stale = load_bands(BANDS_FILE) != bands
        print(f"{BANDS_FILE}: {'stale' if stale else 'up to date'}")
        return 1 if stale else 0
    write_bands(bands)
    print(f"wrote {BANDS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
